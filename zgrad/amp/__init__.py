"""``zgrad.amp``: automatic mixed precision, as ``torch.amp``: :class:`autocast` regions and the
:class:`GradScaler` that keeps float16 gradients from underflowing, and the :func:`custom_fwd` /
:func:`custom_bwd` decorators that carry the autocast state into custom autograd Functions.

Example (PyTorch's AMP recipe)::

    scaler = zgrad.amp.GradScaler("cpu")
    for x, target in data:
        optimizer.zero_grad()
        with zgrad.autocast("cpu", dtype=zgrad.float16):
            loss = loss_fn(model(x), target)
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        zgrad.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(optimizer)               # skipped when a gradient is inf or NaN
        scaler.update()

:class:`GradScaler` reads the default process group (all ranks skip a step together), so this
package belongs to the distributed layer; the ops consult autocast through
:mod:`zgrad.ops.autocast`, below it.
"""

from zgrad.amp.autocast_mode import autocast, custom_bwd, custom_fwd, is_autocast_available
from zgrad.amp.grad_scaler import GradScaler, OptState

__all__ = ["GradScaler", "OptState", "autocast", "custom_bwd", "custom_fwd", "is_autocast_available"]
