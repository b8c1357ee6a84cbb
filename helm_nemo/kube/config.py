"""Which cluster, as whom: the settings helm passes to plugins, resolved like client-go resolves them.

Precedence (helm's, which is client-go's): `--kubeconfig` else `KUBECONFIG` (a path list: every file is
read; for clusters, users and contexts the first file that names one wins, and the first non-empty
`current-context` wins) else `~/.kube/config`. The context is `--kube-context` / `HELM_KUBECONTEXT`,
else the current context. Then helm's overrides: `--kube-apiserver` / `HELM_KUBEAPISERVER`,
`--kube-token` / `HELM_KUBETOKEN`, `--kube-ca-file` / `HELM_KUBECAFILE`,
`--kube-insecure-skip-tls-verify` / `HELM_KUBEINSECURE_SKIP_TLS_VERIFY`, `--kube-tls-server-name` /
`HELM_KUBETLS_SERVER_NAME`, `--kube-as-user` / `HELM_KUBEASUSER`, `--kube-as-group` /
`HELM_KUBEASGROUPS` (comma-separated). Namespace: `-n` / `HELM_NAMESPACE`, else the context's, else
`default`. Flags on the command line win over the environment (helm sets the environment for plugins
from its own flags, so both agree when run as `helm nemo`).

Relative paths inside a kubeconfig file (certificate-authority, client-certificate, client-key,
tokenFile, an exec command with a slash) are relative to that file's folder, as client-go reads them.
"""

from __future__ import annotations

import base64
import os
from dataclasses import dataclass, field
from pathlib import Path

from helm_nemo.kube.errors import KubeConfigError

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only
    from collections.abc import Mapping
    from typing import Any

# helm's global flags that choose the cluster -> (the HELM_* variable helm gives plugins, takes a value)
FLAGS = {
    "--kubeconfig": ("KUBECONFIG", True),
    "--kube-context": ("HELM_KUBECONTEXT", True),
    "--kube-apiserver": ("HELM_KUBEAPISERVER", True),
    "--kube-token": ("HELM_KUBETOKEN", True),
    "--kube-ca-file": ("HELM_KUBECAFILE", True),
    "--kube-tls-server-name": ("HELM_KUBETLS_SERVER_NAME", True),
    "--kube-insecure-skip-tls-verify": ("HELM_KUBEINSECURE_SKIP_TLS_VERIFY", False),
    "--kube-as-user": ("HELM_KUBEASUSER", True),
    "--kube-as-group": ("HELM_KUBEASGROUPS", True),
    "-n": ("HELM_NAMESPACE", True),
    "--namespace": ("HELM_NAMESPACE", True),
}
TRUE = ("1", "true", "yes", "on")


@dataclass
class ExecPlugin:
    """users[].user.exec: a command printing an ExecCredential (token or client certificate)."""

    command: str
    args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    api_version: str = "client.authentication.k8s.io/v1"
    install_hint: str | None = None
    provide_cluster_info: bool = False
    interactive_mode: str = "IfAvailable"
    source: str = ""


@dataclass
class ClusterConfig:
    """Everything needed to open a connection and authenticate. Data fields hold PEM bytes."""

    server: str
    namespace: str = "default"
    context: str | None = None
    source: str = ""  # the kubeconfig file(s), for messages
    token: str | None = None
    token_file: str | None = None
    username: str | None = None
    password: str | None = None
    ca_data: bytes | None = None
    ca_file: str | None = None
    cert_data: bytes | None = None
    cert_file: str | None = None
    key_data: bytes | None = None
    key_file: str | None = None
    insecure: bool = False
    tls_server_name: str | None = None
    exec_plugin: ExecPlugin | None = None
    impersonate_user: str | None = None
    impersonate_groups: list[str] = field(default_factory=list)
    namespace_explicit: bool = False  # -n / HELM_NAMESPACE given (else the context's or "default")
    cluster_info: dict[str, Any] = field(default_factory=dict)  # for exec plugins with provideClusterInfo


def settings(extra: list[str], env: Mapping[str, str]) -> dict[str, str]:
    """The HELM_* settings: the environment, overridden by helm global flags found in `extra`."""
    out = {name: env[name] for name, _ in FLAGS.values() if env.get(name)}
    index = 0
    while index < len(extra):
        arg = extra[index]
        name, eq, value = arg.partition("=")
        spec = FLAGS.get(name)
        if spec is None and arg.startswith("-n") and len(arg) > 2 and not arg.startswith("--"):
            spec, value, eq = FLAGS["-n"], arg[2:], "="
        if spec is not None:
            var, takes_value = spec
            if takes_value and not eq:
                index += 1
                value = extra[index] if index < len(extra) else ""
            elif not takes_value:
                value = value if eq else "true"
            if var == "HELM_KUBEASGROUPS" and out.get(var) and name == "--kube-as-group":
                value = out[var] + "," + value  # the flag repeats
            out[var] = value
        index += 1
    return out


def kubeconfig_paths(given: str | None, env: Mapping[str, str]) -> list[Path]:
    if given:
        return [Path(p).expanduser() for p in given.split(os.pathsep) if p]
    home = env.get("HOME") or os.path.expanduser("~")
    return [Path(home) / ".kube" / "config"]


def _load_file(path: Path) -> dict[str, Any]:
    import yaml

    try:
        text = path.read_text()
    except OSError as err:
        raise KubeConfigError(
            f"cannot read the kubeconfig: {err.strerror or err}",
            source=str(path),
            hint="set KUBECONFIG or --kubeconfig to a readable file",
        ) from None
    try:
        data = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        raise KubeConfigError(
            f"not a YAML kubeconfig{where}: {getattr(err, 'problem', None) or err}", source=str(path)
        ) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise KubeConfigError("a kubeconfig is a mapping (apiVersion: v1, kind: Config)", source=str(path))
    return data


def _named(data: dict[str, Any], key: str, path: Path, into: dict[str, Any]) -> None:
    """clusters/users/contexts of one file into `into` (name -> (entry, file)); first file wins."""
    items = data.get(key) or []
    if not isinstance(items, list):
        raise KubeConfigError(f"{key} is a list of named entries", source=str(path), json_path=f"$.{key}")
    for index, item in enumerate(items):
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            raise KubeConfigError(f"{key}[{index}] has no name", source=str(path), json_path=f"$.{key}[{index}]")
        into.setdefault(item["name"], (item.get(key[:-1]) or {}, path, index))


def load_merged(paths: list[Path], explicit: bool) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any], str | None]:
    """(clusters, users, contexts, current-context) merged over the files. A missing file in a KUBECONFIG
    list is skipped (client-go does); all of them missing, or an explicit --kubeconfig missing, is an error."""
    clusters: dict[str, Any] = {}
    users: dict[str, Any] = {}
    contexts: dict[str, Any] = {}
    current = None
    found = 0
    for path in paths:
        if not path.exists():
            if explicit and len(paths) == 1:
                raise KubeConfigError(
                    "the kubeconfig file does not exist", source=str(path), hint="check --kubeconfig / KUBECONFIG"
                )
            continue
        found += 1
        data = _load_file(path)
        _named(data, "clusters", path, clusters)
        _named(data, "users", path, users)
        _named(data, "contexts", path, contexts)
        current = current or data.get("current-context") or None
    if not found:
        names = os.pathsep.join(str(p) for p in paths)
        raise KubeConfigError(
            "no kubeconfig found",
            source=names,
            hint="set KUBECONFIG (or --kubeconfig, or --kube-apiserver with --kube-token); "
            "gcloud container clusters get-credentials / aws eks update-kubeconfig write one",
        )
    return clusters, users, contexts, current


def _resolve_path(value: object, base: Path) -> str | None:
    if not value:
        return None
    path = Path(os.path.expanduser(str(value)))
    return str(path if path.is_absolute() else base.parent / path)


def _data(entry: dict[str, Any], key: str, path: Path, where: str) -> bytes | None:
    value = entry.get(key)
    if not value:
        return None
    try:
        return base64.b64decode(value, validate=True)
    except (ValueError, TypeError):
        raise KubeConfigError(f"{key} is not base64", source=str(path), json_path=f"{where}.{key}") from None


def resolve(extra: list[str], env: Mapping[str, str] | None = None, *, namespace: str | None = None) -> ClusterConfig:
    """The ClusterConfig for helm flags `extra` and the environment `env` (default os.environ)."""
    env = os.environ if env is None else env
    given = settings(extra, env)
    server_override = given.get("HELM_KUBEAPISERVER")
    kubeconfig = given.get("KUBECONFIG")
    explicit = "--kubeconfig" in {a.partition("=")[0] for a in extra}
    paths = kubeconfig_paths(kubeconfig, env)
    clusters: dict[str, Any]
    users: dict[str, Any]
    contexts: dict[str, Any]
    if server_override and not any(p.exists() for p in paths):
        clusters, users, contexts, current = {}, {}, {}, None  # --kube-apiserver alone is a whole config
    else:
        clusters, users, contexts, current = load_merged(paths, explicit)
    source = os.pathsep.join(str(p) for p in paths)
    context_name = given.get("HELM_KUBECONTEXT") or current
    context: dict[str, Any] = {}
    cluster: dict[str, Any] = {}
    user: dict[str, Any] = {}
    cluster_file = user_file = paths[0]
    if context_name:
        if context_name not in contexts:
            if not server_override or given.get("HELM_KUBECONTEXT"):
                known = ", ".join(sorted(contexts)) or "none"
                raise KubeConfigError(
                    f"context {context_name!r} not found (contexts: {known})",
                    source=source,
                    json_path="$.contexts",
                    hint="kubectl config get-contexts; --kube-context NAME",
                )
        else:
            context, context_file, index = contexts[context_name]
            if not isinstance(context, dict):
                raise KubeConfigError(
                    "a context is a mapping", source=str(context_file), json_path=f"$.contexts[{index}]"
                )
            cluster_name, user_name = context.get("cluster"), context.get("user")
            if cluster_name:
                if cluster_name not in clusters:
                    raise KubeConfigError(
                        f"context {context_name!r} names cluster {cluster_name!r}, which no kubeconfig defines",
                        source=str(context_file),
                        json_path=f"$.contexts[{index}].context.cluster",
                    )
                cluster, cluster_file, _ = clusters[cluster_name]
            if user_name:
                if user_name not in users:
                    raise KubeConfigError(
                        f"context {context_name!r} names user {user_name!r}, which no kubeconfig defines",
                        source=str(context_file),
                        json_path=f"$.contexts[{index}].context.user",
                    )
                user, user_file, _ = users[user_name]
    elif not server_override:
        raise KubeConfigError(
            "the kubeconfig has no current-context and none was chosen",
            source=source,
            hint="--kube-context NAME (kubectl config get-contexts), or kubectl config use-context",
        )
    server = server_override or cluster.get("server")
    if not server:
        raise KubeConfigError(
            f"context {context_name!r} has no cluster server",
            source=str(cluster_file),
            json_path="$.clusters",
            hint="--kube-apiserver https://HOST:PORT",
        )
    if "://" not in server:
        server = "https://" + server
    config = ClusterConfig(server=server.rstrip("/"), context=context_name, source=source)
    where = "$.clusters[].cluster"
    config.ca_data = _data(cluster, "certificate-authority-data", cluster_file, where)
    config.ca_file = _resolve_path(cluster.get("certificate-authority"), cluster_file)
    config.insecure = bool(cluster.get("insecure-skip-tls-verify"))
    config.tls_server_name = cluster.get("tls-server-name") or None
    # ExecCredential spec.cluster (provideClusterInfo): the cluster as the plugin sees it
    config.cluster_info = {
        "server": config.server,
        "insecureSkipTLSVerify": config.insecure,
        **(
            {"certificateAuthorityData": cluster["certificate-authority-data"]}
            if cluster.get("certificate-authority-data")
            else {}
        ),
        **({"tlsServerName": config.tls_server_name} if config.tls_server_name else {}),
        **(
            {"config": cluster["extensions"][0].get("extension")}
            if isinstance(cluster.get("extensions"), list)
            and cluster["extensions"]
            and isinstance(cluster["extensions"][0], dict)
            and cluster["extensions"][0].get("name") == "client.authentication.k8s.io/exec"
            else {}
        ),
    }
    where = "$.users[].user"
    config.cert_data = _data(user, "client-certificate-data", user_file, where)
    config.cert_file = _resolve_path(user.get("client-certificate"), user_file)
    config.key_data = _data(user, "client-key-data", user_file, where)
    config.key_file = _resolve_path(user.get("client-key"), user_file)
    config.token = user.get("token") or None
    config.token_file = _resolve_path(user.get("tokenFile"), user_file)
    config.username, config.password = user.get("username"), user.get("password")
    config.impersonate_user = user.get("as") or None
    config.impersonate_groups = list(user.get("as-groups") or [])
    if user.get("auth-provider"):
        name = (user["auth-provider"] or {}).get("name", "?")
        if not (config.token or user.get("exec")):
            raise KubeConfigError(
                f"the {name!r} auth-provider is no longer supported by Kubernetes clients",
                source=str(user_file),
                json_path="$.users[].user.auth-provider",
                hint="use the exec credential plugin (gke-gcloud-auth-plugin, aws eks get-token, "
                "kubelogin) as kubectl does since 1.26",
            )
    if user.get("exec"):
        config.exec_plugin = _exec_plugin(user["exec"], user_file)
    # helm's overrides
    if given.get("HELM_KUBETOKEN"):
        config.token, config.token_file, config.exec_plugin = given["HELM_KUBETOKEN"], None, None
    if given.get("HELM_KUBECAFILE"):
        config.ca_file, config.ca_data = given["HELM_KUBECAFILE"], None
    if given.get("HELM_KUBEINSECURE_SKIP_TLS_VERIFY", "").lower() in TRUE:
        config.insecure = True
    if given.get("HELM_KUBETLS_SERVER_NAME"):
        config.tls_server_name = given["HELM_KUBETLS_SERVER_NAME"]
    if given.get("HELM_KUBEASUSER"):
        config.impersonate_user = given["HELM_KUBEASUSER"]
    if given.get("HELM_KUBEASGROUPS"):
        config.impersonate_groups = [g for g in given["HELM_KUBEASGROUPS"].split(",") if g]
    if namespace or given.get("HELM_NAMESPACE"):
        config.namespace, config.namespace_explicit = namespace or given["HELM_NAMESPACE"], True
    else:
        config.namespace = context.get("namespace") or "default"
    return config


def _exec_plugin(spec: object, path: Path) -> ExecPlugin:
    where = "$.users[].user.exec"
    if not isinstance(spec, dict) or not spec.get("command"):
        raise KubeConfigError("exec needs a command", source=str(path), json_path=where)
    api_version = spec.get("apiVersion") or ""
    if api_version not in ("client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1"):
        raise KubeConfigError(
            f"exec apiVersion {api_version!r} is not supported",
            source=str(path),
            json_path=f"{where}.apiVersion",
            hint="client.authentication.k8s.io/v1 or v1beta1 (v1alpha1 was removed in Kubernetes 1.24)",
        )
    command = str(spec["command"])
    if os.sep in command and not os.path.isabs(command):
        command = str(path.parent / command)  # relative to the kubeconfig, as client-go does
    env = {}
    for item in spec.get("env") or []:
        if isinstance(item, dict) and "name" in item:
            env[str(item["name"])] = str(item.get("value", ""))
    return ExecPlugin(
        command=command,
        args=[str(a) for a in spec.get("args") or []],
        env=env,
        api_version=api_version,
        install_hint=spec.get("installHint"),
        provide_cluster_info=bool(spec.get("provideClusterInfo")),
        interactive_mode=spec.get("interactiveMode") or "IfAvailable",
        source=str(path),
    )
