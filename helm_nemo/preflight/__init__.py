"""`helm nemo preflight`: can this cluster run these releases? Read-only checks against the cluster helm
would use, each with a stable id, a verdict (ok / warn / fail / skipped) and a hint.

One module per family: `api` (reachable, version, served kinds), `release` (namespace, release name,
objects already there), `queue` (Kueue LocalQueue, quota, topology), `capacity` (nodes, device resources,
free GPUs), `profile` (what the accelerator profile needs: networks, DRA DeviceClasses, CSI drivers),
`refs` (referenced objects), `access` (RBAC). `facts` reads the cluster once; `report` prints.
What a profile needs is data (`preflight:` in values/accelerators/*.yaml), never a name in this code.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from helm_nemo.preflight import access, api, capacity, profile, queue, refs, release
from helm_nemo.preflight.model import FAIL, OK, ORDER, SKIPPED, WARN, Result

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only
    from collections.abc import Callable
    from typing import Any

    from helm_nemo.kube.client import KubeClient
    from helm_nemo.preflight.facts import Facts
    from helm_nemo.preflight.model import Release

    Check = Callable[[Facts, list[Release], dict[str, Any]], list[Result]]

# (function, the ids it reports, what it checks): the order of the report; docs/preflight.md lists them.
CHECKS = [
    (api.reachable, ["api.reachable"], "the API server answers with the kubeconfig's credentials"),
    (
        api.version,
        ["api.version"],
        "its version satisfies each chart's kubeVersion and the profile's minKubernetesVersion",
    ),
    (api.served, ["api.served"], "every apiVersion/kind the releases render is served (CRDs installed)"),
    (release.namespace, ["namespace.exists"], "the namespace exists (or --create-namespace)"),
    (
        release.release_name,
        ["release.name"],
        "the release name is free (install) or installed from this chart (upgrade)",
    ),
    (release.objects_free, ["objects.free"], "no rendered object exists already, owned by no or another release"),
    (
        queue.queue,
        ["queue.localqueue", "queue.quota", "queue.topology"],
        "the LocalQueue exists, its ClusterQueue is active and covers and holds every resource the pods request, "
        "and the topology level asked for exists",
    ),
    (
        capacity.capacity,
        ["capacity.nodes", "node.resources", "capacity.gpus"],
        "nodes match the pods (selector, affinity, taints), offer every device resource they request, and hold the job",
    ),
    (profile.networks, ["profile.networks"], "the multi-network objects the pods' interfaces (or the profile) name"),
    (profile.device_classes, ["profile.deviceclasses"], "the DRA DeviceClasses the ResourceClaimTemplates name"),
    (profile.csi_drivers, ["storage.csi"], "a CSIDriver for each CSI driver the volumes use"),
    (refs.references, list(refs.KINDS), "referenced PVCs (Bound), Secrets, ConfigMaps, ServiceAccounts, PriorityClass"),
    (
        access.rbac,
        ["access.rbac"],
        "SelfSubjectAccessReview: you may create/patch every kind and helm's release record",
    ),
]
IDS = [check_id for _, ids, _ in CHECKS for check_id in ids]

__all__ = ["CHECKS", "IDS", "Result", "run", "exit_code", "OK", "WARN", "FAIL", "SKIPPED", "ORDER"]


def start(client: KubeClient, *, big_lists: bool = True) -> Facts:
    """The cluster's facts, with the reads every run needs started in threads now (the version, and with
    `big_lists` the node and pod lists, the slow ones on a big cluster): the caller renders meanwhile."""
    from helm_nemo.preflight.facts import Facts

    facts = Facts(client)
    facts.prefetch("version", client.version)
    if big_lists:
        facts.prefetch("nodes", facts.read_nodes)
        facts.prefetch("pods", facts.read_pods)
    return facts


def run(
    releases: list[Release], client: KubeClient, options: dict[str, Any] | None = None, facts: Facts | None = None
) -> list[Result]:
    """Every check, in CHECKS order. `options`: mode (install / upgrade / preflight), install_missing,
    create_namespace; `facts`: from start() (reads already under way)."""
    from helm_nemo.kube.errors import KubeError
    from helm_nemo.preflight.facts import Unavailable

    options = options or {}
    if facts is None:
        facts = start(client, big_lists=any(w.requests() for r in releases for w in r.workloads()))
    try:
        first = api.reachable(facts, releases, options)
    except KubeError as err:
        reason = err.format().removeprefix("helm nemo: ")
        return [Result("api.reachable", FAIL, reason.split("\n")[0], err.hint)] + [
            Result(check_id, SKIPPED, "the API server did not answer") for check_id in IDS[1:]
        ]

    def one(entry: tuple[Check, list[str], str]) -> list[Result]:
        function, ids, _ = entry
        try:
            return function(facts, releases, options)
        except Unavailable as err:
            return [
                Result(
                    ids[0],
                    SKIPPED,
                    f"cannot read what it needs: {err}",
                    "the credentials may lack list/get on it (kubectl auth can-i)",
                )
            ]
        except KubeError as err:
            return [Result(ids[0], SKIPPED, err.format().removeprefix("helm nemo: ").split("\n")[0], err.hint)]

    with ThreadPoolExecutor(max_workers=6) as pool:
        found = list(pool.map(one, CHECKS[1:]))
    return first + [result for results in found for result in results]


def exit_code(results: list[Result]) -> int:
    """0: all ok or warn (or skipped), 1: a check failed."""
    return 1 if any(r.verdict == FAIL for r in results) else 0
