"""helm_nemo.schema_check agrees with jsonschema's Draft7Validator on our chart schemas.

The CLI validates with schema_check (no 80 ms jsonschema import per run); this test keeps it honest:
for every chart schema and a corpus of good and bad values, both report errors at the same paths
with the same keywords.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import jsonschema
import pytest

from helm_nemo.values.chart_values import chart_defaults, merge_values
from helm_nemo.schema_check import Validator

ROOT = Path(__file__).resolve().parent.parent
CHART_SCHEMAS = sorted(ROOT.glob("charts/**/values.schema.json"))

MUTATIONS = [
    {},
    {"workload": {"gpus": 12}},
    {"workload": {"gpus": 0}},
    {"workload": {"gpus": "8"}},
    {"workload": {"image": None}},
    {"workload": {"imagePullPolicy": "Always"}},
    {"queue": "Bad_Queue"},
    {"accelerator": "nope"},
    {"volumes": {"sharedMemorySize": "lots"}},
    {"volumes": {"pvcMounts": [{"claimName": "ok", "mountPath": "relative"}]}},
    {"volumes": {"gcsMounts": [{"mountPath": "/x"}]}},
    {"network": {"subnetworks": ["ok", "Not_OK"]}},
    {"network": {"ncclSettings": [{"value": "x"}]}},
    {"files": {"bad key": "x"}},
    {"unknown": 1, "other": {"x": 1}},
    {"fileSystems": [{"name": "fsx", "fileSystemId": "fs-1", "dnsName": "x", "mountName": "ABC", "capacity": "1"}]},
    {"workload": {"envs": [{"name": "A", "value": 1}]}},
    {"tasSettings": {"topologyRequest": {"k": 3}}},
]


def keyed(errors, path_of):
    return sorted({(json.dumps(list(path_of(e))), e.validator) for e in errors})


@pytest.mark.parametrize(
    "schema_file", CHART_SCHEMAS, ids=[str(p.parent.relative_to(ROOT / "charts")) for p in CHART_SCHEMAS]
)
def test_agrees_with_jsonschema(schema_file):
    schema = json.loads(schema_file.read_text())
    defaults = chart_defaults(schema_file.parent)
    ours, reference = Validator(schema), jsonschema.Draft7Validator(schema)
    checked = 0
    for mutation in MUTATIONS:
        values = merge_values(copy.deepcopy(defaults), mutation)
        expected = keyed(reference.iter_errors(values), lambda e: e.absolute_path)
        # A bad property name: ours points at the key itself, jsonschema at the object holding it.
        got = keyed(
            ours.iter_errors(values), lambda e: e.path[:-1] if e.message.startswith("property name") else e.path
        )
        # jsonschema also reports keywords beside a failed `type`; ours stops at the type error.
        expected = [e for e in expected if e in got or not any(g[0] == e[0] and g[1] == "type" for g in got)]
        assert got == expected, f"{mutation}"
        checked += 1
    assert checked == len(MUTATIONS)


def test_defaults_of_every_chart_are_valid():
    for schema_file in CHART_SCHEMAS:
        schema = json.loads(schema_file.read_text())
        assert Validator(schema).is_valid(chart_defaults(schema_file.parent)), schema_file


def test_unknown_keyword_fails_loudly():
    with pytest.raises(ValueError, match="not supported"):
        list(Validator({"type": "object", "dependentRequired": {}}).iter_errors({}))
