"""The built-in demo's training step, traced: the job behind the pictures in ``docs/tracing.md``.

Run by ``docs/figures/make.sh`` under ``zgrad-launch`` (two workers over tcp, ``configs/cluster.toml``):
rank 0 trains the demo's model-parallel MLP (``zgrad/launch/demo_model.py``) for a few steps, the
last one inside ``dist_autograd.trace``, and writes next to this file the trace of that step
(``demo-pass.json``) and the DOT of its graph (``demo-graph.dot``), taken before its context exits.
"""

from __future__ import annotations

import sys
from pathlib import Path

import zgrad
import zgrad.distributed.autograd as dist_autograd
import zgrad.nn.functional as F
from zgrad.distributed import rpc
from zgrad.distributed.optim import DistributedOptimizer
from zgrad.launch import demo_model
from zgrad.launch.data import spirals
from zgrad.launch.worker import init_rpc

HERE = Path(__file__).resolve().parent
STEPS, BATCH = 20, 64


def train(world_size: int, mode: str) -> None:
    x, y = spirals(STEPS * BATCH, noise=0.4, seed=0)
    stages = [rpc.remote(f"worker{i}", demo_model.Stage, args=(dims, i == world_size - 1, i))
              for i, dims in enumerate(demo_model.split_dims(world_size, 64))]
    optimizer = DistributedOptimizer(zgrad.optim.Adam, [p for s in stages for p in s.rpc_sync().parameter_rrefs()],
                                     lr=0.01)

    def step(i: int, last: bool) -> None:
        batch = slice(i * BATCH, (i + 1) * BATCH)
        with dist_autograd.context() as context_id:
            logits = demo_model.forward(stages, zgrad.from_numpy(x[batch]))
            loss = F.cross_entropy(logits, zgrad.from_numpy(y[batch]))
            dist_autograd.backward(context_id, [loss], mode=mode)
            optimizer.step(context_id)
            if last:
                (HERE / "demo-graph.dot").write_text(dist_autograd.graph(context_id))

    for i in range(STEPS - 1):
        step(i, last=False)
    with dist_autograd.trace(HERE / "demo-pass.json"):
        step(STEPS - 1, last=True)


def main() -> int:
    me = init_rpc(allowed_modules=[demo_model.__name__])
    try:
        if me.rank == 0:
            train(me.world_size, sys.argv[1] if len(sys.argv) > 1 else "smart")
    finally:
        rpc.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
