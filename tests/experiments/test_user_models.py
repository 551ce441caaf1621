"""A model of the user's own in coverage cells (``register_model``): validation, a cell end to end,
resume, and recomputation when other functions are registered under the same name."""

from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import numpyro
import numpyro.distributions as dist
import pytest

from dpposterior.experiments import CellConfig, folder_results, run_coverage
from dpposterior.models import MODELS, ModelSpec, model_fingerprint, register_model

NAME = "test-normal"
CELL = dict(replicates=4, repeats=2, num_steps=200, num_records=200, num_draws=200)


def normal_model(x):
    mu = numpyro.sample("mu", dist.Normal(0.0, 1.0))
    sigma = numpyro.sample("sigma", dist.LogNormal(0.0, 0.3))
    with numpyro.plate("records", x.shape[0]):
        numpyro.sample("x", dist.Normal(mu, sigma), obs=x)


def simulate(key, num_records):
    """theta from the prior, then num_records records given theta."""
    k_mu, k_sigma, k_x = jax.random.split(key, 3)
    mu = jax.random.normal(k_mu)
    sigma = jnp.exp(0.3 * jax.random.normal(k_sigma))
    return {"mu": mu, "sigma": sigma}, (mu + sigma * jax.random.normal(k_x, (num_records,)),)


def simulate_other(key, num_records):
    """The same prior predictive, drawn another way (another function)."""
    k_mu, k_sigma, k_x = jax.random.split(key, 3)
    theta = {"mu": jax.random.normal(k_mu), "sigma": jnp.exp(0.3 * jax.random.normal(k_sigma))}
    return theta, (theta["mu"] + theta["sigma"] * jax.random.normal(k_x, (num_records,)),)


def spec(**changes) -> ModelSpec:
    fields = dict(name=NAME, model=normal_model, simulate=simulate, clip=3.0, beta_rho=100.0)
    fields.update(changes)
    return ModelSpec(**fields)


@pytest.fixture
def registered():
    """``register_model`` with the names it registered removed afterwards."""
    names = []

    def register(s, **kw):
        out = register_model(s, **kw)
        names.append(s.name)
        return out

    yield register
    for n in names:
        MODELS.pop(n, None)


def test_a_user_model_runs_in_coverage_cells_resumes_and_is_recomputed_when_replaced(registered, tmp_path):
    """A registered model runs end to end (grid and naive on one group of K = 4 DP-SGD replicates); its
    cells record the model's fingerprint; a re-run reuses them; other functions registered under the same
    name (replace=True) make them stale, so they are recomputed. Before register_model, CellConfig
    refused any model but the papers'."""
    registered(spec())
    cells = [CellConfig(NAME, 1.0, m, **CELL) for m in ("grid", "naive")]
    first = run_coverage(cells, tmp_path, progress=False)
    assert first.computed and sorted(c.method for c in first.computed) == ["grid", "naive"]
    files = sorted((tmp_path / "cells" / NAME).glob("*.json"))
    assert len(files) == 2
    fingerprint = model_fingerprint(NAME)
    assert fingerprint.startswith(f"{__name__}.normal_model+{__name__}.simulate:")
    for path in files:
        rec = json.loads(path.read_text())
        assert rec["config"]["model"] == NAME and rec["model_fingerprint"] == fingerprint
        assert rec["coordinates"] == ["mu", "sigma"] and rec["num_replicates_used"] == 4
        assert 0.0 <= rec["rmse"] <= 1.0 and rec["model_settings"]["clip"] == 3.0

    again = run_coverage(cells, tmp_path, progress=False)
    assert again.computed == [] and again.skipped == cells and again.stale == []
    assert [r["created"] for r in again.results] == [r["created"] for r in first.results]

    with pytest.raises(ValueError, match=f"model '{NAME}' is already registered; pass replace=True"):
        register_model(spec(simulate=simulate_other))
    registered(spec(simulate=simulate_other), replace=True)
    assert model_fingerprint(NAME) != fingerprint
    third = run_coverage(cells, tmp_path, progress=False)
    assert third.stale == cells and sorted(c.method for c in third.computed) == ["grid", "naive"]
    assert all(r["model_fingerprint"] == model_fingerprint(NAME) for r in third.results)

    records, notes = folder_results(tmp_path)  # the reports show the folder's cells ...
    assert len(records) == 2 and notes == []
    MODELS.pop(NAME)  # ... and say which model to register in a new session
    records, notes = folder_results(tmp_path)
    assert records == [] and len(notes) == 2
    assert all(
        f"its model '{NAME}' is not registered in this process (register it with dpposterior.models.register_model" in n
        for n in notes
    )


def test_the_papers_models_keep_no_fingerprint_and_cannot_be_replaced():
    """Built-in models' cells stay as they were (no model fingerprint), and their names are refused."""
    assert model_fingerprint("beta-bernoulli") is None
    with pytest.raises(ValueError, match="'beta-bernoulli' is one of the package's models, which cannot be replaced"):
        register_model(spec(name="beta-bernoulli"), replace=True)
    assert MODELS["beta-bernoulli"].simulate is not simulate


def test_an_unknown_model_name_points_to_register_model():
    with pytest.raises(ValueError, match="unknown model 'no-such-model'.*register_model"):
        CellConfig("no-such-model", 1.0, "grid")


def test_the_command_line_names_register_model_for_an_unknown_model(tmp_path, capsys):
    """``dpposterior coverage --model`` runs the papers' models; a user's model is registered from Python."""
    from dpposterior.cli import main

    assert main(["coverage", "--model", "my-model", "--epsilon", "1", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unknown model 'my-model'; available: beta-bernoulli" in err
    assert "dpposterior.models.register_model" in err


@pytest.mark.parametrize(
    "bad, error, match",
    [
        (dict(name=""), ValueError, "model name must be a non-empty string of letters, digits"),
        (dict(name="a/b"), ValueError, "model name must be a non-empty string.*got 'a/b'"),
        (dict(clip=0.0), ValueError, r"spec.clip must be a finite number > 0, got 0.0"),
        (dict(beta_rho=-1.0), ValueError, r"spec.beta_rho must be a finite number > 0"),
        (dict(lr_scale=float("inf")), ValueError, r"spec.lr_scale must be a finite number > 0"),
        (dict(clip="2"), TypeError, r"spec.clip must be a real number"),
        (dict(simulate=None), TypeError, "spec.simulate must be callable"),
        (dict(model=3), TypeError, "spec.model must be callable"),
        (dict(mean_lr_factors=(("tau", 0.1),)), ValueError, r"mean_lr_factors names \['tau'\].*\['mu', 'sigma'\]"),
        (dict(mean_lr_factors=(("mu", 0.0),)), ValueError, "factor of site 'mu' must be a finite number > 0"),
    ],
)
def test_bad_specs_are_refused_saying_what_is_allowed(bad, error, match):
    with pytest.raises(error, match=match):
        register_model(spec(**bad))
    assert NAME not in MODELS


def test_a_spec_that_is_not_a_model_spec_is_refused():
    with pytest.raises(TypeError, match="spec must be a dpposterior.models.ModelSpec, got dict"):
        register_model(dict(name=NAME, model=normal_model, simulate=simulate, clip=1.0, beta_rho=1.0))


def _missing_sigma(key, n):
    theta, data = simulate(key, n)
    return {"mu": theta["mu"], "tau": theta["sigma"]}, data


def _data_not_tuple(key, n):
    theta, data = simulate(key, n)
    return theta, data[0]


def _data_per_replicate(key, n):
    theta, data = simulate(key, n)
    return theta, (data[0][:3],)


def _numpy_inside(key, n):
    import numpy as np

    theta, data = simulate(key, n)
    return theta, (np.asarray(data[0]),)  # not traceable: concrete values of a traced array


def _three(key, n):
    return simulate(key, n) + (None,)


def _vector_mu(key, n):
    theta, data = simulate(key, n)
    return {"mu": jnp.stack([theta["mu"], theta["mu"]]), "sigma": theta["sigma"]}, data


@pytest.mark.parametrize(
    "sim, match",
    [
        (_missing_sigma, r"theta with keys \['mu', 'tau'\], but the model's latent sites are \['mu', 'sigma'\]"),
        (_data_not_tuple, "must return data as a non-empty tuple of arrays"),
        (_data_per_replicate, r"data\[0\] must be an array with a leading axis of num_records = 5.*\(3,\)"),
        (_numpy_inside, "failed on a trial call simulate\\(jax.random.PRNGKey\\(0\\), 5\\)"),
        (_three, "must return a pair .*got tuple of length 3"),
        (_vector_mu, r"theta\['mu'\] has shape \(2,\), but the model's latent site 'mu' has shape \(\)"),
    ],
)
def test_a_simulator_that_does_not_fit_the_model_is_refused(sim, match):
    with pytest.raises(ValueError, match=match):
        register_model(spec(simulate=sim))
    assert NAME not in MODELS


def _theta_as(dtype):
    def sim(key, n):
        theta, data = simulate(key, n)
        return {"mu": theta["mu"].astype(dtype), "sigma": theta["sigma"]}, data

    return sim


@pytest.mark.parametrize("dtype", [jnp.int32, jnp.float16, jnp.bfloat16, jnp.bool_])
def test_a_truth_that_is_not_float32_or_float64_is_refused(dtype):
    """A simulator that returned mu as int32 (or float16) was registered, and every
    cell measured its coverage against the rounded truth (mu -1.566 was -1; float16 keeps 3 digits)."""
    name = jnp.dtype(dtype).name
    with pytest.raises(
        ValueError,
        match=rf"theta\['mu'\] has dtype {name}, but the true value of a latent site "
        "must be float32 or float64",
    ):
        register_model(spec(simulate=_theta_as(dtype)))
    assert NAME not in MODELS


def _some_records_infinite(key, n):
    """A simulator with a bug: records above mu + 1.5 overflow to inf (the model never draws them)."""
    theta, (x,) = simulate(key, n)
    return theta, (jnp.where(x > theta["mu"] + 1.5 * theta["sigma"], jnp.inf, x),)


def test_simulated_data_with_infinite_values_are_refused(registered):
    """A simulator that returned inf for some records (26 of 100 in one replicate of
    an example) was used silently: DP-SGD dropped those records' gradients, so the cell measured a posterior
    of the other records, a release that dpvi (which refuses such data) never makes. Now the data sets are
    checked where they are simulated (here the data of the needs_data methods; the replicate program in
    the slow test below)."""
    from dpposterior.experiments.replicates import simulate_data

    registered(spec(simulate=_some_records_infinite))
    cell = CellConfig(NAME, 1.0, "dpvim", replicates=4, repeats=2, num_steps=40, num_records=50, num_draws=20)
    with pytest.raises(
        ValueError,
        match=rf"spec.simulate of model '{NAME}' returned non-finite data: replicate "
        r"\d \(seed 0, num_records=50\) has \d+ NaN or infinite value\(s\) in data\[0\]",
    ):
        simulate_data(cell)
    from dpposterior.experiments.replicates import check_simulated_data

    check_simulated_data(cell, [[0, 0], [0, 0]])  # all finite: nothing to say
    with pytest.raises(ValueError, match=r"replicate 7 .* in data\[1\], and 1 of the 2 replicates have some"):
        check_simulated_data(cell, [[0, 0], [0, 3]], start=6)


@pytest.mark.slow
def test_a_cell_on_simulated_data_with_infinite_values_is_refused(registered, tmp_path):
    """The same through the compiled replicate program (DP-SGD): the run stops with the simulator's error and
    saves nothing (before: a coverage cell of the truncated data sets)."""
    registered(spec(simulate=_some_records_infinite))
    cell = CellConfig(NAME, 1.0, "naive", replicates=3, repeats=2, num_steps=20, num_records=50, num_draws=20)
    with pytest.raises(ValueError, match=f"spec.simulate of model '{NAME}' returned non-finite data"):
        run_coverage([cell], tmp_path, progress=False)
    assert not list(tmp_path.glob("cells/*/*.json"))


def test_a_model_dpvi_cannot_run_is_refused():
    def no_plate(x):
        mu = numpyro.sample("mu", dist.Normal(0.0, 1.0))
        numpyro.sample("x", dist.Normal(mu, 1.0), obs=x)

    def sim(key, n):
        return {"mu": jnp.zeros(())}, (jnp.zeros(n),)

    with pytest.raises(ValueError, match="model 'test-normal' cannot run under dpvi on the data its simulator"):
        register_model(spec(model=no_plate, simulate=sim))
    assert NAME not in MODELS


def test_the_fingerprint_sees_what_a_factory_captured():
    """Two simulators made by one factory from different functions have different fingerprints."""

    def factory(draw_mu):
        def sim(key, n):
            theta, data = simulate(key, n)
            return {"mu": draw_mu(theta["mu"]), "sigma": theta["sigma"]}, data

        return sim

    prints = []
    try:
        for f in (lambda m: m, lambda m: 2.0 * m):
            register_model(spec(simulate=factory(f)), replace=True)
            prints.append(model_fingerprint(NAME))
    finally:
        MODELS.pop(NAME, None)
    assert prints[0] != prints[1]
