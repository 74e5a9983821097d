"""``zgrad.nn.parallel``: ``DistributedDataParallel`` (mirroring ``torch.nn.parallel``).

Part of the distributed layer (it runs collectives), so ``import zgrad.nn`` does not import it:
``from zgrad.nn.parallel import DistributedDataParallel as DDP``.
"""

from zgrad.nn.parallel.buckets import GradBucket
from zgrad.nn.parallel.distributed import DistributedDataParallel

__all__ = ["DistributedDataParallel", "GradBucket"]
