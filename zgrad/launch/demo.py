"""The built-in launcher job: model-parallel training of an MLP split across the workers.

Stage ``i`` of the MLP (``demo_model.py``) lives on worker ``i`` (created there with
``rpc.remote``); rank 0 feeds a batch of synthetic spirals through the stages, computes the
loss, runs distributed autograd and steps a :class:`~zgrad.distributed.optim.DistributedOptimizer`
holding every stage's parameters.
The other ranks only serve RPCs until the shutdown barrier.

Run it with ``zgrad-launch --config configs/cluster.toml`` (or ``python -m zgrad.launch.demo``
under the launcher's ``ZGRAD_*`` environment). Exits non-zero if rank 0 misses the target.
"""

from __future__ import annotations

import argparse
import sys
import time

import zgrad
import zgrad.distributed.autograd as dist_autograd
import zgrad.nn.functional as F
from zgrad.distributed import rpc
from zgrad.demo import demo_parser, report_final
from zgrad.distributed.optim import DistributedOptimizer
from zgrad.launch import demo_model
from zgrad.launch.data import spirals
from zgrad.launch.demo_model import Stage, accuracy, forward, split_dims
from zgrad.launch.worker import init_rpc



def _bar(done: int, total: int, width: int = 30) -> str:
    filled = width * done // total
    return f"\r  [{'#' * filled}{'.' * (width - filled)}] {done}/{total}"


def train(args: argparse.Namespace, world_size: int) -> int:
    x_train, y_train = spirals(args.samples, noise=args.noise, seed=args.seed)
    x_test, y_test = spirals(1000, noise=args.noise, seed=args.seed + 1)
    stages = [rpc.remote(f"worker{i}", Stage, args=(dims, i == world_size - 1, args.seed + i))
              for i, dims in enumerate(split_dims(world_size, args.hidden))]
    params = [p for stage in stages for p in stage.rpc_sync().parameter_rrefs()]
    optimizer = DistributedOptimizer(zgrad.optim.Adam, params, lr=args.lr)
    steps = len(x_train) // args.batch_size
    tty = sys.stdout.isatty()
    print(f"model-parallel MLP over {world_size} workers, {len(params)} parameter tensors, "
          f"{steps} steps/epoch", flush=True)
    started = time.perf_counter()
    for epoch in range(1, args.epochs + 1):
        epoch_start, total_loss = time.perf_counter(), 0.0
        for step in range(steps):
            batch = slice(step * args.batch_size, (step + 1) * args.batch_size)
            with dist_autograd.context() as context_id:
                logits = forward(stages, zgrad.from_numpy(x_train[batch]))
                loss = F.cross_entropy(logits, zgrad.from_numpy(y_train[batch]))
                dist_autograd.backward(context_id, [loss])
                optimizer.step(context_id)
            total_loss += loss.item()
            if tty:
                print(_bar(step + 1, steps), end="", flush=True)
        ms_per_step = (time.perf_counter() - epoch_start) * 1e3 / steps
        if tty:
            print("\r" + " " * 50 + "\r", end="")
        print(f"epoch {epoch:2d}  loss {total_loss / steps:.4f}  "
              f"test accuracy {accuracy(stages, x_test, y_test):6.1%}  {ms_per_step:.2f} ms/step", flush=True)
    return report_final(accuracy(stages, x_test, y_test), started, args.require_target)


def main(argv: list[str] | None = None) -> int:
    parser = demo_parser(__doc__.splitlines()[0], epochs=15, launched=True)
    parser.add_argument("--noise", type=float, default=0.4)
    args = parser.parse_args(argv)

    me = init_rpc(allowed_modules=[demo_model.__name__])  # the stages' module: the demo's RPC targets
    try:
        return train(args, me.world_size) if me.rank == 0 else 0
    finally:
        rpc.shutdown()


if __name__ == "__main__":
    sys.exit(main())
