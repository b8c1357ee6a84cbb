"""Publishing to a real OCI registry (Debian's docker-registry on 127.0.0.1), on Helm 3 and Helm 4.

Publish every released chart, pull one back and render it like the local chart, re-publish (all
skipped), refuse a tampered chart without a version bump (the registry keeps the original), and
render `helm nemo template --chart oci://…` exactly like the local chart.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

from helm_nemo.generate import versions as chart_versions

from helm_nemo.actions import publish
from helm_nemo.actions.helm import HelmBinary
from datetime import UTC

ROOT = Path(__file__).resolve().parent.parent
REGISTRY_BIN = Path(os.environ.get("DOCKER_REGISTRY", "/usr/bin/docker-registry"))
CHART = "jobset-a3ultra"
# The released version of that chart (charts/a3ultra/jobset/Chart.yaml): what publish pushes.
VERSION = str(yaml.safe_load((ROOT / "charts/a3ultra/jobset/Chart.yaml").read_text())["version"])


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _die_with_parent() -> None:
    """Linux: the registry gets SIGTERM if pytest itself is killed (the fixture's finally never runs then)."""
    try:
        import ctypes
        import signal

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


@pytest.fixture(scope="session")
def registry(tmp_path_factory):
    """host:port of a fresh docker-registry with its storage in a temp folder; stopped at the end."""
    if not REGISTRY_BIN.exists():
        pytest.fail(f"{REGISTRY_BIN} is missing: run `WITH_REGISTRY=1 scripts/setup.sh` (.ci/run does)")
    folder = tmp_path_factory.mktemp("registry")
    port = _free_port()
    config = folder / "config.yml"
    config.write_text(
        "version: 0.1\n"
        "log:\n  level: warn\n"
        f"storage:\n  filesystem:\n    rootdirectory: {folder / 'storage'}\n  delete:\n    enabled: false\n"
        f"http:\n  addr: 127.0.0.1:{port}\n"
    )
    log = open(folder / "registry.log", "wb")
    proc = subprocess.Popen(
        [str(REGISTRY_BIN), "serve", str(config)], stdout=log, stderr=subprocess.STDOUT, preexec_fn=_die_with_parent
    )
    try:
        deadline = time.monotonic() + 15
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/", timeout=1) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"docker-registry did not start:\n{(folder / 'registry.log').read_text()}")
            time.sleep(0.05)
        yield f"127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def nemo(helm, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """`helm-nemo …` as helm runs the plugin: $HELM_BIN set, helm's isolated homes."""
    full = {**helm.env, "HELM_BIN": str(helm.binary), **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "helm_nemo", *args], cwd=ROOT, env=full, capture_output=True, text=True, check=False
    )


def released_charts() -> dict[str, str]:
    """chart name -> digest of the charts under charts/ whose current version CHANGELOG.md announces (what a user
    reading the changelog expects to find in the registry; the lock is not asked, so a chart the lock forgot,
    as jobset-a4x-max 1.1.0 once was, shows up as not pushed)."""
    entries = chart_versions.changelog_entries(ROOT)
    accelerators = {p.stem for p in (ROOT / "values/accelerators").glob("*.yaml")}
    return {
        c.name: c.digest
        for c in chart_versions.read_charts(ROOT / "charts")
        if chart_versions.released(c.name, c.version, entries, accelerators)
    }


def status_of(table: str) -> dict[str, str]:
    rows = [line.split() for line in table.splitlines()[1:-1]]
    return {row[0]: row[-1] if row[-1] != "pushed" or row[-2] != "not" else "not pushed" for row in rows}


@pytest.fixture(scope="session")
def published(helm, registry):
    """Every chart published once per helm version, to oci://REGISTRY/<helm name>; (target, process, seconds)."""
    target = f"oci://{registry}/{helm.name}"
    started = time.monotonic()
    proc = nemo(helm, "publish", target, "--plain-http")
    seconds = time.monotonic() - started
    assert proc.returncode == 0, proc.stderr
    return target, proc, seconds


def test_publish_pushes_every_released_chart(helm, published):
    target, proc, seconds = published
    status = status_of(proc.stdout)
    released = released_charts()
    assert len(released) >= 18 and "jobset-a4x-max" in released
    assert {name: status[name] for name in released} == {name: "pushed" for name in released}
    assert all(s in ("pushed", "unreleased") for s in status.values())
    # a progress line per chart, on stderr; nothing about credentials
    assert sum(1 for line in proc.stderr.splitlines() if line.startswith("[")) == len(status)
    print(f"{helm.name}: published {len(released)} charts in {seconds:.1f} s")


def test_republish_skips_everything(helm, published):
    target, _, _ = published
    proc = nemo(helm, "publish", target, "--plain-http")
    assert proc.returncode == 0, proc.stderr
    status = status_of(proc.stdout)
    assert {name: status[name] for name in released_charts()} == {name: "skipped" for name in released_charts()}
    assert "pushed" not in status.values()


def test_pulled_chart_renders_like_local(helm, published, tmp_path):
    target, _, _ = published
    helm.run("pull", f"{target}/{CHART}", "--version", VERSION, "--plain-http", "--untar", "-d", str(tmp_path))
    pulled, local = tmp_path / CHART, ROOT / "charts/a3ultra/jobset"
    meta = yaml.safe_load((pulled / "Chart.yaml").read_text())
    assert meta["annotations"][chart_versions.CONTENT_DIGEST_ANNOTATION] == released_charts()[CHART]
    # every file but Chart.yaml (helm re-serialises it, with the digest annotation) byte for byte
    local_files = chart_versions.read_chart(local).files
    pulled_files = chart_versions.read_chart(pulled).files
    assert sorted(pulled_files) == sorted(local_files)
    assert {k: v for k, v in pulled_files.items() if k != "Chart.yaml"} == {
        k: v for k, v in local_files.items() if k != "Chart.yaml"
    }
    args = ["--set", "queue=q", "--set", "workload.image=img:1", "--set", "workload.jobTimestamp=2026-01-01-00-00-00"]
    assert helm.template("r", pulled, *args).stdout == helm.template("r", local, *args).stdout


def _tampered_copy(tmp_path: Path) -> Path:
    charts = tmp_path / "charts"
    shutil.copytree(ROOT / "charts", charts)
    values = charts / "a3ultra/jobset/values.yaml"
    values.write_text(values.read_text() + "# tampered without a version bump\n")
    return charts


def test_tampered_chart_is_refused_and_registry_keeps_original(helm, published, tmp_path, monkeypatch):
    target, _, _ = published
    charts = _tampered_copy(tmp_path)
    # the CLI refuses it against generator/versions.lock, before asking the registry
    proc = nemo(helm, "publish", target, CHART, "--plain-http", "--charts-dir", str(charts))
    assert proc.returncode == 1
    assert "refused" in proc.stdout and "content differs from generator/versions.lock" in proc.stderr
    # the registry check alone refuses it too (a version is never overwritten)
    found = publish.find_charts(charts, [CHART])
    for name in ("HELM_DATA_HOME", "HELM_CONFIG_HOME", "HELM_CACHE_HOME"):
        monkeypatch.setenv(name, helm.env[name])
    lines: list[str] = []
    outcomes = publish.publish(
        target, found, HelmBinary(str(helm.binary)), plain_http=True, echo=lines.append, verify_lock=None
    )
    assert [o.status for o in outcomes] == ["refused"]
    assert "exists in the registry with different content" in outcomes[0].reason
    # the registry still serves the original
    shown = yaml.safe_load(helm.run("show", "chart", f"{target}/{CHART}", "--version", VERSION, "--plain-http").stdout)
    assert shown["annotations"][chart_versions.CONTENT_DIGEST_ANNOTATION] == released_charts()[CHART]
    helm.run("pull", f"{target}/{CHART}", "--version", VERSION, "--plain-http", "--untar", "-d", str(tmp_path / "pull"))
    assert (tmp_path / "pull" / CHART / "values.yaml").read_bytes() == (
        ROOT / "charts/a3ultra/jobset/values.yaml"
    ).read_bytes()


def test_template_from_oci_renders_like_local(helm, published, tmp_path):
    target, _, _ = published
    recipe = yaml.safe_load((ROOT / "values/examples/a3ultra-405b.yaml").read_text())
    release = next(r for r in recipe["releases"] if r["chart"] == "jobset")
    values = {"release": release["release"], "chart": "jobset", "accelerator": "a3ultra", **release["values"]}
    shutil.copytree(ROOT / "values/examples/launchers", tmp_path / "launchers")  # files: stay next to the values
    values_file = tmp_path / "values.yaml"
    values_file.write_text(yaml.safe_dump(values, sort_keys=False))
    env = {"KUEUE_NAME": "team-queue", "GCS_BUCKET": "my-bucket", "PROJECT_ID": "my-project"}
    local = nemo(helm, "template", "-f", str(values_file), env=env)
    assert local.returncode == 0, local.stderr
    remote = nemo(
        helm,
        "template",
        "-f",
        str(values_file),
        "--chart",
        f"{target}/{CHART}",
        "--version",
        VERSION,
        "--plain-http",
        env=env,
    )
    assert remote.returncode == 0, remote.stderr
    assert "kind: JobSet" in local.stdout
    assert remote.stdout == local.stdout


def test_helm4_packaging_is_reproducible(helm4, registry, tmp_path):
    """Same chart, two pushes to two paths: Helm 4 gives the same manifest digest (Helm 3 does not: mtime = now)."""
    digests = []
    for path in ("repro-a", "repro-b"):
        proc = nemo(helm4, "publish", f"oci://{registry}/{path}", CHART, "--plain-http")
        assert proc.returncode == 0, proc.stderr
        digests.append(next(line for line in proc.stderr.splitlines() if CHART in line).split("(")[-1].rstrip(")"))
    assert digests[0].startswith("sha256:") and digests[0] == digests[1]


def test_oci_chart_of_a_released_version_validates_and_stamps_like_local(tmp_path):
    """--chart oci://…/NAME --version V of a locked version uses the local twin's schema: same checks, same jobTimestamp."""
    from datetime import datetime

    from helm_nemo.actions.releases import stamp_job_time
    from helm_nemo.values.plan import build_plans
    from helm_nemo.user_errors import UserError

    values = tmp_path / "values.yaml"
    values.write_text("release: r\nqueue: q\nworkload:\n  image: img:1\n")
    ref = "oci://registry.example/charts/jobset-a3ultra"
    plan = build_plans(values, chart=ref, version=VERSION)[0]
    assert plan.local_chart == ROOT / "charts/a3ultra/jobset"
    stamp_job_time(plan, datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC))
    assert plan.values["workload"]["jobTimestamp"] == "2026-01-02-03-04-05"
    # any other version: helm pulls the chart to check against it (issue 27); that registry does not exist
    for version in ("9.9.9", None):
        with pytest.raises(UserError) as raised:
            build_plans(values, chart=ref, version=version)
        assert "cannot check the values against chart oci://registry.example" in raised.value.problems[0].message
    values.write_text("release: r\nqueue: q\nworkload:\n  image: img:1\n  gpus: -3\n")
    with pytest.raises(UserError):
        build_plans(values, chart=ref, version=VERSION)


def test_chart_repository_setting_renders_the_published_charts(helm, published):
    """HELM_NEMO_CHART_REPO / --chart-repo: the recipe's charts named by kind come from the registry, at the
    shipped versions, and render what the shipped charts render (helm pulls them: the plain-http flag is helm's)."""
    target, _, _ = published
    recipe = ROOT / "values/examples/a3ultra-405b.yaml"
    env = {"KUEUE_NAME": "team-queue", "GCS_BUCKET": "my-bucket", "PROJECT_ID": "my-project"}
    local = nemo(helm, "template", "-f", str(recipe), env=env)
    assert local.returncode == 0, local.stderr
    by_env = nemo(helm, "template", "-f", str(recipe), "--plain-http", env={**env, "HELM_NEMO_CHART_REPO": target})
    by_flag = nemo(helm, "template", "-f", str(recipe), "--chart-repo", target, "--plain-http", env=env)
    assert by_env.returncode == 0 and by_flag.returncode == 0, by_env.stderr + by_flag.stderr
    assert by_env.stdout == by_flag.stdout == local.stdout
    # not an OCI reference: one clear error, exit 2, helm never runs
    bad = nemo(helm, "template", "-f", str(recipe), "--chart-repo", "https://charts.example", env=env)
    assert bad.returncode == 2 and "is not an oci:// reference" in bad.stderr and "Traceback" not in bad.stderr
    # and the charts really come from there: an empty repository path has none of them
    empty = nemo(helm, "template", "-f", str(recipe), "--chart-repo", target + "-empty", "--plain-http", env=env)
    assert empty.returncode != 0 and "not found" in empty.stderr.lower(), empty.stderr


USER_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "properties": {"release": {"type": "string"}, "replicas": {"type": "integer", "minimum": 1, "maximum": 8}},
}


@pytest.fixture(scope="session")
def user_chart_pushed(helm3, registry, tmp_path_factory):
    """A chart helm nemo does not ship (its own values.schema.json), pushed as oci://REGISTRY/own/mine:0.1.0."""
    folder = tmp_path_factory.mktemp("own") / "mine"
    (folder / "templates").mkdir(parents=True)
    (folder / "Chart.yaml").write_text("apiVersion: v2\nname: mine\nversion: 0.1.0\n")
    (folder / "values.yaml").write_text("replicas: 1\n")
    (folder / "values.schema.json").write_text(json.dumps(USER_SCHEMA))
    (folder / "templates/cm.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  n: {{ .Values.replicas | quote }}\n"
    )
    package = helm3.run("package", str(folder), "-d", str(folder.parent))
    tgz = package.stdout.strip().rsplit(" ", 1)[-1]
    helm3.run("push", tgz, f"oci://{registry}/own", "--plain-http")
    return f"oci://{registry}/own/mine"


@pytest.mark.parametrize("command", ["validate", "template"])
def test_an_oci_chart_is_pulled_and_the_values_checked_against_its_schema(helm3, user_chart_pushed, tmp_path, command):
    """Issue 27: `validate --chart oci://…` skipped the schema check silently (ok, exit 0). Now the chart is
    pulled with helm (no value sent) and the values are checked against its own schema, with file:line."""
    values = tmp_path / "values.yaml"
    values.write_text("release: r1\nreplicas: 9223372036854775808\nextra: 1\n")
    proc = nemo(helm3, command, "-f", str(values), "--chart", user_chart_pushed, "--version", "0.1.0", "--plain-http")
    assert proc.returncode == 2, proc.stderr
    assert f"{values}:2:1: $.replicas: 9223372036854775808 is greater than the maximum of 8" in proc.stderr
    assert f"{values}:3:1: $.extra: unknown key 'extra'" in proc.stderr
    values.write_text("release: r1\nreplicas: 3\n")
    proc = nemo(helm3, command, "-f", str(values), "--chart", user_chart_pushed, "--version", "0.1.0", "--plain-http")
    assert proc.returncode == 0, proc.stderr
    # a chart that cannot be pulled is an error that says the values were not checked, never an ok
    proc = nemo(helm3, command, "-f", str(values), "--chart", user_chart_pushed, "--version", "9.9.9", "--plain-http")
    assert proc.returncode == 2 and "cannot check the values against chart" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
