"""Turn a shared values schema into one chart's self-contained draft-07 values.schema.json.

Helm 3.17 validates with gojsonschema (draft-07 only) and cannot follow relative file references,
so every `$ref` into another file is copied into the chart schema's own `definitions`, and profile
markers (`{"$profile": "gpusPerNode"}`) become the profile's values.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from helm_nemo import resources


# A property the profile may lack: "csi:<driver>" (in profile.csiDrivers) or a profile field that must be set.
REQUIRES = "x-helm-nemo-requires"


def _available(node: Any, profile: dict[str, Any] | None) -> bool:
    need = node.get(REQUIRES) if isinstance(node, dict) else None
    if need is None or profile is None:
        return True
    if need.startswith("csi:"):
        return need[4:] in (profile.get("csiDrivers") or [])
    try:
        return bool(_profile_value(profile, need))
    except (KeyError, TypeError):
        return False


def _profile_value(profile: dict[str, Any], dotted: str) -> Any:
    value: Any = profile
    for part in dotted.split("."):
        value = value[part]
    return value


def bundle(
    schema_file: str,
    profile: dict[str, Any] | None,
    schemas_dir: Path | None = None,
    profiles: dict[str, dict[str, Any]] | None = None,
) -> dict[str, Any]:
    schemas_dir = schemas_dir or resources.schemas_dir()
    loaded: dict[str, dict[str, Any]] = {}
    collected: dict[str, Any] = {}
    origin: dict[str, str] = {}

    def load(name: str) -> dict[str, Any]:
        if name not in loaded:
            loaded[name] = json.loads((schemas_dir / name).read_text(encoding="utf-8"))
        return loaded[name]

    def rewrite_ref(ref: str, current_file: str) -> str:
        file_part, _, pointer = ref.partition("#")
        target = file_part or current_file
        if target == schema_file:
            return "#" + pointer
        prefix = "/definitions/"
        name = pointer[len(prefix) :]
        if not pointer.startswith(prefix) or not name or "/" in name:
            raise ValueError(f"{schema_file}: unsupported $ref {ref!r} (only <file>#/definitions/<name>)")
        if origin.setdefault(name, target) != target:
            raise ValueError(f"{schema_file}: definition {name!r} exists in {origin[name]} and {target}")
        if name not in collected:
            collected[name] = None  # placeholder: a recursive definition refers to itself
            collected[name] = walk(load(target)["definitions"][name], target)
        return "#/definitions/" + name

    def walk(node: Any, current_file: str) -> Any:
        if isinstance(node, dict):
            if set(node) == {"$profileIds"}:
                # {"$profileIds": "gke"}: the ids of every profile of that cloud ("*": all), sorted.
                wanted = node["$profileIds"]
                return sorted(i for i, p in (profiles or {}).items() if wanted in ("*", p["cloud"]))
            if set(node) == {"$profile"}:
                if profile is None:
                    raise ValueError(f"{schema_file}: $profile marker in a schema bundled without a profile")
                return _profile_value(profile, node["$profile"])
            out: dict[str, Any] = {}
            for key, value in node.items():
                if key == REQUIRES:
                    continue
                if key == "$ref" and isinstance(value, str):
                    out[key] = rewrite_ref(value, current_file)
                elif key == "properties" and isinstance(value, dict):
                    out[key] = {k: walk(v, current_file) for k, v in value.items() if _available(v, profile)}
                else:
                    out[key] = walk(value, current_file)
            return out
        if isinstance(node, list):
            return [walk(item, current_file) for item in node]
        return node

    result: dict[str, Any] = walk({k: v for k, v in load(schema_file).items() if k != "$id"}, schema_file)
    own = result.pop("definitions", {})
    clash = sorted(set(own) & set(collected))
    if clash:
        raise ValueError(f"{schema_file}: own definitions {clash} clash with shared ones")
    definitions = {**own, **collected}
    if definitions:
        result["definitions"] = {k: definitions[k] for k in sorted(definitions)}
    return result
