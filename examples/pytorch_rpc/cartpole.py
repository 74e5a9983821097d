"""A stand-in for the one ``gymnasium`` environment the RL examples use, ``CartPole-v1``, so that
they run without downloads: ``import cartpole as gym`` in place of ``import gymnasium as gym``.

The classic cart-pole balancing problem (Barto, Sutton and Anderson, 1983): push a cart left or
right to keep a pole upright. Reward 1 per step; an episode ends when the pole leans past 12
degrees or the cart leaves the track (terminated), or after 500 steps (truncated).
"""

import math
from types import SimpleNamespace

import numpy as np

GRAVITY, CART_MASS, POLE_MASS, POLE_HALF_LENGTH, FORCE, DT = 9.8, 1.0, 0.1, 0.5, 10.0, 0.02
ANGLE_LIMIT, POSITION_LIMIT, MAX_STEPS = 12 * 2 * math.pi / 360, 2.4, 500


class CartPole:
    """``reset(seed=None) -> (state, info)``; ``step(action) -> (state, reward, terminated, truncated, info)``."""

    spec = SimpleNamespace(id="CartPole-v1", reward_threshold=475.0, max_episode_steps=MAX_STEPS)

    def __init__(self):
        self._rng = np.random.default_rng()
        self._state = np.zeros(4)
        self._steps = 0

    def reset(self, seed=None):
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        self._state = self._rng.uniform(-0.05, 0.05, size=4)
        self._steps = 0
        return self._state.astype(np.float32), {}

    def step(self, action):
        if action not in (0, 1):
            raise ValueError(f"CartPole actions are 0 (push left) and 1 (push right), got {action!r}")
        x, x_dot, theta, theta_dot = self._state
        force = FORCE if action == 1 else -FORCE
        total_mass = CART_MASS + POLE_MASS
        cos, sin = math.cos(theta), math.sin(theta)
        lean = (force + POLE_MASS * POLE_HALF_LENGTH * theta_dot ** 2 * sin) / total_mass
        theta_acc = (GRAVITY * sin - cos * lean) / (
            POLE_HALF_LENGTH * (4.0 / 3.0 - POLE_MASS * cos ** 2 / total_mass))
        x_acc = lean - POLE_MASS * POLE_HALF_LENGTH * theta_acc * cos / total_mass
        self._state = np.array([x + DT * x_dot, x_dot + DT * x_acc, theta + DT * theta_dot, theta_dot + DT * theta_acc])
        self._steps += 1
        terminated = abs(self._state[0]) > POSITION_LIMIT or abs(self._state[2]) > ANGLE_LIMIT
        truncated = self._steps >= MAX_STEPS
        return self._state.astype(np.float32), 1.0, bool(terminated), bool(truncated), {}


def make(name):
    if name != "CartPole-v1":
        raise ValueError(f"only 'CartPole-v1' is available in this stand-in, not {name!r}")
    return CartPole()
