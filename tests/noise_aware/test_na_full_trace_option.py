"""noise_aware_posterior(method="nuts", full_trace=True): the reference implementation's O(T d)
likelihood, kept for the pipeline benchmark, samples the same posterior as the statistics."""

from __future__ import annotations

import numpy as np
import pytest

import dpposterior.noise_aware as na


@pytest.mark.slow  # ~3 minutes: NUTS on the O(T d) likelihood
def test_full_trace_nuts_agrees_with_stats_nuts(small_trace):
    opts = dict(num_warmup=200, num_samples=400)
    stats = na.noise_aware_posterior(small_trace, method="nuts", rng_key=1, **opts)
    full = na.noise_aware_posterior(small_trace, method="nuts", rng_key=1, full_trace=True, **opts)
    sd = stats.diagnostics["phi_star_sd"]
    # two NUTS runs of 400 draws on the same density: means agree within Monte Carlo error
    ess = np.minimum(stats.diagnostics["ess_phi_star"], full.diagnostics["ess_phi_star"])
    assert np.all(
        np.abs(full.diagnostics["phi_star_mean"] - stats.diagnostics["phi_star_mean"]) <= 5 * sd * np.sqrt(2.0 / ess)
    )


def test_full_trace_option_is_checked(small_trace):
    with pytest.raises(TypeError, match="full_trace must be True or False"):
        na.noise_aware_posterior(small_trace, method="nuts", full_trace="yes")
    with pytest.raises(TypeError, match="unknown solver options"):
        na.noise_aware_posterior(small_trace, method="grid", full_trace=True)


@pytest.mark.parametrize("option", ["dense_mass", "progress_bar", "marginalize_phi_star"])
def test_nuts_flags_and_subsampling_noise_must_be_bools(small_trace, option):
    # "no" was read as True (subsampling_noise, marginalize_phi_star) and dense_mass="yes" was a bare
    # AssertionError from inside NumPyro
    with pytest.raises(TypeError, match=f"nuts option {option} must be True or False, got 'no'"):
        na.noise_aware_posterior(small_trace, method="nuts", **{option: "no"})
    with pytest.raises(TypeError, match="subsampling_noise must be True or False, got 'no'"):
        na.noise_aware_posterior(small_trace, subsampling_noise="no")
    with pytest.raises(ValueError, match=r"chain_method must be one of \('sequential', 'parallel', 'vectorized'\)"):
        na.noise_aware_posterior(small_trace, method="nuts", chain_method="threads")
