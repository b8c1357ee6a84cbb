"""The pod templates inside a workload object (Pod, Job, JobSet, DaemonSet, ...), and their containers' resources and env."""

from __future__ import annotations

from collections import namedtuple
from decimal import Decimal

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: importing typing costs every run start-up time
    from typing import Any
    from collections.abc import Iterator, Mapping

from helm_nemo.validate.documents import items_of, mapping
from helm_nemo.validate.quantity import parse_quantity


class PodTemplate(namedtuple("PodTemplate", "spec meta path meta_path pods")):
    """A pod template inside a workload object: its `spec` and `meta`data, where they sit in the object
    (`path`, `meta_path`) and how many pods it makes (`pods`, for "multi-node"). `meta` is {} when the
    template has no metadata and None when its metadata is of the wrong type (unreadable: the schema check
    reports it, and checks that read annotations say nothing)."""

    __slots__ = ()


def _meta(metadata: Any) -> dict[str, Any] | None:
    if metadata is None:
        return {}
    return metadata if isinstance(metadata, dict) else None


def as_int(value: Any, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def pod_templates(doc: Mapping[str, Any]) -> list[PodTemplate]:
    """The pod templates of a workload object, with the number of pods each makes. A part of the wrong type
    on the way (`spec: []`, `template: "x"`) makes no template: the schema check reports it."""
    kind = doc.get("kind")
    spec = mapping(doc.get("spec"))
    out: list[PodTemplate] = []

    def add(template: Any, where: tuple[Any, ...], pods: int) -> None:
        if isinstance(template, dict) and isinstance(template.get("spec"), dict):
            out.append(
                PodTemplate(
                    template["spec"], _meta(template.get("metadata")), where + ("spec",), where + ("metadata",), pods
                )
            )

    def job_pods(job_spec: dict[str, Any]) -> int:
        return max(as_int(job_spec.get("parallelism"), 1), 1)

    if kind == "Pod":
        add(doc, (), 1)
    elif kind in ("Deployment", "StatefulSet", "ReplicaSet", "ReplicationController"):
        add(spec.get("template"), ("spec", "template"), as_int(spec.get("replicas"), 1))
    elif kind == "DaemonSet":
        add(spec.get("template"), ("spec", "template"), 1)
    elif kind == "Job":
        add(spec.get("template"), ("spec", "template"), job_pods(spec))
    elif kind == "CronJob":
        job = mapping(mapping(spec.get("jobTemplate")).get("spec"))
        add(job.get("template"), ("spec", "jobTemplate", "spec", "template"), job_pods(job))
    elif kind == "JobSet":
        for i, rjob in enumerate(items_of(spec.get("replicatedJobs"))):
            if not isinstance(rjob, dict):
                continue
            job = mapping(mapping(rjob.get("template")).get("spec"))
            add(
                job.get("template"),
                ("spec", "replicatedJobs", i, "template", "spec", "template"),
                job_pods(job) * max(as_int(rjob.get("replicas"), 1), 1),
            )
    elif kind == "PyTorchJob":
        for role, replica in mapping(spec.get("pytorchReplicaSpecs")).items():
            if isinstance(replica, dict):
                add(
                    replica.get("template"),
                    ("spec", "pytorchReplicaSpecs", role, "template"),
                    as_int(replica.get("replicas"), 1),
                )
    elif kind == "LeaderWorkerSet":
        lwt = mapping(spec.get("leaderWorkerTemplate"))
        groups = as_int(spec.get("replicas"), 1)
        size = as_int(lwt.get("size"), 1)
        if lwt.get("leaderTemplate"):
            add(lwt.get("leaderTemplate"), ("spec", "leaderWorkerTemplate", "leaderTemplate"), groups)
            add(
                lwt.get("workerTemplate"), ("spec", "leaderWorkerTemplate", "workerTemplate"), groups * max(size - 1, 0)
            )
        else:
            add(lwt.get("workerTemplate"), ("spec", "leaderWorkerTemplate", "workerTemplate"), groups * size)
    return out


CONTAINER_GROUPS = ("initContainers", "containers", "ephemeralContainers")


def containers(pod: dict[str, Any]) -> Iterator[tuple[tuple[Any, ...], dict[str, Any], bool]]:
    """(path inside the pod spec, container, is a regular or sidecar container); a group or a container of
    the wrong type is skipped (see containers_readable)."""
    for group in CONTAINER_GROUPS:
        for i, container in enumerate(items_of(pod.get(group))):
            if isinstance(container, dict):
                regular = group == "containers" or (
                    group == "initContainers" and container.get("restartPolicy") == "Always"
                )
                yield (group, i), container, regular


def containers_readable(pod: dict[str, Any]) -> bool:
    """`containers` a list, the other groups lists or absent, every item a mapping: a sum over the containers
    means something (else the schema check reports what is missing or of the wrong type)."""
    groups = [pod.get(group) for group in CONTAINER_GROUPS if group == "containers" or pod.get(group) is not None]
    return all(isinstance(g, list) and all(isinstance(c, dict) for c in g) for g in groups)


def env_value(container: dict[str, Any], name: str) -> str | None:
    for entry in items_of(container.get("env")):
        if isinstance(entry, dict) and entry.get("name") == name and isinstance(entry.get("value"), str):
            return str(entry["value"])
    return None


def container_resource(container: dict[str, Any], which: str, name: str) -> Any:
    return mapping(mapping(container.get("resources")).get(which)).get(name)


def resource_amount(container: dict[str, Any], which: str, name: str) -> Decimal | None:
    """The container's `resources.<which>.<name>` as a number (0 when absent), or None when it cannot be
    read: `resources` or the block is not a mapping, or the amount is not a quantity (the schema or the
    quantity check reports it; a check summing amounts skips what it cannot read)."""
    resources = container.get("resources")
    block = resources.get(which) if isinstance(resources, dict) else resources
    if block is None:
        return Decimal(0)
    if not isinstance(block, dict):
        return None
    value = block.get(name)
    return Decimal(0) if value is None else parse_quantity(value)


def pod_resource(pod: dict[str, Any], name: str) -> Decimal | None:
    """Effective per-pod amount of a resource: regular + sidecar containers, or the largest init container;
    None when a container, its resources or the amount cannot be read."""
    if not containers_readable(pod):
        return None
    regular, init = Decimal(0), Decimal(0)
    for _, container, is_regular in containers(pod):
        limit, request = resource_amount(container, "limits", name), resource_amount(container, "requests", name)
        if limit is None or request is None:
            return None
        amount = limit or request
        if is_regular:
            regular += amount
        else:
            init = max(init, amount)
    return max(regular, init)
