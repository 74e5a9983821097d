"""``zgrad.distributed.autograd``: backward passes across RPC boundaries.

Mirrors ``torch.distributed.autograd``: ``context``, ``backward``, ``get_gradients``, plus
``get_debug_info``. ``backward(..., mode="smart")`` selects SMART mode for one pass.
``trace(path)`` writes a timeline of the passes run inside it, on every worker that took part;
``graph(context_id)`` returns the distributed graph of a context as DOT text.
"""

from zgrad.distributed.autograd.api import backward, context, get_debug_info, get_gradients
from zgrad.distributed.autograd.graph_view import graph
from zgrad.distributed.autograd.tracing import trace

__all__ = ["backward", "context", "get_debug_info", "get_gradients", "graph", "trace"]
