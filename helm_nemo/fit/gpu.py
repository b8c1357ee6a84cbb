"""The GPU an accelerator profile gives a run: its name, memory and whether it has FP8 tensor cores.

Profile data (values/accelerators/<id>.yaml: `gpu`, `gpuMemory.gb`, `peakTflops.fp8`), read from the one
profile file and not schema-checked here (the generator checks every profile): validate stays fast.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache


@dataclass(frozen=True)
class Gpu:
    """One GPU of a profile. `memory_gib`: the datasheet's GB figure, which the driver's total matches
    within 1 % when read as GiB (docs/fit.md)."""

    profile: str
    name: str
    memory_gib: float
    fp8: bool
    source: str


@lru_cache(maxsize=16)
def gpu_of(profile_id: str) -> Gpu | None:
    """The GPU of accelerator profile `profile_id`; None for an unknown profile or one without gpuMemory."""
    from helm_nemo import resources
    from helm_nemo.generate.profiles import read_yaml

    path = resources.accelerators_dir() / f"{profile_id}.yaml"
    if "/" in profile_id or not path.is_file():
        return None
    profile = read_yaml(path)
    memory = profile.get("gpuMemory") if isinstance(profile, dict) else None
    if not isinstance(memory, dict) or not isinstance(memory.get("gb"), (int, float)):
        return None
    peak = profile.get("peakTflops") or {}
    return Gpu(profile_id, str(profile.get("gpu")), float(memory["gb"]), "fp8" in peak, str(memory.get("source")))
