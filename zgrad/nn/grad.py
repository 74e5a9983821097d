"""``zgrad.nn.grad`` (also ``nn.functional.grad``): the gradients of a convolution with respect to
its input and to its weight, given the gradient of its output, as PyTorch's ``torch.nn.grad``.

Each is the backward of the convolution itself, taken through autograd from a stand-in of the
given shape, so it matches ``conv{1,2,3}d``'s own backward on every backend, and it is
differentiable (with respect to the tensors given) when they require grad.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from zgrad.amp.autocast_mode import autocast
from zgrad.autograd.gradients import grad as autograd_grad
from zgrad.creation import zeros
from zgrad.engine.grad_mode import enable_grad, is_grad_enabled
from zgrad.ops.conv import conv2d
from zgrad.ops.one_dimensional import conv1d
from zgrad.ops.three_dimensional import conv3d
from zgrad.tensor import Tensor

__all__ = ["conv1d_input", "conv1d_weight", "conv2d_input", "conv2d_weight", "conv3d_input", "conv3d_weight"]

IntOrTuple = int | Sequence[int]


def _gradient(conv: Callable[..., Tensor], grad_output: Tensor, wrt_input: bool, given: Tensor,
              size: Sequence[int], options: dict[str, Any]) -> Tensor:
    """The gradient of ``conv`` with respect to a stand-in of shape ``size`` (its input when
    ``wrt_input``, else its weight); ``given`` is the other operand."""
    stand_in = zeros(tuple(size), dtype=given.dtype, device=given.device, requires_grad=True)
    create_graph = is_grad_enabled() and (given.requires_grad or grad_output.requires_grad)
    with enable_grad(), autocast(given.device.type, enabled=False):  # PyTorch's backward is not autocast
        output = conv(stand_in, given, **options) if wrt_input else conv(given, stand_in, **options)
        if tuple(output.shape) != tuple(grad_output.shape):
            raise RuntimeError(f"grad_output has shape {tuple(grad_output.shape)}, but the convolution's output has "
                               f"shape {tuple(output.shape)}")
        (result,) = autograd_grad(output, stand_in, grad_output, create_graph=create_graph)
    return result


_DOC = """The gradient of ``{conv}`` with respect to {what}, from the gradient of its output and
    its other operand (the same ``stride``, ``padding``, ``dilation`` and ``groups``), as PyTorch's
    ``torch.nn.grad.{conv}_{name}``.

    Raises:
        RuntimeError: ``grad_output``'s shape is not the convolution's output shape.
    """


def _with_respect_to_input(conv: Callable[..., Tensor]) -> Callable[..., Tensor]:
    def conv_input(input_size: Sequence[int], weight: Tensor, grad_output: Tensor, stride: IntOrTuple = 1,
                   padding: IntOrTuple = 0, dilation: IntOrTuple = 1, groups: int = 1) -> Tensor:
        options = {"stride": stride, "padding": padding, "dilation": dilation, "groups": groups}
        return _gradient(conv, grad_output, True, weight, input_size, options)

    conv_input.__name__ = conv_input.__qualname__ = f"{conv.__name__}_input"
    conv_input.__doc__ = _DOC.format(conv=conv.__name__, what="an input of shape ``input_size``", name="input")
    return conv_input


def _with_respect_to_weight(conv: Callable[..., Tensor]) -> Callable[..., Tensor]:
    def conv_weight(input: Tensor, weight_size: Sequence[int], grad_output: Tensor,  # noqa: A002
                    stride: IntOrTuple = 1, padding: IntOrTuple = 0, dilation: IntOrTuple = 1,
                    groups: int = 1) -> Tensor:
        options = {"stride": stride, "padding": padding, "dilation": dilation, "groups": groups}
        return _gradient(conv, grad_output, False, input, weight_size, options)

    conv_weight.__name__ = conv_weight.__qualname__ = f"{conv.__name__}_weight"
    conv_weight.__doc__ = _DOC.format(conv=conv.__name__, what="a weight of shape ``weight_size``", name="weight")
    return conv_weight


conv1d_input, conv1d_weight = _with_respect_to_input(conv1d), _with_respect_to_weight(conv1d)
conv2d_input, conv2d_weight = _with_respect_to_input(conv2d), _with_respect_to_weight(conv2d)
conv3d_input, conv3d_weight = _with_respect_to_input(conv3d), _with_respect_to_weight(conv3d)
