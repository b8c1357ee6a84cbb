"""Profiles + schemas + one Jinja2 source per chart kind -> the charts under charts/.

Pure function first (`render_all` returns every file as bytes), then thin `write`/`check` on top,
so tests can generate into memory and compare.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TYPE_CHECKING = False
if TYPE_CHECKING:
    import jinja2

from helm_nemo import resources
from helm_nemo.generate.profiles import load_profiles, parse_yaml, read_yaml
from helm_nemo.generate.schema_bundle import bundle
from helm_nemo.generate.values_docs import values_table

GENERATED_MARKER = ".generated-by-helm-nemo"


@dataclass(frozen=True)
class ChartSpec:
    """One chart kind the generator writes: its version, description and schema."""

    kind: str
    version: str
    app_version: str
    description: str
    schema: str
    per_accelerator: bool
    clouds: tuple[str, ...]
    requires: str | None = None  # a profile field the kind needs (no chart for profiles without it)


def load_chart_specs(generator_dir: Path | None = None) -> list[ChartSpec]:
    raw = read_yaml((generator_dir or resources.generator_dir()) / "charts.yaml")
    return [
        ChartSpec(
            kind=c["kind"],
            version=str(c["version"]),
            app_version=str(c["appVersion"]),
            description=c["description"],
            schema=c["schema"],
            per_accelerator=bool(c.get("perAccelerator", False)),
            clouds=tuple(c.get("clouds", ())),
            requires=c.get("requiresProfile"),
        )
        for c in raw["charts"]
    ]


def _jinja_env(generator_dir: Path) -> jinja2.Environment:
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(generator_dir)),
        block_start_string="[%",
        block_end_string="%]",
        variable_start_string="[[",
        variable_end_string="]]",
        comment_start_string="[#",
        comment_end_string="#]",
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined,
        autoescape=False,
    )
    env.policies["json.dumps_kwargs"] = {"sort_keys": True, "ensure_ascii": False}
    env.filters["tojson"] = lambda value: json.dumps(value, sort_keys=True, ensure_ascii=False)
    env.filters["toyaml"] = to_yaml
    env.filters["shquote"] = shell_quote
    return env


def shell_quote(value: str) -> str:
    """A shell word: bare when it is plainly safe (a path, a name), else double-quoted."""
    import re

    if re.fullmatch(r"[A-Za-z0-9_./:=@+-]+", value):
        return value
    return json.dumps(value)


def to_yaml(value: Any, indent: int = 0) -> str:
    """Block-style YAML for profile data baked into templates; multi-line strings as literal blocks.

    The first line is not indented (the template places it), the following ones get `indent` spaces.
    """
    import yaml

    class BlockDumper(getattr(yaml, "CSafeDumper", yaml.SafeDumper)):  # type: ignore[misc]  # C dumper if built
        """Multi-line strings as literal blocks, sequences indented under their key like kubectl."""

    def represent_str(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
        style = "|" if "\n" in data else None
        return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)

    BlockDumper.add_representer(str, represent_str)
    text = yaml.dump(
        value, Dumper=BlockDumper, default_flow_style=False, sort_keys=False, width=4096, allow_unicode=True
    )
    lines = text.rstrip("\n").split("\n")
    return "\n".join([lines[0]] + [(" " * indent + line) if line else line for line in lines[1:]])


def network_value_properties(profile: dict[str, Any]) -> dict[str, Any]:
    """Schema of the .Values.network keys a profile adds (plugin/daemon image, build type, ...)."""
    network = profile.get("network", {})
    props: dict[str, Any] = {}
    for part, what, ref in (
        ("pluginInstaller", "NCCL plugin installer image; null: no installer", "optionalImage"),
        ("daemonSidecar", "network daemon sidecar image (pinned)", "image"),
    ):
        if network.get(part):
            props[network[part]["valuesKey"]] = {"$ref": f"#/definitions/{ref}", "description": what + "."}
    for key, value in (network.get("extraValues") or {}).items():
        props[key] = (
            {"type": "integer", "minimum": 0, "maximum": 2**31 - 1} if isinstance(value, int) else {"type": "string"}
        )
    generations = network.get("generations")
    if generations:
        names = [generations["default"]] + [alt["name"] for alt in generations["alternatives"]]
        props[generations["valuesKey"]] = {
            "enum": [*names, None],
            "description": f"Networking generation; null: {names[1]} when any of "
            f"{', '.join(generations['autoWhenAnyTrue'])} is set and not false, else {names[0]}.",
        }
    return props


# Chart kinds whose templates `fail` on value combinations a schema cannot express; helm nemo checks the same
# rules before helm runs (values/cross_field.py), with the facts of the profile the schema carries under CHECKS_KEY.
CROSS_FIELD_KINDS = ("jobset", "nemo-training")
# Accelerator-independent kinds with such rules: they need no profile facts, only the kind.
CROSS_FIELD_PLAIN_KINDS = ("data-prep",)
CHECKS_KEY = "x-helm-nemo-checks"


def chart_schema(
    spec: ChartSpec, profile: dict[str, Any] | None, profiles: dict[str, dict[str, Any]] | None = None
) -> dict[str, Any]:
    schema = bundle(spec.schema, profile, profiles=profiles)
    if profile is not None and "network" in schema.get("properties", {}):
        extra = network_value_properties(profile)
        if extra:
            schema["properties"]["network"]["properties"].update(extra)
            shared = bundle("definitions.schema.json", None)["definitions"]
            for ref in {p["$ref"].rsplit("/", 1)[-1] for p in extra.values() if "$ref" in p}:
                schema.setdefault("definitions", {}).setdefault(ref, shared[ref])
            schema["definitions"] = dict(sorted(schema["definitions"].items()))
    if profile is not None and spec.kind in CROSS_FIELD_KINDS:
        # What helm nemo's cross-field checks (values/cross_field.py) need of the profile; travels with the chart.
        schema[CHECKS_KEY] = {
            "kind": spec.kind,
            "accelerator": profile["id"],
            "displayName": profile["displayName"],
            "gpusPerNode": profile["gpusPerNode"],
            "nodeLabels": dict(profile.get("nodeLabels") or {}),
        }
    if profile is None and spec.kind in CROSS_FIELD_PLAIN_KINDS:
        schema[CHECKS_KEY] = {"kind": spec.kind}
    return schema


def _chart_name(spec: ChartSpec, profile: dict[str, Any] | None) -> str:
    return f"{spec.kind}-{profile['id']}" if profile else spec.kind


def _chart_dir(spec: ChartSpec, profile: dict[str, Any] | None) -> str:
    return f"{profile['id']}/{spec.kind}" if profile else spec.kind


def render_chart(
    env: jinja2.Environment,
    generator_dir: Path,
    spec: ChartSpec,
    profile: dict[str, Any] | None,
    profiles: dict[str, dict[str, Any]] | None = None,
) -> dict[str, bytes]:
    """Every file of one chart, keyed by its path relative to the chart folder.

    A per-accelerator chart sees its `profile`; an accelerator-independent one sees all `profiles`
    (e.g. the supervisor bakes a small per-accelerator table from them).
    """
    source = generator_dir / spec.kind
    schema = chart_schema(spec, profile, profiles)
    context = {
        "profile": profile or {},
        "profiles": profiles or {},
        "chart": {
            "name": _chart_name(spec, profile),
            "kind": spec.kind,
            "version": spec.version,
            "appVersion": spec.app_version,
            "description": env.from_string(spec.description).render(profile=profile or {}),
        },
        "schema": schema,
    }
    files: dict[str, bytes] = {}
    for path in sorted(p for p in source.rglob("*") if p.is_file()):
        rel = path.relative_to(source).as_posix()
        if rel.endswith(".j2"):
            text = env.get_template(f"{spec.kind}/{rel}").render(**context)
            rel = rel[: -len(".j2")]
            if not text.strip():
                continue  # a template whose feature this profile lacks (e.g. no ComputeDomain)
        else:
            text = path.read_text(encoding="utf-8")
        files[rel] = text.encode("utf-8")
    if profile is not None:
        files["templates/_helpers.tpl"] = env.get_template("shared/helpers.tpl.j2").render(**context).encode()
    files["values.schema.json"] = (json.dumps(schema, indent=2, ensure_ascii=False) + "\n").encode()
    defaults = parse_yaml(files["values.yaml"].decode())
    readme = env.get_template("shared/README.md.j2").render(
        **context, rows=values_table(schema, defaults), source_kind=spec.kind
    )
    files["README.md"] = readme.encode()
    return files


def render_all(root: Path | None = None) -> dict[str, bytes]:
    """Every generated file under charts/, keyed by path relative to charts/."""
    root = root or resources.data_root()
    generator_dir = root / "generator"
    env = _jinja_env(generator_dir)
    profiles = load_profiles(root / "values" / "accelerators")
    out: dict[str, bytes] = {}
    for spec in load_chart_specs(generator_dir):
        targets = (
            [
                p
                for p in profiles.values()
                if p["cloud"] in spec.clouds
                and spec.kind in (p["chartKinds"] or [spec.kind])
                and (spec.requires is None or p.get(spec.requires))
            ]
            if spec.per_accelerator
            else [None]
        )
        for profile in targets:
            for rel, data in render_chart(env, generator_dir, spec, profile, profiles).items():
                out[f"{_chart_dir(spec, profile)}/{rel}"] = data
    out[GENERATED_MARKER] = marker_text(source_digest(root), files_digest(out)).encode()
    return dict(sorted(out.items()))


# What the charts are generated from: a change to any of these may change charts/.
_GENERATOR_CODE = ("charts.py", "schema_bundle.py", "values_docs.py", "profiles.py")


def source_digest(root: Path) -> str:
    """Digest of every input of the generator (sources, schemas, profiles, its own code, library versions)."""
    import hashlib

    digest = hashlib.sha256(f"jinja2 {_library_version('jinja2')} pyyaml {_library_version('yaml')}\n".encode())
    package = Path(__file__).resolve().parent
    inputs = [package / name for name in _GENERATOR_CODE]
    for folder, pattern in (("generator", "**/*"), ("schemas", "*.json"), ("values/accelerators", "*.yaml")):
        # generator/versions.lock is written from the charts (after them), so it is no input of them
        inputs += sorted(p for p in (root / folder).glob(pattern) if p.is_file() and p.name != "versions.lock")
    for path in inputs:
        rel = path.relative_to(root) if path.is_relative_to(root) else Path("helm_nemo") / path.name
        digest.update(f"{rel.as_posix()}\0".encode() + path.read_bytes() + b"\0")
    return "sha256:" + digest.hexdigest()


def _library_version(module: str) -> str:
    """The module's __version__ line, read without importing it (jinja2 costs ~30 ms to import)."""
    import importlib.util
    import re

    spec = importlib.util.find_spec(module)
    text = Path(spec.origin).read_text(encoding="utf-8") if spec and spec.origin else ""
    found = re.search(r"^__version__\s*=\s*['\"]([^'\"]+)", text, re.M)
    return found.group(1) if found else "unknown"


def files_digest(files: dict[str, bytes]) -> str:
    import hashlib

    digest = hashlib.sha256()
    for rel in sorted(files):
        if rel != GENERATED_MARKER:
            digest.update(rel.encode() + b"\0" + files[rel] + b"\0")
    return "sha256:" + digest.hexdigest()


def marker_text(sources: str, charts: str) -> str:
    return (
        "Everything under charts/ is generated by `helm-nemo generate`; edit generator/, schemas/ or values/ instead.\n"
        f"sources: {sources}\n"
        f"charts: {charts}\n"
    )


def _existing_files(charts: Path) -> dict[str, bytes]:
    if not charts.exists():
        return {}
    return {p.relative_to(charts).as_posix(): p.read_bytes() for p in charts.rglob("*") if p.is_file()}


def check(root: Path | None = None) -> list[str]:
    """Paths (relative to charts/) that differ from what the sources produce; empty when in sync.

    Fast path: when the sources and the charts both still have the digests the last `generate`
    recorded, charts/ is what those sources produce (generation is deterministic) and nothing is
    rendered. Any edit on either side falls through to the full render-and-compare.
    """
    root = root or resources.data_root()
    have = _existing_files(root / "charts")
    recorded = have.get(GENERATED_MARKER, b"").decode()
    if recorded and recorded == marker_text(source_digest(root), files_digest(have)):
        return _version_problems(root, have)
    wanted = render_all(root)
    problems = []
    for rel in sorted(set(wanted) | set(have)):
        if rel == GENERATED_MARKER:
            continue  # only a cache for the fast path above: a stale one costs time, never correctness
        if rel not in have:
            problems.append(f"missing: charts/{rel}")
        elif rel not in wanted:
            problems.append(f"stale: charts/{rel}")
        elif have[rel] != wanted[rel]:
            problems.append(f"differs: charts/{rel}")
    return problems + _version_problems(root, wanted)


def _version_problems(root: Path, files: dict[str, bytes]) -> list[str]:
    """Charts whose content changed under a version generator/versions.lock already records (see chart_versions)."""
    from helm_nemo.generate.versions import lock_problems

    return lock_problems(root, files)


def write(root: Path | None = None, out: Path | None = None) -> list[str]:
    """Write charts/ (or `out`) from the sources, removing stale generated files; returns the paths changed."""
    root = root or resources.data_root()
    charts = out or root / "charts"
    wanted = render_all(root)
    have = _existing_files(charts)
    changed = []
    for rel, data in wanted.items():
        if have.get(rel) != data:
            target = charts / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
            changed.append(rel)
    for rel in sorted(set(have) - set(wanted)):
        (charts / rel).unlink()
        changed.append(rel)
    for folder in sorted((p for p in charts.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True):
        if not any(folder.iterdir()):
            folder.rmdir()
    return changed
