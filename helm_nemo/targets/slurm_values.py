"""What a release's values say to the Slurm target, checked before any of the script is written.

`SlurmValues` holds one plan's values merged over its chart's defaults, collects problems at their
file:line:column, reads the `slurm:` section (schemas/slurm.schema.json, its defaults filled in) and the
accelerator's profile (its `slurm:` part says how the instance runs on Slurm), and sorts the chart's values
into those the job ignores (KUBERNETES_ONLY, with a note) and those it cannot honour (REFUSED, an error).
The script's pieces build on it: targets/slurm_launch.py, then targets/slurm.py.
"""

from __future__ import annotations

import json
from typing import Any
from collections.abc import Mapping

TYPE_CHECKING = False
if TYPE_CHECKING:
    from helm_nemo.values.release_plan import ReleasePlan

from helm_nemo import resources as paths
from helm_nemo.user_errors import Problem, json_path
from helm_nemo.values import value_at

SCHEMA_FILE = "slurm.schema.json"

# Values of the nemo-training chart that only mean something to Kubernetes: the Slurm job ignores them
# (with a note when the values set them).
KUBERNETES_ONLY: tuple[tuple[str, ...], ...] = (
    ("queue",),
    ("tasSettings",),
    ("dwsSettings",),
    ("targetNodepools",),
    ("nodeSelector",),
    ("terminationGracePeriodSeconds",),
    ("workload", "nameSuffix"),
    ("workload", "jobTimestamp"),
    ("workload", "jobUUID"),
    ("workload", "backoffLimit"),
    ("workload", "ttlSecondsAfterFinished"),
    ("workload", "annotations"),
    ("workload", "labels"),
    ("workload", "serviceAccountName"),
    ("workload", "priorityClassName"),
    ("workload", "privileged"),
    ("network", "hostNetwork"),
    ("network", "subnetworks"),
    ("volumes", "sharedMemorySize"),
)
# Values the Slurm job cannot honour: refused, so a job never runs without something the values ask for.
REFUSED = {
    ("volumes", "ssdMountPath"): "a node's local SSD is not staged on Slurm; list the path in slurm.container_mounts",
    ("volumes", "nfsMountPath"): "mount the NFS share on the cluster and list it in slurm.container_mounts",
    ("volumes", "gcsDownload"): "copy the data to the cluster's shared filesystem before submitting",
    ("gcsDownload",): "copy the data to the cluster's shared filesystem before submitting",
    ("workload", "tokenizerPath"): "point the NeMo config's tokenizer paths at the shared filesystem",
    (
        "workload",
        "profile",
        "enabled",
    ): "Nsight profiling is not wired on the Slurm target yet; use srun_args or a wrapper",
}


def schema() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((paths.schemas_dir() / SCHEMA_FILE).read_text(encoding="utf-8"))
    return loaded


def schema_defaults() -> dict[str, Any]:
    return {key: spec["default"] for key, spec in schema()["properties"].items() if "default" in spec}


class SlurmValues:
    """One plan's values as the Slurm target reads them, and the problems found in them."""

    def __init__(self, plan: ReleasePlan, env: Mapping[str, str], show_secrets: bool, source_name: str | None):
        from helm_nemo.values.chart_values import chart_defaults, merge_values

        self.plan = plan
        self.env = env
        self.loaded = plan.loaded
        self.prefix = tuple(plan.json_prefix)
        self.problems: list[Problem] = []
        self.notes: list[str] = []
        self.source_name = source_name or str(plan.source)
        self.user = plan.values
        local = plan.local_chart
        self.values = merge_values(chart_defaults(local), plan.values) if local else dict(plan.values)
        self.section_raw = plan.target_sections.get("slurm")
        self.show_secrets = show_secrets

    # -- errors
    def where(self, rel: tuple[Any, ...]) -> tuple[Any, ...]:
        return self.prefix + tuple(rel)

    def problem(self, rel: tuple[Any, ...], message: str, expected: str | None = None, hint: str | None = None) -> None:
        line, column = self.loaded.position(self.where(rel)) if self.loaded else (None, None)
        self.problems.append(Problem(str(self.plan.source), line, column, json_path(rel), message, expected, hint))

    # -- the slurm: section
    def section(self) -> dict[str, Any]:
        from helm_nemo.values.validation import validate

        raw = self.section_raw
        if raw is None:
            raw = {}
        if not isinstance(raw, dict):
            self.problem(("slurm",), f"{json.dumps(raw)} is not of type 'object'", "a mapping of Slurm settings")
            return {**schema_defaults()}
        found = validate(
            raw,
            schema(),
            filename=str(self.plan.source),
            positions=lambda path: self.loaded.position(path) if self.loaded else (None, None),
            prefix=self.prefix + ("slurm",),
        )
        # The schema's JSON paths are relative to the section: put them under $.slurm.
        self.problems += [
            Problem(p.file, p.line, p.column, "$.slurm" + p.json_path[1:], p.message, p.expected, p.hint) for p in found
        ]
        return {**schema_defaults(), **raw}

    def profile(self) -> dict[str, Any] | None:
        from helm_nemo.generate.profiles import ProfileError, load_profile, load_profiles

        accelerator = self.plan.accelerator
        if not accelerator:
            self.problem(
                ("accelerator",),
                "the Slurm target needs an accelerator (its profile gives the GPUs and fabric env)",
                "accelerator: p4de | p5 | p5en",
            )
            return None
        path = paths.accelerators_dir() / f"{accelerator}.yaml"
        try:
            profile = load_profile(path)
        except (OSError, ProfileError) as err:
            self.problem(("accelerator",), f"cannot read the profile of accelerator {accelerator!r}: {err}")
            return None
        if not profile.get("slurm"):
            have = sorted(name for name, known in load_profiles().items() if known.get("slurm"))
            self.problem(
                ("accelerator",),
                f"accelerator {accelerator!r} has no Slurm profile (no slurm: part in {path.name})",
                " | ".join(have),
                "the Slurm target covers the instances whose profile says how they run on Slurm",
            )
            return None
        return profile

    def check_translatable(self) -> None:
        for where in KUBERNETES_ONLY:
            if value_at(self.user, where) not in (None, [], {}, False):
                self.notes.append(f"{json_path(where)} is Kubernetes-only; the Slurm job ignores it")
        for where, hint in REFUSED.items():
            value = value_at(self.user, where)
            if value not in (None, "", [], {}, False) and not (isinstance(value, dict) and not any(value.values())):
                self.problem(where, "the Slurm target cannot do this", hint=hint)
        for index, item in enumerate(value_at(self.values, ("workload", "envs")) or []):
            if isinstance(item, dict) and "valueFrom" in item:
                self.problem(
                    ("workload", "envs", index, "valueFrom"),
                    "valueFrom (a Kubernetes Secret or field) has no Slurm equivalent",
                    hint="give the value, or name it in slurm.secret_env to take it from the submitting environment",
                )
        if not self.values.get("nemo_config"):
            self.problem(
                ("files",),
                "the Slurm job needs a NeMo config",
                "files: {nemo_config: configs/<model>.yaml}",
                "the same file the Kubernetes chart mounts",
            )
