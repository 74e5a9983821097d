"""``zgrad.utils``: ``data`` (datasets, samplers, ``DataLoader``), as ``torch.utils``; and
:mod:`zgrad.utils.orphans`, which ties child processes' lives to their parent's."""

from zgrad.utils import data

__all__ = ["data"]
