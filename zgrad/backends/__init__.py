"""``zgrad.backends``: the switches PyTorch programs set on its backend libraries (``cuda``,
``cudnn``), and the MPS queries device-choosing code asks (``mps``)."""

from zgrad.backends import cuda, cudnn, mps

__all__ = ["cuda", "cudnn", "mps"]
