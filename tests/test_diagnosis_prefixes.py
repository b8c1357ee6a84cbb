"""Any line prefix (issue 39): the verdict of every corpus log is the same when its lines carry what a launcher or a
log shipper puts before them — torchrun --tee, torch's [rankN]:, mpirun --tag-output, srun --label, Ray/SkyPilot,
`kubectl logs --prefix`, and a Cloud Logging or CloudWatch export (one JSON object a line). Same verdict: the same
first-cause class, file and line (its words, without the prefixes)."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest

from helm_nemo.diagnose import corpus, diagnose_texts
from helm_nemo.diagnose import lines as L
from helm_nemo.diagnose.sources import read

ROOT = Path(__file__).resolve().parent / "logs" / "real"
CASES = corpus.cases(ROOT)


def _launcher(make):
    """A transform that puts `make(index)` after the kubelet's time (the launcher wrote it into the line)."""

    def transform(text: str, index: int, pod: str) -> str:
        out = []
        for line in text.split("\n"):
            at, rest = L.stamp(line)
            head = line[: len(line) - len(rest)]
            out.append(f"{head}{make(index)}{rest}" if line else line)
        return "\n".join(out)

    return transform


def _kubectl_prefix(text: str, index: int, pod: str) -> str:
    return "\n".join(f"[pod/{pod}/workload] {line}" if line else line for line in text.split("\n"))


def _epoch_ms(at: str) -> int:
    return int(datetime.fromisoformat(at[:26] + "+00:00").timestamp() * 1000)


def _cloud_logging(text: str, index: int, pod: str) -> str:
    out, stamped = [], True
    for line in text.rstrip("\n").split("\n"):
        at, rest = L.stamp(line)
        entry: dict[str, object] = {"textPayload": rest, "resource": {"labels": {"pod_name": pod}}}
        if at:
            entry["timestamp"] = line[: line.index(" ")]
        stamped = stamped and bool(at)
        out.append(json.dumps(entry))
    return "\n".join(reversed(out) if stamped else out) + "\n"  # gcloud logging read: newest first


def _cloudwatch(text: str, index: int, pod: str) -> str:
    out = []
    for line in text.rstrip("\n").split("\n"):
        at, rest = L.stamp(line)
        if at:
            out.append(json.dumps({"timestamp": _epoch_ms(at), "message": rest, "logStreamName": pod}))
        else:
            out.append(json.dumps({"@message": rest, "@logStream": pod}))  # a Logs Insights export of @message
    return "\n".join(out) + "\n"


def _ray(index: int) -> str:
    if index == 0:
        return "(head, rank=0, pid=4773) "
    return f"(worker{index}, rank={index}, pid={4773 + index}, ip=10.0.0.{index + 1}) "


PREFIXES = {
    "torchrun-tee": _launcher(lambda i: f"[default{i}]:"),
    "torch-rank": _launcher(lambda i: f"[rank{i}]: "),
    "mpirun": _launcher(lambda i: f"[1,{i}]<stderr>:"),
    "srun-label": _launcher(lambda i: f"{i}: "),
    "ray-skypilot": _launcher(_ray),
    "ray-coloured": _launcher(lambda i: f"\x1b[36m(RayTrainWorker pid={900 + i}, ip=10.0.0.{i + 1})\x1b[0m "),
    "kubectl-prefix": _kubectl_prefix,
    "cloud-logging": _cloud_logging,
    "cloudwatch": _cloudwatch,
}


def _verdict(texts, dumps):
    cause = diagnose_texts(texts, dumps=dumps).cause
    if cause is None:
        return None
    return cause.klass, Path(cause.source.split(":", 1)[0]).name, " ".join(L.body(cause.text).split())


@pytest.fixture(scope="module")
def plain():
    """Each case's logs and their verdict as they are."""
    out = {}
    for folder in CASES:
        logs = read([str(folder)])
        out[folder.name] = (logs, _verdict(logs.texts, logs.dumps))
    return out


@pytest.mark.parametrize("prefix", sorted(PREFIXES))
def test_the_verdict_is_the_same_under_each_prefix(plain, prefix):
    transform = PREFIXES[prefix]
    changed = []
    for name, (logs, before) in plain.items():
        texts = []
        for index, (source, text, base) in enumerate(logs.texts):
            pod = f"{name[:40]}-workload-0-{index}-x7k2p"
            texts.append((source, transform(text, index, pod), base))
        after = _verdict(texts, logs.dumps)
        if after != before:
            changed.append(f"{name}: {before} -> {after}")
    assert changed == [], "\n".join(changed[:12])


def test_a_prefix_names_the_rank():
    for line, rank in [
        ("(head, rank=0, pid=4773) Traceback (most recent call last):", "0"),
        ("(worker3, rank=3, pid=8, ip=10.0.0.4) RuntimeError: x", "3"),
        ("[1,5]<stderr>:RuntimeError: x", "5"),
        ("12: RuntimeError: x", "12"),
        ("[default2]:[rank7]: RuntimeError: x", "2"),
    ]:
        assert L.rank_of(L.stamp(line)[1]) == rank, line
