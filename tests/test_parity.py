"""Parity with the gpu-recipes charts: same command line, semantically the same objects.

Each case of tests/parity/cases.yaml is rendered with its fixture's command.txt (CHART replaced by
our chart) on Helm 3 and Helm 4, and compared with the anchor's normalised render. Every difference
must be explained by an entry of tests/parity/allowed-differences.yaml that names the case, and every
entry must explain something in each case it names (so stale entries fail too). Each entry id is
documented in docs/compatibility.md.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from conftest import JOB_TIMESTAMP, render_fixture
from helm_nemo.diff.semantic import Difference, parse_manifests, semantic_diff

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "parity"
PARITY = ROOT / "tests" / "parity"
_yaml = YAML(typ="safe", pure=True)
CASES = _yaml.load((PARITY / "cases.yaml").read_text()) or {}
ALLOWED = _yaml.load((PARITY / "allowed-differences.yaml").read_text()) or []


def render(helm, case: str, chart: str) -> str:
    """Our render of the case; a workload chart gets the run's time as a value, so it is reproducible."""
    stamped = (
        ["--set", f"workload.jobTimestamp={JOB_TIMESTAMP}"] if "/jobset" in chart or "/nemo-training" in chart else []
    )
    return render_fixture(helm, FIXTURES / case, ROOT / chart, *stamped)


def corpus_module():
    """scripts/corpus.py: the normalisation both sides get (run identity, launcher words, defaults)."""
    import importlib.util

    import sys

    if "corpus" not in sys.modules:
        spec = importlib.util.spec_from_file_location("corpus", ROOT / "scripts" / "corpus.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules["corpus"] = module  # dataclasses look their module up here
        spec.loader.exec_module(module)
    return sys.modules["corpus"]


CORPUS = corpus_module()


def explain(diffs: list[Difference], entries: list[dict], case: str) -> tuple[list[Difference], list[str]]:
    """(differences no entry explains, ids of entries for this case that explain nothing): the corpus
    harness's matcher (scripts/corpus.py), with this list's `cases:` selectors."""
    unexplained, used = CORPUS.explain(diffs, entries, case, selector="cases")
    return unexplained, [e["id"] for e in entries if CORPUS.entry_applies(e, case, "cases") and e["id"] not in used]


def case_spec(case: str) -> dict:
    spec = CASES[case]
    return {"chart": spec} if isinstance(spec, str) else spec


@pytest.mark.parametrize("case", sorted(CASES))
def test_parity(helm, case):
    spec = case_spec(case)
    # our derived volume names and the case's documented renames mapped back: the corpus harness's rename_ours
    ours = CORPUS.rename_ours(parse_manifests(render(helm, case, spec["chart"])), spec.get("rename") or {})
    ours = CORPUS.normalize_render(ours, "parity")
    anchor = CORPUS.normalize_render(
        parse_manifests((FIXTURES / case / "anchor-normalized.yaml").read_text()), "parity"
    )
    unexplained, unused = explain(semantic_diff(anchor, ours), ALLOWED, case)
    report = [f"  {d}" for d in unexplained] + [f"  unused allowed entry: {i}" for i in unused]
    assert not report, f"{case} ({helm.name}) differs from the anchor:\n" + "\n".join(report)


def test_every_case_chart_exists():
    for case in CASES:
        spec = case_spec(case)
        assert set(spec) <= {"chart", "rename"}, case
        assert set(spec.get("rename") or {}) <= {"containers", "volumes", "names"}, case
        assert (FIXTURES / case / "command.txt").is_file(), case
        assert (ROOT / spec["chart"] / "Chart.yaml").is_file(), spec["chart"]


def test_allowed_entries_are_well_formed_and_documented():
    doc = (ROOT / "docs" / "compatibility.md").read_text()
    documented = set(re.findall(r"^\| `([a-z0-9]+(?:-[a-z0-9]+)+)` \|", doc, re.M))  # ids are kebab-case
    ids = [e["id"] for e in ALLOWED]
    assert len(ids) == len(set(ids)), "duplicate ids"
    for entry in ALLOWED:
        assert set(entry) <= {"id", "cases", "path", "change", "value", "to", "reason"}, entry["id"]
        assert entry["change"] in ("added", "removed", "changed", "any"), entry["id"]
        assert entry.get("reason"), entry["id"]
        re.compile(entry["path"])
    # The corpus harness's list (tests/corpus/allowed-differences.yaml) shares the ids and the documentation.
    corpus_ids = {e["id"] for e in CORPUS.load_allowed()}
    known = set(ids) | corpus_ids | NORMALISATIONS
    assert known <= documented, f"not in docs/compatibility.md: {sorted(known - documented)}"
    assert documented <= known, f"documented but unknown: {sorted(documented - known)}"


# Renames applied before comparing (corpus rename_ours: derived volume names, cases.yaml `rename`), documented in the same table.
NORMALISATIONS = {
    "volume-names-derived",
    "nemo-training-names",
    "pv-names-release-scoped",
    # scripts/corpus.py normalize_render, applied to both sides:
    "launcher-no-trailing-continuation",
    "launcher-args-as-argv",
    "run-identity-normalised",
    "kubernetes-defaults",
    "shell-quote-removal",
}
