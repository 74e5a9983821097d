"""Stand-in for pytorch/examples ``super_resolution/data.py``: the same two functions, on
synthetic images instead of the BSDS300 photographs it downloads (and small: 24x24 crops instead of
256x256, 16 training and 4 test images).

As the example's datasets give, an item is (input, target): the target is a crop's luminance in
[0, 1] (1 x crop x crop, smooth: random values on a coarse grid, bilinearly upsampled); the input is
the target shrunk by the upscale factor, here by averaging each factor x factor block (the example
resizes with PIL).
"""

import zgrad
import zgrad.nn.functional as F
from zgrad.utils.data import TensorDataset

CROP_SIZE = 24


def calculate_valid_crop_size(crop_size, upscale_factor):
    return crop_size - (crop_size % upscale_factor)


def synthetic_set(count, crop_size, upscale_factor):
    coarse = zgrad.rand(count, 1, crop_size // 4, crop_size // 4)
    target = F.interpolate(coarse, size=crop_size, mode='bilinear', align_corners=False)
    return TensorDataset(F.avg_pool2d(target, upscale_factor), target)


def get_training_set(upscale_factor):
    crop_size = calculate_valid_crop_size(CROP_SIZE, upscale_factor)
    return synthetic_set(16, crop_size, upscale_factor)


def get_test_set(upscale_factor):
    crop_size = calculate_valid_crop_size(CROP_SIZE, upscale_factor)
    return synthetic_set(4, crop_size, upscale_factor)
