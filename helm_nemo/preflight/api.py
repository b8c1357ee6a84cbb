"""api.*: the server answers, its version fits the charts and profiles, and it serves every kind the
releases create."""

from __future__ import annotations

import re

from helm_nemo.preflight.model import FAIL, OK, Result, first

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only
    from typing import Any

    from helm_nemo.preflight.facts import Facts
    from helm_nemo.preflight.model import Release

# What to install when a group is not served: cluster add-ons, the same on every accelerator (a profile's
# preflight.hints, keyed by the group, wins).
API_HINTS = {
    "jobset.x-k8s.io": "install JobSet: kubectl apply --server-side -f "
    "https://github.com/kubernetes-sigs/jobset/releases/download/v0.8.1/manifests.yaml",
    "kueue.x-k8s.io": "install Kueue: kubectl apply --server-side -f "
    "https://github.com/kubernetes-sigs/kueue/releases/download/v0.13.4/manifests.yaml",
    "resource.nvidia.com": "install NVIDIA's DRA driver for GPUs (ComputeDomain): helm install nvidia-dra-driver-gpu "
    "nvidia/nvidia-dra-driver-gpu -n nvidia-dra-driver-gpu --create-namespace",
    "resource.k8s.io": "resource.k8s.io/v1 (DRA) is served from Kubernetes 1.34: upgrade the control plane",
    "kubeflow.org": "install the Kubeflow training operator (PyTorchJob)",
    "networking.gke.io": "enable GKE multi-networking: gcloud container clusters update CLUSTER "
    "--enable-dataplane-v2 --enable-multi-networking",
}

_VERSION = re.compile(r"v?(\d+)\.(\d+)(?:\.(\d+))?")


def parse_version(text: str) -> tuple[int, int, int] | None:
    found = _VERSION.match(str(text).strip())
    return (int(found.group(1)), int(found.group(2)), int(found.group(3) or 0)) if found else None


def satisfies(version: tuple[int, int, int], constraint: str) -> bool:
    """Helm's kubeVersion constraint (Masterminds semver: `>=1.29.0-0`, `>= 1.29 < 1.35`, `a || b`,
    `~1.30`, `^1.30`); pre-release tags only widen a range, so numbers are compared."""
    for alternative in constraint.split("||"):
        terms = re.findall(r"(>=|<=|!=|>|<|=|~|\^)?\s*v?(\d+(?:\.\d+){0,2})(?:-[0-9A-Za-z.-]+)?", alternative)
        if terms and all(_term(version, op or "=", number) for op, number in terms):
            return True
    return False


def _term(version: tuple[int, int, int], op: str, number: str) -> bool:
    parts = [int(p) for p in number.split(".")]
    wanted = tuple(parts + [0] * (3 - len(parts)))
    if op == "~":
        return version >= wanted and version[:2] == wanted[:2]
    if op == "^":
        return version >= wanted and version[0] == wanted[0]
    if op == "=" and len(parts) < 3:  # `1.30` means 1.30.x
        return version[: len(parts)] == tuple(parts)
    return {
        ">=": version >= wanted,
        ">": version > wanted,
        "<=": version <= wanted,
        "<": version < wanted,
        "=": version == wanted,
        "!=": version != wanted,
    }[op]


def reachable(facts: Facts, releases: list[Release], options: dict[str, Any]) -> list[Result]:
    version = facts.version()  # a KubeError here is the runner's: every other check is skipped
    config = facts.client.config
    context = f" (context {config.context})" if config.context else ""
    return [
        Result("api.reachable", OK, f"{config.server}{context} answers: Kubernetes {version.get('gitVersion', '?')}")
    ]


def version(facts: Facts, releases: list[Release], options: dict[str, Any]) -> list[Result]:
    served = facts.version().get("gitVersion", "")
    parsed = parse_version(served)
    if parsed is None:
        return [
            Result(
                "api.version",
                FAIL,
                f"the server reports no readable version ({served!r})",
                "check that the server is a Kubernetes API server",
            )
        ]
    needs = []
    for release in releases:
        if release.kube_version_constraint:
            needs.append(
                (release.kube_version_constraint, f"chart {release.chart_kind or release.chart} (kubeVersion)")
            )
        minimum = (release.profile or {}).get("minKubernetesVersion")
        if minimum:
            needs.append((f">={minimum}.0-0", f"accelerator {release.accelerator} (minKubernetesVersion {minimum})"))
    failed = sorted({f"{why} needs {constraint}" for constraint, why in needs if not satisfies(parsed, constraint)})
    if failed:
        return [
            Result(
                "api.version",
                FAIL,
                f"Kubernetes {served}: {'; '.join(failed)}",
                "upgrade the control plane and nodes (gcloud container clusters upgrade / aws eks "
                "update-cluster-version), or choose a cluster that runs a newer version",
            )
        ]
    constraints = sorted({constraint for constraint, _ in needs})
    return [Result("api.version", OK, f"Kubernetes {served} satisfies {', '.join(constraints) or 'every chart'}")]


def served(facts: Facts, releases: list[Release], options: dict[str, Any]) -> list[Result]:
    wanted: dict[tuple[str, str], list[str]] = {}
    for release in releases:
        for obj in release.objects:
            key = (obj.get("apiVersion", ""), obj.get("kind", ""))
            wanted.setdefault(key, [])
            if release.name not in wanted[key]:
                wanted[key].append(release.name)
    missing = [(api, kind, names) for (api, kind), names in sorted(wanted.items()) if facts.served(api, kind) is None]
    if not missing:
        kinds = first([k for _, k in sorted(wanted)], 4)
        return [Result("api.served", OK, f"all {len(wanted)} kinds are served ({kinds})")]
    hints = []
    for api, _kind, _ in missing:
        group = api.rpartition("/")[0]
        hint = next(
            (
                h
                for r in releases
                for h in [((r.profile or {}).get("preflight") or {}).get("hints", {}).get(group)]
                if h
            ),
            None,
        ) or API_HINTS.get(group)
        other = _other_versions(facts, group, api) if group else []
        if other:
            hint = f"{api} is not served, {', '.join(other)} is: the installed {group} is another version" + (
                f"; {hint}" if hint else ""
            )
        if hint and hint not in hints:
            hints.append(hint)
    what = "; ".join(f"{kind} ({api}) of {', '.join(names)}" for api, kind, names in missing)
    return [
        Result(
            "api.served",
            FAIL,
            f"not served by this cluster: {what}",
            " | ".join(hints) or "install the CRD / enable the API that serves it",
        )
    ]


def _other_versions(facts: Facts, group: str, api: str) -> list[str]:
    try:
        versions = facts._once("groups", facts.client.groups).get(group) or []
    except Exception:  # only a better hint
        return []
    return [f"{group}/{v}" for v in versions if f"{group}/{v}" != api]
