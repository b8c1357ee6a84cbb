"""Measure the GPU memory of megatron-core GPT training for one parallel layout.

Fixtures for `helm nemo fit` (issue 40, item 3). For one layout (a name from layouts.json, or a JSON object) this
builds megatron-core's GPTModel with the local layer spec (no Transformer Engine, no apex, no flash attention:
core attention is megatron-core's unfused DotProductAttention), wraps it the way Megatron-LM's training loop does
(Float16Module, DistributedDataParallel, get_megatron_optimizer), runs a few training steps on random tokens through
the pipeline schedules, and writes one JSON record per rank with the measured memory beside Megatron-LM's own
theoretical figure (reimplemented below from megatron/training/theoretical_memory_usage.py).

Subcommands (the parts that need no GPU run on any machine):
  list [--gpus N] [--set layouts|smoke]   names of the layouts, one a line
  show NAME                               the resolved layout and Megatron's theoretical figure, as JSON
  run --layout NAME|JSON --outdir DIR     under torchrun: measure, write DIR/<name>.rank<r>.json
  merge --layout NAME --rc RC --outdir DIR --out FILE   append the rank records (or a launcher-only record) to FILE
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
LAYOUTS_FILE = HERE / "layouts.json"
MIB = 1024 * 1024
GIB = 1024**3

# Defaults a layout may override; every key is recorded in the output so the estimator sees what was run.
LAYOUT_DEFAULTS: dict[str, Any] = {
    "gpus": 1,
    "tp": 1,
    "pp": 1,
    "vp": None,
    "sp": False,
    "distributed_optimizer": False,
    "mbs": 1,
    "seq": 2048,
    "num_microbatches": 2,
    "recompute": None,  # None | "selective" | "full"
    "recompute_method": None,  # "uniform" | "block" (full only)
    "recompute_num_layers": None,
    "steps": 4,
    "ep": 1,  # expert model parallel (MoE models)
    "expect_oom": False,
    "model_overrides": {},
}
MODEL_KEYS = (
    "hidden",
    "layers",
    "heads",
    "query_groups",
    "ffn",
    "swiglu",
    "normalization",
    "position_embedding",
    "vocab",
    "untie_embeddings",
    "dropout",
    "add_bias_linear",
)
# Optional model keys (MoE and multi-head latent attention, megatron-core's own modules under the local spec):
# experts, top_k, moe_ffn, shared_ffn (the shared experts' FFN size), dense_layers (leading dense layers:
# moe_layer_freq), and mla: {q_lora, kv_lora, head_dim, rope_dim, v_dim}.
MOE_DEFAULTS: dict[str, Any] = {
    "experts": 0,
    "top_k": 0,
    "moe_ffn": None,
    "shared_ffn": 0,
    "dense_layers": 0,
    "mla": None,
}


# ----------------------------------------------------------------------------------------------------------------
# Layouts (no torch needed)


def load_layouts(path: Path = LAYOUTS_FILE) -> dict[str, Any]:
    """The layouts file: models by name, the measured layouts and the smoke layouts."""
    return json.loads(path.read_text())


def resolve_layout(spec: dict[str, Any], models: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """A layout with defaults filled in, its model spelled out and the derived sizes (dp, global batch) added."""
    unknown = set(spec) - set(LAYOUT_DEFAULTS) - {"name", "model"}
    if unknown:
        raise ValueError(f"layout {spec.get('name')!r}: unknown keys {sorted(unknown)}")
    lay = {**LAYOUT_DEFAULTS, **spec}
    model = lay["model"]
    if isinstance(model, str):
        lay["model_name"] = model
        model = dict(models[model])
    else:
        lay["model_name"] = "inline"
        model = dict(model)
    model.update(lay.pop("model_overrides") or {})
    model = {**MOE_DEFAULTS, **model}
    missing = [k for k in MODEL_KEYS if k not in model]
    if missing:
        raise ValueError(f"layout {lay['name']!r}: model lacks {missing}")
    lay["model"] = model
    tp, pp, gpus = lay["tp"], lay["pp"], lay["gpus"]
    if gpus % (tp * pp):
        raise ValueError(f"layout {lay['name']!r}: gpus {gpus} not divisible by tp*pp {tp * pp}")
    lay["dp"] = gpus // (tp * pp)
    lay["global_batch"] = lay["mbs"] * lay["num_microbatches"] * lay["dp"]
    if lay["sp"] and tp == 1:
        raise ValueError(f"layout {lay['name']!r}: sequence parallel needs tp > 1")
    if lay["vp"] is not None and (pp == 1 or model["layers"] % (pp * lay["vp"])):
        raise ValueError(f"layout {lay['name']!r}: vp needs pp > 1 and layers divisible by pp*vp")
    if model["layers"] % pp:
        raise ValueError(f"layout {lay['name']!r}: layers not divisible by pp")
    if model["heads"] % tp or model["query_groups"] % tp or model["vocab"] % tp:
        raise ValueError(f"layout {lay['name']!r}: heads, query groups and vocab must divide by tp")
    if lay["ep"] > 1 and (not model["experts"] or model["experts"] % lay["ep"] or gpus % (lay["ep"] * pp)):
        raise ValueError(f"layout {lay['name']!r}: ep needs experts divisible by it and gpus by ep*pp")
    return lay


def all_layouts(which: str = "layouts", path: Path = LAYOUTS_FILE) -> list[dict[str, Any]]:
    """Every layout of one set ('layouts' or 'smoke'), resolved."""
    data = load_layouts(path)
    return [resolve_layout(s, data["models"]) for s in data[which]]


def find_layout(name_or_json: str, path: Path = LAYOUTS_FILE) -> dict[str, Any]:
    """A layout by name (from either set) or given inline as a JSON object."""
    data = load_layouts(path)
    if name_or_json.lstrip().startswith("{"):
        return resolve_layout(json.loads(name_or_json), data["models"])
    for which in ("layouts", "smoke", "moe"):
        for s in data[which]:
            if s["name"] == name_or_json:
                return resolve_layout(s, data["models"])
    raise KeyError(f"no layout named {name_or_json!r} in {path}")


# ----------------------------------------------------------------------------------------------------------------
# Megatron-LM's theoretical memory figure, reimplemented (dense GPT only: no MoE, MTP, MLA).
# Source read: NVIDIA/Megatron-LM megatron/training/theoretical_memory_usage.py, last changed in commit
# 1bcb3b9e0b029c6109d8d32872645bd540052963 (snapshot at d98e8a64ddf34856e74b24714e3bedb2f5a39553).
# It is not part of the megatron-core wheel. Same arithmetic, own code; results in bytes.


def megatron_weight_and_optimizer_bytes(lay: dict[str, Any]) -> float:
    """Bytes for weights+grads+optimizer on the most loaded shard: 18 B/param, or 6 + 12/DP with the dist. opt."""
    m = lay["model"]
    h, ffn, layers = m["hidden"], m["ffn"], m["layers"]
    tp, pp = lay["tp"], lay["pp"]
    kv_channels = h // m["heads"]
    q_proj_ratio = kv_channels * m["heads"] / h
    gated = 1.5 if m["swiglu"] else 1.0
    norm_size = 1 if m["normalization"] == "RMSNorm" else 2
    attention = 2 * h * h * ((1 + m["query_groups"] / m["heads"]) * q_proj_ratio)
    mlp = 2 * h * ffn * gated
    norms_per_layer = 2 * h * norm_size
    embedding = h * m["vocab"]
    final_norm = norm_size * h
    tp_sharded_block = (attention + mlp) * layers
    replicated_block = norms_per_layer * layers + final_norm
    tp_sharded_most_loaded = (tp_sharded_block / pp + embedding) / tp
    replicated_most_loaded = replicated_block / pp
    if m["untie_embeddings"] and pp == 1:
        tp_sharded_most_loaded += embedding / tp
    per_param = 6 + 12 / lay["dp"] if lay["distributed_optimizer"] else 18
    return (tp_sharded_most_loaded + replicated_most_loaded) * per_param


def _pipeline_factor(lay: dict[str, Any]) -> float:
    """The interleaved-schedule penalty, or the discount when fewer micro-batches than stages are in flight."""
    pp, vp = lay["pp"], lay["vp"]
    if vp is not None:
        return 1 + (pp - 1) / (pp * vp)
    if pp > 1:
        return min(1, lay["num_microbatches"] / pp)
    return 1.0


def megatron_activation_bytes(lay: dict[str, Any]) -> tuple[float, str]:
    """Activation bytes of the first stage by Megatron-LM's formula, and which of its two branches applied.

    Megatron-LM takes the Korthikanti et al. Table 2 branch only with sequence parallel + selective recompute;
    every other layout (full recompute included) goes to its "without SP" branch, which ignores recomputation.
    """
    m = lay["model"]
    s, b, h, v = lay["seq"], lay["mbs"], m["hidden"], m["vocab"]
    tp, pp, layers = lay["tp"], lay["pp"], m["layers"]
    if lay["sp"] and lay["recompute"] == "selective":
        act = s * b * h * (18 + 4 * (m["ffn"] / h)) * layers
        act += 8 * s * b * pp + s * b * h * pp
        act *= _pipeline_factor(lay)
        if pp == 1:
            act += s * b * h * 4 * (1 + v / h)
        return act / tp, "with_sp"
    act = s * b * h * (10 + 24 / tp) * layers
    act += 8 * s * b * pp + s * b * h * pp
    act *= _pipeline_factor(lay)
    if pp == 1:
        act += (s * b * v / tp + s * b * h) * 2
    return act * 1.05, "without_sp"


def megatron_theoretical(lay: dict[str, Any]) -> dict[str, Any] | None:
    """Megatron-LM's 'Theoretical memory footprints' line for this layout, in MiB as it prints them (None for MoE
    and MLA models: this reimplementation is of the dense GPT formula only)."""
    if lay["model"].get("experts") or lay["model"].get("mla"):
        return None
    w = megatron_weight_and_optimizer_bytes(lay)
    a, branch = megatron_activation_bytes(lay)
    return {
        "weight_and_optimizer_mib": round(w / MIB, 2),
        "activation_mib": round(a / MIB, 2),
        "total_mib": round((w + a) / MIB, 2),
        "total_gib": round((w + a) / GIB, 3),
        "activation_branch": branch,
        "source": "NVIDIA/Megatron-LM megatron/training/theoretical_memory_usage.py @ 1bcb3b9e0b02",
    }


# ----------------------------------------------------------------------------------------------------------------
# The measurement (torch and megatron-core imported only here)


def _sp_torch_norm_class():
    """torch LayerNorm/RMSNorm whose weights carry `sequence_parallel`, as apex's FusedLayerNorm sets them.

    megatron-core's WrappedTorchNorm (the local spec's norm without apex) refuses sequence parallel only because
    its parameters lack that attribute (finalize_model_grads all-reduces such grads over TP). Same memory.
    """
    import torch

    class SPTorchNorm:
        def __new__(cls, config, hidden_size, eps=1e-5, **_ignored):
            norm_cls = torch.nn.RMSNorm if config.normalization == "RMSNorm" else torch.nn.LayerNorm
            norm = norm_cls(normalized_shape=hidden_size, eps=eps)
            for p in norm.parameters():
                p.sequence_parallel = config.sequence_parallel
            return norm

    return SPTorchNorm


def _versions() -> dict[str, Any]:
    import torch

    try:
        from megatron.core.package_info import __version__ as mcore_version
    except ImportError:  # pragma: no cover
        mcore_version = None
    nccl = torch.cuda.nccl.version() if torch.cuda.is_available() else None
    return {
        "torch": torch.__version__,
        "megatron_core": mcore_version,
        "cuda_runtime": torch.version.cuda,
        "nccl": ".".join(map(str, nccl)) if isinstance(nccl, tuple) else nccl,
        "gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
        "gpu_total_bytes": torch.cuda.get_device_properties(0).total_memory if torch.cuda.is_available() else None,
        "python": sys.version.split()[0],
    }


def _mem() -> dict[str, int]:
    import torch

    free, total = torch.cuda.mem_get_info()
    return {
        "allocated": torch.cuda.memory_allocated(),
        "reserved": torch.cuda.memory_reserved(),
        "max_allocated": torch.cuda.max_memory_allocated(),
        "max_reserved": torch.cuda.max_memory_reserved(),
        "device_used": total - free,
    }


def _build(lay: dict[str, Any]):
    """Model chunks (DDP-wrapped), optimizer and the forward-backward function, as Megatron-LM's get_model does."""
    import torch
    import torch.nn.functional as F
    from megatron.core import parallel_state
    from megatron.core.distributed import DistributedDataParallel, DistributedDataParallelConfig
    from megatron.core.distributed.finalize_model_grads import finalize_model_grads
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.models.gpt.gpt_model import GPTModel
    from megatron.core.optimizer import OptimizerConfig, get_megatron_optimizer
    from megatron.core.pipeline_parallel import get_forward_backward_func
    from megatron.core.tensor_parallel import model_parallel_cuda_manual_seed
    from megatron.core.tensor_parallel.layers import set_defaults_if_not_set_tensor_model_parallel_attributes
    from megatron.core.transformer.module import Float16Module
    from megatron.core.transformer.transformer_config import TransformerConfig

    m = lay["model"]
    if lay["sp"]:
        import megatron.core.models.backends as backends
        import megatron.core.transformer.transformer_block as block

        norm = _sp_torch_norm_class()
        backends.WrappedTorchNorm = norm
        backends.LNImpl = norm
        block.LayerNormImpl = norm

    model_parallel_cuda_manual_seed(1234)
    extra: dict[str, Any] = {}
    config_class = TransformerConfig
    if m["experts"]:
        extra.update(
            num_moe_experts=m["experts"],
            moe_router_topk=m["top_k"],
            moe_ffn_hidden_size=m["moe_ffn"] or m["ffn"],
            moe_shared_expert_intermediate_size=m["shared_ffn"] or None,
            moe_layer_freq=[0] * m["dense_layers"] + [1] * (m["layers"] - m["dense_layers"]),
            moe_grouped_gemm=False,  # SequentialMLP: one local MLP per expert (no TE grouped GEMM here)
            moe_token_dispatcher_type="alltoall",
            moe_router_load_balancing_type="aux_loss",
            moe_aux_loss_coeff=1e-2,
            expert_model_parallel_size=lay["ep"],
        )
    if m["mla"]:
        from megatron.core.transformer.transformer_config import MLATransformerConfig

        config_class = MLATransformerConfig
        extra.update(
            q_lora_rank=m["mla"]["q_lora"],
            kv_lora_rank=m["mla"]["kv_lora"],
            qk_head_dim=m["mla"]["head_dim"],
            qk_pos_emb_head_dim=m["mla"]["rope_dim"],
            v_head_dim=m["mla"]["v_dim"],
            rope_type="rope",
        )
    cfg = config_class(
        **extra,
        num_layers=m["layers"],
        hidden_size=m["hidden"],
        num_attention_heads=m["heads"],
        num_query_groups=m["query_groups"],
        ffn_hidden_size=m["ffn"],
        gated_linear_unit=m["swiglu"],
        activation_func=F.silu if m["swiglu"] else F.gelu,
        normalization=m["normalization"],
        add_bias_linear=m["add_bias_linear"],
        hidden_dropout=m["dropout"],
        attention_dropout=m["dropout"],
        tensor_model_parallel_size=lay["tp"],
        pipeline_model_parallel_size=lay["pp"],
        virtual_pipeline_model_parallel_size=lay["vp"],
        sequence_parallel=lay["sp"],
        bf16=True,
        params_dtype=torch.bfloat16,
        pipeline_dtype=torch.bfloat16,
        recompute_granularity=lay["recompute"],
        recompute_method=lay["recompute_method"],
        recompute_num_layers=lay["recompute_num_layers"],
        deallocate_pipeline_outputs=True,  # Megatron-LM's training loop sets this
        masked_softmax_fusion=False,  # fused softmax kernels come from apex/TE, absent here
        bias_dropout_fusion=False,
        bias_activation_fusion=False,
        gradient_accumulation_fusion=False,
        apply_rope_fusion=False,
    )
    spec = get_gpt_layer_local_spec(multi_latent_attention=bool(m["mla"]), normalization=m["normalization"])
    pp_rank = parallel_state.get_pipeline_model_parallel_rank()
    pp = lay["pp"]
    chunks = []
    vp = lay["vp"]
    for i in range(vp or 1):
        vp_stage = i if vp else None
        last_chunk = (vp or 1) - 1
        if m["experts"]:  # dense and MoE layers by moe_layer_freq, as Megatron-LM's model provider builds them
            from megatron.core.models.gpt.gpt_layer_specs import get_gpt_decoder_block_spec

            spec = get_gpt_decoder_block_spec(
                cfg, use_transformer_engine=False, normalization=m["normalization"], vp_stage=vp_stage, pp_rank=pp_rank
            )
        chunk = GPTModel(
            config=cfg,
            transformer_layer_spec=spec,
            vocab_size=m["vocab"],
            max_sequence_length=lay["seq"],
            pre_process=pp_rank == 0 and i == 0,
            post_process=pp_rank == pp - 1 and i == last_chunk,
            share_embeddings_and_output_weights=not m["untie_embeddings"],
            position_embedding_type=m["position_embedding"],
            vp_stage=vp_stage,
        )
        for p in chunk.parameters():
            set_defaults_if_not_set_tensor_model_parallel_attributes(p)
        chunk.cuda(torch.cuda.current_device())
        chunks.append(chunk)
    counts = _param_counts(chunks)
    chunks = [Float16Module(cfg, c) for c in chunks]
    ddp_cfg = DistributedDataParallelConfig(
        grad_reduce_in_fp32=True,  # Megatron-LM with --bf16: accumulate and all-reduce grads in fp32
        overlap_grad_reduce=False,
        use_distributed_optimizer=lay["distributed_optimizer"],
    )
    chunks = [
        DistributedDataParallel(config=cfg, ddp_config=ddp_cfg, module=c, disable_bucketing=(i > 0))
        for i, c in enumerate(chunks)
    ]
    opt_cfg = OptimizerConfig(
        optimizer="adam",
        lr=1e-4,
        weight_decay=0.01,
        clip_grad=1.0,
        bf16=True,
        params_dtype=torch.bfloat16,
        use_distributed_optimizer=lay["distributed_optimizer"],
    )
    optimizer = get_megatron_optimizer(opt_cfg, chunks)
    cfg.grad_scale_func = optimizer.scale_loss
    cfg.finalize_model_grads_func = finalize_model_grads
    return chunks, optimizer, get_forward_backward_func(), counts


def _param_counts(chunks: list[Any]) -> dict[str, int]:
    total = embedding = output = 0
    for c in chunks:
        for name, p in c.named_parameters():
            n = p.numel()
            total += n
            if name.startswith("embedding."):
                embedding += n
            elif name.startswith("output_layer."):
                output += n
    return {"params_total": total, "params_embedding": embedding, "params_output_layer": output}


def _forward_step(lay: dict[str, Any]):
    import torch

    vocab, s, b = lay["model"]["vocab"], lay["seq"], lay["mbs"]

    def loss_func(loss_mask, output_tensor):
        losses = output_tensor.float().view(-1)
        loss = torch.sum(losses * loss_mask.view(-1)) / loss_mask.sum()
        # clone: the schedule divides the returned loss in place by the number of micro-batches
        return loss, {"lm loss": loss.detach().clone()}

    def forward_step(data_iterator, model):
        dev = torch.cuda.current_device()
        tokens = torch.randint(0, vocab, (b, s), device=dev)
        labels = torch.randint(0, vocab, (b, s), device=dev)
        position_ids = torch.arange(s, device=dev).unsqueeze(0).expand(b, s)
        loss_mask = torch.ones(b, s, device=dev)
        # attention_mask None: the unfused softmax builds the causal mask itself
        out = model(tokens, position_ids, None, labels=labels)
        return out, lambda t: loss_func(loss_mask, t)

    return forward_step


def run_layout(lay: dict[str, Any], outdir: Path) -> int:
    """Measure one layout on this rank (under torchrun); write outdir/<name>.rank<r>.json. Returns an exit code."""
    import torch

    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    rec: dict[str, Any] = {
        "layout": lay["name"],
        "rank": rank,
        "world_size": world,
        "config": {k: v for k, v in lay.items() if k != "name"},
        "attention": "megatron-core local spec DotProductAttention (unfused: baddbmm scores in bf16, "
        "softmax in fp32, no flash/fused attention, no Transformer Engine, no apex)",
        "optimizer_impl": None,
        "megatron_theoretical": megatron_theoretical(lay),
        "env": {
            k: os.environ.get(k)
            for k in ("PYTORCH_CUDA_ALLOC_CONF", "NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST")
        },
        "status": "started",
    }
    rec["versions"] = _versions()
    t0 = time.time()
    phase = "init"
    try:
        from megatron.core import parallel_state

        torch.distributed.init_process_group(backend="nccl", rank=rank, world_size=world)
        parallel_state.initialize_model_parallel(
            tensor_model_parallel_size=lay["tp"],
            pipeline_model_parallel_size=lay["pp"],
            virtual_pipeline_model_parallel_size=lay["vp"],
            expert_model_parallel_size=lay["ep"],
        )
        torch.distributed.barrier()
        torch.cuda.synchronize()
        rec["pp_rank"] = parallel_state.get_pipeline_model_parallel_rank()
        rec["tp_rank"] = parallel_state.get_tensor_model_parallel_rank()
        rec["dp_rank"] = parallel_state.get_data_parallel_rank()
        rec["mem_after_init"] = _mem()
        phase = "build"
        chunks, optimizer, fwd_bwd, counts = _build(lay)
        rec.update(counts)
        rec["optimizer_impl"] = (
            type(optimizer).__name__
            + "/"
            + ",".join(sorted({type(o).__name__ for o in getattr(optimizer, "chained_optimizers", [optimizer])}))
        )
        inner = getattr(optimizer, "chained_optimizers", [optimizer])[0]
        rec["adam_impl"] = (
            type(getattr(inner, "optimizer", inner)).__module__
            + "."
            + type(getattr(inner, "optimizer", inner)).__name__
        )
        torch.cuda.synchronize()
        rec["mem_after_build"] = _mem()
        forward_step = _forward_step(lay)
        n_chunks = len(chunks)
        rec["steps"] = []
        for step in range(lay["steps"]):
            phase = f"step{step + 1}"
            ts = time.time()
            for c in chunks:
                c.zero_grad_buffer()
            optimizer.zero_grad()
            losses = fwd_bwd(
                forward_step_func=forward_step,
                data_iterator=[None] * n_chunks if n_chunks > 1 else None,
                model=chunks if n_chunks > 1 else chunks[0],
                num_microbatches=lay["num_microbatches"],
                seq_length=lay["seq"],
                micro_batch_size=lay["mbs"],
                forward_only=False,
            )
            torch.cuda.synchronize()
            mem_fb = _mem()
            ok, grad_norm, _ = optimizer.step()
            torch.cuda.synchronize()
            loss = None
            if losses:
                loss = float(sum(x["lm loss"] for x in losses) / len(losses))
            rec["steps"].append(
                {
                    "step": step + 1,
                    "seconds": round(time.time() - ts, 3),
                    "loss": loss,
                    "grad_norm": None if grad_norm is None else float(grad_norm),
                    "update_ok": bool(ok),
                    "mem_after_fwd_bwd": mem_fb,
                    "mem_after_step": _mem(),
                }
            )
        rec["peak_allocated_bytes"] = torch.cuda.max_memory_allocated()
        rec["peak_allocated_gib"] = round(rec["peak_allocated_bytes"] / GIB, 3)
        rec["peak_reserved_bytes"] = torch.cuda.max_memory_reserved()
        rec["mem_end"] = _mem()
        rec["status"] = "ok"
        code = 0
    except torch.OutOfMemoryError as exc:
        rec["status"] = "oom"
        rec["oom_phase"] = phase
        rec["error"] = str(exc).splitlines()[0][:600]
        rec["peak_allocated_bytes"] = torch.cuda.max_memory_allocated()
        rec["peak_allocated_gib"] = round(rec["peak_allocated_bytes"] / GIB, 3)
        rec["mem_at_oom"] = _mem()
        traceback.print_exc()
        code = 3
    except Exception as exc:  # record and fail loudly
        rec["status"] = "error"
        rec["error_phase"] = phase
        rec["error"] = f"{type(exc).__name__}: {str(exc)[:600]}"
        traceback.print_exc()
        code = 4
    rec["seconds_total"] = round(time.time() - t0, 2)
    rec["rank_exit_code"] = code
    outdir.mkdir(parents=True, exist_ok=True)
    (outdir / f"{lay['name']}.rank{rank}.json").write_text(json.dumps(rec, sort_keys=True) + "\n")
    print(
        f"[measure] {lay['name']} rank {rank}: {rec['status']} peak "
        f"{rec.get('peak_allocated_gib')} GiB, megatron theoretical "
        f"{(rec['megatron_theoretical'] or {}).get('total_gib')} GiB",
        flush=True,
    )
    if code == 0:
        try:
            torch.distributed.barrier()
            torch.distributed.destroy_process_group()
        except Exception:
            pass
    return code


def merge(name: str, rc: int, outdir: Path, out: Path) -> int:
    """Append this layout's rank records to the JSONL file, with the launcher's exit code on each."""
    lay = find_layout(name)
    files = sorted(outdir.glob(f"{name}.rank*.json"))
    lines = []
    for f in files:
        rec = json.loads(f.read_text())
        rec["launcher_exit_code"] = rc
        lines.append(json.dumps(rec, sort_keys=True))
    if not files:  # the process died before writing (killed, crashed in import): record that much
        lines.append(
            json.dumps(
                {
                    "layout": name,
                    "rank": None,
                    "status": "no_record",
                    "launcher_exit_code": rc,
                    "config": {k: v for k, v in lay.items() if k != "name"},
                    "megatron_theoretical": megatron_theoretical(lay),
                },
                sort_keys=True,
            )
        )
    with out.open("a") as fh:
        fh.write("\n".join(lines) + "\n")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p_list = sub.add_parser("list")
    p_list.add_argument("--gpus", type=int)
    p_list.add_argument("--set", default="layouts", choices=["layouts", "smoke", "moe"])
    p_show = sub.add_parser("show")
    p_show.add_argument("layout")
    p_run = sub.add_parser("run")
    p_run.add_argument("--layout", required=True)
    p_run.add_argument("--outdir", required=True, type=Path)
    p_merge = sub.add_parser("merge")
    p_merge.add_argument("--layout", required=True)
    p_merge.add_argument("--rc", required=True, type=int)
    p_merge.add_argument("--outdir", required=True, type=Path)
    p_merge.add_argument("--out", required=True, type=Path)
    args = ap.parse_args(argv)
    if args.cmd == "list":
        for lay in all_layouts(args.set):
            if args.gpus is None or lay["gpus"] == args.gpus:
                print(lay["name"], lay["gpus"])
        return 0
    if args.cmd == "show":
        lay = find_layout(args.layout)
        print(json.dumps({"layout": lay, "megatron_theoretical": megatron_theoretical(lay)}, indent=1))
        return 0
    if args.cmd == "run":
        return run_layout(find_layout(args.layout), args.outdir)
    return merge(args.layout, args.rc, args.outdir, args.out)


if __name__ == "__main__":
    sys.exit(main())
