"""namespace.exists, release.name, objects.free: where the releases go is there, and free for them."""

from __future__ import annotations

import base64
import gzip
import json
import os

from helm_nemo.preflight.model import FAIL, OK, SKIPPED, WARN, Result, first

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only
    from typing import Any

    from helm_nemo.preflight.facts import Facts
    from helm_nemo.preflight.model import Release


def namespace(facts: Facts, releases: list[Release], options: dict[str, Any]) -> list[Result]:
    names = sorted({r.namespace for r in releases} | {w.namespace for r in releases for w in r.workloads()})
    missing = [n for n in names if facts.get("v1", "Namespace", n) is None]
    if not missing:
        return [Result("namespace.exists", OK, f"namespace {', '.join(names)} exists")]
    if options.get("create_namespace"):
        return [Result("namespace.exists", OK, f"namespace {', '.join(missing)} will be created (--create-namespace)")]
    return [
        Result(
            "namespace.exists",
            FAIL,
            f"namespace {', '.join(missing)} does not exist",
            f"kubectl create namespace {missing[0]} (or pass --create-namespace)",
        )
    ]


def _driver() -> str:
    return (os.environ.get("HELM_DRIVER") or "secret").lower()


def _record(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    """helm's release record: base64(gzip(JSON)) in data.release (a Secret's data is base64 once more).
    `kind`: what was listed (items of a list carry no kind of their own)."""
    raw = (obj.get("data") or {}).get("release", "")
    try:
        data = base64.b64decode(raw)
        if kind == "Secret":
            data = base64.b64decode(data)
        record: dict[str, Any] = json.loads(gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data)
        return record
    except (ValueError, OSError):
        return {}


def release_name(facts: Facts, releases: list[Release], options: dict[str, Any]) -> list[Result]:
    driver = _driver()
    if driver not in ("secret", "secrets", "configmap", "configmaps"):
        return [
            Result(
                "release.name",
                SKIPPED,
                f"helm stores releases with HELM_DRIVER={driver}, not in the cluster",
                "helm nemo reads Secret and ConfigMap release records only",
            )
        ]
    kind = "ConfigMap" if driver.startswith("configmap") else "Secret"
    upgrade, install_missing = options.get("mode") == "upgrade", options.get("install_missing")
    results = []
    for release in releases:
        records = facts.list("v1", kind, release.namespace, {"labelSelector": f"name={release.name},owner=helm"}) or []
        if not records:
            if upgrade and not install_missing:
                results.append(
                    Result(
                        "release.name",
                        FAIL,
                        f"{release.name} is not installed in {release.namespace}",
                        "helm nemo install (or upgrade --install)",
                        release.name,
                    )
                )
            else:
                results.append(
                    Result("release.name", OK, f"{release.name} is free in {release.namespace}", release=release.name)
                )
            continue
        latest = max(records, key=lambda o: int((o.get("metadata", {}).get("labels") or {}).get("version", "0") or 0))
        labels = latest.get("metadata", {}).get("labels") or {}
        status, revision = labels.get("status", "?"), labels.get("version", "?")
        chart = (_record(latest, kind).get("chart") or {}).get("metadata") or {}
        ours = chart.get("name") and chart.get("name") == _chart_name(release)
        what = (
            f"{release.name} is installed in {release.namespace} (revision {revision}, {status}"
            + (f", chart {chart.get('name')} {chart.get('version', '')}".rstrip() if chart.get("name") else "")
            + ")"
        )
        if upgrade:
            if ours or not chart.get("name"):
                results.append(Result("release.name", OK, what, release=release.name))
            else:
                results.append(
                    Result(
                        "release.name",
                        FAIL,
                        what + f": not chart {_chart_name(release)}",
                        "choose another release name, or uninstall the other release first",
                        release.name,
                    )
                )
        elif status in ("failed", "pending-install", "uninstalling") and options.get("mode") == "install":
            results.append(
                Result(
                    "release.name",
                    FAIL,
                    what,
                    f"helm nemo uninstall, then install again (a {status} release keeps its name)",
                    release.name,
                )
            )
        elif ours:
            verdict = FAIL if options.get("mode") == "install" else WARN
            results.append(
                Result(
                    "release.name", verdict, what, "it is this chart: helm nemo upgrade is the command", release.name
                )
            )
        else:
            results.append(
                Result(
                    "release.name",
                    FAIL,
                    what + f", not chart {_chart_name(release)}",
                    "choose another release name (release: in the values, or the RELEASE argument)",
                    release.name,
                )
            )
    return results


def _chart_name(release: Release) -> str:
    chart = release.chart
    from pathlib import Path

    path = Path(chart) / "Chart.yaml"
    if not chart.startswith("oci://") and path.is_file():
        import re

        found = re.search(r"^name:\s*[\"']?([^\"'\n]+)", path.read_text(), re.M)
        if found:
            name: str = found.group(1).strip()
            return name
    return chart.rstrip("/").rsplit("/", 1)[-1]


def objects_free(facts: Facts, releases: list[Release], options: dict[str, Any]) -> list[Result]:
    """Objects a release would create that already exist and belong to no release or another one: helm
    refuses them ("exists and cannot be imported into the current release")."""
    taken = []
    checked = 0
    for release in releases:
        for obj in release.objects:
            meta = obj.get("metadata") or {}
            api, kind, name = obj.get("apiVersion", ""), obj.get("kind", ""), meta.get("name")
            resource = facts.served(api, kind)
            if resource is None or not name:
                continue  # api.served says so
            ns = (meta.get("namespace") or release.namespace) if resource.get("namespaced") else None
            checked += 1
            found = facts.get(api, kind, name, ns)
            if found is None:
                continue
            annotations = (found.get("metadata") or {}).get("annotations") or {}
            owner = annotations.get("meta.helm.sh/release-name")
            owner_ns = annotations.get("meta.helm.sh/release-namespace")
            if owner == release.name and owner_ns == release.namespace:
                continue
            by = f"release {owner} in {owner_ns}" if owner else "no helm release"
            taken.append(f"{kind} {ns + '/' if ns else ''}{name} of {release.name} (owned by {by})")
    if taken:
        return [
            Result(
                "objects.free",
                FAIL,
                f"already exist: {first(taken)}",
                "delete them, rename the release (its objects are named after it), or uninstall the release "
                "that owns them",
            )
        ]
    return [Result("objects.free", OK, f"none of the {checked} objects exists, or each belongs to its release")]
