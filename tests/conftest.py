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
