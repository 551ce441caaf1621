"""Hierarchical priors: found from the model's structure (``Site.parents``), kept in the release's layout,
and warned about by ``noise_aware_posterior`` (:mod:`dpposterior.noise_aware.structure`)."""

from __future__ import annotations

import dataclasses
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import pytest

import dpposterior as dpp
from dpposterior.noise_aware import HierarchicalPriorWarning
from dpposterior.noise_aware.simulate import simulate_trace
from dpposterior.releases.layout import ParamLayout, Site
from dpposterior.releases.model_inspect import inspect_model


def hierarchical(g, y):
    mu = numpyro.sample("mu", dist.Normal(0.0, 2.0))
    tau = numpyro.sample("tau", dist.HalfNormal(1.0))
    with numpyro.plate("groups", 4):
        theta = numpyro.sample("theta", dist.Normal(mu, tau))
    with numpyro.plate("records", y.shape[0]):
        numpyro.sample("y", dist.Normal(theta[g], 1.0), obs=y)


def shrinkage_regression(x, y):
    scale = numpyro.sample("scale", dist.HalfNormal(1.0))
    w = numpyro.sample("w", dist.Normal(0.0, scale).expand([x.shape[1]]).to_event(1))
    noise = numpyro.sample("noise", dist.HalfNormal(1.0))
    with numpyro.plate("records", x.shape[0]):
        numpyro.sample("y", dist.Normal(x @ w, noise), obs=y)


def flat(x, y):
    w = numpyro.sample("w", dist.Normal(0.0, 1.0).expand([x.shape[1]]).to_event(1))
    s = numpyro.sample("s", dist.HalfNormal(1.0))
    with numpyro.plate("records", x.shape[0]):
        numpyro.sample("y", dist.Normal(x @ w, s), obs=y)


def _data(n=20, k=3):
    x = jax.random.normal(jax.random.PRNGKey(0), (n, k))
    return x, jnp.ones(n)


def test_the_parents_of_a_hierarchical_prior_are_found_from_the_structure():
    layout = inspect_model(hierarchical, (jnp.zeros(20, jnp.int32), jnp.ones(20)), {})
    assert {s.name: s.parents for s in layout.sites} == {"mu": (), "tau": (), "theta": ("mu", "tau")}
    layout = inspect_model(shrinkage_regression, _data(), {})
    assert {s.name: s.parents for s in layout.sites} == {"scale": (), "w": ("scale",), "noise": ()}


def test_a_flat_prior_has_no_parents_and_its_saved_layout_is_unchanged():
    """The likelihood ties w and s together, the priors do not: no parents, and the layout's dict has no
    "parents" key (a file written before the field existed reads the same)."""
    layout = inspect_model(flat, _data(), {})
    assert all(s.parents == () for s in layout.sites)
    assert all("parents" not in s for s in layout.to_dict()["sites"])


def test_the_parents_survive_a_saved_layout():
    layout = inspect_model(hierarchical, (jnp.zeros(20, jnp.int32), jnp.ones(20)), {})
    back = ParamLayout.from_dict(layout.to_dict())
    assert back == layout and back.sites[2].parents == ("mu", "tau")


def _trace_with(layout):
    n = layout.num_latent
    trace = simulate_trace(jax.random.PRNGKey(1), np.zeros(2 * n), 100.0, num_steps=400)
    return dataclasses.replace(trace, layout=layout)


def _layout(parents):
    return ParamLayout(
        (
            Site("mu", (), (), {"kind": "real"}),
            Site("theta", (3,), (3,), {"kind": "real"}, parents=parents),
        )
    )


def test_noise_aware_posterior_warns_about_the_parents_of_a_hierarchical_prior():
    with pytest.warns(HierarchicalPriorWarning, match=r"latents \['mu'\] set the prior of \['theta'\]") as caught:
        post = dpp.noise_aware_posterior(_trace_with(_layout(("mu",))), rng_key=0, priors="paper")
    text = str(caught[0].message)
    assert "the 3 coordinates of 'theta'" in text and "not through the records" in text
    assert post.diagnostics["hierarchical_latents"] == {"theta": ("mu",)}
    assert any("hierarchical" in w for w in post.warnings)  # carried by the summary and reports


def test_noise_aware_posterior_is_silent_about_structure_without_a_hierarchy():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        post = dpp.noise_aware_posterior(_trace_with(_layout(())), rng_key=0, priors="paper")
    assert not [w for w in caught if issubclass(w.category, HierarchicalPriorWarning)]
    assert post.diagnostics["hierarchical_latents"] == {}


def exponential_rate(x):
    rate = numpyro.sample("rate", dist.Gamma(2.0, 1.0))
    with numpyro.plate("records", x.shape[0]):
        numpyro.sample("x", dist.Exponential(rate), obs=x)


def test_reading_the_structure_on_dummy_records_warns_of_nothing():
    """The structure is read on dummy records of zeros, outside an Exponential's support; NumPyro's
    support warning about them would reach the user as a warning of the release, which it is not."""
    with warnings.catch_warnings(record=True) as caught:  # recorded: an error would be caught inside
        warnings.simplefilter("always")
        layout = inspect_model(exponential_rate, (jnp.full(20, 1.5),), {})
    assert [str(w.message) for w in caught] == []
    assert [(s.name, s.parents) for s in layout.sites] == [("rate", ())]
