"""Distributed RNN training: the trainer (rank 1) runs the LSTM, the parameter server (rank 0)
holds the embedding table and the decoder and does nothing but serve; one distributed backward
and one DistributedOptimizer step per batch.

Port of pytorch/examples ``distributed/rpc/rnn/main.py``: ``torch`` renamed to ``zgrad``, random
input as in the original; ``--epochs`` and ``--port`` added for quick runs.

    python rnn_main.py [--epochs 10] [--port 29500]
"""

import argparse
import os

import zgrad
import zgrad.distributed.autograd as dist_autograd
import zgrad.distributed.rpc as rpc
import zgrad.multiprocessing as mp
import zgrad.optim as optim
from zgrad.distributed.optim import DistributedOptimizer

import rnn


def _run_trainer(epochs):
    batch, ntoken, ninp, nhid, nindices, nlayers = 5, 7, 2, 3, 6, 4
    hidden = (zgrad.randn(nlayers, nindices, nhid), zgrad.randn(nlayers, nindices, nhid))
    model = rnn.RNNModel("ps", ntoken, ninp, nhid, nlayers)
    opt = DistributedOptimizer(optim.SGD, model.parameter_rrefs(), lr=0.05)
    criterion = zgrad.nn.CrossEntropyLoss()

    def get_next_batch():
        for _ in range(5):
            data = zgrad.LongTensor(batch, nindices) % ntoken
            target = zgrad.LongTensor(batch, ntoken) % nindices
            yield data, target

    for epoch in range(epochs):
        for data, target in get_next_batch():
            with dist_autograd.context() as context_id:
                hidden[0].detach_()
                hidden[1].detach_()
                output, hidden = model(data, hidden)
                loss = criterion(output, target)
                dist_autograd.backward(context_id, [loss])
                opt.step(context_id)
                # each iteration has its own context, so no gradients need zeroing
        print(f"Training epoch {epoch}")


def run_worker(rank, world_size, epochs, port):
    os.environ["MASTER_ADDR"] = "localhost"
    os.environ["MASTER_PORT"] = str(port)
    if rank == 1:
        rpc.init_rpc("trainer", rank=rank, world_size=world_size)
        _run_trainer(epochs)
    else:
        rpc.init_rpc("ps", rank=rank, world_size=world_size)  # serves the trainer until shutdown
    rpc.shutdown()  # waits for every worker


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="distributed RNN training over RPC")
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--port", type=int, default=29500)
    args = parser.parse_args()
    mp.spawn(run_worker, args=(2, args.epochs, args.port), nprocs=2, join=True)
