"""The trace-model simulator (papers/na-dpvi.txt eq. 22)."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from dpposterior.noise_aware.simulate import heuristic_learning_rate, simulate_trace
from dpposterior.releases.trace import DPVITrace


def test_simulated_trace_follows_the_model(tmp_path):
    phi_star = np.array([0.5, -1.0], np.float32)
    a = np.array([400.0, 2.0], np.float32)
    beta = np.array([1.0, 100.0], np.float32)
    tr = simulate_trace(
        jax.random.PRNGKey(0),
        phi_star,
        a,
        noise_multiplier=2.0,
        clip=2.0,
        beta=beta,
        num_steps=20_000,
        subsampling_sd=[0.0, 0.01],
    )
    assert isinstance(tr, DPVITrace) and tr.phi.shape == (20_000, 2) and tr.phi.dtype == np.float32
    assert tr.layout.num_latent == 1 and not tr.privacy.is_private
    lr = heuristic_learning_rate(2.0, 2.0, 20_000, 2, beta)
    np.testing.assert_allclose(tr.learning_rate, lr, rtol=1e-6)
    # phi_{t+1} = phi_t - lr g~_t (eq. 22 with the gradient kept), and the last iterate follows on
    np.testing.assert_allclose(tr.phi[1:], tr.phi[:-1] - tr.learning_rate * tr.grads[:-1], rtol=0, atol=1e-5)
    np.testing.assert_allclose(tr.final_phi, tr.phi[-1] - tr.learning_rate * tr.grads[-1], rtol=0, atol=1e-5)
    # the residuals g~ - q a (phi - phi*) have the model's noise sd: sqrt((sigma C / beta)^2 + s^2)
    resid = tr.grads - 0.1 * a * (tr.phi - phi_star)
    expect = np.sqrt((2.0 * 2.0 / beta) ** 2 + np.array([0.0, 0.01]) ** 2)
    np.testing.assert_allclose(resid.std(0), expect, rtol=0.02)
    assert np.all(np.abs(resid.mean(0)) < 4 * expect / np.sqrt(20_000))
    # the trace round-trips through save/load
    back = DPVITrace.load(tr.save(tmp_path / "sim.npz"))
    np.testing.assert_array_equal(back.grads, tr.grads)


def test_simulator_validates():
    key = jax.random.PRNGKey(0)
    with pytest.raises(ValueError, match="even length"):
        simulate_trace(key, np.zeros(3), 1.0)
    with pytest.raises(ValueError, match="finite and > 0"):
        simulate_trace(key, np.zeros(2), [1.0, -1.0])
    with pytest.raises(ValueError, match="subsampling_sd"):
        simulate_trace(key, np.zeros(2), 1.0, subsampling_sd=-1.0)
