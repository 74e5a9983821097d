"""A data-parallel training program that resumes exactly, for zgrad-run's restart tests.

    zgrad-run ... tests/support/elastic_trainer.py EPOCHS SNAPSHOT FINAL [HOLD_AT]

Every rank trains a small regression model with DDP on its shard; after each epoch rank 0
writes a snapshot (model, optimizer, the next epoch) with ``zgrad.save``; a restarted round
starts from it. At the end rank 0 writes the model to FINAL. Each rank prints
``rank R pid P attempt A`` first and ``rank R epoch E`` at each epoch, which the tests read.

With HOLD_AT, the first attempt's ranks stop before epoch HOLD_AT (``rank R holding at epoch E``)
and wait there to be killed, so that a test kills a worker at a known point, however slowly it
reads the output; a hold nobody ends fails the run after ``HOLD_S``.
"""

import os
import sys
import time

import zgrad
import zgrad.distributed as dist
import zgrad.nn.functional as F
from zgrad.nn.parallel import DistributedDataParallel as DDP

ROWS_PER_RANK = 64
STEPS_PER_EPOCH = 4
HOLD_S = 300.0


def main() -> None:
    epochs, snapshot, final = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    attempt = int(os.environ["TORCHELASTIC_RESTART_COUNT"])
    hold_at = int(sys.argv[4]) if len(sys.argv) > 4 and attempt == 0 else None
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    print(f"rank {rank} pid {os.getpid()} attempt {attempt}", flush=True)
    zgrad.manual_seed(0)
    x = zgrad.randn(ROWS_PER_RANK * world, 8)
    y = x @ zgrad.randn(8, 1) + 0.1 * zgrad.randn(ROWS_PER_RANK * world, 1)
    model = zgrad.nn.Sequential(zgrad.nn.Linear(8, 16), zgrad.nn.Tanh(), zgrad.nn.Linear(16, 1))
    optimizer = zgrad.optim.Adam(model.parameters(), lr=1e-2)
    start = 0
    if os.path.exists(snapshot):
        state = zgrad.load(snapshot)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        start = state["epoch"]
        print(f"rank {rank} resuming at epoch {start}", flush=True)
    ddp = DDP(model)
    rows = ROWS_PER_RANK // STEPS_PER_EPOCH
    mine = slice(rank * ROWS_PER_RANK, (rank + 1) * ROWS_PER_RANK)
    xs, ys = x[mine], y[mine]
    for epoch in range(start, epochs):
        if epoch == hold_at:
            print(f"rank {rank} holding at epoch {epoch}", flush=True)
            time.sleep(HOLD_S)
            sys.exit(f"rank {rank} held {HOLD_S:g} s at epoch {epoch} and no worker was killed")
        print(f"rank {rank} epoch {epoch}", flush=True)
        for step in range(STEPS_PER_EPOCH):
            batch = slice(step * rows, (step + 1) * rows)
            optimizer.zero_grad()
            F.mse_loss(ddp(xs[batch]), ys[batch]).backward()
            optimizer.step()
        if rank == 0:
            zgrad.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "epoch": epoch + 1}, snapshot)
            print(f"saved epoch {epoch}", flush=True)
        dist.barrier()
    if rank == 0:
        zgrad.save(model.state_dict(), final)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
