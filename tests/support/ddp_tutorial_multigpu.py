"""pytorch/examples ``distributed/ddp-tutorial-series/multigpu.py`` with the snapshots of its
``multigpu_torchrun.py`` (save every ``save_every`` epochs, resume from the snapshot when one
exists), ported to zgrad for ``tests/examples/test_ddp_tutorial_snapshot.py``.

The port: ``torch`` renamed to ``zgrad``, "nccl" to "gloo", the GPU ids to "cpu", two processes
instead of one per GPU, ``map_location="cpu"``. Two more changes: ``MASTER_PORT`` is taken from
the environment when set (the test picks a free port), and ``load_train_objs`` seeds zgrad's
generator: PyTorch's default generator starts from a fixed seed, so every rank of the original
builds the same random dataset; zgrad's starts from the operating system's entropy.

    python tests/support/ddp_tutorial_multigpu.py TOTAL_EPOCHS SAVE_EVERY [--batch_size N] [--snapshot_path P]
"""

import os

import zgrad
import zgrad.multiprocessing as mp
import zgrad.nn.functional as F
from zgrad.distributed import destroy_process_group, init_process_group
from zgrad.nn.parallel import DistributedDataParallel as DDP
from zgrad.utils.data import DataLoader, Dataset
from zgrad.utils.data.distributed import DistributedSampler

DATASET_SIZE = 256  # the tutorial's 2048, smaller


class MyTrainDataset(Dataset):
    """datautils.MyTrainDataset: ``size`` pairs of a random 20-vector and a random 1-vector."""

    def __init__(self, size):
        self.size = size
        self.data = [(zgrad.rand(20), zgrad.rand(1)) for _ in range(size)]

    def __len__(self):
        return self.size

    def __getitem__(self, index):
        return self.data[index]


def ddp_setup(rank, world_size):
    """
    Args:
        rank: Unique identifier of each process
        world_size: Total number of processes
    """
    os.environ["MASTER_ADDR"] = "localhost"
    os.environ.setdefault("MASTER_PORT", "12355")
    init_process_group(backend="gloo", rank=rank, world_size=world_size)


class Trainer:
    def __init__(self, model, train_data, optimizer, gpu_id, save_every, snapshot_path):
        self.gpu_id = gpu_id
        self.model = model.to("cpu")
        self.train_data = train_data
        self.optimizer = optimizer
        self.save_every = save_every
        self.epochs_run = 0
        self.snapshot_path = snapshot_path
        if os.path.exists(snapshot_path):
            print("Loading snapshot")
            self._load_snapshot(snapshot_path)
        self.model = DDP(self.model)

    def _load_snapshot(self, snapshot_path):
        snapshot = zgrad.load(snapshot_path, map_location="cpu")
        self.model.load_state_dict(snapshot["MODEL_STATE"])
        self.epochs_run = snapshot["EPOCHS_RUN"]
        print(f"Resuming training from snapshot at Epoch {self.epochs_run}")

    def _run_batch(self, source, targets):
        self.optimizer.zero_grad()
        output = self.model(source)
        loss = F.cross_entropy(output, targets)
        loss.backward()
        self.optimizer.step()

    def _run_epoch(self, epoch):
        b_sz = len(next(iter(self.train_data))[0])
        print(f"[GPU{self.gpu_id}] Epoch {epoch} | Batchsize: {b_sz} | Steps: {len(self.train_data)}")
        self.train_data.sampler.set_epoch(epoch)
        for source, targets in self.train_data:
            source = source.to("cpu")
            targets = targets.to("cpu")
            self._run_batch(source, targets)

    def _save_snapshot(self, epoch):
        snapshot = {
            "MODEL_STATE": self.model.module.state_dict(),
            "EPOCHS_RUN": epoch,
        }
        zgrad.save(snapshot, self.snapshot_path)
        print(f"Epoch {epoch} | Training snapshot saved at {self.snapshot_path}")

    def train(self, max_epochs):
        for epoch in range(self.epochs_run, max_epochs):
            self._run_epoch(epoch)
            if self.gpu_id == 0 and epoch % self.save_every == 0:
                self._save_snapshot(epoch)


def load_train_objs():
    zgrad.manual_seed(0)
    train_set = MyTrainDataset(DATASET_SIZE)  # load your dataset
    model = zgrad.nn.Linear(20, 1)  # load your model
    optimizer = zgrad.optim.SGD(model.parameters(), lr=1e-3)
    return train_set, model, optimizer


def prepare_dataloader(dataset, batch_size):
    return DataLoader(
        dataset,
        batch_size=batch_size,
        pin_memory=True,
        shuffle=False,
        sampler=DistributedSampler(dataset)
    )


def main(rank, world_size, save_every, total_epochs, batch_size, snapshot_path):
    ddp_setup(rank, world_size)
    dataset, model, optimizer = load_train_objs()
    train_data = prepare_dataloader(dataset, batch_size)
    trainer = Trainer(model, train_data, optimizer, rank, save_every, snapshot_path)
    trainer.train(total_epochs)
    destroy_process_group()


if __name__ == "__main__":
    import argparse
    parser = argparse.ArgumentParser(description="simple distributed training job")
    parser.add_argument("total_epochs", type=int, help="Total epochs to train the model")
    parser.add_argument("save_every", type=int, help="How often to save a snapshot")
    parser.add_argument("--batch_size", default=32, type=int, help="Input batch size on each device (default: 32)")
    parser.add_argument("--snapshot_path", default="snapshot.pt", help="Where the snapshot is kept")
    args = parser.parse_args()

    world_size = 2
    mp.spawn(main, args=(world_size, args.save_every, args.total_epochs, args.batch_size, args.snapshot_path),
             nprocs=world_size)
