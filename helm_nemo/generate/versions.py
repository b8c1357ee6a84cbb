"""Version policy: a chart's content may change only together with its version.

`generator/versions.lock` records, per chart name and version, a digest of the chart's files as
generated (sha256 over the sorted relative paths and their bytes; every file of the chart folder
counts). A version is *released* once CHANGELOG.md has an entry for it
(`## <chart name or kind> <version>`); `helm-nemo generate` then adds its lock entry, and never
rewrites one. `helm-nemo generate --check` fails when a chart's content differs from the entry of its
current version (naming the next patch version to use), when a released version is not locked, or when
CHANGELOG.md and the lock disagree (a locked version without an entry, an entry that nothing locks). A
version without a CHANGELOG entry is work in progress: free to change, not locked, not publishable. The same
digest goes into the published chart as the `helm-nemo.dev/content-digest` annotation, which is how `publish`
tells "same content" apart.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: importing typing costs every run start-up time
    from typing import Any

from helm_nemo import resources

LOCK_NAME = "versions.lock"
CONTENT_DIGEST_ANNOTATION = "helm-nemo.dev/content-digest"
# SemVer 2.0.0, strict (no leading "v", no leading zeros); https://semver.org regex.
SEMVER = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$"
)
_FIELD = re.compile(r'^(name|version):[ \t]*["\']?([^"\'\n#]+?)["\']?[ \t]*$', re.M)


@dataclass(frozen=True)
class ChartContent:
    """One chart folder: where it is (relative to charts/), its name and version, its files."""

    folder: str
    name: str
    version: str
    files: dict[str, bytes]  # path relative to the chart folder -> bytes

    @property
    def digest(self) -> str:
        return content_digest(self.files)


def content_digest(files: dict[str, bytes]) -> str:
    digest = hashlib.sha256()
    for rel in sorted(files):
        digest.update(rel.encode() + b"\0" + files[rel] + b"\0")
    return "sha256:" + digest.hexdigest()


def chart_fields(chart_yaml: bytes) -> tuple[str, str]:
    """(name, version) of a Chart.yaml; a regex for the generated form, YAML for anything else."""
    text = chart_yaml.decode("utf-8")
    found = {m.group(1): m.group(2) for m in _FIELD.finditer(text)}
    if "name" not in found or "version" not in found:
        import yaml

        data = yaml.safe_load(text) or {}
        found = {"name": str(data.get("name", "")), "version": str(data.get("version", ""))}
    return found["name"].strip(), found["version"].strip()


def split_charts(files: dict[str, bytes]) -> list[ChartContent]:
    """Files keyed by path relative to charts/ -> one ChartContent per folder holding a Chart.yaml."""
    folders = sorted(rel[: -len("/Chart.yaml")] for rel in files if rel.endswith("/Chart.yaml"))
    grouped: dict[str, dict[str, bytes]] = {folder: {} for folder in folders}
    for rel, data in files.items():
        for folder in folders:
            if rel.startswith(folder + "/"):
                grouped[folder][rel[len(folder) + 1 :]] = data
                break
    out = []
    for folder in folders:
        name, version = chart_fields(grouped[folder]["Chart.yaml"])
        out.append(ChartContent(folder=folder, name=name, version=version, files=grouped[folder]))
    return out


def read_chart(folder: Path) -> ChartContent:
    """A chart folder on disk (every file under it)."""
    files = {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}
    if "Chart.yaml" not in files:
        raise FileNotFoundError(f"{folder} has no Chart.yaml")
    name, version = chart_fields(files["Chart.yaml"])
    return ChartContent(folder=folder.name, name=name, version=version, files=files)


def read_charts(charts: Path) -> list[ChartContent]:
    files = {p.relative_to(charts).as_posix(): p.read_bytes() for p in charts.rglob("*") if p.is_file()}
    return split_charts(files)


def lock_path(root: Path | None = None) -> Path:
    return (root or resources.data_root()) / "generator" / LOCK_NAME


def load_lock(root: Path | None = None) -> dict[str, dict[str, str]]:
    """{chart name: {version: digest}}; empty when there is no lock file yet."""
    path = lock_path(root)
    if not path.exists():
        return {}
    charts: dict[str, dict[str, str]] = json.loads(path.read_text(encoding="utf-8")).get("charts", {})
    return charts


def lock_text(lock: dict[str, dict[str, str]]) -> str:
    ordered = {name: dict(sorted(lock[name].items(), key=lambda kv: version_key(kv[0]))) for name in sorted(lock)}
    doc = {
        "about": "Chart content digests per released version, written by `helm-nemo generate`; "
        "never edit an entry: bump the chart's version in generator/charts.yaml instead.",
        "charts": ordered,
    }
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


def version_key(version: str) -> tuple[Any, ...]:
    """SemVer precedence (enough for sorting: release > pre-release, numeric parts compared as numbers)."""
    found = SEMVER.match(version)
    if not found:
        return (1 << 30, 0, 0, 0, version)
    major, minor, patch, pre, _build = found.groups()
    return (int(major), int(minor), int(patch), 0 if pre else 1, pre or "")


def next_patch(versions: list[str]) -> str:
    """One patch above the highest of `versions` (strict SemVer ones)."""
    valid = [v for v in versions if SEMVER.match(v)]
    if not valid:
        return "1.0.0"
    highest = SEMVER.match(max(valid, key=version_key))
    assert highest is not None  # one of `valid`
    major, minor, patch, pre, _ = highest.groups()
    # 1.1.0-rc.1 -> 1.1.0 is the next version; 1.0.0 -> 1.0.1
    return f"{major}.{minor}.{patch}" if pre else f"{major}.{minor}.{int(patch) + 1}"


_HEADING = re.compile(r"^##\s+([A-Za-z0-9][A-Za-z0-9._-]*)\s+v?(\S+)", re.M)


def changelog_entries(root: Path | None = None) -> set[tuple[str, str]]:
    """(chart name or kind, version) of every `## <name> <version>` heading of CHANGELOG.md."""
    path = (root or resources.data_root()) / "CHANGELOG.md"
    if not path.exists():
        return set()
    return {(m.group(1), m.group(2)) for m in _HEADING.finditer(path.read_text(encoding="utf-8"))}


def _accelerators(root: Path | None) -> set[str]:
    return {p.stem for p in ((root or resources.data_root()) / "values" / "accelerators").glob("*.yaml")}


def chart_kind(name: str, accelerators: set[str]) -> str | None:
    """The kind of an accelerator chart `<kind>-<accelerator>` (accelerator names may hold dashes: `a4x-max`)."""
    for accelerator in accelerators:
        if name.endswith("-" + accelerator) and len(name) > len(accelerator) + 1:
            return name[: -len(accelerator) - 1]
    return None


def released(name: str, version: str, entries: set[tuple[str, str]], accelerators: set[str]) -> bool:
    """Whether CHANGELOG.md has an entry for this chart version (by chart name, or by kind for `<kind>-<accelerator>`)."""
    if (name, version) in entries:
        return True
    kind = chart_kind(name, accelerators)
    return kind is not None and (kind, version) in entries


def release_record_problems(
    lock: dict[str, dict[str, str]], entries: set[tuple[str, str]], accelerators: set[str]
) -> list[str]:
    """The changelog and the lock must say the same: a locked version is announced, an announced one is locked
    (a kind's entry by at least one of its accelerator charts), or users look for a chart that was never pushed."""
    problems = []
    for name in sorted(lock):
        for version in sorted(lock[name], key=version_key):
            if not released(name, version, entries, accelerators):
                problems.append(
                    f"release: {name} {version} is in generator/{LOCK_NAME} but CHANGELOG.md has no "
                    f"entry for it; add `## {chart_kind(name, accelerators) or name} {version}` to "
                    "CHANGELOG.md saying what it changed"
                )
    locked = {(chart_kind(name, accelerators) or name, version) for name in lock for version in lock[name]}
    locked |= {(name, version) for name in lock for version in lock[name]}
    for name, version in sorted(entries - locked):
        problems.append(
            f"release: CHANGELOG.md announces {name} {version} but no chart of that version is in "
            f"generator/{LOCK_NAME}; set the version in generator/charts.yaml and run `helm-nemo generate` "
            "to release it, or remove the entry if it is not released"
        )
    return problems


def lock_problems(root: Path | None, files: dict[str, bytes]) -> list[str]:
    """Why the generated charts (`files`, relative to charts/) break the version policy; empty when fine."""
    lock = load_lock(root)
    entries, accelerators = changelog_entries(root), _accelerators(root)
    problems = []
    charts = split_charts(files)
    # versions about to be locked by `generate` count as locked for the changelog check
    pending = {
        chart.name: {chart.version: chart.digest}
        for chart in charts
        if SEMVER.match(chart.version) and released(chart.name, chart.version, entries, accelerators)
    }
    merged = {name: {**pending.get(name, {}), **lock.get(name, {})} for name in set(lock) | set(pending)}
    problems += release_record_problems(merged, entries, accelerators)
    for chart in charts:
        where = f"charts/{chart.folder}"
        if not SEMVER.match(chart.version):
            problems.append(f"version: {chart.name} ({where}): {chart.version!r} is not strict SemVer (like 1.2.3)")
            continue
        locked = lock.get(chart.name, {})
        if chart.version not in locked:
            if released(chart.name, chart.version, entries, accelerators):
                problems.append(
                    f"version: {chart.name} {chart.version} ({where}) has a CHANGELOG.md entry but is not in "
                    f"generator/{LOCK_NAME}; run `helm-nemo generate` to record it"
                )
        elif locked[chart.version] != chart.digest:
            use = next_patch(list(locked) + [chart.version])
            problems.append(
                f"version: {chart.name} {chart.version} ({where}): content changed but the version did not; "
                f"use {use} (bump it in generator/charts.yaml, add a CHANGELOG.md entry, run `helm-nemo generate`). "
                f"Only if {chart.version} was never published may its entry be deleted from generator/{LOCK_NAME} instead."
            )
    return problems


def record(root: Path | None = None, files: dict[str, bytes] | None = None) -> list[str]:
    """Lock released chart versions (with a CHANGELOG.md entry) not locked yet; never rewrite an entry.

    Returns the "name version" strings added.

    `files` default to what is under charts/ now (call it after `generator.write`).
    """
    root = root or resources.data_root()
    charts = read_charts(root / "charts") if files is None else split_charts(files)
    lock = load_lock(root)
    entries, accelerators = changelog_entries(root), _accelerators(root)
    added = []
    for chart in charts:
        if (
            SEMVER.match(chart.version)
            and chart.version not in lock.get(chart.name, {})
            and released(chart.name, chart.version, entries, accelerators)
        ):
            lock.setdefault(chart.name, {})[chart.version] = chart.digest
            added.append(f"{chart.name} {chart.version}")
    path = lock_path(root)
    text = lock_text(lock)
    if added or not path.exists() or path.read_text(encoding="utf-8") != text:
        path.write_text(text, encoding="utf-8")
    return added
