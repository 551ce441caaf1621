"""The release-only identifiability rule: a latent whose trace cannot have relaxed within the modelled
window gets the model prior's push-forward and says so; an identified twin does not."""

from __future__ import annotations

import jax
import numpy as np
import pytest

import dpposterior.noise_aware as na
from dpposterior.noise_aware import identify as I
from dpposterior.noise_aware.simulate import simulate_trace

T = 2000  # burn-in 0.2: a window of 1,600 steps
ETA = 1e-3
FAST = 500.0  # eta q a = 0.05: relaxes in 20 steps
SLOW = 0.05  # eta q a = 5e-6: relaxes in 2e5 steps, far beyond the window
PRIOR_LOC, PRIOR_SD = 5.0, 0.5


def _trace(a0: float, seed: int = 0, noise_multiplier: float = 1.0, phi_init=None):
    """n = 2 latents; latent 0's mean coordinate has curvature a0, every other coordinate FAST."""
    a = np.array([a0, FAST, FAST, FAST])
    return simulate_trace(
        jax.random.PRNGKey(seed),
        np.zeros(4),
        a,
        num_steps=T,
        noise_multiplier=noise_multiplier,
        learning_rate=np.full(4, ETA),
        phi_init=phi_init,
    )


def _prior(key, m):
    return PRIOR_LOC + PRIOR_SD * jax.random.normal(key, (m, 2))


@pytest.mark.parametrize("seed", [0, 1])
def test_slow_latent_gets_the_prior_and_says_why(seed):
    trace = _trace(SLOW, seed)
    with pytest.warns(na.UnidentifiedLatentsWarning, match=r"does not identify latents \['theta\[0\]'\]"):
        kept = na.noise_aware_posterior(trace, "grid", rng_key=0, priors="paper")
    assert list(kept.diagnostics["unidentified_latents"]) == ["theta[0]"]
    assert kept.diagnostics["prior_only_latents"] == {}
    post = na.noise_aware_posterior(trace, "grid", rng_key=0, prior=_prior, priors="paper")
    why = post.diagnostics["prior_only_latents"]
    assert list(why) == ["theta[0]"], why
    assert "window" in why["theta[0]"] or "standard errors" in why["theta[0]"]
    ident = post.diagnostics["identifiability"]
    assert ident.prior_only.tolist() == [True, False]
    assert not ident.relaxation_steps[0] <= 1600 and ident.relaxation_steps[1] < 100
    theta = np.asarray(post.sample_unconstrained(jax.random.PRNGKey(3), 20_000))
    # latent 0 is the prior (mean 5, sd 0.5), latent 1 keeps the noise-aware posterior
    assert abs(theta[:, 0].mean() - PRIOR_LOC) < 0.02 and abs(theta[:, 0].std() - PRIOR_SD) < 0.02
    assert abs(float(post.sd_unconstrained()[0]) - PRIOR_SD) < 0.03
    ref = np.asarray(kept.sample_unconstrained(jax.random.PRNGKey(3), 20_000))
    assert abs(theta[:, 1].mean() - ref[:, 1].mean()) < 0.1 * ref[:, 1].std()
    assert abs(theta[:, 1].std() / ref[:, 1].std() - 1) < 0.05
    assert abs(theta[:, 1].mean()) < 0.5  # near phi* = 0, nowhere near the prior's 5


def test_identified_twin_is_left_alone():
    """The power twin: the same trace with latent 0's curvature fast is not touched, and no warning."""
    import warnings

    trace = _trace(FAST, 0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        post = na.noise_aware_posterior(trace, "grid", rng_key=0, prior=_prior, priors="paper")
        plain = na.noise_aware_posterior(trace, "grid", rng_key=0, priors="paper")
    assert post.diagnostics["unidentified_latents"] == {} and post.diagnostics["prior_only_latents"] == {}
    assert post.diagnostics["identifiability"].slope_z[:2].min() > 4
    np.testing.assert_array_equal(np.asarray(post.phi_star), np.asarray(plain.phi_star))


def test_relaxation_branch_fires_on_a_well_measured_slow_drift():
    """A slope measured to many standard errors (low noise, a long drift from 5 away) still fails when
    1 / (eta q A) exceeds the window: the trace has drifted, not relaxed."""
    trace = _trace(2.0, 0, noise_multiplier=1e-3, phi_init=np.array([5.0, 0.0, 0.0, 0.0]))
    stats = na.sufficient_statistics(trace.phi, trace.grads, 0.2)
    ident = na.identifiability(
        stats, trace.noise_multiplier * trace.clip / np.asarray(trace.beta), 0.1, trace.learning_rate
    )
    assert ident.slope_z[0] > 100 and abs(ident.slope[0] / 2.0 - 1) < 0.05
    assert 4000 < ident.relaxation_steps[0] < 6000 and ident.window[0] == 1600
    assert ident.prior_only.tolist() == [True, False]
    why = I.reasons(ident, ["a", "b"])
    assert list(why) == ["a"] and "exceeds the 1600-step window" in why["a"]


def test_slope_within_two_standard_errors_is_not_identified():
    """Slope 150 with s.e. 10 (15 s.e.) is identified; slope 15 with s.e. 10 (1.5 s.e.) is not, whatever
    the learning rate: the relaxation time is not known."""
    stats = na.TraceStats(
        count=np.full(4, 100.0),
        phi_mean=np.zeros(4),
        grad_mean=np.zeros(4),
        phi_ss=np.ones(4),
        cross_ss=np.array([15.0, 1.5, 15.0, 15.0]),
        grad_ss=np.ones(4),
    )
    ident = na.identifiability(stats, np.ones(4), 0.1, np.ones(4))
    np.testing.assert_allclose(ident.slope_z, [15.0, 1.5, 15.0, 15.0])
    assert ident.prior_only.tolist() == [False, True] and np.isinf(ident.relaxation_steps[1])
    why = I.reasons(ident, ["x", "y"])
    assert list(why) == ["y"] and "within 2 standard errors" in why["y"] and "1.50 s.e." in why["y"]


def test_bad_prior_sampler_is_refused():
    trace = _trace(SLOW, 0)
    with pytest.raises(TypeError, match="prior must be None or a sampler"):
        na.noise_aware_posterior(trace, "grid", rng_key=0, prior="normal")
    with pytest.raises(ValueError, match=r"must return 4000 finite draws of the 2 unconstrained latent coordinates"):
        na.noise_aware_posterior(trace, "grid", rng_key=0, prior=lambda k, m: np.zeros((m, 3)))


def test_model_prior_sampler_reads_shapes_only():
    from dpposterior.models.regression import linear_regression

    X = np.full((7, 3), np.nan, np.float32)  # values never read: NaN would poison any use
    y = np.full(7, np.nan, np.float32)
    draws = np.asarray(na.model_prior_sampler(linear_regression, X, y)(jax.random.PRNGKey(0), 20_000))
    assert draws.shape == (20_000, 5) and np.all(np.isfinite(draws))
    # log sigma2 with sigma2 ~ InvGamma(20, 0.5): mean log(0.5) - digamma(20)
    from scipy.special import digamma, polygamma

    assert abs(draws[:, 0].mean() - (np.log(0.5) - digamma(20))) < 0.01
    assert abs(draws[:, 0].std() - np.sqrt(polygamma(1, 20))) < 0.01


def test_the_warning_travels_with_the_posterior_into_its_summary():
    """What noise_aware_posterior warns about is kept: Posterior.warnings, summary().warnings and the
    printed summary carry it, so a report or a notebook that prints the estimates prints the warning."""
    trace = _trace(SLOW, 0)
    with pytest.warns(na.UnidentifiedLatentsWarning):
        kept = na.noise_aware_posterior(trace, "grid", rng_key=0, priors="paper")
    assert len(kept.warnings) == 1 and "does not identify latents ['theta[0]']" in kept.warnings[0]
    table = kept.summary(num_samples=200)
    assert table.warnings == kept.warnings
    text = str(table)
    assert text.splitlines()[0].split() == ["parameter", "mean", "sd", "robust_sd", "q0.05", "q0.95"]
    assert "warning: the release does not identify latents ['theta[0]']" in text
    # the prior asked for: a note, no warning
    post = na.noise_aware_posterior(trace, "grid", rng_key=0, prior=_prior, priors="paper")
    assert any("prior's push-forward" in w and "theta[0]" in w for w in post.warnings)
    assert any("prior's push-forward" in w for w in post.summary(num_samples=200).warnings)


def test_an_identified_release_has_no_warnings_and_the_naive_baseline_says_what_it_is():
    import warnings

    trace = _trace(FAST, 0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        post = na.noise_aware_posterior(trace, "grid", rng_key=0, priors="paper")
    assert post.warnings == () and post.summary(num_samples=100).warnings == ()
    assert "warning" not in str(post.summary(num_samples=100))
    naive = trace.last_iterate_posterior()
    assert len(naive.warnings) == 1 and "ignores the privacy noise" in naive.warnings[0]


def test_robust_sd_matches_the_interval_and_ignores_a_heavy_tail():
    from dpposterior.releases.summary import summary_rows

    class _Site:
        def __init__(self, name):
            self.name, self.shape = name, ()

    class _Layout:
        sites = [_Site("x")]
        names = ["x"]

    x = np.concatenate([np.random.default_rng(0).normal(0, 1, 9990), np.full(10, 1e3)])
    row = summary_rows({"x": x}, _Layout(), 0.9, x.size)[0]
    assert row["robust_sd"] == pytest.approx((row["q0.95"] - row["q0.05"]) / (2 * 1.6448536))
    assert 0.95 < row["robust_sd"] < 1.05 and row["sd"] > 20  # one heavy tail: sd 30x, the robust sd unmoved
    normal = np.random.default_rng(1).normal(0, 2, 20000)
    row = summary_rows({"x": normal}, _Layout(), 0.8, normal.size)[0]
    assert row["robust_sd"] == pytest.approx(row["sd"], rel=0.03)  # the same as sd for normal draws


def test_a_long_warning_names_every_latent_but_gives_three_reasons():
    a = np.array([SLOW] * 8 + [FAST] * 8)
    trace = simulate_trace(
        jax.random.PRNGKey(0), np.zeros(16), a, num_steps=T, noise_multiplier=1.0, learning_rate=np.full(16, ETA)
    )
    with pytest.warns(na.UnidentifiedLatentsWarning) as caught:
        post = na.noise_aware_posterior(trace, "grid", rng_key=0, priors="paper")
    text = str(caught[0].message)
    flagged = list(post.diagnostics["unidentified_latents"])
    assert len(flagged) > 3, flagged
    assert str(flagged) in text and text.count("s.e.") <= 6
    assert f'and {len(flagged) - 3} more (every reason: diagnostics["unidentified_latents"])' in text


def test_a_posterior_pickles_with_its_exact_sampler():
    """A posterior saved with pickle (or sent to a worker process) keeps its phi* sampler: grid and
    Laplace draws, the clip's shift, and the user's prior (a module-level function) on its latents."""
    import pickle

    from dpposterior.noise_aware import samplers as SM

    slow = na.noise_aware_posterior(_trace(SLOW, 0), "grid", rng_key=0, prior=_prior, priors="paper")
    fast = na.noise_aware_posterior(_trace(FAST, 0), "laplace", rng_key=0, priors="paper")
    assert isinstance(slow.phi_sampler, SM.PriorLatentsSampler) and isinstance(fast.phi_sampler, SM.LaplaceSampler)
    shifted = SM.ShiftedSampler(fast.phi_sampler, np.ones(4, np.float32))
    for post, sampler in ((slow, None), (fast, None), (fast, shifted)):
        if sampler is not None:
            import dataclasses

            post = dataclasses.replace(post, phi_sampler=sampler)
        back = pickle.loads(pickle.dumps(post))
        key = jax.random.PRNGKey(7)
        np.testing.assert_array_equal(np.asarray(back.sample_phi(key, 50)), np.asarray(post.sample_phi(key, 50)))
