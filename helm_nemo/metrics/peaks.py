"""Peak dense tensor TFLOPS per GPU and precision: the denominator of MFU.

The accelerator profiles carry these figures (`peakTflops` in values/accelerators/*.yaml); this table
is the same data keyed by GPU model, documented in docs/metrics.md, so that `--accelerator h100` (the
gpu-recipes spelling) works and GPUs without a profile on this branch yet (GB300, RTX PRO 6000
Blackwell) have their figures in one reviewed place. tests/test_metrics.py checks that every
profile's `peakTflops` equals the entry for its `gpu`.

Dense means without 2:4 structured sparsity: NVIDIA's datasheets print the sparse figure with a
footnote; the dense one is half of it. H100/H200/B200 are the figures gpu-recipes'
src/utils/training_metrics uses (989/1978 is its rounding of 989.4/1978.9), so MFU agrees with it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

PRECISIONS = ("bf16", "fp8")


@dataclass(frozen=True)
class Peak:
    """Dense peak TFLOPS of one GPU; fp8 None when the GPU has no FP8 tensor cores."""

    gpu: str
    bf16: float
    fp8: float | None
    source: str

    def tflops(self, precision: str) -> float | None:
        return self.bf16 if precision == "bf16" else self.fp8

    def as_profile_field(self) -> dict:
        out = {"bf16": self.bf16}
        if self.fp8 is not None:
            out["fp8"] = self.fp8
        out["source"] = self.source
        return out


# Keyed by normalised GPU name (see gpu_key). Sources: the vendor datasheet or product page.
GPU_PEAKS: dict[str, Peak] = {
    "a100": Peak("A100", 312, None, "https://www.nvidia.com/en-us/data-center/a100/"),
    "h100": Peak("H100", 989, 1978, "https://resources.nvidia.com/en-us-tensor-core"),
    "h200": Peak("H200", 989, 1978, "https://www.nvidia.com/en-us/data-center/h200/"),
    "b200": Peak("B200", 2250, 4500, "https://www.nvidia.com/en-us/data-center/hgx/"),
    "gb200": Peak("GB200", 2500, 5000, "https://www.nvidia.com/en-us/data-center/gb200-nvl72/"),
    "gb300": Peak("GB300", 2500, 5000, "https://www.nvidia.com/en-us/data-center/gb300-nvl72/"),
    "rtxpro6000": Peak("RTX PRO 6000 Blackwell", 503.8, 1007.6,
                       "https://www.nvidia.com/en-us/data-center/rtx-pro-6000-blackwell-server-edition/"),
}

# Words a GPU name may carry that do not change its peak (memory size, form factor, edition).
_NOISE = re.compile(r"\d+\s*gb\b|\bsxm\d*\b|\bblackwell\b|\bserver\b|\bedition\b|\bnvidia\b", re.I)


def gpu_key(name: str) -> str:
    """`A100 80GB` -> `a100`, `RTX PRO 6000 Blackwell` -> `rtxpro6000`, `H100` -> `h100`."""
    return re.sub(r"[^a-z0-9]", "", _NOISE.sub("", name).lower())


def gpu_peak(name: str) -> Peak | None:
    return GPU_PEAKS.get(gpu_key(name))
