"""`helm lint --strict` of every generated chart with Helm 3.17.2 and Helm 4.1.4 (a new chart is covered
as soon as it is generated: the list comes from charts/)."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CHARTS = sorted(p.parent for p in (ROOT / "charts").rglob("Chart.yaml"))


def test_every_kind_and_accelerator_is_linted():
    names = {str(c.relative_to(ROOT / "charts")) for c in CHARTS}
    assert {
        "a3ultra/jobset",
        "p5en/nemo-training",
        "a4x-max/jobset",
        "g4/jobset",
        "supervisor",
        "gcs-fuse",
        "fsx-lustre",
        "a3ultra/nccl-test",
        "p5/nccl-test",
        "a4x-max/nccl-test",
        "g4/nccl-test",
        "data-prep",
    } <= names
    # 8 accelerators x 2 kinds, a4x-max and g4 jobset only, nccl-test for all 10, 4 accelerator-independent
    assert len(CHARTS) == 32


@pytest.mark.parametrize("chart", CHARTS, ids=[str(c.relative_to(ROOT / "charts")) for c in CHARTS])
def test_lint_strict(helm, chart):
    result = helm.run("lint", "--strict", str(chart), check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "[WARNING]" not in result.stdout and "[ERROR]" not in result.stdout, result.stdout
