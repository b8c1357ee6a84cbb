"""Average step time, TFLOPS per GPU and MFU from a training log, as gpu-recipes' training_metrics computes
them (same step selection, same arithmetic in the same order, so the numbers are identical):

    step_time      = mean of the step times of steps start..end (both included)
    tflops_per_gpu = model FLOPs per sample x global batch size / step_time / GPUs / 1e12
    mfu            = tflops_per_gpu / peak dense TFLOPS of the GPU at the training precision

Inputs come from the command line, else from `--values` (recipe.py); every missing one is reported at
once.
"""

from __future__ import annotations

import json
from pathlib import Path
from collections import Counter
from dataclasses import dataclass, field
import re

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: importing typing costs every run start-up time
    from typing import Any, TypedDict

    from helm_nemo.metrics.logs import StepTiming
    from helm_nemo.metrics.recipe import Found, RecipeInputs

    class Names(TypedDict):
        model: str | None
        model_source: str
        peak_source: str
        seq_len: int | None


from helm_nemo.user_errors import Problem, UserError
from helm_nemo.metrics import flops as flops_model
from helm_nemo.metrics.logs import StepLog, average_seconds, read_log, select_steps
from helm_nemo.metrics.peaks import PRECISIONS, gpu_peak, gpu_peaks

DEFAULT_START, DEFAULT_END = 10, 30
_CLI = "command line"
_PROFILE_ID = re.compile(r"^[a-z][a-z0-9-]*$")


@dataclass
class Request:
    """What the user asked for; None means "not given" (then --values, then an error)."""

    file: str
    start_step: int = DEFAULT_START
    end_step: int = DEFAULT_END
    batch_size: int | None = None
    gpus: int | None = None
    model: str | None = None
    model_flops: float | None = None
    seq_length: int | None = None
    accelerator: str | None = None
    peak_tflops: float | None = None
    precision: str | None = None
    values: str | None = None
    release: str | None = None


@dataclass
class Input:
    """One input of a metrics report, with where it came from (shown next to the figure)."""

    value: Any  # a number, or a name (precision)
    origin: str  # "command line", "default (bf16)", or where --values states it (file:line path)


@dataclass
class Report:
    """A metrics report: the steps measured, the inputs used and the figures derived from them."""

    file: str
    format: str
    start_step: int
    end_step: int
    steps: int
    step_time_s: float
    tflops_per_gpu: float
    mfu: float
    inputs: dict[str, Input]
    model_name: str | None
    model_flops_source: str
    peak_source: str
    warnings: list[str] = field(default_factory=list)
    failure: dict[str, Any] | None = None  # the run's first cause when the log shows it failed (helm_nemo.diagnose)

    def as_json(self) -> dict[str, Any]:
        def value(key: str) -> Any:
            return self.inputs[key].value

        return {
            "step_time_s": self.step_time_s,
            "tflops_per_gpu": self.tflops_per_gpu,
            "mfu": self.mfu,
            "steps": self.steps,
            "start_step": self.start_step,
            "end_step": self.end_step,
            "file": self.file,
            "format": self.format,
            "global_batch_size": value("batch_size"),
            "gpus": value("gpus"),
            "model": self.model_name,
            "model_flops_per_sample": value("model_flops"),
            "model_flops_source": self.model_flops_source,
            "accelerator": value("accelerator"),
            "precision": value("precision"),
            "peak_tflops": value("peak_tflops"),
            "peak_tflops_source": self.peak_source,
            "inputs": {key: item.origin for key, item in self.inputs.items()},
            "warnings": self.warnings,
            "failure": self.failure,
        }

    def text(self) -> str:
        peak = self.inputs["peak_tflops"].value
        precision = self.inputs["precision"].value
        lines = [
            f"Average step time  {self.step_time_s:.8f} s",
            f"TFLOPS per GPU     {self.tflops_per_gpu:.8f}",
            f"MFU                {self.mfu:.8f}   ({self.mfu * 100:.2f} % of {_num(peak)} TFLOPS {precision} peak)",
            "",
            f"steps        {self.start_step}–{self.end_step}: {self.steps} step(s) of {self.file} ({self.format})",
        ]
        if self.failure:
            cause = self.failure
            where = f"line {cause['line']}" + (f", rank {cause['rank']}" if cause.get("rank") else "")
            lines[:0] = [f"FAILED: the run failed: {cause['signature']} ({where}): {cause['text'][:200]}", ""]

        def row(label: str, text: str, key: str) -> None:
            origin = self.inputs[key].origin
            lines.append(f"{label:<12} {text}" + ("" if origin == _CLI else f"  [{origin}]"))

        model = self.model_name or "model"
        row(
            "model",
            f"{model}, {self.inputs['model_flops'].value:.6g} FLOPs per sample ({self.model_flops_source})",
            "model_flops",
        )
        row("batch size", str(self.inputs["batch_size"].value), "batch_size")
        row("GPUs", str(self.inputs["gpus"].value), "gpus")
        row("precision", str(precision), "precision")
        row("peak", f"{_num(peak)} TFLOPS per GPU ({self.peak_source})", "peak_tflops")
        from helm_nemo.terminal_text import safe

        return safe("\n".join(lines))  # the failed line and the file name come from outside: terminal-safe


def _num(value: object) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def measure(request: Request) -> Report:
    """Read the log, resolve every input, compute; UserError listing every problem."""
    inputs, names = resolve(request)
    log = read_log(request.file)
    chosen = select_steps(log, request.start_step, request.end_step)
    step_time = average_seconds(chosen)
    tflops, mfu = figures(step_time, inputs)
    return Report(
        file=request.file,
        format=log.format,
        start_step=request.start_step,
        end_step=request.end_step,
        steps=len(chosen),
        step_time_s=step_time,
        tflops_per_gpu=tflops,
        mfu=mfu,
        inputs=inputs,
        model_name=names["model"],
        model_flops_source=names["model_source"],
        peak_source=names["peak_source"],
        warnings=_warnings(log, chosen, mfu),
        failure=failure(request.file),
    )


def failure(path: str) -> dict[str, Any] | None:
    """The first cause (helm_nemo.diagnose's JSON) when the log shows the run failed, else None: a step time
    from a run that died is still a step time, but the report says the run died."""
    from helm_nemo.diagnose import diagnose_texts

    text = Path(path).read_text(encoding="utf-8", errors="replace")
    diagnosis = diagnose_texts([(path, text)])
    return diagnosis.cause.as_json() if diagnosis.cause is not None else None


def resolve(request: Request) -> tuple[dict[str, Input], Names]:
    """Every input of the figures (command line, else --values), with where it came from, and the names
    (model, its FLOPs source, the peak's source, the sequence length); UserError listing every problem."""
    problems: list[Problem] = []
    if request.start_step < 0 or request.end_step < request.start_step:
        problems.append(
            Problem(
                _CLI,
                None,
                None,
                "--start-step/--end-step",
                f"empty step range {request.start_step}–{request.end_step}",
                expected="0 <= start step <= end step",
            )
        )
    recipe = None
    if request.values:
        from helm_nemo.metrics.recipe import read_recipe

        recipe = read_recipe(request.values, request.release)
    inputs, names = _resolve(request, recipe, problems)
    if problems and recipe is not None:
        problems += recipe.problems  # a config that could not be read explains a missing input
    if problems:
        raise UserError(problems, title="helm nemo metrics: cannot compute the metrics:" if len(problems) > 1 else None)
    return inputs, names


def resolve_partial(
    request: Request, recipe: RecipeInputs | None = None
) -> tuple[dict[str, Input], Names, list[Problem]]:
    """What `resolve` finds, without failing: the inputs found, the names, and the problems for the rest
    (`helm nemo status` shows the figures it can)."""
    problems: list[Problem] = []
    inputs, names = _resolve(request, recipe, problems)
    return inputs, names, problems


def figures(step_time: float, inputs: dict[str, Input]) -> tuple[float, float]:
    """(TFLOPS per GPU, MFU) of an average step time, as the anchor computes them."""
    model_flops = inputs["model_flops"].value
    batch = inputs["batch_size"].value
    gpus = inputs["gpus"].value
    # The anchor's expression, in its order: flops * batch / time / gpus / 1e12.
    tflops = model_flops * batch / step_time / gpus / 1e12
    return tflops, tflops / inputs["peak_tflops"].value


def _warnings(log: StepLog, chosen: list[StepTiming], mfu: float) -> list[str]:
    counts = Counter(t.step for t in chosen)
    repeated = sorted(step for step, n in counts.items() if n > 1)
    out = []
    if repeated:
        out.append(
            f"step(s) {', '.join(map(str, repeated[:10]))} appear more than once in the log (a restarted job "
            "appending to it?); every occurrence is averaged, as gpu-recipes' tool does"
        )
    if mfu > 1:
        out.append(f"MFU {mfu:.2f} is above 1: the model, batch size, GPU count or accelerator do not fit this log")
    return out


def _resolve(request: Request, recipe: RecipeInputs | None, problems: list[Problem]) -> tuple[dict[str, Input], Names]:
    inputs: dict[str, Input] = {}
    names: Names = {"model": None, "model_source": "", "peak_source": "", "seq_len": None}

    def pick(key: str, given: object, found: Found | None, what: str, hint: str) -> None:
        if given is not None:
            inputs[key] = Input(given, _CLI)
        elif found is not None:
            inputs[key] = Input(found.value, found.origin)
        else:
            problems.append(Problem(_CLI, None, None, f"--{key.replace('_', '-')}", f"{what} is not known", hint=hint))

    if recipe is None:
        values_hint = " (or --values FILE)"
        batch_hint = "pass --batch-size N" + values_hint
    else:
        values_hint = f" ({recipe.path} does not state it)"
        batch_hint = (
            "pass --batch-size N: the values state no global batch size (model.global_batch_size in the "
            "config, or a global_batch_size argument)"
            + (f"; {recipe.model.value!r} runs with its recipe's default" if recipe.model else "")
        )
    pick("batch_size", request.batch_size, recipe.batch_size if recipe else None, "the global batch size", batch_hint)
    pick("gpus", request.gpus, recipe.gpus if recipe else None, "the number of GPUs", "pass --gpus N" + values_hint)
    for key in ("batch_size", "gpus"):
        if key in inputs and not (isinstance(inputs[key].value, int) and inputs[key].value >= 1):
            problems.append(
                Problem(
                    _CLI,
                    None,
                    None,
                    f"--{key.replace('_', '-')}",
                    f"{inputs[key].value!r} is not a positive integer"
                    + ("" if inputs[key].origin == _CLI else f" ({inputs[key].origin})"),
                )
            )
            del inputs[key]

    precision = request.precision
    if precision is not None:
        inputs["precision"] = Input(precision, _CLI)
    elif recipe is not None and recipe.precision is not None:
        inputs["precision"] = Input(recipe.precision.value, recipe.precision.origin)
    else:
        inputs["precision"] = Input("bf16", "default (bf16)")
    precision = inputs["precision"].value

    _resolve_model(request, recipe, inputs, names, problems)
    _resolve_peak(request, recipe, precision, inputs, names, problems)
    return inputs, names


def _resolve_model(
    request: Request, recipe: RecipeInputs | None, inputs: dict[str, Input], names: Names, problems: list[Problem]
) -> None:
    seq = request.seq_length
    if seq is None and recipe is not None and recipe.seq_len is not None and request.model is None:
        seq = recipe.seq_len.value
    if request.model_flops is not None:
        if not request.model_flops > 0:
            problems.append(
                Problem(_CLI, None, None, "--model-flops", f"{request.model_flops!r} is not a positive number")
            )
            return
        inputs["model_flops"] = Input(request.model_flops, _CLI)
        names["model"], names["model_source"] = request.model, "--model-flops"
        return
    name, origin, found = request.model, _CLI, None
    if name is None and recipe is not None and recipe.model is not None and recipe.architecture is None:
        found = recipe.model
        name, origin = found.value, found.origin
    if name is not None:
        model = flops_model.known_model(name)
        if model is None:
            reason = flops_model.unsupported_reason(name)
            message = (
                f"model {name!r}: its {reason} is not in the FLOPs formula" if reason else f"unknown model {name!r}"
            )
            expected = ", ".join(flops_model.known_names())
            hint = (
                "pass --model-flops N (FLOPs per sample, forward + backward), or --values with the model's NeMo config"
            )
            problems.append(
                Problem(_CLI, None, None, "--model", message, expected, hint)
                if found is None
                else found.problem(message, expected, hint)
            )
            return
        result = flops_model.flops_for_model(model, seq)
    elif recipe is not None and recipe.architecture is not None:
        arch = recipe.architecture.value
        origin = recipe.architecture.origin
        match = flops_model.match_architecture(arch)
        if match is None and not arch.vocab:
            problems.append(
                recipe.architecture.problem(
                    "the config's model is no known model and its vocabulary size is not stated",
                    hint="set model.padded_vocab_size in the config, or pass --model NAME or --model-flops N",
                )
            )
            return
        result = flops_model.flops_for_architecture(arch)
    else:
        problems.append(
            Problem(
                _CLI,
                None,
                None,
                "--model",
                "the model is not known",
                expected=", ".join(flops_model.known_names()),
                hint="pass --model NAME or --model-flops N (or --values FILE with a NeMo config or NEMO_RECIPE)",
            )
        )
        return
    inputs["model_flops"] = Input(result.flops, origin)
    names["model"] = result.name
    names["seq_len"] = result.seq_len
    names["model_source"] = f"{result.source}, sequence length {result.seq_len}" if result.seq_len else result.source


def _resolve_peak(
    request: Request,
    recipe: RecipeInputs | None,
    precision: str,
    inputs: dict[str, Input],
    names: Names,
    problems: list[Problem],
) -> None:
    if request.peak_tflops is not None:
        if not request.peak_tflops > 0:
            problems.append(
                Problem(_CLI, None, None, "--peak-tflops", f"{request.peak_tflops!r} is not a positive number")
            )
            return
        inputs["peak_tflops"] = Input(request.peak_tflops, _CLI)
        inputs["accelerator"] = Input(request.accelerator, _CLI)
        names["peak_source"] = "--peak-tflops"
        return
    name, origin, found = request.accelerator, _CLI, None
    if name is None and recipe is not None and recipe.accelerator is not None:
        found = recipe.accelerator
        name, origin = found.value, found.origin

    def problem(option: str, message: str, expected: str | None = None, hint: str | None = None) -> Problem:
        return (
            Problem(_CLI, None, None, option, message, expected, hint)
            if found is None
            else found.problem(message, expected, hint)
        )

    if name is None:
        problems.append(
            Problem(
                _CLI,
                None,
                None,
                "--accelerator",
                "the accelerator is not known",
                expected=_accelerator_choices(),
                hint="pass --accelerator ID or --peak-tflops N (or --values FILE naming `accelerator:`)",
            )
        )
        return
    peak, source, label = _peak_for(name)
    if peak is None:
        problems.append(
            problem("--accelerator", f"unknown accelerator {name!r}", _accelerator_choices(), "or pass --peak-tflops N")
        )
        return
    tflops = peak.get(precision)
    if tflops is None:
        problems.append(
            problem(
                "--precision",
                f"{label} has no {precision} peak (no {precision} tensor cores)",
                " | ".join(p for p in PRECISIONS if peak.get(p) is not None),
            )
        )
        return
    inputs["peak_tflops"] = Input(tflops, origin)
    inputs["accelerator"] = Input(name, origin)
    names["peak_source"] = f"{label}, {source}"


def _peak_for(name: str) -> tuple[dict[str, Any] | None, str, str]:
    """(peak TFLOPS by precision, source, label) of an accelerator profile id or a GPU name."""
    from helm_nemo import resources
    from helm_nemo.generate.profiles import load_profile

    profile_file = resources.accelerators_dir() / f"{name}.yaml"
    if _PROFILE_ID.match(name) and profile_file.is_file():
        profile = load_profile(profile_file)
        peak = profile["peakTflops"]
        return peak, peak["source"], f"{profile['gpu']} ({name} profile)"
    gpu = gpu_peak(name)
    if gpu is not None:
        return gpu.as_profile_field(), gpu.source, gpu.gpu
    return None, "", ""


def _accelerator_choices() -> str:
    from helm_nemo import resources

    ids = sorted(p.stem for p in resources.accelerators_dir().glob("*.yaml"))
    return (
        "an accelerator profile ("
        + ", ".join(ids)
        + ") or a GPU ("
        + ", ".join(p.gpu for p in gpu_peaks().values())
        + ")"
    )


def to_json(report: Report) -> str:
    from helm_nemo.terminal_text import escape_json

    return escape_json(json.dumps(report.as_json(), indent=2, ensure_ascii=False))
