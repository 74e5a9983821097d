"""The connectionist temporal classification loss of ``zgrad.nn.functional``: ``ctc_loss``, with
PyTorch's arguments, reductions, checks and error texts.

A target of length S is read as its extended label sequence: a blank, then each label followed by
a blank (2S + 1 states). An alignment of T frames walks that sequence from one of its first two
states to one of its last two, at each frame staying, moving one state on, or skipping a blank
between two different labels. The loss is -log of the summed probability of all alignments:

- forward variables: alpha[t, s] = lp[t, l(s)] + logsumexp(alpha[t-1, s], alpha[t-1, s-1],
  alpha[t-1, s-2] where the skip is allowed), and the loss -logsumexp of alpha at the last frame
  over the two final states;
- backward variables (in backward only): beta[t, s] = lp[t, l(s)] + logsumexp(beta[t+1, s],
  beta[t+1, s+1], beta[t+1, s+2] where allowed), started at each sample's last frame;
- gradient: exp(lp[t, c]) - sum over the states s of label c of exp(alpha + beta - lp + loss),
  PyTorch's formula (the gradient with respect to the logits of a log_softmax that made ``lp``).

The recursions loop over frames in Python, each step four element-wise backend ops over
(states, batch) into buffers allocated once (the variables of every frame, padded with -inf
states so that a frame's states shifted by one or two are contiguous rows), so that the op runs on
every backend; the rest is dispatch's ops over whole arrays. The target layout (labels, allowed
skips, first and last states, lengths) is built once on the host from the lengths, which
PyTorch's checks read there too.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from zgrad import ops
from zgrad.autograd.function import Op
from zgrad.kernels import dispatch, dispatch_index, dispatch_reduce
from zgrad.kernels.dispatch_math import unary_math
from zgrad.ops.autocast import autocast_op
from zgrad.ops._args import tensor_arg
from zgrad.ops.loss_functions import check_reduction
from zgrad.tensor import Tensor

__all__ = ["CtcLoss", "ctc_loss"]

_CHECKING = " (while checking arguments for ctc_loss_allocate_outputs)"
_FLOATING = (np.dtype(np.float32), np.dtype(np.float64))


class _Plan:
    """The target layout of a batch, on the log-probabilities' device, states first ((states, N)
    arrays, so that a frame's states shifted by one or two are contiguous rows of a padded
    buffer): ``states`` extended labels per sample, and the host-known facts the recursions branch
    on."""

    def __init__(self, frames: int, batch: int, classes: int, states: int, steps: int) -> None:
        self.frames, self.batch, self.classes, self.states = frames, batch, classes, states
        self.steps = steps  # frames the recursions run over: the longest input length
        self.picks: Any = None  # (states * N,) int64: the column of each state's label in lp as (T, N * C)
        self.skip: Any = None  # (states, N): 0 where the state may be entered from two states back, else -inf
        self.skip_next: Any = None  # (states, N): skip two states on, for the backward variables
        self.first: Any = None  # (states, N): 0 at the states an alignment may start in, -inf elsewhere
        self.last: Any = None  # (states, N): 0 at the states an alignment may end in, -inf elsewhere
        self.end_frames: Any = None  # (1, states + 2, N) int64: each sample's last frame (0 for an empty input)
        self.ends_at: dict[int, Any] = {}  # frame -> (1, N) bool: the samples whose last frame it is
        self.inside: Any = None  # (steps, N, 1) bool: frames within each sample's input length
        self.empty_inputs: Any = None  # None, or ((N,) bool: input length 0, (N,) its loss: 0 or inf)


def _neg_inf_where(mask: np.ndarray) -> np.ndarray:
    return np.where(mask, 0.0, -np.inf)


def _plan(labels: np.ndarray, target_lengths: np.ndarray, input_lengths: np.ndarray, frames: int, classes: int,
          blank: int, dtype: np.dtype, device: str) -> _Plan:
    """The layout of (N, S) padded ``labels`` (entries past a target's length unread)."""
    batch, longest = labels.shape
    states = 2 * longest + 1
    steps = int(input_lengths.max(initial=0))
    plan = _Plan(frames, batch, classes, states, steps)

    def put(array: np.ndarray, kind: Any = dtype) -> Any:
        return dispatch.asarray(np.ascontiguousarray(array), kind, device)

    extended = np.full((states, batch), blank, np.int64)
    extended[1::2] = np.where(np.arange(longest)[:, None] < target_lengths, labels.T, blank)
    s = np.arange(states)[:, None]
    skip = np.zeros((states, batch), bool)
    skip[2:] = extended[2:] != extended[:-2]  # only to a label differing from the one two back
    has_labels = target_lengths > 0
    plan.picks = put((np.arange(batch) * classes + extended).reshape(-1), np.int64)
    plan.skip = put(_neg_inf_where(skip))
    plan.skip_next = put(_neg_inf_where(np.concatenate([skip[2:], np.zeros((2, batch), bool)])))
    plan.first = put(_neg_inf_where((s == 0) | ((s == 1) & has_labels)))
    ends = 2 * target_lengths
    plan.last = put(_neg_inf_where((s == ends) | ((s == ends - 1) & has_labels)))
    last_frame = input_lengths - 1
    plan.end_frames = put(np.broadcast_to(np.maximum(last_frame, 0), (1, states + 2, batch)), np.int64)
    plan.ends_at = {t: put((last_frame == t)[None, :], np.bool_) for t in sorted(set(last_frame.tolist())) if t >= 0}
    plan.inside = put((np.arange(steps)[:, None] < input_lengths)[:, :, None], np.bool_)
    if (input_lengths == 0).any():
        plan.empty_inputs = (put(input_lengths == 0, np.bool_), put(np.where(target_lengths == 0, 0.0, np.inf)))
    return plan


def _state_log_probs(log_probs: Any, plan: _Plan) -> Any:
    """lp at each state's label for the first ``steps`` frames: (steps, states, N)."""
    rows = dispatch.contiguous(log_probs).reshape(plan.frames, plan.batch * plan.classes)[:plan.steps]
    return dispatch_index.index_select(rows, 1, plan.picks).reshape(plan.steps, plan.states, plan.batch)


def _buffers(state_lp: Any, plan: _Plan) -> tuple[Any, Any, Any]:
    """A (steps, states + 2, N) buffer of -inf for a recursion's variables, two spare rows around
    them, and two (states, N) scratch arrays."""
    device = dispatch.device_type_of(state_lp)
    shape = (plan.states, plan.batch)
    return (dispatch.full((plan.steps, plan.states + 2, plan.batch), -math.inf, state_lp.dtype, device),
            dispatch.empty(shape, state_lp.dtype, device), dispatch.empty(shape, state_lp.dtype, device))


def _step(be: Any, stay: Any, one: Any, two: Any, allowed: Any, state_lp: Any, out: Any, scratch: Any) -> None:
    """out = state_lp + logsumexp(stay, one, two + allowed): one recursion step, on the backend
    into arrays allocated once (every array here is (states, N) and contiguous)."""
    total, skipping = scratch
    be.add(two, allowed, skipping)
    be.binary_math("logaddexp", stay, one, total)
    be.binary_math("logaddexp", total, skipping, total)
    be.add(total, state_lp, out)


def _forward_variables(state_lp: Any, plan: _Plan) -> Any:
    """alpha: (steps, states + 2, N), frame t's states at rows 2.. of ``alpha[t]`` (rows 0 and 1
    stay -inf: the states before the first), each frame's from the previous one."""
    be = dispatch.backend_of(state_lp)
    alpha, *scratch = _buffers(state_lp, plan)
    be.add(state_lp[0], plan.first, alpha[0, 2:])
    for t in range(1, plan.steps):
        previous = alpha[t - 1]
        _step(be, previous[2:], previous[1:-1], previous[:-2], plan.skip, state_lp[t], alpha[t, 2:], scratch)
    return alpha


def _backward_variables(state_lp: Any, plan: _Plan) -> Any:
    """beta: (steps, states + 2, N), frame t's states at rows ..states of ``beta[t]`` (the last two
    rows stay -inf: the states after the last), each frame's from the next one, each sample
    started at its last frame (frames past it hold values nothing reads)."""
    be = dispatch.backend_of(state_lp)
    beta, *scratch = _buffers(state_lp, plan)
    states = plan.states
    for t in range(plan.steps - 1, -1, -1):
        out = beta[t, :states]
        if t + 1 < plan.steps:
            following = beta[t + 1]
            _step(be, following[:states], following[1:-1], following[2:], plan.skip_next, state_lp[t], out, scratch)
        starts = plan.ends_at.get(t)
        if starts is not None:  # the samples whose last frame this is start here
            start = be.add(state_lp[t], plan.last, scratch[0])
            be.where(starts, start, out, out)
    return beta


class CtcLoss(Op):
    """Per sample, -log of the summed probability of every alignment of its target with its
    input frames (``zero_infinity``: an impossible target's inf loss and its gradient are 0)."""

    @staticmethod
    def forward(ctx, log_probs, plan, zero_infinity):
        dtype, device = log_probs.dtype, dispatch.device_type_of(log_probs)
        if plan.steps:
            state_lp = _state_log_probs(log_probs, plan)
            alpha = _forward_variables(state_lp, plan)
            ends = dispatch_index.gather(alpha, 0, plan.end_frames)[0, 2:]  # each sample's last frame
            total, _ = dispatch_reduce.logsumexp(dispatch.binary("add", ends, plan.last), 0, False)
            loss = dispatch.unary("neg", total)
        else:
            state_lp = alpha = None
            loss = dispatch.full((plan.batch,), 0.0, dtype, device)
        if plan.empty_inputs is not None:
            loss = dispatch_index.where(plan.empty_inputs[0], plan.empty_inputs[1], loss)
        ctx.plan, ctx.zero_infinity = plan, zero_infinity
        ctx.save_for_backward(log_probs, state_lp, alpha, loss)
        if zero_infinity:
            loss = dispatch_index.where(unary_math("isinf", loss), 0.0, loss)
        return loss

    @staticmethod
    def backward(ctx, grad):
        log_probs, state_lp, alpha, loss = ctx.saved_tensors
        plan = ctx.plan
        dtype, device = log_probs.dtype, dispatch.device_type_of(log_probs)
        if not plan.steps:
            return dispatch.full(log_probs.shape, 0.0, dtype, device), None, None
        steps, states, batch, classes = plan.steps, plan.states, plan.batch, plan.classes
        beta = _backward_variables(state_lp, plan)
        impossible = unary_math("isinf", loss)
        finite_loss = dispatch_index.where(impossible, 0.0, loss)
        # an impossible target's gradient: NaN (PyTorch's), or 0 with zero_infinity
        scale = dispatch_index.where(impossible, 0.0 if ctx.zero_infinity else math.nan, dispatch.as_dtype(grad, dtype))
        both = dispatch.binary("add", alpha[:, 2:], beta[:, :states])
        occupancy = dispatch.unary("exp", dispatch.binary("add", dispatch.binary("sub", both, state_lp), finite_loss))
        per_class = dispatch_index.index_select_backward(occupancy.reshape(steps, states * batch),
                                                         (steps, batch * classes), 1, plan.picks)
        lp = dispatch.contiguous(log_probs).reshape(plan.frames, batch, classes)[:steps]
        result = dispatch.binary("sub", dispatch.unary("exp", lp), per_class.reshape(steps, batch, classes))
        result = dispatch.binary("mul", result, scale.reshape(1, batch, 1))
        result = dispatch_index.where(plan.inside, result, 0.0)
        if steps < plan.frames:
            rest = dispatch.full((plan.frames - steps, batch, classes), 0.0, dtype, device)
            result = dispatch.concatenate([result, rest], 0)
        return result.reshape(log_probs.shape), None, None


def _lengths(value: Any, name: str) -> np.ndarray:
    """A tensor of lengths (any shape) or a sequence of ints as a 1-D int64 host array.

    Raises:
        RuntimeError: a tensor of a non-integer dtype (PyTorch's message).
    """
    if isinstance(value, Tensor):
        if value.dtype.kind not in "iu":
            raise RuntimeError(f"{name} must be integral")
        return np.asarray(value._host(), dtype=np.int64).reshape(-1)
    lengths = []
    for item in value:
        if isinstance(item, Tensor) and item.numel() == 1 and item.dtype.kind in "iu":
            item = item.item()
        if isinstance(item, bool) or not isinstance(item, (int, np.integer)):
            raise TypeError(f"ctc_loss(): {name} must be a tuple of ints, but got an element of type "
                            f"{type(item).__name__}")
        lengths.append(int(item))
    return np.asarray(lengths, dtype=np.int64).reshape(-1)


def _check_lengths(input_lengths: Any, target_lengths: Any) -> tuple[np.ndarray, np.ndarray]:
    """Both lengths as 1-D int64 host arrays.

    Raises:
        TypeError: lengths that are not both tensors nor both tuples or lists of ints.
        RuntimeError: tensors of a non-integer dtype (PyTorch's message).
    """
    tensors = isinstance(input_lengths, Tensor), isinstance(target_lengths, Tensor)
    sequences = isinstance(input_lengths, (tuple, list)), isinstance(target_lengths, (tuple, list))
    if not (all(tensors) or all(sequences)):
        raise TypeError(f"ctc_loss(): input_lengths and target_lengths must be both Tensors or both tuples of ints, "
                        f"got {type(input_lengths).__name__} and {type(target_lengths).__name__}")
    return _lengths(input_lengths, "input_lengths"), _lengths(target_lengths, "target_lengths")


def _padded_labels(targets: Any, target_lengths: np.ndarray, batch: int) -> np.ndarray:
    """The targets as (N, max target length) int64 on the host, checked against the lengths as
    PyTorch checks them (a 1-D target holds them one after another).

    Raises:
        RuntimeError: a negative target length, or a target tensor of the wrong size (PyTorch's
            messages).
    """
    for length in target_lengths:
        if length < 0:
            raise RuntimeError(f"Expected target_lengths to have value at least 0, but got value {length}{_CHECKING}")
    longest = int(target_lengths.max(initial=0))
    if targets.ndim == 1:
        total = int(target_lengths.sum())
        if targets.shape[0] != total:
            raise RuntimeError(f"Expected tensor to have size {total} at dimension 0, but got size {targets.shape[0]} "
                               f"for argument #2 'targets'{_CHECKING}")
        flat = np.asarray(targets._host()).astype(np.int64)
        starts = np.cumsum(target_lengths) - target_lengths
        picks = np.minimum(starts[:, None] + np.arange(longest), max(total - 1, 0))
        return flat[picks] if total else np.zeros((batch, longest), np.int64)
    if targets.shape[0] != batch:
        raise RuntimeError(f"Expected tensor to have size {batch} at dimension 0, but got size {targets.shape[0]} "
                           f"for argument #2 'targets'{_CHECKING}")
    if targets.shape[1] < longest:
        raise RuntimeError(f"Expected tensor to have size at least {longest} at dimension 1, but got size "
                           f"{targets.shape[1]} for argument #2 'targets'{_CHECKING}")
    return np.asarray(targets._host()).astype(np.int64)[:, :longest]


def _check_input_lengths(input_lengths: np.ndarray, frames: int) -> None:
    for length in input_lengths:
        if length < 0:
            raise RuntimeError(f"Expected input_lengths to have value at least 0, but got value {length}{_CHECKING}")
        if length > frames:
            raise RuntimeError(f"Expected input_lengths to have value at most {frames}, but got value "
                               f"{length}{_CHECKING}")


@autocast_op()
def ctc_loss(log_probs: Any, targets: Any, input_lengths: Any, target_lengths: Any, blank: int = 0,
             reduction: str = "mean", zero_infinity: bool = False) -> Any:
    """The connectionist temporal classification loss, as ``torch.nn.functional.ctc_loss``: per
    sample, -log of the summed probability of every alignment of its target with its first
    ``input_lengths`` frames (see the module docstring).

    Args:
        log_probs: (T, N, C) log-probabilities (log_softmax over C), or (T, C) for one sample;
            float32 or float64.
        targets: (N, S) padded targets (entries past a target's length are not read), or the
            targets one after another, 1-D of size sum(target_lengths); any integer (or
            floating) dtype, values in [0, C).
        input_lengths, target_lengths: (N,) integer tensors, or tuples (lists) of ints.
        blank: the blank label, in [0, C).
        reduction: 'none' (one loss per sample; a 0-d one unbatched), 'sum', or 'mean' (each loss
            divided by its target length clamped to >= 1, then averaged over the batch).
        zero_infinity: make infinite losses (impossible alignments) and their gradients 0.

    The gradient with respect to ``log_probs`` is PyTorch's: that of the logits of a log_softmax
    (exp(lp) minus the alignments' occupancy of each class), 0 past each input length.

    Raises:
        ValueError: an unknown ``reduction``.
        TypeError: a non-tensor ``log_probs``, or lengths that are not both tensors nor both
            sequences of ints.
        NotImplementedError: log_probs of a dtype other than float32 and float64.
        RuntimeError: empty log_probs, tensors of the wrong rank or size, a blank outside the
            classes, lengths out of range or of a non-integer dtype, a target label outside
            [0, C) (PyTorch's messages where it has one).
    """
    check_reduction(reduction)
    x = tensor_arg(log_probs, "ctc_loss", "log_probs")
    t = tensor_arg(targets, "ctc_loss", "targets")
    input_lengths_, target_lengths_ = _check_lengths(input_lengths, target_lengths)
    if x.dtype not in _FLOATING:
        raise NotImplementedError(f"\"ctc_loss_{x.device.type}\" not implemented for "
                                  f"'{dispatch.scalar_type_name(x.dtype)}'")
    if x.numel() == 0:
        raise RuntimeError("log_probs tensor must not be empty")
    if x.ndim == 0:
        raise IndexError("Dimension out of range (expected to be in range of [-1, 0], but got 1)")
    unbatched = x.ndim == 2
    if x.ndim != 3 and not unbatched:
        raise RuntimeError(f"Expected 3-dimensional tensor, but got {x.ndim + 1}-dimensional tensor for argument #1 "
                           f"'log_probs'{_CHECKING}")
    if unbatched:
        x = ops.unsqueeze(x, 1)
    frames, batch, classes = x.shape
    if not 1 <= t.ndim <= 2:
        raise RuntimeError(f"Expected 1 to 2 dimensions, but got {t.ndim}-dimensional tensor for argument #2 "
                           f"'targets'{_CHECKING}")
    if not 0 <= blank < classes:
        raise RuntimeError("blank must be in label range")
    if input_lengths_.size != batch:
        raise RuntimeError("input_lengths must be of size batch_size")
    if target_lengths_.size != batch:
        raise RuntimeError("target_lengths must be of size batch_size")
    labels = _padded_labels(t, target_lengths_, batch)
    _check_input_lengths(input_lengths_, frames)
    read = labels[np.arange(labels.shape[1]) < target_lengths_[:, None]]
    if read.size and (read.min() < 0 or read.max() >= classes):
        bad = read[(read < 0) | (read >= classes)][0]
        raise RuntimeError(f"ctc_loss: target label {bad} is out of range for log_probs of {classes} classes")
    plan = _plan(labels, target_lengths_, input_lengths_, frames, classes, blank, x.dtype, x.device.type)
    loss = CtcLoss.apply(x, plan, bool(zero_infinity))
    if reduction == "none":
        return loss.reshape(()) if unbatched else loss
    if reduction == "sum":
        return ops.sum(loss)
    divisor = Tensor(dispatch.asarray(np.maximum(target_lengths_, 1), x.dtype, x.device.type))
    return ops.mean(loss / divisor)
