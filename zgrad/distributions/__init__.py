"""``zgrad.distributions``: probability distributions with PyTorch's API (sampling from zgrad's
default generator, differentiable ``log_prob``)."""

from zgrad.distributions.categorical import Categorical
from zgrad.distributions.normal import Normal

__all__ = ["Categorical", "Normal"]
