"""privacy.secure.os_key: a JAX key whose every draw reads the OS CSPRNG; privacy.secure.poisson."""

from __future__ import annotations

import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from dpposterior.privacy import secure
from dpposterior.privacy.secure import is_os_key, os_key, poisson


def test_every_draw_is_fresh_under_jit_vmap_and_scan():
    k = os_key()
    assert is_os_key(k) and is_os_key(jax.random.split(k, 3)) and not is_os_key(jax.random.key(0))
    f = jax.jit(lambda k: (jax.random.normal(k, (4,)), jax.random.normal(k, (4,))))
    a, b = f(k)
    c, _ = f(k)
    assert not np.array_equal(a, b) and not np.array_equal(a, c)  # same key, still fresh bits
    v = np.asarray(jax.jit(jax.vmap(lambda kk: jax.random.uniform(kk, (3,))))(jax.random.split(k, 5)))
    assert len({tuple(r) for r in v}) == 5  # one independent draw per key
    _, s = jax.lax.scan(lambda c, kk: (c, jax.random.normal(jax.random.fold_in(kk, 1), ())), 0, jax.random.split(k, 50))
    assert len(np.unique(np.asarray(s))) == 50
    assert jax.random.randint(k, (20,), 0, 7).dtype == jnp.int32


def test_draws_come_from_os_urandom(monkeypatch):
    calls = []
    real = os.urandom

    def counting(n):
        calls.append(n)
        return real(n)

    monkeypatch.setattr(secure.os, "urandom", counting)
    np.asarray(jax.jit(lambda k: jax.random.normal(k, (1000,)))(os_key()))
    assert sum(calls) >= 4 * 1000  # 32 bits per float32 normal


def test_os_key_normals_are_standard_normal_with_power():
    x = np.asarray(jax.jit(lambda k: jax.random.normal(k, (20_000,)))(os_key()), np.float64)
    assert stats.kstest(x, "norm").pvalue > 1e-3
    assert stats.kstest(x, "norm", args=(0.0, 1.1)).pvalue < 1e-6  # power: a 10% wrong scale is caught


def _chi2_pvalue(x: np.ndarray, lam: float) -> float:
    lo, hi = int(stats.poisson.ppf(0.001, lam)), int(stats.poisson.ppf(0.999, lam))
    edges = np.arange(lo, hi + 1)
    observed = np.array([(x < lo).sum(), *[(x == k).sum() for k in edges], (x > hi).sum()], float)
    p = np.array([stats.poisson.cdf(lo - 1, lam), *stats.poisson.pmf(edges, lam), stats.poisson.sf(hi, lam)])
    expected = p * len(x)
    # merge sparse bins (expected < 5) into their neighbours
    obs_m, exp_m, o, e = [], [], 0.0, 0.0
    for oi, ei in zip(observed, expected):
        o, e = o + oi, e + ei
        if e >= 5:
            obs_m.append(o), exp_m.append(e)
            o, e = 0.0, 0.0
    obs_m[-1] += o
    exp_m[-1] += e
    return float(stats.chisquare(obs_m, exp_m).pvalue)


@pytest.mark.parametrize("lam", [2.5, 40.0])
def test_os_key_poisson_matches_the_poisson_pmf_with_power(lam):
    draws = jax.jit(jax.vmap(lambda kk: poisson(kk, lam)))(jax.random.split(os_key(), 1500))
    x = np.asarray(draws)
    assert x.dtype == np.int32 and x.min() >= 0
    assert _chi2_pvalue(x, lam) > 1e-3
    assert _chi2_pvalue(x, 1.2 * lam) < 1e-6  # power: a 20% wrong rate is caught


def test_poisson_zero_rate_and_threefry_keys_unchanged():
    assert int(jax.jit(lambda k: poisson(k, 0.0))(os_key())) == 0
    key = jax.random.key(3)
    assert int(poisson(key, 17.0)) == int(jax.random.poisson(key, 17.0))
