"""The Laplace solver: a true joint mode and the inverse Hessian there, checked in float64."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dpposterior.noise_aware as na
from dpposterior.noise_aware.laplace import laplace_sample
from dpposterior.noise_aware import model as M


@pytest.mark.parametrize("subsampling_noise", [False, True])
def test_laplace_mode_and_covariance(small_trace, subsampling_noise):
    st = na.sufficient_statistics(small_trace.phi, small_trace.grads, 0.2)
    ns = np.asarray(M.noise_sd_of(small_trace.noise_multiplier, small_trace.clip, small_trace.beta), np.float64)
    pr32 = na.trace_priors(st.astype(jnp.float32), jnp.asarray(ns, jnp.float32), 0.1)
    res = na.laplace_posterior(
        st.astype(jnp.float32), pr32, jnp.asarray(ns, jnp.float32), 0.1, subsampling_noise=subsampling_noise
    )
    assert bool(jnp.all(res.converged))
    with jax.enable_x64(True):
        st64 = st.astype(jnp.float64)
        pr = na.TracePriors(*(jnp.asarray(x, jnp.float64) for x in pr32))

        def f(x, stj, prj, nsj):
            s = jnp.exp(x[2]) if subsampling_noise else None
            jac = x[2] if subsampling_noise else 0.0
            return M.log_joint_parts(stj, prj, nsj, 0.1, x[0], x[1], s)[0] + jac

        x = [np.asarray(res.phi_star_mode, np.float64) - np.asarray(st.phi_mean), np.asarray(res.h_mode, np.float64)]
        if subsampling_noise:
            x.append(np.log(np.asarray(res.s_mode, np.float64)))
        x = jnp.asarray(np.stack(x, axis=1))
        hess = np.asarray(jax.jit(jax.vmap(jax.hessian(f)))(x, st64, pr, jnp.asarray(ns)))
        grad = np.asarray(jax.jit(jax.vmap(jax.grad(f)))(x, st64, pr, jnp.asarray(ns)))
    for j in range(6):
        cov = -np.linalg.inv(hess[j])
        sd = np.sqrt(np.diag(cov))
        # at the mode: the gradient is zero to within 2% of a posterior sd in each direction
        assert np.all(np.abs(grad[j] * sd) < 2e-2), (j, grad[j] * sd)
        np.testing.assert_allclose(np.asarray(res.cov[j]), cov, rtol=2e-2, atol=2e-2 * np.outer(sd, sd).max())
        np.testing.assert_allclose(float(res.phi_star_sd[j]), sd[0], rtol=1e-2)
    if not subsampling_noise:
        _check_draws(res)


def _check_draws(res):
    x = np.asarray(laplace_sample(res, jax.random.PRNGKey(0), 20_000), np.float64)
    assert x.shape == (20_000, 6)
    mode, sd = np.asarray(res.phi_star_mode), np.asarray(res.phi_star_sd)
    assert np.all(np.abs(x.mean(0) - mode) < 5 * sd / np.sqrt(20_000))
    assert np.all(np.abs(x.std(0) / sd - 1) < 0.03)
