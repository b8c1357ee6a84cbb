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

Three rooms, each class building on the one before: targets/slurm_values.py (`SlurmValues`: the values, the
`slurm:` section and the profile, checked), targets/slurm_launch.py (`SlurmLaunch`: env, overrides, the
per-node launcher, srun) and this module (`_Renderer`: the `#SBATCH` directives and the script put together;
which plans become jobs). targets/slurm_jobs.py submits, cancels and shows them.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any
from collections.abc import Mapping

TYPE_CHECKING = False
if TYPE_CHECKING:
    from helm_nemo.values.release_plan import ReleasePlan

from helm_nemo.secrets import MASK
from helm_nemo.targets.shell import Secrets, comment, heredoc, quote, text_of
from helm_nemo.targets.slurm_launch import NEMO_CONFIG_NAME, SlurmLaunch
from helm_nemo.targets.slurm_values import schema
from helm_nemo.user_errors import Problem, UserError, json_path, raise_if_problems
from helm_nemo.values import value_at

# Chart kinds with a Slurm rendering; the storage charts' filesystems are the cluster's own on Slurm.
JOB_KINDS = ("nemo-training", "data-prep")
STORAGE_KINDS = ("fsx-lustre", "gcs-fuse")
SUBMISSION_NAME = "submission.sh"
RESOLVED_VALUES_NAME = "resolved-values.yaml"


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


class _Renderer(SlurmLaunch):
    """One plan's sbatch script: the directives, then the pieces of SlurmLaunch, checked for secrets in clear."""

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
        if any(name == "TORCH_FR_DUMP_TEMP_FILE" for name, _, _ in env):
            lines.append('mkdir -p "$(dirname "$TORCH_FR_DUMP_TEMP_FILE")"  # the flight recorder writes no folder')
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
