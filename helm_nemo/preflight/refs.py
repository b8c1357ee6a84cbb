"""refs.*: objects the pods reference but the releases do not create exist (a PVC Bound, Secrets,
ConfigMaps, ServiceAccounts, image pull secrets, a PriorityClass). An object one release of the run
creates counts as there for the releases after it."""

from __future__ import annotations

from helm_nemo.preflight.model import FAIL, OK, SKIPPED, WARN, Result, first

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only
    from collections.abc import Iterator
    from typing import Any

    from helm_nemo.preflight.facts import Facts
    from helm_nemo.preflight.model import Release

# check id -> (apiVersion, kind, namespaced)
KINDS = {
    "refs.pvc": ("v1", "PersistentVolumeClaim", True),
    "refs.secrets": ("v1", "Secret", True),
    "refs.configmaps": ("v1", "ConfigMap", True),
    "refs.serviceaccounts": ("v1", "ServiceAccount", True),
    "refs.priorityclass": ("scheduling.k8s.io/v1", "PriorityClass", False),
}


def _references(spec: dict[str, Any]) -> Iterator[tuple[str, str, bool]]:
    """(check id, name, optional) of what a pod spec references."""
    for volume in spec.get("volumes") or []:
        if not isinstance(volume, dict):
            continue
        if (volume.get("persistentVolumeClaim") or {}).get("claimName"):
            yield "refs.pvc", volume["persistentVolumeClaim"]["claimName"], False
        if (volume.get("secret") or {}).get("secretName"):
            yield "refs.secrets", volume["secret"]["secretName"], bool(volume["secret"].get("optional"))
        if (volume.get("configMap") or {}).get("name"):
            yield "refs.configmaps", volume["configMap"]["name"], bool(volume["configMap"].get("optional"))
        for source in (volume.get("projected") or {}).get("sources") or []:
            for key, check in (("secret", "refs.secrets"), ("configMap", "refs.configmaps")):
                if (source.get(key) or {}).get("name"):
                    yield check, source[key]["name"], bool(source[key].get("optional"))
    for group in ("initContainers", "containers"):
        for container in spec.get(group) or []:
            if not isinstance(container, dict):
                continue
            for env in container.get("env") or []:
                source = (env or {}).get("valueFrom") or {}
                for key, check in (("secretKeyRef", "refs.secrets"), ("configMapKeyRef", "refs.configmaps")):
                    if (source.get(key) or {}).get("name"):
                        yield check, source[key]["name"], bool(source[key].get("optional"))
            for env_from in container.get("envFrom") or []:
                for key, check in (("secretRef", "refs.secrets"), ("configMapRef", "refs.configmaps")):
                    if ((env_from or {}).get(key) or {}).get("name"):
                        yield check, env_from[key]["name"], bool(env_from[key].get("optional"))
    for secret in spec.get("imagePullSecrets") or []:
        if (secret or {}).get("name"):
            yield "refs.secrets", secret["name"], False
    account = spec.get("serviceAccountName") or spec.get("serviceAccount")
    if account and account != "default":  # every namespace has "default"
        yield "refs.serviceaccounts", account, False
    if spec.get("priorityClassName") and spec["priorityClassName"] not in (
        "system-cluster-critical",
        "system-node-critical",
    ):
        yield "refs.priorityclass", spec["priorityClassName"], False


def references(facts: Facts, releases: list[Release], options: dict[str, Any]) -> list[Result]:
    created: dict[tuple[str, str, str], str] = {}  # (kind, namespace, name) -> the release creating it
    for release in releases:
        for obj in release.objects:
            meta = obj.get("metadata") or {}
            created.setdefault(
                (obj.get("kind", ""), meta.get("namespace") or release.namespace, meta.get("name", "")), release.name
            )
            if obj.get("kind") in ("PriorityClass",):
                created.setdefault((obj["kind"], "", meta.get("name", "")), release.name)
    found: dict[str, list[str]] = {check: [] for check in KINDS}
    missing: dict[str, list[str]] = {check: [] for check in KINDS}
    unbound: list[str] = []
    for index, release in enumerate(releases):
        for workload in release.workloads():
            for check, name, optional in _references(workload.spec):
                api, kind, namespaced = KINDS[check]
                ns = workload.namespace if namespaced else ""
                maker = created.get((kind, ns, name))
                if maker is not None:
                    where = [r.name for r in releases].index(maker)
                    if where <= index:  # by this release or one before it
                        found[check].append(f"{name} (from {maker})" if maker != release.name else name)
                        continue
                existing = facts.get(api, kind, name, ns or None)
                label = f"{ns + '/' if ns else ''}{name}"
                if existing is None:
                    if optional:
                        continue
                    entry = f"{label} ({workload.kind} {workload.name})"
                    if entry not in missing[check]:  # several containers name it
                        missing[check].append(entry)
                    continue
                if kind == "PersistentVolumeClaim" and (existing.get("status") or {}).get("phase") != "Bound":
                    entry = f"{label} is {(existing.get('status') or {}).get('phase', 'not Bound')}"
                    if entry not in unbound:
                        unbound.append(entry)
                found[check].append(label)
    results = []
    hints = {
        "refs.pvc": "create the PersistentVolumeClaim (its storage release first: a recipe lists it before "
        "the workload), or fix claimName",
        "refs.secrets": "kubectl create secret … -n NAMESPACE, or fix the name in the values",
        "refs.configmaps": "kubectl create configmap … -n NAMESPACE, or fix the name in the values",
        "refs.serviceaccounts": "create the ServiceAccount (and its Workload Identity binding), or set the "
        "name the cluster has",
        "refs.priorityclass": "kubectl get priorityclasses; create it or use one of them",
    }
    for check in KINDS:
        kind = KINDS[check][1]
        if missing[check]:
            results.append(Result(check, FAIL, f"{kind} missing: {first(missing[check])}", hints[check]))
        elif check == "refs.pvc" and unbound:
            results.append(
                Result(
                    check,
                    WARN,
                    f"PersistentVolumeClaim {first(unbound)}: pods wait until it is Bound",
                    "kubectl describe pvc NAME: its PersistentVolume or StorageClass",
                )
            )
        elif found[check]:
            results.append(Result(check, OK, f"{kind} found: {first(sorted(set(found[check])), 4)}"))
        else:
            results.append(Result(check, SKIPPED, f"the pods reference no {kind} they do not create"))
    return results
