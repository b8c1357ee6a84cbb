"""Which changes to an installed object the cluster refuses on update: the immutable fields of the
workloads helm-nemo creates, as data, read from the code that enforces them.

- batch/v1 Job: kubernetes pkg/apis/batch/validation/validation.go, ValidateJobSpecUpdate and
  validatePodTemplateUpdate (v1.36): `spec.template` is immutable unless the Job is suspended and never
  started, and then only its labels, annotations, nodeSelector, tolerations, schedulingGates and node
  affinity may change (pkg/registry/batch/job/strategy.go, validationOptionsForJob); `spec.selector`,
  `completionMode`, `podFailurePolicy`, `backoffLimitPerIndex`, `managedBy`, `successPolicy` are
  immutable; `completions` too, except on an Indexed Job together with an equal `parallelism`
  (validateCompletions). `parallelism`, `suspend`, `activeDeadlineSeconds`, `backoffLimit` and
  `ttlSecondsAfterFinished` may change.
- jobset.x-k8s.io JobSet: kubernetes-sigs/jobset pkg/webhooks/jobset_webhook.go, ValidateUpdate:
  `spec.replicatedJobs` is immutable, except that while the JobSet is (or is being) suspended each
  replicated job's pod template labels, annotations, nodeSelector, tolerations and schedulingGates may
  change (for Kueue); `spec.managedBy` too. The CRD's CEL rules (`self == oldSelf`, api/jobset/v1alpha2/
  jobset_types.go) make `network`, `successPolicy`, `failurePolicy`, `startupPolicy` and
  `volumeClaimPolicies` immutable. (The ElasticJobSet gate, alpha and off by default, is not assumed.)

Whether the object is suspended is read from the live object when the caller has it; without it the
object counts as running and a Job as started (the safe side: a change the server might take in place is
called for a new workload, never the reverse). The installed manifest does not tell: a queued JobSet is
created suspended and Kueue resumes it on admission.
"""

from __future__ import annotations

import copy
from typing import Any, NamedTuple

from helm_nemo.diff.semantic import Difference, _diff, normalize

EVERY = "[*]"  # every item of a named list, paired by name between the old and the new object


class UpdateRule(NamedTuple):
    group: str
    kind: str
    enforced_by: str  # who refuses, as the user will read it in helm's error
    immutable: tuple[str, ...]
    mutable_while_suspended: tuple[str, ...] = ()  # paths under `immutable` that a suspended object may change
    suspended_if: tuple[str, ...] = ("old",)  # whose spec.suspend counts: the installed object's, the new one's
    tandem: tuple[tuple[str, str], ...] = ()  # (path, partner): may change when both end up equal (Indexed Job)


_POD_SCHEDULING = (
    "metadata.labels",
    "metadata.annotations",
    "spec.nodeSelector",
    "spec.tolerations",
    "spec.schedulingGates",
)

RULES: dict[tuple[str, str], UpdateRule] = {
    ("batch", "Job"): UpdateRule(
        "batch",
        "Job",
        "the API server (Job validation)",
        immutable=(
            "spec.selector",
            "spec.template",
            "spec.completions",
            "spec.completionMode",
            "spec.podFailurePolicy",
            "spec.backoffLimitPerIndex",
            "spec.managedBy",
            "spec.successPolicy",
        ),
        mutable_while_suspended=tuple(f"spec.template.{p}" for p in _POD_SCHEDULING)
        + ("spec.template.spec.affinity.nodeAffinity",),
        tandem=(("spec.completions", "spec.parallelism"),),
    ),
    ("jobset.x-k8s.io", "JobSet"): UpdateRule(
        "jobset.x-k8s.io",
        "JobSet",
        "the JobSet admission webhook and CRD rules",
        immutable=(
            "spec.replicatedJobs",
            "spec.managedBy",
            "spec.network",
            "spec.successPolicy",
            "spec.failurePolicy",
            "spec.startupPolicy",
            "spec.volumeClaimPolicies",
        ),
        mutable_while_suspended=tuple(
            f"spec.replicatedJobs{EVERY}.template.spec.template.{p}" for p in _POD_SCHEDULING
        ),
        suspended_if=("old", "new"),
    ),
}


class Refusal(NamedTuple):
    """A field the cluster will not change in place: which, why, and the differences under it."""

    path: str  # `spec.replicatedJobs`
    reason: str
    differences: list[Difference]


def rule_for(obj: dict[str, Any]) -> UpdateRule | None:
    group = str(obj.get("apiVersion") or "").rpartition("/")[0]
    return RULES.get((group, str(obj.get("kind") or "")))


def _suspended(obj: dict[str, Any]) -> bool:
    return (obj.get("spec") or {}).get("suspend") is True


def _step(node: Any, key: str) -> Any:
    return node.get(key) if isinstance(node, dict) else None


def _get(obj: Any, path: str) -> Any:
    for key in path.split("."):
        obj = _step(obj, key)
    return obj


def _copy_from_old(new: Any, old: Any, path: str) -> None:
    """Set `path` of `new` to old's value (absent when old has none); `name[*]` pairs list items by name."""
    head, _, rest = path.partition(".")
    if head.endswith(EVERY):
        key = head[: -len(EVERY)]
        new_items, old_items = _step(new, key), _step(old, key)
        if not isinstance(new_items, list) or not isinstance(old_items, list):
            return
        by_name = {item.get("name"): item for item in old_items if isinstance(item, dict)}
        for item in new_items:
            if isinstance(item, dict) and item.get("name") in by_name:
                _copy_from_old(item, by_name[item.get("name")], rest)
        return
    if not isinstance(new, dict):
        return
    if not rest:
        if isinstance(old, dict) and head in old:
            new[head] = copy.deepcopy(old[head])
        else:
            new.pop(head, None)
        return
    if head not in new:
        if not (isinstance(old, dict) and isinstance(old.get(head), dict)):
            return
        new[head] = {}
    _copy_from_old(new[head], _step(old, head), rest)


def refusals(old: dict[str, Any], new: dict[str, Any], live: dict[str, Any] | None = None) -> list[Refusal]:
    """What of the change old -> new the cluster refuses (empty: it can be applied in place). `old` is the
    installed manifest, `live` the object as the cluster holds it now, when read: whether it is suspended is
    the cluster's to say (Kueue resumes a JobSet the manifest created suspended), so without `live` it counts
    as running (for a Job, also: as started)."""
    rule = rule_for(new)
    if rule is None or rule_for(old) != rule:
        return []
    # "new" counts when this upgrade suspends it; a manifest that always says so (a queued JobSet) is Kueue's
    state = {"old": live if live is not None else {}, "new": new if not _suspended(old) else {}}
    suspended = any(_suspended(state[whose]) for whose in rule.suspended_if)
    if rule.kind == "Job" and live is not None and (live.get("status") or {}).get("startTime"):
        suspended = False  # the pod template of a Job that has started is immutable, suspended or not
    munged = copy.deepcopy(new)
    if suspended:
        for path in rule.mutable_while_suspended:
            _copy_from_old(munged, old, path)
    everything: list[Difference] = []
    _diff(normalize(old), normalize(munged), "", everything, text=True)
    out = []
    for path in rule.immutable:
        differences = [
            d for d in everything if d.path == "." + path or d.path.startswith(("." + path + ".", "." + path + "["))
        ]
        if not differences:
            continue
        partner = dict(rule.tandem).get(path)
        if partner and _get(new, "spec.completionMode") == "Indexed" and _get(new, partner) == _get(new, path):
            continue
        loosened = any(m.startswith((path + ".", path + EVERY)) for m in rule.mutable_while_suspended)
        why = (
            "immutable"
            if not loosened
            else "immutable; even while suspended only its pods' labels, annotations, nodeSelector, tolerations and "
            "schedulingGates may change"
            if suspended
            else "immutable while it is not suspended"
        )
        out.append(Refusal(path, f"{rule.kind}.{path} is {why}: {rule.enforced_by}", differences))
    return out
