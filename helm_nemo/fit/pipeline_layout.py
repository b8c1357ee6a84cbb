"""Megatron's `pipeline_model_parallel_layout`: which layers each pipeline stage builds, for uneven splits
(DeepSeek-V3's 61 layers over 16 stages: "Et*4|(t*4|)*14tmL").

Read as megatron-core reads it (megatron/core/transformer/pipeline_parallel_layer_layout.py,
PipelineParallelLayerLayout.parse_str_to_list and validate_layer_layout): a string of stages split by `|`, each a
run of E (embedding), t (a transformer layer), m (a multi-token-prediction layer), L (the loss); commas are
cosmetic; `(…)*n` and `x*n` repeat. Or a list of stages, each a list of layer names (embedding, decoder, mtp,
loss). Stage i of pp × vp goes to pipeline rank i % pp, virtual stage i // pp.
"""

from __future__ import annotations

import re

_NAMES = {"embedding": "E", "decoder": "t", "mtp": "m", "loss": "L"}


def parse(layout: object) -> tuple[str, ...] | str:
    """The stages as strings of E/t/m/L, or why the layout cannot be read (Megatron's own assertion)."""
    if isinstance(layout, str):
        text = layout.replace(",", "")
        text = re.sub(r"\(([^)]+)\)\*(\d+)", lambda m: m.group(1) * int(m.group(2)), text)
        text = re.sub(r"(.)\*(\d+)", lambda m: m.group(1) * int(m.group(2)), text)
        stages = tuple(text.split("|"))
        bad = sorted({c for c in text if c not in "EtmL|"})
        if bad:
            return f"unknown layer character {bad[0]!r} (known: E, t, m, L)"
        return stages
    if isinstance(layout, (list, tuple)) and all(isinstance(stage, (list, tuple)) for stage in layout):
        out = []
        for stage in layout:
            names = [str(name).strip().lower() for name in stage]
            unknown = [n for n in names if n not in _NAMES]
            if unknown:
                return f"{unknown[0]!r} is not a layer type (known: {', '.join(_NAMES)})"
            out.append("".join(_NAMES[n] for n in names))
        return tuple(out)
    return "neither a layout string nor a list of stages"


def rank_layers(stages: tuple[str, ...], pp: int) -> list[int] | None:
    """Transformer layers (decoder and MTP: each builds a layer) each pipeline rank holds, over its virtual
    stages; None when the stages do not divide over `pp`."""
    if not stages or len(stages) % pp:
        return None
    return [sum(stage.count("t") + stage.count("m") for stage in stages[rank::pp]) for rank in range(pp)]


def problem(stages: tuple[str, ...], pp: int, vp: int | None, num_layers: int | None) -> str | None:
    """What megatron-core's PipelineParallelLayerLayout refuses in these stages, or None."""
    if len(stages) % pp:
        return f"{len(stages)} stages do not divide over pipeline parallel size {pp}"
    if vp is not None and vp > 1 and len(stages) != pp * vp:
        return f"{len(stages)} stages are not pipeline × virtual pipeline = {pp} × {vp} = {pp * vp}"
    flat = "".join(stages)
    if not flat.startswith("E") or flat.count("E") != 1:
        return "the embedding (E) must come once, first"
    if not flat.endswith("L") or flat.count("L") != 1:
        return "the loss (L) must come once, last"
    if num_layers is not None and flat.count("t") != num_layers:
        return f"{flat.count('t')} transformer layers (t) in the layout, but num_layers is {num_layers}"
    if "m" in flat and "t" in flat[flat.index("m") :]:
        return "transformer layers (t) must come before the MTP layers (m)"
    return None
