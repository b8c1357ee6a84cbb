"""No false alarms on what is known to run.

1. gpu-recipes' training recipes (tests/fixtures/fit/gpu_recipes_layouts.yaml: the layout facts of every recipe at
   the commit named there, each value with its file:line; no code copied). Each ran at its published speed on its
   hardware, so fit must pass every one whose model resolves: no broken layout rule, no "does not fit".
2. NeMo's published performance tables (tests/fixtures/fit/nemo_performance_layouts.yaml, with their source) for
   the accelerators that have a profile: same.

Recipes that do not resolve say why (not Megatron, a model outside the table, a layout stated nowhere in the
recipe's own files); docs/fit.md lists the figures.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from helm_nemo.fit.check import check_run
from helm_nemo.fit.gpu import gpu_of
from helm_nemo.fit.model import run_from_facts
from helm_nemo.metrics.flops import Architecture

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "fit"
CORPUS = yaml.safe_load((FIXTURES / "gpu_recipes_layouts.yaml").read_text())
PERF = yaml.safe_load((FIXTURES / "nemo_performance_layouts.yaml").read_text())
_FACTS = (
    "peft",
    "tp",
    "pp",
    "vp",
    "cp",
    "ep",
    "etp",
    "sp",
    "micro_batch",
    "global_batch",
    "seq_len",
    "fsdp",
    "cpu_offload",
    "recompute",
    "recompute_method",
    "recompute_layers",
    "recompute_modules",
    "optimizer_name",
    "tied_embeddings",
    "grad_fp32",
    "pipeline_layout",
    "dist_optimizer",
    "precision_aware_optimizer",
    "main_params_dtype",
    "exp_avg_dtype",
    "exp_avg_sq_dtype",
)


def run_of(row: dict, source: str):
    facts = row["facts"]
    given = {k: facts[k] for k in _FACTS if k in facts}
    precision = str(facts.get("precision", "")) + (" fp8" if facts.get("fp8") else "")
    given["precision"] = "fp8" if "fp8" in precision.lower() else "bf16"
    arch = None
    if row["model"] == "config":
        arch = Architecture(
            layers=facts["num_layers"],
            hidden=facts["hidden"],
            ffn=facts["ffn"] if isinstance(facts.get("ffn"), int) else 4 * facts["hidden"],
            heads=facts["heads"],
            vocab=0,
            seq_len=facts.get("seq_len", 2048),
            kv_heads=facts.get("query_groups"),
            gated="glu" in str(facts.get("activation", "")),
            experts=facts.get("experts") or 0,
            top_k=facts.get("top_k") or 0,
        )
    return run_from_facts(
        given,
        gpus=facts["gpus"],
        arch=arch,
        accelerator=row["accelerator"],
        model=None if row["model"] == "config" else row["model"],
        source=source,
        recipe_defaults=row.get("stack") != "nemo1",
    )


RESOLVED = [r for r in CORPUS["recipes"] if "unresolved" not in r]


def test_corpus_figures():
    """How many recipes resolve (docs/fit.md): every NeMo/Megatron recipe whose model is in the table and whose
    files state the layout."""
    unresolved = [r for r in CORPUS["recipes"] if "unresolved" in r]
    assert len(RESOLVED) + len(unresolved) == len(CORPUS["recipes"]) >= 130
    assert len(RESOLVED) >= 80
    for row in unresolved:
        assert row["unresolved"], row["recipe"]
    for row in RESOLVED:
        assert row["facts"]["gpus"] and row["model"], row["recipe"]
        assert set(row["sources"]) >= set(row["facts"]) - {"gpus"}, row["recipe"]  # every fact has its place


@pytest.mark.parametrize("row", RESOLVED, ids=[r["recipe"].removeprefix("training/") for r in RESOLVED])
def test_gpu_recipes_recipe_passes(row):
    run = run_of(row, row["recipe"])
    gpu = gpu_of(row["accelerator"])
    assert gpu is not None
    report = check_run(run, gpu, row["recipe"])
    errors = [f.problem.format() for f in report.findings if f.severity == "error"]
    assert errors == [], row["sources"]
    assert not report.failed, report.memory_line()


PERF_ROWS = [r for r in PERF["layouts"] if gpu_of(r["accelerator"]) is not None]


def test_performance_table_rows_have_sources():
    assert PERF["source"].startswith("https://github.com/NVIDIA-NeMo/Megatron-Bridge/blob/")
    assert len(PERF_ROWS) == len(PERF["layouts"]) == 18 and all(r["source"].startswith("25.11 ") for r in PERF_ROWS)


@pytest.mark.parametrize(
    "row", PERF_ROWS, ids=[f"{r['model']}-{r['accelerator']}-{r['facts']['gpus']}" for r in PERF_ROWS]
)
def test_nemo_performance_layout_passes(row):
    run = run_of(row, row["source"])
    report = check_run(run, gpu_of(row["accelerator"]), row["model"])
    assert [f.problem.format() for f in report.findings if f.severity == "error"] == []
    assert not report.failed, report.memory_line()
