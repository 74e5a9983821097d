"""``zgrad.optim.lr_scheduler`` against ``torch.optim.lr_scheduler``: every scheduler's learning
rates (and cycled momentum) equal PyTorch's at every one of 200 steps, with two parameter groups;
state dicts carry the same keys and resume a schedule through a checkpoint; PyTorch's warnings
and errors."""

from __future__ import annotations

import io
import math
import warnings

import numpy as np
import pytest

import zgrad
from helpers import require_torch, torch

STEPS = 200


def metric(step: int) -> float:
    """A validation loss that falls, stalls, wobbles and falls again (for ReduceLROnPlateau)."""
    return 1.0 / (1 + step // 25) + 0.002 * math.sin(step * 1.7) + (0.05 if step % 37 == 0 else 0.0)


def lam(epoch):
    return 0.97 ** epoch


def lam_half(epoch):
    return 1.0 / (1 + epoch)


def mult(epoch):
    return 0.99 if epoch % 3 else 0.95


def scale(x):
    return 1 / (1.0 + 0.01 * x)


def sched(lib, name):
    return getattr(lib.optim.lr_scheduler, name)


# Each case: (optimizer name, its options, a function building the scheduler from (lib, optimizer)).
SCHEDULERS = {
    "lambda": ("SGD", {}, lambda lib, opt: sched(lib, "LambdaLR")(opt, lr_lambda=lam)),
    "lambda_per_group": ("SGD", {}, lambda lib, opt: sched(lib, "LambdaLR")(opt, lr_lambda=[lam, lam_half])),
    "multiplicative": ("SGD", {}, lambda lib, opt: sched(lib, "MultiplicativeLR")(opt, lr_lambda=mult)),
    "step": ("SGD", {}, lambda lib, opt: sched(lib, "StepLR")(opt, step_size=30, gamma=0.5)),
    "multistep": ("SGD", {}, lambda lib, opt: sched(lib, "MultiStepLR")(opt, milestones=[30, 80, 80, 150], gamma=0.3)),
    "constant": ("SGD", {}, lambda lib, opt: sched(lib, "ConstantLR")(opt, factor=0.5, total_iters=40)),
    "linear_warmup": ("SGD", {}, lambda lib, opt: sched(lib, "LinearLR")(opt, start_factor=0.1, total_iters=50)),
    "linear_decay": ("SGD", {}, lambda lib, opt: sched(lib, "LinearLR")(opt, start_factor=1.0, end_factor=0.05,
                                                                          total_iters=120)),
    "exponential": ("SGD", {}, lambda lib, opt: sched(lib, "ExponentialLR")(opt, gamma=0.98)),
    "polynomial": ("SGD", {}, lambda lib, opt: sched(lib, "PolynomialLR")(opt, total_iters=150, power=2.0)),
    "cosine": ("SGD", {}, lambda lib, opt: sched(lib, "CosineAnnealingLR")(opt, T_max=50, eta_min=0.001)),
    "warm_restarts": ("SGD", {}, lambda lib, opt: sched(lib, "CosineAnnealingWarmRestarts")(opt, T_0=10, T_mult=2,
                                                                                              eta_min=1e-4)),
    "warm_restarts_fixed": ("SGD", {}, lambda lib, opt: sched(lib, "CosineAnnealingWarmRestarts")(opt, T_0=15)),
    "cyclic_triangular": ("SGD", {"momentum": 0.9}, lambda lib, opt: sched(lib, "CyclicLR")(
        opt, base_lr=[0.01, 0.02], max_lr=0.1, step_size_up=13, step_size_down=7)),
    "cyclic_triangular2": ("SGD", {"momentum": 0.9}, lambda lib, opt: sched(lib, "CyclicLR")(
        opt, base_lr=0.001, max_lr=[0.1, 0.2], step_size_up=20, mode="triangular2", base_momentum=0.7)),
    "cyclic_exp_range_adam": ("Adam", {}, lambda lib, opt: sched(lib, "CyclicLR")(
        opt, base_lr=0.001, max_lr=0.01, step_size_up=15, mode="exp_range", gamma=0.99)),
    "cyclic_scale_fn": ("SGD", {}, lambda lib, opt: sched(lib, "CyclicLR")(
        opt, base_lr=0.01, max_lr=0.05, step_size_up=9, scale_fn=scale, scale_mode="iterations",
        cycle_momentum=False)),
    "one_cycle_cos_adam": ("Adam", {}, lambda lib, opt: sched(lib, "OneCycleLR")(
        opt, max_lr=[0.1, 0.05], total_steps=STEPS)),
    "one_cycle_linear": ("SGD", {"momentum": 0.9}, lambda lib, opt: sched(lib, "OneCycleLR")(
        opt, max_lr=0.1, epochs=10, steps_per_epoch=20, pct_start=0.25, anneal_strategy="linear")),
    "one_cycle_three_phase": ("SGD", {"momentum": 0.9}, lambda lib, opt: sched(lib, "OneCycleLR")(
        opt, max_lr=0.2, total_steps=STEPS, three_phase=True, div_factor=10.0, final_div_factor=100.0)),
    "sequential_warmup_cosine": ("SGD", {}, lambda lib, opt: sched(lib, "SequentialLR")(
        opt, [sched(lib, "LinearLR")(opt, start_factor=0.01, total_iters=20),
              sched(lib, "CosineAnnealingLR")(opt, T_max=180)], milestones=[20])),
    "sequential_three": ("SGD", {}, lambda lib, opt: sched(lib, "SequentialLR")(
        opt, [sched(lib, "ConstantLR")(opt, factor=0.1, total_iters=10), sched(lib, "ExponentialLR")(opt, gamma=0.97),
              sched(lib, "StepLR")(opt, step_size=25, gamma=0.5)], milestones=[10, 60])),
    "chained": ("SGD", {}, lambda lib, opt: sched(lib, "ChainedScheduler")(
        [sched(lib, "ConstantLR")(opt, factor=0.1, total_iters=5), sched(lib, "ExponentialLR")(opt, gamma=0.99),
         sched(lib, "MultiStepLR")(opt, milestones=[50, 120], gamma=0.5)])),
    "plateau_min_rel": ("SGD", {}, lambda lib, opt: sched(lib, "ReduceLROnPlateau")(
        opt, patience=5, cooldown=3, factor=0.5, threshold=0.01, min_lr=[1e-4, 1e-3])),
    "plateau_min_abs": ("SGD", {}, lambda lib, opt: sched(lib, "ReduceLROnPlateau")(
        opt, patience=3, threshold=0.005, threshold_mode="abs", factor=0.7)),
    "plateau_max_rel": ("Adam", {}, lambda lib, opt: sched(lib, "ReduceLROnPlateau")(
        opt, mode="max", patience=4, cooldown=2, factor=0.3, min_lr=1e-5)),
    "plateau_max_abs": ("SGD", {}, lambda lib, opt: sched(lib, "ReduceLROnPlateau")(
        opt, mode="max", patience=2, threshold=0.01, threshold_mode="abs", eps=1e-3)),
}


def make(lib, case):
    """An optimizer over two parameter groups (lr 0.1 and 0.05) and the case's scheduler."""
    optimizer_name, options, build = SCHEDULERS[case]
    make_param = (lambda: torch.nn.Parameter(torch.ones(2, dtype=torch.float64))) if lib is torch else \
        (lambda: zgrad.nn.Parameter(zgrad.ones(2, dtype=zgrad.float64)))
    groups = [{"params": [make_param()]}, {"params": [make_param()], "lr": 0.05}]
    optimizer = getattr(lib.optim, optimizer_name)(groups, lr=0.1, **options)
    return optimizer, build(lib, optimizer)


def observe(optimizer, scheduler):
    """What a step leaves: each group's lr, momentum and betas, and get_last_lr()."""
    groups = [(g["lr"], g.get("momentum"), tuple(g["betas"]) if "betas" in g else None)
              for g in optimizer.param_groups]
    return groups, list(scheduler.get_last_lr())


def advance(optimizer, scheduler, step):
    optimizer.step()
    if type(scheduler).__name__ == "ReduceLROnPlateau":
        scheduler.step(metric(step))
    else:
        scheduler.step()


def run(lib, case, steps=STEPS, start=0, optimizer=None, scheduler=None):
    if optimizer is None:
        optimizer, scheduler = make(lib, case)
    history = [observe(optimizer, scheduler)] if start == 0 else []
    for step in range(start, steps):
        advance(optimizer, scheduler, step)
        history.append(observe(optimizer, scheduler))
    return history


@pytest.mark.torch
@pytest.mark.parametrize("case", SCHEDULERS)
def test_learning_rates_equal_torch_s_at_every_step(case):
    require_torch()
    want = run(torch, case)
    got = run(zgrad, case)
    for step, (g, w) in enumerate(zip(got, want)):
        assert g == w, f"step {step}: zgrad {g} != torch {w}"


@pytest.mark.torch
@pytest.mark.parametrize("case", SCHEDULERS)
def test_state_dict_has_torch_s_keys_and_values(case):
    require_torch()
    optimizer, scheduler = make(zgrad, case)
    torch_optimizer, torch_scheduler = make(torch, case)
    for step in range(7):
        advance(optimizer, scheduler, step)
        advance(torch_optimizer, torch_scheduler, step)
    ours, theirs = scheduler.state_dict(), torch_scheduler.state_dict()
    assert ours.keys() == theirs.keys()
    for key in ("last_epoch", "base_lrs", "_last_lr", "_step_count", "best", "num_bad_epochs"):
        if key in theirs:
            assert ours[key] == theirs[key], key


def through_a_checkpoint(obj):
    buffer = io.BytesIO()
    zgrad.save(obj, buffer)
    buffer.seek(0)
    return zgrad.load(buffer)


@pytest.mark.parametrize("case", SCHEDULERS)
def test_a_schedule_resumed_from_a_checkpoint_continues_exactly(case):
    uninterrupted = run(zgrad, case)
    optimizer, scheduler = make(zgrad, case)
    first = run(zgrad, case, steps=STEPS // 2, optimizer=optimizer, scheduler=scheduler)
    saved = through_a_checkpoint({"optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict()})
    optimizer, scheduler = make(zgrad, case)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a scheduler's own first-step warning does not matter here
        optimizer.load_state_dict(saved["optimizer"])
        scheduler.load_state_dict(saved["scheduler"])
    rest = run(zgrad, case, start=STEPS // 2, optimizer=optimizer, scheduler=scheduler)
    assert first + rest == uninterrupted


@pytest.mark.torch
def test_closed_forms_with_the_deprecated_epoch_argument_equal_torch_s():
    require_torch()
    for name, kwargs in [("StepLR", dict(step_size=3, gamma=0.5)), ("MultiStepLR", dict(milestones=[2, 5, 5])),
                         ("ConstantLR", dict(factor=0.25, total_iters=4)), ("LinearLR", dict(total_iters=6)),
                         ("ExponentialLR", dict(gamma=0.9)), ("PolynomialLR", dict(total_iters=8, power=0.5)),
                         ("CosineAnnealingLR", dict(T_max=7)), ("CosineAnnealingWarmRestarts", dict(T_0=3, T_mult=2)),
                         ("LambdaLR", dict(lr_lambda=lam))]:
        results = []
        for lib in (zgrad, torch):
            param = torch.nn.Parameter(torch.ones(1)) if lib is torch else zgrad.nn.Parameter(zgrad.ones(1))
            optimizer = lib.optim.SGD([param], lr=0.1)
            scheduler = getattr(lib.optim.lr_scheduler, name)(optimizer, **kwargs)
            lrs = []
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                for epoch in (4, 1, 9, 2.5 if name == "CosineAnnealingWarmRestarts" else 3, 12):
                    optimizer.step()
                    scheduler.step(epoch)
                    lrs.append(scheduler.get_last_lr())
            results.append(lrs)
        assert results[0] == results[1], name


def zgrad_sgd(lr=0.1, **options):
    return zgrad.optim.SGD([zgrad.nn.Parameter(zgrad.ones(1))], lr=lr, **options)


def test_the_warning_for_stepping_the_scheduler_before_the_optimizer():
    optimizer = zgrad_sgd()
    scheduler = zgrad.optim.lr_scheduler.StepLR(optimizer, step_size=1)
    with pytest.warns(UserWarning, match=r"Detected call of `lr_scheduler.step\(\)` before `optimizer.step\(\)`"):
        scheduler.step()
    optimizer = zgrad_sgd()
    scheduler = zgrad.optim.lr_scheduler.StepLR(optimizer, step_size=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        optimizer.step()
        scheduler.step()
    optimizer = zgrad_sgd()
    scheduler = zgrad.optim.lr_scheduler.ExponentialLR(optimizer, gamma=0.5)
    optimizer.step = lambda closure=None: None
    with pytest.warns(UserWarning, match=r"Seems like `optimizer.step\(\)` has been overridden"):
        scheduler.step()


def test_the_other_warnings():
    optimizer = zgrad_sgd()
    scheduler = zgrad.optim.lr_scheduler.StepLR(optimizer, step_size=2)
    optimizer.step()
    with pytest.warns(UserWarning, match="The epoch parameter in `scheduler.step\\(\\)` was not necessary"):
        scheduler.step(3)
    with pytest.warns(UserWarning, match=r"please use `get_last_lr\(\)`"):
        scheduler.get_lr()
    plateau = zgrad.optim.lr_scheduler.ReduceLROnPlateau(optimizer)
    with pytest.warns(UserWarning, match="The epoch parameter"):
        plateau.step(1.0, epoch=4)


def test_initial_lr_is_recorded_and_resuming_without_it_is_an_error():
    optimizer = zgrad_sgd(lr=0.3)
    zgrad.optim.lr_scheduler.ExponentialLR(optimizer, gamma=0.5)
    assert optimizer.param_groups[0]["initial_lr"] == 0.3
    with pytest.raises(KeyError, match=r"param 'initial_lr' is not specified in param_groups\[0\] when resuming"):
        zgrad.optim.lr_scheduler.StepLR(zgrad_sgd(), step_size=2, last_epoch=4)


@pytest.mark.parametrize("build, error, message", [
    (lambda opt: zgrad.optim.lr_scheduler.StepLR(object(), step_size=1), TypeError, "object is not an Optimizer"),
    (lambda opt: zgrad.optim.lr_scheduler.LambdaLR(opt, [lam, lam]), ValueError, "Expected 1 lr_lambdas, but got 2"),
    (lambda opt: zgrad.optim.lr_scheduler.MultiplicativeLR(opt, 0.5), TypeError,
     "lr_lambda should be a function, but got float"),
    (lambda opt: zgrad.optim.lr_scheduler.ConstantLR(opt, factor=2.0), ValueError,
     "Constant multiplicative factor expected to be between 0 and 1."),
    (lambda opt: zgrad.optim.lr_scheduler.LinearLR(opt, start_factor=0), ValueError,
     "Starting multiplicative factor expected to be greater than 0"),
    (lambda opt: zgrad.optim.lr_scheduler.LinearLR(opt, end_factor=1.5), ValueError,
     "Ending multiplicative factor expected to be between 0 and 1."),
    (lambda opt: zgrad.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=0), ValueError,
     "Expected positive integer T_0, but got 0"),
    (lambda opt: zgrad.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=2, T_mult=0), ValueError,
     "Expected integer T_mult >= 1, but got 0"),
    (lambda opt: zgrad.optim.lr_scheduler.CyclicLR(opt, 0.01, 0.1, mode="square"), ValueError,
     "mode is invalid and scale_fn is None"),
    (lambda opt: zgrad.optim.lr_scheduler.CyclicLR(opt, [0.01, 0.02], 0.1), ValueError,
     "base_lr must have the same length as optimizer.param_groups. base_lr has 2 values, param_groups has 1."),
    (lambda opt: zgrad.optim.lr_scheduler.OneCycleLR(opt, 0.1), ValueError,
     r"You must define either total_steps OR \(epochs AND steps_per_epoch\)"),
    (lambda opt: zgrad.optim.lr_scheduler.OneCycleLR(opt, 0.1, total_steps=10, pct_start=1), ValueError,
     "Expected float between 0 and 1 pct_start, but got 1"),
    (lambda opt: zgrad.optim.lr_scheduler.OneCycleLR(opt, 0.1, total_steps=10, anneal_strategy="exp"), ValueError,
     "anneal_strategy must be one of 'cos' or 'linear', instead got exp"),
    (lambda opt: zgrad.optim.lr_scheduler.SequentialLR(opt, [], milestones=[]), ValueError,
     "SequentialLR expects at least one scheduler, but got no scheduler."),
    (lambda opt: zgrad.optim.lr_scheduler.SequentialLR(
        opt, [zgrad.optim.lr_scheduler.ExponentialLR(opt, 0.9)], milestones=[3]), ValueError,
     "Sequential Schedulers expects number of schedulers provided to be one more than the number of milestone"),
    (lambda opt: zgrad.optim.lr_scheduler.ChainedScheduler([zgrad.optim.lr_scheduler.ReduceLROnPlateau(opt)]),
     ValueError, "ChainedScheduler does not support `ReduceLROnPlateau` scheduler"),
    (lambda opt: zgrad.optim.lr_scheduler.ChainedScheduler(
        [zgrad.optim.lr_scheduler.ExponentialLR(opt, 0.9), zgrad.optim.lr_scheduler.ExponentialLR(zgrad_sgd(), 0.9)]),
     ValueError, "ChainedScheduler expects all schedulers to belong to the same optimizer"),
    (lambda opt: zgrad.optim.lr_scheduler.ReduceLROnPlateau(opt, factor=1.0), ValueError, "Factor should be < 1.0."),
    (lambda opt: zgrad.optim.lr_scheduler.ReduceLROnPlateau(opt, mode="mean"), ValueError, "mode mean is unknown!"),
    (lambda opt: zgrad.optim.lr_scheduler.ReduceLROnPlateau(opt, threshold_mode="pct"), ValueError,
     "threshold mode pct is unknown!"),
    (lambda opt: zgrad.optim.lr_scheduler.ReduceLROnPlateau(opt, min_lr=[0.1, 0.2]), ValueError,
     "expected 1 min_lrs, got 2"),
])
def test_scheduler_errors(build, error, message):
    with pytest.raises(error, match=message):
        build(zgrad_sgd())


def test_cycling_momentum_needs_an_optimizer_with_momentum():
    class Plain(zgrad.optim.Optimizer):
        def __init__(self, params):
            super().__init__(params, dict(lr=0.1))

    with pytest.raises(ValueError, match="optimizer must support momentum or beta1 with `cycle_momentum` option enabled"):
        zgrad.optim.lr_scheduler.CyclicLR(Plain([zgrad.nn.Parameter(zgrad.ones(1))]), 0.01, 0.1)


def test_one_cycle_past_its_total_steps():
    optimizer = zgrad_sgd(momentum=0.9)
    scheduler = zgrad.optim.lr_scheduler.OneCycleLR(optimizer, 0.1, total_steps=3)
    optimizer.step()
    for _ in range(3):
        scheduler.step()
    with pytest.raises(ValueError, match="Tried to step 4 times. The specified number of total steps is 3"):
        scheduler.step()


def test_plateau_with_a_group_added_after_it_was_made():
    optimizer = zgrad_sgd()
    plateau = zgrad.optim.lr_scheduler.ReduceLROnPlateau(optimizer, patience=0, min_lr=[0.0])
    optimizer.add_param_group({"params": [zgrad.nn.Parameter(zgrad.ones(1))]})
    plateau.step(1.0)
    with pytest.raises(RuntimeError, match=r"The number of param groups in the `optimizer` \(2\) differs from when"):
        plateau.step(2.0)


def test_schedules_drive_a_training_loop():
    zgrad.manual_seed(0)
    model = zgrad.nn.Linear(3, 1)
    optimizer = zgrad.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    scheduler = zgrad.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=0.05, total_steps=20)
    x, y = zgrad.randn(16, 3), zgrad.randn(16, 1)
    losses = []
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(20):
            optimizer.zero_grad()
            loss = zgrad.nn.functional.mse_loss(model(x), y)
            loss.backward()
            optimizer.step()
            scheduler.step()
            losses.append(loss.item())
    assert losses[-1] < losses[0] and np.isfinite(losses).all()
