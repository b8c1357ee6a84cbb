"""What a training release says about its model and parallel layout, each setting with where it is written.

The reading reuses helm_nemo.metrics.recipe: the same config keys (`files: {nemo_config|workload_config}` or
inline), the same Hydra overrides and launcher flags of `workload.arguments`/`defaultArguments` (`_arguments`),
the same NeMo 2 recipe-name variables and flags, and the same model table (metrics.flops.KNOWN_MODELS) and
config-architecture reading (`_architecture`). Added here: the parallel layout and the memory switches
(SETTINGS), the config read with positions (a layout error points at the config file's line), flags
written in the launcher script (`files: {workload_launcher}`, gpu-recipes' Megatron-Bridge launchers), and
the defaults of NeMo 2's recipes (fit/recipes.py, with their source).

Precedence, later wins: recipe defaults < config file < Hydra overrides < flags (launcher script, then
workload.arguments), as NeMo's CLI and the launchers apply them.
"""

from __future__ import annotations

import re
from collections import namedtuple
from functools import lru_cache

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: importing typing costs every run start-up time
    from typing import Any

    from helm_nemo.metrics.flops import Architecture
    from helm_nemo.values.loaded import LoadedValues

from helm_nemo.user_errors import Problem, json_path

# setting -> (config / Hydra keys, launcher flags), in the spellings of NeMo 1 configs (model.*), NeMo 2
# (trainer.strategy.*, data.*, optim.config.*), Megatron-Bridge configs (model.*, train.*, optimizer.*) and
# Megatron / Megatron-Bridge flags (dashes read as underscores).
SETTINGS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "tp": (
        ("model.tensor_model_parallel_size", "trainer.strategy.tensor_model_parallel_size"),
        ("tensor_model_parallel_size", "tp", "tp_size"),
    ),
    "pp": (
        ("model.pipeline_model_parallel_size", "trainer.strategy.pipeline_model_parallel_size"),
        ("pipeline_model_parallel_size", "pp", "pp_size"),
    ),
    "vp": (
        ("model.virtual_pipeline_model_parallel_size", "trainer.strategy.virtual_pipeline_model_parallel_size"),
        ("virtual_pipeline_model_parallel_size", "num_virtual_stages_per_pipeline_rank", "vp", "vp_size"),
    ),
    "layers_per_vp_stage": (
        ("model.num_layers_per_virtual_pipeline_stage",),
        ("num_layers_per_virtual_pipeline_stage",),
    ),
    "cp": (
        ("model.context_parallel_size", "trainer.strategy.context_parallel_size"),
        ("context_parallel_size", "cp", "cp_size"),
    ),
    "ep": (
        ("model.expert_model_parallel_size", "trainer.strategy.expert_model_parallel_size"),
        ("expert_model_parallel_size", "ep", "ep_size"),
    ),
    "etp": (
        ("model.expert_tensor_parallel_size", "trainer.strategy.expert_tensor_parallel_size"),
        ("expert_tensor_parallel_size", "etp", "etp_size"),
    ),
    "sp": (
        ("model.sequence_parallel", "trainer.strategy.sequence_parallel"),
        ("sequence_parallel", "sp"),
    ),
    "micro_batch": (
        ("model.micro_batch_size", "data.micro_batch_size", "train.micro_batch_size"),
        ("micro_batch_size", "mbs"),
    ),
    "global_batch": (
        ("model.global_batch_size", "data.global_batch_size", "train.global_batch_size"),
        ("global_batch_size", "gbs"),
    ),
    "seq_len": (
        ("model.encoder_seq_length", "model.seq_length", "data.seq_length", "dataset.seq_length"),
        ("seq_length", "seq_len", "encoder_seq_length"),
    ),
    "num_layers": (("model.num_layers", "model.config.num_layers"), ("num_layers",)),
    "heads": (("model.num_attention_heads", "model.config.num_attention_heads"), ("num_attention_heads",)),
    "query_groups": (("model.num_query_groups", "model.config.num_query_groups"), ("num_query_groups",)),
    "experts": (("model.num_moe_experts", "model.num_experts"), ("num_experts", "num_moe_experts")),
    "first_stage_layers": (
        ("model.num_layers_in_first_pipeline_stage",),
        ("num_layers_in_first_pipeline_stage", "decoder_first_pipeline_num_layers"),
    ),
    "last_stage_layers": (
        ("model.num_layers_in_last_pipeline_stage",),
        ("num_layers_in_last_pipeline_stage", "decoder_last_pipeline_num_layers"),
    ),
    "pipeline_layout": (
        ("model.pipeline_model_parallel_layout",),
        ("pipeline_model_parallel_layout",),
    ),
    "account_embedding": (
        ("model.account_for_embedding_in_pipeline_split", "trainer.strategy.account_for_embedding_in_pipeline_split"),
        ("account_for_embedding_in_pipeline_split",),
    ),
    "account_loss": (
        ("model.account_for_loss_in_pipeline_split", "trainer.strategy.account_for_loss_in_pipeline_split"),
        ("account_for_loss_in_pipeline_split",),
    ),
    "recompute": (
        ("model.activations_checkpoint_granularity", "model.recompute_granularity"),
        ("recompute_granularity",),
    ),
    "recompute_method": (
        ("model.activations_checkpoint_method", "model.recompute_method"),
        ("recompute_method",),
    ),
    "recompute_modules": (("model.recompute_modules",), ("recompute_modules",)),
    "recompute_layers": (
        ("model.activations_checkpoint_num_layers", "model.recompute_num_layers"),
        ("recompute_num_layers",),
    ),
    "dist_optimizer": (
        ("optim.config.use_distributed_optimizer", "optimizer.use_distributed_optimizer"),
        ("use_distributed_optimizer",),
    ),
    "optimizer_name": (("model.optim.name",), ()),
    "precision_aware_optimizer": (
        ("optim.config.use_precision_aware_optimizer", "optimizer.use_precision_aware_optimizer"),
        ("use_precision_aware_optimizer",),
    ),
    "main_params_dtype": (("optim.config.main_params_dtype", "optimizer.main_params_dtype"), ("main_params_dtype",)),
    "exp_avg_dtype": (("optim.config.exp_avg_dtype", "optimizer.exp_avg_dtype"), ("exp_avg_dtype",)),
    "exp_avg_sq_dtype": (("optim.config.exp_avg_sq_dtype", "optimizer.exp_avg_sq_dtype"), ("exp_avg_sq_dtype",)),
    "grad_fp32": (
        ("model.grad_reduce_in_fp32", "ddp.grad_reduce_in_fp32", "trainer.strategy.ddp.grad_reduce_in_fp32"),
        ("grad_reduce_in_fp32",),
    ),
    "fsdp": (
        ("model.fsdp", "trainer.strategy.fsdp", "ddp.use_megatron_fsdp", "model.use_megatron_fsdp"),
        ("use_megatron_fsdp", "use_mcore_fsdp", "use_torch_fsdp2", "fsdp"),
    ),
    "cpu_offload": (
        ("model.cpu_offloading", "model.cpu_offloading_num_layers"),
        ("cpu_offloading_num_layers", "cpu_offloading", "activation_offload_layers"),
    ),
    "fp8": (("model.fp8",), ("fp8", "fp8_recipe")),
    "hidden_dropout": (("model.hidden_dropout", "model.config.hidden_dropout"), ("hidden_dropout",)),
    "attention_dropout": (("model.attention_dropout", "model.config.attention_dropout"), ("attention_dropout",)),
    "tied_embeddings": (
        ("model.share_embeddings_and_output_weights", "model.config.share_embeddings_and_output_weights"),
        (),
    ),
    "untied_embeddings": ((), ("untie_embeddings_and_output_weights",)),
    "flash": (("model.use_flash_attention", "model.transformer_engine"), ("use_flash_attn",)),
    "peft": (("model.peft.peft_scheme", "peft.peft_scheme"), ("peft_scheme", "peft")),
    "precision": (("trainer.precision", "mixed_precision", "model.precision"), ("compute_dtype", "precision")),
}
_INT_SETTINGS = {
    "tp",
    "pp",
    "vp",
    "layers_per_vp_stage",
    "cp",
    "ep",
    "etp",
    "micro_batch",
    "global_batch",
    "seq_len",
    "num_layers",
    "heads",
    "query_groups",
    "experts",
    "first_stage_layers",
    "last_stage_layers",
    "recompute_layers",
}
_FLAG_NAMES = {flag: name for name, (_, flags) in SETTINGS.items() for flag in flags}
_CONFIG_NAMES = {key: name for name, (keys, _) in SETTINGS.items() for key in keys}
_LAUNCHER_KEYS = ("workload_launcher",)
_FALSE = {"false", "False", "0", "none", "None", "null", "no", "off", ""}


class Setting(namedtuple("Setting", "value file line column path default", defaults=(None, None, None, "$", None))):
    """One value and where it is written: file, line, column (None when not known), JSON path or key; or
    `default` saying whose default it is (a recipe's, Megatron's)."""

    # value: Any
    # file: str | None
    # line: int | None
    # column: int | None
    # path: str
    # default: str | None
    __slots__ = ()

    @property
    def origin(self) -> str:
        if self.default:
            return str(self.default)
        where = ":".join(str(p) for p in (self.file, self.line, self.column) if p is not None)
        return f"{where} {self.path}"

    def problem(self, message: str, expected: str | None = None, hint: str | None = None) -> Problem:
        return Problem(self.file, self.line, self.column, self.path, message, expected, hint)


class Run:
    """A training release as fit needs it: GPUs, accelerator, the model and its parallel layout.

    (A plain class: a dataclass costs a millisecond to define, on every validate run.)"""

    def __init__(self, release: str | None, file: str) -> None:
        self.release = release
        self.file = file
        self.gpus: Setting | None = None
        self.accelerator: Setting | None = None
        self.model_name: Setting | None = None  # NeMo 2 / Megatron-Bridge recipe name
        self.arch: Architecture | None = None
        self.arch_from: Setting | None = None  # where the architecture comes from (a config's model section, a table)
        self.settings: dict[str, Setting] = {}
        self.recipe: dict[str, Any] | None = None  # the NeMo 2 recipe's row of fit/recipes.py
        self.notes: list[str] = []

    def copy(self, settings: dict[str, Setting]) -> Run:
        """The same run with other settings (what-if answers of the verdict)."""
        other = Run(self.release, self.file)
        other.__dict__.update(self.__dict__)
        other.settings = settings
        return other

    @property
    def model_label(self) -> str | None:
        """The recipe name the values give, else the known model the config's shape is, else None."""
        if self.model_name is not None:
            return str(self.model_name.value)
        if self.arch is None:
            return None
        from helm_nemo.metrics.flops import match_architecture

        known = match_architecture(self.arch)
        return known.name if known else "the config's model"

    def get(self, name: str) -> Any:
        found = self.settings.get(name)
        return None if found is None else found.value

    def written(self, name: str) -> bool:
        """True when the file states the setting (not a recipe's or Megatron's default)."""
        found = self.settings.get(name)
        return found is not None and found.default is None


@lru_cache(maxsize=1)
def recipe_table() -> dict[str, dict[str, Any]]:
    """NeMo 2 recipe name (every spelling, see _recipe_key) -> its row of fit/recipes.py, with its name and source."""
    from helm_nemo.fit.recipes import RECIPES, SOURCE

    return {_recipe_key(name): {**row, "name": name, "source": SOURCE} for name, row in RECIPES.items()}


def _recipe_key(name: str) -> str:
    """`llama31_405b`, `llama3.1-405b`, `Llama3-1-405B`, `recipe.llama31_405b.pretrain_recipe` -> one key."""
    name = name.strip().strip("\"'")
    name = re.sub(r"\.(pretrain|finetune)_recipe.*$", "", name.split(":")[-1])
    name = name.rsplit(".", 1)[-1] if "." in name and not re.search(r"\d\.\d", name) else name
    return re.sub(r"[^a-z0-9]", "", name.lower())


def _as_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    return value if isinstance(value, int) else None


def _as_bool(value: Any) -> bool:
    return value is not None and value is not False and str(value).strip() not in _FALSE


def normalised(name: str, value: Any) -> Any:
    """A setting's value as the rules compare it: integers, booleans, lower-case words, None for null."""
    if value is None or (isinstance(value, str) and value.strip() in ("null", "None", "none", "~")):
        return None
    if name in _INT_SETTINGS:
        return _as_int(value)
    if name in ("hidden_dropout", "attention_dropout"):
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
    if name in (
        "sp",
        "dist_optimizer",
        "account_embedding",
        "account_loss",
        "grad_fp32",
        "tied_embeddings",
        "flash",
        "precision_aware_optimizer",
    ):
        return _as_bool(value)
    if name == "untied_embeddings":
        return _as_bool(value)
    if name in ("fsdp", "cpu_offload"):
        return _as_bool(value) and str(value).lower() not in ("0",)
    if name == "fp8":
        return _as_bool(value)
    if name == "pipeline_layout":  # E and L are upper case, t and m lower: kept as written
        return value.strip().strip("\"'") if isinstance(value, str) else value
    return str(value).strip().strip("\"'").lower() if isinstance(value, str) else value


def read_run(
    loaded: LoadedValues,
    values: dict[str, Any],
    prefix: tuple[Any, ...],
    real: Any = None,
    release: str | None = None,
) -> Run:
    """The Run of one release: `values` are its substituted values with `files:` read in (values/plan.py's
    data), `prefix` where they sit in `loaded`, `real` maps a values path to where it is written (a recipe's
    release-level keys)."""
    from helm_nemo.metrics.recipe import CONFIG_KEYS, RECIPE_ENV, _RECIPE_FLAGS, _arguments

    locate = real or (lambda rel: prefix + tuple(rel))
    columns: dict[str, int | None] = {}

    def at(rel: tuple[Any, ...]) -> tuple[str, int | None, str]:
        where = locate(rel)
        line, column = loaded.position(where)
        path = json_path(rel)
        columns[path] = column
        return str(loaded.file_of(where)), line, path

    def setting(rel: tuple[Any, ...], value: Any) -> Setting:
        file, line, path = at(rel)
        return Setting(value, file, line, columns.get(path), path)

    run = Run(release=release, file=str(loaded.path))
    workload = values.get("workload") if isinstance(values.get("workload"), dict) else {}
    assert isinstance(workload, dict)
    if isinstance(values.get("accelerator"), str):
        run.accelerator = setting(("accelerator",), values["accelerator"])
    gpus = _as_int(workload.get("gpus"))
    if gpus:
        run.gpus = setting(("workload", "gpus"), gpus)
    for index, item in enumerate(workload.get("envs") or []):
        if isinstance(item, dict) and item.get("name") in RECIPE_ENV and isinstance(item.get("value"), str):
            run.model_name = setting(("workload", "envs", index, "value"), item["value"])

    found: dict[str, Setting] = {}
    config, locator = _config(loaded, values, locate, CONFIG_KEYS)
    name: str | None
    if config is not None:
        for key, name in _CONFIG_NAMES.items():
            if name in found:
                continue
            value = _lookup(config, key)
            if value is not None:
                file, line, column = _position(locator, key)
                found[name] = Setting(value, file, line, column, json_path(key.split(".")))
    launcher_flags, launcher_overrides, launcher_recipe = _launcher(loaded, values, locate)
    overrides, flags = _arguments(workload, at)
    for key, item in overrides.items():
        name = _CONFIG_NAMES.get(key)
        if name is not None:
            found[name] = Setting(item.value, item.file, item.line, columns.get(item.where), item.where)
    for key, launched in launcher_overrides.items():
        name = _CONFIG_NAMES.get(key)
        if name is not None and not any(k in overrides for k in SETTINGS[name][0]):
            found[name] = launched
    for flag, launched in launcher_flags.items():
        name = _FLAG_NAMES.get(flag)
        if name is not None:
            found[name] = launched
    for flag, item in flags.items():
        name = _FLAG_NAMES.get(flag)
        if name is not None:
            found[name] = Setting(item.value, item.file, item.line, columns.get(item.where), item.where)
        if flag in _RECIPE_FLAGS and isinstance(item.value, str):
            run.model_name = Setting(item.value, item.file, item.line, columns.get(item.where), item.where)
    if run.model_name is None and launcher_recipe is not None:
        run.model_name = launcher_recipe

    _model(run, config, found)
    for name, value in found.items():
        run.settings[name] = value._replace(value=normalised(name, value.value))
    _derived(run)
    return run


def _lookup(config: dict[str, Any], dotted: str) -> Any:
    from helm_nemo.metrics.recipe import _lookup as metrics_lookup

    return metrics_lookup(config, dotted)


def _config(
    loaded: LoadedValues, values: dict[str, Any], locate: Any, keys: tuple[str, ...]
) -> tuple[dict[str, Any] | None, Any]:
    """The release's model config (a `files:` reference already read into `values`, or inline), parsed as NeMo
    reads it (PyYAML, through OmegaConf), and a locator for _position, so that a problem points at the config's
    own line. One libyaml parse gives the nodes (positions) and the data built from them."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    refs = values.get("files") if isinstance(values.get("files"), dict) else {}
    assert isinstance(refs, dict)
    for key in keys:
        text = values.get(key)
        if not isinstance(text, str):
            continue
        if isinstance(refs.get(key), str):
            name, offset = str(loaded.base_dir(locate(("files", key))) / refs[key]), 0
        else:  # inline: lines count from the key in the values file
            name = str(loaded.file_of(locate((key,))))
            offset = loaded.position(locate((key,)))[0] or 0
        parser = loader(text)
        try:
            root = parser.get_single_node()
            data = parser.construct_document(root) if root is not None else None
        except yaml.YAMLError:
            continue  # not YAML: the config is the workload's to read (metrics says so too)
        finally:
            parser.dispose()
        if isinstance(data, dict):
            return data, (name, offset, root)
    return None, None


def _position(locator: Any, dotted: str) -> tuple[str, int | None, int | None]:
    """(file, line, column) of a dotted key of the config the locator was made for (the key's own node)."""
    name, offset, node = locator
    key_node: Any = None
    for part in dotted.split("."):
        pairs = node.value if node is not None and isinstance(getattr(node, "value", None), list) else []
        match = [(k, v) for k, v in pairs if getattr(k, "value", None) == part]
        if not match:
            return name, None, None
        key_node, node = match[0]
    if key_node is None:
        return name, None, None
    return name, key_node.start_mark.line + 1 + offset, key_node.start_mark.column + 1


def _launcher(
    loaded: LoadedValues, values: dict[str, Any], locate: Any
) -> tuple[dict[str, Setting], dict[str, Setting], Setting | None]:
    """Flags (`--tensor_model_parallel_size 4`), Hydra overrides (`trainer.strategy.context_parallel_size=2`)
    and the recipe name (`--model_recipe_name llama3_70b`, `--factory llama3_70b`) written in the launcher
    script, with their lines. Comments are skipped; shell variables (`$TP`) are not values."""
    from helm_nemo.metrics.recipe import _RECIPE_FLAGS

    flags: dict[str, Setting] = {}
    overrides: dict[str, Setting] = {}
    recipe: Setting | None = None
    refs = values.get("files") if isinstance(values.get("files"), dict) else {}
    assert isinstance(refs, dict)
    for key in _LAUNCHER_KEYS:
        text = values.get(key)
        if not isinstance(text, str) or not isinstance(refs.get(key), str):
            continue
        name = str(loaded.base_dir(locate(("files", key))) / refs[key])
        for number, raw in enumerate(text.splitlines(), start=1):
            if "--" not in raw and "=" not in raw or raw.lstrip().startswith("#"):
                continue
            words = _words(raw.split(" #", 1)[0])
            for index, (column, word) in enumerate(words):
                if word.startswith("--") and len(word) > 2:
                    flag, sep, value = word[2:].partition("=")
                    if not sep:
                        following = words[index + 1][1] if index + 1 < len(words) else ""
                        value = following if not following.startswith("-") else ""
                    value = value.strip("\"'")
                    flag = flag.replace("-", "_")
                    if not value or "$" in value:
                        continue
                    where = Setting(value, name, number, column, f"--{word[2:].partition('=')[0]}")
                    if flag in _FLAG_NAMES:
                        flags[flag] = where
                    elif flag in _RECIPE_FLAGS:
                        recipe = where
                elif "=" in word:
                    key_name, _, value = word.partition("=")
                    value = value.strip("\"'")
                    if key_name in _CONFIG_NAMES and value and "$" not in value:
                        overrides[key_name] = Setting(value, name, number, column, key_name)
    return flags, overrides, recipe


def _words(line: str) -> list[tuple[int, str]]:
    """(1-based column, word) of a shell line split at blanks (quotes kept in the word; no expansion)."""
    out: list[tuple[int, str]] = []
    start = None
    for index, char in enumerate(line + " "):
        if char in " \t\\;":
            if start is not None:
                out.append((start + 1, line[start:index]))
                start = None
        elif start is None:
            start = index
    return out


def _model(run: Run, config: dict[str, Any] | None, found: dict[str, Setting]) -> None:
    """The architecture: a config's model section (metrics' reading), else the NeMo 2 recipe's model, else a
    known model by name (metrics' table); the recipe's defaults fill the layout the file does not state."""
    from helm_nemo.metrics.flops import known_model
    from helm_nemo.metrics.recipe import _architecture

    seq = found.get("seq_len")
    seq_found = None
    if seq is not None and _as_int(seq.value):
        from helm_nemo.metrics.recipe import Found

        seq_found = Found(_as_int(seq.value), seq.file or "", seq.line, seq.path)
    if config is not None:
        arch = _architecture(config, ("", None, ""), {}, seq_found)
        if arch is not None:
            run.arch = arch.value
            where = found.get("num_layers")
            run.arch_from = where or Setting("config", run.file)
            return
    if run.model_name is None:
        return
    row = recipe_table().get(_recipe_key(str(run.model_name.value)))
    model = known_model(row["model"] if row else str(run.model_name.value))
    if row is not None:
        run.recipe = row
        label = f"NeMo 2 recipe {row['name']}'s default ({row['source']})"
        for name, value in row.get("defaults", {}).items():
            if name not in found and value is not None:
                found[name] = Setting(value, default=label)
    if model is None:
        return
    shape = model.arch
    seq_len = _as_int(found["seq_len"].value) if "seq_len" in found else None
    if seq_len:
        shape = shape._replace(seq_len=seq_len)
    run.arch = shape
    run.arch_from = Setting(model.name, default=f"model {model.name} ({model.source})")


def _derived(run: Run) -> None:
    """Defaults Megatron applies when a value is not given (1 for the parallel sizes, SP off, the
    distributed optimizer as NeMo 1's optimizer name says), and the model's own shape as settings."""
    megatron = "Megatron's default"
    for name in ("tp", "pp", "cp", "ep", "micro_batch"):
        if run.get(name) is None:
            run.settings[name] = Setting(1, default=megatron)
    if run.get("etp") is None:
        run.settings["etp"] = run.settings["tp"]._replace(default=run.settings["tp"].default or "= tensor parallel")
    if run.get("sp") is None:
        run.settings["sp"] = Setting(False, default=megatron)
    if run.get("vp") is None and run.get("layers_per_vp_stage") and run.get("num_layers") and run.get("pp"):
        per_stage = run.get("num_layers") // run.get("pp")
        if per_stage % run.get("layers_per_vp_stage") == 0:
            run.settings["vp"] = run.settings["layers_per_vp_stage"]._replace(
                value=per_stage // run.get("layers_per_vp_stage")
            )
    precision = run.settings.get("precision")
    if run.get("grad_fp32") is None and precision is not None and precision.path.endswith("compute_dtype"):
        # NeMo's and Megatron-Bridge's performance scripts (--compute_dtype) reduce gradients in bf16
        # (NeMo scripts/performance/helpers.py set_precision_configs: grad_reduce_in_fp32 = False)
        run.settings["grad_fp32"] = precision._replace(value=False)
    if run.get("dist_optimizer") is None and run.get("optimizer_name"):
        name = str(run.get("optimizer_name"))
        run.settings["dist_optimizer"] = run.settings["optimizer_name"]._replace(
            value=name in ("distributed_fused_adam", "mcore_distributed_optim")
        )
    if run.arch is not None:
        shape = {
            "num_layers": run.arch.layers,
            "heads": run.arch.heads,
            "query_groups": run.arch.kv_heads or run.arch.heads,
            "experts": run.arch.experts or None,
        }
        source = run.arch_from or Setting(None)
        for name, value in shape.items():
            if run.get(name) is None and value is not None:
                run.settings[name] = Setting(
                    value, source.file, source.line, source.column, source.path, source.default
                )
    if run.get("seq_len") is None and run.arch is not None:
        source = run.arch_from or Setting(None)
        run.settings["seq_len"] = Setting(run.arch.seq_len, default=source.default or "the model's sequence length")


def precision_of(run: Run) -> str:
    """`fp8` or `bf16`, as metrics reads the precision (model.fp8, trainer.precision, --compute_dtype …)."""
    if run.get("fp8"):
        return "fp8"
    precision = run.get("precision")
    return "fp8" if precision is not None and "fp8" in str(precision).lower() else "bf16"


def run_from_facts(
    facts: dict[str, Any],
    *,
    gpus: int,
    arch: Architecture | None = None,
    accelerator: str | None = None,
    model: str | None = None,
    source: str = "facts",
    recipe_defaults: bool = True,
) -> Run:
    """A Run from plain facts (`{"tp": 4, "pp": 8, "seq_len": 8192, …}`, names of SETTINGS) rather than a values
    file: the recorded layouts of gpu-recipes, NeMo's performance tables and the measured fixtures. `model`: a
    NeMo 2 recipe name or a known model (metrics.flops) when `arch` is not given; `recipe_defaults` False: a NeMo 1
    or Megatron run, whose unstated values are Megatron's defaults, not a NeMo 2 recipe's."""
    from helm_nemo.metrics.flops import known_model

    run = Run(release=None, file=source)
    run.gpus = Setting(gpus, source)
    if accelerator:
        run.accelerator = Setting(accelerator, source)
    found = {name: Setting(value, source) for name, value in facts.items() if value is not None}
    if arch is not None:
        run.arch = (
            arch if "seq_len" not in found else arch._replace(seq_len=_as_int(found["seq_len"].value) or arch.seq_len)
        )
        run.arch_from = Setting("facts", source)
        if model:
            run.model_name = Setting(model, source)
    elif model:
        run.model_name = Setting(model, source)
        if recipe_defaults:
            _model(run, None, found)
        if run.arch is None and known_model(model) is not None:
            run.arch = known_model(model).arch  # type: ignore[union-attr]
    for name, value in found.items():
        run.settings[name] = value._replace(value=normalised(name, value.value))
    _derived(run)
    return run
