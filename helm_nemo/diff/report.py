"""How `helm nemo diff` shows a difference: one block per object for people (colours optional), one JSON
document for machines; secrets from the environment masked in both.

Text: a line per release that differs, then per object `~` changed / `+` added / `-` removed with its
identity, and under a changed object one line per field, `path: old → new` (`added`/`removed` for a
field only one side has). A changed multi-line text (a launcher script in a ConfigMap, a command) is a
unified diff. Nothing is printed for a release without differences.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass, field
from typing import Any

from helm_nemo.diff.admission import Refusal
from helm_nemo.diff.objects import ObjectDiff, plain
from helm_nemo.diff.semantic import Difference
from helm_nemo.secrets import MASK, Masker as SecretMasker

_INLINE = 100  # a value longer than this (as JSON) goes on its own lines


@dataclass
class ReleaseDiff:
    """One release's differences: installed or not, and each object that would change."""

    release: str
    chart: str
    namespace: str | None
    installed: bool
    objects: list[ObjectDiff] = field(default_factory=list)
    rendered: str = ""  # the manifest install/upgrade would send (not shown; upgrade classifies with it)

    @property
    def changed(self) -> bool:
        return bool(self.objects)


class Masker(SecretMasker):
    """helm_nemo.secrets.Masker (each value, its escaped and base64 forms as ***; a short one only as a whole
    or quoted value), as `helm nemo diff` uses it: `hides` says whether a value holds one."""

    def hides(self, value: Any) -> bool:
        return bool(self.value(value) != value)


def _pair(diff: Difference, masker: Masker) -> tuple[Any, Any]:
    """(old, new) for display, masked. Where the new value holds a secret, the old one is most likely the
    previous secret, which the environment no longer names: a value is then *** as a whole, and in a
    text the old lines that begin like a masked new line (`export HF_TOKEN=`) are masked from there on."""
    old, new = plain(diff.expected), plain(diff.actual)
    if isinstance(old, str) and isinstance(new, str) and (_is_text(old) or _is_text(new)):
        new = masker.text(new)
        return _mask_like(masker.text(old), new), new
    if masker.hides(new) or masker.hides(old):
        return (MASK if old is not None else None), masker.value(new)
    return old, new


def _mask_like(old: str, masked_new: str) -> str:
    found = {line[: line.index(MASK)] for line in masked_new.split("\n") if MASK in line}
    prefixes = sorted((p for p in found if p.strip()), key=len, reverse=True)
    lines = []
    for line in old.split("\n"):
        for prefix in prefixes:
            if line.startswith(prefix) and len(line) > len(prefix):
                line = prefix + MASK
                break
        lines.append(line)
    return "\n".join(lines)


def _is_text(value: Any) -> bool:
    return isinstance(value, str) and "\n" in value


def unified(old: str, new: str, masker: Masker | None = None) -> list[str]:
    """A unified diff of two texts; with a masker, computed on the real texts (a rotated secret is a changed
    line) and masked line by line."""
    lines = list(difflib.unified_diff(old.split("\n"), new.split("\n"), "installed", "to be sent", lineterm="", n=2))
    if masker is None:
        return lines
    masked_new = masker.text(new)
    out = []
    for line in lines:
        if line.startswith(("---", "+++", "@@")):
            out.append(line)
        elif line.startswith("-"):
            out.append("-" + _mask_like(masker.text(line[1:]), masked_new))
        else:
            out.append(line[:1] + masker.text(line[1:]))
    return out


def _refusals(obj: ObjectDiff) -> list[Refusal]:
    """What of a changed object the cluster will not change in place (helm_nemo/diff/admission.py)."""
    if obj.change != "changed" or not obj.old or not obj.new:
        return []
    from helm_nemo.diff.admission import refusals

    return refusals(obj.old, obj.new)


# ---- text ------------------------------------------------------------------------------------------------


class _Style:
    def __init__(self, color: bool):
        self.color = color

    def __call__(self, text: str, **style: Any) -> str:
        if not self.color:
            return text
        import click

        return click.style(text, **style)


def _show(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=False)


def _block(value: Any, mark: str, indent: str, style: _Style, colour: str) -> list[str]:
    import yaml

    text = yaml.safe_dump(value, sort_keys=False, default_flow_style=False, allow_unicode=True, width=100).rstrip("\n")
    return [style(f"{indent}{mark} {line}", fg=colour) for line in text.split("\n")]


def _field_lines(diff: Difference, masker: Masker, style: _Style) -> list[str]:
    old, new = _pair(diff, masker)
    indent = "    "
    path = diff.path or "."
    if diff.change == "changed" and _is_text(old) and _is_text(new):
        lines = [f"{indent}{path}:"]
        for line in unified(plain(diff.expected), plain(diff.actual), masker):
            colour = {"+": "green", "-": "red", "@": "cyan"}.get(line[:1])
            lines.append(style(f"{indent}    {line}", fg=colour) if colour else f"{indent}    {line}")
        return lines
    if diff.change == "changed":
        shown_old, shown_new = _show(old), _show(new)
        if len(shown_old) + len(shown_new) <= _INLINE * 2 and "\n" not in shown_old + shown_new:
            return [f"{indent}{path}: {style(shown_old, fg='red')} → {style(shown_new, fg='green')}"]
        return (
            [f"{indent}{path}:"]
            + _block(old, "-", indent + "  ", style, "red")
            + _block(new, "+", indent + "  ", style, "green")
        )
    value, mark, colour = (new, "+", "green") if diff.change == "added" else (old, "-", "red")
    shown = _show(value)
    if len(shown) <= _INLINE and not _is_text(value):
        return [f"{indent}{path}: {style(diff.change + ' ' + shown, fg=colour)}"]
    return [f"{indent}{path}: {style(diff.change, fg=colour)}"] + _block(value, mark, indent + "  ", style, colour)


def render_text(releases: list[ReleaseDiff], masker: Masker, color: bool = False) -> str:
    style = _Style(color)
    lines: list[str] = []
    for release in releases:
        if not release.changed:
            continue
        counts: dict[str, int] = {}
        for obj in release.objects:
            counts[obj.change] = counts.get(obj.change, 0) + 1
        summary = ", ".join(f"{n} {change}" for change, n in counts.items())
        where = f" in {release.namespace}" if release.namespace else ""
        state = "" if release.installed else "not installed; "
        if lines:
            lines.append("")
        lines.append(style(f"release {release.release}{where} ({release.chart}): {state}{summary}", bold=True))
        for obj in release.objects:
            mark, colour = {"changed": ("~", "yellow"), "added": ("+", "green"), "removed": ("-", "red")}[obj.change]
            lines.append(
                style(f"{mark} {masker.text(str(obj.id))}", fg=colour, bold=True)
                + ("" if obj.change == "changed" else style(f"  ({obj.change})", fg=colour))
            )
            for refusal in _refusals(obj):
                lines.append(
                    style(
                        f"    needs a new workload: {refusal.reason} (helm nemo upgrade --recreate or --new-run)",
                        fg="magenta",
                    )
                )
            for diff in obj.fields:
                lines += _field_lines(diff, masker, style)
    return "\n".join(lines)


# ---- JSON ------------------------------------------------------------------------------------------------


def _field_json(diff: Difference, masker: Masker) -> dict[str, Any]:
    old, new = _pair(diff, masker)
    out: dict[str, Any] = {"path": diff.path, "change": diff.change}
    if diff.change in ("changed", "removed"):
        out["old"] = old
    if diff.change in ("changed", "added"):
        out["new"] = new
    if diff.change == "changed" and _is_text(old) and _is_text(new):
        out["unified"] = "\n".join(unified(plain(diff.expected), plain(diff.actual), masker))
    return out


def as_json(releases: list[ReleaseDiff], masker: Masker) -> dict[str, Any]:
    out = []
    for release in releases:
        objects = []
        for obj in release.objects:
            entry: dict[str, Any] = {**obj.id.as_json(), "change": obj.change}
            if obj.change == "changed":
                entry["needsNewWorkload"] = [{"path": r.path, "reason": r.reason} for r in _refusals(obj)]
                entry["fields"] = [_field_json(d, masker) for d in obj.fields]
            else:
                entry["object"] = masker.value(obj.new if obj.change == "added" else obj.old)
            objects.append(masker.value(entry) if obj.change != "changed" else entry)
        out.append(
            {
                "release": release.release,
                "chart": release.chart,
                "namespace": release.namespace,
                "installed": release.installed,
                "changed": release.changed,
                "objects": objects,
            }
        )
    return {"changed": any(r.changed for r in releases), "releases": out}


def render_json(releases: list[ReleaseDiff], masker: Masker) -> str:
    return json.dumps(as_json(releases, masker), indent=2, ensure_ascii=False)
