"""Anomaly detection (``zgrad.autograd.detect_anomaly``, ``set_detect_anomaly``, ``zgrad.is_anomaly_enabled``...):
a NaN gradient fails the pass naming its node and output, a failing backward node first warns with
the traceback of the forward call that made it (and of the node whose backward made it), the mode
is off by default and every switch restores what it found. The tests marked ``torch`` run the same
programs under PyTorch and compare the texts."""

from __future__ import annotations

import inspect
import threading
import warnings

import pytest

import zgrad
from cuda_helpers import requires_cuda
from helpers import require_torch
from zgrad.autograd import detect_anomaly, set_detect_anomaly

ENABLED_WARNING = ("Anomaly Detection has been enabled. This mode will increase the runtime and should only be "
                   "enabled for debugging.")


@pytest.fixture(autouse=True)
def anomaly_mode_off():
    """The mode is one switch for the process: every test starts and leaves it off."""
    assert not zgrad.is_anomaly_enabled() and zgrad.is_anomaly_check_nan_enabled()
    yield
    zgrad.set_anomaly_enabled(False)


def functions(lib):
    """User Functions written once for zgrad and torch."""

    class NanBackward(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, grad):
            return grad * float("nan")

    class Fails(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, grad):
            raise ValueError("backward failed")

    class FailsWhenDifferentiatedAgain(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return Fails.apply(grad * x)

    return NanBackward, Fails, FailsWhenDifferentiatedAgain


NanBackward, Fails, FailsWhenDifferentiatedAgain = functions(zgrad)


def quietly(mode=True, check_nan=True):
    """``detect_anomaly`` without its warning on entering."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return detect_anomaly(check_nan) if mode else set_detect_anomaly(False)


def test_off_by_default_and_free_when_off():
    x = zgrad.tensor([4.0, -1.0], requires_grad=True)
    y = x.sqrt()
    assert y.grad_fn.forward_trace is None and "forward_trace" not in vars(y.grad_fn)
    y.sum().backward()  # the NaN lands in .grad: nothing checks it
    assert x.grad[1].isnan().item()


def test_a_nan_gradient_names_its_node_and_output():
    x = zgrad.tensor([4.0, -1.0], requires_grad=True)
    with quietly():
        with pytest.raises(RuntimeError, match=r"^Function 'SqrtBackward0' returned nan values in its 0th output\.$"):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                x.sqrt().sum().backward()
        a = zgrad.tensor([0.0], requires_grad=True)
        with pytest.raises(RuntimeError, match=r"^Function 'DivBackward0' returned nan values in its 1th output\.$"):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                (a / a).sum().backward()
        with pytest.raises(zgrad.ZgradError, match=r"^Function 'NanBackwardBackward' returned nan values in its 0th"):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                zgrad.autograd.grad(NanBackward.apply(x).sum(), x)
        with pytest.raises(RuntimeError, match=r"^Function 'SqrtBackward0' returned nan values in its 0th output\.$"):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                zgrad.autograd.grad(x.sqrt().sum(), x, create_graph=True)  # a recorded pass: tensor gradients
    assert x.grad is None


def test_check_nan_false_lets_nans_through():
    x = zgrad.tensor([4.0, -1.0], requires_grad=True)
    with quietly(check_nan=False):
        assert zgrad.is_anomaly_enabled() and not zgrad.is_anomaly_check_nan_enabled()
        x.sqrt().sum().backward()
    assert x.grad[1].isnan().item()


def test_a_failing_backward_warns_with_the_forward_traceback_first():
    x = zgrad.ones(3, requires_grad=True)
    with quietly():
        line = inspect.currentframe().f_lineno + 1
        y = Fails.apply(x).sum()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with pytest.raises(ValueError, match="^backward failed$"):
                y.backward()
    assert len(caught) == 1 and caught[0].category is UserWarning
    message = str(caught[0].message)
    assert message.startswith("Error detected in FailsBackward. Traceback of forward call that caused the error:\n")
    assert f'  File "{__file__}", line {line}, in test_a_failing_backward_warns_with_the_forward_traceback_first\n' \
           f"    y = Fails.apply(x).sum()\n" in message
    assert message.endswith("    y = Fails.apply(x).sum()\n")  # zgrad's own frames below the user's line left out
    assert caught[0].filename == __file__  # pointing at the backward() call


def test_the_nan_error_comes_after_the_traceback_of_the_op():
    x = zgrad.tensor([-1.0], requires_grad=True)
    with quietly():
        y = x.sqrt()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with pytest.raises(RuntimeError, match="SqrtBackward0"):
                y.backward(zgrad.ones(1))
    assert [str(w.message).splitlines()[0] for w in caught] == [
        "Error detected in SqrtBackward0. Traceback of forward call that caused the error:"]
    assert "    y = x.sqrt()" in str(caught[0].message)


def test_a_node_made_before_the_mode_has_no_traceback():
    x = zgrad.ones(2, requires_grad=True)
    y = Fails.apply(x).sum()
    with set_detect_anomaly(True):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with pytest.raises(ValueError):
                y.backward()
    assert [str(w.message) for w in caught] == [
        "Error detected in FailsBackward. No forward pass information available. Enable detect anomaly during "
        "forward pass for more information."]


def test_a_node_made_by_a_backward_also_reports_the_node_that_made_it():
    x = zgrad.ones(2, requires_grad=True)
    with set_detect_anomaly(True):
        y = FailsWhenDifferentiatedAgain.apply(x).sum()
        (g,) = zgrad.autograd.grad(y, x, create_graph=True)
        assert g.grad_fn.forward_parent is y.grad_fn.next_functions[0][0]
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with pytest.raises(ValueError):
                g.sum().backward()
    first, second = (str(w.message) for w in caught)
    assert first.startswith("Error detected in FailsBackward. Traceback of forward call that caused the error:\n")
    assert "    return Fails.apply(grad * x)\n" in first
    assert second.startswith("\n\nPrevious calculation was induced by FailsWhenDifferentiatedAgainBackward. "
                             "Traceback of forward call that induced the previous calculation:\n")
    assert "    y = FailsWhenDifferentiatedAgain.apply(x).sum()\n" in second


def test_detect_anomaly_warns_when_made_and_nests():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        outer = detect_anomaly(check_nan=False)
    assert [str(w.message) for w in caught] == [ENABLED_WARNING] and caught[0].filename == __file__
    with outer:
        assert (zgrad.is_anomaly_enabled(), zgrad.is_anomaly_check_nan_enabled()) == (True, False)
        with quietly():
            assert (zgrad.is_anomaly_enabled(), zgrad.is_anomaly_check_nan_enabled()) == (True, True)
            with set_detect_anomaly(False):
                assert not zgrad.is_anomaly_enabled()
            assert (zgrad.is_anomaly_enabled(), zgrad.is_anomaly_check_nan_enabled()) == (True, True)
        assert (zgrad.is_anomaly_enabled(), zgrad.is_anomaly_check_nan_enabled()) == (True, False)
    assert (zgrad.is_anomaly_enabled(), zgrad.is_anomaly_check_nan_enabled()) == (False, True)


def test_the_previous_state_comes_back_after_an_error():
    with pytest.raises(KeyError):
        with quietly(check_nan=False):
            raise KeyError("inside")
    assert (zgrad.is_anomaly_enabled(), zgrad.is_anomaly_check_nan_enabled()) == (False, True)


def test_set_detect_anomaly_applies_at_once_and_restores_on_exit():
    switch = set_detect_anomaly(True, check_nan=False)  # as a function: on from here
    assert (zgrad.is_anomaly_enabled(), zgrad.is_anomaly_check_nan_enabled()) == (True, False)
    with switch:
        pass
    assert (zgrad.is_anomaly_enabled(), zgrad.is_anomaly_check_nan_enabled()) == (False, True)
    zgrad.set_anomaly_enabled(True)
    assert (zgrad.is_anomaly_enabled(), zgrad.is_anomaly_check_nan_enabled()) == (True, True)
    zgrad.set_anomaly_enabled(False, False)
    assert (zgrad.is_anomaly_enabled(), zgrad.is_anomaly_check_nan_enabled()) == (False, False)
    zgrad.set_anomaly_enabled(False)


def test_detect_anomaly_as_a_decorator():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")

        @detect_anomaly()
        def backward_of(x):
            assert zgrad.is_anomaly_enabled()
            x.sqrt().sum().backward()

    assert not zgrad.is_anomaly_enabled()
    with pytest.raises(RuntimeError, match="SqrtBackward0"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            backward_of(zgrad.tensor([-1.0], requires_grad=True))
    assert not zgrad.is_anomaly_enabled()


def test_the_mode_is_one_for_the_whole_process():
    seen = []
    with set_detect_anomaly(True):
        thread = threading.Thread(target=lambda: seen.append(zgrad.is_anomaly_enabled()))
        thread.start()
        thread.join()
    assert seen == [True]


def test_the_public_names():
    assert zgrad.autograd.anomaly_mode.__all__ == ["detect_anomaly", "set_detect_anomaly"]
    assert zgrad.autograd.anomaly_mode.detect_anomaly is detect_anomaly
    assert {"is_anomaly_enabled", "is_anomaly_check_nan_enabled", "set_anomaly_enabled"} <= set(zgrad.__all__)


@requires_cuda
def test_a_nan_gradient_on_the_device():
    x = zgrad.tensor([4.0, -1.0], device="cuda", requires_grad=True)
    with set_detect_anomaly(True):
        with pytest.raises(RuntimeError, match=r"^Function 'SqrtBackward0' returned nan values in its 0th output\.$"):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                x.sqrt().sum().backward()


def _run_under_anomaly_mode(lib):
    """The errors and warnings of the same programs, with file names and PyTorch's internal notes left out."""
    nan_backward, fails, _ = functions(lib)
    texts = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        lib.autograd.detect_anomaly()
    texts.append(str(caught[0].message))
    programs = [lambda x: x.sqrt().sum(), lambda x: (x / x).sum(), lambda x: nan_backward.apply(x).sum(),
                lambda x: fails.apply(x).sum()]
    for program in programs:
        with lib.autograd.set_detect_anomaly(True):
            x = lib.tensor([0.0, -1.0], requires_grad=True)
            y = program(x)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                with pytest.raises((RuntimeError, ValueError)) as error:
                    y.backward()
        texts.append(str(error.value))
        texts.append([str(w.message).splitlines()[0] for w in caught])
    return texts


@pytest.mark.torch
def test_texts_agree_with_pytorchs():
    torch = require_torch()
    assert _run_under_anomaly_mode(zgrad) == _run_under_anomaly_mode(torch)
    assert torch.is_anomaly_enabled() is zgrad.is_anomaly_enabled() is False
