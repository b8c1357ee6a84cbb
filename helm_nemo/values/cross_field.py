"""Rules between values that a JSON schema cannot say, checked before helm runs, with file:line.

The jobset and nemo-training charts `fail` on these combinations (generator/shared/helpers.tpl.j2 and
generator/nemo-training/templates/_training.tpl): that stays, for a plain `helm install`, but through helm
nemo it was exit 1 from helm, without a line. Each rule here mirrors one `fail` (RULES names them, and
tests/test_hardening_classes.py checks that every `fail` of the chart sources has its rule), on the values
helm would see (the chart's defaults merged with the user's). The profile facts the rules need (GPUs per
node, node labels) travel in the chart's schema under `x-helm-nemo-checks` (helm_nemo/generate/charts.py),
so a chart pulled from a registry is checked with its own facts; a schema without them is not checked here.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: importing typing costs every run start-up time
    from typing import Any
    from collections.abc import Callable

CHECKS_KEY = "x-helm-nemo-checks"
MAX_HOSTNAME = 63  # a pod's hostname is a DNS-1123 label
# The `fail` each rule mirrors: its words in the chart sources -> the rule's name (tests walk the sources).
RULES = {
    "workload.gpus must be at least 1": "schema",  # minimum 1
    "nodes have": "schema",  # gpus at most a node or a multiple (anyOf maximum / multipleOf)
    "pod hostname": "hostname",
    "workload.enable_local_ckpt needs volumes.ssdMountPath": "local-ckpt-needs-ssd",
    "both run a ckpt-cleaner sidecar": "one-ckpt-cleaner",
    "contradicts the": "node-selector",
    "Nsight profile: end step": "nsys-steps",
    "disagrees with workload.gpus": "nodes",
    "volumes.nfsMountPath needs volumes.nfsServer": "nfs-server",
    "volumes.gcsDownload copies to the local SSD": "download-needs-ssd",
    "is not under volumes.ssdMountPath": "download-target",
    "workload.gcsBucketForDataCataPath needs volumes.gcsVolumes": "gcs-bucket-needs-sidecar",
    "data-prep shards:": "data-prep-shards",
    "data-prep output.path": "data-prep-output",
}


def _map(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def nodes_of(gpus: int, per_node: int) -> int:
    """The chart's `nemo.nodes`: one node up to a node's GPUs, else gpus / per_node."""
    return 1 if gpus <= per_node else gpus // per_node


def _overrides(arguments: Any) -> dict[str, str]:
    """model.nsys_profile.* set by workload.arguments (Hydra overrides; later ones win), as the chart reads them."""
    given: dict[str, str] = {}
    for item in arguments if isinstance(arguments, list) else []:
        if isinstance(item, dict):
            value = item.get("value")
            if isinstance(value, list):
                value = "[" + ",".join(str(v) for v in value) + "]"
            text = str(item.get("name", "")) + ("" if value is None else f"={value}")
        else:
            text = str(item).lower() if isinstance(item, bool) else str(item)
        key, _, value = text.partition("=")
        key = key.lstrip("+") if not key.startswith("+++") else key
        if key.startswith("model.nsys_profile."):
            given[key[len("model.nsys_profile.") :]] = value.strip()
    return given


def cross_field_problems(
    merged: dict[str, Any],
    schema: dict[str, Any],
    release: str,
    *,
    release_on_command_line: bool,
    add: Callable[..., None],
    user: dict[str, Any] | None = None,
) -> None:
    """Call `add(path, message, expected=None, hint=None)` for every rule the values break (path None: the
    release name given on the command line)."""
    facts = schema.get(CHECKS_KEY)
    if not isinstance(facts, dict):
        return
    user = user if user is not None else merged
    if facts.get("kind") == "data-prep":
        data_prep_problems(merged, add)
        return
    workload = _map(merged.get("workload"))
    volumes = _map(merged.get("volumes"))
    per_node = facts["gpusPerNode"]
    gpus = _int(workload.get("gpus"))
    kind = facts["kind"]

    # hostname: the last pod's host name (<name>-workload-0-<i> / <name>-<i>) is a DNS label
    if gpus is not None and gpus >= 1 and isinstance(release, str):
        suffix = workload.get("nameSuffix")
        name = f"{release}-{suffix}" if isinstance(suffix, str) and suffix else release
        last = nodes_of(gpus, per_node) - 1
        hostname = f"{name}-workload-0-{last}" if kind == "jobset" else f"{name}-{last}"
        if len(hostname) > MAX_HOSTNAME:
            room = MAX_HOSTNAME - (len(hostname) - len(name))
            at: tuple[str, ...] | None = (
                ("workload", "nameSuffix")
                if _map(user.get("workload")).get("nameSuffix")
                else None
                if release_on_command_line
                else ("release",)
            )
            add(
                at,
                f"name {name!r} is too long: the last pod's hostname {hostname!r} is {len(hostname)} characters, "
                f"more than {MAX_HOSTNAME}",
                f"release name{' + -suffix' if name != release else ''} of at most "
                f"{room} characters for {last + 1} node(s)",
                "use a shorter release name (or nameSuffix)",
            )

    if workload.get("enable_local_ckpt") and not volumes.get("ssdMountPath"):
        add(
            ("workload", "enable_local_ckpt"),
            "workload.enable_local_ckpt needs volumes.ssdMountPath",
            "volumes.ssdMountPath: /ssd (the node's local SSD)",
            "set volumes.ssdMountPath, or drop enable_local_ckpt",
        )
    if workload.get("enable_local_ckpt") and workload.get("enable_ckpt_cleaner") and workload.get("local_ckpt_dir"):
        add(
            ("workload", "enable_ckpt_cleaner"),
            "workload.enable_local_ckpt and workload.enable_ckpt_cleaner both run a ckpt-cleaner sidecar",
            hint="choose one of them",
        )

    labels = facts.get("nodeLabels") or {}
    for at, source in (
        (("nodeSelector",), merged.get("nodeSelector")),
        (("workload", "nodeSelector"), workload.get("nodeSelector")),
    ):
        for key, value in _map(source).items():
            if key in labels and str(value) != str(labels[key]):
                add(
                    at + (key,),
                    f"nodeSelector {key}={value} contradicts the {facts['displayName']} nodes' label "
                    f"{key}={labels[key]} (this chart is for {facts['displayName']})",
                    f"{key}: {labels[key]}, or leave it out",
                    "pick the chart of the accelerator these nodes have",
                )

    if kind != "nemo-training":
        return
    if _int(workload.get("nodes")) and gpus is not None and gpus >= 1 and workload["nodes"] != nodes_of(gpus, per_node):
        add(
            ("workload", "nodes"),
            f"workload.nodes={workload['nodes']} disagrees with workload.gpus={gpus} "
            f"({nodes_of(gpus, per_node)} node(s) of {per_node} GPUs)",
            f"nodes: {nodes_of(gpus, per_node)}",
            "drop workload.nodes or fix one of them",
        )
    if volumes.get("nfsMountPath") and not volumes.get("nfsServer"):
        add(
            ("volumes", "nfsMountPath"),
            "volumes.nfsMountPath needs volumes.nfsServer (and volumes.nfsPath)",
            "volumes.nfsServer: <Filestore IP or host>",
        )
    inner, outer = _map(volumes.get("gcsDownload")), _map(merged.get("gcsDownload"))
    where: tuple[str, ...] = ("volumes", "gcsDownload") if inner.get("source") else ("gcsDownload",)
    download = inner if inner.get("source") else outer if outer.get("source") else {}
    ssd = volumes.get("ssdMountPath")
    if download.get("source") and not ssd:
        add(
            where + ("source",),
            "volumes.gcsDownload copies to the local SSD: set volumes.ssdMountPath",
            "volumes.ssdMountPath: /ssd",
        )
    target = download.get("target")
    if (
        isinstance(target, str)
        and target
        and isinstance(ssd, str)
        and ssd
        and not (target.removesuffix("/") + "/").startswith(ssd.removesuffix("/") + "/")
    ):
        add(
            where + ("target",),
            f"volumes.gcsDownload.target {target} is not under volumes.ssdMountPath {ssd}",
            f"a folder under {ssd}",
        )
    if workload.get("gcsBucketForDataCataPath") and not volumes.get("gcsVolumes"):
        add(
            ("workload", "gcsBucketForDataCataPath"),
            "workload.gcsBucketForDataCataPath needs volumes.gcsVolumes=true (GCS FUSE sidecar)",
            "volumes.gcsVolumes: true",
        )

    profile = _map(workload.get("profile"))
    given = _overrides(workload.get("arguments"))
    enabled = bool(profile.get("enabled"))
    if "enabled" in given:
        enabled = given["enabled"].lower() in ("true", "1", "yes", "on")
    start = str(_int(profile.get("startStep"))) if _int(profile.get("startStep")) is not None else "10"
    end = str(_int(profile.get("endStep"))) if _int(profile.get("endStep")) is not None else "12"
    start, end = given.get("start_step", start), given.get("end_step", end)
    if enabled and start.isdigit() and end.isdigit() and int(end) < int(start):
        add(
            ("workload", "arguments")
            if "end_step" in given or "start_step" in given
            else ("workload", "profile", "endStep"),
            f"Nsight profile: end step {end} is before start step {start}",
            f"an end step of at least {start}",
        )


def data_prep_problems(merged: dict[str, Any], add: Callable[..., None]) -> None:
    """The data-prep chart's `fail` rules (generator/data-prep/templates/_helpers.tpl): the shard list expands
    (helm_nemo/dataprep/shards.py: numbers, names, checksums), and once there is a shard or a download,
    output.path lies under a mount that is not read-only (the deepest mount holding it)."""
    from helm_nemo.dataprep.shards import ShardError, expand

    try:
        shards = expand(merged)
    except ShardError as error:
        add(error.path, f"data-prep shards: {error.message}", error.expected)
        return
    except (AttributeError, KeyError, TypeError, ValueError):
        return  # a shape the schema check reports
    if not shards and not merged.get("downloads"):
        return  # nothing to prepare: the chart renders nothing
    output = _map(merged.get("output")).get("path")
    volumes = _map(merged.get("volumes"))
    mounts = [m for key in ("pvcMounts", "gcsMounts") for m in volumes.get(key) or [] if isinstance(m, dict)]
    paths = [str(m.get("mountPath")) for m in mounts]
    if not isinstance(output, str) or not output:
        add(
            ("output", "path"),
            "data-prep output.path: set the folder the .bin/.idx files go to",
            "a folder under " + (" or ".join(paths) or "a mount of volumes.pvcMounts or volumes.gcsMounts"),
        )
        return
    holder: dict[str, Any] | None = None
    for mount in mounts:
        path = str(mount.get("mountPath")).rstrip("/")
        if (output.rstrip("/") + "/").startswith(path + "/") and (
            holder is None or len(path) > len(str(holder.get("mountPath")).rstrip("/"))
        ):
            holder = mount
    if holder is None:
        add(
            ("output", "path"),
            f"data-prep output.path {output} is not under a mount ({', '.join(paths) or 'none'})",
            "a folder under " + (" or ".join(paths) or "a mount"),
            "mount its storage under volumes.pvcMounts or gcsMounts",
        )
    elif holder.get("readOnly"):
        add(
            ("output", "path"),
            f"data-prep output.path {output} is on the read-only mount {holder.get('mountPath')}",
            "a writable mount",
            "drop readOnly from that mount, or write elsewhere",
        )
