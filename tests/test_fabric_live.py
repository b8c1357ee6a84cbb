"""preflight --nccl without a cluster: the test release's values from the recipe's (placement), the words for
where the test stands (watch), and the command line refusing flags that make no sense (exit 2, nothing run).
The whole flow runs on the real control plane in tests/test_real_cluster_nccl.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from helm_nemo.cli import main
from helm_nemo.fabric import placement, watch
from helm_nemo.generate.profiles import load_profiles

ROOT = Path(__file__).resolve().parent.parent


def schema(accelerator: str) -> dict:
    return json.loads((ROOT / "charts" / accelerator / "nccl-test" / "values.schema.json").read_text())


def test_the_recipes_placement_is_copied_and_nothing_else():
    recipe = {
        "accelerator": "a3ultra",
        "queue": "a3-ultra",
        "tasSettings": {
            "topologyRequest": {"kueue.x-k8s.io/podset-required-topology": "cloud.google.com/gce-topology-block"}
        },
        "targetNodepools": ["pool-a"],
        "avoidNodes": ["bad-1"],
        "network": {
            "hostNetwork": True,
            "gibVersion": "gib:v1",
            "ncclSettings": [{"name": "NCCL_DEBUG", "value": "WARN"}],
        },
        "volumes": {"gcsMounts": [{"bucketName": "ckpt", "mountPath": "/ckpt"}]},
        "workload": {
            "gpus": 432,
            "image": "nemo:25.07",
            "priorityClassName": "high",
            "envs": [{"name": "A", "value": "1"}],
        },
    }
    values = placement.test_values(recipe, load_profiles()["a3ultra"], 2, schema("a3ultra"))
    assert values == {
        "accelerator": "a3ultra",
        "chart": "nccl-test",
        "queue": "a3-ultra",
        "tasSettings": recipe["tasSettings"],
        "targetNodepools": ["pool-a"],
        "avoidNodes": ["bad-1"],
        "network": recipe["network"],
        "workload": {"priorityClassName": "high", "gpus": 16, "arguments": ["--benchmark", "all_gather"]},
    }
    values["network"]["ncclSettings"].clear()
    assert recipe["network"]["ncclSettings"]  # copied, not shared


@pytest.mark.parametrize(
    "accelerator, nodes, chosen",
    [
        ("a3ultra", 2, "all_gather"),  # the only floor
        ("p5", 2, "all_gather"),  # both collectives have floors: all_gather measures the network on 2 nodes
        ("p5en", 2, "all_reduce"),  # only an all_reduce floor is published
        ("g4", 1, "all_reduce"),  # one node, all_reduce averaged
        ("g4", 2, None),  # no multi-node floor for G4: the chart's default runs
    ],
)
def test_the_collective_is_one_the_profile_has_a_floor_for(accelerator, nodes, chosen):
    assert placement.collective(load_profiles()[accelerator], nodes) == chosen


def test_the_release_name_stays_short():
    assert placement.release_name("llama31-405b") == "llama31-405b-nccl"
    long = placement.release_name("a" * 60)
    assert len(long) == placement.MAX_NAME and long.endswith("-nccl")


def pod(name: str, index: int, phase: str = "Pending", **status) -> dict:
    return {
        "metadata": {"name": name, "labels": {"batch.kubernetes.io/job-completion-index": str(index)}},
        "spec": {"nodeName": status.pop("node", "")},
        "status": {"phase": phase, **status},
    }


def test_watch_words():
    job = {"kind": "Job", "metadata": {"name": "t"}, "spec": {"suspend": True}, "status": {}}
    assert watch.look(job, [], None).state == watch.PENDING
    unschedulable = pod(
        "t-0-a",
        0,
        conditions=[
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": "0/9 nodes are available: 2 Insufficient nvidia.com/gpu, 7 node(s) didn't match Pod's "
                "node affinity/selector. preemption: 0/9 nodes are available: 9 No preemption victims found.",
            }
        ],
    )
    seen = watch.look({"kind": "Job", "metadata": {"name": "t"}, "spec": {}}, [unschedulable], None)
    assert (seen.state, seen.words) == (
        watch.PENDING,
        "1 pod(s) not scheduled: 0/9 nodes available: 7 didn't match node affinity/selector, 2 Insufficient nvidia.com/gpu",
    )
    pulling = pod(
        "t-1-b",
        1,
        node="n1",
        containerStatuses=[{"name": "workload", "state": {"waiting": {"reason": "ErrImagePull", "message": "denied"}}}],
    )
    seen = watch.look({"kind": "Job", "metadata": {"name": "t"}, "spec": {}}, [pulling], None)
    assert (
        seen.state == watch.FAILED
        and seen.words == "1 pod(s) cannot start: ErrImagePull (cannot pull the image: denied)"
    )
    done = pod(
        "t-0-c",
        0,
        "Succeeded",
        node="n0",
        containerStatuses=[
            {"name": "workload", "state": {"terminated": {"exitCode": 0, "finishedAt": "2026-01-01T00:00:09Z"}}}
        ],
    )
    seen = watch.look({"kind": "Job", "metadata": {"name": "t"}, "spec": {}}, [done, pulling], None)
    assert (seen.state, seen.rank0, seen.rank0_ok, seen.finished_at) == (
        watch.DONE,
        "t-0-c",
        True,
        "2026-01-01T00:00:09Z",
    )
    assert seen.nodes == ("n0", "n1")


@pytest.mark.parametrize(
    "args, words",
    [
        (["--nccl-nodes", "3"], "--nccl-nodes without --nccl"),
        (["--keep"], "--keep without --nccl"),
        (["--nccl", "--nccl-timeout", "soon"], "'soon' is not a duration"),
        (["--nccl", "--nccl-log", "LOG", "--accelerator", "g4"], "one or the other"),
    ],
)
def test_flags_that_make_no_sense_exit_2(args, words, tmp_path, monkeypatch):
    monkeypatch.setenv("GCS_BUCKET", "test-bucket")
    monkeypatch.setenv("KUEUE_NAME", "test-queue")
    log = tmp_path / "rank0.log"
    log.write_text("")
    args = [str(log) if a == "LOG" else a for a in args]
    result = CliRunner().invoke(
        main, ["preflight", "-f", str(ROOT / "values/examples/g4-llama3-70b-finetune.yaml"), *args]
    )
    assert result.exit_code == 2 and words in result.output, result.output


def test_install_refuses_nccl_without_preflight(monkeypatch):
    monkeypatch.setenv("GCS_BUCKET", "test-bucket")
    monkeypatch.setenv("KUEUE_NAME", "test-queue")
    result = CliRunner().invoke(
        main, ["install", "-f", str(ROOT / "values/examples/g4-llama3-70b-finetune.yaml"), "--nccl", "--no-preflight"]
    )
    assert result.exit_code == 2 and "--nccl and --no-preflight exclude each other" in result.output
