"""Safe ${VAR} substitution inside parsed values (never text-level envsubst).

Text-level envsubst lets a value inject YAML (`NOTE=$'x\\nreplicas: 999'`), silently empties unset
names and eats shell `$1`/`$labels`; so, following helm-ecosystem.md §3.3:

- the file is parsed first; only string *values* are touched, never keys, so a value stays one string;
- only `${NAME}`, `${NAME:-default}` (unset or empty -> default, which may itself hold references) and
  `${NAME:?message}` (unset or empty -> error with the message); NAME is `[A-Za-z_][A-Za-z0-9_]*`;
- bare `$NAME`, `$1`, `$(…)`, `$labels` stay as they are; `$$` is a literal `$` (so `$${X}` -> `${X}`);
- any other `${…}` (`${x/y}`, `${#x}`, `${ X }`, an unclosed `${`) is a "malformed reference" error;
- an unset name is an error, and every problem in the file is reported at once, with file:line:col;
- which `${NAME}` stay for the pod (its shell expands them; helm nemo leaves them as written):
  1. NAME is one of the pod's own variables, RUNTIME_VARIABLES (generator/shared/runtime-variables.yaml:
     `${NNODES}`, `${JOB_IDENTIFIER}`, `${HOME}` …): always, whatever the local environment holds;
  2. NAME is an env var the values define for the pod (an item `name: NAME` of any `envs`, `ncclSettings`
     or `env` list; in a recipe file, of the same release: each release is its own pod, pod_env_scopes)
     and is not set in the local environment. Set locally as well, `${NAME}` is ambiguous
     and an error that says how to choose: `$${NAME}` for the pod's value, or the local value under
     another name. The `value` of the entry that defines NAME is the exception: Kubernetes never expands
     `${…}` in an env value, so `{name: HF_TOKEN, value: ${HF_TOKEN}}` takes HF_TOKEN from the environment;
  every other `${NAME}` is substituted from the environment (unset: an error);
- `${A:-${B:-…}}` defaults nest at most MAX_DEFAULT_DEPTH levels (deeper: an error, never a RecursionError);
- typing: a substituted value is always the string the variable holds; it never changes type
  (TAG=1.10 gives "1.10", FLAG=yes gives "yes", N=08 gives "08"), so a number or boolean a schema
  needs is written literally in the file, and the schema names the line when a string lands there.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: importing typing costs every run start-up time
    from typing import Any
    from collections.abc import Iterable, Mapping

    from helm_nemo.values.loaded import LoadedValues

from helm_nemo import secrets as secret_values
from helm_nemo.user_errors import Problem, UserError, json_path


def _runtime_variables() -> frozenset[str]:
    """The variables the pod defines: one list, owned by the chart source (generator/shared/runtime-variables.yaml)."""
    from helm_nemo import resources
    from helm_nemo.generate.profiles import read_yaml

    groups = read_yaml(resources.generator_dir() / "shared" / "runtime-variables.yaml") or {}
    return frozenset(name for names in groups.values() for name in names or ())


# Variables the charts, profiles and the pod's shell define inside the pod; `${NNODES}` is for the pod.
RUNTIME_VARIABLES = _runtime_variables()
# Lists whose items define pod env vars by `name` (workload.envs, network.ncclSettings, a container's env).
ENV_LIST_KEYS = frozenset({"envs", "ncclSettings", "env"})
MASK = secret_values.MASK

_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_BODY = re.compile(rf"(?P<name>{_NAME})(?:(?P<op>:-|:\?)(?P<arg>.*))?", re.S)
_EXPECTED = "${NAME}, ${NAME:-default} or ${NAME:?message}"
# YAML 1.2 core schema (no yes/no/on/off, no octal, no sexagesimal); .inf/.nan stay strings (JSON has no such number).


@dataclass
class SubstitutionResult:
    """The substituted data, and which variables were used where (to point errors at their origin)."""

    data: dict[str, Any]
    used: dict[tuple[Any, ...], list[str]] = field(default_factory=dict)  # path -> variable names taken from env
    secrets: dict[tuple[Any, ...], list[str]] = field(default_factory=dict)  # path -> secrets put there (the policy)
    loaded: Any = None  # the LoadedValues substituted (positions of each path)
    environment: dict[tuple[Any, ...], list[str]] = field(default_factory=dict)  # path -> every value taken from env

    def environment_values(self) -> list[str]:
        """Every value taken from the environment, secret or not."""
        return list(dict.fromkeys(v for values in self.environment.values() for v in values))

    def secret_values(self) -> list[str]:
        """The values helm_nemo.secret_policy calls secret (what helm_nemo.secrets masks in printed text)."""
        return list(dict.fromkeys(v for values in self.secrets.values() for v in values))

    def names(self) -> set[str]:
        return {n for names in self.used.values() for n in names}

    def origin(self, where: tuple[Any, ...]) -> tuple[str | None, int | None, int | None]:
        """(file, line, column) in the user's file of a substituted path."""
        if self.loaded is None:
            return (None, None, None)
        line, column = self.loaded.position(where)
        return (str(self.loaded.path), line, column)

    def redacted(self, env: Mapping[str, str] | None = None) -> dict[str, Any]:
        """The values with the secrets (helm_nemo.secret_policy) masked (for --dry-run output).

        Only the paths where such a variable was used are touched, so a short secret (`1`) does not mask
        every `1` in the file. `env` is accepted for older callers; the result knows its own secrets.
        """

        def mask(node: Any, where: tuple[Any, ...]) -> Any:
            if isinstance(node, dict):
                return {k: mask(v, where + (k,)) for k, v in node.items()}
            if isinstance(node, list):
                return [mask(v, where + (i,)) for i, v in enumerate(node)]
            secrets = self.secrets.get(where)
            if not secrets:
                return node
            if not isinstance(node, str):
                return MASK  # a re-typed secret (a numeric PIN …)
            return secret_values.mask_within(node, secrets)

        masked: dict[str, Any] = mask(self.data, ())
        return masked


def pod_env_names(data: Any) -> dict[str, list[tuple[Any, ...]]]:
    """The env vars the values define for the pod: name -> the paths of the list items defining it.

    `--log-dir=${LOG_DIR_PREFIX}` refers to `workload.envs[].name: LOG_DIR_PREFIX`, set in the pod, not on
    the machine running helm; the same holds for network.ncclSettings[] and any `env:` list.
    """
    found: dict[str, list[tuple[Any, ...]]] = {}

    def visit(node: Any, key: Any, where: tuple[Any, ...]) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                visit(v, k, where + (k,))
        elif isinstance(node, list):
            for index, item in enumerate(node):
                if key in ENV_LIST_KEYS and isinstance(item, dict) and isinstance(item.get("name"), str):
                    found.setdefault(item["name"], []).append(where + (index,))
                visit(item, None, where + (index,))

    visit(data, None, ())
    return found


def pod_env_scopes(data: Any) -> dict[tuple[Any, ...], dict[str, list[tuple[Any, ...]]]]:
    """The pod env names each part of a file sees, by path prefix: a recipe's releases are separate pods, so an
    env name one release defines is that release's alone (`("releases", i)` -> its names); the recipe's own keys
    see none. A plain values file is one scope, `()`."""
    releases = data.get("releases") if isinstance(data, dict) else None
    if not isinstance(releases, list):
        return {(): pod_env_names(data)}
    scopes: dict[tuple[Any, ...], dict[str, list[tuple[Any, ...]]]] = {(): {}}
    for index, item in enumerate(releases):
        where = ("releases", index)
        scopes[where] = {name: [where + path for path in paths] for name, paths in pod_env_names(item).items()}
    return scopes


def runtime_names(data: Any) -> set[str]:
    """RUNTIME_VARIABLES plus every env var the values define for the pod (see the module doc for the rule)."""
    return set(RUNTIME_VARIABLES) | set(pod_env_names(data))


def _closing_brace(text: str, start: int) -> int:
    """Index of the `}` closing the `${` whose `{` is at start-1 (nested braces balanced), or -1."""
    depth = 1
    for index in range(start, len(text)):
        char = text[index]
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return index
    return -1


# `${A:-${B:-…}}`: how deep defaults may nest (each level is a reference inside the default of the one around it).
MAX_DEFAULT_DEPTH = 20


class _Substituter:
    def __init__(
        self,
        loaded: LoadedValues,
        env: Mapping[str, str],
        keep: set[str],
        scopes: dict[tuple[Any, ...], dict[str, list[tuple[Any, ...]]]],
        allow: set[str] | None,
        prefix: tuple[Any, ...],
    ):
        self.loaded, self.env, self.keep, self.scopes, self.allow, self.prefix = (
            loaded,
            env,
            keep,
            scopes,
            allow,
            prefix,
        )
        self.problems: list[Problem] = []
        self.missing: list[str] = []
        self.used: dict[tuple[Any, ...], list[str]] = {}
        self.secrets: dict[tuple[Any, ...], list[str]] = {}
        self.environment: dict[tuple[Any, ...], list[str]] = {}

    def problem(
        self, where: tuple[Any, ...], message: str, *, expected: str | None = None, hint: str | None = None
    ) -> None:
        line, column = self.loaded.position(where)
        self.problems.append(Problem(str(self.loaded.path), line, column, json_path(where), message, expected, hint))

    def walk(self, node: Any, where: tuple[Any, ...]) -> Any:
        if isinstance(node, dict):
            return {k: self.walk(v, where + (k,)) for k, v in node.items()}  # keys are never substituted
        if isinstance(node, list):
            return [self.walk(v, where + (i,)) for i, v in enumerate(node)]
        if isinstance(node, str) and "$" in node:
            return self.scalar(node, where)
        return node

    def pod_env(self, where: tuple[Any, ...]) -> dict[str, list[tuple[Any, ...]]]:
        """The pod env names visible at `where`: those of its release (or of the whole values file)."""
        return self.scopes.get(tuple(where[:2]), self.scopes.get((), {})) if len(self.scopes) > 1 else self.scopes[()]

    def scalar(self, text: str, where: tuple[Any, ...]) -> Any:
        names: list[str] = []
        secrets: list[str] = []
        result, whole = self.expand(text, where, names, secrets, 0)
        if names:
            self.used[self.prefix + where] = names
            self.environment[where] = [self.env[name] for name in names if self.env.get(name)]
        if secrets:
            self.secrets[where] = secrets
        return result  # a string stays a string (see the module docstring: no re-typing)

    def expand(
        self, text: str, where: tuple[Any, ...], names: list[str], secrets: list[str], depth: int
    ) -> tuple[str, bool]:
        """Expand `text` (`depth`: defaults around it); the flag says it was exactly one substituted reference."""
        out: list[str] = []
        whole = False
        index = 0
        while True:
            dollar = text.find("$", index)
            if dollar < 0:
                out.append(text[index:])
                break
            out.append(text[index:dollar])
            following = text[dollar + 1 : dollar + 2]
            if following == "$":  # `$$` -> `$`, so `$${X}` -> `${X}`
                out.append("$")
                index = dollar + 2
                continue
            if following != "{":  # bare $NAME, $1, $(…): not ours
                out.append("$")
                index = dollar + 1
                continue
            close = _closing_brace(text, dollar + 2)
            if close < 0:
                self.problem(
                    where,
                    f"unterminated reference {text[dollar : dollar + 40]!r}",
                    expected=_EXPECTED,
                    hint="close it with '}', or write $${ for a literal ${",
                )
                out.append(text[dollar:])
                break
            token = text[dollar : close + 1]
            replacement, substituted = self.reference(token, where, names, secrets, depth)
            out.append(replacement)
            whole = substituted and dollar == 0 and close == len(text) - 1
            index = close + 1
        return "".join(out), whole

    def reference(
        self, token: str, where: tuple[Any, ...], names: list[str], secrets: list[str], depth: int
    ) -> tuple[str, bool]:
        """The text for one `${…}` and whether it was substituted (False: kept for the pod, or an error)."""
        body = _BODY.fullmatch(token[2:-1])
        if not body:
            self.problem(
                where,
                f"malformed reference {token!r}",
                expected=_EXPECTED,
                hint="write $${ for a literal ${ (e.g. shell parameter expansion in a script)",
            )
            return token, False
        name, op, arg = body.group("name"), body.group("op"), body.group("arg")
        if name in self.keep:
            return token, False  # the pod's shell expands it
        defined = self.pod_env(where).get(name)
        if defined and not (where[-1:] == ("value",) and where[:-1] in defined):  # see rule 2 of the module doc
            if name not in self.env:
                return token, False
            first = defined[0]
            line, _ = self.loaded.position(first + ("name",))
            self.problem(
                where,
                f"${{{name}}} is ambiguous: {name} is an env var the values define for the pod "
                f"({json_path(first)}, line {line}) and is also set in your environment",
                hint=f"for the pod's value write $${{{name}}}; for your environment's value export it under "
                f"another name (e.g. LOCAL_{name}) and write that",
            )
            return token, False
        if self.allow is not None and name not in self.allow:
            self.problem(
                where,
                f"variable {name} is not allowed: it is not in the allowed list",
                hint=f"add {name} to the allowed variables (--allow-env), or write $${{{name}}} for a literal",
            )
            return token, False
        value = self.env.get(name)
        if op == ":-" and not value:
            if depth >= MAX_DEFAULT_DEPTH:
                self.problem(
                    where,
                    f"${{{name}:-…}} defaults nest deeper than {MAX_DEFAULT_DEPTH} levels",
                    hint="set one of the variables, or write the default without so many nested references",
                )
                return token, False
            default, _ = self.expand(arg, where, names, secrets, depth + 1)
            return default, True
        if value is None or (op == ":?" and not value):
            self.missing.append(name)
            if op == ":?":
                message = f"variable {name} is not set: {arg}" if arg else f"variable {name} is not set or empty"
            else:
                message = f"variable {name} is not set"
            self.problem(where, message, hint=f"export {name}=… before running, or write ${{{name}:-default}}")
            return token, False
        names.append(name)
        secret_values.note(value, name)
        if value and secret_values.is_secret(name, value):
            secrets.append(value)
        return value, True


def substitute(
    loaded: LoadedValues,
    env: Mapping[str, str],
    *,
    keep: Iterable[str] | None = None,
    allow: Iterable[str] | None = None,
    prefix: tuple[Any, ...] = (),
) -> SubstitutionResult:
    """Substitute `${…}` inside `loaded.data` (a values_file.LoadedValues); raise one UserError listing every problem.

    keep: names always left for the pod (default: RUNTIME_VARIABLES); env vars the values define for the pod
    follow rule 2 of the module doc either way; allow: when given, the only names that may be read from
    `env`; prefix: where `loaded.data` sits in a bigger document (for JSON paths).
    """
    keep_set = set(keep) if keep is not None else set(RUNTIME_VARIABLES)
    allow_set = set(allow) if allow is not None else None
    worker = _Substituter(loaded, env, keep_set, pod_env_scopes(loaded.data), allow_set, prefix)
    data = worker.walk(loaded.data, ())
    if worker.problems:
        title = f"{loaded.path}: {len(worker.problems)} problem(s) substituting variables"
        if worker.missing:
            title += " (not set: " + ", ".join(dict.fromkeys(worker.missing)) + ")"
        raise UserError(worker.problems, title=title + ":")
    return SubstitutionResult(
        data=data, used=worker.used, secrets=worker.secrets, loaded=loaded, environment=worker.environment
    )
