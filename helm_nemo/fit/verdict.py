"""Fits, tight or does not fit: the estimate against the GPU, the biggest term and what would change it.

Bands (docs/fit.md): the total up to TIGHT × memory fits; "does not fit" (an error before helm runs, unless the
memory check is set to warn) only when even the estimate's low end is over the memory: the exact terms (weights,
gradients, optimizer state: parameter counts times bytes) plus the activations less their error plus the CUDA
context; anything between is tight (a warning: it may or may not run).
"""

from __future__ import annotations

from collections import namedtuple

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: importing typing costs every run start-up time
    from helm_nemo.fit.gpu import Gpu
    from helm_nemo.fit.layout import Layout
    from helm_nemo.fit.memory import Estimate
    from helm_nemo.fit.model import Run

TIGHT = 0.90
_WHAT = {
    "weights": "the weights",
    "gradients": "the gradient buffer",
    "optimizer": "the optimizer state",
    "activations": "the activations",
    "other": "the fixed costs",
}


class Verdict(namedtuple("Verdict", "status total_gib memory_gib biggest changes")):
    """The estimate against the GPU's memory."""

    # status: str  # "fits", "tight", "does not fit"
    # total_gib: float
    # memory_gib: float
    # biggest: str
    # changes: list[str]  # what-ifs that bring the total under TIGHT × memory
    __slots__ = ()

    @property
    def fits(self) -> bool:
        return bool(self.total_gib <= self.memory_gib)

    @property
    def headroom_gib(self) -> float:
        return float(self.memory_gib - self.total_gib)

    def line(self, gpu_name: str) -> str:
        head = (
            f"{self.total_gib:,.1f} GiB per GPU of {self.memory_gib:g} GiB ({gpu_name}): {self.status}; "
            f"biggest term: {_WHAT[self.biggest]}"
        )
        if self.status != "fits" and self.changes:
            head += "; would fit with " + " or ".join(self.changes[:3])
        return head


def judge(
    run: Run, layout: Layout, estimate: Estimate, gpu: Gpu, suggested: tuple[Layout | None] | None = None
) -> Verdict:
    """`suggested`: (the layout suggest() found,) when the caller already searched for one (the search costs tens
    of milliseconds; a refused layout would pay it twice)."""
    terms = estimate.terms()
    biggest = max(terms, key=lambda k: terms[k])
    total = estimate.total_gib
    if total <= TIGHT * gpu.memory_gib:
        status = "fits"
    elif estimate.low_gib <= gpu.memory_gib:
        status = "tight"
    else:
        status = "does not fit"
    changes = what_would_fit(run, layout, gpu, suggested) if status != "fits" else []
    return Verdict(status, total, gpu.memory_gib, biggest, changes)


def what_would_fit(run: Run, layout: Layout, gpu: Gpu, suggested: tuple[Layout | None] | None = None) -> list[str]:
    """Single changes (raise TP/PP, full recompute, the distributed optimizer, a smaller micro batch) that bring
    the estimate under TIGHT × memory while keeping every layout rule; then a whole layout that does."""
    from helm_nemo.fit.layout import broken_rules, describe
    from helm_nemo.fit.suggest import suggest
    from helm_nemo.fit.memory import estimate_layout, with_layout

    tries: list[tuple[str, Run, Layout]] = []
    for size in (2, 4, 8):
        if layout.tp * size <= 8:
            tries.append((f"TP {layout.tp * size}", run, layout._replace(tp=layout.tp * size)))
            break
    for size in (2, 4, 8):
        tries.append((f"PP {layout.pp * size}", run, layout._replace(pp=layout.pp * size)))
    if run.get("recompute") != "full":
        recompute = with_layout(run, recompute="full", recompute_method="uniform", recompute_layers=1)
        tries.append(("full recomputation (uniform, 1 layer)", recompute, layout))
    if not run.get("dist_optimizer"):
        tries.append(("the distributed optimizer", with_layout(run, dist_optimizer=True), layout))
    if layout.micro_batch > 1:
        tries.append(("micro batch 1", run, layout._replace(micro_batch=1)))
    out = []
    for label, other_run, other in tries:
        if broken_rules(other):
            continue
        found = estimate_layout(other_run, other, gpu)
        if found is not None and found.total_gib <= TIGHT * gpu.memory_gib:
            out.append(f"{label} ({found.total_gib:,.1f} GiB)")
    if not out:
        (whole,) = suggested if suggested is not None else (suggest(run, layout, gpu),)
        if whole is not None:
            found = estimate_layout(run, whole, gpu)
            if found is not None and found.total_gib <= TIGHT * gpu.memory_gib:
                out.append(f"{describe(whole)} ({found.total_gib:,.1f} GiB)")
    return out
