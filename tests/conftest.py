"""Shared test fixtures: the real Helm 3 and Helm 4 binaries, and a helper to run them."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
HELMS = {
    "helm3": Path(os.environ.get("HELM3", ROOT / ".tools/helm3/helm")),
    "helm4": Path(os.environ.get("HELM4", ROOT / ".tools/helm4/helm")),
}
# A fixed clock for `helm nemo template/install` (the run identity JOB_TIMESTAMP / JOB_IDENTIFIER they
# stamp), so goldens are reproducible: 2026-01-01-00-00-00 UTC. Tests of per-run identity unset it.
FIXED_EPOCH = "1767225600"
os.environ.setdefault("SOURCE_DATE_EPOCH", FIXED_EPOCH)
# The manifest check's schema cache (validate/schema_cache.py) in one folder for the whole run, not in the
# user's ~/.cache; tests of the cache's own location set the variables themselves.
if "HELM_NEMO_CACHE_DIR" not in os.environ:
    import tempfile

    os.environ["HELM_NEMO_CACHE_DIR"] = tempfile.mkdtemp(prefix="helm-nemo-test-cache-")
# The same time for plain `helm template` renders (the charts' workload.jobTimestamp).
JOB_TIMESTAMP = "2026-01-01-00-00-00"

# Pinned so renders do not depend on each binary's default (v1.32.0 on 3.17.2, v1.35.0 on 4.1.4).
KUBE_VERSION = "1.32.0"
API_VERSIONS = ["jobset.x-k8s.io/v1alpha2", "resource.nvidia.com/v1beta1", "kueue.x-k8s.io/v1beta1"]


def helm_env(tmp_root: Path) -> dict[str, str]:
    """An isolated helm home per test session, so the user's repos and plugins never leak in."""
    env = dict(os.environ)
    for name in ("HELM_DATA_HOME", "HELM_CONFIG_HOME", "HELM_CACHE_HOME"):
        env[name] = str(tmp_root / name.lower())
    env.pop("HELM_PLUGINS", None)
    return env


class Helm:
    def __init__(self, name: str, binary: Path, env: dict[str, str]):
        self.name = name
        self.binary = binary
        self.env = env

    def run(self, *args: str, cwd: Path | None = None, check: bool = True) -> subprocess.CompletedProcess:
        proc = subprocess.run(
            [str(self.binary), *args], cwd=cwd, env=self.env, capture_output=True, text=True, check=False
        )
        if check and proc.returncode != 0:
            raise AssertionError(f"{self.name} {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr}")
        return proc

    def template(self, release: str, chart: Path, *args: str, cwd: Path | None = None, check: bool = True):
        pinned = ["--kube-version", KUBE_VERSION]
        for api in API_VERSIONS:
            pinned += ["--api-versions", api]
        return self.run("template", release, str(chart), *pinned, *args, cwd=cwd, check=check)


@pytest.fixture(scope="session")
def helm_home(tmp_path_factory) -> dict[str, str]:
    return helm_env(tmp_path_factory.mktemp("helm-home"))


@pytest.fixture(scope="session", params=sorted(HELMS))
def helm(request, helm_home) -> Helm:
    binary = HELMS[request.param]
    if not binary.exists():
        pytest.fail(f"{binary} is missing: run `make setup` (scripts/setup.sh fetches Helm 3 and 4)")
    return Helm(request.param, binary, helm_home)


@pytest.fixture(scope="session")
def helm3(helm_home) -> Helm:
    return Helm("helm3", HELMS["helm3"], helm_home)


@pytest.fixture(scope="session")
def helm4(helm_home) -> Helm:
    return Helm("helm4", HELMS["helm4"], helm_home)


def assert_golden(golden: Path, rendered: str, *, writer: bool = True) -> None:
    """Compare a render with its reviewed snapshot. `UPDATE_GOLDEN=1` rewrites the snapshot (only from
    the `writer` run when several helm versions render the same case); review `git diff tests/golden`
    and give the reason in the commit message. Run for each helm binary against one snapshot, this also
    proves Helm 3 and Helm 4 render identical bytes, with no second render to compare them."""
    if os.environ.get("UPDATE_GOLDEN") == "1" and (writer or not golden.exists()):
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(rendered)
    assert golden.exists(), f"no snapshot {golden}: run with UPDATE_GOLDEN=1 and review it"
    assert rendered == golden.read_text(), (
        f"the render differs from {golden} (UPDATE_GOLDEN=1 rewrites it; review the diff)"
    )


def render_fixture(helm: Helm, case_dir: Path, chart: Path, *extra: str) -> str:
    """Render a parity fixture's command.txt (the gpu-recipes README's argument list) with our chart:
    CHART replaced by `chart`, run in the case folder so its -f/--set-file paths resolve, plus `extra`."""
    args = [str(chart) if arg == "CHART" else arg for arg in (case_dir / "command.txt").read_text().split()]
    return helm.run("template", *args, *extra, cwd=case_dir).stdout


# Helm variables that would point an inner helm elsewhere than a test's emulator.
_CLUSTER_DROP = ("HELM_NAMESPACE", "HELM_KUBECONTEXT", "HELM_DRIVER", "HELM_DEBUG", "HELM_NEMO_DEBUG")


@pytest.fixture
def kube():
    """This test's loopback Kubernetes API emulator (tests/kube_emulator.py)."""
    from kube_emulator import KubeEmulator

    emulator = KubeEmulator().start()
    try:
        yield emulator
    finally:
        emulator.stop()


def cluster_env(base: dict[str, str], kube, tmp_path: Path, *, drop: tuple[str, ...] = ()) -> dict[str, str]:
    """`base` (helm's isolated homes) pointed at `kube`: its KUBECONFIG, a fresh HOME (client-go's discovery
    cache goes to $HOME/.kube/cache), without the variables that would redirect helm (and `drop`)."""
    env = {k: v for k, v in base.items() if k not in _CLUSTER_DROP + drop}
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env.update(KUBECONFIG=str(kube.kubeconfig(tmp_path / "kubeconfig")), HOME=str(home))
    return env


@pytest.fixture(scope="session")
def real_cluster(tmp_path_factory):
    """The real control plane of tests/real_cluster.py (etcd, kube-apiserver, controller-manager, scheduler,
    JobSet and Kueue managers, kwok), one for the session, stopped at the end (also on failure or Ctrl-C).
    Built first by scripts/cluster.sh if `make cluster` has not. HELM_NEMO_SKIP_CLUSTER=1 skips its tests."""
    if os.environ.get("HELM_NEMO_SKIP_CLUSTER") == "1":
        pytest.skip(
            "HELM_NEMO_SKIP_CLUSTER=1: the real control plane (etcd, kube-apiserver, kube-controller-manager, "
            "kube-scheduler, JobSet, Kueue, kwok) was not started"
        )
    from real_cluster import RealCluster

    cluster = RealCluster(tmp_path_factory.mktemp("real-cluster"), echo=lambda line: print(f"real_cluster: {line}"))
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups (its own collection hook)
def pytest_collection_modifyitems(config, items):
    """Work units for `pytest -n 2 --dist loadgroup --no-loadscope-reorder` (make test): every test on the
    session's real control plane (those whose fixtures reach `real_cluster`) in one group, first, so one worker
    starts the one cluster of the run at once and waits on it while the other runs the CPU-bound rest; every
    other test grouped by its module, so a module's fixtures (a dist build, the registry, Slurm) are made once,
    not once per worker. Without xdist the marks do nothing and the order is the files' own."""
    for item in items:
        if item.get_closest_marker("xdist_group"):
            continue
        cluster = "real_cluster" in getattr(item, "fixturenames", ())
        item.add_marker(pytest.mark.xdist_group("real_cluster" if cluster else item.nodeid.split("::")[0]))
    if os.environ.get("PYTEST_XDIST_WORKER"):
        items.sort(key=lambda item: "real_cluster" not in getattr(item, "fixturenames", ()))
