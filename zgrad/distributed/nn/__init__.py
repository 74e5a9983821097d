"""``zgrad.distributed.nn``: ``RemoteModule``, a module that lives on another worker."""

from zgrad.distributed.nn.remote_module import RemoteModule

__all__ = ["RemoteModule"]
