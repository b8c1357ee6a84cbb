"""The Warning events of a release's objects as lines: newest first, the same reason and message on many pods
merged into one line with the count summed (core/v1 and events.k8s.io fields both read)."""

from __future__ import annotations

from dataclasses import dataclass

from helm_nemo.status.conditions import clock, one_line
from helm_nemo.status.pods import condense_scheduling

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only
    from collections.abc import Set as AbstractSet
    from typing import Any


@dataclass
class EventLine:
    """A Warning event (or several merged), as one line."""

    at: str
    kind: str
    name: str
    reason: str
    message: str
    count: int = 1

    def as_json(self) -> dict[str, Any]:
        return {
            "at": self.at,
            "object": f"{self.kind}/{self.name}",
            "reason": self.reason,
            "message": self.message,
            "count": self.count,
        }

    def text(self) -> str:
        times = f" (x{self.count})" if self.count > 1 else ""
        message = condense_scheduling(self.message) if self.reason == "FailedScheduling" else self.message
        return f"{clock(self.at)} {self.kind} {self.name} {self.reason}: {message[:240]}{times}".strip()


def event_time(event: dict[str, Any]) -> str:
    """An event's last time: core/v1 `lastTimestamp`, or events.k8s.io's series/eventTime as core/v1 shows
    them (RFC 3339 in UTC: compares as text); '' when it has none."""
    return str(
        event.get("lastTimestamp")
        or (event.get("series") or {}).get("lastObservedTime")
        or event.get("eventTime")
        or event.get("firstTimestamp")
        or (event.get("metadata") or {}).get("creationTimestamp")
        or ""
    )


def event_message(event: dict[str, Any]) -> str:
    """An event's message (core/v1) or note (events.k8s.io) on one line."""
    return one_line(event.get("message") or event.get("note") or "")


def warning_events(
    events: list[dict[str, Any]], names: set[str], uids: AbstractSet[str] = frozenset(), limit: int = 8
) -> list[EventLine]:
    """The Warning events whose object is one of `names` (or `uids`), newest first; the same reason and
    message on many pods of the release is one line with the count summed."""
    merged: dict[tuple[str, str, str], EventLine] = {}
    for event in events:
        if event.get("type") != "Warning":
            continue
        obj = event.get("involvedObject") or event.get("regarding") or {}
        if obj.get("name") not in names and obj.get("uid") not in uids:
            continue
        count = int(event.get("count") or (event.get("series") or {}).get("count") or 1)
        at = event_time(event)
        message = event_message(event)
        key = (
            obj.get("kind", ""),
            event.get("reason", ""),
            message if obj.get("kind") != "Pod" else condense_scheduling(message),
        )
        line = merged.get(key)
        if line is None:
            merged[key] = EventLine(
                at or "", obj.get("kind", ""), obj.get("name", ""), event.get("reason", ""), message, count
            )
        else:
            line.count += count
            if (at or "") > line.at:
                line.at, line.name = at, obj.get("name", "")
    return sorted(merged.values(), key=lambda e: e.at, reverse=True)[:limit]
