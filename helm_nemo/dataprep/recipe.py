"""A recipe's stages (docs/data-prep.md, "Recipe keys"): `after:` and `dataFrom:` on a release.

- `after: R` or `after: [R, ...]`: install this release once the Jobs of the earlier releases R of the same
  recipe completed (`helm nemo install` waits: helm_nemo/dataprep/wait.py);
- `dataFrom: R`: `after: [R]`, and R is a data-prep release whose outputs a nemo-training release trains on:
  it gets the Hydra argument `shards.data_prefix_override(R's values)` appended to `workload.arguments`.

Every mistake is a Problem at the key that makes it (file:line:col, exit 2, nothing sent to helm): an
unknown, later or the same release, a `dataFrom` that is no data-prep release or on a chart kind whose data
argument is unknown, a training that sets model.data.data_prefix itself, the keys in a plain values file.
"""

from __future__ import annotations

from pathlib import Path

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only
    from typing import Any

    from helm_nemo.user_errors import Problem
    from helm_nemo.values.loaded import LoadedValues
    from helm_nemo.values.release_plan import ReleasePlan

STAGE_KEYS = ("after", "dataFrom")
DATA_PREP = "data-prep"
TRAINING = "nemo-training"
DATA_PREFIX = "model.data.data_prefix"
# Chart kinds a chart folder's or oci:// reference's chart name starts with (`nemo-training-p4de`).
KINDS = ("data-prep", "nemo-training", "nccl-test", "jobset", "supervisor", "gcs-fuse", "fsx-lustre")


def chart_kind(plan: ReleasePlan) -> str:
    """The plan's chart kind: the kind it was named by, else the chart's name (Chart.yaml of a chart folder,
    the last part of an oci:// reference) without its accelerator suffix; "" when none fits."""
    if plan.chart_kind:
        return plan.chart_kind
    name = ""
    if plan.chart.startswith("oci://"):
        name = plan.chart.rstrip("/").rsplit("/", 1)[-1]
    else:
        chart_yaml = Path(plan.chart) / "Chart.yaml"
        try:
            import yaml

            name = str((yaml.safe_load(chart_yaml.read_text()) or {}).get("name") or "")
        except (OSError, ValueError, AttributeError):
            name = ""
    for kind in KINDS:
        if name == kind or name.startswith(kind + "-"):
            return kind
    return ""


def _problem(
    loaded: LoadedValues, where: tuple[Any, ...], message: str, expected: str | None = None, hint: str | None = None
) -> Problem:
    from helm_nemo.values.recipe import problem

    return problem(loaded, where, message, expected=expected, hint=hint)


def plain_file_problems(loaded: LoadedValues, data: dict[str, Any]) -> list[Problem]:
    """`after:`/`dataFrom:` in a values file that is not a recipe: there is no earlier release to wait for."""
    return [
        _problem(
            loaded,
            (key,),
            f"`{key}` is a key of a recipe's release, and this is a plain values file",
            expected=f"a recipe: releases: [{{release: R, chart: data-prep, …}}, {{release: T, {key}: R, …}}]",
            hint="put the releases into one recipe file (docs/data-prep.md)",
        )
        for key in STAGE_KEYS
        if key in data
    ]


def link(loaded: LoadedValues, items: list[tuple[int, dict[str, Any], ReleasePlan]]) -> list[Problem]:
    """Check the `after`/`dataFrom` of every release of a recipe ([(index in `releases`, the release
    mapping, its plan)], in order), record them on the plans (`plan.after`, `plan.data_from`) and add the
    training's data argument. The problems, at the keys that make them."""
    problems: list[Problem] = []
    position = {plan.release: (index, order) for order, (index, _, plan) in enumerate(items)}
    plans = {plan.release: plan for _, _, plan in items}
    for order, (index, item, plan) in enumerate(items):
        where = ("releases", index)

        def named(
            key: tuple[Any, ...],
            name: Any,
            what: str,
            where: tuple[Any, ...] = where,
            order: int = order,
            plan: ReleasePlan = plan,
        ) -> str | None:
            """The release `name` refers to when it is an earlier release of this recipe (else a problem)."""
            at = where + key
            earlier = [p.release for _, _, p in items[:order]]
            if not isinstance(name, str) or not name:
                problems.append(
                    _problem(
                        loaded,
                        at,
                        f"{what} names a release: {name!r} is not a release name",
                        expected="the name of an earlier release of this recipe",
                    )
                )
                return None
            if name == plan.release:
                problems.append(
                    _problem(
                        loaded,
                        at,
                        f"release {name!r} cannot wait for itself",
                        expected=f"one of the earlier releases: {', '.join(earlier) or 'none'}",
                    )
                )
                return None
            if name not in position:
                problems.append(
                    _problem(
                        loaded,
                        at,
                        f"no release {name!r} in this recipe",
                        expected=f"one of the earlier releases: {', '.join(earlier) or 'none'}",
                    )
                )
                return None
            if position[name][1] > order:
                line, _ = loaded.position(("releases", position[name][0]))
                problems.append(
                    _problem(
                        loaded,
                        at,
                        f"release {name!r} comes later in the recipe (line {line}); releases are installed in order",
                        expected=f"one of the earlier releases: {', '.join(earlier) or 'none'}",
                        hint=f"move {name!r} before {plan.release!r}",
                    )
                )
                return None
            return name

        after: list[str] = []
        if "after" in item:
            raw = item["after"]
            entries = (
                [((("after",), raw))]
                if not isinstance(raw, list)
                else [(("after", k), entry) for k, entry in enumerate(raw)]
            )
            if isinstance(raw, list) and not raw:
                problems.append(
                    _problem(
                        loaded,
                        where + ("after",),
                        "`after` is an empty list",
                        expected="a release name or a list of earlier releases",
                    )
                )
            for key, entry in entries:
                name = named(key, entry, "`after`")
                if name is not None and name not in after:
                    after.append(name)
        if "dataFrom" in item:
            source = named(("dataFrom",), item["dataFrom"], "`dataFrom`")
            if source is not None:
                if source not in after:
                    after.append(source)
                problems.extend(_data_from(loaded, where, item, plan, plans[source], position[source][0]))
        plan.after = after
    return problems


def _data_from(
    loaded: LoadedValues,
    where: tuple[Any, ...],
    item: dict[str, Any],
    plan: ReleasePlan,
    source: ReleasePlan,
    source_index: int,
) -> list[Problem]:
    from helm_nemo.dataprep import shards

    at = where + ("dataFrom",)
    source_kind = chart_kind(source)
    if source_kind != DATA_PREP:
        line, _ = loaded.position(("releases", source_index))
        return [
            _problem(
                loaded,
                at,
                f"release {source.release!r} (line {line}) is a "
                f"{source_kind or 'chart ' + repr(source.chart)} release, not a data-prep release",
                expected="the name of an earlier release with chart: data-prep",
                hint="to only wait for it, write `after:` instead",
            )
        ]
    kind = chart_kind(plan)
    if kind != TRAINING:
        return [
            _problem(
                loaded,
                at,
                f"`dataFrom` on a {kind or 'chart ' + repr(plan.chart)} release: only a "
                f"{TRAINING} release's data argument ({DATA_PREFIX}) is known",
                hint=f"write `after: {source.release}` and point the workload at the data-prep outputs "
                "(output.path) yourself",
            )
        ]
    prefix = plan.json_prefix
    set_at = data_prefix_set(plan.values)
    if set_at is not None:
        line, column = loaded.position(prefix + set_at)
        dline, _ = loaded.position(at)
        return [
            _problem(
                loaded,
                prefix + set_at,
                f"{DATA_PREFIX} is set here and by `dataFrom: {source.release}` (line {dline}); neither wins",
                expected=f"one of them: remove this argument, or `dataFrom` (then `after: "
                f"{source.release}` still waits for it)",
                hint=f"also at {loaded.file_of(at)}:{dline} ($.releases[{where[1]}].dataFrom)",
            )
        ]
    from helm_nemo.dataprep.storage import training_root

    try:
        values = source_values(source)
        root, unseen = training_root(values, plan.values)
        if unseen:
            return [
                _problem(
                    loaded,
                    at,
                    f"release {plan.release!r} would not see the outputs of {source.release!r}: {unseen}",
                    expected="the same claim (volumes.pvcMounts) or bucket (volumes.gcsMounts, "
                    "workload.gcsBucketForDataCataPath) in the training's values",
                    hint=f"mount it in {plan.release!r}; the data prefixes follow the training's mount path",
                )
            ]
        argument = shards.data_prefix_override(values, root)
    except shards.ShardError as err:
        return [
            _problem(
                loaded,
                source.json_prefix + tuple(err.path),
                f"the shards of {source.release!r} (dataFrom of {plan.release!r}): {err.message}",
                expected=err.expected,
            )
        ]
    except (KeyError, TypeError, ValueError, AttributeError) as err:
        return [
            _problem(
                loaded,
                source.json_prefix,
                f"cannot derive {DATA_PREFIX} from the values of {source.release!r} ({type(err).__name__}: {err})",
                expected="shards: {numbers, urlPattern} or {files}, output: {path}",
            )
        ]
    workload = plan.values.get("workload")
    if workload is None:
        workload = plan.values["workload"] = {}
    if not isinstance(workload, dict):
        return []  # the schema has said what is wrong with it
    arguments = workload.get("arguments")
    workload["arguments"] = [*(arguments if isinstance(arguments, list) else []), argument]
    plan.data_from = source.release
    return []


def source_values(plan: ReleasePlan) -> dict[str, Any]:
    """A data-prep release's values as its chart sees them: the chart's defaults, then the release's."""
    from helm_nemo.values.chart_values import chart_defaults, merge_values

    local = plan.local_chart
    defaults: dict[str, Any] = {}
    if local is not None and (local / "values.yaml").is_file():
        defaults = chart_defaults(local)
    merged: dict[str, Any] = merge_values(defaults, plan.values)
    return merged


def data_prefix_set(values: dict[str, Any]) -> tuple[Any, ...] | None:
    """Where the values' workload.arguments set model.data.data_prefix (a `name:` entry or a `key=value`
    string, with Hydra's `+`/`++` prefixes), as a path inside the values; None when they do not."""
    arguments = (values.get("workload") or {}).get("arguments") if isinstance(values.get("workload"), dict) else None
    if not isinstance(arguments, list):
        return None
    for index, entry in enumerate(arguments):
        if isinstance(entry, dict) and str(entry.get("name", "")).lstrip("+") == DATA_PREFIX:
            return ("workload", "arguments", index, "name")
        if isinstance(entry, str) and entry.lstrip("+").partition("=")[0].strip() == DATA_PREFIX:
            return ("workload", "arguments", index)
    return None
