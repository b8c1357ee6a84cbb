"""Offline validation of rendered manifests: every object against its Kubernetes or CRD schema, plus
the checks a schema cannot express. No cluster needed.

Schemas
  * Core kinds: the strict schema files of the `kubernetes-validate` package (one folder per Kubernetes
    minor; Draft 2020-12 with `$ref`s into `_definitions.json`), used as data only. The Kubernetes
    version is a parameter; the newest shipped minor <= the one asked for is used.
  * CRD kinds: schemas/k8s/<group>/<kind>_<version>.json (see schemas/k8s/NOTICE), adjusted in memory
    when loaded: the root `metadata` gets the core ObjectMeta schema; every object schema with
    `properties` is closed (`additionalProperties: false`, the root too) unless it has
    `x-kubernetes-preserve-unknown-fields` (the API server prunes unknown fields silently, so a typo
    would be lost without a word); `null` is accepted where a value is typed (the API server drops
    nulls for CRDs, as the core schemas accept them); Go (RE2) regex patterns Python's `re` rejects
    are translated.
  * One compiled validator per (apiVersion, kind, Kubernetes minor), cached; every error of every
    document is reported. A kind without a schema is an error, not a warning.

Checks beyond the schemas (ids in CHECKS): DNS names and length limits (incl. the names the JobSet and
Job controllers derive), label syntax, resource quantities, requests vs limits, GPUs per pod vs the
accelerator profile, fabric devices vs fabric env, duplicate env / container / volume names, volume
mounts naming a volume, and the GKE multi-network annotation parsing as JSON.

Modules: documents (parsing, problems, check ids), schemas (where schemas come from), compiled (validators),
pods (pod templates inside workloads), quantity (resource quantities), checks/ (one module per topic),
manifests (the entry points). Nothing here runs helm: actions/lint.py calls this package, never the reverse.

Public API: validate_manifests(docs, kube_version=...) -> [ManifestProblem]; format_problems(problems).
"""

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: importing typing costs every run start-up time
    from typing import Any

# The public names load on first use: the values checks import checks/names.py, and importing this package
# must not load every check module and the schema machinery with it (start-up time).
_PUBLIC = {
    "CHECKS": "documents",
    "DEFAULT_KUBE_VERSION": "documents",
    "Document": "documents",
    "ManifestProblem": "documents",
    "parse_documents": "documents",
    "format_problems": "manifests",
    "validate_manifests": "manifests",
    "resolve_kube_version": "schemas",
    "shipped_kube_versions": "schemas",
}
__all__ = sorted(_PUBLIC)  # noqa: PLE0605 (names served lazily by __getattr__)


def __getattr__(name: str) -> "Any":
    from helm_nemo.lazy import attribute

    return attribute(__name__, _PUBLIC, name)
