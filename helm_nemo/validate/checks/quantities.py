"""Resource quantities as Kubernetes parses them; requests vs limits; extended resources."""

from __future__ import annotations

import re
from decimal import Decimal

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: importing typing costs every run start-up time
    from typing import Any
    from collections.abc import Callable, Mapping

from helm_nemo.validate.documents import Collector, items_of, mapping, short
from helm_nemo.validate.pods import PodTemplate, containers
from helm_nemo.validate.quantity import is_extended, parse_quantity

_GCSFUSE_QUANTITY = re.compile(
    r"^gke-gcsfuse/(?:metadata-prefetch-)?(?:cpu|memory|ephemeral-storage)-(?:limit|request)$"
)


def check_quantities(out: Collector, doc: Mapping[str, Any], pods: list[PodTemplate]) -> None:
    spec = mapping(doc.get("spec"))

    def need(where: tuple[Any, ...], value: Any, what: str, *, json: bool = True) -> Decimal | None:
        if not isinstance(value, (str, int, float)) or isinstance(value, bool):
            return None  # null, a list, a mapping, true: the schema check reports the type
        parsed = parse_quantity(value, json=json)
        if parsed is None:
            out.add(where, f"{what} {short(value)} is not a Kubernetes quantity (e.g. 500m, 2, 64Gi, 1.5G)", "quantity")
        elif parsed < 0:
            out.add(where, f"{what} {short(value)} must not be negative", "quantity")
            return None
        return parsed

    if out.kind == "PersistentVolume":
        for key, value in mapping(spec.get("capacity")).items():
            need(("spec", "capacity", key), value, f"capacity {key}")
    if out.kind == "PersistentVolumeClaim":
        _resources(out, ("spec", "resources"), spec.get("resources"), need, extended_rules=False)
    for pod in pods:
        for key, value in mapping((pod.meta or {}).get("annotations")).items():
            if _GCSFUSE_QUANTITY.match(str(key)):
                need(
                    pod.meta_path + ("annotations", key), value, f"annotation {key}", json=False
                )  # the driver parses it
        for i, volume in enumerate(items_of(pod.spec.get("volumes"))):
            empty = mapping(volume).get("emptyDir")
            if isinstance(empty, dict) and empty.get("sizeLimit") is not None:
                need(pod.path + ("volumes", i, "emptyDir", "sizeLimit"), empty["sizeLimit"], "emptyDir sizeLimit")
        for key, value in mapping(pod.spec.get("overhead")).items():
            need(pod.path + ("overhead", key), value, f"overhead {key}")
        for where, container, _ in containers(pod.spec):
            _resources(out, pod.path + where + ("resources",), container.get("resources"), need, extended_rules=True)


def _resources(
    out: Collector, where: tuple[Any, ...], resources: Any, need: Callable[..., Decimal | None], *, extended_rules: bool
) -> None:
    if not isinstance(resources, dict):
        return
    parsed: dict[str, dict[str, Decimal | None]] = {}
    for which in ("requests", "limits"):
        block = resources.get(which)
        if isinstance(block, dict):
            parsed[which] = {
                name: need(where + (which, name), value, f"{which[:-1]} {name}") for name, value in block.items()
            }
    requests, limits = parsed.get("requests", {}), parsed.get("limits", {})
    for name, request in requests.items():
        limit = limits.get(name)
        if request is None:
            continue
        if limit is not None and request > limit:
            out.add(
                where + ("requests", name),
                f"request {name} {resources['requests'][name]} is more than the limit {resources['limits'][name]}",
                "resources",
            )
        if extended_rules and is_extended(name) and limit is not None and request != limit:
            out.add(
                where + ("requests", name),
                f"extended resource {name}: request {resources['requests'][name]} "
                f"must equal the limit {resources['limits'][name]}",
                "resources",
            )
    if extended_rules:
        for which, block in parsed.items():
            for name, amount in block.items():
                if amount is not None and is_extended(name) and amount != amount.to_integral_value():
                    out.add(
                        where + (which, name),
                        f"extended resource {name} must be a whole number, got {resources[which][name]}",
                        "resources",
                    )
