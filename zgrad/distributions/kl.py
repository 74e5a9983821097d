"""``zgrad.distributions.kl``: ``kl_divergence(p, q)`` and ``register_kl``, with the closed forms
torch.distributions.kl has for the pairs of zgrad's distributions (importing this module
registers them)."""

from zgrad.distributions import _kl_cross_family, _kl_same_family  # noqa: F401 - they register their pairs
from zgrad.distributions._kl_registry import kl_divergence, register_kl

__all__ = ["kl_divergence", "register_kl"]
