"""A chart's own values: its schema and defaults, and helm's coalescing of the user's values onto them.

What validation checks is the user's values merged over the chart's values.yaml exactly as helm merges them
(`merge_values`); keys the schema marks `x-helm-nemo-legacy` (gpu-recipes keys no template reads) are found
for a warning (`legacy_keys`).
"""

from __future__ import annotations

import copy
import json

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: importing typing costs every run start-up time
    from pathlib import Path
    from typing import Any


def chart_schema(chart: Path) -> dict[str, Any] | None:
    schema_file = chart / "values.schema.json"
    return json.loads(schema_file.read_text()) if schema_file.exists() else None


def chart_defaults(chart: Path) -> dict[str, Any]:
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return yaml.load((chart / "values.yaml").read_text(), Loader=loader) or {}


def merge_values(defaults: Any, override: Any) -> Any:
    """Helm's coalescing: maps merge deeply, everything else replaces, null deletes a default."""
    if isinstance(defaults, dict) and isinstance(override, dict):
        out = dict(defaults)
        for key, value in override.items():
            if value is None:
                out.pop(key, None)
            elif key in out:
                out[key] = merge_values(out[key], value)
            else:
                out[key] = value
        return out
    return copy.deepcopy(override)


def legacy_keys(schema: dict[str, Any], values: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Paths of keys the schema marks as legacy gpu-recipes keys (accepted, ignored, worth a warning)."""
    found: list[tuple[Any, ...]] = []
    if not isinstance(values, dict):
        return found
    node = _resolve(schema, schema)
    props = node.get("properties", {}) if isinstance(node, dict) else {}
    for key, value in values.items():
        sub = _resolve(schema, props.get(key, {}))
        if sub.get("x-helm-nemo-legacy"):
            found.append(path + (key,))
        elif isinstance(value, dict):
            found += [
                p
                for p in legacy_keys(
                    {**schema, **sub, "definitions": schema.get("definitions", {})}, value, path + (key,)
                )
            ]
    return found


def _resolve(schema: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    ref = node.get("$ref") if isinstance(node, dict) else None
    if isinstance(ref, str) and ref.startswith("#/definitions/"):
        return {**schema["definitions"][ref.split("/")[-1]], **{k: v for k, v in node.items() if k != "$ref"}}
    return node
