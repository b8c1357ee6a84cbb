"""The diagnosis measured on the corpus of real logs (tests/logs/real/, one folder per run, its case.yaml
holding the true first cause): per class precision and recall, overall accuracy. Targets (issue 34): at least
95 % of failed runs with the right first cause (class right, the truth line inside the cause line, and on a
multi-file case the right file), no healthy log called failed, every multi-file case naming the first
failing file. docs/status.md shows the table (scripts/diagnosis_table.py writes it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from helm_nemo.diagnose import corpus

ROOT = Path(__file__).resolve().parent / "logs" / "real"
CASES = corpus.cases(ROOT)


@pytest.fixture(scope="module")
def table() -> corpus.Table:
    found = corpus.Table()
    for folder in CASES:
        found.outcomes.append(corpus.evaluate(folder)[0])
    print("\n" + found.markdown())
    for outcome in found.outcomes:
        if not outcome.right:
            print(
                f"wrong: {outcome.case}: truth {outcome.truth} {outcome.truth_file} {outcome.truth_line!r}; "
                f"said {outcome.said} {outcome.said_file} {outcome.said_line[:160]!r}"
            )
    return found


def test_the_corpus_is_there():
    assert len(CASES) >= 50, "tests/logs/real/ holds the corpus (README.md there)"


def test_first_cause_accuracy(table):
    assert table.accuracy >= 0.95, table.markdown()


def test_no_healthy_log_is_called_failed(table):
    assert len(table.healthy) >= 5
    assert [o.case for o in table.healthy_called_failed] == []


def test_every_multi_file_case_names_the_first_failing_file(table):
    assert [o.case for o in table.multi_file_wrong] == []


def test_docs_show_the_current_table(table):
    shown = corpus.shown_table(ROOT.parent.parent.parent / "docs" / "status.md")
    assert shown == table.markdown().strip(), "run: python scripts/diagnosis_table.py (docs/status.md is stale)"


HELDOUT = ROOT / "heldout"
NEW_CLASSES = ("stopped", "fabric", "checkpoint", "network", "config", "data-error")


def test_the_heldout_split_is_frozen():
    """heldout/ holds exactly the cases FROZEN.txt listed on the day it was frozen (issue 39): none added, none
    taken out to flatter the figure."""
    listed = [
        line.strip()
        for line in (HELDOUT / "FROZEN.txt").read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert len(listed) >= 40
    assert sorted(listed) == sorted(p.name for p in HELDOUT.iterdir() if p.is_dir())


def test_heldout_accuracy(table):
    held = corpus.Table([o for o in table.outcomes if (HELDOUT / o.case).is_dir()])
    assert len(held.failures) >= 40
    assert held.accuracy >= 0.90, held.markdown()
    assert held.healthy_called_failed == []


def test_every_new_class_has_five_real_examples(table):
    for name in NEW_CLASSES:
        assert sum(o.truth == name for o in table.outcomes) >= 5, name


def test_the_corpus_comes_from_many_projects():
    """≥ 150 public excerpts from ≥ 15 projects (the repository of each thread)."""
    import re

    import yaml

    public = [p for p in CASES if p.parent.name in ("public", "holdout", "heldout")]
    projects = set()
    for folder in public:
        source = yaml.safe_load((folder / "case.yaml").read_text(encoding="utf-8"))["source"]
        found = re.match(r"https://github\.com/([^/]+/[^/#]+)", source)
        projects.add(found.group(1).lower() if found else source.split("/")[2])
    assert len(public) >= 150
    assert len(projects) >= 15
