"""A stand-in for the few parts of matplotlib that the pytorch/examples ports use (matplotlib is
not installed here): ``use`` chooses nothing, and ``pyplot`` keeps each figure's lines and writes
them, not a picture, where ``savefig`` is asked to. A port imports it under matplotlib's name when
this directory is on its path (``example_ports`` puts it there), so the example's own import lines
stay as they are."""

__all__ = ["use"]


def use(backend, force=True):
    """matplotlib's ``use``: nothing to choose, figures are never drawn."""
