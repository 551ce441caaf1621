"""Tests of the DP-SGD engine (issue 2, "DP-SGD engine" Done-when lines).

Statistical checks use fixed seeds, tolerances from the sample size, and a power twin that feeds a
deliberately wrong input and asserts that the check fails.
"""

from __future__ import annotations

import dataclasses
import json
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.flatten_util import ravel_pytree
from scipy import stats

from dpposterior.dpsgd import (
    DPSGDTrace,
    clip_gradients,
    debug_batch_sizes,
    default_capacity,
    dpsgd,
    make_dpsgd_run,
    per_example_gradients,
    poisson_sample_indices,
    step_keys,
)
from dpposterior.dpsgd import core
from dpposterior.dpsgd.core import tiling
from dpposterior.privacy import dpsgd_epsilon
from dpposterior.privacy.randomness import resolve_key
from dpposterior.privacy.noise import standard_normal

# ---------------------------------------------------------------------------------------------
# shared models (module level, so the engine's compiled programs are reused across tests)


def logistic(params, record):
    x, y = record
    z = jnp.dot(x, params["w"]) + params["b"]
    return jax.nn.softplus(z) - y * z


def linear(params, x):
    """Gradient = the record itself: g_i = x_i."""
    return jnp.dot(params, x)


def zero_grad(params, x):
    return 0.0 * jnp.sum(params) * jnp.sum(x)


def logistic_data(n=40, d=3, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d)).astype(np.float32)
    y = (rng.random(n) < 0.5).astype(np.float32)
    return x, y


def raw_key(seed):
    return resolve_key(seed)[0]


def within(est, expected, se, k=4.0):
    return abs(est - expected) <= k * se


# ---------------------------------------------------------------------------------------------
# per-example gradients and clipping


@pytest.mark.parametrize("d", [3, 20])  # both gradient layouts: (d, B) for small d, (B, d) else
def test_per_example_gradients_match_batch_size_one_loop(d):
    x, y = logistic_data(n=25, d=d, seed=1)
    params = {"w": jnp.linspace(-1.0, 1.0, d), "b": jnp.float32(0.3)}
    got = per_example_gradients(logistic, params, (x, y))
    assert got.shape == (25, d + 1)
    for i in range(25):
        g = jax.grad(logistic)(params, (jnp.asarray(x[i]), jnp.asarray(y[i])))
        np.testing.assert_allclose(got[i], np.asarray(ravel_pytree(g)[0]), atol=1e-5)


def test_clip_gradients_oracle_including_zero():
    c = 1.5
    rng = np.random.default_rng(2)
    g = (
        rng.normal(size=(9, 4)).astype(np.float32)
        * np.array([0, 1e-20, 0.1, 0.5, 1, 2, 5, 1e3, 1e15], np.float32)[:, None]
    )
    g[0] = 0.0
    g = np.vstack([g, g[6] / np.linalg.norm(g[6]) * c])  # a row exactly at the bound
    out = clip_gradients(g, c)
    assert np.all(np.isfinite(out))
    norms, clipped = np.linalg.norm(g.astype(np.float64), axis=1), np.linalg.norm(out, axis=1)
    np.testing.assert_allclose(clipped, np.minimum(norms, c), rtol=2e-6, atol=1e-30)
    np.testing.assert_array_equal(out[0], 0.0)  # the zero gradient: exactly zero, no NaN
    for i in range(1, len(g)):  # direction kept
        np.testing.assert_allclose(out[i] / clipped[i], g[i] / norms[i], rtol=1e-5, atol=1e-6)
    bad = clip_gradients(np.array([[np.nan, 1.0], [np.inf, 0.0], [3.0, 4.0]]), 1.0)
    np.testing.assert_allclose(bad, [[0, 0], [0, 0], [0.6, 0.8]], rtol=1e-6)


@pytest.mark.parametrize("d", [3, 20])
def test_engine_clips_beta_scaled_gradients_jointly(d):
    """q = 1, sigma = 0: g~ = sum_i clip(beta * x_i, C) / beta exactly, zero rows included."""
    rng = np.random.default_rng(3)
    c = 2.0
    x = rng.normal(size=(6, d)).astype(np.float32)
    norms = np.array([0.0, 0.1, 1.0, 3.0, 10.0, 1e4], np.float32)
    x *= (norms / np.linalg.norm(x, axis=1).clip(1e-9))[:, None]
    beta = np.linspace(0.5, 3.0, d).astype(np.float32)
    tr = dpsgd(
        linear,
        np.zeros(d, np.float32),
        x,
        noise_multiplier=0.0,
        clip=c,
        sampling_rate=1.0,
        num_steps=1,
        learning_rate=0.0,
        delta=1e-5,
        beta=beta,
        rng_key=0,
    )
    scaled = x.astype(np.float64) * beta
    norms = np.linalg.norm(scaled, axis=1)
    clipped = scaled * np.minimum(1.0, c / np.where(norms > 0, norms, 1.0))[:, None]
    assert np.all(np.linalg.norm(clipped, axis=1) <= c * (1 + 1e-12))
    np.testing.assert_allclose(tr.grads[0], clipped.sum(0) / beta, rtol=1e-5, atol=1e-5)


def test_non_finite_per_example_gradients_contribute_zero():
    x = np.array([[1.0, 2.0], [0.0, 1.0], [3.0, -1.0]], np.float32)

    def blows_up(params, rec):  # log(0) for the second record: its gradient is -inf / NaN
        return jnp.dot(params, rec) * jnp.log(rec[0])

    tr = dpsgd(
        blows_up,
        np.ones(2, np.float32),
        x,
        noise_multiplier=0.0,
        clip=100.0,
        sampling_rate=1.0,
        num_steps=1,
        learning_rate=0.0,
        delta=1e-5,
        rng_key=0,
    )
    expected = x[0] * np.log(x[0, 0]) + x[2] * np.log(x[2, 0])  # record 1's gradient: [NaN, -inf]
    assert np.all(np.isfinite(tr.grads))
    np.testing.assert_allclose(tr.grads[0], expected, rtol=1e-5)


# ---------------------------------------------------------------------------------------------
# plain SGD limit and the pure core


def test_sigma_zero_no_clipping_full_batch_is_plain_sgd_on_the_sum():
    x, y = logistic_data(n=30, d=3, seed=4)
    params = {"w": jnp.array([0.1, -0.2, 0.3]), "b": jnp.float32(0.0)}
    lr, t_steps = 0.05, 15
    tr = dpsgd(
        logistic,
        params,
        (x, y),
        noise_multiplier=0.0,
        clip=1e6,
        sampling_rate=1.0,
        num_steps=t_steps,
        learning_rate=lr,
        delta=1e-5,
        rng_key=0,
    )
    total_grad = jax.jit(jax.grad(lambda p: sum(logistic(p, (x[i], y[i])) for i in range(len(y)))))
    phi, unravel = ravel_pytree(params)
    for t in range(t_steps):
        g = ravel_pytree(total_grad(unravel(phi)))[0]
        np.testing.assert_allclose(tr.params[t], phi, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(tr.grads[t], g, rtol=1e-4, atol=1e-5)
        phi = phi - lr * g
    np.testing.assert_allclose(tr.final_params, phi, rtol=1e-5, atol=1e-5)
    assert tr.privacy.epsilon == math.inf and not tr.privacy.is_private
    np.testing.assert_allclose(tr.params_tree()["w"], tr.final_params[1:])  # ravel order: b, w


def test_make_dpsgd_run_vmaps_replicates_and_matches_dpsgd():
    x, y = logistic_data(n=40, d=3, seed=5)
    kw = dict(clip=1.0, sampling_rate=0.25, num_steps=12)
    ref = dpsgd(
        logistic,
        {"w": jnp.zeros(3), "b": jnp.float32(0.0)},
        (x, y),
        noise_multiplier=1.3,
        learning_rate=0.1,
        delta=1e-5,
        rng_key=7,
        **kw,
    )
    run = make_dpsgd_run(logistic, num_records=40, num_params=4, unravel=ref.unravel, **kw)
    keys = jnp.stack([raw_key(7), raw_key(8), raw_key(9)])
    phis, gs, final = jax.jit(jax.vmap(run, in_axes=(0, 0, 0, None, None, None)))(
        keys, jnp.zeros((3, 4)), (jnp.stack([x] * 3), jnp.stack([y] * 3)), 1.3, 0.1, 1.0
    )
    assert phis.shape == (3, 12, 4) and gs.shape == (3, 12, 4) and final.shape == (3, 4)
    np.testing.assert_allclose(phis[0], ref.params, atol=1e-5)
    np.testing.assert_allclose(gs[0], ref.grads, atol=1e-4)
    np.testing.assert_allclose(final[0], ref.final_params, atol=1e-5)
    assert not np.allclose(gs[0], gs[1])  # replicates draw their own samples and noise


# ---------------------------------------------------------------------------------------------
# noise


def _standardised_noise(rng_key, sigma=2.0, c=0.7, t_steps=500, progress=None):
    beta = np.array([1.0, 2.0, 0.5, 4.0], np.float32)
    tr = dpsgd(
        zero_grad,
        np.zeros(4, np.float32),
        np.ones((10, 1), np.float32),
        noise_multiplier=sigma,
        clip=c,
        sampling_rate=0.5,
        num_steps=t_steps,
        learning_rate=0.0,
        delta=1e-5,
        beta=beta,
        rng_key=rng_key,
        progress=progress,
    )
    return tr, tr.grads / (sigma * c / beta)


def test_noise_is_gaussian_with_scale_sigma_c_over_beta_and_ks_has_power():
    tr, z = _standardised_noise(11)
    flat = z.ravel().astype(np.float64)  # 2000 draws
    assert stats.kstest(flat, "norm").pvalue > 0.01
    for wrong in (2.0 / 3.0, 1.5):  # power: the same test rejects a scale off by 2/3 or 3/2
        assert stats.kstest(flat, "norm", args=(0.0, wrong)).pvalue < 1e-4
    # independent across coordinates and steps
    corr = np.corrcoef(z.T)
    assert np.all(np.abs(corr - np.eye(4)) < 4 / math.sqrt(len(z)))
    lag1 = np.corrcoef(z[:-1].ravel(), z[1:].ravel())[0, 1]
    assert abs(lag1) < 4 / math.sqrt(z.size)
    np.testing.assert_array_equal(tr.params, 0.0)


def test_noise_never_reused_across_steps_or_keys():
    _, z1 = _standardised_noise(11)
    _, z2 = _standardised_noise(12)
    _, z1_again = _standardised_noise(11)
    np.testing.assert_array_equal(z1, z1_again)  # a user key reproduces
    values = np.concatenate([z1.ravel(), z2.ravel()])
    assert len(np.unique(values)) == values.size  # no draw repeats within or across runs
    # the three keys of a step, and the keys of different steps, are all different
    keys = [np.asarray(jax.random.key_data(k)).tobytes() for t in range(5) for k in step_keys(raw_key(11), t)]
    assert len(set(keys)) == len(keys)


def test_os_seed_is_used_and_not_stored_when_no_key_given():
    a, _ = _standardised_noise(None)
    b, _ = _standardised_noise(None)
    assert a.privacy.seeded_by == "os" and not np.array_equal(a.grads, b.grads)
    names = {f.name for f in dataclasses.fields(DPSGDTrace)}
    assert not any("key" in n or "seed" in n for n in names)
    assert dict(a.privacy.details).keys() == {"clip", "sampling", "noise_tail_delta"}


# ---------------------------------------------------------------------------------------------
# Poisson sampling


def _assert_binomial(sizes, n, q):
    t = len(sizes)
    mean, var = q * n, n * q * (1 - q)
    mu4 = var * (1 + 3 * (n - 2) * q * (1 - q))  # fourth central moment of Binomial(n, q)
    se_mean = math.sqrt(var / t)
    se_var = math.sqrt((mu4 - var**2 * (t - 3) / (t - 1)) / t)
    ok_mean = within(sizes.mean(), mean, se_mean)
    ok_var = within(sizes.var(ddof=1), var, se_var)
    return ok_mean and ok_var


@pytest.mark.parametrize("sampling,capacity", [("packed", None), ("packed", 7), ("masked", None)])
def test_batch_sizes_are_binomial(sampling, capacity):
    n, q = 500, 0.1
    sizes = debug_batch_sizes(21, n, q, 4000, capacity=capacity, sampling=sampling)
    if capacity is not None:
        assert (sizes > capacity).mean() > 0.99  # overflow chunks really happened
    assert _assert_binomial(sizes, n, q)
    assert not _assert_binomial(sizes, n, 0.11)  # power: a 10% wrong rate is rejected
    assert not _assert_binomial(np.minimum(sizes, 55), n, q)  # ... and so is a truncated sample


def test_tiny_sampling_rate_gives_empty_batches_that_run():
    n, q = 2000, 1e-5
    sizes = debug_batch_sizes(22, n, q, 8000)
    assert (sizes == 0).mean() > 0.95
    assert within(sizes.mean(), n * q, math.sqrt(n * q * (1 - q) / len(sizes)))
    assert default_capacity(n, q) == 16
    # the engine runs; g~_t = (batch size of step t) + noise, so it equals the noise on empty steps
    x = np.ones((n, 1), np.float32)
    tr = dpsgd(
        linear,
        np.zeros(1, np.float32),
        x,
        noise_multiplier=1.0,
        clip=1.0,
        sampling_rate=q,
        num_steps=30,
        learning_rate=0.1,
        delta=1e-5,
        rng_key=22,
        accountant="rdp",
    )
    noise = jax.jit(jax.vmap(lambda t: standard_normal(step_keys(raw_key(22), t)[2], (1,)).astype(jnp.float32)))
    np.testing.assert_allclose(tr.grads, sizes[:30, None] + np.asarray(noise(jnp.arange(30))), rtol=1e-5, atol=1e-6)


def test_each_record_enters_with_probability_q_including_first_and_last():
    """One-hot data: g~_t is the inclusion vector of step t (sigma = 0)."""
    n, q, t_steps = 20, 0.3, 3000
    tr = dpsgd(
        linear,
        np.zeros(n, np.float32),
        np.eye(n, dtype=np.float32),
        noise_multiplier=0.0,
        clip=10.0,
        sampling_rate=q,
        num_steps=t_steps,
        learning_rate=0.0,
        delta=1e-5,
        capacity=2,
        rng_key=23,
    )
    inc = tr.grads
    np.testing.assert_array_equal(np.unique(inc), [0.0, 1.0])
    se = math.sqrt(q * (1 - q) / t_steps)
    freq = inc.mean(0)
    assert np.all(np.abs(freq - q) <= 4 * se), freq
    pair = (inc[:, 0] * inc[:, n - 1]).mean()  # first and last record independent
    assert within(pair, q * q, math.sqrt(q * q * (1 - q * q) / t_steps))
    assert not np.all(np.abs(freq - (q + 0.05)) <= 4 * se)  # power twin


def test_engine_sums_exactly_the_true_sample_with_overflow_chunks():
    rng = np.random.default_rng(24)
    n, q, cap = 300, 0.2, 5
    x = rng.normal(size=(n, 3)).astype(np.float32)
    tr = dpsgd(
        linear,
        np.zeros(3, np.float32),
        x,
        noise_multiplier=0.0,
        clip=1e6,
        sampling_rate=q,
        num_steps=25,
        learning_rate=0.0,
        delta=1e-5,
        capacity=cap,
        rng_key=24,
    )
    raw = raw_key(24)
    for t in range(25):
        idx = poisson_sample_indices(step_keys(raw, t)[0], n, q, capacity=cap)
        assert len(idx) > 5 * cap and np.all(np.diff(idx) > 0)
        np.testing.assert_allclose(tr.grads[t], x[idx].sum(0), rtol=1e-5, atol=1e-4)


def test_tiled_chunks_with_padding_and_overflow_sum_the_true_sample(monkeypatch):
    """Tiles of 500 x d floats: a chunk of 999 records is processed as 2 tiles (one padded slot)."""
    n, d, q, cap = 2000, 300, 0.5, 999
    monkeypatch.setattr(core, "TILE_FLOATS", 500 * d)  # read at trace time; this config is unique
    assert tiling(d, cap) == (2, 500)
    x = np.random.default_rng(29).normal(size=(n, d)).astype(np.float32)
    tr = dpsgd(
        linear,
        np.zeros(d, np.float32),
        x,
        noise_multiplier=0.0,
        clip=1e6,
        sampling_rate=q,
        num_steps=6,
        learning_rate=0.0,
        delta=1e-5,
        capacity=cap,
        rng_key=29,
    )
    raw = raw_key(29)
    sizes = []
    for t in range(6):
        idx = poisson_sample_indices(step_keys(raw, t)[0], n, q, capacity=cap)
        sizes.append(len(idx))
        np.testing.assert_allclose(tr.grads[t], x[idx].sum(0), rtol=1e-4, atol=2e-3)
    assert max(sizes) > cap  # some step needed an overflow chunk


@pytest.mark.parametrize("sampling", ["packed", "masked"])
def test_step_equals_direct_reference_given_the_same_sample(sampling):
    """The full formula: g~ = (sum_i clip(beta g_i, C) + sigma C xi) / beta, with clipping active."""
    x, y = logistic_data(n=60, d=3, seed=25)
    params = {"w": jnp.array([2.0, -1.0, 0.5]), "b": jnp.float32(0.2)}
    beta = np.array([0.5, 1.0, 2.0, 3.0], np.float32)
    sigma, c, q, lr = 0.8, 0.3, 0.4, 0.05
    tr = dpsgd(
        logistic,
        params,
        (x, y),
        noise_multiplier=sigma,
        clip=c,
        sampling_rate=q,
        num_steps=5,
        learning_rate=lr,
        delta=1e-5,
        beta=beta,
        rng_key=25,
        sampling=sampling,
    )
    raw, unravel = raw_key(25), tr.unravel
    grads = jax.jit(
        jax.vmap(lambda phi, xi, yi: ravel_pytree(jax.grad(logistic)(unravel(phi), (xi, yi)))[0], in_axes=(None, 0, 0))
    )
    for t in range(5):
        ks, _, kn = step_keys(raw, t)
        idx = poisson_sample_indices(ks, 60, q, sampling=sampling)
        g = np.asarray(grads(jnp.asarray(tr.params[t]), x[idx], y[idx]), np.float64)
        sg = g * beta
        sg *= np.minimum(1.0, c / np.linalg.norm(sg, axis=1))[:, None]
        xi = np.asarray(standard_normal(kn, (4,)), np.float64)
        np.testing.assert_allclose(tr.grads[t], (sg.sum(0) + sigma * c * xi) / beta, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(
            tr.params[t] - lr * tr.grads[t], tr.params[t + 1] if t < 4 else tr.final_params, rtol=1e-6, atol=1e-6
        )


def test_masked_and_packed_give_the_same_distribution():
    rng = np.random.default_rng(26)
    n, q, t_steps = 100, 0.3, 3000
    x = rng.uniform(0.5, 2.0, size=(n, 1)).astype(np.float32)
    mean, var = q * x.sum(), q * (1 - q) * (x**2).sum()
    res = {}
    for sampling in ("packed", "masked"):
        g = dpsgd(
            linear,
            np.zeros(1, np.float32),
            x,
            noise_multiplier=0.0,
            clip=1e6,
            sampling_rate=q,
            num_steps=t_steps,
            learning_rate=0.0,
            delta=1e-5,
            rng_key=26,
            sampling=sampling,
        ).grads[:, 0]
        res[sampling] = g
        assert within(g.mean(), mean, math.sqrt(var / t_steps))
        assert within(g.var(ddof=1), var, var * math.sqrt(2.0 / t_steps) * 1.1)
    assert not np.array_equal(res["packed"], res["masked"])  # different draws, same law
    ks = stats.ks_2samp(res["packed"], res["masked"])
    assert ks.pvalue > 0.001


# ---------------------------------------------------------------------------------------------
# keys shared within a step, the release, the jit cache


def test_loss_key_is_one_per_step_shared_by_all_records():
    def mc_loss(params, x, key):
        return jnp.dot(params, x) * jax.random.normal(key, ())

    x = np.array([[1.0, 2.0], [3.0, 1.0], [0.5, 0.5]], np.float32)
    tr = dpsgd(
        mc_loss,
        np.zeros(2, np.float32),
        x,
        noise_multiplier=0.0,
        clip=1e6,
        sampling_rate=1.0,
        num_steps=4,
        learning_rate=0.0,
        delta=1e-5,
        rng_key=27,
        loss_needs_key=True,
    )
    raw = raw_key(27)
    for t in range(4):
        z = float(jax.random.normal(step_keys(raw, t)[1], ()))
        np.testing.assert_allclose(tr.grads[t], z * x.sum(0), rtol=1e-5)


def test_release_contents_privacy_and_round_trip(tmp_path):
    x, y = logistic_data(n=40, d=3, seed=28)
    params = {"w": jnp.zeros(3), "b": jnp.float32(0.0)}
    lr = {"w": jnp.full(3, 0.1), "b": jnp.float32(0.01)}
    tr = dpsgd(
        logistic,
        params,
        (x, y),
        noise_multiplier=1.1,
        clip=1.0,
        sampling_rate=0.25,
        num_steps=12,
        learning_rate=lr,
        delta=1e-5,
        beta={"w": jnp.ones(3), "b": 2.0},
        rng_key=7,
        accountant="rdp",
    )
    assert {f.name for f in dataclasses.fields(tr)} == {
        "params",
        "grads",
        "final_params",
        "learning_rate",
        "beta",
        "clip",
        "noise_multiplier",
        "sampling_rate",
        "num_steps",
        "num_records",
        "privacy",
        "unravel",
    }  # no batch sizes, no counts
    assert tr.params.dtype == np.float32 and tr.params.shape == (12, 4) and tr.grads.shape == (12, 4)
    np.testing.assert_array_equal(tr.learning_rate, np.array([0.01, 0.1, 0.1, 0.1], np.float32))
    np.testing.assert_array_equal(tr.beta, [2.0, 1.0, 1.0, 1.0])
    np.testing.assert_array_equal(tr.params[0], 0.0)
    np.testing.assert_allclose(tr.params[1:], tr.params[:-1] - tr.learning_rate * tr.grads[:-1], atol=1e-7)
    p = tr.privacy
    assert p.epsilon == pytest.approx(dpsgd_epsilon(1.1, 1e-5, 0.25, 12, "rdp"))
    assert (p.delta, p.neighbouring, p.mechanism, p.accountant, p.seeded_by) == (
        1e-5,
        "add_remove",
        "poisson_subsampled_gaussian",
        "rdp",
        "user",
    )
    assert (p.noise_multiplier, p.sampling_rate, p.num_steps) == (1.1, 0.25, 12)
    with pytest.raises(ValueError):
        tr.params[0, 0] = 1.0  # read-only
    path = tmp_path / "trace.npz"
    tr.save(path)
    back = DPSGDTrace.load(path, unravel=tr.unravel)
    assert back == tr and back.privacy == tr.privacy
    assert DPSGDTrace.load(path) == tr  # unravel is not part of equality

    # the file is checked: truncated, modified, or rewritten with wrong fields, it is an error naming it
    raw = path.read_bytes()
    (tmp_path / "cut.npz").write_bytes(raw[: len(raw) // 2])
    with pytest.raises(ValueError, match="cut.npz is not a readable DP-SGD trace file"):
        DPSGDTrace.load(tmp_path / "cut.npz")
    flipped = bytearray(raw)
    flipped[raw.index(tr.grads.tobytes()[:16]) + 5] ^= 0xFF  # a byte inside the grads array
    (tmp_path / "flip.npz").write_bytes(bytes(flipped))
    with pytest.raises(ValueError, match="flip.npz is not a readable DP-SGD trace file.*CRC"):
        DPSGDTrace.load(tmp_path / "flip.npz")  # the zip's CRC; the checksum catches a consistent rewrite
    from dpposterior._io import write_checked_npz

    arrays = {n: getattr(tr, n) for n in ("params", "grads", "final_params", "learning_rate", "beta")}
    with np.load(path) as z:
        meta, checksum = json.loads(z["metadata"].tobytes()), z["checksum"]
    write_checked_npz(tmp_path / "swap.npz", {**arrays, "grads": tr.grads[::-1].copy()}, json.dumps(meta))
    with np.load(tmp_path / "swap.npz") as z:
        swapped = {**z, "checksum": checksum}
    np.savez(tmp_path / "swap.npz", **swapped)  # an edit that kept the old checksum
    with pytest.raises(ValueError, match="checksum mismatch"):
        DPSGDTrace.load(tmp_path / "swap.npz")
    for change, match in [
        ({"num_steps": 11}, r"params must have shape \(num_steps=11"),
        ({"clip": -1.0}, "need clip > 0"),
        ({"version": 2}, "format version 2"),
        ({"privacy": None}, "invalid DP-SGD trace contents"),
    ]:
        write_checked_npz(tmp_path / "bad.npz", arrays, json.dumps({**meta, **change}))
        with pytest.raises(ValueError, match=match):
            DPSGDTrace.load(tmp_path / "bad.npz")
    write_checked_npz(tmp_path / "nan.npz", {**arrays, "grads": np.full_like(tr.grads, np.nan)}, json.dumps(meta))
    with pytest.raises(ValueError, match="'grads' contains NaN"):
        DPSGDTrace.load(tmp_path / "nan.npz")
    with pytest.raises(ValueError, match="is a folder"):
        tr.save(tmp_path)
    # a file of the unreleased format before the checksum (a "meta" entry) is refused, saying so
    legacy = {k: v for k, v in meta.items() if k not in ("format", "version")}
    np.savez(tmp_path / "old.npz", **arrays, meta=np.array(json.dumps(legacy)))
    with pytest.raises(ValueError, match="never released .* reads format version 1 only: run the release again"):
        DPSGDTrace.load(tmp_path / "old.npz")


def test_progress_bar_runs(capsys):
    tr, _ = _standardised_noise(1, progress=True)
    assert np.all(tr.grads != 0)
    assert "500/500" in capsys.readouterr().err


def test_second_call_with_the_same_loss_does_not_recompile():
    traces = {"n": 0}

    def counted(params, x):
        traces["n"] += 1  # runs only while JAX traces
        return jnp.dot(params, x)

    x = np.ones((50, 2), np.float32)
    kw = dict(clip=1.0, sampling_rate=0.2, num_steps=20, delta=1e-5)
    dpsgd(counted, np.zeros(2, np.float32), x, noise_multiplier=1.0, learning_rate=0.1, rng_key=1, **kw)
    first = traces["n"]
    assert first > 0
    # other runtime values: sigma, learning rate, beta, clip, key, data values
    dpsgd(
        counted,
        np.ones(2, np.float32),
        2 * x,
        noise_multiplier=2.0,
        learning_rate=0.3,
        rng_key=2,
        beta=[1.0, 2.0],
        **{**kw, "clip": 3.0},
    )
    assert traces["n"] == first
    # a different number of steps within the same compiled chunk length (32) reuses it too
    dpsgd(
        counted,
        np.zeros(2, np.float32),
        x,
        noise_multiplier=1.0,
        learning_rate=0.1,
        rng_key=1,
        **{**kw, "num_steps": 17},
    )
    assert traces["n"] == first


# ---------------------------------------------------------------------------------------------
# errors at the boundary

X2 = np.ones((10, 2), np.float32)
GOOD = dict(noise_multiplier=1.0, clip=1.0, sampling_rate=0.5, num_steps=3, learning_rate=0.1, delta=1e-5, rng_key=0)


@pytest.mark.parametrize(
    "change,exc,match",
    [
        (dict(noise_multiplier=-1.0), ValueError, r"noise_multiplier must be a finite number >= 0"),
        (dict(noise_multiplier=float("nan")), ValueError, r"noise_multiplier must be a finite number >= 0"),
        (dict(clip=0.0), ValueError, r"clip must be a finite number > 0"),
        (dict(clip=float("inf")), ValueError, r"clip must be a finite number > 0"),
        (dict(sampling_rate=0.0), ValueError, r"sampling_rate must lie in \(0, 1\]"),
        (dict(sampling_rate=1.5), ValueError, r"sampling_rate must lie in \(0, 1\]"),
        (dict(num_steps=0), ValueError, r"num_steps must be an integer >= 1"),
        (dict(num_steps=10.0), TypeError, r"num_steps must be an integer >= 1"),
        (dict(delta=0.0), ValueError, r"delta must lie in \(0, 1\)"),
        (dict(delta=1.0), ValueError, r"delta must lie in \(0, 1\)"),
        (dict(learning_rate=float("nan")), ValueError, r"learning_rate must be a finite number >= 0"),
        (dict(learning_rate=-0.1), ValueError, r"learning_rate must be a finite number >= 0"),
        (dict(learning_rate=[0.1, 0.2, 0.3]), ValueError, r"learning_rate .* flat vector of length 2"),
        (dict(beta=[1.0, 0.0]), ValueError, r"beta must be a finite number > 0"),
        (dict(beta=[1.0, float("inf")]), ValueError, r"beta must be a finite number > 0"),
        (dict(capacity=0), ValueError, r"capacity must be an integer >= 1"),
        (dict(capacity=5, sampling="masked"), ValueError, r"capacity applies to sampling='packed' only"),  # was ignored
        (dict(sampling="shuffled"), ValueError, r"sampling must be one of \('packed', 'masked'\)"),
        (dict(accountant="gdp"), ValueError, r"accountant must be one of \('pld', 'rdp'\)"),
        (dict(chunk_steps=0), ValueError, r"chunk_steps must be an integer >= 1"),
        (dict(rng_key="seed"), TypeError, r"rng_key must be None"),
        (dict(loss_needs_key=1), TypeError, r"loss_needs_key must be True or False"),
        (dict(progress="yes"), TypeError, r"progress must be True or False"),
    ],
)
def test_invalid_arguments_are_refused(change, exc, match):
    with pytest.raises(exc, match=match):
        dpsgd(linear, np.zeros(2, np.float32), X2, **{**GOOD, **change})


@pytest.mark.parametrize(
    "params,data,exc,match",
    [
        (np.zeros(2, np.float32), (), ValueError, r"non-empty tuple of arrays"),
        (np.zeros(2, np.float32), np.ones((0, 2)), ValueError, r"at least one record"),
        (
            np.zeros(2, np.float32),
            (X2, np.ones(9)),
            ValueError,
            r"share their first axis \(records\): got lengths \[10, 9\]",
        ),
        (np.zeros(2, np.float32), np.array([[1.0, np.nan]] * 10), ValueError, r"data must not contain NaN or inf"),
        (np.zeros(2, np.float32), (X2, np.full(10, np.inf)), ValueError, r"data\[1\] must not contain NaN or inf"),
        (np.zeros(2, np.float32), np.array(["a"] * 10), TypeError, r"data must hold real numbers"),
        (np.zeros(2, np.float32), np.float32(1.0), ValueError, r"leading record axis"),
        (np.array([0.0, np.nan]), X2, ValueError, r"params must be finite"),
        (np.zeros(2, np.int32), X2, TypeError, r"params must hold floating-point arrays"),
        ({}, X2, ValueError, r"params must contain at least one array"),
    ],
)
def test_invalid_params_and_data_are_refused(params, data, exc, match):
    with pytest.raises(exc, match=match):
        dpsgd(linear, params, data, **GOOD)


def test_loss_errors():
    with pytest.raises(TypeError, match=r"loss must be a callable"):
        dpsgd("loss", np.zeros(2, np.float32), X2, **GOOD)
    with pytest.raises(ValueError, match=r"loss must return a scalar for one record, got shape \(2,\)"):
        dpsgd(lambda p, x: p * x, np.zeros(2, np.float32), X2, **GOOD)


# ---------------------------------------------------------------------------------------------
# pytree parameters with per-leaf settings, data of several dtypes: one step against plain numpy.
# A learning rate or beta given as one number per leaf ({"w": 0.1, "b": 0.01},
# the Optax spelling) was refused with "got dtype object"; a data tuple holding a tuple of arrays was
# stacked by numpy into one array, so with N = 2 each record silently got a whole column.


def pytree_loss(p, rec):
    x, k, m, z = rec  # float32 (3,), int32 (), bool (), float64 (2, 2)
    a = jnp.array([1.0, -0.5])
    return (
        jnp.sum(p["w"] * jnp.outer(a, x))
        + p["b"] * k
        + 0.5 * p["b"] ** 2
        + m * jnp.sum(p["t"][0] * z[0])
        + p["t"][1] * jnp.sum(z)
    )


def test_pytree_params_with_per_leaf_learning_rate_and_beta_match_numpy():
    rng = np.random.default_rng(0)
    n, clip, t_steps = 3, 1.3, 3
    x = rng.normal(size=(n, 3)).astype(np.float32)
    k = np.array([1, -2, 3], np.int32)
    m = np.array([True, False, True])
    z = rng.normal(size=(n, 2, 2))
    params = {"w": np.full((2, 3), 0.3, np.float32), "b": np.float32(0.7), "t": (np.array([0.1, -0.2]), 1.5)}
    lr = {"w": 0.01, "b": 0.1, "t": (np.array([0.2, 0.3]), 0.05)}  # numbers for whole leaves
    beta = {"w": 2.0, "b": 0.5, "t": (4.0, 3.0)}

    def flat(b, t0, t1, w):  # ravel_pytree's order: dict keys sorted (b, t, w), tuples in order
        return np.concatenate([np.ravel(b), np.ravel(t0), np.ravel(t1), np.ravel(w)]).astype(np.float64)

    lr_f = flat(0.1, [0.2, 0.3], 0.05, np.full(6, 0.01))
    beta_f = flat(0.5, [4.0, 4.0], 3.0, np.full(6, 2.0))
    phi = flat(0.7, [0.1, -0.2], 1.5, np.full(6, 0.3))
    a = np.array([1.0, -0.5])
    tr = dpsgd(
        pytree_loss,
        params,
        (x, k, m, z),
        noise_multiplier=0.0,
        clip=clip,
        sampling_rate=1.0,
        num_steps=t_steps,
        learning_rate=lr,
        beta=beta,
        delta=1e-5,
        rng_key=0,
        capacity=2,
    )
    np.testing.assert_allclose(tr.learning_rate, lr_f, rtol=1e-6)
    np.testing.assert_allclose(tr.beta, beta_f, rtol=1e-6)
    for t in range(t_steps):
        total = np.zeros(10)
        for i in range(n):  # the analytic per-record gradient, scaled by beta and clipped jointly
            g = flat(k[i] + phi[0], m[i] * z[i][0], z[i].sum(), np.outer(a, x[i]))
            s = beta_f * g
            total += s * min(1.0, clip / np.linalg.norm(s))
        np.testing.assert_allclose(tr.params[t], phi, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(tr.grads[t], total / beta_f, rtol=1e-5, atol=1e-6)
        phi = phi - lr_f * total / beta_f
    np.testing.assert_allclose(tr.final_params, phi, rtol=1e-5, atol=1e-6)
    # the flat vectors in ravel order give the same run
    flat_run = dpsgd(
        pytree_loss,
        params,
        (x, k, m, z),
        noise_multiplier=0.0,
        clip=clip,
        sampling_rate=1.0,
        num_steps=t_steps,
        learning_rate=lr_f,
        beta=beta_f,
        delta=1e-5,
        rng_key=0,
    )
    np.testing.assert_array_equal(flat_run.grads, tr.grads)


@pytest.mark.parametrize(
    "lr,exc,match",
    [
        (
            {"w": np.ones(3), "b": 0.1, "t": (0.1, 0.1)},
            ValueError,
            r"leaf of shape \(3,\) at \"\['w'\]\".*shape \(2, 3\)",
        ),
        ({"w": 0.1, "b": 0.1}, ValueError, r"learning_rate .*pytree of structure .*params have"),
        ({"w": 0.1, "b": 0.1, "t": [0.1, 0.1]}, ValueError, r"learning_rate .*pytree of structure"),
        ({"w": 0.1, "b": np.True_, "t": (0.1, 0.1)}, TypeError, r"learning_rate .*boolean leaf"),
    ],
)
def test_per_leaf_learning_rate_errors_name_the_leaf(lr, exc, match):
    params = {"w": np.zeros((2, 3), np.float32), "b": np.float32(0.0), "t": (np.zeros(2), 0.0)}
    data = (np.ones((2, 3), np.float32), np.ones(2, np.int32), np.ones(2, bool), np.ones((2, 2, 2)))
    with pytest.raises(exc, match=match):
        dpsgd(pytree_loss, params, data, **{**GOOD, "learning_rate": lr})


def first_linear(p, rec):
    return jnp.dot(p, rec[0])


def test_nested_data_containers_are_refused_not_stacked():
    x, y, w = np.ones((2, 2), np.float32), np.array([0.0, 1.0]), np.array([5.0, 6.0])

    def weighted(p, rec):
        xi, (yi, wi) = rec
        return wi * (jnp.dot(p, xi) - yi) ** 2

    for data, what in (
        ((x, (y, w)), r"data\[1\] is a tuple of 2 arrays"),
        ({"x": x, "y": y}, r"data is a dict with keys \['x', 'y'\]"),
        ([x, {"y": y}], r"data\[1\] is a dict"),
    ):
        with pytest.raises(TypeError, match=r"one array or a flat tuple of arrays.*" + what):
            dpsgd(weighted, np.zeros(2), data, **{**GOOD, "sampling_rate": 1.0})
    # array-likes of numbers stay accepted: a list column, a tuple of tuples
    tr = dpsgd(
        first_linear,
        np.zeros(2),
        (x, [0.0, 1.0], ((1, 2), (3, 4))),
        noise_multiplier=0.0,
        clip=10.0,
        sampling_rate=1.0,
        num_steps=1,
        learning_rate=0.1,
        delta=1e-5,
        rng_key=0,
    )
    np.testing.assert_allclose(tr.final_params, [-0.2, -0.2])


def test_python_rows_are_refused_not_read_as_columns():
    # [[x0, y0], [x1, y1], [x2, y2]] was read as 3 columns of 2 records (N = 2)
    rows = [[1.0, 0.0], [2.0, 1.0], [3.0, 1.0]]
    for data in (rows, tuple(map(tuple, rows)), [rows[0]]):
        with pytest.raises(TypeError, match=r"data\[0\] is a Python (list|tuple): .*cannot tell rows .*np\.asarray"):
            dpsgd(first_linear, np.zeros(2), data, **{**GOOD, "sampling_rate": 1.0})
    with pytest.raises(TypeError, match=r"data\[1\] is a Python number: .*np\.asarray\(data\)"):
        dpsgd(first_linear, np.zeros(2), (np.ones((2, 2)), 3.0), **{**GOOD, "sampling_rate": 1.0})
    # the arrays the message names run, with N = 3 records
    tr = dpsgd(
        first_linear,
        np.zeros(2),
        (np.asarray(rows),),
        noise_multiplier=0.0,
        clip=100.0,
        sampling_rate=1.0,
        num_steps=1,
        learning_rate=0.1,
        delta=1e-5,
        rng_key=0,
    )
    np.testing.assert_allclose(tr.final_params, [-0.6, -0.2])


def test_make_dpsgd_run_refuses_a_capacity_with_masked_sampling():
    # was silently ignored (the masked engine has no buffer)
    with pytest.raises(ValueError, match=r"capacity applies to sampling='packed' only"):
        make_dpsgd_run(
            linear,
            num_records=10,
            num_params=2,
            clip=1.0,
            sampling_rate=0.5,
            num_steps=2,
            capacity=4,
            sampling="masked",
        )
