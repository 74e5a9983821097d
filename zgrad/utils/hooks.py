"""``zgrad.utils.hooks``, as ``torch.utils.hooks``: :class:`RemovableHandle`, what registering a
module or node hook returns (defined with the autograd engine, which runs the hooks)."""

from zgrad.engine.hooks import RemovableHandle

__all__ = ["RemovableHandle"]
