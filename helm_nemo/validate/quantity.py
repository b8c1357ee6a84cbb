"""Kubernetes resource quantities parsed exactly as the API server parses them."""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from typing import Any

_QUANTITY = re.compile(r"^([+-]?(?:\d+(?:\.\d*)?|\.\d+))(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][+-]?\d+)?$")
_SUFFIX = {"": 1, "n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"), "k": Decimal(10) ** 3,
           "M": Decimal(10) ** 6, "G": Decimal(10) ** 9, "T": Decimal(10) ** 12, "P": Decimal(10) ** 15,
           "E": Decimal(10) ** 18, "Ki": 2 ** 10, "Mi": 2 ** 20, "Gi": 2 ** 30, "Ti": 2 ** 40, "Pi": 2 ** 50,
           "Ei": 2 ** 60}


def parse_quantity(value: Any) -> Decimal | None:
    """A Kubernetes resource.Quantity as a Decimal, or None when it does not parse."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        try:
            return Decimal(str(value))
        except InvalidOperation:  # pragma: no cover - inf/nan
            return None
    if not isinstance(value, str):
        return None
    m = _QUANTITY.match(value.strip() if value.strip() == value else "\0")
    if not m:
        return None
    number, suffix = Decimal(m.group(1)), m.group(2) or ""
    if suffix[:1] in ("e", "E"):
        return number * (Decimal(10) ** int(suffix[1:]))
    return number * Decimal(_SUFFIX[suffix])


def is_extended(resource: str) -> bool:
    """Extended resources (device plugins: nvidia.com/gpu, vpc.amazonaws.com/efa): whole numbers, requests = limits."""
    return "/" in resource and not resource.startswith(("kubernetes.io/", "requests.")) \
        and not resource.split("/", 1)[0].endswith(".kubernetes.io")
