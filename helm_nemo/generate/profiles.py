"""Accelerator profiles: the data that makes one chart source fit every accelerator."""

from __future__ import annotations

import json
from pathlib import Path

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: importing typing costs every run start-up time
    from typing import Any

from helm_nemo import resources


class ProfileError(Exception):
    """A profile file that does not match schemas/accelerator-profile.schema.json."""


def read_yaml(path: Path) -> Any:
    return parse_yaml(path.read_text(encoding="utf-8"))


def parse_yaml(text: str) -> Any:
    """Plain data from YAML text with libyaml's C loader (the pure-Python parsers cost ~50 ms a file)."""
    import yaml

    return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def load_profile(path: Path) -> dict[str, Any]:
    from helm_nemo.schema_check import Validator  # the draft-07 subset validator: no jsonschema import on CLI paths

    profile = read_yaml(path)
    schema = json.loads((resources.schemas_dir() / "accelerator-profile.schema.json").read_text())
    errors = sorted(Validator(schema).iter_errors(profile), key=lambda e: [str(p) for p in e.path])
    if errors:
        lines = [f"{path}: $.{'.'.join(str(p) for p in e.path)}: {e.message}" for e in errors]
        raise ProfileError("invalid accelerator profile:\n" + "\n".join(lines))
    if profile["id"] != path.stem:
        raise ProfileError(f"{path}: id {profile['id']!r} must equal the file name {path.stem!r}")
    out = with_defaults(profile)
    _check_all_reduce_floors(path, out)
    return out


def _check_all_reduce_floors(path: Path, profile: dict[str, Any]) -> None:
    """The chart's launcher runs all_reduce with the profile's `ncclTest.allReduceAlgo`; a floor published for
    another algorithm could never judge a run of the chart (the judge holds Ring runs to Ring floors only)."""
    spec = profile["ncclTest"]
    if spec is None:
        return
    for n, floor in enumerate(spec["floors"]):
        if floor["collective"] == "all_reduce" and floor.get("algo", "any") != spec["allReduceAlgo"]:
            raise ProfileError(
                f"{path}: $.ncclTest.floors[{n}]: an all_reduce floor for algo {floor.get('algo', 'any')!r}, but"
                f" the launcher runs all_reduce with ncclTest.allReduceAlgo {spec['allReduceAlgo']!r}: make them agree"
            )


# Optional profile fields and their meaning when absent. Filling them here lets the chart sources
# use strict undefined-checking: a misspelt field is an error, an absent optional one is not.
_OPTIONAL: dict[str, Any] = {
    "computeDomain": False,
    "fabric": None,
    "extraResources": {},
    "preflight": {},
    "resiliency": {},
    "gcsfuseSidecarLimits": None,
    "gcsfuseSidecarLimitsByKind": {},
    "ncclTest": None,
    "kueueQueueHint": None,
    "chartKinds": None,
    "minKubernetesVersion": None,
    "requiredNodeAffinity": [],
    "resourceClaims": [],
    "workloadSecurity": {},
    "workloadEnv": [],
}
_OPTIONAL_NETWORK: dict[str, Any] = {
    "extraValues": {},
    "hostPaths": [],
    "workloadMounts": [],
    "pluginInstaller": None,
    "daemonSidecar": None,
    "ncclExportsAfterInit": [],
    "workloadPrelude": [],
    "hostIPCDefault": False,
    "ncclInitHook": True,
    "workloadSetup": "",
    "generations": None,
    "hostIPCFromValues": True,
}

_OPTIONAL_NCCL_TEST: dict[str, Any] = {
    "initScript": None,
    "sharedMemorySize": None,
    "sshdCommand": "service ssh restart",
    "sshKeys": "image",
    "rankPrefix": "",
    "allReduceAlgo": "Ring",
}


def with_defaults(profile: dict[str, Any]) -> dict[str, Any]:
    out = {**_OPTIONAL, **profile}
    out["network"] = {**_OPTIONAL_NETWORK, **profile["network"]}
    installer = out["network"]["pluginInstaller"]
    if installer is not None:
        out["network"]["pluginInstaller"] = {
            "envFromValues": [],
            "args": [],
            "env": [],
            "enabledByDefault": True,
            **installer,
        }
    out["workloadSecurity"] = {"privileged": "hostNetwork", "capabilities": [], **out["workloadSecurity"]}
    if out["ncclTest"] is not None:
        out["ncclTest"] = {**_OPTIONAL_NCCL_TEST, **out["ncclTest"]}
    daemon = out["network"]["daemonSidecar"]
    if daemon is not None:
        out["network"]["daemonSidecar"] = {"env": [], **daemon}
    generations = out["network"]["generations"]
    if generations is not None:
        # Each alternative networking generation as a whole profile (the top level's fields, with the
        # alternative's replacing them), so the chart sources render it with the same macros.
        alternatives = []
        for alt in generations["alternatives"]:
            overrides = {k: v for k, v in alt.items() if k not in ("name", "network")}
            network = {**profile["network"], **alt.get("network", {}), "generations": None}
            merged = with_defaults({**profile, **overrides, "network": network})
            alternatives.append({"name": alt["name"], "profile": merged})
        out["network"]["generations"] = {**generations, "alternatives": alternatives}
    return out


def load_profiles(directory: Path | None = None) -> dict[str, dict[str, Any]]:
    """All profiles by id, in id order (the order charts are generated in)."""
    directory = directory or resources.accelerators_dir()
    profiles = [load_profile(p) for p in sorted(directory.glob("*.yaml"))]
    return {p["id"]: p for p in sorted(profiles, key=lambda p: p["id"])}
