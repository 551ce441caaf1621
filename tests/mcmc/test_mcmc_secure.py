"""Secure mode of the DP MH chains: per-iteration keys from the OS CSPRNG, no key accepted."""

from __future__ import annotations

import numpy as np
import pytest

from dpposterior import mcmc


def test_secure_chain_refuses_a_key_and_records_secure(conj):
    kernel = mcmc.penalty_kernel(conj.model(), mcmc.random_walk(0.05), epsilon=0.5, delta=1e-5)
    with pytest.raises(ValueError, match="secure=True"):
        mcmc.run_chain(kernel, np.array([0.0]), 20, rng_key=1, secure=True)
    with pytest.raises(TypeError, match="secure"):
        mcmc.run_chain(kernel, np.array([0.0]), 20, secure="yes")
    a = mcmc.run_chain(kernel, np.zeros((2, 1)), 40, secure=True)
    b = mcmc.run_chain(kernel, np.zeros((2, 1)), 40, secure=True)
    assert a.privacy.seeded_by == "secure" and a.samples.shape == (2, 40, 1)
    assert not np.array_equal(a.samples, b.samples)  # fresh OS randomness every run
    assert not np.array_equal(a.samples[0], a.samples[1])  # and every chain
    keyed = mcmc.run_chain(kernel, np.zeros((2, 1)), 40, rng_key=3)
    assert keyed.privacy.seeded_by == "user" and keyed.privacy.epsilon == a.privacy.epsilon


def test_secure_dp_fast_mh_runs(conj):
    kernel = mcmc.dp_fast_mh_kernel(conj.model(), mcmc.random_walk(0.05), epsilon=0.5, delta=1e-5, batch_cap=50.0)
    res = mcmc.run_chain(kernel, np.zeros((1, 1)), 30, secure=True)
    assert res.privacy.seeded_by == "secure" and np.isfinite(res.samples).all()


def test_secure_chain_reads_every_draw_from_os_urandom(conj, monkeypatch):
    import os

    from dpposterior.privacy import secure

    calls = []
    real = os.urandom
    monkeypatch.setattr(secure.os, "urandom", lambda n: calls.append(n) or real(n))
    kernel = mcmc.dp_fast_mh_kernel(conj.model(), mcmc.random_walk(0.05), epsilon=0.5, delta=1e-5, batch_cap=50.0)
    t = 25
    mcmc.run_chain(kernel, np.zeros((1, 1)), t, secure=True)
    # at least the proposal, the minibatch count, the Gaussian noise and the acceptance uniform of
    # every iteration come from the OS (no threefry stream in between)
    assert len(calls) >= 4 * t
