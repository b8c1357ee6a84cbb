"""Megatron's parallel-layout rules, checked on the values before anything runs.

Each rule is the check Megatron-core (or Transformer Engine) makes at start-up, cited in RULES (docs/fit.md
has the table); a broken rule becomes a Problem at the value that breaks it (file:line:column, JSON path),
naming every value in the conflict and a layout that works (`suggest`). A rule broken only through a NeMo 2
recipe's defaults is a note, not an error: those defaults differ between NeMo releases (fit/recipes.py).
"""

from __future__ import annotations

from collections import namedtuple

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: importing typing costs every run start-up time
    from typing import Any

    from helm_nemo.fit.gpu import Gpu
    from helm_nemo.fit.model import Run

_MC = "https://github.com/NVIDIA/Megatron-LM/blob/d98e8a64dd/"


class Layout(
    namedtuple(
        "Layout",
        "gpus tp pp vp cp ep etp sp micro_batch global_batch seq_len num_layers heads query_groups experts"
        " first_stage_layers last_stage_layers account_embedding account_loss fp8 gpu_fp8 pipeline_layout",
        defaults=(
            1,
            1,
            None,
            1,
            1,
            1,
            False,
            1,
            None,
            None,
            None,
            None,
            None,
            None,
            None,
            None,
            False,
            False,
            False,
            True,
            None,
        ),
    )
):
    """The numbers the rules read (None: not known, the rules that need it are skipped)."""

    # gpus: int | None
    # tp: int
    # pp: int
    # vp: int | None
    # cp: int
    # ep: int
    # etp: int
    # sp: bool
    # micro_batch: int
    # global_batch: int | None
    # seq_len: int | None
    # num_layers: int | None
    # heads: int | None
    # query_groups: int | None
    # experts: int | None
    # first_stage_layers: int | None
    # last_stage_layers: int | None
    # account_embedding: bool
    # account_loss: bool
    # fp8: bool
    # gpu_fp8: bool
    # pipeline_layout: tuple[str, ...] | str | None  (fit/pipeline_layout.py parse(): the stages, or why not)
    __slots__ = ()

    @property
    def model_parallel(self) -> int:
        return int(self.tp * self.pp * self.cp)

    @property
    def dp(self) -> int | None:
        if self.gpus is None or self.gpus % self.model_parallel:
            return None
        return int(self.gpus // self.model_parallel)

    def stage_layers(self) -> list[int] | None:
        """Transformer layers per pipeline stage (Megatron's get_num_layers_to_build), or None if they do not divide."""
        if isinstance(self.pipeline_layout, tuple):
            from helm_nemo.fit.pipeline_layout import rank_layers

            return rank_layers(self.pipeline_layout, self.pp)
        if self.num_layers is None:
            return None
        if self.first_stage_layers is None and self.last_stage_layers is None:
            total = self.num_layers + int(self.account_embedding) + int(self.account_loss)
            if total % self.pp:
                return None
            stages = [total // self.pp] * self.pp
            stages[0] -= int(self.account_embedding)
            stages[-1] -= int(self.account_loss)
            return stages
        middle, left = self.num_layers, self.pp
        for given in (self.first_stage_layers, self.last_stage_layers):
            if given is not None:
                middle, left = middle - given, left - 1
        if left < 0 or (left == 0 and middle) or (left and middle % left):
            return None
        stages = [middle // left if left else 0] * self.pp
        if self.first_stage_layers is not None:
            stages[0] = self.first_stage_layers
        if self.last_stage_layers is not None:
            stages[-1] = self.last_stage_layers
        return stages


class Rule(namedtuple("Rule", "id source check")):
    """One start-up check of Megatron: `check(layout)` -> None, or (the settings in conflict, what is wrong, what
    is expected)."""

    # id: str
    # source: str  # file and function of the check
    # check: Callable[[Layout], tuple[tuple[str, ...], str, str] | None]
    __slots__ = ()


def _world(lay: Layout) -> tuple[tuple[str, ...], str, str] | None:
    if lay.gpus is None or lay.gpus % lay.model_parallel == 0:
        return None
    return (
        ("gpus", "tp", "pp", "cp"),
        f"{lay.gpus} GPUs are not divisible by tensor × pipeline × context parallel = {lay.tp} × {lay.pp} × {lay.cp} = "
        f"{lay.model_parallel}",
        "GPUs a multiple of TP × PP × CP",
    )


def _expert_world(lay: Layout) -> tuple[tuple[str, ...], str, str] | None:
    size = lay.etp * lay.ep * lay.pp
    if lay.gpus is None or not lay.experts or lay.gpus % size == 0:
        return None
    return (
        ("gpus", "etp", "ep", "pp"),
        f"{lay.gpus} GPUs are not divisible by expert tensor × expert × pipeline parallel = "
        f"{lay.etp} × {lay.ep} × {lay.pp} = {size}",
        "GPUs a multiple of ETP × EP × PP",
    )


def _ep_needs_experts(lay: Layout) -> tuple[tuple[str, ...], str, str] | None:
    if lay.ep <= 1 or lay.experts or lay.num_layers is None:
        return None
    return (("ep",), f"expert parallel size {lay.ep} without experts (a dense model)", "expert parallel size 1")


def _experts_ep(lay: Layout) -> tuple[tuple[str, ...], str, str] | None:
    if not lay.experts or lay.experts % lay.ep == 0:
        return None
    return (
        ("experts", "ep"),
        f"{lay.experts} experts are not divisible by expert parallel size {lay.ep}",
        "expert parallel size a divisor of the number of experts",
    )


def _batch(lay: Layout) -> tuple[tuple[str, ...], str, str] | None:
    dp = lay.dp
    if dp is None or lay.global_batch is None or lay.global_batch % (lay.micro_batch * dp) == 0:
        return None
    return (
        ("global_batch", "micro_batch", "gpus", "tp", "pp", "cp"),
        f"global batch {lay.global_batch} is not divisible by micro batch × data parallel = {lay.micro_batch} × {dp} = "
        f"{lay.micro_batch * dp} (data parallel = {lay.gpus} GPUs / (TP {lay.tp} × PP {lay.pp} × CP {lay.cp}))",
        "global batch a multiple of micro batch × data-parallel size",
    )


def _heads(lay: Layout) -> tuple[tuple[str, ...], str, str] | None:
    if lay.heads is None or lay.heads % lay.tp == 0:
        return None
    return (
        ("heads", "tp"),
        f"{lay.heads} attention heads are not divisible by tensor parallel size {lay.tp}",
        "TP a divisor of the attention heads",
    )


def _query_groups(lay: Layout) -> tuple[tuple[str, ...], str, str] | None:
    groups = lay.query_groups
    if groups is None or groups % lay.tp == 0 or lay.tp % groups == 0:
        return None
    return (
        ("query_groups", "tp"),
        f"{groups} query groups are neither a multiple nor a divisor of tensor parallel size {lay.tp}",
        "TP a divisor or a multiple of the query groups",
    )


def _pipeline_layout(lay: Layout) -> tuple[tuple[str, ...], str, str] | None:
    if lay.pipeline_layout is None:
        return None
    from helm_nemo.fit.pipeline_layout import problem

    why = lay.pipeline_layout if isinstance(lay.pipeline_layout, str) else None
    why = why or problem(lay.pipeline_layout, lay.pp, lay.vp, lay.num_layers)
    if why is None:
        return None
    return (
        ("pipeline_layout", "pp", "vp", "num_layers"),
        f"pipeline_model_parallel_layout: {why}",
        "PP × VP stages split by |, E first, L last, one t per transformer layer (e.g. Et*4|(t*4|)*14tmL)",
    )


def _layers_pp(lay: Layout) -> tuple[tuple[str, ...], str, str] | None:
    if lay.pipeline_layout is not None:  # the layout says which layers each stage builds (rule pipeline-layout)
        return None
    if lay.num_layers is None or lay.stage_layers() is not None:
        return None
    uneven = lay.first_stage_layers is not None or lay.last_stage_layers is not None
    extra = "the layers left after the first/last stage's" if uneven else "the layers"
    return (
        ("num_layers", "pp", "first_stage_layers", "last_stage_layers", "account_embedding", "account_loss"),
        f"{lay.num_layers} layers do not split over pipeline parallel size {lay.pp} ({extra} must divide evenly over "
        "the stages)",
        "layers a multiple of PP, or num_layers_in_first/last_pipeline_stage that leave a multiple",
    )


def _layers_vp(lay: Layout) -> tuple[tuple[str, ...], str, str] | None:
    if lay.vp is None or lay.pp <= 1 or lay.pipeline_layout is not None:
        return None
    stages = lay.stage_layers()
    if stages is None:
        return None
    if lay.first_stage_layers is None and lay.last_stage_layers is None:  # embedding/loss count as layers
        stages = [(lay.num_layers or 0) + int(lay.account_embedding) + int(lay.account_loss)] * lay.pp
        stages = [n // lay.pp for n in stages]
    if all(n % lay.vp == 0 for n in stages):
        return None
    per = sorted({n for n in stages if n % lay.vp})
    return (
        ("num_layers", "pp", "vp", "account_embedding", "account_loss"),
        f"{'/'.join(map(str, per))} layers per pipeline stage ({lay.num_layers} layers / PP {lay.pp}) are not "
        f"divisible by virtual pipeline size {lay.vp}",
        "layers a multiple of PP × VP",
    )


def _vp_needs_pp(lay: Layout) -> tuple[tuple[str, ...], str, str] | None:
    if lay.vp is None or lay.vp <= 1 or lay.pp > 1:
        return None
    return (
        ("vp", "pp"),
        f"virtual pipeline size {lay.vp} with pipeline parallel size {lay.pp}: the interleaved schedule needs a pipeline",
        "PP > 1 with a virtual pipeline, or no virtual pipeline (null)",
    )


def _sp_needs_tp(lay: Layout) -> tuple[tuple[str, ...], str, str] | None:
    if not lay.sp or lay.tp > 1:
        return None
    return (
        ("sp", "tp"),
        "sequence parallel with tensor parallel size 1: sequence parallelism splits along the TP group",
        "sequence_parallel false with TP 1, or TP > 1",
    )


def _seq_cp(lay: Layout) -> tuple[tuple[str, ...], str, str] | None:
    if lay.seq_len is None or lay.cp <= 1 or lay.seq_len % (2 * lay.cp) == 0:
        return None
    return (
        ("seq_len", "cp"),
        f"sequence length {lay.seq_len} is not a multiple of 2 × context parallel size = {2 * lay.cp}",
        "sequence length a multiple of 2 × CP",
    )


def _seq_sp(lay: Layout) -> tuple[tuple[str, ...], str, str] | None:
    if (
        lay.seq_len is None
        or not lay.sp
        or lay.tp <= 1
        or lay.seq_len % lay.cp
        or (lay.seq_len // lay.cp) % lay.tp == 0
    ):
        return None
    return (
        ("seq_len", "tp", "sp", "cp"),
        f"sequence length {lay.seq_len}{f' / CP {lay.cp}' if lay.cp > 1 else ''} is not divisible by tensor parallel "
        f"size {lay.tp}: sequence parallel splits the sequence over the TP group",
        "sequence length (per CP rank) a multiple of TP with sequence parallel",
    )


def _fp8(lay: Layout) -> tuple[tuple[str, ...], str, str] | None:
    if not lay.fp8 or lay.gpu_fp8:
        return None
    return (
        ("fp8", "accelerator"),
        "FP8 on a GPU without FP8 tensor cores (compute capability below 8.9)",
        "bf16 on this accelerator, or an accelerator with FP8 (H100 and later)",
    )


RULES: tuple[Rule, ...] = (
    Rule("world-size", _MC + "megatron/core/parallel_state.py initialize_model_parallel", _world),
    Rule("expert-world-size", _MC + "megatron/core/parallel_state.py initialize_model_parallel", _expert_world),
    Rule("ep-needs-experts", _MC + "megatron/core/transformer/transformer_config.py __post_init__", _ep_needs_experts),
    Rule("experts-per-ep", _MC + "megatron/core/transformer/moe/moe_layer.py BaseMoELayer.__init__", _experts_ep),
    Rule(
        "global-batch",
        _MC + "megatron/core/num_microbatches_calculator.py ConstantNumMicroBatchesCalculator.__init__",
        _batch,
    ),
    Rule("heads-per-tp", _MC + "megatron/core/transformer/transformer_config.py __post_init__", _heads),
    Rule("query-groups-per-tp", _MC + "megatron/core/transformer/transformer_config.py __post_init__", _query_groups),
    Rule(
        "layers-per-pp",
        _MC + "megatron/core/transformer/transformer_block.py get_num_layers_to_build; "
        "transformer_config.py __post_init__ (uneven stages)",
        _layers_pp,
    ),
    Rule("layers-per-vp", _MC + "megatron/core/transformer/transformer_block.py get_num_layers_to_build", _layers_vp),
    Rule(
        "pipeline-layout",
        _MC + "megatron/core/transformer/pipeline_parallel_layer_layout.py PipelineParallelLayerLayout "
        "__init__, validate_layer_layout",
        _pipeline_layout,
    ),
    Rule("vp-needs-pp", _MC + "megatron/core/parallel_state.py initialize_model_parallel", _vp_needs_pp),
    Rule("sp-needs-tp", _MC + "megatron/core/model_parallel_config.py ModelParallelConfig.__post_init__", _sp_needs_tp),
    Rule("seq-per-cp", _MC + "megatron/training/arguments.py validate_args", _seq_cp),
    Rule("seq-per-tp-with-sp", _MC + "megatron/core/tensor_parallel/mappings.py _split_along_first_dim", _seq_sp),
    Rule(
        "fp8-gpu",
        "https://github.com/NVIDIA/TransformerEngine/blob/main/transformer_engine/pytorch/fp8.py check_fp8_support",
        _fp8,
    ),
)
# NeMo 1 (`model.sequence_parallel`) and Megatron-LM's training script (`--sequence-parallel`) turn sequence
# parallel off at TP 1 with a log line (NeMo megatron_base_model.py _validate_and_override_config, Megatron
# arguments.py validate_args) instead of refusing: a warning there.
_SP_SWITCHED_OFF = ("model.sequence_parallel", "--sequence_parallel", "--sequence-parallel", "--sp")


class Finding(namedtuple("Finding", "rule severity problem names", defaults=((),))):
    """A broken rule: `severity` error (Megatron refuses), warning (the stack switches the value off) or note
    (only a recipe's defaults break it)."""

    # rule: Rule
    # severity: str
    # problem: Problem
    # names: tuple[str, ...]  # the settings in the conflict
    __slots__ = ()


def layout_of(run: Run, gpu: Gpu | None) -> Layout:
    """The run's numbers (Megatron's defaults where the file says nothing)."""
    from helm_nemo.fit.model import precision_of

    values = {name: run.get(name) for name in Layout._fields if run.get(name) is not None}
    values.pop("fp8", None)
    layout = Layout(gpus=run.get("gpus") if run.gpus is None else run.gpus.value)
    layout = layout._replace(**{k: v for k, v in values.items() if k not in ("gpus", "pipeline_layout")})
    if run.get("pipeline_layout") is not None:
        from helm_nemo.fit.pipeline_layout import parse

        stages = parse(run.get("pipeline_layout"))
        layout = layout._replace(pipeline_layout=stages)
        if layout.vp is None and isinstance(stages, tuple) and len(stages) > layout.pp and len(stages) % layout.pp == 0:
            layout = layout._replace(vp=len(stages) // layout.pp)  # Megatron takes VP from the layout
    if layout.vp is not None and layout.vp <= 1:
        layout = layout._replace(vp=None)
    return layout._replace(fp8=precision_of(run) == "fp8", gpu_fp8=gpu.fp8 if gpu else True)


def findings(run: Run, gpu: Gpu | None, layout: Layout | None = None, works: str | None = None) -> list[Finding]:
    """Every rule the run breaks, at the value that breaks it; `works`, a layout that works, goes in the hints."""
    from helm_nemo.fit.model import Setting

    layout = layout or layout_of(run, gpu)
    out: list[Finding] = []
    for rule in RULES:
        broken = rule.check(layout)
        if broken is None:
            continue
        names, message, expected = broken
        settings = {n: _setting(run, n) for n in names}
        given = {n: s for n, s in settings.items() if s is not None}
        origins = "; ".join(f"{_LABELS.get(n, n)} {s.value} ({s.origin})" for n, s in given.items())
        at = _blame(given) or Setting(None, run.file, None, None, "$")
        severity = "error"
        if any(s.default and s.default.startswith("NeMo 2 recipe") for s in given.values()):
            severity = "note"
        elif rule.id == "sp-needs-tp" and any(s.path.endswith(_SP_SWITCHED_OFF) for s in given.values()):
            severity = "warning"
            message += " (this stack turns it off with a log line)"
        hint = f"a layout that works: {works}" if works else None
        out.append(Finding(rule, severity, at.problem(f"{message} [{origins}]", expected, hint), names))
    return out


_LABELS = {
    "gpus": "GPUs",
    "tp": "TP",
    "pp": "PP",
    "vp": "VP",
    "cp": "CP",
    "ep": "EP",
    "etp": "ETP",
    "sp": "SP",
    "micro_batch": "micro batch",
    "global_batch": "global batch",
    "seq_len": "sequence",
    "num_layers": "layers",
    "heads": "heads",
    "query_groups": "query groups",
    "experts": "experts",
    "first_stage_layers": "first-stage layers",
    "last_stage_layers": "last-stage layers",
    "account_embedding": "embedding counted as a layer",
    "account_loss": "loss counted as a layer",
    "fp8": "precision",
    "accelerator": "accelerator",
}


def _setting(run: Run, name: str) -> Any:
    from helm_nemo.fit.model import precision_of

    if name == "gpus":
        return run.gpus
    if name == "accelerator":
        return run.accelerator
    if name == "fp8":
        found = run.settings.get("fp8") if run.get("fp8") else run.settings.get("precision")
        return found._replace(value=precision_of(run)) if found is not None else None
    return run.settings.get(name)


def _blame(given: dict[str, Any]) -> Any:
    """The value to point at: the first written in the values file's own settings order, the others named in the text."""
    written = [s for s in given.values() if s.default is None and s.file]
    return written[0] if written else None


def broken_rules(layout: Layout) -> list[str]:
    return [rule.id for rule in RULES if rule.check(layout) is not None]


def describe(layout: Layout) -> str:
    parts = [f"TP {layout.tp}", f"PP {layout.pp}"]
    parts.append(f"VP {layout.vp}" if layout.vp else "VP null")
    parts += [f"CP {layout.cp}", f"micro batch {layout.micro_batch}"]
    if layout.sp:
        parts.append("SP on")
    if layout.dp:
        parts.append(f"data parallel {layout.dp}")
    return ", ".join(parts)
