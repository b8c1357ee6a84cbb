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
GLOBAL_VALUE_FLAGS = {
    "-n",
    "--namespace",
    "--kube-context",
    "--kubeconfig",
    "--kube-apiserver",
    "--kube-as-user",
    "--kube-as-group",
    "--kube-ca-file",
    "--kube-tls-server-name",
    "--kube-token",
    "--burst-limit",
    "--qps",
    "--registry-config",
    "--repository-cache",
    "--repository-config",
    "--content-cache",
}
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


def _get(helm: HelmBinary, what: list[str], release: str, extra: list[str], verb: str = "get") -> str | None:
    command = [helm.path, "get", *what[:1]] if verb == "get" else [helm.path, verb]
    rest = what[1:] if verb == "get" else what
    proc = subprocess.run([*command, release, *rest, *global_flags(extra)], capture_output=True, text=True, check=False)
    if proc.returncode == 0:
        return proc.stdout
    if NOT_FOUND in proc.stderr:
        return None
    message = " ".join(line.strip() for line in proc.stderr.strip().splitlines() if line.strip())
    message = message[len("Error: ") :] if message.startswith("Error: ") else message
    raise ReleaseReadError(
        f"cannot read release {release} from the cluster (helm {verb + ' ' + what[0] if verb == 'get' else verb}, exit "
        f"{proc.returncode}): {message or 'no message'}"
    )


def get_manifest(helm: HelmBinary, release: str, extra: list[str], revision: int | None = None) -> str | None:
    """The manifest of the installed release (hooks excluded, as helm stores it), or of one of its revisions;
    None when not installed."""
    return _get(helm, ["manifest", *(["--revision", str(revision)] if revision else [])], release, extra)


def release_history(helm: HelmBinary, release: str, extra: list[str]) -> list[tuple[int, str]]:
    """(revision, status) of every revision helm keeps, oldest first; [] when there is no such release."""
    text = _get(helm, ["-o", "json", "--max", "256"], release, extra, verb="history")
    if text is None:
        return []
    try:
        return sorted((int(entry["revision"]), str(entry["status"])) for entry in json.loads(text))
    except (json.JSONDecodeError, KeyError, TypeError, ValueError):
        raise ReleaseReadError(f"cannot read release {release}'s history: helm printed no history JSON") from None


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


def release_status(helm: HelmBinary, release: str, extra: list[str]) -> str | None:
    """helm's status of the release's last revision (`deployed`, `failed`, `uninstalled` when uninstalled with
    its history kept, `pending-*` …); None when there is no release of that name."""
    proc = subprocess.run(
        [helm.path, "status", release, "-o", "json", *global_flags(extra)], capture_output=True, text=True, check=False
    )
    if proc.returncode == 0:
        try:
            return str(json.loads(proc.stdout)["info"]["status"])
        except (json.JSONDecodeError, KeyError, TypeError):
            raise ReleaseReadError(f"cannot read release {release}'s status: helm printed no status JSON") from None
    if NOT_FOUND in proc.stderr:
        return None
    message = " ".join(line.strip() for line in proc.stderr.strip().splitlines() if line.strip())
    raise ReleaseReadError(
        f"cannot read release {release} from the cluster (helm status, exit {proc.returncode}): "
        f"{message.removeprefix('Error: ') or 'no message'}"
    )
