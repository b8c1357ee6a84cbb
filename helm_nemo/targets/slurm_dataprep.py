"""The Slurm target of a data-prep release: an sbatch array job, one task per worker (docs/data-prep.md).

The chart is the one source of what a worker runs: the release is rendered with helm (`helm template`), and
the script carries the chart's ConfigMap files (prepare.sh, tokenize.sh, shards.tsv, downloads.tsv) as
quoted here-documents and the worker container's environment, with the ConfigMap's mount path replaced by
the task's own folder. So a shard is prepared by the same bytes on Kubernetes and on Slurm, and worker `i`
(`SLURM_ARRAY_TASK_ID`) takes the same shards as index `i` of the Job.

A release that waits for it (`after:` / `dataFrom:` in the recipe) is submitted with
`--dependency=afterok:<array job id>` (slurm_jobs.install): Slurm starts training only when every task
succeeded.
"""

from __future__ import annotations

import math
import re
from typing import Any
from collections.abc import Mapping

TYPE_CHECKING = False
if TYPE_CHECKING:
    from helm_nemo.values.release_plan import ReleasePlan

from helm_nemo.targets.shell import Secrets, comment, heredoc, quote, text_of
from helm_nemo.targets.slurm import SlurmJob, _Renderer
from helm_nemo.targets.slurm_launch import enroot_image
from helm_nemo.user_errors import UserError, raise_if_problems
from helm_nemo.values import value_at

KIND = "data-prep"
# Files of the chart's ConfigMap the worker needs; executables get +x.
FILES = ("prepare.sh", "tokenize.sh", "shards.tsv", "downloads.tsv")
EXECUTABLES = ("prepare.sh", "tokenize.sh")
# The worker's own index on Slurm (the Job takes it from JOB_COMPLETION_INDEX).
TASK_INDEX = "DATA_PREP_INDEX"
# Values of the data-prep chart that only mean something to Kubernetes.
KUBERNETES_ONLY: tuple[tuple[str, ...], ...] = (
    ("nodeSelector",),
    ("tolerations",),
    ("affinity",),
    ("serviceAccountName",),
    ("imagePullPolicy",),
    ("retries", "podRetries"),
)
REFUSED = {
    (
        "volumes",
        "gcsMounts",
    ): "mount the bucket on the cluster (or copy the data) and list it in slurm.container_mounts",
}


class RenderedChart:
    """What the worker runs, read from the chart's manifest: the ConfigMap's files and the container."""

    def __init__(self, manifest: str, release: str) -> None:
        import yaml

        docs = [doc for doc in yaml.safe_load_all(manifest) if isinstance(doc, dict)]
        jobs = [doc for doc in docs if doc.get("kind") == "Job"]
        if len(jobs) != 1:
            raise ValueError(f"the data-prep chart rendered {len(jobs)} Job(s) for release {release}, not one")
        self.job = jobs[0]
        pod = self.job["spec"]["template"]["spec"]
        self.container = pod["containers"][0]
        configmaps = {
            (volume.get("configMap") or {}).get("name"): volume["name"]
            for volume in pod.get("volumes") or []
            if volume.get("configMap")
        }
        self.files: dict[str, str] = {}
        self.mount_path = ""
        for doc in docs:
            if doc.get("kind") == "ConfigMap" and doc["metadata"]["name"] in configmaps:
                volume = configmaps[doc["metadata"]["name"]]
                data = doc.get("data") or {}
                if all(name in data for name in FILES):
                    self.files = {name: data[name] for name in FILES}
                    mounts = self.container.get("volumeMounts") or []
                    self.mount_path = next(m["mountPath"] for m in mounts if m["name"] == volume)
        if not self.files:
            raise ValueError(f"the data-prep chart's ConfigMap for release {release} lacks one of {', '.join(FILES)}")

    @property
    def env(self) -> list[dict[str, Any]]:
        return list(self.container.get("env") or [])

    @property
    def workers(self) -> int:
        return int(self.job["spec"]["completions"])


def chart_manifest(plan: ReleasePlan, helm_path: str | None = None) -> str:
    """`helm template` of the release (the chart renders what the worker runs)."""
    from helm_nemo.actions.helm import HelmNotFound, helm_binary
    from helm_nemo.actions.releases import render
    from helm_nemo.user_errors import Problem

    try:
        helm = helm_binary(helm_path)
    except HelmNotFound as err:
        raise UserError(Problem(str(plan.source), None, None, "$", f"release {plan.release}: {err}")) from None
    proc = render(plan, helm, [])
    if proc.returncode != 0:
        said = (proc.stderr or "").strip().splitlines()
        raise UserError(
            Problem(
                str(plan.source),
                None,
                None,
                "$",
                f"release {plan.release}: helm template of the data-prep chart failed: "
                + (said[-1] if said else f"exit {proc.returncode}"),
            )
        )
    return proc.stdout


class DataPrepRenderer(_Renderer):
    """A data-prep release as an array job; the `slurm:` section, mounts and directives as for training."""

    IMAGE = ("image",)
    DEADLINE = ("activeDeadlineSeconds",)

    def check_translatable(self) -> None:
        for where in KUBERNETES_ONLY:
            if value_at(self.user, where) not in (None, [], {}):
                self.notes.append(f"{'.'.join(where)} is Kubernetes-only; the Slurm job ignores it")
        for where, hint in REFUSED.items():
            if value_at(self.user, where):
                self.problem(where, "the Slurm target cannot do this", hint=hint)

    def results_root(self, s: dict[str, Any]) -> str | None:
        """slurm.results_dir, else the cluster's path of `<output.path>/.helm-nemo/slurm` (through the claim
        that holds the output folder)."""
        if s.get("results_dir"):
            return str(s["results_dir"]).rstrip("/") or "/"
        output = str(value_at(self.values, ("output", "path")) or "")
        claims = s.get("claim_paths") or {}
        for mount in value_at(self.values, ("volumes", "pvcMounts")) or []:
            target = str(mount.get("mountPath", "")).rstrip("/")
            if target and (output == target or output.startswith(target + "/")) and mount.get("claimName") in claims:
                return str(claims[mount["claimName"]]).rstrip("/") + output[len(target) :] + "/.helm-nemo/slurm"
        self.problem(
            ("output", "path"),
            f"where is {output or 'the output folder'} on the Slurm nodes? no claim of volumes.pvcMounts holds it",
            "slurm.claim_paths for the claim mounted there, or slurm.results_dir",
            "the job's logs and files go next to the output",
        )
        return None

    def worker_env(self, chart: RenderedChart, secrets: Secrets) -> list[str]:
        """`export NAME=word` for the container's env; the ConfigMap's folder becomes "$FILES"."""
        lines = []
        folder = chart.mount_path.rstrip("/")
        for index, item in enumerate(chart.env):
            name = item["name"]
            if name == TASK_INDEX:
                continue  # set from SLURM_ARRAY_TASK_ID below
            if "valueFrom" in item:
                self.problem(
                    ("env", index, "valueFrom"),
                    f"env {name}: valueFrom (a Kubernetes Secret or field) has no Slurm equivalent",
                    hint="give the value, or name it in slurm.secret_env to take it from the submitting environment",
                )
                continue
            value = text_of(item.get("value", ""))
            if folder and (value == folder or value.startswith(folder + "/")):
                lines.append(f'export {name}="$FILES"{quote(value[len(folder) :]) if value != folder else ""}')
            else:
                lines.append(f"export {name}={secrets.env_word(name, value, ('env', index, 'value'), self.env)}")
        for name, value in ((self.section_raw or {}).get("env") or {}).items():
            lines.append(f"export {name}={secrets.env_word(name, value, ('slurm', 'env', name), self.env)}")
        for name in secrets.declared:
            secrets.required.setdefault(name, None)
        return lines

    def render_with(self, manifest: str) -> SlurmJob:
        plan = self.plan
        s = self.section()
        self.check_translatable()
        root = self.results_root(s)
        if self.problems or root is None:
            raise_if_problems(self.problems, title=f"{plan.source}: release {plan.release} cannot run on Slurm:")
        assert root is not None
        try:
            chart = RenderedChart(manifest, plan.release)
        except (ValueError, KeyError, StopIteration, TypeError) as err:
            raise UserError(
                self._problem_at(("chart",), f"cannot read the data-prep chart's manifest: {err}")
            ) from None
        secrets = Secrets(plan, self.env, s.get("secret_env") or [], self.show_secrets)
        job_name = f"{s.get('job_name_prefix') or ''}{plan.release}"
        if not re.fullmatch(r"[A-Za-z0-9._-]+", job_name):
            self.problem(
                ("slurm", "job_name_prefix"),
                f"job name {job_name!r} is not a plain name",
                "letters, digits, '.', '_' and '-'",
            )
        output = s.get("output") or f"{root}/log-%x_%A_%a.out"
        error = None if s.get("stderr_to_stdout", True) else (s.get("error") or f"{root}/error-%x_%A_%a.err")
        workers = chart.workers
        line = self.directive
        directives = [
            line("--job-name", job_name, ("slurm", "job_name_prefix")),
            line("--array", f"0-{workers - 1}", ("workers",)),
            "#SBATCH --nodes=1",
            "#SBATCH --ntasks=1",
        ]
        cpu = value_at(self.values, ("resources", "requests", "cpu"))
        if cpu is not None:
            directives.append(line("--cpus-per-task", _cpus(cpu), ("resources", "requests", "cpu")))
        if s.get("mem") is not None and "mem" in (self.section_raw or {}):
            directives.append(line("--mem", s["mem"], ("slurm", "mem")))
        directives += self.scheduling_directives(s, output, error)
        env_lines = self.worker_env(chart, secrets)
        words = ["srun"]
        if s.get("container", True):
            words += [f"--container-image={self.image(s)}", "--container-mounts=" + ",".join(self.mounts(s, root))]
        raise_if_problems(self.problems, title=f"{plan.source}: release {plan.release} cannot run on Slurm:")

        shards = chart.files["shards.tsv"].count("\n")
        lines = [
            "#!/bin/bash",
            f"# Generated by helm nemo template --target slurm from {comment(self.source_name)}.",
            f"# Release {comment(plan.release)}: chart data-prep, {workers} worker(s) as the tasks of one array job,"
            f" {shards} shard(s) (worker i takes shards k with k % {workers} == i).",
            "# Submit: helm nemo install --target slurm --values FILE; a release with after:/dataFrom: on it",
            "# is submitted with --dependency=afterok:<this job's id>.",
            *directives,
            "set -euo pipefail",
            "",
            "# The chart's files, written for this task (array tasks never share a folder being written).",
            f'RESULTS_DIR={quote(root)}"/${{SLURM_JOB_NAME}}_${{SLURM_ARRAY_JOB_ID}}"',
            'FILES="$RESULTS_DIR/files-$SLURM_ARRAY_TASK_ID"',
            'mkdir -p "$FILES"',
        ]
        if secrets.required:
            lines.append("# Secrets come from the environment sbatch runs in, never from this file.")
            lines += [
                f': "${{{n}:?secret {n} is not set in the environment of sbatch}}"' for n in sorted(secrets.required)
            ]
        for name in FILES:
            lines += heredoc(f'"$FILES/{name}"', chart.files[name])
        lines += [
            "chmod +x " + " ".join(f'"$FILES/{name}"' for name in EXECUTABLES),
            '[ -e "$RESULTS_DIR/submission.sh" ] || cp -- "$0" "$RESULTS_DIR/submission.sh"',
            "",
            "# The worker's environment: the chart's container env, the task index from Slurm.",
            f'export {TASK_INDEX}="$SLURM_ARRAY_TASK_ID"',
            *env_lines,
            "",
            "# container: " + ("Pyxis/Enroot" if s.get("container", True) else "none (slurm.container: false)"),
            " \\\n  ".join(quote(word) for word in words) + ' \\\n  bash "$FILES/prepare.sh"',
        ]
        script = "\n".join(lines) + "\n"
        self.check_no_secret_in_clear(script, secrets)
        return SlurmJob(
            release=plan.release,
            job_name=job_name,
            script=script,
            experiment_dir=root,
            output=output,
            unique=False,
            resolved_values=self.resolved(s, secrets),
            secret_env=dict(secrets.required),
            notes=self.notes,
            array=workers,
            dependency=s.get("dependency"),
        )

    def image(self, s: dict[str, Any]) -> str:
        return (
            str(s["container_image"]) if s.get("container_image") else enroot_image(text_of(self.values.get("image")))
        )

    def resolved(self, s: dict[str, Any], secrets: Secrets) -> str:
        import yaml

        doc = {
            "release": self.plan.release,
            "chart": KIND,
            "values": secrets.mask(dict(self.values)),
            "slurm": secrets.mask(dict(s), ("slurm",)),
        }
        return yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, default_flow_style=False, width=1000)

    def _problem_at(self, rel: tuple[Any, ...], message: str) -> Any:
        self.problem(rel, message)
        return self.problems.pop()


def _cpus(value: Any) -> int:
    """A Kubernetes CPU quantity ("4", "500m", 2.5) as whole CPUs for --cpus-per-task (at least 1)."""
    text = str(value)
    amount = float(text[:-1]) / 1000 if text.endswith("m") else float(text)
    return max(1, math.ceil(amount))


def render(
    plan: ReleasePlan,
    env: Mapping[str, str] | None = None,
    *,
    show_secrets: bool = False,
    source_name: str | None = None,
    manifest: str | None = None,
) -> SlurmJob:
    """The array job of a data-prep release; `manifest`: the chart's render (default: helm template)."""
    import os

    renderer = DataPrepRenderer(plan, os.environ if env is None else env, show_secrets, source_name)
    return renderer.render_with(manifest if manifest is not None else chart_manifest(plan))
