"""Rendered documents and the problems found in them: parsing a `helm template` stream, check ids,
the collector every check reports into."""

from __future__ import annotations

import json
import re
from collections import namedtuple

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: importing typing costs every run start-up time
    from typing import Any
    from collections.abc import Iterable, Mapping

DEFAULT_KUBE_VERSION = "1.32"
ACCELERATOR_LABEL = "helm-nemo.dev/accelerator"
GPU_RESOURCE = "nvidia.com/gpu"
EFA_RESOURCE = "vpc.amazonaws.com/efa"  # used when a profile names no fabric resource
INTERFACES_ANNOTATION = "networking.gke.io/interfaces"
DEFAULT_INTERFACE_ANNOTATION = "networking.gke.io/default-interface"
DEFS_ID = "https://kubernetes.io/api/_definitions.json"
OBJECTMETA_REF = DEFS_ID + "#/$defs/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"

# check id -> what it means (format_problems and the docs use the same words)
CHECKS = {
    "yaml": "the document is not YAML or not a mapping",
    "document": "apiVersion, kind or metadata.name missing",
    "unknown-kind": "no schema for this apiVersion/kind (neither a core kind of this Kubernetes version nor a vendored CRD)",
    "schema": "the object does not match its Kubernetes or CRD schema",
    "dns-name": "a name is not a valid DNS-1123/1035 name or too long",
    "derived-name": "a name the JobSet or Job controller derives (job, pod, hostname) would be invalid or longer than 63",
    "label": "a label or annotation key, or a label value, is malformed",
    "quantity": "a resource quantity does not parse",
    "resources": "requests exceed limits, or an extended resource is fractional or requested unlike its limit",
    "gpu-count": "GPUs per pod differ from the accelerator profile's GPUs per node (multi-node workloads)",
    "accelerator": "the helm-nemo.dev/accelerator label names no accelerator profile",
    "fabric": "fabric env (EFA, gIB/RDMA) is set but the pod does not get the fabric devices",
    "duplicate-env": "an env variable is defined twice in one container",
    "duplicate-name": "two containers or two volumes of a pod share a name",
    "volume-mount": "a volumeMount names no volume of the pod, or two mounts share a mountPath",
    "interfaces-json": "networking.gke.io/interfaces is not a JSON list of {interfaceName, network}",
    "size": "annotations over 256 KiB or a ConfigMap over 1 MiB (the API server's limits)",
    "duplicate-object": "two releases of a recipe (or one release twice) render the same object: the second install fails",
}


class ManifestProblem(
    namedtuple("ManifestProblem", "kind name path message check source index", defaults=(None, None))
):
    """One problem of a rendered object: which object (`kind`, `name`), where inside it (`path`, a JSON path such
    as $.spec.replicatedJobs[0].template), what (`message`) and which check found it (`check`, one of
    CHECKS); `source` is helm's "# Source:" template of the document and `index` its place in the stream,
    when known."""

    __slots__ = ()

    def __str__(self) -> str:
        return f"{self.kind}/{self.name}: {self.path}: {self.message} [{self.check}]"


class Document(namedtuple("Document", "data source index", defaults=(None, 0))):
    """One parsed document of a render (`data`) and where it came from: helm's "# Source:" template (`source`)
    and its place in the stream (`index`)."""

    __slots__ = ()


_SEPARATOR = re.compile(r"^---[ \t]*(?:#.*)?$", re.M)
_SOURCE = re.compile(r"^# Source: (.+)$", re.M)


def parse_documents(text: str) -> tuple[list[Document], list[ManifestProblem]]:
    """Split a `helm template` stream into documents, keeping each one's `# Source:` template."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    docs: list[Document] = []
    problems: list[ManifestProblem] = []
    for chunk in _SEPARATOR.split(text):
        if not chunk.strip():
            continue
        found = _SOURCE.search(chunk)
        source = found.group(1).strip() if found else None
        try:
            loaded = list(yaml.load_all(chunk, Loader=loader))
        except yaml.YAMLError as err:
            problems.append(
                ManifestProblem("?", "?", "$", f"not YAML: {err}".replace("\n", " "), "yaml", source, len(docs))
            )
            continue
        for data in loaded:
            if data is not None:
                docs.append(Document(json_keys(data), source, len(docs)))
    return docs, problems


def json_keys(node: Any) -> Any:
    """Mapping keys as the API server gets them from YAML (sigs.k8s.io/yaml writes JSON, whose keys are
    strings): `1:` is "1", `true:` "true", `null:` "null". A key of another type would otherwise reach the
    checks as an int (and a key pattern or a `did you mean` cannot read it). Copies only what changes."""
    if isinstance(node, dict):
        out = None
        for key, value in node.items():
            fixed_value = json_keys(value)
            if type(key) is not str or fixed_value is not value:
                out = out if out is not None else dict(node)
                if type(key) is not str:
                    del out[key]
                    key = _json_key(key)
                out[key] = fixed_value
        return node if out is None else out
    if isinstance(node, list):
        fixed = [json_keys(item) for item in node]
        return node if all(a is b for a, b in zip(fixed, node, strict=True)) else fixed
    return node


def _json_key(key: Any) -> str:
    if isinstance(key, bool):
        return "true" if key else "false"
    return "null" if key is None else str(key)


# A part of the wrong type (`spec: []`, `containers: "x"`, a label value that is a list): the schema check
# reports it with its path; every other check reads it through these and so skips it (no crash, no second
# message about the same part).
def mapping(value: Any) -> dict[str, Any]:
    """`value` when it is a mapping, else {} (absent or of the wrong type: nothing to check)."""
    return value if isinstance(value, dict) else {}


def items_of(value: Any) -> list[Any]:
    """`value` when it is a list, else [] (absent or of the wrong type: nothing to check)."""
    return value if isinstance(value, list) else []


def text(value: Any) -> str | None:
    """`value` when it is a string, else None."""
    return value if isinstance(value, str) else None


def json_path(parts: Iterable[Any]) -> str:
    out = "$"
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        elif re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", str(part)):
            out += f".{part}"
        else:
            out += f"[{json.dumps(str(part))}]"
    return out


def short(value: Any, limit: int = 120) -> str:
    """`repr(value)` cut to `limit` characters, masked first (helm_nemo.secrets) so a cut never shows part of
    a value taken from the environment."""
    from helm_nemo.secrets import mask

    text = mask(repr(value))
    return text if len(text) <= limit else text[: limit - 3] + "..."


_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")


class Collector:
    def __init__(self, doc: Mapping[str, Any], source: str | None, index: int):
        self.kind = str(doc.get("kind") or "?")
        self.name = str(mapping(doc.get("metadata")).get("name") or "?")
        self.source = source
        self.index = index
        self.problems: list[ManifestProblem] = []

    def add(self, path: Iterable[Any], message: str, check: str) -> None:
        assert check in CHECKS, check
        self.problems.append(
            ManifestProblem(self.kind, self.name, json_path(path), message, check, self.source, self.index)
        )
