"""MNIST 7-vs-9 and the public other-digit images."""

import numpy as np
import pytest

from dpposterior.datasets import load_mnist79
from dpposterior.datasets import load_mnist_public_digits
from dpposterior.datasets._files import load_npz


@pytest.fixture(scope="module")
def train():
    return load_mnist79("train")


@pytest.fixture(scope="module")
def mnist_test():
    return load_mnist79("test")


@pytest.mark.parametrize(
    ("split", "n", "nines"),
    # Standard MNIST: training set 6,265 sevens and 5,949 nines; test set 1,028 and 1,009.
    [("train", 12_214, 5_949), ("test", 2_037, 1_009)],
)
def test_shapes_dtypes_and_label_coding(split, n, nines):
    images, labels = load_mnist79(split)
    assert images.shape == (n, 784) and images.dtype == np.float32
    assert labels.shape == (n,) and labels.dtype == np.int32
    assert set(np.unique(labels).tolist()) == {0, 1}
    assert int(labels.sum()) == nines  # 1 means the digit 9


def test_pixels_are_the_raw_intensities_over_255(train):
    images, labels = train
    raw = load_npz("mnist_7_vs_9.npz")
    assert images.min() == 0.0 and images.max() == 1.0
    np.testing.assert_array_equal(images, raw["train_images"].astype(np.float32) / np.float32(255))
    np.testing.assert_array_equal(labels, (raw["train_labels"] == 9).astype(np.int32))


def test_test_split_values_in_unit_interval(mnist_test):
    images, _ = mnist_test
    assert images.min() >= 0.0 and images.max() <= 1.0


def test_public_digits_shape_range_and_disjoint_from_the_task():
    images = load_mnist_public_digits()
    assert images.shape == (5_000, 784) and images.dtype == np.float32
    assert images.min() == 0.0 and images.max() == 1.0
    digits = load_npz("mnist_other_digits_5k.npz")["labels"]
    assert not np.isin(digits, (7, 9)).any()


@pytest.mark.parametrize("split", ["validation", "Train", "", None, 0])
def test_invalid_split_is_refused(split):
    with pytest.raises(ValueError, match="split must be one of"):
        load_mnist79(split)
