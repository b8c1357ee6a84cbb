"""helm nemo fit: Megatron's layout rules with file:line, the per-GPU memory estimate and its verdict, the memory
check's modes, and the values files that must pass (every example; a file naming no model).

The issue's own example (issue 40): values/examples/a3mega-gpt3-175b.yaml with TP 1, PP 1 (VP 12 kept) and micro
batch 16 is refused by validate with file:line errors, and fit puts it at ~2 TiB per GPU.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from helm_nemo.cli import main
from helm_nemo.fit import layout as rules
from helm_nemo.fit.check import reports_for_file
from helm_nemo.fit.gpu import gpu_of
from helm_nemo.fit.layout import RULES, Layout, broken_rules
from helm_nemo.fit.pipeline_layout import parse, problem, rank_layers
from helm_nemo.user_errors import UserError
from helm_nemo.values.plan import build_plans

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "values" / "examples"
from test_examples_golden import ENV  # the examples' stand-ins for the environment


def fit_cli(*args: str):
    return CliRunner().invoke(main, ["fit", *args], catch_exceptions=False)


@pytest.fixture
def issue_example(tmp_path: Path) -> Path:
    """The issue's layout: the 175B example's config with TP 1, PP 1, micro batch 16 (VP 12 kept)."""
    shutil.copy(EXAMPLES / "a3mega-gpt3-175b.yaml", tmp_path / "values.yaml")
    (tmp_path / "configs").mkdir()
    text = (EXAMPLES / "configs" / "gpt3-175b.yaml").read_text()
    for old, new in (
        ("tensor_model_parallel_size: 4", "tensor_model_parallel_size: 1"),
        ("pipeline_model_parallel_size: 8", "pipeline_model_parallel_size: 1"),
        ("micro_batch_size: 1\n", "micro_batch_size: 16\n"),
    ):
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    (tmp_path / "configs" / "gpt3-175b.yaml").write_text(text)
    return tmp_path / "values.yaml"


def _line_of(path: Path, needle: str) -> int:
    return next(n for n, line in enumerate(path.read_text().splitlines(), 1) if needle in line)


# -- the issue's example -------------------------------------------------------------------------------------------


def test_issue_example_refused_by_validate_with_file_and_line(issue_example):
    config = issue_example.parent / "configs" / "gpt3-175b.yaml"
    with pytest.raises(UserError) as caught:
        build_plans(issue_example, ENV)
    by_path = {p.json_path: p for p in caught.value.problems}
    vp = by_path["$.model.virtual_pipeline_model_parallel_size"]
    assert (vp.file, vp.line, vp.column) == (str(config), _line_of(config, "virtual_pipeline_model_parallel"), 3)
    assert "virtual pipeline size 12 with pipeline parallel size 1" in vp.message
    assert "PP 1 (" in vp.message and "pipeline_model_parallel_size" in vp.message  # the other value, with its place
    batch = by_path["$.model.global_batch_size"]
    assert "16 × 256 = 4096" in batch.message
    # the memory error too: far over, at the micro batch (activations are the biggest term)
    memory = by_path["$.model.micro_batch_size"]
    assert "does not fit" in memory.message and "--no-fit-error" in memory.message
    # every hint names a layout that passes every rule
    assert all(p.hint and "a layout that works: TP" in p.hint for p in (vp, batch))


def test_issue_example_validate_cli_exit_2_nothing_sent(issue_example, monkeypatch):
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)
    result = CliRunner().invoke(main, ["validate", "-f", str(issue_example)], catch_exceptions=False)
    assert result.exit_code == 2
    assert "gpt3-175b.yaml:38:3: $.model.virtual_pipeline_model_parallel_size" in result.stderr
    assert "Nothing was sent to helm." in result.stderr


def test_issue_example_needs_terabytes_per_gpu(issue_example):
    (report,) = reports_for_file(str(issue_example), env={})
    assert report.gpu is not None and report.gpu.name == "H100"
    terms = report.as_json()["per_gpu_gib"]
    # 175 B parameters on one GPU: 2 (bf16) + 4 (fp32 main grads) bytes each, the optimizer sharded over DP 256
    params = report.estimate.params
    assert 174e9 < params < 176e9
    assert terms["weights"] == pytest.approx(2 * params / 2**30, rel=1e-3)
    assert terms["gradients"] == pytest.approx(4 * params / 2**30, rel=1e-3)
    assert terms["optimizer"] == pytest.approx(12 * params / 256 / 2**30, rel=0.01)
    assert 1500 < terms["total"] < 3000  # GiB: about 2 TiB (FP8 keeps the linear layers' inputs in one byte)
    assert report.as_json()["fits"] is False and report.verdict.status == "does not fit"
    # the issue's "about 3 TB for weights and optimizer state alone" is the 18 bytes per parameter of an optimizer
    # that is not distributed (Megatron's theoretical figure without --use-distributed-optimizer)
    from helm_nemo.fit.memory import estimate_layout, with_layout

    plain = estimate_layout(with_layout(report.run, dist_optimizer=False), report.layout, report.gpu)
    assert 2.8e12 < (plain.weights + plain.gradients + plain.optimizer) * 2**30 < 3.3e12


def test_the_original_example_fits_and_passes():
    (report,) = reports_for_file(str(EXAMPLES / "a3mega-gpt3-175b.yaml"), env={})
    assert report.findings == [] and report.verdict.status == "fits"
    assert 40 < report.estimate.total_gib < 80


# -- every rule ------------------------------------------------------------------------------------------------------

GOOD = Layout(
    gpus=64,
    tp=4,
    pp=4,
    vp=2,
    cp=2,
    sp=True,
    micro_batch=1,
    global_batch=64,
    seq_len=8192,
    num_layers=32,
    heads=32,
    query_groups=8,
)
MOE = GOOD._replace(experts=8, ep=4, etp=1, gpus=64)
# rule id -> (a layout that breaks only that rule, its fix)
BROKEN = {
    "world-size": (GOOD._replace(gpus=48), GOOD._replace(gpus=64)),
    "expert-world-size": (MOE._replace(ep=8, etp=4, gpus=32 * 2, pp=4, tp=2, cp=2), MOE._replace(ep=8, etp=2)),
    "ep-needs-experts": (GOOD._replace(ep=2), GOOD),
    "experts-per-ep": (MOE._replace(ep=16, gpus=64), MOE._replace(ep=8)),
    "global-batch": (GOOD._replace(global_batch=101), GOOD._replace(global_batch=96)),
    "heads-per-tp": (GOOD._replace(heads=30, query_groups=None), GOOD._replace(heads=32, query_groups=None)),
    "query-groups-per-tp": (GOOD._replace(query_groups=6), GOOD._replace(query_groups=2)),
    "layers-per-pp": (GOOD._replace(num_layers=30, vp=None), GOOD._replace(num_layers=28, vp=None)),
    "layers-per-vp": (GOOD._replace(vp=3), GOOD._replace(vp=4)),
    "vp-needs-pp": (GOOD._replace(pp=1, gpus=16, vp=2), GOOD._replace(pp=1, gpus=16, vp=None)),
    # DeepSeek-V3's 61 layers over 16 stages (PP 4 × VP 4): 60 t's are one too few
    "pipeline-layout": (
        GOOD._replace(num_layers=61, pp=4, vp=4, pipeline_layout=parse("Et*4|(t*4|)*14mL")),
        GOOD._replace(num_layers=61, pp=4, vp=4, pipeline_layout=parse("Et*4|(t*4|)*14tmL")),
    ),
    "sp-needs-tp": (GOOD._replace(tp=1, gpus=16, sp=True), GOOD._replace(tp=1, gpus=16, sp=False)),
    "seq-per-cp": (GOOD._replace(seq_len=8190), GOOD._replace(seq_len=8188)),
    "seq-per-tp-with-sp": (GOOD._replace(seq_len=8196), GOOD._replace(seq_len=8200)),
    "fp8-gpu": (GOOD._replace(fp8=True, gpu_fp8=False), GOOD._replace(fp8=False, gpu_fp8=False)),
}


def test_every_rule_has_a_case_and_a_megatron_source():
    assert sorted(BROKEN) == sorted(rule.id for rule in RULES)
    for rule in RULES:
        assert rule.source.startswith("https://github.com/NVIDIA/"), rule.id
        assert " " in rule.source, f"{rule.id}: the source names the function"


def test_good_layout_breaks_nothing():
    assert broken_rules(GOOD) == [] and broken_rules(MOE) == []


@pytest.mark.parametrize("rule_id", sorted(BROKEN))
def test_each_rule(rule_id):
    broken, fixed = BROKEN[rule_id]
    assert rule_id in broken_rules(broken)
    assert rule_id not in broken_rules(fixed)


def test_a_pipeline_layout_splits_layers_megatrons_way():
    """megatron-core's PipelineParallelLayerLayout: stage i goes to rank i % PP; the layout replaces the even-split
    rules (61 layers over PP 2 × VP 8), and what it breaks is said in Megatron's terms."""
    stages = parse("Et*4|(t*4|)*14tmL")
    assert len(stages) == 16 and stages[0] == "Etttt" and stages[-1] == "tmL"
    assert rank_layers(stages, 16) == [4] * 15 + [2]  # the last stage builds a layer and the MTP layer
    assert rank_layers(stages, 2) == [32, 30] and rank_layers(stages, 3) is None
    ds = GOOD._replace(num_layers=61, pp=2, vp=8, gpus=256, tp=1, sp=False, global_batch=2048, pipeline_layout=stages)
    assert broken_rules(ds) == [] and ds.stage_layers() == [32, 30]
    assert "layers-per-pp" in broken_rules(ds._replace(pipeline_layout=None))
    assert parse([["embedding", "decoder"], ["decoder", "LOSS"]]) == ("Et", "tL")
    assert parse("Et|tx") == "unknown layer character 'x' (known: E, t, m, L)"
    for text, pp, vp, words in (
        ("tEt*3|(t*4|)*14tmL", 2, 8, "the embedding (E) must come once, first"),
        ("Et*4|(t*4|)*14tm", 2, 8, "the loss (L) must come once, last"),
        ("Et*4|(t*4|)*13tmL", 2, 8, "15 stages do not divide over pipeline parallel size 2"),
        ("Et*4|(t*4|)*14tmL", 4, 8, "16 stages are not pipeline × virtual pipeline = 4 × 8 = 32"),
        ("Et*4|(t*4|)*14mtL", 2, 8, "transformer layers (t) must come before the MTP layers (m)"),
        ("Et*4|(t*4|)*14ttmL", 2, 8, "62 transformer layers (t) in the layout, but num_layers is 61"),
    ):
        assert problem(parse(text), pp, vp, 61) == words, text


def test_uneven_first_and_last_stages():
    """Megatron's num_layers_in_first/last_pipeline_stage: the rest must split over the middle stages (and by VP)."""
    base = GOOD._replace(num_layers=30, pp=4, vp=None, global_batch=64)
    assert "layers-per-pp" in broken_rules(base)
    assert broken_rules(base._replace(first_stage_layers=6, last_stage_layers=8)) == []  # 16 over 2 middle stages
    assert "layers-per-pp" in broken_rules(base._replace(first_stage_layers=7, last_stage_layers=8))
    assert base._replace(first_stage_layers=6, last_stage_layers=8).stage_layers() == [6, 8, 8, 8]
    # with VP 2 every stage's count must split into 2 chunks
    assert "layers-per-vp" in broken_rules(base._replace(vp=2, first_stage_layers=7, last_stage_layers=7))
    # account_for_embedding/loss: the embedding and the loss count as a layer each (llama31_405b's recipe: 126 + 2)
    llama = GOOD._replace(num_layers=126, pp=8, vp=2, gpus=512, global_batch=512, cp=4, tp=8)
    assert "layers-per-pp" in broken_rules(llama)
    assert broken_rules(llama._replace(account_embedding=True, account_loss=True)) == []


def test_rule_messages_name_the_values_and_their_places(tmp_path):
    config = tmp_path / "model.yaml"
    config.write_text(
        "model:\n  num_layers: 30\n  hidden_size: 4096\n  num_attention_heads: 32\n  encoder_seq_length: 4096\n"
        "  tensor_model_parallel_size: 2\n  pipeline_model_parallel_size: 4\n  micro_batch_size: 1\n"
        "  global_batch_size: 64\n"
    )
    values = tmp_path / "values.yaml"
    values.write_text(
        "accelerator: a3mega\nchart: nemo-training\nrelease: gpt\nfiles:\n  nemo_config: model.yaml\n"
        "workload:\n  gpus: 64\n  image: nvcr.io/nvidia/nemo:24.07\n"
    )
    (report,) = reports_for_file(str(values), env={})
    (finding,) = report.findings
    assert finding.rule.id == "layers-per-pp" and finding.severity == "error"
    problem = finding.problem
    assert (problem.file, problem.line, problem.json_path) == (str(config), 2, "$.model.num_layers")
    assert "30 layers do not split over pipeline parallel size 4" in problem.message
    assert f"PP 4 ({config}:7:3 $.model.pipeline_model_parallel_size)" in problem.message
    # the suggested layout passes every rule on these GPUs
    assert "a layout that works: TP" in problem.hint
    assert report.verdict is None  # no estimate for a layout Megatron refuses first


def test_hydra_override_and_launcher_flag_take_precedence(tmp_path):
    """Overrides in workload.arguments beat the config; the error points at the override's list item."""
    values = tmp_path / "values.yaml"
    shutil.copytree(EXAMPLES / "configs", tmp_path / "configs")
    text = (
        (EXAMPLES / "a3mega-gpt3-175b.yaml")
        .read_text()
        .replace("  arguments: []", "  arguments:\n    - model.pipeline_model_parallel_size=5")
    )
    values.write_text(text)
    (report,) = reports_for_file(str(values), env={})
    ids = {f.rule.id: f.problem for f in report.findings}
    assert set(ids) >= {"world-size", "layers-per-pp"}
    world = ids["world-size"]
    assert world.line == _line_of(values, "workload:") + 1  # gpus: blamed first, the override named in the text
    assert f"PP 5 ({values}:{_line_of(values, 'pipeline_model_parallel_size=5')}" in world.message


def test_the_precision_aware_optimizers_dtypes_set_the_adam_state(tmp_path):
    """megatron-core's precision-aware optimizer keeps the master copy, m and v in the dtypes it is given
    (OptimizerConfig main_params_dtype, exp_avg_dtype, exp_avg_sq_dtype): bf16 moments are 8 bytes a parameter,
    not 12. Without use_precision_aware_optimizer the dtypes are not read (Megatron ignores them too)."""
    shutil.copytree(EXAMPLES / "configs", tmp_path / "configs")
    base = (EXAMPLES / "a3mega-gpt3-175b.yaml").read_text()

    def optimizer_of(*overrides: str):
        values = tmp_path / "values.yaml"
        listed = "".join(f"\n    - {o}" for o in overrides)
        values.write_text(base.replace("  arguments: []", f"  arguments:{listed}" if overrides else "  arguments: []"))
        (report,) = reports_for_file(str(values), env={})
        return report.estimate.optimizer, report.estimate.assumptions

    plain, said = optimizer_of()
    dtypes = ("optimizer.exp_avg_dtype=bf16", "optimizer.exp_avg_sq_dtype=bf16")
    ignored, _ = optimizer_of(*dtypes)
    aware, told = optimizer_of("optimizer.use_precision_aware_optimizer=true", *dtypes)
    assert ignored == plain and aware == pytest.approx(plain * 8 / 12)
    assert "Adam state 12 bytes a parameter" in said and "Adam state 8 bytes a parameter" in told


def test_fp8_refused_on_a100(tmp_path):
    """p4de (A100) has no FP8: its profile has no fp8 peak. The same release with model.fp8=true is refused."""
    shutil.copytree(EXAMPLES / "configs", tmp_path / "configs")
    values = tmp_path / "values.yaml"
    text = (EXAMPLES / "p4de-gpt3-5b.yaml").read_text()
    assert text.count("          - trainer.max_steps=100\n") == 1
    values.write_text(
        text.replace(
            "          - trainer.max_steps=100\n", "          - trainer.max_steps=100\n          - model.fp8=true\n"
        )
    )
    assert gpu_of("p4de").fp8 is False and gpu_of("a3mega").fp8 is True
    (before,) = reports_for_file(str(EXAMPLES / "p4de-gpt3-5b.yaml"), env={})
    assert before.findings == []
    (report,) = reports_for_file(str(values), env={})
    (finding,) = report.findings
    assert finding.rule.id == "fp8-gpu" and finding.problem.line == _line_of(values, "model.fp8=true")
    assert "A100" not in finding.problem.message or "FP8" in finding.problem.message


def test_recipe_defaults_are_notes_not_errors():
    """llama31_405b's defaults (NeMo main: TP 8 × PP 8 × CP 4 = 256) do not divide the a4 example's 128 GPUs: a note
    in fit (the image's NeMo decides), no error in validate."""
    (report,) = reports_for_file(str(EXAMPLES / "a4-llama31-405b.yaml"), env={})
    assert [f.severity for f in report.findings] == ["note"]
    assert (
        report.findings[0].rule.id == "world-size"
        and "NeMo 2 recipe llama31_405b" in report.findings[0].problem.message
    )
    assert not report.failed
    build_plans(EXAMPLES / "a4-llama31-405b.yaml", ENV)  # no error


def test_nemo1_sequence_parallel_at_tp1_is_a_warning(issue_example):
    (report,) = reports_for_file(str(issue_example), env={})
    (sp,) = [f for f in report.findings if f.rule.id == "sp-needs-tp"]
    assert sp.severity == "warning" and sp.problem.json_path == "$.model.sequence_parallel"


# -- the memory check's modes ------------------------------------------------------------------------------------------


@pytest.fixture
def over_memory(tmp_path: Path) -> Path:
    """A layout every rule accepts that cannot fit an 80 GB H100: the 175B config with micro batch 8."""
    shutil.copy(EXAMPLES / "a3mega-gpt3-175b.yaml", tmp_path / "values.yaml")
    (tmp_path / "configs").mkdir()
    text = (
        (EXAMPLES / "configs" / "gpt3-175b.yaml").read_text().replace("micro_batch_size: 1\n", "micro_batch_size: 8\n")
    )
    (tmp_path / "configs" / "gpt3-175b.yaml").write_text(text)
    return tmp_path / "values.yaml"


def test_memory_error_then_flag_and_value_make_it_a_warning(over_memory, monkeypatch):
    (report,) = reports_for_file(str(over_memory), env={})
    assert report.findings == [] and report.verdict.status == "does not fit"
    result = fit_cli("--values", str(over_memory))
    assert result.exit_code == 2 and "does not fit" in result.stdout
    assert fit_cli("--values", str(over_memory), "--no-fit-error").exit_code == 0
    monkeypatch.delenv("HELM_NEMO_FIT_MEMORY", raising=False)  # the flag sets it for its own run
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)
    refused = CliRunner().invoke(main, ["validate", "-f", str(over_memory)], catch_exceptions=False)
    assert refused.exit_code == 2 and "--no-fit-error" in refused.stderr
    warned = CliRunner().invoke(main, ["validate", "-f", str(over_memory), "--no-fit-error"], catch_exceptions=False)
    assert warned.exit_code == 0 and "warning:" in warned.stderr and "does not fit" in warned.stderr
    monkeypatch.delenv("HELM_NEMO_FIT_MEMORY", raising=False)
    with pytest.raises(UserError) as caught:
        build_plans(over_memory, ENV)
    (problem,) = caught.value.problems
    assert problem.json_path == "$.model.micro_batch_size" and "fit: {memoryCheck: warn}" in problem.message
    over_memory.write_text(over_memory.read_text() + "fit:\n  memoryCheck: warn\n")
    (plan,) = build_plans(over_memory, ENV)
    assert any("does not fit" in w for w in plan.warnings)
    assert "fit" not in plan.values  # helm never sees it
    assert fit_cli("--values", str(over_memory)).exit_code == 0


@pytest.mark.parametrize("command", ["template", "lint"])
def test_release_commands_take_the_flag_too(over_memory, command, helm4, monkeypatch):
    """template, lint, install and upgrade refuse the layout before helm starts; --no-fit-error makes it a warning
    there as in validate (install and upgrade share the flag's code path: cli/release_commands.run_release)."""
    for name, value in {**ENV, **helm4.env, "HELM_BIN": str(helm4.binary)}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("HELM_NEMO_FIT_MEMORY", raising=False)
    args = [sys.executable, "-m", "helm_nemo", command, "-f", str(over_memory)]
    refused = subprocess.run(args, capture_output=True, text=True, cwd=ROOT)
    assert refused.returncode == 2 and "does not fit" in refused.stderr and "--no-fit-error" in refused.stderr
    warned = subprocess.run([*args, "--no-fit-error"], capture_output=True, text=True, cwd=ROOT)
    assert warned.returncode == 0, warned.stderr
    assert "warning:" in warned.stderr and "does not fit" in warned.stderr


def test_a_bad_fit_section_is_an_error(over_memory):
    over_memory.write_text(over_memory.read_text() + "fit:\n  memoryCheck: maybe\n")
    with pytest.raises(UserError) as caught:
        build_plans(over_memory, ENV)
    assert any(p.json_path == "$.fit" and "memoryCheck" in (p.expected or "") for p in caught.value.problems)


def test_no_model_no_verdict_no_error():
    path = EXAMPLES / "a3mega-nccl-test.yaml"
    result = fit_cli("--values", str(path), "-o", "json")
    assert result.exit_code == 0
    (document,) = json.loads(result.stdout)
    assert document["per_gpu_gib"] is None and document["fits"] is None and document["problems"] == []
    assert any("no model" in note for note in document["notes"])
    assert build_plans(path, ENV)[0].fit is None


def test_json_shape(over_memory):
    (document,) = json.loads(fit_cli("--values", str(over_memory), "-o", "json").stdout)
    assert document["gpu"] == {"name": "H100", "memory_gib": 80.0}
    terms = document["per_gpu_gib"]
    assert set(terms) == {"weights", "gradients", "optimizer", "activations", "other", "total"}
    assert terms["total"] == pytest.approx(sum(v for k, v in terms.items() if k != "total"), abs=0.05)
    assert document["headroom_gib"] == pytest.approx(80 - terms["total"], abs=0.05)
    assert document["fits"] is False and document["biggest"] == "activations"
    assert document["would_fit_with"] and document["problems"] == []


def test_every_example_passes():
    """No example is refused and none is over its GPU: they are the layouts users copy."""
    for example in sorted(EXAMPLES.glob("*.yaml")):
        for plan in build_plans(example, ENV):
            if plan.fit is not None and plan.fit.verdict is not None:
                assert plan.fit.verdict.status != "does not fit", (example.name, plan.fit.memory_line())


def test_what_would_fit_is_checked_by_the_rules(over_memory):
    (report,) = reports_for_file(str(over_memory), env={})
    for change in report.verdict.changes:
        assert "GiB" in change
    from helm_nemo.fit.suggest import suggest

    works = suggest(report.run, report.layout, report.gpu)
    assert works is not None and rules.broken_rules(works) == []


def test_preflight_shows_the_same_numbers():
    """preflight prints fit's memory line per training release (and carries the JSON in its document's "fit")."""
    from helm_nemo.actions.preflight import fit_lines

    plans = build_plans(EXAMPLES / "a3mega-gpt3-175b.yaml", ENV)
    (report,) = reports_for_file(str(EXAMPLES / "a3mega-gpt3-175b.yaml"), env={})
    assert fit_lines(plans) == [f"fit [gpt3-175b]: {report.memory_line()}"]
    assert plans[0].fit.as_json()["per_gpu_gib"] == report.as_json()["per_gpu_gib"]
    assert fit_lines(build_plans(EXAMPLES / "a3mega-nccl-test.yaml", ENV)) == []  # no model, no line


@pytest.mark.parametrize(
    "model, total_b, active_b",
    [
        # the publishers' own figures: DeepSeek-V3 technical report (arXiv:2412.19437) §1, 671B total and 37B
        # activated (its 14B multi-token prediction module aside); Kimi K2 model card, 1.04T total and 32B
        # activated; gpt-oss model card (arXiv:2508.10925) table 1, 116.83B/5.13B and 20.91B/3.61B
        ("deepseek-v3", 671, 37),
        ("kimi-k2", 1040, 32),
        ("gpt-oss-120b", 116.8, 5.13),
        ("gpt-oss-20b", 20.9, 3.61),
    ],
)
def test_latent_attention_and_moe_models_count_their_published_parameters(model, total_b, active_b):
    """The memory estimate's parameter count (one GPU holding everything) and the FLOPs formula's active
    parameters (per token, the attention's s-dependent part taken out) match what the model's makers state, to 2 %
    (biases, attention sinks and norms are not all counted)."""
    from helm_nemo.fit.layout import layout_of
    from helm_nemo.fit.memory import _state
    from helm_nemo.fit.model import run_from_facts
    from helm_nemo.metrics.flops import known_model

    arch = known_model(model).arch
    run = run_from_facts(
        {"tp": 1, "pp": 1, "ep": 1, "dist_optimizer": False}, gpus=1, model=model, recipe_defaults=False
    )
    params = _state(run, layout_of(run, None), [arch.layers], 0)[0]
    assert params / 1e9 == pytest.approx(total_b, rel=0.02)
    d = arch.head_dim or arch.hidden // arch.heads
    core = (
        2 * arch.seq_len * arch.heads * (d + (arch.rope_dim or 0) + (arch.v_dim or d))
        if arch.latent
        else 4 * arch.seq_len * arch.heads * d
    )
    active = (arch.flops_per_sample() / 3 / arch.seq_len - arch.layers * core) / 2
    assert active / 1e9 == pytest.approx(active_b, rel=0.02)
