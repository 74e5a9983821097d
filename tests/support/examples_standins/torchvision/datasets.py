"""torchvision's datasets that the ports load, as small synthetic ones: images are drawn once, with
zgrad's generator (so a seeded program gets the same ones), as the float tensors in [0, 1) that
``transforms.ToTensor`` makes of torchvision's images; labels are drawn uniformly."""

import zgrad
from zgrad.utils.data import Dataset

__all__ = ["FakeData", "MNIST"]


class _SyntheticImages(Dataset):
    def __init__(self, size, image_size, num_classes, transform, target_transform):
        self.images = zgrad.rand(size, *image_size)
        self.targets = zgrad.randint(0, num_classes, (size,))
        self.transform, self.target_transform = transform, target_transform

    def __len__(self):
        return len(self.images)

    def __getitem__(self, index):
        image, target = self.images[index], int(self.targets[index])
        if self.transform is not None:
            image = self.transform(image)
        if self.target_transform is not None:
            target = self.target_transform(target)
        return image, target


class FakeData(_SyntheticImages):
    """torchvision's ``FakeData``, with 12 images by default (torchvision's 1000 make long runs)."""

    def __init__(self, size=12, image_size=(3, 224, 224), num_classes=10, transform=None, target_transform=None,
                 random_offset=0):
        super().__init__(size, image_size, num_classes, transform, target_transform)


class MNIST(_SyntheticImages):
    """MNIST's shape (1 x 28 x 28, ten classes) with 64 training and 32 test images; nothing is
    downloaded or read from ``root``."""

    def __init__(self, root, train=True, transform=None, target_transform=None, download=False):
        super().__init__(64 if train else 32, (1, 28, 28), 10, transform, target_transform)
