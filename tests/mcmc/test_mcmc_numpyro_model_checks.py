"""``numpyro_energy_model`` refuses models whose per-record energy would not be the record's own (a plate of
fixed size, observations outside the positional data, a prior that reads the records, a box outside the
support), and masked arrays anywhere in the energy models.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from dpposterior import mcmc
from input_checks import raises_with as _raises

# numpyro_energy_model
_XN = np.linspace(-1.0, 1.0, 6).astype(np.float32)
_YN = (_XN > 0).astype(np.float32)
_CN = np.abs(_XN) + 0.1


def _logistic(x, y=None, plate_size=None):
    import numpyro
    import numpyro.distributions as dist

    w = numpyro.sample("w", dist.Normal(0.0, 1.0))
    with numpyro.plate("data", x.shape[0] if plate_size is None else plate_size):
        numpyro.sample("y", dist.Bernoulli(logits=w * x), obs=y)


def test_numpyro_energy_model_refuses_a_record_plate_fixed_at_n():
    # numpyro.plate("data", N) instead of x.shape[0]: each energy was N times the record's own (6x here)
    _raises(
        lambda: mcmc.numpyro_energy_model(_logistic, _XN, _YN, bound_constants=_CN, model_kwargs={"plate_size": 6}),
        ValueError,
        "plate",
        "from the data",
    )
    assert mcmc.numpyro_energy_model(_logistic, _XN, _YN, bound_constants=_CN).num_records == 6


def test_numpyro_energy_model_refuses_observations_passed_outside_the_positional_data():
    # y in model_kwargs: each record's energy was the sum over all N labels with that record's x
    _raises(
        lambda: mcmc.numpyro_energy_model(_logistic, _XN, bound_constants=_CN, model_kwargs={"y": _YN}),
        ValueError,
        "observed site 'y'",
        "positional",
    )


def test_masked_arrays_are_refused_naming_the_argument():
    # logistic_bound_constants used the value under the mask (c = 5 here); energy_model and
    # numpyro_energy_model failed in JAX ("numpy masked arrays are not supported") without naming the data
    x = np.ma.masked_array([[1.0, 2.0], [3.0, 4.0]], mask=[[0, 0], [0, 1]])
    _raises(lambda: mcmc.logistic_bound_constants(x), ValueError, "features", "1 masked")
    _raises(
        lambda: mcmc.energy_model(
            lambda th, r: r[0] * th[0], x, log_prior_fn=lambda th: -jnp.sum(th**2), bound_constants=np.ones(2)
        ),
        ValueError,
        "data",
        "masked",
    )
    _raises(
        lambda: mcmc.numpyro_energy_model(_logistic, x[:, 1], _YN[:2], bound_constants=np.ones(2)),
        ValueError,
        "data",
        "masked",
    )


def test_numpyro_energy_model_refuses_a_prior_that_reads_the_data():
    # w ~ N(mean(x), 1): the log prior is evaluated on the first record, so it was silently centred at x[0]
    # (-1.419 instead of -0.919 at w = 0), with that record's value outside any privacy guarantee
    import numpyro
    import numpyro.distributions as dist

    def empirical_bayes(x, y):
        w = numpyro.sample("w", dist.Normal(jnp.mean(x), 1.0))
        with numpyro.plate("data", x.shape[0]):
            numpyro.sample("y", dist.Bernoulli(logits=w * x), obs=y)

    _raises(
        lambda: mcmc.numpyro_energy_model(empirical_bayes, _XN, _YN, bound_constants=_CN),
        ValueError,
        "latent site 'w'",
        "must not read the records",
    )


def test_numpyro_energy_model_accepts_a_feature_plate_as_large_as_n():
    # a plate over p = N = 6 features was taken for the plate over records, and its global weights refused as
    # "local latent variables"; now only a plate that follows the data to one record is over the records
    import numpyro
    import numpyro.distributions as dist

    def six_weights(x, y):
        with numpyro.plate("features", 6):
            w = numpyro.sample("w", dist.Normal(0.0, 1.0))
        with numpyro.plate("data", x.shape[0]):
            numpyro.sample("y", dist.Bernoulli(logits=jnp.sum(w) * x), obs=y)

    assert mcmc.numpyro_energy_model(six_weights, _XN, _YN, bound_constants=_CN).num_records == 6


def test_numpyro_energy_model_box_must_lie_inside_a_constrained_support():
    # w ~ HalfNormal with box (-1, 5): was accepted, and the chain then evaluated the model at w < 0, outside
    # the support (NumPyro does not check it inside the compiled chain); a box of the wrong length failed
    # only when a chain ran
    import numpyro
    import numpyro.distributions as dist

    def positive_weight(x, y):
        w = numpyro.sample("w", dist.HalfNormal(1.0))
        with numpyro.plate("data", x.shape[0]):
            numpyro.sample("y", dist.Bernoulli(logits=w * x), obs=y)

    _raises(
        lambda: mcmc.numpyro_energy_model(positive_weight, _XN, _YN, bound_constants=_CN, box=(-1.0, 5.0)),
        ValueError,
        "inside the support",
        "'w'",
    )
    _raises(
        lambda: mcmc.numpyro_energy_model(positive_weight, _XN, _YN, bound_constants=_CN, box=([0.1, 0.1], [1.0, 1.0])),
        ValueError,
        "one entry per coordinate",
    )
    assert mcmc.numpyro_energy_model(positive_weight, _XN, _YN, bound_constants=_CN, box=(0.0, 5.0)).lower is not None
