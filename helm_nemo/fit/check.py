"""One release through fit: its Run, the layout findings, the memory estimate and verdict, as a report (for
`helm nemo fit` and preflight) and as problems/warnings (for validate, lint, template, install, upgrade).

The memory check's mode: `fit: {memoryCheck: error|warn|off}` in the values (default error), or
HELM_NEMO_FIT_MEMORY (what --no-fit-error sets: warn). A memory error names both ways to make it a warning;
the layout rules stay errors whatever the mode (Megatron refuses those layouts anyway).
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: importing typing costs every run start-up time
    from typing import Any

    from helm_nemo.fit.gpu import Gpu
    from helm_nemo.fit.layout import Finding, Layout
    from helm_nemo.fit.memory import Estimate
    from helm_nemo.fit.model import Run
    from helm_nemo.fit.verdict import Verdict
    from helm_nemo.user_errors import Problem

MODES = ("error", "warn", "off")
ENV_MODE = "HELM_NEMO_FIT_MEMORY"
TURN_OFF = "an estimate: `fit: {memoryCheck: warn}` in the values or --no-fit-error makes this a warning"


def memory_errors_as_warnings() -> None:
    """What --no-fit-error does, on every command that takes it: this process's memory verdicts warn (mode_of)."""
    os.environ[ENV_MODE] = "warn"


class FitReport:
    """One release's answer: its layout, the broken rules, the estimate and verdict, and notes."""

    def __init__(
        self, release: str | None, run: Run, gpu: Gpu | None, layout: Layout, findings: list[Finding] | None = None
    ) -> None:
        self.release = release
        self.run = run
        self.gpu = gpu
        self.layout = layout
        self.findings: list[Finding] = findings or []
        self.estimate: Estimate | None = None
        self.verdict: Verdict | None = None
        self.notes: list[str] = []
        self.mode = "error"  # the memory check's mode (mode_of)

    @property
    def failed(self) -> bool:
        """Exit 2: a layout rule broken, or the memory clearly over the GPU with the check in error mode."""
        over = self.verdict is not None and self.verdict.status == "does not fit" and self.mode == "error"
        return over or any(f.severity == "error" for f in self.findings)

    def memory_line(self) -> str:
        if self.verdict is not None and self.gpu is not None:
            return self.verdict.line(self.gpu.name)
        return self.notes[0] if self.notes else "no memory estimate"

    def as_json(self) -> dict[str, Any]:
        estimate, verdict = self.estimate, self.verdict
        per_gpu = None
        if estimate is not None:
            per_gpu = {k: round(v, 2) for k, v in estimate.terms().items()}
            per_gpu["total"] = round(estimate.total_gib, 2)
        model = self.run.model_label
        return {
            "release": self.release,
            "model": model,
            "gpu": {"name": self.gpu.name, "memory_gib": self.gpu.memory_gib} if self.gpu else None,
            "layout": _layout_json(self.layout),
            "per_gpu_gib": per_gpu,
            "fits": None if verdict is None else verdict.fits,
            "headroom_gib": None if verdict is None else round(verdict.headroom_gib, 2),
            "verdict": None if verdict is None else verdict.status,
            "biggest": None if verdict is None else verdict.biggest,
            "would_fit_with": [] if verdict is None else verdict.changes,
            "worst_stage": None if estimate is None else estimate.stage,
            "assumptions": [] if estimate is None else list(estimate.assumptions),
            "problems": [
                {
                    "severity": f.severity,
                    "rule": f.rule.id,
                    "location": f.problem.location(),
                    "json_path": f.problem.json_path,
                    "message": f.problem.message,
                    "expected": f.problem.expected,
                    "hint": f.problem.hint,
                }
                for f in self.findings
            ],
            "notes": self.notes,
        }


def _layout_json(layout: Layout) -> dict[str, Any]:
    keys = ("gpus", "tp", "pp", "vp", "cp", "ep", "sp", "micro_batch", "global_batch", "seq_len")
    out = {k: getattr(layout, k) for k in keys}
    out["dp"] = layout.dp
    return out


def check_run(run: Run, gpu: Gpu | None, release: str | None = None) -> FitReport:
    from helm_nemo.fit.layout import broken_rules, findings, layout_of
    from helm_nemo.fit.memory import estimate_layout, unmodelled

    notes = _drop_conflicting_defaults(run, gpu)
    layout = layout_of(run, gpu)
    works = suggested = None
    searched = bool(broken_rules(layout))
    if searched:
        from helm_nemo.fit.layout import describe
        from helm_nemo.fit.suggest import suggest

        suggested = suggest(run, layout, gpu)
        works = describe(suggested) if suggested is not None else None
    report = FitReport(release, run, gpu, layout, findings(run, gpu, layout, works))
    report.notes += run.notes + notes
    if gpu is None:
        accelerator = run.accelerator.value if run.accelerator else None
        report.notes.append(
            f"accelerator {accelerator!r} has no GPU memory in its profile: no memory verdict"
            if accelerator
            else "no accelerator: no GPU to compare with"
        )
        return report
    why = unmodelled(run)
    if why is not None:
        report.notes.append(f"no memory verdict: {why}")
        return report
    if layout.stage_layers() is None or layout.model_parallel > (layout.gpus or layout.model_parallel):
        report.notes.append("no memory verdict: the layers do not split over the pipeline stages")
        return report
    if any(f.severity == "note" for f in report.findings):
        report.notes.append("no memory verdict: the recipe's default layout does not divide these GPUs")
        return report
    report.estimate = estimate_layout(run, layout, gpu)
    if report.estimate is not None:
        from helm_nemo.fit.verdict import judge

        report.verdict = judge(run, layout, report.estimate, gpu, (suggested,) if searched else None)
    return report


def _drop_conflicting_defaults(run: Run, gpu: Gpu | None) -> list[str]:
    """A NeMo 2 recipe's default that breaks a rule together with a layout value the file writes (VP 5 by default
    with PP 1 written, SP on by default with TP 1 written) is dropped for Megatron's own default, with a note: the
    recipe table is one NeMo release's, the written value is the user's. GPUs alone do not count (a recipe sized
    for other GPUs keeps its layout and gets a note, not an invented one)."""
    from helm_nemo.fit.layout import findings, layout_of

    megatron = {"vp": None, "sp": False, "cp": 1, "ep": 1, "account_embedding": False, "account_loss": False}
    notes: list[str] = []
    for _ in range(4):
        dropped = False
        for finding in findings(run, gpu, layout_of(run, gpu)):
            if finding.severity != "note":
                continue
            names = [n for n in _names(finding) if n in run.settings]
            written = [n for n in names if run.written(n) and n != "gpus"]
            defaults = [
                n for n in names if (run.settings[n].default or "").startswith("NeMo 2 recipe") and n in megatron
            ]
            if not written or not defaults:
                continue
            for name in defaults:
                old = run.settings[name]
                run.settings[name] = old._replace(value=megatron[name], default="Megatron's default")
                notes.append(
                    f"{old.default}: {name} {old.value} conflicts with "
                    + ", ".join(f"{n} {run.settings[n].value} ({run.settings[n].origin})" for n in written)
                    + f"; assumed {name} {megatron[name]} (write it in the values to be sure)"
                )
            dropped = True
        if not dropped:
            break
    return notes


def _names(finding: Finding) -> tuple[str, ...]:
    return tuple(finding.names)


def mode_of(fit_section: Any) -> str:
    """error | warn | off: HELM_NEMO_FIT_MEMORY (--no-fit-error) over `fit.memoryCheck` in the values."""
    env = os.environ.get(ENV_MODE, "").strip().lower()
    if env in MODES:
        return env
    if isinstance(fit_section, dict) and str(fit_section.get("memoryCheck", "")).lower() in MODES:
        return str(fit_section["memoryCheck"]).lower()
    return "error"


def section_problems(fit_section: Any, at: Problem) -> list[Problem]:
    """`fit:` must be a mapping with memoryCheck one of MODES (a typo must not silently keep the error)."""
    from helm_nemo.user_errors import Problem

    if fit_section is None:
        return []
    wrong = not isinstance(fit_section, dict) or set(fit_section) - {"memoryCheck"}
    value = fit_section.get("memoryCheck", "error") if isinstance(fit_section, dict) else None
    if wrong or str(value).lower() not in MODES:
        return [
            Problem(
                at.file,
                at.line,
                at.column,
                "$.fit",
                f"fit: {fit_section!r} is not a fit section",
                "fit: {memoryCheck: error|warn|off}",
                "docs/fit.md: the memory check of helm nemo fit",
            )
        ]
    return []


def release_problems(
    loaded: Any, values: dict[str, Any], prefix: tuple[Any, ...], real: Any, release: str, fit_section: Any
) -> tuple[list[Problem], list[str], FitReport | None]:
    """(errors, warnings, the report) of one release for build_plans: layout errors always, the memory verdict
    as the mode says. Releases that do not train (no workload.gpus) are skipped."""
    from helm_nemo.fit.gpu import gpu_of
    from helm_nemo.fit.model import read_run

    workload = values.get("workload")
    if not isinstance(workload, dict) or "gpus" not in workload:
        return [], [], None
    run = read_run(loaded, values, prefix, real, release)
    if run.arch is None and not _layout_written(run):
        return [], [], None  # nothing about a model or a layout: nothing to check (fit says so)
    gpu = gpu_of(run.accelerator.value) if run.accelerator else None
    report = check_run(run, gpu, release)
    report.mode = mode_of(fit_section)
    errors = [f.problem for f in report.findings if f.severity == "error"]
    warnings = [
        f"{f.problem.location()}: {f.problem.json_path}: {f.problem.message}"
        for f in report.findings
        if f.severity == "warning"
    ]
    verdict = report.verdict
    mode = report.mode
    if verdict is None or mode == "off" or verdict.status == "fits":
        return errors, warnings, report
    at = _memory_blame(run, verdict)
    text = f"memory: {report.memory_line()}"
    if verdict.status == "does not fit" and mode == "error":
        errors.append(at.problem(f"{text} ({TURN_OFF})", f"at most {verdict.memory_gib:g} GiB per GPU"))
    else:
        warnings.append(f"{at.file}:{at.line}: {at.path}: {text}")
    return errors, warnings, report


def _layout_written(run: Run) -> bool:
    return any(run.written(n) for n in ("tp", "pp", "vp", "cp", "ep", "sp", "micro_batch"))


def _memory_blame(run: Run, verdict: Verdict) -> Any:
    """Where a memory problem points: the micro batch when activations are the biggest term, else the tensor
    parallel size, else workload.gpus; the first of them written in the values."""
    from helm_nemo.fit.model import Setting

    order = ("micro_batch", "tp", "pp") if verdict.biggest == "activations" else ("tp", "pp", "micro_batch")
    for name in order:
        if run.written(name):
            return run.settings[name]
    return run.gpus or Setting(None, run.file)


_WANTED = (
    ("accelerator",),
    ("release",),
    ("files",),
    ("fit",),
    ("workload", "gpus"),
    ("workload", "envs"),
    ("workload", "arguments"),
    ("workload", "defaultArguments"),
    ("nemo_config",),
    ("workload_config",),
)
_FILE_KEYS = ("nemo_config", "workload_config", "workload_launcher")


def reports_for_file(path: str, release: str | None = None, env: Any = None) -> list[FitReport]:
    """`helm nemo fit`: a report per training release of a values or recipe file (releases with workload.gpus;
    `release` picks one). Only the fields fit reads go through ${VAR} substitution (as metrics reads them), so
    variables fit does not need (a bucket, a registry) need not be set."""
    from helm_nemo.fit.gpu import gpu_of
    from helm_nemo.fit.model import read_run
    from helm_nemo.metrics.recipe import _pruned
    from helm_nemo.user_errors import Problem, UserError, raise_if_problems
    from helm_nemo.values import value_at
    from helm_nemo.values.file_refs import read_file_refs
    from helm_nemo.values.load import load_values
    from helm_nemo.values.loaded import LoadedValues
    from helm_nemo.values.recipe import real_path, release_values
    from helm_nemo.values.substitute import runtime_names, substitute

    loaded = load_values(path)
    env = os.environ if env is None else env
    items: list[tuple[tuple[Any, ...], dict[str, Any], dict[str, tuple[Any, ...]]]]
    if "releases" in loaded.data and isinstance(loaded.data["releases"], list):
        items = [
            (("releases", i, "values"), *release_values(item, ("releases", i)))
            for i, item in enumerate(loaded.data["releases"])
            if isinstance(item, dict) and isinstance(item.get("values"), dict)
        ]
    else:
        items = [((), loaded.data, {})]
    reports = []
    problems: list[Problem] = []
    for prefix, values, origin in items:
        name = values.get("release") if isinstance(values.get("release"), str) else None
        workload = values.get("workload")
        if not isinstance(workload, dict) or "gpus" not in workload or (release and name != release):
            continue
        wanted = [prefix + w for w in _WANTED] + list(origin.values())
        skeleton = _pruned(loaded.data, wanted)
        view = LoadedValues(loaded.path, skeleton, loaded.positions, loaded.key_positions, loaded.plain_scalars)
        data = substitute(view, env, keep=runtime_names(loaded.data)).data
        own = dict(value_at(data, prefix) or {})
        for key, where in origin.items():
            if key not in own and value_at(data, where) is not None:
                own[key] = value_at(data, where)
        refs = own.get("files") if isinstance(own.get("files"), dict) else {}
        own["files"] = {k: v for k, v in (refs or {}).items() if k in _FILE_KEYS}
        problems += read_file_refs(loaded, own, prefix)
        run = read_run(loaded, own, prefix, real_path(prefix, origin), name)
        gpu = gpu_of(run.accelerator.value) if run.accelerator else None
        report = check_run(run, gpu, name)
        report.mode = mode_of(own.get("fit"))
        if run.arch is None and not report.notes:
            report.notes.append("no memory verdict: no model")
        reports.append(report)
    raise_if_problems(problems, title=f"{path}: files fit cannot read:")
    if not reports:
        why = f"no training release {release!r}" if release else "no release trains (none has workload.gpus)"
        raise UserError(Problem(str(path), None, None, "$", why))
    return reports


def text(report: FitReport) -> str:
    """The report as lines: the layout, the estimate by term, the verdict, every finding and note."""
    lines = [f"{report.release or '(release)'}:"]
    model = report.run.model_label
    arch = report.run.arch
    if model or arch:
        shape = f"{arch.layers} layers, hidden {arch.hidden}, {arch.heads} heads" if arch else "shape unknown"
        lines.append(f"  model: {model or 'from the config'} ({shape})")
    from helm_nemo.fit.layout import describe

    layout = report.layout
    lines.append(f"  layout: {layout.gpus} GPUs, {describe(layout)}")
    if report.estimate is not None:
        e = report.estimate
        terms = ", ".join(f"{k} {v:,.1f}" for k, v in e.terms().items())
        lines.append(f"  per GPU (GiB, pipeline stage {e.stage}): {terms}; total {e.total_gib:,.1f}")
        lines.append(f"  assumes: {', '.join(e.assumptions)}")
    lines.append(f"  memory: {report.memory_line()}")
    for finding in report.findings:
        lines.append(f"  {finding.severity}: " + finding.problem.format().replace("\n", "\n    "))
    for note in report.notes[1 if report.verdict is None else 0 :] if report.notes else []:
        lines.append(f"  note: {note}")
    return "\n".join(lines)
