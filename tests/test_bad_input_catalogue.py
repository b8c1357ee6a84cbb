"""A catalogue of bad inputs: each is rejected with the right file:line:col, JSON path and message.

Every case is data (values file text, optional extra files, env and --chart) and is checked twice:
`build_plans` raises UserError holding the expected problem at the expected place, and the real CLI
(`helm-nemo validate --values FILE`, in a subprocess with a controlled environment) exits 2, prints the
same `file:line:col: $.path: message` line and never a traceback. The CLI runs of all selected cases
start together (a small thread pool) so the whole file stays fast.

A known defect would be a strict xfail case stating the behaviour a user needs (the nine the catalogue
found first are fixed and are ordinary cases now, at the end of the list).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from helm_nemo.values.plan import build_plans
from helm_nemo.user_errors import EXIT_USER_ERROR, UserError

ROOT = Path(__file__).resolve().parent.parent
A3ULTRA_JOBSET = str(ROOT / "charts/a3ultra/jobset")
DIRECTORY = object()  # an extra "file" that is a directory
MISSING = None  # a values file that is not created

# The valid base: lines 1-6.
HEAD = "accelerator: a3ultra\nchart: jobset\nrelease: r1\n"
WORKLOAD = "workload:\n  gpus: 16\n  image: img:1\n"
BASE = HEAD + WORKLOAD


@dataclass(frozen=True)
class Also:
    """A further problem the same run must report (several unset variables: every one is listed)."""

    loc: str | None
    path: str
    message: str


@dataclass(frozen=True)
class Case:
    id: str
    text: str | bytes | None  # values file content; None: the file does not exist
    loc: str | None  # "line:col" of the problem; None: the file as a whole (no line)
    path: str  # JSON path of the problem
    message: str  # a fragment of its message
    expected: str | None = None  # a fragment of its `expected:` line
    hint: str | None = None  # a fragment of its `hint:` line
    env: dict = field(default_factory=dict)
    files: dict = field(default_factory=dict)  # relative path -> str | bytes | DIRECTORY
    chart: str | None = None  # --chart
    values_name: str = "values.yaml"
    also: tuple = ()
    count: int | None = None  # exact number of problems, when it matters


def recipe(*releases: str, head: str = "recipe: demo\n") -> str:
    return head + "releases:\n" + "".join(releases)


def release(name: str, values: str = "      workload: {gpus: 16, image: 'img:1'}\n", *,
            accelerator: str = "a3ultra", chart: str = "jobset") -> str:
    return (f"  - release: {name}\n    chart: {chart}\n    accelerator: {accelerator}\n"
            f"    values:\n{values}")


CASES: list = [
    # --- YAML syntax ------------------------------------------------------------------------------
    Case("yaml-unclosed-flow-mapping", HEAD + "workload: {gpus: 16, image: 'img:1'\nqueue: q\n", "5:1", "$",
         "invalid YAML: did not find expected ',' or '}'", hint="check indentation and quoting"),
    Case("yaml-unclosed-flow-sequence", BASE + "targetNodes: [a, b\nqueue: q\n", "8:6", "$", "invalid YAML"),
    Case("yaml-dedented-key", HEAD + "workload:\n  gpus: 16\n image: img:1\n", "6:2", "$", "invalid YAML"),
    Case("yaml-unclosed-double-quote", HEAD + 'workload:\n  gpus: 16\n  image: "img:1\n', "7:1", "$",
         "invalid YAML"),
    Case("yaml-mapping-in-plain-scalar", HEAD.replace("release: r1", "release: r1: r2") + WORKLOAD, "3:12", "$",
         "invalid YAML: mapping values are not allowed"),
    Case("yaml-sequence-after-mapping", BASE + "- item\n", "7:1", "$", "invalid YAML: did not find expected key"),
    Case("yaml-undefined-alias", HEAD + "workload:\n  gpus: *count\n  image: img:1\n", "5:9", "$",
         "invalid YAML: found undefined alias"),
    Case("yaml-unknown-tag", HEAD + "workload:\n  gpus: !foo 16\n  image: img:1\n", "5:9", "$.workload.gpus",
         "cannot read this value", hint="remove the tag"),
    Case("yaml-explicit-int-tag-on-a-word", HEAD + "workload:\n  gpus: !!int sixteen\n  image: img:1\n", "5:3",
         "$.workload.gpus", "'sixteen' is not of type 'integer'"),
    Case("yaml-infinity", HEAD + "workload:\n  gpus: .inf\n  image: img:1\n", "5:9", "$.workload.gpus",
         "'.inf' is not a number JSON can hold"),
    # --- tabs -------------------------------------------------------------------------------------
    Case("tab-indented-key", HEAD + "workload:\n\tgpus: 16\n", "5:1", "$", "found character that cannot start any token"),
    Case("tab-in-nested-block", BASE + "volumes:\n  gcsMounts:\n\t- bucketName: b\n", "9:1", "$",
         "found character that cannot start any token"),
    # --- duplicate keys -------------------------------------------------------------------------
    Case("duplicate-top-level", BASE + "release: r2\n", "7:1", "$.release",
         "duplicate key 'release' (first defined on line 3, column 1)"),
    Case("duplicate-nested", BASE + "  gpus: 8\n", "7:3", "$.workload.gpus",
         "duplicate key 'gpus' (first defined on line 5, column 3)"),
    Case("duplicate-in-list-of-maps", BASE + "  envs:\n    - name: A\n      value: x\n      name: B\n", "10:7",
         "$.workload.envs[0].name", "duplicate key 'name' (first defined on line 8, column 7)"),
    Case("duplicate-in-flow-mapping", HEAD + "workload: {gpus: 16, gpus: 8, image: x}\n", "4:22", "$.workload.gpus",
         "duplicate key 'gpus' (first defined on line 4, column 12)"),
    Case("duplicate-twice-both-reported", BASE + "chart: jobset\n  \nqueue: a\nqueue: b\n", "7:1", "$.chart",
         "duplicate key 'chart'", also=(Also("10:1", "$.queue", "duplicate key 'queue'"),), count=2),
    Case("duplicate-key-spelled-differently", HEAD + "workload:\n  gpus: 16\n  image: img:1\n  'gpus': 8\n",
         "7:3", "$.workload.gpus", "duplicate key 'gpus'"),
    # --- top level / documents -----------------------------------------------------------------
    Case("top-level-list", "- accelerator: a3ultra\n- chart: jobset\n", "1:1", "$",
         "the top level must be a mapping (key: value), found a list"),
    Case("top-level-scalar", "# just a comment\n\nhello\n", "3:1", "$",
         "the top level must be a mapping (key: value), found a single value"),
    Case("two-documents", BASE + "---\nrelease: r2\n", "8:1", "$", "a values file holds one YAML document, found 2",
         hint="recipe file"),
    Case("three-documents", "---\n" + BASE + "---\na: 1\n---\nb: 2\n", "9:1", "$",
         "a values file holds one YAML document, found 3"),
    # --- unknown keys (did you mean) -----------------------------------------------------------
    Case("unknown-top-level-key", BASE + "queu: q\n", "7:1", "$.queu", "unknown key 'queu'",
         hint="did you mean 'queue'?"),
    Case("unknown-workload-key", BASE + "  ttlSecondAfterFinished: 5\n", "7:3", "$.workload.ttlSecondAfterFinished",
         "unknown key 'ttlSecondAfterFinished'", hint="did you mean 'ttlSecondsAfterFinished'?"),
    Case("unknown-key-in-list-item", BASE + "volumes:\n  gcsMounts:\n    - bucketName: bkt\n      mountpath: /d\n",
         "10:7", "$.volumes.gcsMounts[0].mountpath", "unknown key 'mountpath'", hint="did you mean 'mountPath'?",
         also=(Also("9:7", "$.volumes.gcsMounts[0]", "required key 'mountPath' is missing"),)),
    Case("unknown-key-in-env", BASE + "  envs:\n    - name: A\n      vaule: x\n", "9:7", "$.workload.envs[0].vaule",
         "unknown key 'vaule'", hint="did you mean 'value'?"),
    Case("unknown-network-key", BASE + "network:\n  hostNetwrok: true\n", "8:3", "$.network.hostNetwrok",
         "unknown key 'hostNetwrok'", hint="did you mean 'hostNetwork'?"),
    Case("unknown-key-three-deep", BASE + "tasSettings:\n  topologyRequest: {}\n  topology: x\n", "9:3",
         "$.tasSettings.topology", "unknown key 'topology'", hint="did you mean 'topologyRequest'?"),
    Case("unknown-key-no-close-match", BASE + "zzz: 1\n", "7:1", "$.zzz", "unknown key 'zzz'",
         hint="allowed keys here: accelerator"),
    # --- wrong types ---------------------------------------------------------------------------
    Case("string-for-int", HEAD + "workload:\n  gpus: \"16\"\n  image: img:1\n", "5:3", "$.workload.gpus",
         "'16' is not of type 'integer'", expected="integer"),
    Case("substituted-number-stays-string", HEAD + "workload:\n  gpus: ${GPUS}\n  image: img:1\n", "5:3",
         "$.workload.gpus", "'16' is not of type 'integer'", env={"GPUS": "16"}),
    Case("substituted-yes-stays-string", BASE + "network:\n  hostNetwork: ${HOSTNET}\n", "8:3",
         "$.network.hostNetwork", "'yes' is not of type 'boolean', 'null'", env={"HOSTNET": "yes"}),
    Case("int-for-string", HEAD + "workload:\n  gpus: 16\n  image: 5\n", "6:3", "$.workload.image",
         "5 is not of type 'string'"),
    Case("list-for-map", HEAD + "workload:\n  - gpus: 16\n", "4:1", "$.workload", "is not of type 'object'"),
    Case("string-for-map", BASE + "volumes: big\n", "7:1", "$.volumes", "'big' is not of type 'object', 'null'"),
    Case("map-for-list", BASE + "targetNodes: {a: b}\n", "7:1", "$.targetNodes", "is not of type 'array', 'null'"),
    Case("int-in-string-map", BASE + "  labels:\n    team: 5\n", "8:5", "$.workload.labels.team",
         "5 is not of type 'string'"),
    Case("int-env-value", BASE + "  envs:\n    - name: A\n      value: 5\n", "9:7", "$.workload.envs[0].value",
         "5 is not of type 'string', 'null'"),
    Case("bool-string-for-bool", BASE + "network:\n  hostNetwork: 'true'\n", "8:3", "$.network.hostNetwork",
         "'true' is not of type 'boolean', 'null'"),
    # --- enum / pattern / min / max / multipleOf -----------------------------------------------
    Case("gpus-not-multiple-of-8", HEAD + "workload:\n  gpus: 430\n  image: img:1\n", "5:3", "$.workload.gpus",
         "430 is not valid here", expected="multipleOf 8"),
    Case("gpus-below-minimum", HEAD + "workload:\n  gpus: 0\n  image: img:1\n", "5:3", "$.workload.gpus",
         "0 is less than the minimum of 1", expected="minimum 1"),
    Case("ttl-negative", BASE + "  ttlSecondsAfterFinished: -1\n", "7:3", "$.workload.ttlSecondsAfterFinished",
         "-1 is less than the minimum of 0"),
    Case("deadline-zero", BASE + "  activeDeadlineSeconds: 0\n", "7:3", "$.workload.activeDeadlineSeconds",
         "0 is less than the minimum of 1"),
    Case("timestamp-pattern", BASE + "  jobTimestamp: '2026-01-01'\n", "7:3", "$.workload.jobTimestamp",
         "'2026-01-01' does not match"),
    Case("gcs-download-pattern", BASE + "gcsDownload:\n  source: s3://bucket/data\n", "8:3", "$.gcsDownload.source",
         "'s3://bucket/data' does not match '^gs://'"),
    Case("relative-mount-path", BASE + "volumes:\n  ssdMountPath: ssd\n", "8:3", "$.volumes.ssdMountPath",
         "'ssd' does not match '^/'"),
    Case("queue-too-long", BASE + "queue: " + "q" * 64 + "\n", "7:1", "$.queue", "is too long",
         expected="maxLength 63"),
    Case("name-suffix-too-long", BASE + "  nameSuffix: " + "s" * 21 + "\n", "7:3", "$.workload.nameSuffix",
         "is too long", expected="maxLength 20"),
    Case("enum-item", "chart: supervisor\nrelease: sup\nwatchdogs: [ecc, gpu]\n", "3:18", "$.watchdogs[1]",
         "'gpu' is not one of", expected='one of "ecc", "xid"'),
    Case("enum-or-range", "chart: supervisor\nrelease: sup\nlog_to_stderr: 2\n", "3:1", "$.log_to_stderr",
         "2 is not valid here", expected="maximum 1"),
    # --- DNS names -----------------------------------------------------------------------------
    Case("release-not-dns-label", HEAD.replace("r1", "Bad_Name") + WORKLOAD, "3:1", "$.release",
         "'Bad_Name' does not match", hint="DNS-1123"),
    Case("release-too-long", HEAD.replace("r1", "r" * 54) + WORKLOAD, "3:1", "$.release", "is too long",
         expected="maxLength 53"),
    Case("queue-uppercase", BASE + "queue: Bad_Queue\n", "7:1", "$.queue", "'Bad_Queue' does not match"),
    Case("service-account-not-dns", BASE + "  serviceAccountName: Bad_SA\n", "7:3", "$.workload.serviceAccountName",
         '"Bad_SA" is not valid here'),
    Case("claim-name-not-dns", BASE + "volumes:\n  pvcMounts:\n    - claimName: Claim.X\n      mountPath: /d\n",
         "9:7", "$.volumes.pvcMounts[0].claimName", "'Claim.X' does not match"),
    Case("subnetwork-not-dns-label", BASE + "network:\n  subnetworks:\n    - eth0\n    - eth_1\n", "10:7",
         "$.network.subnetworks[1]", "'eth_1' does not match"),
    Case("bucket-name-too-short", BASE + "volumes:\n  gcsMounts:\n    - bucketName: b\n      mountPath: /d\n",
         "9:7", "$.volumes.gcsMounts[0].bucketName", "'b' is too short"),
    Case("env-name-pattern", BASE + "  envs:\n    - name: 1BAD\n", "8:7", "$.workload.envs[0].name",
         "'1BAD' does not match"),
    # --- quantities ----------------------------------------------------------------------------
    Case("quantity-unit", BASE + "volumes:\n  sharedMemorySize: 500GB\n", "8:3", "$.volumes.sharedMemorySize",
         "'500GB' does not match", hint="Kubernetes quantity"),
    Case("quantity-negative", BASE + "volumes:\n  sharedMemorySize: -1Gi\n", "8:3", "$.volumes.sharedMemorySize",
         "'-1Gi' does not match"),
    Case("quantity-number", BASE + "volumes:\n  sharedMemorySize: 500\n", "8:3", "$.volumes.sharedMemorySize",
         "500 is not of type 'string'"),
    # --- accelerator / chart / release ---------------------------------------------------------
    Case("accelerator-unknown", HEAD.replace("a3ultra", "h100") + WORKLOAD, "1:1", "$.accelerator",
         "no 'jobset' chart for accelerator 'h100'", expected="a3ultra"),
    Case("accelerator-missing", "chart: jobset\nrelease: r1\n" + WORKLOAD, "1:1", "$",
         "chart 'jobset' exists per accelerator; the values name no `accelerator`"),
    Case("accelerator-mismatch", HEAD.replace("a3ultra", "a3mega") + WORKLOAD, "1:1", "$.accelerator",
         "'a3ultra' was expected", chart=A3ULTRA_JOBSET),
    Case("accelerator-mismatch-supervisor", "chart: supervisor\nrelease: sup\naccelerator: p5\n", "3:1",
         "$.accelerator", '"p5" is not valid here', expected="a3ultra"),
    Case("chart-missing", "accelerator: a3ultra\nrelease: r1\n" + WORKLOAD, "1:1", "$", "which chart?"),
    Case("chart-unknown", HEAD.replace("jobset", "jobsett") + WORKLOAD, "2:1", "$.chart", "no chart 'jobsett'"),
    Case("chart-kind-mismatch", BASE, "2:1", "$.chart", "'nemo-training' was expected",
         chart=str(ROOT / "charts/a3ultra/nemo-training")),
    Case("release-missing", "accelerator: a3ultra\nchart: jobset\n" + WORKLOAD, "1:1", "$", "no release name"),
    Case("release-empty", HEAD.replace("r1", "''") + WORKLOAD, "1:1", "$", "no release name"),
    Case("workload-gpus-nulled", HEAD + "workload:\n  gpus: null\n  image: img:1\n", "4:1", "$.workload",
         "required key 'gpus' is missing", expected="integer"),
    # --- the values file itself ----------------------------------------------------------------
    Case("values-file-missing", MISSING, None, "$", "values file not found"),
    Case("values-file-is-a-directory", None, None, "$", "is a directory", values_name="dir.yaml",
         files={"dir.yaml": DIRECTORY}),
    Case("values-file-not-utf8", b"release: caf\xe9\n", None, "$", "not UTF-8 text"),
    # --- files: ----------------------------------------------------------------------------------
    Case("files-missing", BASE + "files:\n  workload_launcher: nope.sh\n", "8:3", "$.files.workload_launcher",
         "file 'nope.sh' not found", hint="relative to the values file"),
    Case("files-directory", BASE + "files:\n  workload_launcher: scripts\n", "8:3", "$.files.workload_launcher",
         "cannot read 'scripts'", files={"scripts": DIRECTORY}),
    Case("files-not-utf8", BASE + "files:\n  workload_config: conf.bin\n", "8:3", "$.files.workload_config",
         "cannot read 'conf.bin'", files={"conf.bin": b"\xff\xfe\x00bad"}),
    Case("files-two-missing", BASE + "files:\n  workload_launcher: a.sh\n  workload_config: b.yaml\n", "8:3",
         "$.files.workload_launcher", "file 'a.sh' not found",
         also=(Also("9:3", "$.files.workload_config", "file 'b.yaml' not found"),), count=2),
    # --- unset variables -------------------------------------------------------------------------
    Case("unset-variable", HEAD + "workload:\n  gpus: 16\n  image: ${IMAGE}\n", "6:3", "$.workload.image",
         "variable IMAGE is not set", hint="export IMAGE="),
    Case("unset-variables-all-listed",
         HEAD + "workload:\n  gpus: 16\n  image: ${REGISTRY}/nemo:${TAG}\n  envs:\n    - name: A\n"
         "      value: ${A_VALUE}\nqueue: ${QUEUE}\n", "6:3", "$.workload.image", "variable REGISTRY is not set",
         env={"UNRELATED": "x"},
         also=(Also("6:3", "$.workload.image", "variable TAG is not set"),
               Also("9:7", "$.workload.envs[0].value", "variable A_VALUE is not set"),
               Also("10:1", "$.queue", "variable QUEUE is not set")), count=4),
    Case("unset-in-list-item", BASE + "  arguments:\n    - --a\n    - ${ARG}\n", "9:7", "$.workload.arguments[1]",
         "variable ARG is not set"),
    Case("unset-inside-default", BASE + "queue: ${Q:-${DEFAULT_Q}}\n", "7:1", "$.queue",
         "variable DEFAULT_Q is not set"),
    Case("required-with-message", BASE + "gcsDownload:\n  source: ${BUCKET:?set BUCKET to gs://...}\n", "8:3",
         "$.gcsDownload.source", "variable BUCKET is not set: set BUCKET to gs://..."),
    Case("required-set-but-empty", BASE + "queue: ${QUEUE:?}\n", "7:1", "$.queue",
         "variable QUEUE is not set or empty", env={"QUEUE": ""}),
    # --- malformed references ------------------------------------------------------------------
    Case("malformed-slash", BASE + "queue: ${x/y}\n", "7:1", "$.queue", "malformed reference '${x/y}'",
         env={"x": "1"}, hint="$${"),
    Case("malformed-spaces", BASE + "queue: \"${ QUEUE }\"\n", "7:1", "$.queue", "malformed reference '${ QUEUE }'",
         env={"QUEUE": "q"}),
    Case("malformed-empty", BASE + "queue: \"a${}b\"\n", "7:1", "$.queue", "malformed reference '${}'"),
    Case("malformed-digit", BASE + "  arguments: [\"${1}\"]\n", "7:15", "$.workload.arguments[0]",
         "malformed reference '${1}'"),
    Case("unterminated", BASE + "queue: \"${QUEUE\"\n", "7:1", "$.queue", "unterminated reference '${QUEUE'",
         env={"QUEUE": "q"}),
    Case("malformed-and-unset-together", BASE + "queue: ${x/y}\n  \nnodeSelector:\n  pool: ${POOL}\n", "7:1",
         "$.queue", "malformed reference", also=(Also("10:3", "$.nodeSelector.pool", "variable POOL is not set"),),
         count=2),
    # --- recipe files --------------------------------------------------------------------------
    Case("recipe-unknown-key", recipe(release("a"), head="recipe: demo\nowner: me\n"), "2:1", "$.owner",
         "unknown recipe key 'owner'", expected="description, recipe, releases"),
    Case("recipe-release-not-a-mapping", recipe(release("a"), "  - just-a-name\n"), "8:5", "$.releases[1]",
         "each release is a mapping"),
    Case("recipe-releases-empty", "recipe: demo\nreleases: []\n", "2:1", "$.releases",
         "`releases` must be a non-empty list"),
    Case("recipe-releases-not-a-list", "recipe: demo\nreleases:\n  a: 1\n", "2:1", "$.releases",
         "`releases` must be a non-empty list"),
    Case("recipe-unknown-release-key", recipe(release("a") + "    valeus: {}\n"), "8:5", "$.releases[0].valeus",
         "unknown release key 'valeus'", expected="accelerator, chart, release, values, version"),
    Case("recipe-duplicate-release", recipe(release("a"), release("a")), "8:5", "$.releases[1]",
         "release 'a' appears twice (also release 0)"),
    Case("recipe-bad-values-in-second-release",
         recipe(release("a"), release("b", "      workload:\n        gpus: 430\n        image: img:1\n")), "13:9",
         "$.workload.gpus", "430 is not valid here", expected="multipleOf 8"),
    Case("recipe-unknown-key-in-second-release",
         recipe(release("a"), release("b", "      workload: {gpus: 16, image: 'img:1'}\n      network:\n"
                                           "        hostNetwrok: true\n")), "14:9", "$.network.hostNetwrok",
         "unknown key 'hostNetwrok'", hint="did you mean 'hostNetwork'?"),
    Case("recipe-unset-variable-in-second-release",
         recipe(release("a"), release("b", "      workload: {gpus: 16, image: '${IMAGE_B}'}\n")), "12:28",
         "$.releases[1].values.workload.image", "variable IMAGE_B is not set"),
    Case("recipe-missing-file-in-second-release",
         recipe(release("a"), release("b", "      files: {workload_launcher: gone.sh}\n"
                                           "      workload: {gpus: 16, image: 'img:1'}\n")), "12:15",
         "$.releases[1].values.files.workload_launcher", "file 'gone.sh' not found"),
    Case("recipe-duplicate-key-in-second-release",
         recipe(release("a"), release("b", "      workload: {gpus: 16, image: 'img:1'}\n"
                                           "      workload: {gpus: 8, image: 'img:1'}\n")), "13:7",
         "$.releases[1].values.workload", "duplicate key 'workload'"),
    # --- found as defects by this catalogue, fixed since ------------------------------------------
    Case("recipe-release-level-accelerator-location",
                      recipe(release("a"), release("b", accelerator="h100")), "10:5", "$.releases[1].accelerator",
                      "no 'jobset' chart for accelerator 'h100'"),
    Case("recipe-release-level-name-location",
                      recipe(release("Bad_Name")), "3:5", "$.release", "'Bad_Name' does not match"),
    Case("files-not-a-mapping", BASE + "files: launch.sh\n", "7:1", "$.files",
                      "is not of type 'object', 'null'"),
    Case("files-path-not-a-string", BASE + "files:\n  workload_launcher: 5\n", "8:3",
                      "$.files.workload_launcher", "5 is not of type 'string'"),
    Case("files-key-through-a-scalar", BASE + "files:\n  workload.gpus.x: l.sh\n", "8:3",
                      "$.files['workload.gpus.x']", "workload.gpus", files={"l.sh": "echo\n"}),
    Case("explicit-str-tag-kept", HEAD + "workload:\n  gpus: !!str 16\n  image: img:1\n",
                      "5:3", "$.workload.gpus", "'16' is not of type 'integer'"),
    Case("chart-not-a-string", HEAD.replace("chart: jobset", "chart: 5") + WORKLOAD, "2:1",
                      "$.chart", "5"),
    Case("recipe-values-not-a-mapping", recipe(release("a", "      - gpus: 16\n")), "6:5",
                      "$.releases[0].values", "mapping"),
    Case("recipe-release-name-a-mapping", recipe("  - release: {x: 1}\n    chart: jobset\n"
                                                                  "    accelerator: a3ultra\n    values:\n"
                                                                  "      workload: {gpus: 16, image: 'img:1'}\n"),
                      "3:5", "$.release", "is not of type 'string', 'null'"),
]


def _case_of(param) -> Case:
    return param.values[0] if hasattr(param, "values") else param


def _ids() -> list[str]:
    return [_case_of(c).id for c in CASES]


def test_catalogue_is_large_and_ids_are_unique():
    ids = _ids()
    assert len(ids) == len(set(ids))
    assert sum(1 for c in CASES if not hasattr(c, "marks")) >= 60


def _materialize(case: Case, where: Path) -> Path:
    where.mkdir(parents=True)
    for rel, content in case.files.items():
        target = where / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if content is DIRECTORY:
            target.mkdir()
        elif isinstance(content, bytes):
            target.write_bytes(content)
        else:
            target.write_text(content, encoding="utf-8")
    values = where / case.values_name
    if isinstance(case.text, bytes):
        values.write_bytes(case.text)
    elif isinstance(case.text, str):
        values.write_text(case.text, encoding="utf-8")
    return values


def _cli() -> list[str]:
    script = Path(sys.executable).parent / "helm-nemo"
    return [str(script)] if script.exists() else [sys.executable, "-m", "helm_nemo"]


def _cli_env(case: Case, home: Path) -> dict[str, str]:
    """Only what the interpreter needs plus the case's variables: no HELM_DEBUG, no stray ${VARS}."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "LANG": "C.UTF-8"}
    env.update(case.env)
    return env


def _run_cli(case: Case, values: Path) -> subprocess.CompletedProcess:
    args = [*_cli(), "validate", "--values", str(values)]
    if case.chart:
        args += ["--chart", case.chart]
    return subprocess.run(args, env=_cli_env(case, values.parent), cwd=values.parent, capture_output=True,
                          text=True, timeout=60, check=False)


@pytest.fixture(scope="module")
def catalogue(request, tmp_path_factory):
    """Each selected case written to its own folder, and its CLI run started (results are futures)."""
    selected = {item.callspec.params["case"].id for item in request.session.items
                if getattr(item, "callspec", None) and isinstance(item.callspec.params.get("case"), Case)}
    root = tmp_path_factory.mktemp("catalogue")
    paths: dict[str, Path] = {}
    runs: dict[str, Future] = {}
    with ThreadPoolExecutor(max_workers=min(8, (os.cpu_count() or 2) * 2)) as pool:
        for param in CASES:
            case = _case_of(param)
            if case.id not in selected:
                continue
            paths[case.id] = _materialize(case, root / case.id)
            runs[case.id] = pool.submit(_run_cli, case, paths[case.id])
        yield paths, runs
    shutil.rmtree(root, ignore_errors=True)


def _location(file: str, loc: str | None) -> str:
    return f"{file}:{loc}" if loc else file


def _matches(problem, file: str, loc: str | None, path: str, message: str) -> bool:
    line, column = (int(x) for x in loc.split(":")) if loc else (None, None)
    return (problem.file == file and (problem.line, problem.column) == (line, column)
            and problem.json_path == path and message in problem.message)


@pytest.mark.parametrize("case", CASES, ids=_ids())
def test_bad_input_is_reported_where_it_is(case: Case, catalogue):
    paths, runs = catalogue
    values = paths[case.id]
    file = str(values)

    # 1. the library: UserError, with this problem at this place
    with pytest.raises(UserError) as raised:
        build_plans(values, dict(case.env), chart=case.chart)
    problems = raised.value.problems
    shown = "\n".join(p.format() for p in problems)
    hit = [p for p in problems if _matches(p, file, case.loc, case.path, case.message)]
    assert hit, f"expected {_location(file, case.loc)}: {case.path}: …{case.message}… in:\n{shown}"
    problem = hit[0]
    if case.expected is not None:
        assert problem.expected and case.expected in problem.expected, shown
    if case.hint is not None:
        assert problem.hint and case.hint in problem.hint, shown
    for also in case.also:
        assert any(_matches(p, file, also.loc, also.path, also.message) for p in problems), \
            f"also expected {_location(file, also.loc)}: {also.path}: …{also.message}… in:\n{shown}"
    if case.count is not None:
        assert len(problems) == case.count, shown

    # 2. the real CLI: exit 2, the same location line, no traceback
    proc = runs[case.id].result()
    output = proc.stdout + proc.stderr
    assert "Traceback" not in output, output
    assert proc.returncode == EXIT_USER_ERROR, output
    if case.loc is None:
        assert file in output and case.message in output, output
    else:
        wanted = f"{file}:{case.loc}: {case.path}: "
        lines = [line for line in output.splitlines() if line.startswith(wanted)]
        assert any(case.message in line for line in lines), f"no line {wanted}…{case.message}… in:\n{output}"
        for also in case.also:
            assert f"{_location(file, also.loc)}: {also.path}: " in output, output
    assert "ok:" not in proc.stdout
