"""Render and validate releases: `helm nemo lint`, and template/install before they output or install."""

from __future__ import annotations

from pathlib import Path

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: importing typing costs every run start-up time
    from collections.abc import Callable, Iterable

    from helm_nemo.actions.helm import HelmBinary
    from helm_nemo.validate.documents import Document, ManifestProblem
    from helm_nemo.values.release_plan import ReleasePlan

    Echo = Callable[[str], None]
    Parsed = tuple[list[Document], list[ManifestProblem]]

from helm_nemo.actions import releases
from helm_nemo.validate.documents import DEFAULT_KUBE_VERSION, parse_documents
from helm_nemo.validate.manifests import duplicate_objects, format_problems, validate_manifests
from helm_nemo.validate.schemas import resolve_kube_version


def kube_version_from_flags(extra: Iterable[str], default: str = DEFAULT_KUBE_VERSION) -> str:
    """The `--kube-version` the user passes through to helm, if any: validate for the same version."""
    args = list(extra)
    for i, arg in enumerate(args):
        if arg == "--kube-version" and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith("--kube-version="):
            return arg.split("=", 1)[1]
    return default


def _kube_label(kube_version: str) -> str:
    major, minor = resolve_kube_version(kube_version)
    return f"{major}.{minor}"


def expected_kinds(chart: Path) -> set[tuple[str, str]]:
    """(apiVersion, kind) of the objects a generated chart's templates write (a literal `apiVersion:` line
    followed by a `kind:` line), read from the templates without rendering them."""
    import re

    found = set()
    pattern = re.compile(r"^apiVersion: *([\w./-]+)\s*\n(?:.*\n)??kind: *(\w+)", re.M)
    for template in (chart / "templates").glob("*.yaml"):
        found.update(pattern.findall(template.read_text(encoding="utf-8")))
    return found


def warm_validators(plans: Iterable[ReleasePlan], kube_version: str = DEFAULT_KUBE_VERSION) -> None:
    """Compile the validators and read the profiles the rendered releases will need (run while helm renders;
    every lookup is cached, so the check itself then finds them ready). Only a speed-up: what it misses the
    check compiles when it meets it."""
    from helm_nemo.validate.compiled import validator_for
    from helm_nemo.validate.manifests import shipped_profile

    kube = resolve_kube_version(kube_version)
    for plan in plans:
        chart = plan.local_chart
        if chart is not None:
            for api_version, kind in sorted(expected_kinds(Path(chart))):
                validator_for(api_version, kind, kube)
        if plan.accelerator:
            shipped_profile(plan.accelerator)


def kube_version_for(plan: object, kube_version: str) -> str:
    """At least the plan's accelerator's minKubernetesVersion (A4X Max's RDMA claims need DRA's
    resource.k8s.io/v1, Kubernetes 1.34): the objects are validated for a version that can run them."""
    from helm_nemo.validate.manifests import shipped_profile

    accelerator = getattr(plan, "accelerator", None)
    minimum = ((shipped_profile(accelerator) if accelerator else None) or {}).get("minKubernetesVersion")
    if minimum and resolve_kube_version(minimum) > resolve_kube_version(kube_version):
        return str(minimum)
    return kube_version


def check_rendered(
    plan: ReleasePlan,
    text: str,
    *,
    kube_version: str = DEFAULT_KUBE_VERSION,
    echo: Echo = print,
    hint: str | None = None,
    parsed: Parsed | None = None,
) -> bool:
    """Validate one release's rendered text (`parsed`: what parse_documents made of it, when already done);
    echo its problems (if any). True when clean."""
    kube_version = kube_version_for(plan, kube_version)
    documents, problems = parsed or parse_documents(text)
    problems = problems + validate_manifests(documents, kube_version=kube_version)
    if problems:
        echo(
            format_problems(
                problems,
                title=f"helm nemo: release {plan.release} ({plan.chart}): the rendered "
                f"manifests do not validate (Kubernetes {_kube_label(kube_version)}):",
            )
        )
        if hint:
            echo(hint)
    return not problems


def check_duplicates(
    rendered: list[tuple[ReleasePlan, str]],
    *,
    echo: Echo = print,
    hint: str | None = None,
    parsed: list[Parsed] | None = None,
) -> bool:
    """No object rendered by two releases of the run (a PV, a PVC, a ConfigMap …); True when none is.
    `parsed`: each release's parse_documents result, when already done."""
    streams = [documents for documents, _ in parsed] if parsed else [text for _, text in rendered]
    problems = duplicate_objects((plan.release, stream) for (plan, _), stream in zip(rendered, streams, strict=True))
    if problems:
        echo(format_problems(problems, title="helm nemo: releases of this run render the same object:"))
        if hint:
            echo(hint)
    return not problems


def check_recipe(
    rendered: list[tuple[ReleasePlan, str]],
    *,
    kube_version: str = DEFAULT_KUBE_VERSION,
    echo: Echo = print,
    hint: str | None = None,
) -> bool:
    """Every release's rendered text (check_rendered), then the objects they share (check_duplicates); each
    text parsed once for both."""
    parsed = [parse_documents(text) for _, text in rendered]
    clean = all(
        [
            check_rendered(plan, text, kube_version=kube_version, echo=echo, hint=hint, parsed=found)
            for (plan, text), found in zip(rendered, parsed, strict=True)
        ]
    )
    return check_duplicates(rendered, echo=echo, hint=hint, parsed=parsed) and clean


def lint_plans(
    plans: list[ReleasePlan],
    helm: HelmBinary,
    extra: list[str],
    *,
    kube_version: str = DEFAULT_KUBE_VERSION,
    echo: Echo = print,
    err: Echo = print,
) -> int:
    """Render every release with helm template and validate it: 0 clean, 2 problems, helm's code if rendering fails."""
    for plan in plans:
        for warning in plan.warnings:
            err(f"warning: {warning}")
    rendered, code = releases.render_each(plans, helm, extra, err, warm=lambda: warm_validators(plans, kube_version))
    if code:
        return code
    clean = True
    for plan, text in rendered:
        if check_rendered(plan, text, kube_version=kube_version, echo=echo):
            count = len(parse_documents(text)[0])
            echo(
                f"ok: release {plan.release} ({plan.chart}): {count} object(s) valid "
                f"(Kubernetes {_kube_label(kube_version_for(plan, kube_version))} and CRD schemas)"
            )
        else:
            clean = False
    clean = check_duplicates(rendered, echo=echo) and clean
    return 0 if clean else releases.EXIT_INVALID_MANIFESTS


SKIP_HINT = "(--skip-manifest-validation skips this check)"


def preflight(
    plans: list[ReleasePlan],
    helm: HelmBinary,
    extra: list[str],
    *,
    echo: Echo = print,
    validate: bool = True,
    cluster: Callable[[list[tuple[ReleasePlan, str]]], int] | None = None,
) -> int:
    """Before installing: render every release of the recipe and validate it (unless `validate` is False),
    then give the rendered [(plan, text)] to `cluster` (the cluster preflight, helm_nemo.actions.preflight),
    so none is installed if one is invalid or a check fails. 0 when all are clean."""
    kube_version = kube_version_from_flags(extra)
    rendered, code = releases.render_each(
        plans,
        helm,
        extra,
        echo,
        empty="; nothing was installed",
        failed=f" for validation failed; nothing was installed {SKIP_HINT}",
        warm=(lambda: warm_validators(plans, kube_version)) if validate else None,
    )
    if code:
        return code
    if validate and not check_recipe(rendered, kube_version=kube_version, echo=echo):
        echo(f"helm nemo: nothing was installed {SKIP_HINT}")
        return releases.EXIT_INVALID_MANIFESTS
    return cluster(rendered) if cluster is not None else 0
