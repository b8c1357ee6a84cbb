"""The values of the temporary nccl-test release that `preflight --nccl` installs: the recipe release's own
placement, so the test's pods land where the recipe's would, on N whole nodes.

The nccl-test chart is generated from the same shared pieces as the jobset and nemo-training charts (node
selector and affinity from the profile and targetNodes/avoidNodes/targetNodepools, tolerations, the
profile's networks and DRA claims, the plugin installer): what differs between two releases of them is
only in their values. So the recipe's values under PLACEMENT are copied, as far as the nccl-test chart's
schema knows them, and nothing else (the training image, its arguments, volumes and env stay behind).
"""

from __future__ import annotations

import copy

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only
    from typing import Any

# What decides where pods go and how they reach each other: (top-level key, its sub-keys or None for all).
PLACEMENT: tuple[tuple[str, tuple[str, ...] | None], ...] = (
    ("queue", None),  # Kueue admits the test like the job: same quota, same flavors and topology
    ("tasSettings", None),
    ("targetNodes", None),
    ("avoidNodes", None),
    ("targetNodepools", None),
    ("nodeSelector", None),
    ("affinity", None),
    ("network", None),  # host network or the pod networks, the plugin installer, the recipe's NCCL env
    ("workload", ("nodeSelector", "serviceAccountName", "priorityClassName", "privileged")),
)
NAME_SUFFIX = "-nccl"
MAX_NAME = 40  # the Job's pods are named <release>-<index>-<5 letters>; hostnames stay under 63


def release_name(recipe_release: str) -> str:
    """The temporary release's name: the recipe release's, shortened, with `-nccl`."""
    return recipe_release[: MAX_NAME - len(NAME_SUFFIX)].rstrip("-.") + NAME_SUFFIX


def test_values(
    recipe_values: dict[str, Any], profile: dict[str, Any], nodes: int, schema: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The nccl-test chart's values for `nodes` whole nodes of `profile` placed like `recipe_values`;
    `schema`: the nccl-test chart's values.schema.json (keys it does not know are not sent)."""
    known = (schema or {}).get("properties")
    values: dict[str, Any] = {"accelerator": profile["id"], "chart": "nccl-test"}
    for key, sub_keys in PLACEMENT:
        if key not in recipe_values or (known is not None and key not in known):
            continue
        given = recipe_values[key]
        if sub_keys is None:
            values[key] = copy.deepcopy(given)
            continue
        sub_known = ((known or {}).get(key) or {}).get("properties") if known is not None else None
        picked = {
            sub: copy.deepcopy(given[sub])
            for sub in sub_keys
            if isinstance(given, dict) and sub in given and (sub_known is None or sub in sub_known)
        }
        if picked:
            values[key] = picked
    workload = values.setdefault("workload", {})
    workload["gpus"] = nodes * int(profile["gpusPerNode"])
    chosen = collective(profile, nodes)
    if chosen:
        workload["arguments"] = ["--benchmark", chosen]
    return values


def collective(profile: dict[str, Any], nodes: int) -> str | None:
    """The collective to run: one the profile has a floor for on `nodes` nodes (the chart's launcher runs
    all_reduce with the profile's `allReduceAlgo`, the algorithm its all_reduce floors were measured with);
    all_gather first, which measures the network on 2 nodes whatever algorithm NCCL picks. None: no floor fits
    (the chart's default runs, judged without a floor)."""
    fitting = [
        f["collective"]
        for f in (profile.get("ncclTest") or {}).get("floors") or []
        if f["minNodes"] <= nodes <= f.get("maxNodes", nodes)
    ]
    return "all_gather" if "all_gather" in fitting else (fitting[0] if fitting else None)
