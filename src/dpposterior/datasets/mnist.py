"""MNIST digits 7 and 9 (a binary task), and a public sample of the other digits, vendored.

Sources and licence in ``datasets/data/LICENSE.md``. Pixels are scaled from 0-255 to [0, 1] by the
fixed map ``x / 255`` (pixels in [0, 1], as in the DP MCMC papers); nothing is estimated from the data.
"""

from __future__ import annotations

import numpy as np

from ._files import check_split
from ._files import load_npz

MNIST79_FILE = "mnist_7_vs_9.npz"
PUBLIC_DIGITS_FILE = "mnist_other_digits_5k.npz"
NUM_PIXELS = 784
"""Each image is 28 x 28 pixels, flattened in row-major order."""


def load_mnist79(split: str = "train") -> tuple[np.ndarray, np.ndarray]:
    """MNIST restricted to the digits 7 and 9, as a binary classification task.

    Mechanism-side: this returns the sensitive records themselves. Only mechanism code may call it.

    Args:
      split: ``"train"`` (the 12,214 sevens and nines of the standard 60,000-image training set) or
        ``"test"`` (the 2,037 sevens and nines of the standard 10,000-image test set).

    Returns:
      ``(images, labels)``: images float32 of shape (N, 784) with values in [0, 1] (the 0-255 pixel
      intensities divided by 255, rows of the 28 x 28 image concatenated); labels int32 of shape
      (N,), **1 for the digit 9 and 0 for the digit 7**.

    Raises:
      ValueError: ``split`` is not ``"train"`` or ``"test"``, or the vendored file is malformed.
    """
    check_split(split)
    arrays = load_npz(MNIST79_FILE)
    images = _scale_images(arrays[f"{split}_images"], MNIST79_FILE)
    digits = arrays[f"{split}_labels"]
    if digits.shape != (images.shape[0],) or not np.all(np.isin(digits, (7, 9))):
        raise ValueError(f"malformed vendored file {MNIST79_FILE}: {split}_labels must be one 7 or 9 per image")
    return images, (digits == 9).astype(np.int32)


def load_mnist_public_digits() -> np.ndarray:
    """5,000 MNIST training images of digits other than 7 and 9, public for the 7-vs-9 task.

    These images are disjoint from the 7-vs-9 records (no 7 or 9 among them), so a method may
    treat them as public with respect to that task: fitting a projection such as PCA on them costs
    no privacy, unlike a projection fitted on the sensitive training images.

    Returns:
      images float32 of shape (5000, 784) with values in [0, 1] (pixel intensity / 255), drawn at
      random from the standard training set among the digits 0-6 and 8.

    Raises:
      ValueError: the vendored file is malformed.
    """
    arrays = load_npz(PUBLIC_DIGITS_FILE)
    return _scale_images(arrays["images"], PUBLIC_DIGITS_FILE)


def _scale_images(raw: np.ndarray, filename: str) -> np.ndarray:
    if raw.ndim != 2 or raw.shape[1] != NUM_PIXELS or raw.dtype != np.uint8:
        raise ValueError(
            f"malformed vendored file {filename}: expected uint8 images of shape (N, {NUM_PIXELS}), "
            f"got {raw.dtype} {raw.shape}"
        )
    return raw.astype(np.float32) / np.float32(255.0)
