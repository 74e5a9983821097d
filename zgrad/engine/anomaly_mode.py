"""Anomaly detection for the autograd engine (PyTorch's ``detect_anomaly``).

While it is on, every node made records where the forward call that made it came from (and, when
it is made by the backward of another node, that node); when a node's backward raises, the engine
warns with that traceback before the error travels on. With ``check_nan``, a node that produces a
NaN gradient fails the pass, naming itself and the gradient. As in PyTorch, the mode is one switch
for the whole process, not per thread.

When it is off, the engine pays one flag test per node made and one per node run: the switch is
the attribute :attr:`AnomalyState.enabled` of :data:`ANOMALY`, which the engine reads, and
everything else here runs only while it is on.
"""

from __future__ import annotations

import functools
import sys
import threading
import traceback
import warnings
from typing import Any, Callable, Sequence, TypeVar

import numpy as np

from zgrad.errors import AutogradError
from zgrad.kernels import dispatch

__all__ = ["ANOMALY", "AnomalyState", "detect_anomaly", "is_anomaly_check_nan_enabled", "is_anomaly_enabled",
           "set_anomaly_enabled", "set_detect_anomaly"]

F = TypeVar("F", bound=Callable[..., Any])

ENABLED_WARNING = ("Anomaly Detection has been enabled. This mode will increase the runtime and should only be "
                   "enabled for debugging.")


class AnomalyState:
    """The process's anomaly-detection switch: ``enabled``, and ``check_nan`` (meaningful while enabled)."""

    def __init__(self) -> None:
        self.enabled = False
        self.check_nan = True


ANOMALY = AnomalyState()


class _RunningNode(threading.local):
    node: Any = None  # the node whose backward this thread runs, while anomaly detection is on


_running = _RunningNode()


def is_anomaly_enabled() -> bool:
    """Whether anomaly detection is on (for every thread)."""
    return ANOMALY.enabled


def is_anomaly_check_nan_enabled() -> bool:
    """Whether anomaly detection, when on, fails a backward pass at the first NaN gradient."""
    return ANOMALY.check_nan


def set_anomaly_enabled(enabled: bool, check_nan: bool = True) -> None:
    """Turn anomaly detection on or off for the whole process, as ``torch.set_anomaly_enabled``.

    Args:
        enabled: record forward tracebacks and report them when a backward node fails.
        check_nan: with ``enabled``, fail the pass when a node produces a NaN gradient.
    """
    ANOMALY.enabled = bool(enabled)
    ANOMALY.check_nan = bool(check_nan)


class detect_anomaly:
    """Anomaly detection inside the block (or decorated function), as ``torch.autograd.detect_anomaly``.

    Inside it, each graph node records the traceback of the forward call that made it, and a node
    whose backward raises first warns ``Error detected in <node>. Traceback of forward call that
    caused the error: ...``; with ``check_nan`` (the default), a node that returns a NaN gradient
    raises. The previous setting comes back when the block ends. Making one warns that the mode
    slows programs down. It is a debugging aid: every node made inside costs a stack walk.

    Example::

        with zgrad.autograd.detect_anomaly():
            loss = model(x).sum()
            loss.backward()   # RuntimeError: Function 'SqrtBackward0' returned nan values in its 0th output.
    """

    def __init__(self, check_nan: bool = True) -> None:
        self.check_nan = bool(check_nan)
        self._previous: list[tuple[bool, bool]] = []
        warnings.warn(ENABLED_WARNING, UserWarning, stacklevel=2)

    def __enter__(self) -> None:
        self._previous.append((ANOMALY.enabled, ANOMALY.check_nan))
        set_anomaly_enabled(True, self.check_nan)

    def __exit__(self, *exc: object) -> None:
        set_anomaly_enabled(*self._previous.pop())

    def __call__(self, fn: F) -> F:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with self:
                return fn(*args, **kwargs)

        return wrapper  # type: ignore[return-value]


class set_detect_anomaly:
    """Set anomaly detection on or off at once, and back to the previous setting at the end of a
    ``with`` block, as ``torch.autograd.set_detect_anomaly``.

    Args:
        mode: turn anomaly detection on (True) or off (False).
        check_nan: while on, fail the backward pass at the first NaN gradient.
    """

    def __init__(self, mode: bool, check_nan: bool = True) -> None:
        self.prev = ANOMALY.enabled
        self.prev_check_nan = ANOMALY.check_nan
        set_anomaly_enabled(mode, check_nan)

    def __enter__(self) -> None:
        pass

    def __exit__(self, *exc: object) -> None:
        set_anomaly_enabled(self.prev, self.prev_check_nan)


# --- what the engine calls while the mode is on -------------------------------------------------

def _outside_zgrad(frame: Any) -> tuple[Any, int]:
    """The innermost frame from ``frame`` outwards that is not zgrad's own code, and how many
    frames out it is (1: ``frame`` itself)."""
    level = 1
    while frame is not None and frame.f_globals.get("__name__", "").partition(".")[0] == "zgrad":
        frame, level = frame.f_back, level + 1
    return frame, level


def record_forward(node: Any) -> None:
    """Keep on ``node`` the traceback of the call that is making it, without zgrad's own frames at
    its innermost end (the op's machinery), and the node whose backward is making it, if any."""
    frame, _ = _outside_zgrad(sys._getframe(1))
    node.forward_trace = traceback.format_list(traceback.extract_stack(frame)) if frame is not None else []
    node.forward_parent = _running.node


def run_node(execute: Callable[[Any, list], Sequence[Any]], node: Any, inputs: list, graph: Any = None
             ) -> Sequence[Any]:
    """``execute(node, inputs)`` with ``node`` known as the running node (the parent of the nodes
    its backward makes), then, with ``check_nan``, its gradients checked for NaN (arrays, or the
    tensors of a recorded pass, whose :class:`~zgrad.engine.validate.GraphGradients` is ``graph``).

    Raises:
        AutogradError: a gradient has a NaN (PyTorch's message, naming the node and the gradient).
    """
    previous, _running.node = _running.node, node
    try:
        outputs = execute(node, inputs)
    finally:
        _running.node = previous
    if ANOMALY.check_nan:
        for index, grad in enumerate(outputs):
            if grad is not None and _has_nan(grad if graph is None else graph.array_of(grad)):
                raise AutogradError(f"Function '{node.name}' returned nan values in its {index}th output.")
    return outputs


def _has_nan(array: Any) -> bool:
    host = array if isinstance(array, np.ndarray) else dispatch.to_device(array, "cpu")
    return host.dtype.kind not in "biu" and bool(np.isnan(host).any())


def report_failure(node: Any) -> None:
    """Warn with the forward traceback of ``node``, whose backward just raised, then with that of
    each node whose backward made it, one warning each, in PyTorch's words; a node made while the
    mode was off has no traceback, which ends the report."""
    _, level = _outside_zgrad(sys._getframe())
    first = True
    while node is not None:
        if node.forward_trace is None:
            warnings.warn(f"Error detected in {node.name}. No forward pass information available. Enable detect "
                          f"anomaly during forward pass for more information.", UserWarning, stacklevel=level)
            return
        trace = "".join(node.forward_trace)
        warnings.warn(f"Error detected in {node.name}. Traceback of forward call that caused the error:\n{trace}"
                      if first else f"\n\nPrevious calculation was induced by {node.name}. Traceback of forward "
                      f"call that induced the previous calculation:\n{trace}", UserWarning, stacklevel=level)
        node, first = node.forward_parent, False
