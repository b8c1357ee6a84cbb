"""version, summary (of rendered manifests) and metrics (of a training log)."""

from __future__ import annotations


import click

from helm_nemo import __version__
from helm_nemo.cli import _exit_user_error, _fail


@click.command()
def version() -> None:
    """Print the helm-nemo version."""
    click.echo(__version__)


@click.command()
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
            gpus = sum(
                int((c.get("resources") or {}).get("limits", {}).get("nvidia.com/gpu", 0)) for c in pod["containers"]
            )
            queue = doc["metadata"].get("labels", {}).get("kueue.x-k8s.io/queue-name", "-")
            line += f": {job['parallelism']} pods x {gpus} GPUs, queue {queue}"
        click.echo(line)
    click.echo(f"{len(docs)} object(s)")


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--file",
    "log_file",
    required=True,
    type=click.Path(dir_okay=True),
    help="dllogger.json, or the rank-0 log of a NeMo 2 / Megatron-Bridge job.",
)
@click.option(
    "--values",
    "values_file",
    default=None,
    type=click.Path(dir_okay=False),
    help="Values or recipe file: GPUs, accelerator, precision, batch size and model come from it.",
)
@click.option("--release", default=None, help="The training release of a recipe file with several.")
@click.option("--batch-size", "--batch_size", type=int, default=None, help="Global batch size.")
@click.option("--gpus", "--num_accelerators", type=int, default=None, help="GPUs the job used.")
@click.option("--model", "--model_type", default=None, help="Model name, e.g. gpt3-175b, llama3.1-405b, llama31_405b.")
@click.option(
    "--model-flops",
    "--model_flops",
    type=float,
    default=None,
    help="FLOPs per sample (forward + backward) instead of --model.",
)
@click.option(
    "--seq-length", type=click.IntRange(1), default=None, help="Sequence length, when not the model's usual one."
)
@click.option(
    "--accelerator",
    "--accelerator_type",
    default=None,
    help="Accelerator profile id (a3mega, a4x, …) or GPU (h100, b200, gb300, …).",
)
@click.option(
    "--peak-tflops", "--max_flops", type=float, default=None, help="Peak TFLOPS per GPU instead of --accelerator."
)
@click.option(
    "--precision", type=click.Choice(["bf16", "fp8"]), default=None, help="Training precision [default: bf16]."
)
@click.option(
    "--start-step",
    "--start_step",
    type=int,
    default=10,
    show_default=True,
    help="First step averaged (steps count from 0).",
)
@click.option(
    "--end-step", "--end_step", type=int, default=30, show_default=True, help="Last step averaged (included)."
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def metrics(
    log_file,
    values_file,
    release,
    batch_size,
    gpus,
    model,
    model_flops,
    seq_length,
    accelerator,
    peak_tflops,
    precision,
    start_step,
    end_step,
    as_json,
):
    """Average step time, TFLOPS per GPU and MFU of a training run, from its log.

    Computed as gpu-recipes' src/utils/training_metrics does (same numbers); docs/metrics.md lists the log
    formats, models and peak figures.
    """
    from helm_nemo.metrics import Request, measure
    from helm_nemo.metrics.report import to_json
    from helm_nemo.user_errors import UserError

    request = Request(
        file=log_file,
        start_step=start_step,
        end_step=end_step,
        batch_size=batch_size,
        gpus=gpus,
        model=model,
        model_flops=model_flops,
        seq_length=seq_length,
        accelerator=accelerator,
        peak_tflops=peak_tflops,
        precision=precision,
        values=values_file,
        release=release,
    )
    try:
        report = measure(request)
    except UserError as err:
        _exit_user_error(err)
    except Exception as err:
        _fail(err)
        return
    for warning in report.warnings:
        click.echo(f"warning: {warning}", err=True)
    click.echo(to_json(report) if as_json else report.text())
