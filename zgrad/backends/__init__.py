"""``zgrad.backends``: the switches PyTorch programs set on its backend libraries (``cuda``, ``cudnn``)."""

from zgrad.backends import cuda, cudnn

__all__ = ["cuda", "cudnn"]
