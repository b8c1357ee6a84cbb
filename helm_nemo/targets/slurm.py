"""The Slurm target: a nemo-training release rendered as an sbatch script (seed 002, NeMo-Launcher style).

The same values and accelerator profile as the Kubernetes chart, plus the `slurm:` section
(schemas/slurm.schema.json). What the script does:

- `#SBATCH` directives from the section (NeMo-Launcher's bcm.yaml keys and the usual sbatch options);
- one results directory per job, `<root>/<experiment>/<job name>_<job id>`, created by the job, holding
  the NeMo config it runs, the resolved values (secrets masked), a copy of the script and the NeMo logs;
- the env: the profile's fabric settings (network.ncclEnv adjusted by the profile's `slurm:` part), the
  variables the chart sets in the pod (NNODES, MASTER_ADDR, …, from Slurm's), the values' env;
- `srun` (Pyxis `--container-image`/`--container-mounts` unless `container: false`) starting one
  torchrun per node.

Quoting: every value that reaches the script is one shell word (`shlex.quote`) or sits in a quoted
here-document; arguments reach torchrun as `"$@"` of the per-node launcher, never re-parsed. A value
that came from a secret-looking variable (or an env entry named in `secret_env`) is written as a
`${NAME}` reference to the environment sbatch runs in, never in clear, unless `show_secrets`.
Output is deterministic: the same values give the same bytes.
"""

from __future__ import annotations

import json
import math
import re
import shlex
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any
from collections.abc import Mapping

TYPE_CHECKING = False
if TYPE_CHECKING:
    from helm_nemo.values.plan import ReleasePlan

from helm_nemo import resources as paths
from helm_nemo.secrets import MASK
from helm_nemo.targets.shell import Secrets, comment, heredoc, quote, text_of
from helm_nemo.user_errors import Problem, UserError, json_path, raise_if_problems
from helm_nemo.values import value_at

SCHEMA_FILE = "slurm.schema.json"
# Chart kinds with a Slurm rendering; the storage charts' filesystems are the cluster's own on Slurm.
JOB_KINDS = ("nemo-training", "data-prep")
STORAGE_KINDS = ("fsx-lustre", "gcs-fuse")
SUBMISSION_NAME = "submission.sh"
RESOLVED_VALUES_NAME = "resolved-values.yaml"
NEMO_CONFIG_NAME = "nemo-config.yaml"
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")

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


@dataclass
class SlurmJob:
    """One rendered job: the script and what install needs to submit it."""

    release: str
    job_name: str
    script: str
    experiment_dir: str  # <root>/<experiment>: the log and the per-job results directories live here
    output: str  # the --output pattern
    unique: bool
    resolved_values: str  # YAML, secrets masked
    secret_env: dict[str, str | None] = field(default_factory=dict)  # names the job takes from sbatch's env
    notes: list[str] = field(default_factory=list)
    array: int | None = None  # an array job of this many tasks (data-prep workers); None: one job
    after: list[str] = field(default_factory=list)  # releases whose jobs must succeed first (afterok)
    dependency: str | None = None  # slurm.dependency: the values' own, kept beside afterok at submission

    def results_dir(self, job_id: str) -> str:
        if self.array is not None:
            return f"{self.experiment_dir}/{self.job_name}_{job_id}"
        if not self.unique:
            return self.experiment_dir
        return f"{self.experiment_dir}/{self.job_name}_{job_id}"

    def log_file(self, job_id: str) -> str:
        """The log's path; an array job's task `<id>_<task>` has its own, `<id>` alone names them with `*`."""
        array_id, _, task = job_id.partition("_")
        if self.array is None or not task.isdigit():
            array_id, task = job_id, "*"
        path = self.output.replace("%x", self.job_name).replace("%j", job_id).replace("%A", array_id)
        return path.replace("%a", task)


def schema() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((paths.schemas_dir() / SCHEMA_FILE).read_text(encoding="utf-8"))
    return loaded


def schema_defaults() -> dict[str, Any]:
    return {key: spec["default"] for key, spec in schema()["properties"].items() if "default" in spec}


# ---------------------------------------------------------------------------------------------- render


class _Renderer:
    def __init__(self, plan: ReleasePlan, env: Mapping[str, str], show_secrets: bool, source_name: str | None):
        from helm_nemo.values.plan import chart_defaults, merge_values

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

    # -- pieces of the script
    def directive(self, option: str, value: Any, where: tuple[Any, ...] | None) -> str:
        """One `#SBATCH` line; a value sbatch would misread (newline, double quote) is a problem at `where`."""
        text = text_of(value)
        if "\n" in text or "\r" in text or '"' in text:
            self.problem(where or ("slurm",), f"{option} cannot hold a newline or a double quote", "one line")
        return f"#SBATCH {option}={text}" if not re.search(r"\s", text) else f'#SBATCH {option}="{text}"'

    def directives(
        self, s: dict[str, Any], job_name: str, nodes: int, gpus_per_node: int, output: str, error: str | None
    ) -> list[str]:
        line = self.directive
        out = [
            line("--job-name", job_name, ("slurm", "job_name_prefix")),
            line("--nodes", nodes, ("workload", "gpus")),
            line("--ntasks-per-node", 1, None),
        ]
        gpn = s.get("gpus_per_node", gpus_per_node) if "gpus_per_node" in (self.section_raw or {}) else gpus_per_node
        if gpn is not None:
            out.append(line("--gpus-per-node", gpn, ("slurm", "gpus_per_node")))
        if s.get("gpus_per_task") is not None:
            out.append(line("--gpus-per-task", s["gpus_per_task"], ("slurm", "gpus_per_task")))
        if s.get("gres") is not None:
            out.append(line("--gres", s["gres"], ("slurm", "gres")))
        if s.get("exclusive"):
            out.append("#SBATCH --exclusive")
        if s.get("mem") is not None:
            out.append(line("--mem", s["mem"], ("slurm", "mem")))
        return out + self.scheduling_directives(s, output, error)

    DEADLINE: tuple[str, ...] = ("workload", "activeDeadlineSeconds")  # the default of slurm.time

    def scheduling_directives(self, s: dict[str, Any], output: str, error: str | None) -> list[str]:
        """Where and how long the job runs, its log files and the extra directives: the same for every job kind."""
        line = self.directive
        out = []
        for key, option in (
            ("partition", "--partition"),
            ("account", "--account"),
            ("qos", "--qos"),
            ("reservation", "--reservation"),
            ("constraint", "--constraint"),
            ("dependency", "--dependency"),
        ):
            if s.get(key) is not None:
                out.append(line(option, s[key], ("slurm", key)))
        time = s.get("time")
        deadline = value_at(self.values, self.DEADLINE)
        if time is None and deadline and "time" not in (self.section_raw or {}):
            minutes = math.ceil(int(deadline) / 60)
            time = f"{minutes // 1440}-{minutes % 1440 // 60:02d}:{minutes % 60:02d}:00"
        if time is not None:
            out.append(line("--time", time, ("slurm", "time")))
        targets = value_at(self.values, ("targetNodes",)) or []
        avoid = value_at(self.values, ("avoidNodes",)) or []
        if targets:
            out.append(line("--nodelist", ",".join(targets), ("targetNodes",)))
        if avoid:
            out.append(line("--exclude", ",".join(avoid), ("avoidNodes",)))
        out.append(line("--output", output, ("slurm", "output")))
        if error:
            out.append(line("--error", error, ("slurm", "error")))
        for index, extra in enumerate(s.get("extra_directives") or []):
            if "\n" in extra or "\r" in extra:
                self.problem(("slurm", "extra_directives", index), "a directive is one line")
                continue
            out.append(f"#SBATCH {extra}")
        return out

    def environment(self, profile: dict[str, Any], s: dict[str, Any], secrets: Secrets) -> list[tuple[str, str, str]]:
        """(name, shell word, origin) in order; a later entry of the same name replaces an earlier one."""
        entries: dict[str, tuple[str, str]] = {}

        def put(name: str, word: str, origin: str) -> None:
            entries.pop(name, None)
            entries[name] = (word, origin)

        drop = set((profile.get("slurm") or {}).get("dropEnv") or [])
        for item in profile["network"].get("ncclEnv") or []:
            if item["name"] not in drop:
                put(item["name"], quote(item.get("value", "")), f"profile {profile['id']}")
        for item in (profile.get("slurm") or {}).get("env") or []:
            put(item["name"], quote(item.get("value", "")), f"profile {profile['id']} (slurm)")
        for key, label in (
            (("network", "ncclSettings"), "network.ncclSettings"),
            (("workload", "envs"), "workload.envs"),
        ):
            for index, item in enumerate(value_at(self.values, key) or []):
                if not isinstance(item, dict) or "valueFrom" in item:
                    continue
                name = item.get("name")
                if not isinstance(name, str) or not ENV_NAME.fullmatch(name):
                    self.problem(
                        key + (index, "name"), f"{name!r} is not a shell variable name", "[A-Za-z_][A-Za-z0-9_]*"
                    )
                    continue
                put(name, secrets.env_word(name, item.get("value", ""), key + (index, "value"), self.env), label)
        for name, value in (s.get("env") or {}).items():
            put(name, secrets.env_word(name, value, ("slurm", "env", name), self.env), "slurm.env")
        for name in secrets.declared:
            if name not in entries:
                secrets.required.setdefault(name, None)
                put(name, '"${' + name + '}"', "slurm.secret_env")
        return [(name, word, origin) for name, (word, origin) in entries.items()]

    IMAGE: tuple[str, ...] = ("workload", "image")  # where the values name the container image

    def image(self, s: dict[str, Any]) -> str:
        if s.get("container_image"):
            return str(s["container_image"])
        return enroot_image(text_of(value_at(self.values, self.IMAGE)))

    def mounts(self, s: dict[str, Any], results_root: str) -> list[str]:
        out = list(s.get("container_mounts") or [])
        claims = s.get("claim_paths") or {}
        for index, mount in enumerate(value_at(self.values, ("volumes", "pvcMounts")) or []):
            claim = mount.get("claimName")
            if claim not in claims:
                self.problem(
                    ("volumes", "pvcMounts", index, "claimName"),
                    f"claim {claim!r} has no path on the Slurm nodes",
                    f"slurm.claim_paths: {{{claim}: /path/on/the/nodes}}",
                    "the Kubernetes claim's filesystem is mounted on the cluster; say where",
                )
                continue
            target = mount.get("mountPath")
            if not isinstance(target, str) or "," in target or ":" in target:
                self.problem(
                    ("volumes", "pvcMounts", index, "mountPath"), "a container mount path cannot hold ',' or ':'"
                )
                continue
            entry = f"{claims[claim]}:{target}" + (":ro" if mount.get("readOnly") else "")
            if entry not in out:
                out.append(entry)
        if not any(_covers(entry.split(":")[1] if ":" in entry else entry, results_root) for entry in out):
            out.append(f"{results_root}:{results_root}")
        return out

    def render(self) -> SlurmJob:
        plan = self.plan
        s = self.section()
        profile = self.profile()
        self.check_translatable()
        root = s.get("results_dir") or value_at(self.values, ("workload", "experimentRootDir"))
        if not root:
            self.problem(
                ("slurm",),
                "where should the job write? no results directory",
                "slurm.results_dir: /fsx/results (or workload.experimentRootDir)",
                "a path on the cluster's shared filesystem",
            )
        elif not s.get("results_dir") and (not str(root).startswith("/") or re.search(r"[\n\r,:]", str(root))):
            self.problem(
                ("workload", "experimentRootDir"),
                "the results root must be an absolute path without ',' ':' or newlines",
            )
        experiment = text_of(value_at(self.values, ("workload", "experimentName")) or "nemo-experiments")
        if not re.fullmatch(r"[A-Za-z0-9._-]+", experiment):
            self.problem(
                ("workload", "experimentName"),
                "the experiment name is a folder name on Slurm",
                "letters, digits, '.', '_' and '-'",
            )
        if self.problems or profile is None:
            raise_if_problems(self.problems, title=f"{plan.source}: release {plan.release} cannot run on Slurm:")
        assert profile is not None  # no profile is one of the problems raised above
        secrets = Secrets(plan, self.env, s.get("secret_env") or [], self.show_secrets)

        gpus = int(value_at(self.values, ("workload", "gpus")) or profile["gpusPerNode"])
        per_node = int(profile["gpusPerNode"])
        gpus_per_node = min(gpus, per_node)
        nodes = 1 if gpus <= per_node else gpus // per_node
        job_name = f"{s.get('job_name_prefix') or ''}{plan.release}"
        root = str(PurePosixPath(str(root)))
        experiment_dir = f"{root}/{experiment}"
        output = s.get("output") or f"{experiment_dir}/log-%x_%j.out"
        error = None if s.get("stderr_to_stdout", True) else (s.get("error") or f"{experiment_dir}/error-%x_%j.err")
        if not re.fullmatch(r"[A-Za-z0-9._-]+", job_name):
            self.problem(
                ("slurm", "job_name_prefix"),
                f"job name {job_name!r} (prefix + release) is not a plain name",
                "letters, digits, '.', '_' and '-'",
            )
        directives = self.directives(s, job_name, nodes, gpus_per_node, output, error)
        env = self.environment(profile, s, secrets)
        args = self.arguments(secrets, env)
        srun = self.srun(s, root)
        raise_if_problems(self.problems, title=f"{plan.source}: release {plan.release} cannot run on Slurm:")

        resolved = self.resolved_values(s, profile, secrets)
        config = text_of(self.values.get("nemo_config"))
        lines = [
            "#!/bin/bash",
            f"# Generated by helm nemo template --target slurm from {comment(self.source_name)}.",
            f"# Release {comment(plan.release)}: chart {plan.chart_kind}, accelerator {profile['id']} ({profile['machineType']},"
            f" {profile['gpusPerNode']} x {profile['gpu']}), {nodes} node(s) x {gpus_per_node} GPU(s).",
            "# Submit: helm nemo install --target slurm --values FILE (creates the folder of the log first);",
            f"# by hand: mkdir -p {quote(_dirname(output))} && sbatch THIS_FILE",
            *directives,
            "set -euo pipefail",
            "",
        ]
        if secrets.required:
            lines.append(
                "# Secrets come from the environment sbatch runs in (helm nemo install passes them), never from this file."
            )
            for name in sorted(secrets.required):
                lines.append(f': "${{{name}:?secret {name} is not set in the environment of sbatch}}"')
            lines.append("")
        results = (
            '"$EXPERIMENT_DIR/${SLURM_JOB_NAME}_${SLURM_JOB_ID}"'
            if s.get("unique_output_dir", True)
            else '"$EXPERIMENT_DIR"'
        )
        lines += [
            "# One results directory per job"
            + (
                " (slurm.unique_output_dir)."
                if s.get("unique_output_dir", True)
                else ": off (slurm.unique_output_dir: false), runs share it."
            ),
            f"EXPERIMENT_DIR={quote(experiment_dir)}",
            f"RESULTS_DIR={results}",
            'mkdir -p "$RESULTS_DIR/results"',
            "export EXPERIMENT_DIR RESULTS_DIR",
            "",
            "# The NeMo config the job runs and the resolved values, saved next to the results.",
            *heredoc(f'"$RESULTS_DIR/{NEMO_CONFIG_NAME}"', config),
            *heredoc(f'"$RESULTS_DIR/{RESOLVED_VALUES_NAME}"', resolved),
            f'[ -e "$RESULTS_DIR/{SUBMISSION_NAME}" ] || cp -- "$0" "$RESULTS_DIR/{SUBMISSION_NAME}"',
            "",
            "# Env: the profile's fabric settings, then the values' (later entries win).",
        ]
        for name, word, origin in env:
            lines.append(f"export {name}={word}  # {origin}")
        lines += [
            "",
            "# What the chart sets in the pod, from Slurm's view of the job.",
            'export NNODES="$SLURM_JOB_NUM_NODES"',
            f"export GPUS_PER_NODE={gpus_per_node}",
            f"export WORLD_SIZE=$(( NNODES * {gpus_per_node} ))",
            'export MASTER_ADDR="$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)"',
            f"export MASTER_PORT={quote(value_at(self.values, ('workload', 'masterPort')) or 6002)}",
            'export JOB_IDENTIFIER="${SLURM_JOB_NAME}_${SLURM_JOB_ID}"',
            "export JOB_ORCHESTRATOR=slurm",
            f"export EXPERIMENT_NAME={quote(experiment)}",
            f"export EXPERIMENT_ROOT_DIR={quote(root)}",
            f"export TORCH_DISTRIBUTED_TARGET={quote(value_at(self.values, ('workload', 'torchDistributedTarget')))}",
            f"export OMP_NUM_THREADS={quote(value_at(self.values, ('workload', 'ompNumThreads')) or 12)}",
            "export NVTE_FWD_LAYERNORM_SM_MARGIN=8 NVTE_BWD_LAYERNORM_SM_MARGIN=8",
        ]
        checkpoints = value_at(self.values, ("workload", "checkpointsRootDir"))
        if checkpoints:
            lines.append(f"export CHECKPOINTS_ROOT_DIR={quote(str(checkpoints).rstrip('/'))}")
        if value_at(self.values, ("workload", "enableNemoDebug")):
            lines.append("export NEMO_TESTING=true")
        lines += [
            "",
            "# Hydra overrides (workload.nemoConfigOverrides, then workload.arguments): one word each.",
            "ARGS=(",
            *[f"  {word}" for word in args],
            ")",
            "",
            '# Per node: torchrun with the node\'s rank; the overrides arrive as "$@", never re-parsed.',
            "LAUNCH=" + quote(self.launcher(checkpoints)),
            "",
            'echo "job $SLURM_JOB_ID: $NNODES node(s) x $GPUS_PER_NODE GPU(s), results in $RESULTS_DIR"',
            *srun,
        ]
        script = "\n".join(lines) + "\n"
        self.check_no_secret_in_clear(script, secrets)
        return SlurmJob(
            release=plan.release,
            job_name=job_name,
            script=script,
            experiment_dir=experiment_dir,
            output=output,
            unique=bool(s.get("unique_output_dir", True)),
            resolved_values=resolved,
            secret_env=dict(secrets.required),
            notes=self.notes,
            dependency=s.get("dependency"),
        )

    def arguments(self, secrets: Secrets, env: list[tuple[str, str, str]]) -> list[str]:
        words = []
        for index, item in enumerate(value_at(self.values, ("workload", "nemoConfigOverrides")) or []):
            words.append(
                (
                    secrets.word(item, ("workload", "nemoConfigOverrides", index)),
                    text_of(item),
                    ("workload", "nemoConfigOverrides", index),
                )
            )
        for index, item in enumerate(value_at(self.values, ("workload", "arguments")) or []):
            where = ("workload", "arguments", index)
            if isinstance(item, dict):
                value = item.get("value")
                if isinstance(value, list):
                    value = "[" + ",".join(text_of(v) for v in value) + "]"
                text = (
                    f"{item.get('name')}={text_of(value) if 'value' in item and value is not None else 'null'}"
                    if "value" in item
                    else text_of(item.get("name"))
                )
                # secrets may sit in the value: word() searches the text at the value's path
                word = secrets.word(text, where + ("value",)) if "value" in item else quote(text)
            else:
                text, word = text_of(item), secrets.word(item, where)
            words.append((word, text, where))
        from helm_nemo.values.substitute import RUNTIME_VARIABLES

        defined = set(RUNTIME_EXPANDED) | {name for name, _, _ in env}
        self.expanded: list[str] = []
        for _, text, where in words:
            for name in _REFERENCE.findall(text):
                if name in defined:
                    if name not in self.expanded:
                        self.expanded.append(name)
                elif name in RUNTIME_VARIABLES:  # meant for the pod (kept by substitution), nothing sets it on Slurm
                    self.problem(
                        where,
                        f"${{{name}}} has no value in a Slurm job",
                        "one of " + ", ".join(sorted(RUNTIME_EXPANDED)),
                        f"write $${{{name}}} for a literal, or set {name} in slurm.env",
                    )
        return [word for word, _, _ in words]

    def launcher(self, checkpoints: Any) -> str:
        lines = [
            "set -euo pipefail",
            'export NODE_RANK="$SLURM_NODEID" JOB_COMPLETION_INDEX="$SLURM_NODEID"',
            'args=("$@")',
        ]
        if self.expanded:
            names = " ".join(self.expanded)
            lines += [
                "# ${NAME} of the job variables in the overrides, replaced in pure bash (nothing is evaluated)",
                'for i in "${!args[@]}"; do',
                f'  for n in {names}; do args[i]=${{args[i]//"\\${{$n}}"/"${{!n}}"}}; done',
                "done",
            ]
        if checkpoints:
            lines.append(
                'args=("++exp_manager.checkpoint_callback_params.dirpath='
                '$CHECKPOINTS_ROOT_DIR/$EXPERIMENT_NAME/$JOB_IDENTIFIER" "${args[@]}")'
            )
        lines += [
            "cmd=(torchrun",
            '  --nproc-per-node="$GPUS_PER_NODE" --nnodes="$NNODES" --node_rank="$NODE_RANK"',
            '  --rdzv_id="$SLURM_JOB_ID" --master_addr="$MASTER_ADDR" --master_port="$MASTER_PORT"',
            f'  "$TORCH_DISTRIBUTED_TARGET" --config-path="$RESULTS_DIR" --config-name={NEMO_CONFIG_NAME}',
            '  ++trainer.num_nodes="$NNODES" ++exp_manager.name="$EXPERIMENT_NAME"',
            '  ++exp_manager.version="$JOB_IDENTIFIER" ++exp_manager.explicit_log_dir="$RESULTS_DIR/results"',
            "  ++exp_manager.create_tensorboard_logger=true ++exp_manager.create_dllogger_logger=true",
            '  ++exp_manager.dllogger_logger_kwargs.json_file="$RESULTS_DIR/results/dllogger/rank-$NODE_RANK/dllogger.json"',
            '  "${args[@]}")',
            'if [ "$NODE_RANK" = 0 ]; then printf "%q " "${cmd[@]}" > "$RESULTS_DIR/cmd-args.log"; echo >> "$RESULTS_DIR/cmd-args.log"; fi',
            'exec "${cmd[@]}"',
        ]
        return "\n".join(lines) + "\n"

    def srun(self, s: dict[str, Any], root: str) -> list[str]:
        raw = s.get("srun_args")
        if isinstance(raw, str):
            try:
                srun_args = shlex.split(raw)
            except ValueError as err:
                self.problem(("slurm", "srun_args"), f"cannot split srun_args: {err}", "a list, or one line of words")
                srun_args = []
        else:
            srun_args = list(raw or [])
        words = ["srun", "--ntasks-per-node=1"]
        if s.get("container", True):
            words += [f"--container-image={self.image(s)}", "--container-mounts=" + ",".join(self.mounts(s, root))]
        else:
            srun_args = [a for a in srun_args if not a.startswith("--container") and not a.startswith("--no-container")]
        words += srun_args
        out = [
            "# container: "
            + (
                "Pyxis/Enroot"
                if s.get("container", True)
                else "none (slurm.container: false: the nodes run the command as they are)"
            )
        ]
        body = " \\\n  ".join(quote(w) for w in words)
        out.append(body + ' \\\n  bash -c "$LAUNCH" nemo-launch "${ARGS[@]}"')
        return out

    def resolved_values(self, s: dict[str, Any], profile: dict[str, Any], secrets: Secrets) -> str:
        """What the job ran with: the chart's defaults merged with the values, the slurm section with its
        defaults; env-derived secrets masked, declared secret env values masked."""
        import yaml

        values = secrets.mask({k: v for k, v in self.values.items() if k not in ("nemo_config", "files")})
        order = list(schema()["properties"])
        section = secrets.mask({key: s[key] for key in order if key in s}, ("slurm",))
        if section.get("env"):
            section["env"] = {
                k: (MASK if k in secrets.declared and not self.show_secrets else v) for k, v in section["env"].items()
            }
        for key in ("envs",):
            items = (values.get("workload") or {}).get(key) or []
            masked = []
            for item in items:
                if isinstance(item, dict) and item.get("name") in secrets.declared and not self.show_secrets:
                    item = {**item, "value": MASK}
                masked.append(item)
            if items:
                values["workload"] = {**values["workload"], key: masked}
        doc = {
            "release": self.plan.release,
            "chart": self.plan.chart_kind,
            "accelerator": profile["id"],
            "values": values,
            "slurm": section,
        }
        return yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, default_flow_style=False, width=1000)

    def check_no_secret_in_clear(self, script: str, secrets: Secrets) -> None:
        if self.show_secrets:
            return
        for where, pairs in secrets.by_path.items():
            if where in secrets.handled:
                continue  # quoted with references by Secrets.word
            for text, name in pairs:
                if text in script:  # a value used elsewhere (image, paths …) would carry the secret
                    self.problem(
                        where,
                        f"the value of secret variable {name} would be written into the script here",
                        hint="pass it through env (workload.envs or slurm.env), or use --show-secrets",
                    )
        raise_if_problems(self.problems, title=f"{self.plan.source}: release {self.plan.release}: secrets:")


# The variables a Slurm job defines that ${NAME} in an override may use (expanded per node at run time).
RUNTIME_EXPANDED = (
    "NNODES",
    "GPUS_PER_NODE",
    "WORLD_SIZE",
    "MASTER_ADDR",
    "MASTER_PORT",
    "JOB_IDENTIFIER",
    "JOB_ORCHESTRATOR",
    "EXPERIMENT_NAME",
    "EXPERIMENT_ROOT_DIR",
    "EXPERIMENT_DIR",
    "RESULTS_DIR",
    "TORCH_DISTRIBUTED_TARGET",
    "CHECKPOINTS_ROOT_DIR",
    "NODE_RANK",
    "JOB_COMPLETION_INDEX",
    "OMP_NUM_THREADS",
    "SLURM_JOB_ID",
    "SLURM_JOB_NAME",
    "SLURM_NODEID",
    "SLURM_JOB_NUM_NODES",
    "HOME",
    "PATH",
    "PWD",
    "HOSTNAME",
)


def enroot_image(image: str) -> str:
    """A registry image as Enroot/Pyxis names it: REGISTRY#IMAGE when the first part is a registry host."""
    first, _, rest = image.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):
        return f"{first}#{rest}"
    return image


def _covers(mount_target: str, path: str) -> bool:
    mount_target = mount_target.rstrip("/") or "/"
    return path == mount_target or path.startswith(mount_target.rstrip("/") + "/")


def _dirname(pattern: str) -> str:
    return str(PurePosixPath(pattern).parent)


def render(
    plan: ReleasePlan,
    env: Mapping[str, str] | None = None,
    *,
    show_secrets: bool = False,
    source_name: str | None = None,
) -> SlurmJob:
    """The Slurm job of one release plan (UserError with every problem, file:line:col)."""
    import os

    return _Renderer(plan, os.environ if env is None else env, show_secrets, source_name).render()


def split_plans(plans: list[Any]) -> tuple[list[Any], list[str]]:
    """The plans that become Slurm jobs, and notes on the releases left out; others are refused."""
    jobs, notes, problems = [], [], []
    for plan in plans:
        if plan.chart_kind in JOB_KINDS:
            jobs.append(plan)
        elif plan.chart_kind in STORAGE_KINDS:
            notes.append(
                f"release {plan.release} ({plan.chart_kind}) is Kubernetes storage: skipped on Slurm, "
                "where the cluster mounts its filesystems (map claims with slurm.claim_paths)"
            )
        else:
            where = tuple(plan.json_prefix[:2]) + ("chart",) if plan.json_prefix else ("chart",)
            line, column = plan.loaded.position(where) if plan.loaded else (None, None)
            problems.append(
                Problem(
                    str(plan.source),
                    line,
                    column,
                    json_path(where),
                    f"release {plan.release}: chart {plan.chart_kind or plan.chart!r} has no Slurm rendering",
                    "a nemo-training or data-prep release (storage releases are skipped)",
                    "run this release with --target kubernetes, or leave it out of the recipe",
                )
            )
    raise_if_problems(problems, title="the Slurm target refuses:")
    if not jobs:
        raise UserError(
            Problem(
                str(plans[0].source),
                1,
                1,
                "$",
                "no release of this file runs on Slurm",
                "a nemo-training release with an accelerator that has a Slurm profile",
            )
        )
    return jobs, notes
