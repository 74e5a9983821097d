"""A stand-in for the few parts of torchvision that the pytorch/examples ports use, written with
zgrad (zgrad has no torchvision): synthetic datasets in place of downloaded ones, ``ToTensor``, and
a ``save_image`` that saves the tensor. A port imports it under torchvision's name when this
directory is on its path (``example_ports`` puts it there, and undoes the ``zgrad`` rename in it
for the torch runs), so the example's own import lines stay as they are."""

from torchvision import datasets, transforms, utils

__all__ = ["datasets", "transforms", "utils"]
