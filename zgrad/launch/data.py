"""Synthetic classification data for the demo jobs (generated, never downloaded)."""

from __future__ import annotations

import numpy as np

__all__ = ["spirals"]


def spirals(num_samples: int, num_classes: int = 3, noise: float = 0.15, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Interleaved 2-D spirals, one arm per class: not linearly separable, learnable by an MLP.

    Returns:
        (features float32 of shape (num_samples, 2), labels int64 of shape (num_samples,)),
        shuffled with ``seed``.
    """
    rng = np.random.default_rng(seed)
    labels = np.arange(num_samples) % num_classes
    radius = rng.uniform(0.05, 1.0, size=num_samples)
    angle = labels * (2 * np.pi / num_classes) + radius * 3.0 + rng.normal(0, noise, size=num_samples)
    features = np.stack([radius * np.sin(angle), radius * np.cos(angle)], axis=1)
    order = rng.permutation(num_samples)
    return features[order].astype(np.float32), labels[order].astype(np.int64)
