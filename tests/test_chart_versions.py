"""Version policy: generator/versions.lock, CHANGELOG.md entries, `generate` / `generate --check`."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from helm_nemo.generate import versions as chart_versions

from helm_nemo.generate import charts as generator
from helm_nemo.cli import main
from helm_nemo.actions.publish import with_digest_annotation

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def project(tmp_path) -> Path:
    for folder in ("generator", "schemas", "values", "charts"):
        shutil.copytree(ROOT / folder, tmp_path / folder)
    shutil.copy(ROOT / "CHANGELOG.md", tmp_path / "CHANGELOG.md")
    return tmp_path


def generate(project: Path, *args: str):
    return CliRunner().invoke(main, ["generate", *args], env={"HELM_NEMO_HOME": str(project)})


def set_version(project: Path, kind: str, version: str) -> None:
    path = project / "generator/charts.yaml"
    text = path.read_text()
    marker = f"  - kind: {kind}\n    version: "
    start = text.index(marker) + len(marker)
    end = text.index("\n", start)
    path.write_text(text[:start] + version + text[end:])


def current_version(kind: str) -> str:
    import yaml

    (spec,) = [c for c in yaml.safe_load((ROOT / "generator/charts.yaml").read_text())["charts"] if c["kind"] == kind]
    return str(spec["version"])


def bump(version: str, by: int = 1) -> str:
    major, minor, patch = version.split(".")
    return f"{major}.{minor}.{int(patch) + by}"


JOBSET = current_version("jobset")  # the released jobset version the lock records
FSX = current_version("fsx-lustre")


def edit_jobset_source(project: Path) -> None:
    source = project / "generator/jobset/values.yaml.j2"
    source.write_text(source.read_text() + "# a new comment changes every jobset chart\n")


def test_every_locked_version_has_a_changelog_entry():
    entries = chart_versions.changelog_entries(ROOT)
    accelerators = {p.stem for p in (ROOT / "values/accelerators").glob("*.yaml")}
    lock = chart_versions.load_lock(ROOT)
    assert lock, "generator/versions.lock is empty"
    missing = [
        f"{name} {version}"
        for name, versions in lock.items()
        for version in versions
        if not chart_versions.released(name, version, entries, accelerators)
    ]
    assert missing == [], "add CHANGELOG.md entries (## <chart or kind> <version>)"


def test_lock_file_is_sorted_and_deterministic():
    text = chart_versions.lock_path(ROOT).read_text()
    assert chart_versions.lock_text(chart_versions.load_lock(ROOT)) == text
    assert list(json.loads(text)["charts"]) == sorted(json.loads(text)["charts"])


def test_released_charts_match_the_lock():
    problems = [p for p in generator.check(ROOT) if p.startswith(("version: ", "release: "))]
    assert problems == []


def test_accelerator_names_with_dashes_name_their_kind():
    accelerators = {p.stem for p in (ROOT / "values/accelerators").glob("*.yaml")}
    assert "a4x-max" in accelerators
    assert chart_versions.chart_kind("jobset-a4x-max", accelerators) == "jobset"
    assert chart_versions.chart_kind("nemo-training-a4x", accelerators) == "nemo-training"
    assert chart_versions.chart_kind("fsx-lustre", accelerators) is None
    assert chart_versions.released("jobset-a4x-max", JOBSET, chart_versions.changelog_entries(ROOT), accelerators)


def test_a_locked_version_without_its_changelog_entry_fails_the_check(project):
    changelog = project / "CHANGELOG.md"
    changelog.write_text(changelog.read_text().replace("## gcs-fuse 1.0.0", "## (entry lost) 1.0.0"))
    problems = [p for p in generator.check(project) if p.startswith("release: ")]
    assert problems == [
        "release: gcs-fuse 1.0.0 is in generator/versions.lock but CHANGELOG.md has no entry for it; "
        "add `## gcs-fuse 1.0.0` to CHANGELOG.md saying what it changed"
    ]
    assert generate(project, "--check").exit_code == 1


def test_an_announced_version_nothing_locks_fails_the_check(project):
    changelog = project / "CHANGELOG.md"
    changelog.write_text(
        changelog.read_text().replace("## jobset ", "## jobset 9.9.9\n\nNot generated.\n\n## jobset ", 1)
    )
    problems = [p for p in generator.check(project) if p.startswith("release: ")]
    assert len(problems) == 1 and problems[0].startswith("release: CHANGELOG.md announces jobset 9.9.9 but no chart")
    check = generate(project, "--check")
    assert check.exit_code == 1 and "jobset 9.9.9" in check.output


def test_an_announced_accelerator_chart_that_is_not_locked_fails_the_check(project):
    """The jobset-a4x-max case: the changelog's `## jobset 1.1.0` covers it, so it must be locked."""
    lock = chart_versions.load_lock(project)
    del lock["jobset-a4x-max"]
    chart_versions.lock_path(project).write_text(chart_versions.lock_text(lock))
    assert [p for p in generator.check(project) if "jobset-a4x-max" in p] == [
        f"version: jobset-a4x-max {JOBSET} (charts/a4x-max/jobset) has a CHANGELOG.md entry but is not in "
        "generator/versions.lock; run `helm-nemo generate` to record it"
    ]
    assert generate(project).exit_code == 0
    assert "jobset-a4x-max" in chart_versions.load_lock(project)


def test_content_change_without_bump_fails_with_next_version(project):
    before = chart_versions.lock_path(project).read_bytes()
    edit_jobset_source(project)
    result = generate(project)
    assert result.exit_code == 1
    assert (
        f"jobset-a3ultra {JOBSET} (charts/a3ultra/jobset): content changed but the version did not; use {bump(JOBSET)}"
        in result.output
    )
    assert chart_versions.lock_path(project).read_bytes() == before, "a locked entry was rewritten"
    check = generate(project, "--check")
    assert check.exit_code == 1
    assert "chart versions break the version policy" in check.output
    assert f"use {bump(JOBSET)}" in check.output
    problems = generator.check(project)
    assert [p for p in problems if "jobset-" in p and f"use {bump(JOBSET)}" in p]
    assert not [p for p in problems if "nemo-training-" in p], "only the changed kind is named"


def test_next_version_is_above_every_locked_one(project):
    lock = chart_versions.load_lock(project)
    lock["jobset-a4"][bump(JOBSET, 4)] = "sha256:" + "0" * 64
    chart_versions.lock_path(project).write_text(chart_versions.lock_text(lock))
    edit_jobset_source(project)
    generator.write(project)
    assert any(
        p.startswith(f"version: jobset-a4 {JOBSET}") and f"use {bump(JOBSET, 5)}" in p for p in generator.check(project)
    )


def test_new_version_with_changelog_entry_adds_lock_entries(project):
    before = chart_versions.load_lock(project)
    edit_jobset_source(project)
    set_version(project, "jobset", bump(JOBSET))
    changelog = project / "CHANGELOG.md"
    changelog.write_text(
        changelog.read_text().replace(
            f"## jobset {JOBSET}", f"## jobset {bump(JOBSET)}\n\nA comment.\n\n## jobset {JOBSET}"
        )
    )
    result = generate(project)
    assert result.exit_code == 0, result.output
    assert f"locked jobset-a3ultra {bump(JOBSET)}" in result.output
    after = chart_versions.load_lock(project)
    jobsets = sorted(name for name in after if name.startswith("jobset-"))
    assert len(jobsets) >= 8
    for name in jobsets:
        assert {v: d for v, d in after[name].items() if v != bump(JOBSET)} == before[name], "an existing entry changed"
        assert list(after[name])[-1] == bump(JOBSET)
    assert {n: v for n, v in after.items() if not n.startswith("jobset-")} == {
        n: v for n, v in before.items() if not n.startswith("jobset-")
    }
    assert generate(project, "--check").exit_code == 0


def test_version_without_changelog_entry_is_work_in_progress(project):
    edit_jobset_source(project)
    set_version(project, "jobset", "1.1.0-dev.1")
    result = generate(project)
    assert result.exit_code == 0, result.output
    assert "locked" not in result.output
    assert "1.1.0-dev.1" not in chart_versions.lock_path(project).read_text()
    assert generate(project, "--check").exit_code == 0


def test_released_but_unlocked_version_fails_check(project):
    lock = chart_versions.load_lock(project)
    del lock["fsx-lustre"]
    chart_versions.lock_path(project).write_text(chart_versions.lock_text(lock))
    result = generate(project, "--check")
    assert result.exit_code == 1
    assert (
        f"fsx-lustre {FSX} (charts/fsx-lustre) has a CHANGELOG.md entry but is not in generator/versions.lock"
        in result.output
    )


def test_generate_twice_is_stable(project):
    first = generate(project)
    lock = chart_versions.lock_path(project).read_bytes()
    second = generate(project)
    assert first.exit_code == second.exit_code == 0
    assert "0 file(s) changed" in second.output and "locked" not in second.output
    assert chart_versions.lock_path(project).read_bytes() == lock


def test_lock_is_no_input_of_the_charts(project):
    """Writing the lock does not make charts/ look stale (its marker digests the generator sources)."""
    assert generate(project, "--check").exit_code == 0
    lock = chart_versions.lock_path(project)
    lock.write_text(lock.read_text().replace('"about": "', '"about": "x'))
    assert generator.check(project) == []


@pytest.mark.parametrize(
    "versions, expected",
    [
        (["1.0.0"], "1.0.1"),
        (["1.0.0", "1.2.9", "1.10.0"], "1.10.1"),
        (["2.0.0-rc.1"], "2.0.0"),
        ([], "1.0.0"),
    ],
)
def test_next_patch(versions, expected):
    assert chart_versions.next_patch(versions) == expected


def test_content_digest_covers_paths_and_bytes():
    base = {"Chart.yaml": b"name: a\nversion: 1.0.0\n", "templates/x.yaml": b"x"}
    digest = chart_versions.content_digest(base)
    assert digest == chart_versions.content_digest(dict(reversed(base.items())))
    assert digest != chart_versions.content_digest({**base, "templates/x.yaml": b"y"})
    assert digest != chart_versions.content_digest({"Chart.yaml": base["Chart.yaml"], "templates/y.yaml": b"x"})
    assert digest != chart_versions.content_digest({**base, ".helmignore": b""})


def test_digest_annotation_is_added_without_touching_the_rest():
    text = (ROOT / "charts/a3ultra/jobset/Chart.yaml").read_text()
    out = with_digest_annotation(text, "sha256:abc")
    assert out.replace('  helm-nemo.dev/content-digest: "sha256:abc"\n', "") == text
    import yaml

    assert yaml.safe_load(out)["annotations"]["helm-nemo.dev/content-digest"] == "sha256:abc"
    bare = with_digest_annotation("apiVersion: v2\nname: a\nversion: 1.0.0\n", "sha256:abc")
    assert yaml.safe_load(bare)["annotations"] == {"helm-nemo.dev/content-digest": "sha256:abc"}
