"""The model-parallel MLP of the built-in demo job: its stages and the calls that run them.

Stage ``i`` lives on worker ``i`` (created there with ``rpc.remote``); rank 0 runs the forward
pass through every stage with :func:`forward`. The functions and classes here are the demo's RPC
targets: the demo allow-lists this module (``[rpc] allowed_modules``) like any job allows its
own, and nothing else of the launcher is callable by peers.
"""

from __future__ import annotations

import numpy as np

import zgrad
from zgrad import nn
from zgrad.distributed import rpc

__all__ = ["Stage", "stage_forward", "stage_predict", "split_dims", "forward", "accuracy", "NUM_CLASSES"]

NUM_CLASSES = 3


class Stage(nn.Module):
    """A run of Linear layers (ReLU between them, and after the last unless ``final``)."""

    def __init__(self, dims: list[int], final: bool, seed: int):
        super().__init__()
        zgrad.manual_seed(seed)
        layers: list[nn.Module] = []
        for i, (d_in, d_out) in enumerate(zip(dims, dims[1:])):
            layers.append(nn.Linear(d_in, d_out))
            if not (final and i == len(dims) - 2):
                layers.append(nn.ReLU())
        self.net = nn.Sequential(*layers)

    def forward(self, x):
        return self.net(x)

    def parameter_rrefs(self) -> list:
        return [rpc.RRef(p) for p in self.parameters()]


def stage_forward(stage: rpc.RRef, x):
    """Run on the stage's owner: the forward pass of the stage it holds."""
    return stage.local_value()(x)


def stage_predict(stage: rpc.RRef, x):
    """Run on the stage's owner: the stage's forward pass without recording a graph."""
    with zgrad.no_grad():
        return stage.local_value()(x)


def split_dims(world_size: int, hidden: int) -> list[list[int]]:
    """Layer widths per stage: at least three Linear layers, at least one per worker."""
    num_layers = max(3, world_size)
    dims = [2] + [hidden] * (num_layers - 1) + [NUM_CLASSES]
    bounds = np.linspace(0, num_layers, world_size + 1).round().astype(int)
    return [dims[lo:hi + 1] for lo, hi in zip(bounds, bounds[1:])]


def forward(stages: list, x, fn=stage_forward):
    """Run ``x`` through the stages (each on its owner): ``fn`` is the call each owner runs."""
    for stage in stages:
        x = rpc.rpc_sync(stage.owner(), fn, args=(stage, x))
    return x


def accuracy(stages: list, x: np.ndarray, y: np.ndarray) -> float:
    """The share of the samples ``x`` whose class the model predicts as ``y`` (no graph recorded)."""
    logits = forward(stages, zgrad.from_numpy(x), stage_predict).numpy()
    return float((logits.argmax(axis=1) == y).mean())
