"""``zgrad.nn.parallel``: ``DistributedDataParallel`` and ``DataParallel`` (mirroring ``torch.nn.parallel``).

Part of the distributed layer (it runs collectives), so ``import zgrad.nn`` does not import it:
``from zgrad.nn.parallel import DistributedDataParallel as DDP``.
"""

from zgrad.nn.parallel.buckets import GradBucket
from zgrad.nn.data_parallel import DataParallel, data_parallel
from zgrad.nn.parallel.distributed import DistributedDataParallel

__all__ = ["DataParallel", "DistributedDataParallel", "GradBucket", "data_parallel"]
