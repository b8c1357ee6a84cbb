"""Model FLOPs per training sample (one sequence, forward + backward).

Two sources, in this order:

1. gpu-recipes' table (src/utils/training_metrics, the anchor): for the models it lists, at the
   sequence length the table assumes, its number is used as is, so MFU equals the anchor's.
2. The architecture formula below, for every other model or sequence length (docs/metrics.md):

   per token, forward, one layer (h hidden, H heads, G key/value heads, d head size, s sequence length,
   f FFN size, m = 3 for gated MLPs (SwiGLU) else 2):
       attention projections   2·h·d·(H + 2G) + 2·H·d·h
       attention scores/values 4·s·H·d                 (full s×s, as the anchor's numbers count it)
       MLP                     2·m·h·f                 (MoE: f = top_k·f_expert + f_shared)
   once per token: logits      2·h·V
   per sample = 3 (forward + backward) · s · (Σ layers + logits)

With d = h/H this is NeMo's llama/mixtral/gpt3 formula; it reproduces the anchor's table within the
table's printed precision except llama3.1-70b (formula +0.79 %) and llama3.1-405b (formula -0.67 %),
whose table values were not computed this way (docs/metrics.md lists every model). Router, norm and rotary FLOPs are left out (< 0.1 %).
"""

from __future__ import annotations

import re
from collections import namedtuple


class Architecture(
    namedtuple(
        "Architecture",
        "layers hidden ffn heads vocab seq_len kv_heads head_dim gated experts top_k moe_ffn shared_ffn dense_layers"
        " q_lora kv_lora rope_dim v_dim",
        defaults=(None, None, False, 0, 0, None, 0, 0, None, None, None, None),
    )
):
    """The shape of a transformer, enough to count its training FLOPs.

    ffn: the dense MLP size (0 when every layer is MoE); kv_heads: query groups (GQA, None: = heads); head_dim:
    kv_channels (None: hidden / heads); gated: SwiGLU/GeGLU, three MLP matrices; experts: routed experts (0: a
    dense model) of which top_k are active; moe_ffn: one expert's FFN size (None: = ffn); shared_ffn: the shared
    experts' FFN size (always active); dense_layers: the leading dense layers of an MoE model.
    Multi-head latent attention (DeepSeek-V2/V3, Kimi-K2) when kv_lora is set: queries through a q_lora-rank
    projection (None: a full one), keys and values from one kv_lora-rank latent; each head's query and key have
    head_dim (no position) + rope_dim (rotary) channels and its value v_dim.
    (A namedtuple: a dataclass or typing.NamedTuple costs a millisecond or more to define, on every validate run.)
    """

    __slots__ = ()

    @property
    def latent(self) -> bool:
        """Multi-head latent attention."""
        return self.kv_lora is not None

    def attention_weights(self) -> tuple[int, int]:
        """(weights split over tensor parallel, weights every TP rank holds) of one layer's attention, no
        biases or norms. MLA's down projections are duplicated on every TP rank (megatron-core's
        MLASelfAttention builds them `parallel_mode="duplicated"`)."""
        h, heads = self.hidden, self.heads
        d = self.head_dim or h // heads
        if not self.latent:
            kv = self.kv_heads or heads
            return h * d * (heads + 2 * kv) + heads * d * h, 0
        rope, v = self.rope_dim or 0, self.v_dim or d
        q_up = (self.q_lora or h) * heads * (d + rope)
        down = (h * self.q_lora if self.q_lora else 0) + h * (self.kv_lora + rope)
        return q_up + self.kv_lora * heads * (d + v) + heads * v * h, down

    def flops_per_sample(self) -> float:
        h, s = self.hidden, self.seq_len
        heads = self.heads
        d = self.head_dim or h // heads
        mats = 3 if self.gated else 2
        split, duplicated = self.attention_weights()
        if self.latent:  # scores over head_dim + rope_dim channels, values of v_dim
            core = 2 * s * heads * (d + (self.rope_dim or 0)) + 2 * s * heads * (self.v_dim or d)
        else:
            core = 4 * s * heads * d
        attention = 2 * (split + duplicated) + core
        dense_mlp = 2 * mats * h * self.ffn
        if self.experts:
            moe_mlp = 2 * mats * h * (self.top_k * (self.moe_ffn or self.ffn) + self.shared_ffn)
            per_token = self.dense_layers * (attention + dense_mlp) + (self.layers - self.dense_layers) * (
                attention + moe_mlp
            )
        else:
            per_token = self.layers * (attention + dense_mlp)
        per_token += 2 * h * self.vocab
        return float(3 * s * per_token)


class KnownModel(namedtuple("KnownModel", "name arch anchor_flops source aliases", defaults=(None, "", ()))):
    """A model by name: its architecture and, when gpu-recipes has one, the anchor's FLOPs per sample (gpu-recipes
    training_metrics MODEL_FLOPS_PER_SAMPLE)."""

    __slots__ = ()


_LLAMA3_8B = Architecture(
    layers=32, hidden=4096, ffn=14336, heads=32, kv_heads=8, vocab=128256, seq_len=8192, gated=True
)
_LLAMA3_70B = Architecture(
    layers=80, hidden=8192, ffn=28672, heads=64, kv_heads=8, vocab=128256, seq_len=8192, gated=True
)
_HF = "https://huggingface.co/"

KNOWN_MODELS: tuple[KnownModel, ...] = (
    KnownModel(
        "gpt3-5b",
        Architecture(24, 4096, 16384, 32, 51200, 2048),
        6.69e13,
        "NeMo gpt3 5b config; vocabulary 51200 as NeMo's FLOPs formulas",
    ),
    KnownModel(
        "gpt3-175b",
        Architecture(96, 12288, 49152, 96, 51200, 2048),
        2.2e15,
        "GPT-3 paper (arXiv:2005.14165) table 2.1; vocabulary 51200 as NeMo's FLOPs formulas",
    ),
    KnownModel(
        "llama2-7b",
        Architecture(32, 4096, 11008, 32, 32000, 4096, gated=True),
        1.89e14,
        _HF + "meta-llama/Llama-2-7b-hf/blob/main/config.json",
    ),
    KnownModel(
        "llama2-13b",
        Architecture(40, 5120, 13824, 40, 32000, 4096, gated=True),
        None,
        _HF + "meta-llama/Llama-2-13b-hf/blob/main/config.json",
    ),
    KnownModel(
        "llama2-70b",
        Architecture(80, 8192, 28672, 64, 32000, 4096, kv_heads=8, gated=True),
        1.82e15,
        _HF + "meta-llama/Llama-2-70b-hf/blob/main/config.json",
    ),
    KnownModel("llama3-8b", _LLAMA3_8B, None, _HF + "meta-llama/Meta-Llama-3-8B/blob/main/config.json"),
    KnownModel("llama3-70b", _LLAMA3_70B, 3.94e15, _HF + "meta-llama/Meta-Llama-3-70B/blob/main/config.json"),
    KnownModel("llama3.1-8b", _LLAMA3_8B, 4.74e14, _HF + "meta-llama/Llama-3.1-8B/blob/main/config.json"),
    KnownModel("llama3.1-70b", _LLAMA3_70B, 3.9129e15, _HF + "meta-llama/Llama-3.1-70B/blob/main/config.json"),
    KnownModel(
        "llama3.1-405b",
        Architecture(126, 16384, 53248, 128, 128256, 8192, kv_heads=8, gated=True),
        2.16533e16,
        _HF + "meta-llama/Llama-3.1-405B/blob/main/config.json",
    ),
    KnownModel(
        "mixtral-8x7b",
        Architecture(32, 4096, 14336, 32, 32000, 4096, kv_heads=8, gated=True, experts=8, top_k=2),
        3.4e14,
        _HF + "mistralai/Mixtral-8x7B-v0.1/blob/main/config.json",
        aliases=("mixtral-7b",),
    ),
    KnownModel(
        "mixtral-8x22b",
        Architecture(56, 6144, 16384, 48, 32768, 4096, kv_heads=8, gated=True, experts=8, top_k=2),
        None,
        _HF + "mistralai/Mixtral-8x22B-v0.1/blob/main/config.json",
    ),
    KnownModel(
        "nemotron4-340b",
        Architecture(96, 18432, 73728, 96, 256000, 4096, kv_heads=8),
        None,
        _HF + "nvidia/Nemotron-4-340B-Base (squared-ReLU MLP: two matrices)",
    ),
    KnownModel(
        "qwen3-30b-a3b",
        Architecture(
            48, 2048, 0, 32, 151936, 4096, kv_heads=4, head_dim=128, gated=True, experts=128, top_k=8, moe_ffn=768
        ),
        None,
        _HF + "Qwen/Qwen3-30B-A3B/blob/main/config.json",
    ),
    KnownModel(
        "qwen3-235b-a22b",
        Architecture(
            94, 4096, 0, 64, 151936, 4096, kv_heads=4, head_dim=128, gated=True, experts=128, top_k=8, moe_ffn=1536
        ),
        None,
        _HF + "Qwen/Qwen3-235B-A22B/blob/main/config.json",
    ),
    KnownModel(
        "deepseek-v3",
        Architecture(
            61,
            7168,
            18432,
            128,
            129280,
            4096,
            head_dim=128,
            gated=True,
            experts=256,
            top_k=8,
            moe_ffn=2048,
            shared_ffn=2048,
            dense_layers=3,
            q_lora=1536,
            kv_lora=512,
            rope_dim=64,
            v_dim=128,
        ),
        None,
        _HF + "deepseek-ai/DeepSeek-V3/blob/main/config.json (the multi-token prediction module not counted)",
    ),
    KnownModel(
        "kimi-k2",
        Architecture(
            61,
            7168,
            18432,
            64,
            163840,
            4096,
            head_dim=128,
            gated=True,
            experts=384,
            top_k=8,
            moe_ffn=2048,
            shared_ffn=2048,
            dense_layers=1,
            q_lora=1536,
            kv_lora=512,
            rope_dim=64,
            v_dim=128,
        ),
        None,
        _HF + "moonshotai/Kimi-K2-Base/blob/main/config.json",
    ),
    KnownModel(
        "gpt-oss-120b",
        Architecture(
            36, 2880, 0, 64, 201088, 4096, kv_heads=8, head_dim=64, gated=True, experts=128, top_k=4, moe_ffn=2880
        ),
        None,
        _HF + "openai/gpt-oss-120b/blob/main/config.json (sliding-window layers counted as full attention: an"
        " upper bound on their FLOPs; attention biases and sinks not counted)",
    ),
    KnownModel(
        "gpt-oss-20b",
        Architecture(
            24, 2880, 0, 64, 201088, 4096, kv_heads=8, head_dim=64, gated=True, experts=32, top_k=4, moe_ffn=2880
        ),
        None,
        _HF + "openai/gpt-oss-20b/blob/main/config.json (as gpt-oss-120b)",
    ),
)

# Model families gpu-recipes trains that are not GPT-style transformers the formula describes, by the start of
# model_key(name) (every size and spelling: wan_14b, Wan2.1-14B, wan21): named so the error says why, not "unknown".
UNSUPPORTED = (("wan", "diffusion-transformer architecture (the Wan 2.1 video model)"),)


def model_key(name: str) -> str:
    """One spelling for every way recipes write a model: `llama3.1-405b`, `llama31_405b`, `Llama3-1-405B`
    -> `llama31405b`; `mixtral_8x7b` -> `mixtral8x7b`."""
    return re.sub(r"[^a-z0-9]", "", name.lower())


_BY_KEY = {model_key(alias): m for m in KNOWN_MODELS for alias in (m.name, *m.aliases)}


def known_model(name: str) -> KnownModel | None:
    return _BY_KEY.get(model_key(name))


def known_names() -> list[str]:
    return [m.name for m in KNOWN_MODELS]


def unsupported_reason(name: str) -> str | None:
    key = model_key(name)
    return next((reason for family, reason in UNSUPPORTED if key.startswith(family)), None)


def match_architecture(arch: Architecture) -> KnownModel | None:
    """The known model with exactly this shape (layers, sizes, heads, experts, sequence length), vocabulary
    aside (NeMo configs do not state it); None when none matches."""
    for model in KNOWN_MODELS:
        if model.arch._replace(vocab=arch.vocab) == arch:
            return model
    return None


class ModelFlops(namedtuple("ModelFlops", "name flops source seq_len", defaults=(None,))):
    """FLOPs per sample for a run, and where the figure came from (source: "gpu-recipes table", "formula",
    "--model-flops")."""

    __slots__ = ()


def flops_for_model(model: KnownModel, seq_len: int | None = None) -> ModelFlops:
    """The anchor's number when it has one for this sequence length, else the formula."""
    if model.anchor_flops is not None and seq_len in (None, model.arch.seq_len):
        return ModelFlops(model.name, model.anchor_flops, "gpu-recipes table", model.arch.seq_len)
    arch = model.arch if seq_len is None else model.arch._replace(seq_len=seq_len)
    return ModelFlops(model.name, arch.flops_per_sample(), "formula", arch.seq_len)


def flops_for_architecture(arch: Architecture) -> ModelFlops:
    """A config's architecture: a known model's (anchor) number when the shape is one, else the formula."""
    model = match_architecture(arch)
    if model is not None:
        return flops_for_model(model)
    return ModelFlops(None, arch.flops_per_sample(), "formula", arch.seq_len)
