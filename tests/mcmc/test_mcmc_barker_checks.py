"""The DP Barker kernel's privacy analysis holds whatever the records (the noise variance stays in its range,
a NaN energy does not decide the test), and settings the test ignores or cannot fit are refused.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dpposterior import mcmc
from dpposterior.mcmc.accounting import barker_rdp
from dpposterior.mcmc.barker import barker_correction
from dpposterior.mcmc.chain import make_chain_run
from dpposterior.mcmc import barker
from input_checks import raises_with as _raises


def test_barker_rdp_refuses_a_string_order():
    _raises(lambda: barker_rdp("3", 100), TypeError, "alpha")  # was float("3")


# DP Barker
@functools.lru_cache(maxsize=1)
def _barker_b15_chains():
    """One private DP Barker kernel (b = 15 of N = 400, U_i = 1e3 r_i theta + 0 log(r_i + 1.5)), compiled
    once (make_chain_run) and run for 40 steps on two data sets: records alternating +1 / -1 (every
    log ratio clipped, half at +B, half at -B), and records all -2 (every energy NaN: log(-0.5))."""
    n = 400
    x = np.where(np.arange(n) % 2 == 0, 1.0, -1.0).astype(np.float32)
    model = mcmc.energy_model(
        lambda th, r: 1e3 * r * th[0] + 0.0 * jnp.log(r + 1.5),
        x,
        log_prior_fn=lambda th: -0.5 * jnp.sum(th**2),
        bound_constants=np.full(n, 1e3),
    )
    kernel = mcmc.dp_barker_kernel(model, mcmc.random_walk(1.0), batch_size=15)
    run = jax.jit(make_chain_run(kernel, 40))
    state = kernel.init(np.array([0.0]))
    key = jax.random.key(0)
    clipped = run(key, state, model.data, model.bound_constants)[1]
    nan = run(key, state, jnp.full(n, -2.0, jnp.float32), model.bound_constants)[1]
    return jax.tree.map(np.asarray, clipped), jax.tree.map(np.asarray, nan)


def test_private_barker_noise_variance_stays_in_the_range_of_its_privacy_analysis():
    # The unbiased sample variance of a batch of 15 clipped ratios is up to 15/14 of the clip's bound, so
    # s2 reached 1.006 and the Gaussian variance C - s2 fell to 0.994, below the [C - 1, C] the RDP bound
    # assumes (and the [C - 0.98, C] the docstring said).
    var = _barker_b15_chains()[0].noise_std.astype(np.float64) ** 2
    c = mcmc.accounting.BARKER_NORMAL_VARIANCE
    assert var.min() >= c - barker.CLIP_FACTOR**2 - 1e-5, var.min()
    assert np.any(var < c - 0.9), var.min()  # the clip binds: the cap is what holds the bound here


def test_private_barker_records_with_a_nan_energy_do_not_decide_the_test():
    # A NaN log ratio passed through the clip, so the private test rejected every proposal (acceptance 0,
    # noise std NaN) whenever such a record was in the batch: the outcome decided by one record, an
    # unbounded privacy loss. Now a NaN ratio counts as 0 (in [-B, B], like an absent record's).
    info = _barker_b15_chains()[1]
    assert np.all(np.isfinite(info.noise_std)) and info.accepted.mean() > 0.2, info.accepted.mean()


def test_a_nan_energy_counts_as_a_bound_violation():
    # bound_violations (where the user's bound |U_i(theta') - U_i(theta)| <= c_i M fails) missed NaN: it
    # said 0 (also for a penalty chain that never moved because its log ratio was NaN)
    assert _barker_b15_chains()[1].bound_violations.tolist() == [15] * 40


def test_barker_kernel_refuses_settings_its_test_ignores():
    n = 20
    x = np.linspace(-1.0, 1.0, n).astype(np.float32)
    model = mcmc.energy_model(
        lambda th, r: 0.5 * (r - th[0]) ** 2,
        x,
        log_prior_fn=lambda th: -0.5 * jnp.sum(th**2),
        bound_constants=np.full(n, 3.0),
    )
    rw = mcmc.random_walk(0.1)
    # was stored and never used (a non-private chain is not accounted)
    _raises(lambda: mcmc.dp_barker_kernel(model, rw, private=False, delta=1e-7), ValueError, "delta", "ignored")
    # the exact test draws Logistic(0, 1): C = 1.0 changed nothing
    _raises(
        lambda: mcmc.dp_barker_kernel(model, rw, private=False, normal_variance=1.0),
        ValueError,
        "normal_variance",
        "ignored",
    )
    assert (
        mcmc.dp_barker_kernel(model, rw, private=False, batch_size=10, normal_variance=1.0).config.normal_variance
        == 1.0
    )
    assert mcmc.dp_barker_kernel(model, rw).config.delta == 1e-5
    # the default batch is all N = 10 records: the message said "got 10" for a batch_size never given
    small = mcmc.energy_model(
        lambda th, r: 0.5 * (r - th[0]) ** 2,
        x[:10],
        log_prior_fn=lambda th: -0.5 * jnp.sum(th**2),
        bound_constants=np.full(10, 3.0),
    )
    _raises(lambda: mcmc.dp_barker_kernel(small, rw), ValueError, "defaults to N", "N = 10")


@pytest.mark.parametrize("kw", [dict(span=1e7), dict(spacing=1e-7)])
def test_barker_correction_refuses_a_grid_too_fine_to_fit(kw):
    # was numpy's MemoryError ("Unable to allocate 895. GiB") from the linear programme's matrix
    _raises(lambda: barker_correction(2.0, **kw), ValueError, "span / spacing", "2000")


# the non-private minibatch Barker test (private=False, b < N) set s2 = C whenever its variance estimate
# exceeded C (the test is invalid there) and said nothing: the chain ran on, silently approximate
def test_non_private_minibatch_barker_says_when_its_test_was_invalid():
    n = 400
    x = np.where(np.arange(n) % 2 == 0, 1.0, -1.0).astype(np.float32)
    model = mcmc.energy_model(
        lambda th, r: 50.0 * r * th[0],
        x,
        log_prior_fn=lambda th: -0.5 * jnp.sum(th**2),
        bound_constants=np.full(n, 50.0),
    )
    kernel = mcmc.dp_barker_kernel(model, mcmc.random_walk(1.0), batch_size=20, private=False)
    with pytest.warns(RuntimeWarning, match=r"of 30 minibatch Barker tests \(private=False\) had a variance"):
        res = mcmc.run_chain(kernel, [0.0], 30, rng_key=0)
    frac = mcmc.diagnostics(res).nonprivate_invalid_test_fraction
    assert 0 < frac <= 1
    # a step small enough for s2 < C: no warning, nothing counted
    calm = mcmc.dp_barker_kernel(model, mcmc.random_walk(1e-4), batch_size=20, private=False)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        res = mcmc.run_chain(calm, [0.0], 30, rng_key=0)
    assert mcmc.diagnostics(res).nonprivate_invalid_test_fraction == 0.0
