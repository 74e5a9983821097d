"""pytorch/examples ``distributed/minGPT-ddp/mingpt/trainer.py`` ported to zgrad.

The port: ``torch`` renamed to ``zgrad``; the GPU (``local_rank`` as device, ``device_type="cuda"``,
``torch.cuda.amp.GradScaler()``) replaced by the CPU (``"cpu"``, ``zgrad.amp.GradScaler("cpu")``);
``fsspec.open`` replaced by ``open`` and the S3 upload left out (local snapshots only). One
addition: the loss of every ``log_every``-th batch is printed (upstream: every 100th), with 6
digits, for the test to compare runs.
"""

import os
from collections import OrderedDict
from dataclasses import asdict, dataclass
from typing import Any, Dict, Optional

import zgrad
from zgrad.nn.parallel import DistributedDataParallel as DDP
from zgrad.utils.data import DataLoader, Dataset
from zgrad.utils.data.distributed import DistributedSampler


@dataclass
class TrainerConfig:
    max_epochs: int = None
    batch_size: int = None
    data_loader_workers: int = None
    grad_norm_clip: float = None
    snapshot_path: Optional[str] = None
    save_every: int = None
    use_amp: bool = None
    amp_dtype: str = "float16"
    log_every: int = 100


@dataclass
class Snapshot:
    model_state: "OrderedDict[str, zgrad.Tensor]"
    optimizer_state: Dict[str, Any]
    finished_epoch: int


class Trainer:

    def __init__(self, trainer_config: TrainerConfig, model, optimizer, train_dataset, test_dataset=None):
        self.config = trainer_config
        # torchrun's variables (zgrad-run sets them)
        self.local_rank = int(os.environ["LOCAL_RANK"])
        self.global_rank = int(os.environ["RANK"])
        self.train_dataset = train_dataset
        self.train_loader = self._prepare_dataloader(train_dataset)
        self.test_loader = self._prepare_dataloader(test_dataset) if test_dataset else None
        self.epochs_run = 0
        self.model = model.to("cpu")
        self.optimizer = optimizer
        self.save_every = self.config.save_every
        if self.config.use_amp:
            self.scaler = zgrad.amp.GradScaler("cpu")
        if self.config.snapshot_path is None:
            self.config.snapshot_path = "snapshot.pt"
        self._load_snapshot()
        self.model = DDP(self.model)

    def _prepare_dataloader(self, dataset: Dataset):
        return DataLoader(
            dataset,
            batch_size=self.config.batch_size,
            pin_memory=True,
            shuffle=False,
            num_workers=self.config.data_loader_workers,
            sampler=DistributedSampler(dataset),
        )

    def _load_snapshot(self):
        try:
            with open(self.config.snapshot_path, "rb") as f:
                snapshot_data = zgrad.load(f, map_location="cpu")
        except FileNotFoundError:
            print("Snapshot not found. Training model from scratch")
            return

        snapshot = Snapshot(**snapshot_data)
        self.model.load_state_dict(snapshot.model_state)
        self.optimizer.load_state_dict(snapshot.optimizer_state)
        self.epochs_run = snapshot.finished_epoch
        print(f"Resuming training from snapshot at Epoch {self.epochs_run}")

    def _run_batch(self, source, targets, train: bool = True) -> float:
        amp_dtype = getattr(zgrad, self.config.amp_dtype)
        with zgrad.set_grad_enabled(train), zgrad.amp.autocast(device_type="cpu", dtype=amp_dtype,
                                                               enabled=self.config.use_amp):
            _, loss = self.model(source, targets)

        if train:
            self.optimizer.zero_grad(set_to_none=True)
            if self.config.use_amp:
                self.scaler.scale(loss).backward()
                zgrad.nn.utils.clip_grad_norm_(self.model.parameters(), self.config.grad_norm_clip)
                self.scaler.step(self.optimizer)
                self.scaler.update()
            else:
                loss.backward()
                zgrad.nn.utils.clip_grad_norm_(self.model.parameters(), self.config.grad_norm_clip)
                self.optimizer.step()

        return loss.item()

    def _run_epoch(self, epoch: int, dataloader: DataLoader, train: bool = True):
        dataloader.sampler.set_epoch(epoch)
        for iter, (source, targets) in enumerate(dataloader):
            step_type = "Train" if train else "Eval"
            source = source.to("cpu")
            targets = targets.to("cpu")
            batch_loss = self._run_batch(source, targets, train)
            if iter % self.config.log_every == 0:
                print(f"[GPU{self.global_rank}] Epoch {epoch} | Iter {iter} | {step_type} Loss {batch_loss:.6f}")

    def _save_snapshot(self, epoch):
        model = self.model
        raw_model = model.module if hasattr(model, "module") else model
        snapshot = Snapshot(
            model_state=raw_model.state_dict(),
            optimizer_state=self.optimizer.state_dict(),
            finished_epoch=epoch,
        )
        zgrad.save(asdict(snapshot), self.config.snapshot_path)
        print(f"Snapshot saved at epoch {epoch}")

    def train(self):
        for epoch in range(self.epochs_run, self.config.max_epochs):
            epoch += 1
            self._run_epoch(epoch, self.train_loader, train=True)
            if self.local_rank == 0 and epoch % self.save_every == 0:
                self._save_snapshot(epoch)
            if self.test_loader:
                self._run_epoch(epoch, self.test_loader, train=False)
