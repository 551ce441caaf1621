"""Hand-made releases and privacy records, for tests that need one without running DP-SGD."""

from __future__ import annotations

import numpy as np

from dpposterior import privacy
from dpposterior.privacy.spent import PrivacySpent
from dpposterior.vi import DPVITrace, ParamLayout


def trace_privacy(T):
    """The record of sigma 2, q 0.1, T steps at delta 1e-5 (DPVITrace.load checks that it describes the trace)."""
    return PrivacySpent(
        epsilon=privacy.dpsgd_epsilon(2.0, 1e-5, 0.1, T),
        delta=1e-5,
        neighbouring="add_remove",
        accountant="pld",
        noise_multiplier=2.0,
        mechanism="poisson_subsampled_gaussian",
        sampling_rate=0.1,
        num_steps=T,
        seeded_by="user",
    )


def fake_trace(T=40, phi=None, **kw):
    """A DPVITrace of random numbers over two flat parameters (four variational coordinates); ``kw``
    replaces any of its fields."""
    layout = ParamLayout.flat(2)
    rng = np.random.default_rng(0)
    fields = dict(
        phi=rng.normal(size=(T, 4)) if phi is None else phi,
        grads=2.0 * rng.normal(size=(T, 4)),
        final_phi=rng.normal(size=4),
        beta=np.ones(4),
        learning_rate=0.01,
        clip=1.0,
        noise_multiplier=2.0,
        sampling_rate=0.1,
        num_steps=T,
        dataset_size=100,
        num_mc=10,
        layout=layout,
        privacy=trace_privacy(T),
        model_name="m",
    )
    fields.update(kw)
    return DPVITrace(**fields)


def own_privacy(epsilon, delta=0.0):
    """The record of a user's own pure-DP (or (epsilon, delta)) mechanism, seeded by the user."""
    return PrivacySpent(
        epsilon=epsilon,
        delta=delta,
        neighbouring="add_remove",
        accountant="pure",
        mechanism="test_own_mechanism",
        noise_multiplier=None,
        sampling_rate=1.0,
        num_steps=1,
        seeded_by="user",
    )
