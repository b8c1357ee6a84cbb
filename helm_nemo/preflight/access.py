"""access.rbac: SelfSubjectAccessReviews for what helm will do as you: create (install) or patch
(upgrade) each kind the releases render, in its namespace or cluster-wide, plus helm's own release record
(list/get/create/update Secrets, or ConfigMaps with HELM_DRIVER=configmap)."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

from helm_nemo.preflight.model import FAIL, OK, Result, first

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only
    from typing import Any

    from helm_nemo.preflight.facts import Facts
    from helm_nemo.preflight.model import Release


def rbac(facts: Facts, releases: list[Release], options: dict[str, Any]) -> list[Result]:
    verbs = ["create", "get"] if options.get("mode") != "upgrade" else ["get", "patch"]
    asks: dict[tuple[str, str, str, str | None], str] = {}
    for release in releases:
        for obj in release.objects:
            api, kind = obj.get("apiVersion", ""), obj.get("kind", "")
            resource = facts.served(api, kind)
            if resource is None:
                continue  # api.served says so
            group = api.rpartition("/")[0]
            ns = (
                ((obj.get("metadata") or {}).get("namespace") or release.namespace)
                if resource.get("namespaced")
                else None
            )
            for verb in verbs:
                asks.setdefault((verb, group, resource["name"], ns), kind)
        driver = (os.environ.get("HELM_DRIVER") or "secret").lower()
        record = "configmaps" if driver.startswith("configmap") else "secrets" if driver.startswith("secret") else None
        if record:
            for verb in ("list", "get", "create", "update"):
                asks.setdefault((verb, "", record, release.namespace), "release record")
    keys = sorted(asks, key=lambda k: (k[2], k[0], k[3] or ""))
    with ThreadPoolExecutor(max_workers=8) as pool:
        answers = list(pool.map(lambda k: facts.allowed(*k), keys))
    denied = [
        f"{verb} {resource}{'.' + group if group else ''}{' in ' + ns if ns else ' (cluster-wide)'}"
        for (verb, group, resource, ns), (allowed, _) in zip(keys, answers, strict=True)
        if not allowed
    ]
    if denied:
        return [
            Result(
                "access.rbac",
                FAIL,
                f"you may not: {first(denied, 4)}",
                "ask the cluster admin for a Role/ClusterRole binding with these verbs "
                "(kubectl auth can-i --list -n NAMESPACE shows yours)",
                details={"denied": denied},
            )
        ]
    return [
        Result(
            "access.rbac",
            OK,
            f"allowed: {len(keys)} verb/resource pairs helm needs ({first(sorted({k[2] for k in keys}), 4)})",
        )
    ]
