"""The Helm plugin itself: installs and runs on Helm 3.17.2 and 4.1.4, same CLI as helm-nemo."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from helm_nemo import __version__

ROOT = Path(__file__).resolve().parent.parent
from test_examples_golden import ENV as EXAMPLE_ENV, EXAMPLES, GOLDEN, PINNED

ENV = {"GCS_BUCKET": "test-bucket", "KUEUE_NAME": "test-queue", **EXAMPLE_ENV}


@pytest.fixture(scope="module")
def plugin_helm(helm, tmp_path_factory):
    """`helm` with the plugin installed from this checkout into an isolated helm home."""
    home = tmp_path_factory.mktemp(f"plugin-{helm.name}")
    env = dict(helm.env)
    for name in ("HELM_DATA_HOME", "HELM_CONFIG_HOME", "HELM_CACHE_HOME"):
        env[name] = str(home / name.lower())
    env.update(ENV)
    result = subprocess.run([str(helm.binary), "plugin", "install", str(ROOT)], env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr

    def run(*args: str, cwd: Path = ROOT, extra_env: dict | None = None) -> subprocess.CompletedProcess:
        return subprocess.run(
            [str(helm.binary), *args], env={**env, **(extra_env or {})}, cwd=cwd, capture_output=True, text=True
        )

    return run


def test_versions_agree():
    plugin = (ROOT / "plugin.yaml").read_text()
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert re.search(r'^version: "([^"]+)"', plugin, re.M).group(1) == __version__
    # one source: pyproject reads the package's __version__ (tests/test_distribution.py checks the built files)
    assert 'dynamic = ["version"]' in pyproject and 'version = { attr = "helm_nemo.__version__" }' in pyproject


def test_plugin_yaml_loads_on_helm3_strict_reader():
    # Helm 3.17 rejects unknown fields (UnmarshalStrict) and both `command` and `platformCommand` on Helm 4.
    text = (ROOT / "plugin.yaml").read_text()
    for forbidden in ("apiVersion:", "platformHooks:", "\ncommand:", "    args:"):
        assert forbidden not in text


def test_plugin_version_and_list(plugin_helm):
    assert plugin_helm("nemo", "version").stdout.strip() == __version__
    assert plugin_helm("nemo", "--version").stdout.strip().endswith(__version__)
    listing = plugin_helm("plugin", "list").stdout
    assert re.search(rf"^nemo\s+{re.escape(__version__)}\s", listing, re.M)


def test_plugin_template_matches_the_library(plugin_helm, helm):
    via_plugin = plugin_helm("nemo", "template", "--values", "values/examples/a4-llama31-405b.yaml", "-n", "team-a")
    assert via_plugin.returncode == 0, via_plugin.stderr
    direct = subprocess.run(
        [
            str(ROOT / ".venv/bin/helm-nemo"),
            "template",
            "--values",
            "values/examples/a4-llama31-405b.yaml",
            "-n",
            "team-a",
        ],
        env={**os.environ, **ENV, "HELM_BIN": str(helm.binary)},
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert direct.returncode == 0, direct.stderr
    assert via_plugin.stdout == direct.stdout
    assert {d["metadata"].get("namespace") for d in yaml.safe_load_all(via_plugin.stdout) if d} == {"team-a"}


def test_plugin_gets_namespace_from_helm(plugin_helm):
    # helm strips -n before the plugin runs and passes HELM_NAMESPACE; the inner helm inherits it.
    out = plugin_helm("-n", "other-ns", "nemo", "template", "--values", "values/examples/a4-llama31-405b.yaml")
    assert out.returncode == 0, out.stderr
    namespaces = {d["metadata"].get("namespace") for d in yaml.safe_load_all(out.stdout) if d}
    assert namespaces == {"other-ns"}


def test_plugin_user_error_exit_2_and_nothing_rendered(plugin_helm, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text((ROOT / "values/examples/a4-llama31-405b.yaml").read_text().replace("gpus: 128", "gpus: 100"))
    shutil.copytree(ROOT / "values/examples/launchers", tmp_path / "launchers")
    out = plugin_helm("nemo", "template", "--values", str(bad))
    assert out.returncode == 2
    assert out.stdout == ""
    assert re.search(rf"{re.escape(str(bad))}:\d+:\d+: \$\.workload\.gpus", out.stderr)
    assert "Traceback" not in out.stderr


def test_plugin_missing_or_empty_variable_is_reported(plugin_helm):
    # Empty is "set" (as in the shell), and then the schema rejects the empty bucket name.
    empty = plugin_helm(
        "nemo", "validate", "--values", "values/examples/a4-llama31-405b.yaml", extra_env={"GCS_BUCKET": ""}
    )
    assert empty.returncode == 2 and "$.volumes.gcsMounts[0].bucketName" in empty.stderr
    env = {k: v for k, v in os.environ.items() if k != "GCS_BUCKET"}
    unset = subprocess.run(
        [str(ROOT / ".venv/bin/helm-nemo"), "validate", "--values", "values/examples/a4-llama31-405b.yaml"],
        env={**env, "KUEUE_NAME": "q"},
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert unset.returncode == 2 and "variable GCS_BUCKET is not set" in unset.stderr


def test_completion(plugin_helm):
    out = plugin_helm("__complete", "nemo", "")
    assert out.returncode == 0
    for command in ("install", "template", "uninstall", "validate", "version"):
        assert command in out.stdout.split()


def test_launcher_without_python_environment_says_what_to_do(tmp_path):
    plugin = tmp_path / "nemo"
    shutil.copytree(ROOT / "bin", plugin / "bin")
    env = {"PATH": "/usr/bin:/bin", "HELM_PLUGIN_DIR": str(plugin)}
    out = subprocess.run(["sh", str(plugin / "bin/nemo.sh"), "version"], env=env, capture_output=True, text=True)
    assert out.returncode == 2
    assert "helm-nemo-VERSION.tgz" in out.stderr and "pip install helm-nemo" in out.stderr


@pytest.mark.parametrize("example", EXAMPLES, ids=[e.stem for e in EXAMPLES])
def test_plugin_validates_and_renders_every_example(plugin_helm, example):
    """Through the installed plugin, on both helms: validate passes and template gives the reviewed golden."""
    checked = plugin_helm("nemo", "validate", "--values", str(example))
    assert checked.returncode == 0 and checked.stdout.startswith("ok: "), checked.stderr
    rendered = plugin_helm("nemo", "template", "--values", str(example), "--namespace", "ml-team", *PINNED)
    assert rendered.returncode == 0, rendered.stderr
    assert rendered.stdout == (GOLDEN / f"{example.stem}.yaml").read_text()
