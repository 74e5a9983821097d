"""``zgrad.utils``: ``data`` (datasets, samplers, ``DataLoader``), ``checkpoint`` (activation
checkpointing) and ``hooks`` (``RemovableHandle``), as ``torch.utils``; and
:mod:`zgrad.utils.orphans`, which ties child processes' lives to their parent's."""

from zgrad.utils import checkpoint, data, hooks

__all__ = ["checkpoint", "data", "hooks"]
