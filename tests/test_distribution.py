"""Installable anywhere (issue 13): `scripts/dist.py` (make dist) builds a wheel, an sdist and the Helm plugin
tarball; each is installed the way a user installs it, outside the repository, with the checkout's .venv out
of reach (PATH without it, cwd a temporary folder, HOME a fresh one), and must render the reviewed golden.

Offline at install time: the plugin installs from its bundled wheels (no package index is reachable in the
tests: PIP_INDEX_URL points at a closed port). Building dist/ itself fetches the dependency wheels once
(from the pip cache or the index), like any release build.
"""

from __future__ import annotations

import functools
import http.server
import io
import os
import re
import shutil
import subprocess
import sys
import tarfile
import threading
import zipfile
from pathlib import Path

import pytest

from test_examples_golden import ENV as EXAMPLE_ENV, GOLDEN, PINNED

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = "a3ultra-405b"  # seed 001: a recipe file with three releases
PLAIN_VALUES = "a3mega-gpt3-175b-jobset"  # a plain values file (one release)
CLOSED_INDEX = "http://127.0.0.1:9/simple"  # nothing listens on port 9: an unreachable package index
SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"


def _python311() -> str:
    """A Python >= 3.11 that is not the checkout's venv (the user's system Python)."""
    base = Path(sys.base_prefix) / "bin" / "python3"
    return str(base if base.exists() else shutil.which("python3"))


@pytest.fixture(scope="module")
def signing_key(tmp_path_factory) -> dict[str, str]:
    """A throw-away gpg key: GNUPGHOME for signing, and the public keyring Helm 4 verifies with."""
    home = tmp_path_factory.mktemp("gnupg")
    home.chmod(0o700)
    env = {**os.environ, "GNUPGHOME": str(home)}
    params = (
        "%no-protection\nKey-Type: RSA\nKey-Length: 2048\nName-Real: helm-nemo release test\n"
        "Name-Email: release@helm-nemo.invalid\nExpire-Date: 0\n%commit\n"
    )
    subprocess.run(["gpg", "--batch", "--gen-key"], input=params.encode(), env=env, check=True, capture_output=True)
    pubring = home / "pubring.gpg"
    pubring.write_bytes(subprocess.run(["gpg", "--export"], env=env, check=True, capture_output=True).stdout)
    return {"GNUPGHOME": str(home), "key": "release@helm-nemo.invalid", "pubring": str(pubring)}


@pytest.fixture(scope="module")
def dist(tmp_path_factory, signing_key) -> Path:
    out = tmp_path_factory.mktemp("dist")
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "dist.py"), "--outdir", str(out), "--sign", signing_key["key"]],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "GNUPGHOME": signing_key["GNUPGHOME"]},
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return out


def _version() -> str:
    from helm_nemo import __version__

    return __version__


def _clean_env(home: Path, **extra: str) -> dict[str, str]:
    """A user's shell: system PATH (no project venv), fresh HOME, no helm or project variables, no index."""
    python_dir = str(Path(_python311()).parent)
    env = {
        "PATH": f"{python_dir}:{SYSTEM_PATH}",
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "PIP_INDEX_URL": CLOSED_INDEX,
        "PIP_RETRIES": "0",
        "PIP_TIMEOUT": "2",
        **EXAMPLE_ENV,
        # the goldens' clock (tests/conftest.py): helm nemo template stamps the run's time from it
        "SOURCE_DATE_EPOCH": os.environ["SOURCE_DATE_EPOCH"],
    }
    env.update(extra)
    return env


def _user_cwd(tmp_path: Path) -> Path:
    """The examples copied to a folder outside the repository (what a user has after copying a recipe)."""
    cwd = tmp_path / "work"
    shutil.copytree(ROOT / "values" / "examples", cwd)
    return cwd


def _snapshot(*folders: Path) -> set[str]:
    return {str(p) for folder in folders if folder.exists() for p in folder.rglob("*")}


def test_versions_agree_everywhere(dist):
    version = _version()
    names = sorted(p.name for p in dist.iterdir())
    assert names == [
        f"helm-nemo-{version}.tgz",
        f"helm-nemo-{version}.tgz.prov",
        f"helm_nemo-{version}-py3-none-any.whl",
        f"helm_nemo-{version}.tar.gz",
    ]
    plugin = (ROOT / "plugin.yaml").read_text()
    assert re.search(rf'^version: "{re.escape(version)}"$', plugin, re.M)
    with zipfile.ZipFile(dist / f"helm_nemo-{version}-py3-none-any.whl") as wheel:
        metadata = wheel.read(f"helm_nemo-{version}.dist-info/METADATA").decode()
    assert f"\nVersion: {version}\n" in metadata
    with tarfile.open(dist / f"helm-nemo-{version}.tgz") as tar:
        packed = tar.extractfile("plugin.yaml").read().decode()
    assert packed == plugin


def test_wheel_carries_the_repository_data_byte_for_byte(dist):
    from helm_nemo.resources import DATA_ITEMS

    tracked = subprocess.run(
        ["git", "ls-files", *DATA_ITEMS], capture_output=True, text=True, cwd=ROOT, check=True
    ).stdout.split()
    assert len(tracked) > 200
    with zipfile.ZipFile(dist / f"helm_nemo-{_version()}-py3-none-any.whl") as wheel:
        shipped = {n[len("helm_nemo/data/") :]: n for n in wheel.namelist() if n.startswith("helm_nemo/data/")}
        assert sorted(shipped) == sorted(tracked)
        for rel in tracked:
            assert wheel.read(shipped[rel]) == (ROOT / rel).read_bytes(), rel


def test_plugin_tarball_layout(dist):
    """plugin.yaml at the root and no `./` entry (Helm 3.17's HTTP installer needs both); every wheel the
    package needs is inside, so the install hook never needs an index."""
    with tarfile.open(dist / f"helm-nemo-{_version()}.tgz") as tar:
        names = tar.getnames()
    assert "plugin.yaml" in names and not any(n.startswith("./") or n == "." for n in names)
    assert {"bin/nemo.sh", "bin/install-hook.sh", "bin/nemo.cmd", "completion.yaml"} <= set(names)
    wheels = {n.split("/")[1].split("-")[0].lower() for n in names if n.startswith("wheels/")}
    assert {"helm_nemo", "click", "ruamel_yaml", "pyyaml", "jsonschema", "jinja2", "kubernetes_validate"} <= wheels


def test_plugin_tarball_bundles_exactly_the_locked_versions(dist):
    """The bundled wheels are requirements/runtime.lock (name, version and a locked hash), plus helm-nemo itself:
    a release built on another day bundles the same dependencies."""
    import hashlib

    from test_lock import canonical, read_lock

    locked = read_lock(ROOT / "requirements" / "runtime.lock")
    bundled: dict[str, tuple[str, str]] = {}
    with tarfile.open(dist / f"helm-nemo-{_version()}.tgz") as tar:
        for member in tar.getmembers():
            if member.name.startswith("wheels/"):
                name, version = member.name.split("/")[1].split("-")[:2]
                digest = hashlib.sha256(tar.extractfile(member).read()).hexdigest()
                bundled[canonical(name)] = (version, digest)
    assert bundled.pop("helm-nemo")[0] == _version()
    assert {name: version for name, (version, _) in bundled.items()} == {
        name: entry.version for name, entry in locked.items() if entry.applies()
    }
    for name, (_, digest) in bundled.items():
        if name != "kubernetes-validate":  # trimmed: next test
            assert digest in locked[name].hashes, f"{name}: the bundled wheel's sha256 is not one the lock allows"


def test_bundled_kubernetes_validate_is_the_locked_one_without_unused_schemas(dist):
    """dist.py drops the schema folders helm-nemo never reads (non-strict ones, Kubernetes minors below the charts'
    kubeVersion floor); everything kept is byte-identical to the locked package installed in this venv (pip
    checked its hash), and RECORD lists exactly the files kept, with their true hashes."""
    import base64
    import hashlib
    from importlib import metadata

    with tarfile.open(dist / f"helm-nemo-{_version()}.tgz") as tar:
        (member,) = [m for m in tar.getmembers() if m.name.startswith("wheels/kubernetes_validate-")]
        data = tar.extractfile(member).read()
    with zipfile.ZipFile(io.BytesIO(data)) as wheel:
        files = {name: wheel.read(name) for name in wheel.namelist()}
    record_name = next(name for name in files if name.endswith(".dist-info/RECORD"))
    record = {line.split(",")[0]: line.split(",")[1] for line in files[record_name].decode().splitlines()}
    assert set(record) == set(files)
    for name, content in files.items():
        if name != record_name:
            digest = base64.urlsafe_b64encode(hashlib.sha256(content).digest()).rstrip(b"=").decode()
            assert record[name] == f"sha256={digest}", name
    folders = {name.split("/")[2] for name in files if name.startswith("kubernetes_validate/kubernetes-json-schema/")}
    floors = {
        re.search(r'^kubeVersion: ">=(\d+\.\d+)', p.read_text(), re.M).group(1)
        for p in (ROOT / "charts").rglob("Chart.yaml")
    }
    assert floors == {"1.29"}
    installed = metadata.distribution("kubernetes-validate")
    shipped = {
        str(f).split("/")[2]
        for f in installed.files
        if str(f).startswith("kubernetes_validate/kubernetes-json-schema/")
    }
    assert folders == {
        f for f in shipped if f.endswith("-local-strict") and tuple(map(int, f[1:].split(".")[:2])) >= (1, 29)
    }
    assert "v1.29.0-local-strict" in folders and "v1.28.0-local-strict" not in folders
    for name, content in files.items():
        if name != record_name:
            assert installed.locate_file(name).read_bytes() == content, name


def _golden(name: str) -> str:
    return (GOLDEN / f"{name}.yaml").read_text()


def test_wheel_in_a_fresh_venv_works_from_any_directory(dist, tmp_path, helm4):
    venv = tmp_path / "venv"
    subprocess.run([_python311(), "-m", "venv", str(venv)], check=True)
    with tarfile.open(dist / f"helm-nemo-{_version()}.tgz") as tar:
        tar.extractall(tmp_path / "plugin", filter="data")
    env = _clean_env(tmp_path / "home", HELM_BIN=str(helm4.binary))
    pip = subprocess.run(
        [
            str(venv / "bin/python"),
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-cache-dir",
            "--no-index",
            "--find-links",
            str(tmp_path / "plugin/wheels"),
            str(dist / f"helm_nemo-{_version()}-py3-none-any.whl"),
        ],
        env=env,
        capture_output=True,
        text=True,
    )
    assert pip.returncode == 0, pip.stderr
    cwd = _user_cwd(tmp_path)
    cli = str(venv / "bin/helm-nemo")

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([cli, *args], env=env, cwd=cwd, capture_output=True, text=True)

    for example in (EXAMPLE, PLAIN_VALUES):
        checked = run("validate", "--values", f"{example}.yaml")
        assert checked.returncode == 0 and checked.stdout.startswith("ok: "), checked.stderr
        rendered = run("template", "--values", f"{example}.yaml", "--namespace", "ml-team", *PINNED)
        assert rendered.returncode == 0, rendered.stderr
        assert rendered.stdout == _golden(example)
        linted = run("lint", "--values", f"{example}.yaml")
        assert linted.returncode == 0 and "ok: release" in linted.stdout, linted.stdout + linted.stderr
    # the charts, schemas and profiles used are the installed package's own
    site = subprocess.run(
        [str(venv / "bin/python"), "-c", "from helm_nemo import resources; print(resources.charts_dir())"],
        env=env,
        capture_output=True,
        text=True,
        cwd=cwd,
    ).stdout.strip()
    assert site.startswith(str(venv)) and "site-packages/helm_nemo/data/charts" in site
    # generate never writes into site-packages; with --output it writes where the user says
    refused = run("generate")
    assert refused.returncode == 2 and "--output DIR" in refused.stderr and "Traceback" not in refused.stderr
    written = run("generate", "--output", str(tmp_path / "charts"))
    assert written.returncode == 0, written.stderr
    assert (tmp_path / "charts/a3ultra/jobset/values.schema.json").read_bytes() == (
        ROOT / "charts/a3ultra/jobset/values.schema.json"
    ).read_bytes()


class _TarballServer(http.server.SimpleHTTPRequestHandler):
    """Serves dist/ with the Content-Type Helm 3's HTTP installer needs to treat a URL as an archive."""

    def guess_type(self, path):
        return "application/gzip" if str(path).endswith(".tgz") else super().guess_type(path)

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def tarball_url(dist):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_TarballServer, directory=str(dist)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/helm-nemo-{_version()}.tgz"
    server.shutdown()


def _helm_homes(tmp_path: Path) -> dict[str, str]:
    return {
        name: str(tmp_path / "helm" / name.lower())
        for name in ("HELM_DATA_HOME", "HELM_CONFIG_HOME", "HELM_CACHE_HOME")
    }


def _install_and_use(helm, source: str, tmp_path: Path, pubring: str) -> tuple[dict, subprocess.CompletedProcess]:
    homes = _helm_homes(tmp_path)
    env = _clean_env(tmp_path / "home", **homes)
    verify = ["--keyring", pubring] if helm.name == "helm4" else []  # Helm 4 checks <url>.prov; Helm 3 ignores it
    installed = subprocess.run(
        [str(helm.binary), "plugin", "install", source, *verify], env=env, capture_output=True, text=True, cwd=tmp_path
    )
    assert installed.returncode == 0, installed.stdout + installed.stderr
    assert "Installed plugin: nemo" in installed.stdout + installed.stderr
    return env, installed


@pytest.mark.parametrize("major", [3, 4])
def test_plugin_tarball_over_http_installs_and_runs_offline(major, request, tarball_url, signing_key, tmp_path):
    helm = request.getfixturevalue(f"helm{major}")
    (tmp_path / "home").mkdir()
    env, installed = _install_and_use(helm, tarball_url, tmp_path, signing_key["pubring"])
    if major == 4:
        assert "Plugin Hash Verified: sha256:" in installed.stdout + installed.stderr
    assert "setting up the Python environment" in installed.stderr and "Python environment ready" in installed.stderr
    cwd = _user_cwd(tmp_path)
    version = subprocess.run([str(helm.binary), "nemo", "version"], env=env, capture_output=True, text=True, cwd=cwd)
    assert version.stdout.strip() == _version()
    bare = subprocess.run([str(helm.binary), "nemo"], env=env, capture_output=True, text=True, cwd=cwd)
    assert bare.returncode == 0 and bare.stdout.startswith("Usage: helm nemo ")
    for example in (EXAMPLE, PLAIN_VALUES):
        rendered = subprocess.run(
            [str(helm.binary), "nemo", "template", "--values", f"{example}.yaml", "--namespace", "ml-team", *PINNED],
            env=env,
            capture_output=True,
            text=True,
            cwd=cwd,
        )
        assert rendered.returncode == 0, rendered.stderr
        assert rendered.stdout == _golden(example)
    linted = subprocess.run(
        [str(helm.binary), "nemo", "lint", "--values", f"{EXAMPLE}.yaml"],
        env=env,
        capture_output=True,
        text=True,
        cwd=cwd,
    )
    assert linted.returncode == 0 and linted.stdout.count("ok: release") == 3, linted.stdout + linted.stderr
    # a second install hook run (helm plugin update) is idempotent and quick
    plugin_dir = next(Path(env["HELM_DATA_HOME"]).glob("plugins/*/plugin.yaml")).parent
    again = subprocess.run(
        ["sh", str(plugin_dir / "bin/install-hook.sh")],
        env={**env, "HELM_PLUGIN_DIR": str(plugin_dir)},
        capture_output=True,
        text=True,
    )
    assert again.returncode == 0 and "is ready" in again.stderr
    # uninstall leaves no plugin file behind, and nothing was written outside the helm homes and the cwd
    removed = subprocess.run([str(helm.binary), "plugin", "uninstall", "nemo"], env=env, capture_output=True, text=True)
    assert removed.returncode == 0, removed.stderr
    assert _snapshot(Path(env["HELM_DATA_HOME"]) / "plugins") == set()
    assert _snapshot(tmp_path / "home") == set()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["helm", "home", "work"]


def test_helm4_refuses_a_tampered_tarball_and_an_unknown_signer(dist, tmp_path, helm4, signing_key):
    """The .prov is checked: a tarball whose bytes changed, or a keyring without the signer, installs nothing."""
    served = tmp_path / "served"
    served.mkdir()
    name = f"helm-nemo-{_version()}.tgz"
    shutil.copy(dist / f"{name}.prov", served)
    (served / name).write_bytes((dist / name).read_bytes() + b"\0")
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_TarballServer, directory=str(served)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/{name}"
        env = _clean_env(tmp_path / "home", **_helm_homes(tmp_path))
        tampered = subprocess.run(
            [str(helm4.binary), "plugin", "install", url, "--keyring", signing_key["pubring"]],
            env=env,
            capture_output=True,
            text=True,
        )
        assert tampered.returncode != 0 and "sha256 sum does not match" in tampered.stderr, tampered.stderr
        shutil.copy(dist / name, served / name)
        stranger = tmp_path / "empty.gpg"
        stranger.write_bytes(b"")
        unknown = subprocess.run(
            [str(helm4.binary), "plugin", "install", url, "--keyring", str(stranger)],
            env=env,
            capture_output=True,
            text=True,
        )
        assert unknown.returncode != 0 and "verification failed" in unknown.stderr, unknown.stderr
        assert not list(Path(env["HELM_DATA_HOME"]).glob("plugins/*/plugin.yaml"))
    finally:
        server.shutdown()


def test_plugin_from_a_directory_on_both_helms(dist, tmp_path, helm3, helm4):
    """An unpacked release directory installs on both helms (Helm links to it); its hook builds venv/ offline."""
    source = tmp_path / "helm-nemo-src"
    with tarfile.open(dist / f"helm-nemo-{_version()}.tgz") as tar:
        tar.extractall(source, filter="data")
    (tmp_path / "home").mkdir()
    cwd = _user_cwd(tmp_path)
    outputs = []
    for helm in (helm3, helm4):
        homes = tmp_path / helm.name
        env = _clean_env(tmp_path / "home", **{k: str(homes / k.lower()) for k in _helm_homes(tmp_path)})
        installed = subprocess.run(
            [str(helm.binary), "plugin", "install", str(source)], env=env, capture_output=True, text=True, cwd=cwd
        )
        assert installed.returncode == 0, installed.stdout + installed.stderr
        listed = subprocess.run([str(helm.binary), "plugin", "list"], env=env, capture_output=True, text=True).stdout
        assert re.search(r"^nemo\s+" + re.escape(_version()), listed, re.M), listed
        rendered = subprocess.run(
            [str(helm.binary), "nemo", "template", "--values", f"{EXAMPLE}.yaml", "--namespace", "ml-team", *PINNED],
            env=env,
            capture_output=True,
            text=True,
            cwd=cwd,
        )
        assert rendered.returncode == 0, rendered.stderr
        outputs.append(rendered.stdout)
    assert outputs == [_golden(EXAMPLE)] * 2
    assert (source / "venv" / ".helm-nemo-version").read_text().strip() == _version()
    # Compiled at install (a first run that compiles the package costs ~40 ms more), and the launcher's
    # `python -S` finds the one site-packages it puts on sys.path.
    (site,) = (source / "venv" / "lib").glob("python3*/site-packages")
    for module in ("cli/__init__", "cli/direct", "actions/early", "values/plan", "validate/compiled"):
        folder, name = (site / "helm_nemo" / module).parent, Path(module).name
        assert list((folder / "__pycache__").glob(f"{name}.cpython-*.pyc")), module


# --- bad cases: one clear message, exit 2, no traceback ------------------------------------------------------


def _plugin_dir(dist: Path, tmp_path: Path, *, wheels: bool = True) -> Path:
    plugin = tmp_path / "plugin"
    with tarfile.open(dist / f"helm-nemo-{_version()}.tgz") as tar:
        tar.extractall(plugin, filter="data")
    if not wheels:
        shutil.rmtree(plugin / "wheels")
    return plugin


def _assert_one_clear_message(proc: subprocess.CompletedProcess, *needles: str) -> None:
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert 1 <= len(lines) <= 6, proc.stderr
    for needle in needles:
        assert needle in proc.stderr, proc.stderr


def test_python_too_old_is_one_clear_message(dist, tmp_path):
    plugin = _plugin_dir(dist, tmp_path)
    fake = tmp_path / "fakebin"
    fake.mkdir()
    (fake / "python3").write_text("#!/bin/sh\necho 3.9\n")
    (fake / "python3").chmod(0o755)
    env = {"PATH": f"{fake}:{SYSTEM_PATH}", "HOME": str(tmp_path), "HELM_PLUGIN_DIR": str(plugin)}
    proc = subprocess.run(["sh", str(plugin / "bin/install-hook.sh")], env=env, capture_output=True, text=True)
    _assert_one_clear_message(proc, "Python 3.11 or newer is required", "is 3.9", "HELM_NEMO_PYTHON")
    assert not (plugin / "venv").exists()
    # the launcher gives the same message, not a Python error
    launched = subprocess.run(["sh", str(plugin / "bin/nemo.sh"), "version"], env=env, capture_output=True, text=True)
    assert launched.returncode == 2 and "Python 3.11 or newer is required" in launched.stderr


def test_unreachable_package_index_is_one_clear_message(dist, tmp_path):
    """A plugin folder without bundled wheels must fetch from the index; unreachable -> exit 2, the hint says
    what to do, and no half-built environment is left."""
    plugin = _plugin_dir(dist, tmp_path, wheels=False)
    env = _clean_env(tmp_path, HELM_PLUGIN_DIR=str(plugin))
    proc = subprocess.run(
        ["sh", str(plugin / "bin/install-hook.sh")], env=env, capture_output=True, text=True, timeout=120
    )
    _assert_one_clear_message(
        proc,
        f"could not install helm-nemo=={_version()} from the package index",
        "PIP_INDEX_URL",
        f"helm-nemo-{_version()}.tgz",
    )
    assert sorted(p.name for p in plugin.iterdir()) == ["NOTICE", "bin", "completion.yaml", "plugin.yaml"]


def test_deleted_venv_is_rebuilt_from_the_bundled_wheels_or_one_clear_message(dist, tmp_path, helm4):
    plugin = _plugin_dir(dist, tmp_path)
    env = _clean_env(tmp_path, HELM_PLUGIN_DIR=str(plugin), HELM_BIN=str(helm4.binary))
    # A deleted venv leaves the folder as the tarball unpacked it (the install hook writes nothing but venv/; the
    # hook's own run is test_plugin_tarball_over_http_installs_and_runs_offline's): one venv build, not two.
    assert not (plugin / "venv").exists()
    rebuilt = subprocess.run(["sh", str(plugin / "bin/nemo.sh"), "version"], env=env, capture_output=True, text=True)
    assert rebuilt.returncode == 0 and rebuilt.stdout.strip() == _version(), rebuilt.stderr
    assert "environment is missing; rebuilding it" in rebuilt.stderr
    # without the wheels and without an index, the launcher says so once and exits 2
    shutil.rmtree(plugin / "venv")
    shutil.rmtree(plugin / "wheels")
    broken = subprocess.run(
        ["sh", str(plugin / "bin/nemo.sh"), "version"], env=env, capture_output=True, text=True, timeout=120
    )
    _assert_one_clear_message(broken, "no Python environment found", "helm-nemo-VERSION.tgz")


def test_launcher_prefers_the_checkout_venv():
    """From a development checkout (make setup), the plugin runs the checkout's code."""
    env = {"PATH": SYSTEM_PATH, "HELM_PLUGIN_DIR": str(ROOT)}
    proc = subprocess.run(["sh", str(ROOT / "bin/nemo.sh"), "version"], env=env, capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout.strip() == _version()
    hook = subprocess.run(["sh", str(ROOT / "bin/install-hook.sh")], env=env, capture_output=True, text=True)
    assert hook.returncode == 0 and "using the checkout's environment" in hook.stderr
    assert not (ROOT / "venv").exists()
