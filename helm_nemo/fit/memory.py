"""Memory per GPU of a Megatron training run, for its worst pipeline stage (docs/fit.md has every formula).

Terms, per GPU (bytes; Ψ = the parameters this GPU holds):
  weights      2 Ψ                               (bf16 parameters)
  gradients    4 Ψ, or 2 Ψ without grad_reduce_in_fp32   (Megatron DDP's main-grad buffer, not sharded)
  optimizer    12 Ψ (fp32 master copy, Adam m and v; the precision-aware optimizer's dtypes when it is on),
               / (DP × CP) with the distributed optimizer (its shard
               group is the data-parallel group with context parallel); expert parameters / expert DP
  activations  per layer and micro-batch, Korthikanti et al. 2022 (arXiv:2205.05198) §4 generalised to GQA and
               gated MLPs, × the micro-batches in flight of the schedule; plus the logits and loss buffers on
               the last stage
  other        fixed costs outside the tensors: CUDA context, NCCL communicators, allocator slack
The worst stage is the maximum over the first, a middle and the last stage (embedding on the first, output
layer and logits on the last). `allocated` (everything but the fixed costs) is what
torch.cuda.max_memory_allocated measures (tests/fixtures/fit/).
"""

from __future__ import annotations

from collections import namedtuple

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: importing typing costs every run start-up time
    from helm_nemo.fit.gpu import Gpu
    from helm_nemo.fit.layout import Layout
    from helm_nemo.fit.model import Run
    from helm_nemo.metrics.flops import Architecture

GIB = float(1 << 30)
CUDA_CONTEXT_GIB = 2.4  # outside torch's allocator on one GPU: CUDA context, cuBLAS, kernels (tests/fixtures/fit)
NCCL_GIB_PER_GROUP = 0.75  # per communicator group: 2-GPU runs measured 0.4-1.5 GiB above one GPU (same fixtures)
ACTIVATION_ERROR = 0.2  # how far the activation term may be off (the fixtures: within 10 %), for the low end
ALLOCATOR_SLACK = 0.05  # caching-allocator fragmentation on top of the peak of live tensors


class Options(namedtuple("Options", "attention softmax_bytes logits_bytes", defaults=("flash", 2.0, None))):
    """What the estimate assumes about the software stack (parameters, not facts of the values file).

    attention: "flash" (the fused/flash attention NeMo containers run through Transformer Engine: only the
    output and the log-sum-exp are kept), "unfused" (s×s scores of `softmax_bytes` each) or "local" (megatron-core's
    local spec without Transformer Engine, as tests/fixtures/fit measured it: fp32 softmax plus its bf16 copy,
    K/V repeated to every head, unfused SwiGLU);
    softmax_bytes: bytes of each saved attention probability in unfused attention (2: bf16);
    logits_bytes: bytes per logit live on the last stage: the local stack keeps 10 (bf16 logits, the loss's fp32
    copy and its shifted fp32 softmax; tests/fixtures/fit), Transformer Engine's 6 (bf16 logits, fp32 softmax)."""

    # attention: str
    # softmax_bytes: float
    # logits_bytes: float | None  # None: 10 for "local" (measured), 6 otherwise
    __slots__ = ()

    def per_logit(self) -> float:
        if self.logits_bytes is not None:
            return float(self.logits_bytes)
        return 10.0 if self.attention == "local" else 6.0


class Estimate(
    namedtuple(
        "Estimate", "stage weights gradients optimizer activations other params in_flight assumptions", defaults=((),)
    )
):
    """GiB per GPU of the worst stage, by term, and what the numbers rest on."""

    # stage: int  # the pipeline stage (0-based) with the largest total
    # weights: float
    # gradients: float
    # optimizer: float
    # activations: float
    # other: float
    # params: float  # parameters on that GPU
    # in_flight: int  # micro-batches (model chunks with VP) whose activations are live at the peak
    # assumptions: tuple[str, ...]
    __slots__ = ()

    @property
    def total_gib(self) -> float:
        return float(self.weights + self.gradients + self.optimizer + self.activations + self.other)

    @property
    def low_gib(self) -> float:
        """The low end: the exact terms (weights, gradients, optimizer: parameter counts times bytes), the
        activations less ACTIVATION_ERROR, the CUDA context; no allocator slack."""
        exact = self.weights + self.gradients + self.optimizer
        return float(exact + (1 - ACTIVATION_ERROR) * self.activations + CUDA_CONTEXT_GIB)

    @property
    def allocated_gib(self) -> float:
        """What torch's allocator holds at the peak (no CUDA context, no NCCL buffers)."""
        return float(self.weights + self.gradients + self.optimizer + self.activations)

    def terms(self) -> dict[str, float]:
        return {
            "weights": self.weights,
            "gradients": self.gradients,
            "optimizer": self.optimizer,
            "activations": self.activations,
            "other": self.other,
        }


def unmodelled(run: Run) -> str | None:
    """Why the estimate cannot be made for this run (None: it can)."""
    if run.arch is None:
        return "no model: the values name no known model and carry no model config"
    if run.get("fsdp"):
        return "FSDP shards weights, gradients and optimizer over the data-parallel group: not modelled"
    if run.get("cpu_offload"):
        return "CPU offloading of activations or weights: not modelled"
    peft = run.get("peft") or (run.recipe or {}).get("peft")
    if peft and str(peft).lower() not in ("none", "null"):
        return f"PEFT ({peft}): frozen weights without gradients or optimizer state, not modelled"
    return None


def estimate_layout(run: Run, layout: Layout, gpu: Gpu | None, options: Options | None = None) -> Estimate | None:
    if unmodelled(run) is not None or run.arch is None:
        return None
    options = options or _options(run)
    if layout.pp == 1 and layout.vp is not None:
        layout = layout._replace(vp=None)  # Megatron refuses it (layout rule vp-needs-pp); no interleaving
    stages = _stages(run, layout)
    picks = sorted({0, len(stages) - 1, len(stages) // 2})
    best: Estimate | None = None
    for stage in picks:
        found = _stage(run, layout, stages, stage, options)
        if best is None or found.total_gib > best.total_gib:
            best = found
    return best


def _options(run: Run) -> Options:
    flash = run.get("flash")
    return Options(attention="unfused" if flash is False else "flash")


def _dims(run: Run) -> tuple[int, int, int, int, int, int, int]:
    """(hidden, query size, key/value size, dense FFN, heads, vocab, gated matrices)."""
    arch = run.arch
    assert arch is not None
    d = arch.head_dim or arch.hidden // arch.heads
    groups = arch.kv_heads or arch.heads
    vocab = arch.vocab or 51200
    return arch.hidden, arch.heads * d, groups * d, arch.ffn, arch.heads, vocab, 3 if arch.gated else 2


def _state(run: Run, lay: Layout, stages: list[int], stage: int) -> tuple[float, float, float, float]:
    """(parameters, weight, gradient and optimizer bytes) on one GPU of `stage`: what a layout holds before any
    activation, the same for every micro batch and virtual pipeline size."""
    arch = run.arch
    assert arch is not None
    h, q, kv, ffn, heads, vocab, mats = _dims(run)
    n_layers = stages[stage]
    first, last = stage == 0, stage == lay.pp - 1
    tp, cp = lay.tp, lay.cp
    moe = arch.experts > 0
    biases = not arch.gated  # GPT-style models carry linear biases
    # -- parameters on this GPU
    split_attention, duplicated = arch.attention_weights()
    attention = split_attention + ((q + 2 * kv + h) if biases else 0)
    norms = 4 * h if biases else 2 * h  # LayerNorm (weight, bias) or RMSNorm (weight), two per layer
    if arch.latent:  # the RMSNorms of the query and key-value latents
        norms += (arch.q_lora or 0) + arch.kv_lora
    dense_layers, moe_layers = _layer_kinds(arch, stages, stage)
    dense = mats * h * ffn + ((ffn + h) if biases else 0)
    if moe:
        f_e = arch.moe_ffn or ffn
        experts = arch.experts * mats * h * f_e
        shared = mats * h * arch.shared_ffn
        router = h * arch.experts
    else:
        experts = shared = router = 0
    tp_params = n_layers * attention + dense_layers * dense + moe_layers * shared
    replicated = n_layers * (norms + duplicated) + moe_layers * router
    expert_params = moe_layers * experts
    tied = run.get("tied_embeddings")
    if tied is None:
        tied = not (run.get("untied_embeddings") or arch.gated)
    embedding = vocab * h + (arch.seq_len * h if biases else 0)  # word (+ learned positions, GPT)
    if first:
        tp_params += embedding
    if last and (lay.pp > 1 or not tied):
        tp_params += vocab * h
    if last:
        replicated += norms // 2  # final norm
    dense_params = tp_params / tp + replicated
    expert_local = expert_params / (lay.ep * lay.etp)
    params = dense_params + expert_local
    # -- weights, gradients, optimizer
    grad_bytes = 4 if run.get("grad_fp32") is not False else 2
    dp_cp = (lay.dp or 1) * cp
    expert_dp = max(1, (lay.gpus or 1) // (lay.etp * lay.ep * lay.pp))
    per_param = optimizer_bytes(run)
    if run.get("dist_optimizer"):
        optimizer = per_param * dense_params / dp_cp + per_param * expert_local / expert_dp
    else:
        optimizer = per_param * params
    return params, 2 * params, grad_bytes * params, optimizer


_DTYPE_BYTES = {
    "fp32": 4,
    "float32": 4,
    "bf16": 2,
    "bfloat16": 2,
    "fp16": 2,
    "float16": 2,
    "half": 2,
    "fp8": 1,
    "uint8": 1,
}


def optimizer_bytes(run: Run) -> int:
    """Adam's state per parameter: the master copy, m and v, fp32 each (12 bytes), unless the precision-aware
    optimizer keeps them in the dtypes it is given (megatron-core OptimizerConfig main_params_dtype,
    exp_avg_dtype, exp_avg_sq_dtype, read only with use_precision_aware_optimizer; Transformer Engine's FusedAdam
    holds them): DeepSeek-V3's Megatron-Bridge recipe keeps m and v in bf16, 8 bytes."""
    if not run.get("precision_aware_optimizer"):
        return 12

    def size(name: str) -> int:
        given = str(run.get(name) or "fp32").lower().removeprefix("torch.")
        return _DTYPE_BYTES.get(given, 4)

    return size("main_params_dtype") + size("exp_avg_dtype") + size("exp_avg_sq_dtype")


def _layer_kinds(arch: Architecture, stages: list[int], stage: int) -> tuple[int, int]:
    """(dense layers, MoE layers) of a pipeline stage: an MoE model's leading `dense_layers` are dense, and the
    stages hold the layers in order (with a virtual pipeline the first chunk of stage 0 still starts at layer 0,
    where the dense ones are; their count is what matters, not which chunk)."""
    n = stages[stage]
    if not arch.experts:
        return n, 0
    start = sum(stages[:stage])
    dense = max(0, min(start + n, arch.dense_layers) - start)
    return dense, n - dense


def state_floor_gib(run: Run, layout: Layout) -> float:
    """The weights, gradients and optimizer state of the fullest stage, in GiB: a floor under the estimate that
    lets the layout search skip every micro batch and virtual pipeline of a TP×PP×CP that cannot fit."""
    stages = _stages(run, layout)
    return max(sum(_state(run, layout, stages, stage)[1:]) for stage in sorted({0, len(stages) - 1})) / GIB


def _stages(run: Run, layout: Layout) -> list[int]:
    stages = layout.stage_layers()
    if stages is None:
        assert run.arch is not None
        per = -(-run.arch.layers // layout.pp)
        stages = [per] * layout.pp
    return stages


def _stage(run: Run, lay: Layout, stages: list[int], stage: int, options: Options) -> Estimate:
    arch = run.arch
    assert arch is not None
    h, q, kv, ffn, heads, vocab, mats = _dims(run)
    n_layers = stages[stage]
    first, last = stage == 0, stage == lay.pp - 1
    tp, cp = lay.tp, lay.cp
    params, weights, gradients, optimizer = _state(run, lay, stages, stage)
    grad_bytes = 4 if run.get("grad_fp32") is not False else 2
    # -- activations
    tokens = (arch.seq_len if lay.seq_len is None else lay.seq_len) / cp * lay.micro_batch
    dense_layers, moe_layers = _layer_kinds(arch, stages, stage)
    per_layer = 0.0  # the stage's mean layer (a kind of layer the stage does not hold is not computed)
    for count, moe_layer in ((dense_layers, False), (moe_layers, True)):
        if count:
            per_layer += count * _per_token(run, lay, h, q, kv, ffn, heads, mats, options, moe=moe_layer)
    per_layer *= tokens / max(n_layers, 1)
    recompute = run.get("recompute")
    method = run.get("recompute_method")
    n_recompute = run.get("recompute_layers") or 1
    chunks = lay.vp or 1
    chunk_layers = n_layers / chunks
    split = tp if lay.sp else 1
    checkpoint = 2 * h * tokens / split  # the input of a recomputed block
    if recompute == "full":
        if method == "block":
            kept = max(chunk_layers - n_recompute, 0)
            per_chunk = kept * per_layer + min(n_recompute, chunk_layers) * checkpoint
            working = per_layer
        else:  # uniform
            per_chunk = -(-chunk_layers // n_recompute) * checkpoint
            working = min(n_recompute, chunk_layers) * per_layer
    else:
        per_chunk, working = chunk_layers * per_layer, 0.0
    microbatches = None
    if lay.global_batch and lay.dp:
        microbatches = max(1, lay.global_batch // (lay.micro_batch * lay.dp))
    if lay.pp == 1:
        in_flight = 1
    elif lay.vp:
        in_flight = (lay.pp - stage - 1) * 2 + (lay.vp - 1) * lay.pp + 1
        if microbatches is not None:
            in_flight = min(in_flight, microbatches * lay.vp)
    else:
        in_flight = lay.pp - stage
        if microbatches is not None:
            in_flight = min(in_flight, microbatches)
    activations = in_flight * per_chunk + working
    if options.attention in ("unfused", "local"):
        scores = lay.micro_batch * heads / tp * _seq(run, lay) ** 2
        activations += 2 * scores  # the bf16 buffer baddbmm writes the scores into (one, reused by every layer)
        if "core_attn" in recomputed_modules(
            run
        ):  # core attention recomputed in backward: one layer's scores live again
            activations += scores * score_bytes(run, options)
    if first:
        activations += in_flight * tokens * 8 / chunks  # token ids and positions in flight (int64)
    if last:
        logits = tokens * vocab / tp * options.per_logit()
        activations += logits + 2 * h * tokens / split
    allocated = weights + gradients + optimizer + activations
    groups = sum(1 for size in (lay.tp, lay.pp, lay.cp, lay.ep, lay.dp or 1) if size > 1)
    other = CUDA_CONTEXT_GIB * GIB + NCCL_GIB_PER_GROUP * GIB * groups + ALLOCATOR_SLACK * allocated
    assumptions = (
        f"attention {options.attention}",
        f"gradients {'fp32' if grad_bytes == 4 else 'bf16'}",
        "distributed optimizer" if run.get("dist_optimizer") else "optimizer state on every data-parallel rank",
        f"Adam state {optimizer_bytes(run)} bytes a parameter",
    )
    return Estimate(
        stage,
        weights / GIB,
        gradients / GIB,
        optimizer / GIB,
        activations / GIB,
        other / GIB,
        params,
        in_flight,
        assumptions,
    )


def _seq(run: Run, lay: Layout) -> float:
    assert run.arch is not None
    return float((lay.seq_len or run.arch.seq_len) / lay.cp)


def score_bytes(run: Run, options: Options) -> float:
    """Bytes kept per attention-score element by unfused attention: the softmax output (fp32 in the local spec,
    plus its bf16 copy for the matmul with V), and the dropout mask and output when attention dropout is on."""
    if (run.get("attention_dropout") or 0) > 0:  # mask (1) and output (2) kept; the bf16 copy is then not
        return (4.0 if options.attention == "local" else options.softmax_bytes) + 3
    return 6.0 if options.attention == "local" else options.softmax_bytes


def recomputed_modules(run: Run) -> frozenset[str]:
    """What selective recomputation recomputes (megatron-core TransformerConfig.recompute_modules; its default is
    core_attn alone): each recomputed module keeps only its input, so what it made in between is not counted.
    layernorm is accepted but not credited (the norms' outputs are the next linear layer's kept inputs)."""
    if run.get("recompute") != "selective":
        return frozenset()
    given = run.get("recompute_modules")
    if isinstance(given, str):
        given = [m for m in given.replace("[", " ").replace("]", " ").replace(",", " ").split() if m]
    return frozenset(str(m).strip("'\"").lower() for m in given) if given else frozenset({"core_attn"})


def _per_token(
    run: Run, lay: Layout, h: int, q: int, kv: int, ffn: int, heads: int, mats: int, options: Options, moe: bool
) -> float:
    """Bytes one token leaves saved in one transformer layer for the backward pass (Korthikanti et al. 2022,
    §4.1, term by term; docs/fit.md)."""
    from helm_nemo.fit.model import precision_of

    arch = run.arch
    assert arch is not None
    t = lay.tp
    split = t if lay.sp else 1  # what SP also splits: norms' inputs, the linear layers' inputs, dropout masks
    hidden_mask = 1 if (run.get("hidden_dropout") or 0) > 0 else 0
    # FP8 (Transformer Engine): the inputs the linear layers keep for their weight gradients are kept in FP8
    lin = 1 if precision_of(run) == "fp8" and options.attention != "local" else 2
    # attention block: QKV input 2h, Q 2q, K and V 4kv, core-attention output 2q, dropout mask h
    local = options.attention == "local"
    keys = q if local else kv  # the local spec repeats K and V to every head (repeat_interleave) before the matmuls
    modules = recomputed_modules(run)
    if arch.latent:
        # MLA: the down projections' input 2h; the query and key-value latents, each kept for its norm and its up
        # projection (2 × 2 bytes); Q and K of head_dim + rope_dim channels per head, V of v_dim (not kept when
        # the up projection is recomputed: mla_up_proj); the core-attention output of v_dim per head, the output
        # projection's input
        d, rope, v = arch.head_dim or h // heads, arch.rope_dim or 0, arch.v_dim or arch.head_dim or h // heads
        latents = 4 * ((arch.q_lora or 0) + arch.kv_lora + rope)
        attention = (lin * h + hidden_mask * h) / split + latents + lin * heads * v / t
        if "mla_up_proj" not in modules:
            attention += (4 * heads * (d + rope) + 2 * heads * v) / t
    else:
        attention = (lin * h + hidden_mask * h) / split + (2 * q + 4 * keys + lin * q) / t
    if options.attention in ("unfused", "local") and "core_attn" not in modules:
        attention += heads * _seq(run, lay) * score_bytes(run, options) / t
    elif options.attention == "flash":
        attention += 4 * heads / t  # log-sum-exp, fp32 per head
    # MLP block: input 2h, FC1 output 2·(mats-1)·f, activation output 2f, dropout mask h
    if moe:
        f_e = arch.moe_ffn or ffn
        gate_e = 2 * f_e if local and mats == 3 else 0  # unfused SwiGLU keeps silu(x1) too, as in the dense MLP
        activation = 0 if "moe_act" in modules else 2 * f_e + gate_e  # moe_act: the activation is recomputed
        routed = arch.top_k * (lin * h + 2 * (mats - 1) * f_e + activation) / lay.etp + 4 * arch.experts
        # unpermute multiplies each routed copy's expert output by its router probability: the product's gradient
        # keeps that output (top_k × 2h, on the token's own rank after the all-to-all back)
        routed += arch.top_k * 2 * h
        shared = (2 * (mats - 1) * arch.shared_ffn + 2 * arch.shared_ffn) / t if arch.shared_ffn else 0
        if "shared_experts" in modules:
            shared = 0
        mlp = (lin * h + hidden_mask * h) / split + (0 if "moe" in modules else routed + shared)
    else:
        gate = 2 * ffn if local and mats == 3 else 0  # unfused SwiGLU also keeps silu(x1) for the product
        inner = 0 if "mlp" in modules else (2 * (mats - 1) * ffn + lin * ffn + gate) / t
        mlp = (lin * h + hidden_mask * h) / split + inner
    norms = 4 * h / split  # the two norms' inputs
    return float(attention + mlp + norms)


def with_layout(run: Run, **changes: object) -> Run:
    """A copy of `run` with some settings changed (what-if answers of the verdict)."""
    from helm_nemo.fit.model import Setting

    settings = dict(run.settings)
    for name, value in changes.items():
        settings[name] = Setting(value, default="what if")
    return run.copy(settings)
