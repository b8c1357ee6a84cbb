"""`helm nemo publish oci://HOST/PATH`: package the generated charts and push them, never overwriting a version.

For each chart: ask the registry for `NAME:VERSION` (`helm show chart`, with helm's own credentials
from `helm registry login`). Absent -> package a staged copy and `helm push` it. Present -> compare
the chart content digest (the one generator/versions.lock records) with the registry's
`helm-nemo.dev/content-digest` Chart.yaml annotation, which publish adds to the staged copy and helm
copies into the OCI manifest annotations: equal -> skipped; different or missing -> refused. A run
with any refusal pushes nothing (exit 1).

Why a content digest and not the OCI digest: Helm 3 writes tar entries with mtime = now, so the same
chart packages to a different .tgz (and manifest digest) every run. Helm 4 takes the mtimes from the
files, and both take the manifest's `org.opencontainers.image.created` from the .tgz's mtime, so the
staged copy and the .tgz get a fixed mtime ($SOURCE_DATE_EPOCH, else 1980-01-01): with Helm 4 the same
chart gives the same manifest digest on every run and machine.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Callable

from helm_nemo.generate.versions import CONTENT_DIGEST_ANNOTATION, SEMVER, ChartContent, load_lock, read_chart
from helm_nemo.actions.helm import HelmBinary

DEFAULT_EPOCH = 315532800  # 1980-01-01T00:00:00Z
Echo = Callable[[str], None]


class PublishError(Exception):
    pass


@dataclass
class Outcome:
    """What publishing did with one chart (pushed, skipped as already there, refused ...)."""

    chart: str
    version: str
    content_digest: str
    status: str = "pending"  # pushed | skipped | refused | failed | unreleased | not pushed | pending
    oci_digest: str = ""
    reason: str = ""


def find_charts(charts_dir: Path, wanted: list[str] | None = None) -> list[tuple[Path, ChartContent]]:
    """Chart folders under charts_dir (every folder with a Chart.yaml), optionally only the named ones.

    A name matches a chart name (jobset-a3ultra), its folder (a3ultra/jobset) or a kind (jobset: all of them).
    """
    found = []
    for chart_yaml in sorted(charts_dir.rglob("Chart.yaml")):
        folder = chart_yaml.parent
        found.append((folder, read_chart(folder)))
    if not wanted:
        return found
    picked, unknown = [], []
    for name in wanted:
        hits = [
            (f, c)
            for f, c in found
            if name in (c.name, f.relative_to(charts_dir).as_posix())
            or c.name.startswith(name + "-")
            and f.name == name
        ]
        if not hits:
            unknown.append(name)
        picked += [h for h in hits if h not in picked]
    if unknown:
        names = ", ".join(sorted(c.name for _, c in found))
        raise PublishError(f"no chart {', '.join(unknown)} under {charts_dir} (have: {names})")
    return picked


def _ref(target: str, name: str) -> str:
    return f"{target.rstrip('/')}/{name}"


def _helm(helm: HelmBinary, *args: str, plain_http: bool) -> subprocess.CompletedProcess[str]:
    cmd = [helm.path, *args] + (["--plain-http"] if plain_http else [])
    return subprocess.run(cmd, capture_output=True, text=True, check=False)


def _digest_line(stderr: str) -> str:
    found = re.search(r"^Digest:\s*(sha256:[0-9a-f]{64})", stderr, re.M)
    return found.group(1) if found else ""


def remote_state(helm: HelmBinary, target: str, chart: ChartContent, plain_http: bool) -> tuple[bool, str, str]:
    """(exists, content digest annotation or "", OCI manifest digest or "") of NAME:VERSION in the registry."""
    import yaml

    proc = _helm(helm, "show", "chart", _ref(target, chart.name), "--version", chart.version, plain_http=plain_http)
    if proc.returncode != 0:
        if re.search(r": not found\s*$", proc.stderr.strip(), re.M):
            return False, "", ""
        raise PublishError(
            f"cannot read {_ref(target, chart.name)}:{chart.version} from the registry: "
            f"{proc.stderr.strip() or 'helm exit ' + str(proc.returncode)}"
        )
    meta = yaml.safe_load(proc.stdout) or {}
    annotations = meta.get("annotations") or {}
    return True, str(annotations.get(CONTENT_DIGEST_ANNOTATION, "")), _digest_line(proc.stderr)


def with_digest_annotation(chart_yaml: str, digest: str) -> str:
    """Chart.yaml text with the content digest annotation added (the rest byte-for-byte unchanged)."""
    line = f'{CONTENT_DIGEST_ANNOTATION}: "{digest}"'
    lines = chart_yaml.split("\n")
    for index, text in enumerate(lines):
        if re.match(r"^annotations:\s*(#.*)?$", text):
            following = next((t for t in lines[index + 1 :] if t.strip()), "")
            indent = (
                following[: len(following) - len(following.lstrip())] if following.startswith((" ", "\t")) else "  "
            )
            lines.insert(index + 1, indent + line)
            return "\n".join(lines)
    return chart_yaml.rstrip("\n") + f"\nannotations:\n  {line}\n"


def source_date_epoch() -> int:
    value = os.environ.get("SOURCE_DATE_EPOCH", "")
    return int(value) if value.isdigit() else DEFAULT_EPOCH


def package(helm: HelmBinary, folder: Path, chart: ChartContent, work: Path) -> Path:
    """A .tgz of a staged copy of the chart (with the digest annotation, fixed mtimes)."""
    import yaml

    stage = work / "stage" / chart.name
    shutil.copytree(folder, stage)
    chart_yaml = stage / "Chart.yaml"
    chart_yaml.write_text(
        with_digest_annotation(chart_yaml.read_text(encoding="utf-8"), chart.digest), encoding="utf-8"
    )
    staged = yaml.safe_load(chart_yaml.read_text(encoding="utf-8"))
    if (staged.get("annotations") or {}).get(CONTENT_DIGEST_ANNOTATION) != chart.digest:
        raise PublishError(f"{chart.name}: could not add the {CONTENT_DIGEST_ANNOTATION} annotation to Chart.yaml")
    epoch = source_date_epoch()
    for path in [stage, *stage.rglob("*")]:
        os.utime(path, (epoch, epoch))
    out = work / "packages" / chart.name
    out.mkdir(parents=True)
    proc = subprocess.run(
        [helm.path, "package", str(stage), "-d", str(out)], capture_output=True, text=True, check=False
    )
    tgz = sorted(out.glob("*.tgz"))
    if proc.returncode != 0 or len(tgz) != 1:
        raise PublishError(f"helm package {chart.name} failed: {proc.stderr.strip()}")
    os.utime(tgz[0], (epoch, epoch))  # helm takes org.opencontainers.image.created from it
    return tgz[0]


def _check(helm: HelmBinary, target: str, chart: ChartContent, plain_http: bool, outcome: Outcome) -> Outcome:
    exists, remote_digest, oci_digest = remote_state(helm, target, chart, plain_http)
    outcome.oci_digest = oci_digest
    if not exists:
        return outcome
    if remote_digest == chart.digest:
        outcome.status, outcome.reason = "skipped", "same content already in the registry"
    elif not remote_digest:
        outcome.status = "refused"
        outcome.reason = (
            f"{chart.name}:{chart.version} exists in the registry without a {CONTENT_DIGEST_ANNOTATION} "
            "annotation (not pushed by helm nemo); not overwriting it"
        )
    else:
        outcome.status = "refused"
        outcome.reason = (
            f"{chart.name}:{chart.version} exists in the registry with different content "
            f"({remote_digest}); bump the version instead of overwriting it"
        )
    return outcome


def _push(
    helm: HelmBinary, target: str, folder: Path, chart: ChartContent, plain_http: bool, work: Path, outcome: Outcome
) -> Outcome:
    try:
        tgz = package(helm, folder, chart, work)
        proc = _helm(helm, "push", str(tgz), target.rstrip("/"), plain_http=plain_http)
        if proc.returncode != 0:
            raise PublishError(proc.stderr.strip() or f"helm push exit {proc.returncode}")
        outcome.status, outcome.oci_digest = "pushed", _digest_line(proc.stderr)
    except PublishError as err:
        outcome.status, outcome.reason = "failed", str(err)
    return outcome


def publish(
    target: str,
    charts: list[tuple[Path, ChartContent]],
    helm: HelmBinary,
    *,
    plain_http: bool = False,
    jobs: int = 8,
    verify_lock: Path | None = None,
    echo: Echo = print,
) -> list[Outcome]:
    """Check every chart against the registry, then push the missing ones (none if any is refused).

    verify_lock: a project root whose generator/versions.lock must record each chart's version with
    the same content (None: skip that local check).
    """
    if not target.startswith("oci://"):
        raise PublishError(f"the target must be an oci:// reference, not {target!r}")
    outcomes = [Outcome(chart=c.name, version=c.version, content_digest=c.digest) for _, c in charts]
    lock = load_lock(verify_lock) if verify_lock is not None else None
    for (_, chart), outcome in zip(charts, outcomes, strict=True):
        if not SEMVER.match(chart.version):
            outcome.status, outcome.reason = "refused", f"version {chart.version!r} is not strict SemVer"
        elif lock is not None:
            locked = lock.get(chart.name, {}).get(chart.version)
            if locked is None:
                outcome.status, outcome.reason = (
                    "unreleased",
                    (
                        "no generator/versions.lock entry: work in progress, not published "
                        "(release it with a CHANGELOG.md entry and `helm-nemo generate`)"
                    ),
                )
            elif locked != chart.digest:
                outcome.status, outcome.reason = (
                    "refused",
                    (
                        f"{chart.name} {chart.version}: content differs from generator/versions.lock "
                        "(run `helm-nemo generate --check`)"
                    ),
                )
    todo = [(c, o) for c, o in zip(charts, outcomes, strict=True) if o.status == "pending"]
    total, done = len(charts), 0

    def progress(outcome: Outcome) -> None:
        nonlocal done
        done += 1
        detail = (
            outcome.reason
            if outcome.status in ("refused", "failed", "unreleased")
            else (outcome.oci_digest or outcome.content_digest)
        )
        echo(f"[{done}/{total}] {outcome.chart} {outcome.version}: {outcome.status} ({detail})")

    for outcome in outcomes:
        if outcome.status in ("refused", "unreleased"):
            progress(outcome)
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        checked = list(pool.map(lambda item: _safe(_check, helm, target, item[0][1], plain_http, item[1]), todo))
        for outcome in checked:
            if outcome.status != "pending":
                progress(outcome)
        if any(o.status in ("refused", "failed") for o in outcomes):
            for outcome in outcomes:
                if outcome.status == "pending":
                    outcome.status, outcome.reason = "not pushed", "another chart was refused"
            return outcomes
        with tempfile.TemporaryDirectory(prefix="helm-nemo-publish-") as tmp:
            missing = [((folder, chart), o) for (folder, chart), o in todo if o.status == "pending"]
            for outcome in pool.map(
                lambda item: _push(helm, target, item[0][0], item[0][1], plain_http, Path(tmp), item[1]), missing
            ):
                progress(outcome)
    return outcomes


def _safe(
    func: Callable[[HelmBinary, str, ChartContent, bool, Outcome], Outcome],
    helm: HelmBinary,
    target: str,
    chart: ChartContent,
    plain_http: bool,
    outcome: Outcome,
) -> Outcome:
    try:
        return func(helm, target, chart, plain_http, outcome)
    except PublishError as err:
        outcome.status, outcome.reason = "failed", str(err)
        return outcome


def summary_table(outcomes: list[Outcome]) -> str:
    rows = [("CHART", "VERSION", "CONTENT DIGEST", "OCI DIGEST", "STATUS")]
    for o in sorted(outcomes, key=lambda o: o.chart):
        rows.append((o.chart, o.version, _short(o.content_digest), _short(o.oci_digest) or "-", o.status))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in rows]
    counts: dict[str, int] = {}
    for o in outcomes:
        counts[o.status] = counts.get(o.status, 0) + 1
    lines.append(", ".join(f"{n} {status}" for status, n in sorted(counts.items())))
    return "\n".join(lines)


def _short(digest: str) -> str:
    return digest[: len("sha256:") + 12] if digest else ""
