"""The dependency locks (issue 23): requirements/runtime.lock (what the plugin tarball bundles and a checkout's
plugin installs) and requirements/dev.lock (make setup / test / dist) pin every package with hashes, so a new
release of a dependency cannot change a fresh clone. pyproject.toml keeps compatible ranges for `pip install`.

Checked here without the network: every dependency pyproject.toml names is locked at a version its range allows,
the two locks agree on what they share, every locked package is pinned with at least one hash, and the project's
environment is exactly the lock (what `make setup` installed). tests/test_distribution.py checks the tarball's
wheels against runtime.lock.
"""

from __future__ import annotations

import re
import tomllib
from importlib import metadata
from pathlib import Path
from typing import NamedTuple

import pytest
from packaging.markers import Marker
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parent.parent
RUNTIME = ROOT / "requirements" / "runtime.lock"
DEV = ROOT / "requirements" / "dev.lock"


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


class Locked(NamedTuple):
    version: str
    marker: str  # "" = every platform
    hashes: frozenset[str]

    def applies(self) -> bool:
        """Whether this platform and Python install it (the lock is universal: markers say where)."""
        return not self.marker or Marker(self.marker).evaluate()


def read_lock(path: Path) -> dict[str, Locked]:
    """name -> pin of a `uv pip compile --generate-hashes` file (requirement lines joined at their backslashes)."""
    text = re.sub(r"\\\n", " ", path.read_text())
    out: dict[str, Locked] = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        hashes = frozenset(re.findall(r"--hash=sha256:([0-9a-f]{64})", line))
        requirement = Requirement(re.sub(r"\s*--hash=\S+", "", line))
        pins = [spec.version for spec in requirement.specifier if spec.operator == "=="]
        assert len(pins) == 1, f"{path.name}: {line[:80]} is not pinned with =="
        name = canonical(requirement.name)
        assert name not in out, f"{path.name}: {name} is locked twice"
        out[name] = Locked(pins[0], str(requirement.marker or ""), hashes)
    return out


def _declared(*extras: str) -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = list(project["dependencies"])
    for extra in extras:
        names += project["optional-dependencies"][extra]
    return [Requirement(name) for name in names]


@pytest.mark.parametrize("lock, extras", [(RUNTIME, ()), (DEV, ("test", "dev"))], ids=["runtime", "dev"])
def test_the_lock_pins_every_declared_dependency_within_its_range(lock, extras):
    locked = read_lock(lock)
    for requirement in _declared(*extras):
        name = canonical(requirement.name)
        assert name in locked, f"{lock.name} does not lock {name} (pyproject.toml needs it): run `make lock`"
        assert requirement.specifier.contains(locked[name].version, prereleases=True), (
            f"{lock.name}: {name}=={locked[name].version} is outside pyproject.toml's {requirement}: run `make lock`"
        )


def test_every_pin_has_a_hash_and_the_locks_agree():
    runtime, dev = read_lock(RUNTIME), read_lock(DEV)
    for lock, pins in (("runtime.lock", runtime), ("dev.lock", dev)):
        for name, pin in pins.items():
            assert pin.hashes, f"{lock}: {name} has no hash"
    assert {name: pin.version for name, pin in runtime.items()} == {name: dev[name].version for name in runtime}, (
        "dev.lock must hold runtime.lock's versions (make lock)"
    )


def test_the_project_environment_is_the_lock():
    """What `make setup` installed is what dev.lock says (a stale .venv, or a setup that resolved on its own,
    shows up here)."""
    for name, pin in read_lock(DEV).items():
        if pin.applies():
            assert metadata.version(name) == pin.version, (
                f"{name}: installed {metadata.version(name)}, locked {pin.version} (make setup)"
            )
