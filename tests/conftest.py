"""Fixtures shared by every test directory."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def load_benchmark(name: str) -> ModuleType:
    """Imports ``benchmarks/<name>.py`` (a script, not a package module) as a module."""
    path = BENCHMARKS / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"benchmark_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def benchmark_script():
    """The loader :func:`load_benchmark` (``benchmark_script("postprocess")``)."""
    return load_benchmark


#: the smallest valid input of ``dpposterior fit`` / ``compare``: a three-row table and its schema (a
#: numeric column with public bounds, a categorical feature, a categorical target)
TINY_SCHEMA = """\
[columns.age]
type = "numeric"
bounds = [18, 90]

[columns.region]
type = "categorical"
categories = ["north", "south"]

[columns.y]
type = "categorical"
categories = ["no", "yes"]
"""
TINY_CSV = "age,region,y\n30,north,no\n45,south,yes\n60,north,yes\n"


@pytest.fixture
def tiny_table(tmp_path):
    """``tmp_path`` holding ``d.csv`` (:data:`TINY_CSV`) and ``s.toml`` (:data:`TINY_SCHEMA`)."""
    (tmp_path / "d.csv").write_text(TINY_CSV)
    (tmp_path / "s.toml").write_text(TINY_SCHEMA)
    return tmp_path


#: test files that take minutes: collected first, so that with ``make test`` (pytest-xdist, one file per
#: worker at a time) they start at once instead of running alone at the end while the other worker idles
LONG_FILES_FIRST = (
    "reproduce/test_reproduce_na_dpvi.py",
    "experiments/test_ray_backend.py",
    "experiments/test_engine.py",
)


def pytest_collection_modifyitems(config, items):
    """Moves the :data:`LONG_FILES_FIRST` files to the front; the order within each file is kept."""
    def rank(item):
        path = Path(str(item.fspath)).as_posix()
        for i, name in enumerate(LONG_FILES_FIRST):
            if path.endswith("tests/" + name):
                return i
        return len(LONG_FILES_FIRST)

    items.sort(key=rank)  # stable: every other test keeps its collection order
