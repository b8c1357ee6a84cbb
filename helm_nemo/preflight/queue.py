"""queue.*: the Kueue LocalQueue the workload names, its ClusterQueue's quota (preflight/quota.py), and
topology-aware scheduling (TAS) when the pods ask for a topology level."""

from __future__ import annotations

from helm_nemo.preflight.model import FAIL, OK, SKIPPED, Result
from helm_nemo.preflight.quota import quota

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only
    from collections.abc import Iterable, Iterator
    from typing import Any

    from helm_nemo.preflight.facts import Facts
    from helm_nemo.preflight.model import Release, Workload

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
TOPOLOGY_ANNOTATIONS = ("kueue.x-k8s.io/podset-required-topology", "kueue.x-k8s.io/podset-preferred-topology")
KUEUE_GROUP = "kueue.x-k8s.io"


def _queued(releases: Iterable[Release]) -> Iterator[tuple[Release, Workload, str]]:
    """(release, workload, queue name) of every workload that names a LocalQueue."""
    for release in releases:
        for workload in release.workloads():
            name: str | None = workload.labels.get(QUEUE_LABEL) or (workload.meta.get("labels") or {}).get(QUEUE_LABEL)
            if name:
                yield release, workload, name


def _kueue_version(facts: Facts) -> str | None:
    """The served Kueue API version (v1beta1; v1beta2 on newer Kueue), or None when Kueue is not installed."""
    for version in ("v1beta2", "v1beta1"):
        if facts.served(f"{KUEUE_GROUP}/{version}", "LocalQueue") is not None:
            return f"{KUEUE_GROUP}/{version}"
    return None


def queue(facts: Facts, releases: list[Release], options: dict[str, Any]) -> list[Result]:
    """queue.localqueue, queue.quota and queue.topology for every queued workload."""
    queued = list(_queued(releases))
    if not queued:
        return [
            Result(
                "queue.localqueue",
                SKIPPED,
                "no workload names a Kueue LocalQueue",
                "set `queue:` in the values to run through Kueue",
            )
        ]
    api = _kueue_version(facts)
    if api is None:
        return [
            Result(
                "queue.localqueue",
                FAIL,
                f"Kueue is not installed (no {KUEUE_GROUP} LocalQueue API), but "
                f"{queued[0][1].kind} {queued[0][1].name} names queue {queued[0][2]!r}",
                "install Kueue (kubectl apply --server-side -f https://github.com/kubernetes-sigs/kueue/"
                "releases/download/v0.13.4/manifests.yaml) and create the queues, or unset `queue:`",
                queued[0][0].name,
            )
        ]
    results = []
    for release, workload, name in queued:
        local = facts.get(api, "LocalQueue", name, workload.namespace)
        if local is None:
            others = [q["metadata"]["name"] for q in facts.list(api, "LocalQueue", workload.namespace) or []]
            hint = (
                f"LocalQueues in {workload.namespace}: {', '.join(sorted(others))}"
                if others
                else f"no LocalQueue in {workload.namespace}: create one pointing at a ClusterQueue "
                "(kubectl get clusterqueues)"
            )
            results.append(
                Result(
                    "queue.localqueue",
                    FAIL,
                    f"LocalQueue {workload.namespace}/{name} does not exist",
                    hint + "; or set `queue:` to one of them",
                    release.name,
                )
            )
            continue
        cq_name = (local.get("spec") or {}).get("clusterQueue", "")
        cluster_queue = facts.get(api, "ClusterQueue", cq_name) if cq_name else None
        if cluster_queue is None:
            results.append(
                Result(
                    "queue.localqueue",
                    FAIL,
                    f"LocalQueue {workload.namespace}/{name} points at ClusterQueue {cq_name!r}, which does not exist",
                    "create the ClusterQueue, or point the LocalQueue's spec.clusterQueue at one",
                    release.name,
                )
            )
            continue
        inactive = [
            c
            for c in (cluster_queue.get("status") or {}).get("conditions") or []
            if c.get("type") == "Active" and c.get("status") == "False"
        ]
        if inactive:
            results.append(
                Result(
                    "queue.localqueue",
                    FAIL,
                    f"ClusterQueue {cq_name} is not active: "
                    f"{inactive[0].get('message') or inactive[0].get('reason', '')}",
                    "kubectl describe clusterqueue " + cq_name + " (a missing ResourceFlavor or "
                    "AdmissionCheck makes it inactive)",
                    release.name,
                )
            )
            continue
        results.append(
            Result(
                "queue.localqueue",
                OK,
                f"LocalQueue {workload.namespace}/{name} -> ClusterQueue {cq_name}",
                release=release.name,
            )
        )
        results.append(quota(release, workload, cq_name, cluster_queue))
        results.extend(_topology(facts, api, release, workload, cluster_queue))
    return results


def _topology(
    facts: Facts, api: str, release: Release, workload: Workload, cluster_queue: dict[str, Any]
) -> list[Result]:
    annotations = workload.meta.get("annotations") or {}
    asked = [(key, annotations[key]) for key in TOPOLOGY_ANNOTATIONS if annotations.get(key)]
    if not asked:
        return []
    key, level = asked[0]
    # Kueue (v0.19.2 pkg/scheduler/flavorassigner/tas_flavorassigner.go, checkPodSetAndFlavorMatchForTAS) admits a
    # pod set asking for a topology, preferred as much as required, only on a flavor with a Topology holding that
    # level: otherwise `Flavor "F" does not support TopologyAwareScheduling` / `does not contain the requested
    # level`, and the Workload stays pending. A preference is not ignored: both fail here.
    verdict = FAIL
    flavor_names = [
        f.get("name")
        for g in (cluster_queue.get("spec") or {}).get("resourceGroups") or []
        for f in g.get("flavors") or []
    ]
    topologies = []
    for flavor_name in flavor_names:
        flavor = facts.get(api, "ResourceFlavor", flavor_name) if flavor_name else None
        topology_name = ((flavor or {}).get("spec") or {}).get("topologyName")
        if topology_name:
            topologies.append(topology_name)
    if not topologies:
        return [
            Result(
                "queue.topology",
                verdict,
                f"the pods ask for topology level {level} ({key.rsplit('/', 1)[1]}) "
                f"but no ResourceFlavor of ClusterQueue {cluster_queue['metadata']['name']} names a Topology",
                "set spec.topologyName on the GPU ResourceFlavor and create the Topology (Kueue TAS); Kueue admits "
                'no pod set asking for a topology on a flavor without one (Flavor "…" does not support '
                "TopologyAwareScheduling)",
                release.name,
            )
        ]
    levels = []
    for name in topologies:
        topology = None
        for version in ("v1beta2", "v1beta1", "v1alpha1"):
            if facts.served(f"{KUEUE_GROUP}/{version}", "Topology") is not None:
                topology = facts.get(f"{KUEUE_GROUP}/{version}", "Topology", name)
                break
        levels += [lv.get("nodeLabel") for lv in ((topology or {}).get("spec") or {}).get("levels") or []]
    if level not in levels:
        return [
            Result(
                "queue.topology",
                verdict,
                f"topology level {level} is not a level of Topology "
                f"{', '.join(topologies)} (levels: {', '.join(levels) or 'none'})",
                'add the level to the Topology, or ask for one of its levels (Kueue: Flavor "…" does not contain '
                "the requested level)",
                release.name,
            )
        ]
    return [Result("queue.topology", OK, f"Topology {', '.join(topologies)} has level {level}", release=release.name)]
