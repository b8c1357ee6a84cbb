"""Run release plans through the real helm: template, install, upgrade, uninstall.

Every helm call gets the plan's values as a JSON file (never re-dumped YAML), and the user's extra
flags, translated to the running helm's major version. A recipe runs its releases in order and stops
at the first failure or signal (actions/process.py), saying what is installed; uninstall goes in reverse.
"""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import datetime, UTC

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: importing typing costs every run start-up time
    from typing import Any, TextIO
    from collections.abc import Callable

from helm_nemo.actions.helm import HelmBinary, needs_translation, translate_flags
from helm_nemo.actions.process import Interrupted, run_helm
from helm_nemo.secrets import mask
from helm_nemo.values.chart_values import chart_schema
from helm_nemo.values.plan import helm_values_json
from helm_nemo.values.release_plan import ReleasePlan

if TYPE_CHECKING:
    from helm_nemo.actions.process import Helm
    from helm_nemo.dataprep.wait import RecipeWaits

    Echo = Callable[[str], None]


def _stderr(message: str) -> None:
    print(mask(message), file=sys.stderr)


def render_time() -> datetime:
    """Now, or SOURCE_DATE_EPOCH (seconds) when set: the reproducible-builds convention for a fixed clock."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH", "")
    return datetime.fromtimestamp(int(epoch), UTC) if epoch.isdigit() else datetime.now(UTC)


def needs_job_time(plan: ReleasePlan) -> bool:
    """The chart has workload.jobTimestamp and the user set none: the plugin stamps it."""
    local = plan.local_chart
    schema = chart_schema(local) if local else None
    workload = ((schema or {}).get("properties", {}).get("workload") or {}).get("properties", {})
    return "jobTimestamp" in workload and not (plan.values.get("workload") or {}).get("jobTimestamp")


def stamp_job_time(
    plan: ReleasePlan, now: datetime | None = None, keep: str | None = None, fresh: bool = False
) -> None:
    """Install time as workload.jobTimestamp, when the chart has that value and the user set none; `keep`
    (the installed release's stamp, on upgrade) instead of the time when given. `fresh`: replace a stamp
    this run already put there (an upgrade --new-run), the time of now."""
    if fresh and isinstance(plan.values.get("workload"), dict):
        plan.values["workload"].pop("jobTimestamp", None)
    if needs_job_time(plan):
        now = now or render_time()
        plan.values.setdefault("workload", {})["jobTimestamp"] = keep or now.strftime("%Y-%m-%d-%H-%M-%S")


def installed_job_time(plan: ReleasePlan, helm: HelmBinary, extra: list[str]) -> str | None:
    """The stamp the installed release carries (an upgrade keeps it: JOB_TIMESTAMP and nemo-training's
    JOB_IDENTIFIER name the run, and a Job's pod template cannot change); None when there is none."""
    from helm_nemo.actions.installed import ReleaseReadError, get_values, job_timestamp

    if not needs_job_time(plan):
        return None
    try:
        return job_timestamp(get_values(helm, plan.release, extra))
    except ReleaseReadError:
        return None  # the upgrade itself will say what is wrong with the cluster


def _helm_args(helm: HelmBinary, verb: list[str], plan: ReleasePlan, values_file: str, extra: list[str]) -> list[str]:
    args = [helm.path, *verb, plan.release, plan.chart, "-f", values_file]
    if plan.chart_version:
        args += ["--version", plan.chart_version]
    return args + (translate_flags(extra, helm.major) if needs_translation(extra) else list(extra))


def _run(
    helm: HelmBinary, verb: list[str], plan: ReleasePlan, extra: list[str], *, capture: bool
) -> subprocess.CompletedProcess[str]:
    """helm reads the values from stdin (`-f -`): nothing is written to disk, so nothing is left behind.
    Not captured, helm's output is relayed with the values from the environment masked."""
    return run_helm(
        _helm_args(helm, verb, plan, "-", extra),
        input=helm_values_json(plan),
        capture_stdout=capture,
        capture_stderr=capture,
    )


def run_verb(
    helm: HelmBinary, verb: list[str], plan: ReleasePlan, extra: list[str]
) -> subprocess.CompletedProcess[str]:
    """`helm VERB RELEASE CHART -f -` with the plan's values, helm's output relayed (masked)."""
    return _run(helm, verb, plan, extra, capture=False)


def render(plan: ReleasePlan, helm: HelmBinary, extra: list[str]) -> subprocess.CompletedProcess[str]:
    """`helm template` of one plan with stdout and stderr captured (what offline validation reads)."""
    return _run(helm, ["template"], plan, extra, capture=True)


def render_all(
    plans: list[ReleasePlan], helm: HelmBinary, extra: list[str], *, while_waiting: Callable[[], object] | None = None
) -> list[subprocess.CompletedProcess[str]]:
    """`helm template` of every plan side by side (one helm process each), results in plan order.

    helm renders in its own process, so the time it takes is free for this one: `while_waiting` runs
    then (compiling the validators the output will need)."""
    import threading

    from helm_nemo.actions import process

    from helm_nemo.actions import early

    process.check_interrupted()  # a signal while validating: no helm gets the values (a started one is killed)
    runs: list[tuple[list[str], Helm, str, dict[str, str]]] = []
    for plan in plans:
        args = _helm_args(helm, ["template"], plan, "-", extra)
        proc: Helm | None = early.take(
            args
        )  # started before validation for exactly this command: it waits for its values
        if proc is not None:
            process.adopt(proc)
        else:
            proc = process.spawn(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        runs.append((args, proc, helm_values_json(plan), {}))
    early.discard()  # a started helm this run does not use
    from helm_nemo.timings import mark

    mark("helm started")

    def collect(proc: Helm, values: str, into: dict[str, Any]) -> None:
        into["out"], into["err"] = proc.communicate(values)

    threads = [
        threading.Thread(target=collect, args=(proc, values, into), daemon=True) for _, proc, values, into in runs
    ]
    for thread in threads:
        thread.start()
    if while_waiting is not None:
        while_waiting()
    for thread in threads:
        thread.join()
    for _, proc, _, _ in runs:
        process.release(proc)
    process.check_interrupted()  # a signal: every helm was passed it and has exited
    # proc.returncode is set: communicate() waited for helm
    return [
        subprocess.CompletedProcess(args, proc.returncode, into["out"], into["err"])  # type: ignore[arg-type]
        for args, proc, _, into in runs
    ]


# Exit code when the rendered manifests have problems (helm_nemo.validate); same as a user error.
EXIT_INVALID_MANIFESTS = 2


def render_each(
    plans: list[ReleasePlan],
    helm: HelmBinary,
    extra: list[str],
    say: Echo,
    *,
    failed: str = "",
    empty: str = "",
    warm: Callable[[], object] | None = None,
) -> tuple[list[tuple[ReleasePlan, str]], int]:
    """`helm template` of every release side by side (`warm` runs meanwhile): ([(plan, text)] of the releases
    before the first that failed or printed nothing, in order; 0, or that release's exit code, said through
    `say` with `failed` / `empty` after the message)."""
    rendered: list[tuple[ReleasePlan, str]] = []
    for plan, proc in zip(plans, render_all(plans, helm, extra, while_waiting=warm), strict=True):
        if proc.returncode != 0:
            say(proc.stderr.rstrip())
            say(f"helm nemo: rendering release {plan.release}{failed or ' failed'}")
            return rendered, proc.returncode or 1
        if not proc.stdout.strip():
            say(empty_render(plan, proc) + empty)
            return rendered, 1
        rendered.append((plan, proc.stdout))
    return rendered, 0


def template(
    plans: list[ReleasePlan],
    helm: HelmBinary,
    extra: list[str],
    out: TextIO = sys.stdout,
    echo: Echo = _stderr,
    check: Callable[[list[tuple[ReleasePlan, str]]], bool] | None = None,
    prepare: Callable[[], object] | None = None,
) -> int:
    """Render every release (side by side, output in order). With `check` ([(plan, rendered text)]) -> ok,
    every release is rendered and checked first (together: objects two releases share), and nothing is
    written unless all are ok; `prepare` runs while helm renders."""
    for plan in plans:
        for warning in plan.warnings:
            echo(f"warning: {warning}")
        stamp_job_time(plan)  # the run identity install would give (SOURCE_DATE_EPOCH fixes it)
    from helm_nemo.timings import mark

    rendered, code = render_each(plans, helm, extra, echo, warm=prepare)
    mark("helm template (validators compiled meanwhile)")
    if check is None:
        for _, text in rendered:
            out.write(text)
    if code:
        return code
    if check is not None:
        if not check(rendered):
            return EXIT_INVALID_MANIFESTS
        mark("manifest check")
        for _, text in rendered:
            out.write(text)
    mark("output")
    return 0


def install(
    plans: list[ReleasePlan],
    helm: HelmBinary,
    extra: list[str],
    *,
    upgrade: bool = False,
    install_missing: bool = False,
    echo: Echo = _stderr,
    now: datetime | None = None,
    waits: RecipeWaits | None = None,
) -> int:
    """Install (or upgrade) the plans in order; `waits` (a recipe with `after:`/`dataFrom:`): before a release
    that names earlier ones, their Jobs must complete (helm_nemo/dataprep/wait.py)."""
    verb = ["upgrade", "--install"] if (upgrade and install_missing) else (["upgrade"] if upgrade else ["install"])
    done: list[str] = []
    for index, plan in enumerate(plans, start=1):
        if waits is not None and waits.pending(plan):
            code = wait_before(waits, plan, done, plans[index - 1 :], extra, echo)
            if code is not None:
                return code
        for warning in plan.warnings:
            echo(f"warning: {warning}")
        stamp_job_time(plan, now, keep=installed_job_time(plan, helm, extra) if upgrade else None)
        echo(f"[{index}/{len(plans)}] {verb[0]} {plan.release} ({plan.chart})")
        try:
            proc = _run(helm, verb, plan, extra, capture=False)
        except Interrupted as stop:
            echo(_interrupted(stop, verb[0], plan, done, plans[index:], extra))
            return stop.exit_code
        if proc.returncode != 0:
            installed = ", ".join(done) if done else "none"
            echo(
                f"helm nemo: {verb[0]} of {plan.release} failed (helm exit {proc.returncode}); "
                f"stopped. Installed by this run: {installed}."
            )
            # Without --atomic / --rollback-on-failure, a failed `helm install` can leave the release
            # behind (status failed, with the objects it created), and its name is then taken.
            left = verb == ["install"] and not _flag_set(extra, "--atomic", "--rollback-on-failure")
            if done or left:
                what = " and ".join(
                    (["them"] if done else []) + ([f"{plan.release}, if helm left it behind as failed"] if left else [])
                )
                echo(f"  to remove {what}: helm nemo uninstall {plan.values_flags()}{_namespace_flag(extra)}")
            return proc.returncode or 1
        done.append(plan.release)
    return 0


def wait_before(
    waits: RecipeWaits, plan: ReleasePlan, done: list[str], rest: list[ReleasePlan], extra: list[str], echo: Echo
) -> int | None:
    """Wait for the Jobs `plan` waits for; None to go on, else the exit code, said with what this run installed,
    what keeps running, and how to go on (`rest`: `plan` and the releases after it)."""
    from helm_nemo.dataprep.wait import Failure

    pending = waits.pending(plan)
    source = rest[0] if rest else plan
    again = f"helm nemo upgrade --install {source.values_flags()}{_namespace_flag(extra)}"
    try:
        waits.before(plan)
    except Failure as failure:
        for line in failure.lines:
            echo(line)
        installed = ", ".join(done) if done else "none"
        echo(
            f"helm nemo: waiting for {', '.join(pending)} failed; stopped before {plan.release}. "
            f"Installed by this run: {installed}. Not started: {', '.join(p.release for p in rest)}."
        )
        if failure.running:
            echo(f"  the Job keeps running; to go on once it completes: {again}")
        if done:
            echo(f"  to remove them: helm nemo uninstall {plan.values_flags()}{_namespace_flag(extra)}")
        return 1
    except Interrupted as stop:
        echo(
            "\n".join(
                [
                    f"helm nemo: {stop.name} received while waiting for {', '.join(pending)}; stopped.",
                    f"  Installed by this run: {', '.join(done) if done else 'none'}.",
                    f"  The Job of {', '.join(pending)} keeps running "
                    f"(helm nemo status {pending[0]}{_namespace_flag(extra)} shows it).",
                    f"  Not started: {', '.join(p.release for p in rest)}.",
                    f"  to go on: {again} (it waits for {', '.join(pending)} again, then installs the rest)",
                ]
            )
        )
        return stop.exit_code
    return None


def empty_render(plan: ReleasePlan, proc: subprocess.CompletedProcess[str]) -> str:
    """The message for a `helm template` that exited 0 and printed no manifest (never "ok: 0 objects")."""
    said = proc.stderr.strip().splitlines()
    return (
        f"helm nemo: helm template printed nothing for release {plan.release} ({plan.chart}); a chart renders "
        "at least one object" + (f" (helm said: {said[-1]})" if said else "")
    )


def _interrupted(
    stop: Interrupted, verb: str, plan: ReleasePlan, done: list[str], rest: list[ReleasePlan], extra: list[str]
) -> str:
    """What a signal left: which releases this run finished, the one helm was stopped in, the ones not started."""
    past = {"install": "installed", "upgrade": "upgraded", "uninstall": "uninstalled"}[verb]
    finished = list(done)
    lines = [f"helm nemo: {stop.name} received; stopped."]
    if stop.returncode is None:
        rest = [plan, *rest]
    elif stop.returncode == 0:
        finished.append(plan.release)
    else:
        lines.append(
            f"  {plan.release}: helm was stopped during the {verb} (exit {stop.returncode}); it may be "
            f"partly {past}: helm status {plan.release}{_namespace_flag(extra)}"
        )
    lines.insert(1, f"  {past.capitalize()} by this run: {', '.join(finished) if finished else 'none'}.")
    if rest:
        lines.append(f"  Not started: {', '.join(p.release for p in rest)}.")
    return "\n".join(lines)


def _flag_set(args: list[str], *names: str) -> bool:
    """A boolean flag given and not `=false`."""
    return any(a.partition("=")[0] in names and a.partition("=")[2].lower() != "false" for a in args)


def _namespace_flag(args: list[str]) -> str:
    """` -n NS` for a hint to run later: the namespace given to helm, or the one helm gave the plugin."""
    namespace = os.environ.get("HELM_NAMESPACE", "")
    for index, arg in enumerate(args):
        name, eq, value = arg.partition("=")
        if name in ("-n", "--namespace"):
            namespace = value if eq else (args[index + 1] if index + 1 < len(args) else "")
    return f" -n {namespace}" if namespace else ""


namespace_flag = _namespace_flag


def uninstall(plans: list[ReleasePlan], helm: HelmBinary, extra: list[str], echo: Echo = _stderr) -> int:
    """Reverse order. A release that is not installed is skipped (the clean-up after an install that
    stopped half-way, which install suggests), unless none of the releases is installed."""
    failed: list[str] = []
    missing: list[str] = []
    done: list[str] = []
    ordered = list(reversed(plans))
    for index, plan in enumerate(ordered, start=1):
        flags = translate_flags(extra, helm.major) if needs_translation(extra) else list(extra)
        echo(f"[{index}/{len(plans)}] uninstall {plan.release}")
        try:
            proc = run_helm([helm.path, "uninstall", plan.release, *flags], capture_stderr=True)
        except Interrupted as stop:
            echo(_interrupted(stop, "uninstall", plan, done, ordered[index:], extra))
            return stop.exit_code
        if proc.returncode == 0:
            done.append(plan.release)
        if proc.returncode != 0 and "release: not found" in (proc.stderr or ""):
            echo(f"  {plan.release} is not installed; skipped")
            missing.append(plan.release)
        elif proc.returncode != 0:
            echo((proc.stderr or "").rstrip())
            failed.append(plan.release)
    if failed:
        echo(f"helm nemo: could not uninstall: {', '.join(failed)}")
        return 1
    if missing and len(missing) == len(plans):
        echo(f"helm nemo: no release of {plans[0].source} is installed (in this namespace?): {', '.join(missing)}")
        return 1
    return 0
