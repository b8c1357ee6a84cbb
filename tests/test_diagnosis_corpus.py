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
