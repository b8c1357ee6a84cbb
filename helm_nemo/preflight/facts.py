"""What the checks read from the cluster, each read once (cached) and the big ones started side by side.

Every read is a GET or LIST (plus SelfSubjectAccessReviews, which change nothing). A read that is
forbidden or fails is remembered as such, so the checks that need it say `skipped` with the reason
instead of failing the whole run.
"""

from __future__ import annotations

import builtins
import threading

from helm_nemo.kube.errors import KubeApiError, KubeError

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only
    from collections.abc import Callable, Hashable
    from typing import Any, TypeVar

    from helm_nemo.kube.client import KubeClient

    T = TypeVar("T")


# The pods read for the GPU count: bound to a node and not ended.
POD_SELECTOR = "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"


class Unavailable(Exception):
    """A read the checks needed could not be made (forbidden, server error): the check is skipped."""


class Facts:
    def __init__(self, client: KubeClient) -> None:
        self.client = client
        self.namespace = client.namespace
        self._cache: dict[Hashable, Any] = {}  # key -> the answer, or the exception the read raised
        self._lock = threading.Lock()
        self._threads: dict[Hashable, threading.Thread] = {}

    # ---- caching
    def _once(self, key: Hashable, read: Callable[[], T]) -> T:
        with self._lock:
            thread = self._threads.get(key)
        if thread is not None and thread is not threading.current_thread():
            thread.join()
        with self._lock:
            if key in self._cache:
                value: T | BaseException = self._cache[key]
                if isinstance(value, BaseException):
                    raise value
                return value
        try:
            value = read()
        except KubeApiError as err:
            value = Unavailable(f"{err.method} {err.path}: {err.code} {err.reason}: {err.message}")
        except KubeError as err:
            value = err
        with self._lock:
            self._cache[key] = value
        if isinstance(value, BaseException):
            raise value
        return value

    def prefetch(self, key: Hashable, read: Callable[[], object]) -> None:
        """Start a read in a thread; the first `_once(key, …)` waits for it."""

        def run() -> None:
            try:
                self._once(key, read)
            except Exception:  # kept in the cache, raised to the reader
                pass

        thread = threading.Thread(target=run, daemon=True)
        with self._lock:
            self._threads[key] = thread
        thread.start()

    # ---- discovery
    def version(self) -> dict[str, Any]:
        return self._once("version", self.client.version)

    def resources(self, group_version: str) -> dict[str, dict[str, Any]] | None:
        """kind -> its APIResource (name = plural, namespaced) for a served group/version; None: not served."""

        def read() -> dict[str, dict[str, Any]] | None:
            found = self.client.resources(group_version)
            if found is None:
                return None
            return {r["kind"]: r for r in found if "/" not in r.get("name", "")}

        return self._once(("resources", group_version), read)

    def served(self, api_version: str, kind: str) -> dict[str, Any] | None:
        return (self.resources(api_version) or {}).get(kind)

    def path(self, api_version: str, kind: str, namespace: str | None, name: str | None = None) -> str | None:
        """The REST path of a kind (a collection, or one object), or None when the kind is not served."""
        resource = self.served(api_version, kind)
        if resource is None:
            return None
        base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
        if resource.get("namespaced") and namespace is not None:
            base += f"/namespaces/{namespace}"
        base += f"/{resource['name']}"
        return base + (f"/{name}" if name else "")

    def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        """One object, or None when it (or its kind) does not exist."""

        def read() -> dict[str, Any] | None:
            path = self.path(api_version, kind, namespace, name)
            return None if path is None else self.client.get_or_none(path)

        return self._once(("get", api_version, kind, namespace, name), read)

    def list(
        self, api_version: str, kind: str, namespace: str | None = None, query: dict[str, Any] | None = None
    ) -> builtins.list[dict[str, Any]] | None:
        def read() -> builtins.list[dict[str, Any]] | None:
            path = self.path(api_version, kind, namespace)
            return None if path is None else self.client.list(path, query)

        key = ("list", api_version, kind, namespace, tuple(sorted((query or {}).items())))
        return self._once(key, read)

    # ---- the big lists
    def read_nodes(self) -> builtins.list[dict[str, Any]]:
        """Every node, without managedFields (the checks read labels, taints, conditions, allocatable)."""
        return self.client.list("/api/v1/nodes", managed_fields=False)

    def read_pods(self) -> builtins.list[dict[str, Any]]:
        """Pods that hold a node's resources now, in every namespace: bound to a node (`spec.nodeName`
        set) and not ended (not Succeeded or Failed). The API server filters them (capacity._in_use
        skips the others too), so finished pods and a queue of unscheduled ones are never sent. Without
        managedFields: half of a pod's bytes as the server sends it, never read by a check."""
        return self.client.list("/api/v1/pods", {"fieldSelector": POD_SELECTOR}, managed_fields=False)

    def nodes(self) -> builtins.list[dict[str, Any]]:
        return self._once("nodes", self.read_nodes)

    def pods(self) -> builtins.list[dict[str, Any]]:
        return self._once("pods", self.read_pods)

    def allowed(self, verb: str, group: str, resource: str, namespace: str | None) -> tuple[bool, str]:
        """A SelfSubjectAccessReview: (allowed, the server's reason)."""

        def read() -> tuple[bool, str]:
            attributes = {"verb": verb, "group": group, "resource": resource}
            if namespace:
                attributes["namespace"] = namespace
            review = self.client.create(
                "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
                {
                    "apiVersion": "authorization.k8s.io/v1",
                    "kind": "SelfSubjectAccessReview",
                    "spec": {"resourceAttributes": attributes},
                },
            )
            status = review.get("status") or {}
            return bool(status.get("allowed")), status.get("reason") or status.get("evaluationError") or ""

        return self._once(("ssar", verb, group, resource, namespace), read)
