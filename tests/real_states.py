"""The named cluster states of tests/cluster_states.py, written into the real control plane of
tests/real_cluster.py instead of the loopback emulator, so both hold the same objects.

`RealKube(cluster)` is what the builders of cluster_states write into (`put`): it collects the objects and
`flush()` creates them in bulk, namespaces first, then (once the service account controller has made each
namespace's `default` account, which the pods need) the rest. What changes on the way, and why:

- Nodes carry kwok's annotation (kwok keeps them Ready: their lease, their conditions) and what a kubelet
  registers (addresses, kwok's server as the kubelet endpoint); the builders' `Ready` condition is dropped,
  so that kwok's node-initialize stage runs as for a new kubelet.
- Pods lose their status (the server drops it on create; kwok runs them to Running), uid, resourceVersion,
  creationTimestamp, and owner references (to Jobs that do not exist here: the garbage collector would
  delete them).
- Kueue's Topology is written as v1beta1: Kueue v0.19 serves Topology in v1beta1 and v1beta2 only (the
  emulator's older Kueue serves v1alpha1). A ClusterQueue's status is Kueue's to write (the builders'
  `used` is not taken).
- GKE multi-networking's `Network` and `GKENetworkParamSet` (networking.gke.io/v1) are GKE's own CRDs, not
  in any module of tests/cluster/go.mod: `gke_network_crds()` serves the group with schema-less CRDs of the
  same group, version, kinds and scope, so the objects can be held and listed as on GKE (no GKE controller
  acts on them, as none acts on them for preflight either).
"""

from __future__ import annotations

import copy
from typing import Any

from real_cluster import KWOK_NODE_ANNOTATION, RealCluster

GKE_NETWORK_KINDS = [("Network", "networks"), ("GKENetworkParamSet", "gkenetworkparamsets")]


class RealKube:
    def __init__(self, cluster: RealCluster, *, labels: dict[str, str] | None = None):
        self.cluster = cluster
        self.pending: list[dict] = []
        self.labels = labels or {}  # added to every object made here (to find and delete them)
        self.created: list[dict] = []

    # what cluster_states' builders call -------------------------------------------------------

    def put(self, obj: dict) -> dict:
        obj = copy.deepcopy(obj)
        meta = obj.setdefault("metadata", {})
        for key in ("uid", "resourceVersion", "creationTimestamp", "ownerReferences"):
            meta.pop(key, None)
        if self.labels and obj["kind"] != "Namespace":
            meta["labels"] = {**(meta.get("labels") or {}), **self.labels}
        kind = obj["kind"]
        if kind == "Node":
            meta.setdefault("annotations", {})[KWOK_NODE_ANNOTATION] = "fake"
            status = obj.setdefault("status", {})
            status.pop("conditions", None)
        elif kind == "Pod":
            obj.pop("status", None)
        elif kind == "Topology" and obj["apiVersion"] == "kueue.x-k8s.io/v1alpha1":
            obj["apiVersion"] = "kueue.x-k8s.io/v1beta1"
        elif kind == "ClusterQueue":
            obj.pop("status", None)
        self.pending.append(obj)
        return obj

    def get(self, kind: str, name: str, namespace: str = "") -> dict | None:
        self.flush()
        for obj in self.created:
            if obj["kind"] == kind and obj["metadata"]["name"] == name:
                try:
                    return self.cluster.get(self.cluster.path_of({**obj, "metadata": {**obj["metadata"]}}))
                except Exception:
                    return None
        return None

    # ------------------------------------------------------------------------------------------

    def flush(self, workers: int = 8) -> int:
        """Creates what was put (objects already there are left as they are): how many were created."""
        pending, self.pending = self.pending, []
        if any(o["apiVersion"] == "networking.gke.io/v1" for o in pending):
            gke_network_crds(self.cluster)
        namespaces = [o for o in pending if o["kind"] == "Namespace"]
        rest = [o for o in pending if o["kind"] != "Namespace"]
        made = self.cluster.create_many(namespaces, exist_ok=True)
        for name in sorted({o["metadata"].get("namespace") for o in rest if o["kind"] == "Pod"} - {None}):
            self.cluster.wait_for(
                f"default service account in {name}",
                lambda name=name: self.cluster._exists(f"/api/v1/namespaces/{name}/serviceaccounts/default"),
                30,
                0.2,
            )
        made += self.cluster.create_many(rest, workers=workers, exist_ok=True)
        # Only what this call created is this adapter's to delete (an object that existed is someone else's).
        self.created += [o for o, new in zip(namespaces + rest, made) if new]
        return sum(made)

    def delete_created(self) -> None:
        """Deletes what this adapter created, newest first (cluster-scoped objects would outlive a test)."""
        for obj in reversed(self.created):
            try:
                self.cluster.api("DELETE", self.cluster.path_of(obj))
            except Exception as err:  # already gone (with its namespace)
                if getattr(err, "code", None) != 404:
                    raise
        self.created = []


def gke_network_crds(cluster: RealCluster) -> None:
    """networking.gke.io/v1 Network and GKENetworkParamSet (cluster-scoped) served by schema-less CRDs."""
    names = []
    for kind, plural in GKE_NETWORK_KINDS:
        name = f"{plural}.networking.gke.io"
        names.append(name)
        crd: dict[str, Any] = {
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": name},
            "spec": {
                "group": "networking.gke.io",
                "scope": "Cluster",
                "names": {"kind": kind, "plural": plural, "singular": kind.lower(), "listKind": f"{kind}List"},
                "versions": [
                    {
                        "name": "v1",
                        "served": True,
                        "storage": True,
                        "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
                    }
                ],
            },
        }
        cluster.apply(crd)
    cluster.wait_for("the networking.gke.io CRDs established", lambda: all(cluster._established(n) for n in names), 30)
    cluster.__dict__.get("_discovery", {}).pop("networking.gke.io/v1", None)
    cluster.wait_for(
        "networking.gke.io/v1 discovered", lambda: cluster._exists("/apis/networking.gke.io/v1/networks"), 30, 0.2
    )
