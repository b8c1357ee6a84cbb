"""Peak dense tensor TFLOPS per GPU and precision: the denominator of MFU.

The accelerator profiles carry these figures (`peakTflops` in values/accelerators/*.yaml, the one place
they are written, documented in docs/metrics.md); gpu_peaks() keys them by GPU model, so that
`--accelerator h100` (the gpu-recipes spelling) works too. tests/test_metrics.py checks that profiles
sharing a GPU agree.

Dense means without 2:4 structured sparsity: NVIDIA's datasheets print the sparse figure with a
footnote; the dense one is half of it. H100/H200/B200 are the figures gpu-recipes'
src/utils/training_metrics uses (989/1978 is its rounding of 989.4/1978.9), so MFU agrees with it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

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

    def as_profile_field(self) -> dict[str, float | str]:
        out: dict[str, float | str] = {"bf16": self.bf16}
        if self.fp8 is not None:
            out["fp8"] = self.fp8
        out["source"] = self.source
        return out


# Words a GPU name may carry that do not change its peak (memory size, form factor, edition).
_NOISE = re.compile(r"\d+\s*gb\b|\bsxm\d*\b|\bblackwell\b|\bserver\b|\bedition\b|\bnvidia\b", re.I)


def gpu_key(name: str) -> str:
    """`A100 80GB` -> `a100`, `RTX PRO 6000 Blackwell` -> `rtxpro6000`, `H100` -> `h100`."""
    return re.sub(r"[^a-z0-9]", "", _NOISE.sub("", name).lower())


@lru_cache(maxsize=1)
def gpu_peaks() -> dict[str, Peak]:
    """The profiles' peaks by normalised GPU name (see gpu_key), in profile order."""
    from helm_nemo.generate.profiles import load_profiles

    peaks: dict[str, Peak] = {}
    for profile in load_profiles().values():
        peak = profile["peakTflops"]
        peaks.setdefault(gpu_key(profile["gpu"]), Peak(profile["gpu"], peak["bf16"], peak.get("fp8"), peak["source"]))
    return peaks


def gpu_peak(name: str) -> Peak | None:
    return gpu_peaks().get(gpu_key(name))
