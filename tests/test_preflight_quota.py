"""preflight/quota.py on its own: what Kueue counts of a pod set and how a ClusterQueue's resource groups and
flavors hold it (Kueue 0.19's pkg/workload and flavorassigner). The emulator and real-cluster tests run the
same check through `helm nemo preflight`."""

from __future__ import annotations

from decimal import Decimal

import pytest

from helm_nemo.preflight.model import Release, Workload
from helm_nemo.preflight.quota import amount_text, kueue_requests, quota

RELEASE = Release("r", "jobset", "jobset", "ml", "a3ultra", {"preflight": {"gpuResource": "nvidia.com/gpu"}}, [])


def workload(spec: dict, pods: int = 4) -> Workload:
    return Workload("JobSet", "train", "ml", spec, {}, pods, {})


TRAINER = {
    "containers": [
        {"name": "t", "resources": {"limits": {"nvidia.com/gpu": "8"}, "requests": {"memory": "64Gi", "cpu": "0"}}},
        {"name": "s", "resources": {"requests": {"memory": "1Gi"}}},
    ],
    "initContainers": [
        {"name": "big-init", "resources": {"requests": {"memory": "100Gi"}}},  # the largest init: max, not sum
        {"name": "sidecar", "restartPolicy": "Always", "resources": {"requests": {"cpu": "500m"}}},  # summed
    ],
    "overhead": {"memory": "1Gi"},
}


def cluster_queue(*flavors: dict, covered: list[str] | None = None, cohort: str | None = None, used=None) -> dict:
    names = covered or sorted({r for f in flavors for r in f["quota"]})
    spec: dict = {
        "resourceGroups": [
            {
                "coveredResources": names,
                "flavors": [
                    {
                        "name": f["name"],
                        "resources": [
                            {"name": r, "nominalQuota": q, **({"borrowingLimit": f["borrow"]} if "borrow" in f else {})}
                            for r, q in f["quota"].items()
                        ],
                    }
                    for f in flavors
                ],
            }
        ]
    }
    if cohort:
        spec["cohort"] = cohort
    status = {
        "flavorsUsage": [
            {"name": n, "resources": [{"name": r, "total": t} for r, t in u.items()]} for n, u in (used or {}).items()
        ]
    }
    return {"metadata": {"name": "cq"}, "spec": spec, "status": status}


def test_kueue_counts_requests_limits_init_containers_sidecars_and_overhead():
    assert kueue_requests(workload(TRAINER)) == {
        "nvidia.com/gpu": Decimal(32),  # limits stand in for requests; times 4 pods
        "memory": Decimal(101 * 4 << 30),  # max(65Gi of containers, 100Gi init) + 1Gi overhead
        "cpu": Decimal(2),  # the sidecar's 500m; the container's 0 is dropped
    }


def test_uncovered_resources_fail_in_kueues_words():
    found = quota(RELEASE, workload(TRAINER), "cq", cluster_queue({"name": "f", "quota": {"nvidia.com/gpu": 64}}))
    assert found.verdict == "fail" and found.details["uncovered"] == ["cpu", "memory"]
    assert "requests 2 cpu, 404Gi memory" in found.message
    assert '"resource cpu unavailable in ClusterQueue"' in found.message and "covers nvidia.com/gpu" in found.message


def test_pods_counts_when_covered():
    queue = cluster_queue({"name": "f", "quota": {"nvidia.com/gpu": 64, "cpu": 8, "memory": "1Ti", "pods": 3}})
    found = quota(RELEASE, workload(TRAINER), "cq", queue)
    assert (
        found.verdict == "fail"
        and "insufficient quota for pods in flavor f" in found.message
        and "(4 > 3)" in found.message
    )


ALL = {"cpu": 8, "memory": "1Ti"}


@pytest.mark.parametrize(
    "flavors, verdict, words",
    [
        # 64 GPUs in all, but Kueue gives a pod set one flavor of a group: neither holds 32 + 8 ... 32 > 24
        (
            [
                {"name": "a", "quota": {"nvidia.com/gpu": 24, **ALL}},
                {"name": "b", "quota": {"nvidia.com/gpu": 40, "cpu": 1, "memory": "1Ti"}},
            ],
            "fail",
            "insufficient quota for nvidia.com/gpu in flavor a, request > maximum capacity (32 > 24)",
        ),
        # the first flavor is too small, the second holds it all: Kueue tries them in order
        (
            [
                {"name": "a", "quota": {"nvidia.com/gpu": 8, **ALL}},
                {"name": "b", "quota": {"nvidia.com/gpu": 32, **ALL}},
            ],
            "ok",
            "has 32 nvidia.com/gpu of quota (flavor b)",
        ),
        # memory is the resource short of quota
        (
            [{"name": "a", "quota": {"nvidia.com/gpu": 64, "cpu": 8, "memory": "400Gi"}}],
            "fail",
            "insufficient quota for memory in flavor a, request > maximum capacity (404Gi > 400Gi)",
        ),
    ],
    ids=["no-single-flavor", "second-flavor", "memory-short"],
)
def test_one_flavor_of_a_group_holds_the_pod_set(flavors, verdict, words):
    found = quota(RELEASE, workload(TRAINER), "cq", cluster_queue(*flavors))
    assert found.verdict == verdict and words in found.message, found.message


def test_borrowing_from_the_cohort_is_a_warning_within_the_borrowing_limit():
    short = {"name": "a", "quota": {"nvidia.com/gpu": 24, **ALL}}
    found = quota(RELEASE, workload(TRAINER), "cq", cluster_queue(short, cohort="pool"))
    assert found.verdict == "warn" and "borrowing from cohort pool" in found.message
    found = quota(RELEASE, workload(TRAINER), "cq", cluster_queue({**short, "borrow": 4}, cohort="pool"))
    assert found.verdict == "fail"  # 24 + 4 < 32


def test_usage_of_any_covered_resource_makes_it_wait():
    queue = cluster_queue({"name": "a", "quota": {"nvidia.com/gpu": 64, **ALL}}, used={"a": {"memory": "700Gi"}})
    found = quota(RELEASE, workload(TRAINER), "cq", queue)
    assert found.verdict == "warn" and "700Gi memory are in use by admitted workloads" in found.message


def test_amounts_are_written_as_a_manifest_would():
    assert amount_text("memory", Decimal(64000 << 20)) == "64000Mi"
    assert amount_text("hugepages-2Mi", Decimal(10 << 30)) == "10Gi"
    assert amount_text("nvidia.com/gpu", Decimal(1024)) == "1024"
    assert amount_text("memory", Decimal(1000)) == "1000"
