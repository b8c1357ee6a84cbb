"""A small model trained with torch + Lightning and NeMo's own ProgressPrinter, that fails on demand.

Run by torchrun from the jobset chart's pod command (scripts/gpu_failures/launcher.sh). Every failure is made for
real by the program itself (an allocation too big for the GPU, a NULL read, abort(), SIGKILL, a rank that stops,
a NaN caught by autograd's anomaly mode, a full checkpoint filesystem, a missing dataset file, an out-of-range
index on the GPU); nothing prints a line made up to look like an error.

FAULT (the workload env): none | oom | segv | abort | sigkill | hang | exit | nan | device-assert | data-missing
| disk-full | shm | import; FAULT_RANK (global rank, default 1), FAULT_STEP (default 25), MAX_STEPS (default 60),
NCCL_TIMEOUT_S (the process group's timeout, default 30), CKPT_DIR, DATA_PATH (a Megatron-style dataset prefix:
PREFIX.idx and PREFIX.bin are opened), CPU_ONLY=1 (gloo on CPUs: to try this script on a machine without GPUs).

The second set of faults, kinds from the published taxonomies (NVRx's restart-agent classes and the like), each
made by real code too: stall (a rank's data loader stops returning samples; the run is stopped from outside),
index-error (a rank's sample index is shorter than its dataset says: IndexError in a DataLoader worker),
loader-oom (a DataLoader worker grows until the kernel's OOM killer takes it, under the pod's memory limit),
readonly-ckpt (checkpoints saved to a read-only mount), hf-download (a tokenizer fetched from the Hugging Face
hub, where there is no egress), megatron (Megatron-core's parallel state and TransformerConfig, with TP, PP and
HEADS as given: its own validation refuses what does not fit), nccl-oom (the GPU of FAULT_RANK filled before
NCCL sets up its communicator), extra-collective (a rank makes one collective more than the others: a metric
synced on some ranks only). Other knobs: HIDDEN (the model's width, default 1024), STEP_SLEEP_S (seconds a step
takes at least, default 0), SAVE_CKPT (a checkpoint written after training), RESUME_CKPT (the checkpoint that
training resumes from), DATA_READER=megatron (DATA_PATH opened by Megatron-core's IndexedDataset).
"""

from __future__ import annotations

import ctypes
import datetime
import os
import signal
import sys
import time

import lightning.pytorch as pl
import torch
from lightning.pytorch.strategies import DDPStrategy
from torch.utils.data import DataLoader, Dataset

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from progress_printer import ProgressPrinter  # NeMo's file, taken from the nemo_toolkit wheel

FAULT = os.environ.get("FAULT", "none")
FAULT_RANK = int(os.environ.get("FAULT_RANK", "1"))
FAULT_STEP = int(os.environ.get("FAULT_STEP", "25"))
MAX_STEPS = int(os.environ.get("MAX_STEPS", "60"))
CPU_ONLY = os.environ.get("CPU_ONLY") == "1"
HIDDEN = int(os.environ.get("HIDDEN", "1024"))
STEP_SLEEP_S = float(os.environ.get("STEP_SLEEP_S", "0"))
RANK = int(os.environ.get("RANK", "0"))  # torchrun's; the dataset needs it before Lightning has started
BATCH = 8


class Tokens(Dataset):
    """Random token batches; with DATA_PATH, the indexed dataset's files are opened first, as Megatron does."""

    def __init__(self, prefix: str | None):
        import numpy as np

        if prefix and os.environ.get("DATA_READER") == "megatron":
            from megatron.core.datasets.indexed_dataset import IndexedDataset

            self.indexed = IndexedDataset(prefix)
        elif prefix:
            self.index = np.memmap(prefix + ".idx", mode="r", dtype=np.uint8)
            self.data = np.memmap(prefix + ".bin", mode="r", dtype=np.uint16)
        # the samples this rank's shard holds: built for fewer samples than __len__ says on the faulty rank
        short = FAULT == "index-error" and RANK == FAULT_RANK
        self.sample_index = np.arange(FAULT_STEP * BATCH if short else len(self))
        self.generator = torch.Generator().manual_seed(1234)

    def __len__(self) -> int:
        return 10**6

    def __getitem__(self, i: int) -> torch.Tensor:
        sample = int(self.sample_index[i])
        if RANK == FAULT_RANK and sample == FAULT_STEP * BATCH:
            if FAULT == "stall":  # the loader stops returning samples (a hung read of a network file system)
                while True:
                    time.sleep(60)
            if FAULT == "loader-oom":  # a worker that keeps what it reads: it grows until the OOM killer takes it
                hoard = []
                while len(hoard) < 4 * int(os.environ.get("HOARD_MAX_GB", "32")):  # bounded where no limit is set
                    hoard.append(b"\1" * (256 << 20))
                while True:
                    time.sleep(60)
        if FAULT == "shm":  # 16 MiB a sample: the loader's worker processes hand it over through /dev/shm
            return torch.randn(4 * 1024 * 1024)
        return torch.randn(HIDDEN, generator=self.generator)


class SmallModel(pl.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.layers = torch.nn.Sequential(
            torch.nn.Linear(HIDDEN, 4 * HIDDEN), torch.nn.GELU(), torch.nn.Linear(4 * HIDDEN, HIDDEN)
        )

    def configure_model(self) -> None:
        if FAULT == "megatron":  # the model's Megatron config, as NeMo builds it once the parallel state is set
            from megatron.core.transformer.transformer_config import TransformerConfig

            self.megatron_config = TransformerConfig(
                num_layers=2,
                hidden_size=HIDDEN,
                num_attention_heads=int(os.environ.get("HEADS", "8")),
                tensor_model_parallel_size=int(os.environ.get("TP", "1")),
                pipeline_model_parallel_size=int(os.environ.get("PP", "1")),
            )

    def training_step(self, batch: torch.Tensor, batch_idx: int) -> torch.Tensor:
        if STEP_SLEEP_S:
            time.sleep(STEP_SLEEP_S)
        if self.global_rank == FAULT_RANK and self.global_step == FAULT_STEP:
            inject(self, batch)
        x = batch[:, :HIDDEN]
        if FAULT == "nan" and self.global_rank == FAULT_RANK and self.global_step >= FAULT_STEP:
            x = x * torch.tensor(float("inf"), device=x.device)  # an overflow in the input: the loss goes NaN
        out = self.layers(x)
        loss = torch.nn.functional.mse_loss(out, x.roll(1, dims=1))
        self.log("reduced_train_loss", loss, prog_bar=True, sync_dist=False)
        self.log("global_step", float(self.global_step), prog_bar=True)
        if FAULT == "extra-collective" and self.global_step == FAULT_STEP and self.global_rank != FAULT_RANK:
            self.log("train_loss_synced", loss, sync_dist=True)  # an all-reduce that FAULT_RANK never makes
        return loss

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.AdamW(self.parameters(), lr=1e-4)


class StepStrategy(DDPStrategy):
    """DDP with the one attribute NeMo's ProgressPrinter reads of NeMo's MegatronStrategy: the optimizer steps done."""

    def setup_environment(self) -> None:
        if FAULT == "nccl-oom" and RANK == FAULT_RANK:
            fill_gpu(self.root_device)
        super().setup_environment()
        if FAULT == "megatron":  # as NeMo's MegatronStrategy sets up Megatron's parallel state
            from megatron.core import parallel_state

            parallel_state.initialize_model_parallel(
                tensor_model_parallel_size=int(os.environ.get("TP", "1")),
                pipeline_model_parallel_size=int(os.environ.get("PP", "1")),
            )

    @property
    def current_epoch_step(self) -> int:
        loop = self.lightning_module.trainer.fit_loop.epoch_loop
        return max(
            loop.automatic_optimization.optim_progress.optimizer.step.current.completed,
            loop.manual_optimization.optim_step_progress.current.completed,
        )


HELD: list[torch.Tensor] = []


def fill_gpu(device: torch.device) -> None:
    """Take all of the GPU's free memory through PyTorch's allocator, keeping a little in PyTorch's cache.

    What torch allocates later (the model, DDP's small tensors) comes from that cache; what NCCL allocates for
    itself (cuMem, outside PyTorch's allocator) finds no memory left on the device.
    """
    torch.cuda.set_device(device)
    small = torch.empty(1, device=device)  # a block of PyTorch's small pool, kept
    chunk = 1 << 36
    while chunk >= 2 << 20:
        try:
            HELD.append(torch.empty(chunk, dtype=torch.uint8, device=device))
        except torch.OutOfMemoryError:
            chunk //= 2
    spare = torch.empty(0, device=device)
    for i, block in enumerate(HELD):  # give back 1 GiB or less to PyTorch's cache (not to CUDA): torch's headroom
        if block.numel() <= 1 << 30:
            spare = HELD.pop(i)
            break
    del small, spare


def inject(model: SmallModel, batch: torch.Tensor) -> None:
    if FAULT == "oom":
        torch.empty(1 << 40, dtype=torch.uint8, device=model.device)  # 1 TiB: more than any GPU has
    elif FAULT == "segv":
        ctypes.string_at(0)  # a NULL read in native code: the kernel sends SIGSEGV
    elif FAULT == "abort":
        os.abort()
    elif FAULT == "sigkill":
        os.kill(os.getpid(), signal.SIGKILL)  # what the kernel's OOM killer does
    elif FAULT == "hang":
        while True:  # this rank stops answering; the others wait in the next all-reduce
            time.sleep(60)
    elif FAULT == "exit":
        os._exit(1)  # the process ends mid-step without a word
    elif FAULT == "device-assert":
        index = torch.tensor([HIDDEN * 1000], device=model.device)
        batch[0, index].sum().item()  # an out-of-range index on the GPU


def main() -> None:
    if FAULT == "import":  # a module the image does not have, as a recipe needing Transformer Engine would import it
        import transformer_engine.pytorch  # noqa: F401
    if FAULT == "hf-download":  # the tokenizer, as a recipe names it: fetched from the hub into an empty HF_HOME
        from transformers import AutoTokenizer

        AutoTokenizer.from_pretrained(os.environ.get("TOKENIZER", "gpt2"))
    torch.manual_seed(0)
    timeout = datetime.timedelta(seconds=int(os.environ.get("NCCL_TIMEOUT_S", "30")))
    strategy = StepStrategy(process_group_backend="gloo" if CPU_ONLY else "nccl", timeout=timeout)
    ckpt_dir = os.environ.get("CKPT_DIR", "/tmp/checkpoints")
    callbacks: list[pl.Callback] = [ProgressPrinter(log_interval=1)]
    if FAULT in ("disk-full", "readonly-ckpt"):
        callbacks.append(pl.callbacks.ModelCheckpoint(dirpath=ckpt_dir, every_n_train_steps=FAULT_STEP, save_top_k=-1))
    trainer = pl.Trainer(
        accelerator="cpu" if CPU_ONLY else "gpu",
        devices=int(os.environ.get("LOCAL_WORLD_SIZE", "1")),
        num_nodes=int(os.environ.get("NNODES", "1")),
        strategy=strategy,
        max_steps=MAX_STEPS,
        callbacks=callbacks,
        enable_checkpointing=FAULT in ("disk-full", "readonly-ckpt"),
        enable_progress_bar=True,
        logger=False,
        detect_anomaly=FAULT == "nan",
        use_distributed_sampler=False,
    )
    workers = 2 if FAULT in ("shm", "index-error", "loader-oom") else 0
    loader = DataLoader(Tokens(os.environ.get("DATA_PATH")), batch_size=BATCH, num_workers=workers)
    trainer.fit(SmallModel(), loader, ckpt_path=os.environ.get("RESUME_CKPT") or None)
    if trainer.is_global_zero:
        print(f"training done: {trainer.global_step} steps", flush=True)
    if os.environ.get("SAVE_CKPT"):
        trainer.save_checkpoint(os.environ["SAVE_CKPT"])


if __name__ == "__main__":
    main()
