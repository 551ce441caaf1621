"""Access to the data files vendored inside the package (``datasets/data/``).

The files are read through :mod:`importlib.resources`, so they are found wherever the package is
installed (a source checkout, a wheel, a zip). Nothing is ever downloaded.
"""

from __future__ import annotations

import contextlib
import gzip
import importlib.resources
import io
from collections.abc import Iterator
from typing import Any

import numpy as np

_DATA_DIR = "data"

SPLITS: tuple[str, ...] = ("train", "test")


def check_split(split: Any) -> str:
    """Returns ``split`` if it names a split ("train" or "test"), else raises ValueError."""
    if not isinstance(split, str) or split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    return split


def data_file(name: str) -> importlib.resources.abc.Traversable:
    """The vendored file ``data/<name>`` as a traversable resource."""
    resource = importlib.resources.files(__package__).joinpath(_DATA_DIR, name)
    if not resource.is_file():
        raise FileNotFoundError(
            f"the vendored data file {name!r} is missing from the installed package "
            f"(expected at dpposterior/datasets/{_DATA_DIR}/{name}); reinstall dpposterior"
        )
    return resource


@contextlib.contextmanager
def open_gzip_text(name: str) -> Iterator[io.TextIOBase]:
    """Opens the vendored gzip file ``data/<name>`` as text (ASCII, universal newlines off)."""
    with data_file(name).open("rb") as raw, gzip.open(raw, "rt", encoding="ascii", newline="") as text:
        yield text


def load_npz(name: str) -> dict[str, np.ndarray]:
    """Reads every array of the vendored ``.npz`` archive ``data/<name>`` into memory."""
    with importlib.resources.as_file(data_file(name)) as path, np.load(path, allow_pickle=False) as archive:
        return {key: archive[key] for key in archive.files}
