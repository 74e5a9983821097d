"""``zgrad.distributed.optim``: the distributed optimizer."""

from zgrad.distributed.optim.optimizer import DistributedOptimizer

__all__ = ["DistributedOptimizer"]
