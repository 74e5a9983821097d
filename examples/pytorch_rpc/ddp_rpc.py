"""DistributedDataParallel combined with distributed autograd: two trainers (ranks 0 and 1) train
the dense part of a model with DDP while its sparse part, an EmbeddingBag, lives on a parameter
server (rank 3) as a RemoteModule; the master (rank 2) starts the trainers over RPC. One
distributed backward per batch reduces the dense gradients across the trainers (DDP) and sends the
embedding's to the parameter server; a DistributedOptimizer steps both.

Port of pytorch/examples ``distributed/rpc/ddp_rpc/main.py``: ``torch`` renamed to ``zgrad``, on
the CPU (the original needs two GPUs and exits without them; here DDP runs on the CPU backend).
``--epochs``, ``--port`` added for quick runs.
"""

import argparse
import random

import zgrad
import zgrad.distributed as dist
import zgrad.distributed.autograd as dist_autograd
import zgrad.distributed.rpc as rpc
import zgrad.multiprocessing as mp
import zgrad.optim as optim
from zgrad.distributed.nn import RemoteModule
from zgrad.distributed.optim import DistributedOptimizer
from zgrad.distributed.rpc import RRef, TensorPipeRpcBackendOptions
from zgrad.nn.parallel import DistributedDataParallel as DDP

NUM_EMBEDDINGS = 100
EMBEDDING_DIM = 16

parser = argparse.ArgumentParser(description="DDP with a remote embedding table")
parser.add_argument("--epochs", type=int, default=100)
parser.add_argument("--port", type=int, default=29500, help="process group port; RPC uses the next one")
args = parser.parse_args()


class HybridModel(zgrad.nn.Module):
    """A remote EmbeddingBag (sparse part, on the parameter server) feeding a local Linear layer
    replicated on every trainer by DDP (dense part)."""

    def __init__(self, remote_emb_module, rank):
        super().__init__()
        self.remote_emb_module = remote_emb_module
        self.fc = DDP(zgrad.nn.Linear(16, 8))
        self.rank = rank

    def forward(self, indices, offsets):
        emb_lookup = self.remote_emb_module.forward(indices, offsets)
        return self.fc(emb_lookup)


def _run_trainer(remote_emb_module, rank):
    """A trainer's loop: forward through both parts, one distributed backward, one optimizer step."""
    model = HybridModel(remote_emb_module, rank)
    # model.parameters() would include the RemoteModule's, which lives elsewhere: take RRefs
    model_parameter_rrefs = model.remote_emb_module.remote_parameters()
    for param in model.fc.parameters():
        model_parameter_rrefs.append(RRef(param))
    opt = DistributedOptimizer(optim.SGD, model_parameter_rrefs, lr=0.05)
    criterion = zgrad.nn.CrossEntropyLoss()

    def get_next_batch(rank):
        for _ in range(10):
            num_indices = random.randint(20, 50)
            indices = zgrad.LongTensor(num_indices).random_(0, NUM_EMBEDDINGS)
            offsets, start, batch_size = [], 0, 0
            while start < num_indices:
                offsets.append(start)
                start += random.randint(1, 10)
                batch_size += 1
            offsets_tensor = zgrad.LongTensor(offsets)
            target = zgrad.LongTensor(batch_size).random_(8)
            yield indices, offsets_tensor, target

    for epoch in range(args.epochs):
        for indices, offsets, target in get_next_batch(rank):
            with dist_autograd.context() as context_id:
                output = model(indices, offsets)
                loss = criterion(output, target)
                dist_autograd.backward(context_id, [loss])
                opt.step(context_id)
                # every iteration has its own context: nothing to zero
        print(f"Training done for epoch {epoch}")


def run_worker(rank, world_size):
    # The process group and RPC rendezvous on different ports.
    rpc_backend_options = TensorPipeRpcBackendOptions()
    rpc_backend_options.init_method = f"tcp://localhost:{args.port + 1}"
    if rank == 2:
        rpc.init_rpc("master", rank=rank, world_size=world_size, rpc_backend_options=rpc_backend_options)
        remote_emb_module = RemoteModule("ps", zgrad.nn.EmbeddingBag, args=(NUM_EMBEDDINGS, EMBEDDING_DIM),
                                         kwargs={"mode": "sum"})
        futs = [rpc.rpc_async(f"trainer{trainer_rank}", _run_trainer, args=(remote_emb_module, trainer_rank))
                for trainer_rank in [0, 1]]
        for fut in futs:
            fut.wait()
    elif rank <= 1:
        dist.init_process_group(backend="gloo", rank=rank, world_size=2, init_method=f"tcp://localhost:{args.port}")
        rpc.init_rpc(f"trainer{rank}", rank=rank, world_size=world_size, rpc_backend_options=rpc_backend_options)
        # trainers wait for the master's calls
    else:
        rpc.init_rpc("ps", rank=rank, world_size=world_size, rpc_backend_options=rpc_backend_options)
        # the parameter server only serves
    rpc.shutdown()
    if rank <= 1:
        dist.destroy_process_group()


if __name__ == "__main__":
    world_size = 4  # 2 trainers, 1 parameter server, 1 master
    mp.spawn(run_worker, args=(world_size,), nprocs=world_size, join=True)
    print("Distributed RPC example completed successfully.")
