"""Circular latents: a fit that reaches the seam of the (-pi, pi) mapping is warned about."""

from __future__ import annotations

import math
import warnings

import numpy as np
import numpyro
import numpyro.distributions as dist
import pytest

from dpposterior.vi import dpvi
from dpposterior.vi._dpvim import dpvim
from dpposterior.vi.circular import SEAM_MASS, seam_mass, warn_if_near_seam
from dpposterior.releases.family import inverse_scale
from dpposterior.vi.model_inspect import inspect_model


def angle_model(x):
    mu = numpyro.sample("mu", dist.VonMises(0.0, 0.5))
    numpyro.sample("s", dist.HalfNormal(1.0))
    with numpyro.plate("n", x.shape[0]):
        numpyro.sample("x", dist.VonMises(mu, 4.0), obs=x)


def _angles(centre: float, n: int = 300, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.angle(np.exp(1j * (centre + rng.vonmises(0.0, 4.0, n)))).astype(np.float32)


@pytest.fixture(scope="module")
def layout():
    return inspect_model(angle_model, (_angles(0.0, 10),), {})


def _phi(layout, u_mu: float, sd_mu: float) -> np.ndarray:
    t = layout.sites[layout.names.index("mu")].transform()
    n = layout.num_latent
    mu = np.zeros(n)
    mu[layout.site_slice("mu")] = u_mu
    return np.concatenate([mu, np.full(n, float(inverse_scale(np.float32(sd_mu))))]).astype(np.float32), t


def test_seam_mass_of_q_near_and_far_from_the_seam(layout):
    phi, t = _phi(layout, float(t_inv(layout, 2.0)), 0.02)  # a sharp q at 2.0 rad
    assert set(seam_mass(layout, phi)) == {"mu"} and seam_mass(layout, phi)["mu"] < 1e-12
    phi, _ = _phi(layout, float(t_inv(layout, 3.1)), 0.02)  # at 3.1 rad: most mass beyond pi - 0.1
    assert seam_mass(layout, phi)["mu"] > 0.5
    phi, _ = _phi(layout, float(t_inv(layout, -2.5)), 25.0)  # spread over the circle (the failure seen)
    assert seam_mass(layout, phi)["mu"] > 0.5
    with pytest.warns(RuntimeWarning, match=r"circular latent 'mu' .* seam"):
        warn_if_near_seam(layout, phi, "dpvi")
    phi, _ = _phi(layout, float(t_inv(layout, 2.9)), 0.05)  # near, but q stays clear of the seam
    assert seam_mass(layout, phi)["mu"] < SEAM_MASS
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warn_if_near_seam(layout, phi, "dpvi")


def t_inv(layout, angle: float) -> float:
    return float(np.asarray(layout.sites[layout.names.index("mu")].transform().inv(np.float64(angle))))


def test_dpvi_and_dpvim_warn_for_an_angle_at_the_seam_and_not_once_rotated():
    near, rotated = _angles(3.136), _angles(3.136 - math.pi / 2)
    kw = dict(epsilon=1.0, delta=1e-5, num_steps=2000, clip=5.0, rng_key=0)
    with pytest.warns(RuntimeWarning, match=r"dpvi: the circular latent 'mu'"):
        dpvi(angle_model, near, **kw)
    with pytest.warns(RuntimeWarning, match=r"dpvim: the circular latent 'mu'"):
        dpvim(angle_model, near, **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        dpvi(angle_model, rotated, **kw)
