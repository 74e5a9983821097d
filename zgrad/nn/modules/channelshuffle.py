"""``zgrad.nn.modules.channelshuffle``: PyTorch's module path for this class of :mod:`zgrad.nn`
(re-exported: the same object)."""

from zgrad.nn.pixelshuffle import ChannelShuffle

__all__ = ["ChannelShuffle"]
