"""A small model trained with torch + Lightning and NeMo's own ProgressPrinter, that fails on demand.

Run by torchrun from the jobset chart's pod command (scripts/gpu_failures/launcher.sh). Every failure is made for
real by the program itself (an allocation too big for the GPU, a NULL read, abort(), SIGKILL, a rank that stops,
a NaN caught by autograd's anomaly mode, a full checkpoint filesystem, a missing dataset file, an out-of-range
index on the GPU); nothing prints a line made up to look like an error.

FAULT (the workload env): none | oom | segv | abort | sigkill | hang | exit | nan | device-assert | data-missing
| disk-full | shm | import; FAULT_RANK (global rank, default 1), FAULT_STEP (default 25), MAX_STEPS (default 60),
NCCL_TIMEOUT_S (the process group's timeout, default 30), CKPT_DIR, DATA_PATH (a Megatron-style dataset prefix:
PREFIX.idx and PREFIX.bin are opened), CPU_ONLY=1 (gloo on CPUs: to try this script on a machine without GPUs).
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
HIDDEN = 1024


class Tokens(Dataset):
    """Random token batches; with DATA_PATH, the indexed dataset's files are opened first, as Megatron does."""

    def __init__(self, prefix: str | None):
        if prefix:
            import numpy as np

            self.index = np.memmap(prefix + ".idx", mode="r", dtype=np.uint8)
            self.data = np.memmap(prefix + ".bin", mode="r", dtype=np.uint16)
        self.generator = torch.Generator().manual_seed(1234)

    def __len__(self) -> int:
        return 10**6

    def __getitem__(self, i: int) -> torch.Tensor:
        if FAULT == "shm":  # 16 MiB a sample: the loader's worker processes hand it over through /dev/shm
            return torch.randn(4 * 1024 * 1024)
        return torch.randn(HIDDEN, generator=self.generator)


class SmallModel(pl.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.layers = torch.nn.Sequential(
            torch.nn.Linear(HIDDEN, 4 * HIDDEN), torch.nn.GELU(), torch.nn.Linear(4 * HIDDEN, HIDDEN)
        )

    def training_step(self, batch: torch.Tensor, batch_idx: int) -> torch.Tensor:
        if self.global_rank == FAULT_RANK and self.global_step == FAULT_STEP:
            inject(self, batch)
        x = batch[:, :HIDDEN]
        if FAULT == "nan" and self.global_rank == FAULT_RANK and self.global_step >= FAULT_STEP:
            x = x * torch.tensor(float("inf"), device=x.device)  # an overflow in the input: the loss goes NaN
        out = self.layers(x)
        loss = torch.nn.functional.mse_loss(out, x.roll(1, dims=1))
        self.log("reduced_train_loss", loss, prog_bar=True, sync_dist=False)
        self.log("global_step", float(self.global_step), prog_bar=True)
        return loss

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.AdamW(self.parameters(), lr=1e-4)


class StepStrategy(DDPStrategy):
    """DDP with the one attribute NeMo's ProgressPrinter reads of NeMo's MegatronStrategy: the optimizer steps done."""

    @property
    def current_epoch_step(self) -> int:
        loop = self.lightning_module.trainer.fit_loop.epoch_loop
        return max(
            loop.automatic_optimization.optim_progress.optimizer.step.current.completed,
            loop.manual_optimization.optim_step_progress.current.completed,
        )


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
    torch.manual_seed(0)
    timeout = datetime.timedelta(seconds=int(os.environ.get("NCCL_TIMEOUT_S", "30")))
    strategy = StepStrategy(process_group_backend="gloo" if CPU_ONLY else "nccl", timeout=timeout)
    ckpt_dir = os.environ.get("CKPT_DIR", "/tmp/checkpoints")
    callbacks: list[pl.Callback] = [ProgressPrinter(log_interval=1)]
    if FAULT == "disk-full":
        callbacks.append(pl.callbacks.ModelCheckpoint(dirpath=ckpt_dir, every_n_train_steps=FAULT_STEP, save_top_k=-1))
    trainer = pl.Trainer(
        accelerator="cpu" if CPU_ONLY else "gpu",
        devices=int(os.environ.get("LOCAL_WORLD_SIZE", "1")),
        num_nodes=int(os.environ.get("NNODES", "1")),
        strategy=strategy,
        max_steps=MAX_STEPS,
        callbacks=callbacks,
        enable_checkpointing=FAULT == "disk-full",
        enable_progress_bar=True,
        logger=False,
        detect_anomaly=FAULT == "nan",
        use_distributed_sampler=False,
    )
    workers = 2 if FAULT == "shm" else 0
    loader = DataLoader(Tokens(os.environ.get("DATA_PATH")), batch_size=8, num_workers=workers)
    trainer.fit(SmallModel(), loader)
    if trainer.is_global_zero:
        print(f"training done: {trainer.global_step} steps", flush=True)


if __name__ == "__main__":
    main()
