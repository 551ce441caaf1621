"""docs/api.md and docs/gallery.md are what docs/build_api.py generates from the current code and results."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _builder():
    spec = importlib.util.spec_from_file_location("build_api", ROOT / "docs" / "build_api.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_api_reference_is_up_to_date():
    built = _builder().build_api()
    assert (ROOT / "docs" / "api.md").read_text() == built, "docs/api.md is stale: run python docs/build_api.py"
    for name in ("dpposterior.Ledger", "dpposterior.noise_aware_posterior", "dpposterior.tabular.build_design"):
        assert f"### {name}\n" in built or f"`{name}`" in built
    assert " at 0x" not in built


def test_gallery_is_up_to_date_and_links_every_result():
    built = _builder().build_gallery()
    assert (ROOT / "docs" / "gallery.md").read_text() == built, "docs/gallery.md is stale: run python docs/build_api.py"
    links = set(re.findall(r"\]\((results/[^)]+)\)", built))
    for path in (ROOT / "docs" / "results").glob("*.md"):
        assert f"results/{path.name}" in links
    for link in links:
        assert (ROOT / "docs" / link).exists(), link


def test_the_fitters_of_vi_are_functions():
    """``dpposterior.vi.dpvi`` and ``dpposterior.vi.dpvim`` are both functions (DPVIm's module is internal)."""
    import inspect

    import dpposterior

    assert inspect.isfunction(dpposterior.vi.dpvi) and inspect.isfunction(dpposterior.vi.dpvim)
    assert "dpvim" in dpposterior.vi.__all__
