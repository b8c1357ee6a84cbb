"""Names and labels: DNS rules per kind, names the JobSet/Job controllers derive, label syntax."""

from __future__ import annotations

import re

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: importing typing costs every run start-up time
    from typing import Any
    from collections.abc import Mapping

from helm_nemo.validate.documents import Collector, items_of, mapping, short
from helm_nemo.validate.pods import PodTemplate, as_int, containers

_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_IANA_SVC_NAME = re.compile(r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?$")
_CONFIGMAP_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")


def dns_problems(value: Any, rule: str) -> list[str]:
    """Why `value` is not a valid name under `rule` (label1123 | label1035 | subdomain | path-segment)."""
    if not isinstance(value, str) or not value:
        return [f"must be a non-empty string, got {short(value)}"]
    if rule == "path-segment":
        if value in (".", ".."):
            return [f"{value!r} may not be used as a name"]
        return [f"{value!r} may not contain {c!r}" for c in "/%" if c in value]
    limit, regex, words = {
        "label1123": (
            63,
            _DNS1123_LABEL,
            "a DNS-1123 label (lower-case letters, digits and '-', starting and ending with a letter or digit)",
        ),
        "label1035": (
            63,
            _DNS1035_LABEL,
            "a DNS-1035 label (lower-case letters, digits and '-', starting with a "
            "letter, ending with a letter or digit)",
        ),
        "subdomain": (
            253,
            _DNS1123_SUBDOMAIN,
            "a DNS-1123 subdomain (lower-case letters, digits, '-' and '.', each "
            "part starting and ending with a letter or digit)",
        ),
    }[rule]
    out = []
    if len(value) > limit:
        out.append(f"{value!r} is {len(value)} characters, more than {limit}")
    if not regex.match(value):
        out.append(f"{value!r} is not {words}")
    return out


# Kubernetes name rules per kind (the rest: DNS-1123 subdomain).
_NAME_RULES = {
    "Service": "label1035",
    "Namespace": "label1123",
    # The Job's name is the value of its pods' batch.kubernetes.io/job-name label (<= 63).
    "Job": "label1123",
    "CronJob": "label1123",  # CronJob: <= 52 as well, see check_names
    # A JobSet's name starts its Jobs' names, which the JobSet webhook checks as DNS-1035 labels.
    "JobSet": "label1035",
    "Role": "path-segment",
    "ClusterRole": "path-segment",
    "RoleBinding": "path-segment",
    "ClusterRoleBinding": "path-segment",
}


def check_names(out: Collector, doc: Mapping[str, Any], pods: list[PodTemplate]) -> None:
    """Names (strings: a name of another type is the schema check's)."""
    meta = mapping(doc.get("metadata"))
    name = meta.get("name")
    if isinstance(name, str):
        for why in dns_problems(name, _NAME_RULES.get(out.kind, "subdomain")):
            out.add(("metadata", "name"), f"{out.kind} name {why}", "dns-name")
    if out.kind == "CronJob" and isinstance(name, str) and len(name) > 52:
        out.add(
            ("metadata", "name"),
            f"CronJob name {name!r} is {len(name)} characters, more than 52 (its Jobs append an 11-character suffix)",
            "dns-name",
        )
    if isinstance(meta.get("namespace"), str):
        for why in dns_problems(meta["namespace"], "label1123"):
            out.add(("metadata", "namespace"), f"namespace {why}", "dns-name")
    if out.kind == "ConfigMap":
        for section in ("data", "binaryData"):
            for key in mapping(doc.get(section)):
                if not isinstance(key, str) or len(key) > 253 or not _CONFIGMAP_KEY.match(key):
                    out.add(
                        (section, key),
                        f"ConfigMap key {key!r} must be letters, digits, '-', '_' or '.' (at most 253)",
                        "dns-name",
                    )
    if out.kind == "Service":
        for i, port in enumerate(items_of(mapping(doc.get("spec")).get("ports"))):
            if isinstance(port, dict) and isinstance(port.get("name"), str):
                _port_name(out, ("spec", "ports", i, "name"), port["name"])
    for pod in pods:
        for key in ("hostname", "subdomain"):
            if isinstance(pod.spec.get(key), str):
                for why in dns_problems(pod.spec[key], "label1123"):
                    out.add(pod.path + (key,), f"pod {key} {why}", "dns-name")
        for i, volume in enumerate(items_of(pod.spec.get("volumes"))):
            if isinstance(volume, dict) and isinstance(volume.get("name"), str):
                for why in dns_problems(volume["name"], "label1123"):
                    out.add(pod.path + ("volumes", i, "name"), f"volume name {why}", "dns-name")
        for where, container, _ in containers(pod.spec):
            if isinstance(container.get("name"), str):
                for why in dns_problems(container["name"], "label1123"):
                    out.add(pod.path + where + ("name",), f"container name {why}", "dns-name")
            for j, port in enumerate(items_of(container.get("ports"))):
                if isinstance(port, dict) and isinstance(port.get("name"), str):
                    _port_name(out, pod.path + where + ("ports", j, "name"), port["name"])


def _port_name(out: Collector, where: tuple[Any, ...], value: Any) -> None:
    if not (
        isinstance(value, str)
        and 0 < len(value) <= 15
        and _IANA_SVC_NAME.match(value)
        and "--" not in value
        and re.search("[a-z]", value)
    ):
        out.add(
            where,
            f"port name {value!r} must be an IANA service name (at most 15 lower-case letters, digits "
            "and single '-', with a letter)",
            "dns-name",
        )


def check_derived_names(out: Collector, doc: Mapping[str, Any]) -> None:
    spec = mapping(doc.get("spec"))
    name = mapping(doc.get("metadata")).get("name")
    if not isinstance(name, str):
        return
    if out.kind == "JobSet":
        # jobset webhook: <jobset>-<rjob>-<replicas-1> and, for Indexed jobs (the default), the pod name
        # <jobset>-<rjob>-<jobIdx>-<podIdx>-<5 random> must be DNS-1035 labels (<= 63).
        subdomain = mapping(spec.get("network")).get("subdomain")
        if subdomain and isinstance(subdomain, str):
            for why in dns_problems(subdomain, "label1035"):
                out.add(
                    ("spec", "network", "subdomain"),
                    f"JobSet subdomain (the headless Service's name) {why}",
                    "derived-name",
                )
        for i, rjob in enumerate(items_of(spec.get("replicatedJobs"))):
            if not isinstance(rjob, dict) or not isinstance(rjob.get("name"), str):
                continue
            replicas = max(as_int(rjob.get("replicas"), 1), 1)
            job = mapping(mapping(rjob.get("template")).get("spec"))
            job_name = f"{name}-{rjob['name']}-{replicas - 1}"
            for why in dns_problems(job_name, "label1035"):
                out.add(("spec", "replicatedJobs", i, "name"), f"derived Job name {why}", "derived-name")
            if job.get("completionMode", "Indexed") == "Indexed":
                completions = max(as_int(job.get("completions"), as_int(job.get("parallelism"), 1)), 1)
                pod_name = f"{job_name}-{completions - 1}-abcde"
                for why in dns_problems(pod_name, "label1035"):
                    out.add(
                        ("spec", "replicatedJobs", i, "name"),
                        f"derived pod name (hostname {job_name}-{completions - 1} + 6-character suffix) {why}",
                        "derived-name",
                    )
    elif out.kind == "Job" and spec.get("completionMode") == "Indexed":
        completions = max(as_int(spec.get("completions"), as_int(spec.get("parallelism"), 1)), 1)
        hostname = f"{name}-{completions - 1}"
        for why in dns_problems(hostname, "label1123"):
            out.add(("metadata", "name"), f"Indexed Job pod hostname {why}", "derived-name")


MAX_ANNOTATIONS_BYTES = 256 * 1024  # apimachinery TotalAnnotationSizeLimitB: keys and values together
MAX_CONFIGMAP_BYTES = 1024 * 1024  # ConfigMap data + binaryData (keys and values), as the API server counts


def label_key_problems(key: Any) -> list[str]:
    """Why `key` is not a label (or annotation) key: an optional DNS-1123 subdomain prefix and `/`, then a
    name of at most 63 characters."""
    return _qualified_name_problems(key)


def label_value_problem(value: Any) -> str | None:
    """Why `value` is not a label value (nor a nodeSelector value), or None."""
    if isinstance(value, str) and len(value) <= 63 and _LABEL_VALUE.fullmatch(value):
        return None
    return (
        f"{short(value)} must be at most 63 letters, digits, '-', '_' or '.', starting and ending "
        "with a letter or digit"
    )


def _size(node: Any) -> int:
    return (
        sum(len(str(k).encode()) + len(v.encode() if isinstance(v, str) else str(v).encode()) for k, v in node.items())
        if isinstance(node, dict)
        else 0
    )


def check_sizes(out: Collector, doc: Mapping[str, Any], pods: list[PodTemplate]) -> None:
    """The API server's size limits: annotations of one object (256 KiB), a ConfigMap's data (1 MiB)."""
    metas = [(("metadata",), doc.get("metadata"))] + [(p.meta_path, p.meta) for p in pods]
    for where, meta in metas:
        if isinstance(meta, dict) and _size(meta.get("annotations")) > MAX_ANNOTATIONS_BYTES:
            out.add(
                where + ("annotations",),
                f"annotations are {_size(meta['annotations'])} bytes together, more "
                f"than the {MAX_ANNOTATIONS_BYTES // 1024} KiB the API server accepts",
                "size",
            )
    if out.kind == "ConfigMap":
        total = _size(doc.get("data")) + _size(doc.get("binaryData"))
        if total > MAX_CONFIGMAP_BYTES:
            out.add(
                (),
                f"ConfigMap data is {total} bytes, more than the {MAX_CONFIGMAP_BYTES // 2**20} MiB the API "
                "server accepts",
                "size",
            )


def check_labels(out: Collector, doc: Mapping[str, Any], pods: list[PodTemplate]) -> None:
    metas = [(("metadata",), doc.get("metadata"))] + [(p.meta_path, p.meta) for p in pods]
    spec = mapping(doc.get("spec"))
    selector = spec.get("selector")
    if isinstance(selector, dict):
        labels = selector.get("matchLabels") if out.kind != "Service" else selector
        if isinstance(labels, dict):
            metas.append(
                (
                    ("spec", "selector") + (("matchLabels",) if out.kind != "Service" else ()),
                    {"labels": labels, "_selector": True},
                )
            )
    for where, meta in metas:
        if not isinstance(meta, dict):
            continue
        labels_at = where if meta.get("_selector") else where + ("labels",)
        for key, value in mapping(meta.get("labels")).items():
            for why in _qualified_name_problems(key):
                out.add(labels_at + (key,), f"label key {why}", "label")
            value_why = label_value_problem(value) if isinstance(value, str) else None
            if value_why:
                out.add(labels_at + (key,), f"label value {value_why}", "label")
        for key in mapping(meta.get("annotations")):
            for why in _qualified_name_problems(key):
                out.add(where + ("annotations", key), f"annotation key {why}", "label")
    for pod in pods:  # the API server checks a pod's nodeSelector as labels
        for key, value in mapping(pod.spec.get("nodeSelector")).items():
            for why in _qualified_name_problems(key):
                out.add(pod.path + ("nodeSelector", key), f"nodeSelector key {why}", "label")
            value_why = label_value_problem(value) if isinstance(value, str) else None  # else: the schema's
            if value_why:
                out.add(pod.path + ("nodeSelector", key), f"nodeSelector value {value_why}", "label")


def _qualified_name_problems(key: Any) -> list[str]:
    if not isinstance(key, str) or not key:
        return [f"{short(key)} must be a non-empty string"]
    prefix, slash, name = key.rpartition("/")
    out = []
    if slash and (not prefix or dns_problems(prefix, "subdomain")):
        out.append(f"{key!r}: the prefix before '/' must be a DNS-1123 subdomain")
    if len(name) > 63 or not _QUALIFIED_NAME.match(name):
        out.append(
            f"{key!r}: the name part must be at most 63 letters, digits, '-', '_' or '.', starting and "
            "ending with a letter or digit"
        )
    return out
