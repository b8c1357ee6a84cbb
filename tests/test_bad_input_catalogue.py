"""A catalogue of bad inputs: each is rejected with the right exit code, file:line:col, JSON path and message,
and helm is never asked to install anything.

Every case is data (values file text, optional extra files, env, command-line arguments) and is checked
twice: the library (`build_plans`, or `release_names` for uninstall) raises UserError holding the expected
problem at the expected place, and the real CLI (`helm-nemo install --values FILE` by default, in a
subprocess with a controlled environment) exits with the expected code, prints the same
`file:line:col: $.path: message` line (or, for rendered manifests, `  $.path: message [check]`) and never
a traceback. HELM_BIN is a logging stand-in: for a values error helm is never run at all; where a case
needs a render, `template` goes to the real Helm 3 and `install`/`upgrade`/`uninstall` are never called.
A value that came from the environment (the canary `CANARY`) never appears in the output. The CLI runs
of all selected cases start together (a small thread pool) so the whole file stays fast.

Categories (issue 16 added everything from "substitution scope" on): YAML syntax, duplicate keys, types,
schema keywords, DNS names, quantities, charts/accelerators/releases, files, variables, recipes, then
substitution scope, paths, secrets, patterns, helm semantics, validation gaps, limits, processes.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from helm_nemo.values.plan import build_plans
from helm_nemo.values.recipe import release_names
from helm_nemo.user_errors import EXIT_USER_ERROR, UserError

ROOT = Path(__file__).resolve().parent.parent
A3ULTRA_JOBSET = str(ROOT / "charts/a3ultra/jobset")
HELM3 = Path(os.environ.get("HELM3", ROOT / ".tools/helm3/helm"))
DIRECTORY = object()  # an extra "file" that is a directory
FIFO = object()  # an extra "file" that is a named pipe (reading it would wait forever)
MISSING = None  # a values file that is not created


@dataclass(frozen=True)
class Link:
    """An extra "file" that is a symlink to `target` (relative to the case folder, or absolute)."""

    target: str


# The canary: a value only the environment holds. It breaks every rule a value can break (upper case, `!`,
# `#`, longer than 20), so each error path that could print it is driven with it.
CANARY = "C4N4RY!s3cr3t#7f3a91b2q"

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
    message: str  # a fragment of its message (as the library says it)
    expected: str | None = None  # a fragment of its `expected:` line
    hint: str | None = None  # a fragment of its `hint:` line
    env: dict = field(default_factory=dict)
    files: dict = field(default_factory=dict)  # relative path -> str | bytes | DIRECTORY | FIFO | Link
    chart: str | None = None  # --chart
    values_name: str = "values.yaml"
    also: tuple = ()
    count: int | None = None  # exact number of problems, when it matters
    more: tuple = ()  # further -f files (names in `files`), merged after the first
    release: str | None = None  # RELEASE on the command line
    root: str | None = None  # --root, relative to the case folder
    in_file: str | None = None  # the file the problem is in (a name in `files`, "<stdin>", "command line")
    command: str = "install"
    pre_args: tuple = ()  # before the command (--debug)
    args: tuple = ()  # after the values (passed to helm unless ours)
    stdin: str | None = None  # the values on stdin (values_name "-")
    exit: int = EXIT_USER_ERROR
    helm: str = "never"  # never: not run at all; render: template by the real helm; empty; garbage
    cli: str | None = None  # the message as the CLI prints it, when it differs (a masked value)
    library: bool = True  # also ask the library (False: behaviour of the command line only)
    manifest: bool = False  # the problem is in the rendered manifests
    stdout_to: str | None = None  # a file the CLI's stdout goes to (/dev/full)
    debug: bool = False  # --debug: a traceback is expected (masked)


def user_chart(template: str) -> dict:
    """The files of a chart folder `./mychart` (next to the values file) rendering `template`."""
    return {
        "mychart/Chart.yaml": "apiVersion: v2\nname: mychart\nversion: 0.1.0\n",
        "mychart/templates/obj.yaml": template,
    }


USER_CHART = "chart: ./mychart\nrelease: r1\n"
REPLICAS_FROM_VALUES = (
    "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: d\nspec:\n  replicas: {{ int64 .Values.n }}\n"
    "  selector: {matchLabels: {a: b}}\n  template:\n    metadata: {labels: {a: b}}\n    spec:\n"
    "      containers: [{name: c, image: i}]\n"
)
POD_FROM_VALUES = (
    "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  labels: {{ toJson .Values.labels }}\nspec:\n"
    "  containers:\n    - name: c\n      image: i\n      env: {{ toJson .Values.env }}\n"
)


def recipe(*releases: str, head: str = "recipe: demo\n") -> str:
    return head + "releases:\n" + "".join(releases)


def release(
    name: str,
    values: str = "      workload: {gpus: 16, image: 'img:1'}\n",
    *,
    accelerator: str = "a3ultra",
    chart: str = "jobset",
) -> str:
    return f"  - release: {name}\n    chart: {chart}\n    accelerator: {accelerator}\n    values:\n{values}"


CASES: list = [
    # --- YAML syntax ------------------------------------------------------------------------------
    # The parser's own words after "invalid YAML: " are not asserted (they belong to the parser version, issue
    # 23); the position and helm-nemo's hint are.
    Case(
        "yaml-unclosed-flow-mapping",
        HEAD + "workload: {gpus: 16, image: 'img:1'\nqueue: q\n",
        "5:1",
        "$",
        "invalid YAML: ",
        hint="check indentation and quoting",
    ),
    Case("yaml-unclosed-flow-sequence", BASE + "targetNodes: [a, b\nqueue: q\n", "8:6", "$", "invalid YAML"),
    Case("yaml-dedented-key", HEAD + "workload:\n  gpus: 16\n image: img:1\n", "6:2", "$", "invalid YAML"),
    Case("yaml-unclosed-double-quote", HEAD + 'workload:\n  gpus: 16\n  image: "img:1\n', "7:1", "$", "invalid YAML"),
    Case(
        "yaml-mapping-in-plain-scalar",
        HEAD.replace("release: r1", "release: r1: r2") + WORKLOAD,
        "3:12",
        "$",
        "invalid YAML: ",
        hint="check indentation and quoting",
    ),
    Case(
        "yaml-sequence-after-mapping",
        BASE + "- item\n",
        "7:1",
        "$",
        "invalid YAML: ",
        hint="check indentation and quoting",
    ),
    Case(
        "yaml-undefined-alias",
        HEAD + "workload:\n  gpus: *count\n  image: img:1\n",
        "5:9",
        "$",
        "invalid YAML: ",
        hint="check indentation and quoting",
    ),
    Case(
        "yaml-unknown-tag",
        HEAD + "workload:\n  gpus: !foo 16\n  image: img:1\n",
        "5:9",
        "$.workload.gpus",
        "the YAML tag !foo is not allowed in values",
        hint="remove the tag",
    ),
    Case(
        "yaml-explicit-int-tag-on-a-word",
        HEAD + "workload:\n  gpus: !!int sixteen\n  image: img:1\n",
        "5:3",
        "$.workload.gpus",
        "'sixteen' is not of type 'integer'",
    ),
    Case(
        "yaml-infinity",
        HEAD + "workload:\n  gpus: .inf\n  image: img:1\n",
        "5:9",
        "$.workload.gpus",
        "'.inf' is not a number JSON can hold",
    ),
    # --- tabs -------------------------------------------------------------------------------------
    Case(
        "tab-indented-key",
        HEAD + "workload:\n\tgpus: 16\n",
        "5:1",
        "$",
        "invalid YAML: a tab where YAML needs spaces",
        hint="indent with spaces only",
    ),
    Case(
        "tab-in-nested-block",
        BASE + "volumes:\n  gcsMounts:\n\t- bucketName: b\n",
        "9:1",
        "$",
        "invalid YAML: a tab where YAML needs spaces",
        hint="indent with spaces only",
    ),
    # --- duplicate keys -------------------------------------------------------------------------
    Case(
        "duplicate-top-level",
        BASE + "release: r2\n",
        "7:1",
        "$.release",
        "duplicate key 'release' (first defined on line 3, column 1)",
    ),
    Case(
        "duplicate-nested",
        BASE + "  gpus: 8\n",
        "7:3",
        "$.workload.gpus",
        "duplicate key 'gpus' (first defined on line 5, column 3)",
    ),
    Case(
        "duplicate-in-list-of-maps",
        BASE + "  envs:\n    - name: A\n      value: x\n      name: B\n",
        "10:7",
        "$.workload.envs[0].name",
        "duplicate key 'name' (first defined on line 8, column 7)",
    ),
    Case(
        "duplicate-in-flow-mapping",
        HEAD + "workload: {gpus: 16, gpus: 8, image: x}\n",
        "4:22",
        "$.workload.gpus",
        "duplicate key 'gpus' (first defined on line 4, column 12)",
    ),
    Case(
        "duplicate-twice-both-reported",
        BASE + "chart: jobset\n  \nqueue: a\nqueue: b\n",
        "7:1",
        "$.chart",
        "duplicate key 'chart'",
        also=(Also("10:1", "$.queue", "duplicate key 'queue'"),),
        count=2,
    ),
    Case(
        "duplicate-key-spelled-differently",
        HEAD + "workload:\n  gpus: 16\n  image: img:1\n  'gpus': 8\n",
        "7:3",
        "$.workload.gpus",
        "duplicate key 'gpus'",
    ),
    # --- top level / documents -----------------------------------------------------------------
    Case(
        "top-level-list",
        "- accelerator: a3ultra\n- chart: jobset\n",
        "1:1",
        "$",
        "the top level must be a mapping (key: value), found a list",
    ),
    Case(
        "top-level-scalar",
        "# just a comment\n\nhello\n",
        "3:1",
        "$",
        "the top level must be a mapping (key: value), found a single value",
    ),
    Case(
        "two-documents",
        BASE + "---\nrelease: r2\n",
        "8:1",
        "$",
        "a values file holds one YAML document, found 2",
        hint="recipe file",
    ),
    Case(
        "three-documents",
        "---\n" + BASE + "---\na: 1\n---\nb: 2\n",
        "9:1",
        "$",
        "a values file holds one YAML document, found 3",
    ),
    # --- unknown keys (did you mean) -----------------------------------------------------------
    Case(
        "unknown-top-level-key", BASE + "queu: q\n", "7:1", "$.queu", "unknown key 'queu'", hint="did you mean 'queue'?"
    ),
    Case(
        "unknown-workload-key",
        BASE + "  ttlSecondAfterFinished: 5\n",
        "7:3",
        "$.workload.ttlSecondAfterFinished",
        "unknown key 'ttlSecondAfterFinished'",
        hint="did you mean 'ttlSecondsAfterFinished'?",
    ),
    Case(
        "unknown-key-in-list-item",
        BASE + "volumes:\n  gcsMounts:\n    - bucketName: bkt\n      mountpath: /d\n",
        "10:7",
        "$.volumes.gcsMounts[0].mountpath",
        "unknown key 'mountpath'",
        hint="did you mean 'mountPath'?",
        also=(Also("9:7", "$.volumes.gcsMounts[0]", "required key 'mountPath' is missing"),),
    ),
    Case(
        "unknown-key-in-env",
        BASE + "  envs:\n    - name: A\n      vaule: x\n",
        "9:7",
        "$.workload.envs[0].vaule",
        "unknown key 'vaule'",
        hint="did you mean 'value'?",
    ),
    Case(
        "unknown-network-key",
        BASE + "network:\n  hostNetwrok: true\n",
        "8:3",
        "$.network.hostNetwrok",
        "unknown key 'hostNetwrok'",
        hint="did you mean 'hostNetwork'?",
    ),
    Case(
        "unknown-key-three-deep",
        BASE + "tasSettings:\n  topologyRequest: {}\n  topology: x\n",
        "9:3",
        "$.tasSettings.topology",
        "unknown key 'topology'",
        hint="did you mean 'topologyRequest'?",
    ),
    Case(
        "unknown-key-no-close-match",
        BASE + "zzz: 1\n",
        "7:1",
        "$.zzz",
        "unknown key 'zzz'",
        hint="allowed keys here: accelerator",
    ),
    # --- wrong types ---------------------------------------------------------------------------
    Case(
        "string-for-int",
        HEAD + 'workload:\n  gpus: "16"\n  image: img:1\n',
        "5:3",
        "$.workload.gpus",
        "'16' is not of type 'integer'",
        expected="integer",
    ),
    Case(
        "substituted-number-stays-string",
        HEAD + "workload:\n  gpus: ${GPUS}\n  image: img:1\n",
        "5:3",
        "$.workload.gpus",
        "'16' is not of type 'integer'",
        env={"GPUS": "16"},
    ),
    Case(
        "substituted-yes-stays-string",
        BASE + "network:\n  hostNetwork: ${HOSTNET}\n",
        "8:3",
        "$.network.hostNetwork",
        "'yes' is not of type 'boolean', 'null'",
        env={"HOSTNET": "yes"},
    ),
    Case(
        "int-for-string",
        HEAD + "workload:\n  gpus: 16\n  image: 5\n",
        "6:3",
        "$.workload.image",
        "5 is not of type 'string'",
    ),
    Case("list-for-map", HEAD + "workload:\n  - gpus: 16\n", "4:1", "$.workload", "is not of type 'object'"),
    Case("string-for-map", BASE + "volumes: big\n", "7:1", "$.volumes", "'big' is not of type 'object', 'null'"),
    Case("map-for-list", BASE + "targetNodes: {a: b}\n", "7:1", "$.targetNodes", "is not of type 'array', 'null'"),
    Case(
        "int-in-string-map",
        BASE + "  labels:\n    team: 5\n",
        "8:5",
        "$.workload.labels.team",
        "5 is not of type 'string'",
    ),
    Case(  # any scalar is written as Helm prints it (a number too); a list or a map is not an env value
        "list-env-value",
        BASE + "  envs:\n    - name: A\n      value: [5]\n",
        "9:7",
        "$.workload.envs[0].value",
        "[5] is not of type 'string', 'number', 'boolean', 'null'",
    ),
    Case(
        "bool-string-for-bool",
        BASE + "network:\n  hostNetwork: 'true'\n",
        "8:3",
        "$.network.hostNetwork",
        "'true' is not of type 'boolean', 'null'",
    ),
    # --- enum / pattern / min / max / multipleOf -----------------------------------------------
    Case(
        "gpus-not-multiple-of-8",
        HEAD + "workload:\n  gpus: 430\n  image: img:1\n",
        "5:3",
        "$.workload.gpus",
        "430 is not valid here",
        expected="multipleOf 8",
    ),
    Case(
        "gpus-below-minimum",
        HEAD + "workload:\n  gpus: 0\n  image: img:1\n",
        "5:3",
        "$.workload.gpus",
        "0 is less than the minimum of 1",
        expected="minimum 1",
    ),
    Case(
        "ttl-negative",
        BASE + "  ttlSecondsAfterFinished: -1\n",
        "7:3",
        "$.workload.ttlSecondsAfterFinished",
        "-1 is less than the minimum of 0",
    ),
    Case(
        "deadline-zero",
        BASE + "  activeDeadlineSeconds: 0\n",
        "7:3",
        "$.workload.activeDeadlineSeconds",
        "0 is less than the minimum of 1",
    ),
    Case(
        "timestamp-pattern",
        BASE + "  jobTimestamp: '2026-01-01'\n",
        "7:3",
        "$.workload.jobTimestamp",
        "'2026-01-01' does not match",
    ),
    Case(
        "gcs-download-pattern",
        BASE + "gcsDownload:\n  source: s3://bucket/data\n",
        "8:3",
        "$.gcsDownload.source",
        "'s3://bucket/data' does not match '^gs://'",
    ),
    Case(
        "relative-mount-path",
        BASE + "volumes:\n  ssdMountPath: ssd\n",
        "8:3",
        "$.volumes.ssdMountPath",
        "'ssd' does not match '^/'",
    ),
    Case(
        "queue-too-long", BASE + "queue: " + "q" * 64 + "\n", "7:1", "$.queue", "is too long", expected="maxLength 63"
    ),
    Case(
        "name-suffix-too-long",
        BASE + "  nameSuffix: " + "s" * 21 + "\n",
        "7:3",
        "$.workload.nameSuffix",
        "is too long",
        expected="maxLength 20",
    ),
    Case(
        "enum-item",
        "chart: supervisor\nrelease: sup\nwatchdogs: [ecc, gpu]\n",
        "3:18",
        "$.watchdogs[1]",
        "'gpu' is not one of",
        expected='one of "ecc", "xid"',
    ),
    Case(
        "enum-or-range",
        "chart: supervisor\nrelease: sup\nlog_to_stderr: 2\n",
        "3:1",
        "$.log_to_stderr",
        "2 is not valid here",
        expected="maximum 1",
    ),
    # --- DNS names -----------------------------------------------------------------------------
    Case(
        "release-not-dns-label",
        HEAD.replace("r1", "Bad_Name") + WORKLOAD,
        "3:1",
        "$.release",
        "release name 'Bad_Name' (from the values) is not a DNS-1123 label",
        hint="helm refuses it",
    ),
    Case(
        "release-too-long",
        HEAD.replace("r1", "r" * 54) + WORKLOAD,
        "3:1",
        "$.release",
        "is 54 characters, more than 53",
    ),
    Case("queue-uppercase", BASE + "queue: Bad_Queue\n", "7:1", "$.queue", "'Bad_Queue' does not match"),
    Case(
        "service-account-not-dns",
        BASE + "  serviceAccountName: Bad_SA\n",
        "7:3",
        "$.workload.serviceAccountName",
        '"Bad_SA" is not valid here',
    ),
    Case(
        "claim-name-not-dns",
        BASE + "volumes:\n  pvcMounts:\n    - claimName: Claim.X\n      mountPath: /d\n",
        "9:7",
        "$.volumes.pvcMounts[0].claimName",
        "'Claim.X' does not match",
    ),
    Case(
        "subnetwork-not-dns-label",
        BASE + "network:\n  subnetworks:\n    - eth0\n    - eth_1\n",
        "10:7",
        "$.network.subnetworks[1]",
        "'eth_1' does not match",
    ),
    Case(
        "bucket-name-too-short",
        BASE + "volumes:\n  gcsMounts:\n    - bucketName: b\n      mountPath: /d\n",
        "9:7",
        "$.volumes.gcsMounts[0].bucketName",
        "'b' is too short",
    ),
    Case(
        "env-name-pattern",
        BASE + "  envs:\n    - name: 1BAD\n",
        "8:7",
        "$.workload.envs[0].name",
        "'1BAD' does not match",
    ),
    # --- quantities ----------------------------------------------------------------------------
    Case(
        "quantity-unit",
        BASE + "volumes:\n  sharedMemorySize: 500GB\n",
        "8:3",
        "$.volumes.sharedMemorySize",
        "'500GB' does not match",
        hint="Kubernetes quantity",
    ),
    Case(
        "quantity-negative",
        BASE + "volumes:\n  sharedMemorySize: -1Gi\n",
        "8:3",
        "$.volumes.sharedMemorySize",
        "'-1Gi' does not match",
    ),
    Case(
        "quantity-number",
        BASE + "volumes:\n  sharedMemorySize: 500\n",
        "8:3",
        "$.volumes.sharedMemorySize",
        "500 is not of type 'string'",
    ),
    # --- accelerator / chart / release ---------------------------------------------------------
    Case(
        "accelerator-unknown",
        HEAD.replace("a3ultra", "h100") + WORKLOAD,
        "1:1",
        "$.accelerator",
        "no 'jobset' chart for accelerator 'h100'",
        expected="a3ultra",
    ),
    Case(
        "accelerator-a-path-out-of-the-charts",
        HEAD.replace("a3ultra", "../charts/a3ultra") + WORKLOAD,
        "1:1",
        "$.accelerator",
        "no 'jobset' chart for accelerator '../charts/a3ultra'",
    ),
    Case(
        "accelerator-missing",
        "chart: jobset\nrelease: r1\n" + WORKLOAD,
        "1:1",
        "$",
        "chart 'jobset' exists per accelerator; the values name no `accelerator`",
    ),
    Case(
        "accelerator-mismatch",
        HEAD.replace("a3ultra", "a3mega") + WORKLOAD,
        "1:1",
        "$.accelerator",
        "'a3ultra' was expected",
        chart=A3ULTRA_JOBSET,
    ),
    Case(
        "accelerator-mismatch-supervisor",
        "chart: supervisor\nrelease: sup\naccelerator: p5\n",
        "3:1",
        "$.accelerator",
        '"p5" is not valid here',
        expected="a3ultra",
    ),
    Case("chart-missing", "accelerator: a3ultra\nrelease: r1\n" + WORKLOAD, "1:1", "$", "which chart?"),
    Case("chart-unknown", HEAD.replace("jobset", "jobsett") + WORKLOAD, "2:1", "$.chart", "no chart 'jobsett'"),
    Case(
        "chart-kind-mismatch",
        BASE,
        "2:1",
        "$.chart",
        "'nemo-training' was expected",
        chart=str(ROOT / "charts/a3ultra/nemo-training"),
    ),
    Case("release-missing", "accelerator: a3ultra\nchart: jobset\n" + WORKLOAD, "1:1", "$", "no release name"),
    Case("release-empty", HEAD.replace("r1", "''") + WORKLOAD, "1:1", "$", "no release name"),
    Case(
        "workload-gpus-nulled",
        HEAD + "workload:\n  gpus: null\n  image: img:1\n",
        "4:1",
        "$.workload",
        "required key 'gpus' is missing",
        expected="integer",
    ),
    # --- the values file itself ----------------------------------------------------------------
    Case("values-file-missing", MISSING, None, "$", "values file not found"),
    Case(
        "values-file-is-a-directory",
        None,
        None,
        "$",
        "is a directory",
        values_name="dir.yaml",
        files={"dir.yaml": DIRECTORY},
    ),
    Case("values-file-not-utf8", b"release: caf\xe9\n", "1:13", "$", "not UTF-8 text (byte 0xe9 at offset 12"),
    # --- files: ----------------------------------------------------------------------------------
    Case(
        "files-missing",
        BASE + "files:\n  workload_launcher: nope.sh\n",
        "8:3",
        "$.files.workload_launcher",
        "file 'nope.sh' not found",
        hint="relative to the values file",
    ),
    Case(
        "files-directory",
        BASE + "files:\n  workload_launcher: scripts\n",
        "8:3",
        "$.files.workload_launcher",
        "cannot read 'scripts'",
        files={"scripts": DIRECTORY},
    ),
    Case(
        "files-not-utf8",
        BASE + "files:\n  workload_config: conf.bin\n",
        "8:3",
        "$.files.workload_config",
        "cannot read 'conf.bin'",
        files={"conf.bin": b"\xff\xfe\x00bad"},
    ),
    Case(
        "files-two-missing",
        BASE + "files:\n  workload_launcher: a.sh\n  workload_config: b.yaml\n",
        "8:3",
        "$.files.workload_launcher",
        "file 'a.sh' not found",
        also=(Also("9:3", "$.files.workload_config", "file 'b.yaml' not found"),),
        count=2,
    ),
    # --- unset variables -------------------------------------------------------------------------
    Case(
        "unset-variable",
        HEAD + "workload:\n  gpus: 16\n  image: ${IMAGE}\n",
        "6:3",
        "$.workload.image",
        "variable IMAGE is not set",
        hint="export IMAGE=",
    ),
    Case(
        "unset-variables-all-listed",
        HEAD + "workload:\n  gpus: 16\n  image: ${REGISTRY}/nemo:${TAG}\n  envs:\n    - name: A\n"
        "      value: ${A_VALUE}\nqueue: ${QUEUE}\n",
        "6:3",
        "$.workload.image",
        "variable REGISTRY is not set",
        env={"UNRELATED": "x"},
        also=(
            Also("6:3", "$.workload.image", "variable TAG is not set"),
            Also("9:7", "$.workload.envs[0].value", "variable A_VALUE is not set"),
            Also("10:1", "$.queue", "variable QUEUE is not set"),
        ),
        count=4,
    ),
    Case(
        "unset-in-list-item",
        BASE + "  arguments:\n    - --a\n    - ${ARG}\n",
        "9:7",
        "$.workload.arguments[1]",
        "variable ARG is not set",
    ),
    Case(
        "unset-inside-default", BASE + "queue: ${Q:-${DEFAULT_Q}}\n", "7:1", "$.queue", "variable DEFAULT_Q is not set"
    ),
    Case(
        "required-with-message",
        BASE + "gcsDownload:\n  source: ${BUCKET:?set BUCKET to gs://...}\n",
        "8:3",
        "$.gcsDownload.source",
        "variable BUCKET is not set: set BUCKET to gs://...",
    ),
    Case(
        "required-set-but-empty",
        BASE + "queue: ${QUEUE:?}\n",
        "7:1",
        "$.queue",
        "variable QUEUE is not set or empty",
        env={"QUEUE": ""},
    ),
    # --- malformed references ------------------------------------------------------------------
    Case(
        "malformed-slash",
        BASE + "queue: ${x/y}\n",
        "7:1",
        "$.queue",
        "malformed reference '${x/y}'",
        env={"x": "1"},
        hint="$${",
    ),
    Case(
        "malformed-spaces",
        BASE + 'queue: "${ QUEUE }"\n',
        "7:1",
        "$.queue",
        "malformed reference '${ QUEUE }'",
        env={"QUEUE": "q"},
    ),
    Case("malformed-empty", BASE + 'queue: "a${}b"\n', "7:1", "$.queue", "malformed reference '${}'"),
    Case(
        "malformed-digit",
        BASE + '  arguments: ["${1}"]\n',
        "7:15",
        "$.workload.arguments[0]",
        "malformed reference '${1}'",
    ),
    Case(
        "unterminated",
        BASE + 'queue: "${QUEUE"\n',
        "7:1",
        "$.queue",
        "unterminated reference '${QUEUE'",
        env={"QUEUE": "q"},
    ),
    Case(
        "malformed-and-unset-together",
        BASE + "queue: ${x/y}\n  \nnodeSelector:\n  pool: ${POOL}\n",
        "7:1",
        "$.queue",
        "malformed reference",
        also=(Also("10:3", "$.nodeSelector.pool", "variable POOL is not set"),),
        count=2,
    ),
    # --- recipe files --------------------------------------------------------------------------
    Case(
        "recipe-unknown-key",
        recipe(release("a"), head="recipe: demo\nowner: me\n"),
        "2:1",
        "$.owner",
        "unknown recipe key 'owner'",
        expected="description, recipe, releases",
    ),
    Case(
        "recipe-release-not-a-mapping",
        recipe(release("a"), "  - just-a-name\n"),
        "8:5",
        "$.releases[1]",
        "each release is a mapping",
    ),
    Case(
        "recipe-releases-empty",
        "recipe: demo\nreleases: []\n",
        "2:1",
        "$.releases",
        "`releases` must be a non-empty list",
    ),
    Case(
        "recipe-releases-not-a-list",
        "recipe: demo\nreleases:\n  a: 1\n",
        "2:1",
        "$.releases",
        "`releases` must be a non-empty list",
    ),
    Case(
        "recipe-unknown-release-key",
        recipe(release("a") + "    valeus: {}\n"),
        "8:5",
        "$.releases[0].valeus",
        "unknown release key 'valeus'",
        expected="accelerator, after, chart, dataFrom, release, values, version",
    ),
    Case(
        "recipe-after-unknown-release",
        recipe(release("a"), release("b") + "    after: c\n"),
        "13:5",
        "$.releases[1].after",
        "no release 'c' in this recipe",
        expected="one of the earlier releases: a",
    ),
    Case(
        "recipe-after-later-release",
        recipe(release("a") + "    after: [b]\n", release("b")),
        "8:13",
        "$.releases[0].after[0]",
        "release 'b' comes later in the recipe (line 9)",
        hint="move 'b' before 'a'",
    ),
    Case(
        "recipe-data-from-not-data-prep",
        recipe(release("a"), release("b") + "    dataFrom: a\n"),
        "13:5",
        "$.releases[1].dataFrom",
        "release 'a' (line 3) is a jobset release, not a data-prep release",
        hint="to only wait for it, write `after:` instead",
    ),
    Case(
        "recipe-duplicate-release",
        recipe(release("a"), release("a")),
        "8:5",
        "$.releases[1]",
        "release 'a' appears twice (also release 0)",
    ),
    Case(
        "recipe-bad-values-in-second-release",
        recipe(release("a"), release("b", "      workload:\n        gpus: 430\n        image: img:1\n")),
        "13:9",
        "$.workload.gpus",
        "430 is not valid here",
        expected="multipleOf 8",
    ),
    Case(
        "recipe-unknown-key-in-second-release",
        recipe(
            release("a"),
            release("b", "      workload: {gpus: 16, image: 'img:1'}\n      network:\n        hostNetwrok: true\n"),
        ),
        "14:9",
        "$.network.hostNetwrok",
        "unknown key 'hostNetwrok'",
        hint="did you mean 'hostNetwork'?",
    ),
    Case(
        "recipe-unset-variable-in-second-release",
        recipe(release("a"), release("b", "      workload: {gpus: 16, image: '${IMAGE_B}'}\n")),
        "12:28",
        "$.releases[1].values.workload.image",
        "variable IMAGE_B is not set",
    ),
    Case(
        "recipe-missing-file-in-second-release",
        recipe(
            release("a"),
            release("b", "      files: {workload_launcher: gone.sh}\n      workload: {gpus: 16, image: 'img:1'}\n"),
        ),
        "12:15",
        "$.releases[1].values.files.workload_launcher",
        "file 'gone.sh' not found",
    ),
    Case(
        "recipe-duplicate-key-in-second-release",
        recipe(
            release("a"),
            release("b", "      workload: {gpus: 16, image: 'img:1'}\n      workload: {gpus: 8, image: 'img:1'}\n"),
        ),
        "13:7",
        "$.releases[1].values.workload",
        "duplicate key 'workload'",
    ),
    # --- found as defects by this catalogue, fixed since ------------------------------------------
    Case(
        "recipe-release-level-accelerator-location",
        recipe(release("a"), release("b", accelerator="h100")),
        "10:5",
        "$.releases[1].accelerator",
        "no 'jobset' chart for accelerator 'h100'",
    ),
    Case(
        "recipe-release-level-name-location",
        recipe(release("Bad_Name")),
        "3:5",
        "$.release",
        "release name 'Bad_Name' (from the values) is not a DNS-1123 label",
    ),
    Case("files-not-a-mapping", BASE + "files: launch.sh\n", "7:1", "$.files", "is not of type 'object', 'null'"),
    Case(
        "files-path-not-a-string",
        BASE + "files:\n  workload_launcher: 5\n",
        "8:3",
        "$.files.workload_launcher",
        "5 is not of type 'string'",
    ),
    Case(
        "files-key-through-a-scalar",
        BASE + "files:\n  workload.gpus.x: l.sh\n",
        "8:3",
        "$.files['workload.gpus.x']",
        "workload.gpus",
        files={"l.sh": "echo\n"},
    ),
    Case(
        "explicit-str-tag-kept",
        HEAD + "workload:\n  gpus: !!str 16\n  image: img:1\n",
        "5:3",
        "$.workload.gpus",
        "'16' is not of type 'integer'",
    ),
    Case("chart-not-a-string", HEAD.replace("chart: jobset", "chart: 5") + WORKLOAD, "2:1", "$.chart", "5"),
    Case(
        "recipe-values-not-a-mapping",
        recipe(release("a", "      - gpus: 16\n")),
        "6:5",
        "$.releases[0].values",
        "mapping",
    ),
    Case(
        "recipe-release-name-a-mapping",
        recipe(
            "  - release: {x: 1}\n    chart: jobset\n"
            "    accelerator: a3ultra\n    values:\n"
            "      workload: {gpus: 16, image: 'img:1'}\n"
        ),
        "3:5",
        "$.release",
        "is not of type 'string', 'null'",
    ),
    # === issue 16 ================================================================================
    # --- substitution scope: a pod env name also set locally is ambiguous ---------------------------
    Case(
        "scope-pod-env-also-set-locally",
        BASE + "  arguments:\n    - --token=${HF_TOKEN}\n  envs:\n    - name: HF_TOKEN\n      value: x\n",
        "8:7",
        "$.workload.arguments[0]",
        "${HF_TOKEN} is ambiguous: HF_TOKEN is an env var the values define for the pod",
        hint="$${HF_TOKEN}",
        env={"HF_TOKEN": "hf_local_value"},
    ),
    Case(
        "scope-nccl-setting-also-set-locally",
        BASE + "  arguments: ['--x=${NCCL_DEBUG}']\nnetwork:\n  ncclSettings:\n    - name: NCCL_DEBUG\n"
        "      value: INFO\n",
        "7:15",
        "$.workload.arguments[0]",
        "${NCCL_DEBUG} is ambiguous: NCCL_DEBUG is an env var the values define for the pod "
        "($.network.ncclSettings[0], line 10)",
        env={"NCCL_DEBUG": "WARN"},
    ),
    Case(
        "scope-clash-in-a-recipe-release",
        recipe(
            release(
                "a",
                "      workload:\n        gpus: 16\n        image: 'img:1'\n"
                "        arguments: ['${MY_VAR}']\n        envs: [{name: MY_VAR, value: v}]\n",
            )
        ),
        "10:21",
        "$.releases[0].values.workload.arguments[0]",
        "${MY_VAR} is ambiguous",
        env={"MY_VAR": "1"},
    ),
    Case(
        "scope-clash-with-a-default",
        BASE + "  arguments:\n    - ${LOG_DIR:-/tmp}\n  envs:\n    - name: LOG_DIR\n      value: /logs\n",
        "8:7",
        "$.workload.arguments[0]",
        "${LOG_DIR} is ambiguous",
        env={"LOG_DIR": "/x"},
    ),
    Case(
        "scope-self-reference-unset",
        BASE + "  envs:\n    - name: HF_TOKEN\n      value: ${HF_TOKEN}\n",
        "9:7",
        "$.workload.envs[0].value",
        "variable HF_TOKEN is not set",
    ),
    Case(
        "scope-clash-every-reference",
        BASE + "  arguments:\n    - ${A_NAME}\n    - ${A_NAME}/x\n  envs:\n    - name: A_NAME\n      value: v\n",
        "8:7",
        "$.workload.arguments[0]",
        "${A_NAME} is ambiguous",
        env={"A_NAME": "x"},
        also=(Also("9:7", "$.workload.arguments[1]", "${A_NAME} is ambiguous"),),
        count=2,
    ),
    Case(
        "scope-clash-in-another-env-value",
        BASE + "  envs:\n    - name: A_NAME\n      value: v\n    - name: B\n      value: ${A_NAME}\n",
        "11:7",
        "$.workload.envs[1].value",
        "${A_NAME} is ambiguous",
        env={"A_NAME": "x"},
    ),
    # --- paths: inside the values file's folder (or --root), regular files, size caps -------------------
    Case(
        "files-absolute",
        BASE + "files:\n  workload_launcher: /etc/passwd\n",
        "8:3",
        "$.files.workload_launcher",
        "file '/etc/passwd' is absolute",
        hint="--root",
    ),
    Case(
        "files-home",
        BASE + "files:\n  workload_launcher: ~/.ssh/id_rsa\n",
        "8:3",
        "$.files.workload_launcher",
        "file '~/.ssh/id_rsa' is absolute",
    ),
    Case(
        "files-dotdot",
        BASE + "files:\n  workload_launcher: ../outside.sh\n",
        "8:3",
        "$.files.workload_launcher",
        "file '../outside.sh' leads outside",
    ),
    Case(
        "files-deep-dotdot",
        BASE + "files:\n  workload_config: ../../../../../../../../etc/passwd\n",
        "8:3",
        "$.files.workload_config",
        "leads outside",
    ),
    Case(
        "files-in-and-out",
        BASE + "files:\n  workload_launcher: sub/../../x.sh\n",
        "8:3",
        "$.files.workload_launcher",
        "leads outside",
        files={"sub": DIRECTORY},
    ),
    Case(
        "files-symlink-out",
        BASE + "files:\n  workload_launcher: l.sh\n",
        "8:3",
        "$.files.workload_launcher",
        "'l.sh' is a symlink (or goes through one) leading outside",
        files={"l.sh": Link("/etc/hostname")},
    ),
    Case(
        "files-through-a-symlinked-folder",
        BASE + "files:\n  workload_launcher: etc/hostname\n",
        "8:3",
        "$.files.workload_launcher",
        "is a symlink (or goes through one) leading outside",
        files={"etc": Link("/etc")},
    ),
    Case(
        "files-symlink-to-dev-zero",
        BASE + "files:\n  workload_config: z\n",
        "8:3",
        "$.files.workload_config",
        "leading outside",
        files={"z": Link("/dev/zero")},
    ),
    Case(
        "files-fifo",
        BASE + "files:\n  workload_launcher: pipe.sh\n",
        "8:3",
        "$.files.workload_launcher",
        "cannot read 'pipe.sh': it is a FIFO, not a regular file",
        files={"pipe.sh": FIFO},
    ),
    Case(
        "files-dev-zero-inside-the-root",
        BASE + "files:\n  workload_config: ../../../../../../../../../dev/zero\n",
        "8:3",
        "$.files.workload_config",
        "it is a character device, not a regular file",
        root="/",
    ),
    Case(
        "files-dev-null-inside-the-root",
        BASE + "files:\n  workload_config: ../../../../../../../../../dev/null\n",
        "8:3",
        "$.files.workload_config",
        "it is a character device",
        root="/",
    ),
    Case(
        "files-too-large",
        BASE + "files:\n  workload_config: big.yaml\n",
        "8:3",
        "$.files.workload_config",
        "cannot read 'big.yaml': it is 1048577 bytes, more than the 1024 KiB",
        files={"big.yaml": "x" * (2**20 + 1)},
    ),
    Case(
        "files-together-too-large",
        BASE + "files:\n  workload_launcher: a\n  workload_config: b\n  c1: c\n  c2: d\n  c3: e\n",
        "12:3",
        "$.files.c3",
        "would take the files of this run over 4 MiB together",
        files={name: "x" * (900 * 1024) for name in "abcde"},
    ),
    Case(
        "files-outside-a-root",
        BASE + "files:\n  workload_launcher: ../../launch.sh\n",
        "8:3",
        "$.files.workload_launcher",
        "leads outside",
        values_name="sub/values.yaml",
        root=".",
    ),
    Case(
        "files-missing-in-a-second-values-file",
        BASE,
        "2:3",
        "$.files.workload_launcher",
        "file 'gone.sh' not found",
        files={"b.yaml": "files:\n  workload_launcher: gone.sh\n"},
        more=("b.yaml",),
        in_file="b.yaml",
    ),
    Case(
        "chart-absolute-path",
        HEAD.replace("chart: jobset", "chart: /tmp/chart") + WORKLOAD,
        "2:1",
        "$.chart",
        "chart folder '/tmp/chart' is absolute",
    ),
    Case(
        "chart-dotdot",
        HEAD.replace("chart: jobset", "chart: ../../charts/a3ultra/jobset") + WORKLOAD,
        "2:1",
        "$.chart",
        "leads outside",
    ),
    Case(
        "chart-symlink-out",
        HEAD.replace("chart: jobset", "chart: ./mychart") + WORKLOAD,
        "2:1",
        "$.chart",
        "is a symlink (or goes through one) leading outside",
        files={"mychart": Link(A3ULTRA_JOBSET)},
    ),
    Case(
        "chart-folder-without-chart-yaml",
        HEAD.replace("chart: jobset", "chart: ./mychart") + WORKLOAD,
        "2:1",
        "$.chart",
        "chart folder './mychart' has no Chart.yaml",
        files={"mychart": DIRECTORY},
    ),
    Case(
        "chart-not-a-kind",
        HEAD.replace("chart: jobset", "chart: Job Set") + WORKLOAD,
        "2:1",
        "$.chart",
        "chart 'Job Set' is neither a chart kind nor a folder path",
    ),
    Case(
        "chart-kind-with-dots",
        HEAD.replace("chart: jobset", "chart: jobset..") + WORKLOAD,
        "2:1",
        "$.chart",
        "is neither a chart kind",
    ),
    Case(
        "recipe-release-chart-escapes",
        recipe(release("a", chart="../../../etc")),
        "4:5",
        "$.releases[0].chart",
        "leads outside",
    ),
    # --- secrets: a value from the environment is never printed (the canary) --------------------------
    Case(
        "secret-in-a-pattern-error",
        BASE + "queue: ${HN_TOKEN}\n",
        "7:1",
        "$.queue",
        f"'{CANARY}' does not match",
        env={"HN_TOKEN": CANARY},
        cli="'***' does not match",
    ),
    Case(
        "secret-in-a-maxlength-error",
        BASE + "  nameSuffix: ${HN_TOKEN}\n",
        "7:3",
        "$.workload.nameSuffix",
        "is too long",
        env={"HN_TOKEN": CANARY},
        cli="'***' is too long",
    ),
    Case(
        "secret-in-a-type-error",
        HEAD + "workload:\n  gpus: ${HN_TOKEN}\n  image: img:1\n",
        "5:3",
        "$.workload.gpus",
        "is not of type 'integer'",
        env={"HN_TOKEN": CANARY},
        cli="'***' is not of type 'integer'",
    ),
    Case(
        "secret-in-a-label-value",
        BASE + "  labels:\n    team: ${HN_TOKEN}\n",
        "8:5",
        "$.workload.labels.team",
        "label value",
        env={"HN_TOKEN": CANARY},
        cli="label value '***' must be",
    ),
    Case(
        "secret-in-a-node-selector",
        BASE + "nodeSelector:\n  pool: ${HN_TOKEN}\n",
        "8:3",
        "$.nodeSelector.pool",
        "nodeSelector value",
        env={"HN_TOKEN": CANARY},
        cli="nodeSelector value '***' must be",
    ),
    Case(
        "secret-as-release-name",
        HEAD.replace("r1", "${HN_TOKEN}") + WORKLOAD,
        "3:1",
        "$.release",
        "is not a DNS-1123 label",
        env={"HN_TOKEN": CANARY},
        cli="release name '***' (from the values)",
    ),
    Case(
        "secret-as-chart",
        HEAD.replace("chart: jobset", "chart: ${HN_TOKEN}") + WORKLOAD,
        "2:1",
        "$.chart",
        "is neither a chart kind",
        env={"HN_TOKEN": CANARY},
        cli="chart '***' is neither",
    ),
    Case(
        "secret-as-accelerator",
        HEAD.replace("a3ultra", "${HN_TOKEN}") + WORKLOAD,
        "1:1",
        "$.accelerator",
        "no 'jobset' chart for accelerator",
        env={"HN_TOKEN": CANARY},
        cli="accelerator '***'",
    ),
    Case(
        "secret-as-a-files-path",
        BASE + "files:\n  workload_launcher: ${HN_TOKEN}\n",
        "8:3",
        "$.files.workload_launcher",
        "not found",
        env={"HN_TOKEN": CANARY},
        cli="file '***' not found",
    ),
    Case(
        "secret-in-an-absolute-files-path",
        BASE + "files:\n  workload_launcher: /tmp/${HN_TOKEN}\n",
        "8:3",
        "$.files.workload_launcher",
        "is absolute",
        env={"HN_TOKEN": CANARY},
        cli="file '/tmp/***' is absolute",
    ),
    Case(
        "secret-in-a-bucket-url",
        BASE + "gcsDownload:\n  source: s3://${HN_TOKEN}\n",
        "8:3",
        "$.gcsDownload.source",
        "does not match '^gs://'",
        env={"HN_TOKEN": CANARY},
        cli="'s3://***' does not match",
    ),
    Case(
        "secret-as-an-env-name",
        BASE + "  envs:\n    - name: ${HN_TOKEN}\n",
        "8:7",
        "$.workload.envs[0].name",
        "does not match",
        env={"HN_TOKEN": CANARY},
        cli="'***' does not match",
    ),
    Case(
        "secret-in-an-image",
        HEAD + "workload:\n  gpus: 16\n  image: ${HN_TOKEN} x\n",
        "6:3",
        "$.workload.image",
        "does not match",
        env={"HN_TOKEN": CANARY},
        cli="'*** x' does not match",
    ),
    Case(
        "secret-with-debug-traceback",
        BASE + "queue: ${HN_TOKEN}\n",
        "7:1",
        "$.queue",
        "does not match",
        env={"HN_TOKEN": CANARY},
        cli="'***' does not match",
        pre_args=("--debug",),
        debug=True,
    ),
    Case(
        "secret-in-validate",
        BASE + "queue: ${HN_TOKEN}\n",
        "7:1",
        "$.queue",
        "does not match",
        env={"HN_TOKEN": CANARY},
        cli="'***' does not match",
        command="validate",
    ),
    Case(
        "secret-in-lint",
        BASE + "queue: ${HN_TOKEN}\n",
        "7:1",
        "$.queue",
        "does not match",
        env={"HN_TOKEN": CANARY},
        cli="'***' does not match",
        command="lint",
    ),
    Case(
        "secret-as-uninstalled-release",
        HEAD.replace("r1", "${HN_TOKEN}") + WORKLOAD,
        "3:1",
        "$.release",
        "is not a DNS-1123 label",
        env={"HN_TOKEN": CANARY},
        cli="release name '***'",
        command="uninstall",
    ),
    Case(
        "secret-in-a-rendered-annotation",
        BASE + "queue: q\ntasSettings:\n  topologyRequest:\n    gke-gcsfuse/memory-limit: ${HN_TOKEN}\n",
        None,
        '$.spec.replicatedJobs[0].template.spec.template.metadata.annotations["gke-gcsfuse/memory-limit"]',
        "annotation gke-gcsfuse/memory-limit '***' is not a Kubernetes quantity",
        env={"HN_TOKEN": CANARY},
        helm="render",
        library=False,
        manifest=True,
    ),
    Case(
        "secret-several-in-one-value",
        BASE + "queue: ${HN_A_TOKEN}-${HN_B_PASSWORD}\n",
        "7:1",
        "$.queue",
        "does not match",
        env={"HN_A_TOKEN": "Secret-One", "HN_B_PASSWORD": "Secret#Two"},
        cli="'***-***' does not match",
    ),
    # --- masking protects secrets and shows the rest (helm_nemo.secret_policy) -------------------------
    Case(
        "environment-value-shown-in-an-error",
        BASE + "volumes:\n  gcsMounts:\n    - bucketName: ${GCS_BUCKET}\n      mountPath: /d\n",
        "9:7",
        "$.volumes.gcsMounts[0].bucketName",
        "'b' is too short",
        env={"GCS_BUCKET": "b"},
    ),
    Case(
        "environment-value-masked-with-mask",
        BASE + "volumes:\n  gcsMounts:\n    - bucketName: ${GCS_BUCKET}\n      mountPath: /d\n",
        "9:7",
        "$.volumes.gcsMounts[0].bucketName",
        "'b' is too short",
        env={"GCS_BUCKET": "b"},
        args=("--mask", "GCS_BUCKET"),
        cli="'***' is too short",
    ),
    Case(
        "environment-value-masked-with-mask-in-validate",
        BASE + "queue: ${QUEUE}\n",
        "7:1",
        "$.queue",
        "'Team Queue' does not match",
        env={"QUEUE": "Team Queue"},
        args=("--mask=QUEUE",),
        cli="'***' does not match",
        command="validate",
    ),
    Case(
        "credential-looking-value-under-any-name",
        BASE + "queue: ${HN_MODEL}\n",
        "7:1",
        "$.queue",
        "does not match",
        env={"HN_MODEL": "hf_" + "aBcDeFgHiJkLmNoPqRsTuVwXyZaBcDeFgH"},
        cli="'***' does not match",
    ),
    Case(
        "url-with-a-password-under-any-name",
        BASE + "gcsDownload:\n  source: ${HN_SOURCE}\n",
        "8:3",
        "$.gcsDownload.source",
        "does not match '^gs://'",
        env={"HN_SOURCE": "https://trainer:Pa55-w0rd@minio.internal/data"},
        cli="'***' does not match",
    ),
    Case(
        "high-entropy-value-under-any-name",
        BASE + "queue: ${HN_RUN}\n",
        "7:1",
        "$.queue",
        "does not match",
        env={"HN_RUN": "q7Xk2LmP9vRt4WzN8bYc3HdJ"},
        cli="'***' does not match",
    ),
    # --- patterns match whole strings (no trailing newline) ------------------------------------------
    Case("pattern-newline-queue", BASE + 'queue: "q1\\n"\n', "7:1", "$.queue", "does not match"),
    Case(
        "pattern-newline-claim-name",
        BASE + 'volumes:\n  pvcMounts:\n    - claimName: "c1\\n"\n      mountPath: /d\n',
        "9:7",
        "$.volumes.pvcMounts[0].claimName",
        "does not match",
    ),
    Case(
        "pattern-newline-subnetwork",
        BASE + 'network:\n  subnetworks: ["eth0\\n"]\n',
        "8:17",
        "$.network.subnetworks[0]",
        "does not match",
    ),
    Case(
        "pattern-newline-env-name",
        BASE + '  envs:\n    - name: "A\\n"\n',
        "8:7",
        "$.workload.envs[0].name",
        "does not match",
    ),
    Case(
        "pattern-newline-release",
        HEAD.replace("release: r1", 'release: "r1\\n"') + WORKLOAD,
        "3:1",
        "$.release",
        "is not a DNS-1123 label",
    ),
    Case(
        "pattern-newline-from-the-environment",
        BASE + "queue: ${QUEUE_NAME}\n",
        "7:1",
        "$.queue",
        "does not match",
        env={"QUEUE_NAME": "queue-1\n"},
        cli="'queue-1\\n' does not match",
    ),
    Case(
        "pattern-newline-bucket",
        BASE + 'volumes:\n  gcsMounts:\n    - bucketName: "bucket\\n"\n      mountPath: /d\n',
        "9:7",
        "$.volumes.gcsMounts[0].bucketName",
        "does not match",
    ),
    Case(
        "pattern-newline-timestamp",
        BASE + '  jobTimestamp: "2026-01-01-00-00-00\\n"\n',
        "7:3",
        "$.workload.jobTimestamp",
        "does not match",
    ),
    # --- helm semantics: several -f, -f -, release names, release-level conflicts, uninstall ------------
    Case(
        "values-error-in-the-second-file",
        BASE,
        "2:3",
        "$.workload.gpus",
        "430 is not valid here",
        files={"b.yaml": "workload:\n  gpus: 430\n"},
        more=("b.yaml",),
        in_file="b.yaml",
    ),
    Case(
        "values-error-in-the-first-file-after-a-merge",
        BASE + "queue: Bad_Q\n",
        "7:1",
        "$.queue",
        "does not match",
        files={"b.yaml": "workload:\n  gpus: 8\n"},
        more=("b.yaml",),
    ),
    Case(
        "values-list-replaced-by-the-second-file",
        BASE + "volumes:\n  gcsMounts:\n    - bucketName: bkt\n      mountPath: /d\n",
        "3:7",
        "$.volumes.gcsMounts[0]",
        "required key 'mountPath' is missing",
        files={"b.yaml": "volumes:\n  gcsMounts:\n    - bucketName: other\n"},
        more=("b.yaml",),
        in_file="b.yaml",
    ),
    Case(
        "values-null-in-the-second-file",
        BASE,
        "1:1",
        "$.network",
        "null would remove the chart's default mapping",
        files={"b.yaml": "network: null\n"},
        more=("b.yaml",),
        in_file="b.yaml",
    ),
    Case(
        "values-unknown-key-in-the-third-file",
        BASE,
        "1:1",
        "$.queu",
        "unknown key 'queu'",
        files={"b.yaml": "queue: q\n", "c.yaml": "queu: q\n"},
        more=("b.yaml", "c.yaml"),
        in_file="c.yaml",
    ),
    Case(
        "values-recipe-merged-with-a-file",
        recipe(release("a")),
        "2:1",
        "$.releases",
        "a recipe file (with `releases:`) cannot be merged",
        files={"b.yaml": "queue: q\n"},
        more=("b.yaml",),
    ),
    Case(
        "values-on-stdin",
        None,
        "7:1",
        "$.queue",
        "does not match",
        stdin=BASE + "queue: Bad_Q\n",
        in_file="<stdin>",
        library=False,
    ),
    Case(
        "values-on-stdin-twice",
        None,
        None,
        "$",
        "stdin (-f -) can be read once only",
        stdin=BASE,
        more=("-",),
        in_file="command line",
        library=False,
    ),
    Case(
        "release-on-the-command-line-not-dns",
        BASE,
        None,
        "$",
        "release name 'Bad_Name' (from the command line) is not a DNS-1123 label",
        release="Bad_Name",
        in_file="command line",
    ),
    Case(
        "release-on-the-command-line-too-long",
        BASE,
        None,
        "$",
        "is 54 characters, more than 53",
        release="r" * 54,
        in_file="command line",
    ),
    Case(
        "release-on-the-command-line-with-a-dot",
        BASE,
        None,
        "$",
        "release name 'my.release'",
        release="my.release",
        in_file="command line",
    ),
    Case(
        "release-in-the-values-with-a-dot",
        HEAD.replace("r1", "my.release") + WORKLOAD,
        "3:1",
        "$.release",
        "is not a DNS-1123 label",
    ),
    Case(
        "recipe-accelerator-conflict",
        recipe(release("a", "      accelerator: a4\n      workload: {gpus: 16, image: 'img:1'}\n")),
        "5:5",
        "$.releases[0].accelerator",
        "accelerator 'a3ultra' conflicts with accelerator 'a4' in the release's values (line 7)",
    ),
    Case(
        "recipe-chart-conflict",
        recipe(release("a", "      chart: nemo-training\n      workload: {gpus: 16, image: 'img:1'}\n")),
        "4:5",
        "$.releases[0].chart",
        "chart 'jobset' conflicts with chart 'nemo-training'",
    ),
    Case(
        "recipe-release-name-conflict",
        recipe(release("a", "      release: b\n      workload: {gpus: 16, image: 'img:1'}\n")),
        "3:5",
        "$.releases[0].release",
        "release 'a' conflicts with release 'b'",
    ),
    Case(
        "uninstall-bad-release-name",
        HEAD.replace("r1", "Bad_Name") + WORKLOAD,
        "3:1",
        "$.release",
        "is not a DNS-1123 label",
        command="uninstall",
    ),
    Case(
        "uninstall-no-release-name",
        "accelerator: a3ultra\nchart: jobset\n" + WORKLOAD,
        "1:1",
        "$",
        "no release name",
        command="uninstall",
    ),
    Case(
        "uninstall-unset-variable-in-the-name",
        HEAD.replace("r1", "${RELEASE_NAME}") + WORKLOAD,
        "3:1",
        "$.release",
        "variable RELEASE_NAME is not set",
        command="uninstall",
    ),
    Case(
        "uninstall-recipe-conflict",
        recipe(release("a", "      release: b\n      workload: {gpus: 16, image: '${IMAGE}'}\n")),
        "3:5",
        "$.releases[0].release",
        "release 'a' conflicts with release 'b'",
        command="uninstall",
    ),
    # (the shipped charts' values schemas bound workload.gpus now: a user's chart renders the int32 overflow)
    Case(
        "upgrade-validates-the-manifests",
        USER_CHART + "n: 17179869184\n",
        None,
        "$.spec.replicas",
        "does not fit int32",
        files=user_chart(REPLICAS_FROM_VALUES),
        command="upgrade",
        helm="render",
        library=False,
        manifest=True,
    ),
    Case(
        "upgrade-install-validates-the-manifests",
        USER_CHART + "n: 17179869184\n",
        None,
        "$.spec.replicas",
        "does not fit int32",
        files=user_chart(REPLICAS_FROM_VALUES),
        command="upgrade",
        args=("--install",),
        helm="render",
        library=False,
        manifest=True,
    ),
    # issue 27: was exit 1 from the chart's `fail` (no line); now the cross-field rule at validation
    Case(
        "chart-template-refuses-a-long-release-name",
        HEAD.replace("r1", "r" * 53) + WORKLOAD,
        "3:1",
        "$.release",
        "the last pod's hostname 'rrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrr-workload-0-1' is 66 characters",
        expected="release name of at most 50 characters for 2 node(s)",
    ),
    # --- validation gaps ------------------------------------------------------------------------------
    Case(
        "null-volumes",
        BASE + "volumes: null\n",
        "7:1",
        "$.volumes",
        "null would remove the chart's default mapping",
        expected="a mapping",
        hint="leave the key out",
    ),
    Case("null-network", BASE + "network:\n", "7:1", "$.network", "null would remove the chart's default mapping"),
    Case(
        "null-nested-mapping",
        BASE + "tasSettings:\n  topologyRequest: ~\n",
        "8:3",
        "$.tasSettings.topologyRequest",
        "null would remove the chart's default mapping",
    ),
    Case(
        "null-in-a-recipe-release",
        recipe(release("a", "      volumes: null\n      workload: {gpus: 16, image: 'img:1'}\n")),
        "7:7",
        "$.volumes",
        "null would remove the chart's default mapping",
    ),
    Case(
        "label-key-invalid",
        BASE + "  labels:\n    'bad key!': x\n",
        "8:5",
        "$.workload.labels['bad key!']",
        "label key",
    ),
    Case(
        "label-value-too-long",
        BASE + "  labels:\n    team: " + "a" * 64 + "\n",
        "8:5",
        "$.workload.labels.team",
        "label value",
    ),
    Case(
        "label-value-from-the-environment",
        BASE + "  labels:\n    team: ${TEAM}\n",
        "8:5",
        "$.workload.labels.team",
        "label value 'ML team' must be",
        env={"TEAM": "ML team"},
    ),
    Case(
        "node-selector-value-with-a-space",
        BASE + "nodeSelector:\n  pool: gpu pool\n",
        "8:3",
        "$.nodeSelector.pool",
        "nodeSelector value 'gpu pool' must be",
    ),
    Case(
        "node-selector-key-invalid",
        BASE + "nodeSelector:\n  -pool: gpu\n",
        "8:3",
        "$.nodeSelector.-pool",
        "nodeSelector key",
    ),
    Case(
        "annotation-key-invalid",
        BASE + "  annotations:\n    'bad key': x\n",
        "8:5",
        "$.workload.annotations['bad key']",
        "annotation key",
    ),
    Case(
        "annotations-over-256-kib",
        BASE + "  annotations:\n    note: " + "x" * (256 * 1024) + "\n",
        "7:3",
        "$.workload.annotations",
        "annotations are 262148 bytes together, more than the 256 KiB",
    ),
    Case(
        "int32-parallelism",
        HEAD + "workload:\n  gpus: 17179869184\n  image: img:1\n",
        "5:3",
        "$.workload.gpus",
        "17179869184 is greater than the maximum of 1048576",
    ),
    Case(
        "int32-replicas-of-a-user-chart",
        USER_CHART + "n: 17179869184\n",
        None,
        "$.spec.replicas",
        "17179869184 does not fit int32",
        files=user_chart(REPLICAS_FROM_VALUES),
        command="template",
        helm="render",
        library=False,
        manifest=True,
    ),
    Case(
        "configmap-over-1-mib",
        BASE + "files:\n  workload_config: c.yaml\n  workload_launcher: l.sh\n",
        None,
        "$",
        "ConfigMap data is",
        files={"c.yaml": "x" * (2**20 - 8), "l.sh": "#!/bin/bash\n"},
        helm="render",
        library=False,
        manifest=True,
    ),
    Case(
        "recipe-same-pvc-twice",
        "recipe: storage\nreleases:\n"
        + "".join(
            f"  - release: {name}\n    chart: gcs-fuse\n    values:\n      gcsVolumes:\n"
            "        - {name: gcs-data, type: data, bucketName: bkt}\n"
            for name in ("store-a", "store-b")
        ),
        None,
        "$.metadata.name",
        "'gcs-data-pvc' is also rendered by release store-a",
        helm="render",
        library=False,
        manifest=True,
    ),
    Case(
        "recipe-same-pvc-twice-in-template",
        "recipe: storage\nreleases:\n"
        + "".join(
            f"  - release: {name}\n    chart: gcs-fuse\n    values:\n      gcsVolumes:\n"
            "        - {name: gcs-data, type: data, bucketName: bkt}\n"
            for name in ("store-a", "store-b")
        ),
        None,
        "$.metadata.name",
        "also rendered by release store-a",
        command="template",
        helm="render",
        library=False,
        manifest=True,
    ),
    # --- a user's chart folder (or hostile values) rendering a part of the wrong type: the schema problem,
    # exit 2, never a crash of the other checks (they printed `helm nemo: 'list' object has no attribute 'get'`)
    Case(
        "user-chart-labels-a-list",
        USER_CHART,
        None,
        "$.metadata.labels",
        "[1] is not of type 'object'",
        files=user_chart("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n  labels: [1]\n"),
        command="lint",
        helm="render",
        library=False,
        manifest=True,
    ),
    Case(
        "user-chart-containers-a-string",
        USER_CHART,
        None,
        "$.spec.template.spec.containers",
        "'x' is not of type 'array'",
        files=user_chart(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: d\nspec:\n  selector: {matchLabels: {a: b}}\n"
            "  template:\n    metadata: {labels: {a: b}}\n    spec:\n      containers: x\n"
        ),
        command="template",
        helm="render",
        library=False,
        manifest=True,
    ),
    Case(
        "user-chart-spec-true",
        USER_CHART,
        None,
        "$.spec",
        "True is not of type 'object'",
        files=user_chart("apiVersion: v1\nkind: Service\nmetadata:\n  name: s\nspec: true\n"),
        command="lint",
        helm="render",
        library=False,
        manifest=True,
    ),
    Case(
        "user-chart-accelerator-label-a-list-from-values",
        USER_CHART + "labels: {helm-nemo.dev/accelerator: [a3ultra]}\nenv: [{name: A, value: b}]\n",
        None,
        '$.metadata.labels["helm-nemo.dev/accelerator"]',
        "['a3ultra'] is not of type 'string'",
        files=user_chart(POD_FROM_VALUES),
        helm="render",
        library=False,
        manifest=True,
    ),
    Case(
        "user-chart-env-an-int-from-values",
        USER_CHART + "labels: {a: b}\nenv: 7\n",
        None,
        "$.spec.containers[0].env",
        "7 is not of type 'array'",
        files=user_chart(POD_FROM_VALUES),
        command="lint",
        helm="render",
        library=False,
        manifest=True,
    ),
    # --- limits: aliases, nesting, size ---------------------------------------------------------------
    Case(
        "limit-alias-bomb",
        "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n"
        + "".join(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]\n" for i in range(1, 10)),
        "5:45",
        "$",
        "more than 100000 values after expanding aliases",
    ),
    Case(
        "limit-merge-key-bomb",
        "b0: &b0 {k0: 1, k1: 1, k2: 1, k3: 1, k4: 1, k5: 1, k6: 1, k7: 1, k8: 1, k9: 1}\n"
        + "".join(f"b{i}: &b{i}\n" + "".join(f"  x{j}: *b{i - 1}\n" for j in range(10)) for i in range(1, 8)),
        "39:7",
        "$",
        "more than 100000 values after expanding aliases",
    ),
    Case(
        "limit-deep-flow-nesting",
        "a: " + "[" * 150 + "]" * 150 + "\n",
        "1:103",
        "$",
        "the values nest deeper than 100 levels",
    ),
    Case(
        "limit-deep-block-nesting",
        "".join("  " * i + f"k{i}:\n" for i in range(150)) + "  " * 150 + "v\n",
        "101:201",
        "$",
        "the values nest deeper than 100 levels",
    ),
    Case(
        "limit-deep-through-an-alias",
        "deep: &d " + "[" * 60 + "]" * 60 + "\nb: " + "[" * 45 + "*d" + "]" * 45 + "\n",
        "2:49",
        "$",
        "the values nest deeper than 100 levels",
    ),
    Case("limit-wide-list", "a:\n" + "- 1\n" * 100_001, "99999:3", "$", "more than 100000 values"),
    Case(
        "limit-wide-mapping",
        "{" + ", ".join(f"k{i}: 1" for i in range(50_001)) + "}\n",
        "1:538889",
        "$",
        "more than 100000 values",
    ),
    Case("limit-recursive-alias", "a: &a [1, *a]\n", "1:11", "$", "alias *a repeats the node it is inside of"),
    Case(
        "limit-file-over-4-mib",
        "a: |\n" + "  xxxxxxxxxxxxxx\n" * (4 * 2**20 // 17 + 10),
        None,
        "$",
        "the values file is larger than 4 MiB",
    ),
    Case(
        "limit-stdin-over-4-mib",
        None,
        None,
        "$",
        "the values file is larger than 4 MiB",
        stdin="a: |\n" + "  xxxxxxxxxxxxxx\n" * (4 * 2**20 // 17 + 10),
        in_file="<stdin>",
        library=False,
    ),
    # === issue 27: hardening ====================================================================
    # --- integers bounded: a GPU count of 2^63 reached helm (int64 overflow in the chart) --------------
    Case(
        "int-gpus-2-to-the-63",
        HEAD + "workload:\n  gpus: 9223372036854775808\n  image: img:1\n",
        "5:3",
        "$.workload.gpus",
        "9223372036854775808 is greater than the maximum of 1048576",
        expected="maximum 1048576",
    ),
    Case(
        "int-gpus-2-to-the-63-in-template",
        HEAD + "workload:\n  gpus: 9223372036854775808\n  image: img:1\n",
        "5:3",
        "$.workload.gpus",
        "is greater than the maximum",
        command="template",
    ),
    Case(
        "int-backoff-limit-over-int32",
        BASE + "  backoffLimit: 2147483648\n",
        "7:3",
        "$.workload.backoffLimit",
        "is greater than the maximum of 2147483647",
    ),
    Case(
        "int-supervisor-port-like-field",
        "chart: supervisor\nrelease: sup\nheartbeat_timeout_s: 9223372036854775807\n",
        "3:1",
        "$.heartbeat_timeout_s",
        "is greater than the maximum of 2147483647",
    ),
    Case(
        "int-negative-2-to-the-63",
        BASE + "  ttlSecondsAfterFinished: -9223372036854775808\n",
        "7:3",
        "$.workload.ttlSecondsAfterFinished",
        "is less than the minimum of 0",
    ),
    Case(
        "int-argument-beyond-float64",
        BASE + "  arguments: [18446744073709551615]\n",
        "7:15",
        "$.workload.arguments[0]",
        "is greater than the maximum of 9007199254740991",
    ),
    # --- nested Kubernetes objects are closed ----------------------------------------------------------
    Case(
        "nested-unknown-key-in-value-from",
        BASE + "  envs:\n    - name: T\n      valueFrom:\n        secretKeyRef: {name: s, key: k, namespace: other}\n",
        "10:41",
        "$.workload.envs[0].valueFrom.secretKeyRef.namespace",
        "unknown key 'namespace'",
    ),
    Case(
        "nested-unknown-source-in-value-from",
        BASE + "  envs:\n    - name: T\n      valueFrom:\n        vaultRef: x\n",
        "10:9",
        "$.workload.envs[0].valueFrom.vaultRef",
        "unknown key 'vaultRef'",
    ),
    Case(
        "nested-unknown-key-in-affinity",
        BASE + "affinity:\n  nodeAffinity:\n    requiredDuringSchedulingIgnoredDuringExecution:\n"
        "      nodeSelectorTerms:\n        - matchExpressions: [{key: a, operator: In, values: [b], valeus: [c]}]\n",
        "11:66",
        "$.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]"
        ".matchExpressions[0].valeus",
        "unknown key 'valeus'",
        hint="did you mean 'values'?",
    ),
    Case(
        "nested-affinity-misspelt",
        BASE + "affinity:\n  nodeAfinity: {}\n",
        "8:3",
        "$.affinity.nodeAfinity",
        "unknown key 'nodeAfinity'",
        hint="did you mean 'nodeAffinity'?",
    ),
    Case(
        "nested-unknown-key-in-a-toleration",
        "chart: supervisor\nrelease: sup\ntolerations:\n  - {key: a, operator: Exists, efect: NoSchedule}\n",
        "4:32",
        "$.tolerations[0].efect",
        "unknown key 'efect'",
        hint="did you mean 'effect'?",
    ),
    Case(
        "nested-object-in-a-legacy-key",
        BASE + "  arguments[]: {a: 1}\n",
        "7:3",
        "$.workload.arguments[]",
        "is not of type 'null', 'string', 'array'",
    ),
    # --- the pod-variable scope is per release -----------------------------------------------------------
    Case(
        "scope-another-release-defines-the-name",
        recipe(
            release(
                "a",
                "      workload:\n        gpus: 16\n        image: 'img:1'\n        envs: [{name: MY_VAR, value: v}]\n",
            ),
            release(
                "b", "      workload:\n        gpus: 16\n        image: 'img:1'\n        arguments: ['--x=${MY_VAR}']\n"
            ),
        ),
        "18:21",
        "$.releases[1].values.workload.arguments[0]",
        "variable MY_VAR is not set",
    ),
    # --- YAML tags and merge keys --------------------------------------------------------------------
    Case(
        "yaml-python-tag-on-a-scalar",
        BASE + "queue: !!python/object/apply:os.system [id]\n",
        "7:8",
        "$.queue",
        "the YAML tag !!python/object/apply:os.system is not allowed",
    ),
    Case(
        "yaml-python-tag-on-a-mapping",
        BASE + "network: !!python/object:os.system {hostNetwork: true}\n",
        "7:10",
        "$.network",
        "the YAML tag !!python/object:os.system is not allowed",
    ),
    Case(
        "yaml-local-tag-on-a-sequence",
        BASE + "targetNodes: !nodes [a, b]\n",
        "7:14",
        "$.targetNodes",
        "the YAML tag !nodes is not allowed",
    ),
    Case(
        "yaml-binary-tag", BASE + "queue: !!binary cXVldWU=\n", "7:8", "$.queue", "the YAML tag !!binary is not allowed"
    ),
    Case(
        "yaml-timestamp-tag",
        BASE + "queue: !!timestamp 2026-01-01\n",
        "7:8",
        "$.queue",
        "the YAML tag !!timestamp is not allowed",
    ),
    Case(
        "yaml-tag-on-a-key",
        BASE + "network:\n  !!python/name:os.system hostNetwork: true\n",
        "8:3",
        "$.network",
        "the YAML tag !!python/name:os.system is not allowed",
    ),
    Case(
        "yaml-merge-key-with-a-scalar",
        BASE + "network:\n  <<: 5\n  hostNetwork: true\n",
        "8:7",
        "$.network['<<']",
        "the merge key << takes a mapping",
    ),
    Case(
        "yaml-merge-key-with-a-list-of-scalars",
        BASE + "base: &b x\nnetwork:\n  <<: [*b]\n",
        "9:7",
        "$.network['<<']",
        "the merge key << takes a mapping",
    ),
    # --- NUL characters -------------------------------------------------------------------------------
    Case("nul-escaped-in-a-string", BASE + 'queue: "q\\0x"\n', "7:8", "$.queue", "a NUL character"),
    Case(
        "nul-escaped-in-an-env-value",
        BASE + '  envs:\n    - {name: A, value: "a\\x00b"}\n',
        "8:24",
        "$.workload.envs[0].value",
        "a NUL character",
    ),
    Case("nul-raw-byte-in-the-file", (BASE + "queue: ab").encode() + b"\x00c\n", "7:10", "$", "a NUL character"),
    Case(
        "nul-in-a-file-read-with-files",
        BASE + "files:\n  workload_launcher: l.sh\n",
        "8:3",
        "$.files.workload_launcher",
        "a NUL character at line 2, column 2",
        files={"l.sh": "echo\nx\0y\n"},
    ),
    Case(
        "not-utf8-in-a-file-read-with-files",
        BASE + "files:\n  workload_config: c.txt\n",
        "8:3",
        "$.files.workload_config",
        "not UTF-8 text at line 2, column 3",
        files={"c.txt": b"ab\ncd\xff\n"},
    ),
    Case("not-utf8-after-a-bom", b"\xef\xbb\xbfrelease: r1\nqueue: caf\xe9\n", "2:11", "$", "not UTF-8 text"),
    Case("control-character-raw", (BASE + "queue: ab").encode() + b"\x01c\n", "7:10", "$", "control character #x0001"),
    # --- cross-field rules at validation (they were only the chart's `fail`: exit 1, no line) --------------
    Case(
        "cross-nodes-disagree-with-gpus",
        "accelerator: a3ultra\nchart: nemo-training\nrelease: r1\nworkload:\n  gpus: 16\n  nodes: 4\n  image: img:1\n",
        "6:3",
        "$.workload.nodes",
        "workload.nodes=4 disagrees with workload.gpus=16 (2 node(s) of 8 GPUs)",
        expected="nodes: 2",
    ),
    Case(
        "cross-nodes-in-template",
        "accelerator: a3ultra\nchart: nemo-training\nrelease: r1\nworkload:\n  gpus: 16\n  nodes: 4\n  image: img:1\n",
        "6:3",
        "$.workload.nodes",
        "disagrees with workload.gpus",
        command="template",
    ),
    Case(
        "cross-release-plus-suffix-too-long",
        HEAD.replace("r1", "r" * 40) + WORKLOAD + "  nameSuffix: " + "s" * 20 + "\n",
        "7:3",
        "$.workload.nameSuffix",
        "is 74 characters, more than 63",
        expected="release name + -suffix of at most 50 characters",
    ),
    Case(
        "cross-release-on-the-command-line-too-long",
        BASE,
        None,
        "$",
        "release name '" + "r" * 51 + "' (from the command line): name",
        release="r" * 51,
        in_file="command line",
    ),
    Case("cross-release-too-long-in-a-recipe", recipe(release("r" * 51)), "3:5", "$.release", "is 64 characters"),
    Case(
        "cross-node-selector-contradicts-the-profile",
        BASE + "nodeSelector:\n  cloud.google.com/gke-accelerator: nvidia-h100-80gb\n",
        "8:3",
        "$.nodeSelector['cloud.google.com/gke-accelerator']",
        "contradicts the A3 Ultra nodes' label",
    ),
    Case(
        "cross-local-ckpt-without-ssd",
        BASE + "  enable_local_ckpt: true\n",
        "7:3",
        "$.workload.enable_local_ckpt",
        "needs volumes.ssdMountPath",
    ),
    Case(
        "cross-nfs-without-server",
        "accelerator: a3ultra\nchart: nemo-training\nrelease: r1\n" + WORKLOAD + "volumes: {nfsMountPath: /nfs}\n",
        "7:11",
        "$.volumes.nfsMountPath",
        "needs volumes.nfsServer",
    ),
    Case(
        "cross-nsys-end-before-start",
        "accelerator: a3ultra\nchart: nemo-training\nrelease: r1\n"
        + WORKLOAD
        + "  profile: {enabled: true, startStep: 9, endStep: 2}\n",
        "7:42",
        "$.workload.profile.endStep",
        "end step 2 is before start step 9",
    ),
    # --- an oci:// chart is checked against its own schema, or the run says it could not (never a silent ok) ----
    Case(
        "oci-chart-that-cannot-be-pulled-validate",
        BASE,
        None,
        "$",
        "cannot check the values against chart oci://127.0.0.1:9/none/jobset-a3ultra",
        in_file="command line",
        chart="oci://127.0.0.1:9/none/jobset-a3ultra",
        args=("--version", "7.7.7"),
        command="validate",
        helm="render",
    ),
    Case(
        "oci-chart-that-cannot-be-pulled-install",
        BASE,
        None,
        "$",
        "helm pull failed",
        in_file="command line",
        chart="oci://127.0.0.1:9/none/jobset-a3ultra",
        args=("--version", "7.7.7"),
        helm="render",
    ),
    # --- limits: nested defaults -----------------------------------------------------------------------
    Case(
        "limit-nested-defaults",
        BASE + "queue: " + "${A:-" * 2000 + "q" + "}" * 2000 + "\n",
        "7:1",
        "$.queue",
        "defaults nest deeper than 20 levels",
    ),
    # --- processes: what helm prints, where our output goes ---------------------------------------------
    Case(
        "helm-prints-nothing-for-template",
        BASE,
        None,
        "$",
        "helm template printed nothing for release r1",
        command="template",
        helm="empty",
        exit=1,
        in_file="helm nemo",
        library=False,
    ),
    Case(
        "helm-prints-nothing-for-install",
        BASE,
        None,
        "$",
        "printed nothing for release r1",
        command="install",
        helm="empty",
        exit=1,
        in_file="nothing was installed",
        library=False,
    ),
    Case(
        "helm-prints-nothing-for-lint",
        BASE,
        None,
        "$",
        "printed nothing for release r1",
        command="lint",
        helm="empty",
        exit=1,
        in_file="helm nemo",
        library=False,
    ),
    Case(
        "helm-prints-nothing-for-upgrade",
        BASE,
        None,
        "$",
        "printed nothing for release r1",
        command="upgrade",
        helm="empty",
        exit=1,
        in_file="nothing was installed",
        library=False,
    ),
    Case(
        "helm-prints-garbage-for-template",
        BASE,
        None,
        "$",
        "not YAML",
        command="template",
        helm="garbage",
        library=False,
        manifest=True,
    ),
    Case(
        "helm-prints-garbage-for-install",
        BASE,
        None,
        "$",
        "not YAML",
        command="install",
        helm="garbage",
        library=False,
        manifest=True,
    ),
    Case(
        "helm-prints-garbage-for-lint",
        BASE,
        None,
        "$",
        "not YAML",
        command="lint",
        helm="garbage",
        library=False,
        manifest=True,
    ),
    Case(
        "output-to-a-full-disk-validate",
        BASE,
        None,
        "$",
        "cannot write the output: No space left on device",
        command="validate",
        stdout_to="/dev/full",
        exit=1,
        in_file="helm nemo",
        library=False,
    ),
    Case(
        "output-to-a-full-disk-template",
        BASE,
        None,
        "$",
        "cannot write the output: No space left on device",
        command="template",
        helm="render",
        stdout_to="/dev/full",
        exit=1,
        in_file="helm nemo",
        library=False,
    ),
    Case(
        "output-to-a-full-disk-lint",
        BASE,
        None,
        "$",
        "cannot write the output: No space left on device",
        command="lint",
        helm="render",
        stdout_to="/dev/full",
        exit=1,
        in_file="helm nemo",
        library=False,
    ),
    Case(
        "debug-shows-the-traceback",
        BASE + "queue: Bad_Q\n",
        "7:1",
        "$.queue",
        "does not match",
        pre_args=("--debug",),
        debug=True,
    ),
]


def _case_of(param) -> Case:
    return param.values[0] if hasattr(param, "values") else param


def _ids() -> list[str]:
    return [_case_of(c).id for c in CASES]


def test_catalogue_is_large_and_ids_are_unique():
    ids = _ids()
    assert len(ids) == len(set(ids))
    assert sum(1 for c in CASES if not hasattr(c, "marks")) >= 200


# A HELM_BIN that logs every call (argv, one JSON line), then, given values on stdin (`-f -`), what it read
# ({"read": bytes}); by $FAKE_HELM_MODE it renders with the real Helm 3 (render), prints nothing (empty) or
# prints what is not YAML (garbage) for `helm template`.
FAKE_HELM = """#!{python}
import json, os, sys
argv = sys.argv[1:]
with open(os.environ["FAKE_HELM_LOG"], "a") as log:
    log.write(json.dumps(argv) + "\\n")
mode = os.environ.get("FAKE_HELM_MODE", "never")
if mode != "render" and "-" in argv:
    read = len(sys.stdin.buffer.read())
    with open(os.environ["FAKE_HELM_LOG"], "a") as log:
        log.write(json.dumps({{"read": read}}) + "\\n")
if argv[:1] == ["template"]:
    if mode == "render":
        os.execv({helm3!r}, [{helm3!r}, *argv])
    if mode == "garbage":
        print("kind: [unclosed\\n  : : :")
sys.exit(0)
"""


def _materialize(case: Case, where: Path) -> Path:
    where.mkdir(parents=True)
    for rel, content in case.files.items():
        target = where / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if content is DIRECTORY:
            target.mkdir()
        elif content is FIFO:
            os.mkfifo(target)
        elif isinstance(content, Link):
            target.symlink_to(content.target)
        elif isinstance(content, bytes):
            target.write_bytes(content)
        else:
            target.write_text(content, encoding="utf-8")
    values = where / case.values_name
    values.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(case.text, bytes):
        values.write_bytes(case.text)
    elif isinstance(case.text, str):
        values.write_text(case.text, encoding="utf-8")
    return values


def _cli() -> list[str]:
    script = Path(sys.executable).parent / "helm-nemo"
    return [str(script)] if script.exists() else [sys.executable, "-m", "helm_nemo"]


def _values_args(case: Case, values: Path) -> list[str]:
    names = ["-" if case.stdin is not None else str(values)] + [
        m if m == "-" else str(values.parent / m) for m in case.more
    ]
    return [arg for name in names for arg in ("--values", name)]


def _cli_env(case: Case, home: Path) -> dict[str, str]:
    """Only what the interpreter needs, the logging helm and the case's variables: no HELM_DEBUG, no stray ${VARS}."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "HELM_BIN": str(home / "fake-helm"),
        "FAKE_HELM_LOG": str(home / "helm-calls.jsonl"),
        "FAKE_HELM_MODE": case.helm,
    }
    for name in ("HELM_DATA_HOME", "HELM_CONFIG_HOME", "HELM_CACHE_HOME"):
        env[name] = str(home / name.lower())
    if os.environ.get("PYTHONPATH"):  # a checkout other than the installed one (a git worktree) runs its own code
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    env.update(case.env)
    return env


def _run_cli(case: Case, values: Path) -> subprocess.CompletedProcess:
    home = values.parent / ".home"
    home.mkdir()
    fake = home / "fake-helm"
    fake.write_text(FAKE_HELM.format(python=sys.executable, helm3=str(HELM3)))
    fake.chmod(0o755)
    args = [*_cli(), *case.pre_args, case.command, *_values_args(case, values)]
    if case.release:
        args.append(case.release)
    if case.chart:
        args += ["--chart", case.chart]
    if case.root:
        args += ["--root", str((_case_dir(case, values) / case.root).resolve())]
    args += list(case.args)
    stdout = open(case.stdout_to, "w") if case.stdout_to else subprocess.PIPE
    try:
        return subprocess.run(
            args,
            env=_cli_env(case, home),
            cwd=values.parent,
            input=case.stdin,
            stdout=stdout,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
            check=False,
        )
    finally:
        if case.stdout_to:
            stdout.close()


@pytest.fixture(scope="module")
def catalogue(request, tmp_path_factory):
    """Each selected case written to its own folder, and its CLI run started (results are futures)."""
    selected = {
        item.callspec.params["case"].id
        for item in request.session.items
        if getattr(item, "callspec", None) and isinstance(item.callspec.params.get("case"), Case)
    }
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
    return (
        problem.file == file
        and (problem.line, problem.column) == (line, column)
        and problem.json_path == path
        and message in problem.message
    )


# What a problem without a file names instead: stdin, the command line, or (helm's output, our own) words.
NOT_FILES = ("<stdin>", "command line", "helm nemo", "nothing was installed")


def _case_dir(case: Case, values: Path) -> Path:
    return values.parents[len(Path(case.values_name).parts) - 1]


def _file_of(case: Case, values: Path) -> str:
    if case.in_file in NOT_FILES:
        return case.in_file
    return str(_case_dir(case, values) / case.in_file) if case.in_file else str(values)


def _library(case: Case, values: Path):
    names = [values] + [values.parent / m for m in case.more]
    names = names[0] if len(names) == 1 else names
    if case.command == "uninstall":
        return release_names(names, dict(case.env), release=case.release)
    root = str((_case_dir(case, values) / case.root).resolve()) if case.root else None
    return build_plans(names, dict(case.env), chart=case.chart, release=case.release, root=root)


@pytest.mark.parametrize("case", CASES, ids=_ids())
def test_bad_input_is_reported_where_it_is(case: Case, catalogue):
    paths, runs = catalogue
    values = paths[case.id]
    file = _file_of(case, values)

    # 1. the library: UserError, with this problem at this place
    if case.library:
        with pytest.raises(UserError) as raised:
            _library(case, values)
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
            assert any(_matches(p, file, also.loc, also.path, also.message) for p in problems), (
                f"also expected {_location(file, also.loc)}: {also.path}: …{also.message}… in:\n{shown}"
            )
        if case.count is not None:
            assert len(problems) == case.count, shown

    # 2. the real CLI: this exit code, the same location line, no traceback, no secret, helm never installing
    proc = runs[case.id].result()
    output = (proc.stdout or "") + proc.stderr
    message = case.cli if case.cli is not None else case.message
    assert ("Traceback" in output) is case.debug, output
    assert proc.returncode == case.exit, output
    for name, value in case.env.items():  # HN_*: values standing for secrets, never printed
        assert not (name.startswith("HN_") and len(value) >= 4 and value in output), f"${name} printed:\n{output}"
    if case.manifest:
        assert any(line.startswith(f"  {case.path}: ") and message in line for line in output.splitlines()), output
    elif case.loc is None:
        assert file in output and message in output, output
    else:
        wanted = f"{file}:{case.loc}: {case.path}: "
        lines = [line for line in output.splitlines() if line.startswith(wanted)]
        assert any(message in line for line in lines), f"no line {wanted}…{message}… in:\n{output}"
        for also in case.also:
            assert f"{_location(file, also.loc)}: {also.path}: " in output, output
    assert "ok:" not in (proc.stdout or "")
    log = values.parent / ".home" / "helm-calls.jsonl"
    calls = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    if case.helm == "never" and case.command in ("template", "lint"):
        # These two may start `helm template` before validating (actions/early.py): it must never get a value.
        assert all(isinstance(c, list) and c[:1] == ["template"] for c in calls), f"helm got values: {calls}"
    elif case.helm == "never":
        assert calls == [], f"helm was run: {calls}"
    assert not [c for c in calls if isinstance(c, list) and c[:1] in (["install"], ["upgrade"], ["uninstall"])], calls
