"""``zgrad.distributed.algorithms.ddp_comm_hooks``: built-in DDP communication hooks."""

from zgrad.distributed.algorithms.ddp_comm_hooks import default_hooks

__all__ = ["default_hooks"]
