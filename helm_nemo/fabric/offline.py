"""`helm nemo preflight --nccl-log FILE --accelerator ID [--nodes N]`: the fabric check on a log the user ran
themselves (clusters where installing a test release is not allowed). Same checklist and exit codes as the
cluster preflight: 0 ok/warn, 1 failed, 2 bad input (one line: what was expected, a hint)."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only
    from collections.abc import Callable
    from typing import Any

    from helm_nemo.preflight.model import Result


def judge_file(path: str, accelerator: str, nodes: int | None = None) -> Result:
    """The fabric.busbw Result for the log at `path` (UserError on a bad log or accelerator)."""
    from pathlib import Path

    from helm_nemo.fabric import nccl_log
    from helm_nemo.fabric.judge import judge
    from helm_nemo.user_errors import Problem, UserError

    profile = _profile(accelerator)
    try:
        run = nccl_log.read(Path(path))
    except nccl_log.NotAnNcclTestsOutput as bad:
        raise UserError(Problem(path, bad.line, None, "", bad.message, bad.expected, bad.hint)) from None
    except OSError as err:
        raise UserError(Problem(path, None, None, "", f"cannot read: {err.strerror}", "a readable file")) from None
    return judge(run, profile, nodes)


def _profile(accelerator: str) -> dict[str, Any]:
    from helm_nemo.generate.profiles import load_profiles
    from helm_nemo.user_errors import Problem, UserError

    profiles = load_profiles()
    with_test = sorted(p for p, v in profiles.items() if v.get("ncclTest"))
    if accelerator not in profiles or accelerator not in with_test:
        raise UserError(
            Problem(
                "--accelerator",
                None,
                None,
                "",
                f"unknown accelerator {accelerator!r}",
                "one of " + ", ".join(with_test),
                "the profile names are the files in values/accelerators/",
            )
        )
    return profiles[accelerator]


def judge_log(
    path: str | None,
    accelerator: str | None,
    nodes: int | None,
    *,
    output: str = "text",
    color: bool = False,
    out: Callable[[str], None] = print,
) -> int:
    from helm_nemo.preflight import report
    from helm_nemo.preflight.model import FAIL
    from helm_nemo.user_errors import Problem, UserError

    if not path or not accelerator:
        missing = "--nccl-log FILE" if not path else "--accelerator ID"
        raise UserError(
            Problem(
                missing.split()[0],
                None,
                None,
                "",
                f"{missing} is missing",
                "--nccl-log FILE --accelerator ID [--nodes N]",
                "helm nemo preflight --nccl-log rank0.log --accelerator a3ultra --nodes 2",
            )
        )
    result = judge_file(path, accelerator, nodes)
    code = 1 if result.verdict == FAIL else 0
    if output == "json":
        out(report.as_json([result], target={"nccl_log": path, "accelerator": accelerator}, code=code))
    else:
        out(report.text([result], header=f"preflight of the fabric ({accelerator}, {path})", color=color))
    return code
