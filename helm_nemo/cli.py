"""`helm-nemo` / `helm nemo`: a thin click layer over the library.

Heavy imports (jinja2, jsonschema, ruamel) happen inside the commands that need them, so start-up
stays fast. User errors print one screen and exit 2; tracebacks only with --debug / HELM_DEBUG=true.
"""

from __future__ import annotations

import functools
import os
import sys

import click

from helm_nemo import __version__

PASSTHROUGH = {"ignore_unknown_options": True, "allow_extra_args": True, "help_option_names": ["-h", "--help"]}


def _debug() -> bool:
    return os.environ.get("HELM_DEBUG", "").lower() == "true" or os.environ.get("HELM_NEMO_DEBUG") == "1"


def _say(text: str, err: bool = True) -> None:
    """Print one message (stderr by default) with the values from the environment masked (helm_nemo.secrets)."""
    from helm_nemo.secrets import mask

    click.echo(mask(text), err=err)


def _out(text: str) -> None:
    _say(text, err=False)


def _fail(err: Exception) -> None:
    """An error becomes its exit code: user errors 2, a signal 128 + its number, a failed write of our output
    1 (one line each), anything else 1. With --debug the traceback is printed, masked like everything else."""
    from helm_nemo.actions.process import OUTPUT_ERRNOS, Interrupted, OutputError
    from helm_nemo.user_errors import EXIT_USER_ERROR, UserError

    if isinstance(err, OSError) and err.errno in OUTPUT_ERRNOS:
        err = OutputError(err)
    if isinstance(err, OutputError):
        _output_failed(err)
    if _debug():
        _say(_traceback(err))
    if isinstance(err, Interrupted):
        stopped = f" (helm stopped, exit {err.returncode})" if err.returncode is not None else ""
        _say(f"helm nemo: {err.name} received; stopped{stopped}. Nothing further was started.")
        sys.exit(err.exit_code)
    if isinstance(err, UserError):
        if not _debug():
            _say(err.format())
        _say("Nothing was sent to helm.")
        sys.exit(EXIT_USER_ERROR)
    if not _debug():
        _say(f"helm nemo: {err}")
    sys.exit(1)


def _traceback(err: BaseException) -> str:
    """--debug: the traceback, printed through `_say` (masked like every message)."""
    import traceback

    return "".join(traceback.format_exception(err)).rstrip()


def _output_failed(err: Exception) -> None:
    """Our output cannot be written (`| head -1`, `> /dev/full`): one line on stderr, exit 1, and no second
    complaint when Python flushes stdout at exit."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # pragma: no cover - stdout without a descriptor
        pass
    error = getattr(err, "error", err)
    try:
        click.echo(f"helm nemo: cannot write the output: {getattr(error, 'strerror', None) or error}", err=True)
    except OSError:
        pass
    sys.exit(1)


class _Main(click.Group):
    """The command group; a failed write of the output, anywhere in a command, is one line and exit 1."""

    def invoke(self, ctx: click.Context):
        from helm_nemo.actions.process import OUTPUT_ERRNOS, OutputError

        try:
            return super().invoke(ctx)
        except OutputError as err:
            _output_failed(err)
        except OSError as err:
            if err.errno in OUTPUT_ERRNOS:
                _output_failed(err)
            raise


@click.group(cls=_Main, context_settings={"help_option_names": ["-h", "--help"]}, invoke_without_command=True)
@click.version_option(__version__, "--version", prog_name="helm-nemo")
@click.option("--debug", is_flag=True, hidden=True, help="Show tracebacks.")
@click.pass_context
def main(ctx: click.Context, debug: bool) -> None:
    """Generate, validate, install and publish NeMo training charts.

    \b
    Environment:
      HELM_BIN              the helm to run (helm sets it for plugins)
      HELM_NEMO_CHART_REPO  oci://HOST/PATH: charts by kind resolve to the published charts there
      HELM_NEMO_HOME        a folder with charts/, schemas/, generator/, values/ to use instead of the shipped ones
      HELM_DEBUG=true       tracebacks (same as --debug)
      SBATCH_BIN, SCANCEL_BIN, SQUEUE_BIN, SACCT_BIN, SCONTROL_BIN  Slurm commands (--target slurm; default: PATH)
    """
    if debug:
        os.environ["HELM_NEMO_DEBUG"] = "1"
    if ctx.invoked_subcommand is None:
        click.echo(ctx.get_help())
        ctx.exit(0)


def run() -> None:
    """Entry point: named `helm nemo` when helm runs us as its plugin, `helm-nemo` otherwise."""
    from helm_nemo import timings

    timings.mark("start + imports")
    try:
        main(prog_name="helm nemo" if os.environ.get("HELM_PLUGIN_NAME") else "helm-nemo")
        code = 0
    except SystemExit as done:
        code = done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
        if isinstance(done.code, str):
            print(done.code, file=sys.stderr)
    _exit_now(code)


def _exit_now(code: int) -> None:
    """Flush and leave without the interpreter's teardown: freeing the compiled validators and schemas
    object by object costs 100 ms and more, after all the work is done. Output errors (a closed pipe,
    a full disk) become one line and exit 1."""
    from helm_nemo import timings

    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except OSError as err:
            if stream is sys.stdout:
                try:
                    sys.stderr.write(f"helm nemo: cannot write the output: {err.strerror or err}\n")
                    sys.stderr.flush()
                except OSError:
                    pass
                code = code or 1
    timings.dump()
    os._exit(code)


@main.command()
@click.option("--check", is_flag=True, help="Exit 1 when charts/ differs from what the sources produce.")
@click.option("-o", "--output", type=click.Path(file_okay=False), default=None,
              help="Write the charts into this directory instead of the project's charts/ (required when "
                   "helm-nemo runs from an installed package, whose files are never modified).")
def generate(check: bool, output: str | None) -> None:
    """Render charts/ from generator/, schemas/ and values/accelerators/."""
    from pathlib import Path

    from helm_nemo import resources
    from helm_nemo.generate import charts as generator

    if output:
        target = Path(output).resolve()
        if resources.is_packaged() and target.is_relative_to(resources.PACKAGE_DIR):
            _usage_error("--output points inside the installed package", "name a directory of your own")
        changed = generator.write(out=target)
        click.echo(f"generated {target}: {len(changed)} file(s) changed (from the sources in {resources.data_root()})")
        return
    if resources.is_packaged() and not check:
        _usage_error(f"helm-nemo runs from an installed package ({resources.data_root()}); its charts are never "
                     "rewritten", "write them elsewhere: helm nemo generate --output DIR")
    if check:
        problems = generator.check()
        stale = [line for line in problems if not line.startswith("version: ")]
        versions = [line[len("version: "):] for line in problems if line.startswith("version: ")]
        if stale:
            click.echo("charts/ is out of date with its sources (run `helm-nemo generate`):", err=True)
            for line in stale[:50]:
                click.echo(f"  {line}", err=True)
        if versions:
            click.echo("chart versions break the version policy (generator/versions.lock):", err=True)
            for line in versions:
                click.echo(f"  {line}", err=True)
        if problems:
            sys.exit(1)
        click.echo("charts/ is up to date; every chart version matches generator/versions.lock")
        return
    from helm_nemo.generate import versions as chart_versions

    changed = generator.write()
    click.echo(f"generated charts/: {len(changed)} file(s) changed")
    for added in chart_versions.record():
        click.echo(f"locked {added} in generator/versions.lock")
    conflicts = [line[len("version: "):] for line in generator.check() if line.startswith("version: ")]
    for line in conflicts:
        click.echo(f"  {line}", err=True)
    if conflicts:
        sys.exit(1)


def _usage_error(message: str, hint: str) -> None:
    """A command-line mistake: one message and a hint, exit 2."""
    click.echo(f"helm nemo: {message}\n    hint: {hint}", err=True)
    sys.exit(2)


@main.command()
@click.argument("target")
@click.argument("charts", nargs=-1)
@click.option("--plain-http", is_flag=True, help="Talk HTTP to the registry (a local registry).")
@click.option("--charts-dir", type=click.Path(file_okay=False, exists=True), default=None,
              help="Folder of generated charts (default: the project's charts/).")
@click.option("-j", "--jobs", type=click.IntRange(1, 32), default=8, show_default=True, help="Charts handled at once.")
def publish(target, charts, plain_http, charts_dir, jobs):
    """Package the generated charts (or the named ones) and push them to TARGET (oci://HOST/PATH).

    A version already in the registry with the same content is skipped; with different content the
    run is refused (exit 1) and nothing is pushed. Credentials: `helm registry login HOST` beforehand.
    """
    import time
    from pathlib import Path

    from helm_nemo import resources

    from helm_nemo.actions import publish as publishing

    started = time.monotonic()
    try:
        found = publishing.find_charts(Path(charts_dir) if charts_dir else resources.charts_dir(), list(charts))
        outcomes = publishing.publish(target, found, _helm(), plain_http=plain_http, jobs=jobs,
                                      verify_lock=resources.data_root(), echo=lambda line: click.echo(line, err=True))
    except Exception as err:  # noqa: BLE001
        _fail(err)
        return
    click.echo(publishing.summary_table(outcomes))
    click.echo(f"{len(outcomes)} chart(s) in {time.monotonic() - started:.1f} s", err=True)
    bad = [o for o in outcomes if o.status not in ("pushed", "skipped", "unreleased")]
    if bad:
        click.echo("helm nemo: publish refused; nothing was pushed" if any(o.status == "refused" for o in bad)
                   else "helm nemo: publish failed", err=True)
        sys.exit(1)


@main.command()
def version() -> None:
    """Print the helm-nemo version."""
    click.echo(__version__)


def _values_options(func):
    """-f/--values (several merge like helm's), --root, --show-secrets: every command that reads values."""
    func = click.option("-f", "--values", "values_files", required=True, multiple=True,
                        type=click.Path(dir_okay=False, allow_dash=True),
                        help="Values or recipe file; several merge as helm merges them (later wins); - reads stdin.")(func)
    func = click.option("--root", type=click.Path(file_okay=False, exists=True), default=None,
                        help="Folder that paths in the values (files:, a chart: folder) must stay inside "
                             "(default: the values file's folder).")(func)
    func = click.option("--show-secrets", is_flag=True,
                        help="Print values taken from the environment instead of *** in messages and helm's output "
                             "(--target slurm: write secret values into the script in clear).")(func)
    return func


def _release_options(func):
    func = _values_options(func)
    func = click.option("--chart", default=None, help="Chart folder, oci:// reference or chart kind (default: from the values).")(func)
    func = click.option("--version", "chart_version", default=None, help="Chart version (with an oci:// chart).")(func)
    func = click.option("--chart-repo", default=None, metavar="oci://HOST/PATH",
                        help="Take charts named by kind from this OCI repository (default: $HELM_NEMO_CHART_REPO).")(func)
    func = click.option("-n", "--namespace", default=None, help="Namespace (helm passes it as HELM_NAMESPACE).")(func)
    func = click.argument("release", required=False, callback=_flag_is_no_release)(func)
    return func


def _flag_is_no_release(ctx: click.Context, _param, value: str | None) -> str | None:
    """With unknown options passed through, click hands the first one (`--plain-http`) to RELEASE: give it back."""
    if value and value.startswith("-"):
        ctx.meta["helm_nemo_first_flag"] = value
        return None
    return value


def _plans(values_files, release: str | None, chart: str | None, chart_version: str | None,
           chart_repo: str | None = None, root: str | None = None):
    from helm_nemo.values.plan import build_plans

    plans = build_plans(list(values_files), release=release, chart=chart, version=chart_version,
                        chart_repo=chart_repo, root=root)
    if chart_version:
        for plan in plans:
            plan.chart_version = chart_version
    return plans


def _extra(ctx: click.Context, namespace: str | None) -> list[str]:
    extra = list(ctx.args)
    if "helm_nemo_first_flag" in ctx.meta:
        extra.insert(0, ctx.meta["helm_nemo_first_flag"])
    if namespace:
        extra = ["--namespace", namespace] + extra
    return [a for a in extra if a != "--"]


def _helm():
    from helm_nemo.actions.helm import helm_binary

    return helm_binary()


def _skip_validation_option(func):
    return click.option("--skip-manifest-validation", is_flag=True,
                        help="Do not validate the rendered manifests (Kubernetes and CRD schemas, extra checks).")(func)


def _target_option(func):
    return click.option("--target", type=click.Choice(["kubernetes", "slurm"]), default="kubernetes", show_default=True,
                        help="Where the release runs: Kubernetes (helm) or a Slurm cluster (sbatch; the values' slurm: section).")(func)


def _release_command(body=None, *, names_only: bool = False):
    """A release command's frame: build the plans (`names_only`: just the release names, what uninstall
    needs), run `body(plans, extra, **options)`, exit with its code.

    Everything printed from here on masks the values taken from the environment (--show-secrets prints
    them); SIGINT/SIGTERM are passed on to helm (actions/process.py). Errors become exit codes here only:
    user errors 2 (one screen, nothing sent to helm), signals 130/143, others 1.
    """
    if body is None:
        return functools.partial(_release_command, names_only=names_only)

    @functools.wraps(body)
    @click.pass_context
    def command(ctx, values_files, root, show_secrets, chart, chart_version, chart_repo, namespace, release, **options):
        from helm_nemo import secrets
        from helm_nemo.actions.process import Interrupted, forwarding_signals, received

        with secrets.collecting(show=show_secrets), forwarding_signals():
            try:
                if names_only and options.get("target", "kubernetes") == "kubernetes":
                    from helm_nemo.values.plan import release_names

                    plans = release_names(list(values_files), release=release)
                else:
                    plans = _plans(values_files, release, chart, chart_version, chart_repo, root)
                from helm_nemo.timings import mark

                mark("values: load, substitute, schema")
                code = body(plans, _extra(ctx, namespace), **options)
                if received() is not None and not code:  # a signal no helm call was there to report
                    raise Interrupted(received())
            except Exception as err:  # noqa: BLE001 - the one place errors become exit codes
                _fail(err)
        sys.exit(code)

    return command


def _validated(plans, helm, extra, skip: bool, *, upgrade: bool = False) -> int:
    """install/upgrade: render and validate every release before the first is sent (0: go on)."""
    if skip:
        return 0
    from helm_nemo.actions import releases
    from helm_nemo.actions.lint import preflight

    for plan in plans:  # validate exactly what is installed (an upgrade keeps the installed stamp)
        releases.stamp_job_time(plan, keep=releases.installed_job_time(plan, helm, extra) if upgrade else None)
    return preflight(plans, helm, extra, echo=_say)


@main.command(context_settings=PASSTHROUGH)
@_release_options
@_skip_validation_option
@_target_option
@_release_command
def template(plans, extra, skip_manifest_validation, target):
    """Render the release(s) of a values or recipe file with helm template (validated before printing);
    with --target slurm, print the sbatch script instead."""
    from helm_nemo.actions import releases

    if target == "slurm":
        from helm_nemo import secrets
        from helm_nemo.targets import slurm_cli

        return slurm_cli.template(plans, extra, show_secrets=not secrets.masking())  # --show-secrets

    check = prepare = None
    if not skip_manifest_validation:
        from helm_nemo.actions.lint import SKIP_HINT, check_recipe, kube_version_from_flags, warm_validators

        kube = kube_version_from_flags(extra)
        check = lambda rendered: check_recipe(rendered, kube_version=kube, echo=_say, hint=SKIP_HINT)  # noqa: E731
        prepare = lambda: warm_validators(plans, kube)  # noqa: E731
    return releases.template(plans, _helm(), extra, check=check, prepare=prepare, echo=_say)


@main.command(context_settings=PASSTHROUGH)
@_release_options
@_skip_validation_option
@_target_option
@_release_command
def install(plans, extra, skip_manifest_validation, target):
    """Install the release(s) of a values or recipe file, in order (all validated before the first install);
    with --target slurm, submit the job(s) with sbatch (other options go to sbatch)."""
    from helm_nemo.actions import releases

    if target == "slurm":
        from helm_nemo.targets import slurm_cli

        return slurm_cli.install(plans, extra)

    helm = _helm()
    return _validated(plans, helm, extra, skip_manifest_validation) or releases.install(plans, helm, extra, echo=_say)


@main.command(context_settings=PASSTHROUGH)
@_release_options
@click.option("--kube-version", default=None, metavar="X.Y",
              help="Kubernetes version to validate for (default 1.32); also passed to helm template.")
@_release_command
def lint(plans, extra, kube_version):
    """Render the release(s) and validate every object offline: Kubernetes and CRD schemas (all errors),
    names, quantities, GPUs and fabric vs the accelerator profile, env, volumes. Exit 2 on problems."""
    from helm_nemo.actions.lint import lint_plans
    from helm_nemo.validate import DEFAULT_KUBE_VERSION, resolve_kube_version

    kube = kube_version or DEFAULT_KUBE_VERSION
    resolve_kube_version(kube)  # a bad version fails before anything is rendered
    if kube_version:
        extra = ["--kube-version", kube_version] + extra
    return lint_plans(plans, _helm(), extra, kube_version=kube, echo=_out, err=_say)


@main.command(context_settings=PASSTHROUGH)
@_release_options
@click.option("-i", "--install", "install_missing", is_flag=True, help="Install releases that do not exist yet.")
@click.option("--diff", "show_diff", is_flag=True,
              help="First print what would change (as `helm nemo diff`); stop with exit 2 if that fails.")
@_skip_validation_option
@_release_command
def upgrade(plans, extra, install_missing, show_diff, skip_manifest_validation):
    """Upgrade the release(s) of a values or recipe file, in order (all validated before the first upgrade; an
    installed release keeps its job timestamp)."""
    from helm_nemo import secrets
    from helm_nemo.actions import releases

    helm = _helm()
    if show_diff:
        code = _print_diff(plans, helm, extra, plans[0].sources or [plans[0].source], output="text", no_color=False,
                           show_secrets=not secrets.masking(), validate=not skip_manifest_validation)
        if code == 2:
            _say("helm nemo: nothing was upgraded")
            return code
    return _validated(plans, helm, extra, skip_manifest_validation, upgrade=True) or \
        releases.install(plans, helm, extra, upgrade=True, install_missing=install_missing, echo=_say)


def _print_diff(plans, helm, extra, values_files, *, output, no_color, show_secrets, validate) -> int:
    from helm_nemo.actions import diff as diffing
    from helm_nemo.diff.report import Masker

    color = not no_color and not os.environ.get("NO_COLOR") and output == "text" and sys.stdout.isatty()
    masker = Masker(diffing.environment_secrets(values_files), enabled=not show_secrets)
    return diffing.run(plans, helm, extra, masker=masker, output=output, color=color, validate=validate,
                       out=lambda text: click.echo(text, color=color), err=_say)


@main.command(context_settings=PASSTHROUGH)
@_release_options
@_skip_validation_option
@click.option("-o", "--output", type=click.Choice(["text", "json"]), default="text", show_default=True,
              help="text: one block per object; json: one document for machines.")
@click.option("--no-color", is_flag=True, help="No colours (also when NO_COLOR is set or stdout is no terminal).")
@click.pass_context
def diff(ctx, values_files, root, show_secrets, chart, chart_version, chart_repo, namespace, release,
         skip_manifest_validation, output, no_color):
    """Show what install/upgrade would change: each release's installed manifest (none: not installed) against
    what would be sent now, object by object, field by field. Exit 0 no difference, 1 differences, 2 trouble."""
    from helm_nemo import secrets
    from helm_nemo.user_errors import UserError

    with secrets.collecting(show=show_secrets):
        try:
            plans = _plans(values_files, release, chart, chart_version, chart_repo, root)
            code = _print_diff(plans, _helm(), _extra(ctx, namespace), list(values_files), output=output,
                               no_color=no_color, show_secrets=show_secrets, validate=not skip_manifest_validation)
        except UserError as err:
            if _debug():
                _say(_traceback(err))
            else:
                _say(err.format())
            _say("Nothing was sent to helm.")
            code = 2
        except Exception as err:  # noqa: BLE001 - diff(1): trouble is 2, never 1 (1 means "different")
            _say(_traceback(err) if _debug() else f"helm nemo diff: {err}")
            code = 2
    sys.exit(code)


@main.command(context_settings=PASSTHROUGH)
@_release_options
@_target_option
@_release_command(names_only=True)
def uninstall(plans, extra, target):
    """Uninstall the release(s) of a values or recipe file, in reverse order (only their names are read); with
    --target slurm, scancel the releases' queued and running jobs."""
    from helm_nemo.actions import releases

    if target == "slurm":
        from helm_nemo.targets import slurm_cli

        return slurm_cli.uninstall(plans, extra)
    return releases.uninstall(plans, _helm(), extra, echo=_say)


@main.command(context_settings=PASSTHROUGH)
@_release_options
@click.option("--target", type=click.Choice(["slurm"]), default="slurm", show_default=True,
              help="Only Slurm for now (Kubernetes: helm status / kubectl).")
@_release_command
def status(plans, extra, target):
    """Show the jobs of the release(s): squeue, then sacct (or scontrol) for ended ones. Exit 3 when none."""
    from helm_nemo.targets import slurm_cli

    return slurm_cli.status(plans, extra)


@main.command()
@_values_options
@click.option("--chart", default=None)
@click.argument("release", required=False)
@_target_option
def validate(values_files, root, show_secrets, chart, release, target):
    """Check a values or recipe file (substitution, files, schema) without calling helm; with --target slurm,
    also the slurm: section and everything the Slurm job needs."""
    from helm_nemo import secrets

    with secrets.collecting(show=show_secrets):
        try:
            plans = _plans(values_files, release, chart, None, root=root)
            if target == "slurm":
                from helm_nemo.targets import slurm_cli

                for job in slurm_cli.jobs_of(plans, echo=_say):
                    _out(f"ok: {job.release} -> Slurm job {job.job_name}")
                return
        except Exception as err:  # noqa: BLE001
            _fail(err)
            return
        for plan in plans:
            for warning in plan.warnings:
                _say(f"warning: {warning}")
            _out(f"ok: {plan.release} -> {plan.chart}")


@main.command()
@click.argument("manifest", type=click.File("r"), default="-")
def summary(manifest):
    """Print a one-line-per-object summary of rendered manifests (file or stdin)."""
    from ruamel.yaml import YAML

    docs = [d for d in YAML(typ="safe", pure=True).load_all(manifest.read()) if isinstance(d, dict)]
    for doc in docs:
        meta = doc.get("metadata") or {}
        line = f"{doc.get('kind')}/{meta.get('name')} (namespace {meta.get('namespace', '-')})"
        if doc.get("kind") == "JobSet":
            job = doc["spec"]["replicatedJobs"][0]["template"]["spec"]
            pod = job["template"]["spec"]
            gpus = sum(int((c.get("resources") or {}).get("limits", {}).get("nvidia.com/gpu", 0)) for c in pod["containers"])
            line += f": {job['parallelism']} pods x {gpus} GPUs, queue {doc['metadata'].get('labels', {}).get('kueue.x-k8s.io/queue-name', '-')}"
        click.echo(line)
    click.echo(f"{len(docs)} object(s)")


@main.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--file", "log_file", required=True, type=click.Path(dir_okay=True),
              help="dllogger.json, or the rank-0 log of a NeMo 2 / Megatron-Bridge job.")
@click.option("--values", "values_file", default=None, type=click.Path(dir_okay=False),
              help="Values or recipe file: GPUs, accelerator, precision, batch size and model come from it.")
@click.option("--release", default=None, help="The training release of a recipe file with several.")
@click.option("--batch-size", "--batch_size", type=int, default=None, help="Global batch size.")
@click.option("--gpus", "--num_accelerators", type=int, default=None, help="GPUs the job used.")
@click.option("--model", "--model_type", default=None, help="Model name, e.g. gpt3-175b, llama3.1-405b, llama31_405b.")
@click.option("--model-flops", "--model_flops", type=float, default=None,
              help="FLOPs per sample (forward + backward) instead of --model.")
@click.option("--seq-length", type=click.IntRange(1), default=None, help="Sequence length, when not the model's usual one.")
@click.option("--accelerator", "--accelerator_type", default=None,
              help="Accelerator profile id (a3mega, a4x, …) or GPU (h100, b200, gb300, …).")
@click.option("--peak-tflops", "--max_flops", type=float, default=None, help="Peak TFLOPS per GPU instead of --accelerator.")
@click.option("--precision", type=click.Choice(["bf16", "fp8"]), default=None, help="Training precision [default: bf16].")
@click.option("--start-step", "--start_step", type=int, default=10, show_default=True, help="First step averaged (steps count from 0).")
@click.option("--end-step", "--end_step", type=int, default=30, show_default=True, help="Last step averaged (included).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def metrics(log_file, values_file, release, batch_size, gpus, model, model_flops, seq_length, accelerator,
            peak_tflops, precision, start_step, end_step, as_json):
    """Average step time, TFLOPS per GPU and MFU of a training run, from its log.

    Computed as gpu-recipes' src/utils/training_metrics does (same numbers); docs/metrics.md lists the log
    formats, models and peak figures.
    """
    from helm_nemo.metrics import Request, measure
    from helm_nemo.metrics.report import to_json
    from helm_nemo.user_errors import EXIT_USER_ERROR, UserError

    request = Request(file=log_file, start_step=start_step, end_step=end_step, batch_size=batch_size, gpus=gpus,
                      model=model, model_flops=model_flops, seq_length=seq_length, accelerator=accelerator,
                      peak_tflops=peak_tflops, precision=precision, values=values_file, release=release)
    try:
        report = measure(request)
    except UserError as err:
        if _debug():
            raise
        click.echo(err.format(), err=True)
        sys.exit(EXIT_USER_ERROR)
    except Exception as err:  # noqa: BLE001
        _fail(err)
        return
    for warning in report.warnings:
        click.echo(f"warning: {warning}", err=True)
    click.echo(to_json(report) if as_json else report.text())
