"""KubeClient: GET, paginated LIST, POST and raw text GET against one API server (http.client + ssl).

One keep-alive connection per thread (several threads may read side by side). JSON answers are asked
for gzip-compressed, as client-go asks (the API server compresses those over 128 KiB), and big ones are
decoded with the cyclic garbage collector out of the way (see `decode`). Authentication as
client-go does it: a bearer token (kubeconfig `token`, `tokenFile` re-read on every request, helm's
`--kube-token`), an exec credential plugin's token or client certificate (run once, run again once when
the server answers 401), basic auth, client certificates; impersonation headers for `--kube-as-user` /
`--kube-as-group`. HTTPS proxies from `HTTPS_PROXY` / `NO_PROXY` (never for loopback), as Go does.
"""

from __future__ import annotations

import builtins
import http.client
import json
import os
import socket
import ssl
import threading
from urllib.parse import urlencode, urlsplit

from helm_nemo.kube.config import ClusterConfig, ExecPlugin
from helm_nemo.kube.errors import KubeApiError, KubeConfigError, KubeUnreachable

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only
    from collections.abc import Callable, Iterator
    from typing import Any

USER_AGENT = "helm-nemo"
PAGE_SIZE = 500
# An answer at least this big is decoded with the garbage collector paused and then frozen (`decode`).
BIG_ANSWER = 1 << 20


class KubeClient:
    def __init__(self, config: ClusterConfig, timeout: float = 30.0):
        self.config = config
        self.timeout = timeout
        split = urlsplit(config.server)
        if split.scheme not in ("http", "https") or not split.hostname:
            raise KubeConfigError(
                f"server {config.server!r} is not an http(s) URL",
                source=config.source,
                json_path="$.clusters[].cluster.server",
            )
        self.scheme = split.scheme
        self.host = split.hostname
        self.port = split.port or (443 if self.scheme == "https" else 80)
        self.base_path = split.path.rstrip("/")
        self._local = threading.local()
        self._lock = threading.Lock()
        self._ssl: ssl.SSLContext | None = None
        self._exec_token: str | None = None
        self._exec_done = False

    @property
    def namespace(self) -> str:
        return self.config.namespace

    # ---- connection
    def _ssl_context(self) -> ssl.SSLContext:
        with self._lock:
            if self._ssl is None:
                self._ssl = self._make_ssl()
            return self._ssl

    def _make_ssl(self) -> ssl.SSLContext:
        config = self.config
        context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
        try:
            if config.insecure:
                context.check_hostname = False
                context.verify_mode = ssl.CERT_NONE
            elif config.ca_file or config.ca_data:
                context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
                context.load_verify_locations(
                    cafile=config.ca_file, cadata=config.ca_data.decode() if config.ca_data else None
                )
        except (OSError, ssl.SSLError, ValueError) as err:
            raise KubeConfigError(
                f"cannot load the cluster's CA certificate: {getattr(err, 'strerror', None) or err}",
                source=config.ca_file or config.source,
                json_path="$.clusters[].cluster.certificate-authority",
            ) from None
        self._exec_credentials()
        cert, key = config.cert_data, config.key_data
        if config.cert_file or cert:
            _load_client_cert(context, config.cert_file, cert, config.key_file, key, config.source)
        return context

    def _connection(self, fresh: bool = False) -> http.client.HTTPConnection:
        conn: http.client.HTTPConnection | None = getattr(self._local, "conn", None)
        if conn is not None and not fresh:
            return conn
        if conn is not None:
            conn.close()
        proxy = _proxy_for(self.scheme, self.host)
        if self.scheme == "https":
            conn = _HTTPSConnection(
                self.host,
                self.port,
                timeout=self.timeout,
                context=self._ssl_context(),
                server_name=self.config.tls_server_name or self.host,
            )
            if proxy:
                conn = _HTTPSConnection(
                    proxy[0],
                    proxy[1],
                    timeout=self.timeout,
                    context=self._ssl_context(),
                    server_name=self.config.tls_server_name or self.host,
                )
                conn.set_tunnel(self.host, self.port)
        else:
            conn = _HTTPConnection(*(proxy or (self.host, self.port)), timeout=self.timeout)
            conn._helm_nemo_proxied = bool(proxy)  # absolute URIs through a plain proxy
        self._local.conn = conn
        return conn

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    # ---- authentication
    def _exec_credentials(self, again: bool = False) -> None:
        plugin = self.config.exec_plugin
        if plugin is None or (self._exec_done and not again):
            return
        status = run_exec_plugin(plugin, self.config.cluster_info)
        self._exec_done = True
        self._exec_token = status.get("token") or None
        if status.get("clientCertificateData"):
            self.config.cert_data = status["clientCertificateData"].encode()
            self.config.key_data = (status.get("clientKeyData") or "").encode()

    def _headers(self) -> dict[str, str]:
        config = self.config
        headers = {"Accept": "application/json", "User-Agent": USER_AGENT}
        self._exec_credentials()  # once (its certificate, if it gives one, goes into the TLS context)
        token = self._exec_token or config.token
        if config.token_file and not token:
            try:
                with open(config.token_file) as handle:
                    token = handle.read().strip()
            except OSError as err:
                raise KubeConfigError(
                    f"cannot read the token file: {err.strerror or err}",
                    source=config.token_file,
                    json_path="$.users[].user.tokenFile",
                ) from None
        if token:
            headers["Authorization"] = f"Bearer {token}"
        elif config.username is not None and config.password is not None:
            import base64

            pair = f"{config.username}:{config.password}".encode()
            headers["Authorization"] = "Basic " + base64.b64encode(pair).decode()
        if config.impersonate_user:
            headers["Impersonate-User"] = config.impersonate_user
        return headers

    # ---- requests
    def request(
        self,
        method: str,
        path: str,
        query: dict[str, Any] | None = None,
        body: dict[str, Any] | None = None,
        accept: str = "application/json",
    ) -> tuple[int, bytes, str]:
        """(status, body, content type); the body decompressed. Raises KubeUnreachable when there is no
        HTTP answer. JSON is asked for with `Accept-Encoding: gzip` (a page of 500 pods: 3.3 MB, 0.23 MB
        compressed); text (logs) as it is."""
        url = self.base_path + path + ("?" + urlencode(query) if query else "")
        headers = self._headers()
        headers["Accept"] = accept
        if accept == "application/json":
            headers["Accept-Encoding"] = "gzip"
        payload = None
        if body is not None:
            payload = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        groups = self.config.impersonate_groups
        for attempt in range(3):
            conn = self._connection(fresh=attempt > 0)
            target = url
            if getattr(conn, "_helm_nemo_proxied", False):
                target = f"{self.scheme}://{self.host}:{self.port}{url}"
            try:
                conn.putrequest(method, target, skip_accept_encoding=True)
                for name, value in headers.items():
                    conn.putheader(name, value)
                for group in groups:
                    conn.putheader("Impersonate-Group", group)
                if payload is not None:
                    conn.putheader("Content-Length", str(len(payload)))
                conn.endheaders(payload)
                response = conn.getresponse()
                data = response.read()
            except (
                ConnectionResetError,
                BrokenPipeError,
                http.client.RemoteDisconnected,
                http.client.CannotSendRequest,
                http.client.ResponseNotReady,
            ) as err:
                if attempt < 2:
                    continue  # a kept-alive connection the server closed meanwhile (every request here is read-only)
                raise KubeUnreachable(self.config.server, _reason(err)) from None
            except ssl.SSLCertVerificationError as err:
                raise KubeUnreachable(
                    self.config.server,
                    f"TLS: {err.verify_message or err.reason}",
                    hint="the server's certificate is not signed by the kubeconfig's "
                    "certificate-authority (or --kube-ca-file); check the context",
                ) from None
            except (OSError, http.client.HTTPException) as err:
                self.close()
                raise KubeUnreachable(self.config.server, _reason(err)) from None
            if response.status == 401 and self.config.exec_plugin is not None and attempt == 0:
                self._exec_credentials(again=True)  # an expired token: ask the plugin once more
                headers.update(self._headers())
                continue
            if response.getheader("Content-Encoding", "").strip().lower() == "gzip":
                data = _gunzip(data, self.config.server)
            return response.status, data, response.getheader("Content-Type", "")
        raise KubeUnreachable(self.config.server, "the connection kept closing")  # pragma: no cover

    def _json(
        self, method: str, path: str, query: dict[str, Any] | None = None, body: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        status, data, _ = self.request(method, path, query, body)
        if status >= 400:
            raise api_error(status, data, method, path)
        try:
            answer: dict[str, Any] = decode(data)  # the API answers with an object
            return answer
        except ValueError:
            raise KubeApiError(status, "BadResponse", f"the answer is not JSON: {data[:200]!r}", method, path) from None

    def get(self, path: str, query: dict[str, Any] | None = None) -> dict[str, Any]:
        """One object (or any JSON document) at `path`; KubeApiError on failure (`.not_found` for 404)."""
        return self._json("GET", path, query)

    def get_or_none(self, path: str, query: dict[str, Any] | None = None) -> dict[str, Any] | None:
        try:
            return self.get(path, query)
        except KubeApiError as err:
            if err.not_found:
                return None
            raise

    def list(
        self, path: str, query: dict[str, Any] | None = None, limit: int = PAGE_SIZE
    ) -> builtins.list[dict[str, Any]]:
        """Every item of a collection, page by page (`limit` + `continue`). The next page is asked for (on
        another connection) while this one is parsed: its continue token sits in the list's metadata,
        which the API server writes before the items, so it is read from the head of the answer."""
        import threading

        items: builtins.list[dict[str, Any]] = []
        params = dict(query or {})
        if limit:
            params["limit"] = str(limit)
        fetched: dict[str, Any] = {}

        def fetch(into: dict[str, Any], page_params: dict[str, Any]) -> None:
            try:
                into["answer"] = self.request("GET", path, page_params)
            except BaseException as err:  # raised in the caller's thread
                into["error"] = err

        fetch(fetched, dict(params))
        while True:
            if "error" in fetched:
                raise fetched["error"]
            status, data, _ = fetched["answer"]
            if status >= 400:
                raise api_error(status, data, "GET", path)
            token = _continue_token(data) if limit else None
            following: dict[str, Any] = {}
            thread: threading.Thread | None = None
            if token:
                params["continue"] = token
                thread = threading.Thread(target=fetch, args=(following, dict(params)), daemon=True)
                thread.start()
            try:
                page = decode(data)
            except ValueError:
                raise KubeApiError(
                    status, "BadResponse", f"the answer is not JSON: {data[:200]!r}", "GET", path
                ) from None
            items.extend(page.get("items") or [])
            real = (page.get("metadata") or {}).get("continue")
            if thread is None:
                if not real or not limit:
                    return items
                params["continue"] = real  # not found in the head: asked now
                fetch(following, dict(params))
            else:
                thread.join()
                if real != token:  # pragma: no cover - a head that lied: ask again with the real token
                    params["continue"] = real
                    following = {}
                    fetch(following, dict(params))
            fetched = following

    def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """POST `body` to a collection (SelfSubjectAccessReview and other virtual resources)."""
        return self._json("POST", path, body=body)

    def text(self, path: str, query: dict[str, Any] | None = None) -> str:
        """A plain-text GET (pods/NAME/log)."""
        status, data, _ = self.request("GET", path, query, accept="*/*")
        if status >= 400:
            raise api_error(status, data, "GET", path)
        return data.decode("utf-8", "replace")

    def stream(self, path: str, query: dict[str, Any] | None = None, chunk: int = 65536) -> Iterator[str]:
        """A plain-text GET read as it arrives (pods/NAME/log?follow=true): yields text pieces until the
        server ends the answer. The stream has its own connection, closed when the caller stops reading."""
        import codecs

        url = self.base_path + path + ("?" + urlencode(query) if query else "")
        headers = self._headers()
        headers["Accept"] = "*/*"
        conn = self._connection(fresh=True)
        self._local.conn = None  # the stream's own: the next request opens another one
        target = url
        if getattr(conn, "_helm_nemo_proxied", False):
            target = f"{self.scheme}://{self.host}:{self.port}{url}"
        try:
            conn.putrequest("GET", target, skip_accept_encoding=True)
            for name, value in headers.items():
                conn.putheader(name, value)
            for group in self.config.impersonate_groups:
                conn.putheader("Impersonate-Group", group)
            conn.endheaders()
            response = conn.getresponse()
        except (OSError, http.client.HTTPException) as err:
            conn.close()
            raise KubeUnreachable(self.config.server, _reason(err)) from None
        try:
            if response.status >= 400:
                raise api_error(response.status, response.read(), "GET", path)
            decoder = codecs.getincrementaldecoder("utf-8")("replace")
            while True:
                try:
                    data = response.read1(chunk)
                except (OSError, http.client.HTTPException) as err:
                    raise KubeUnreachable(self.config.server, _reason(err)) from None
                if not data:
                    break
                yield decoder.decode(data)
            tail = decoder.decode(b"", final=True)
            if tail:
                yield tail
        finally:
            conn.close()

    # ---- discovery
    def version(self) -> dict[str, Any]:
        return self.get("/version")

    def resources(self, group_version: str) -> builtins.list[dict[str, Any]] | None:
        """The APIResourceList's resources of a group/version, or None when the server does not serve it."""
        path = "/api/v1" if group_version == "v1" else f"/apis/{group_version}"
        found = self.get_or_none(path)
        return None if found is None else list(found.get("resources") or [])

    def groups(self) -> dict[str, builtins.list[str]]:
        """group -> its served versions (preferred first), core as ""."""
        out = {"": ["v1"]}
        for group in self.get("/apis").get("groups") or []:
            versions = [v.get("version") for v in group.get("versions") or []]
            preferred = (group.get("preferredVersion") or {}).get("version")
            if preferred in versions:
                versions.remove(preferred)
                versions.insert(0, preferred)
            out[group.get("name", "")] = versions
        return out


_GC_LOCK = threading.Lock()
_GC_PAUSES = [0, False]  # decodes under way with the collector paused; whether it was enabled before


def decode(data: bytes) -> Any:
    """json.loads. An answer of BIG_ANSWER bytes or more (a page of pods, the node list) is decoded with
    the cyclic garbage collector paused, and the objects it made are then frozen (gc.freeze: moved out of
    the generations every collection walks). Decoding makes a dict or list for each JSON object or array
    (a pod with its managedFields: ~300), and each collection those allocations set off walks every
    container decoded before: 33 MB of pods (10 pages) took 0.9-1.2 s to decode with the collector, 0.3 s
    without. Pausing alone only moves that cost: the first full collection afterwards walks them all
    (the checks' allocations then took 2 s instead of 0.2). What is decoded here is kept until the command
    ends (the preflight's facts, status's pods); frozen objects are still freed when nothing refers to
    them (reference counting), only cycles among them would wait for the process's end."""
    if len(data) < BIG_ANSWER:
        return json.loads(data)
    import gc

    with _GC_LOCK:
        if not _GC_PAUSES[0]:
            _GC_PAUSES[1] = gc.isenabled()
            gc.disable()
        _GC_PAUSES[0] += 1
    try:
        return json.loads(data)
    finally:
        with _GC_LOCK:
            _GC_PAUSES[0] -= 1
            if not _GC_PAUSES[0]:
                gc.freeze()
                if _GC_PAUSES[1]:
                    gc.enable()


def _gunzip(data: bytes, server: str) -> bytes:
    import zlib

    try:
        return zlib.decompress(data, 16 + zlib.MAX_WBITS)  # the gzip container
    except zlib.error as err:
        raise KubeUnreachable(server, f"the answer's gzip is corrupt ({err})") from None


_CONTINUE = None


def _continue_token(data: bytes) -> str | None:
    """The list's metadata.continue, read from the first 4 KiB of the answer (None: not there)."""
    global _CONTINUE
    if _CONTINUE is None:
        import re

        _CONTINUE = re.compile(rb'"continue"\s*:\s*"([^"\\]*)"')
    head = data[:4096]
    items = head.find(b'"items"')
    found = _CONTINUE.search(head, 0, items if items >= 0 else len(head))
    return found.group(1).decode() if found else None


def api_error(status: int, data: bytes, method: str, path: str) -> KubeApiError:
    try:
        body = json.loads(data)
    except ValueError:
        body = None
    if isinstance(body, dict) and body.get("kind") == "Status":
        return KubeApiError(status, body.get("reason") or "", body.get("message") or "", method, path)
    reason = http.client.responses.get(status, "")
    return KubeApiError(status, reason, data.decode("utf-8", "replace").strip()[:300], method, path)


def _reason(err: BaseException) -> str:
    if isinstance(err, socket.timeout):
        return "timed out"
    if isinstance(err, ConnectionRefusedError):
        return "connection refused"
    if isinstance(err, socket.gaierror):
        return f"cannot resolve the host name ({err.strerror or err})"
    if isinstance(err, ssl.SSLError):
        return f"TLS: {err.reason or err}"
    return getattr(err, "strerror", None) or str(err) or type(err).__name__


class _HTTPConnection(http.client.HTTPConnection):
    """Plain HTTP; `_helm_nemo_proxied`: through a plain proxy (the request line carries the absolute URI)."""

    _helm_nemo_proxied = False


class _HTTPSConnection(http.client.HTTPSConnection):
    """HTTPS with the kubeconfig's tls-server-name (SNI and the name the certificate is checked against)."""

    def __init__(self, host: str, port: int, *, timeout: float, context: ssl.SSLContext, server_name: str) -> None:
        super().__init__(host, port, timeout=timeout, context=context)
        self._tls_context: ssl.SSLContext = context  # http.client keeps it as `_context`, which typeshed omits
        self._server_name = server_name

    def connect(self) -> None:
        http.client.HTTPConnection.connect(self)  # through the proxy's tunnel when one is set
        self.sock = self._tls_context.wrap_socket(self.sock, server_hostname=self._server_name)


def _proxy_for(scheme: str, host: str) -> tuple[str, int] | None:
    """HTTPS_PROXY / HTTP_PROXY, unless NO_PROXY names the host; never for loopback (Go's rule)."""
    names = ("https_proxy", "HTTPS_PROXY") if scheme == "https" else ("http_proxy", "HTTP_PROXY")
    proxy = next((os.environ[n] for n in names if os.environ.get(n)), None)
    if not proxy or host in ("localhost", "::1") or host.startswith("127."):
        return None
    import urllib.request

    # proxy_bypass_environment: public at runtime (NO_PROXY matching), absent from typeshed
    bypass: Callable[[str], bool] = getattr(urllib.request, "proxy_bypass_environment", lambda host: False)
    if bypass(host):
        return None
    try:
        split = urlsplit(proxy if "://" in proxy else "http://" + proxy)
        hostname, port = split.hostname, split.port or 80
    except ValueError:  # a bad [IPv6] host, a port that is no number or out of range
        hostname = None
    if not hostname:  # as Go: an invalid proxy address is an error, not a direct connection
        variable = next(n for n in names if os.environ.get(n))
        raise KubeConfigError(
            f"{variable}={proxy!r} is not a proxy address (http://host[:port])",
            source=variable,
            hint=f"fix or unset {variable}",
        )
    return hostname, port


def _load_client_cert(
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
