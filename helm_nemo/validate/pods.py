"""The pod templates inside a workload object (Pod, Job, JobSet, DaemonSet, ...), and their containers' resources and env."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: importing typing costs every run start-up time
    from typing import Any, Iterator, Mapping

from helm_nemo.validate.quantity import parse_quantity

@dataclass
class PodTemplate:
    """A pod template inside a workload object, with where it sits and how many pods it makes."""

    spec: dict
    meta: dict
    path: tuple  # path of the pod spec inside the object
    meta_path: tuple
    pods: int  # how many pods this template makes (for "multi-node")


def as_int(value: Any, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def pod_templates(doc: Mapping) -> list[PodTemplate]:
    """The pod templates of a workload object, with the number of pods each makes."""
    kind = doc.get("kind")
    spec = doc.get("spec") if isinstance(doc.get("spec"), dict) else {}
    out: list[PodTemplate] = []

    def add(template: Any, where: tuple, pods: int) -> None:
        if isinstance(template, dict) and isinstance(template.get("spec"), dict):
            meta = template.get("metadata") if isinstance(template.get("metadata"), dict) else {}
            out.append(PodTemplate(template["spec"], meta, where + ("spec",), where + ("metadata",), pods))

    def job_pods(job_spec: dict) -> int:
        return max(as_int(job_spec.get("parallelism"), 1), 1)

    if kind == "Pod":
        out.append(PodTemplate(spec, doc.get("metadata") or {}, ("spec",), ("metadata",), 1))
    elif kind in ("Deployment", "StatefulSet", "ReplicaSet", "ReplicationController"):
        add(spec.get("template"), ("spec", "template"), as_int(spec.get("replicas"), 1))
    elif kind == "DaemonSet":
        add(spec.get("template"), ("spec", "template"), 1)
    elif kind == "Job":
        add(spec.get("template"), ("spec", "template"), job_pods(spec))
    elif kind == "CronJob":
        job = ((spec.get("jobTemplate") or {}).get("spec")) or {}
        add(job.get("template"), ("spec", "jobTemplate", "spec", "template"), job_pods(job))
    elif kind == "JobSet":
        for i, rjob in enumerate(spec.get("replicatedJobs") or []):
            if not isinstance(rjob, dict):
                continue
            job = ((rjob.get("template") or {}).get("spec")) or {}
            if isinstance(job, dict):
                add(job.get("template"), ("spec", "replicatedJobs", i, "template", "spec", "template"),
                    job_pods(job) * max(as_int(rjob.get("replicas"), 1), 1))
    elif kind == "PyTorchJob":
        for role, replica in (spec.get("pytorchReplicaSpecs") or {}).items():
            if isinstance(replica, dict):
                add(replica.get("template"), ("spec", "pytorchReplicaSpecs", role, "template"),
                    as_int(replica.get("replicas"), 1))
    elif kind == "LeaderWorkerSet":
        lwt = spec.get("leaderWorkerTemplate") or {}
        groups = as_int(spec.get("replicas"), 1)
        size = as_int(lwt.get("size"), 1)
        if lwt.get("leaderTemplate"):
            add(lwt.get("leaderTemplate"), ("spec", "leaderWorkerTemplate", "leaderTemplate"), groups)
            add(lwt.get("workerTemplate"), ("spec", "leaderWorkerTemplate", "workerTemplate"), groups * max(size - 1, 0))
        else:
            add(lwt.get("workerTemplate"), ("spec", "leaderWorkerTemplate", "workerTemplate"), groups * size)
    return out


def containers(pod: dict) -> Iterator[tuple[tuple, dict, bool]]:
    """(path inside the pod spec, container, is a regular or sidecar container)."""
    for group in ("initContainers", "containers", "ephemeralContainers"):
        for i, container in enumerate(pod.get(group) or []):
            if isinstance(container, dict):
                regular = group == "containers" or (group == "initContainers" and container.get("restartPolicy") == "Always")
                yield (group, i), container, regular


def env_value(container: dict, name: str) -> str | None:
    for entry in container.get("env") or []:
        if isinstance(entry, dict) and entry.get("name") == name and isinstance(entry.get("value"), str):
            return entry["value"]
    return None


def container_resource(container: dict, which: str, name: str) -> Any:
    resources = container.get("resources") if isinstance(container.get("resources"), dict) else {}
    block = resources.get(which) if isinstance(resources.get(which), dict) else {}
    return block.get(name)


def pod_resource(pod: dict, name: str) -> Decimal:
    """Effective per-pod amount of a resource: regular + sidecar containers, or the largest init container."""
    regular, init = Decimal(0), Decimal(0)
    for _, container, is_regular in containers(pod):
        amount = parse_quantity(container_resource(container, "limits", name)) or parse_quantity(
            container_resource(container, "requests", name)) or Decimal(0)
        if is_regular:
            regular += amount
        else:
            init = max(init, amount)
    return max(regular, init)
