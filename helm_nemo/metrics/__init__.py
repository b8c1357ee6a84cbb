"""`helm nemo metrics`: average step time, TFLOPS per GPU and MFU of a NeMo / Megatron-Bridge training run.

logs.py reads the step times (dllogger.json and rank-0 logs), flops.py gives model FLOPs per sample
(gpu-recipes' table, else the architecture formula), peaks.py the GPUs' peak TFLOPS, recipe.py what a
values or recipe file says about the run, report.py puts it together. docs/metrics.md documents it.

The public names load on first use: `validate` reads recipes through recipe.py (helm_nemo/fit) and must not
pay for report.py and the log readers on every run.
"""

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only
    from typing import Any

_PUBLIC = {"Report": "report", "Request": "report", "measure": "report"}
__all__ = sorted(_PUBLIC)  # noqa: PLE0605 (names served lazily by __getattr__)


def __getattr__(name: str) -> "Any":
    from helm_nemo.lazy import attribute

    return attribute(__name__, _PUBLIC, name)
