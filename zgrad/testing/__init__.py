"""``zgrad.testing``: assertions for tests, as ``torch.testing``."""

from zgrad.testing.comparison import assert_close

__all__ = ["assert_close"]
