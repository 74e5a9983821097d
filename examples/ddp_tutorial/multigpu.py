import zgrad
import zgrad.nn.functional as F
from zgrad.utils.data import Dataset, DataLoader
from datautils import MyTrainDataset

# --- Additional modules required for Distributed Training
import zgrad.multiprocessing as mp
from zgrad.utils.data.distributed import DistributedSampler
from zgrad.nn.parallel import DistributedDataParallel as DDP
from zgrad.distributed import init_process_group, destroy_process_group
import os
# ---


def ddp_setup(rank, world_size, port):
    """
    Args:
        rank: Unique identifier of each process
        world_size: Total number of processes
    """
    os.environ["MASTER_ADDR"] = "localhost"
    os.environ["MASTER_PORT"] = str(port)
    init_process_group(backend="gloo", rank=rank, world_size=world_size)

class Trainer:
    def __init__(
        self,
        model: zgrad.nn.Module,
        train_data: DataLoader,
        optimizer: zgrad.optim.Optimizer,
        gpu_id: int,
        save_every: int,
    ) -> None:
        self.gpu_id = gpu_id
        self.model = model.to("cpu")
        self.train_data = train_data
        self.optimizer = optimizer
        self.save_every = save_every
        self.model = DDP(model)

    def _run_batch(self, source, targets):
        self.optimizer.zero_grad()
        output = self.model(source)
        loss = F.cross_entropy(output, targets)
        loss.backward()
        self.optimizer.step()

    def _run_epoch(self, epoch):
        b_sz = len(next(iter(self.train_data))[0])
        print(f"[GPU{self.gpu_id}] Epoch {epoch} | Batch size: {b_sz} | Steps: {len(self.train_data)}")
        self.train_data.sampler.set_epoch(epoch)
        for source, targets in self.train_data:
            source = source.to("cpu")
            targets = targets.to("cpu")
            self._run_batch(source, targets)

    def _save_checkpoint(self, epoch):
        ckp = self.model.module.state_dict()
        PATH = "checkpoint.pt"
        zgrad.save(ckp, PATH)
        print(f"Epoch {epoch} | Training checkpoint saved at {PATH}")

    def train(self, max_epochs: int):
        for epoch in range(max_epochs):
            self._run_epoch(epoch)
            if self.gpu_id == 0 and epoch % self.save_every == 0:
                self._save_checkpoint(epoch)


def load_train_objs():
    train_set = MyTrainDataset(2048)  # load your dataset
    model = zgrad.nn.Linear(20, 1)  # load your model
    optimizer = zgrad.optim.SGD(model.parameters(), lr=1e-3)
    return train_set, model, optimizer


def prepare_dataloader(dataset: Dataset, batch_size: int):
    return DataLoader(
        dataset,
        batch_size=batch_size,
        pin_memory=True,
        shuffle=False,
        sampler=DistributedSampler(dataset)
    )


def main(rank: int, world_size: int, save_every: int, total_epochs: int, batch_size: int, port: int):
    print(f"rank: {rank}, world_size: {world_size}")

    ddp_setup(rank, world_size, port)
    dataset, model, optimizer = load_train_objs()
    train_data = prepare_dataloader(dataset, batch_size)
    trainer = Trainer(model, train_data, optimizer, rank, save_every)
    trainer.train(total_epochs)
    destroy_process_group()


if __name__ == "__main__":
    import argparse
    parser = argparse.ArgumentParser(description='simple distributed training job')
    parser.add_argument('total_epochs', type=int, help='Total epochs to train the model')
    parser.add_argument('save_every', type=int, help='How often to save a snapshot')
    parser.add_argument('--batch_size', default=32, type=int, help='Input batch size on each device (default: 32)')
    parser.add_argument('--world_size', default=2, type=int, help='Processes to start (the original: one per GPU)')
    parser.add_argument('--port', default=12355, type=int, help='The rendezvous port (MASTER_PORT)')
    args = parser.parse_args()
    
    world_size = args.world_size
    mp.spawn(main, args=(world_size, args.save_every, args.total_epochs, args.batch_size, args.port), nprocs=world_size)
