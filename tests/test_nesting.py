"""helm-nemo's own nesting scan (helm_nemo/values/nesting.py, issue 23): it must count exactly what the YAML
parser's event stream counts, so the limit is ours (our words, our position) whatever parser version runs, and
a valid file is never refused.

Checked against PyYAML's events on every YAML file of the repository and the shared fixtures, and on generated
documents in block, flow and mixed styles with hostile strings (quotes, `#`, `: `, brackets, newlines).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings, strategies as st

from helm_nemo.user_errors import UserError
from helm_nemo.values import load
from helm_nemo.values.nesting import TooDeep, depth_bound, nesting

ROOT = Path(__file__).resolve().parent.parent


def event_depth(text: str) -> int:
    depth = deepest = 0
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            depth += 1
            deepest = max(deepest, depth)
        elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            depth -= 1
    return deepest


def _yaml_files() -> list[Path]:
    tracked = subprocess.run(
        ["git", "ls-files", "*.yaml", "*.yml"], capture_output=True, text=True, cwd=ROOT, check=True
    ).stdout.split()
    files = [ROOT / name for name in tracked]
    shared = ROOT.parent / "shared"
    files += sorted(shared.rglob("*.yaml")) if shared.is_dir() else []
    out = []
    for path in files:
        try:
            event_depth(path.read_text())
        except (yaml.YAMLError, UnicodeDecodeError):
            continue  # templates ({{ … }}) are not YAML until helm renders them
        out.append(path)
    return out


def test_the_scan_counts_what_the_parser_counts_on_every_yaml_file_here():
    files = _yaml_files()
    assert len(files) > 150
    wrong = {
        str(p.relative_to(ROOT.parent)): (nesting(p.read_text())[0], event_depth(p.read_text()))
        for p in files
        if nesting(p.read_text())[0] != event_depth(p.read_text())
    }
    assert not wrong, wrong


HOSTILE = st.text(alphabet=st.sampled_from(list("ab -:#'\"[]{},|>&*!?\n\t\\") + ["é"]), max_size=12)
SCALARS = st.one_of(HOSTILE, st.integers(), st.booleans(), st.none(), st.floats(allow_nan=False, allow_infinity=False))
KEYS = st.one_of(HOSTILE, st.integers())
TREES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(KEYS, inner, max_size=4)),
    max_leaves=40,
)


@settings(max_examples=400, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(TREES, st.sampled_from([False, True, None]), st.integers(2, 6), st.sampled_from([20, 80, 1000]), st.booleans())
def test_the_scan_counts_what_the_parser_counts_on_generated_documents(tree, flow, indent, width, top_key):
    document = {"values": tree} if top_key else tree
    text = yaml.safe_dump(document, default_flow_style=flow, indent=indent, width=width, allow_unicode=True)
    assert nesting(text)[0] == event_depth(text), text
    assert depth_bound(text) >= event_depth(text), text


def first_too_deep_event(text: str, limit: int = 100) -> tuple[int, int]:
    """Line and column of the collection that goes past `limit`, as the pure-Python parser's events place it."""
    depth = 0
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            depth += 1
            if depth > limit:
                return event.start_mark.line + 1, event.start_mark.column + 1
        elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            depth -= 1
    raise AssertionError("not too deep")


@pytest.mark.parametrize(
    "text",
    [
        "a: " + "[" * 100_000 + "]" * 100_000 + "\n",
        "a: " + "{b: " * 5_000 + "}" * 5_000 + "\n",
        "".join("  " * i + "k:\n" for i in range(2_000)),
        "a:\n" + "- " * 2_000 + "x\n",
        "a:\n" + "".join("  " * i + "- - k:\n" for i in range(0, 200, 3)),
    ],
    ids=["flow-sequences", "flow-mappings", "block-mappings", "compact-sequences", "mixed-block"],
)
def test_nesting_limit_is_ours_and_comes_before_any_parser(monkeypatch, text):
    """The message is helm-nemo's, at the position where the parser's events go past the limit, and the parser
    is never even called."""
    line, column = first_too_deep_event(text)

    def no_parser(*args, **kwargs):
        raise AssertionError("the YAML parser ran before the nesting limit was checked")

    monkeypatch.setattr(yaml, "parse", no_parser)
    monkeypatch.setattr(yaml, "compose_all", no_parser)
    with pytest.raises(UserError) as caught:
        load.load_values_text(text, "deep.yaml")
    (problem,) = caught.value.problems
    assert (problem.file, problem.line, problem.column, problem.json_path) == ("deep.yaml", line, column, "$")
    assert problem.message == "the values nest deeper than 100 levels"
    with pytest.raises(TooDeep):
        nesting(text, 100)


def test_exactly_the_limit_is_fine_and_one_more_is_not():
    at_limit = "a:\n" + "".join("  " * i + "k:\n" for i in range(1, 99)) + "  " * 99 + "- x\n"
    assert event_depth(at_limit) == 100 and nesting(at_limit, 100)[0] <= 100
    load.load_values_text(at_limit, "ok.yaml")
    over = at_limit.replace("- x\n", "- [x]\n")
    assert event_depth(over) == 101
    with pytest.raises(UserError, match="deeper than 100 levels"):
        load.load_values_text(over, "over.yaml")


def test_brackets_and_quotes_inside_text_are_not_structure():
    text = (
        "script: |\n"
        + "".join(f'  {"  " * i}if [[ -n "$X" ]]; then [[[[\n' for i in range(150))
        + "note: 'it''s [[[[ {{{{ # not a comment'\n"
        + "plain: a[b]{c} it's # [[[[\n"
        + 'multi: "line one [[[[\n  line two ]]]] \\" [[["\n'
    )
    assert event_depth(text) == nesting(text)[0] == 1
    load.load_values_text(text, "text.yaml")
