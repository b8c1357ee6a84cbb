"""The plugin's input side: loading with positions, safe substitution, validation with file:line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helm_nemo.values.plan import build_plans
from helm_nemo.values.substitute import substitute
from helm_nemo.user_errors import UserError
from helm_nemo.values.load import load_values, load_values_text
from helm_nemo.values.validation import validate

ROOT = Path(__file__).resolve().parent.parent


def write(tmp_path: Path, text: str, name: str = "values.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


# --- loading ---------------------------------------------------------------------------------------


def test_positions_of_keys_and_items(tmp_path):
    loaded = load_values(write(tmp_path, "a: 1\nlist:\n  - name: x\n    value: '1.10'\n  - name: y\n"))
    assert loaded.position(("a",)) == (1, 1)
    assert loaded.position(("list", 1, "name")) == (5, 5)
    assert loaded.position(("list", 0, "value")) == (4, 5)
    assert loaded.position(("list", 0, "missing")) == (3, 5)  # nearest existing parent
    assert loaded.data == {"a": 1, "list": [{"name": "x", "value": "1.10"}, {"name": "y"}]}


def test_types_follow_yaml_as_helm_reads_it(tmp_path):
    # Helm reads values with YAML 1.1 scalars (`yes` is true); so does the plugin, so it validates what helm gets.
    loaded = load_values(write(tmp_path, 'q: "1.10"\nf: 1.10\nb: yes\nt: true\nn:\nd: 2026-11-22\n'))
    assert loaded.data == {"q": "1.10", "f": 1.1, "b": True, "t": True, "n": None, "d": "2026-11-22"}


def test_duplicate_key_names_both_lines(tmp_path):
    with pytest.raises(UserError) as err:
        load_values(write(tmp_path, "workload:\n  gpus: 8\n  gpus: 16\n"))
    text = err.value.format()
    assert "values.yaml:3:3" in text and "duplicate key 'gpus'" in text and "line 2" in text


def test_yaml_syntax_error_has_line_and_column(tmp_path):
    with pytest.raises(UserError) as err:
        load_values(write(tmp_path, "a: [1\nb: 2\n"))
    assert ":2:2: $: invalid YAML" in err.value.format()


def test_missing_file_and_non_mapping(tmp_path):
    with pytest.raises(UserError, match="values file not found"):
        load_values(tmp_path / "nope.yaml")
    with pytest.raises(UserError, match="top level must be a mapping"):
        load_values_text("- a\n- b\n", "list.yaml")


# --- substitution ----------------------------------------------------------------------------------


def subst(tmp_path, text, env, **kw):
    return substitute(load_values(write(tmp_path, text)), env, **kw).data


def test_substitutes_only_braced_references_in_values(tmp_path):
    data = subst(tmp_path, "a: ${X}\nb: v-${X}\nc: $X and $(date) and $1\n${X}: key\n", {"X": "val"})
    assert data == {"a": "val", "b": "v-val", "c": "$X and $(date) and $1", "${X}": "key"}


def test_value_with_newlines_cannot_inject_keys(tmp_path):
    data = subst(tmp_path, "note: ${NOTE}\nreplicas: 1\n", {"NOTE": "hello\nreplicas: 999"})
    assert data == {"note": "hello\nreplicas: 999", "replicas": 1}


def test_substituted_values_stay_strings_quoted_or_not(tmp_path):
    data = subst(
        tmp_path, 'tag: "${V}"\nplain: ${V}\nn: ${N}\nflag: ${F}\npart: x${N}\n', {"V": "1.10", "N": "08", "F": "yes"}
    )
    assert data == {"tag": "1.10", "plain": "1.10", "n": "08", "flag": "yes", "part": "x08"}


def test_runtime_variables_survive(tmp_path):
    text = (
        "workload:\n  defaultArguments:\n    - --num-nodes=${NNODES}\n    - --log-dir=${LOG_DIR_PREFIX}\n"
        "  envs:\n    - name: LOG_DIR_PREFIX\n      value: /logs\n"
    )
    data = subst(tmp_path, text, {"NNODES": "999"})
    assert data["workload"]["defaultArguments"] == ["--num-nodes=${NNODES}", "--log-dir=${LOG_DIR_PREFIX}"]
    with pytest.raises(UserError, match=r"\$\{LOG_DIR_PREFIX\} is ambiguous"):  # also set locally: say which
        subst(tmp_path, text, {"NNODES": "999", "LOG_DIR_PREFIX": "/host"})


def test_escape_defaults_and_required_message(tmp_path):
    data = subst(tmp_path, "a: $${HOME}\nb: ${UNSET:-fallback}\nc: cost $$5\n", {})
    assert data == {"a": "${HOME}", "b": "fallback", "c": "cost $5"}
    with pytest.raises(UserError, match="set the bucket"):
        subst(tmp_path, "a: ${BUCKET:?set the bucket}\n", {})


def test_all_missing_variables_reported_at_once_with_lines(tmp_path):
    with pytest.raises(UserError) as err:
        subst(tmp_path, "a: ${ONE}\nb:\n  c: x-${TWO}\n", {})
    text = err.value.format()
    assert "values.yaml:1:1: $.a: variable ONE is not set" in text
    assert "values.yaml:3:3: $.b.c: variable TWO is not set" in text
    assert len(err.value.problems) == 2


def test_malformed_reference_is_an_error(tmp_path):
    with pytest.raises(UserError, match=r"malformed reference '\$\{x/y\}'"):
        subst(tmp_path, "a: ${x/y}\n", {"x": "1"})


def test_allow_list(tmp_path):
    assert subst(tmp_path, "a: ${OK}\n", {"OK": "1"}, allow={"OK"}) == {"a": "1"}
    with pytest.raises(UserError, match="not in the allowed list"):
        subst(tmp_path, "a: ${SECRET_TOKEN}\n", {"SECRET_TOKEN": "s3cr3t"}, allow={"OK"})


def test_redacted_masks_secrets(tmp_path):
    loaded = load_values(write(tmp_path, "token: ${HF_TOKEN}\nname: ${NAME}\n"))
    env = {"HF_TOKEN": "hf_abc", "NAME": "run"}
    result = substitute(loaded, env)
    assert result.redacted(env) == {"token": "***", "name": "run"}
    assert result.used[("token",)] == ["HF_TOKEN"]


# --- validation ------------------------------------------------------------------------------------

SCHEMA = json.loads((ROOT / "charts/a3ultra/jobset/values.schema.json").read_text())


def test_every_schema_error_points_into_the_file(tmp_path):
    path = write(tmp_path, "workload:\n  gpus: 12\n  image: img:1\n  imagePullPolicy: Always\nqueue: Bad_Queue\n")
    loaded = load_values(path)
    problems = validate(loaded.data, SCHEMA, filename=str(path), positions=loaded.position)
    rendered = [p.lines()[0] for p in problems]
    assert any(r.startswith(f"{path}:2:3: $.workload.gpus") for r in rendered), rendered
    assert any(r.startswith(f"{path}:4:3: $.workload.imagePullPolicy: unknown key") for r in rendered), rendered
    assert any(r.startswith(f"{path}:5:1: $.queue") for r in rendered), rendered
    gpus = next(p for p in problems if p.json_path == "$.workload.gpus")
    assert gpus.expected == "(maximum 8) or (multipleOf 8)"


def test_unknown_key_gets_did_you_mean(tmp_path):
    path = write(tmp_path, "workload:\n  gpus: 8\n  image: img:1\n  ttlSecondAfterFinished: 5\n")
    loaded = load_values(path)
    (problem,) = validate(loaded.data, SCHEMA, filename=str(path), positions=loaded.position)
    assert (problem.line, problem.column) == (4, 3)
    assert problem.hint == "did you mean 'ttlSecondsAfterFinished'?"


# --- the whole plan ------------------------------------------------------------------------------


def test_plan_reads_files_relative_to_the_values_file(tmp_path):
    (tmp_path / "launch.sh").write_text("#!/bin/bash\necho hi\n")
    path = write(
        tmp_path,
        "accelerator: a4\nchart: jobset\nrelease: r1\nfiles:\n  workload_launcher: launch.sh\n"
        "workload:\n  gpus: 16\n  image: img:1\n",
    )
    (plan,) = build_plans(path, {})
    assert plan.values["workload_launcher"] == "#!/bin/bash\necho hi\n"
    assert plan.chart.endswith("charts/a4/jobset") and plan.release == "r1"


def test_missing_referenced_file_is_a_validation_error_with_its_line(tmp_path):
    path = write(
        tmp_path,
        "accelerator: a4\nchart: jobset\nrelease: r1\nfiles:\n  workload_launcher: nope.sh\n"
        "workload:\n  gpus: 16\n  image: img:1\n",
    )
    with pytest.raises(UserError) as err:
        build_plans(path, {})
    assert f"{path}:5:3: $.files.workload_launcher: file 'nope.sh' not found" in err.value.format()


def test_values_for_another_accelerator_are_rejected(tmp_path):
    path = write(tmp_path, "accelerator: a3mega\nchart: jobset\nrelease: r1\nworkload:\n  gpus: 16\n  image: img:1\n")
    (plan,) = build_plans(path, {})  # the file's own accelerator picks the a3mega chart
    assert plan.chart.endswith("charts/a3mega/jobset")
    with pytest.raises(UserError) as err:
        build_plans(path, {}, chart=str(ROOT / "charts/a3ultra/jobset"))
    assert "$.accelerator" in err.value.format()


def test_legacy_keys_warn(tmp_path):
    path = write(
        tmp_path,
        "accelerator: a4\nchart: jobset\nrelease: r1\nworkload:\n  gpus: 16\n  image: img:1\n"
        "  arguments[]:\nnetwork:\n  subnetworks[]:\n",
    )
    (plan,) = build_plans(path, {})
    assert len(plan.warnings) == 2 and "arguments[]" in plan.warnings[0] and ":7:" in plan.warnings[0]


def test_recipe_file_plans_releases_in_order(tmp_path):
    (tmp_path / "l.sh").write_text("echo\n")
    path = write(
        tmp_path,
        (
            "recipe: two-runs\nreleases:\n"
            "  - release: first\n    chart: jobset\n    accelerator: a4\n"
            "    values:\n      files: {workload_launcher: l.sh}\n      workload: {gpus: 8, image: 'img:1'}\n"
            "  - release: second\n    chart: jobset\n    accelerator: a4x\n"
            "    values:\n      workload: {gpus: 6, image: 'img:1'}\n"
        ),
    )
    with pytest.raises(UserError) as err:
        build_plans(path, {})
    assert ":13:" in err.value.format() and "$.workload.gpus" in err.value.format()  # 6 is not a multiple of 4
    path.write_text(path.read_text().replace("gpus: 6", "gpus: 8"))
    plans = build_plans(path, {})
    assert [p.release for p in plans] == ["first", "second"]
    assert plans[0].values["workload_launcher"] == "echo\n"


def test_no_chart_named_is_a_clear_error(tmp_path):
    with pytest.raises(UserError, match="which chart"):
        build_plans(write(tmp_path, "release: r\nworkload:\n  gpus: 8\n"), {})


def test_helm_flag_spellings_follow_the_running_major():
    from helm_nemo.actions.helm import translate_flags

    args = ["--atomic", "--force", "--dry-run", "--timeout=5m", "--rollback-on-failure"]
    assert translate_flags(args, 4) == [
        "--rollback-on-failure",
        "--force-replace",
        "--dry-run=client",
        "--timeout=5m",
        "--rollback-on-failure",
    ]
    assert translate_flags(args, 3) == ["--atomic", "--force", "--dry-run", "--timeout=5m", "--atomic"]
