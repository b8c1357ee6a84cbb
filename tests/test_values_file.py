"""values_file: plain data with positions, helm's scalar typing, every reading error with file:line:col."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helm_nemo.user_errors import EXIT_USER_ERROR, MAX_LINES, Problem, UserError, json_path, raise_if_problems
from helm_nemo.values.load import load_values, load_values_text

PARITY = Path("/work/shared/parity")


def write(tmp_path: Path, text: str, name: str = "values.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def error_of(path_or_text, tmp_path: Path) -> UserError:
    with pytest.raises(UserError) as err:
        load_values(write(tmp_path, path_or_text))
    return err.value


# --- data ------------------------------------------------------------------------------------------


def test_data_is_plain_python_in_file_order(tmp_path):
    loaded = load_values(write(tmp_path, "z: 1\na:\n  - x\n  - {k: v}\nm: {b: 2, a: 1}\n"))
    assert list(loaded.data) == ["z", "a", "m"]
    assert list(loaded.data["m"]) == ["b", "a"]
    assert type(loaded.data) is dict and type(loaded.data["a"]) is list and type(loaded.data["a"][1]) is dict
    assert json.loads(json.dumps(loaded.data)) == {"z": 1, "a": ["x", {"k": "v"}], "m": {"b": 2, "a": 1}}


def test_scalar_types(tmp_path):
    text = (
        "quoted: \"1.10\"\nsingle: '08'\nfloat: 1.10\nint: 8\nneg: -3\nexp: 1e3\nt: true\nb: yes\n"
        "n:\ntilde: ~\ndate: 2026-11-22\nblock: |\n  line1\n  line2\n"
    )
    data = load_values(write(tmp_path, text)).data
    assert data["quoted"] == "1.10" and data["single"] == "08"
    assert data["float"] == 1.1 and isinstance(data["float"], float)
    assert data["int"] == 8 and type(data["int"]) is int and data["neg"] == -3
    assert data["exp"] == 1000.0
    assert data["t"] is True
    assert data["b"] is True  # helm reads YAML 1.1: `yes` is true; the plugin validates what helm gets
    assert data["n"] is None and data["tilde"] is None
    assert data["date"] == "2026-11-22"  # helm's YAML-to-JSON keeps dates as strings
    assert data["block"] == "line1\nline2\n"


def test_every_value_is_json_native(tmp_path):
    for path in sorted(PARITY.glob("*/values.yaml")) + sorted(PARITY.glob("*/*/values*.yaml")):
        data = load_values(path).data
        assert json.loads(json.dumps(data, allow_nan=False)) == data, path


def test_legacy_keys_with_null_values_are_kept(tmp_path):
    data = load_values(
        write(tmp_path, "workload:\n  arguments[]:\nvolumes:\n  gcsMounts:\n  - bucketName:\n    mountPath: /data\n")
    ).data
    assert data == {
        "workload": {"arguments[]": None},
        "volumes": {"gcsMounts": [{"bucketName": None, "mountPath": "/data"}]},
    }


def test_non_string_keys_are_spelled_as_helm_spells_them(tmp_path):
    data = load_values(write(tmp_path, "8: a\ntrue: b\n~: c\n")).data
    assert data == {"8": "a", "true": "b", "null": "c"}


def test_anchors_and_merge_keys(tmp_path):
    data = load_values(write(tmp_path, "base: &b {x: 1, y: 2}\nderived:\n  <<: *b\n  y: 3\n")).data
    assert data["derived"] == {"x": 1, "y": 3}


def test_empty_files_are_empty_values(tmp_path):
    for text in ("", "# only a comment\n", "---\n", "~\n"):
        assert load_values(write(tmp_path, text)).data == {}, repr(text)


def test_utf8_bom_is_ignored(tmp_path):
    path = tmp_path / "bom.yaml"
    path.write_bytes("\ufeffa: 1\n".encode("utf-8"))
    assert load_values(path).data == {"a": 1}


def test_load_values_text_names_the_file(tmp_path):
    loaded = load_values_text("a:\n  b: 1\n", "given-name.yaml")
    assert loaded.data == {"a": {"b": 1}} and loaded.filename == "given-name.yaml"
    assert loaded.position(("a", "b")) == (2, 3)


# --- positions -------------------------------------------------------------------------------------

POSITIONS = """\
workload:
  gpus: 8
  envs:
    - name: A
      value: "1"
    -   name: B
volumes:
  gcsMounts:
  - bucketName: data
    mountPath:   /data
"""


def test_positions_of_keys_values_and_items(tmp_path):
    loaded = load_values(write(tmp_path, POSITIONS))
    assert loaded.position(("workload",)) == (1, 1)
    assert loaded.position(("workload", "gpus")) == (2, 3)
    assert loaded.value_position(("workload", "gpus")) == (2, 9)
    assert loaded.position(("workload", "envs", 0)) == (4, 7)
    assert loaded.position(("workload", "envs", 0, "value")) == (5, 7)
    assert loaded.position(("workload", "envs", 1, "name")) == (6, 9)
    assert loaded.position(("volumes", "gcsMounts", 0, "bucketName")) == (9, 5)
    assert loaded.value_position(("volumes", "gcsMounts", 0, "mountPath")) == (10, 18)


def test_missing_child_falls_back_to_nearest_parent(tmp_path):
    loaded = load_values(write(tmp_path, POSITIONS))
    assert loaded.position(("workload", "image")) == (1, 1)
    assert loaded.position(("workload", "envs", 1, "value")) == (6, 9)  # the item mapping starts at `name`
    assert loaded.position(("volumes", "gcsMounts", 3, "bucketName")) == (8, 3)
    assert loaded.position(("nothing", "here")) == (1, 1)


def test_plain_scalars_are_recorded_quoted_ones_not(tmp_path):
    loaded = load_values(write(tmp_path, "a: plain\nb: 'single'\nc: \"double\"\nd: |\n  block\n"))
    assert loaded.is_plain(("a",))
    assert not loaded.is_plain(("b",)) and not loaded.is_plain(("c",)) and not loaded.is_plain(("d",))


# --- errors ----------------------------------------------------------------------------------------


def test_duplicate_key_error_shows_both_positions(tmp_path):
    err = error_of("workload:\n  gpus: 8\n  image: x\n  gpus: 16\n", tmp_path)
    (problem,) = err.problems
    assert (problem.line, problem.column) == (4, 3)
    assert problem.json_path == "$.workload.gpus"
    assert "duplicate key 'gpus'" in problem.message and "line 2, column 3" in problem.message
    assert f"{tmp_path / 'values.yaml'}:4:3: $.workload.gpus: duplicate key 'gpus'" in err.format()


def test_every_duplicate_key_is_reported_at_once(tmp_path):
    err = error_of("a: 1\nb:\n  c: 1\n  c: 2\na: 3\n", tmp_path)
    assert [(p.line, p.json_path) for p in err.problems] == [(4, "$.b.c"), (5, "$.a")]


def test_yaml_syntax_error_has_line_and_column(tmp_path):
    err = error_of("a: 1\nb: [1, 2\nc: 3\n", tmp_path)
    (problem,) = err.problems
    assert problem.line == 3 and problem.column is not None
    assert "invalid YAML" in problem.message


def test_bad_indentation_is_a_syntax_error_at_its_line(tmp_path):
    err = error_of("workload:\n  gpus: 8\n image: x\n", tmp_path)
    assert err.problems[0].line == 3


def test_top_level_must_be_a_mapping(tmp_path):
    err = error_of("- a\n- b\n", tmp_path)
    assert "top level must be a mapping" in err.problems[0].message and "a list" in err.problems[0].message
    with pytest.raises(UserError, match="a single value"):
        load_values_text("just text\n", "s.yaml")


def test_several_documents_are_refused_at_the_second(tmp_path):
    err = error_of("a: 1\n---\nb: 2\n", tmp_path)
    assert err.problems[0].line == 3 and "one YAML document" in err.problems[0].message


def test_missing_unreadable_and_directory(tmp_path):
    with pytest.raises(UserError, match="values file not found") as err:
        load_values(tmp_path / "nope.yaml")
    assert err.value.problems[0].file == str(tmp_path / "nope.yaml")
    with pytest.raises(UserError, match="directory"):
        load_values(tmp_path)
    binary = tmp_path / "bin.yaml"
    binary.write_bytes(b"a: \xff\xfe\n")
    with pytest.raises(UserError, match="not UTF-8"):
        load_values(binary)


def test_unknown_tag_and_infinity_are_errors_with_positions(tmp_path):
    err = error_of("a: 1\nb: !vault secret\nc: .inf\nd: '.inf'\n", tmp_path)
    assert [(p.line, p.json_path) for p in err.problems] == [(2, "$.b"), (3, "$.c")]


def test_alias_bomb_is_refused(tmp_path, monkeypatch):
    import helm_nemo.values.load as values_file

    monkeypatch.setattr(values_file, "MAX_NODES", 1000)
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 6)]
    with pytest.raises(UserError, match="expanding aliases"):
        load_values(write(tmp_path, "\n".join(lines) + "\n"))


# --- user_errors -----------------------------------------------------------------------------------


def test_problem_rendering():
    problem = Problem(
        "v.yaml", 3, 5, "$.workload.gpus", "12 is not a multiple of 8", expected="multipleOf 8", hint="GPUs per node"
    )
    assert problem.lines() == [
        "v.yaml:3:5: $.workload.gpus: 12 is not a multiple of 8",
        "    expected: multipleOf 8",
        "    hint: GPUs per node",
    ]
    assert Problem(None, None, None, "$", "x").lines() == ["<values>: $: x"]
    assert Problem("v.yaml", 2, None, "$.a", "bad\nreplicas: 9").lines() == ["v.yaml:2: $.a: bad\\nreplicas: 9"]


def test_format_is_capped_to_one_screen():
    problems = [Problem("v.yaml", i, 1, f"$.k{i}", "bad", expected="x") for i in range(1, 101)]
    text = UserError(problems, title="100 problems:").format()
    lines = text.splitlines()
    assert len(lines) <= MAX_LINES
    assert lines[0] == "100 problems:" and lines[-1].startswith("… and ") and lines[-1].endswith("more problem(s)")
    shown = sum(1 for line in lines if line.startswith("v.yaml:"))
    assert lines[-1] == f"… and {100 - shown} more problem(s)"


def test_raise_if_problems_sorts_and_exit_code():
    raise_if_problems([])
    with pytest.raises(UserError) as err:
        raise_if_problems([Problem("v.yaml", 9, 1, "$.b", "late"), Problem("v.yaml", 2, 1, "$.a", "early")])
    assert [p.line for p in err.value.problems] == [2, 9]
    assert err.value.exit_code == EXIT_USER_ERROR == 2
    assert str(err.value) == err.value.format()


def test_json_path():
    assert json_path(("volumes", "gcsMounts", 0, "bucketName")) == "$.volumes.gcsMounts[0].bucketName"
    assert json_path(()) == "$"
    assert json_path(("workload", "arguments[]")) == "$.workload.arguments[]"
    assert json_path(("resources", "nvidia.com/gpu")) == "$.resources['nvidia.com/gpu']"


@pytest.mark.parametrize(
    "text, expected",
    [
        ("12:30", "12:30"),  # PyYAML's YAML 1.1 would give 750 (sexagesimal); helm keeps the string
        ("1e3", 1000.0),  # PyYAML: the string "1e3"; helm: 1000
        ("08", 8.0),  # not octal: go-yaml falls back to a float
        ("017", 15),
        ("0o17", 15),
        ("0x1F", 31),
        ("-0x1F", -31),
        ("0b101", 5),
        ("1_000", 1000),
        ("+8", 8),
        ("1.10", 1.1),
        (".5", 0.5),
        ("1.0.0", "1.0.0"),
        ("v1.10", "v1.10"),
        ("-x", "-x"),
        ("25.02", 25.02),
        ("yes", True),
        ("On", True),
        ("off", False),
        ("NO", False),
        ("True", True),
        ("NULL", None),
        ("y", "y"),
        ("n", "n"),  # helm would say true/false; the string is what a user means
    ],
)
def test_plain_scalars_resolve_as_helm_reads_them(tmp_path, text, expected):
    value = load_values(write(tmp_path, f"v: {text}\nq: '{text}'\n")).data
    assert value["v"] == expected and type(value["v"]) is type(expected)
    assert value["q"] == text  # quoted: always the string
