"""Named states of a training release, as a cluster holds them (objects shaped as the API server returns them):
the JobSet the a3ultra jobset chart renders, its pods as the JobSet/Job controllers name and label them, the
Kueue Workload, events, and the rank-0 log. Used by tests/test_status.py and bench/run.py."""

from __future__ import annotations

import json
from datetime import datetime, UTC

NS = "ml-team"
T0 = datetime(2026, 11, 25, 10, 0, 0, tzinfo=UTC)


def iso(when: datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def jobset(
    name: str,
    nodes: int,
    *,
    uid: str = "uid-1",
    conditions=(),
    suspend=False,
    ready=None,
    active=None,
    succeeded=0,
    failed=0,
    restarts=0,
    max_restarts=0,
) -> dict:
    labels = {
        "app.kubernetes.io/instance": name,
        "app.kubernetes.io/name": "jobset",
        "kueue.x-k8s.io/queue-name": "a3-ultra",
    }
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name, "namespace": NS, "uid": uid, "labels": labels, "creationTimestamp": iso(T0)},
        "spec": {
            "suspend": suspend,
            "failurePolicy": {"maxRestarts": max_restarts},
            "replicatedJobs": [
                {"name": "workload", "replicas": 1, "template": {"spec": {"parallelism": nodes, "completions": nodes}}}
            ],
        },
        "status": {
            "restarts": restarts,
            "conditions": list(conditions),
            "replicatedJobsStatus": [
                {
                    "name": "workload",
                    "ready": 1 if ready is None else ready,  # JobSet counts its jobs (1 here)
                    "active": 1 if active is None else active,
                    "succeeded": succeeded,
                    "failed": failed,
                    "suspended": 1 if suspend else 0,
                }
            ],
        },
    }


def condition(type_: str, status: str = "True", reason: str = "", message: str = "", at: datetime = T0) -> dict:
    return {"type": type_, "status": status, "reason": reason, "message": message, "lastTransitionTime": iso(at)}


def pod(
    release: str,
    index: int,
    *,
    phase="Running",
    statuses=None,
    conditions=None,
    reason=None,
    message=None,
    node=True,
    created: datetime = T0,
    suffix: str = "abcde",
) -> dict:
    name = f"{release}-workload-0-{index}-{suffix}"
    labels = {
        "app.kubernetes.io/instance": release,
        "app.kubernetes.io/name": "jobset",
        "jobset.sigs.k8s.io/jobset-name": release,
        "jobset.sigs.k8s.io/replicatedjob-name": "workload",
        "jobset.sigs.k8s.io/job-index": "0",
        "batch.kubernetes.io/job-completion-index": str(index),
    }
    running = {
        "name": "workload",
        "ready": True,
        "restartCount": 0,
        "image": "nemo:25.07",
        "state": {"running": {"startedAt": iso(created)}},
    }
    status = {
        "phase": phase,
        "startTime": iso(created),
        "conditions": conditions
        if conditions is not None
        else [condition("PodScheduled", at=created), condition("Ready", at=created)],
        "containerStatuses": statuses if statuses is not None else ([running] if phase == "Running" else []),
    }
    if reason:
        status["reason"] = reason
    if message:
        status["message"] = message
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": NS,
            "labels": labels,
            "creationTimestamp": iso(created),
            "annotations": {
                "kubectl.kubernetes.io/default-container": "workload",
                "batch.kubernetes.io/job-completion-index": str(index),
            },
        },
        "spec": {
            "nodeName": f"node-{index}" if node else None,
            "containers": [{"name": "workload", "image": "nemo:25.07"}, {"name": "gib-sidecar", "image": "gib"}],
        },
        "status": status,
    }


def terminated(reason: str, code: int, at: datetime, restarts: int = 0, state: str = "terminated") -> dict:
    term = {"exitCode": code, "reason": reason, "startedAt": iso(T0), "finishedAt": iso(at)}
    out = {"name": "workload", "ready": False, "restartCount": restarts, "image": "nemo:25.07"}
    if state == "terminated":
        out["state"] = {"terminated": term}
    else:
        out["state"] = {
            "waiting": {"reason": "CrashLoopBackOff", "message": "back-off 5m0s restarting failed container=workload"}
        }
        out["lastState"] = {"terminated": term}
    return out


def workload(owner: dict, conditions, admitted_by: str | None = None) -> dict:
    meta = owner["metadata"]
    out = {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "Workload",
        "metadata": {
            "name": f"jobset-{meta['name']}-3f2a1",
            "namespace": NS,
            "labels": {"kueue.x-k8s.io/job-uid": meta["uid"]},
            "ownerReferences": [
                {
                    "apiVersion": "jobset.x-k8s.io/v1alpha2",
                    "kind": "JobSet",
                    "name": meta["name"],
                    "uid": meta["uid"],
                    "controller": True,
                }
            ],
        },
        "spec": {"queueName": "a3-ultra", "podSets": [{"name": "workload", "count": 54}]},
        "status": {"conditions": list(conditions)},
    }
    if admitted_by:
        out["status"]["admission"] = {"clusterQueue": admitted_by, "podSetAssignments": []}
    return out


def event(
    obj_kind: str, obj_name: str, reason: str, message: str, at: datetime, count: int = 1, name: str = ""
) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": name or f"{obj_name}.{abs(hash((reason, message))) % 10**8:x}", "namespace": NS},
        "involvedObject": {"kind": obj_kind, "name": obj_name, "namespace": NS},
        "reason": reason,
        "message": message,
        "type": "Warning",
        "count": count,
        "firstTimestamp": iso(at),
        "lastTimestamp": iso(at),
        "source": {"component": "default-scheduler"},
    }


# ---- logs of the three formats a running job prints (times per step: deterministic, not constant)


def step_seconds(step: int) -> float:
    return round(4.0 + 0.1 * ((step * 7) % 5) + (20.0 if step < 2 else 0.0), 3)


def nemo2_log(steps: int, max_steps: int, gbs: int = 2048) -> str:
    lines = [
        "Launching Torch distributed on the node rank 0 out of 54 nodes",
        "[NeMo I 2026-11-25 10:00:00 nemo_logging:393] Experiments will be logged at /job-logs/exp",
    ]
    for step in range(steps):
        lines.append(
            f"[default0]:Training epoch 0, iteration {step}/{max_steps - 1} | lr: 1e-05 | global_batch_size: "
            f"{gbs} | global_step: {step} | reduced_train_loss: 2.5 | train_step_timing in s: "
            f"{step_seconds(step)} | consumed_samples: {(step + 1) * gbs}"
        )
        if step % 10 == 9:
            lines.append(f"[default0]:[NeMo I 2026-11-25 10:00:00 utils:1] Checkpoint saved at step {step}")
    return "\n".join(lines) + "\n"


def nemo1_log(steps: int, max_steps: int) -> str:
    """NeMo 1 (NeMo-Launcher): the progress bar rewritten with carriage returns, as seed 004 shows it."""
    parts = []
    elapsed = 0.0
    for step in range(steps):
        elapsed += step_seconds(step)
        n = step + 1
        minutes, seconds = divmod(int(elapsed), 60)
        parts.append(
            f"Epoch 0: :   {int(100 * n / max_steps)}%|          | {n}/{max_steps} [{minutes:02d}:{seconds:02d}<"
            f"317:00:58, v_num=, reduced_train_loss=2.600, global_step={float(step):.3g}, "
            f"consumed_samples=1.28e+6, train_step_timing in s={step_seconds(step):.3f}, val_loss=2.800]"
        )
    return "Initializing distributed: GLOBAL_RANK: 0, MEMBER: 1/432\n" + "\r".join(parts)


def dllogger_log(steps: int) -> str:
    lines = [
        'DLLL {"timestamp": "1764064800.0", "type": "LOG", "step": "PARAMETER", "data": {"cfg/global_batch_size": 2048}}'
    ]
    for step in range(steps):
        lines.append(
            "DLLL "
            + json.dumps(
                {
                    "timestamp": "1764064800.0",
                    "type": "LOG",
                    "step": step,
                    "data": {"reduced_train_loss": 2.5, "train_step_timing in s": step_seconds(step)},
                }
            )
        )
    return "\n".join(lines) + "\n"
