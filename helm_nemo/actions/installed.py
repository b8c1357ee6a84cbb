"""What is installed: a release's manifest and values as helm stored them (`helm get manifest|values`).

Only helm's global flags reach `helm get` (namespace, kube context and credentials, kubeconfig …); the
install flags of the command line (`--wait`, `--set` …) are for the render. A release that is not
installed is None; any other failure (cluster unreachable, API errors) is a ReleaseReadError whose
message is helm's own, on one line.
"""

from __future__ import annotations

import json
import subprocess
from typing import Any

from helm_nemo.actions.helm import HelmBinary

# Helm 3/4 global flags (`helm --help`): the ones followed by a value, and the boolean ones.
GLOBAL_VALUE_FLAGS = {"-n", "--namespace", "--kube-context", "--kubeconfig", "--kube-apiserver", "--kube-as-user",
                      "--kube-as-group", "--kube-ca-file", "--kube-tls-server-name", "--kube-token", "--burst-limit",
                      "--qps", "--registry-config", "--repository-cache", "--repository-config", "--content-cache"}
GLOBAL_BOOL_FLAGS = {"--debug", "--kube-insecure-skip-tls-verify"}
NOT_FOUND = "release: not found"


class ReleaseReadError(Exception):
    """helm could not tell what is installed (not: the release is not installed)."""


def global_flags(extra: list[str]) -> list[str]:
    """The global flags of a helm command line (with their values), in order; everything else dropped."""
    out: list[str] = []
    index = 0
    while index < len(extra):
        arg = extra[index]
        name, eq, _ = arg.partition("=")
        if name in GLOBAL_VALUE_FLAGS:
            out.append(arg)
            if not eq and index + 1 < len(extra):
                out.append(extra[index + 1])
                index += 1
        elif name in GLOBAL_BOOL_FLAGS:
            out.append(arg)
        index += 1
    return out


def _get(helm: HelmBinary, what: list[str], release: str, extra: list[str]) -> str | None:
    proc = subprocess.run([helm.path, "get", *what[:1], release, *what[1:], *global_flags(extra)],
                          capture_output=True, text=True, check=False)
    if proc.returncode == 0:
        return proc.stdout
    if NOT_FOUND in proc.stderr:
        return None
    message = " ".join(line.strip() for line in proc.stderr.strip().splitlines() if line.strip())
    message = message[len("Error: "):] if message.startswith("Error: ") else message
    raise ReleaseReadError(f"cannot read release {release} from the cluster (helm get {what[0]}, exit "
                           f"{proc.returncode}): {message or 'no message'}")


def get_manifest(helm: HelmBinary, release: str, extra: list[str]) -> str | None:
    """The manifest of the installed release (hooks excluded, as helm stores it); None when not installed."""
    return _get(helm, ["manifest"], release, extra)


def get_values(helm: HelmBinary, release: str, extra: list[str]) -> dict[str, Any] | None:
    """The values the release was installed with (what the plugin passed); None when not installed."""
    text = _get(helm, ["values", "-o", "json"], release, extra)
    if text is None:
        return None
    try:
        values = json.loads(text or "null")
    except json.JSONDecodeError as err:
        raise ReleaseReadError(f"cannot read release {release}'s values: helm printed no JSON ({err.msg})") from None
    return values if isinstance(values, dict) else {}


def job_timestamp(values: dict[str, Any] | None) -> str | None:
    workload = (values or {}).get("workload")
    stamp = workload.get("jobTimestamp") if isinstance(workload, dict) else None
    return stamp if isinstance(stamp, str) and stamp else None
