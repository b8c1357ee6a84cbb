#!/usr/bin/env python3
"""Copy the Kubernetes types that values pass through (Affinity, EnvVarSource, Toleration) from
kubernetes-validate's strict schemas into schemas/definitions.schema.json as closed draft-07 definitions
named `k8s.<Type>`, so an unknown key under `affinity:`, an env var's `valueFrom:` or a toleration is an
error at its line instead of something helm passes on.

    .venv/bin/python scripts/k8s_value_schemas.py [KUBE_VERSION]   # default: the manifests' default version

Kept per property: type, enum, required, items, properties, additionalProperties (false everywhere:
these are the strict schemas), a short description; an integer gets the bounds of its format (int32; int64 and
numbers as far as helm holds them exactly, 2^53 - 1: helm reads every number of the values as a float64).
Run it after raising the Kubernetes version; `helm-nemo generate` then bundles the definitions into the charts.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ROOTS = {
    "Affinity": "io.k8s.api.core.v1.Affinity",
    "EnvVarSource": "io.k8s.api.core.v1.EnvVarSource",
    "Toleration": "io.k8s.api.core.v1.Toleration",
}
INT32 = 2**31 - 1
EXACT = 2**53 - 1  # the largest integer a float64 (helm's number) holds exactly
KEEP = {"type", "enum", "required", "items", "properties", "additionalProperties", "oneOf", "$ref"}


def short(name: str) -> str:
    return "k8s." + name.rsplit(".", 1)[-1]


def convert(node, defs: dict, wanted: dict) -> object:
    if isinstance(node, list):
        return [convert(item, defs, wanted) for item in node]
    if not isinstance(node, dict):
        return node
    out: dict = {}
    for key, value in node.items():
        if key == "$ref":
            target = value.rsplit("/", 1)[-1]
            wanted.setdefault(target, None)
            out["$ref"] = "#/definitions/" + short(target)
        elif key == "properties":
            out[key] = {k: convert(v, defs, wanted) for k, v in value.items()}
        elif key in KEEP:
            out[key] = convert(value, defs, wanted)
    kinds = out.get("type") if isinstance(out.get("type"), list) else [out.get("type")]
    if "integer" in kinds or "number" in kinds:
        bound = INT32 if node.get("format") == "int32" else EXACT
        out["minimum"], out["maximum"] = -bound - 1 if bound == INT32 else -bound, bound
    if "object" in kinds and "additionalProperties" not in out:
        out["additionalProperties"] = False
    description = node.get("description")
    if description:
        out["description"] = description.split(". ")[0].rstrip(".") + "."
    return out


def k8s_definitions(version: str) -> dict:
    import kubernetes_validate

    folder = Path(kubernetes_validate.__file__).parent / "kubernetes-json-schema" / f"v{version}.0-local-strict"
    defs = json.loads((folder / "_definitions.json").read_text())["$defs"]
    wanted: dict = {name: None for name in ROOTS.values()}
    done: dict = {}
    while len(done) < len(wanted):
        for name in [n for n in wanted if n not in done]:
            done[name] = convert(defs[name], defs, wanted)
    return {short(name): done[name] for name in sorted(done, key=short)}


def main() -> None:
    sys.path.insert(0, str(ROOT))
    from helm_nemo.validate.documents import DEFAULT_KUBE_VERSION

    version = sys.argv[1] if len(sys.argv) > 1 else DEFAULT_KUBE_VERSION
    target = ROOT / "schemas" / "definitions.schema.json"
    schema = json.loads(target.read_text())
    kept = {k: v for k, v in schema["definitions"].items() if not k.startswith("k8s.")}
    schema["definitions"] = {**kept, **k8s_definitions(version)}
    target.write_text(json.dumps(schema, indent=2, ensure_ascii=False) + "\n")
    print(f"{target}: {len(schema['definitions']) - len(kept)} Kubernetes {version} definitions")


if __name__ == "__main__":
    main()
