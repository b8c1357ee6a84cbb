"""A small, read-mostly Kubernetes API client: the cluster helm would use, without helm.

Standard library only (http.client + ssl + json; PyYAML for kubeconfig files), imported only by the
commands that talk to the cluster (`preflight`, the preflight of install/upgrade, `status`):

- `config`: the connection helm's plugins are given: kubeconfig files (`--kubeconfig`, else
  `KUBECONFIG`, a path list merged as client-go merges it, else ~/.kube/config), the context
  (`--kube-context` / `HELM_KUBECONTEXT`), namespace (`-n` / `HELM_NAMESPACE`), the overrides helm passes
  (`HELM_KUBEAPISERVER`, `HELM_KUBETOKEN`, `HELM_KUBECAFILE`, `HELM_KUBEINSECURE_SKIP_TLS_VERIFY`,
  `HELM_KUBETLS_SERVER_NAME`, `HELM_KUBEASUSER`, `HELM_KUBEASGROUPS`), client certificates and keys as
  data or files, tokens and token files, CA data or file, and exec credential plugins
  (client.authentication.k8s.io/v1 and v1beta1: gke-gcloud-auth-plugin, `aws eks get-token`);
- `client`: `KubeClient` with `get`, `list` (paginated with `limit` + `continue`), `create` (for
  SelfSubjectAccessReview), `text` (pods/log), discovery and version;
- `errors`: `KubeConfigError` (bad settings: a user error, exit 2), `KubeUnreachable` (no answer,
  TLS failure), `KubeApiError` (the server's `Status`: code, reason, message). Each formats as one screen.

Why not the `kubernetes` package: importing it costs ~0.3-0.5 s (every API model is a module), its
kubeconfig loader handles exec plugins only partly (no v1 ExecCredential `interactive`/cluster info
until recent versions) and its pinned urllib3/google-auth ranges drift with every release; what
preflight and status need is a dozen GETs and one POST.
"""

from __future__ import annotations

from helm_nemo.kube.errors import KubeApiError, KubeConfigError, KubeError, KubeUnreachable

__all__ = ["KubeApiError", "KubeConfigError", "KubeError", "KubeUnreachable", "connect"]

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only
    from collections.abc import Mapping

    from helm_nemo.kube.client import KubeClient


def connect(
    extra: list[str] | None = None,
    env: Mapping[str, str] | None = None,
    *,
    namespace: str | None = None,
    timeout: float = 30.0,
) -> KubeClient:
    """A KubeClient for the cluster helm would use with these helm flags (`extra`) and environment."""
    from helm_nemo.kube.client import KubeClient
    from helm_nemo.kube.config import resolve

    return KubeClient(resolve(extra or [], env, namespace=namespace), timeout=timeout)
