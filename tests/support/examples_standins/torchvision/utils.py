"""torchvision's ``save_image``, writing the image tensor itself (``zgrad.save``), not a PNG."""

import zgrad

__all__ = ["save_image"]


def save_image(tensor, fp, **kwargs):
    zgrad.save(tensor, fp)
