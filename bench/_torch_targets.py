"""Functions and classes the torch.distributed.rpc reference runs call remotely."""

from __future__ import annotations

import torch
from torch.distributed import rpc


def echo(value):
    return value


def add(a, b):
    return a + b


class Stage(torch.nn.Module):
    def __init__(self, d_in, d_out, seed):
        super().__init__()
        torch.manual_seed(seed)
        self.fc = torch.nn.Linear(d_in, d_out)

    def forward(self, x):
        return torch.relu(self.fc(x))

    def parameter_rrefs(self):
        return [rpc.RRef(p) for p in self.parameters()]


def forward_stage(rref, x):
    return rref.local_value()(x)
