#!/usr/bin/env python3
"""Corpus harness: every README `helm install` command of a gpu-recipes checkout, rendered with the
recipe's own chart and with helm-nemo's chart for the same accelerator and kind, compared semantically.

    scripts/corpus.py PATH_TO_GPU_RECIPES [--baseline FILE] [--update-baseline] [--only GLOB]
                      [--no-allowances | --evidence-only] [-v]

One line per command (`parity`, `diff`, `refused`, `anchor-error`, `invalid`, `unmapped`), then the recipe figures
(first command of each README; every command of a README) and a last line `corpus: P/N parity`.
Exit status 1 when a command that the baseline file records as `parity` is no longer equivalent (a
regression), 0 otherwise. `--update-baseline` rewrites the baseline with this run.

A difference counts as harmless only when an entry of tests/corpus/allowed-differences.yaml explains
it; every entry's id is documented in docs/compatibility.md (tests check both). `--evidence-only` (the strict
figures) applies only the entries whose `evidence` names what reads the field and a source. The same comparison
runs offline in `make test` on the committed subset in tests/fixtures/corpus/ (see `export_fixture`).

The README commands are read as a shell would: fenced code blocks in order, `export NAME=value` and
`cd DIR` lines kept, line continuations joined, `$NAME`/`${NAME}` expanded, then split into words.
The user's variables get fixed test values (`TEST_ENV`); `$USER` is `user`.
"""

from __future__ import annotations

import argparse
import fnmatch
import hashlib
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from collections.abc import Iterator

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from helm_nemo.diff.semantic import Difference, object_key, parse_manifests, semantic_diff

CORPUS_DIR = ROOT / "tests" / "corpus"
ALLOWED_FILE = CORPUS_DIR / "allowed-differences.yaml"
BASELINE_FILE = CORPUS_DIR / "baseline.txt"
DEFAULT_HELM = ROOT / ".tools" / "helm3" / "helm"

# Values of the user's variables (README: `export PROJECT_ID=<PROJECT_ID>` …): fixed test values.
TEST_ENV = {
    "USER": "user",
    "PROJECT_ID": "test-project",
    "CLUSTER_NAME": "test-cluster",
    "CLUSTER_REGION": "us-central1",
    "GCS_BUCKET": "test-bucket",
    "GCS_BUCKET_DATA": "test-bucket-data",
    "GCS_BUCKET_CHECKPOINTS": "test-bucket-checkpoints",
    "GCS_BUCKET_LOGS": "test-bucket-logs",
    "KUEUE_NAME": "test-queue",
    "HF_TOKEN": "test-hf-token",
    "ARTIFACT_REGISTRY": "us-central1-docker.pkg.dev/test-project/test-registry",
    # numbers, as a user fills them in (the A4X Lustre READMEs pass them with --set: helm types them as integers)
    "CKPT_LOAD_STEP": "10",
    "CKPT_SAVE_INTERVAL": "10",
    "GCS_FOLDER_SERVING_MODEL": "test-model",
}
# Pinned like the tests (tests/conftest.py): renders do not depend on a helm binary's defaults.
KUBE_VERSION = "1.32.0"
API_VERSIONS = ["jobset.x-k8s.io/v1alpha2", "resource.nvidia.com/v1beta1", "kueue.x-k8s.io/v1beta1"]

# helm install/template flags that take a value (the rest are switches).
VALUE_FLAGS = {
    "-f",
    "--values",
    "--set",
    "--set-file",
    "--set-string",
    "--set-json",
    "--set-literal",
    "-n",
    "--namespace",
    "--version",
    "--repo",
    "--timeout",
    "--kube-context",
    "--description",
    "--post-renderer",
    "--kube-version",
    "--api-versions",
    "-a",
    "--output-dir",
}


# ----------------------------------------------------------------------------------------------------
# README commands


@dataclass
class Command:
    readme: str  # path relative to the corpus root
    index: int  # 1-based position among the README's helm install commands
    line: int  # README line of `helm install`
    cwd: Path  # working directory (absolute)
    args: list[str]  # helm arguments after `install`
    release: str | None = None
    chart_arg: str | None = None
    problem: str | None = None  # why the command cannot run as written
    note: str | None = None  # how the harness adapted the command (said in the output)
    literal: bool = True  # the README spells `helm install` with one space (the count of 116)

    @property
    def id(self) -> str:
        return f"{self.readme}#{self.index}"


def expand(text: str, env: dict[str, str]) -> str:
    """$NAME, ${NAME}, ${NAME:-default}; backquoted `git rev-parse …` is the corpus root (REPO_ROOT)."""
    text = re.sub(
        r"`git rev-parse --show-toplevel`|\$\(git rev-parse --show-toplevel\)", env.get("REPO_ROOT", ""), text
    )

    def braced(m: re.Match) -> str:
        name, default = m.group(1), m.group(3)
        value = env.get(name, "")
        return value if value or default is None else default

    text = re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(:-([^}]*))?\}", braced, text)
    return re.sub(r"\$([A-Za-z_][A-Za-z0-9_]*)", lambda m: env.get(m.group(1), ""), text)


def _blocks(text: str) -> Iterator[list[tuple[int, str]]]:
    """Fenced code blocks as (line number, line) lists, in README order."""
    block: list[tuple[int, str]] | None = None
    for n, line in enumerate(text.splitlines(), 1):
        if line.strip().startswith("```"):
            if block is None:
                block = []
            else:
                yield block
                block = None
        elif block is not None:
            block.append((n, line))


def _logical_lines(block: list[tuple[int, str]]) -> Iterator[tuple[int, str]]:
    start, parts = None, []
    for n, line in block:
        if start is None:
            start = n
        stripped = line.strip()
        if stripped.endswith("\\"):
            parts.append(stripped[:-1])
            continue
        parts.append(stripped)
        yield start, " ".join(p for p in parts if p)
        start, parts = None, []
    if parts:
        yield start, " ".join(p for p in parts if p)


def readme_commands(corpus: Path, readme: Path) -> list[Command]:
    rel = readme.relative_to(corpus).as_posix()
    literal = "helm install" in readme.read_text(errors="replace")
    env = dict(TEST_ENV, REPO_ROOT=str(corpus))
    env["RECIPE_ROOT"] = str(readme.parent)
    cwd = readme.parent
    commands: list[Command] = []
    for block in _blocks(readme.read_text(errors="replace")):
        for n, line in _logical_lines(block):
            m = re.match(r"^export ([A-Za-z_][A-Za-z0-9_]*)=(.*)$", line)
            if m:
                name, value = m.group(1), m.group(2).strip()
                if name in TEST_ENV or name == "REPO_ROOT":
                    continue
                try:
                    words = shlex.split(expand(value, env))
                except ValueError:
                    words = [expand(value, env)]
                value = words[0] if words else ""
                if name == "RECIPE_ROOT" and (_is_recipe_dir(readme.parent) or not Path(value).is_dir()):
                    continue  # the README's own folder (copied READMEs name other or missing folders)
                env[name] = value
                continue
            m = re.match(r"^cd (\S+)$", line)
            if m:
                target = Path(expand(m.group(1), env))
                target = target if target.is_absolute() else (cwd / target)
                if target.is_dir():  # as the shell: a failing cd leaves the directory as it was
                    cwd = target.resolve()
                continue
            m = re.match(r"^helm\s+install\s+(.*)$", line)
            if not m:
                continue
            cmd = Command(rel, len(commands) + 1, n, cwd.resolve() if cwd.exists() else cwd, [], literal=literal)
            try:
                cmd.args = [expand(w, env) for w in shlex.split(m.group(1))]
            except ValueError as err:
                cmd.problem = f"cannot split the command: {err}"
            commands.append(cmd)
            if cmd.problem is None:
                _positionals(cmd)
    return commands


def _is_recipe_dir(path: Path) -> bool:
    return (path / "values.yaml").is_file() or (path / "Chart.yaml").is_file()


def _positionals(cmd: Command) -> None:
    positional, i = [], 0
    while i < len(cmd.args):
        arg = cmd.args[i]
        if arg in VALUE_FLAGS:
            i += 2
            continue
        if not arg.startswith("-"):
            positional.append(arg)
        i += 1
    if len(positional) != 2:
        cmd.problem = f"expected a release name and a chart, found {positional}"
        return
    cmd.release, cmd.chart_arg = positional
    if not re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", cmd.release):
        # Helm refuses the name for any chart (e.g. `$USER-a4x_max-…`); compare the charts under the name a
        # user would pick instead, and say so.
        fixed = re.sub(r"[^a-z0-9-]", "-", cmd.release.lower()).strip("-")
        cmd.note = f"release name {cmd.release!r} is invalid for helm; {fixed!r} used"
        cmd.args = [fixed if a == cmd.release else a for a in cmd.args]
        cmd.release = fixed


def discover(corpus: Path) -> list[Command]:
    readmes = sorted(
        p
        for top in ("training", "RL")
        for p in (corpus / top).rglob("README.md")
        if re.search(r"^\s*helm\s+install\b", p.read_text(errors="replace"), re.M)
    )
    return [c for r in readmes for c in readme_commands(corpus, r)]


# ----------------------------------------------------------------------------------------------------
# Which project chart stands in for the recipe's chart

ACCELERATOR_DIRS = {
    "a3mega": "a3mega",
    "a3ultra": "a3ultra",
    "a4": "a4",
    "a4x": "a4x",
    "a4x-max": "a4x-max",
    "a4xmax": "a4x-max",
    "g4": "g4",
    "a3high": "a3high",
}
# Charts a README names that no longer exist at the corpus commit -> the chart that replaced them (the
# parity fixture a3ultra-jobset-llama31-405b/subnetworks made the same choice).
DELETED_CHARTS = {"src/helm-charts/a3ultra/nemo-training": "src/helm-charts/a3ultra/jobset"}
SRC_KINDS = {
    "jobset": "jobset",
    "nemo-training-v2": "nemo-training",
    "nemo-training": "nemo-training",
    # the generic Job chart, which the corpus uses only for the NCCL test (training/a3ultra/nccl-tests)
    "job": "nccl-test",
}


@dataclass
class Mapping:
    anchor: Path | None  # the recipe's chart directory
    ours: Path | None  # our chart directory
    accelerator: str | None
    kind: str | None
    variant: str  # anchor id used by allowed-differences selectors
    reason: str | None = None  # why there is no project chart


def map_chart(corpus: Path, cmd: Command) -> Mapping:
    chart = Path(cmd.chart_arg)
    chart = (chart if chart.is_absolute() else cmd.cwd / chart).resolve()
    if chart.is_relative_to(corpus) and chart.relative_to(corpus).as_posix() in DELETED_CHARTS:
        chart = corpus / DELETED_CHARTS[chart.relative_to(corpus).as_posix()]
    if not (chart / "Chart.yaml").is_file():
        return Mapping(None, None, None, None, cmd.chart_arg, f"not a local chart: {cmd.chart_arg}")
    rel = chart.relative_to(corpus).as_posix() if chart.is_relative_to(corpus) else str(chart)
    parts = rel.split("/")
    if parts[:2] == ["src", "helm-charts"]:
        sub = parts[2:]
        if sub == ["resiliency", "supervisor-chart"]:
            return Mapping(chart, ROOT / "charts/supervisor", None, "supervisor", "src/supervisor")
        if sub == ["storage", "gcs-fuse"]:
            return Mapping(chart, ROOT / "charts/gcs-fuse", None, "gcs-fuse", "src/gcs-fuse")
        acc = ACCELERATOR_DIRS.get(sub[0])
        kind = SRC_KINDS.get("/".join(sub[1:]))
        if acc and kind:
            ours = ROOT / "charts" / acc / kind
            return Mapping(
                chart,
                ours if ours.is_dir() else None,
                acc,
                kind,
                f"src/{sub[0]}/{'/'.join(sub[1:])}",
                None if ours.is_dir() else f"no project chart {ours.relative_to(ROOT)}",
            )
        return Mapping(
            chart, None, acc, None, "src/" + "/".join(sub), f"no project chart for src/helm-charts/{'/'.join(sub)}"
        )
    if parts[0] in ("training", "RL") and (chart / "templates" / "workload-job.yaml").is_file():
        acc = ACCELERATOR_DIRS.get(parts[1])
        blob = _git_blob(chart / "templates" / "workload-job.yaml")
        ours = ROOT / "charts" / (acc or "?") / "jobset"
        return Mapping(
            chart,
            ours if ours.is_dir() else None,
            acc,
            "jobset",
            f"copy:{blob[:7]}",
            None if ours.is_dir() else f"no project chart charts/{acc}/jobset",
        )
    return Mapping(chart, None, None, None, rel, f"no project chart for {rel}")


def _git_blob(path: Path) -> str:
    data = path.read_bytes()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


# ----------------------------------------------------------------------------------------------------
# Rendering and normalising

TIMESTAMP = re.compile(r"\b\d{4}-\d{2}-\d{2}-\d{2}-\d{2}-\d{2}\b")
UUID = re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b")


def helm_template(helm: Path, release: str, chart: Path, args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    pinned = ["--kube-version", KUBE_VERSION]
    for api in API_VERSIONS:
        pinned += ["--api-versions", api]
    env = dict(os.environ)
    with tempfile.TemporaryDirectory() as home:
        for name in ("HELM_DATA_HOME", "HELM_CONFIG_HOME", "HELM_CACHE_HOME"):
            env[name] = os.path.join(home, name.lower())
        env.pop("HELM_PLUGINS", None)
        return subprocess.run(
            [str(helm), "template", release, str(chart), *pinned, *args],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )


def command_args(cmd: Command) -> list[str]:
    """The README's arguments without the release name and the chart (helm_template puts them first)."""
    args, i, skipped = [], 0, {cmd.release: False, cmd.chart_arg: False}
    while i < len(cmd.args):
        arg = cmd.args[i]
        if arg in VALUE_FLAGS:
            args += cmd.args[i : i + 2]
            i += 2
            continue
        if arg in skipped and not skipped[arg] and not arg.startswith("-"):
            skipped[arg] = True
            i += 1
            continue
        args.append(arg)
        i += 1
    return args


def _map_strings(node: Any, fn) -> Any:
    if isinstance(node, dict):
        return {k: _map_strings(v, fn) for k, v in node.items()}
    if isinstance(node, list):
        return [_map_strings(v, fn) for v in node]
    return fn(node) if isinstance(node, str) else node


def normalize_render(docs: list[dict], release: str) -> list[dict]:
    """Masks what differs on every render: a `<release>-xxxx` random suffix (A3 JobSet names, A4X
    ComputeDomains) becomes `<release>`; the run identity `JOB_IDENTIFIER` (`<release>-<time>` or
    `<release>-<random>`) becomes `<release>-RUN`; any other render time `TIMESTAMP`, any UUID `UUID`.
    Both sides are normalised the same way, so only the *form* of the identity is compared."""
    suffixes = set()
    for doc in docs:
        name = str((doc.get("metadata") or {}).get("name") or "")
        m = re.fullmatch(re.escape(release) + r"-([a-z0-9]{4})(-channel|-all-mrdma)?", name)
        if (
            m
            and doc.get("kind") in ("JobSet", "Job", "ComputeDomain", "ResourceClaimTemplate")
            and not TIMESTAMP.search(name)
        ):
            suffixes.add(m.group(1))
    rand = re.compile(re.escape(release) + r"-(" + "|".join(sorted(suffixes)) + r")\b") if suffixes else None

    def identity(value: str) -> str:
        value = TIMESTAMP.sub("TIMESTAMP", value)
        value = re.sub(re.escape(release) + r"-(TIMESTAMP)\b", release + "-RUN", value)
        if rand:
            value = rand.sub(release + "-RUN", value)
        return value

    def other(value: str) -> str:
        if rand:
            value = rand.sub(release, value)
        value = TIMESTAMP.sub("TIMESTAMP", value)
        return UUID.sub("UUID", value)

    out = []
    for doc in docs:
        for pod in pod_specs(doc):
            for c in (pod.get("containers") or []) + (pod.get("initContainers") or []):
                for e in c.get("env") or []:
                    if isinstance(e, dict) and e.get("name") == "JOB_IDENTIFIER" and isinstance(e.get("value"), str):
                        e["value"] = identity(e["value"])
                command = c.get("command")
                if isinstance(command, list) and command and isinstance(command[-1], str):
                    command[-1] = _unquote_plain_exports(_drop_final_continuation(command[-1]))
                _drop_expand_function(c)
                _launcher_words(c)
                _resource_defaults(c)
            for key in ("hostNetwork", "hostIPC", "hostPID"):
                if pod.get(key) is False:
                    del pod[key]  # Kubernetes' default
        out.append(_map_strings(doc, other))
    return out


LAUNCHER = "bash /workload/launcher/launch-workload.sh"
ARGUMENTS_ECHO = 'echo "Launching workload with the following arguments:"'
CANONICAL_ARGS = "<launcher arguments: see launcherWords>"


def _launcher_words(container: dict) -> None:
    """The words the workload's launcher receives, in one comparable field (`launcherWords`).

    The gpu-recipes charts splice each argument value into the script (`bash launch-workload.sh \\` + one
    line per value, echoed before); helm-nemo passes the values as the container's args ("$@") and the
    script splits each at white space and expands $NAME/${NAME} (compatibility id
    `launcher-args-as-argv`). Both forms become: the argument lines and echoes replaced by one canonical
    line, and `launcherWords` = every value split at white space, unexpanded. The words are compared."""
    command = container.get("command")
    if "launcherWords" in container or not (
        isinstance(command, list) and len(command) == 3 and isinstance(command[2], str)
    ):
        return  # already normalised (a stored fixture) or not a workload script
    lines = command[2].split("\n")
    stripped = [ln.strip() for ln in lines]
    words: list[str] | None = None
    if any(ln == LAUNCHER + ' "${LAUNCHER_ARGS[@]}"' for ln in stripped):  # ours
        args = container.pop("args", None) or []
        words = [w for value in args[1:] for w in str(value).split()]
        start = next((i for i, ln in enumerate(stripped) if ln == "LAUNCHER_ARGS=()"), None)
        end = _echo_block_end(stripped, start)
        if start is None or end is None:
            return
        lines = lines[:start] + [CANONICAL_ARGS] + lines[end + 1 :]
        lines = [
            LAUNCHER + " " + CANONICAL_ARGS if ln.strip() == LAUNCHER + ' "${LAUNCHER_ARGS[@]}"' else ln for ln in lines
        ]
    else:  # a gpu-recipes chart
        at = next((i for i, ln in enumerate(stripped) if ln.startswith(LAUNCHER)), None)
        if at is None:
            return
        first = stripped[at][len(LAUNCHER) :].rstrip("\\").split()
        words = first + [w for ln in stripped[at + 1 :] for w in ln.rstrip("\\").split()]
        lines = lines[:at] + [LAUNCHER + " " + CANONICAL_ARGS]
        stripped = [ln.strip() for ln in lines]
        start = stripped.index(ARGUMENTS_ECHO) if ARGUMENTS_ECHO in stripped else None
        end = _echo_block_end(stripped, start)
        if start is not None and end is not None:
            lines = lines[:start] + [CANONICAL_ARGS] + lines[end + 1 :]
    command[2] = "\n".join(lines)
    container["launcherWords"] = words


def _drop_expand_function(container: dict) -> None:
    """helm-nemo's scripts define `nemo_expand` (launcher-args-as-argv); a function definition does
    nothing by itself (its calls are compared), so the definition is dropped before comparing."""
    command = container.get("command")
    if not (isinstance(command, list) and command and isinstance(command[-1], str)):
        return
    lines = command[-1].split("\n")
    start = next((i for i, ln in enumerate(lines) if ln.strip() == "nemo_expand() {"), None)
    if start is None:
        return
    indent = lines[start][: len(lines[start]) - len(lines[start].lstrip())]
    end = next((i for i in range(start + 1, len(lines)) if lines[i] == indent + "}"), None)
    if end is not None:
        command[-1] = "\n".join(lines[:start] + lines[end + 1 :])


def _echo_block_end(stripped: list[str], start: int | None) -> int | None:
    """Index of the `echo ""` that ends the argument echo block starting at or after `start`."""
    if start is None:
        return None
    seen_echo = False
    for i in range(start, len(stripped)):
        if stripped[i] == ARGUMENTS_ECHO:
            seen_echo = True
        elif seen_echo and stripped[i] == 'echo ""':
            return i
    return None


def _resource_defaults(container: dict) -> None:
    """Kubernetes' defaulting: a resource with a limit and no request requests the limit."""
    resources = container.get("resources")
    if not isinstance(resources, dict) or not isinstance(resources.get("limits"), dict):
        return
    requests = dict(resources.get("requests") or {})
    for key, value in resources["limits"].items():
        requests.setdefault(key, value)
    resources["requests"] = requests


def _drop_final_continuation(script: str) -> str:
    """A script whose last command line ends in ` \\` followed only by blank lines: the shell joins the
    backslash-newline with nothing, so `cmd \\` + end is `cmd` (compatibility id
    `launcher-no-trailing-continuation`)."""
    lines = script.rstrip().split("\n")
    if lines and lines[-1].rstrip().endswith("\\"):
        lines[-1] = lines[-1].rstrip()[:-1].rstrip()
    return "\n".join(lines) + ("\n" if script.endswith("\n") else "")


PLAIN_EXPORT = re.compile(r'^(\s*export [A-Za-z_][A-Za-z0-9_]*=)"([A-Za-z0-9_./:,=+@%-]*)"(\s*)$')


def _unquote_plain_exports(script: str) -> str:
    """`export NAME="word"` -> `export NAME=word` when the word has only characters the shell never treats
    specially (letters, digits, `_./:,=+@%-`: no expansion, splitting, globbing or quoting): quote removal gives
    both the same value (compatibility id `shell-quote-removal`)."""
    return "\n".join(PLAIN_EXPORT.sub(r"\1\2\3", line) for line in script.split("\n"))


def pod_specs(doc: dict) -> Iterator[dict]:
    spec = doc.get("spec") or {}
    for rjob in spec.get("replicatedJobs") or []:
        yield rjob["template"]["spec"]["template"]["spec"]
    if doc.get("kind") in ("Job", "Deployment", "DaemonSet", "StatefulSet"):
        yield spec["template"]["spec"]


def rename_ours(docs: list[dict], renames: dict | None = None) -> list[dict]:
    """Map names ours derives differently back to the anchor's, so the items' content is compared:
    volumes `gcs-<i>-<bucket>` / `pvc-<i>-<claim>` (compatibility id `volume-names-derived`), and the
    chart kind's documented renames (`nemo-training-names`, `pv-names-release-scoped`)."""
    renames = renames or {}
    containers, volumes, names = (renames.get(k) or {} for k in ("containers", "volumes", "names"))
    if names:
        docs = [_map_strings(d, lambda s: names.get(s, s)) for d in docs]
    for doc in docs:
        for pod in pod_specs(doc):
            derived = {}
            for volume in pod.get("volumes") or []:
                if volume["name"].startswith("gcs-") and "csi" in volume:
                    derived[volume["name"]] = volume["csi"]["volumeAttributes"]["bucketName"]
                elif volume["name"].startswith("pvc-") and "persistentVolumeClaim" in volume:
                    derived[volume["name"]] = volume["persistentVolumeClaim"]["claimName"]
            derived.update(volumes)
            for volume in pod.get("volumes") or []:
                volume["name"] = derived.get(volume["name"], volume["name"])
            for container in (pod.get("containers") or []) + (pod.get("initContainers") or []):
                container["name"] = containers.get(container["name"], container["name"])
                for mount in container.get("volumeMounts") or []:
                    mount["name"] = derived.get(mount["name"], mount["name"])
    return docs


# Renames per chart kind (documented in docs/compatibility.md).
KIND_RENAMES = {
    "nemo-training": {
        "containers": {"workload": "nemo-workload", "tcpxo-daemon": "network-rx-daemon"},
        "volumes": {"nemo-configuration": "workload-configuration"},
    },
}


def gcs_fuse_renames(release: str, docs: list[dict]) -> dict:
    return {
        "names": {
            d["metadata"]["name"]: d["metadata"]["name"][len(release) + 1 :]
            for d in docs
            if d.get("kind") == "PersistentVolume" and str(d["metadata"]["name"]).startswith(release + "-")
        }
    }


# ----------------------------------------------------------------------------------------------------
# Allowed differences


def load_allowed(path: Path = ALLOWED_FILE) -> list[dict]:
    import yaml

    return yaml.safe_load(path.read_text()) or []


def evidence_backed(entry: dict) -> bool:
    """An entry whose `evidence` names what reads the field (and what changes at runtime) and a source for it;
    an entry with only a `gap` (why that is not shown) is not."""
    evidence = entry.get("evidence") or {}
    return bool(evidence.get("reads") and evidence.get("source"))


def case_key(mapping: Mapping) -> str:
    """What an allowed-differences entry selects on: `<accelerator>/<kind>/<anchor variant>`."""
    return f"{mapping.accelerator or '-'}/{mapping.kind}/{mapping.variant}"


def entry_applies(entry: dict, key: str, selector: str = "where") -> bool:
    """The entry names this case: one of its `selector` globs (`where:` here, `cases:` in tests/parity's
    list, which tests/test_parity.py reads with these same functions) matches `key`."""
    return any(fnmatch.fnmatchcase(key, pattern) for pattern in entry[selector])


def entry_explains(entry: dict, diff: Difference) -> bool:
    if entry["change"] not in ("any", diff.change):
        return False
    if not re.search(entry["path"], diff.path):
        return False
    if "was" in entry:  # a number or boolean the anchor writes, which ours writes as Helm's text of it
        from helm_nemo.values.helm_yaml import helm_text

        kinds = {"number": (int, float), "boolean": (bool,)}[entry["was"]]
        expected = diff.expected
        return (
            diff.change == "changed"
            and isinstance(expected, kinds)
            and (entry["was"] == "boolean") == isinstance(expected, bool)
            and diff.actual == helm_text(expected)
        )
    if "value" in entry:
        value = diff.actual if diff.change == "added" else diff.expected
        if diff.change == "changed":
            return (
                isinstance(diff.expected, str)
                and isinstance(diff.actual, str)
                and re.search(entry["value"], diff.expected) is not None
                and re.search(entry.get("to", entry["value"]), diff.actual) is not None
            )
        return isinstance(value, str) and re.search(entry["value"], value) is not None
    return True


def explain(
    diffs: list[Difference], entries: list[dict], key: str, selector: str = "where"
) -> tuple[list[Difference], set[str]]:
    """(the differences no entry for `key` explains, the ids of the entries that explained some)."""
    applicable = [e for e in entries if entry_applies(e, key, selector)]
    used: set[str] = set()
    unexplained = []
    for diff in diffs:
        ids = [e["id"] for e in applicable if entry_explains(e, diff)]
        if ids:
            used.update(ids)
        else:
            unexplained.append(diff)
    return unexplained, used


# ----------------------------------------------------------------------------------------------------
# Comparing one command


@dataclass
class Result:
    cmd: Command
    status: str  # parity | diff | refused | anchor-error | unmapped
    detail: str = ""
    key: str = ""
    unexplained: list[Difference] = field(default_factory=list)
    used: set[str] = field(default_factory=set)


def compare_texts(
    anchor_text: str, ours_text: str, release: str, kind: str | None, key: str, entries: list[dict]
) -> tuple[list[Difference], set[str]]:
    anchor = normalize_render(parse_manifests(anchor_text), release)
    ours = normalize_render(parse_manifests(ours_text), release)
    renames = dict(KIND_RENAMES.get(kind or "", {}))
    if kind == "gcs-fuse":
        renames.update(gcs_fuse_renames(release, ours))
    ours = rename_ours(ours, renames)
    match_derived_volume_names(anchor, ours)
    return explain(semantic_diff(anchor, ours), entries, key)


def _sanitized(name: str) -> str:
    return re.sub(r"[._]", "-", name.lower())[:63].rstrip("-")


def match_derived_volume_names(anchor: list[dict], ours: list[dict]) -> None:
    """Our volumes named gcs-<i>-<bucket> / pvc-<i>-<claim> that rename_ours could not map back (an
    emptyDir stand-in for a bucket has no bucketName): the anchor volume whose sanitised name is the
    suffix (same pod, same object) is the one they stand for."""
    anchor_names = {}
    for doc in anchor:
        for n, pod in enumerate(pod_specs(doc)):
            anchor_names[(object_key(doc), n)] = [v["name"] for v in pod.get("volumes") or []]
    for doc in ours:
        for n, pod in enumerate(pod_specs(doc)):
            names = anchor_names.get((object_key(doc), n), [])
            renames = {}
            for volume in pod.get("volumes") or []:
                m = re.fullmatch(r"(?:gcs|pvc)-\d+-(.+)", volume["name"])
                if m and volume["name"] not in names:
                    found = [a for a in names if _sanitized(a) == m.group(1)]
                    if len(found) == 1:
                        renames[volume["name"]] = found[0]
            for volume in pod.get("volumes") or []:
                volume["name"] = renames.get(volume["name"], volume["name"])
            for container in (pod.get("containers") or []) + (pod.get("initContainers") or []):
                for mount in container.get("volumeMounts") or []:
                    mount["name"] = renames.get(mount["name"], mount["name"])


def run_command(corpus: Path, cmd: Command, helm: Path, entries: list[dict]) -> Result:
    if cmd.problem and cmd.problem.startswith("expected a release name and a chart, found []"):
        # `helm install` without a release name or chart (a README's example of extra flags): helm refuses
        # it whatever the chart, so there is nothing to compare; counted as the recipe's own error.
        return Result(cmd, "invalid", cmd.problem)
    if cmd.problem:
        return Result(cmd, "unmapped", cmd.problem)
    mapping = map_chart(corpus, cmd)
    key = case_key(mapping)
    if mapping.ours is None:
        return Result(cmd, "unmapped", mapping.reason or "", key)
    with tempfile.TemporaryDirectory() as tmp:
        args, missing = _placeholders_for_missing_files(command_args(cmd), cmd.cwd, Path(tmp))
        anchor = helm_template(helm, cmd.release, mapping.anchor, args, cmd.cwd)
        ours = helm_template(helm, cmd.release, mapping.ours, args, cmd.cwd)
    result = _compare(cmd, mapping, key, anchor, ours, entries)
    if missing:
        result.detail = (
            result.detail + f" (README names missing file(s) {', '.join(missing)}: placeholder used)"
        ).strip()
    if cmd.note:
        result.detail = (result.detail + f" ({cmd.note})").strip()
    return result


def _placeholders_for_missing_files(args: list[str], cwd: Path, tmp: Path) -> tuple[list[str], list[str]]:
    """A `--set-file` naming a file the recipe does not ship (a README copied from another recipe):
    an empty placeholder stands in on both sides, so the charts are still compared."""
    out, missing = list(args), []
    for i, arg in enumerate(out[:-1]):
        if arg == "--set-file":
            key, _, path = out[i + 1].partition("=")
            if not (cwd / path).is_file():
                missing.append(path)
                placeholder = tmp / f"{len(missing)}-{Path(path).name}"
                placeholder.write_text("# placeholder for a file the recipe does not ship\n")
                out[i + 1] = f"{key}={placeholder}"
    return out, missing


def _compare(cmd: Command, mapping: Mapping, key: str, anchor, ours, entries: list[dict]) -> Result:
    if ours.returncode != 0:
        status = "refused" if anchor.returncode == 0 else "anchor-error"
        return Result(cmd, status, _first_line(ours.stderr), key)
    if anchor.returncode != 0:
        return Result(cmd, "anchor-error", _first_line(anchor.stderr), key)
    try:
        parse_manifests(anchor.stdout)
    except Exception as err:
        return Result(cmd, "anchor-error", f"anchor render is not valid YAML: {_first_line(str(err))}", key)
    try:
        parse_manifests(ours.stdout)
    except Exception as err:
        return Result(cmd, "refused", f"our render is not valid YAML: {_first_line(str(err))}", key)
    unexplained, used = compare_texts(anchor.stdout, ours.stdout, cmd.release, mapping.kind, key, entries)
    if unexplained:
        return Result(cmd, "diff", f"{len(unexplained)} unexplained: {unexplained[0]}", key, unexplained, used)
    return Result(cmd, "parity", "", key, [], used)


def _first_line(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip() and not ln.startswith("WARNING")]
    if len(lines) > 1 and "meet the specifications of the schema" in lines[0]:
        return "schema: " + "; ".join(ln for ln in lines[1:] if ln.startswith("-"))[:400]
    return lines[0][:300] if lines else "(no message)"


# ----------------------------------------------------------------------------------------------------
# Fixtures for the offline tests


NOTICE = """Corpus fixtures for helm-nemo's tests.

The values files (values*.yaml) and the anchor renders (anchor-normalized.yaml) come from, or were
rendered from, the charts of AI-Hypercomputer/gpu-recipes (https://github.com/AI-Hypercomputer/gpu-recipes),
licensed under the Apache License, Version 2.0 (http://www.apache.org/licenses/LICENSE-2.0).
Copyright 2024-2026 Google LLC. Each case's source.txt names the README command, the anchor chart and
the files copied.

The files passed with --set-file (launchers, workload configs, training scripts) are placeholders written
for these tests; no launcher, config or script of gpu-recipes is copied. Made by scripts/corpus.py
--export-fixtures.
"""


def export_fixture(corpus: Path, cmd: Command, helm: Path, dest: Path) -> None:
    """One offline case: values files copied, --set-file files replaced by placeholders, the README
    arguments as command.txt (release kept, chart = CHART), the anchor's normalised render."""
    mapping = map_chart(corpus, cmd)
    dest.mkdir(parents=True, exist_ok=True)
    args, copied, out_args = command_args(cmd), [], []
    i = 0
    while i < len(args):
        flag = args[i]
        if flag in ("-f", "--values"):
            src = (cmd.cwd / args[i + 1]).resolve()
            name = _unique_name(dest, src.name, copied)
            (dest / name).write_bytes(src.read_bytes())
            copied.append((name, src))
            out_args += [flag, name]
            i += 2
        elif flag == "--set-file":
            key, _, path = args[i + 1].partition("=")
            name = _unique_name(dest, Path(path).name, copied)
            placeholder = (
                '#!/bin/bash\necho "placeholder launcher for parity tests"\n'
                if name.endswith(".sh")
                else "# placeholder workload config\n"
            )
            (dest / name).write_text(placeholder)
            copied.append((name, None))
            out_args += [flag, f"{key}={name}"]
            i += 2
        elif flag in VALUE_FLAGS:
            out_args += args[i : i + 2]
            i += 2
        else:
            out_args.append(flag)
            i += 1
    anchor = helm_template(helm, cmd.release, mapping.anchor, out_args, dest)
    if anchor.returncode != 0:
        raise RuntimeError(f"{cmd.id}: anchor render failed: {anchor.stderr}")
    docs = normalize_render(parse_manifests(anchor.stdout), cmd.release)
    import yaml

    (dest / "anchor-normalized.yaml").write_text(
        yaml.safe_dump_all(
            sorted(docs, key=lambda d: (d.get("kind", ""), d.get("metadata", {}).get("name", ""))),
            sort_keys=True,
            width=200,
        )
    )
    (dest / "command.txt").write_text("\n".join([cmd.release, "CHART", *out_args]) + "\n")
    commit = _git_head(corpus)
    lines = [
        f"case: {dest.name}",
        f"command: {cmd.id} (README line {cmd.line})",
        "anchor_repository: https://github.com/AI-Hypercomputer/gpu-recipes",
        f"anchor_commit: {commit}",
        f"anchor_chart: {mapping.anchor.relative_to(corpus)} ({mapping.variant})",
        f"project_chart: {mapping.ours.relative_to(ROOT)}",
        f"selector: {case_key(mapping)}",
    ]
    for name, src in copied:
        if src is None:
            lines.append(f"placeholder: {name} (own placeholder text, nothing copied)")
        else:
            lines.append(f"copied: {name} = {src.relative_to(corpus)} (blob {_git_blob(src)}); Apache-2.0")
    lines.append("substitutions: " + ", ".join(f"${k}={v}" for k, v in TEST_ENV.items()))
    lines.append("licence: Apache-2.0 (see ../NOTICE)")
    (dest / "source.txt").write_text("\n".join(lines) + "\n")


def fixture_name(cmd: Command) -> str:
    """training/a4x/llama3_70b/nemo-gke/nemo2602/64gpus-bf16-gbs256/README.md#2 -> a4x-llama3-70b-nemo-gke-nemo2602-64gpus-bf16-gbs256-2"""
    path = re.sub(r"^(training|RL)/", "", cmd.readme).replace("/recipe/", "/").replace("/README.md", "")
    return re.sub(r"[^a-z0-9]+", "-", f"{path}-{cmd.index}".lower()).strip("-")


def _unique_name(dest: Path, name: str, taken: list) -> str:
    names = {n for n, _ in taken}
    base, n = name, 1
    while name in names:
        n += 1
        name = f"{n}-{base}"
    return name


def _git_head(corpus: Path) -> str:
    proc = subprocess.run(["git", "-C", str(corpus), "rev-parse", "HEAD"], capture_output=True, text=True, check=False)
    return proc.stdout.strip() or "unknown"


# ----------------------------------------------------------------------------------------------------
# Main


def recipe_figures(results: list[Result]) -> tuple[int, int, int, int, int]:
    """(recipes, first command parity, every command parity, commands of the first-parity recipes,
    of which parity). A command the recipe's own chart cannot render (a README error) has no objects
    to compare against and does not count against `every`."""
    by_readme: dict[str, list[Result]] = {}
    for r in results:
        by_readme.setdefault(r.cmd.readme, []).append(r)
    first = [rs for rs in by_readme.values() if rs[0].status == "parity"]
    every = sum(1 for rs in first if all(r.status in ("parity", "anchor-error", "invalid") for r in rs))
    commands = [r for rs in first for r in rs]
    return len(by_readme), len(first), every, len(commands), sum(r.status == "parity" for r in commands)


def summarise(results: list[Result]) -> list[str]:
    counts: dict[str, int] = {}
    for r in results:
        counts[r.status] = counts.get(r.status, 0) + 1
    lines = []
    for label, subset in (
        ("all READMEs", results),
        ("READMEs spelling `helm install`", [r for r in results if r.cmd.literal]),
    ):
        recipes, first, every, commands, parity = recipe_figures(subset)
        lines.append(
            f"recipes ({label}): {first}/{recipes} first command parity, {every}/{recipes} every command"
            f" parity; their commands {parity}/{commands} parity"
        )
    return lines + [
        "status: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())),
        f"corpus: {counts.get('parity', 0)}/{len(results)} parity",
    ]


def read_baseline(path: Path) -> dict[str, str]:
    if not path.is_file():
        return {}
    out = {}
    for line in path.read_text().splitlines():
        if line and not line.startswith("#"):
            status, _, cid = line.partition(" ")
            out[cid] = status
    return out


def write_baseline(path: Path, results: list[Result], commit: str) -> None:
    lines = [
        f"# scripts/corpus.py baseline: gpu-recipes {commit}; one `status command-id` per line.",
        "# A command recorded as parity must stay parity (scripts/corpus.py exits 1 otherwise).",
    ]
    lines += [f"{r.status} {r.cmd.id}" for r in results]
    path.write_text("\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("corpus", type=Path, help="gpu-recipes checkout")
    parser.add_argument("--helm", type=Path, default=Path(os.environ.get("HELM3", DEFAULT_HELM)))
    parser.add_argument("--baseline", type=Path, default=BASELINE_FILE)
    parser.add_argument("--update-baseline", action="store_true")
    parser.add_argument("--only", help="glob over command ids (README path#n) or selectors")
    parser.add_argument("-v", "--verbose", action="store_true", help="print every unexplained difference")
    parser.add_argument("--json", type=Path, help="write all results (with differences) here")
    strictness = parser.add_mutually_exclusive_group()
    strictness.add_argument(
        "--no-allowances",
        action="store_true",
        help="accept no difference (the normalisations still apply)",
    )
    strictness.add_argument(
        "--evidence-only",
        action="store_true",
        help="accept only the differences of evidence-backed entries (what reads the field, with a source): the strict figures",
    )
    parser.add_argument(
        "--export-fixtures", type=Path, metavar="DIR", help="write an offline test case per selected command into DIR"
    )
    opts = parser.parse_args(argv)
    corpus = opts.corpus.resolve()
    entries = [] if opts.no_allowances else load_allowed()
    if opts.evidence_only:
        entries = [e for e in entries if evidence_backed(e)]
    commands = discover(corpus)
    if opts.only:
        commands = [
            c
            for c in commands
            if fnmatch.fnmatchcase(c.id, opts.only)
            or (not c.problem and fnmatch.fnmatchcase(case_key(map_chart(corpus, c)), opts.only))
        ]
    if opts.export_fixtures:
        for cmd in commands:
            name = fixture_name(cmd)
            export_fixture(corpus, cmd, opts.helm, opts.export_fixtures / name)
            print(f"exported {cmd.id} -> {opts.export_fixtures / name}")
        return 0
    results = []
    for cmd in commands:
        r = run_command(corpus, cmd, opts.helm, entries)
        results.append(r)
        print(f"{r.status:12} {cmd.id} [{r.key}] {r.detail}".rstrip(), flush=True)
        if opts.verbose:
            for d in r.unexplained:
                print(f"    {d}")
    for line in summarise(results):
        print(line)
    if opts.json:
        opts.json.write_text(
            json.dumps(
                [
                    {
                        "id": r.cmd.id,
                        "status": r.status,
                        "key": r.key,
                        "detail": r.detail,
                        "diffs": [str(d) for d in r.unexplained],
                        "used": sorted(r.used),
                    }
                    for r in results
                ],
                indent=1,
            )
        )
    if opts.only or opts.no_allowances or opts.evidence_only:
        return 0
    used = set().union(*(r.used for r in results)) if results else set()
    stale = [e["id"] for e in entries if e["id"] not in used]
    if stale:
        print(f"warning: allowed differences that explain nothing in this corpus: {', '.join(stale)}", file=sys.stderr)
    if opts.update_baseline:
        write_baseline(opts.baseline, results, _git_head(corpus))
        return 0
    baseline = read_baseline(opts.baseline)
    regressions = [r for r in results if baseline.get(r.cmd.id) == "parity" and r.status != "parity"]
    for r in regressions:
        print(f"regression: {r.cmd.id} was parity, now {r.status}", file=sys.stderr)
    return 1 if regressions else 0


if __name__ == "__main__":
    sys.exit(main())
