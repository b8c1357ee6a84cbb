"""NeMo 2 recipe names -> the model they build (a name of helm_nemo/metrics/flops.py KNOWN_MODELS) and the
defaults of their pretrain_recipe(): trainer() parallelism arguments and the data module's batch and sequence.
Facts read from NVIDIA/NeMo nemo/collections/llm/recipes/<name>.py at commit 8cfedd7203 (SOURCE);
every recipe uses the distributed optimizer (recipes/optim/adam.py: use_distributed_optimizer=True) and
bf16_mixed (recipes/precision/mixed_precision.py: grad_reduce_in_fp32=True). Recipe defaults change between
NeMo releases (llama31_405b was TP 8, PP 9, CP 4 until NeMo PR #12039), so a layout that only these defaults
make wrong is a note of `helm nemo fit`, never an error: the image's NeMo decides.
finetune recipes default to LoRA (`peft_scheme='lora'`): no memory verdict (fit says so).
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

SOURCE = "https://github.com/NVIDIA/NeMo/tree/8cfedd7203/nemo/collections/llm/recipes"

# name -> {model: a metrics.flops KNOWN_MODELS name, defaults: {setting: value}, peft: "lora" for finetune recipes}
RECIPES: dict[str, dict[str, Any]] = {
    "gpt3_175b": {
        "model": "gpt3-175b",
        "defaults": {
            "tp": 4,
            "pp": 8,
            "vp": 6,
            "cp": 1,
            "sp": True,
            "seq_len": 2048,
            "global_batch": 2048,
            "micro_batch": 2,
            "dist_optimizer": True,
        },
    },
    "llama2_7b": {
        "model": "llama2-7b",
        "defaults": {
            "tp": 2,
            "pp": 1,
            "cp": 1,
            "sp": False,
            "seq_len": 4096,
            "global_batch": 512,
            "micro_batch": 1,
            "dist_optimizer": True,
        },
    },
    "llama3_8b": {
        "model": "llama3-8b",
        "defaults": {
            "tp": 1,
            "pp": 1,
            "cp": 2,
            "sp": False,
            "seq_len": 8192,
            "global_batch": 512,
            "micro_batch": 1,
            "dist_optimizer": True,
        },
    },
    "llama31_8b": {
        "model": "llama3.1-8b",
        "defaults": {
            "tp": 1,
            "pp": 1,
            "cp": 2,
            "sp": False,
            "seq_len": 8192,
            "global_batch": 512,
            "micro_batch": 1,
            "dist_optimizer": True,
        },
    },
    "llama3_70b": {
        "model": "llama3-70b",
        "defaults": {
            "tp": 4,
            "pp": 4,
            "vp": 5,
            "cp": 2,
            "sp": True,
            "seq_len": 8192,
            "global_batch": 512,
            "micro_batch": 1,
            "dist_optimizer": True,
        },
    },
    "llama31_70b": {
        "model": "llama3.1-70b",
        "defaults": {
            "tp": 4,
            "pp": 4,
            "vp": 5,
            "cp": 2,
            "sp": True,
            "seq_len": 8192,
            "global_batch": 512,
            "micro_batch": 1,
            "dist_optimizer": True,
        },
    },
    "llama31_405b": {
        "model": "llama3.1-405b",
        "defaults": {
            "tp": 8,
            "pp": 8,
            "vp": 2,
            "cp": 4,
            "sp": True,
            "seq_len": 8192,
            "global_batch": 512,
            "micro_batch": 1,
            "dist_optimizer": True,
            "account_embedding": True,
            "account_loss": True,
        },
    },
    "mixtral_8x7b": {
        "model": "mixtral-8x7b",
        "defaults": {
            "tp": 1,
            "pp": 4,
            "vp": 8,
            "cp": 1,
            "ep": 8,
            "sp": False,
            "seq_len": 4096,
            "global_batch": 512,
            "micro_batch": 1,
            "dist_optimizer": True,
        },
    },
    "mixtral_8x22b": {
        "model": "mixtral-8x22b",
        "defaults": {
            "tp": 2,
            "pp": 4,
            "vp": 14,
            "cp": 2,
            "ep": 8,
            "sp": True,
            "seq_len": 4096,
            "global_batch": 512,
            "micro_batch": 1,
            "dist_optimizer": True,
        },
    },
    "nemotron4_340b": {
        "model": "nemotron4-340b",
        "defaults": {
            "tp": 8,
            "pp": 12,
            "vp": 8,
            "cp": 2,
            "sp": True,
            "seq_len": 4096,
            "global_batch": 2304,
            "micro_batch": 1,
            "dist_optimizer": True,
        },
    },
    "qwen3_30b_a3b": {
        "model": "qwen3-30b-a3b",
        "defaults": {
            "tp": 4,
            "pp": 2,
            "cp": 1,
            "ep": 4,
            "sp": True,
            "seq_len": 4096,
            "global_batch": 32,
            "micro_batch": 2,
            "dist_optimizer": True,
            "recompute": "full",
            "recompute_method": "uniform",
            "recompute_layers": 1,
        },
    },
    "qwen3_235b_a22b": {
        "model": "qwen3-235b-a22b",
        "defaults": {
            "tp": 4,
            "pp": 16,
            "cp": 2,
            "ep": 8,
            "sp": True,
            "seq_len": 4096,
            "global_batch": 32,
            "micro_batch": 1,
            "dist_optimizer": True,
            "account_embedding": True,
            "account_loss": True,
        },
    },
    "llama3_8b_finetune": {
        "model": "llama3-8b",
        "peft": "lora",
        "defaults": {"tp": 1, "pp": 1, "seq_len": 2048, "dist_optimizer": True},
    },
    "llama3_70b_finetune": {
        "model": "llama3-70b",
        "peft": "lora",
        "defaults": {"tp": 8, "pp": 1, "seq_len": 2048, "dist_optimizer": True},
    },
    "llama31_405b_finetune": {
        "model": "llama3.1-405b",
        "peft": "lora",
        "defaults": {"seq_len": 2048, "dist_optimizer": True},
    },
}
