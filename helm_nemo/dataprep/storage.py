"""Where a training release sees a data-prep release's outputs (`dataFrom:`).

The data-prep release writes to `output.path`, under one of its mounts (a claim or a bucket). The training reads
the same storage through its own mounts, maybe at another path: the prefixes it gets are the output folder in
the training's view. A training that does not mount that storage at all would read nothing after hours of
preparation: refused before anything is installed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# nemo-training mounts workload.gcsBucketForDataCataPath here (the chart's nemo.training.bucketMountPath).
TRAINING_BUCKET_MOUNT = "/gcs"


@dataclass(frozen=True)
class Mount:
    """A storage (`pvc` claim or `gcs` bucket) mounted at a path."""

    kind: str
    name: str
    path: str

    def said(self) -> str:
        return f"claim {self.name!r}" if self.kind == "pvc" else f"bucket {self.name!r}"


def _norm(path: Any) -> str:
    text = str(path or "")
    return text.rstrip("/") or "/"


def _under(path: str, root: str) -> bool:
    return root == "/" or path == root or path.startswith(root + "/")


def _section(values: dict[str, Any], key: str) -> dict[str, Any]:
    section = values.get(key)
    return section if isinstance(section, dict) else {}


def mounts_of(values: dict[str, Any], *, training: bool) -> list[Mount]:
    volumes = _section(values, "volumes")
    found = [
        Mount("pvc", str(m.get("claimName")), _norm(m.get("mountPath")))
        for m in (volumes.get("pvcMounts") or [])
        if isinstance(m, dict) and m.get("claimName") and m.get("mountPath")
    ]
    found += [
        Mount("gcs", str(m.get("bucketName")), _norm(m.get("mountPath")))
        for m in (volumes.get("gcsMounts") or [])
        if isinstance(m, dict) and m.get("bucketName") and m.get("mountPath")
    ]
    workload = _section(values, "workload")
    if training and workload.get("gcsBucketForDataCataPath"):
        found.append(Mount("gcs", str(workload["gcsBucketForDataCataPath"]), TRAINING_BUCKET_MOUNT))
    return found


def output_mount(values: dict[str, Any]) -> tuple[Mount, str] | None:
    """The data-prep mount holding output.path (the deepest) and the output's path inside it."""
    output = _norm((values.get("output") or {}).get("path"))
    holders = [m for m in mounts_of(values, training=False) if _under(output, m.path)]
    if not holders:
        return None
    mount = max(holders, key=lambda m: len(m.path))
    return mount, output[len(mount.path) :] if mount.path != "/" else output


def training_root(data_prep: dict[str, Any], training: dict[str, Any]) -> tuple[str | None, str | None]:
    """(the output folder as the training sees it, None) or (None, why it cannot see it). (None, None) when the
    data-prep values name no mount for their output (its own checks say so)."""
    found = output_mount(data_prep)
    if found is None:
        return None, None
    mount, inside = found
    same = [m for m in mounts_of(training, training=True) if (m.kind, m.name) == (mount.kind, mount.name)]
    if not same:
        return None, f"it does not mount {mount.said()}, where the data-prep release writes (at {mount.path})"
    # Prefer the training mount at the same path (the prefixes stay as written); else the first.
    chosen = next((m for m in same if m.path == mount.path), same[0])
    root = chosen.path.rstrip("/") + inside
    return root or "/", None
