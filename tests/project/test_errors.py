"""Every documented error of the tensor, autograd, nn and config layers, triggered, with its message.

Messages must name the thing, what was received and what was expected (docs/architecture.md, Errors).
"""

from __future__ import annotations

import re

import pytest

import zgrad
from zgrad import nn
from zgrad.config import load_config
from zgrad.errors import AutogradError, CheckpointError, ConfigError, GradcheckError, ShapeError, ZgradError

F = zgrad.nn.functional


def raises(exc, *fragments):
    """``pytest.raises`` whose message must contain every fragment, literally."""
    return pytest.raises(exc, match="(?s)" + "".join(f"(?=.*{re.escape(f)})" for f in fragments))


# --- tensors and autograd -----------------------------------------------------------------------

def test_requires_grad_on_integer_tensor():
    with raises(AutogradError, "only Tensors of floating point dtype can require gradients", "int64"):
        zgrad.tensor([1, 2], requires_grad=True)
    with raises(AutogradError, "floating point", "int32"):
        zgrad.zeros(2, dtype=zgrad.int32).requires_grad_()


def test_changing_requires_grad_of_non_leaf():
    y = zgrad.ones(2, requires_grad=True) * 2
    with raises(AutogradError, "you can only change requires_grad flags of leaf variables", "detach()"):
        y.requires_grad_(False)
    with raises(RuntimeError, "leaf variables"):
        y.requires_grad = False


def test_backward_on_tensor_that_does_not_require_grad():
    with raises(RuntimeError, "does not require grad and does not have a grad_fn"):
        zgrad.ones(1).backward()


def test_backward_gradient_of_wrong_shape():
    y = zgrad.ones(2, 3, requires_grad=True) * 2
    with raises(AutogradError, "Mismatch in shape", "[3, 2]", "[2, 3]"):
        y.backward(zgrad.ones(3, 2))


def test_backward_non_scalar_without_gradient():
    with raises(AutogradError, "grad can be implicitly created only for scalar outputs", "[2, 3]"):
        (zgrad.ones(2, 3, requires_grad=True) * 2).backward()


def test_backward_through_freed_graph():
    x = zgrad.ones(2, requires_grad=True)
    y = x.exp().sum()
    y.backward()
    with raises(AutogradError, "ExpBackward", "second time", "Specify retain_graph=True"):
        y.backward()


def test_gradcheck_of_a_wrong_gradient():
    class Square(zgrad.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * x

        @staticmethod
        def backward(ctx, grad):
            return grad  # should be 2 * x * grad

    x = zgrad.tensor([1.0, 2.0], dtype=zgrad.float64, requires_grad=True)
    with raises(GradcheckError, "Jacobian mismatch for output 0 with respect to input 0", "numerical:", "analytical:"):
        zgrad.autograd.gradcheck(Square.apply, (x,))


def test_hook_on_tensor_without_grad():
    with raises(AutogradError, "cannot register a hook on a tensor that doesn't require gradient"):
        zgrad.ones(2).register_hook(lambda g: g)


def test_hook_returning_wrong_shape():
    x = zgrad.ones(2, requires_grad=True)
    x.register_hook(lambda g: zgrad.ones(3))
    with raises(AutogradError, "hook returned a gradient of shape [3]", "expected [2]"):
        (x * 2).sum().backward()


def test_custom_function_bad_gradients():
    class Bad(zgrad.autograd.Function):
        @staticmethod
        def forward(ctx, x, y):
            return x + y

        @staticmethod
        def backward(ctx, grad):
            return ctx.result(grad)

    x, y = zgrad.ones(3, requires_grad=True), zgrad.ones(3, requires_grad=True)
    out = Bad.apply(x, y)
    out.grad_fn.result = lambda g: (g,)
    with raises(AutogradError, "BadBackward", "incorrect number of gradients", "expected 2, got 1"):
        out.sum().backward(retain_graph=True)
    out.grad_fn.result = lambda g: (g, zgrad.ones(4))
    with raises(AutogradError, "BadBackward", "index 1", "got [4]", "expected shape compatible with [3]"):
        out.sum().backward(retain_graph=True)
    out.grad_fn.result = lambda g: (g, zgrad.ones(3, dtype=zgrad.int64))
    with raises(AutogradError, "BadBackward", "index 1", "expected dtype float32 but got int64"):
        out.sum().backward()


def test_custom_function_forward_must_return_tensors():
    class NotATensor(zgrad.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return 3.0

    with raises(AutogradError, "NotATensor.forward must return tensors, got float at output 0"):
        NotATensor.apply(zgrad.ones(1, requires_grad=True))


def test_inplace_on_leaf_that_requires_grad():
    w = zgrad.ones(2, requires_grad=True)
    with raises(AutogradError, "a leaf Variable that requires grad is being used in an in-place operation",
                "zgrad.no_grad()"):
        w.add_(1)


def test_item_of_multi_element_tensor():
    with raises(ValueError, "a Tensor with 6 elements cannot be converted to Scalar"):
        zgrad.ones(2, 3).item()
    with raises(RuntimeError, "Boolean value of Tensor with 2 values is ambiguous"):
        bool(zgrad.ones(2))
    with raises(TypeError, "len() of a 0-d tensor"):
        len(zgrad.tensor(1.0))


def test_factory_errors():
    with raises(ValueError, "a tensor size must be a non-negative int", "-1"):
        zgrad.zeros(2, -1)
    with raises(ValueError, "non-negative int", "2.5"):
        zgrad.ones(2.5)
    with raises(TypeError, "from_numpy expects a numpy.ndarray, got list"):
        zgrad.from_numpy([1.0])
    with raises(TypeError, "from_dlpack expects an object with __dlpack__, got list"):
        zgrad.from_dlpack([1.0])
    with raises(TypeError, "manual_seed expects an int, got float"):
        zgrad.manual_seed(1.5)
    with raises(ValueError, "Expected one of cpu, cuda device type", "tpu"):
        zgrad.zeros(2, device="tpu")


def test_unsupported_operand():
    with raises(TypeError, "unsupported operand of type str"):
        zgrad.ones(2) + "a"
    with raises(TypeError, "exp expects a Tensor, got float"):
        zgrad.exp(1.0)
    with raises(TypeError, "square expects a Tensor, got str"):
        zgrad.square("a")


# --- shapes and dimensions ----------------------------------------------------------------------

def test_broadcast_mismatch_names_the_sizes_as_torch():
    with raises(ShapeError, "The size of tensor a (3) must match the size of tensor b (4) at non-singleton dimension 1"):
        zgrad.ones(2, 3) + zgrad.ones(4)
    with raises(RuntimeError, "The size of tensor a (3) must match the size of tensor b (2) at non-singleton dimension 1"):
        zgrad.mul(zgrad.ones(2, 3, requires_grad=True), zgrad.ones(3, 2))


def test_matmul_shape_mismatch():
    with raises(ValueError, "matmul: shapes [2, 3] and [4, 5] do not match", "3 (last dim of the first) != 4"):
        zgrad.ones(2, 3) @ zgrad.ones(4, 5)
    with raises(ValueError, "matmul: shapes [3] and [2] do not match"):
        zgrad.matmul(zgrad.ones(3), zgrad.ones(2))
    with raises(ValueError, "matmul: shapes [2, 3, 4] and [5, 4, 2] do not match", "[2] and [5] cannot be broadcast"):
        zgrad.ones(2, 3, 4) @ zgrad.ones(5, 4, 2)
    with raises(ShapeError, "both arguments to matmul need to be at least 1D, but they are 0D and 1D"):
        zgrad.tensor(2.0) @ zgrad.ones(2)


def test_bad_reshape():
    with raises(ShapeError, "shape '[4, 4]' is invalid for input of size 6"):
        zgrad.ones(2, 3).reshape(4, 4)
    with raises(ValueError, "invalid for input of size 6"):
        zgrad.reshape(zgrad.ones(6), (-1, 4))


@pytest.mark.parametrize("call", [
    pytest.param(lambda t: t.sum(dim=2), id="sum"),
    pytest.param(lambda t: t.mean(dim=(0, -3)), id="mean"),
    pytest.param(lambda t: t.transpose(0, 2), id="transpose"),
    pytest.param(lambda t: F.softmax(t, dim=2), id="softmax"),
    pytest.param(lambda t: F.log_softmax(t, dim=-3), id="log_softmax"),
    pytest.param(lambda t: zgrad.stack([t, t], dim=3), id="stack"),
    pytest.param(lambda t: zgrad.cat([t, t], dim=-3), id="cat"),
])
def test_dimension_out_of_range(call):
    with raises(IndexError, "Dimension out of range (expected to be in range of ["):
        call(zgrad.ones(2, 3))


def test_bad_permute():
    with raises(ShapeError, "permute(): duplicate dims are not allowed."):
        zgrad.ones(2, 3).permute(0, 0)


def test_stack_and_cat_size_mismatch():
    with raises(ValueError, "stack expects each tensor to be equal size", "[2, 3] at entry 0", "[3, 2] at entry 1"):
        zgrad.stack([zgrad.ones(2, 3), zgrad.ones(3, 2)])
    with raises(ValueError, "Sizes of tensors must match except in dimension 0", "[2, 2] at entry 1"):
        zgrad.cat([zgrad.ones(2, 3), zgrad.ones(2, 2)])
    with raises(ShapeError, "stack expects a non-empty TensorList"):
        zgrad.stack([])
    with raises(ShapeError, "zero-dimensional tensor (at position 0) cannot be concatenated"):
        zgrad.cat([zgrad.tensor(1.0), zgrad.tensor(2.0)])


# --- layers and losses --------------------------------------------------------------------------

def test_cross_entropy_target_errors():
    logits = zgrad.ones(3, 4, requires_grad=True)
    with raises(IndexError, "Target 4 is out of bounds", "[0, 3]"):
        F.cross_entropy(logits, zgrad.tensor([0, 4, 1]))
    with raises(IndexError, "Target -1 is out of bounds"):
        F.cross_entropy(logits, [0, -1, 1])
    with raises(RuntimeError, "Expected target of the input's shape [3, 4] for class probabilities, got [3]"):
        F.cross_entropy(logits, zgrad.tensor([0.0, 1.0, 2.0]))
    with raises(ValueError, "Expected input batch_size (3) to match target batch_size (2)."):
        F.cross_entropy(logits, [0, 1])
    with raises(RuntimeError, "Expected target size [], got [1]"):
        F.cross_entropy(zgrad.ones(4), [0])


def test_linear_feature_mismatch():
    with raises(ValueError, "linear: input has 4 features", "weight [2, 3] expects 3"):
        F.linear(zgrad.ones(5, 4), zgrad.ones(2, 3))
    with raises(RuntimeError, "Trying to create tensor with negative dimension -1: [2, -1]"):
        nn.Linear(-1, 2)
    assert nn.Linear(0, 2)(zgrad.ones(3, 0)).shape == (3, 2)  # zero features: the bias alone, as PyTorch's


def test_mse_loss_shape_mismatch():
    with raises(RuntimeError, "The size of tensor a (3) must match the size of tensor b (4) at non-singleton dimension 1"):
        F.mse_loss(zgrad.ones(2, 3), zgrad.ones(4))


def test_loading_a_file_that_is_not_a_checkpoint(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("plain text, not tensors\n")
    with raises(CheckpointError, "notes.txt", "is not a safetensors checkpoint", "header"):
        zgrad.load(path)


def test_load_state_dict_errors():
    model = nn.Sequential(nn.Linear(2, 3))
    with raises(RuntimeError, "Error(s) in loading state_dict for Sequential", 'Missing key(s) in state_dict: "0.bias"',
                'Unexpected key(s) in state_dict: "extra"'):
        model.load_state_dict({"0.weight": zgrad.zeros(3, 2), "extra": zgrad.zeros(1)})
    with raises(ValueError, "size mismatch for 0.weight", "shape zgrad.Size([2, 3]) from checkpoint",
                "current model is zgrad.Size([3, 2])"):
        model.load_state_dict({"0.weight": zgrad.zeros(2, 3), "0.bias": zgrad.zeros(3)})


def test_module_misuse():
    class Early(nn.Module):
        def __init__(self):
            self.w = nn.Parameter(zgrad.ones(1))

    with raises(AttributeError, "cannot assign 'w' before Module.__init__() is called"):
        Early()
    with raises(AttributeError, "'Linear' object has no attribute 'wieght'"):
        nn.Linear(2, 2).wieght
    with raises(NotImplementedError, "Module must implement forward()"):
        nn.Module()(zgrad.ones(1))


# --- configuration ------------------------------------------------------------------------------

def test_config_unknown_key_suggests_the_close_one():
    with raises(ConfigError, "unknown config key 'transport.hearbeat_timeout_s'",
                "Did you mean 'heartbeat_timeout_s'"):
        load_config({"transport": {"hearbeat_timeout_s": 1}})
    with raises(ConfigError, "unknown config section 'engien'", "Did you mean 'engine'"):
        load_config({"engien": {"mode": "fast"}})


def test_config_wrong_type():
    with raises(ConfigError, "config key 'transport.heartbeat_timeout_s' got 'soon' (str); expected a number"):
        load_config({"transport": {"heartbeat_timeout_s": "soon"}})
    with raises(ConfigError, "config key 'rpc.num_worker_threads' got 2.5 (float); expected an integer"):
        load_config({"rpc": {"num_worker_threads": 2.5}})
    with raises(ConfigError, "config key 'security.curve' got 1 (int); expected true or false"):
        load_config({"security": {"curve": 1}})


def test_config_bad_literal_value():
    with raises(ConfigError, "config key 'engine.mode' got 'fsat'", "allowed values: 'fast', 'smart'",
                "Did you mean 'fast'"):
        load_config({"engine": {"mode": "fsat"}})


def test_error_hierarchy():
    assert issubclass(AutogradError, ZgradError) and issubclass(ZgradError, RuntimeError)
    assert issubclass(ConfigError, ValueError) and issubclass(ConfigError, ZgradError)


# --- the tensor errors PyTorch raises as RuntimeError ---------------------------------------------

def test_tensor_errors_are_runtime_errors_in_torchs_words():
    from zgrad.errors import DTypeError, IndexRangeError, LinAlgError

    with raises(DTypeError, "\"softmax\" not implemented for 'Long'"):
        zgrad.softmax(zgrad.tensor([1, 2]), 0)
    with raises(DTypeError, "result type Float can't be cast to the desired output type Long"):
        zgrad.tensor([1, 2]).add_(0.5)
    with raises(IndexRangeError, "index 5 is out of bounds"):
        zgrad.gather(zgrad.ones(2, 3), 1, zgrad.tensor([[5]]))
    with raises(LinAlgError, "singular"):
        zgrad.linalg.inv(zgrad.zeros(2, 2, dtype=zgrad.float64))
    for error in (DTypeError, IndexRangeError, LinAlgError, ShapeError):
        assert issubclass(error, RuntimeError) and issubclass(error, ZgradError)
