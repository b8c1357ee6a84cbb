"""values_validation: every schema error at the file:line:col of the offending node, with expected and hints."""

from __future__ import annotations

from pathlib import Path

import pytest

from helm_nemo.user_errors import UserError
from helm_nemo.values.load import load_values
from helm_nemo.values.validation import raise_if_problems, schema_errors, validate

SCHEMA = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "queue": {"type": "string", "pattern": "^[a-z0-9-]+$", "description": "Kueue LocalQueue name"},
        "workload": {
            "type": "object",
            "additionalProperties": False,
            "required": ["image", "gpus"],
            "properties": {
                "image": {"type": "string", "description": "Training container image"},
                "gpus": {"type": "integer", "minimum": 8, "multipleOf": 8, "description": "GPUs in the job"},
                "ttlSecondsAfterFinished": {"type": "integer"},
                "imagePullPolicy": {"enum": ["Always", "IfNotPresent", "Never"]},
                "envs": {"type": "array", "items": {"$ref": "#/definitions/env"}},
            },
        },
        "volumes": {
            "type": "object",
            "properties": {
                "gcsMounts": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "required": ["bucketName", "mountPath"],
                        "properties": {
                            "bucketName": {"type": "string", "minLength": 3},
                            "mountPath": {"type": "string"},
                        },
                    },
                },
            },
        },
    },
    "definitions": {
        "env": {
            "type": "object",
            "required": ["name"],
            "additionalProperties": False,
            "properties": {"name": {"type": "string", "description": "Env var name"}, "value": {"type": "string"}},
        },
    },
}


def write(tmp_path: Path, text: str, name: str = "values.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def check(tmp_path, text, schema=SCHEMA):
    loaded = load_values(write(tmp_path, text))
    return validate(loaded, schema, filename=str(loaded.path), positions=loaded.position)


GOOD = "queue: q-1\nworkload:\n  image: img:1\n  gpus: 16\n"


def test_valid_values_have_no_problems(tmp_path):
    assert check(tmp_path, GOOD) == []


def test_every_error_with_exact_position_and_sorted_by_line(tmp_path):
    text = (
        "queue: Bad_Queue\n"  # 1 pattern
        "workload:\n"  # 2
        "  image: 5\n"  # 3 type
        "  gpus: 12\n"  # 4 multipleOf
        "  imagePullPolicy: always\n"  # 5 enum
        "volumes:\n"  # 6
        "  gcsMounts:\n"  # 7
        "    - bucketName:\n"  # 8 null bucketName: type
        "      mountPath: /data\n"
    )  # 9
    problems = check(tmp_path, text)
    got = [(p.line, p.column, p.json_path) for p in problems]
    assert got == [
        (1, 1, "$.queue"),
        (3, 3, "$.workload.image"),
        (4, 3, "$.workload.gpus"),
        (5, 3, "$.workload.imagePullPolicy"),
        (8, 7, "$.volumes.gcsMounts[0].bucketName"),
    ]
    by_path = {p.json_path: p for p in problems}
    assert by_path["$.queue"].expected == "a string matching ^[a-z0-9-]+$"
    assert by_path["$.queue"].hint == "Kueue LocalQueue name"
    assert by_path["$.workload.image"].expected == "string"
    assert by_path["$.workload.gpus"].expected == "multipleOf 8"
    assert by_path["$.workload.gpus"].hint == "GPUs in the job"
    assert by_path["$.workload.imagePullPolicy"].expected == 'one of "Always", "IfNotPresent", "Never"'
    assert by_path["$.volumes.gcsMounts[0].bucketName"].expected == "string"
    assert all(p.file == str(tmp_path / "values.yaml") for p in problems)


def test_several_errors_on_one_value_are_all_reported(tmp_path):
    problems = check(tmp_path, "workload:\n  image: x\n  gpus: 3\n")
    assert sorted(p.expected for p in problems) == ["minimum 8", "multipleOf 8"]
    assert {(p.line, p.column) for p in problems} == {(3, 3)}


def test_required_points_at_the_parent_mapping(tmp_path):
    problems = check(tmp_path, "queue: q\nworkload:\n  gpus: 8\n")
    (problem,) = problems
    assert (problem.line, problem.column, problem.json_path) == (2, 1, "$.workload")
    assert problem.message == "required key 'image' is missing"
    assert problem.expected == "string"
    assert problem.hint == "add `image:` under $.workload (Training container image)"


def test_required_inside_a_list_item_points_at_the_item(tmp_path):
    (problem,) = check(tmp_path, GOOD + "volumes:\n  gcsMounts:\n    - mountPath: /d\n")
    assert (problem.line, problem.column, problem.json_path) == (7, 7, "$.volumes.gcsMounts[0]")
    assert "bucketName" in problem.message


def test_unknown_key_did_you_mean(tmp_path):
    (problem,) = check(tmp_path, GOOD + "  ttlSecondAfterFinished: 5\n")
    assert (problem.line, problem.column) == (5, 3)
    assert problem.json_path == "$.workload.ttlSecondAfterFinished"
    assert problem.message == "unknown key 'ttlSecondAfterFinished'"
    assert problem.hint == "did you mean 'ttlSecondsAfterFinished'?"


def test_unknown_keys_are_each_reported_and_unlike_ones_list_what_is_allowed(tmp_path):
    problems = check(tmp_path, "quue: q\nworkload:\n  image: x\n  gpus: 8\nzzz: 1\n")
    assert [(p.line, p.json_path) for p in problems] == [(1, "$.quue"), (5, "$.zzz")]
    assert problems[0].hint == "did you mean 'queue'?"
    assert problems[1].hint == "allowed keys here: queue, volumes, workload"


def test_refs_are_followed_for_unknown_keys_and_descriptions(tmp_path):
    problems = check(tmp_path, GOOD + "  envs:\n    - name: 5\n    - nmae: X\n")
    assert [(p.line, p.column, p.json_path) for p in problems] == [
        (6, 7, "$.workload.envs[0].name"),
        (7, 7, "$.workload.envs[1]"),
        (7, 7, "$.workload.envs[1].nmae"),
    ]
    assert problems[0].hint == "Env var name"
    assert problems[2].hint == "did you mean 'name'?"


def test_accepts_loaded_values_directly_and_plain_data(tmp_path):
    loaded = load_values(write(tmp_path, "workload:\n  image: x\n  gpus: 7\n"))
    (from_loaded,) = [p for p in validate(loaded, SCHEMA) if p.expected == "multipleOf 8"]
    assert (from_loaded.file, from_loaded.line) == (str(loaded.path), 3)
    problems = validate(loaded.data, SCHEMA, filename=None, positions=None)
    assert {(p.file, p.line) for p in problems} == {(None, None)}
    assert "<values>: $.workload.gpus" in problems[0].lines()[0]


def test_prefix_moves_positions_not_paths(tmp_path):
    loaded = load_values(
        write(tmp_path, "releases:\n  - values:\n      workload:\n        image: x\n        gpus: 7\n")
    )
    values = loaded.data["releases"][0]["values"]
    problems = validate(values, SCHEMA, filename="r.yaml", positions=loaded.position, prefix=("releases", 0, "values"))
    assert {(p.line, p.column, p.json_path) for p in problems} == {(5, 9, "$.workload.gpus")}


def test_keywords_the_fast_validator_lacks_fall_back_to_jsonschema(tmp_path):
    schema = {
        "type": "object",
        "additionalProperties": False,
        "patternProperties": {"^x-": {"type": "string"}},
        "properties": {"mode": {"type": "string"}},
        "if": {"properties": {"mode": {"const": "fast"}}},
        "then": {"required": ["speed"]},
    }
    problems = check(tmp_path, "x-note: 1\nmode: fast\nx-ok: fine\nmdoe: 2\n", schema)
    assert [(p.line, p.json_path) for p in problems] == [(1, "$"), (1, "$.x-note"), (4, "$.mdoe")]
    assert problems[0].message == "required key 'speed' is missing"
    assert problems[2].hint == "did you mean 'mode'?"  # x-ok matches patternProperties: not reported
    assert [e.validator for e in schema_errors({"mode": "fast"}, schema)] == ["required"]


def test_long_instances_are_shortened_in_messages(tmp_path):
    (problem,) = check(
        tmp_path,
        "queue:\n" + "".join(f"  k{i}: {i}\n" for i in range(100)),
        {"properties": {"queue": {"type": "string"}}},
    )
    assert problem.line == 1 and len(problem.message) <= 200 and problem.message.endswith("…")


def test_raise_if_problems(tmp_path):
    raise_if_problems(check(tmp_path, GOOD))
    with pytest.raises(UserError) as err:
        raise_if_problems(check(tmp_path, "queue: Q\nworkload:\n  image: x\n  gpus: 7\n"))
    lines = err.value.format().splitlines()
    assert lines[0].startswith(f"{tmp_path / 'values.yaml'}:1:1: $.queue: ")
    assert any(line.startswith(f"{tmp_path / 'values.yaml'}:4:3: $.workload.gpus: ") for line in lines)
    assert "    expected: multipleOf 8" in lines


QUANTITY_CHART = Path(__file__).resolve().parent.parent / "charts/a3ultra/jobset"


@pytest.mark.parametrize("size", ["600Gi", "1.5Gi", ".5Gi", "1e3", "500m", "+1Gi", "5."])
def test_quantities_as_kubernetes_parses_them_pass_the_values_schema(helm, size):
    """The values schema (which plain helm checks too) accepts what the API server accepts: issue 16."""
    rendered = helm.template(
        "r",
        QUANTITY_CHART,
        "--set",
        f"volumes.sharedMemorySize={size}",
        "--set",
        "volumes.gcsMounts[0].bucketName=bucket-a",
        "--set",
        "volumes.gcsMounts[0].mountPath=/b",
        check=False,
    )
    assert rendered.returncode == 0, rendered.stderr
    assert f"sizeLimit: {size}" in rendered.stdout or f'sizeLimit: "{size}"' in rendered.stdout


@pytest.mark.parametrize("size", ["-1Gi", "1.5.5Gi", "Gi", "1 Gi", "1e", "1Gb"])
def test_malformed_or_negative_quantities_are_refused_with_their_position(tmp_path, size):
    import json

    schema = json.loads((QUANTITY_CHART / "values.schema.json").read_text())
    path = write(tmp_path, f'volumes:\n  sharedMemorySize: "{size}"\n')
    problems = [p for p in validate(load_values(path), schema) if p.json_path == "$.volumes.sharedMemorySize"]
    assert problems and (problems[0].line, problems[0].column) == (2, 3), problems  # at the key, as every value error
