"""Containers: duplicate names and env, mounts of unknown volumes."""

from __future__ import annotations


from helm_nemo.validate.compiled import did_you_mean
from helm_nemo.validate.documents import Collector, items_of, json_path
from helm_nemo.validate.pods import PodTemplate, containers

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: importing typing costs every run start-up time
    from typing import Any


def check_containers(out: Collector, pods: list[PodTemplate]) -> None:
    for pod in pods:
        listed = pod.spec.get("volumes")
        volumes: dict[str, int] = {}
        for i, volume in enumerate(items_of(listed)):
            if isinstance(volume, dict) and isinstance(volume.get("name"), str):
                if volume["name"] in volumes:
                    out.add(
                        pod.path + ("volumes", i, "name"),
                        f"volume {volume['name']!r} is defined twice (also volumes[{volumes[volume['name']]}])",
                        "duplicate-name",
                    )
                volumes.setdefault(volume["name"], i)
        # A volume of the wrong type (or with a name that is not a string) may be the one a mount names: the
        # mounts are not checked against the volumes then (the schema check reports that volume).
        volumes_known = (
            listed is None
            or isinstance(listed, list)
            and all(isinstance(v, dict) and isinstance(v.get("name"), str) for v in listed)
        )
        names: dict[str, tuple[Any, ...]] = {}
        for where, container, _ in containers(pod.spec):
            cname = container.get("name")
            if isinstance(cname, str):
                if cname in names:
                    out.add(
                        pod.path + where + ("name",),
                        f"container name {cname!r} is used twice (also {json_path(names[cname])[2:]})",
                        "duplicate-name",
                    )
                names.setdefault(cname, where)
            seen: dict[str, int] = {}
            for j, entry in enumerate(items_of(container.get("env"))):
                if isinstance(entry, dict) and isinstance(entry.get("name"), str):
                    if entry["name"] in seen:
                        out.add(
                            pod.path + where + ("env", j, "name"),
                            f"env {entry['name']!r} is defined twice in container {cname!r} (also env[{seen[entry['name']]}]); "
                            "the later one silently wins",
                            "duplicate-env",
                        )
                    seen.setdefault(entry["name"], j)
            mount_paths: dict[str, int] = {}
            for j, mount in enumerate(items_of(container.get("volumeMounts"))):
                if not isinstance(mount, dict):
                    continue
                mname = mount.get("name")
                if volumes_known and isinstance(mname, str) and mname not in volumes:
                    have = ", ".join(sorted(volumes)) or "none"
                    hint = did_you_mean(mname, volumes)
                    out.add(
                        pod.path + where + ("volumeMounts", j, "name"),
                        f"volumeMount names volume {mname!r}, which the pod does not define{hint} (volumes: {have})",
                        "volume-mount",
                    )
                path = mount.get("mountPath")
                if isinstance(path, str):
                    if path in mount_paths:
                        out.add(
                            pod.path + where + ("volumeMounts", j, "mountPath"),
                            f"mountPath {path!r} is used "
                            f"twice in container {cname!r} (also volumeMounts[{mount_paths[path]}])",
                            "volume-mount",
                        )
                    mount_paths.setdefault(path, j)
            for j, device in enumerate(items_of(container.get("volumeDevices"))):
                dname = device.get("name") if isinstance(device, dict) else None
                if volumes_known and isinstance(dname, str) and dname not in volumes:
                    out.add(
                        pod.path + where + ("volumeDevices", j, "name"),
                        f"volumeDevice names volume {dname!r}, which the pod does not define",
                        "volume-mount",
                    )
