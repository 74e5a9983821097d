"""``zgrad.utils``: ``data`` (datasets, samplers, ``DataLoader``) and ``checkpoint`` (activation
checkpointing), as ``torch.utils``; and :mod:`zgrad.utils.orphans`, which ties child processes'
lives to their parent's."""

from zgrad.utils import checkpoint, data

__all__ = ["checkpoint", "data"]
