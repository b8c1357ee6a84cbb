"""Property tests for ${VAR} substitution: it changes string values only, never structure, keys or types.

Random YAML-able structures (nested dicts and lists of strings, ints, bools and None) whose strings are
drawn from an alphabet full of substitution syntax (`$`, `{`, `}`, `:-`, `:?`, newlines, quotes, names
of set and of pod runtime variables) are dumped with yaml.safe_dump, loaded with load_values_text and
substituted with an environment that sets every referenced name. The rule under test (issue 3): a
substituted value is the variable's string; it is never re-typed (`1.10`, `yes`, `08` stay strings).
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, assume, example, given, settings, strategies as st

from helm_nemo.values.substitute import RUNTIME_VARIABLES, substitute
from helm_nemo.user_errors import UserError
from helm_nemo.values.load import load_values_text

# database=None: no .hypothesis folder in the checkout (it is not in .gitignore)
SETTINGS = settings(max_examples=200, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])

RUNTIME = ("NNODES", "JOB_IDENTIFIER", "MASTER_ADDR")
assert set(RUNTIME) <= RUNTIME_VARIABLES
# Set variables: values that would be re-typed by a YAML reader, or that try to inject YAML.
ENV = {
    "SET_A": "1.10",
    "SET_B": "yes",
    "SET_C": "line1\nreplicas: 999\n- item",
    "SET_D": "q\"uo'te: ${NNODES} $${SET_A} ${SET_A}",  # values are never expanded again
    "SET_E": "",
    "SET_F": "08",
    **{name: "LEAK" for name in RUNTIME},  # set locally, but the pod's shell must expand them
}
NAME_IN_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)")

# Wild strings: single characters and whole tokens, in any order (so references get split, nested,
# escaped and left unterminated).
CHARS = "ab1 :-?{}$\"'\n#.,[]|>&*!%@`\\"
TOKENS = [
    "${SET_A}",
    "${SET_B}",
    "${SET_C}",
    "${SET_D}",
    "${SET_E}",
    "${SET_F}",
    "${NNODES}",
    "${JOB_IDENTIFIER}",
    "${MASTER_ADDR:-x}",
    "${UNSET_X:-fallback}",
    "${SET_A:-unused}",
    "${UNSET_Y:-${SET_B}}",
    "${SET_E:?empty}",
    "${ab}",
    "${",
    "}",
    "$",
    "$$",
    "${x/y}",
    "${ X }",
    "${}",
    "$NNODES",
    "$(date)",
    "$1",
    "SET_A",
    "NNODES",
    ": ",
    "- ",
    "? ",
    "\n",
    "'",
    '"',
    "1.10",
    "yes",
    "~",
    "null",
    "08",
    "{a: 1}",
    "[b]",
]
wild_text = st.lists(st.sampled_from(TOKENS) | st.text(alphabet=CHARS, max_size=3), max_size=6).map("".join)
keys = st.sampled_from(
    ["a", "image", "gpus", "x y", "k: v", "${SET_A}", "$${NNODES}", "1", "true", "null", "", "a\nb", "'q'", "- d"]
) | st.text(alphabet=CHARS, max_size=4)


def tree(text_strategy):
    leaves = st.none() | st.booleans() | st.integers(-(10**9), 10**9) | text_strategy
    nodes = st.recursive(
        leaves, lambda kids: st.lists(kids, max_size=4) | st.dictionaries(keys, kids, max_size=4), max_leaves=25
    )
    return st.dictionaries(keys, nodes, max_size=5)


def dump(data: dict, flow: bool) -> str:
    return yaml.safe_dump(data, allow_unicode=True, sort_keys=False, default_flow_style=flow, width=40)


def strings(node: Any):
    if isinstance(node, dict):
        for value in node.values():
            yield from strings(value)
    elif isinstance(node, list):
        for item in node:
            yield from strings(item)
    elif isinstance(node, str):
        yield node


def key_paths(node: Any, where: tuple = ()) -> set[tuple]:
    out = {where}
    if isinstance(node, dict):
        for key, value in node.items():
            out |= key_paths(value, where + ("k", key))
    elif isinstance(node, list):
        for index, item in enumerate(node):
            out |= key_paths(item, where + ("i", index))
    return out


def assert_same_shape(before: Any, after: Any, where: str = "$") -> None:
    """Same keys (in order) at every level, same list lengths, same non-string leaves; strings stay strings;
    a string without `$` is unchanged."""
    if isinstance(before, dict):
        assert isinstance(after, dict), where
        assert list(after) == list(before), where
        for key in before:
            assert_same_shape(before[key], after[key], f"{where}.{key!r}")
    elif isinstance(before, list):
        assert isinstance(after, list) and len(after) == len(before), where
        for index, (b, a) in enumerate(zip(before, after)):
            assert_same_shape(b, a, f"{where}[{index}]")
    elif isinstance(before, str):
        assert type(after) is str, (where, before, after)
        if "$" not in before:
            assert after == before, where
    else:
        assert type(after) is type(before) and after == before, (where, before, after)


def env_for(data: dict) -> dict[str, str]:
    """ENV plus a value for every other name referenced anywhere (UNSET_* only appear with a default)."""
    env = dict(ENV)
    for text in strings(data):
        for name in NAME_IN_REF.findall(text):
            if name not in env and not name.startswith("UNSET_"):
                env[name] = f"<{name}>"
    return env


EXPECTED_ERRORS = ("malformed reference", "unterminated reference", "variable SET_E is not set")


def load_and_substitute(data: dict, flow: bool, env: dict[str, str] | None = None):
    loaded = load_values_text(dump(data, flow), "values.yaml")
    env = env_for(loaded.data) if env is None else env
    try:
        return loaded, substitute(loaded, env).data
    except UserError as err:
        # Only malformed input may fail here (every referenced name is set, except SET_E for `:?`).
        assert all(p.message.startswith(EXPECTED_ERRORS) for p in err.problems), err.format()
        assert all(p.file == "values.yaml" and p.line and p.column for p in err.problems), err.format()
        assume(False)
        raise  # unreachable


# --- structure is never changed ----------------------------------------------------------------


@SETTINGS
@given(data=tree(wild_text), flow=st.booleans())
@example(data={"a": "${SET_A}", "b": "${SET_B}", "c": ["${SET_F}", 1, None, True]}, flow=False)
def test_substitution_keeps_structure_keys_and_types(data, flow):
    loaded, result = load_and_substitute(data, flow)
    assert_same_shape(loaded.data, result)
    assert key_paths(result) == key_paths(loaded.data)
    # locally set runtime variables are never read: the pod's shell expands them
    assert not any("LEAK" in text for text in strings(result))
    # what helm gets (JSON) has exactly the same keys
    assert key_paths(json.loads(json.dumps(result))) == key_paths(loaded.data)


def test_the_explicit_example_is_typed_as_strings():
    _, result = load_and_substitute({"a": "${SET_A}", "b": "${SET_B}", "c": ["${SET_F}", 1]}, False)
    assert result == {"a": "1.10", "b": "yes", "c": ["08", 1]}


# --- exact result for well-formed strings ---------------------------------------------------------

# (written, expected after substitution). Each piece is self-contained, so the expected string of a
# concatenation is the concatenation of the expected pieces (no piece ends in `$` or opens a brace).
PIECES = [
    ("${SET_A}", "1.10"),
    ("${SET_B}", "yes"),
    ("${SET_C}", ENV["SET_C"]),
    ("${SET_D}", ENV["SET_D"]),
    ("${SET_E}", ""),
    ("${SET_F}", "08"),
    ("${UNSET_X:-fall back}", "fall back"),
    ("${UNSET_X:-${SET_A}}", "1.10"),
    ("${SET_E:-dflt}", "dflt"),
    ("${SET_A:-dflt}", "1.10"),
    ("${SET_A:?needed}", "1.10"),
    ("${NNODES}", "${NNODES}"),
    ("${JOB_IDENTIFIER}", "${JOB_IDENTIFIER}"),
    ("${MASTER_ADDR:-h}", "${MASTER_ADDR:-h}"),
    ("${NNODES:?x}", "${NNODES:?x}"),
    ("$${SET_A}", "${SET_A}"),
    ("$$", "$"),
    ("$NNODES", "$NNODES"),
    ("$(date)", "$(date)"),
    ("$1", "$1"),
    ("$ ", "$ "),
    ("\n", "\n"),
    (": ", ": "),
    ("- ", "- "),
    ("? ", "? "),
    ("'", "'"),
    ('"', '"'),
    ("#", "#"),
    ("key: value", "key: value"),
    ("1.10", "1.10"),
    ("yes", "yes"),
    ("~", "~"),
    ("a", "a"),
    ("  ", "  "),
]
pieces = st.lists(st.sampled_from(PIECES), max_size=6).map(
    lambda ps: ("".join(w for w, _ in ps), "".join(e for _, e in ps))
)


def _key_reads_back(key: str) -> bool:
    """safe_dump follows PyYAML's resolver, the loader helm's: `-.1` is written plain and read as -0.1 (helm too)."""
    return load_values_text(dump({key: 0}, False), "k.yaml").data == {key: 0}


@SETTINGS
@given(
    items=st.dictionaries(keys.filter(_key_reads_back), pieces | st.lists(pieces, max_size=3), max_size=6),
    flow=st.booleans(),
)
def test_well_formed_strings_substitute_exactly_and_runtime_references_survive(items, flow):
    written = {k: ([w for w, _ in v] if isinstance(v, list) else v[0]) for k, v in items.items()}
    expected = {k: ([e for _, e in v] if isinstance(v, list) else v[1]) for k, v in items.items()}
    loaded = load_values_text(dump(written, flow), "values.yaml")
    assert loaded.data == written  # safe_dump quotes what a reader would type (`yes`, `1.10`, `~`)
    result = substitute(loaded, ENV).data
    assert result == expected
    for key, value in written.items():
        for before, after in zip(*((v if isinstance(v, list) else [v]) for v in (value, result[key]))):
            assert type(after) is str
            for name in RUNTIME:  # every runtime reference written (not escaped with $$) is still there
                token = "${" + name
                assert after.count(token) >= before.count(token) - before.count("$" + token), (before, after)


# --- substituted values never add keys or change type ---------------------------------------------

injection = st.text(alphabet="ab1:-?#{}[]\"' \n|>&*!$.", max_size=30) | st.sampled_from(
    [
        "a: b",
        "x\nreplicas: 999",
        "- item",
        "{a: 1}",
        "[1, 2]",
        '"quoted": yes',
        "k: 'v'\n  nested: 1",
        "---\nb: 2",
        "1.10",
        "yes",
        "no",
        "on",
        "08",
        "0x10",
        "1e3",
        "~",
        "null",
        ".inf",
        "true",
        "",
        " ",
        "&a x",
        "*a",
        "!!int 5",
    ]
)


@SETTINGS
@given(
    value=injection,
    template=st.sampled_from(["${V}", '"${V}"', "'${V}'", "x-${V}", "${V}${V}", "${U:-${V}}"]),
    extra=tree(st.sampled_from(["plain", "${V}", "n: ${V}"])),
)
def test_values_with_newlines_colons_and_quotes_never_add_keys(value, template, extra):
    text = f"first: {template}\nlist:\n  - {template}\n  - k: {template}\nlast: 1\n" + dump({"extra": extra}, False)
    loaded = load_values_text(text, "values.yaml")
    result = substitute(loaded, {"V": value}).data
    assert key_paths(result) == key_paths(loaded.data)
    assert_same_shape(loaded.data, result)
    assert result["last"] == 1
    once = template.replace('"', "").replace("'", "").replace("${U:-${V}}", "${V}").replace("${V}", value)
    assert result["first"] == once and result["list"] == [once, {"k": once}]
    assert key_paths(json.loads(json.dumps(result))) == key_paths(loaded.data)


@pytest.mark.parametrize("value", ["1.10", "yes", "08", "true", "null", "~", "1e3", "0x10", ".inf", "-1", ""])
def test_whole_reference_is_the_variables_string(value):
    loaded = load_values_text('plain: ${V}\nquoted: "${V}"\nlist:\n  - ${V}\n', "values.yaml")
    assert substitute(loaded, {"V": value}).data == {"plain": value, "quoted": value, "list": [value]}
