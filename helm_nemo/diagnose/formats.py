"""Logs exported by a log shipper, one JSON object a line, read as the pod logs they hold.

Cloud Logging (`gcloud logging read --format=json`, the console's download: `textPayload` or `jsonPayload.message`,
`timestamp`, `resource.labels.pod_name`), CloudWatch Logs (`aws logs filter-log-events` / an export: `message`,
`timestamp` in ms, `logStreamName`; Logs Insights: `@message`, `@timestamp`, `@logStream`; Container Insights nests
fluent-bit's record `{"log": …, "kubernetes": {"pod_name": …}}` in `message`), fluent-bit/Docker (`log`, `time`).
Each entry becomes its lines, stamped with the entry's time as `kubectl logs --timestamps` stamps them, in time
order (exports are often newest first), one text per pod when the export holds several. A text that is not such an
export is returned as it is.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only
    from typing import Any

SNIFF_LINES = 5  # the first entries that must be JSON objects with a message for a text to be an export
_MESSAGE_KEYS = ("textPayload", "message", "@message", "log", "MESSAGE", "msg")
_TIME_KEYS = ("timestamp", "@timestamp", "time", "receiveTimestamp", "ingestionTime")


def expand(name: str, text: str) -> list[tuple[str, str]]:
    """[(name, log text)]: the pods of an export (`name:pod` when there are several), else [(name, text)]."""
    if text.lstrip()[:1] not in ("{", "["):
        return [(name, text)]
    entries = _entries(text)
    if entries is None:
        return [(name, text)]
    rows: list[tuple[str, int, str, str]] = []  # (time, order, pod, message)
    for order, entry in enumerate(entries):
        message, pod = _message(entry)
        if message is None:
            continue
        rows.append((_time(entry), order, pod, message))
    if not rows:
        return [(name, text)]
    if all(row[0] for row in rows):
        rows.sort()
    pods: dict[str, list[str]] = {}
    for when, _order, pod, message in rows:
        lines = message.rstrip("\n").split("\n") or [""]
        pods.setdefault(pod, []).extend(f"{when} {line}" if when else line for line in lines)
    if len(pods) == 1:
        return [(name, "\n".join(next(iter(pods.values()))) + "\n")]
    return [(f"{name}:{pod or '-'}", "\n".join(lines) + "\n") for pod, lines in pods.items()]


def _entries(text: str) -> list[dict[str, Any]] | None:
    stripped = text.lstrip()
    if stripped.startswith("["):  # one JSON array (the Cloud Logging console's download)
        try:
            data = json.loads(stripped)
        except ValueError:
            return None
        return [e for e in data if isinstance(e, dict)] if isinstance(data, list) else None
    out: list[dict[str, Any]] = []
    for count, line in enumerate(text.splitlines()):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            if count < SNIFF_LINES:
                return None
            continue  # a torn line in an export: skipped
        if not isinstance(entry, dict):
            return None
        if len(out) < SNIFF_LINES and _message(entry)[0] is None:
            return None
        out.append(entry)
    return out


def _message(entry: dict[str, Any]) -> tuple[str | None, str]:
    """(the log line(s) an entry carries, the pod it names)."""
    pod = _pod(entry)
    payload = entry.get("jsonPayload")
    if isinstance(payload, dict):
        for key in ("message", "log", "msg", "textPayload"):
            if isinstance(payload.get(key), str):
                return payload[key], pod or _pod(payload)
    for key in _MESSAGE_KEYS:
        value = entry.get(key)
        if isinstance(value, str):
            if value.startswith("{") and key in ("message", "@message"):
                try:  # Container Insights: fluent-bit's record inside CloudWatch's message
                    inner = json.loads(value)
                except ValueError:
                    inner = None
                if isinstance(inner, dict) and isinstance(inner.get("log"), str):
                    return inner["log"], pod or _pod(inner)
            return value, pod
    return None, pod


def _pod(entry: dict[str, Any]) -> str:
    labels = (entry.get("resource") or {}).get("labels") if isinstance(entry.get("resource"), dict) else None
    if isinstance(labels, dict) and labels.get("pod_name"):
        return str(labels["pod_name"])
    kube = entry.get("kubernetes")
    if isinstance(kube, dict) and kube.get("pod_name"):
        return str(kube["pod_name"])
    for key in ("logStreamName", "@logStream"):
        if entry.get(key):
            return str(entry[key])
    return ""


def _time(entry: dict[str, Any]) -> str:
    """The entry's time as the kubelet writes it (RFC 3339, UTC, nanoseconds), or ""."""
    for key in _TIME_KEYS:
        value = entry.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            seconds = value / 1000 if value > 1e11 else value  # CloudWatch: milliseconds since the epoch
            when = datetime.fromtimestamp(seconds, UTC)
            return when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond:06d}000Z"
        if isinstance(value, str) and len(value) >= 19 and value[4:5] == "-":
            text = value.replace(" ", "T", 1)
            if text.endswith("+00:00"):
                text = text[:-6] + "Z"
            if not (text.endswith("Z") or text[-6:-5] in "+-"):
                text += "Z"
            return text
    return ""
