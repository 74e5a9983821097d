"""``SyncBatchNorm``: batch norm whose training statistics are those of the global batch, the
union of every rank's local batch (as ``torch.nn.SyncBatchNorm``).

Part of the distributed layer (it runs collectives); ``zgrad/__init__.py`` binds it into
:mod:`zgrad.nn` on first use, so ``nn.SyncBatchNorm`` works after a plain ``import zgrad``.

One training step of one layer issues two all-reduces over its process group, each of one flat
float64 array, from the thread that runs the pass:

* forward: ``[sum(x) per channel, sum(x * x) per channel, count]`` (label ``sync_batch_norm_stats``):
  every rank normalizes with the global mean and biased variance, and updates its running
  statistics with the global unbiased variance, so they stay equal on every rank.
* backward (when the input needs a gradient): ``[sum(dy) per channel, sum(dy * x_hat) per
  channel]`` (label ``sync_batch_norm_grads``), which the input's gradient needs. The weight and
  bias gradients stay local sums, as PyTorch's: DDP averages them with the other gradients.

Ordering with DDP: a group runs its collectives one at a time in the order they were issued on
the rank (``collectives/executor.py``), and a blocking collective issued while DDP's bucket
all-reduces are in flight is queued behind them (it does not overtake them, and they need nothing
from the thread that waits). The local backward pass runs its nodes on one thread in an order
fixed by the graph alone (``engine/graph_task.py``), and DDP launches buckets from that thread in
index order; so with the same model on every rank, every rank issues the bucket all-reduces and
these all-reduces in the same order. A rank that does otherwise fails with a collective error
naming both collectives (each collective's fingerprint is checked), not a hang.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from zgrad.autograd.function import Op
from zgrad.distributed.collectives import ops
from zgrad.distributed.collectives.fingerprint import ReduceOp
from zgrad.distributed.collectives.process_group import NON_GROUP_MEMBER, ProcessGroup
from zgrad.distributed.collectives.state import current_world
from zgrad.kernels import dispatch, dispatch_layers
from zgrad.nn.module import Module
from zgrad.nn.norm import _BatchNorm, _InstanceNorm
from zgrad.ops._args import tensor_arg
from zgrad.ops.norm import check_parameters
from zgrad.tensor import Tensor

__all__ = ["SyncBatchNorm", "SyncBatchNormFunction"]


def _host64(array: Any) -> np.ndarray:
    """``array`` (host or device) as a host float64 array."""
    return np.asarray(dispatch.to_device(array, "cpu"), np.float64)


def _like(values: np.ndarray, x: Any, shape: tuple[int, ...] | None = None) -> Any:
    """Host ``values`` in ``x``'s dtype, on ``x``'s device (reshaped to ``shape`` if given)."""
    values = values.astype(x.dtype)
    return dispatch.to_device(values if shape is None else values.reshape(shape), dispatch.device_type_of(x))


def _update_running(running: Any, stat: np.ndarray, momentum: float) -> None:
    """running = (1 - momentum) * running + momentum * stat, in place."""
    new = (1.0 - momentum) * _host64(running) + momentum * stat
    dispatch.copy_into(running, _like(new, running))


class SyncBatchNormFunction(Op):
    """Batch norm of (N, C, *) input with the statistics of the global batch over ``group``.

    Forward and backward each block on one all-reduce over ``group`` (see the module's docstring).
    """

    @staticmethod
    def forward(ctx, x, weight, bias, running_mean, running_var, momentum, eps, group):
        channels = x.shape[1]
        x3 = x.reshape(x.shape[0], channels, int(np.prod(x.shape[2:], dtype=np.int64)))  # -1 fails on 0 samples
        values = Tensor(x3).double()  # float64 sums: the variance is mean(x * x) - mean(x)**2
        local_sums = (values.sum(dim=(0, 2)), (values * values).sum(dim=(0, 2)))
        sums = np.concatenate([*(_host64(t._data) for t in local_sums), [x3.shape[0] * x3.shape[2]]])
        ops.all_reduce(group, sums, ReduceOp.SUM, False, [], label="sync_batch_norm_stats")
        count = float(sums[-1])
        if count <= 1:  # the same global count everywhere: every rank raises
            raise ValueError(f"SyncBatchNorm: Expected more than 1 value per channel when training, got {int(count)} "
                             f"over the process group's global batch (this rank's input has size {list(x.shape)})")
        mean = sums[:channels] / count
        var = np.maximum(sums[channels:2 * channels] / count - mean * mean, 0.0)
        if running_mean is not None:
            _update_running(running_mean, mean, momentum)
        if running_var is not None:
            _update_running(running_var, var * (count / (count - 1)), momentum)
        out, _, _ = dispatch_layers.batch_norm(x3, weight, bias, _like(mean, x), _like(var, x), False, 0.0, eps)
        ctx.save_for_backward(x3, weight)
        ctx.shape, ctx.group, ctx.count = x.shape, group, count
        ctx.mean, ctx.invstd = mean, 1.0 / np.sqrt(var + eps)
        return out.reshape(x.shape)

    @staticmethod
    def backward(ctx, grad):
        x3, weight = ctx.saved_tensors
        needs = ctx.needs_input_grad
        grad3 = grad.reshape(x3.shape)
        # With the statistics as constants (training=False), the kernel's weight and bias gradients
        # are this rank's sum(dy * x_hat) and sum(dy).
        _, sum_dy_xhat, sum_dy = dispatch_layers.batch_norm_backward(
            grad3, x3, None, _like(ctx.mean, x3), _like(ctx.invstd, x3), False, (False, True, True))
        grad_x = None
        if needs[0]:
            channels = x3.shape[1]
            sums = np.concatenate([_host64(sum_dy), _host64(sum_dy_xhat)])
            ops.all_reduce(ctx.group, sums, ReduceOp.SUM, False, [], label="sync_batch_norm_grads")
            mean_dy, mean_dy_xhat = sums[:channels] / ctx.count, sums[channels:] / ctx.count
            scale = ctx.invstd if weight is None else ctx.invstd * _host64(weight)

            def per_channel(values: np.ndarray) -> Tensor:
                return Tensor(_like(values, x3, (1, channels, 1)))

            # dx = (dy - mean(dy) - x_hat * mean(dy * x_hat)) * invstd * weight, the means over the global batch
            x_hat_term = (Tensor(x3) - per_channel(ctx.mean)) * per_channel(ctx.invstd * mean_dy_xhat)
            grad_x = ((Tensor(grad3) - per_channel(mean_dy) - x_hat_term) * per_channel(scale))._data.reshape(ctx.shape)
        return (grad_x, sum_dy_xhat if needs[1] else None, sum_dy if needs[2] else None) + (None,) * 5


class SyncBatchNorm(_BatchNorm):
    """Batch norm of (N, C, *) input whose training statistics are the global batch's: the union
    of the local batches of every rank of ``process_group``, as ``torch.nn.SyncBatchNorm``.

    Training (with a process group of more than one rank) normalizes every rank's batch with the
    global mean and (biased) variance, and updates ``running_mean`` / ``running_var`` with them
    (the variance unbiased over the global count; ``momentum`` None: a cumulative average over
    ``num_batches_tracked``), so the running statistics stay equal on every rank. The input's
    gradient takes the global sums of the backward pass; the weight and bias gradients are this
    rank's, which DDP averages. Evaluation, or training without an initialized process group or
    on a group of one rank, is plain batch norm (:class:`~zgrad.nn.BatchNorm1d`'s).

    Unlike PyTorch's, it runs on CPU tensors too (PyTorch's requires a GPU when a process group is
    initialized).

    Args:
        num_features: C, the channels (dimension 1).
        eps, momentum, affine, track_running_stats, device, dtype, bias: as ``BatchNorm1d``'s.
        process_group: the group whose ranks share statistics (default: the world).

    Raises (forward):
        ValueError: input of fewer than 2 dimensions ("expected at least 2D input (got 1D
            input)"), or of 0 channels; one value per channel in the global batch (training).
        RuntimeError: input whose channel count is not ``num_features``.

    Blocks: in training (synchronized), the forward and the backward pass each run one all-reduce
    over the group, which every rank must reach in the same order (bounded by the group's
    timeout). Not thread-safe: one thread per module, as for any module.

    Example::

        model = nn.SyncBatchNorm.convert_sync_batchnorm(model)   # every BatchNorm*d replaced
        model = DDP(model)
        loss_fn(model(x), y).backward()
    """

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1, affine: bool = True,
                 track_running_stats: bool = True, process_group: ProcessGroup | None = None, device: Any = None,
                 dtype: Any = None, *, bias: bool = True) -> None:
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype, bias=bias)
        self.process_group = process_group

    def _check_input(self, input: Any) -> None:
        shape = input.shape
        if len(shape) < 2:
            raise ValueError(f"expected at least 2D input (got {len(shape)}D input)")
        if shape[1] == 0:
            raise ValueError("SyncBatchNorm number of input channels should be non-zero")
        self._check_channels(shape)

    def _sync_group(self) -> ProcessGroup | None:
        """The group to share statistics with in this forward; None: plain batch norm (evaluation,
        no process group initialized, a group of one rank, or one this rank is not in)."""
        if not self.training or self.process_group is NON_GROUP_MEMBER:
            return None
        group = self.process_group
        if group is None:
            world = current_world(required=False)
            if world is None:
                return None
            group = world.default
        return group if group.size() > 1 else None

    def forward(self, input: Any) -> Any:  # noqa: A002 - torch's name
        tensor_arg(input, self, "input")
        self._check_input(input)
        group = self._sync_group()
        if group is None:
            return super().forward(input)
        check_parameters(self, input, ("weight", self.weight), ("bias", self.bias))
        tracking = self.track_running_stats and self.num_batches_tracked is not None
        factor = 0.0 if self.momentum is None else self.momentum
        if tracking and self.momentum is None:
            factor = 1.0 / (int(self.num_batches_tracked.item()) + 1)
        out = SyncBatchNormFunction.apply(input, self.weight, self.bias, self.running_mean, self.running_var,
                                          float(factor), float(self.eps), group)
        if tracking:
            self.num_batches_tracked.add_(1)
        return out

    @classmethod
    def convert_sync_batchnorm(cls, module: Module, process_group: ProcessGroup | None = None) -> Module:
        """Replace every batch norm layer in ``module``'s tree (``BatchNorm1d/2d/3d``, and
        ``SyncBatchNorm``) by a ``SyncBatchNorm`` over ``process_group`` that takes over its
        weight, bias, running statistics and ``num_batches_tracked`` (the same tensors) and its
        training flag; other modules stay as they are (instance norm layers too).

        Args:
            module: the model (changed in place).
            process_group: the group the new layers synchronize over (default: the world).

        Returns:
            ``module``, or the new layer if ``module`` itself is a batch norm layer.

        Example::

            model = nn.SyncBatchNorm.convert_sync_batchnorm(model)
            model = DDP(model)
        """
        converted = module
        if isinstance(module, _BatchNorm) and not isinstance(module, _InstanceNorm):
            converted = cls(module.num_features, module.eps, module.momentum, module.affine,
                            module.track_running_stats, process_group, bias=module.bias is not None)
            if module.affine:
                converted.weight, converted.bias = module.weight, module.bias
            converted.running_mean, converted.running_var = module.running_mean, module.running_var
            converted.num_batches_tracked = module.num_batches_tracked
            converted.training = module.training
        for name, child in module.named_children():
            converted.add_module(name, cls.convert_sync_batchnorm(child, process_group))
        return converted
