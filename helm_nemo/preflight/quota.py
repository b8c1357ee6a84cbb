"""queue.quota: does the ClusterQueue cover, and hold, every resource the pods request, as Kueue counts them?

Kueue (0.19, pkg/workload and pkg/scheduler/flavorassigner) sums a pod set's requests as the scheduler does
(limits stand in for missing requests, init containers and sidecars, the pod's overhead), times its pod
count, drops the zero ones, and adds `pods` when the ClusterQueue covers it. Every other resource must be
covered by a resource group, or the workload is not admitted: "resource memory unavailable in ClusterQueue".
Each resource group gives the pod set one flavor, tried in order, that must hold all of the group's
resources: its nominal quota, plus what it may borrow from its cohort.
"""

from __future__ import annotations

from decimal import Decimal

from helm_nemo.preflight.model import FAIL, OK, SKIPPED, WARN, Result, gpu_resource, quantity_text

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only
    from typing import Any

    from helm_nemo.preflight.model import Release, Workload

    Quotas = dict[str, tuple[Decimal, Decimal | None]]  # resource -> (nominalQuota, borrowingLimit; None: none)


def kueue_requests(workload: Workload) -> dict[str, Decimal]:
    """What Kueue's Workload asks for this pod set: per-pod requests (and overhead) times the pods, no zeros."""
    from helm_nemo.validate.quantity import parse_quantity

    per_pod = workload.requests()
    for name, value in (workload.spec.get("overhead") or {}).items():
        try:
            amount = parse_quantity(value) or Decimal(0)
        except Exception:  # the manifest check reports bad quantities
            continue
        per_pod[name] = per_pod.get(name, Decimal(0)) + amount
    return {name: amount * workload.pods for name, amount in per_pod.items() if amount > 0}


def quota(release: Release, workload: Workload, cq_name: str, cluster_queue: dict[str, Any]) -> Result:
    gpu = gpu_resource(release)
    spec = cluster_queue.get("spec") or {}
    groups = [g for g in spec.get("resourceGroups") or [] if isinstance(g, dict)]
    covered = {name: group for group in groups for name in group.get("coveredResources") or []}
    needed = kueue_requests(workload)
    if "pods" in covered:
        needed["pods"] = Decimal(workload.pods)
    who = f"{workload.kind} {workload.name}"
    if not needed.get(gpu):
        return Result("queue.quota", SKIPPED, f"{who} requests no {gpu}", release=release.name)
    uncovered = sorted(name for name in needed if name not in covered)
    if uncovered:
        return _uncovered(release, who, cq_name, uncovered, needed, sorted(covered))
    cohort = spec.get("cohort") or spec.get("cohortName")
    used = _usage(cluster_queue)
    chosen: list[tuple[str, Quotas]] = []  # per resource group: the flavor Kueue would give, its quota
    for group in groups:
        asked = {name: needed[name] for name in group.get("coveredResources") or [] if name in needed}
        if not asked:
            continue
        flavors = [(f.get("name", ""), _quotas(f)) for f in group.get("flavors") or [] if isinstance(f, dict)]
        fitting = next(((n, q) for n, q in flavors if all(a <= q[r][0] for r, a in asked.items())), None)
        if fitting is None:
            return _too_small(release, who, workload.pods, cq_name, asked, flavors, cohort, gpu, used)
        chosen.append(fitting)
    flavor, quotas = next((f, q) for f, q in chosen if gpu in q)
    details = _details(gpu, quotas[gpu][0], needed[gpu], used.get((flavor, gpu), Decimal(0)))
    what = (
        f"ClusterQueue {cq_name} has {quantity_text(quotas[gpu][0])} {gpu} of quota (flavor {flavor}); {who} "
        f"needs {quantity_text(needed[gpu])} ({workload.pods} pods)"
    )
    others = [r for r in needed if r != gpu]
    if others:
        what += f"; {', '.join(sorted(others))} covered too"
    busy = [  # what admitted workloads use leaves too little of a chosen flavor: GPUs as a number, others named
        amount_text(r, used[(name, r)]) + ("" if r == gpu else f" {r}")
        for name, q in chosen
        for r in q
        if r in needed and needed[r] > q[r][0] - used.get((name, r), Decimal(0))
    ]
    if busy:
        return Result(
            "queue.quota",
            WARN,
            what + f"; {', '.join(busy)} are in use by admitted workloads, so it waits in the queue until they finish",
            "kubectl get workloads -A to see what holds the quota",
            release.name,
            details,
        )
    free = quotas[gpu][0] - used.get((flavor, gpu), Decimal(0))
    return Result(
        "queue.quota", OK, what + f" ({quantity_text(free)} {gpu} free)", release=release.name, details=details
    )


def _uncovered(
    release: Release, who: str, cq_name: str, uncovered: list[str], needed: dict[str, Decimal], covered: list[str]
) -> Result:
    asked = ", ".join(f"{amount_text(name, needed[name])} {name}" for name in uncovered)
    return Result(
        "queue.quota",
        FAIL,
        f"{who} requests {asked}, which ClusterQueue {cq_name} does not cover (it covers "
        f'{", ".join(covered) or "nothing"}): Kueue will not admit it, "resource {uncovered[0]} unavailable '
        'in ClusterQueue"' + (" (or another of them: Kueue names the first it meets)" if len(uncovered) > 1 else ""),
        f"add {', '.join(uncovered)} to a resource group's coveredResources of ClusterQueue {cq_name}, with a "
        "nominalQuota in each of its flavors (or leave them out of Kueue's count: excludeResourcePrefixes in "
        "its Configuration)",
        release.name,
        {"resource": uncovered[0], "uncovered": uncovered, "covered": covered},
    )


def _too_small(
    release: Release,
    who: str,
    pods: int,
    cq_name: str,
    asked: dict[str, Decimal],
    flavors: list[tuple[str, Quotas]],
    cohort: str | None,
    gpu: str,
    used: dict[tuple[str, str], Decimal],
) -> Result:
    """No flavor of the group holds the pod set on its nominal quota: Kueue's words for the first flavor,
    a warning if the cohort may lend the rest."""
    name, quotas = flavors[0] if flavors else ("", {})
    short = [r for r, a in asked.items() if a > quotas.get(r, (Decimal(0), None))[0]]
    resource = gpu if gpu in short else (short[0] if short else next(iter(asked)))
    nominal = quotas.get(resource, (Decimal(0), None))[0]
    words = (
        f"insufficient quota for {resource} in flavor {name}, request > maximum capacity "
        f"({amount_text(resource, asked[resource])} > {amount_text(resource, nominal)})"
        if flavors
        else f"no flavor for {resource}"
    )
    each = ", ".join(f"flavor {n}: {amount_text(resource, q.get(resource, (Decimal(0), None))[0])}" for n, q in flavors)
    what = (
        f"ClusterQueue {cq_name} has {amount_text(resource, nominal)} {resource} of quota ({each}); {who} needs "
        f"{amount_text(resource, asked[resource])} ({pods} pods): {words}"
    )
    details = _details(resource, nominal, asked[resource], used.get((name, resource), Decimal(0)))
    may_borrow = bool(cohort) and any(_borrowing_holds(asked, q) for _, q in flavors)
    if may_borrow:
        return Result(
            "queue.quota",
            WARN,
            what + f"; it can run only by borrowing from cohort {cohort}",
            "raise nominalQuota, or make sure the cohort has that much unused",
            release.name,
            details,
        )
    return Result(
        "queue.quota",
        FAIL,
        what,
        f"raise spec.resourceGroups[].flavors[].resources[{resource}].nominalQuota of ClusterQueue {cq_name} to "
        f"at least {amount_text(resource, asked[resource])}"
        + (", or run fewer GPUs (workload.gpus)" if resource == gpu else ""),
        release.name,
        details,
    )


def _borrowing_holds(asked: dict[str, Decimal], quotas: Quotas) -> bool:
    """Whether the flavor's nominal quota plus its borrowing limit (none: the cohort's) could hold the request."""
    for resource, amount in asked.items():
        nominal, limit = quotas.get(resource, (Decimal(0), Decimal(0)))
        if limit is not None and amount > nominal + limit:
            return False
    return True


_BINARY = ("Ei", 1 << 60), ("Pi", 1 << 50), ("Ti", 1 << 40), ("Gi", 1 << 30), ("Mi", 1 << 20), ("Ki", 1 << 10)


def amount_text(resource: str, amount: Decimal) -> str:
    """An amount as a manifest would write it: bytes (memory, huge pages, storage) with the largest binary
    suffix that divides them (64000Mi), counts as numbers."""
    if resource in ("memory", "ephemeral-storage", "storage") or resource.startswith("hugepages-"):
        for suffix, size in _BINARY:
            if amount and amount == amount.to_integral_value() and int(amount) % size == 0:
                return f"{int(amount) // size}{suffix}"
    return quantity_text(amount)


def _quotas(flavor: dict[str, Any]) -> Quotas:
    """resource -> (nominalQuota, borrowingLimit or None: no limit) of one flavor."""
    out: Quotas = {}
    for item in flavor.get("resources") or []:
        if isinstance(item, dict) and item.get("name"):
            limit = item.get("borrowingLimit")
            out[item["name"]] = (_quantity(item.get("nominalQuota")), None if limit is None else _quantity(limit))
    return out


def _usage(cluster_queue: dict[str, Any]) -> dict[tuple[str, str], Decimal]:
    """(flavor, resource) -> what admitted workloads use now (status.flavorsUsage, as Kueue writes it)."""
    used: dict[tuple[str, str], Decimal] = {}
    for flavor in (cluster_queue.get("status") or {}).get("flavorsUsage") or []:
        for item in flavor.get("resources") or []:
            key = (flavor.get("name", ""), item.get("name", ""))
            used[key] = used.get(key, Decimal(0)) + _quantity(item.get("total"))
    return used


def _details(resource: str, quota: Decimal, needed: Decimal, used: Decimal) -> dict[str, Any]:
    return {
        "resource": resource,
        "quota": quantity_text(quota),
        "needed": quantity_text(needed),
        "used": quantity_text(used),
    }


def _quantity(value: object) -> Decimal:
    from helm_nemo.validate.quantity import parse_quantity

    try:
        return parse_quantity(value) or Decimal(0) if value is not None else Decimal(0)
    except Exception:  # not a quantity: no amount
        return Decimal(0)
