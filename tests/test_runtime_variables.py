"""The runtime-variable list (generator/shared/runtime-variables.yaml) covers every env var the chart
source sets in a pod, so `helm nemo` never substitutes one of them from the user's environment."""

from __future__ import annotations

import re
from pathlib import Path

from helm_nemo.generate.profiles import load_profiles, read_yaml
from helm_nemo.values.substitute import RUNTIME_VARIABLES

ROOT = Path(__file__).resolve().parent.parent


# Env the charts set only from the user's own value of the same meaning (HF_TOKEN <- workload.hfToken):
# `${HF_TOKEN}` in a values file is the user's variable, substituted at install, so it is no runtime variable.
FROM_USER_VALUES = {"HF_TOKEN"}


def template_env_names() -> set[str]:
    names: set[str] = set()
    for path in (ROOT / "generator").rglob("*"):
        if path.is_file() and path.suffix in (".j2", ".tpl", ".yaml") and path.name != "runtime-variables.yaml":
            names |= set(re.findall(r"^\s*- name: ([A-Z_][A-Z0-9_]+)\s*$", path.read_text(), re.M))
    return names - FROM_USER_VALUES


def profile_env_names() -> set[str]:
    names: set[str] = set()
    for profile in load_profiles().values():
        network = profile["network"]
        entries = network["ncclEnv"] + network["ncclExportsAfterInit"]
        entries += (network["daemonSidecar"] or {}).get("env", [])
        entries += (network["pluginInstaller"] or {}).get("envFromValues", [])
        entries += (network["pluginInstaller"] or {}).get("env", [])
        entries += profile["workloadEnv"]
        names |= {e["name"] for e in entries}
    return names


def test_every_env_var_the_chart_source_sets_is_a_runtime_variable():
    templates, profiles = template_env_names(), profile_env_names()
    assert {"NNODES", "JOB_IDENTIFIER", "MASTER_ADDR", "WORLD_SIZE"} <= templates  # the scan finds them
    assert {"NCCL_PLUGIN_PATH", "FI_PROVIDER"} <= profiles
    assert templates - RUNTIME_VARIABLES == set(), "add them to generator/shared/runtime-variables.yaml (charts)"
    assert profiles - RUNTIME_VARIABLES == set(), "add them to generator/shared/runtime-variables.yaml (profiles)"


def test_the_list_has_no_stale_chart_or_profile_names():
    groups = read_yaml(ROOT / "generator/shared/runtime-variables.yaml")
    assert set(groups) == {"charts", "profiles", "shell"}
    assert set(groups["charts"]) == template_env_names()
    assert set(groups["profiles"]) == profile_env_names() - template_env_names()
