"""The data-parallel demo job: the single-process demo's MLP trained with DistributedDataParallel.

Every worker holds the whole model (``zgrad.demo.build_model``); each global batch of
``--batch-size`` spiral samples is split evenly across the workers, each computes its part's
gradient, and DDP averages them, so every step is the single-process step on the whole batch
(``python -m zgrad.demo``) and the model reaches the same accuracy.

Run it with ``zgrad-launch --config configs/ddp.toml`` (or under the launcher's ``ZGRAD_*``
environment). Rank 0 prints the progress; exits non-zero if it misses the target.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

import zgrad
import zgrad.distributed as dist
import zgrad.nn.functional as F
from zgrad.demo import accuracy, build_model, demo_parser, report_final
from zgrad.launch.data import spirals
from zgrad.launch.worker import init_process_group
from zgrad.nn.parallel import DistributedDataParallel as DDP


def train(args: argparse.Namespace, rank: int, world_size: int) -> int:
    if args.batch_size % world_size:
        raise SystemExit(f"--batch-size {args.batch_size} must split evenly over {world_size} workers")
    zgrad.manual_seed(args.seed)
    x_train, y_train = spirals(args.samples, seed=args.seed)
    x_test, y_test = spirals(1000, seed=args.seed + 1)
    model = DDP(build_model(args.hidden))
    optimizer = zgrad.optim.Adam(model.parameters(), lr=args.lr)
    steps = len(x_train) // args.batch_size
    share = args.batch_size // world_size
    if rank == 0:
        print(f"data-parallel MLP over {world_size} workers, batch {args.batch_size} ({share} per worker), "
              f"{steps} steps/epoch, {len(model.reducer.buckets)} gradient bucket(s)", flush=True)
    started = time.perf_counter()
    for epoch in range(1, args.epochs + 1):
        epoch_start, total_loss = time.perf_counter(), 0.0
        for step in range(steps):
            mine = slice(step * args.batch_size + rank * share, step * args.batch_size + (rank + 1) * share)
            loss = F.cross_entropy(model(zgrad.from_numpy(x_train[mine])), zgrad.from_numpy(y_train[mine]))
            optimizer.zero_grad()
            loss.backward()  # returns with the gradients averaged over the workers
            optimizer.step()
            total_loss += loss.item()
        mean_loss = zgrad.tensor([total_loss / steps])
        dist.all_reduce(mean_loss, op=dist.ReduceOp.AVG)
        if rank == 0:
            ms_per_step = (time.perf_counter() - epoch_start) * 1e3 / steps
            print(f"epoch {epoch:2d}  loss {mean_loss.item():.4f}  test accuracy "
                  f"{accuracy(model.module, x_test, y_test):6.1%}  {ms_per_step:.2f} ms/step", flush=True)
    final = accuracy(model.module, x_test, y_test)
    check = zgrad.tensor(np.array([final]))
    dist.broadcast(check, 0)
    if check.item() != final:
        raise SystemExit(f"worker {rank}'s model diverged from worker 0's (accuracy {final} vs {check.item()})")
    return report_final(final, started, args.require_target, show=rank == 0)


def main(argv: list[str] | None = None) -> int:
    args = demo_parser(__doc__.splitlines()[0], epochs=12, batch_size_help="global batch, split over the workers",
                       launched=True).parse_args(argv)

    me = init_process_group()
    try:
        return train(args, me.rank, me.world_size)
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
