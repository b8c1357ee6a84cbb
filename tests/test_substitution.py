"""substitution: ${VAR} only inside parsed string values, strict, all problems at once, pod variables kept."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helm_nemo.values.substitute import RUNTIME_VARIABLES, runtime_names, substitute
from helm_nemo.user_errors import UserError
from helm_nemo.values.load import load_values

PARITY = Path("/work/shared/parity")


def write(tmp_path: Path, text: str, name: str = "values.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def run(tmp_path, text, env, **kw):
    return substitute(load_values(write(tmp_path, text)), env, **kw)


def data(tmp_path, text, env, **kw):
    return run(tmp_path, text, env, **kw).data


def failure(tmp_path, text, env, **kw) -> UserError:
    with pytest.raises(UserError) as err:
        run(tmp_path, text, env, **kw)
    return err.value


# --- what is substituted ---------------------------------------------------------------------------


def test_braced_references_in_values_only_never_keys(tmp_path):
    got = data(tmp_path, "a: ${X}\nb: v-${X}-${X}\n${X}: key\nlist:\n  - ${X}\n", {"X": "val"})
    assert got == {"a": "val", "b": "v-val-val", "${X}": "key", "list": ["val"]}


def test_bare_dollar_forms_are_left_alone(tmp_path):
    text = "a: $X and $(date) and $1 and $labels and $\nb: 'cost: $5'\n"
    assert data(tmp_path, text, {"X": "val", "labels": "l"}) == {
        "a": "$X and $(date) and $1 and $labels and $",
        "b": "cost: $5",
    }


def test_injection_through_a_newline_stays_one_string(tmp_path):
    got = data(
        tmp_path, 'note: ${NOTE}\nreplicas: 1\npassword: "${PW}"\n', {"NOTE": "hello\nreplicas: 999", "PW": 'p"w$d'}
    )
    assert got == {"note": "hello\nreplicas: 999", "replicas": 1, "password": 'p"w$d'}
    assert json.loads(json.dumps(got))["replicas"] == 1


def test_substituted_values_are_not_expanded_again(tmp_path):
    assert data(tmp_path, "a: ${A}\n", {"A": "${B}", "B": "no"}) == {"a": "${B}"}


def test_escapes(tmp_path):
    got = data(tmp_path, 'a: $${X}\nb: echo cost=$$5\nc: "$$${X}"\n', {"X": "v"})
    assert got == {"a": "${X}", "b": "echo cost=$5", "c": "$v"}


def test_defaults(tmp_path):
    text = 'a: ${UNSET:-fallback}\nb: ${EMPTY:-fb}\nc: ${SET:-fb}\nd: ${UNSET:-x-${SET}}\ne: "${UNSET:-}"\n'
    got = data(tmp_path, text, {"EMPTY": "", "SET": "s"})
    assert got == {"a": "fallback", "b": "fb", "c": "s", "d": "x-s", "e": ""}


def test_set_but_empty_is_substituted_as_empty(tmp_path):
    assert data(tmp_path, 'a: "${E}"\nb: x${E}y\n', {"E": ""}) == {"a": "", "b": "xy"}


# --- typing (§3.3 rule 5) --------------------------------------------------------------------------


def test_quoted_reference_stays_a_string(tmp_path):
    got = data(tmp_path, "tag: \"${TAG}\"\nsingle: '${TAG}'\nblock: |\n  ${TAG}\n", {"TAG": "1.10"})
    assert got == {"tag": "1.10", "single": "1.10", "block": "1.10\n"}


def test_substituted_values_never_change_type(tmp_path):
    text = 'f: ${V}\nn: ${N}\nflag: ${F}\nt: ${T}\nz: ${Z}\ndef: ${UNSET:-16}\ninf: ${I}\nq: "${V}"\n'
    got = data(tmp_path, text, {"V": "1.10", "N": "08", "F": "yes", "T": "true", "Z": "null", "I": ".inf"})
    assert got == {
        "f": "1.10",
        "n": "08",
        "flag": "yes",
        "t": "true",
        "z": "null",
        "def": "16",
        "inf": ".inf",
        "q": "1.10",
    }
    assert all(type(v) is str for v in got.values())


def test_partial_plain_reference_stays_a_string(tmp_path):
    assert data(tmp_path, "a: x${N}\nb: ${N}${N}\n", {"N": "8"}) == {"a": "x8", "b": "88"}


# --- pod runtime variables -------------------------------------------------------------------------


def test_runtime_variables_survive_even_when_set_locally(tmp_path):
    text = (
        'workload:\n  defaultArguments:\n    - "--num-nodes=${NNODES}"\n    - --log-dir=${LOG_DIR_PREFIX}\n'
        "    - --job=${JOB_IDENTIFIER}\n    - ${NNODES}\n"
        "  envs:\n    - name: LOG_DIR_PREFIX\n      value: /logs\n"
    )
    got = data(tmp_path, text, {"NNODES": "999", "JOB_IDENTIFIER": "x", "HOME": "/root"})
    assert got["workload"]["defaultArguments"] == [
        "--num-nodes=${NNODES}",
        "--log-dir=${LOG_DIR_PREFIX}",
        "--job=${JOB_IDENTIFIER}",
        "${NNODES}",
    ]


def test_a_pod_env_name_also_set_locally_is_an_error_that_says_how_to_choose(tmp_path):
    # Issue 16: an env entry named like a local variable silently turned every ${HF_TOKEN} into a pod reference.
    text = (
        "workload:\n  arguments:\n    - --token=${HF_TOKEN}\n    - --also=$${HF_TOKEN}\n"
        "  envs:\n    - name: HF_TOKEN\n      value: x\n"
    )
    (problem,) = failure(tmp_path, text, {"HF_TOKEN": "hf_local"}).problems
    assert (problem.line, problem.json_path) == (3, "$.workload.arguments[0]")
    assert problem.message.startswith(
        "${HF_TOKEN} is ambiguous: HF_TOKEN is an env var the values define for the pod ($.workload.envs[0], line 6)"
    )
    assert "$${HF_TOKEN}" in problem.hint and "another name" in problem.hint
    # Unset locally, it stays for the pod; `$${…}` says so explicitly either way.
    assert data(tmp_path, text, {})["workload"]["arguments"] == ["--token=${HF_TOKEN}", "--also=${HF_TOKEN}"]
    fixed = text.replace("--token=${HF_TOKEN}", "--token=$${HF_TOKEN}")
    assert data(tmp_path, fixed, {"HF_TOKEN": "hf_local"})["workload"]["arguments"][0] == "--token=${HF_TOKEN}"


def test_the_value_of_the_entry_defining_a_name_comes_from_the_environment(tmp_path):
    text = "workload:\n  envs:\n    - name: HF_TOKEN\n      value: ${HF_TOKEN}\n    - name: B\n      value: ${A}\n"
    got = data(tmp_path, text, {"HF_TOKEN": "hf_local", "A": "a"})
    assert got["workload"]["envs"] == [{"name": "HF_TOKEN", "value": "hf_local"}, {"name": "B", "value": "a"}]
    (problem,) = failure(tmp_path, text, {"A": "a"}).problems  # unset: an error, not a literal "${HF_TOKEN}"
    assert problem.message == "variable HF_TOKEN is not set" and problem.line == 4


def test_explicit_keep_replaces_the_default(tmp_path):
    got = data(tmp_path, "a: ${NNODES}\nb: ${MINE}\n", {"NNODES": "2"}, keep={"MINE"})
    assert got == {"a": "2", "b": "${MINE}"}


def test_runtime_variable_names():
    assert {
        "NNODES",
        "GPUS_PER_NODE",
        "WORLD_SIZE",
        "JOB_IDENTIFIER",
        "JOB_TIMESTAMP",
        "JOB_UUID",
        "JOB_COMPLETION_INDEX",
        "JOBSET_NAME",
        "REPLICATED_JOB_NAME",
        "MASTER_ADDR",
        "MASTER_PORT",
        "NODE_RANK",
        "RANK_0_FQDN",
        "HOSTNAME_PREFIX",
        "DOMAIN_NAME",
        "SSD_MOUNT_PATH",
        "NCCL_INIT_SCRIPT",
        "HOSTNAME",
    } <= RUNTIME_VARIABLES
    values = {
        "workload": {"envs": [{"name": "LOG_DIR_PREFIX", "value": "/l"}, {"value": "no name"}]},
        "network": {"ncclSettings": [{"name": "NCCL_DEBUG", "value": "INFO"}]},
    }
    names = runtime_names(values)
    assert {"LOG_DIR_PREFIX", "NCCL_DEBUG", "NNODES"} <= names
    assert "GCS_BUCKET" not in names


def test_real_values_files_pass_with_an_empty_environment():
    files = sorted(PARITY.glob("*/values.yaml")) + sorted(PARITY.glob("*/*/values*.yaml"))
    assert files
    for path in files:
        loaded = load_values(path)
        assert substitute(loaded, {}).data == loaded.data, path


# --- errors ----------------------------------------------------------------------------------------


def test_all_missing_variables_reported_at_once_with_positions(tmp_path):
    err = failure(tmp_path, "a: ${ONE}\nb:\n  c: x-${TWO}\n  d:\n    - ok\n    - ${ONE}\n", {})
    assert [(p.line, p.column, p.json_path, p.message) for p in err.problems] == [
        (1, 1, "$.a", "variable ONE is not set"),
        (3, 3, "$.b.c", "variable TWO is not set"),
        (6, 7, "$.b.d[1]", "variable ONE is not set"),
    ]
    text = err.format()
    assert f"{tmp_path / 'values.yaml'}:3:3: $.b.c: variable TWO is not set" in text
    assert "(not set: ONE, TWO)" in text.splitlines()[0]


def test_required_with_message(tmp_path):
    err = failure(tmp_path, "x: 1\nbucket: ${BUCKET:?set the bucket}\nother: ${E:?}\n", {"E": ""})
    assert [(p.line, p.message) for p in err.problems] == [
        (2, "variable BUCKET is not set: set the bucket"),
        (3, "variable E is not set or empty"),
    ]
    assert data(tmp_path, "bucket: ${BUCKET:?set it}\n", {"BUCKET": "b"}) == {"bucket": "b"}


@pytest.mark.parametrize("reference", ["${x/y}", "${#X}", "${ X }", "${X:=v}", "${X-v}", "${1}", "${}", "${X^^}"])
def test_malformed_reference_is_an_error(tmp_path, reference):
    err = failure(tmp_path, f'a: ok\nb: "run {reference}"\n', {"X": "1", "x": "1"})
    (problem,) = err.problems
    assert problem.line == 2 and problem.json_path == "$.b"
    assert problem.message == f"malformed reference {reference!r}"
    assert "$${" in problem.hint


def test_unterminated_reference_is_an_error(tmp_path):
    (problem,) = failure(tmp_path, 'a: "${X"\n', {"X": "1"}).problems
    assert "unterminated reference" in problem.message and problem.line == 1


def test_problems_of_different_kinds_come_together(tmp_path):
    err = failure(tmp_path, "a: ${MISSING}\nb: ${x/y}\nc: ${NOT_ALLOWED}\n", {"NOT_ALLOWED": "v"}, allow={"OK"})
    assert [p.line for p in err.problems] == [1, 2, 3]


def test_allow_list(tmp_path):
    assert data(tmp_path, "a: ${OK}\nb: ${NNODES}\n", {"OK": "1"}, allow={"OK"}) == {"a": "1", "b": "${NNODES}"}
    err = failure(tmp_path, "a: ${OK}\nb: ${AWS_SECRET}\n", {"OK": "1", "AWS_SECRET": "s3cr3t-value"}, allow={"OK"})
    (problem,) = err.problems
    assert problem.line == 2 and "variable AWS_SECRET is not allowed" in problem.message
    assert "s3cr3t-value" not in err.format()


# --- result ----------------------------------------------------------------------------------------


def test_result_records_origin_of_each_substituted_path(tmp_path):
    result = run(tmp_path, "image:\n  tag: ${TAG}\nname: ${A}-${B}\nfixed: 1\n", {"TAG": "t", "A": "a", "B": "b"})
    assert result.used == {("image", "tag"): ["TAG"], ("name",): ["A", "B"]}
    assert result.names() == {"TAG", "A", "B"}
    assert result.origin(("image", "tag")) == (str(tmp_path / "values.yaml"), 2, 3)


def test_redacted_masks_only_what_secret_variables_put_there(tmp_path):
    text = "token: ${HF_TOKEN}\nurl: https://u:${DB_PASSWORD}@h/\npin: ${API_KEY}\nname: ${NAME}\nplain: 1-2-3\n"
    env = {"HF_TOKEN": "hf_abc", "DB_PASSWORD": "1", "API_KEY": "1234", "NAME": "run-1"}
    result = run(tmp_path, text, env)
    assert result.data["url"] == "https://u:1@h/" and result.data["pin"] == "1234"
    assert result.redacted() == {
        "token": "***",
        "url": "https://u:***@h/",
        "pin": "***",
        "name": "run-1",
        "plain": "1-2-3",
    }
    assert result.redacted(env) == result.redacted()
    assert result.data["token"] == "hf_abc"  # redaction is a copy
