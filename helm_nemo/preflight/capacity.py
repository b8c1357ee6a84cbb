"""capacity.nodes, node.resources, capacity.gpus: nodes the pods can land on (nodeSelector, required node
affinity, taints vs tolerations, Ready, not cordoned), the device resources they request offered there
(GPUs, EFA, GKE network devices: whatever the rendered pods request), and enough of them free.

Free = allocatable minus the requests of the pods bound to the node that have not ended (one cluster-wide
pod list). Only extended resources (`vendor/name`) and hugepages are counted: CPU and memory of GPU nodes
are sized for their GPUs.
"""

from __future__ import annotations

from decimal import Decimal

from helm_nemo.preflight.model import FAIL, OK, SKIPPED, WARN, Result, first, gpu_resource, profile_hint, quantity_text

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only
    from typing import Any

    from helm_nemo.preflight.facts import Facts
    from helm_nemo.preflight.model import Release, Workload


def counted(name: str) -> bool:
    return "/" in name or name.startswith("hugepages-")


def _quantity(value: object) -> Decimal:
    from helm_nemo.validate.quantity import parse_quantity

    return parse_quantity(value) or Decimal(0)


def _expression(expr: dict[str, Any], labels: dict[str, Any], name: str, field: bool = False) -> bool:
    key, op, values = expr.get("key") or "", expr.get("operator"), expr.get("values") or []  # "": no label has it
    value = name if field else labels.get(key)
    has = (key == "metadata.name") if field else key in labels
    if op == "In":
        return has and value in values
    if op == "NotIn":
        return not has or value not in values
    if op == "Exists":
        return has
    if op == "DoesNotExist":
        return not has
    if op in ("Gt", "Lt") and has and values and value is not None:
        try:
            return int(value) > int(values[0]) if op == "Gt" else int(value) < int(values[0])
        except ValueError:
            return False
    return False


def _tolerated(taint: dict[str, Any], tolerations: list[Any]) -> bool:
    for toleration in tolerations:
        if not isinstance(toleration, dict):
            continue
        if toleration.get("effect") and toleration.get("effect") != taint.get("effect"):
            continue
        key, op = toleration.get("key"), toleration.get("operator") or "Equal"
        if not key and op == "Exists":
            return True
        if key == taint.get("key") and (op == "Exists" or toleration.get("value", "") == taint.get("value", "")):
            return True
    return False


def why_not(node: dict[str, Any], spec: dict[str, Any]) -> str | None:
    """Why a pod with this spec cannot run on the node (None: it can), as the scheduler's filters say it."""
    meta, node_spec = node.get("metadata") or {}, node.get("spec") or {}
    labels, name = meta.get("labels") or {}, meta.get("name", "")
    if node_spec.get("unschedulable"):
        return "cordoned"
    conditions = {c.get("type"): c.get("status") for c in (node.get("status") or {}).get("conditions") or []}
    if conditions.get("Ready") != "True":
        return "not Ready"
    for key, value in (spec.get("nodeSelector") or {}).items():
        if labels.get(key) != value:
            return f"label {key}={value}"
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    )
    terms = (required or {}).get("nodeSelectorTerms") or []
    if terms and not any(
        all(_expression(e, labels, name) for e in term.get("matchExpressions") or [])
        and all(_expression(e, labels, name, field=True) for e in term.get("matchFields") or [])
        for term in terms
    ):
        return "node affinity"
    for taint in node_spec.get("taints") or []:
        if taint.get("effect") in ("NoSchedule", "NoExecute") and not _tolerated(taint, spec.get("tolerations") or []):
            return f"taint {taint.get('key')}={taint.get('value', '')}:{taint.get('effect')}"
    return None


def _in_use(facts: Facts, names: set[str], resources: set[str]) -> dict[str, dict[str, Decimal]]:
    """node -> resource -> requested by the pods bound to it that have not ended (only `names`' nodes)."""
    used: dict[str, dict[str, Decimal]] = {}
    for pod in facts.pods():
        spec = pod.get("spec") or {}
        node = spec.get("nodeName")
        if node not in names or (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        into = used.setdefault(node, {})
        for key in ("containers", "initContainers"):
            for container in spec.get(key) or []:
                block = container.get("resources") or {}
                amounts = {**(block.get("limits") or {}), **(block.get("requests") or {})}
                for resource in resources & amounts.keys():
                    amount = _quantity(amounts[resource])
                    if key == "containers" or container.get("restartPolicy") == "Always":
                        into[resource] = into.get(resource, Decimal(0)) + amount
                    else:
                        into[resource] = max(into.get(resource, Decimal(0)), amount)
    return used


# CPU and memory a Job without GPUs (data preparation) needs of one node, checked against the nodes' allocatable.
CPU_JOB_RESOURCES = ("cpu", "memory")


def capacity(facts: Facts, releases: list[Release], options: dict[str, Any]) -> list[Result]:
    results: list[Result] = []
    batch: list[Result] = []
    nodes = None
    for release in releases:
        gpu = gpu_resource(release)
        for workload in release.workloads():
            requests = workload.requests()
            per_pod = {k: v for k, v in requests.items() if counted(k) and v > 0}
            if gpu not in per_pod:
                if workload.kind == "Job" and not per_pod:
                    # a CPU Job (data-prep): a recipe waits for it, so a pod no node can hold blocks the recipe
                    nodes = facts.nodes() if nodes is None else nodes
                    batch += _cpu_job(release, workload, requests, nodes)
                continue  # a helper (supervisor, monitors): not what capacity is about
            if nodes is None:
                nodes = facts.nodes()
            results += _workload(facts, release, workload, per_pod, gpu, nodes)
    if not results:
        results = [Result("capacity.gpus", SKIPPED, "no workload requests GPUs")]
    return results + batch


def _cpu_job(
    release: Release, workload: Workload, requests: dict[str, Decimal], nodes: list[dict[str, Any]]
) -> list[Result]:
    """node.resources of a Job without GPUs: some node its pods may land on offers the CPU and memory one pod
    requests (allocatable: what other pods use comes and goes, but a pod bigger than every node never runs)."""
    label = f"{workload.kind} {workload.name}"
    wanted = {r: requests[r] for r in CPU_JOB_RESOURCES if requests.get(r, Decimal(0)) > 0}
    if not wanted or not nodes:
        return []  # nothing asked, or no nodes at all (the GPU workloads' capacity.nodes says so)
    matching = [node for node in nodes if why_not(node, workload.spec) is None]
    if not matching:
        return [
            Result(
                "capacity.nodes",
                FAIL,
                f"{label}: none of the {len(nodes)} nodes can run its pods (nodeSelector, affinity, taints)",
                "check its nodeSelector/tolerations against the node pools",
                release.name,
            )
        ]
    allocatable = [(node.get("status") or {}).get("allocatable") or {} for node in matching]
    fits = [a for a in allocatable if all(_quantity(a.get(r)) >= amount for r, amount in wanted.items())]
    asked = ", ".join(f"{r} {_said(r, amount)}" for r, amount in wanted.items())
    if not fits:
        largest = ", ".join(f"{r} {_said(r, max(_quantity(a.get(r)) for a in allocatable))}" for r in wanted)
        return [
            Result(
                "node.resources",
                FAIL,
                f"{label} requests {asked} per pod, more than any of the {len(matching)} nodes it may use offers "
                f"(largest: {largest}); its pods would stay Pending",
                "a node pool with bigger nodes, or smaller resources.requests (data-prep: fewer tokenizer workers)",
                release.name,
            )
        ]
    return [
        Result(
            "node.resources",
            OK,
            f"{label}: {len(fits)} of {len(matching)} nodes can hold a pod ({asked})",
            release=release.name,
        )
    ]


def _said(resource: str, amount: Decimal) -> str:
    """A CPU count as written (2, 0.5); memory in Gi (128Gi), or Mi when not whole Gi."""
    if resource != "memory":
        return quantity_text(amount)
    gib = amount / (1 << 30)
    return f"{quantity_text(gib)}Gi" if gib == gib.to_integral_value() else f"{quantity_text(amount / (1 << 20))}Mi"


def _workload(
    facts: Facts,
    release: Release,
    workload: Workload,
    per_pod: dict[str, Decimal],
    gpu: str,
    nodes: list[dict[str, Any]],
) -> list[Result]:
    label = f"{workload.kind} {workload.name}"
    reasons: dict[str, int] = {}
    matching = []
    for node in nodes:
        reason = why_not(node, workload.spec)
        if reason is None:
            matching.append(node)
        else:
            reasons[reason] = reasons.get(reason, 0) + 1
    if not nodes:
        return [
            Result(
                "capacity.nodes",
                FAIL,
                f"{label}: the cluster has no nodes",
                f"create the {release.accelerator or 'GPU'} node pool",
                release.name,
            )
        ]
    if not matching:
        selector = workload.spec.get("nodeSelector") or {}
        common = sorted(reasons.items(), key=lambda kv: -kv[1])
        hint = (
            "no node carries "
            + ", ".join(f"{k}={v}" for k, v in selector.items())
            + f": create the {release.accelerator or 'GPU'} node pool"
            if selector
            else "check the node pool"
        )
        profile_labels = (release.profile or {}).get("nodeLabels") or {}
        if profile_labels:
            hint += (
                f" (the {release.accelerator} profile's nodes carry "
                + ", ".join(f"{k}={v}" for k, v in profile_labels.items())
                + ")"
            )
        return [
            Result(
                "capacity.nodes",
                FAIL,
                f"{label}: none of the {len(nodes)} nodes can run its pods ({first(f'{n} × {r}' for r, n in common)})",
                hint,
                release.name,
            )
        ]
    results = [
        Result(
            "capacity.nodes",
            OK,
            f"{label}: {len(matching)} of {len(nodes)} nodes match its nodeSelector, affinity and tolerations",
            release=release.name,
        )
    ]
    allocatable = {(n["metadata"]["name"]): (n.get("status") or {}).get("allocatable") or {} for n in matching}
    lacking = []
    for resource in sorted(per_pod):
        offering = sum(1 for a in allocatable.values() if _quantity(a.get(resource)) > 0)
        if not offering:
            lacking.append(resource)
    if lacking:
        hints = [
            profile_hint(release, r, f"no matching node offers {r}: install the device plugin that advertises it")
            for r in lacking
        ]
        results.append(
            Result(
                "node.resources",
                FAIL,
                f"{label} requests {', '.join(lacking)} per pod, which none of "
                f"the {len(matching)} matching nodes offers (allocatable)",
                " | ".join(hints),
                release.name,
            )
        )
        return results
    results.append(
        Result(
            "node.resources",
            OK,
            f"{label}: matching nodes offer " + ", ".join(f"{r}" for r in sorted(per_pod)),
            release=release.name,
        )
    )
    used = _in_use(facts, set(allocatable), set(per_pod))
    idle = free = 0
    for name, alloc in allocatable.items():
        fits_idle = fits_free = None
        for resource, amount in per_pod.items():
            have = _quantity(alloc.get(resource))
            left = have - used.get(name, {}).get(resource, Decimal(0))
            fits_idle = int(have // amount) if fits_idle is None else min(fits_idle, int(have // amount))
            fits_free = (
                max(int(left // amount), 0) if fits_free is None else min(fits_free, max(int(left // amount), 0))
            )
        idle += fits_idle or 0
        free += fits_free or 0
    need = workload.pods
    what = (
        f"{label} needs {need} pods × {quantity_text(per_pod[gpu])} {gpu}: the matching nodes hold {idle} such "
        f"pods, {free} with what runs now"
    )
    details = {
        "pods": need,
        "per_pod": {k: quantity_text(v) for k, v in per_pod.items()},
        "fit_idle": idle,
        "fit_now": free,
        "nodes": len(matching),
    }
    if idle < need:
        results.append(
            Result(
                "capacity.gpus",
                FAIL,
                what,
                f"add nodes to the pool (at least {need - idle} more pods' worth), or run fewer GPUs (workload.gpus)",
                release.name,
                details,
            )
        )
    elif free < need:
        results.append(
            Result(
                "capacity.gpus",
                WARN,
                what,
                "it waits until the running pods finish (kubectl get pods -A "
                f"--field-selector spec.nodeName=NODE); Kueue admits it when {need} pods fit",
                release.name,
                details,
            )
        )
    else:
        results.append(Result("capacity.gpus", OK, what, release=release.name, details=details))
    return results
