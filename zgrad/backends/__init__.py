"""``zgrad.backends``: the switches PyTorch programs set on its backend libraries (``cudnn``)."""

from zgrad.backends import cudnn

__all__ = ["cudnn"]
