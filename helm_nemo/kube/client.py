"""KubeClient: GET, paginated LIST, POST and raw text GET against one API server (http.client + ssl).

One keep-alive connection per thread (several threads may read side by side). JSON answers are asked
for gzip-compressed, as client-go asks (the API server compresses those over 128 KiB), and big ones are
decoded with the cyclic garbage collector out of the way (see `decode`). Authentication as
client-go does it: a bearer token (kubeconfig `token`, `tokenFile` re-read on every request, helm's
`--kube-token`), an exec credential plugin's token or client certificate (run once, run again once when
the server answers 401), basic auth, client certificates; impersonation headers for `--kube-as-user` /
`--kube-as-group`. HTTPS proxies from `HTTPS_PROXY` / `NO_PROXY` (never for loopback), as Go does.

The client holds the connection per thread and the credentials; the parts live beside it: kube/transport.py
(connections, proxies, the words of a failed request), kube/auth.py (client certificates given as data, exec
credential plugins), kube/paging.py (LIST page by page, `decode`).
"""

from __future__ import annotations

import builtins
import http.client
import json
import ssl
import threading
from urllib.parse import urlencode, urlsplit

from helm_nemo.kube.auth import load_client_cert, run_exec_plugin
from helm_nemo.kube.config import ClusterConfig
from helm_nemo.kube.errors import KubeApiError, KubeConfigError, KubeUnreachable, api_error
from helm_nemo.kube.paging import PAGE_SIZE, decode, list_all
from helm_nemo.kube.transport import PlainConnection, TLSConnection, failure_reason, gunzip, proxy_for

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only
    from collections.abc import Iterator
    from typing import Any

USER_AGENT = "helm-nemo"


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
            load_client_cert(context, config.cert_file, cert, config.key_file, key, config.source)
        return context

    def _connection(self, fresh: bool = False) -> http.client.HTTPConnection:
        conn: http.client.HTTPConnection | None = getattr(self._local, "conn", None)
        if conn is not None and not fresh:
            return conn
        if conn is not None:
            conn.close()
        proxy = proxy_for(self.scheme, self.host)
        if self.scheme == "https":
            conn = TLSConnection(
                self.host,
                self.port,
                timeout=self.timeout,
                context=self._ssl_context(),
                server_name=self.config.tls_server_name or self.host,
            )
            if proxy:
                conn = TLSConnection(
                    proxy[0],
                    proxy[1],
                    timeout=self.timeout,
                    context=self._ssl_context(),
                    server_name=self.config.tls_server_name or self.host,
                )
                conn.set_tunnel(self.host, self.port)
        else:
            conn = PlainConnection(*(proxy or (self.host, self.port)), timeout=self.timeout)
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
                raise KubeUnreachable(self.config.server, failure_reason(err)) from None
            except ssl.SSLCertVerificationError as err:
                raise KubeUnreachable(
                    self.config.server,
                    f"TLS: {err.verify_message or err.reason}",
                    hint="the server's certificate is not signed by the kubeconfig's "
                    "certificate-authority (or --kube-ca-file); check the context",
                ) from None
            except (OSError, http.client.HTTPException) as err:
                self.close()
                raise KubeUnreachable(self.config.server, failure_reason(err)) from None
            if response.status == 401 and self.config.exec_plugin is not None and attempt == 0:
                self._exec_credentials(again=True)  # an expired token: ask the plugin once more
                headers.update(self._headers())
                continue
            if response.getheader("Content-Encoding", "").strip().lower() == "gzip":
                data = gunzip(data, self.config.server)
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
        """Every item of a collection, page by page (kube/paging.py)."""
        return list_all(self.request, path, query, limit)

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
            raise KubeUnreachable(self.config.server, failure_reason(err)) from None
        try:
            if response.status >= 400:
                raise api_error(response.status, response.read(), "GET", path)
            decoder = codecs.getincrementaldecoder("utf-8")("replace")
            while True:
                try:
                    data = response.read1(chunk)
                except (OSError, http.client.HTTPException) as err:
                    raise KubeUnreachable(self.config.server, failure_reason(err)) from None
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
