"""Issue 16, the Python side: patterns, substitution scope, paths, secrets, processes, helm semantics,
validation gaps and limits. Each test names the finding it covers; the bad-input catalogue
(tests/test_bad_input_catalogue.py) drives the same fixes through the CLI."""

from __future__ import annotations

import json

import jsonschema
import pytest

from helm_nemo.schema_check import Validator, pattern_regex, whole_string_jsonschema, whole_string_pattern
from helm_nemo.values.validation import schema_errors

# --- 5. patterns match whole strings ------------------------------------------------------------------

@pytest.mark.parametrize("pattern, text, ok", [
    ("^[a-z]+$", "abc", True), ("^[a-z]+$", "abc\n", False), ("^gs://", "gs://b\n", True),
    ("^[$]+$", "$$", True), (r"^\$x$", "$x", True), (r"^\$x$", "$x\n", False), ("[]$]$", "a$", True),
    ("(?m)^a$", "a\nb", True),  # multi-line on purpose: left as it is
])
def test_patterns_match_whole_strings(pattern, text, ok):
    assert bool(pattern_regex(pattern).search(text)) is ok, whole_string_pattern(pattern)


def test_both_schema_engines_refuse_a_trailing_newline():
    schema = {"type": "object", "properties": {"release": {"type": "string", "pattern": "^[a-z0-9]+$"}}}
    assert [e.validator for e in Validator(schema).iter_errors({"release": "r1\n"})] == ["pattern"]
    assert [e.validator for e in whole_string_jsonschema(jsonschema.Draft7Validator)(schema)
            .iter_errors({"release": "r1\n"})] == ["pattern"]
    # a keyword schema_check lacks sends validation to jsonschema: the same answer there
    fallback = {**schema, "if": {"required": ["x"]}}
    assert [(e.path, e.validator) for e in schema_errors({"release": "r1\n"}, fallback)] == [(("release",), "pattern")]
    assert schema_errors({"release": "r1"}, fallback) == []
