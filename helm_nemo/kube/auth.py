"""Credentials ssl and the API server take from a kubeconfig: client certificates given as data, and exec
credential plugins (client.authentication.k8s.io/v1 and v1beta1: gke-gcloud-auth-plugin, `aws eks get-token`).
"""

from __future__ import annotations

import json
import os
import ssl

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only
    from typing import Any

    from helm_nemo.kube.config import ExecPlugin

from helm_nemo.kube.errors import KubeConfigError


def load_client_cert(
    context: ssl.SSLContext,
    cert_file: str | None,
    cert_data: bytes | None,
    key_file: str | None,
    key_data: bytes | None,
    source: str,
) -> None:
    """ssl reads a certificate and key from files only: data goes through a private temporary folder
    that is removed at once."""
    import tempfile

    try:
        if cert_data or key_data:
            with tempfile.TemporaryDirectory(prefix="helm-nemo-") as folder:
                paths: list[str | None] = []
                for name, data, given in (("cert.pem", cert_data, cert_file), ("key.pem", key_data, key_file)):
                    if data:
                        path = os.path.join(folder, name)
                        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                        with os.fdopen(fd, "wb") as handle:
                            handle.write(data)
                        paths.append(path)
                    else:
                        paths.append(given)
                context.load_cert_chain(paths[0] or "", paths[1])  # a certificate: the caller checks
        else:
            context.load_cert_chain(cert_file or "", key_file)
    except (OSError, ssl.SSLError, TypeError) as err:
        raise KubeConfigError(
            f"cannot load the client certificate and key: {getattr(err, 'strerror', None) or err}",
            source=cert_file or source,
            json_path="$.users[].user.client-certificate",
        ) from None


def run_exec_plugin(plugin: ExecPlugin, cluster: dict[str, Any]) -> dict[str, Any]:
    """Run an exec credential plugin; its ExecCredential's status (token, or client certificate + key)."""
    import subprocess
    import sys

    interactive = plugin.interactive_mode != "Never" and sys.stdin is not None and sys.stdin.isatty()
    if plugin.interactive_mode == "Always" and not interactive:
        raise KubeConfigError(
            f"the credential plugin {plugin.command} needs a terminal (interactiveMode: Always)",
            source=plugin.source,
            json_path="$.users[].user.exec.interactiveMode",
        )
    spec: dict[str, Any] = {"interactive": interactive}
    if plugin.provide_cluster_info:
        spec["cluster"] = dict(cluster)
    info = {"apiVersion": plugin.api_version, "kind": "ExecCredential", "spec": spec}
    env = {**os.environ, **plugin.env, "KUBERNETES_EXEC_INFO": json.dumps(info)}
    try:
        proc = subprocess.run(
            [plugin.command, *plugin.args],
            env=env,
            capture_output=True,
            text=True,
            stdin=None if interactive else subprocess.DEVNULL,
            timeout=120,
            check=False,
        )
    except FileNotFoundError:
        raise KubeConfigError(
            f"the credential plugin {plugin.command!r} is not installed (not on PATH)",
            source=plugin.source,
            json_path="$.users[].user.exec.command",
            hint=plugin.install_hint or "install it, or use a kubeconfig with a token",
        ) from None
    except (OSError, subprocess.TimeoutExpired) as err:
        raise KubeConfigError(
            f"the credential plugin {plugin.command!r} failed: {err}",
            source=plugin.source,
            json_path="$.users[].user.exec",
        ) from None
    if proc.returncode != 0:
        said = " ".join(proc.stderr.strip().splitlines()[-3:]) or "no message"
        raise KubeConfigError(
            f"the credential plugin {plugin.command!r} exited {proc.returncode}: {said}",
            source=plugin.source,
            json_path="$.users[].user.exec",
        )
    try:
        credential = json.loads(proc.stdout)
    except ValueError:
        credential = None
    if not isinstance(credential, dict) or credential.get("kind") != "ExecCredential":
        raise KubeConfigError(
            f"the credential plugin {plugin.command!r} printed no ExecCredential JSON",
            source=plugin.source,
            json_path="$.users[].user.exec",
        )
    if credential.get("apiVersion") != plugin.api_version:
        raise KubeConfigError(
            f"the credential plugin answered {credential.get('apiVersion')!r}, asked {plugin.api_version!r}",
            source=plugin.source,
            json_path="$.users[].user.exec.apiVersion",
        )
    status = credential.get("status") or {}
    if not status.get("token") and not (status.get("clientCertificateData") and status.get("clientKeyData")):
        raise KubeConfigError(
            f"the credential plugin {plugin.command!r} gave neither a token nor a client certificate and key",
            source=plugin.source,
            json_path="$.users[].user.exec",
        )
    return status
