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


def candidates(layout: Layout, per_node: int = 8) -> Iterator[tuple[int, int, int, int | None, int]]:
    """(TP, PP, CP, VP, micro batch) near `layout` on the same GPUs and model: TP within a node, PP dividing the
    layers, CP, VP, a micro batch no larger than the given one. Plain tuples: thousands are ranked, few built."""
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
                        yield tp, pp, cp, vp, mbs


def _built(layout: Layout, tp: int, pp: int, cp: int, vp: int | None, mbs: int) -> Layout:
    return layout._replace(
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
    from helm_nemo.fit.memory import estimate_layout, state_floor_gib, unmodelled

    g_tp, g_pp, g_cp, g_vp, g_mbs = layout.tp, layout.pp, layout.cp, layout.vp, layout.micro_batch
    ranked = sorted(
        (
            (
                (tp != g_tp) + (pp != g_pp) + (cp != g_cp) + (vp != g_vp) + (mbs != g_mbs),  # values changed
                cp != g_cp,  # context parallel only where the values ask for it
                tp * pp * cp,  # then the most data parallel
                -mbs,
                index,  # then the order of candidates()
            ),
            (tp, pp, cp, vp, mbs),
        )
        for index, (tp, pp, cp, vp, mbs) in enumerate(candidates(layout, 8))
    )
    fallback = None
    floors: dict[tuple[int, int, int], float] = {}  # TP, PP, CP → weights, gradients and optimizer state (GiB)
    for _, shape in ranked:
        option = _built(layout, *shape)
        if broken_rules(option):
            continue
        if gpu is None or run.arch is None or unmodelled(run) is not None:
            return option
        fallback = fallback or option
        model_parallel = shape[:3]
        if model_parallel not in floors:
            floors[model_parallel] = state_floor_gib(run, option)
        if floors[model_parallel] > gpu.memory_gib * 0.9:
            continue  # no micro batch or virtual pipeline of this shape can fit
        estimate = estimate_layout(run, option, gpu)
        if estimate is None or estimate.total_gib <= gpu.memory_gib * 0.9:
            return option
    return fallback
