"""A recipe file's structure and what names its releases: the keys of a recipe and of each release, a
release-level chart/accelerator/release against its values, release names (helm's rule, checked before
helm runs), several `-f` files loaded as one, and `release_names`: all uninstall needs, without
substituting or reading anything else.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field, replace
from pathlib import Path

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: importing typing costs every run start-up time
    from typing import Any
    from collections.abc import Mapping, Sequence

    from collections.abc import Callable

    from helm_nemo.user_errors import Problem
    from helm_nemo.values.loaded import LoadedValues

    RealPath = Callable[[tuple[Any, ...]], tuple[Any, ...]]  # a values path -> where it is written

# Keys of a recipe file (a file with `releases:`) and of each of its releases.
RECIPE_KEYS = {"recipe", "description", "releases"}
RELEASE_KEYS = {
    "release",
    "chart",
    "accelerator",
    "values",
    "version",
    "after",
    "dataFrom",
}  # stages: dataprep/recipe.py
# helm's release names: DNS-1123 labels of at most 53 characters (names derived from them get suffixes).
RELEASE_NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
MAX_RELEASE_NAME = 53
COMMAND_LINE = "command line"  # the "file" of a problem with a command-line argument


@dataclass
class ReleaseName:
    """What uninstall needs of a release: its name and where it is written."""

    release: str
    source: Path
    sources: list[Path] = field(default_factory=list)

    def values_flags(self) -> str:
        return " ".join(f"--values {path}" for path in (self.sources or [self.source]))


def problem(
    loaded: LoadedValues,
    where: tuple[Any, ...],
    message: str,
    expected: str | None = None,
    hint: str | None = None,
    shown: tuple[Any, ...] | None = None,
) -> Problem:
    """A Problem at `where` in the file that wrote it; `shown`: the JSON path to print, when not `where`."""
    from helm_nemo.user_errors import Problem

    line, column = loaded.position(where)
    return Problem(
        file=str(loaded.file_of(where)),
        line=line,
        column=column,
        json_path=json_path(where if shown is None else shown),
        message=message,
        expected=expected,
        hint=hint,
    )


def json_path(parts: tuple[Any, ...]) -> str:
    from helm_nemo.user_errors import json_path as render

    return render(parts)


def real_path(prefix: tuple[Any, ...], origin: dict[str, tuple[Any, ...]]) -> RealPath:
    """Where a path of a release's values is written: most under `prefix`, a recipe's release-level keys
    (`origin`: key -> its path) elsewhere."""

    def real(rel: tuple[Any, ...]) -> tuple[Any, ...]:
        return origin[rel[0]] + tuple(rel[1:]) if rel and rel[0] in origin else prefix + tuple(rel)

    return real


def release_name_problem(name: Any, where: str) -> str | None:
    """Why `name` cannot be a helm release name (None when it can); `where` says where it was written."""
    if not isinstance(name, str) or not RELEASE_NAME.fullmatch(name):
        return (
            f"release name {name!r} ({where}) is not a DNS-1123 label: lower-case letters, digits and '-', "
            "starting and ending with a letter or digit"
        )
    if len(name) > MAX_RELEASE_NAME:
        return f"release name {name!r} ({where}) is {len(name)} characters, more than {MAX_RELEASE_NAME}"
    return None


def release_name(
    loaded: LoadedValues, data: dict[str, Any], prefix: tuple[Any, ...], release: str | None, real: RealPath
) -> tuple[str, list[Any]]:
    """The release's name (command line first, else `release:`) and the problem with it, if any."""
    from helm_nemo.user_errors import Problem, UserError

    name = release or data.get("release")
    if not name:
        raise UserError(
            problem(
                loaded,
                prefix,
                "no release name",
                expected="`release: <name>` in the values",
                hint="or give it on the command line: helm nemo install NAME --values …",
            )
        )
    if release:
        why = release_name_problem(release, "from the command line")
        return name, [Problem(COMMAND_LINE, None, None, "$", why, hint="helm refuses it")] if why else []
    why = release_name_problem(name, "from the values")
    return name, [problem(loaded, real(("release",)), why, shown=("release",), hint="helm refuses it")] if why else []


def load_all(paths: str | Path | Sequence[str | Path]) -> LoadedValues:
    """One or several values files (`-` is stdin), merged like helm's `-f a -f b`; a recipe stands alone."""
    from helm_nemo.user_errors import UserError
    from helm_nemo.values.load import load_values
    from helm_nemo.values.loaded import merge_loaded

    names = [paths] if isinstance(paths, (str, Path)) else list(paths)
    if sum(1 for name in names if str(name) == "-") > 1:
        raise UserError(command_line_problem("stdin (-f -) can be read once only"))
    parts = [load_values(name) for name in names]
    if len(parts) > 1:
        for part in parts:
            if "releases" in part.data:
                raise UserError(
                    problem(
                        part,
                        ("releases",),
                        "a recipe file (with `releases:`) cannot be merged with other --values files",
                        hint="give the recipe alone, or put the changes into the values of its releases",
                    )
                )
    return merge_loaded(parts)


def command_line_problem(message: str, hint: str | None = None) -> Problem:
    from helm_nemo.user_errors import Problem

    return Problem(COMMAND_LINE, None, None, "$", message, hint=hint)


def recipe_shape(loaded: LoadedValues, data: dict[str, Any], release: str | None) -> None:
    from helm_nemo.user_errors import UserError

    unknown = sorted(set(data) - RECIPE_KEYS)
    if unknown:
        raise UserError(
            problem(
                loaded, (unknown[0],), f"unknown recipe key {unknown[0]!r}", expected=", ".join(sorted(RECIPE_KEYS))
            )
        )
    releases = data.get("releases") or []
    if not isinstance(releases, list) or not releases:
        raise UserError(problem(loaded, ("releases",), "`releases` must be a non-empty list"))
    if release and len(releases) > 1:
        raise UserError(
            problem(loaded, ("releases",), "a release name on the command line fits a one-release file only")
        )


def release_problems(loaded: LoadedValues, item: Any, where: tuple[Any, ...]) -> list[Any] | None:
    """A recipe release's own keys: unknown ones, `values` not a mapping, a release-level chart/accelerator/
    release that its values contradict. None when the release is not a mapping at all."""
    if not isinstance(item, dict):
        return None
    problems = [
        problem(loaded, where + (key,), f"unknown release key {key!r}", expected=", ".join(sorted(RELEASE_KEYS)))
        for key in sorted(set(item) - RELEASE_KEYS)
    ]
    values = item.get("values")
    if values is not None and not isinstance(values, dict):
        problems.append(
            problem(
                loaded,
                where + ("values",),
                "the values of a release must be a mapping",
                expected="values: {key: value, …}",
            )
        )
        return problems
    for key in ("chart", "accelerator", "release"):
        inner = (values or {}).get(key)
        if item.get(key) is not None and inner is not None and inner != item[key]:
            line, _ = loaded.position(where + ("values", key))
            problems.append(
                problem(
                    loaded,
                    where + (key,),
                    f"{key} {item[key]!r} conflicts with {key} {inner!r} in the release's values (line {line})",
                    hint=f"keep one of them (both must name the same {key})",
                )
            )
    return problems


def release_values(item: dict[str, Any], where: tuple[Any, ...]) -> tuple[dict[str, Any], dict[str, tuple[Any, ...]]]:
    """A recipe release's values with its release-level chart/accelerator/release filled in, and where each
    of those is written."""
    values = dict(item.get("values") or {})
    origin = {}
    for key in ("chart", "accelerator", "release"):
        if item.get(key) is not None and key not in values:
            values[key] = item[key]
            origin[key] = where + (key,)
    return values, origin


def release_names(
    path: str | Path | Sequence[str | Path], env: Mapping[str, str] | None = None, *, release: str | None = None
) -> list[ReleaseName]:
    """What uninstall needs: every release's name, and nothing else. Only the strings that give a name are
    substituted (a variable only install needs may be unset); no file is read, no chart resolved."""
    from helm_nemo.user_errors import UserError, raise_if_problems
    from helm_nemo.values.substitute import substitute

    loaded = load_all(path)
    data = loaded.data
    recipe = "releases" in data
    if recipe:
        recipe_shape(loaded, data, release)
        wanted: dict[str, Any] = {"releases": [names_of(item) for item in data["releases"]]}
    else:
        wanted = {"release": data["release"]} if "release" in data else {}
    named = substitute(replace(loaded, data=wanted), os.environ if env is None else env).data
    out, problems = [], []
    for index, item in enumerate(named["releases"] if recipe else [named]):
        where = ("releases", index) if recipe else ()
        if item is None:
            problems.append(problem(loaded, where, "each release is a mapping"))
            continue
        problems += (release_problems(loaded, item, where) or []) if recipe else []  # a mapping here: a list
        values, origin = release_values(item, where) if recipe else (item, {})
        prefix = where + ("values",) if recipe else ()
        try:
            name, found = release_name(loaded, values, prefix, release, real_path(prefix, origin))
        except UserError as err:  # no name: reported with the others
            problems += err.problems
            continue
        problems += found
        out.append(ReleaseName(release=name, source=loaded.path, sources=list(loaded.paths)))
    raise_if_problems(problems, title=f"{loaded.label}: {len(problems)} problem(s):")
    return out


def names_of(item: Any) -> dict[str, Any] | None:
    """The parts of a recipe release that name it (`release:` and `values.release`), or None for a non-mapping."""
    if not isinstance(item, dict):
        return None
    out = {"release": item["release"]} if "release" in item else {}
    if isinstance(item.get("values"), dict) and "release" in item["values"]:
        out["values"] = {"release": item["values"]["release"]}
    return out
