"""Two manifests (installed, would be sent) compared object by object: added, removed, changed objects,
and for a changed one every field that differs, old -> new.

An object is identified by apiVersion, kind, namespace and name (a changed apiVersion is one object
removed and another added, as Kubernetes sees it). Fields are compared semantically with
helm_nemo.diff.semantic (key order, the order of named list items, null versus absent, blank lines in
scripts do not count); paths are relative to the object, e.g.
`.spec.replicatedJobs[workload].template.spec.parallelism` or `.metadata.labels["kueue.x-k8s.io/queue-name"]`.

Why our own comparison rather than deepdiff (which the tests use elsewhere): deepdiff's paths are
`root['spec']['replicatedJobs'][0]['template']…['env'][7]['value']`, positions instead of the names
Kubernetes merges list items by, and with ignore_order its reports move items around instead of naming
them; the semantic comparison already keys env, volumes, containers, ports … by name and tolerations by
key:effect, which is what a reader of a diff needs, and costs no import at start-up.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from helm_nemo.diff.semantic import Difference, _diff, _plain, _unique, normalize, parse_manifests

HOOK_ANNOTATION = "helm.sh/hook"


@dataclass(frozen=True, order=True)
class ObjectId:
    """What names an object in a release: apiVersion, kind, namespace, name."""

    api_version: str
    kind: str
    namespace: str
    name: str

    def __str__(self) -> str:
        where = f"{self.namespace}/{self.name}" if self.namespace else self.name
        return f"{self.api_version} {self.kind} {where}"

    def as_json(self) -> dict[str, str]:
        return {"apiVersion": self.api_version, "kind": self.kind, "namespace": self.namespace, "name": self.name}


@dataclass
class ObjectDiff:
    """One object that would be added, removed or changed, with its changed fields."""

    id: ObjectId
    change: str  # added | removed | changed
    fields: list[Difference] = field(default_factory=list)  # for a changed object
    old: dict[str, Any] | None = None  # the installed object (removed, changed)
    new: dict[str, Any] | None = None  # the object that would be sent (added, changed)


def object_id(doc: dict[str, Any]) -> ObjectId:
    meta = doc.get("metadata") or {}
    return ObjectId(
        str(doc.get("apiVersion") or ""),
        str(doc.get("kind") or ""),
        str(meta.get("namespace") or ""),
        str(meta.get("name") or ""),
    )


def index(docs: list[dict[str, Any]]) -> dict[ObjectId, dict[str, Any]]:
    """Objects by identity; a second object with the same identity gets `name#2` (it must not be hidden)."""
    seen: set[str] = set()
    out: dict[ObjectId, dict[str, Any]] = {}
    for doc in docs:
        ident = object_id(doc)
        unique = _unique(str(ident), seen)
        if unique != str(ident):
            ident = ObjectId(ident.api_version, ident.kind, ident.namespace, ident.name + unique[len(str(ident)) :])
        out[ident] = doc
    return out


def without_hooks(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`helm get manifest` leaves hooks out; so does the comparison (`helm get hooks` has them)."""
    return [d for d in docs if HOOK_ANNOTATION not in ((d.get("metadata") or {}).get("annotations") or {})]


def diff_objects(old_docs: list[dict[str, Any]], new_docs: list[dict[str, Any]]) -> list[ObjectDiff]:
    """Every object that differs, in the order of the new manifest, then the removed ones."""
    old, new = index(without_hooks(old_docs)), index(without_hooks(new_docs))
    out: list[ObjectDiff] = []
    for ident in list(new) + [i for i in old if i not in new]:
        if ident not in old:
            out.append(ObjectDiff(ident, "added", new=new[ident]))
        elif ident not in new:
            out.append(ObjectDiff(ident, "removed", old=old[ident]))
        else:
            fields: list[Difference] = []
            _diff(normalize(old[ident]), normalize(new[ident]), "", fields, text=True)
            if fields:
                out.append(ObjectDiff(ident, "changed", fields, old=old[ident], new=new[ident]))
    return out


def diff_manifests(old_text: str, new_text: str) -> list[ObjectDiff]:
    return diff_objects(
        parse_manifests(old_text) if old_text.strip() else [], parse_manifests(new_text) if new_text.strip() else []
    )


def plain(value: Any) -> Any:
    """A difference's value without the comparison's markers (named lists back to lists, scripts to text)."""
    return _plain(value)
