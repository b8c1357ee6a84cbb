"""A loopback Kubernetes API emulator, enough for the real `helm install/upgrade/uninstall` (3.17 and 4.1).

Test support only, standard library only. One in-memory API server on 127.0.0.1 (a free port), plain
HTTP with a bearer token:

- discovery: /version, /api, /apis, /api/v1, /apis/G/V (legacy, non-aggregated answers), and an empty
  /openapi/v2 document (protobuf: zero bytes is a valid empty Document, so helm's client-side
  validation finds no schema and skips every kind);
- CRUD of namespaced and cluster-scoped objects: GET, list (labelSelector, fieldSelector `=`, `==`, `!=`
  on any field path, e.g. metadata.name, spec.nodeName, status.phase), POST, PUT, PATCH (merge patch;
  strategic merge patch approximated: maps merge, lists of named items merge by their key,
  `$patch`/`$setElementOrder`/`$retainKeys` directives are honoured or dropped; server-side apply = the
  applied object replaces the old one but keeps uid, creationTimestamp and status), DELETE (with
  owner-reference garbage collection), `dryRun=All`; a JSON answer over 128 KiB is gzipped (level 1)
  for a client that sends `Accept-Encoding: gzip`, as the API server does;
- watch (`?watch=true`), with `resourceVersion` replay and `sendInitialEvents` + the initial-events-end
  bookmark, held open until `timeoutSeconds` or the server stops;
- helm's release record: the typed client POSTs/PUTs Secrets (and ConfigMaps, HELM_DRIVER=configmap)
  as `application/vnd.kubernetes.protobuf` (magic `k8s\\0` + runtime.Unknown whose `raw` is the
  object); decoded here with a small wire-format reader and stored as a normal JSON Secret;
- a tiny "controller": objects get a ready `status` on every write (Deployment, ReplicaSet, DaemonSet,
  StatefulSet, Job, JobSet, PersistentVolume(Claim), Service clusterIP), and a Deployment gets an owned,
  ready ReplicaSet, so `--wait` / `--atomic` succeed on both helms. `ready=False` turns that off.
- a Job controller on demand: `hold_jobs(selector)` keeps the Jobs it matches running (spec.selector and
  pod-template labels defaulted, one pod per index, status active/ready/startTime, as the real controller
  writes them); `finish_index(namespace, job, index, succeeded)` ends the current pod of an index and updates
  the Job's status as kube-controller-manager does (succeeded/failed counts, completedIndexes/failedIndexes,
  backoffLimitPerIndex / backoffLimit, a replacement pod for a retried index, SuccessCriteriaMet + Complete or
  FailureTarget + Failed); `set_pod_status(namespace, pod, status)` writes a pod's status as the scheduler or
  the kubelet would (not scheduled, an image that cannot be pulled); `before_serve` callbacks run before each
  request is served (a test's script of what happens between two reads of a client that polls).
- update admission of Jobs and JobSets as the real server and the JobSet webhook answer (immutable pod
  templates, replicated jobs, selectors …: 422 Invalid, `field is immutable`; see update_refusal);
  `admission=False` turns it off.

Tests read the store with `emulator.objects(kind, namespace)` / `emulator.get(kind, name, namespace)`
and the traffic with `emulator.requests` (method, path, query, content type) or `emulator.calls()`.

Fault injection: `fault = emulator.fail_next(method="POST", kind="DaemonSet", status=500,
message="etcdserver: request timed out", times=1)` answers the next matching request(s) of a resource
(method, kind, name, namespace, and an optional `when(request)` predicate) with a Kubernetes `Status`
(status Failure, the code, reason InternalError / ServiceUnavailable / … from the code, the message)
instead of serving it; the store is not touched. `fault.fired` lists the requests it answered,
`emulator.faults` every fault armed. No `Retry-After` header is sent, so client-go does not retry.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
import socket
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime, UTC
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from collections.abc import Iterator
from urllib.parse import parse_qs, urlsplit

VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
PROTOBUF = "application/vnd.kubernetes.protobuf"
GZIP_THRESHOLD = 128 * 1024  # JSON answers over this are gzipped for a client that accepts it (the API server's)
OPENAPI_V2_PB = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"


@dataclass(frozen=True)
class Resource:
    group: str  # "" = core
    version: str
    kind: str
    plural: str
    namespaced: bool

    @property
    def group_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


def _r(gv: str, kind: str, plural: str, namespaced: bool = True) -> Resource:
    group, _, version = gv.rpartition("/")
    return Resource(group, version, kind, plural, namespaced)


DEFAULT_RESOURCES = [
    _r("v1", "ConfigMap", "configmaps"),
    _r("v1", "Secret", "secrets"),
    _r("v1", "Service", "services"),
    _r("v1", "ServiceAccount", "serviceaccounts"),
    _r("v1", "PersistentVolumeClaim", "persistentvolumeclaims"),
    _r("v1", "Pod", "pods"),
    _r("v1", "PersistentVolume", "persistentvolumes", namespaced=False),
    _r("v1", "Namespace", "namespaces", namespaced=False),
    _r("apps/v1", "Deployment", "deployments"),
    _r("apps/v1", "DaemonSet", "daemonsets"),
    _r("apps/v1", "ReplicaSet", "replicasets"),
    _r("apps/v1", "StatefulSet", "statefulsets"),
    _r("batch/v1", "Job", "jobs"),
    _r("rbac.authorization.k8s.io/v1", "Role", "roles"),
    _r("rbac.authorization.k8s.io/v1", "RoleBinding", "rolebindings"),
    _r("rbac.authorization.k8s.io/v1", "ClusterRole", "clusterroles", namespaced=False),
    _r("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "clusterrolebindings", namespaced=False),
    _r("jobset.x-k8s.io/v1alpha2", "JobSet", "jobsets"),
    _r("resource.nvidia.com/v1beta1", "ComputeDomain", "computedomains"),
    _r("storage.k8s.io/v1", "StorageClass", "storageclasses", namespaced=False),
    # What preflight reads (a cluster's nodes, add-ons and their CRDs); tests drop some to make a
    # cluster without them (KubeEmulator(resources=without(...))).
    _r("v1", "Node", "nodes", namespaced=False),
    _r("v1", "Event", "events"),
    _r("kueue.x-k8s.io/v1beta1", "Workload", "workloads"),
    _r("scheduling.k8s.io/v1", "PriorityClass", "priorityclasses", namespaced=False),
    _r("storage.k8s.io/v1", "CSIDriver", "csidrivers", namespaced=False),
    _r("apiextensions.k8s.io/v1", "CustomResourceDefinition", "customresourcedefinitions", namespaced=False),
    _r("kueue.x-k8s.io/v1beta1", "LocalQueue", "localqueues"),
    _r("kueue.x-k8s.io/v1beta1", "ClusterQueue", "clusterqueues", namespaced=False),
    _r("kueue.x-k8s.io/v1beta1", "ResourceFlavor", "resourceflavors", namespaced=False),
    _r("kueue.x-k8s.io/v1alpha1", "Topology", "topologies", namespaced=False),
    _r("networking.gke.io/v1", "Network", "networks", namespaced=False),
    _r("networking.gke.io/v1", "GKENetworkParamSet", "gkenetworkparamsets", namespaced=False),
    _r("resource.k8s.io/v1", "DeviceClass", "deviceclasses", namespaced=False),
    _r("resource.k8s.io/v1", "ResourceClaimTemplate", "resourceclaimtemplates"),
    _r("kubeflow.org/v1", "PyTorchJob", "pytorchjobs"),
]

# Groups the API server itself serves (not CRDs): their list items come without apiVersion/kind.
BUILTIN_GROUPS = {
    "",
    "apps",
    "batch",
    "rbac.authorization.k8s.io",
    "storage.k8s.io",
    "scheduling.k8s.io",
    "apiextensions.k8s.io",
    "resource.k8s.io",
    "authorization.k8s.io",
    "networking.k8s.io",
    "policy",
}

# Virtual resources: POST-only, answered, never stored (authorization.k8s.io).
SSAR_PATH = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"


def without(*kinds_or_groups: str, resources: list[Resource] | None = None) -> list[Resource]:
    """The default resources minus some kinds or whole groups (`"JobSet"`, `"kueue.x-k8s.io"`): a cluster
    where that API is not served (its CRD not installed)."""
    return [
        r for r in (resources or DEFAULT_RESOURCES) if r.kind not in kinds_or_groups and r.group not in kinds_or_groups
    ]


class ApiError(Exception):
    def __init__(self, code: int, reason: str, message: str, details: dict | None = None):
        super().__init__(message)
        self.code, self.reason, self.message, self.details = code, reason, message, details or {}

    def status(self) -> dict:
        return {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "details": self.details,
            "code": self.code,
        }


# --------------------------------------------------------------------------------------------------
# Protobuf: just enough of the wire format for runtime.Unknown{v1.Secret | v1.ConfigMap}.


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(buf):
            raise ValueError("truncated varint")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def pb_fields(buf: bytes) -> Iterator[tuple[int, int, Any]]:
    """(field number, wire type, value): varints as int, length-delimited as bytes; fixed ones skipped."""
    pos = 0
    while pos < len(buf):
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(buf, pos)
        elif wire == 2:
            length, pos = _varint(buf, pos)
            value = buf[pos : pos + length]
            if len(value) != length:
                raise ValueError("truncated field")
            pos += length
        elif wire == 1:
            value, pos = buf[pos : pos + 8], pos + 8
        elif wire == 5:
            value, pos = buf[pos : pos + 4], pos + 4
        else:
            raise ValueError(f"unsupported wire type {wire}")
        yield number, wire, value


def _pb_map_entry(buf: bytes) -> tuple[str, bytes]:
    key, value = "", b""
    for number, _, raw in pb_fields(buf):
        if number == 1:
            key = raw.decode()
        elif number == 2:
            value = raw
    return key, value


def _pb_object_meta(buf: bytes) -> dict:
    meta: dict[str, Any] = {}
    names = {1: "name", 2: "generateName", 3: "namespace", 5: "uid", 6: "resourceVersion"}
    for number, _, raw in pb_fields(buf):
        if number in names:
            if raw:
                meta[names[number]] = raw.decode()
        elif number == 7:
            meta["generation"] = raw
        elif number in (11, 12):
            key, value = _pb_map_entry(raw)
            meta.setdefault("labels" if number == 11 else "annotations", {})[key] = value.decode()
        elif number == 14:
            meta.setdefault("finalizers", []).append(raw.decode())
    return meta


def decode_protobuf(body: bytes) -> dict:
    """A v1.Secret or v1.ConfigMap sent as `k8s\\0` + runtime.Unknown, as its JSON form."""
    import base64

    if not body.startswith(b"k8s\x00"):
        raise ValueError("no k8s protobuf magic")
    api_version = kind = ""
    raw = b""
    for number, _, value in pb_fields(body[4:]):
        if number == 1:  # TypeMeta
            for n, _, v in pb_fields(value):
                if n == 1:
                    api_version = v.decode()
                elif n == 2:
                    kind = v.decode()
        elif number == 2:
            raw = value
    obj: dict[str, Any] = {"apiVersion": api_version, "kind": kind, "metadata": {}}
    for number, _, value in pb_fields(raw):
        if number == 1:
            obj["metadata"] = _pb_object_meta(value)
        elif kind == "Secret":
            if number in (2, 4):  # data (bytes), stringData
                k, v = _pb_map_entry(value)
                if number == 2:
                    obj.setdefault("data", {})[k] = base64.b64encode(v).decode()
                else:
                    obj.setdefault("stringData", {})[k] = v.decode()
            elif number == 3:
                obj["type"] = value.decode()
            elif number == 5:
                obj["immutable"] = bool(value)
        elif kind == "ConfigMap":
            if number in (2, 3):  # data, binaryData
                k, v = _pb_map_entry(value)
                if number == 2:
                    obj.setdefault("data", {})[k] = v.decode()
                else:
                    obj.setdefault("binaryData", {})[k] = base64.b64encode(v).decode()
            elif number == 4:
                obj["immutable"] = bool(value)
        else:
            raise ValueError(f"protobuf body of kind {kind!r} is not supported by the emulator")
    return obj


# --------------------------------------------------------------------------------------------------
# Patches


def apply_configuration(live: dict, last_applied: dict, applied: dict) -> dict:
    """Server-side apply by one manager: `live` with the fields of `applied` set (maps merged, lists replaced)
    and the fields `last_applied` had but `applied` has not removed; other fields are left as they are."""

    def prune(target: Any, before: Any, now: Any) -> None:
        if not isinstance(target, dict) or not isinstance(before, dict):
            return
        for key, value in before.items():
            if not isinstance(now, dict) or key not in now:
                target.pop(key, None)
            else:
                prune(target.get(key), value, now[key])

    def put(target: dict, values: dict) -> None:
        for key, value in values.items():
            if isinstance(value, dict) and isinstance(target.get(key), dict):
                put(target[key], value)
            else:
                target[key] = copy.deepcopy(value)

    out = copy.deepcopy(live)
    prune(out, last_applied, applied)
    put(out, applied)
    return out


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


MERGE_KEYS = ("name", "mountPath", "containerPort", "port", "devicePath", "type", "ip", "topologyKey")


def _merge_key(items: list) -> str | None:
    if not items or not all(isinstance(i, dict) for i in items):
        return None
    for key in MERGE_KEYS:
        if all(key in i for i in items):
            return key
    return None


def strategic_merge_patch(target: Any, patch: Any) -> Any:
    """An approximation of Kubernetes' strategic merge patch without the Go struct tags: maps merge,
    lists of maps sharing a known merge key (name, mountPath, containerPort, …) merge item by item,
    other lists are replaced; `$patch: delete|replace`, `$setElementOrder/…`,
    `$deleteFromPrimitiveList/…` are honoured and `$retainKeys` is dropped."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if patch.get("$patch") == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    out = dict(target) if isinstance(target, dict) else {}
    orders = {}
    for key, value in patch.items():
        if key.startswith("$setElementOrder/"):
            orders[key.split("/", 1)[1]] = value
        elif key.startswith("$deleteFromPrimitiveList/"):
            name = key.split("/", 1)[1]
            out[name] = [v for v in out.get(name) or [] if v not in value]
        elif key.startswith("$"):
            continue
        elif value is None:
            out.pop(key, None)
        elif isinstance(value, list):
            out[key] = _smp_list(out.get(key), value)
        else:
            out[key] = strategic_merge_patch(out.get(key), value)
    for name, order in orders.items():
        key = _merge_key(order) if order and isinstance(order[0], dict) else None
        current = out.get(name) or []
        if key:
            by_key = {item.get(key): item for item in current if isinstance(item, dict)}
            ordered = [by_key.pop(o[key]) for o in order if o.get(key) in by_key]
            out[name] = ordered + list(by_key.values())
        elif order and not isinstance(order[0], dict):
            out[name] = [v for v in order if v in current] + [v for v in current if v not in order]
    return out


def _plain(patch: list) -> list:
    """A patch list as a value: without `$patch` items and directive keys."""
    return [
        {k: copy.deepcopy(v) for k, v in i.items() if not k.startswith("$")} if isinstance(i, dict) else i
        for i in patch
        if not (isinstance(i, dict) and "$patch" in i)
    ]


def _smp_list(target: Any, patch: list) -> list:
    if (
        not isinstance(target, list)
        or not patch
        or any(isinstance(i, dict) and i.get("$patch") == "replace" for i in patch)
    ):
        return _plain(patch)
    key = _merge_key(patch)
    if not key or not all(isinstance(i, dict) and key in i for i in target):
        return _plain(patch)
    out = [copy.deepcopy(i) for i in target]
    for item in patch:
        index = next((n for n, cur in enumerate(out) if cur.get(key) == item[key]), None)
        if item.get("$patch") == "delete":
            if index is not None:
                out.pop(index)
        elif index is None:
            out.append({k: v for k, v in item.items() if not k.startswith("$")})
        else:
            out[index] = strategic_merge_patch(out[index], item)
    return out


# --------------------------------------------------------------------------------------------------
# Selectors


def _split_selector(text: str) -> list[str]:
    parts, depth, current = [], 0, ""
    for char in text:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "," and depth == 0:
            parts.append(current.strip())
            current = ""
        else:
            current += char
    if current.strip():
        parts.append(current.strip())
    return parts


def label_selector_matches(selector: str, labels: dict[str, str]) -> bool:
    for req in _split_selector(selector or ""):
        for op in (" notin ", " in "):
            if op in req:
                key, _, values = req.partition(op)
                allowed = {v.strip() for v in values.strip().strip("()").split(",")}
                has = labels.get(key.strip()) in allowed
                if has != (op == " in "):
                    return False
                break
        else:
            if "!=" in req:
                key, _, value = req.partition("!=")
                if labels.get(key.strip()) == value.strip():
                    return False
            elif "=" in req:
                key, _, value = req.replace("==", "=").partition("=")
                if labels.get(key.strip()) != value.strip():
                    return False
            elif req.startswith("!"):
                if req[1:].strip() in labels:
                    return False
            elif req not in labels:
                return False
    return True


def field_selector_matches(selector: str, obj: dict) -> bool:
    meta = obj.get("metadata") or {}
    for req in _split_selector(selector or ""):
        negate = "!=" in req
        key, _, value = req.replace("!=", "=").replace("==", "=").partition("=")
        path = key.strip().split(".")
        node: Any = {"metadata": meta, **obj}
        for part in path:
            node = node.get(part) if isinstance(node, dict) else None
        if (str(node if node is not None else "") == value.strip()) == negate:
            return False
    return True


# --------------------------------------------------------------------------------------------------
# API-server defaulting: helm 3's readiness checks dereference these pointers.

DEFAULTS = {
    "Deployment": {
        "spec": {
            "replicas": 1,
            "revisionHistoryLimit": 10,
            "progressDeadlineSeconds": 600,
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}},
        }
    },
    "DaemonSet": {
        "spec": {
            "revisionHistoryLimit": 10,
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}},
        }
    },
    "StatefulSet": {
        "spec": {
            "replicas": 1,
            "podManagementPolicy": "OrderedReady",
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}},
        }
    },
    "ReplicaSet": {"spec": {"replicas": 1}},
    "Job": {"spec": {"completions": 1, "parallelism": 1, "backoffLimit": 6}},
    "Service": {"spec": {"type": "ClusterIP", "sessionAffinity": "None"}},
}


def with_defaults(defaults: Any, obj: Any) -> Any:
    """The object, with every default it lacks (maps merge; set values win)."""
    if isinstance(defaults, dict) and isinstance(obj, dict):
        out = dict(obj)
        for key, value in defaults.items():
            out[key] = with_defaults(value, obj[key]) if key in obj else copy.deepcopy(value)
        return out
    return obj


# --------------------------------------------------------------------------------------------------
# The "controller": what a cluster would report once the object is up.


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _indexes(text: str | None) -> set[int]:
    out: set[int] = set()
    for part in (text or "").split(","):
        if part:
            low, _, high = part.partition("-")
            out.update(range(int(low), int(high or low) + 1))
    return out


def _ranges(indexes: set[int]) -> str:
    """{0, 1, 2, 5} -> "0-2,5": how the Job controller writes completedIndexes / failedIndexes."""
    parts, ordered = [], sorted(indexes)
    start = prev = None
    for n in ordered + [None]:
        if start is not None and (n is None or n != prev + 1):
            parts.append(f"{start}-{prev}" if prev != start else str(start))
            start = None
        if n is not None and start is None:
            start = n
        prev = n
    return ",".join(parts)


def _condition(kind: str, reason: str, message: str) -> dict:
    return {
        "type": kind,
        "status": "True",
        "reason": reason,
        "message": message,
        "lastProbeTime": _now(),
        "lastTransitionTime": _now(),
    }


def ready_status(obj: dict) -> dict | None:
    kind, spec = obj.get("kind"), obj.get("spec") or {}
    generation = (obj.get("metadata") or {}).get("generation", 1)
    replicas = spec.get("replicas", 1)
    if kind == "Deployment":
        return {
            "observedGeneration": generation,
            "replicas": replicas,
            "updatedReplicas": replicas,
            "readyReplicas": replicas,
            "availableReplicas": replicas,
            "conditions": [
                {
                    "type": "Available",
                    "status": "True",
                    "reason": "MinimumReplicasAvailable",
                    "lastUpdateTime": _now(),
                    "lastTransitionTime": _now(),
                },
                {
                    "type": "Progressing",
                    "status": "True",
                    "reason": "NewReplicaSetAvailable",
                    "lastUpdateTime": _now(),
                    "lastTransitionTime": _now(),
                },
            ],
        }
    if kind in ("ReplicaSet", "StatefulSet"):
        status = {
            "observedGeneration": generation,
            "replicas": replicas,
            "readyReplicas": replicas,
            "availableReplicas": replicas,
            "fullyLabeledReplicas": replicas,
        }
        if kind == "StatefulSet":
            status.update(currentReplicas=replicas, updatedReplicas=replicas)
        return status
    if kind == "DaemonSet":
        return {
            "observedGeneration": generation,
            "desiredNumberScheduled": 1,
            "currentNumberScheduled": 1,
            "updatedNumberScheduled": 1,
            "numberReady": 1,
            "numberAvailable": 1,
            "numberMisscheduled": 0,
        }
    if kind == "Job" and spec.get("suspend") is True:  # the Job controller starts no pod and sets no startTime
        return {
            "active": 0,
            "conditions": [
                {
                    "type": "Suspended",
                    "status": "True",
                    "reason": "JobSuspended",
                    "lastProbeTime": _now(),
                    "lastTransitionTime": _now(),
                }
            ],
        }
    if kind == "Job":
        completions = spec.get("completions", 1)
        return {
            "succeeded": completions,
            "active": 0,
            "startTime": _now(),
            "completionTime": _now(),
            "conditions": [
                {"type": "Complete", "status": "True", "lastProbeTime": _now(), "lastTransitionTime": _now()}
            ],
        }
    if kind == "JobSet":
        return {
            "restarts": 0,
            "replicatedJobsStatus": [
                {
                    "name": rj.get("name", ""),
                    "ready": rj.get("replicas", 1),
                    "active": rj.get("replicas", 1),
                    "succeeded": 0,
                    "failed": 0,
                    "suspended": 0,
                }
                for rj in spec.get("replicatedJobs") or []
            ],
        }
    if kind == "PersistentVolumeClaim":
        return {
            "phase": "Bound",
            "accessModes": spec.get("accessModes", []),
            "capacity": (spec.get("resources") or {}).get("requests", {}),
        }
    if kind == "PersistentVolume":
        return {"phase": "Bound" if spec.get("claimRef") else "Available"}
    if kind == "Namespace":
        return {"phase": "Active"}
    return None


# --------------------------------------------------------------------------------------------------
# Update admission of the workloads helm-nemo creates, as the real server answers (written from the Go code,
# independently of helm_nemo/diff/admission.py, which must agree with it):
# - batch/v1 Job: kubernetes pkg/apis/batch/validation/validation.go, ValidateJobSpecUpdate and
#   validatePodTemplateUpdate; pkg/registry/batch/job/strategy.go, validationOptionsForJob (v1.36).
# - JobSet: kubernetes-sigs/jobset pkg/webhooks/jobset_webhook.go, ValidateUpdate, and the CRD's CEL rules
#   (`self == oldSelf`) in api/jobset/v1alpha2/jobset_types.go. The webhook's denial reaches the client as
#   the API server wraps it (apiserver .../webhook/errors/statuserror.go, ToStatusErr): 422 Invalid,
#   `admission webhook "vjobset.kb.io" denied the request: JobSet.jobset.x-k8s.io "NAME" is invalid: …`.

JOB_IMMUTABLE = ("selector", "completionMode", "podFailurePolicy", "backoffLimitPerIndex", "managedBy", "successPolicy")
JOBSET_CEL_IMMUTABLE = ("network", "successPolicy", "failurePolicy", "startupPolicy", "volumeClaimPolicies")
POD_SCHEDULING_DIRECTIVES = (
    ("metadata", "labels"),
    ("metadata", "annotations"),
    ("spec", "nodeSelector"),
    ("spec", "tolerations"),
    ("spec", "schedulingGates"),
)


def _pruned(value):
    """A value as the typed Go struct holds it: nulls and empty maps/lists are the same as absent."""
    if isinstance(value, dict):
        out = {k: _pruned(v) for k, v in value.items()}
        return {k: v for k, v in out.items() if v not in (None, {}, [])}
    if isinstance(value, list):
        return [_pruned(v) for v in value]
    return value


def _immutable(errors: list, field_path: str, new, old) -> None:
    if _pruned(new) != _pruned(old):
        errors.append((field_path, json.dumps(new, sort_keys=True)[:200], "field is immutable"))


def _with_scheduling_from(template: dict, old_template: dict, node_affinity: bool) -> dict:
    """`template` with old's pod labels/annotations/nodeSelector/tolerations/schedulingGates (what may change)."""
    munged = copy.deepcopy(template or {})
    for part, name in POD_SCHEDULING_DIRECTIVES:
        value = ((old_template or {}).get(part) or {}).get(name)
        munged.setdefault(part, {})
        if value is None:
            munged[part].pop(name, None)
        else:
            munged[part][name] = copy.deepcopy(value)
    if node_affinity:
        new_affinity = (munged.get("spec") or {}).get("affinity") or {}
        old_affinity = copy.deepcopy(((old_template or {}).get("spec") or {}).get("affinity") or {})
        if "nodeAffinity" in new_affinity:
            old_affinity["nodeAffinity"] = new_affinity["nodeAffinity"]
        else:
            old_affinity.pop("nodeAffinity", None)
        munged.setdefault("spec", {})["affinity"] = old_affinity
    return munged


def job_update_errors(old: dict, new: dict) -> list:
    spec, old_spec = new.get("spec") or {}, old.get("spec") or {}
    errors: list = []
    indexed = spec.get("completionMode") == "Indexed"
    if not indexed:
        _immutable(errors, "spec.completions", spec.get("completions"), old_spec.get("completions"))
    elif (
        spec.get("completions") != old_spec.get("completions")
        and spec.get("completions") is not None
        and spec.get("completions") != spec.get("parallelism")
    ):
        errors.append(
            (
                "spec.completions",
                json.dumps(spec.get("completions")),
                "can only be modified in tandem with spec.parallelism",
            )
        )
    _immutable(errors, "spec.selector", spec.get("selector"), old_spec.get("selector"))
    never_started = old_spec.get("suspend") is True and not (old.get("status") or {}).get("startTime")
    old_template = old_spec.get("template") or {}
    template = spec.get("template") or {}
    if never_started:
        template = _with_scheduling_from(template, old_template, node_affinity=True)
    _immutable(errors, "spec.template", template, old_template)
    for name in JOB_IMMUTABLE[1:]:
        _immutable(errors, f"spec.{name}", spec.get(name), old_spec.get(name))
    return errors


def jobset_update_errors(old: dict, new: dict) -> list:
    spec, old_spec = new.get("spec") or {}, old.get("spec") or {}
    errors: list = []
    for name in JOBSET_CEL_IMMUTABLE:
        _immutable(errors, f"spec.{name}", spec.get(name), old_spec.get(name))
    replicated = copy.deepcopy(spec.get("replicatedJobs") or [])
    if old_spec.get("suspend") is True or spec.get("suspend") is True:
        old_by_name = {rj.get("name"): rj for rj in old_spec.get("replicatedJobs") or []}
        for rj in replicated:
            if rj.get("name") in old_by_name:
                job_spec = (rj.get("template") or {}).setdefault("spec", {})
                old_job_spec = (old_by_name[rj["name"]].get("template") or {}).get("spec") or {}
                job_spec["template"] = _with_scheduling_from(
                    job_spec.get("template"), old_job_spec.get("template"), node_affinity=False
                )
    _immutable(errors, "spec.replicatedJobs", replicated, old_spec.get("replicatedJobs") or [])
    _immutable(errors, "spec.managedBy", spec.get("managedBy"), old_spec.get("managedBy"))
    return errors


_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
_LABEL_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
# Kinds whose names are DNS-1123 labels (63 characters) rather than subdomains (253): k8s.io/kubernetes
# pkg/apis/core/validation (Service, Namespace) and the JobSet webhook (its names become pod host names).
_LABEL_NAMED = {"Service", "Namespace"}


def metadata_refusal(res: Resource, meta: dict) -> ApiError | None:
    """The 422 the API server answers to a bad metadata.name or label (apimachinery's ValidateObjectMeta,
    ValidateLabels): a name that is not DNS-1123 (a label of 63 for Services and Namespaces, else a subdomain
    of 253), a label key over 63 (after its prefix) or a value over 63 or not alphanumeric at its ends."""
    name = str(meta.get("name") or "")
    errors = []
    if res.kind in _LABEL_NAMED:
        if len(name) > 63 or not _DNS1123_LABEL.fullmatch(name):
            errors.append(
                (
                    "metadata.name",
                    name,
                    "a lowercase RFC 1123 label must consist of lower case "
                    "alphanumeric characters or '-', and must start and end with an alphanumeric character",
                )
            )
    elif len(name) > 253 or not _DNS1123_SUBDOMAIN.fullmatch(name):
        errors.append(
            (
                "metadata.name",
                name,
                "a lowercase RFC 1123 subdomain must consist of lower case "
                "alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character",
            )
        )
    for key, value in (meta.get("labels") or {}).items():
        prefix, _, label = str(key).rpartition("/")
        if len(label) > 63 or not _LABEL_NAME.fullmatch(label) or (prefix and not _DNS1123_SUBDOMAIN.fullmatch(prefix)):
            errors.append(
                (
                    "metadata.labels",
                    key,
                    "name part must be no more than 63 characters"
                    if len(label) > 63
                    else "name part must consist of alphanumeric characters, '-', '_' or '.'",
                )
            )
        if not isinstance(value, str) or len(value) > 63 or not _LABEL_VALUE.fullmatch(value):
            errors.append(
                (
                    "metadata.labels",
                    value,
                    "must be no more than 63 characters"
                    if isinstance(value, str) and len(value) > 63
                    else "a valid label must be an empty string or consist of "
                    "alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character",
                )
            )
    if not errors:
        return None
    causes = [
        {"reason": "FieldValueInvalid", "message": f"Invalid value: {json.dumps(value)}: {detail}", "field": path}
        for path, value, detail in errors
    ]
    group = f".{res.group}" if res.group else ""
    listed = "; ".join(f"{c['field']}: {c['message']}" for c in causes)
    message = f'{res.kind}{group} "{name}" is invalid: ' + (listed if len(causes) == 1 else f"[{listed}]")
    return ApiError(422, "Invalid", message, {"name": name, "group": res.group, "kind": res.kind, "causes": causes})


def update_refusal(res: Resource, name: str, old: dict, new: dict) -> ApiError | None:
    """The 422 the real cluster answers to this update of a Job or JobSet, or None when it takes it."""
    if res.group == "batch" and res.kind == "Job":
        errors, prefix = job_update_errors(old, new), f'Job.batch "{name}" is invalid: '
    elif res.group == "jobset.x-k8s.io" and res.kind == "JobSet":
        errors = jobset_update_errors(old, new)
        prefix = f'admission webhook "vjobset.kb.io" denied the request: JobSet.jobset.x-k8s.io "{name}" is invalid: '
    else:
        return None
    if not errors:
        return None
    causes = [
        {"reason": "FieldValueInvalid", "message": f"Invalid value: {value}: {detail}", "field": path}
        for path, value, detail in errors
    ]
    listed = "; ".join(f"{c['field']}: {c['message']}" for c in causes)
    message = prefix + (listed if len(causes) == 1 else f"[{listed}]")
    return ApiError(422, "Invalid", message, {"name": name, "group": res.group, "kind": res.kind, "causes": causes})


# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    query: dict = field(default_factory=dict, compare=False, hash=False)
    content_type: str = ""
    user: str | None = field(default=None, compare=False, hash=False)  # who authenticated (token or cert CN)


# The reason a real API server gives with each code (k8s.io/apimachinery/pkg/api/errors).
REASONS = {429: "TooManyRequests", 500: "InternalError", 503: "ServiceUnavailable", 504: "Timeout"}


@dataclass
class Fault:
    """An armed server error: which requests it answers, what it answers, and the requests it did."""

    methods: frozenset[str] | None  # None = any method
    kind: str | None  # kind or plural; None = any resource
    name: str | None
    namespace: str | None
    status: int
    reason: str
    message: str
    times: int | None  # None = every matching request
    when: Any = None  # optional predicate(Request) -> bool
    fired: list[Request] = field(default_factory=list)

    @property
    def exhausted(self) -> bool:
        return self.times is not None and len(self.fired) >= self.times

    def matches(self, request: Request, res: Resource, ns: str | None, name: str | None) -> bool:
        return (
            not self.exhausted
            and (self.methods is None or request.method in self.methods)
            and self.kind in (None, res.kind, res.plural)
            and self.name in (None, name)
            and self.namespace in (None, ns)
            and (self.when is None or bool(self.when(request)))
        )

    def error(self) -> ApiError:
        return ApiError(self.status, self.reason, self.message)


@dataclass(frozen=True)
class TLSFiles:
    """PEM files for an HTTPS emulator: its certificate and key, the CA that signed them (what a
    kubeconfig's certificate-authority-data holds), and the CA client certificates must be signed by."""

    cert: str
    key: str
    ca: str
    client_ca: str | None = None


def make_tls(folder: Path, client_names: tuple[str, ...] = ("alice",)) -> tuple[TLSFiles, dict[str, tuple[str, str]]]:
    """A CA, a server certificate for 127.0.0.1 / localhost signed by it, and a client certificate (+ key)
    per name (CN = user name), with the openssl command line. Returns (TLSFiles, {name: (cert, key)})."""
    import subprocess

    folder.mkdir(parents=True, exist_ok=True)

    def openssl(*args: str, stdin: str | None = None) -> None:
        subprocess.run(["openssl", *args], cwd=folder, check=True, capture_output=True, text=True, input=stdin)

    openssl(
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "ca.key",
        "-out",
        "ca.crt",
        "-days",
        "2",
        "-subj",
        "/CN=emulator-ca",
    )
    (folder / "server.ext").write_text(
        "subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes.default\nextendedKeyUsage=serverAuth\n"
    )
    openssl(
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "server.key",
        "-out",
        "server.csr",
        "-subj",
        "/CN=kube-apiserver",
    )
    openssl(
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.crt",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "server.crt",
        "-days",
        "2",
        "-extfile",
        "server.ext",
    )
    (folder / "client.ext").write_text("extendedKeyUsage=clientAuth\n")
    clients = {}
    for name in client_names:
        openssl(
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            f"{name}.key",
            "-out",
            f"{name}.csr",
            "-subj",
            f"/O=system:masters/CN={name}",
        )
        openssl(
            "x509",
            "-req",
            "-in",
            f"{name}.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            f"{name}.crt",
            "-days",
            "2",
            "-extfile",
            "client.ext",
        )
        clients[name] = (str(folder / f"{name}.crt"), str(folder / f"{name}.key"))
    ca = str(folder / "ca.crt")
    return TLSFiles(str(folder / "server.crt"), str(folder / "server.key"), ca, ca), clients


CRI_MAX_LINE = 16 * 1024  # containerd splits longer lines into partial entries


class ContainerLog:
    """A container's log as the kubelet reads it from the runtime's file: entries (time, "P" partial | "F"
    full line, text). tailLines counts entries (a 40 KiB line is three), as the kubelet does; with
    timestamps, only an entry that starts a line (or the first one sent) gets the time prefix."""

    def __init__(self) -> None:
        self.entries: list[tuple[datetime, str, str]] = []
        self.closed = False

    def append(self, text: str, at: datetime, step_s: float) -> None:
        from datetime import timedelta

        pieces = text.split("\n")
        count = len(self.entries)
        for index, piece in enumerate(pieces):
            last = index == len(pieces) - 1
            if last and not piece:
                break
            chunks = [piece[i : i + CRI_MAX_LINE] for i in range(0, len(piece), CRI_MAX_LINE)] or [""]
            for n, chunk in enumerate(chunks):
                tag = "F" if n == len(chunks) - 1 and not last else "P"
                self.entries.append((at + timedelta(seconds=step_s * (len(self.entries) - count)), tag, chunk))

    def render(self, start: int, end: int, stamps: bool, line_start: bool) -> str:
        out = []
        for when, tag, text in self.entries[start:end]:
            if stamps and line_start:
                out.append(when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond:06d}000Z ")
            out.append(text + ("\n" if tag == "F" else ""))
            line_start = tag == "F"
        return "".join(out)

    def render_bytes(self, start: int, stamps: bool, limit: int, batch: int = 1000) -> bytes:
        """The first `limit` bytes of what render(start, end of log) gives, rendering `batch` entries at a time."""
        out, size, line_start = [], 0, True
        while start < len(self.entries) and size < limit:
            end = min(len(self.entries), start + batch)
            piece = self.render(start, end, stamps, line_start).encode()
            out.append(piece)
            size += len(piece)
            line_start, start = self.entries[end - 1][1] == "F", end
        return b"".join(out)[:limit]


@dataclass
class _Event:
    rv: int
    type: str
    resource: Resource
    obj: dict


class KubeEmulator:
    """In-memory Kubernetes API on 127.0.0.1. `with KubeEmulator() as kube:` or start()/stop()."""

    def __init__(
        self,
        resources: list[Resource] | None = None,
        token: str | None = "emulator-token",
        ready: bool = True,
        kube_version: str = "v1.32.0",
        tls: TLSFiles | None = None,
        admission: bool = True,
    ):
        self.resources = list(resources or DEFAULT_RESOURCES)
        self.admission = admission  # refuse updates of Jobs and JobSets as the real server does
        self.token = token
        # HTTPS (a real handshake: server certificate, optional client certificates signed by tls.client_ca);
        # then every request must authenticate, with the token or a client certificate (user = its CN).
        self.tls = tls
        # SelfSubjectAccessReview: (verb, group, resource, namespace) patterns ("*" matches all) denied to
        # everyone; anything else is allowed. `deny("create", "", "secrets")` makes helm's release record
        # impossible to write, as a namespace-scoped RoleBinding without secrets would.
        self.denied: list[tuple[str, str, str, str]] = []
        self.reviews: list[dict] = []  # the SelfSubjectAccessReviews asked, in order
        self.logs: dict[tuple[str, str], str] = {}  # (namespace, pod) -> its log text (pods/NAME/log), simple form
        # (namespace, pod, container, previous) -> the container's log as the kubelet keeps it (ContainerLog):
        # write_log() appends, pods/NAME/log serves it with tailLines, limitBytes, timestamps, previous, follow.
        self.container_logs: dict[tuple[str, str, str, bool], ContainerLog] = {}
        self.ready = ready
        self.kube_version = kube_version
        self.requests: list[Request] = []
        self.gzipped = 0  # answers sent gzip-compressed (Accept-Encoding: gzip, over GZIP_THRESHOLD)
        self.faults: list[Fault] = []
        self._store: dict[Resource, dict[tuple[str, str], dict]] = {r: {} for r in self.resources}
        self._applied: dict[tuple, dict] = {}  # (resource, namespace, name) -> the last server-side applied config
        self._events: list[_Event] = []
        self._rv = 1
        self._cond = threading.Condition()
        self._stopping = threading.Event()
        self._sockets: set[socket.socket] = set()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.held_jobs: list[str] = []  # label selectors of the Jobs the emulated Job controller keeps running
        self.before_serve: list = []  # callables(Request), run before each request is served (outside the lock)

    # ---- lifecycle
    @property
    def url(self) -> str:
        assert self._server, "not started"
        host, port = self._server.server_address[:2]
        return f"{'https' if self.tls else 'http'}://{host}:{port}"

    def start(self) -> KubeEmulator:
        emulator = self

        class Handler(_Handler):
            kube = emulator

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        if self.tls:
            import ssl

            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(self.tls.cert, self.tls.key)
            if self.tls.client_ca:
                context.load_verify_locations(self.tls.client_ca)
                context.verify_mode = ssl.CERT_OPTIONAL
            # The handshake runs in the request's thread (do_handshake_on_connect=False): a client that
            # never completes it cannot block the accept loop.
            self._server.socket = context.wrap_socket(
                self._server.socket, server_side=True, do_handshake_on_connect=False
            )
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, name="kube-emulator", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if not self._server:
            return
        self._stopping.set()
        with self._cond:
            self._cond.notify_all()
        self._server.shutdown()
        for sock in list(self._sockets):  # idle keep-alive connections and open watches
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._server.server_close()
        self._thread.join(timeout=5)
        self._server = None

    def __enter__(self) -> KubeEmulator:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def kubeconfig(self, path: Path, namespace: str = "default", user: dict | None = None) -> Path:
        """A kubeconfig for this server (JSON is YAML), context `emulator`, bearer token (or `user`); over
        TLS with the CA's certificate as certificate-authority-data, else insecure."""
        import base64

        cluster: dict = {"server": self.url}
        if self.tls:
            cluster["certificate-authority-data"] = base64.b64encode(Path(self.tls.ca).read_bytes()).decode()
        else:
            cluster["insecure-skip-tls-verify"] = True
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "current-context": "emulator",
            "clusters": [{"name": "emulator", "cluster": cluster}],
            "users": [{"name": "emulator", "user": user or {"token": self.token or "none"}}],
            "contexts": [
                {"name": "emulator", "context": {"cluster": "emulator", "user": "emulator", "namespace": namespace}}
            ],
        }
        path.write_text(json.dumps(config, indent=2))
        path.chmod(0o600)
        return path

    # ---- what tests read
    def resource(self, kind: str, group_version: str | None = None) -> Resource:
        for res in self.resources:
            if kind in (res.kind, res.plural) and group_version in (None, res.group_version):
                return res
        raise KeyError(f"the emulator serves no kind {kind!r}")

    def objects(self, kind: str, namespace: str | None = None) -> list[dict]:
        """Stored objects of a kind (name or plural), in one namespace or all, sorted by name."""
        res = self.resource(kind)
        with self._cond:
            found = [copy.deepcopy(o) for (ns, _), o in self._store[res].items() if namespace in (None, ns)]
        return sorted(found, key=lambda o: (o["metadata"].get("namespace", ""), o["metadata"]["name"]))

    def names(self, kind: str, namespace: str | None = None) -> list[str]:
        return [o["metadata"]["name"] for o in self.objects(kind, namespace)]

    def get(self, kind: str, name: str, namespace: str = "") -> dict | None:
        res = self.resource(kind)
        with self._cond:
            obj = self._store[res].get((namespace if res.namespaced else "", name))
            return copy.deepcopy(obj)

    def all_objects(self) -> list[tuple[str, str, str]]:
        """(kind, namespace, name) of everything stored."""
        with self._cond:
            return sorted((r.kind, ns, name) for r, objs in self._store.items() for (ns, name) in objs)

    def calls(self, method: str | None = None) -> list[tuple[str, str]]:
        return [(r.method, r.path) for r in list(self.requests) if method in (None, r.method)]

    def put(self, obj: dict) -> dict:
        """Store an object directly (test setup), as if created through the API."""
        res = self.resource(obj["kind"], obj.get("apiVersion"))
        ns = (obj.get("metadata") or {}).get("namespace", "") if res.namespaced else ""
        return self.create(res, ns, obj)

    # ---- container logs (what the kubelet keeps; pods/NAME/log serves it)
    def write_log(
        self,
        namespace: str,
        pod: str,
        text: str,
        container: str = "workload",
        *,
        at: datetime | None = None,
        step_s: float = 0.0,
        previous: bool = False,
        close: bool = False,
    ) -> None:
        """Append `text` to a container's log as the container runtime writes it: one CRI entry per line,
        lines longer than 16 KiB split into partial entries, an unfinished last line a partial entry; entry
        k is stamped `at + k * step_s` (default now). `previous` writes the log of the container's previous
        instance (what `previous=true` reads); `close` ends it (a follow then ends)."""
        with self._cond:
            log = self.container_logs.setdefault((namespace, pod, container, previous), ContainerLog())
            log.append(text, at or datetime.now(UTC), step_s)
            log.closed = log.closed or close
            self._cond.notify_all()

    def write_cri_log(self, namespace: str, pod: str, cri: str, container: str = "workload") -> None:
        """Append a log in the container runtime's format (`TIME STREAM F|P TEXT` lines, what kwok serves on the
        real control plane: tests/real_cluster.py `cri_log`), each entry with its own time (to the microsecond)."""
        entries = []
        for line in cri.splitlines():
            at, _, rest = line.partition(" ")
            _stream, _, rest = rest.partition(" ")
            tag, _, text = rest.partition(" ")
            whole, _, fraction = at.rstrip("Z").partition(".")
            entries.append((datetime.fromisoformat(f"{whole}.{fraction[:6]:0<6}+00:00"), tag, text))
        with self._cond:
            log = self.container_logs.setdefault((namespace, pod, container, False), ContainerLog())
            log.entries.extend(entries)
            self._cond.notify_all()

    def close_log(self, namespace: str, pod: str, container: str = "workload") -> None:
        with self._cond:
            self.container_logs.setdefault((namespace, pod, container, False), ContainerLog()).closed = True
            self._cond.notify_all()

    def container_log(self, namespace: str, pod: str, container: str, previous: bool) -> ContainerLog | None:
        with self._cond:
            log = self.container_logs.get((namespace, pod, container, previous))
            if log is None and not previous and (namespace, pod) in self.logs:  # the simple form
                log = ContainerLog()
                log.append(self.logs[(namespace, pod)], datetime.now(UTC), 0.0)
            return log

    # ---- authorization
    def deny(self, verb: str = "*", group: str = "*", resource: str = "*", namespace: str = "*") -> None:
        """SelfSubjectAccessReviews matching this (verb, group, resource plural, namespace) answer
        allowed: false (the emulator itself still serves the request: authorization is only reported)."""
        with self._cond:
            self.denied.append((verb, group, resource, namespace))

    def review(self, body: dict, user: str | None) -> dict:
        """A SelfSubjectAccessReview's answer, as the API server returns it (spec echoed, status filled)."""
        if body.get("kind") != "SelfSubjectAccessReview" or not isinstance(body.get("spec"), dict):
            raise ApiError(400, "BadRequest", "expected a SelfSubjectAccessReview with a spec")
        attrs = body["spec"].get("resourceAttributes") or {}
        asked = (attrs.get("verb", ""), attrs.get("group", ""), attrs.get("resource", ""), attrs.get("namespace", ""))
        with self._cond:
            self.reviews.append(dict(attrs))
            denied = any(all(p == "*" or p == a for p, a in zip(rule, asked)) for rule in self.denied)
        status = {"allowed": not denied}
        if denied:
            status["reason"] = f'RBAC: no role of user "{user}" allows {asked[0]} on {asked[2]}'
        return {
            "kind": "SelfSubjectAccessReview",
            "apiVersion": "authorization.k8s.io/v1",
            "metadata": {"creationTimestamp": None},
            "spec": body["spec"],
            "status": status,
        }

    # ---- fault injection
    def fail_next(
        self,
        method: str | tuple[str, ...] | None = None,
        kind: str | None = None,
        *,
        name: str | None = None,
        namespace: str | None = None,
        status: int = 500,
        message: str = "etcdserver: request timed out",
        reason: str | None = None,
        times: int | None = 1,
        when=None,
    ) -> Fault:
        """Answer the next `times` requests (None: all) for a resource that match — method (one or a
        tuple; None = any), kind (kind or plural), object name, namespace ("" = cluster-scoped), and
        `when(request)` — with a `Status` failure of code `status`; the request is not served. Faults
        are tried in the order they were armed; the first that matches answers."""
        if kind is not None:
            self.resource(kind)  # a typo must fail the test, not silently never fire
        methods = None if method is None else frozenset([method] if isinstance(method, str) else method)
        fault = Fault(
            methods, kind, name, namespace, status, reason or REASONS.get(status, "InternalError"), message, times, when
        )
        with self._cond:
            self.faults.append(fault)
        return fault

    def _fault_for(self, request: Request, res: Resource, ns: str | None, name: str | None) -> Fault | None:
        with self._cond:
            for fault in self.faults:
                if fault.matches(request, res, ns, name):
                    fault.fired.append(request)
                    return fault
        return None

    # ---- store operations (all under self._cond)
    def _bump(self) -> str:
        self._rv += 1
        return str(self._rv)

    def _emit(self, kind: str, res: Resource, obj: dict) -> None:
        self._events.append(_Event(int(obj["metadata"]["resourceVersion"]), kind, res, copy.deepcopy(obj)))
        self._cond.notify_all()

    def _finish(self, res: Resource, obj: dict, old: dict | None) -> dict:
        """Server-set fields, and the controller's status (only `ready` emulators)."""
        meta = obj.setdefault("metadata", {})
        obj["apiVersion"], obj["kind"] = res.group_version, res.kind
        if old:
            old_meta = old["metadata"]
            meta["uid"], meta["creationTimestamp"] = old_meta["uid"], old_meta["creationTimestamp"]
            changed = {k: v for k, v in obj.items() if k not in ("metadata", "status")} != {
                k: v for k, v in old.items() if k not in ("metadata", "status")
            }
            meta["generation"] = old_meta.get("generation", 1) + (1 if changed else 0)
            if "status" not in obj and "status" in old:
                obj["status"] = old["status"]
        else:
            meta["uid"] = str(uuid.uuid4())
            meta["creationTimestamp"] = _now()
            meta["generation"] = 1
        if res.kind in DEFAULTS:
            obj.update(with_defaults(DEFAULTS[res.kind], obj))
        meta.pop("managedFields", None)
        meta["resourceVersion"] = self._bump()
        if res.kind == "Service":
            spec = obj.setdefault("spec", {})
            if not spec.get("clusterIP") and spec.get("type") != "ExternalName":
                digest = hashlib.sha256(f"{meta.get('namespace')}/{meta['name']}".encode()).digest()
                spec["clusterIP"] = f"10.96.{digest[0]}.{digest[1] or 1}"
                spec.setdefault("clusterIPs", [spec["clusterIP"]])
        if res.kind == "Job" and self._held(obj):
            if old is None:
                self._start_job(obj)
            return obj
        if self.ready:
            status = ready_status(obj)
            if status is not None:
                obj["status"] = status
        return obj

    # ---- the Job controller on demand (hold_jobs / finish_index)
    def hold_jobs(self, selector: str = "") -> None:
        """Jobs whose labels match `selector` ("" = every Job) run until finish_index() ends their indexes."""
        with self._cond:
            self.held_jobs.append(selector)

    def _held(self, obj: dict) -> bool:
        labels = (obj.get("metadata") or {}).get("labels") or {}
        return any(label_selector_matches(selector, labels) if selector else True for selector in self.held_jobs)

    @staticmethod
    def _start_job(job: dict) -> None:
        """What the API server defaults (manualSelector unset) and the controller's first status."""
        meta, spec = job["metadata"], job.setdefault("spec", {})
        uid = meta["uid"]
        template = spec.setdefault("template", {}).setdefault("metadata", {})
        spec.setdefault("selector", {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}})
        spec.setdefault("completionMode", "NonIndexed")
        template.setdefault("labels", {}).update(
            {
                "batch.kubernetes.io/controller-uid": uid,
                "batch.kubernetes.io/job-name": meta["name"],
                "controller-uid": uid,
                "job-name": meta["name"],
            }
        )
        job["status"] = {"startTime": _now(), "active": 0, "ready": 0, "terminating": 0, "uncountedTerminatedPods": {}}

    def _after_job_write(self, obj: dict) -> None:
        """A held Job just created: one running pod per index (Indexed) or `parallelism` pods."""
        spec = obj.get("spec") or {}
        count = spec.get("completions", 1) if spec.get("completionMode") == "Indexed" else spec.get("parallelism", 1)
        for index in range(count):
            self._job_pod(obj, index)

    def _job_pod(self, job: dict, index: int) -> dict:
        meta, spec = job["metadata"], job.get("spec") or {}
        template = copy.deepcopy(spec.get("template") or {})
        labels = dict((template.get("metadata") or {}).get("labels") or {})
        annotations = dict((template.get("metadata") or {}).get("annotations") or {})
        indexed = spec.get("completionMode") == "Indexed"
        if indexed:
            labels["batch.kubernetes.io/job-completion-index"] = str(index)
            annotations["batch.kubernetes.io/job-completion-index"] = str(index)
        prefix = f"{meta['name']}-{index}-" if indexed else f"{meta['name']}-"
        pod_spec = template.get("spec") or {}
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": prefix + uuid.uuid4().hex[:5],
                "namespace": meta["namespace"],
                "labels": labels,
                "annotations": annotations,
                "ownerReferences": [
                    {
                        "apiVersion": "batch/v1",
                        "kind": "Job",
                        "name": meta["name"],
                        "uid": meta["uid"],
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ],
            },
            "spec": pod_spec,
        }
        pod_res = self.resource("Pod")
        created = self.create(pod_res, meta["namespace"], pod)
        created["status"] = {
            "phase": "Running",
            "startTime": _now(),
            "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": _now()}],
            "containerStatuses": [
                {
                    "name": c.get("name", ""),
                    "ready": True,
                    "restartCount": 0,
                    "state": {"running": {"startedAt": _now()}},
                }
                for c in pod_spec.get("containers") or []
            ],
        }
        self._store_status(pod_res, created)
        job_res = self.resource("Job")
        stored = self._store[job_res][(meta["namespace"], meta["name"])]
        status = copy.deepcopy(stored.get("status") or {})
        status["active"] = status.get("active", 0) + 1
        status["ready"] = status.get("ready", 0) + 1
        stored["status"] = status
        self._store_status(job_res, stored)
        return created

    def _store_status(self, res: Resource, obj: dict) -> None:
        """A controller's status write: a new resourceVersion, a MODIFIED event (generation unchanged)."""
        obj["metadata"]["resourceVersion"] = self._bump()
        self._store[res][(obj["metadata"].get("namespace", ""), obj["metadata"]["name"])] = obj
        self._emit("MODIFIED", res, obj)

    def job_pods(self, namespace: str, job: str, index: int | None = None) -> list[dict]:
        """The pods of a held Job (of one index), oldest first."""
        pods = [
            p
            for p in self.objects("Pod", namespace)
            if any(o.get("name") == job and o.get("kind") == "Job" for o in p["metadata"].get("ownerReferences") or [])
            and (
                index is None
                or (p["metadata"].get("annotations") or {}).get("batch.kubernetes.io/job-completion-index")
                == str(index)
            )
        ]
        return sorted(pods, key=lambda p: int(p["metadata"]["resourceVersion"]))

    def set_pod_status(self, namespace: str, pod: str, status: dict) -> dict:
        """A status write of the scheduler or the kubelet to a pod (a held Job's pod cannot be scheduled,
        its image cannot be pulled, ...); returns the status it had."""
        with self._cond:
            res = self.resource("Pod")
            stored = copy.deepcopy(self._store[res][(namespace, pod)])
            before = stored.get("status") or {}
            stored["status"] = copy.deepcopy(status)
            self._store_status(res, stored)
            return before

    def finish_index(self, namespace: str, job: str, index: int, succeeded: bool = True) -> None:
        """The running pod of index `index` ends (exit 0 or 1), and the Job controller's answer to it."""
        with self._cond:
            job_res, pod_res = self.resource("Job"), self.resource("Pod")
            stored = self._store[job_res][(namespace, job)]
            spec, status = stored.get("spec") or {}, copy.deepcopy(stored.get("status") or {})
            running = [p for p in self.job_pods(namespace, job, index) if p["status"].get("phase") == "Running"]
            if not running:
                raise ValueError(f"no running pod of index {index} of Job {job}")
            pod = self._store[pod_res][(namespace, running[-1]["metadata"]["name"])]
            pod = copy.deepcopy(pod)
            code = 0 if succeeded else 1
            pod["status"]["phase"] = "Succeeded" if succeeded else "Failed"
            pod["status"]["conditions"] = [{"type": "Ready", "status": "False", "lastTransitionTime": _now()}]
            for container in pod["status"]["containerStatuses"]:
                container["ready"] = False
                container["state"] = {
                    "terminated": {
                        "exitCode": code,
                        "reason": "Completed" if succeeded else "Error",
                        "finishedAt": _now(),
                    }
                }
            self._store_status(pod_res, pod)
            status["active"] = max(0, status.get("active", 0) - 1)
            status["ready"] = max(0, status.get("ready", 0) - 1)
            indexed = spec.get("completionMode") == "Indexed"
            if succeeded:
                status["succeeded"] = status.get("succeeded", 0) + 1
                if indexed:
                    status["completedIndexes"] = _ranges(_indexes(status.get("completedIndexes")) | {index})
            else:
                status["failed"] = status.get("failed", 0) + 1
                per_index = spec.get("backoffLimitPerIndex")
                failures = sum(1 for p in self.job_pods(namespace, job, index) if p["status"].get("phase") == "Failed")
                if indexed and per_index is not None:
                    if failures > per_index:
                        status["failedIndexes"] = _ranges(_indexes(status.get("failedIndexes")) | {index})
                    else:
                        stored["status"] = status
                        self._store_status(job_res, stored)
                        self._job_pod(stored, index)  # the index is retried
                        return
            completions = spec.get("completions", 1)
            done = len(_indexes(status.get("completedIndexes"))) if indexed else status.get("succeeded", 0)
            failed_indexes = _indexes(status.get("failedIndexes"))
            over_limit = not indexed or spec.get("backoffLimitPerIndex") is None
            if done >= completions:
                reason, message = "CompletionsReached", "Reached expected number of succeeded pods"
                status["conditions"] = [
                    _condition("SuccessCriteriaMet", reason, message),
                    _condition("Complete", reason, message),
                ]
                status["completionTime"] = _now()
            elif failed_indexes and done + len(failed_indexes) >= completions:
                reason, message = "FailedIndexes", "Job has failed indexes"
                status["conditions"] = [
                    _condition("FailureTarget", reason, message),
                    _condition("Failed", reason, message),
                ]
            elif not succeeded and over_limit and status["failed"] > spec.get("backoffLimit", 6):
                reason, message = "BackoffLimitExceeded", "Job has reached the specified backoff limit"
                status["conditions"] = [
                    _condition("FailureTarget", reason, message),
                    _condition("Failed", reason, message),
                ]
            stored["status"] = status
            self._store_status(job_res, stored)
            if not succeeded and over_limit and "conditions" not in status:
                self._job_pod(stored, index)

    def create(self, res: Resource, ns: str, body: dict, dry_run: bool = False) -> dict:
        with self._cond:
            obj = copy.deepcopy(body)
            meta = obj.setdefault("metadata", {})
            if not meta.get("name"):
                if not meta.get("generateName"):
                    raise ApiError(422, "Invalid", f"{res.kind} has no metadata.name")
                meta["name"] = meta["generateName"] + uuid.uuid4().hex[:5]
            refusal = metadata_refusal(res, meta)
            if refusal is not None:
                raise refusal
            if res.namespaced:
                if meta.get("namespace") and meta["namespace"] != ns:
                    raise ApiError(
                        400,
                        "BadRequest",
                        "the namespace of the provided object does not match the namespace sent on the request",
                    )
                meta["namespace"] = ns
            else:
                meta.pop("namespace", None)
            key = (ns, meta["name"])
            if key in self._store[res]:
                raise ApiError(
                    409,
                    "AlreadyExists",
                    f'{res.plural} "{meta["name"]}" already exists',
                    {"name": meta["name"], "kind": res.plural, "group": res.group},
                )
            for k in ("uid", "resourceVersion", "creationTimestamp"):
                meta.pop(k, None)
            if res.kind == "Secret" and "stringData" in obj:
                import base64

                for k, v in obj.pop("stringData").items():
                    obj.setdefault("data", {})[k] = base64.b64encode(v.encode()).decode()
            obj = self._finish(res, obj, None)
            if dry_run:
                return obj
            self._store[res][key] = obj
            self._emit("ADDED", res, obj)
            self._after_write(res, obj)
            return copy.deepcopy(obj)

    def replace(self, res: Resource, ns: str, name: str, body: dict, dry_run: bool = False) -> dict:
        with self._cond:
            old = self._store[res].get((ns, name))
            if old is None:
                raise ApiError(
                    404,
                    "NotFound",
                    f'{res.plural} "{name}" not found',
                    {"name": name, "kind": res.plural, "group": res.group},
                )
            sent_rv = (body.get("metadata") or {}).get("resourceVersion")
            if sent_rv and sent_rv != old["metadata"]["resourceVersion"]:
                raise ApiError(
                    409,
                    "Conflict",
                    f'Operation cannot be fulfilled on {res.plural} "{name}": '
                    "the object has been modified; please apply your changes to the latest version and try again",
                    {"name": name, "kind": res.plural, "group": res.group},
                )
            obj = copy.deepcopy(body)
            obj.setdefault("metadata", {})["name"] = name
            if res.namespaced:
                obj["metadata"]["namespace"] = ns
            refusal = update_refusal(res, name, old, obj) if self.admission else None
            if refusal is not None:
                raise refusal
            obj = self._finish(res, obj, old)
            if dry_run:
                return obj
            self._store[res][(ns, name)] = obj
            self._emit("MODIFIED", res, obj)
            self._after_write(res, obj)
            return copy.deepcopy(obj)

    def delete(self, res: Resource, ns: str, name: str, dry_run: bool = False) -> dict:
        with self._cond:
            obj = self._store[res].get((ns, name))
            if obj is None:
                raise ApiError(
                    404,
                    "NotFound",
                    f'{res.plural} "{name}" not found',
                    {"name": name, "kind": res.plural, "group": res.group},
                )
            if dry_run:
                return obj
            del self._store[res][(ns, name)]
            self._applied.pop((res, ns, name), None)
            obj = copy.deepcopy(obj)
            obj["metadata"]["resourceVersion"] = self._bump()
            self._emit("DELETED", res, obj)
            uid = obj["metadata"]["uid"]
            for other_res, objs in self._store.items():  # garbage collection of dependents
                for (ons, oname), other in list(objs.items()):
                    if any(ref.get("uid") == uid for ref in other["metadata"].get("ownerReferences") or []):
                        self.delete(other_res, ons, oname)
            return obj

    def _after_write(self, res: Resource, obj: dict) -> None:
        """A Deployment's controller: one owned ReplicaSet with the same pod template (helm 3's --wait
        looks for it); a held Job's first pods."""
        if (
            res.kind == "Job"
            and self._held(obj)
            and not self.job_pods(obj["metadata"]["namespace"], obj["metadata"]["name"])
        ):
            self._after_job_write(obj)
            return
        if not self.ready or res.kind != "Deployment":
            return
        meta, spec = obj["metadata"], obj.get("spec") or {}
        rs_res = self.resource("ReplicaSet")
        template = copy.deepcopy(spec.get("template") or {})
        digest = hashlib.sha256(json.dumps(template, sort_keys=True).encode()).hexdigest()[:10]
        name = f"{meta['name']}-{digest}"
        for (ns, other), rs in list(self._store[rs_res].items()):
            owners = rs["metadata"].get("ownerReferences") or []
            if ns == meta["namespace"] and other != name and any(o.get("uid") == meta["uid"] for o in owners):
                self.delete(rs_res, ns, other)
        rs = {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {
                "name": name,
                "namespace": meta["namespace"],
                "labels": dict((template.get("metadata") or {}).get("labels") or {}),
                "ownerReferences": [
                    {
                        "apiVersion": "apps/v1",
                        "kind": "Deployment",
                        "name": meta["name"],
                        "uid": meta["uid"],
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ],
            },
            "spec": {"replicas": spec.get("replicas", 1), "selector": spec.get("selector") or {}, "template": template},
        }
        if (meta["namespace"], name) in self._store[rs_res]:
            self.replace(rs_res, meta["namespace"], name, rs)
        else:
            self.create(rs_res, meta["namespace"], rs)

    def list(self, res: Resource, ns: str | None, query: dict, encoded: bool = False) -> dict | bytes:
        """A list, in (namespace, name) order as etcd keys sort; `limit` + `continue` page it like the API
        server: the answer's metadata.continue (opaque: here base64 of the last key) and
        remainingItemCount while more remain; an unreadable continue token is a 400. `encoded`: the JSON
        bytes, written under the lock straight from the store (no copy: lists of thousands of pods)."""
        import base64
        import bisect

        with self._cond:
            store = self._store[res]
            keys = sorted(k for k in store if ns is None or k[0] == ns)
            token = query.get("continue")
            if token:
                try:
                    after = tuple(json.loads(base64.urlsafe_b64decode(token.encode())))
                except ValueError:
                    raise ApiError(400, "BadRequest", "continue key is not valid: illegal base64 data") from None
                keys = keys[bisect.bisect_right(keys, after) :]
            limit = int(query.get("limit") or 0)
            selectors = query.get("labelSelector") or query.get("fieldSelector")
            chosen, more = [], False
            for key in keys:  # a page stops at its limit: each page reads only its own part of the store
                if selectors and not self._selected(store[key], query):
                    continue
                if limit and len(chosen) == limit:
                    more = True
                    break
                chosen.append(key)
            meta: dict[str, Any] = {"resourceVersion": str(self._rv)}
            if more:
                meta["continue"] = base64.urlsafe_b64encode(json.dumps(list(chosen[-1])).encode()).decode()
                if not selectors:  # with selectors the API server does not know how many remain
                    meta["remainingItemCount"] = len(keys) - limit
            keys = chosen
            # The items of a built-in kind's list carry no apiVersion/kind (the list says it); custom
            # resources' items keep theirs, as the API server serves them.
            if res.group in BUILTIN_GROUPS:
                items = [{k: v for k, v in store[key].items() if k not in ("apiVersion", "kind")} for key in keys]
            else:
                items = [store[key] for key in keys]
            if encoded:
                return json.dumps(
                    {"kind": f"{res.kind}List", "apiVersion": res.group_version, "metadata": meta, "items": items}
                ).encode()
            return {
                "kind": f"{res.kind}List",
                "apiVersion": res.group_version,
                "metadata": meta,
                "items": copy.deepcopy(items),
            }

    @staticmethod
    def _selected(obj: dict, query: dict) -> bool:
        labels = (obj.get("metadata") or {}).get("labels") or {}
        return label_selector_matches(query.get("labelSelector", ""), labels) and field_selector_matches(
            query.get("fieldSelector", ""), obj
        )

    def patch(self, res: Resource, ns: str, name: str, content_type: str, body: bytes, query: dict) -> dict:
        dry_run = bool(query.get("dryRun"))
        try:
            patch = json.loads(body or b"{}")
        except ValueError as err:
            raise ApiError(
                415, "UnsupportedMediaType", f"the emulator reads JSON patch bodies only ({content_type}): {err}"
            ) from None
        with self._cond:
            old = self._store[res].get((ns, name))
            if content_type.startswith("application/apply-patch"):
                # Server-side apply with one applier: the applied configuration sets its fields, the fields it
                # applied last time and leaves out now are removed, and fields others wrote (Kueue's
                # spec.suspend, a controller's status) stay, as the field managers of a real server keep them.
                key = (res, ns, name)
                if old is None:
                    created = self.create(res, ns, patch, dry_run=dry_run)
                    if not dry_run:
                        self._applied[key] = copy.deepcopy(patch)
                    return created
                new = apply_configuration(old, self._applied.get(key, {}), patch)
                new.setdefault("metadata", {}).pop("resourceVersion", None)
                replaced = self.replace(res, ns, name, new, dry_run=dry_run)
                if not dry_run:
                    self._applied[key] = copy.deepcopy(patch)
                return replaced
            if old is None:
                raise ApiError(
                    404,
                    "NotFound",
                    f'{res.plural} "{name}" not found',
                    {"name": name, "kind": res.plural, "group": res.group},
                )
            if content_type.startswith("application/merge-patch+json"):
                new = merge_patch(old, patch)
            elif content_type.startswith("application/strategic-merge-patch+json"):
                new = strategic_merge_patch(old, patch)
            elif content_type.startswith("application/json-patch+json"):
                new = json_patch(old, patch)
            else:
                raise ApiError(415, "UnsupportedMediaType", f"unsupported patch type {content_type!r}")
            new["metadata"].pop("resourceVersion", None)
            return self.replace(res, ns, name, new, dry_run=dry_run)

    # ---- watch
    def watch(self, res: Resource, ns: str | None, query: dict, write) -> None:
        """Stream events until timeoutSeconds, the client goes away, or the server stops."""
        deadline = time.monotonic() + float(query.get("timeoutSeconds") or 1800)
        with self._cond:
            start_rv = query.get("resourceVersion") or "0"
            if query.get("sendInitialEvents") == "true" or start_rv in ("", "0"):
                pending = [
                    {"type": "ADDED", "object": copy.deepcopy(o)}
                    for (ons, _), o in sorted(self._store[res].items())
                    if (ns is None or ons == ns) and self._selected(o, query)
                ]  # events carry kind
                cursor = len(self._events)
                if query.get("sendInitialEvents") == "true":
                    pending.append(
                        {
                            "type": "BOOKMARK",
                            "object": {
                                "kind": res.kind,
                                "apiVersion": res.group_version,
                                "metadata": {
                                    "resourceVersion": str(self._rv),
                                    "annotations": {"k8s.io/initial-events-end": "true"},
                                },
                            },
                        }
                    )
            else:
                cursor = next((i for i, e in enumerate(self._events) if e.rv > int(start_rv)), len(self._events))
                pending = []
        while True:
            for event in pending:
                write(event)
            pending = []
            with self._cond:
                while cursor >= len(self._events) and not self._stopping.is_set():
                    left = deadline - time.monotonic()
                    if left <= 0:
                        return
                    self._cond.wait(min(left, 0.5))
                if self._stopping.is_set():
                    return
                for event in self._events[cursor:]:
                    if (
                        event.resource == res
                        and (ns is None or event.obj["metadata"].get("namespace") == ns)
                        and self._selected(event.obj, query)
                    ):
                        pending.append({"type": event.type, "object": copy.deepcopy(event.obj)})
                cursor = len(self._events)

    # ---- discovery
    def discovery(self, path: str) -> dict | None:
        if path == "/version":
            major, minor = self.kube_version.lstrip("v").split(".")[:2]
            return {
                "major": major,
                "minor": minor,
                "gitVersion": self.kube_version,
                "gitCommit": "emulator",
                "gitTreeState": "clean",
                "buildDate": "2025-01-01T00:00:00Z",
                "goVersion": "go1.23",
                "compiler": "gc",
                "platform": "linux/amd64",
            }
        if path == "/api":
            return {
                "kind": "APIVersions",
                "versions": ["v1"],
                "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": self.url[7:]}],
            }
        groups: dict[str, list[str]] = {}
        for res in self.resources:
            if res.group:
                versions = groups.setdefault(res.group, [])
                if res.version not in versions:
                    versions.append(res.version)
        groups.setdefault("authorization.k8s.io", ["v1"])
        if path == "/apis":
            return {
                "kind": "APIGroupList",
                "apiVersion": "v1",
                "groups": [
                    {
                        "name": g,
                        "versions": [{"groupVersion": f"{g}/{v}", "version": v} for v in vs],
                        "preferredVersion": {"groupVersion": f"{g}/{vs[0]}", "version": vs[0]},
                    }
                    for g, vs in sorted(groups.items())
                ],
            }
        gv = (
            path[len("/api/") :]
            if path.startswith("/api/")
            else path[len("/apis/") :]
            if path.startswith("/apis/")
            else None
        )
        if gv == "authorization.k8s.io/v1":
            return {
                "kind": "APIResourceList",
                "apiVersion": "v1",
                "groupVersion": gv,
                "resources": [
                    {
                        "name": "selfsubjectaccessreviews",
                        "singularName": "selfsubjectaccessreview",
                        "namespaced": False,
                        "kind": "SelfSubjectAccessReview",
                        "verbs": ["create"],
                    }
                ],
            }
        if gv and (gv == "v1" or gv.count("/") == 1):
            listed = [r for r in self.resources if r.group_version == gv]
            if not listed:
                return None
            return {
                "kind": "APIResourceList",
                "apiVersion": "v1",
                "groupVersion": gv,
                "resources": [
                    {
                        "name": r.plural,
                        "singularName": r.kind.lower(),
                        "namespaced": r.namespaced,
                        "kind": r.kind,
                        "verbs": VERBS,
                    }
                    for r in listed
                ],
            }
        return None

    def route(self, path: str) -> tuple[Resource, str | None, str | None, str | None] | None:
        """URL path -> (resource, namespace or None, name or None, subresource or None)."""
        parts = [p for p in path.split("/") if p]
        if len(parts) >= 3 and parts[0] == "api" and parts[1] == "v1":
            gv, rest = "v1", parts[2:]
        elif len(parts) >= 4 and parts[0] == "apis":
            gv, rest = f"{parts[1]}/{parts[2]}", parts[3:]
        else:
            return None
        by_plural = {r.plural: r for r in self.resources if r.group_version == gv}
        if len(rest) >= 3 and rest[0] == "namespaces" and rest[2] in by_plural and by_plural[rest[2]].namespaced:
            res, ns, tail = by_plural[rest[2]], rest[1], rest[3:]
        elif rest[0] in by_plural:
            res, ns, tail = by_plural[rest[0]], None, rest[1:]
            if res.namespaced and tail:
                return None  # a namespaced object needs its namespace in the path
            ns = None if res.namespaced else ""
        else:
            return None
        name = tail[0] if tail else None
        sub = tail[1] if len(tail) > 1 else None
        return res, ns, name, sub


def json_patch(target: dict, ops: list) -> dict:
    """RFC 6902, add/remove/replace only."""
    doc = copy.deepcopy(target)
    for op in ops:
        parts = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].split("/")[1:]]
        parent = doc
        for part in parts[:-1]:
            parent = parent[int(part)] if isinstance(parent, list) else parent[part]
        last = parts[-1]
        if isinstance(parent, list):
            index = len(parent) if last == "-" else int(last)
            if op["op"] == "add":
                parent.insert(index, op["value"])
            elif op["op"] == "remove":
                parent.pop(index)
            elif op["op"] == "replace":
                parent[index] = op["value"]
        elif op["op"] in ("add", "replace"):
            parent[last] = op["value"]
        elif op["op"] == "remove":
            parent.pop(last)
        else:
            raise ApiError(415, "UnsupportedMediaType", f"json patch op {op['op']!r} is not supported")
    return doc


class _Handler(BaseHTTPRequestHandler):
    kube: KubeEmulator
    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:  # quiet
        pass

    def setup(self) -> None:
        super().setup()
        # Headers and body go out in separate writes: without TCP_NODELAY every answer waits ~40 ms
        # for the client's delayed ACK.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.kube._sockets.add(self.connection)

    def handle(self) -> None:
        try:
            super().handle()
        except (OSError, ValueError):  # a TLS handshake the client broke off (an unknown CA), a reset
            self.close_connection = True

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.kube._sockets.discard(self.connection)

    def _send(self, code: int, payload: Any, content_type: str = "application/json") -> None:
        body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        if content_type == "application/json" and len(body) > GZIP_THRESHOLD and self._accepts_gzip():
            import zlib

            # As the API server: gzip level 1 (its defaultGzipContentEncodingLevel) over 128 KiB.
            packer = zlib.compressobj(1, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
            body = packer.compress(body) + packer.flush()
            self.send_header("Content-Encoding", "gzip")
            self.send_header("Vary", "Accept-Encoding")
            self.kube.gzipped += 1
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _accepts_gzip(self) -> bool:
        offered = (self.headers.get("Accept-Encoding") or "").lower().replace(" ", "").split(",")
        return any(o == "gzip" or (o.startswith("gzip;") and o != "gzip;q=0") for o in offered)

    def _body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _decode(self, body: bytes) -> dict:
        content_type = self.headers.get("Content-Type", "")
        try:
            if content_type.startswith(PROTOBUF):
                return decode_protobuf(body)
            return json.loads(body)
        except ValueError as err:
            raise ApiError(
                415 if content_type.startswith(PROTOBUF) else 400,
                "BadRequest",
                f"cannot decode the {content_type or 'untyped'} body: {err}",
            ) from None

    def _handle(self) -> None:
        split = urlsplit(self.path)
        path = split.path.rstrip("/") or "/"
        query = {k: v[-1] for k, v in parse_qs(split.query, keep_blank_values=True).items()}
        content_type = self.headers.get("Content-Type", "")
        kube = self.kube
        auth = self.headers.get("Authorization")
        user = "emulator" if kube.token and auth == f"Bearer {kube.token}" else None
        if user is None and kube.tls:
            peer = self.connection.getpeercert() or {}
            user = next((v for rdn in peer.get("subject", ()) for k, v in rdn if k == "commonName"), None)
        request = Request(self.command, path, query, content_type, user)
        self.kube.requests.append(request)
        for callback in list(kube.before_serve):
            callback(request)
        body = self._body()
        try:
            if auth is not None and kube.token and auth != f"Bearer {kube.token}":
                raise ApiError(401, "Unauthorized", "Unauthorized")  # a wrong token; helm sends none over http
            if kube.tls and user is None:
                raise ApiError(401, "Unauthorized", "Unauthorized")  # over TLS: a token or a client certificate
            if self.command == "POST" and path == SSAR_PATH:
                return self._send(201, kube.review(self._decode(body), user))
            if self.command == "GET":
                if path == "/openapi/v2":
                    return self._send(200, b"", OPENAPI_V2_PB)  # an empty openapi_v2.Document
                found = kube.discovery(path)
                if found is not None:
                    return self._send(200, found)
            route = kube.route(path)
            if route is None:
                raise ApiError(
                    404, "NotFound", f"the server could not find the requested resource ({self.command} {path})"
                )
            res, ns, name, sub = route
            fault = kube._fault_for(request, res, ns, name)
            if fault is not None:
                raise fault.error()
            dry_run = bool(query.get("dryRun"))
            if res.kind == "Pod" and sub == "log" and self.command == "GET":
                return self._pod_log(ns, name, query)
            if sub not in (None, "status"):
                raise ApiError(404, "NotFound", f"the emulator serves no subresource {sub!r}")
            if self.command == "GET" and name is None:
                if query.get("watch") in ("true", "1"):
                    return self._watch(res, ns, query)
                return self._send(200, kube.list(res, ns, query, encoded=True))
            if name is None and self.command == "POST":
                if ns is None:
                    raise ApiError(405, "MethodNotAllowed", "POST needs a namespace in the path")
                return self._send(201, kube.create(res, ns, self._decode(body), dry_run=dry_run))
            if name is None:
                raise ApiError(405, "MethodNotAllowed", f"{self.command} {path} is not supported")
            ns = ns or ""
            if self.command == "GET":
                with kube._cond:
                    obj = copy.deepcopy(kube._store[res].get((ns, name)))
                if obj is None:
                    raise ApiError(
                        404,
                        "NotFound",
                        f'{res.plural} "{name}" not found',
                        {"name": name, "kind": res.plural, "group": res.group},
                    )
                return self._send(200, obj)
            if self.command == "PUT":
                return self._send(200, kube.replace(res, ns, name, self._decode(body), dry_run=dry_run))
            if self.command == "PATCH":
                return self._send(200, kube.patch(res, ns, name, content_type, body, query))
            if self.command == "DELETE":
                obj = kube.delete(res, ns, name, dry_run=dry_run)
                return self._send(
                    200,
                    {
                        "kind": "Status",
                        "apiVersion": "v1",
                        "metadata": {},
                        "status": "Success",
                        "details": {
                            "name": name,
                            "kind": res.plural,
                            "group": res.group,
                            "uid": obj["metadata"]["uid"],
                        },
                    },
                )
            raise ApiError(405, "MethodNotAllowed", f"{self.command} is not supported")
        except ApiError as err:
            self._send(err.code, err.status())
        except Exception as err:
            self._send(500, ApiError(500, "InternalError", f"emulator error: {type(err).__name__}: {err}").status())

    def _pod_log(self, ns: str, name: str, query: dict) -> None:
        """GET pods/NAME/log as the API server answers it (the kubelet's log, proxied): `container` (required
        when the pod has several), `previous`, `tailLines`, `limitBytes`, `timestamps`, `follow` (chunked,
        until the container's log is closed, the client goes away or the server stops)."""
        kube = self.kube
        with kube._cond:
            pod = kube._store[kube.resource("Pod")].get((ns, name))
        if pod is None:
            raise ApiError(404, "NotFound", f'pods "{name}" not found', {"name": name, "kind": "pods"})
        containers = [c.get("name") for c in (pod.get("spec") or {}).get("containers") or []]
        container = query.get("container")
        if container is None:
            if len(containers) > 1:
                raise ApiError(
                    400,
                    "BadRequest",
                    f"a container name must be specified for pod {name}, choose one of: [{' '.join(containers)}]",
                )
            container = containers[0] if containers else ""
        elif containers and container not in containers:
            raise ApiError(400, "BadRequest", f"container {container} is not valid for pod {name}")
        previous = query.get("previous") == "true"
        log = kube.container_log(ns, name, container, previous)
        if log is None:
            if previous:
                raise ApiError(
                    400, "BadRequest", f'previous terminated container "{container}" in pod "{name}" not found'
                )
            log = ContainerLog()
        tail = int(query["tailLines"]) if query.get("tailLines") not in (None, "") else None
        limit = int(query["limitBytes"]) if query.get("limitBytes") not in (None, "") else None
        stamps = query.get("timestamps") == "true"
        with kube._cond:
            start = max(0, len(log.entries) - tail) if tail is not None else 0
            if limit is not None and query.get("follow") != "true":
                # as the kubelet, stop reading once limitBytes are out: a window of a 55 MB log renders its
                # entries up to the limit, not the rest of the file
                return self._send(200, log.render_bytes(start, stamps, limit), "text/plain")
            body = log.render(start, len(log.entries), stamps, True)
            cursor, ended_line = len(log.entries), (not log.entries or log.entries[-1][1] == "F")
        if query.get("follow") != "true":
            return self._send(200, body.encode(), "text/plain")
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        sent = 0

        def write(text: str) -> bool:
            nonlocal sent
            data = text.encode()
            if limit is not None:
                data = data[: max(0, limit - sent)]
            if data:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                self.wfile.flush()
                sent += len(data)
            return limit is None or sent < limit

        try:
            going = write(body)
            while going:
                with kube._cond:
                    while cursor >= len(log.entries) and not log.closed and not kube._stopping.is_set():
                        kube._cond.wait(0.2)
                    if cursor >= len(log.entries):
                        break
                    more = log.render(cursor, len(log.entries), stamps, ended_line)
                    cursor, ended_line = len(log.entries), log.entries[-1][1] == "F"
                going = write(more)
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except OSError:
            self.close_connection = True

    def _watch(self, res: Resource, ns: str | None, query: dict) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

        def write(event: dict) -> None:
            data = json.dumps(event).encode() + b"\n"
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()

        try:
            self.kube.watch(res, ns, query, write)
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except OSError:
            self.close_connection = True

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _handle
