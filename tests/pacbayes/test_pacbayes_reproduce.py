"""The MNIST 7-vs-9 DP PAC-Bayes experiment at toy sizes (a smoke test of the pipeline)."""

import dataclasses
import math

import numpy as np
import pytest

from dpposterior.reproduce.pacbayes import QUICK, format_table, public_pca_features, run_pacbayes


def test_public_pca_is_a_fixed_map_of_public_data():
    centre, proj = public_pca_features(5)
    assert centre.shape == (784,) and proj.shape == (784, 5)
    centre2, proj2 = public_pca_features(5)
    assert np.array_equal(proj, proj2)


@pytest.mark.slow  # long: JIT compilation of 4 chains and certificates
def test_quick_run_rows_are_consistent():
    tiny = dataclasses.replace(QUICK, m=400, outer_steps=10, n_samples=32, n_test_samples=4)
    rows = run_pacbayes(settings=tiny)
    assert [(r["labels"], r["prior"]) for r in rows] == [
        ("true", "data-independent"),
        ("true", "dp"),
        ("random", "data-independent"),
        ("random", "dp"),
    ]
    for r in rows:
        c = r["certificate"]
        assert 0 <= r["empirical_error"] <= c["empirical_error_upper"] <= r["bound"] <= 1
        assert c["m"] == 400 and c["n_samples"] == 32
        if r["prior"] == "dp":
            assert c["prior_privacy"]["delta"] == 0.0
            assert math.isclose(c["prior_privacy"]["epsilon"], r["epsilon"], rel_tol=1e-12)
            assert "EXACT sample" in c["caveat"]
            assert r["h_bound"] >= r["train_error"] and r["c_bound"] >= r["train_error"]
        else:
            assert c["prior_privacy"] is None and r["h_bound"] is None
    # random labels: no certificate may claim an error below 0.5 by more than its slack
    assert all(r["bound"] > 0.4 for r in rows if r["labels"] == "random")
    table = format_table(rows)
    assert table.count("\n") == 5 and "PAC-Bayes bound" in table


@pytest.mark.parametrize(
    "field, value, exc, word",
    [
        ("posterior_factors", (), ValueError, "posterior_factors must be a non-empty"),
        ("prior_stds", (), ValueError, "prior_stds must be a non-empty"),
        ("epsilons", (0.1, -1.0), ValueError, "epsilons must be a finite number > 0"),
        ("delta_mc", 0.96, ValueError, "delta \\+ delta_mc must be < 1"),
        ("n_samples", 0, ValueError, "n_samples must be an integer >= 1"),
        ("m", 0, ValueError, "PacBayesSettings.m"),
        ("m", 400.0, TypeError, "PacBayesSettings.m"),
        ("pca_dims", 785, ValueError, "pca_dims must be an integer in \\[1, 784\\]"),
        ("hidden", -1, ValueError, "hidden"),
        ("gamma", float("nan"), ValueError, "gamma must be a finite number > 0"),
        ("seed", -1, ValueError, "seed"),
    ],
)
def test_settings_are_checked_before_anything_runs(field, value, exc, word):
    # an empty grid ran Entropy-SGD for minutes, then failed with "cannot unpack non-iterable NoneType object";
    # delta + delta_mc >= 1 failed after the first chain; the others reached JAX or numpy errors
    with pytest.raises(exc, match=word):
        dataclasses.replace(QUICK, **{field: value})


def test_more_records_than_mnist_has_is_refused_up_front():
    # was numpy's "Cannot take a larger sample than population when 'replace=False'"
    with pytest.raises(ValueError, match="PacBayesSettings.m must be at most the 12,214 training records"):
        run_pacbayes(settings=dataclasses.replace(QUICK, m=20_000))
    with pytest.raises(TypeError, match="settings must be a PacBayesSettings"):
        run_pacbayes(settings={"m": 400})
