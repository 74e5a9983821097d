"""The autograd engine: graph nodes, local graph tasks, grad mode; the distributed engine in :mod:`zgrad.engine.dist`."""

from zgrad.engine.grad_mode import enable_grad, is_grad_enabled, no_grad, set_grad_enabled
from zgrad.engine.graph import AccumulateGrad, Edge, GraphRoot, InputMetadata, Node
from zgrad.engine.graph_task import GraphTask, run_backward
from zgrad.engine.validate import validate_gradients

__all__ = [
    "AccumulateGrad", "Edge", "GraphRoot", "GraphTask", "InputMetadata", "Node",
    "enable_grad", "is_grad_enabled", "no_grad", "run_backward", "set_grad_enabled", "validate_gradients",
]
