"""A values or recipe file -> the releases to run, each with its chart and final values.

One-way flow, each step a plain function: load (with positions; several `-f` files merged as helm
merges them) -> substitute ${VARS} -> read referenced files (inside the root, values/paths.py) ->
validate against the chart's schema -> hand to helm as JSON. A plain values file is a one-release
recipe; a recipe file lists several releases, installed in order. `release_names` is what uninstall
needs: the names only, nothing else substituted or read.
"""

from __future__ import annotations

import copy
import json
import os
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping, Sequence

from helm_nemo import resources

# Keys of a recipe file (a file with `releases:`) and of each of its releases.
RECIPE_KEYS = {"recipe", "description", "releases"}
RELEASE_KEYS = {"release", "chart", "accelerator", "values", "version"}
# Values sections read by other targets (helm_nemo.targets), never passed to helm: one values file serves
# Kubernetes and Slurm.
TARGET_SECTIONS = ("slurm",)
# helm's release names: DNS-1123 labels of at most 53 characters (names derived from them get suffixes).
RELEASE_NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
MAX_RELEASE_NAME = 53
CHART_KIND = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
COMMAND_LINE = "command line"  # the "file" of a problem with a command-line argument


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
    sources: list[Path] = field(default_factory=list)  # every -f file (several merge into one), in order

    def values_flags(self) -> str:
        """`--values A [--values B]`: how to name this plan's files again in a hint."""
        return " ".join(f"--values {path}" for path in (self.sources or [self.source]))

    @property
    def local_chart(self) -> Path | None:
        """The chart folder whose schema and defaults apply: the local chart, or for oci://…/NAME with a
        version the generated chart of that name and version when generator/versions.lock says it is
        that released content (so validation and install-time stamping match a local install)."""
        if not self.chart.startswith("oci://"):
            return Path(self.chart)
        return released_local_chart(self.chart.rstrip("/").rsplit("/", 1)[-1], self.chart_version)


@dataclass
class ReleaseName:
    """What uninstall needs of a release: its name and where it is written."""

    release: str
    source: Path
    sources: list[Path] = field(default_factory=list)

    def values_flags(self) -> str:
        return " ".join(f"--values {path}" for path in (self.sources or [self.source]))


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


def _problem(loaded, where: tuple, message: str, expected: str | None = None, hint: str | None = None,
             shown: tuple | None = None):
    """A Problem at `where` in the file that wrote it; `shown`: the JSON path to print, when not `where`."""
    from helm_nemo.user_errors import Problem

    line, column = loaded.position(where)
    return Problem(
        file=str(loaded.file_of(where)), line=line, column=column, json_path=json_path(where if shown is None else shown),
        message=message, expected=expected, hint=hint,
    )


class FileBudget:
    """Bytes read through `files:` in one run (all releases): at most paths.MAX_TOTAL_BYTES."""

    def __init__(self) -> None:
        self.used = 0


def json_path(parts: tuple) -> str:
    from helm_nemo.user_errors import json_path as render

    return render(parts)


def _set_dotted(data: dict[str, Any], dotted: str, value: Any) -> None:
    node = data
    keys = dotted.split(".")
    for key in keys[:-1]:
        node = node.setdefault(key, {})
    node[keys[-1]] = value


def read_file_refs(loaded, values: dict[str, Any], prefix: tuple, root: Path | None = None,
                   budget: FileBudget | None = None) -> list:
    """`files: {key: path}` -> the file's text under that values key (like --set-file, with a line number).

    A path is relative to the file that names it and must stay inside `root` (default: that file's
    folder); regular files only, within the size limits of values/paths.py."""
    from helm_nemo.values.paths import MAX_FILE_BYTES, MAX_TOTAL_BYTES, PathRefused, inside, read_regular

    budget = budget or FileBudget()
    problems = []
    refs = values.get("files") or {}
    for key, rel in refs.items():
        where = prefix + ("files", key)
        base = loaded.base_dir(where)
        try:
            target = inside(base, rel, root or base, what="file")
        except PathRefused as refused:
            problems.append(_problem(loaded, where, str(refused), hint=refused.hint))
            continue
        limit = min(MAX_FILE_BYTES, MAX_TOTAL_BYTES - budget.used)
        try:
            raw = read_regular(target, limit)
            text = raw.decode("utf-8")
        except FileNotFoundError:
            problems.append(_problem(loaded, where, f"file {rel!r} not found (looked in {target.parent})",
                                     hint="paths are relative to the values file"))
            continue
        except PathRefused as refused:
            if refused.too_large and limit < MAX_FILE_BYTES:
                refused = PathRefused(f"would take the files of this run over {MAX_TOTAL_BYTES // 2**20} MiB together",
                                      hint="keep large data in a bucket or a volume")
            problems.append(_problem(loaded, where, f"cannot read {rel!r}: it {refused}", hint=refused.hint))
            continue
        except UnicodeDecodeError as err:
            problems.append(_problem(loaded, where, f"cannot read {rel!r}: not UTF-8 text ({err.reason} at byte {err.start})"))
            continue
        except OSError as err:
            problems.append(_problem(loaded, where, f"cannot read {rel!r}: {err.strerror or err}"))
            continue
        budget.used += len(raw)
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


def _chart_for(loaded, data: dict[str, Any], where: tuple, chart_override: str | None, real=None,
               root: Path | None = None):
    """(chart ref, kind, accelerator) from --chart or the values' `chart`/`accelerator` keys.

    `real` maps a values path to where it is written (a recipe's release-level `chart:`/`accelerator:`).
    The values' `chart:` is a chart kind, or a chart folder relative to the values file inside `root`
    (values/paths.py); --chart is the user's own command line and is taken as given.
    """
    from helm_nemo.user_errors import UserError
    from helm_nemo.values.paths import PathRefused, inside

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
    if not chart_override and ("/" in kind or kind.startswith((".", "~"))):
        at = real(("chart",))
        base = loaded.base_dir(at)
        try:
            folder = inside(base, kind, root or base, what="chart folder")
        except PathRefused as refused:
            raise UserError(_problem(loaded, at, str(refused), hint=refused.hint)) from None
        if not (folder / "Chart.yaml").is_file():
            raise UserError(_problem(loaded, at, f"chart folder {kind!r} has no Chart.yaml ({folder})"))
        return str(folder), "", accelerator
    if not CHART_KIND.fullmatch(kind):
        raise UserError(_problem(loaded, real(("chart",)), f"chart {kind!r} is neither a chart kind nor a folder path",
                                 expected="a chart kind (jobset, nemo-training, supervisor, gcs-fuse, fsx-lustre) or "
                                          "./a/chart/folder next to the values file"))
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


def _real(prefix: tuple, origin: dict[str, tuple]):
    """Where a path of a release's values is written: most under `prefix`, a recipe's release-level keys
    (`origin`: key -> its path) elsewhere."""

    def real(rel: tuple) -> tuple:
        return origin[rel[0]] + tuple(rel[1:]) if rel and rel[0] in origin else prefix + tuple(rel)

    return real


def release_name_problem(name: Any, where: str) -> str | None:
    """Why `name` cannot be a helm release name (None when it can); `where` says where it was written."""
    if not isinstance(name, str) or not RELEASE_NAME.fullmatch(name):
        return (f"release name {name!r} ({where}) is not a DNS-1123 label: lower-case letters, digits and '-', "
                "starting and ending with a letter or digit")
    if len(name) > MAX_RELEASE_NAME:
        return f"release name {name!r} ({where}) is {len(name)} characters, more than {MAX_RELEASE_NAME}"
    return None


def _release_name(loaded, data: dict[str, Any], prefix: tuple, release: str | None, real) -> tuple[str, list]:
    """The release's name (command line first, else `release:`) and the problem with it, if any."""
    from helm_nemo.user_errors import Problem, UserError

    name = release or data.get("release")
    if not name:
        raise UserError(_problem(loaded, prefix, "no release name", expected="`release: <name>` in the values",
                                 hint="or give it on the command line: helm nemo install NAME --values …"))
    if release:
        why = release_name_problem(release, "from the command line")
        return name, [Problem(COMMAND_LINE, None, None, "$", why, hint="helm refuses it")] if why else []
    why = release_name_problem(name, "from the values")
    return name, [_problem(loaded, real(("release",)), why, shown=("release",), hint="helm refuses it")] if why else []


def _plan_one(loaded, data: dict[str, Any], prefix: tuple, *, release: str | None, chart_override: str | None,
              version: str | None, origin: dict[str, tuple] | None = None, chart_repo: str | None = None,
              root: Path | None = None, budget: FileBudget | None = None) -> tuple[ReleasePlan, list]:
    from helm_nemo.user_errors import raise_if_problems

    real = _real(prefix, origin or {})
    raise_if_problems(_shape_problems(loaded, data, prefix, real), title=f"{loaded.label}: values helm nemo cannot use:")
    sections = {key: data.pop(key) for key in TARGET_SECTIONS if key in data}
    problems = read_file_refs(loaded, data, prefix, root, budget)
    chart, kind, accelerator = _chart_for(loaded, data, prefix, chart_override, real, root)
    if chart_repo and not chart.startswith("oci://") and Path(chart).resolve().is_relative_to(resources.charts_dir().resolve()):
        chart, version = _from_repository(loaded, prefix, chart, version, chart_repo)
    name, name_problems = _release_name(loaded, data, prefix, release, real)
    problems += name_problems
    plan = ReleasePlan(release=name, chart_kind=kind or "", accelerator=accelerator, chart=chart,
                       chart_version=version, values=data, source=loaded.path, json_prefix=prefix,
                       target_sections=sections, loaded=loaded, sources=list(loaded.paths))
    local = plan.local_chart
    schema = chart_schema(local) if local else None
    if schema is not None:
        from helm_nemo.values.validation import extra_problems, validate

        located = lambda path: real(path[len(prefix):])  # noqa: E731
        where = {"filename": str(loaded.path), "positions": lambda path: loaded.position(located(path)),
                 "files": lambda path: str(loaded.file_of(located(path))), "prefix": prefix}
        defaults = chart_defaults(local)
        found = validate(merge_values(defaults, data), schema, **where) + extra_problems(data, defaults, **where)
        if name_problems:  # the schema's own release pattern says the same thing
            found = [p for p in found if p.json_path != "$.release"]
        problems += found
        for legacy in legacy_keys(schema, data):
            line, _ = loaded.position(prefix + legacy)
            plan.warnings.append(f"{loaded.file_of(prefix + legacy)}:{line}: {json_path(legacy)} is a gpu-recipes key "
                                 "no template reads; it is ignored (remove it)")
    return plan, problems


def load_all(paths: str | Path | Sequence[str | Path]) -> Any:
    """One or several values files (`-` is stdin), merged like helm's `-f a -f b`; a recipe stands alone."""
    from helm_nemo.user_errors import UserError
    from helm_nemo.values.load import load_values, merge_loaded

    names = [paths] if isinstance(paths, (str, Path)) else list(paths)
    if sum(1 for name in names if str(name) == "-") > 1:
        raise UserError(_command_line("stdin (-f -) can be read once only"))
    parts = [load_values(name) for name in names]
    if len(parts) > 1:
        for part in parts:
            if "releases" in part.data:
                raise UserError(_problem(part, ("releases",), "a recipe file (with `releases:`) cannot be merged "
                                         "with other --values files", hint="give the recipe alone, or put the "
                                         "changes into the values of its releases"))
    return merge_loaded(parts)


def _command_line(message: str, hint: str | None = None):
    from helm_nemo.user_errors import Problem

    return Problem(COMMAND_LINE, None, None, "$", message, hint=hint)


def build_plans(path: str | Path | Sequence[str | Path], env: Mapping[str, str] | None = None, *,
                release: str | None = None, chart: str | None = None, version: str | None = None,
                chart_repo: str | None = None, root: str | Path | None = None) -> list[ReleasePlan]:
    """Load, substitute, read files and validate; raise UserError with every problem, or return the plans.

    `path`: a values or recipe file, or several values files merged like helm's `-f a -f b`; `root`: the
    folder `files:` and `chart:` paths must stay inside (default: each file's own folder);
    `chart_repo` (default: $HELM_NEMO_CHART_REPO): charts named by kind come from that OCI repository."""
    from helm_nemo.values.substitute import substitute
    from helm_nemo.user_errors import UserError, raise_if_problems

    loaded = load_all(path)
    env = os.environ if env is None else env
    chart_repo = chart_repo if chart_repo is not None else os.environ.get("HELM_NEMO_CHART_REPO") or None
    root = Path(root).resolve() if root else None
    budget = FileBudget()
    substituted = substitute(loaded, env)
    data = substituted.data
    if "releases" not in data:
        plan, problems = _plan_one(loaded, data, (), release=release, chart_override=chart, version=version,
                                   chart_repo=chart_repo, root=root, budget=budget)
        raise_if_problems(problems, title=f"{loaded.label}: values do not fit chart {plan.chart}:")
        plan.substitution = substituted
        return [plan]
    _recipe_shape(loaded, data, release)
    plans, problems, seen = [], [], {}
    for index, item in enumerate(data["releases"]):
        where = ("releases", index)
        found = _release_problems(loaded, item, where)
        if found is None:
            problems.append(_problem(loaded, where, "each release is a mapping"))
            continue
        problems += found
        if item.get("values") is not None and not isinstance(item["values"], dict):
            continue
        values, origin = _release_values(item, where)
        plan, found = _plan_one(loaded, values, where + ("values",), release=release, chart_override=None,
                                version=item.get("version"), origin=origin, chart_repo=chart_repo, root=root,
                                budget=budget)
        if plan.release in seen:
            found.append(_problem(loaded, where, f"release {plan.release!r} appears twice (also release {seen[plan.release]})"))
        seen[plan.release] = index
        plans.append(plan)
        problems += found
    raise_if_problems(problems, title=f"{loaded.label}: {len(problems)} problem(s):")
    for plan in plans:
        plan.substitution = substituted
    return plans


def _recipe_shape(loaded, data: dict[str, Any], release: str | None) -> None:
    from helm_nemo.user_errors import UserError

    unknown = sorted(set(data) - RECIPE_KEYS)
    if unknown:
        raise UserError(_problem(loaded, (unknown[0],), f"unknown recipe key {unknown[0]!r}",
                                 expected=", ".join(sorted(RECIPE_KEYS))))
    releases = data.get("releases") or []
    if not isinstance(releases, list) or not releases:
        raise UserError(_problem(loaded, ("releases",), "`releases` must be a non-empty list"))
    if release and len(releases) > 1:
        raise UserError(_problem(loaded, ("releases",), "a release name on the command line fits a one-release file only"))


def _release_problems(loaded, item: Any, where: tuple) -> list | None:
    """A recipe release's own keys: unknown ones, `values` not a mapping, a release-level chart/accelerator/
    release that its values contradict. None when the release is not a mapping at all."""
    if not isinstance(item, dict):
        return None
    problems = [_problem(loaded, where + (key,), f"unknown release key {key!r}", expected=", ".join(sorted(RELEASE_KEYS)))
                for key in sorted(set(item) - RELEASE_KEYS)]
    values = item.get("values")
    if values is not None and not isinstance(values, dict):
        problems.append(_problem(loaded, where + ("values",), "the values of a release must be a mapping",
                                 expected="values: {key: value, …}"))
        return problems
    for key in ("chart", "accelerator", "release"):
        inner = (values or {}).get(key)
        if item.get(key) is not None and inner is not None and inner != item[key]:
            line, _ = loaded.position(where + ("values", key))
            problems.append(_problem(loaded, where + (key,), f"{key} {item[key]!r} conflicts with {key} {inner!r} in "
                                     f"the release's values (line {line})",
                                     hint=f"keep one of them (both must name the same {key})"))
    return problems


def _release_values(item: dict[str, Any], where: tuple) -> tuple[dict[str, Any], dict[str, tuple]]:
    """A recipe release's values with its release-level chart/accelerator/release filled in, and where each
    of those is written."""
    values = dict(item.get("values") or {})
    origin = {}
    for key in ("chart", "accelerator", "release"):
        if item.get(key) is not None and key not in values:
            values[key] = item[key]
            origin[key] = where + (key,)
    return values, origin


def release_names(path: str | Path | Sequence[str | Path], env: Mapping[str, str] | None = None, *,
                  release: str | None = None) -> list[ReleaseName]:
    """What uninstall needs: every release's name, and nothing else. Only the strings that give a name are
    substituted (a variable only install needs may be unset); no file is read, no chart resolved."""
    from helm_nemo.user_errors import UserError, raise_if_problems
    from helm_nemo.values.substitute import substitute

    loaded = load_all(path)
    data = loaded.data
    recipe = "releases" in data
    if recipe:
        _recipe_shape(loaded, data, release)
        wanted: dict[str, Any] = {"releases": [_names_of(item) for item in data["releases"]]}
    else:
        wanted = {"release": data["release"]} if "release" in data else {}
    named = substitute(replace(loaded, data=wanted), os.environ if env is None else env).data
    out, problems = [], []
    for index, item in enumerate(named["releases"] if recipe else [named]):
        where = ("releases", index) if recipe else ()
        if item is None:
            problems.append(_problem(loaded, where, "each release is a mapping"))
            continue
        problems += _release_problems(loaded, item, where) if recipe else []
        values, origin = _release_values(item, where) if recipe else (item, {})
        prefix = where + ("values",) if recipe else ()
        try:
            name, found = _release_name(loaded, values, prefix, release, _real(prefix, origin))
        except UserError as err:  # no name: reported with the others
            problems += err.problems
            continue
        problems += found
        out.append(ReleaseName(release=name, source=loaded.path, sources=list(loaded.paths)))
    raise_if_problems(problems, title=f"{loaded.label}: {len(problems)} problem(s):")
    return out


def _names_of(item: Any) -> dict[str, Any] | None:
    """The parts of a recipe release that name it (`release:` and `values.release`), or None for a non-mapping."""
    if not isinstance(item, dict):
        return None
    out = {"release": item["release"]} if "release" in item else {}
    if isinstance(item.get("values"), dict) and "release" in item["values"]:
        out["values"] = {"release": item["values"]["release"]}
    return out


def helm_values_json(plan: ReleasePlan) -> str:
    """What helm gets: the user's values (not merged with defaults: helm does that), as JSON."""
    values = {k: v for k, v in plan.values.items() if k != "files"}
    return json.dumps(values, ensure_ascii=False, sort_keys=False)
