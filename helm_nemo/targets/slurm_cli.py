"""The commands of `--target slurm`: what template/install/uninstall/status do with the release plans.

A recipe file may mix chart kinds: its nemo-training releases become Slurm jobs (in order), its storage
releases (fsx-lustre, gcs-fuse) are skipped with a note (the cluster mounts its own filesystems; claims map
through slurm.claim_paths), any other release (jobset, supervisor) is refused before anything is submitted.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: importing typing costs every run start-up time
    from collections.abc import Mapping
    from pathlib import Path
    from typing import TextIO

    from helm_nemo.user_errors import Problem
    from helm_nemo.values.release_plan import ReleasePlan

from helm_nemo.targets import slurm

Echo = Callable[[str], None]


def _stderr(line: str) -> None:
    print(line, file=sys.stderr)


def jobs_of(
    plans: list[ReleasePlan], *, show_secrets: bool = False, echo: Echo = _stderr, env: Mapping[str, str] | None = None
) -> list[slurm.SlurmJob]:
    """Render every job of the plans (all checked before any is used), notes on stderr."""
    from helm_nemo.user_errors import UserError

    selected, notes = slurm.split_plans(plans)
    for note in notes:
        echo(f"note: {note}")
    jobs: list[slurm.SlurmJob] = []
    problems: list[Problem] = []
    for plan in selected:
        try:
            if plan.chart_kind == "data-prep":
                from helm_nemo.targets import slurm_dataprep

                job = slurm_dataprep.render(plan, env, show_secrets=show_secrets, source_name=_shown(plan.source))
            else:
                job = slurm.render(plan, env, show_secrets=show_secrets, source_name=_shown(plan.source))
            job.after = [name for name in plan.after if name in {p.release for p in selected}]
            jobs.append(job)
        except UserError as err:
            problems += err.problems
    if problems:
        raise UserError(problems, title=f"{plans[0].source}: {len(problems)} problem(s) for the Slurm target:")
    return jobs


def _shown(path: str | Path) -> str:
    """The values file as the user would name it: relative to the working directory when inside it."""
    try:
        relative = os.path.relpath(path)
    except ValueError:
        return str(path)
    return str(path) if relative.startswith("..") else relative


def refuse_extra(extra: list[str], command: str) -> None:
    from helm_nemo.user_errors import Problem, UserError

    if extra:
        raise UserError(
            Problem(
                None,
                None,
                None,
                "$",
                f"{command} --target slurm takes no option {extra[0]!r}",
                hint="Kubernetes options (-n, --kube-context, helm flags) do not apply to Slurm",
            )
        )


def template(
    plans: list[ReleasePlan], extra: list[str], *, show_secrets: bool = False, out: TextIO | None = None
) -> int:
    refuse_extra(extra, "template")
    out = out or sys.stdout
    jobs = jobs_of(plans, show_secrets=show_secrets)
    for index, job in enumerate(jobs):
        for note in job.notes:
            _stderr(f"note: {job.release}: {note}")
        if len(jobs) > 1:
            out.write(f"{'' if index == 0 else chr(10)}# ---- release {job.release} ----\n")
        out.write(job.script)
    out.flush()
    return 0


def install(plans: list[ReleasePlan], extra: list[str]) -> int:
    from helm_nemo.targets.slurm_jobs import install as submit_all

    jobs = jobs_of(plans)
    return submit_all(jobs, extra=extra)


def uninstall(plans: list[ReleasePlan], extra: list[str]) -> int:
    from helm_nemo.targets.slurm_jobs import uninstall as cancel_all

    refuse_extra(extra, "uninstall")
    return cancel_all(jobs_of(plans, echo=lambda _line: None))


def status(plans: list[ReleasePlan], extra: list[str]) -> int:
    from helm_nemo.targets.slurm_jobs import status as show

    refuse_extra(extra, "status")
    return show(jobs_of(plans, echo=lambda _line: None))
