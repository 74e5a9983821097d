"""``zgrad.distributed.autograd``: backward passes across RPC boundaries.

Mirrors ``torch.distributed.autograd``: ``context``, ``backward``, ``get_gradients``, plus
``get_debug_info``. ``backward(..., mode="smart")`` selects SMART mode for one pass.
"""

from zgrad.distributed.autograd.api import backward, context, get_debug_info, get_gradients

__all__ = ["backward", "context", "get_debug_info", "get_gradients"]
