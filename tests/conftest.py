"""Fixtures shared by every test directory."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "benchmarks"

#: JAX's persistent compilation cache for the test run. Most of the suite's time is XLA compilation of
#: tiny programs, and many are compiled again and again: the same cell program by the two xdist workers,
#: NumPyro's NUTS on every call, the CLI tests' subprocesses. The cache is keyed by the program, the JAX
#: version and the XLA flags, so a hit is the same executable; ``make clean`` removes it. The size cap
#: turns on JAX's file lock, so the workers never read an entry another is still writing. Set before JAX
#: is imported (and in the environment, for subprocesses); a caller's own settings win.
JAX_CACHE_SETTINGS = {
    "JAX_COMPILATION_CACHE_DIR": str(ROOT / ".pytest_cache" / "jax-compilation-cache"),
    "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0.2",
    "JAX_COMPILATION_CACHE_MAX_SIZE": str(2 * 2**30),
}
#: XLA's backend (LLVM) optimisation level for the test run: the suite's programs are tiny and mostly
#: compiled once, so compilation dominates; level 0 compiles them several times faster and runs them
#: slower, a net saving over the whole test run. Results differ from the default level in the last bits
#: only (same arithmetic, other code), and every comparison in the tests is between programs compiled
#: alike. In the environment, so subprocesses and Ray workers get it too; a
#: caller's own level in XLA_FLAGS wins; DPPOSTERIOR_TEST_XLA_DEFAULT=1 keeps XLA's default.
TEST_XLA_FLAG = "--xla_backend_optimization_level=0"
if not os.environ.get("DPPOSTERIOR_TEST_XLA_DEFAULT") and "xla_backend_optimization_level" not in os.environ.get(
    "XLA_FLAGS", ""
):  # read when JAX creates its backend, so in time for every test
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " " + TEST_XLA_FLAG).strip()
if importlib.util.find_spec("filelock") is None:  # JAX's lock needs it (a dev dependency): no cache without it
    JAX_CACHE_SETTINGS["JAX_COMPILATION_CACHE_DIR"] = ""
for _name, _value in JAX_CACHE_SETTINGS.items():
    os.environ.setdefault(_name, _value)
if "jax" in sys.modules and os.environ["JAX_COMPILATION_CACHE_DIR"]:  # JAX imported first: flags already read
    import jax

    jax.config.update("jax_compilation_cache_dir", os.environ["JAX_COMPILATION_CACHE_DIR"])
    jax.config.update(
        "jax_persistent_cache_min_compile_time_secs", float(os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"])
    )
    jax.config.update("jax_compilation_cache_max_size", int(os.environ["JAX_COMPILATION_CACHE_MAX_SIZE"]))


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
#: worker at a time) they start at once instead of running alone at the end while the other worker idles.
#: xdist hands the first two files to the two workers and the third to the first worker next: the engine
#: tests compile the tiny cell programs (and the Ray test compiles them again, from the cache) before the
#: quick reproduction, which reuses them from JAX's compilation cache (above) instead of compiling them
#: side by side with the engine tests
LONG_FILES_FIRST = (
    "experiments/test_engine.py",
    "experiments/test_ray_backend.py",
    "reproduce/test_reproduce_na_dpvi.py",
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
