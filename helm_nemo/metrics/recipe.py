"""What a values or recipe file says about a training run: GPUs, accelerator, precision, global batch
size and the model, each with where it was found (file:line and path).

Read from the training release (the one with `workload.gpus`; `--release` picks one when a recipe has
several): `accelerator`, `workload.gpus`, the model's NeMo / Megatron-Bridge config (`files:
{nemo_config|workload_config: …}` or the inline value), Hydra overrides and launcher flags in
`workload.arguments` / `defaultArguments` (`model.global_batch_size=1024`, `--global_batch_size 1024`,
`--compute_dtype fp8_cs`), and the NeMo 2 recipe name in `workload.envs` (`NEMO_RECIPE`). Only these
fields go through ${VAR} substitution (same rules as install), so variables metrics does not need (a
bucket, a registry) need not be set.
"""

from __future__ import annotations

import os
import re
from collections import namedtuple
from pathlib import Path
from typing import Any
from collections.abc import Mapping

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from helm_nemo.values.loaded import LoadedValues

from helm_nemo.user_errors import Problem, UserError, json_path
from helm_nemo.values import value_at
from helm_nemo.metrics.flops import Architecture

CONFIG_KEYS = ("nemo_config", "workload_config")  # nemo-training and jobset config values
RECIPE_ENV = ("NEMO_RECIPE", "MODEL_RECIPE_NAME", "RECIPE")
_RECIPE_FLAGS = ("model_recipe_name", "recipe", "factory")
_GATED = {"swiglu", "fast-swiglu", "geglu", "fast-geglu", "reglu", "fast-reglu"}
_GPT2_VOCAB = 50257  # GPT2BPETokenizer, before Megatron's padding


class Found(namedtuple("Found", "value file line where", defaults=(None, "$"))):
    """A value and where it is written: file, line (None in a config file read without positions), path."""

    __slots__ = ()

    @property
    def origin(self) -> str:
        return f"{self.file}:{self.line} {self.where}" if self.line else f"{self.file} {self.where}"

    def problem(self, message: str, expected: str | None = None, hint: str | None = None) -> Problem:
        return Problem(self.file, self.line, None, self.where, message, expected, hint)


class RecipeInputs:
    """What a values or recipe file says about a run (GPUs, accelerator, precision, batch, model), each with its place.

    (A plain class: a dataclass costs a millisecond to define, on every validate run that checks the fit.)"""

    def __init__(self, path: Path, release: str | None = None) -> None:
        self.path = path
        self.release = release
        self.gpus: Found | None = None
        self.accelerator: Found | None = None
        self.precision: Found | None = None
        self.batch_size: Found | None = None
        self.model: Found | None = None  # a model name (NeMo 2 recipe, Megatron-Bridge recipe name)
        self.architecture: Found | None = None  # from a config's model section
        self.seq_len: Found | None = None
        self.max_steps: Found | None = None  # trainer.max_steps, --max_steps, --train_iters (helm nemo status)
        self.problems: list[Problem] = []  # found but unusable (reported when needed)

    def __repr__(self) -> str:
        return f"RecipeInputs({self.__dict__!r})"


def read_recipe(path: str | Path, release: str | None = None, env: Mapping[str, str] | None = None) -> RecipeInputs:
    from helm_nemo.values.load import load_values
    from helm_nemo.values.loaded import LoadedValues
    from helm_nemo.values.substitute import runtime_names, substitute

    loaded = load_values(path)
    env = os.environ if env is None else env
    name, prefix, values, origin = _training_release(loaded, release)
    wanted = [
        ("accelerator",),
        ("release",),
        ("files",),
        ("workload", "gpus"),
        ("workload", "envs"),
        ("workload", "arguments"),
        ("workload", "defaultArguments"),
    ] + [(key,) for key in CONFIG_KEYS]
    skeleton = _pruned(loaded.data, [prefix + w for w in wanted] + list(origin.values()))
    view = LoadedValues(loaded.path, skeleton, loaded.positions, loaded.key_positions, loaded.plain_scalars)
    data = substitute(view, env, keep=runtime_names(loaded.data)).data
    values = value_at(data, prefix) or {}
    for key, where in origin.items():  # a recipe's release-level accelerator/release
        if key not in values and value_at(data, where) is not None:
            values[key] = value_at(data, where)

    def at(rel: tuple[Any, ...]) -> tuple[str, int | None, str]:
        where = origin.get(rel[0], prefix + rel) if len(rel) == 1 else prefix + rel
        line, _ = loaded.position(where)
        return str(loaded.path), line, json_path(where)

    out = RecipeInputs(Path(loaded.path), release=name)
    workload = values.get("workload")
    workload = workload if isinstance(workload, dict) else {}
    if isinstance(values.get("accelerator"), str):
        out.accelerator = Found(values["accelerator"], *at(("accelerator",)))
    gpus = workload.get("gpus")
    if isinstance(gpus, int) and not isinstance(gpus, bool):
        out.gpus = Found(gpus, *at(("workload", "gpus")))
    for index, item in enumerate(workload.get("envs") or []):
        if isinstance(item, dict) and item.get("name") in RECIPE_ENV and isinstance(item.get("value"), str):
            out.model = Found(item["value"], *at(("workload", "envs", index, "value")))
    config, config_origin = _config(loaded, values, prefix, out)
    overrides, flags = _arguments(workload, at)
    _from_config(config, config_origin, overrides, out)
    _from_flags(flags, out)
    return out


def _training_release(
    loaded: LoadedValues, release: str | None
) -> tuple[str | None, tuple[Any, ...], dict[str, Any], dict[str, Any]]:
    """(release name, where its values are, the values, where release-level keys are) of the release that
    trains (has workload.gpus)."""
    data = loaded.data
    if "releases" not in data:
        return data.get("release") if isinstance(data.get("release"), str) else None, (), data, {}
    candidates = []
    for index, item in enumerate(data.get("releases") or []):
        if not isinstance(item, dict) or not isinstance(item.get("values"), dict):
            continue
        values = item["values"]
        name = item.get("release") or values.get("release")
        origin = {key: ("releases", index, key) for key in ("accelerator", "release") if key in item}
        workload = values.get("workload")
        if isinstance(workload, dict) and "gpus" in workload:
            candidates.append((name, ("releases", index, "values"), values, origin))
    if release is not None:
        chosen = [c for c in candidates if c[0] == release]
        if not chosen:
            names = ", ".join(str(c[0]) for c in candidates) or "none"
            raise UserError(
                Problem(
                    str(loaded.path),
                    None,
                    None,
                    "$.releases",
                    f"no training release {release!r} (releases with workload.gpus: {names})",
                )
            )
        return chosen[0]
    if not candidates:
        raise UserError(
            Problem(
                str(loaded.path), None, None, "$.releases", "no release of this recipe trains (none has workload.gpus)"
            )
        )
    if len(candidates) > 1:
        names = ", ".join(str(c[0]) for c in candidates)
        raise UserError(
            Problem(
                str(loaded.path),
                None,
                None,
                "$.releases",
                f"{len(candidates)} releases train ({names}); which one?",
                hint="pass --release NAME",
            )
        )
    return candidates[0]


def _pruned(data: Any, paths: list[tuple[Any, ...]]) -> Any:
    """Only the given paths of `data`, at the same places (list items before them kept as null)."""
    out: dict[str, Any] = {}
    for where in paths:
        value = value_at(data, where)
        if value is None:
            continue
        node, source = out, data
        for depth, part in enumerate(where):
            last = depth == len(where) - 1
            source = source[part]
            if isinstance(node, list):
                while len(node) <= part:
                    node.append(None)
            if last:
                node[part] = source
            else:
                empty: list[Any] | dict[Any, Any] = [] if isinstance(source, list) else {}
                if isinstance(node, dict):
                    node = node.setdefault(part, empty)
                else:
                    node[part] = node[part] if node[part] is not None else empty
                    node = node[part]
    return out


def _config(
    loaded: LoadedValues, values: dict[str, Any], prefix: tuple[Any, ...], out: RecipeInputs
) -> tuple[dict[str, Any] | None, tuple[str, int | None, str]]:
    """The model config the release carries (a file under `files:`, or inline), parsed, and where it is
    (file, line, path prefix) for the Found values read from it."""
    import yaml

    refs = values.get("files")
    refs = refs if isinstance(refs, dict) else {}
    for key in CONFIG_KEYS:
        text: str | None = None
        where: tuple[str, int | None, str] = ("", None, "")  # set with `text`
        if isinstance(refs.get(key), str):
            line, _ = loaded.position(prefix + ("files", key))
            target = Path(refs[key])
            target = target if target.is_absolute() else Path(loaded.path).parent / target
            try:
                text = target.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as err:
                out.problems.append(
                    Problem(
                        str(loaded.path),
                        line,
                        None,
                        json_path(prefix + ("files", key)),
                        f"cannot read the model config {refs[key]!r}: {getattr(err, 'strerror', None) or err}",
                    )
                )
                continue
            where = (str(target), None, "")
        elif isinstance(values.get(key), str):
            line, _ = loaded.position(prefix + (key,))
            where = (str(loaded.path), line, f"{json_path(prefix + (key,))} → ")
            text = values[key]
        if text is None:
            continue
        try:
            config = yaml.safe_load(text)
        except yaml.YAMLError as err:
            out.problems.append(
                Problem(
                    where[0], where[1], None, where[2] or "$", f"the model config is not YAML: {err}".replace("\n", " ")
                )
            )
            continue
        if isinstance(config, dict):
            return config, where
    return None, ("", None, "")


def _arguments(
    workload: dict[str, Any], at: Callable[[tuple[Any, ...]], tuple[str, int | None, str]]
) -> tuple[dict[str, Found], dict[str, Found]]:
    """Hydra overrides (`key=value`, `{name, value}`) and launcher flags (`--name=value`, `--name value`)."""
    overrides: dict[str, Found] = {}
    flags: dict[str, Found] = {}
    for list_key in ("defaultArguments", "arguments"):
        items = workload.get(list_key) or []
        if not isinstance(items, list):
            continue
        for index, item in enumerate(items):
            origin = at(("workload", list_key, index))  # (file, line, path)
            if isinstance(item, dict) and isinstance(item.get("name"), str):
                overrides[item["name"].lstrip("+~")] = Found(item.get("value"), *origin)
                continue
            if not isinstance(item, str):
                continue
            value: str | int | float
            if item.startswith("-"):
                name, sep, value = item.lstrip("-").partition("=")
                if not sep:
                    following = items[index + 1] if index + 1 < len(items) else None
                    value = (
                        following
                        if isinstance(following, (str, int, float)) and not str(following).startswith("-")
                        else True
                    )
                flags[name.replace("-", "_")] = Found(value, *origin)
            elif "=" in item:
                key, _, value = item.partition("=")
                overrides[key.lstrip("+~")] = Found(_scalar(value), *origin)
    return overrides, flags


def _scalar(text: str) -> Any:
    import yaml

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return text


def _lookup(config: dict[str, Any] | None, dotted: str) -> Any:
    return _resolve(config, dotted, value_at(config, dotted.split(".")))


_INTERPOLATION = re.compile(r"^\$\{(\.*)([A-Za-z0-9_.]+)\}$")


def _resolve(config: dict[str, Any] | None, dotted: str, value: Any, depth: int = 0) -> Any:
    """Hydra's `${model.encoder_seq_length}` and `${.sibling}` interpolations (plain references only)."""
    match = _INTERPOLATION.match(value) if isinstance(value, str) else None
    if not match or depth > 10:
        return value
    dots, target = match.groups()
    if dots:
        parent = dotted.split(".")[: -len(dots)]
        target = ".".join(parent + [target])
    return _resolve(config, target, value_at(config, target.split(".")), depth + 1)


def _first(
    config: dict[str, Any] | None,
    config_origin: tuple[str, int | None, str],
    overrides: dict[str, Found],
    keys: tuple[str, ...],
) -> Found | None:
    for key in keys:
        if key in overrides:
            return overrides[key]
    for key in keys:
        value = _lookup(config, key)
        if value is not None:
            file, line, path = config_origin
            return Found(value, file, line, path + key)
    return None


def _integer(found: Found | None) -> Found | None:
    if found is None:
        return None
    value = found.value
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    return found._replace(value=value) if isinstance(value, int) and value > 0 else None


def _from_config(
    config: dict[str, Any] | None, origin: tuple[Any, ...], overrides: dict[str, Found], out: RecipeInputs
) -> None:
    batch = _integer(
        _first(
            config, origin, overrides, ("model.global_batch_size", "train.global_batch_size", "data.global_batch_size")
        )
    )
    if batch:
        out.batch_size = batch
    seq = _integer(
        _first(
            config,
            origin,
            overrides,
            (
                "model.encoder_seq_length",
                "model.seq_length",
                "data.seq_length",
                "dataset.seq_length",
                "model.data.seq_length",
            ),
        )
    )
    if seq:
        out.seq_len = seq
    steps = _integer(_first(config, origin, overrides, ("trainer.max_steps", "train.train_iters")))
    if steps:
        out.max_steps = steps
    fp8 = _first(config, origin, overrides, ("model.fp8",))
    precision = _first(config, origin, overrides, ("trainer.precision", "mixed_precision", "model.precision"))
    if fp8 is not None and fp8.value not in (None, False, "false", "False", 0):
        out.precision = fp8._replace(value="fp8")
    elif precision is not None:
        out.precision = precision._replace(value="fp8" if "fp8" in str(precision.value).lower() else "bf16")
    arch = _architecture(config, origin, overrides, seq)
    if arch is not None:
        out.architecture = arch


def _architecture(
    config: dict[str, Any] | None, origin: tuple[Any, ...], overrides: dict[str, Found], seq: Found | None
) -> Found | None:
    def get(key: str) -> Any:
        found = _first(config, origin, overrides, (f"model.{key}",))
        return None if found is None else found.value

    layers, hidden, heads = get("num_layers"), get("hidden_size"), get("num_attention_heads")
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (layers, hidden, heads)) or seq is None:
        return None
    kv = get("num_query_groups")
    head_dim = get("kv_channels")
    experts = get("num_moe_experts") or get("num_experts") or 0
    arch = Architecture(
        layers=layers,
        hidden=hidden,
        ffn=get("ffn_hidden_size") or 4 * hidden,
        heads=heads,
        vocab=_vocab(config, get) or 0,
        seq_len=seq.value,
        kv_heads=kv if isinstance(kv, int) and kv != heads else None,
        head_dim=head_dim if isinstance(head_dim, int) and head_dim * heads != hidden else None,
        gated=str(get("activation") or "").lower() in _GATED or bool(get("gated_linear_unit")),
        experts=experts if isinstance(experts, int) else 0,
        top_k=(get("moe_router_topk") or 0) if experts else 0,
        moe_ffn=get("moe_ffn_hidden_size") if experts else None,
        shared_ffn=(get("moe_shared_expert_intermediate_size") or 0) if experts else 0,
    )
    file, line, path = origin
    return Found(arch, file, line, path + "model")


def _vocab(config: dict[str, Any] | None, get: Callable[[str], Any]) -> int | None:
    for key in ("padded_vocab_size", "vocab_size"):
        value = get(key)
        if isinstance(value, int) and value > 0:
            return value
    tokenizer = _lookup(config, "model.tokenizer") or {}
    if isinstance(tokenizer, dict) and tokenizer.get("type") == "GPT2BPETokenizer":
        # Megatron pads the vocabulary to a multiple of make_vocab_size_divisible_by x tensor parallel size.
        multiple = (get("make_vocab_size_divisible_by") or 128) * (get("tensor_model_parallel_size") or 1)
        return -(-_GPT2_VOCAB // multiple) * multiple
    return None


def _from_flags(flags: dict[str, Found], out: RecipeInputs) -> None:
    for name in ("global_batch_size", "gbs"):
        if name in flags:
            found = _integer(flags[name])
            if found:
                out.batch_size = found
    for name in ("seq_length", "seq_len", "encoder_seq_length"):
        if name in flags:
            found = _integer(flags[name])
            if found:
                out.seq_len = found
    for name in ("max_steps", "train_iters"):
        if name in flags:
            found = _integer(flags[name])
            if found:
                out.max_steps = found
    for name in ("compute_dtype", "precision"):
        if name in flags and isinstance(flags[name].value, str):
            out.precision = flags[name]._replace(value="fp8" if "fp8" in flags[name].value.lower() else "bf16")
    if "fp8" in flags and flags["fp8"].value not in (False, "false", "none", "None"):
        out.precision = flags["fp8"]._replace(value="fp8")
    for name in _RECIPE_FLAGS:
        if name in flags and isinstance(flags[name].value, str):
            out.model = flags[name]
