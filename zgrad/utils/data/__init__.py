"""``zgrad.utils.data``: datasets, samplers and ``DataLoader``, as ``torch.utils.data``.

Example::

    from zgrad.utils.data import DataLoader, TensorDataset

    dataset = TensorDataset(zgrad.randn(100, 3), zgrad.arange(100))
    for x, y in DataLoader(dataset, batch_size=32, shuffle=True, num_workers=2):
        ...                                  # x: (32, 3) float32, y: (32,) int64

``DistributedSampler`` lives in :mod:`zgrad.utils.data.distributed` (the distributed layer).
"""

from zgrad.utils.data._utils.collate import default_collate, default_convert
from zgrad.utils.data._utils.worker_info import get_worker_info
from zgrad.utils.data.dataloader import DataLoader
from zgrad.utils.data.dataset import (
    ChainDataset, ConcatDataset, Dataset, IterableDataset, Subset, TensorDataset, random_split,
)
from zgrad.utils.data.sampler import (
    BatchSampler, RandomSampler, Sampler, SequentialSampler, SubsetRandomSampler, WeightedRandomSampler,
)

__all__ = [
    "BatchSampler", "ChainDataset", "ConcatDataset", "DataLoader", "Dataset", "IterableDataset", "RandomSampler",
    "Sampler", "SequentialSampler", "Subset", "SubsetRandomSampler", "TensorDataset", "WeightedRandomSampler",
    "default_collate", "default_convert", "get_worker_info", "random_split",
]
