"""Find and run the real helm: `$HELM_BIN` when running as a plugin, never a different helm by accident."""

from __future__ import annotations

import os
import subprocess
from collections import namedtuple
from functools import lru_cache

from helm_nemo import resources


class HelmNotFound(Exception):
    pass


class HelmBinary(namedtuple("HelmBinary", "path")):
    """The helm to run; its version is asked only when a flag's spelling needs it."""

    __slots__ = ()

    @property
    def version(self) -> str:
        """e.g. "v3.17.2"; asked from the binary once, and only when a flag's spelling depends on it."""
        return _version_of(self.path)

    @property
    def major(self) -> int:
        return int(self.version.lstrip("v").split(".")[0])


# Flags whose spelling differs between Helm 3 and Helm 4: (helm3, helm4).
RENAMED_FLAGS = [("--atomic", "--rollback-on-failure"), ("--force", "--force-replace")]


def locate_helm() -> str:
    """$HELM_BIN (set by helm for plugins), then HELM_NEMO_HELM, then the project's .tools, then PATH."""
    for var in ("HELM_BIN", "HELM_NEMO_HELM"):
        value = os.environ.get(var)
        if value:
            return value
    checkout = resources.checkout_root()
    if checkout:
        for major in (4, 3):
            candidate = checkout / ".tools" / f"helm{major}" / "helm"
            if candidate.is_file() and os.access(candidate, os.X_OK):
                return str(candidate)
    import shutil

    found = shutil.which("helm")
    if found:
        return found
    raise HelmNotFound("helm not found: run as `helm nemo …`, set HELM_BIN, or run `make setup`")


@lru_cache(maxsize=8)
def _version_of(path: str) -> str:
    proc = subprocess.run([path, "version", "--template", "{{.Version}}"], capture_output=True, text=True, check=False)
    if proc.returncode != 0 or not proc.stdout.startswith("v"):
        raise HelmNotFound(f"{path} does not answer `helm version`: {proc.stderr.strip()}")
    return proc.stdout.strip()


def helm_binary(path: str | None = None) -> HelmBinary:
    return HelmBinary(path=path or locate_helm())


def needs_translation(args: list[str]) -> bool:
    names = {a.partition("=")[0] for a in args}
    return "--dry-run" in args or any(v3 in names or v4 in names for v3, v4 in RENAMED_FLAGS)


def translate_flags(args: list[str], major: int) -> list[str]:
    """Rewrite flags spelled for the other major version, so one command line works on both."""
    out = []
    for arg in args:
        if arg == "--dry-run" and major >= 4:
            out.append("--dry-run=client")  # Helm 4 deprecates the bare form
            continue
        name, eq, value = arg.partition("=")
        for v3, v4 in RENAMED_FLAGS:
            if major >= 4 and name == v3:
                name = v4
            elif major < 4 and name == v4:
                name = v3
        out.append(name + eq + value)
    return out
