"""docs/api.md and docs/gallery.md are what docs/build_api.py generates from the current code and results."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

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


#: the most names a public module's ``__all__`` may hold. A reader takes in about this many names at a
#: glance; the largest modules (``privacy``, ``mcmc``) reach it with their user-facing API alone (the
#: entry points, their result types and warnings, and the functions a user composes), and everything
#: beyond that is a building block that belongs in the module defining it. Raise it deliberately.
MAX_PUBLIC_NAMES = 25


def test_every_public_all_is_small_and_documented():
    """Each public module's ``__all__`` stays within :data:`MAX_PUBLIC_NAMES`, and docs/api.md documents
    every name in it (its own entry, a link to the entry of the same object, or a module's own section)."""
    import importlib
    import inspect

    builder = _builder()
    text = (ROOT / "docs" / "api.md").read_text()
    for mod_name in builder.MODULES:
        mod = importlib.import_module(mod_name)
        names = list(mod.__all__)
        assert len(names) <= MAX_PUBLIC_NAMES, f"{mod_name}.__all__ has {len(names)} names"
        assert len(set(names)) == len(names), f"{mod_name}.__all__ repeats a name"
        for name in names:
            obj = getattr(mod, name)
            if inspect.ismodule(obj):
                assert obj.__name__ in builder.MODULES, f"{mod_name}.{name}: a public module without its section"
                assert f"\n## {obj.__name__}\n" in text
            else:
                entries = (f"\n### {mod_name}.{name}\n", f"\n### `{mod_name}.{name}`\n", f"\n- `{mod_name}.{name}`: ")
                assert any(e in text for e in entries), f"{mod_name}.{name} is not in docs/api.md"


#: names that left the package namespaces (issue 36): building blocks, imported from their modules
MOVED = {
    "dpposterior.noise_aware": ("grid.grid_h_moments", "model.log_joint", "simulate.simulate_trace_arrays"),
    "dpposterior.mcmc": ("accounting.barker_rdp", "accounting.optimal_composition_delta", "kernels.MHInfo"),
    "dpposterior.privacy": ("audit.clopper_pearson_lower", "randomness.resolve_key", "secure.secure_normal"),
    "dpposterior.pacbayes": (
        "bounds.dp_prior_kl_rhs",
        "certificate.sample_gaussian_errors",
        "entropy_sgld.check_labels",
    ),
    "dpposterior.experiments": ("runner.compute_group", "replicates.dpvi_setup", "store.ResultStore"),
}


@pytest.mark.parametrize("package", sorted(MOVED))
def test_building_blocks_live_in_their_modules(package):
    import importlib

    pkg = importlib.import_module(package)
    for path in MOVED[package]:
        module, name = path.rsplit(".", 1)
        assert getattr(importlib.import_module(f"{package}.{module}"), name) is not None
        assert not hasattr(pkg, name) and name not in pkg.__all__, f"{package}.{name} is public again"
