"""Stage 2, a values or recipe file -> release plans: load with positions (load), ${VAR} substitution
(substitute), the chart's schema with file:line errors (validation), releases, charts and files (plan)."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: importing typing costs every run start-up time
    from typing import Any
    from collections.abc import Iterable


def value_at(data: Any, where: Iterable[Any]) -> Any:
    """The value at a path of keys (and list indices) inside parsed values; None where the path ends early."""
    for part in where:
        if isinstance(data, dict) and part in data:
            data = data[part]
        elif isinstance(data, list) and isinstance(part, int) and -len(data) <= part < len(data):
            data = data[part]
        else:
            return None
    return data
