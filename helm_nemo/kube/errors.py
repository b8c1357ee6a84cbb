"""What can go wrong talking to a cluster, each as one screen of text (never a traceback).

`KubeConfigError` is bad input (kubeconfig, context, credentials settings): a UserError, exit 2.
`KubeUnreachable`: the server did not answer, or TLS failed. `KubeApiError`: the server answered with a
failure `Status` (401, 403, 404, 5xx ...), with its code, reason and message.
"""

from __future__ import annotations

from helm_nemo.user_errors import Problem, UserError


class KubeError(Exception):
    """Any failure to get an answer from the cluster. `format()` is the one-screen message."""

    exit_code = 2
    hint: str | None = None

    def format(self) -> str:
        text = f"helm nemo: {self}"
        if self.hint:
            text += f"\n    hint: {self.hint}"
        return text


class KubeConfigError(UserError, KubeError):
    """The settings name no usable cluster: no kubeconfig, an unknown context, an unreadable file,
    a failed credential plugin. A user error: exit 2."""

    def __init__(self, message: str, *, source: str | None = None, json_path: str = "$", hint: str | None = None):
        self.message = message
        self.hint = hint
        super().__init__(
            Problem(source or "<kubeconfig>", None, None, json_path, message, None, hint),
            title="helm nemo: cannot connect to the cluster (kubeconfig):",
        )

    def format(self, max_lines: int = 40) -> str:  # UserError's layout
        return UserError.format(self, max_lines)


class KubeUnreachable(KubeError):
    """No HTTP answer: connection refused, DNS, timeout, TLS verification."""

    def __init__(self, server: str, reason: str, hint: str | None = None):
        self.server, self.reason = server, reason
        self.hint = hint or (
            "check the kubeconfig's server and credentials (kubectl cluster-info), or choose "
            "another context with --kube-context"
        )
        super().__init__(f"cannot reach the Kubernetes API at {server}: {reason}")


class KubeApiError(KubeError):
    """The API server answered with a failure Status."""

    def __init__(self, code: int, reason: str, message: str, method: str = "GET", path: str = ""):
        self.code, self.reason, self.message, self.method, self.path = code, reason, message, method, path
        self.hint = {
            401: "the credentials were refused: log in again (gcloud container clusters get-credentials, "
            "aws eks update-kubeconfig) or check the token",
            403: "your identity may not do this: ask for the RBAC permission",
        }.get(code)
        super().__init__(f"{method} {path}: {code} {reason}: {message}")

    @property
    def not_found(self) -> bool:
        return self.code == 404

    @property
    def forbidden(self) -> bool:
        return self.code == 403


def api_error(status: int, data: bytes, method: str, path: str) -> KubeApiError:
    """The error of an answer with an error status: the server's Status when it sent one, else the HTTP reason."""
    import json
    from http.client import responses

    try:
        body = json.loads(data)
    except ValueError:
        body = None
    if isinstance(body, dict) and body.get("kind") == "Status":
        return KubeApiError(status, body.get("reason") or "", body.get("message") or "", method, path)
    reason = responses.get(status, "")
    return KubeApiError(status, reason, data.decode("utf-8", "replace").strip()[:300], method, path)
