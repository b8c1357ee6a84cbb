"""The connections to the API server: plain HTTP or TLS (with the kubeconfig's tls-server-name), through an
HTTP(S) proxy from the environment as Go picks one, and the words for a request that got no answer.
"""

from __future__ import annotations

import http.client
import os
import socket
import ssl
from urllib.parse import urlsplit

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only
    from collections.abc import Callable

from helm_nemo.kube.errors import KubeConfigError, KubeUnreachable


class PlainConnection(http.client.HTTPConnection):
    """Plain HTTP; `_helm_nemo_proxied`: through a plain proxy (the request line carries the absolute URI)."""

    _helm_nemo_proxied = False


class TLSConnection(http.client.HTTPSConnection):
    """HTTPS with the kubeconfig's tls-server-name (SNI and the name the certificate is checked against)."""

    def __init__(self, host: str, port: int, *, timeout: float, context: ssl.SSLContext, server_name: str) -> None:
        super().__init__(host, port, timeout=timeout, context=context)
        self._tls_context: ssl.SSLContext = context  # http.client keeps it as `_context`, which typeshed omits
        self._server_name = server_name

    def connect(self) -> None:
        http.client.HTTPConnection.connect(self)  # through the proxy's tunnel when one is set
        self.sock = self._tls_context.wrap_socket(self.sock, server_hostname=self._server_name)


def proxy_for(scheme: str, host: str) -> tuple[str, int] | None:
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


def failure_reason(err: BaseException) -> str:
    if isinstance(err, socket.timeout):
        return "timed out"
    if isinstance(err, ConnectionRefusedError):
        return "connection refused"
    if isinstance(err, socket.gaierror):
        return f"cannot resolve the host name ({err.strerror or err})"
    if isinstance(err, ssl.SSLError):
        return f"TLS: {err.reason or err}"
    return getattr(err, "strerror", None) or str(err) or type(err).__name__


def gunzip(data: bytes, server: str) -> bytes:
    import zlib

    try:
        return zlib.decompress(data, 16 + zlib.MAX_WBITS)  # the gzip container
    except zlib.error as err:
        raise KubeUnreachable(server, f"the answer's gzip is corrupt ({err})") from None
