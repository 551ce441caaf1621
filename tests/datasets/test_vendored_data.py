"""The vendored data files: present, small, licensed, unaltered, and shipped by the package data."""

import gzip
import hashlib
import importlib.resources
import pathlib
import tomllib
from fnmatch import fnmatch

DATA = importlib.resources.files("dpposterior.datasets").joinpath("data")
VENDORED = (
    "adult.data.gz",
    "adult.test.gz",
    "adult.names",
    "mnist_7_vs_9.npz",
    "mnist_other_digits_5k.npz",
    "LICENSE.md",
)


def test_adult_data_is_the_original_uci_file():
    with DATA.joinpath("adult.data.gz").open("rb") as raw, gzip.open(raw) as f:
        assert hashlib.md5(f.read()).hexdigest() == "5d7c39d7b8804f071cdd1f2a7c460872"


def test_adult_test_matches_the_checksum_in_the_licence_file():
    with DATA.joinpath("adult.test.gz").open("rb") as raw, gzip.open(raw) as f:
        digest = hashlib.md5(f.read()).hexdigest()
    assert digest in DATA.joinpath("LICENSE.md").read_text(encoding="utf-8")


def test_adult_names_matches_the_checksum_in_the_licence_file():
    digest = hashlib.md5(DATA.joinpath("adult.names").read_bytes()).hexdigest()
    assert digest in DATA.joinpath("LICENSE.md").read_text(encoding="utf-8")


def test_vendored_files_are_present_and_small():
    names = {entry.name for entry in DATA.iterdir() if entry.is_file()}
    assert set(VENDORED) <= names
    total = sum(len(DATA.joinpath(name).read_bytes()) for name in VENDORED)
    assert total < 5 * 1024**2


def test_licence_file_names_each_source_and_licence():
    text = DATA.joinpath("LICENSE.md").read_text(encoding="utf-8")
    for needle in (
        "CC BY 4.0",
        "CC BY-SA 3.0",
        "Becker",
        "Kohavi",
        "LeCun",
        "Cortes",
        "Burges",
        "UCI Machine Learning Repository",
        "5d7c39d7b8804f071cdd1f2a7c460872",
    ):
        assert needle in text


def test_package_data_patterns_ship_every_vendored_file():
    pyproject = pathlib.Path(__file__).resolve().parents[2] / "pyproject.toml"
    patterns = tomllib.loads(pyproject.read_text())["tool"]["setuptools"]["package-data"]["dpposterior"]
    for name in VENDORED:
        assert any(fnmatch(f"datasets/data/{name}", pattern) for pattern in patterns), name
