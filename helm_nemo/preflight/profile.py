"""What the accelerator profile needs in the cluster, read from the profile's data and the rendered
objects (no accelerator name appears here): profile.networks (GKE multi-networking Network and its
parameters object, named by the pods' interfaces annotation), profile.deviceclasses (the DRA DeviceClasses
the ResourceClaimTemplates name), storage.csi (a CSIDriver for every CSI driver the volumes use)."""

from __future__ import annotations

import json

from helm_nemo.preflight.model import FAIL, OK, SKIPPED, WARN, Result, first, profile_hint, run_hint

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only
    from typing import Any

    from helm_nemo.preflight.facts import Facts
    from helm_nemo.preflight.model import Release


def networks(facts: Facts, releases: list[Release], options: dict[str, Any]) -> list[Result]:
    results = []
    for release in releases:
        spec = ((release.profile or {}).get("preflight") or {}).get("multiNetwork")
        if not spec:
            continue
        wanted: dict[str, str] = {}  # network -> where it is named
        host_network = False
        for workload in release.workloads():
            text = (workload.meta.get("annotations") or {}).get(spec["annotation"])
            if text:
                try:
                    interfaces = json.loads(text)
                except ValueError:
                    continue  # the manifest check reports it
                for item in interfaces if isinstance(interfaces, list) else []:
                    if isinstance(item, dict) and item.get("network"):
                        wanted.setdefault(item["network"], f"{workload.kind} {workload.name}")
            elif workload.spec.get("hostNetwork") and workload.requests():
                host_network = True
        builtin = set(spec.get("builtin") or [])
        verdict = FAIL
        if not wanted and host_network:
            # The pods use the node's NICs: the node pool's additional networks are the profile's interfaces.
            interfaces = ((release.profile or {}).get("network") or {}).get("interfaces") or []
            wanted = {n: "the node pool (host network)" for n in interfaces}
            verdict = WARN
        wanted = {n: w for n, w in wanted.items() if n not in builtin}
        if not wanted:
            continue
        api = spec["apiVersion"]
        if facts.served(api, spec["kind"]) is None:
            results.append(
                Result(
                    "profile.networks",
                    verdict,
                    f"{spec['kind']} ({api}) is not served, but "
                    f"{first(dict.fromkeys(wanted.values()), 1)} uses networks {first(sorted(wanted), 9)}",
                    profile_hint(release, api.rpartition("/")[0], "enable multi-networking"),
                    release.name,
                )
            )
            continue
        missing, params_missing = [], []
        for network in sorted(wanted):
            found = facts.get(api, spec["kind"], network)
            if found is None:
                missing.append(network)
                continue
            ref = (found.get("spec") or {}).get("parametersRef") or {}
            if ref.get("name") and ref.get("kind") == spec.get("paramsKind"):
                if facts.get(api, spec["paramsKind"], ref["name"]) is None:
                    params_missing.append(f"{network} -> {ref['name']}")
        if missing or params_missing:
            parts = []
            if missing:
                parts.append(f"{spec['kind']} objects missing: {', '.join(missing)}")
            if params_missing:
                parts.append(f"{spec['paramsKind']} missing for {', '.join(params_missing)}")
            why = "" if verdict == FAIL else " (the pods use the host network: the nodes may lack these NICs)"
            results.append(
                Result(
                    "profile.networks",
                    verdict,
                    f"{first(dict.fromkeys(wanted.values()), 1)}: {'; '.join(parts)}{why}",
                    profile_hint(
                        release,
                        spec["kind"],
                        f"create the {spec['kind']} and {spec.get('paramsKind')} objects for the node pool's networks",
                    ),
                    release.name,
                )
            )
        else:
            results.append(
                Result(
                    "profile.networks",
                    OK,
                    f"{spec['kind']} objects {', '.join(sorted(wanted))} exist",
                    release=release.name,
                )
            )
    return results or [Result("profile.networks", SKIPPED, "no pod names additional networks")]


def device_classes(facts: Facts, releases: list[Release], options: dict[str, Any]) -> list[Result]:
    wanted: dict[str, tuple[Release, str]] = {}
    for release in releases:
        for obj in release.objects:
            if obj.get("kind") != "ResourceClaimTemplate":
                continue
            devices = ((obj.get("spec") or {}).get("spec") or {}).get("devices") or {}
            for request in devices.get("requests") or []:
                name = (request.get("exactly") or {}).get("deviceClassName") or request.get("deviceClassName")
                if name:
                    wanted.setdefault(name, (release, obj.get("apiVersion", "resource.k8s.io/v1")))
    if not wanted:
        return [Result("profile.deviceclasses", SKIPPED, "no ResourceClaimTemplate names a DeviceClass")]
    missing = []
    for name, (release, api) in sorted(wanted.items()):
        if facts.served(api, "DeviceClass") is None or facts.get(api, "DeviceClass", name) is None:
            missing.append((name, release))
    if missing:
        return [
            Result(
                "profile.deviceclasses",
                FAIL,
                f"DeviceClass {', '.join(n for n, _ in missing)} does not exist",
                " | ".join(
                    run_hint(releases, n, f"install the DRA driver that publishes DeviceClass {n}") for n, _ in missing
                ),
                missing[0][1].name,
            )
        ]
    return [Result("profile.deviceclasses", OK, f"DeviceClass {', '.join(sorted(wanted))} exists")]


def csi_drivers(facts: Facts, releases: list[Release], options: dict[str, Any]) -> list[Result]:
    wanted: dict[str, object] = {}
    for release in releases:
        for obj in release.objects:
            if obj.get("kind") == "PersistentVolume":
                driver = ((obj.get("spec") or {}).get("csi") or {}).get("driver")
                if driver:
                    wanted.setdefault(driver, release)
        for workload in release.workloads():
            for volume in workload.spec.get("volumes") or []:
                driver = (volume.get("csi") or {}).get("driver") if isinstance(volume, dict) else None
                if driver:
                    wanted.setdefault(driver, release)
    if not wanted:
        return [Result("storage.csi", SKIPPED, "no volume uses a CSI driver")]
    if facts.served("storage.k8s.io/v1", "CSIDriver") is None:
        return [Result("storage.csi", SKIPPED, "the cluster serves no CSIDriver objects to look at")]
    missing = [(d, r) for d, r in sorted(wanted.items()) if facts.get("storage.k8s.io/v1", "CSIDriver", d) is None]
    if missing:
        return [
            Result(
                "storage.csi",
                FAIL,
                f"CSI driver {', '.join(d for d, _ in missing)} is not installed (no CSIDriver object)",
                " | ".join(run_hint(releases, d, f"install the {d} CSI driver") for d, _ in missing),
            )
        ]
    return [Result("storage.csi", OK, f"CSI driver {', '.join(sorted(wanted))} installed")]
