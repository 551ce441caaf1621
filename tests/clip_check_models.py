"""Shared by tests/vi/test_clip_check.py and tests/privacy/test_audit_clip_check.py: a location model
whose per-record gradient norms at a chosen final iterate are known in closed form."""

import dataclasses

import numpy as np
import numpyro
import numpyro.distributions as dist

from dpposterior.vi.dpvi import dpvi
from dpposterior.vi._dpvim import dpvim

# |y_i| is record i's gradient norm at point_trace (clip C = 1): one record below C/4, one in each bin up
# to 4C except two in [.5, 1), three beyond 4C
Y = np.array([0.1, 0.3, 0.7, 0.8, 1.5, 3.0, 10.0, -20.0, 50.0], np.float32)
EXPECTED = [1, 1, 2, 1, 1, 3, 0]  # bins [0, .25), [.25, .5), [.5, 1), [1, 2), [2, 4), [4, inf), not finite


def location(y):
    m = numpyro.sample("m", dist.Normal(0.0, 10.0))
    with numpyro.plate("records", y.shape[0]):
        numpyro.sample("y", dist.Normal(m, 1.0), obs=y)


def log_location(y):
    m = numpyro.sample("m", dist.Normal(0.0, 10.0))
    with numpyro.plate("records", y.shape[0]):
        numpyro.sample("y", dist.LogNormal(m, 1.0), obs=y)


def point_trace():
    """A real trace whose final iterate is moved to m = 0 with q's sd 6e-6 (rho = -12; at -30 float32 loses
    the location gradient to the entropy terms): theta ~ 0 in every Monte Carlo draw, so record i's
    gradient is (-y_i, ~ -beta_rho / N) to 1e-3 (beta_rho = 1e-3: negligible)."""
    tr = dpvi(location, Y, epsilon=1.0, delta=1e-5, num_steps=12, sampling_rate=0.5, clip=1.0, beta_rho=1e-3, rng_key=0)
    return dataclasses.replace(tr, final_phi=np.array([0.0, -12.0], np.float32))


def dpvim_point_trace():
    """A real DPVIm release moved to the same point (m = 0, rho = -12): theta ~ 0 for any eta, so record i's
    loc gradient, the vector DPVIm clips, is y_i - theta + theta / (100 N) ~ y_i (norm |y_i|, as above)."""
    tr = dpvim(location, Y, epsilon=1.0, delta=1e-5, num_steps=12, sampling_rate=0.5, clip=1.0, rng_key=0)
    return dataclasses.replace(tr, final_phi=np.array([0.0, -12.0], np.float32))
