"""`helm nemo metrics`: average step time, TFLOPS per GPU and MFU of a NeMo / Megatron-Bridge training run.

logs.py reads the step times (dllogger.json and rank-0 logs), flops.py gives model FLOPs per sample
(gpu-recipes' table, else the architecture formula), peaks.py the GPUs' peak TFLOPS, recipe.py what a
values or recipe file says about the run, report.py puts it together. docs/metrics.md documents it.
"""

from helm_nemo.metrics.report import Report, Request, measure

__all__ = ["Report", "Request", "measure"]
