"""Safe ${VAR} substitution inside parsed values (never text-level envsubst).

Rules (helm-ecosystem.md §3.3): only string scalars, never keys; only `${NAME}`, `${NAME:-default}`,
`${NAME:?message}`; bare `$NAME`, `$(…)`, `$1` stay as they are; `$${` is a literal `${`; any other
`${…}` is an error; an unset variable is an error, and all of them are reported at once. Names the
pod defines at run time (`${NNODES}`, `${JOB_IDENTIFIER}`, env names from workload.envs …) are kept
for the pod's shell. A whole plain scalar (`replicas: ${N}`) is re-typed with YAML 1.2 core rules; a
quoted or partial one stays a string, so `tag: "${TAG}"` with 1.10 stays "1.10".
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from .user_errors import Problem, UserError

# Variables the charts and launchers define inside the pod; `${NNODES}` in a value is for the pod's shell.
RUNTIME_VARIABLES = frozenset({
    "NNODES", "GPUS_PER_NODE", "WORLD_SIZE", "JOB_IDENTIFIER", "JOB_TIMESTAMP", "JOB_UUID",
    "JOB_COMPLETION_INDEX", "JOB_ORCHESTRATOR", "JOBSET_NAME", "REPLICATED_JOB_NAME", "MASTER_ADDR",
    "MASTER_PORT", "NODE_RANK", "RANK", "LOCAL_RANK", "RANK_0_FQDN", "HOSTNAME_PREFIX", "DOMAIN_NAME",
    "SSD_MOUNT_PATH", "NCCL_INIT_SCRIPT", "NCCL_LIB_DIR", "HOSTNAME", "POD_NAME", "EXPERIMENT_NAME",
    "EXPERIMENT_ROOT_DIR", "CHECKPOINTS_ROOT_DIR", "TOKENIZER_PATH", "TORCH_DISTRIBUTED_TARGET",
    "NEMO_CONFIG_OVERRIDES", "LD_LIBRARY_PATH", "PATH", "HOME", "PWD",
})
SECRET_NAME = re.compile(r"TOKEN|PASSWORD|SECRET|KEY|CREDENTIAL", re.I)

_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
# $$ (escape), ${NAME}, ${NAME:-default}, ${NAME:?message}, or any other ${...} (malformed).
_TOKEN = re.compile(r"\$\$|\$\{(?P<body>[^}]*)\}|\$\{(?P<open>[^}]*)$")
_BODY = re.compile(rf"^(?P<name>{_NAME})(?:(?P<op>:-|:\?)(?P<arg>.*))?$", re.S)
_INT = re.compile(r"^[-+]?[0-9]+$")
_FLOAT = re.compile(r"^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$")


@dataclass
class SubstitutionResult:
    data: dict[str, Any]
    used: dict[tuple, list[str]] = field(default_factory=dict)  # path -> variable names taken from env

    def names(self) -> set[str]:
        return {n for names in self.used.values() for n in names}

    def redacted(self, env: Mapping[str, str]) -> dict[str, Any]:
        """The values with every secret-looking variable's value masked (for printing)."""
        secrets = [env[n] for n in self.names() if SECRET_NAME.search(n) and env.get(n)]

        def mask(node: Any) -> Any:
            if isinstance(node, dict):
                return {k: mask(v) for k, v in node.items()}
            if isinstance(node, list):
                return [mask(v) for v in node]
            if isinstance(node, str):
                for secret in secrets:
                    node = node.replace(secret, "***")
            return node

        return mask(self.data)


def runtime_names(data: Any) -> set[str]:
    """RUNTIME_VARIABLES plus every env var the values define for the pod (workload.envs, ncclSettings…)."""
    names = set(RUNTIME_VARIABLES)

    def visit(node: Any, key: str | None) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                visit(v, k)
        elif isinstance(node, list):
            if key in ("envs", "ncclSettings", "env"):
                names.update(item["name"] for item in node if isinstance(item, dict) and isinstance(item.get("name"), str))
            for item in node:
                visit(item, None)

    visit(data, None)
    return names


def _retype(text: str) -> Any:
    """YAML 1.2 core schema for a whole plain scalar: int, float, true/false, null; else the string."""
    if text in ("true", "True", "TRUE"):
        return True
    if text in ("false", "False", "FALSE"):
        return False
    if text in ("null", "Null", "NULL", "~", ""):
        return None
    if _INT.match(text):
        return int(text)
    if _FLOAT.match(text) and any(c.isdigit() for c in text):
        return float(text)
    return text


def substitute(loaded, env: Mapping[str, str], *, keep: Iterable[str] | None = None,
               allow: Iterable[str] | None = None, prefix: tuple = ()) -> SubstitutionResult:
    """Substitute inside loaded.data (a values_file.LoadedValues); raise UserError listing every problem."""
    keep_set = set(keep) if keep is not None else runtime_names(loaded.data)
    allow_set = set(allow) if allow is not None else None
    problems: list[Problem] = []
    used: dict[tuple, list[str]] = {}

    def problem(where: tuple, message: str, hint: str | None = None, expected: str | None = None) -> None:
        line, column = loaded.position(where)
        path = "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in where)
        problems.append(Problem(str(loaded.path), line, column, path, message, expected, hint))

    def replace(text: str, where: tuple) -> Any:
        names: list[str] = []
        whole_reference = False

        def one(match: re.Match) -> str:
            nonlocal whole_reference
            token = match.group(0)
            if token == "$$":
                return "$"
            if match.group("open") is not None:
                problem(where, f"unterminated reference {token!r}", hint="close it with '}', or write $${ for a literal ${")
                return token
            body = _BODY.match(match.group("body"))
            if not body:
                problem(where, f"malformed reference {token!r}", expected="${NAME}, ${NAME:-default} or ${NAME:?message}",
                        hint="write $${ for a literal ${ (e.g. shell parameter expansion)")
                return token
            name, op, arg = body.group("name"), body.group("op"), body.group("arg")
            if name in keep_set:
                return token  # the pod's shell expands it
            value = env.get(name)
            if allow_set is not None and name not in allow_set:
                problem(where, f"variable {name} is not in the allowed list", hint="add it with --allow-env")
                return token
            if op == ":-" and not value:
                return arg
            if value is None or (op == ":?" and not value):
                message = arg if op == ":?" and arg else f"variable {name} is not set"
                problem(where, message, hint=f"export {name}=… before running, or use ${{{name}:-default}}")
                return token
            names.append(name)
            return value

        result = _TOKEN.sub(one, text)
        if names:
            used[prefix + where] = names
        whole_reference = bool(re.fullmatch(r"\$\{[^}]*\}", text)) and where in loaded.plain_scalars
        if whole_reference and result != text:
            return _retype(result)
        return result

    def walk(node: Any, where: tuple) -> Any:
        if isinstance(node, dict):
            return {k: walk(v, where + (k,)) for k, v in node.items()}
        if isinstance(node, list):
            return [walk(v, where + (i,)) for i, v in enumerate(node)]
        if isinstance(node, str) and "$" in node:
            return replace(node, where)
        return node

    data = walk(loaded.data, ())
    if problems:
        raise UserError(problems, title=f"{len(problems)} problem(s) substituting variables:")
    return SubstitutionResult(data=data, used=used)
