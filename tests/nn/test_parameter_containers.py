"""``nn.ParameterList`` and ``nn.ParameterDict`` against torch 2.13: registration (a tensor becomes
a Parameter, other objects stay), state-dict keys, list and dict methods, and reprs."""

from __future__ import annotations

import pytest

import zgrad
from helpers import require_torch


def describe(lib):
    """What a user sees of both containers, as text with the library's name neutral."""
    nn = lib.nn
    out = []
    values = nn.ParameterList([nn.Parameter(lib.ones(2, 3)), lib.zeros(4), "x"])
    out += [repr(values), [type(p).__name__ for p in values], list(dict(values.named_parameters())), len(values)]
    values.append(lib.ones(1)).extend([lib.ones(2)])
    values[0] = lib.full((2,), 3.0)
    out += [len(values), tuple(values[-1].shape), repr(values[1:3]), type(values[0]).__name__, float(values[0][0])]
    table = nn.ParameterDict({"a": nn.Parameter(lib.ones(2)), "b": lib.zeros(3, dtype=lib.float64)})
    out += [repr(table), list(table.keys()), type(table["b"]).__name__, "a" in table, table.get("zz", 5)]
    out += [tuple(table.pop("a").shape), [key for key, _ in table.items()]]
    table.update({"c": lib.ones(1)})
    out += [tuple(table.setdefault("d", lib.ones(2)).shape), list(table), table.popitem()[0], list(table)]
    out += [list((table | nn.ParameterDict({"e": lib.ones(1)})).keys()), repr(nn.ParameterList()),
            repr(nn.ParameterDict())]
    ordered = nn.ParameterDict({"b": lib.ones(1), "a": lib.ones(2)})  # a plain dict goes in sorted, as PyTorch
    ordered.update(nn.ParameterDict({"c": lib.ones(3)}))
    ordered |= {"w": lib.ones(1)}
    out += [list(ordered), list(({"q": lib.ones(1)} | ordered).keys())]
    for misuse in (lambda: ordered.__setitem__("a.b", lib.ones(1)), lambda: ordered["zz"]):
        try:
            misuse()
        except Exception as error:  # noqa: BLE001 - the kinds are compared
            out.append(type(error).__name__)
    holder = nn.Module()
    holder.weights = nn.ParameterList([nn.Parameter(lib.ones(1)), nn.Parameter(lib.ones(2))])
    holder.named = nn.ParameterDict({"w": nn.Parameter(lib.ones(3))})
    out += [repr(holder), list(holder.state_dict()), len(list(holder.parameters()))]
    return [str(item).replace(lib.__name__, "LIB") for item in out]


@pytest.mark.torch
def test_parameter_containers_behave_and_print_as_torchs():
    torch = require_torch()
    assert describe(zgrad) == describe(torch)


def test_parameters_in_containers_train_and_load():
    holder = zgrad.nn.Module()
    holder.weights = zgrad.nn.ParameterList([zgrad.ones(2)])
    holder.named = zgrad.nn.ParameterDict({"w": zgrad.ones(2)})
    loss = (holder.weights[0] * holder.named["w"]).sum()
    loss.backward()
    zgrad.optim.SGD(holder.parameters(), lr=0.5).step()
    assert holder.weights[0].tolist() == [0.5, 0.5] and holder.named["w"].tolist() == [0.5, 0.5]
    other = zgrad.nn.Module()
    other.weights = zgrad.nn.ParameterList([zgrad.zeros(2)])
    other.named = zgrad.nn.ParameterDict({"w": zgrad.zeros(2)})
    other.load_state_dict(holder.state_dict())
    assert other.weights[0].tolist() == [0.5, 0.5]


def test_misuse_is_refused():
    values = zgrad.nn.ParameterList([zgrad.ones(1)])
    with pytest.raises(IndexError, match="index 3 is out of range"):
        values[3]
    with pytest.raises(TypeError, match="ParameterList.extend should be called with an iterable"):
        values.extend(zgrad.ones(2))
    with pytest.raises(RuntimeError, match="ParameterList should not be called"):
        values(1)
    with pytest.raises(AttributeError):
        zgrad.nn.ParameterDict()["missing"]
    with pytest.raises(TypeError, match="should be a \\(name, value\\) pair"):
        zgrad.nn.ParameterDict([1])
