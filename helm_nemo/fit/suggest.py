"""A layout that works: the nearest one (fewest changed values) that breaks no rule of fit/layout.py and fits
the GPU by fit/memory.py's estimate. Searched only when something is wrong (validate of a good file never
gets here)."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: importing typing costs every run start-up time
    from collections.abc import Iterator

    from helm_nemo.fit.gpu import Gpu
    from helm_nemo.fit.layout import Layout
    from helm_nemo.fit.model import Run


def _divisors(n: int, limit: int) -> list[int]:
    return [d for d in range(1, min(n, limit) + 1) if n % d == 0]


def candidates(layout: Layout, per_node: int = 8) -> Iterator[Layout]:
    """Layouts near `layout` on the same GPUs and model: TP within a node, PP dividing the layers, CP, VP, a
    micro batch no larger than the given one."""
    if layout.gpus is None:
        return
    tps = [t for t in (1, 2, 4, 8) if t <= max(per_node, 1) and layout.gpus % t == 0]
    layers = layout.num_layers or 0
    pps = _divisors(layers, 64) if layers else [layout.pp]
    cps = [c for c in (1, 2, 4, 8) if layout.gpus % c == 0]
    batches = sorted({b for b in (layout.micro_batch, 8, 4, 2, 1) if b <= layout.micro_batch})
    for tp in tps:
        for pp in pps:
            for cp in cps:
                if layout.gpus % (tp * pp * cp):
                    continue
                vps: list[int | None] = [None]
                if pp > 1 and layers:
                    vps += [v for v in _divisors(layers // pp, 16) if v > 1]
                for vp in vps:
                    for mbs in batches:
                        yield layout._replace(
                            tp=tp,
                            pp=pp,
                            cp=cp,
                            vp=vp,
                            micro_batch=mbs,
                            sp=layout.sp and tp > 1,
                            etp=tp if layout.etp == layout.tp else layout.etp,
                            first_stage_layers=None,
                            last_stage_layers=None,
                        )


def suggest(run: Run, layout: Layout, gpu: Gpu | None) -> Layout | None:
    """The nearest layout (fewest changed values; then CP kept, the most data parallel, the largest micro batch)
    that breaks no rule and, when the
    memory estimate can be made, fits the GPU (under 90 %); else the nearest that breaks no rule; None when no
    layout on these GPUs does. Candidates are tried nearest first, so the estimate runs only until one fits."""
    from helm_nemo.fit.layout import broken_rules
    from helm_nemo.fit.memory import estimate_layout

    keys = ("tp", "pp", "vp", "cp", "micro_batch")
    ranked = sorted(
        candidates(layout, 8),
        key=lambda option: (
            sum(getattr(option, k) != getattr(layout, k) for k in keys),
            option.cp != layout.cp,  # context parallel only where the values ask for it
            option.tp * option.pp * option.cp,  # then the most data parallel
            -option.micro_batch,
        ),
    )
    fallback = None
    for option in ranked:
        if broken_rules(option):
            continue
        if gpu is None or run.arch is None:
            return option
        fallback = fallback or option
        estimate = estimate_layout(run, option, gpu)
        if estimate is None or estimate.total_gib <= gpu.memory_gib * 0.9:
            return option
    return fallback


def suggest_text(run: Run, layout: Layout, gpu: Gpu | None) -> str | None:
    from helm_nemo.fit.layout import describe

    found = suggest(run, layout, gpu)
    return describe(found) if found is not None else None
