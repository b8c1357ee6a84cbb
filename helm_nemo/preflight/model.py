"""What a check returns, and what it reads about the releases (rendered objects, workloads, profiles)."""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only
    from collections.abc import Iterable
    from typing import Any

    from helm_nemo.values.release_plan import ReleasePlan

OK, WARN, FAIL, SKIPPED = "ok", "warn", "fail", "skipped"
ORDER = {FAIL: 0, WARN: 1, SKIPPED: 2, OK: 3}


@dataclass
class Result:
    """One check's verdict: `id` (stable, e.g. "queue.quota"), `verdict` (ok/warn/fail/skipped), one-line
    `message`, a `hint` saying how to fix it (fail/warn) or why it was skipped, the `release` it is about
    (None: the whole run)."""

    id: str
    verdict: str
    message: str
    hint: str | None = None
    release: str | None = None
    details: dict[str, Any] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id,
            "verdict": self.verdict,
            "release": self.release,
            "message": self.message,
            "hint": self.hint,
        }
        if self.details:
            out["details"] = self.details
        return out


@dataclass
class Workload:
    """A rendered object that makes pods: its pod template and how many pods."""

    kind: str
    name: str
    namespace: str
    spec: dict[str, Any]  # the pod spec
    meta: dict[str, Any]  # the pod template's metadata
    pods: int
    labels: dict[str, Any]  # the workload object's own labels (kueue.x-k8s.io/queue-name sits there)

    def requests(self) -> dict[str, Decimal]:
        """Per pod: the effective request of every resource (regular containers summed, the largest init
        container if larger), requests else limits, as the scheduler counts them."""
        from helm_nemo.validate.quantity import parse_quantity

        regular: dict[str, Decimal] = {}  # containers and sidecars (init containers that keep running)
        init: dict[str, Decimal] = {}  # the largest plain init container
        for key in ("containers", "initContainers"):
            for container in self.spec.get(key) or []:
                if not isinstance(container, dict):
                    continue
                resources = container.get("resources") or {}
                amounts = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
                summed = key == "containers" or container.get("restartPolicy") == "Always"
                for name, value in amounts.items():
                    try:
                        amount = parse_quantity(value)
                    except Exception:  # the manifest check reports bad quantities
                        amount = None
                    if amount is None:
                        continue
                    if summed:
                        regular[name] = regular.get(name, Decimal(0)) + amount
                    else:
                        init[name] = max(init.get(name, Decimal(0)), amount)
        return {
            name: max(regular.get(name, Decimal(0)), init.get(name, Decimal(0))) for name in set(regular) | set(init)
        }


@dataclass
class Release:
    """One release of the run as preflight sees it."""

    name: str
    chart: str
    chart_kind: str
    namespace: str
    accelerator: str | None
    profile: dict[str, Any] | None
    objects: list[dict[str, Any]]
    kube_version_constraint: str | None = None

    def workloads(self) -> list[Workload]:
        from helm_nemo.validate.pods import pod_templates

        out = []
        for obj in self.objects:
            for template in pod_templates(obj):
                meta = obj.get("metadata") or {}
                out.append(
                    Workload(
                        obj.get("kind", ""),
                        meta.get("name", ""),
                        meta.get("namespace") or self.namespace,
                        template.spec,
                        template.meta or {},
                        template.pods,
                        meta.get("labels") or {},
                    )
                )
        return out


def release_of(plan: ReleasePlan, text: str, namespace: str) -> Release:
    """A plan and its rendered text -> Release (objects parsed, the chart's kubeVersion, the profile)."""
    from helm_nemo.validate.documents import parse_documents

    documents, _ = parse_documents(text)
    objects = [d.data for d in documents if isinstance(d.data, dict)]
    profile = None
    if plan.accelerator:
        from helm_nemo.validate.manifests import shipped_profile

        profile = shipped_profile(plan.accelerator)
    constraint = None
    chart = plan.local_chart
    if chart is not None:
        import re
        from pathlib import Path

        chart_yaml = Path(chart) / "Chart.yaml"
        if chart_yaml.is_file():
            found = re.search(r"^kubeVersion:\s*[\"']?([^\"'\n]+)", chart_yaml.read_text(), re.M)
            constraint = found.group(1).strip() if found else None
    return Release(
        plan.release, plan.chart, plan.chart_kind or "", namespace, plan.accelerator, profile, objects, constraint
    )


def quantity_text(amount: Decimal) -> str:
    return str(int(amount)) if amount == amount.to_integral_value() else str(amount.normalize())


def gpu_resource(release: Release) -> str:
    """The extended resource the profile's GPUs are allocatable as (profile data, default nvidia.com/gpu)."""
    return ((release.profile or {}).get("preflight") or {}).get("gpuResource") or "nvidia.com/gpu"


def profile_hint(release: Release, name: str, default: str) -> str:
    """The profile's fix hint for a resource, CSI driver or API (preflight.hints), else `default`."""
    return ((release.profile or {}).get("preflight") or {}).get("hints", {}).get(name) or default


def run_hint(releases: Iterable[Release], name: str, default: str) -> str:
    """The first profile hint for `name` among the run's releases (a recipe's storage release has no
    accelerator; its workload's profile knows the cloud), else `default`."""
    for release in releases:
        hint: str | None = ((release.profile or {}).get("preflight") or {}).get("hints", {}).get(name)
        if hint:
            return hint
    return default


def obj_key(obj: dict[str, Any]) -> tuple[str, str, str, str]:
    meta = obj.get("metadata") or {}
    return obj.get("apiVersion", ""), obj.get("kind", ""), meta.get("namespace", ""), meta.get("name", "")


def first(values: Any, limit: int = 3) -> str:
    values = list(values)
    text = ", ".join(str(v) for v in values[:limit])
    return text + (f" (+{len(values) - limit} more)" if len(values) > limit else "")
