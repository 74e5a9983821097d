"""The public distributed autograd functions (mirroring ``torch.distributed.autograd``)."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from zgrad.distributed.autograd.worker import current_worker
from zgrad.distributed.rpc.state import current_agent
from zgrad.errors import AutogradError
from zgrad.kernels import dispatch
from zgrad.tensor import Tensor, gradient_edge

__all__ = ["context", "backward", "get_gradients", "get_debug_info"]


class context:
    """A distributed autograd context: ``with dist_autograd.context() as context_id:``.

    Every RPC made by this thread inside the block is recorded under ``context_id`` (a 64-bit id
    unique across workers). On exit the context is released here at once, and on every worker it
    reached (recursively) in the background, as in PyTorch: the exit does not wait for them, so
    their ``get_debug_info()["num_autograd_contexts"]`` drops a moment later. A message of the
    context arriving after its release never revives it. ``rpc.shutdown`` waits for the releases
    still under way.

    Raises:
        AutogradError: this thread already has a context ("Already have an autograd context id
            for this thread").
    """

    def __enter__(self) -> int:
        self._worker = current_worker()
        self._ctx = self._worker.contexts.create()
        return self._ctx.context_id

    def __exit__(self, *exc: object) -> None:
        self._worker.contexts.set_current(None)
        self._worker.release(self._ctx.context_id)


def _validate_roots(roots: Any) -> list[Tensor]:
    if isinstance(roots, Tensor):
        roots = [roots]
    roots = list(roots) if roots is not None else []
    if not roots:
        raise AutogradError("No tensors provided for gradient computation.")
    for i, root in enumerate(roots):
        if not isinstance(root, Tensor):
            raise AutogradError(f"roots must be tensors; root {i} is a {type(root).__name__}")
        if not root.requires_grad:
            raise AutogradError(f"requires_grad not set on root tensor {i}")
        if root.numel() != 1:
            raise AutogradError(f"root tensor {i} of shape {list(root.shape)} is not a scalar, all roots need to be scalar")
        if root.grad_fn is None:
            raise AutogradError(f"root tensor {i} does not have a valid gradient function.")
    return roots


def backward(context_id: int, roots: "Tensor | Sequence[Tensor]", retain_graph: bool = False,
             mode: str | None = None) -> None:
    """Run the distributed backward pass of ``context_id`` from scalar ``roots`` on this worker.

    Gradients accumulate in the context (read them with :func:`get_gradients`), never in
    ``.grad``. Blocks until every worker's share of the pass has finished.

    Args:
        mode: "fast" or "smart"; default ``[engine] mode``.

    Raises:
        AutogradError: bad roots, an unknown context ("Could not find autograd context with id:
            N"), a pass already running in it, or a failure anywhere ("Error on Node N: ...").
        ZgradTimeoutError: no progress for ``[engine] backward_timeout_s``.
    """
    engine, config = current_worker().engine, current_agent().config.engine
    roots = _validate_roots(roots)
    grads = [dispatch.full(r.shape, 1, r.dtype, dispatch.device_type_of(r._data)) for r in roots]
    engine.run_backward(context_id, [gradient_edge(r) for r in roots], grads, retain_graph,
                                  mode or config.mode, config.backward_timeout_s)


def get_gradients(context_id: int) -> dict[Tensor, Tensor]:
    """The gradients accumulated in ``context_id`` on this worker: leaf tensor -> gradient.

    Raises:
        AutogradError: "Could not find autograd context with id: N".
    """
    ctx = current_worker().contexts.get(context_id)
    return {leaf: Tensor(np.asarray(grad) if dispatch.device_type_of(grad) == "cpu" else grad) for leaf, grad in ctx.gradients().items()}


def get_debug_info() -> dict[str, int]:
    """Counters of this worker as a flat dict of ints (PyTorch returns the same keys as strings,
    so ``{k: int(v) for k, v in info.items()}`` works on both): ``num_current_backward_passes``,
    ``num_autograd_contexts``, ``discovery_messages`` (SMART), and one key per engine message
    kind sent and received, such as ``"messages_sent.GRAD"``."""
    return _flatten(current_worker().engine.debug_info())


def _flatten(counters: dict[str, Any], prefix: str = "") -> dict[str, int]:
    flat: dict[str, int] = {}
    for key, value in counters.items():
        if isinstance(value, dict):
            flat.update(_flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = int(value)
    return flat
