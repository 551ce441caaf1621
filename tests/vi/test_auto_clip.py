"""The private clip search and its composition with DP-SGD (vi.auto_clip)."""

from __future__ import annotations

import types

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import pytest
from dp_accounting import dp_event
from dp_accounting.pld import pld_privacy_accountant

from dpposterior.privacy.clip_binds import binds_message, clip_binds_message
from dpposterior.privacy import ClipBindsWarning, Ledger, PrivacySpent, dpsgd_epsilon
from dpposterior.privacy.dpsgd_record import check_dpsgd_privacy
from dpposterior import noise_aware_posterior
from dpposterior.vi import DPVITrace, RunOptions, auto_clip, dpvi
from dpposterior.vi.dpvi import _cached_loss
from dpposterior.vi.record_norms import NUM_DRAWS, count_at_least, norms_fn, record_norms

DELTA = 1e-5
SIGMA, Q, T = 1.5, 0.05, 400
EXTRA = 3.0  # the pre-releases' combined noise multiplier


def _direct(extra, dvi=1e-4):
    """dp-accounting's PLD accountant on the composed events, built here without the library's code."""
    acc = pld_privacy_accountant.PLDAccountant(value_discretization_interval=dvi)
    run = dp_event.SelfComposedDpEvent(dp_event.PoissonSampledDpEvent(Q, dp_event.GaussianDpEvent(SIGMA)), T)
    events = [run] if extra is None else [dp_event.GaussianDpEvent(extra), run]
    acc.compose(dp_event.ComposedDpEvent(events))
    return acc.get_epsilon(DELTA)


def test_composed_epsilon_is_dp_accountings_composition():
    alone = dpsgd_epsilon(SIGMA, DELTA, Q, T)
    both = dpsgd_epsilon(SIGMA, DELTA, Q, T, extra_gaussian=EXTRA)
    assert both == pytest.approx(_direct(EXTRA), rel=2e-3)
    assert alone == pytest.approx(_direct(None), rel=2e-3)
    assert both > alone * 1.05  # the pre-release costs something: the check can fail


def _record(extra):
    details = (("clip", 1.0), ("sampling", "poisson"))
    eps = dpsgd_epsilon(SIGMA, DELTA, Q, T, extra_gaussian=extra)
    if extra is not None:
        details += (("extra_gaussian", extra),)
    return PrivacySpent(
        epsilon=eps,
        delta=DELTA,
        neighbouring="add_remove",
        accountant="pld",
        mechanism="poisson_subsampled_gaussian",
        noise_multiplier=SIGMA,
        sampling_rate=Q,
        num_steps=T,
        details=details,
    )


def test_the_ledger_composes_the_pre_release():
    ledger = Ledger(value_discretization_interval=1e-4)
    ledger.add(_record(EXTRA))
    assert ledger.total(DELTA).epsilon == pytest.approx(_direct(EXTRA), rel=2e-3)


def test_the_record_check_recomputes_the_composed_epsilon():
    meta = {"noise_multiplier": SIGMA, "sampling_rate": Q, "num_steps": T, "clip": 1.0}
    check_dpsgd_privacy(_record(EXTRA), meta, T)
    # the composed epsilon without the extra detail claims less than the settings give: refused
    stripped = dataclasses.replace(_record(None), epsilon=_record(EXTRA).epsilon)
    with pytest.raises(ValueError, match="claims epsilon"):
        check_dpsgd_privacy(stripped, meta, T)
    bad = dataclasses.replace(_record(EXTRA), details=(("clip", 1.0), ("extra_gaussian", -1.0)))
    with pytest.raises(ValueError, match="extra_gaussian"):
        check_dpsgd_privacy(bad, meta, T)


def _search(norms, noise_multiplier, seed=0):
    z = np.random.default_rng(seed).standard_normal(auto_clip.NUM_NORMALS)
    start = auto_clip.search_median(norms, norms.size, noise_multiplier, z)
    return auto_clip.search_clip(norms, norms.size, noise_multiplier, z, start)


def test_with_little_noise_the_clip_leaves_about_one_percent_clipped():
    norms = np.abs(np.random.default_rng(1).standard_normal(20_000)) * 3.0
    choice = _search(norms, 1e-3)
    share = np.mean(norms >= choice.clip)
    assert 0.001 <= share <= 0.01, share
    assert not choice.tail_beyond_window


def test_a_heavy_tail_beyond_the_window_is_flagged():
    norms = np.concatenate([np.ones(9_000), np.full(1_000, 1e3)])  # 10% far beyond 16 x the median
    choice = _search(norms, 1e-3)
    assert choice.tail_beyond_window
    with pytest.warns(ClipBindsWarning, match="heavy tail"):
        auto_clip.warn_tail(choice, "dpvi")


def test_the_check_standard_error_is_its_spread():
    norms = np.abs(np.random.default_rng(2).standard_normal(5_000))
    sigma = auto_clip.clip_check_noise_multiplier(1.0, DELTA)
    z = np.random.default_rng(3).standard_normal(400)
    shares = [auto_clip.check_clip_share(norms, 1.5, norms.size, sigma, zi)["share"] for zi in z]
    se = auto_clip.check_clip_share(norms, 1.5, norms.size, sigma, 0.0)["se"]
    assert np.std(shares) == pytest.approx(se, rel=0.15)
    assert np.mean(shares) == pytest.approx(np.mean(norms >= 1.5), abs=4 * se / 20)


# --- dpvi with the defaults: the pilot, the search, the check ----------------------------------------

N_RECORDS, STEPS = 2000, 300


def _poisson(y):
    lam = numpyro.sample("lam", dist.Gamma(4.0, 2.0))
    with numpyro.plate("records", y.shape[0]):
        numpyro.sample("y", dist.Poisson(lam), obs=y)


@pytest.fixture(scope="module")
def poisson_data():
    return (np.random.default_rng(5).poisson(3.0, N_RECORDS).astype(np.float32),)


@pytest.fixture(scope="module")
def auto_trace(poisson_data):
    return dpvi(
        _poisson,
        *poisson_data,
        epsilon=1.0,
        delta=DELTA,
        num_steps=STEPS,
        rng_key=3,
        run_options=RunOptions(progress=False),
    )


def test_the_default_clip_is_private_and_composed_as_dp_accounting_composes_it(auto_trace):
    p = auto_trace.privacy
    assert p.detail("clip_choice") == "auto" and p.detail("pilot_steps") == auto_clip.pilot_steps(STEPS)
    extra = p.detail("extra_gaussian")
    sigma_h = auto_clip.auto_clip_noise_multiplier(1.0, DELTA)
    sigma_c = auto_clip.clip_check_noise_multiplier(1.0, DELTA)
    assert extra == pytest.approx((sigma_h**-2 + sigma_c**-2) ** -0.5)
    # dp-accounting directly: T Poisson-subsampled Gaussian steps (pilot and run) and one Gaussian
    acc = pld_privacy_accountant.PLDAccountant(value_discretization_interval=1e-4)
    run = dp_event.PoissonSampledDpEvent(p.sampling_rate, dp_event.GaussianDpEvent(p.noise_multiplier))
    acc.compose(dp_event.ComposedDpEvent([dp_event.GaussianDpEvent(extra), dp_event.SelfComposedDpEvent(run, STEPS)]))
    assert p.epsilon == pytest.approx(acc.get_epsilon(p.delta - p.detail("noise_tail_delta")), rel=5e-3)
    assert p.epsilon <= 1.0 + 1e-6
    # every query of both searches is in the record, and the clip is one of the grid's edges
    assert len(p.detail("auto_clip_queries")) == auto_clip.NUM_NORMALS
    assert auto_trace.clip in {auto_clip.grid_edge(k) for k in range(auto_clip.GRID_LOWEST, auto_clip.GRID_HIGHEST + 1)}


def test_the_chosen_clip_leaves_few_records_clipped(auto_trace, poisson_data):
    """Measured without privacy: the share of records at or above the chosen clip at the last iterate,
    over Monte Carlo draws the search never saw (the run's own steps draw afresh)."""
    loss = _cached_loss(_poisson, auto_trace.layout, N_RECORDS, auto_trace.num_mc, {})
    grads = norms_fn(loss, tuple(float(b) for b in auto_trace.beta))
    records = tuple(jnp.asarray(a) for a in poisson_data)
    fresh = np.stack([grads(jnp.asarray(auto_trace.final_phi), records, jax.random.PRNGKey(k)) for k in range(16)])
    assert np.mean(fresh >= auto_trace.clip) <= 0.02


def test_the_norms_are_taken_at_several_public_draws_and_counted_by_their_mean(auto_trace, poisson_data):
    loss = _cached_loss(_poisson, auto_trace.layout, N_RECORDS, auto_trace.num_mc, {})
    norms = record_norms(loss, auto_trace.beta, auto_trace.final_phi, poisson_data)
    assert norms.shape == (NUM_DRAWS, N_RECORDS)
    # the beta-scaled rho half moves with the step's draw: one draw alone is one arbitrary step
    assert np.ptp(np.quantile(norms, 0.99, axis=1)) > 0
    edge = float(np.quantile(norms, 0.99))
    assert count_at_least(norms, edge) == pytest.approx(np.mean(np.sum(norms >= edge, axis=1)))


def test_one_record_moves_the_mean_count_by_at_most_one():
    rng = np.random.default_rng(0)
    base = rng.gamma(2.0, 1.0, (NUM_DRAWS, 50)).astype(np.float32)
    for extra in (np.full(NUM_DRAWS, 100.0), np.r_[np.full(4, 100.0), np.zeros(NUM_DRAWS - 4)], [np.nan] * NUM_DRAWS):
        more = np.concatenate([base, np.asarray(extra, np.float32)[:, None]], axis=1)
        for edge in (0.5, 2.0, 50.0):
            diff = count_at_least(more, edge) - count_at_least(base, edge)
            assert 0.0 <= diff <= 1.0
    # above the edge in 4 of the 16 draws: a quarter of a record
    partial = np.concatenate([base, np.r_[np.full(4, 100.0), np.zeros(NUM_DRAWS - 4)][:, None]], axis=1)
    assert count_at_least(partial, 50.0) - count_at_least(base, 50.0) == pytest.approx(4 / NUM_DRAWS)


def test_an_auto_release_saves_and_loads_with_its_pilot(auto_trace, tmp_path):
    path = tmp_path / "t.npz"
    auto_trace.save(path)
    back = DPVITrace.load(path)
    assert back.privacy == auto_trace.privacy and back.clip == auto_trace.clip


def test_a_small_hand_clip_warns_at_the_release_and_in_the_posterior(poisson_data):
    with pytest.warns(ClipBindsWarning, match="binds.*use clip='auto' \\(the default\\)"):
        trace = dpvi(
            _poisson,
            *poisson_data,
            epsilon=1.0,
            delta=DELTA,
            num_steps=STEPS,
            clip=0.3,
            rng_key=4,
            run_options=RunOptions(progress=False),
        )
    assert trace.privacy.detail("clip_choice") == "given"
    with pytest.warns(ClipBindsWarning):
        post = noise_aware_posterior(trace, method="laplace", rng_key=0)
    assert any("binds" in w for w in post.warnings)
    assert "binds" in str(post.summary())


def test_the_clip_check_count_has_no_monte_carlo_noise_and_its_se_is_its_spread(auto_trace, poisson_data):
    loss = _cached_loss(_poisson, auto_trace.layout, N_RECORDS, auto_trace.num_mc, {})
    a = record_norms(loss, auto_trace.beta, auto_trace.final_phi, poisson_data)
    b = record_norms(loss, auto_trace.beta, auto_trace.final_phi, poisson_data)
    np.testing.assert_array_equal(a, b)  # the count is a function of the data: noise is its only randomness
    sigma = auto_clip.clip_check_noise_multiplier(1.0, DELTA)
    clip = float(np.quantile(a, 0.9))
    calls = [
        auto_clip.check_clip_share(a, clip, N_RECORDS, sigma, float(auto_clip.privacy_normals(None, False, 7, 1)[0][0]))
        for _ in range(300)
    ]
    shares = np.array([c["share"] for c in calls])
    assert np.std(shares) == pytest.approx(calls[0]["se"], rel=0.15)
    assert np.mean(shares) == pytest.approx(np.mean(a >= clip), abs=4 * calls[0]["se"] / np.sqrt(300))


def test_a_checkpointed_run_needs_a_given_clip(poisson_data, tmp_path):
    with pytest.raises(ValueError, match="checkpoint needs a given clip"):
        dpvi(
            _poisson,
            *poisson_data,
            epsilon=1.0,
            delta=DELTA,
            num_steps=STEPS,
            run_options=RunOptions(checkpoint=tmp_path / "c"),
        )


@pytest.mark.parametrize("bad", ["Auto", "", float("nan"), -1.0, 0.0])
def test_a_bad_clip_is_refused_naming_what_is_allowed(bad, poisson_data):
    with pytest.raises(ValueError, match="clip"):
        dpvi(_poisson, *poisson_data, epsilon=1.0, delta=DELTA, num_steps=STEPS, clip=bad)


def test_dpvim_chooses_its_clip_privately_too(poisson_data):
    from dpposterior.vi._dpvim import dpvim

    trace = dpvim(_poisson, *poisson_data, epsilon=1.0, delta=DELTA, num_steps=STEPS, rng_key=6)
    p = trace.privacy
    assert p.detail("clip_choice") == "auto" and p.epsilon <= 1.0 + 1e-6
    assert p.epsilon == pytest.approx(
        dpsgd_epsilon(
            p.noise_multiplier,
            p.delta - p.detail("noise_tail_delta"),
            p.sampling_rate,
            STEPS,
            extra_gaussian=p.detail("extra_gaussian"),
        ),
        rel=1e-6,
    )
    assert p.detail("clip") == trace.clip and "clip_check_se" in dict(p.details)


def test_too_few_records_for_the_search_are_refused_before_any_release():
    y = np.random.default_rng(0).poisson(3.0, 47).astype(np.float32)
    with pytest.raises(ValueError, match=r"cannot choose a clip privately for N = 47.*nothing was released"):
        dpvi(_poisson, y, epsilon=1.0, delta=DELTA, num_steps=STEPS)
    trace = dpvi(
        _poisson,
        y,
        epsilon=1.0,
        delta=DELTA,
        num_steps=STEPS,
        clip=2.0,
        rng_key=0,
        run_options=RunOptions(progress=False),
    )
    assert trace.clip == 2.0  # a clip by hand still runs


def test_the_clip_warning_of_an_auto_clip_advises_a_hand_clip_not_the_default_it_used():
    """clip="auto" can bind at the end of a run that moved after the pilot; the advice is then a larger
    clip by hand, and the posterior's copy of the warning says the same."""
    check = {"share": 0.3, "se": 0.01}
    assert "use clip='auto'" in binds_message(check, 1.5)
    auto = binds_message(check, 1.5, auto=True)
    assert "use clip='auto'" not in auto and "larger clip by hand" in auto
    details = (("clip", 1.5), ("clip_choice", "auto"), ("clip_check_clipped_share", 0.3), ("clip_check_se", 0.01))
    assert clip_binds_message(types.SimpleNamespace(details=details)) == auto


def test_the_pilot_ends_where_the_default_burn_in_does():
    # the noise-aware posterior models the steps from T* = floor(0.2 T) on; a pilot of round(0.2 T) steps
    # put one pilot step (another clip and learning rate) in that window whenever 0.2 T had a fraction >= 0.5
    from dpposterior.noise_aware.stats import burn_in_start

    for t in range(5, 3000):
        assert auto_clip.pilot_steps(t) == burn_in_start(t, auto_clip.PILOT_FRACTION), t


def test_a_window_or_a_prior_that_reads_pilot_steps_is_refused(auto_trace):
    pilot = auto_trace.privacy.detail("pilot_steps")
    assert pilot == auto_clip.pilot_steps(STEPS) > 0
    noise_aware_posterior(auto_trace, rng_key=0)  # the default burn-in drops the pilot
    with pytest.raises(
        ValueError, match=rf"burn_in=0.1 starts the modelled steps at T\*={STEPS // 10}, inside the pilot"
    ):
        noise_aware_posterior(auto_trace, burn_in=0.1, rng_key=0)
    with pytest.raises(ValueError, match=r'priors="burn_in" .* the pilot of clip=.auto.'):
        noise_aware_posterior(auto_trace, rng_key=0, priors="burn_in")
    # a trace made with a given clip has no pilot: the same calls run
    given = dataclasses.replace(
        auto_trace, privacy=dataclasses.replace(auto_trace.privacy, details=(("clip_choice", "given"),))
    )
    noise_aware_posterior(given, burn_in=0.1, rng_key=0)
    noise_aware_posterior(given, rng_key=0, priors="burn_in")
