"""What the CPU and CUDA backends' optimizer steps share on the host: the argument checks and the
step-dependent scalars.

PyTorch computes those scalars on the host in float64 (Python floats) from the incremented step
count, before any tensor op; both backends take them from here and round them to the parameter's
dtype. The size checks run here rather than in the kernels: in a CPU element loop, a size test of
a state array that only some options use kept LLVM from vectorising the loop.
"""

from __future__ import annotations

from typing import Any

__all__ = ["adam_bias_corrections", "adagrad_learning_rate", "check_sizes"]


def check_sizes(kernel_name: str, param: Any, **arrays: Any) -> None:
    """Raise ValueError naming the first of ``arrays`` (those the step uses) whose size is not
    ``param``'s."""
    for name, array in arrays.items():
        if array.size != param.size:
            raise ValueError(f"{kernel_name}: {name} has {array.size} elements; expected as many as param "
                             f"({param.size})")


def _checked_step(kernel_name: str, step: int) -> int:
    step = int(step)
    if step < 1:
        raise ValueError(f"{kernel_name}: step must be the incremented step count (>= 1), got {step}")
    return step


def adam_bias_corrections(step: int, lr: float, beta1: float, beta2: float) -> tuple[float, float]:
    """(step_size, bias_correction2_sqrt) of Adam's step ``step``: lr / (1 - beta1**step) and
    sqrt(1 - beta2**step).

    Raises:
        ValueError: ``step`` < 1 (the state's count is incremented before the update).
    """
    step = _checked_step("adam_step", step)
    return lr / (1 - beta1**step), (1 - beta2**step) ** 0.5


def adagrad_learning_rate(step: int, lr: float, lr_decay: float) -> float:
    """Adagrad's decayed learning rate at step ``step``: lr / (1 + (step - 1) * lr_decay).

    Raises:
        ValueError: ``step`` < 1 (the state's count is incremented before the update).
    """
    step = _checked_step("adagrad_step", step)
    return lr / (1 + (step - 1) * lr_decay)
