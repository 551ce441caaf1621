"""What a user does with a posterior: draws per site, summaries against the draws, ArviZ's view of them.

Built on hand-made layouts (no DPVI run), so every test here takes well under a second after JAX's
first compilation.
"""

from __future__ import annotations

import numpy as np
import pytest

import dpposterior as dpp
from dpposterior._arviz import import_arviz
from dpposterior.baselines import DrawsPosterior
from dpposterior.noise_aware import point_posterior
from dpposterior.releases.layout import ParamLayout, Site

SPENT = dpp.PrivacySpent(
    epsilon=1.0,
    delta=1e-5,
    neighbouring="add_remove",
    accountant="pld",
    mechanism="poisson_subsampled_gaussian",
    noise_multiplier=1.0,
    sampling_rate=0.1,
    num_steps=100,
)
REAL = {"kind": "independent", "base": {"kind": "real"}, "ndims": 1}
MATRIX = {"kind": "independent", "base": {"kind": "real"}, "ndims": 2}


def _layout() -> ParamLayout:
    """Every kind of latent an expert writes: scalar positive, (1,), (1, 1), (3,), (2, 2), simplex, bounded."""
    return ParamLayout(
        (
            Site("s", (), (), {"kind": "positive"}),
            Site("b", (1,), (1,), REAL),
            Site("A", (1, 1), (1, 1), MATRIX),
            Site("w", (3,), (3,), REAL),
            Site("M", (2, 2), (2, 2), MATRIX),
            Site("pi", (3,), (2,), {"kind": "simplex"}),
            Site("u", (), (), {"kind": "interval", "low": -1.0, "high": 3.0}),
        )
    )


EXPECTED = [
    "s",
    "b[0]",
    "A[0, 0]",
    "w[0]",
    "w[1]",
    "w[2]",
    "M[0, 0]",
    "M[0, 1]",
    "M[1, 0]",
    "M[1, 1]",
    "pi[0]",
    "pi[1]",
    "pi[2]",
    "u",
]


def _posteriors():
    layout = _layout()
    n = layout.num_latent
    rng = np.random.default_rng(0)
    phi = np.r_[rng.normal(size=n), np.full(n, -1.0)].astype(np.float32)
    yield point_posterior(layout, phi, SPENT)
    yield DrawsPosterior(
        layout=layout, draws=rng.normal(size=(500, n)).astype(np.float32), privacy=SPENT, method="draws"
    )


@pytest.mark.parametrize("post", list(_posteriors()), ids=["Posterior", "DrawsPosterior"])
def test_summary_names_each_scalar_as_arviz_does_and_agrees_with_it(post):
    # summary() named a site of shape (1,) "b" and (1, 1) "A" (ArviZ: b[0], A[0, 0]) and a matrix
    # entry "M[0,1]" (ArviZ: M[0, 1]), so summary() and summary_table() / az.summary named the same
    # scalar two ways and could not be joined
    az = import_arviz()
    rows = post.summary(num_samples=500, prob=0.8)
    assert [r["parameter"] for r in rows] == EXPECTED
    table = az.summary(post.to_arviz(num_samples=500), kind="stats", hdi_prob=0.8, round_to="none")
    assert list(table.index) == EXPECTED == list(post.summary_table(num_samples=500, prob=0.8).index)
    # the same draws (key 0 by default): the same means, and sds up to ArviZ's ddof = 1
    np.testing.assert_allclose(table["mean"], [r["mean"] for r in rows], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(table["sd"], [r["sd"] for r in rows], rtol=2e-3, atol=1e-6)


@pytest.mark.parametrize("post", list(_posteriors()), ids=["Posterior", "DrawsPosterior"])
def test_to_arviz_keeps_site_shapes_order_dims_and_the_privacy_record(post):
    idata = post.to_arviz(num_samples=48)
    names = list(post.layout.names)
    assert list(idata.posterior.data_vars) == names  # from_dict sorted them: A, M, b, pi, s, u, w
    draws = post.sample(0, 48) if isinstance(post, DrawsPosterior) else post.sample(np.uint32([0, 0]), 48)
    for name in names:
        v = idata.posterior[name]
        assert v.dims[:2] == ("chain", "draw") and v.shape[0] == 4  # one chain: az.summary's R-hat was NaN
        assert v.shape[2:] == draws[name].shape[1:]
        if not isinstance(post, DrawsPosterior):  # the draws of sample() at key 0, as summary() uses, in order
            assert np.array_equal(v.values.reshape(48, *v.shape[2:]), np.asarray(draws[name]))
    # the record as numbers, not their text (tests/noise_aware/test_na_arviz.py has the rest)
    assert idata.attrs["privacy"] == SPENT.summary() and idata.attrs["privacy_epsilon"] == 1.0
    assert idata.attrs["method"] == post.method


def test_summary_is_the_central_interval_mean_and_sd_of_the_draws_of_sample():
    # the equal-tailed interval, mean and population sd (ddof 0) of the
    # constrained draws sample() gives at the same key, per scalar, for every kind of site
    post = next(_posteriors())
    draws = post.sample(7, 400)
    assert {k: v.shape for k, v in draws.items()} == {s.name: (400, *s.shape) for s in post.layout.sites}
    cols = np.concatenate([np.asarray(v).reshape(400, -1) for v in draws.values()], axis=1)
    rows = post.summary(key=7, num_samples=400, prob=0.8)
    cols = cols.astype(np.float64)  # the summary's statistics are float64, not float32 noise digits
    np.testing.assert_allclose([r["mean"] for r in rows], cols.mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose([r["q0.1"] for r in rows], np.quantile(cols, 0.1, axis=0), rtol=1e-6)
    np.testing.assert_allclose([r["q0.9"] for r in rows], np.quantile(cols, 0.9, axis=0), rtol=1e-6)
    np.testing.assert_allclose([r["sd"] for r in rows], cols.std(axis=0), rtol=1e-6)
    assert np.allclose(np.asarray(draws["pi"]).sum(-1), 1, atol=1e-6) and np.all(np.asarray(draws["s"]) > 0)
    assert np.all((np.asarray(draws["u"]) > -1) & (np.asarray(draws["u"]) < 3))


@pytest.mark.parametrize("post", list(_posteriors()), ids=["Posterior", "DrawsPosterior"])
def test_a_key_that_would_give_another_seeds_draws_is_refused(post):
    # -1 gave the draws of 2**32 - 1 and 2**32 + 5 those of 5 (JAX keeps 32 bits of an int seed),
    # silently; 2**70 was an OverflowError; an array of keys a JAX error from inside split/randint
    import jax

    assert np.array_equal(post.sample(5, 3)["w"], post.sample(np.uint32(5), 3)["w"])
    post.sample(2**32 - 1, 2), post.sample(jax.random.key(3), 2), post.summary(key=0, num_samples=2)
    for seed in (-1, 2**32, 2**32 + 5, 2**70):
        with pytest.raises(ValueError, match=r"key as an int seed must lie in \[0, 2\*\*32\)"):
            post.sample(seed, 2)
    if not isinstance(post, DrawsPosterior):  # DrawsPosterior.summary uses every stored draw, no key
        with pytest.raises(ValueError, match=r"key as an int seed"):
            post.summary(key=-1, num_samples=2)
    with pytest.raises(ValueError, match=r"key as an int seed"):
        post.predictive(-1, lambda: None)
    with pytest.raises(ValueError, match=r"a single JAX key, got an array of keys of shape \(3,\)"):
        post.sample(jax.random.split(jax.random.key(0), 3), 2)
    for raw in (jax.random.split(jax.random.PRNGKey(0), 3), np.zeros(3, np.uint32)):
        with pytest.raises(TypeError, match=r"raw key \(jax.random.PRNGKey\) must be a uint32 array of shape \(2,\)"):
            post.sample(raw, 2)


@pytest.mark.parametrize("name", ["chain", "draw", "w_dim_0"])
def test_a_site_named_like_an_arviz_dimension_is_an_error_not_left_out(name):
    # ArviZ made such a site a coordinate: to_arviz and summary_table silently lacked it
    layout = ParamLayout((Site(name, (2,), (2,), REAL), Site("w", (2,), (2,), REAL)))
    post = point_posterior(layout, np.zeros(8, np.float32), SPENT)
    assert [r["parameter"] for r in post.summary(num_samples=5)][:2] == [f"{name}[0]", f"{name}[1]"]
    for convert in (post.to_arviz, post.summary_table):
        with pytest.raises(ValueError, match=rf"latent sites \['{name}'\] cannot be ArviZ variables"):
            convert(num_samples=40)


def test_a_summary_of_one_draw_is_refused_not_shown_with_sd_0():
    post = next(_posteriors())
    with pytest.raises(ValueError, match=r"at least 2 draws, got num_samples=1: one draw has sd 0"):
        post.summary(num_samples=1)
    assert all(row["sd"] > 0 for row in post.summary(num_samples=2))
