"""An optimizer's state in PyTorch's layout, converted at the boundary.

zgrad's optimizers keep each parameter's state as raw arrays (their fused kernels take arrays)
and an int ``step``, under PyTorch's names (``exp_avg``, ``momentum_buffer``, ...). The state dict
is PyTorch's::

    {"state": {0: {"step": tensor(3.), "exp_avg": tensor([...]), ...}, 1: {...}},
     "param_groups": [{"lr": 0.01, ..., "params": [0, 1]}, ...]}

parameters numbered in the order of the groups; an int ``step`` becomes a 0-d float32 tensor, as
does a float an optimizer names in ``_float32_scalar_state`` (NAdam's ``mu_product``), and
every array (also one in a list: LBFGS keeps its history in lists) a tensor sharing its memory (as
PyTorch's state dict holds the live state tensors). Loading converts back by the same rules,
whatever optimizer class: a ``step`` tensor or number becomes an int, a named scalar a float, a
tensor or numpy array (also in a list or tuple) a private copy in the parameter's dtype and on
its device (so the loaded optimizer shares nothing with the dict), anything else is kept. So a
state dict saved by ``torch.optim`` (converted to numpy or loaded from a safetensors checkpoint)
loads too.
"""

from __future__ import annotations

import copy
import itertools
from collections import defaultdict
from typing import Any

import numpy as np

from zgrad.kernels import dispatch
from zgrad.optim._state import as_tensors
from zgrad.tensor import Tensor

__all__ = ["pack", "unpack"]

STEP = "step"
# Options of torch.optim's groups that change the update itself. A loaded group that turns one on
# is refused by an optimizer that does not implement it (it would silently step the other way).
UPDATE_OPTIONS = {"maximize": False}


def pack(optimizer: Any) -> dict[str, Any]:
    """``optimizer``'s state dict in PyTorch's layout (state tensors shared, not copied)."""
    index: dict[int, int] = {}
    groups = []
    for group in optimizer.param_groups:
        packed = {key: value for key, value in group.items() if key != "params"}
        for p in group["params"]:
            index.setdefault(id(p), len(index))
        packed["params"] = [index[id(p)] for p in group["params"]]
        groups.append(packed)
    scalars = optimizer._float32_scalar_state
    state = {index[id(p)] if isinstance(p, Tensor) else p: {key: _packed(key, value, scalars)
                                                            for key, value in per.items()}
             for p, per in optimizer.state.items() if per}
    return {"state": state, "param_groups": groups}


def _packed(key: str, value: Any, scalars: frozenset[str]) -> Any:
    is_step = key == STEP and isinstance(value, int) and not isinstance(value, bool)
    if is_step or (key in scalars and isinstance(value, float)):
        return Tensor(dispatch.full((), value, np.float32, "cpu"))  # as PyTorch's: a float32 scalar tensor
    return as_tensors(value)


def unpack(optimizer: Any, state_dict: dict[str, Any]) -> tuple[defaultdict, list[dict]]:
    """The (state, param_groups) ``optimizer`` takes from ``state_dict``: the saved groups' options
    with the optimizer's own parameters, and the saved state of parameter i moved to the i-th (a
    ``defaultdict(dict)``, as PyTorch's).

    Raises:
        ValueError: PyTorch's errors for a different number of groups or of parameters in a
            group; a state array whose shape differs from the one the optimizer expects (its
            parameter's, Adafactor's row and column factors; LBFGS's flat vectors are not
            checked); a group option that changes the update and that ``optimizer`` does not
            implement (``maximize=True``).
    """
    groups = optimizer.param_groups
    saved_groups = copy.deepcopy(state_dict["param_groups"])
    if len(groups) != len(saved_groups):
        raise ValueError("loaded state dict has a different number of parameter groups")
    if any(len(g["params"]) != len(s["params"]) for g, s in zip(groups, saved_groups)):
        raise ValueError("loaded state dict contains a parameter group that doesn't match the size of optimizer's group")
    for i, saved in enumerate(saved_groups):
        for option, default in UPDATE_OPTIONS.items():
            if option not in optimizer.defaults and saved.get(option, default) != default:
                raise ValueError(f"loaded state dict's parameter group {i} sets {option}={saved[option]!r}, which "
                                 f"{type(optimizer).__name__} does not implement; load it into an optimizer that does")
    params = dict(zip(itertools.chain.from_iterable(s["params"] for s in saved_groups),
                      itertools.chain.from_iterable(g["params"] for g in groups)))
    scalars = optimizer._float32_scalar_state
    state: defaultdict[Any, dict[str, Any]] = defaultdict(dict)
    for key, per in state_dict["state"].items():
        param = params.get(key)
        if param is None:
            state[key] = per  # state of no parameter is kept as it is, as PyTorch keeps it
        else:
            state[param] = {name: _unpacked(param, key, name, value, optimizer._state_shape(param, name),
                                            name in scalars)
                            for name, value in per.items()}
    for group, saved in zip(groups, saved_groups):
        saved["params"] = group["params"]
        if "param_names" in group and "param_names" not in saved:
            saved["param_names"] = group["param_names"]
    return state, saved_groups


def _unpacked(param: Tensor, index: Any, name: str, value: Any, shape: tuple[int, ...] | None, scalar: bool) -> Any:
    """``value`` of state entry ``name`` as the optimizer keeps it: ``shape`` the one its arrays
    must have (None: unchecked), ``scalar`` whether it is a float kept as a number."""
    numeric = isinstance(value, (Tensor, np.ndarray, int, float)) and not isinstance(value, bool)
    if (name == STEP or scalar) and numeric:
        number = value.item() if isinstance(value, (Tensor, np.ndarray)) else value
        return float(number) if scalar else int(number)
    if isinstance(value, (list, tuple)):
        return type(value)(_unpacked(param, index, name, item, shape, scalar) for item in value)
    if not isinstance(value, (Tensor, np.ndarray)):
        return value
    array = value._data if isinstance(value, Tensor) else value
    if shape is not None and array.shape != shape:
        expected = f" (expected {list(shape)})" if shape != param.shape else ""
        raise ValueError(f"loaded state dict holds {name!r} of shape {list(array.shape)} for parameter {index}, "
                         f"whose shape is {list(param.shape)}{expected}; was it saved from another model?")
    moved = dispatch.to_device(array, dispatch.device_type_of(param._data))
    return dispatch.cast(moved, param.dtype if param.is_floating_point() else array.dtype)
