"""gradient_norm_histogram: the private histogram of per-record gradient norms at a trace's end."""

import dataclasses

import jax

import numpy as np
import numpyro
import numpyro.distributions as dist
import pytest
from scipy import stats

import clip_check_models
from clip_check_models import EXPECTED, Y, location, log_location
from dpposterior.vi import GradientNormHistogram, gradient_norm_histogram
from dpposterior.privacy.snapping import power_of_two_at_least
from dpposterior.vi.clip_check import _noisy_counts
from dpposterior.vi.dpvi import dpvi
from dpposterior.vi._dpvim import dpvim


@pytest.fixture(scope="module")
def point_trace():
    return clip_check_models.point_trace()


def test_counts_are_the_exact_histogram_plus_laplace_noise(point_trace):
    h = gradient_norm_histogram(point_trace, location, Y, epsilon=1e6, rng_key=0)
    assert isinstance(h, GradientNormHistogram)
    np.testing.assert_allclose(h.counts, EXPECTED, atol=1e-4)
    np.testing.assert_allclose(h.edges, [0, 0.25, 0.5, 1, 2, 4, np.inf])
    assert h.clipped_fraction == pytest.approx(5 / 9, abs=1e-4)  # 1.5, 3, 10, -20 and 50 are at least C
    assert h.clipped_fraction_se == pytest.approx(np.sqrt(2 * 3) * 1e-6 / 9)  # 3 bins from C up, b = 1e-6
    assert [r["count"] for r in h.table()] == pytest.approx(EXPECTED, abs=1e-4)
    p = h.privacy
    assert (p.epsilon, p.delta, p.neighbouring, p.accountant, p.seeded_by) == (1e6, 0.0, "add_remove", "pure", "user")
    assert dict(p.details)["sensitivity_l1"] == 1.0


def test_non_finite_gradients_have_their_own_bin(point_trace):
    # a negative record under a LogNormal has a NaN gradient, which DP-SGD drops: counted apart
    y = np.array([1.0, 2.0, -1.0, 0.5], np.float32)
    tr = dpvi(log_location, np.abs(y), epsilon=1.0, delta=1e-5, num_steps=12, sampling_rate=0.5, clip=1.0, rng_key=0)
    h = gradient_norm_histogram(tr, log_location, y, epsilon=1e6, rng_key=0)
    assert h.counts[-1] == pytest.approx(1.0, abs=1e-4)
    assert h.non_finite_fraction == pytest.approx(0.25, abs=1e-4)
    assert np.sum(h.counts) == pytest.approx(4.0, abs=1e-3)


def test_noise_is_snapped_laplace_of_scale_one_over_epsilon():
    # the release step alone (the public function's counts are this step's output: tests/privacy/
    # test_audit_clip_check.py), with N large enough that the clamp to [0, N] never binds
    eps, n = 0.6, 10_000
    exact = np.full(50, 1234.0)
    runs = [_noisy_counts(exact, eps, jax.random.key(k), n) for k in range(80)]  # 4,000 counts
    out = np.concatenate([r[0] for r in runs])
    scale, grid = runs[0][1], dict(runs[0][2])["snapping_grid"]
    assert scale == pytest.approx(1 / eps, rel=1e-9) and scale >= 1 / eps
    assert grid == power_of_two_at_least(scale) == 2.0
    k = (out - 0.5 * n) / grid
    np.testing.assert_array_equal(k, np.round(k))  # every count on the public grid: no low-order bits
    offset = 1234.0 - 0.5 * n
    cells = np.round(offset / grid) + np.arange(-6, 7)

    def chi2_p(lam):
        cdf = stats.laplace(scale=lam).cdf
        probs = cdf((cells + 0.5) * grid - offset) - cdf((cells - 0.5) * grid - offset)
        obs = np.array([np.sum(k == c) for c in cells])
        return stats.chisquare(
            np.append(obs, out.size - obs.sum()), out.size * np.append(probs, 1 - probs.sum())
        ).pvalue

    assert chi2_p(scale) > 1e-3
    for wrong in (0.75, 1.33):  # power: a scale off by a quarter is rejected
        assert chi2_p(wrong * scale) < 1e-3


def _other_model(y):
    """A model whose latent sites differ from the traces' (a refused mismatch)."""
    a = numpyro.sample("a", dist.Normal(0.0, 1.0).expand([2]).to_event(1))
    with numpyro.plate("records", y.shape[0]):
        numpyro.sample("y", dist.Normal(a[0], 1.0), obs=y)


def test_bad_arguments_are_refused(point_trace):
    with pytest.raises(TypeError, match=r"trace must be a DPVITrace \(from dpvi\) or a DPVImTrace"):
        gradient_norm_histogram("trace", location, Y, epsilon=1.0)
    with pytest.raises(ValueError, match="epsilon"):
        gradient_norm_histogram(point_trace, location, Y, epsilon=0.0)
    for bad in ((0.5, 2.0), (1.0, 0.5), (), (1.0, np.inf), "abc", (True, 1.0)):
        with pytest.raises(ValueError, match="multiples must be"):
            gradient_norm_histogram(point_trace, location, Y, epsilon=1.0, multiples=bad)

    with pytest.raises(ValueError, match=r"latent sites \['a'\].*not the trace's \['m'\]"):
        gradient_norm_histogram(point_trace, _other_model, Y, epsilon=1.0)
    with pytest.raises(ValueError, match="rng_key must be None when secure=True"):
        gradient_norm_histogram(point_trace, location, Y, epsilon=1.0, rng_key=0, secure=True)


def test_secure_mode_snaps_the_counts(point_trace):
    h = gradient_norm_histogram(point_trace, location, Y, epsilon=1e4, secure=True)
    details = dict(h.privacy.details)
    assert h.privacy.seeded_by == "secure" and h.privacy.epsilon == 1e4 and "snapping" in details
    np.testing.assert_allclose(h.counts, EXPECTED, atol=1e-2)
    grid = details["snapping_grid"]  # every released count lies on the snapping grid
    np.testing.assert_allclose(np.round(h.counts / grid) * grid, h.counts, rtol=0, atol=1e-12)
    assert 1e-4 <= h.noise_scale < 1.01e-4 * 1.1  # the noise's own epsilon is a little below 1e4 (the slack)


# a DPVIm release: its own per-record vector (the loc gradient at one shared eta, no beta) at its own clip


@pytest.fixture(scope="module")
def dpvim_point_trace():
    return clip_check_models.dpvim_point_trace()


def test_a_dpvim_release_is_checked_on_its_loc_gradients_at_its_clip(dpvim_point_trace):
    h = gradient_norm_histogram(dpvim_point_trace, location, Y, epsilon=1e6, rng_key=0)
    np.testing.assert_allclose(h.counts, EXPECTED, atol=1e-3)
    assert h.clip == dpvim_point_trace.clip == 1.0 and h.num_records == Y.size
    assert h.clipped_fraction == pytest.approx(5 / 9, abs=1e-3)
    p = h.privacy
    assert (p.epsilon, p.delta, p.neighbouring, p.accountant, p.mechanism) == (
        1e6,
        0.0,
        "add_remove",
        "pure",
        "laplace_histogram",
    )
    assert "loc gradient norms of DPVIm" in dict(p.details)["statistic"]
    # power: DPVIm's clip, not a fixed one: at C = 4 only the three records beyond 4 are at or above C
    wide = gradient_norm_histogram(
        dataclasses.replace(dpvim_point_trace, clip=4.0), location, Y, epsilon=1e6, rng_key=0
    )
    assert wide.clipped_fraction == pytest.approx(3 / 9, abs=1e-3)
    np.testing.assert_allclose(wide.edges, [0, 1, 2, 4, 8, 16, np.inf])
    # the loc gradient is taken at theta = mu + s eta: at m = 5 (s ~ 0) record i's norm is about |5 - y_i|
    moved = dataclasses.replace(dpvim_point_trace, final_phi=np.array([5.0, -12.0], np.float32))
    h5 = gradient_norm_histogram(moved, location, Y, epsilon=1e6, rng_key=0)
    exact = np.abs(5.0 - Y + 5.0 / (100 * Y.size))  # d/dtheta of -log N(y | theta, 1) - log N(theta | 0, 10) / N
    assert h5.clipped_fraction == pytest.approx(np.mean(exact >= 1.0), abs=1e-3)
    assert h5.counts[0] == pytest.approx(0.0, abs=1e-3)  # none below C / 4 (the nearest, 3.0, is 2 away)


def test_a_dpvim_release_checks_its_model_and_drops_nothing_silently(dpvim_point_trace):
    y = np.array([1.0, 2.0, -1.0, 0.5], np.float32)  # NaN loc gradient under a LogNormal: its own bin
    tr = dpvim(log_location, np.abs(y), epsilon=1.0, delta=1e-5, num_steps=12, sampling_rate=0.5, clip=1.0, rng_key=0)
    h = gradient_norm_histogram(tr, log_location, y, epsilon=1e6, rng_key=0)
    assert h.non_finite_fraction == pytest.approx(0.25, abs=1e-4)
    assert np.sum(h.counts) == pytest.approx(4.0, abs=1e-3)

    with pytest.raises(ValueError, match=r"latent sites \['a'\].*not the trace's \['m'\]"):
        gradient_norm_histogram(dpvim_point_trace, _other_model, Y, epsilon=1.0)


def test_the_count_has_no_monte_carlo_noise_and_its_se_is_real():
    """The share clipped varied from call to call far beyond its stated standard error, because each
    call drew fresh ELBO Monte Carlo draws. With a wide q (sd 1) the draws move every record's norm; the
    exact counts are now the same in every call, and over 30 calls the spread of the share matches
    clipped_fraction_se."""
    y = np.random.default_rng(0).normal(0.0, 1.5, 2000).astype(np.float32)
    tr = dpvi(location, y, epsilon=1.0, delta=1e-5, num_steps=12, sampling_rate=0.5, clip=1.0, beta_rho=1e-3, rng_key=0)
    tr = dataclasses.replace(tr, final_phi=np.array([0.0, 0.55], np.float32))  # softplus(0.55) = 1.0
    exact = [gradient_norm_histogram(tr, location, y, epsilon=1e6, rng_key=k).counts for k in range(4)]
    for c in exact[1:]:
        np.testing.assert_allclose(c, exact[0], atol=1e-3)
    shares = [gradient_norm_histogram(tr, location, y, epsilon=0.5, rng_key=k) for k in range(30)]
    se = shares[0].clipped_fraction_se
    spread = np.std([h.clipped_fraction for h in shares], ddof=1)
    assert 1 / 1.5 < spread / se < 1.5, (spread, se)
