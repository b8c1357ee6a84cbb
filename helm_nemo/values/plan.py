"""A values or recipe file -> the releases to run, each with its chart and final values.

One-way flow, each step a plain function: load (with positions) -> substitute ${VARS} -> read
referenced files -> validate against the chart's schema -> hand to helm as JSON. A plain values file
is a one-release recipe; a recipe file lists several releases, installed in order.
"""

from __future__ import annotations

import copy
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from helm_nemo import resources

# Keys of a recipe file (a file with `releases:`) and of each of its releases.
RECIPE_KEYS = {"recipe", "description", "releases"}
RELEASE_KEYS = {"release", "chart", "accelerator", "values", "version"}
# Values sections read by other targets (helm_nemo.targets), never passed to helm: one values file serves
# Kubernetes and Slurm.
TARGET_SECTIONS = ("slurm",)


@dataclass
class ReleasePlan:
    """One helm release: which chart, which name, which values (ready for helm)."""

    release: str
    chart_kind: str
    accelerator: str | None
    chart: str  # local chart folder or oci:// reference
    chart_version: str | None
    values: dict[str, Any]
    source: Path
    json_prefix: tuple  # where this release's values sit in the source file
    warnings: list[str] = field(default_factory=list)
    # Sections for other targets (`slurm:`), taken out of the chart values: helm never sees them.
    target_sections: dict[str, Any] = field(default_factory=dict)
    substitution: Any = None  # the file's SubstitutionResult (which values came from which variables)
    loaded: Any = None  # the file's LoadedValues (positions for errors of the other targets)

    @property
    def local_chart(self) -> Path | None:
        """The chart folder whose schema and defaults apply: the local chart, or for oci://…/NAME with a
        version the generated chart of that name and version when generator/versions.lock says it is
        that released content (so validation and install-time stamping match a local install)."""
        if not self.chart.startswith("oci://"):
            return Path(self.chart)
        return released_local_chart(self.chart.rstrip("/").rsplit("/", 1)[-1], self.chart_version)


def released_local_chart(name: str, version: str | None) -> Path | None:
    from helm_nemo.generate.versions import load_lock, read_chart

    locked = load_lock().get(name, {}).get(version or "")
    if not locked:
        return None
    for chart_yaml in sorted(resources.charts_dir().glob("**/Chart.yaml")):
        chart = read_chart(chart_yaml.parent)
        if chart.name == name and chart.version == version and chart.digest == locked:
            return chart_yaml.parent
    return None


def local_chart_path(kind: str, accelerator: str | None) -> Path:
    charts = resources.charts_dir()
    return charts / accelerator / kind if accelerator else charts / kind


def _problem(loaded, where: tuple, message: str, expected: str | None = None, hint: str | None = None):
    from helm_nemo.user_errors import Problem

    line, column = loaded.position(where)
    return Problem(
        file=str(loaded.path), line=line, column=column, json_path=json_path(where),
        message=message, expected=expected, hint=hint,
    )


def json_path(parts: tuple) -> str:
    from helm_nemo.user_errors import json_path as render

    return render(parts)


def _set_dotted(data: dict[str, Any], dotted: str, value: Any) -> None:
    node = data
    keys = dotted.split(".")
    for key in keys[:-1]:
        node = node.setdefault(key, {})
    node[keys[-1]] = value


def read_file_refs(loaded, values: dict[str, Any], prefix: tuple, base: Path) -> list:
    """`files: {key: path}` -> the file's text under that values key (like --set-file, with a line number)."""
    problems = []
    refs = values.get("files") or {}
    for key, rel in refs.items():
        target = (base / rel) if not os.path.isabs(rel) else Path(rel)
        where = prefix + ("files", key)
        try:
            text = target.read_text(encoding="utf-8")
        except FileNotFoundError:
            problems.append(_problem(loaded, where, f"file {rel!r} not found (looked in {target.parent})",
                                     hint="paths are relative to the values file"))
            continue
        except (OSError, UnicodeDecodeError) as err:
            problems.append(_problem(loaded, where, f"cannot read {rel!r}: {err}"))
            continue
        _set_dotted(values, key, text)
    return problems


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


def legacy_keys(schema: dict[str, Any], values: Any, path: tuple = ()) -> list[tuple]:
    """Paths of keys the schema marks as legacy gpu-recipes keys (accepted, ignored, worth a warning)."""
    found = []
    if not isinstance(values, dict):
        return found
    node = _resolve(schema, schema)
    props = node.get("properties", {}) if isinstance(node, dict) else {}
    for key, value in values.items():
        sub = _resolve(schema, props.get(key, {}))
        if sub.get("x-helm-nemo-legacy"):
            found.append(path + (key,))
        elif isinstance(value, dict):
            found += [p for p in legacy_keys({**schema, **sub, "definitions": schema.get("definitions", {})}, value, path + (key,))]
    return found


def _resolve(schema: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    ref = node.get("$ref") if isinstance(node, dict) else None
    if isinstance(ref, str) and ref.startswith("#/definitions/"):
        return {**schema["definitions"][ref.split("/")[-1]], **{k: v for k, v in node.items() if k != "$ref"}}
    return node


def _chart_for(loaded, data: dict[str, Any], where: tuple, chart_override: str | None, real=None):
    """(chart ref, kind, accelerator) from --chart or the values' `chart`/`accelerator` keys.

    `real` maps a values path to where it is written (a recipe's release-level `chart:`/`accelerator:`).
    """
    from helm_nemo.user_errors import UserError

    real = real or (lambda rel: where + rel)

    kind = data.get("chart")
    accelerator = data.get("accelerator")
    if chart_override:
        if chart_override.startswith("oci://") or os.sep in chart_override or Path(chart_override).is_dir():
            return chart_override, kind, accelerator
        kind = chart_override  # a chart kind name
    if not kind:
        raise UserError(_problem(loaded, where, "which chart? the values name no `chart`",
                                 expected="chart: jobset (or nemo-training, supervisor, gcs-fuse, fsx-lustre) and accelerator: <id>",
                                 hint="or pass --chart PATH|oci://…|KIND"))
    charts = resources.charts_dir()
    # The charts folder says which kinds exist per accelerator (charts/<accelerator>/<kind>) and which once.
    if (charts / kind / "Chart.yaml").is_file():
        path = charts / kind
    else:
        have = sorted(p.parent.parent.name for p in charts.glob(f"*/{kind}/Chart.yaml"))
        if not have:
            raise UserError(_problem(loaded, real(("chart",)), f"no chart {kind!r}",
                                     hint=f"charts live in {charts}"))
        if not accelerator:
            raise UserError(_problem(loaded, where, f"chart {kind!r} exists per accelerator; the values name no `accelerator`",
                                     expected="accelerator: " + " | ".join(have), hint="add `accelerator:` to the values file"))
        if accelerator not in have:
            raise UserError(_problem(loaded, real(("accelerator",)), f"no {kind!r} chart for accelerator {accelerator!r}",
                                     expected=" | ".join(have)))
        path = charts / accelerator / kind
    return str(path), kind, accelerator


def _shape_problems(loaded, data: dict[str, Any], prefix: tuple, real) -> list:
    """The keys helm nemo itself reads before the schema check, in the shape it needs (else a clear error,
    not a crash): chart/accelerator/release strings, files a mapping of values keys to path strings."""
    from helm_nemo.user_errors import Problem

    problems = []

    def problem(rel: tuple, message: str, expected: str) -> None:
        line, column = loaded.position(real(rel))
        problems.append(Problem(str(loaded.path), line, column, json_path(rel), message, expected))

    for key in ("chart", "accelerator", "release"):
        value = data.get(key)
        if value is not None and not isinstance(value, str):
            problem((key,), f"{json.dumps(value)} is not of type 'string', 'null'", "a string")
    refs = data.get("files")
    if refs is not None and not isinstance(refs, dict):
        problem(("files",), f"{json.dumps(refs)} is not of type 'object', 'null'",
                "a mapping: values key -> file path, e.g. {workload_launcher: launcher.sh}")
    elif refs:
        for key, rel in refs.items():
            if not isinstance(rel, str) or not rel:
                problem(("files", key), f"{json.dumps(rel)} is not of type 'string'", "a file path")
                continue
            node = data
            for part in key.split(".")[:-1]:
                node = node.get(part) if isinstance(node, dict) else None
                if node is not None and not isinstance(node, dict):
                    problem(("files", key), f"{key!r} goes through {'.'.join(key.split('.')[:-1])}, which is not a mapping",
                            "a values key whose parents are mappings")
                    break
    return problems


def _from_repository(loaded, where: tuple, chart: str, version: str | None, repo: str) -> tuple[str, str]:
    """A chart picked by kind (+ accelerator) -> the same chart published in `repo` (oci://HOST/PATH), at the
    shipped chart's version unless one is given. Only released versions are published, so an unreleased
    shipped chart is an error rather than a silently different chart."""
    from helm_nemo.generate.versions import load_lock, read_chart
    from helm_nemo.user_errors import UserError

    if not repo.startswith("oci://"):
        raise UserError(_problem(loaded, where, f"chart repository {repo!r} is not an oci:// reference",
                                 expected="HELM_NEMO_CHART_REPO=oci://HOST/PATH (or --chart-repo)"))
    shipped = read_chart(Path(chart))
    version = version or shipped.version
    if version == shipped.version and load_lock().get(shipped.name, {}).get(version) != shipped.digest:
        raise UserError(_problem(loaded, where, f"chart {shipped.name} {version} is not released, so no repository "
                                 "holds it", hint="unset HELM_NEMO_CHART_REPO / --chart-repo to use the shipped chart"))
    return f"{repo.rstrip('/')}/{shipped.name}", version


def _plan_one(loaded, data: dict[str, Any], prefix: tuple, *, release: str | None, chart_override: str | None,
              version: str | None, base: Path, origin: dict[str, tuple] | None = None,
              chart_repo: str | None = None) -> tuple[ReleasePlan, list]:
    from helm_nemo.user_errors import UserError, raise_if_problems

    origin = origin or {}

    def real(rel: tuple) -> tuple:
        """Where a path of these values is written: most under `prefix`, a recipe's release-level keys elsewhere."""
        return origin[rel[0]] + tuple(rel[1:]) if rel and rel[0] in origin else prefix + tuple(rel)

    raise_if_problems(_shape_problems(loaded, data, prefix, real), title=f"{loaded.path}: values helm nemo cannot use:")
    sections = {key: data.pop(key) for key in TARGET_SECTIONS if key in data}
    problems = read_file_refs(loaded, data, prefix, base)
    chart, kind, accelerator = _chart_for(loaded, data, prefix, chart_override, real)
    if chart_repo and not chart.startswith("oci://") and Path(chart).resolve().is_relative_to(resources.charts_dir().resolve()):
        chart, version = _from_repository(loaded, prefix, chart, version, chart_repo)
    name = release or data.get("release")
    if not name:
        raise UserError(_problem(loaded, prefix, "no release name", expected="`release: <name>` in the values",
                                 hint="or give it on the command line: helm nemo install NAME --values …"))
    plan = ReleasePlan(release=name, chart_kind=kind or "", accelerator=accelerator, chart=chart,
                       chart_version=version, values=data, source=loaded.path, json_prefix=prefix,
                       target_sections=sections, loaded=loaded)
    local = plan.local_chart
    schema = chart_schema(local) if local else None
    if schema is not None:
        from helm_nemo.values.validation import validate

        merged = merge_values(chart_defaults(local), data)
        problems += validate(merged, schema, filename=str(loaded.path),
                             positions=lambda path: loaded.position(real(path[len(prefix):])), prefix=prefix)
        for legacy in legacy_keys(schema, data):
            line, _ = loaded.position(prefix + legacy)
            plan.warnings.append(f"{loaded.path}:{line}: {json_path(legacy)} is a gpu-recipes key no template reads; "
                                 "it is ignored (remove it)")
    return plan, problems


def build_plans(path: str | Path, env: Mapping[str, str] | None = None, *, release: str | None = None,
                chart: str | None = None, version: str | None = None, chart_repo: str | None = None) -> list[ReleasePlan]:
    """Load, substitute, read files and validate; raise UserError with every problem, or return the plans.

    `chart_repo` (default: $HELM_NEMO_CHART_REPO): charts named by kind come from that OCI repository."""
    from helm_nemo.values.substitute import substitute
    from helm_nemo.user_errors import UserError, raise_if_problems
    from helm_nemo.values.load import load_values

    loaded = load_values(path)
    env = os.environ if env is None else env
    chart_repo = chart_repo if chart_repo is not None else os.environ.get("HELM_NEMO_CHART_REPO") or None
    substituted = substitute(loaded, env)
    data = substituted.data
    base = loaded.path.parent
    if "releases" not in data:
        plan, problems = _plan_one(loaded, data, (), release=release, chart_override=chart, version=version, base=base,
                                   chart_repo=chart_repo)
        raise_if_problems(problems, title=f"{loaded.path}: values do not fit chart {plan.chart}:")
        plan.substitution = substituted
        return [plan]
    unknown = sorted(set(data) - RECIPE_KEYS)
    if unknown:
        raise UserError(_problem(loaded, (unknown[0],), f"unknown recipe key {unknown[0]!r}",
                                 expected=", ".join(sorted(RECIPE_KEYS))))
    releases = data.get("releases") or []
    if not isinstance(releases, list) or not releases:
        raise UserError(_problem(loaded, ("releases",), "`releases` must be a non-empty list"))
    plans, problems, seen = [], [], {}
    for index, item in enumerate(releases):
        where = ("releases", index)
        if not isinstance(item, dict):
            problems.append(_problem(loaded, where, "each release is a mapping"))
            continue
        for key in sorted(set(item) - RELEASE_KEYS):
            problems.append(_problem(loaded, where + (key,), f"unknown release key {key!r}",
                                     expected=", ".join(sorted(RELEASE_KEYS))))
        if item.get("values") is not None and not isinstance(item["values"], dict):
            problems.append(_problem(loaded, where + ("values",), "the values of a release must be a mapping",
                                     expected="values: {key: value, …}"))
            continue
        values = dict(item.get("values") or {})
        origin = {}
        for key in ("chart", "accelerator", "release"):
            if item.get(key) is not None and key not in values:
                values[key] = item[key]
                origin[key] = where + (key,)
        if release and len(releases) > 1:
            raise UserError(_problem(loaded, ("releases",), "a release name on the command line fits a one-release file only"))
        plan, found = _plan_one(loaded, values, where + ("values",), release=release, chart_override=None,
                                version=item.get("version"), base=base, origin=origin, chart_repo=chart_repo)
        if plan.release in seen:
            found.append(_problem(loaded, where, f"release {plan.release!r} appears twice (also release {seen[plan.release]})"))
        seen[plan.release] = index
        plans.append(plan)
        problems += found
    raise_if_problems(problems, title=f"{loaded.path}: {len(problems)} problem(s):")
    for plan in plans:
        plan.substitution = substituted
    return plans


def helm_values_json(plan: ReleasePlan) -> str:
    """What helm gets: the user's values (not merged with defaults: helm does that), as JSON."""
    values = {k: v for k, v in plan.values.items() if k != "files"}
    return json.dumps(values, ensure_ascii=False, sort_keys=False)
