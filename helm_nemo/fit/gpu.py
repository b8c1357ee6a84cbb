"""The GPU an accelerator profile gives a run: its name, memory and whether it has FP8 tensor cores.

Profile data (values/accelerators/<id>.yaml: `gpu`, `gpuMemory.gb`, `peakTflops.fp8`), read from the one
profile file and not schema-checked here (the generator checks every profile): validate stays fast.
"""

from __future__ import annotations

from functools import lru_cache
from collections import namedtuple


class Gpu(namedtuple("Gpu", "profile name memory_gib fp8 source")):
    """One GPU of a profile. `memory_gib`: the datasheet's GB figure, which the driver's total matches
    within 1 % when read as GiB (docs/fit.md)."""

    # profile: str
    # name: str
    # memory_gib: float
    # fp8: bool
    # source: str
    __slots__ = ()


@lru_cache(maxsize=16)
def gpu_of(profile_id: str) -> Gpu | None:
    """The GPU of accelerator profile `profile_id`; None for an unknown profile or one without gpuMemory. Only the
    three top-level lines are parsed (flow mappings on one line each, as every profile writes them): the whole
    profile through PyYAML costs more than all of fit's checks."""
    from helm_nemo import resources

    path = resources.accelerators_dir() / f"{profile_id}.yaml"
    if "/" in profile_id or not path.is_file():
        return None
    wanted = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        key, sep, rest = line.partition(":")
        if sep and key in ("gpu", "gpuMemory", "peakTflops"):
            wanted[key] = rest.split("  #", 1)[0].strip()
    if "gpuMemory" not in wanted:
        return None
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    memory = yaml.load(wanted["gpuMemory"], Loader=loader)
    peak = yaml.load(wanted.get("peakTflops", "{}"), Loader=loader) or {}
    name = yaml.load(wanted.get("gpu", "''"), Loader=loader)
    if not isinstance(memory, dict) or not isinstance(memory.get("gb"), (int, float)):
        return None
    return Gpu(profile_id, str(name), float(memory["gb"]), "fp8" in peak, str(memory.get("source")))
