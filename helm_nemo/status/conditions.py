"""What every API object carries, read the same way by every part of status: its RFC 3339 times (`parse_time`,
`clock`), its `status.conditions` by type, and messages on one line."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, UTC

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only
    from typing import Any


def parse_time(text: str | None) -> datetime | None:
    """An RFC 3339 time as the API writes it (`2026-01-01T12:04:05Z`, with or without fractions)."""
    if not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def clock(text: str | None) -> str:
    """`12:04` (UTC) of an API time, or empty."""
    when = parse_time(text)
    return when.astimezone(UTC).strftime("%H:%M") if when else ""


@dataclass
class Condition:
    """One entry of status.conditions."""

    type: str
    status: str
    reason: str = ""
    message: str = ""
    time: str = ""

    @property
    def true(self) -> bool:
        return self.status == "True"


def conditions(obj: dict[str, Any]) -> dict[str, Condition]:
    """status.conditions by type."""
    out = {}
    for item in (obj.get("status") or {}).get("conditions") or []:
        if isinstance(item, dict) and item.get("type"):
            out[item["type"]] = Condition(
                item["type"],
                str(item.get("status", "")),
                item.get("reason") or "",
                one_line(item.get("message") or ""),
                item.get("lastTransitionTime") or item.get("lastProbeTime") or "",
            )
    return out


def one_line(text: str) -> str:
    return " ".join(str(text).split())
