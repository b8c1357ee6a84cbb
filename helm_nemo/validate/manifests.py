"""Entry points: validate_manifests (every problem of every document) and format_problems."""

from __future__ import annotations

from functools import cache

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: importing typing costs every run start-up time
    from typing import Any
    from collections.abc import Iterable, Iterator, Mapping

from helm_nemo.validate.checks.accelerators import check_fabric, check_gpus, check_interfaces
from helm_nemo.validate.checks.containers import check_containers
from helm_nemo.validate.checks.names import check_derived_names, check_labels, check_names, check_sizes
from helm_nemo.validate.checks.quantities import check_quantities
from helm_nemo.validate.compiled import known_kinds, schema_problems, validator_for
from helm_nemo.validate.documents import (
    ACCELERATOR_LABEL,
    Collector,
    DEFAULT_KUBE_VERSION,
    Document,
    ManifestProblem,
    mapping,
    parse_documents,
    short,
    text,
)
from helm_nemo.validate.pods import pod_templates
from helm_nemo.validate.schemas import resolve_kube_version


class ShippedProfiles:
    """The accelerator profiles under values/accelerators/, each read (and checked) on first use only: a
    render names one accelerator, and reading all of them costs more than validating the render."""

    def get(self, accelerator: str) -> dict[str, Any] | None:
        return shipped_profile(accelerator)

    def __iter__(self) -> Iterator[str]:
        from helm_nemo import resources

        return iter(sorted(p.stem for p in resources.accelerators_dir().glob("*.yaml")))


@cache
def shipped_profile(accelerator: str) -> dict[str, Any] | None:
    import re

    from helm_nemo import resources
    from helm_nemo.generate.profiles import load_profile

    path = resources.accelerators_dir() / f"{accelerator}.yaml"
    if not re.fullmatch(r"[a-z0-9][a-z0-9-]*", accelerator) or not path.is_file():
        return None
    return load_profile(path)


def validate_manifests(
    docs: str | Iterable[Any],
    *,
    kube_version: str = DEFAULT_KUBE_VERSION,
    profiles: Mapping[str, dict[str, Any]] | None = None,
) -> list[ManifestProblem]:
    """Every problem of every document: schema errors (all of them), unknown kinds, and the extra checks.

    `docs`: a `helm template` stream (str), or parsed documents (dicts, or Documents). `profiles`:
    accelerator profiles by id (default: values/accelerators/, loaded on first need)."""
    kube = resolve_kube_version(kube_version)
    problems: list[ManifestProblem] = []
    if isinstance(docs, str):
        documents, problems = parse_documents(docs)
    else:
        documents = [
            d if isinstance(d, Document) else Document(d, None, i) for i, d in enumerate(docs) if d is not None
        ]
    for document in documents:
        problems += _validate_one(document, kube, profiles)
    return problems


def _validate_one(
    document: Document, kube: tuple[int, int], profiles: Mapping[str, dict[str, Any]] | None
) -> list[ManifestProblem]:
    doc = document.data
    if not isinstance(doc, dict):
        return [
            ManifestProblem(
                "?",
                "?",
                "$",
                f"a manifest must be a mapping, got {short(doc)}",
                "yaml",
                document.source,
                document.index,
            )
        ]
    out = Collector(doc, document.source, document.index)
    api_version, kind = doc.get("apiVersion"), doc.get("kind")
    meta = doc.get("metadata")
    for key, value in (("apiVersion", api_version), ("kind", kind)):
        if value is None or value == "":
            out.add((), f"{key} is missing", "document")
        elif not isinstance(value, str):  # no schema can be chosen: this is the only word on it
            out.add((key,), f"{key} must be a string, got {short(value)}", "document")
    # metadata or its name of another type: the schema check reports it
    if meta is None or isinstance(meta, dict) and meta.get("name") in (None, ""):
        out.add(("metadata",), "metadata.name is missing", "document")
    if out.problems and not (isinstance(api_version, str) and isinstance(kind, str)):
        return out.problems
    validator = validator_for(api_version, kind, kube)
    if validator is None:
        out.add(
            ("kind",),
            f"no schema for {api_version} {kind} (not a core kind of Kubernetes {kube[0]}.{kube[1]}, "
            f"nor a CRD in schemas/k8s/: {', '.join(known_kinds(kube))})",
            "unknown-kind",
        )
    else:
        schema_problems(out, validator, doc)
    pods = pod_templates(doc)
    check_names(out, doc, pods)
    check_derived_names(out, doc)
    check_labels(out, doc, pods)
    check_sizes(out, doc, pods)
    check_quantities(out, doc, pods)
    check_containers(out, pods)
    check_interfaces(out, doc, pods)
    accelerator = text(mapping(mapping(meta).get("labels")).get(ACCELERATOR_LABEL))  # another type: the schema's
    profile = None
    if accelerator is not None:
        known = profiles if profiles is not None else ShippedProfiles()
        profile = known.get(accelerator)
        if profile is None:
            out.add(
                ("metadata", "labels", ACCELERATOR_LABEL),
                f"no accelerator profile {accelerator!r} (have: {', '.join(sorted(known))})",
                "accelerator",
            )
    if pods:
        check_gpus(out, doc, pods, profile)
        check_fabric(out, pods, profile)
    return out.problems


# Kinds without a namespace: one name per cluster, whichever namespace a release goes to.
CLUSTER_SCOPED = {
    "PersistentVolume",
    "StorageClass",
    "ClusterRole",
    "ClusterRoleBinding",
    "Namespace",
    "PriorityClass",
    "CustomResourceDefinition",
    "ValidatingWebhookConfiguration",
    "MutatingWebhookConfiguration",
    "ResourceFlavor",
    "ClusterQueue",
    "DeviceClass",
}


def duplicate_objects(releases: Iterable[tuple[str, str | Iterable[Any]]]) -> list[ManifestProblem]:
    """Objects two releases of one run (or one release twice) would both create: (release, rendered stream)
    pairs in install order; a problem on each later copy, naming the first. A PersistentVolume's name is
    one per cluster; a namespaced object is compared within the namespace it names (the run's own when
    it names none, the same for every release)."""
    seen: dict[tuple[Any, ...], str] = {}
    problems: list[ManifestProblem] = []
    for release, stream in releases:
        documents = (
            parse_documents(stream)[0]
            if isinstance(stream, str)
            else [d if isinstance(d, Document) else Document(d, None, i) for i, d in enumerate(stream)]
        )
        for document in documents:
            doc = document.data
            meta = doc.get("metadata") if isinstance(doc, dict) else None
            if not isinstance(meta, dict) or not isinstance(meta.get("name"), str):
                continue
            kind, group = str(doc.get("kind")), str(doc.get("apiVersion", "")).rpartition("/")[0]
            namespace = "" if kind in CLUSTER_SCOPED else str(meta.get("namespace") or "")
            identity = (group, kind, namespace, meta["name"])
            if identity in seen:
                where = f"release {seen[identity]}" + (" too" if seen[identity] == release else "")
                problems.append(
                    ManifestProblem(
                        kind,
                        meta["name"],
                        "$.metadata.name",
                        f"{kind} {meta['name']!r} is also rendered by {where}; the second "
                        "install would fail (the object exists)",
                        "duplicate-object",
                        document.source,
                        document.index,
                    )
                )
            else:
                seen[identity] = release
    return problems


def format_problems(problems: Iterable[ManifestProblem], *, title: str | None = None) -> str:
    """Problems grouped per object, in stream order; the last line counts them."""
    problems = list(problems)
    if not problems:
        return (title + "\n" if title else "") + "no problems"
    groups: dict[tuple[Any, ...], list[ManifestProblem]] = {}
    for problem in problems:
        groups.setdefault((problem.index, problem.kind, problem.name, problem.source), []).append(problem)
    lines = [title] if title else []
    for (_, kind, name, source), items in groups.items():
        lines.append(f"{kind}/{name}" + (f" ({source})" if source else "") + ":")
        for item in items:
            lines.append(f"  {item.path}: {item.message} [{item.check}]")
    lines.append(f"{len(problems)} problem(s) in {len(groups)} object(s)")
    return "\n".join(lines)
