"""TunaMH and DP-Fast MH with a step or bounds far beyond the posterior's scale: refused or ended with
BatchLimitError (they drew a Poisson(lambda + C M) batch of order 1e31 and ran for practically ever);
a sensible setting draws exactly what it drew before the limit existed."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dpposterior import mcmc

START = np.array([[0.5], [1.0]], np.float32)


def _kernels(model, proposal, **kw):
    return {
        "tuna_chi": mcmc.tuna_mh_kernel(model, proposal, **kw),
        "tuna_lam": mcmc.tuna_mh_kernel(model, proposal, lam=10.0, **kw),
        # batch_cap far beyond the paper's epsilon C / (6 c_max) ~ 10: the minibatch branch runs at any M
        "fast": mcmc.dp_fast_mh_kernel(model, proposal, epsilon=None, delta=None, batch_cap=1e40, private=False, **kw),
    }


@pytest.mark.parametrize("name", ["tuna_chi", "tuna_lam", "fast"])
def test_step_far_beyond_posterior_scale_is_refused_before_the_run(conj, name):
    # posterior sd ~ 0.08; a random walk of 1e29 without a box: lambda + C M ~ 1e31 (chi: lambda ~ 1e58)
    kernel = _kernels(conj.model(box=None), mcmc.random_walk(1e29))[name]
    with pytest.raises(mcmc.BatchLimitError, match=r"max_batch = 1000000") as err:
        mcmc.run_chain(kernel, START, 5, rng_key=0)
    msg = str(err.value)
    for word in (
        "C = ",
        "proposal step M = ",
        "lambda = ",
        "rescale the data",
        "smaller proposal step",
        "never truncated",
    ):
        assert word in msg, (word, msg)
    assert err.value.partial is None and err.value.step is None
    assert isinstance(err.value, ValueError)
    with pytest.raises(mcmc.BatchLimitError, match="typical step"):
        kernel.init(START[0])


def test_limit_is_the_documented_default_and_checked(conj):
    model = conj.model()
    prop = mcmc.random_walk(0.05)
    assert mcmc.tuna_mh_kernel(model, prop).config.max_batch == 10**6  # N = 100: max(10 N, 10^6)
    assert mcmc.tuna_mh_kernel(model, prop, max_batch=7).config.max_batch == 7
    for bad, exc in ((0, ValueError), (2**30 + 1, ValueError), (1e6, TypeError), (True, TypeError)):
        with pytest.raises(exc, match="max_batch"):
            mcmc.tuna_mh_kernel(model, prop, max_batch=bad)
        with pytest.raises(exc, match="max_batch"):
            mcmc.dp_fast_mh_kernel(model, prop, epsilon=None, delta=None, batch_cap=30.0, private=False, max_batch=bad)


def _rare_jumps(p_jump: float = 0.05) -> mcmc.Proposal:
    """A symmetric mixture: a random walk of 0.05, or (probability p_jump) a uniform point of the box [-3, 3]."""

    def sample(key, theta):
        k_mix, k_walk, k_unif = jax.random.split(key, 3)
        walk = theta + 0.05 * jax.random.normal(k_walk, theta.shape)
        jump = jax.random.uniform(k_unif, theta.shape, minval=-3.0, maxval=3.0)
        return jnp.where(jax.random.uniform(k_mix) < p_jump, jump, walk)

    return mcmc.Proposal(sample=sample)


def test_a_step_over_the_limit_ends_the_chain_and_keeps_the_samples_before_it(conj):
    # typical step M ~ 0.04: lambda + C M ~ 26 records, within max_batch = 300; a jump (M ~ 2) draws ~ 800
    kernel = mcmc.tuna_mh_kernel(conj.model(), _rare_jumps(), lam=10.0, max_batch=300)
    with pytest.raises(
        mcmc.BatchLimitError,
        match=r"step \d+ of chain \d would have evaluated more than "
        r"max_batch = 300",
    ) as err:
        mcmc.run_chain(kernel, START, 200, rng_key=0)
    t0, partial = err.value.step, err.value.partial
    assert 0 < t0 < 200
    assert partial.samples.shape == (2, t0, 1) and partial.nonprivate_info.accepted.shape == (2, t0)
    assert not partial.nonprivate_info.batch_overflow.any()
    assert partial.nonprivate_info.batch_size.max() <= 300
    assert partial.method == "tuna_mh" and partial.privacy.mechanism == "tuna_mh"
    # the default limit (10^6) lets the same chain run to the end
    res = mcmc.run_chain(mcmc.tuna_mh_kernel(conj.model(), _rare_jumps(), lam=10.0), START, 200, rng_key=0)
    assert not res.nonprivate_info.batch_overflow.any() and res.nonprivate_info.batch_size.max() > 300


def test_step_reports_the_overflow_and_rejects(conj):
    # the pure kernel API: a caller of step sees batch_overflow, and theta' is rejected untested
    # (max_batch named: without the limit this step ran for practically ever)
    kernel = mcmc.tuna_mh_kernel(conj.model(box=None), mcmc.random_walk(1e29), lam=10.0, max_batch=10**6)
    state = mcmc.MHState(jnp.asarray([0.5], jnp.float32), jnp.float32(conj.log_prior(jnp.asarray([0.5]))))
    new, info = jax.jit(kernel.step)(jax.random.key(1), state)
    assert bool(info.batch_overflow) and not bool(info.accepted) and int(info.batch_size) == 0
    assert float(new.position[0]) == 0.5


# draws of run_chain(kernel, START, 40, rng_key=0) before the limit existed (commit 75f8e3d): final
# positions of the two chains, then sum of batch sizes, accepted steps, full-batch steps (exact integers)
BEFORE = {
    "tuna_chi": ([0.5391806960105896, 0.8185327053070068], 1155, 48, 0),
    "fast": ([0.501006007194519, 1.0], 3169, 2, 20),
}


@pytest.mark.parametrize("name", sorted(BEFORE))
def test_sensible_setting_draws_what_it_drew_before(conj, name):
    prop = mcmc.random_walk(0.05)
    kernel = (
        mcmc.tuna_mh_kernel(conj.model(), prop)
        if name == "tuna_chi"
        else mcmc.dp_fast_mh_kernel(conj.model(), prop, epsilon=0.5, delta=1e-5, batch_cap=30.0)
    )
    res = mcmc.run_chain(kernel, START, 40, rng_key=0)
    info = res.nonprivate_info
    final, batch, accepted, full = BEFORE[name]
    np.testing.assert_allclose(res.samples[:, -1, 0], final, rtol=1e-6)
    assert (int(info.batch_size.sum()), int(info.accepted.sum()), int(info.used_full_batch.sum())) == (
        batch,
        accepted,
        full,
    )
    assert not info.batch_overflow.any()


def test_fast_mh_full_batch_steps_do_no_minibatch_work():
    # batch_cap 30: every step of a random walk of 1e29 takes the full-batch branch (N = 10 records). The
    # vmapped lax.cond of run_chain ran the minibatch loop too, with 2^31 - 1 candidates: it never ended.
    # A subprocess, so that a regression fails by its timeout instead of hanging the suite.
    code = textwrap.dedent("""
        import numpy as np, jax.numpy as jnp
        from dpposterior import mcmc
        x = np.linspace(-1, 1, 10).astype(np.float32)
        model = mcmc.energy_model(lambda t, r: jnp.abs(r - t[0]), x, bound_constants=np.ones(10),
                                  log_prior_fn=lambda t: -0.5 * jnp.sum(t ** 2))
        k = mcmc.dp_fast_mh_kernel(model, mcmc.random_walk(1e29), epsilon=None, delta=None, batch_cap=30.0,
                                   private=False)
        info = mcmc.run_chain(k, np.zeros((2, 1), np.float32), 20, rng_key=0).nonprivate_info
        assert info.used_full_batch.all() and (info.batch_size == 10).all() and not info.batch_overflow.any()
        print("ok")
    """)
    src = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(mcmc.__file__))))
    env = dict(os.environ, JAX_PLATFORMS="cpu", PYTHONPATH=os.pathsep.join([src, os.environ.get("PYTHONPATH", "")]))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]
