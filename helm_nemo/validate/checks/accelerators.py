"""GPUs per pod against the accelerator profile, fabric devices vs fabric env, the GKE multi-network
annotations."""

from __future__ import annotations

import json
import re
from decimal import Decimal

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: importing typing costs every run start-up time
    from typing import Any
    from collections.abc import Mapping

from helm_nemo.validate.documents import (
    Collector,
    DEFAULT_INTERFACE_ANNOTATION,
    EFA_RESOURCE,
    GPU_RESOURCE,
    INTERFACES_ANNOTATION,
    mapping,
    short,
)
from helm_nemo.validate.pods import (
    PodTemplate,
    container_resource,
    containers,
    env_value,
    pod_resource,
    resource_amount,
)


def check_gpus(out: Collector, doc: Mapping[str, Any], pods: list[PodTemplate], profile: dict[str, Any] | None) -> None:
    if profile is None or not pods:
        return
    per_node = profile["gpusPerNode"]  # required by the profile schema
    total_pods = sum(p.pods for p in pods)
    using = [(p, pod_resource(p.spec, GPU_RESOURCE)) for p in pods]
    if any(gpus is None for _, gpus in using):
        return  # a container or an amount of the wrong type: the schema or the quantity check reports it
    for pod, gpus in using:
        assert gpus is not None  # returned above otherwise
        if gpus == 0:
            continue
        where = _gpu_path(pod)
        if total_pods > 1 and gpus != per_node:
            out.add(
                where,
                f"multi-node workload ({total_pods} pods): each pod takes {_num(gpus)} GPUs, but a "
                f"{profile['id']} node has {per_node} (nvidia.com/gpu must equal gpusPerNode)",
                "gpu-count",
            )
        elif gpus > per_node:
            out.add(
                where,
                f"{_num(gpus)} GPUs in one pod, but a {profile['id']} node has {per_node}: it can never be scheduled",
                "gpu-count",
            )
    if (
        total_pods > 1
        and out.kind in ("Job", "JobSet", "PyTorchJob", "LeaderWorkerSet")
        and all(g == 0 for _, g in using)
    ):
        out.add(
            pods[0].path,
            f"multi-node workload ({total_pods} pods) on {profile['id']} requests no GPUs "
            f"(expected nvidia.com/gpu: {per_node} per pod)",
            "gpu-count",
        )


def _num(value: Decimal) -> str:
    return str(int(value)) if value == value.to_integral_value() else str(value)


def _gpu_path(pod: PodTemplate) -> tuple[Any, ...]:
    path: tuple[Any, ...] = pod.path
    for where, container, _ in containers(pod.spec):
        if container_resource(container, "limits", GPU_RESOURCE) is not None:
            return path + where + ("resources", "limits", GPU_RESOURCE)
        if container_resource(container, "requests", GPU_RESOURCE) is not None:
            return path + where + ("resources", "requests", GPU_RESOURCE)
    return path


def _fabric_env(container: dict[str, Any]) -> str | None:
    """Which fabric the container's env sets up: "efa", "gib" or None."""
    if (env_value(container, "FI_PROVIDER") or "").strip().lower() == "efa":
        return "efa"
    if (env_value(container, "NCCL_NET") or "").strip().lower() == "gib":
        return "gib"
    plugin = env_value(container, "NCCL_PLUGIN_PATH") or ""
    if any(re.search(r"(^|/)gib(/|$)", part) for part in plugin.split(":")):
        return "gib"
    return None


def check_fabric(out: Collector, pods: list[PodTemplate], profile: dict[str, Any] | None) -> None:
    fabric = (profile or {}).get("fabric")
    profile_id = (profile or {}).get("id")  # named only with a fabric, which only a profile has
    total_pods = sum(p.pods for p in pods)
    for pod in pods:
        for where, container, _ in containers(pod.spec):
            kind = _fabric_env(container)
            if kind is None:
                continue
            cwhere = pod.path + where
            if fabric or kind == "efa":
                resource = fabric["resource"] if fabric else EFA_RESOURCE
                per_node = fabric["perNode"] if fabric else None
                trigger = "FI_PROVIDER=efa" if kind == "efa" else "gIB NCCL env"
                amount = resource_amount(container, "limits", resource)
                if amount is None:
                    pass  # resources of the wrong type or not a quantity: the schema or quantity check reports it
                elif not amount:
                    source = f" ({profile_id} profile: {per_node} per node)" if fabric else ""
                    out.add(
                        cwhere + ("resources", "limits"),
                        f"{trigger} is set but {resource} is not requested{source}: NCCL would fall back to TCP",
                        "fabric",
                    )
                elif per_node and total_pods > 1 and amount != per_node:
                    out.add(
                        cwhere + ("resources", "limits", resource),
                        f"multi-node workload takes {_num(amount)} "
                        f"{resource}, but a {profile_id} node has {per_node} (one pod per node should take all)",
                        "fabric",
                    )
            host_network = pod.spec.get("hostNetwork")  # of the wrong type: the schema check reports it
            if kind == "gib" and (host_network is None or host_network is False):
                _check_rdma_interfaces(out, pod, profile, cwhere)


def _check_rdma_interfaces(
    out: Collector, pod: PodTemplate, profile: dict[str, Any] | None, cwhere: tuple[Any, ...]
) -> None:
    if pod.meta is None:
        return  # metadata of the wrong type: the schema check reports it, the annotations cannot be read
    annotations = pod.meta.get("annotations")
    if annotations is not None and not isinstance(annotations, dict):
        return  # the schema check reports it
    raw = mapping(annotations).get(INTERFACES_ANNOTATION)
    wanted = len(((profile or {}).get("network") or {}).get("interfaces") or []) or None
    if raw is None:
        out.add(
            cwhere + ("env",),
            f"gIB (RDMA) NCCL env is set but the pod has neither hostNetwork: true nor the "
            f"{INTERFACES_ANNOTATION} annotation: it gets no RDMA NICs",
            "fabric",
        )
        return
    if not isinstance(raw, str):
        return  # the schema check reports it
    try:
        found = json.loads(raw)
    except ValueError:
        return  # interfaces-json reports it
    if isinstance(found, list) and wanted and len(found) < wanted:
        assert profile is not None  # `wanted` is the profile's
        out.add(
            pod.meta_path + ("annotations", INTERFACES_ANNOTATION),
            f"gIB (RDMA) needs all {wanted} interfaces of a {profile['id']} node, the annotation lists {len(found)}",
            "fabric",
        )


def check_interfaces(out: Collector, doc: Mapping[str, Any], pods: list[PodTemplate]) -> None:
    metas = [(("metadata",), doc.get("metadata"))] + [(p.meta_path, p.meta) for p in pods]
    for where, meta in metas:
        annotations = meta.get("annotations") if isinstance(meta, dict) else None
        if not isinstance(annotations, dict) or INTERFACES_ANNOTATION not in annotations:
            continue
        at = where + ("annotations", INTERFACES_ANNOTATION)
        raw = annotations[INTERFACES_ANNOTATION]
        if not isinstance(raw, str):
            continue  # the schema check reports it (annotations are strings)
        try:
            value = json.loads(raw)
        except ValueError as err:
            out.add(at, f"not JSON: {err}", "interfaces-json")
            continue
        if not isinstance(value, list) or not value:
            out.add(
                at,
                f'must be a non-empty JSON list of {{"interfaceName", "network"}}, got {short(raw)}',
                "interfaces-json",
            )
            continue
        names = []
        for i, item in enumerate(value):
            if not (
                isinstance(item, dict)
                and isinstance(item.get("interfaceName"), str)
                and isinstance(item.get("network"), str)
            ):
                out.add(
                    at,
                    f'item {i} must be {{"interfaceName": "ethN", "network": "NAME"}}, got {short(item)}',
                    "interfaces-json",
                )
                continue
            if item["interfaceName"] in names:
                out.add(at, f"interface {item['interfaceName']!r} is listed twice", "interfaces-json")
            names.append(item["interfaceName"])
        default = annotations.get(DEFAULT_INTERFACE_ANNOTATION)
        if isinstance(default, str) and names and default not in names:
            out.add(
                where + ("annotations", DEFAULT_INTERFACE_ANNOTATION),
                f"default interface {default!r} is not one of the interfaces {names}",
                "interfaces-json",
            )
