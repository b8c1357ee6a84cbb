"""The Slurm target's script, without a cluster: goldens of the seed-002 examples, determinism, quoting of
hostile values (the script run by bash with stand-ins for srun/scontrol/torchrun), secrets, and every
refusal as file:line:col with exit 2. The real-Slurm tests are in test_slurm_jobs.py."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import assert_golden
from helm_nemo.cli import main
from helm_nemo.values.plan import build_plans, helm_values_json

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "values" / "examples"
GOLDEN = ROOT / "tests" / "golden" / "slurm"
SLURM_EXAMPLES = ["p4de-gpt3-126m-slurm", "p5-gpt3-5b-slurm"]
ENV = {"ECR_REGISTRY": "123456789012.dkr.ecr.us-west-2.amazonaws.com"}

HOSTILE = [
    "a; touch PWNED",
    "$(touch PWNED)",
    "`touch PWNED`",
    'it\'s "quoted" \\ back\\slash',
    "two\nlines\n",
    "${NOT_A_JOB_VARIABLE} and $HOME",
    "* ? [a-z] ~",
    "--flag=value with spaces",
    "",
    "tab\there 'single' \"double\"",
    "unicode: é ✓",
    "HELM_NEMO_EOF",
]


def cli(*args: str, env: dict[str, str] | None = None):
    return CliRunner().invoke(main, list(args), env={**ENV, **(env or {})}, catch_exceptions=False)


def write(folder: Path, text: str, name: str = "values.yaml") -> Path:
    (folder / "config.yaml").write_text("name: test\ntrainer: {max_steps: 1}\n")
    path = folder / name
    path.write_text(text)
    return path


BASE = """\
release: smoke
chart: nemo-training
accelerator: p4de
files: {nemo_config: config.yaml}
workload:
  gpus: 8
  image: nvcr.io/nvidia/nemo:24.07
  experimentRootDir: /results
  experimentName: exp
"""


@pytest.mark.parametrize("stem", SLURM_EXAMPLES)
def test_example_golden(stem, monkeypatch):
    monkeypatch.chdir(ROOT)  # the script names the values file as given
    result = cli("template", "--target", "slurm", "--values", f"values/examples/{stem}.yaml")
    assert result.exit_code == 0, result.output
    assert_golden(GOLDEN / f"{stem}.sh", result.stdout)
    check = subprocess.run(["bash", "-n"], input=result.stdout, text=True, capture_output=True)
    assert check.returncode == 0, check.stderr
    assert cli("template", "--target", "slurm", "--values", f"values/examples/{stem}.yaml").stdout == result.stdout


def test_seed_002_directives_and_launch():
    script = (GOLDEN / "p4de-gpt3-126m-slurm.sh").read_text()
    for line in [
        "#SBATCH --nodes=2",
        "#SBATCH --gpus-per-node=8",
        "#SBATCH --exclusive",
        "#SBATCH --mem=0",
        "#SBATCH --partition=p4de",
        "#SBATCH --job-name=nemo-megatron-gpt3-126m",
        "#SBATCH --output=/fsx/results/gpt3_126m/log-%x_%j.out",
        "export FI_PROVIDER=efa  # profile p4de",
        "export FI_EFA_USE_DEVICE_RDMA=1  # profile p4de",
        "  --container-image=/apps/aws-nemo-megatron_23.07-py3.sqsh \\",
        "  --container-mounts=/fsx:/fsx \\",
        "  --no-container-mount-home \\",
    ]:
        assert line in script.splitlines(), line
    assert "GLOO_SOCKET_IFNAME" not in script  # dropped by the profile's slurm: part (a pod's eth0)
    assert "#SBATCH --error" not in script  # stderr_to_stdout
    p5 = (GOLDEN / "p5-gpt3-5b-slurm.sh").read_text()
    assert "'--container-image=123456789012.dkr.ecr.us-west-2.amazonaws.com#nemo-aws:24.01.framework'" in p5
    assert "#SBATCH --time=0-02:00:00" in p5  # workload.activeDeadlineSeconds: 7200
    assert "#SBATCH --error=/fsx/results/gpt3_5b/error-%x_%j.err" in p5
    assert 'export HF_TOKEN="${HF_TOKEN}"  # slurm.secret_env' in p5


def test_kubernetes_target_never_sees_the_slurm_section():
    plans = build_plans(EXAMPLES / "p4de-gpt3-126m-slurm.yaml", {})
    assert "slurm" not in plans[0].values and '"slurm"' not in helm_values_json(plans[0])
    assert plans[0].target_sections["slurm"]["partition"] == "p4de"


def _run_locally(tmp_path: Path, script: str, env: dict[str, str] | None = None) -> tuple[list[str], dict[str, str]]:
    """Run the script with bash, srun/scontrol/torchrun stand-ins on PATH; torchrun's argv and env back."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    stubs = {
        # srun: drop its own options, run the command (one task, node 0)
        "srun": '#!/bin/bash\nwhile [[ "$1" == -* ]]; do shift; done\nSLURM_NODEID=0 exec "$@"\n',
        "scontrol": "#!/bin/bash\necho node-a\necho node-b\n",
        "torchrun": '#!/bin/bash\nprintf "%s\\0" "$@" > "$RESULTS_DIR/argv"\nenv -0 > "$RESULTS_DIR/env"\n',
    }
    for name, text in stubs.items():
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    path = tmp_path / "job.sh"
    path.write_text(script)
    run_env = {
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "SLURM_JOB_ID": "42",
        "SLURM_JOB_NAME": "nemo-megatron-smoke",
        "SLURM_JOB_NUM_NODES": "1",
        "SLURM_JOB_NODELIST": "node-a",
        **(env or {}),
    }
    proc = subprocess.run(["bash", str(path)], cwd=tmp_path, env=run_env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    results = Path(re.search(r"results in (\S+)", proc.stdout).group(1))
    argv = (results / "argv").read_bytes().decode().split("\0")[:-1]
    job_env = dict(item.split("=", 1) for item in (results / "env").read_bytes().decode().split("\0")[:-1])
    return argv, job_env


def test_hostile_values_stay_one_argument_and_one_env_value(tmp_path):
    root = tmp_path / "results"
    args = "".join(f"    - {_yaml(h)}\n" for h in HOSTILE)
    envs = "".join(f"    - {{name: HOSTILE_{i}, value: {_yaml(h)}}}\n" for i, h in enumerate(HOSTILE))
    values = write(
        tmp_path,
        BASE.replace("/results", str(root))
        + "  arguments:\n"
        + args
        + "  envs:\n"
        + envs
        + "slurm: {container: false, gpus_per_node: null}\n",
    )
    result = cli("template", "--target", "slurm", "--values", str(values))
    assert result.exit_code == 0, result.output
    argv, job_env = _run_locally(tmp_path, result.stdout)
    assert argv[-len(HOSTILE) :] == HOSTILE
    for i, h in enumerate(HOSTILE):
        assert job_env[f"HOSTILE_{i}"] == h
    assert not list(tmp_path.rglob("PWNED"))
    assert (
        job_env["NNODES"] == "1"
        and job_env["MASTER_ADDR"] == "node-a"
        and job_env["JOB_IDENTIFIER"] == "nemo-megatron-smoke_42"
    )
    saved = root / "exp" / "nemo-megatron-smoke_42"
    assert (saved / "nemo-config.yaml").read_text() == "name: test\ntrainer: {max_steps: 1}\n"
    assert (saved / "submission.sh").read_text() == result.stdout


def _yaml(text: str) -> str:
    import json

    return json.dumps(text.replace("$", "$$"))  # a JSON string is a YAML double-quoted scalar; $$ = literal $


def test_runtime_references_in_arguments_expand_per_job(tmp_path):
    values = write(
        tmp_path,
        BASE.replace("/results", str(tmp_path / "r")) + "  arguments:\n"
        "    - trainer.num_nodes=${NNODES}\n    - exp=${JOB_IDENTIFIER}/${NODE_RANK}\n    - 'lit=$${NNODES}'\n"
        "slurm: {container: false, gpus_per_node: null}\n",
    )
    result = cli("template", "--target", "slurm", "--values", str(values))
    assert result.exit_code == 0, result.output
    argv, _ = _run_locally(tmp_path, result.stdout)
    assert argv[-3:] == ["trainer.num_nodes=1", "exp=nemo-megatron-smoke_42/0", "lit=1"]


def test_an_unknown_runtime_reference_is_an_error(tmp_path):
    values = write(tmp_path, BASE + "  arguments:\n    - pod=${POD_NAME}\n")
    result = cli("template", "--target", "slurm", "--values", str(values))
    assert result.exit_code == 2
    assert f"{values}:11:7: $.workload.arguments[0]: ${{POD_NAME}} has no value in a Slurm job" in result.output


SECRETS = (
    BASE
    + """\
  arguments:
    - --auth=Bearer ${MY_TOKEN}
  envs:
    - {name: HF_TOKEN, value: "${HF_TOKEN}"}
    - {name: DECLARED, value: literal-declared-secret}
slurm:
  env: {API_KEY: "key=${MY_API_KEY}"}
  secret_env: [DECLARED, FROM_ENV_ONLY]
"""
)
SECRET_ENV = {"MY_TOKEN": "tok-123;$(x)", "HF_TOKEN": "hf-456", "MY_API_KEY": "ak-789"}


def test_secrets_are_references_never_clear(tmp_path):
    values = write(tmp_path, SECRETS)
    result = cli("template", "--target", "slurm", "--values", str(values), env=SECRET_ENV)
    assert result.exit_code == 0, result.output
    script = result.stdout
    for secret in ["tok-123", "hf-456", "ak-789", "literal-declared-secret"]:
        assert secret not in script
    for line in [
        'export HF_TOKEN="${HF_TOKEN}"  # workload.envs',
        'export DECLARED="${DECLARED}"  # workload.envs',
        'export API_KEY="key=${MY_API_KEY}"  # slurm.env',
        'export FROM_ENV_ONLY="${FROM_ENV_ONLY}"  # slurm.secret_env',
        '  "--auth=Bearer ${MY_TOKEN}"',
    ]:
        assert line in script.splitlines(), line
    for name in ["DECLARED", "FROM_ENV_ONLY", "HF_TOKEN", "MY_API_KEY", "MY_TOKEN"]:
        assert f': "${{{name}:?secret {name} is not set in the environment of sbatch}}"' in script
    shown = cli("template", "--target", "slurm", "--show-secrets", "--values", str(values), env=SECRET_ENV).stdout
    assert "'--auth=Bearer tok-123;$(x)'" in shown and "export API_KEY=key=ak-789" in shown
    assert "export DECLARED=literal-declared-secret" in shown


def test_secret_values_reach_the_job_through_the_environment(tmp_path):
    values = write(
        tmp_path, SECRETS.replace("/results", str(tmp_path / "r")) + "  container: false\n  gpus_per_node: null\n"
    )
    script = cli("template", "--target", "slurm", "--values", str(values), env=SECRET_ENV).stdout
    argv, job_env = _run_locally(tmp_path, script, {**SECRET_ENV, "DECLARED": "d-1", "FROM_ENV_ONLY": "e-2"})
    assert argv[-1] == "--auth=Bearer tok-123;$(x)"
    assert (job_env["HF_TOKEN"], job_env["API_KEY"], job_env["DECLARED"]) == ("hf-456", "key=ak-789", "d-1")
    saved = next((tmp_path / "r").rglob("resolved-values.yaml")).read_text()
    assert "***" in saved and not any(s in saved for s in ["ak-789", "literal-declared-secret", "tok-123"])
    assert "API_KEY: key=***" in saved and "- --auth=Bearer ***" in saved


def test_a_short_secret_masks_only_where_it_was_substituted(tmp_path):
    values = write(
        tmp_path,
        BASE + "  ompNumThreads: 1\n  arguments: ['trainer.devices=1']\nslurm: {env: {PIN_KEY: '${PIN_KEY}'}}\n",
    )
    script = cli("template", "--target", "slurm", "--values", str(values), env={"PIN_KEY": "1"}).stdout
    assert 'export PIN_KEY="${PIN_KEY}"  # slurm.env' in script
    assert "  trainer.devices=1" in script and "export OMP_NUM_THREADS=1" in script
    assert "PIN_KEY: '***'" in script and "ompNumThreads: 1" in script


def test_a_missing_secret_stops_the_job_before_anything_runs(tmp_path):
    values = write(
        tmp_path, SECRETS.replace("/results", str(tmp_path / "r")) + "  container: false\n  gpus_per_node: null\n"
    )
    script = cli("template", "--target", "slurm", "--values", str(values), env=SECRET_ENV).stdout
    (tmp_path / "job.sh").write_text(script)
    proc = subprocess.run(
        ["bash", str(tmp_path / "job.sh")],
        env={"PATH": os.environ["PATH"], **SECRET_ENV},
        capture_output=True,
        text=True,
    )
    assert proc.returncode != 0 and "secret DECLARED is not set in the environment of sbatch" in proc.stderr
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize(
    "extra, where, message",
    [
        ("slurm: {partiton: p4de}\n", ":10:9: $.slurm.partiton: unknown key 'partiton'", "did you mean 'partition'?"),
        ("slurm: {exclusive: 'yes'}\n", ":10:9: $.slurm.exclusive:", "boolean"),
        (
            'slurm:\n  extra_directives: ["--mail-type=END\\n#SBATCH --uid=0"]\n',
            ":11:22: $.slurm.extra_directives[0]:",
            "does not match",
        ),
        ('slurm:\n  partition: "p4de\\nrm -rf /"\n', ":11:3: $.slurm.partition:", "is not valid"),
        ("slurm: {container_mounts: ['/a:/b,/etc:/etc']}\n", ":10:28: $.slurm.container_mounts[0]:", "does not match"),
        (
            "volumes: {ssdMountPath: /ssd}\n",
            ":10:11: $.volumes.ssdMountPath: the Slurm target cannot do this",
            "slurm.container_mounts",
        ),
        (
            "volumes:\n  pvcMounts: [{claimName: fsx-pvc, mountPath: /fsx}]\n",
            ":11:16: $.volumes.pvcMounts[0].claimName: claim 'fsx-pvc' has no path",
            "slurm.claim_paths: {fsx-pvc: /path/on/the/nodes}",
        ),
        ("slurm: {results_dir: relative/path}\n", ":10:9: $.slurm.results_dir:", "is not valid"),
    ],
)
def test_bad_slurm_values_are_reported_with_file_line_column(tmp_path, extra, where, message):
    values = write(tmp_path, BASE + extra)
    result = cli("template", "--target", "slurm", "--values", str(values))
    assert result.exit_code == 2, result.output
    assert f"{values}{where}" in result.output and message in result.output
    assert "Traceback" not in result.output


def test_no_nemo_config_and_an_accelerator_without_slurm_profile(tmp_path):
    values = write(tmp_path, BASE.replace("files: {nemo_config: config.yaml}\n", "").replace("p4de", "a3ultra"))
    result = cli("template", "--target", "slurm", "--values", str(values))
    assert result.exit_code == 2
    assert f"{values}:3:1: $.accelerator: accelerator 'a3ultra' has no Slurm profile" in result.output
    assert "expected: p4de | p5 | p5en" in result.output
    assert "$.files: the Slurm job needs a NeMo config" in result.output


def test_kubernetes_only_values_are_noted_not_refused(tmp_path):
    values = write(tmp_path, BASE + "queue: team-a\nworkload2: 1\n".replace("workload2: 1\n", ""))
    result = CliRunner().invoke(main, ["template", "--target", "slurm", "--values", str(values)], env=ENV)
    assert result.exit_code == 0
    assert "note: smoke: $.queue is Kubernetes-only; the Slurm job ignores it" in result.stderr


RECIPE = """\
recipe: mixed
releases:
  - release: fsx
    chart: fsx-lustre
    values:
      fileSystems:
        - {name: fsx, fileSystemId: fs-0123456789abcdef0, dnsName: fs-0123456789abcdef0.fsx.us-west-2.amazonaws.com, \
           mountName: abcdefgh, capacity: 1200Gi}
  - release: train
    chart: nemo-training
    accelerator: p4de
    values:
      files: {nemo_config: config.yaml}
      volumes:
        pvcMounts: [{claimName: fsx-pvc, mountPath: /fsx}]
      workload: {gpus: 16, image: nvcr.io/nvidia/nemo:24.07, experimentRootDir: /fsx/results}
      slurm: {claim_paths: {fsx-pvc: /lustre}}
"""


def test_a_recipe_skips_storage_releases_and_refuses_the_others(tmp_path):
    recipe = write(tmp_path, RECIPE)
    result = CliRunner().invoke(main, ["template", "--target", "slurm", "--values", str(recipe)], env=ENV)
    assert result.exit_code == 0, result.output
    assert "note: release fsx (fsx-lustre) is Kubernetes storage: skipped on Slurm" in result.stderr
    assert "--container-mounts=/lustre:/fsx" in result.stdout and result.stdout.count("#!/bin/bash") == 1
    jobset = (
        RECIPE
        + """\
  - release: other
    chart: jobset
    accelerator: p4de
    values: {workload: {gpus: 8, image: x/y:1}}
"""
    )
    refused = CliRunner().invoke(
        main, ["template", "--target", "slurm", "--values", str(write(tmp_path, jobset))], env=ENV
    )
    assert refused.exit_code == 2
    assert ":18:5: $.releases[2].chart: release other: chart 'jobset' has no Slurm rendering" in refused.output


def test_kubernetes_options_are_refused_on_slurm(tmp_path):
    values = write(tmp_path, BASE)
    result = cli("template", "--target", "slurm", "--values", str(values), "--kube-context", "x")
    assert result.exit_code == 2 and "takes no option '--kube-context'" in result.output


def test_validate_checks_the_slurm_target_when_asked(tmp_path):
    values = write(tmp_path, BASE + "slurm: {partiton: x}\n")
    assert cli("validate", "--values", str(values)).exit_code == 0  # Kubernetes: the slurm: section is not helm's
    result = cli("validate", "--target", "slurm", "--values", str(values))
    assert result.exit_code == 2 and "$.slurm.partiton: unknown key 'partiton'" in result.output
    good = cli("validate", "--target", "slurm", "--values", str(EXAMPLES / "p4de-gpt3-126m-slurm.yaml"))
    assert good.exit_code == 0 and "ok: gpt3-126m -> Slurm job nemo-megatron-gpt3-126m" in good.output


def test_a_secret_where_no_reference_can_stand_is_refused(tmp_path):
    values = write(tmp_path, BASE.replace("nvcr.io/nvidia/nemo:24.07", "registry.example.com/${REGISTRY_TOKEN}/nemo:1"))
    result = cli("template", "--target", "slurm", "--values", str(values), env={"REGISTRY_TOKEN": "t0ken-x"})
    assert result.exit_code == 2 and "t0ken-x" not in result.output
    assert (
        f"{values}:7:3: $.workload.image: the value of secret variable REGISTRY_TOKEN would be written" in result.output
    )
