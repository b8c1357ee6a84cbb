"""`helm nemo metrics`: equal to gpu-recipes' training_metrics tool, log formats, FLOPs model, peaks, bad input.

Anchor agreement. ANCHOR_RUNS holds what gpu-recipes' src/utils/training_metrics/process_training_results.py
(commit 2e1fd5efbf1af9c08f8ac50b9d7fef2cfa675b68, Python 3.11.7) printed for these fixtures; each run was

    cd gpu-recipes/src/utils/training_metrics
    python3 process_training_results.py --file <fixture> <the anchor arguments in the row>

(the tool prints 8 decimals). The tool itself is not part of this repository. Each row is checked three
ways: our numbers equal the recorded ones within 1e-6 relative (the print rounding is ~1e-10 of these
values), and equal an independent calculation in this file (plain json parsing, math.fsum, the anchor's
table values written out below) within 1e-12.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from helm_nemo.cli import main
from helm_nemo.metrics import Request, measure
from helm_nemo.metrics import flops as flops_model
from helm_nemo.metrics.logs import read_log
from helm_nemo.metrics.peaks import gpu_key, gpu_peak, gpu_peaks
from helm_nemo.user_errors import UserError

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "metrics"
EXAMPLE = FIXTURES / "gpu-recipes-example-dllogger.json"  # the anchor's own example (see NOTICE)
SYNTHETIC = FIXTURES / "dllogger-gpt3-175b.json"

# gpu-recipes training_metrics data_defs.py at 2e1fd5e, written out (recorded facts, not imported).
ANCHOR_MODEL_FLOPS = {
    "gpt3-5b": 6.69e13,
    "gpt3-175b": 2.2e15,
    "llama2-7b": 1.89e14,
    "llama2-70b": 1.82e15,
    "llama3-70b": 3.94e15,
    "llama3.1-8b": 4.74e14,
    "llama3.1-70b": 3.9129e15,
    "llama3.1-405b": 2.16533e16,
    "mixtral-7b": 3.4e14,
    "mixtral-8x7b": 3.4e14,
}
ANCHOR_MAX_TFLOPS = {
    ("h100", "bf16"): 989,
    ("h100", "fp8"): 1978,
    ("a100", "bf16"): 312,
    ("h200", "bf16"): 989,
    ("h200", "fp8"): 1978,
    ("b200", "bf16"): 2250,
    ("b200", "fp8"): 4500,
}

# (fixture, anchor arguments, our arguments, anchor output: step time, TFLOPS/accelerator, MFU)
ANCHOR_RUNS = [
    (
        EXAMPLE,
        "--batch_size 2048 --num_accelerators 256 --model_type gpt3-175b --accelerator_type h100",
        "--batch-size 2048 --gpus 256 --model gpt3-175b --accelerator a3mega",
        ("25.39738855", "692.98463368", "0.70069225"),
    ),
    (
        EXAMPLE,
        "--batch_size 2048 --num_accelerators 256 --model_type gpt3-175b --accelerator_type h100 --precision fp8 "
        "--start_step=10 --end_step=30",
        "--batch-size 2048 --gpus 256 --model gpt3-175b --accelerator a3mega --precision fp8 --start-step 10 --end-step 30",
        ("25.39738855", "692.98463368", "0.35034612"),
    ),
    (
        EXAMPLE,
        "--batch_size 1024 --num_accelerators 256 --precision fp8 --model_type llama3.1-70b --accelerator_type h200",
        "--batch-size 1024 --gpus 256 --precision fp8 --model llama31_70b --accelerator a3ultra",
        ("25.39738855", "616.26808480", "0.31156122"),
    ),
    (
        SYNTHETIC,
        "--batch_size 2048 --num_accelerators 256 --model_type gpt3-175b --accelerator_type h100",
        "--batch-size 2048 --gpus 256 --model gpt3-175b --accelerator p5",
        ("24.11698386", "729.77616522", "0.73789299"),
    ),
    (
        SYNTHETIC,
        "--batch_size 1024 --num_accelerators 128 --model_type llama3.1-405b --accelerator_type b200 --precision fp8 "
        "--start_step 5 --end_step 15",
        "--batch-size 1024 --gpus 128 --model llama3.1-405b --accelerator a4 --precision fp8 --start-step 5 --end-step 15",
        ("24.26656194", "7138.48135571", "1.58632919"),
    ),
    (
        SYNTHETIC,
        "--batch_size 1024 --num_accelerators 256 --model_type mixtral-7b --accelerator_type h200 --start_step 0 "
        "--end_step 32",
        "--batch-size 1024 --gpus 256 --model mixtral-7b --accelerator p5en --start-step 0 --end-step 32",
        ("28.38984300", "47.90445654", "0.04843727"),
    ),
    (
        SYNTHETIC,
        "--batch_size 2048 --num_accelerators 256 --model_flops 1.6E15 --max_flops 1000 --start_step 12 --end_step 12",
        "--batch-size 2048 --gpus 256 --model-flops 1.6E15 --peak-tflops 1000 --start-step 12 --end-step 12",
        ("24.83278221", "515.44768088", "0.51544768"),
    ),
    (
        SYNTHETIC,
        "--batch_size 512 --num_accelerators 64 --model_type llama2-7b --accelerator_type a100",
        "--batch-size 512 --gpus 64 --model llama2-7b --accelerator p4de",
        ("24.11698386", "62.69440692", "0.20094361"),
    ),
    (
        SYNTHETIC,
        "--batch_size 256 --num_accelerators 16 --model_type gpt3-5b --accelerator_type h100 --start_step 3 "
        "--end_step 32",
        "--batch-size 256 --gpus 16 --model gpt3-5b --accelerator a3high --start-step 3 --end-step 32",
        ("24.10973127", "44.39701082", "0.04489081"),
    ),
    (
        SYNTHETIC,
        "--batch_size 512 --num_accelerators 64 --model_type llama3.1-8b --accelerator_type b200",
        "--batch-size 512 --gpus 64 --model llama3.1-8b --accelerator b200",
        ("24.11698386", "157.23359196", "0.06988160"),
    ),
    (
        SYNTHETIC,
        "--batch_size 1024 --num_accelerators 512 --model_type llama2-70b --accelerator_type h100 --precision fp8 "
        "--start_step 20 --end_step 25",
        "--batch-size 1024 --gpus 512 --model llama2-70b --accelerator h100 --precision fp8 --start-step 20 --end-step 25",
        ("24.08316651", "151.14291549", "0.07641199"),
    ),
    (
        SYNTHETIC,
        "--batch_size 512 --num_accelerators 128 --model_type llama3-70b --accelerator_type h200",
        "--batch-size 512 --gpus 128 --model llama3-70b --accelerator a3ultra",
        ("24.11698386", "653.48138431", "0.66074963"),
    ),
    (
        SYNTHETIC,
        "--batch_size 512 --num_accelerators 128 --model_type mixtral-8x7b --accelerator_type b200 --precision fp8",
        "--batch-size 512 --gpus 128 --model mixtral_8x7b --accelerator a4 --precision fp8",
        ("24.11698386", "56.39179459", "0.01253151"),
    ),
]


def cli(*args: str):
    return CliRunner().invoke(main, ["metrics", *args], catch_exceptions=False)


def metrics_json(*args: str) -> dict:
    result = cli(*args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _anchor_args(text: str) -> dict[str, str]:
    tokens = text.replace("=", " ").split()
    return dict(zip(tokens[0::2], tokens[1::2]))


def independent(fixture: Path, anchor_args: str) -> tuple[float, float, float]:
    """The metrics from first principles: dllogger lines parsed here, the anchor's tables written out above."""
    args = _anchor_args(anchor_args)
    start, end = int(args.get("--start_step", 10)), int(args.get("--end_step", 30))
    times = []
    for line in fixture.read_text().splitlines():
        entry = json.loads(line[len("DLLL ") :])
        if (
            isinstance(entry["step"], int)
            and start <= entry["step"] <= end
            and "train_step_timing in s" in entry["data"]
        ):
            times.append(entry["data"]["train_step_timing in s"])
    step_time = math.fsum(times) / len(times)
    model = float(args["--model_flops"]) if "--model_flops" in args else ANCHOR_MODEL_FLOPS[args["--model_type"]]
    peak = (
        float(args["--max_flops"])
        if "--max_flops" in args
        else ANCHOR_MAX_TFLOPS[(args["--accelerator_type"], args.get("--precision", "bf16"))]
    )
    tflops = model * int(args["--batch_size"]) / step_time / int(args["--num_accelerators"]) / 1e12
    return step_time, tflops, tflops / peak


def close(a: float, b: float, rel: float) -> bool:
    return abs(a - b) <= rel * abs(b)


@pytest.mark.parametrize(
    "fixture, anchor_args, our_args, recorded",
    ANCHOR_RUNS,
    ids=[
        f"{r[0].stem}:{r[2].split('--model')[1].split()[0] if '--model ' in r[2] else 'flops'}-{i}"
        for i, r in enumerate(ANCHOR_RUNS)
    ],
)
def test_equals_the_anchor_and_an_independent_calculation(fixture, anchor_args, our_args, recorded):
    ours = metrics_json("--file", str(fixture), *our_args.split())
    got = (ours["step_time_s"], ours["tflops_per_gpu"], ours["mfu"])
    for value, anchor in zip(got, recorded):
        assert close(value, float(anchor), 1e-6), (value, anchor)
        assert f"{value:.8f}" == anchor  # the anchor's own print
    for value, expected in zip(got, independent(fixture, anchor_args)):
        assert close(value, expected, 1e-12), (value, expected)
    assert ours["steps"] == len(
        [t for t in read_log(fixture).timings if ours["start_step"] <= t.step <= ours["end_step"]]
    )


def test_text_output_prints_the_anchors_numbers():
    result = cli(
        "--file",
        str(EXAMPLE),
        "--batch-size",
        "2048",
        "--gpus",
        "256",
        "--model",
        "gpt3-175b",
        "--accelerator",
        "a3mega",
    )
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert lines[0] == "Average step time  25.39738855 s"
    assert lines[1] == "TFLOPS per GPU     692.98463368"
    assert lines[2].startswith("MFU                0.70069225   (70.07 % of 989 TFLOPS bf16 peak)")
    assert "steps        10–30: 21 step(s)" in result.stdout


def test_anchor_spelling_of_the_options_works():
    """gpu-recipes READMEs' command lines run unchanged (with `helm nemo metrics` in front)."""
    ours = metrics_json(
        "--file",
        str(EXAMPLE),
        "--batch_size",
        "2048",
        "--num_accelerators",
        "256",
        "--model_type",
        "gpt3-175b",
        "--accelerator_type",
        "h100",
        "--precision",
        "fp8",
        "--start_step",
        "10",
        "--end_step",
        "30",
    )
    assert f"{ours['mfu']:.8f}" == "0.35034612"


def test_json_has_the_documented_keys():
    ours = metrics_json(
        "--file",
        str(SYNTHETIC),
        "--batch-size",
        "2048",
        "--gpus",
        "256",
        "--model",
        "gpt3-175b",
        "--accelerator",
        "a3mega",
    )
    for key in (
        "step_time_s",
        "tflops_per_gpu",
        "mfu",
        "steps",
        "start_step",
        "end_step",
        "format",
        "global_batch_size",
        "gpus",
        "model",
        "model_flops_per_sample",
        "accelerator",
        "precision",
        "peak_tflops",
    ):
        assert key in ours
    assert ours["steps"] == 21 and ours["format"] == "dllogger" and ours["peak_tflops"] == 989


# ---- log formats ---------------------------------------------------------------------------------------

_PRINTED = {
    "nemo2-rank0.log": (
        re.compile(r"global_step: (\d+) \|.*train_step_timing in s: ([0-9.e+-]+)"),
        lambda s: int(s),
        1.0,
    ),
    "megatron-bridge.log": (
        re.compile(r"iteration\s+(\d+)/.*elapsed time per iteration \(ms\): ([0-9.]+)"),
        lambda s: int(s) - 1,
        1000.0,
    ),
}


@pytest.mark.parametrize(
    "name, fmt, resolution",
    [
        ("nemo2-rank0.log", "nemo2", 1e-3),  # 4 significant digits
        ("megatron-bridge.log", "megatron", 1e-5),  # 0.1 ms
        ("megatron-bridge-rank0.log", "megatron-step-time", 5e-4),  # 10 ms
    ],
)
def test_text_logs_give_the_dllogger_result_within_their_resolution(name, fmt, resolution):
    args = ["--batch-size", "2048", "--gpus", "256", "--model", "gpt3-175b", "--accelerator", "a3mega"]
    reference = metrics_json("--file", str(SYNTHETIC), *args)
    ours = metrics_json("--file", str(FIXTURES / name), *args)
    assert ours["format"] == fmt
    assert ours["steps"] == reference["steps"] == 21
    for key in ("step_time_s", "tflops_per_gpu", "mfu"):
        assert close(ours[key], reference[key], resolution), (key, ours[key], reference[key])


@pytest.mark.parametrize("name", sorted(_PRINTED))
def test_text_logs_average_exactly_what_they_print(name):
    pattern, step_of, per_second = _PRINTED[name]
    times = []
    for line in (FIXTURES / name).read_text().splitlines():
        found = pattern.search(line)
        if found and 10 <= step_of(found.group(1)) <= 30:
            times.append(float(found.group(2)) / per_second)
    ours = metrics_json(
        "--file",
        str(FIXTURES / name),
        "--batch-size",
        "1",
        "--gpus",
        "1",
        "--model-flops",
        "1e12",
        "--peak-tflops",
        "1",
    )
    assert len(times) == 21
    assert close(ours["step_time_s"], math.fsum(times) / len(times), 1e-12)


def test_step_time_lines_are_numbered_in_order_from_zero():
    log = read_log(FIXTURES / "megatron-bridge-rank0.log")
    assert [t.step for t in log.timings] == list(range(36))


def test_megatron_iteration_lines_win_over_step_time_lines(tmp_path):
    mixed = tmp_path / "mixed.log"
    mixed.write_text(
        (FIXTURES / "megatron-bridge-rank0.log").read_text() + (FIXTURES / "megatron-bridge.log").read_text()
    )
    assert read_log(mixed).format == "megatron"


def test_prefixes_and_carriage_returns_do_not_hide_a_line(tmp_path):
    log = tmp_path / "pod.log"
    log.write_text(
        "retraining/0 [default0]:Training epoch 0, iteration 0/9 | global_step: 0 | train_step_timing in s: 5.2\n"
        "progress\rretraining/0 [default0]:Training epoch 0, iteration 1/9 | lr: 1e-06 | global_step: 1 | "
        "reduced_train_loss: 9.1 | train_step_timing in s: 2.5 | consumed_samples: 16\n"
    )
    parsed = read_log(log)
    assert [(t.step, t.seconds) for t in parsed.timings] == [(0, 5.2), (1, 2.5)]


def test_validation_entries_without_a_step_time_are_skipped():
    """The anchor adds None for them (TypeError) when they fall in the range; here step 33 has one."""
    ours = metrics_json(
        "--file",
        str(SYNTHETIC),
        "--batch-size",
        "1",
        "--gpus",
        "1",
        "--model-flops",
        "1e12",
        "--peak-tflops",
        "1",
        "--start-step",
        "30",
        "--end-step",
        "35",
    )
    assert ours["steps"] == 6


def test_a_repeated_step_is_averaged_with_a_warning(tmp_path):
    log = tmp_path / "dllogger.json"
    lines = SYNTHETIC.read_text().splitlines()
    log.write_text("\n".join(lines + lines[12:14]) + "\n")
    result = cli("--file", str(log), "--batch-size", "1", "--gpus", "1", "--model-flops", "1e12", "--peak-tflops", "1")
    assert result.exit_code == 0
    assert "appear more than once" in result.stderr
    assert (
        json.loads(
            cli(
                "--file",
                str(log),
                "--batch-size",
                "1",
                "--gpus",
                "1",
                "--model-flops",
                "1e12",
                "--peak-tflops",
                "1",
                "--json",
            ).stdout
        )["steps"]
        == 23
    )


# ---- bad input: one clear message, exit 2 -----------------------------------------------------------------


def _dllogger(*entries: str) -> str:
    return "".join(f"DLLL {e}\n" for e in entries)


def _step(step, seconds) -> str:
    return json.dumps({"step": step, "data": {"train_step_timing in s": seconds}})


GOOD_ARGS = ["--batch-size", "2048", "--gpus", "256", "--model", "gpt3-175b", "--accelerator", "a3mega"]

BAD_LOGS = [
    ("empty", "", "the log is empty"),
    ("blank lines only", "\n\n  \n", "the log is empty"),
    ("no steps in range", _dllogger(*[_step(s, 20.0) for s in range(5)]), "no steps in 10–30: the log has steps 0–4"),
    (
        "truncated last line",
        _dllogger(*[_step(s, 20.0) for s in range(12)]) + 'DLLL {"step": 12, "data": {"train_st',
        ":13: $: the last line is cut short",
    ),
    (
        "truncated last line with a line end",
        _dllogger(*[_step(s, 20.0) for s in range(12)]) + 'DLLL {"step": 12, "da\n',
        ":13: $: the last line is cut short",
    ),
    (
        "invalid JSON in the middle",
        _dllogger(_step(10, 20.0)) + "DLLL {oops\n" + _dllogger(_step(11, 20.0)),
        ":2: $: not valid JSON after `DLLL`",
    ),
    (
        "NaN timing",
        _dllogger(*[_step(s, 20.0) for s in range(10)], '{"step": 10, "data": {"train_step_timing in s": NaN}}'),
        ":11: $: step 10: step time nan is not a positive number",
    ),
    ("null timing", _dllogger(_step(10, None)), ":1: $: step 10: step time null is not a positive number"),
    ("string timing", _dllogger(_step(10, "fast")), "step 10: step time 'fast' is not a positive number"),
    ("zero timing", _dllogger(_step(10, 0)), "step 10: step time 0 is not a positive number"),
    ("non-integer step", _dllogger(_step("ten", 20.0)), ':1: $.step: step "ten" is not an integer'),
    (
        "plain line inside dllogger",
        _dllogger(_step(10, 20.0)) + "Traceback (most recent call last):\n",
        ":2: $: not a dllogger line",
    ),
    (
        "no dllogger timings",
        _dllogger('{"step": "PARAMETER", "data": {}}'),
        "no dllogger entry has `train_step_timing in s`",
    ),
    ("unknown text", "hello\nworld\n", "no training step times found in this log"),
    (
        "truncated text log",
        "Training epoch 0, iteration 10/99 | global_step: 10 | train_step_timing in s: 2",
        ":1: $: the last line is cut short (no line end)",
    ),
    (
        "NaN in a Megatron log",
        " iteration       11/     100 | elapsed time per iteration (ms): nan |\n",
        "step 10: step time nan is not a positive number",
    ),
]


@pytest.mark.parametrize("name, text, message", BAD_LOGS, ids=[c[0] for c in BAD_LOGS])
def test_bad_logs_give_one_clear_message_and_exit_2(tmp_path, name, text, message):
    log = tmp_path / "dllogger.json"
    log.write_text(text)
    result = cli("--file", str(log), *GOOD_ARGS)
    assert result.exit_code == 2, result.output
    assert message in result.stderr
    assert result.stderr.startswith(str(log))
    assert "Traceback" not in result.stderr and result.stdout == ""


BAD_ARGS = [
    ("missing log", ["--file", "/nonexistent/dllogger.json", *GOOD_ARGS], "log file not found"),
    ("log is a directory", ["--file", str(FIXTURES), *GOOD_ARGS], "the log path is a directory"),
    (
        "unknown model",
        ["--file", str(SYNTHETIC), "--batch-size", "8", "--gpus", "8", "--model", "gpt5", "--accelerator", "a4"],
        "command line: --model: unknown model 'gpt5'",
    ),
    (
        "model without a formula",
        ["--file", str(SYNTHETIC), "--batch-size", "8", "--gpus", "8", "--model", "wan_14b", "--accelerator", "a4"],
        "model 'wan_14b': its diffusion-transformer architecture (the Wan 2.1 video model) is not in the FLOPs formula",
    ),
    (
        "no model at all",
        ["--file", str(SYNTHETIC), "--batch-size", "8", "--gpus", "8", "--accelerator", "a4"],
        "--model: the model is not known",
    ),
    (
        "unknown accelerator",
        ["--file", str(SYNTHETIC), "--batch-size", "8", "--gpus", "8", "--model", "gpt3-5b", "--accelerator", "v5e"],
        "unknown accelerator 'v5e'",
    ),
    (
        "fp8 on A100",
        [
            "--file",
            str(SYNTHETIC),
            "--batch-size",
            "8",
            "--gpus",
            "8",
            "--model",
            "gpt3-5b",
            "--accelerator",
            "p4de",
            "--precision",
            "fp8",
        ],
        "A100 80GB (p4de profile) has no fp8 peak",
    ),
    (
        "zero GPUs",
        ["--file", str(SYNTHETIC), "--batch-size", "8", "--gpus", "0", "--model", "gpt3-5b", "--accelerator", "a4"],
        "--gpus: 0 is not a positive integer",
    ),
    (
        "empty step range",
        ["--file", str(SYNTHETIC), *GOOD_ARGS, "--start-step", "30", "--end-step", "10"],
        "empty step range 30–10",
    ),
    (
        "negative FLOPs",
        ["--file", str(SYNTHETIC), "--batch-size", "8", "--gpus", "8", "--model-flops", "-1", "--accelerator", "a4"],
        "--model-flops: -1.0 is not a positive number",
    ),
]


@pytest.mark.parametrize("name, args, message", BAD_ARGS, ids=[c[0] for c in BAD_ARGS])
def test_bad_arguments_give_one_clear_message_and_exit_2(name, args, message):
    result = cli(*args)
    assert result.exit_code == 2, result.output
    assert message in result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""


def test_every_missing_input_is_named_at_once():
    result = cli("--file", str(SYNTHETIC))
    assert result.exit_code == 2
    for option in ("--batch-size", "--gpus", "--model", "--accelerator"):
        assert f"command line: {option}:" in result.stderr


# ---- FLOPs model -------------------------------------------------------------------------------------------

# The formula against the anchor's table: every listed model within the table's printed precision
# (half a unit of its last digit), except two whose table values were computed some other way.
FORMULA_VS_TABLE = {"llama3.1-70b": 0.0079, "llama3.1-405b": -0.0067}


@pytest.mark.parametrize("name", sorted(ANCHOR_MODEL_FLOPS))
def test_formula_reproduces_the_anchor_table(name):
    table = ANCHOR_MODEL_FLOPS[name]
    formula = flops_model.known_model(name).arch.flops_per_sample()
    if name in FORMULA_VS_TABLE:
        assert formula / table - 1 == pytest.approx(FORMULA_VS_TABLE[name], abs=5e-5)
        return
    mantissa = f"{table:e}".split("e")[0].rstrip("0").rstrip(".")
    digits = len(mantissa.replace(".", "").lstrip("0"))
    half_unit = 0.5 * 10 ** (math.floor(math.log10(table)) - digits + 1)
    assert abs(formula - table) <= half_unit, (formula, table, half_unit)


def test_table_models_use_the_anchor_number_and_other_sequence_lengths_the_formula():
    model = flops_model.known_model("llama3.1-70b")
    assert flops_model.flops_for_model(model).flops == 3.9129e15
    at_4k = flops_model.flops_for_model(model, 4096)
    # NeMo's llama formula by hand: s·L·h²·(12 + 12·G/H + 18·f/h + 12·s/h) + 6·s·h·V
    s, layers, h, f, heads, groups, vocab = 4096, 80, 8192, 28672, 64, 8, 128256
    by_hand = s * layers * h * h * (12 + 12 * groups / heads + 18 * f / h + 12 * s / h) + 6 * s * h * vocab
    assert at_4k.source == "formula" and at_4k.flops == pytest.approx(by_hand, rel=1e-12)


def test_formula_by_hand_for_a_moe_model_with_its_own_head_size():
    """Qwen3-235B-A22B: 94 layers, hidden 4096, 64 query / 4 KV heads of 128, 128 experts top-8 of 1536."""
    s, h, heads, kv, d, layers, vocab = 4096, 4096, 64, 4, 128, 94, 151936
    attention = 2 * h * d * (heads + 2 * kv) + 2 * heads * d * h + 4 * s * heads * d
    mlp = 8 * 2 * 3 * h * 1536
    expected = 3 * s * (layers * (attention + mlp) + 2 * h * vocab)
    assert flops_model.known_model("qwen3_235b_a22b").arch.flops_per_sample() == expected


@pytest.mark.parametrize("spelling", ["llama3.1-405b", "llama31_405b", "Llama3-1-405B", "llama31-405b"])
def test_model_names_as_recipes_spell_them(spelling):
    assert flops_model.known_model(spelling).name == "llama3.1-405b"


# ---- peak TFLOPS -------------------------------------------------------------------------------------------


def _profiles() -> dict[str, dict]:
    return {p.stem: yaml.safe_load(p.read_text()) for p in sorted((ROOT / "values" / "accelerators").glob("*.yaml"))}


@pytest.mark.parametrize("profile_id", sorted(_profiles()))
def test_every_profile_states_the_peaks_of_its_gpu(profile_id):
    profile = _profiles()[profile_id]
    peak = gpu_peak(profile["gpu"])  # the first profile of that GPU: profiles sharing a GPU must agree
    assert peak is not None
    assert profile["peakTflops"] == peak.as_profile_field(), f"{profile_id} disagrees with {peak.gpu}'s other profiles"


def test_anchor_peaks_are_kept():
    for (gpu, precision), tflops in ANCHOR_MAX_TFLOPS.items():
        assert gpu_peak(gpu).tflops(precision) == tflops


def test_every_gpu_peak_is_documented():
    """GB300 (a4x-max) and RTX PRO 6000 Blackwell (g4) under their other spellings, and every GPU's row in
    docs/metrics.md (GPU, BF16, FP8, source) equal to the profiles' figures."""
    assert gpu_peak("GB300").as_profile_field() == {
        "bf16": 2500,
        "fp8": 5000,
        "source": "https://www.nvidia.com/en-us/data-center/gb300-nvl72/",
    }
    assert gpu_peak("RTX PRO 6000 Blackwell Server Edition").tflops("fp8") == 1007.6
    assert gpu_peak("NVIDIA RTX PRO 6000").tflops("bf16") == 503.8
    rows = {
        gpu_key(m.group(1)): m.groups()[1:]
        for m in re.finditer(
            r"^\| ([^|]+?) \| ([^|]+?) \| ([^|]+?) \| (\S+)", (ROOT / "docs" / "metrics.md").read_text(), re.M
        )
    }
    for key, peak in gpu_peaks().items():
        fp8 = "–" if peak.fp8 is None else f"{peak.fp8:g}"
        assert rows.get(key) == (f"{peak.bf16:g}", fp8, peak.source), peak.gpu


def test_gpu_name_works_as_accelerator():
    ours = metrics_json(
        "--file",
        str(EXAMPLE),
        "--batch-size",
        "2048",
        "--gpus",
        "256",
        "--model",
        "gpt3-175b",
        "--accelerator",
        "gb300",
        "--precision",
        "fp8",
    )
    assert ours["peak_tflops"] == 5000


# ---- --values ----------------------------------------------------------------------------------------------

EXAMPLES = ROOT / "values" / "examples"


def test_values_give_gpus_accelerator_precision_batch_and_model():
    ours = metrics_json("--file", str(EXAMPLE), "--values", str(EXAMPLES / "a3mega-gpt3-175b.yaml"))
    assert (ours["gpus"], ours["accelerator"], ours["precision"], ours["global_batch_size"], ours["model"]) == (
        256,
        "a3mega",
        "fp8",
        2048,
        "gpt3-175b",
    )
    assert f"{ours['mfu']:.8f}" == "0.35034612"  # the a3mega recipe README's command, run by the anchor
    assert ours["inputs"]["gpus"].endswith("a3mega-gpt3-175b.yaml:19 $.workload.gpus")
    assert ours["inputs"]["precision"].endswith("gpt3-175b.yaml model.fp8")


def test_command_line_wins_over_the_values():
    ours = metrics_json(
        "--file",
        str(EXAMPLE),
        "--values",
        str(EXAMPLES / "a3mega-gpt3-175b.yaml"),
        "--precision",
        "bf16",
        "--gpus",
        "512",
    )
    assert (ours["precision"], ours["gpus"], ours["inputs"]["gpus"]) == ("bf16", 512, "command line")


def test_recipe_file_picks_its_training_release():
    ours = metrics_json("--file", str(SYNTHETIC), "--values", str(EXAMPLES / "p4de-gpt3-5b.yaml"))
    assert (ours["gpus"], ours["accelerator"], ours["model"], ours["global_batch_size"]) == (16, "p4de", "gpt3-5b", 256)
    assert "$.releases[1].accelerator" in ours["inputs"]["accelerator"]


def test_nemo2_recipe_without_a_batch_size_asks_for_it():
    result = cli("--file", str(SYNTHETIC), "--values", str(EXAMPLES / "a4-llama31-405b.yaml"))
    assert result.exit_code == 2
    assert "--batch-size: the global batch size is not known" in result.stderr
    assert "'llama31_405b' runs with its recipe's default" in result.stderr
    ours = metrics_json(
        "--file", str(SYNTHETIC), "--values", str(EXAMPLES / "a4-llama31-405b.yaml"), "--batch-size", "1024"
    )
    assert (ours["model"], ours["gpus"], ours["accelerator"], ours["peak_tflops"]) == ("llama3.1-405b", 128, "a4", 2250)


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_arguments_override_the_config_and_variables_are_substituted(tmp_path, monkeypatch):
    _write(
        tmp_path / "model.yaml",
        yaml.safe_dump(
            {
                "trainer": {"precision": "bf16-mixed"},
                "model": {
                    "global_batch_size": 64,
                    "encoder_seq_length": 4096,
                    "num_layers": 4,
                    "hidden_size": 1024,
                    "ffn_hidden_size": 2816,
                    "num_attention_heads": 16,
                    "num_query_groups": 4,
                    "activation": "swiglu",
                    "padded_vocab_size": 32000,
                    "max_position_embeddings": "${.encoder_seq_length}",
                },
            }
        ),
    )
    values = _write(
        tmp_path / "values.yaml",
        "accelerator: ${ACCEL}\nchart: nemo-training\nfiles:\n  nemo_config: model.yaml\n"
        "workload:\n  gpus: 16\n  image: ${UNSET_IMAGE}\n  arguments:\n    - model.global_batch_size=128\n"
        "    - {name: model.fp8, value: true}\n",
    )
    monkeypatch.setenv("ACCEL", "a3ultra")
    ours = metrics_json("--file", str(SYNTHETIC), "--values", str(values))
    assert (ours["accelerator"], ours["global_batch_size"], ours["precision"], ours["peak_tflops"]) == (
        "a3ultra",
        128,
        "fp8",
        1978,
    )
    arch = flops_model.Architecture(
        layers=4, hidden=1024, ffn=2816, heads=16, kv_heads=4, vocab=32000, seq_len=4096, gated=True
    )
    assert ours["model"] is None and ours["model_flops_per_sample"] == arch.flops_per_sample()
    assert ours["inputs"]["batch_size"].endswith("values.yaml:9 $.workload.arguments[0]")


def test_megatron_bridge_launcher_flags(tmp_path):
    values = _write(
        tmp_path / "values.yaml",
        "accelerator: a4x\nchart: jobset\nworkload:\n  gpus: 64\n  arguments:\n"
        "    - --model_recipe_name\n    - qwen3_235b_a22b\n    - --global_batch_size=1024\n"
        "    - --compute_dtype\n    - fp8_mx\n",
    )
    ours = metrics_json("--file", str(SYNTHETIC), "--values", str(values))
    assert (ours["model"], ours["global_batch_size"], ours["precision"], ours["peak_tflops"]) == (
        "qwen3-235b-a22b",
        1024,
        "fp8",
        5000,
    )


def test_unknown_model_in_a_config_without_vocabulary_is_an_error(tmp_path):
    _write(
        tmp_path / "model.yaml",
        yaml.safe_dump(
            {
                "model": {
                    "global_batch_size": 8,
                    "encoder_seq_length": 1024,
                    "num_layers": 3,
                    "hidden_size": 256,
                    "num_attention_heads": 4,
                    "tokenizer": {"type": "SentencePiece"},
                }
            }
        ),
    )
    values = _write(
        tmp_path / "values.yaml", "accelerator: a4\nfiles: {nemo_config: model.yaml}\nworkload: {gpus: 8}\n"
    )
    result = cli("--file", str(SYNTHETIC), "--values", str(values))
    assert result.exit_code == 2
    assert (
        f"{tmp_path / 'model.yaml'}: model: the config's model is no known model and its vocabulary size is not stated"
        in result.stderr
    )


def test_a_recipe_with_two_trainings_needs_release(tmp_path):
    values = _write(
        tmp_path / "recipe.yaml",
        "releases:\n"
        "  - {release: a, chart: jobset, accelerator: a4, values: {workload: {gpus: 8}}}\n"
        "  - {release: b, chart: jobset, accelerator: a4x, values: {workload: {gpus: 4}}}\n",
    )
    result = cli("--file", str(SYNTHETIC), "--values", str(values), "--model", "gpt3-5b", "--batch-size", "8")
    assert result.exit_code == 2 and "2 releases train (a, b); which one?" in result.stderr
    ours = metrics_json(
        "--file", str(SYNTHETIC), "--values", str(values), "--model", "gpt3-5b", "--batch-size", "8", "--release", "b"
    )
    assert (ours["gpus"], ours["accelerator"]) == (4, "a4x")


def test_unset_variable_in_a_field_metrics_reads_is_an_error(tmp_path, monkeypatch):
    monkeypatch.delenv("ACCEL", raising=False)
    values = _write(tmp_path / "values.yaml", "accelerator: ${ACCEL}\nworkload: {gpus: 8}\n")
    result = cli("--file", str(SYNTHETIC), "--values", str(values), "--model", "gpt3-5b", "--batch-size", "8")
    assert result.exit_code == 2 and "variable ACCEL is not set" in result.stderr


def test_library_raises_user_error():
    with pytest.raises(UserError):
        measure(Request(file=str(SYNTHETIC)))


def test_metrics_is_in_the_help():
    assert "metrics" in CliRunner().invoke(main, ["--help"]).stdout


def test_readme_example_is_what_the_command_prints(tmp_path, monkeypatch):
    readme = (ROOT / "README.md").read_text()
    block = readme.split("```console\n$ helm nemo metrics ", 1)[1].split("```", 1)[0]
    command, expected = block.split("\n", 1)
    (tmp_path / "dllogger.json").write_bytes(EXAMPLE.read_bytes())
    monkeypatch.chdir(tmp_path)
    result = cli(*command.split())
    assert result.exit_code == 0
    assert result.stdout == expected


def test_errors_about_values_point_at_their_line(tmp_path):
    values = _write(
        tmp_path / "values.yaml",
        "accelerator: tpu9\nworkload:\n  gpus: 8\n  envs:\n    - {name: NEMO_RECIPE, value: wan_14b}\n",
    )
    result = cli("--file", str(SYNTHETIC), "--values", str(values), "--batch-size", "8")
    assert result.exit_code == 2
    assert f"{values}:1: $.accelerator: unknown accelerator 'tpu9'" in result.stderr
    assert (
        f"{values}:5" in result.stderr
        and "$.workload.envs[0].value: model 'wan_14b': its diffusion-transformer architecture (the Wan 2.1 video model) "
        "is not in the FLOPs formula"
        in result.stderr
    )


def test_nemo1_progress_bar_log(tmp_path):
    """NeMo 1's progress bar (seed 004's line): the bar's count N is step N-1, redraws of one count are one
    step, and the figures are the plain mean of the step times."""
    seed = (
        "Epoch 0: :   0%|          | 2000/603000 [1:03:17<317:00:58, v_num=, reduced_train_loss=2.600, "
        "global_step=2e+3, consumed_samples=1.28e+6, train_step_timing in s=1.900, val_loss=2.800]dation "
        "DataLoader 0: : 51it [00:20,  2.53it/s]"
    )
    times = [2.5, 1.9, 1.8, 1.95, 1.85]
    bars = [
        f"Epoch 0: :   0%|          | {n}/603000 [00:0{n}<317:00:58, v_num=, global_step={n - 1:.3g}, "
        f"train_step_timing in s={t:.3f}]"
        for n, t in enumerate(times, start=1)
    ]
    bars.insert(3, bars[2])  # a redraw of batch 3
    path = tmp_path / "nemo1.log"
    path.write_text("GPU available: True (cuda), used: True\n" + "\r".join(bars + [seed]) + "\n")
    log = read_log(path)
    assert log.format == "nemo1"
    assert [(t.step, t.seconds, t.total) for t in log.timings] == [(n, t, 603000) for n, t in enumerate(times)] + [
        (1999, 1.9, 603000)
    ]
    report = measure(
        Request(file=str(path), start_step=1, end_step=4, batch_size=8, gpus=16, model="gpt3-5b", accelerator="p4de")
    )
    assert report.step_time_s == pytest.approx(math.fsum(times[1:5]) / 4, rel=1e-12)
