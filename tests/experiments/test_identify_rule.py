"""The coverage engine's NA-DPVI methods apply the release-only identifiability rule per replicate."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from dpposterior.experiments.methods import CellReleases, MethodSettings, _check_na_options, _prior_rule
from dpposterior.noise_aware import TraceStats


_UNIT_RATES = np.ones(4)


def _releases(prior_sampler=lambda k, m: 5.0 + jax.random.normal(k, (m, 2)), learning_rate=_UNIT_RATES):
    # replicate 0: latent 0's slope 1.5 s.e. (not identified); everything else 15 s.e. at eta 1 (identified)
    cross = np.array([[1.5, 15.0, 15.0, 15.0], [15.0, 15.0, 15.0, 15.0]])
    stats = TraceStats(
        count=np.full((2, 4), 100.0),
        phi_mean=np.zeros((2, 4)),
        grad_mean=np.zeros((2, 4)),
        phi_ss=np.ones((2, 4)),
        cross_ss=cross,
        grad_ss=np.ones((2, 4)),
    )
    return CellReleases(
        stats=stats,
        final_phi=np.zeros((2, 4)),
        noise_sd=np.ones(4),
        sampling_rate=0.1,
        num_latent=2,
        learning_rate=learning_rate,
        prior_sampler=prior_sampler,
    )


def _settings():
    return MethodSettings(
        keys=np.asarray(jax.random.key_data(jax.random.split(jax.random.PRNGKey(0), 2))), num_draws=1000
    )


def test_only_the_unidentified_latent_of_that_replicate_gets_the_prior():
    draws = np.zeros((2, 1000, 2), np.float32)
    out, diag = _prior_rule(_releases(), _settings(), draws, "prior")
    assert abs(out[0, :, 0].mean() - 5.0) < 0.2 and abs(out[0, :, 0].std() - 1.0) < 0.1
    assert np.all(out[0, :, 1] == 0) and np.all(out[1] == 0)
    assert diag["unidentified_replicates_per_latent"] == [1, 0] and diag["prior_only_applied"]
    assert np.all(draws == 0)  # the input is not modified


def test_keep_and_missing_inputs_leave_the_draws():
    draws = np.zeros((2, 1000, 2), np.float32)
    out, diag = _prior_rule(_releases(), _settings(), draws, "keep")
    assert np.all(out == 0) and diag["unidentified_replicates_per_latent"] == [1, 0] and not diag["prior_only_applied"]
    out, diag = _prior_rule(_releases(learning_rate=None), _settings(), draws, "prior")
    assert np.all(out == 0) and diag == {}


def test_bad_option_is_refused():
    with pytest.raises(ValueError, match=r"unidentified option must be one of \('prior', 'keep'\)"):
        _check_na_options({"unidentified": "drop"}, None, "grid")
