"""A values or recipe file -> the releases to run, each with its chart and final values.

One-way flow, each step a plain function in its own room: load (values/load.py, with positions; several `-f`
files merged as helm merges them) -> substitute ${VARS} (values/substitute.py) -> read `files:`
(values/file_refs.py, inside the root) -> find the chart (values/chart_source.py: a kind, a folder or oci://)
-> validate against the chart's schema, over its defaults (values/chart_values.py, values/validation.py) ->
hand to helm as JSON. A plain values file is a one-release recipe; a recipe file lists several releases,
installed in order. What uninstall needs, the names only, is values/recipe.py's `release_names`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: importing typing costs every run start-up time
    from typing import Any
    from collections.abc import Mapping, Sequence

    from helm_nemo.user_errors import Problem

    from helm_nemo.values.loaded import LoadedValues
    from helm_nemo.values.recipe import RealPath

from helm_nemo import resources
from helm_nemo.values.chart_source import ChartPullFailed, chart_for, from_repository, pull_chart
from helm_nemo.values.chart_values import chart_defaults, chart_schema, legacy_keys, merge_values
from helm_nemo.values.file_refs import FileBudget, read_file_refs
from helm_nemo.values.release_plan import ReleasePlan
from helm_nemo.values.recipe import (
    json_path,
    load_all,
    problem,
    real_path,
    recipe_shape,
    release_name,
    release_problems,
    release_values,
)

__all__ = ["build_plans", "helm_values_json"]

# Values sections read by other targets (helm_nemo.targets), never passed to helm: one values file serves
# Kubernetes and Slurm.
TARGET_SECTIONS = ("slurm", "fit")  # fit: the memory check's mode (helm_nemo/fit/check.py)


def _shape_problems(loaded: LoadedValues, data: dict[str, Any], prefix: tuple[Any, ...], real: RealPath) -> list[Any]:
    """The keys helm nemo itself reads before the schema check, in the shape it needs (else a clear error,
    not a crash): chart/accelerator/release strings, files a mapping of values keys to path strings."""
    from helm_nemo.user_errors import Problem

    problems = []

    def problem(rel: tuple[Any, ...], message: str, expected: str) -> None:
        line, column = loaded.position(real(rel))
        problems.append(Problem(str(loaded.path), line, column, json_path(rel), message, expected))

    for key in ("chart", "accelerator", "release"):
        value = data.get(key)
        if value is not None and not isinstance(value, str):
            problem((key,), f"{json.dumps(value)} is not of type 'string', 'null'", "a string")
    refs = data.get("files")
    if refs is not None and not isinstance(refs, dict):
        problem(
            ("files",),
            f"{json.dumps(refs)} is not of type 'object', 'null'",
            "a mapping: values key -> file path, e.g. {workload_launcher: launcher.sh}",
        )
    elif refs:
        for key, rel in refs.items():
            if not isinstance(rel, str) or not rel:
                problem(("files", key), f"{json.dumps(rel)} is not of type 'string'", "a file path")
                continue
            node: Any = data
            for part in key.split(".")[:-1]:
                node = node.get(part) if isinstance(node, dict) else None
                if node is not None and not isinstance(node, dict):
                    problem(
                        ("files", key),
                        f"{key!r} goes through {'.'.join(key.split('.')[:-1])}, which is not a mapping",
                        "a values key whose parents are mappings",
                    )
                    break
    return problems


def _plan_one(
    loaded: LoadedValues,
    data: dict[str, Any],
    prefix: tuple[Any, ...],
    *,
    release: str | None,
    chart_override: str | None,
    version: str | None,
    origin: dict[str, tuple[Any, ...]] | None = None,
    chart_repo: str | None = None,
    root: Path | None = None,
    budget: FileBudget | None = None,
    pull_flags: Sequence[str] = (),
) -> tuple[ReleasePlan, list[Any]]:
    from helm_nemo.user_errors import raise_if_problems

    real = real_path(prefix, origin or {})
    raise_if_problems(
        _shape_problems(loaded, data, prefix, real), title=f"{loaded.label}: values helm nemo cannot use:"
    )
    sections = {key: data.pop(key) for key in TARGET_SECTIONS if key in data}
    problems = read_file_refs(loaded, data, prefix, root, budget)
    chart, kind, accelerator = chart_for(loaded, data, prefix, chart_override, real, root)
    if (
        chart_repo
        and not chart.startswith("oci://")
        and Path(chart).resolve().is_relative_to(resources.charts_dir().resolve())
    ):
        chart, version = from_repository(loaded, prefix, chart, version, chart_repo)
    name, name_problems = release_name(loaded, data, prefix, release, real)
    problems += name_problems
    plan = ReleasePlan(
        release=name,
        chart_kind=kind or "",
        accelerator=accelerator,
        chart=chart,
        chart_version=version,
        values=data,
        source=loaded.path,
        json_prefix=prefix,
        target_sections=sections,
        loaded=loaded,
        sources=list(loaded.paths),
    )
    local = plan.local_chart
    if local is None and chart.startswith("oci://"):  # not the shipped chart: check against the chart itself
        try:
            plan.pulled = local = pull_chart(chart, version, pull_flags)
        except ChartPullFailed as failed:
            from helm_nemo.values.recipe import command_line_problem

            message = (
                f"cannot check the values against chart {chart}{' ' + version if version else ''}: "
                f"helm pull failed: {failed}"
            )
            hint = (
                "check the reference and the version, `helm registry login`, and registry flags (--plain-http, "
                "--ca-file); or --chart PATH for a local copy of the chart"
            )
            problems.append(
                command_line_problem(message, hint)
                if chart_override
                else problem(loaded, real(("chart",)) if "chart" in data else prefix, message, hint=hint)
            )
            return plan, problems
    schema = chart_schema(local) if local else None
    if schema is None and local is not None:
        plan.warnings.append(
            f"chart {chart} has no values.schema.json: the values were checked for substitution and "
            "files only, not against a schema"
        )
    if schema is not None:
        from helm_nemo.values.validation import extra_problems, validate

        def located(path: tuple[Any, ...]) -> tuple[Any, ...]:
            return real(path[len(prefix) :])

        where: dict[str, Any] = {
            "filename": str(loaded.path),
            "positions": lambda path: loaded.position(located(path)),
            "files": lambda path: str(loaded.file_of(located(path))),
            "prefix": prefix,
        }
        assert local is not None  # the schema is the local chart's
        defaults = chart_defaults(local)
        merged = merge_values(defaults, data)
        found = validate(merged, schema, **where) + extra_problems(data, defaults, **where)
        if name_problems:  # the schema's own release pattern says the same thing
            found = [p for p in found if p.json_path != "$.release"]
        else:
            found += _cross_field(loaded, merged, data, schema, name, release, real, prefix)
            found += _fit(loaded, data, prefix, real, name, sections.get("fit"), plan)
        problems += found
        for legacy in legacy_keys(schema, data):
            line, _ = loaded.position(prefix + legacy)
            plan.warnings.append(
                f"{loaded.file_of(prefix + legacy)}:{line}: {json_path(legacy)} is a gpu-recipes key "
                "no template reads; it is ignored (remove it)"
            )
    return plan, problems


def _cross_field(
    loaded: LoadedValues,
    merged: dict[str, Any],
    data: dict[str, Any],
    schema: dict[str, Any],
    name: str,
    release: str | None,
    real: Any,
    prefix: tuple[Any, ...],
) -> list[Problem]:
    """The chart's `fail` rules (values/cross_field.py) as Problems at the value that breaks them."""
    from helm_nemo.secrets import mask
    from helm_nemo.user_errors import Problem
    from helm_nemo.values.cross_field import cross_field_problems
    from helm_nemo.values.recipe import COMMAND_LINE

    found: list[Problem] = []

    def add(at: tuple[Any, ...] | None, message: str, expected: str | None = None, hint: str | None = None) -> None:
        if at is None:
            found.append(
                Problem(
                    COMMAND_LINE,
                    None,
                    None,
                    "$",
                    mask(f"release name {name!r} (from the command line): {message}"),
                    expected,
                    hint,
                )
            )
            return
        written = real(at)
        line, column = loaded.position(written)
        found.append(Problem(str(loaded.file_of(written)), line, column, json_path(at), mask(message), expected, hint))

    cross_field_problems(merged, schema, name, release_on_command_line=bool(release), add=add, user=data)
    return found


def _fit(
    loaded: LoadedValues,
    data: dict[str, Any],
    prefix: tuple[Any, ...],
    real: Any,
    name: str,
    fit_section: Any,
    plan: ReleasePlan,
) -> list[Problem]:
    """Megatron's layout rules and the memory verdict (helm_nemo/fit): errors here, warnings on the plan."""
    from helm_nemo.fit.check import release_problems, section_problems
    from helm_nemo.user_errors import Problem

    line, column = loaded.position(real(("fit",)))
    at = Problem(str(loaded.file_of(real(("fit",)))), line, column, "$.fit", "")
    found = section_problems(fit_section, at)
    errors, warnings, plan.fit = release_problems(loaded, data, prefix, real, name, fit_section)
    plan.warnings += warnings
    return found + errors


def build_plans(
    path: str | Path | Sequence[str | Path],
    env: Mapping[str, str] | None = None,
    *,
    release: str | None = None,
    chart: str | None = None,
    version: str | None = None,
    chart_repo: str | None = None,
    root: str | Path | None = None,
    pull_flags: Sequence[str] = (),
) -> list[ReleasePlan]:
    """Load, substitute, read files and validate; raise UserError with every problem, or return the plans.

    `path`: a values or recipe file, or several values files merged like helm's `-f a -f b`; `root`: the
    folder `files:` and `chart:` paths must stay inside (default: each file's own folder);
    `chart_repo` (default: $HELM_NEMO_CHART_REPO): charts named by kind come from that OCI repository. An oci://
    chart that is not a released shipped chart is pulled with helm (`pull_flags`: how to reach the registry) and
    the values are checked against its own schema; when it cannot be pulled, that is a problem (never a silent ok)."""
    from helm_nemo.values.substitute import substitute
    from helm_nemo.user_errors import raise_if_problems

    loaded = load_all(path)
    env = os.environ if env is None else env
    chart_repo = chart_repo if chart_repo is not None else os.environ.get("HELM_NEMO_CHART_REPO") or None
    root = Path(root).resolve() if root else None
    budget = FileBudget()
    substituted = substitute(loaded, env)
    data = substituted.data
    if "releases" not in data:
        from helm_nemo.dataprep.recipe import STAGE_KEYS, plain_file_problems

        if any(key in data for key in STAGE_KEYS):
            raise_if_problems(plain_file_problems(loaded, data), title=f"{loaded.label}: not a recipe:")
        plan, problems = _plan_one(
            loaded,
            data,
            (),
            release=release,
            chart_override=chart,
            version=version,
            chart_repo=chart_repo,
            root=root,
            budget=budget,
            pull_flags=pull_flags,
        )
        raise_if_problems(problems, title=f"{loaded.label}: values do not fit chart {plan.chart}:")
        plan.substitution = substituted
        return [plan]
    recipe_shape(loaded, data, release)
    plans: list[ReleasePlan] = []
    problems = []
    seen: dict[str, int] = {}
    staged: list[tuple[int, dict[str, Any], ReleasePlan]] = []  # (index, release mapping, plan), in order
    for index, item in enumerate(data["releases"]):
        where = ("releases", index)
        found = release_problems(loaded, item, where)
        if found is None:
            problems.append(problem(loaded, where, "each release is a mapping"))
            continue
        problems += found
        if item.get("values") is not None and not isinstance(item["values"], dict):
            continue
        values, origin = release_values(item, where)
        plan, found = _plan_one(
            loaded,
            values,
            where + ("values",),
            release=release,
            chart_override=None,
            version=item.get("version"),
            origin=origin,
            chart_repo=chart_repo,
            root=root,
            budget=budget,
            pull_flags=pull_flags,
        )
        if plan.release in seen:
            found.append(
                problem(loaded, where, f"release {plan.release!r} appears twice (also release {seen[plan.release]})")
            )
        seen[plan.release] = index
        plans.append(plan)
        staged.append((index, item, plan))
        problems += found
    if any(key in item for _, item, _ in staged for key in ("after", "dataFrom")):
        from helm_nemo.dataprep.recipe import link

        problems += link(loaded, staged)
    raise_if_problems(problems, title=f"{loaded.label}: {len(problems)} problem(s):")
    for plan in plans:
        plan.substitution = substituted
    return plans


def helm_values_json(plan: ReleasePlan) -> str:
    """What helm gets: the user's values (not merged with defaults: helm does that), as JSON."""
    values = {k: v for k, v in plan.values.items() if k != "files"}
    return json.dumps(values, ensure_ascii=False, sort_keys=False)
