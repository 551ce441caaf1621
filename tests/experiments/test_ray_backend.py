"""The Ray backend against a real local Ray cluster started here: same results, bit for bit."""

from __future__ import annotations

import os
import warnings

import pytest

import numpy as np

from dpposterior.experiments import run_coverage
from dpposterior.experiments.cell import comparable

ray = pytest.importorskip(
    "ray", reason="Ray is not installed (pip install 'dpposterior[distributed]'); the Ray backend cannot be tested"
)


@pytest.fixture(scope="module")
def local_cluster():
    """A local two-CPU Ray cluster, shut down after the module."""
    if ray.is_initialized():
        ray.shutdown()
    with warnings.catch_warnings():
        # ray.init starts Ray's own server binaries (GCS, raylet) by fork + exec from this process,
        # which has JAX loaded; JAX warns at every fork. The children exec at once and never run JAX.
        warnings.filterwarnings("ignore", message=r"os\.fork\(\) was called", category=RuntimeWarning)
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        yield ray
    finally:
        ray.shutdown()


def test_ray_backend_equals_local_bit_for_bit(grid_cells, tmp_path, local_cluster):
    cells = grid_cells[:2]  # one group: naive and grid on the same replicates (one Ray task)
    local = run_coverage(cells, tmp_path / "local", progress=False)
    remote = run_coverage(cells, tmp_path / "ray", backend="ray", progress=False)
    assert len(remote.computed) == 2
    assert {r["execution"]["backend"] for r in remote.results} == {"ray"}
    # every number of every cell (curves, RMSEs, sharpness, diagnostics) is identical
    assert [comparable(r) for r in remote.results] == [comparable(r) for r in local.results]
    # the group ran as a Ray task in a worker process, not in this one
    assert os.getpid() not in {r["execution"]["pid"] for r in remote.results}
    again = run_coverage(cells, tmp_path / "ray", backend="ray", progress=False)
    assert again.computed == [] and len(again.skipped) == 2


def test_ray_parallel_benchmark_quick(capsys, benchmark_script, local_cluster):
    """benchmarks/ray_parallel.py --quick on this module's cluster (one tiny group, the same cells)."""
    module = benchmark_script("ray_parallel")
    assert module.main(["--quick"]) == 0
    out = capsys.readouterr().out
    assert "every cell identical to the in-process backend (bit for bit): True" in out
    assert "local/ray = " in out and "most groups running at the same moment: 1" in out
    assert local_cluster.is_initialized()  # the benchmark reused the cluster and left it running


def _prior_draws(releases, settings, data):
    """A user's method (module level, in a file the workers cannot import): draws from N(0, 1), released
    nothing (epsilon 0). A comprehension makes a nested code object (Python < 3.12), whose repr differs
    between processes: the method's fingerprint must not."""
    from dpposterior.experiments import MethodOutput
    from dpposterior.privacy.spent import PrivacySpent

    rng = np.random.default_rng([int(k) for k in settings.keys[0]])
    k, n = data.num_replicates, 1
    draws = np.stack([rng.standard_normal((settings.num_draws, n)) for _ in range(k)]).astype(np.float32)
    return MethodOutput(
        draws,
        np.ones((k, n)),
        {"source": "prior"},
        PrivacySpent(0.0, 0.0, "add_remove", "none", "none", seeded_by="user"),
    )


def test_a_user_registered_method_runs_on_ray_workers(tiny, tmp_path, local_cluster):
    """A method registered in the driver is shipped to the Ray workers with its task (its function by
    value, as the workers cannot import this test file) and gives the in-process backend's cell; its
    fingerprint, computed in the worker, is the driver's."""
    from dpposterior.experiments import register_method
    from dpposterior.experiments.methods import METHODS as REG, method_fingerprint

    register_method(
        "test-prior",
        _prior_draws,
        needs_data=True,
        options=("scale",),
        canonical_options=lambda o: {k: float(v) for k, v in o.items()},
    )
    try:
        cell = tiny("test-prior", method_options={"scale": 1})
        local = run_coverage([cell], tmp_path / "local", progress=False)
        remote = run_coverage([cell], tmp_path / "ray", backend="ray", progress=False)
        assert remote.computed == [cell] and remote.results[0]["execution"]["backend"] == "ray"
        assert os.getpid() != remote.results[0]["execution"]["pid"]
        assert comparable(remote.results[0]) == comparable(local.results[0])
        assert remote.results[0]["method_fingerprint"] == method_fingerprint("test-prior") is not None
        assert "test-prior" in REG  # the driver's registry is as it was
    finally:
        REG.pop("test-prior", None)


def test_a_method_that_cannot_be_sent_to_ray_workers_is_refused_before_anything_runs(tiny, tmp_path, monkeypatch):
    """A user's method whose function cannot be pickled is an error naming it, before Ray starts."""
    import threading

    from dpposterior.experiments import register_method
    from dpposterior.experiments.methods import METHODS as REG

    lock = threading.Lock()

    def locked(releases, settings, data):
        with lock:
            return _prior_draws(releases, settings, data)

    monkeypatch.setattr(ray, "init", lambda *a, **k: pytest.fail("Ray started"))
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    register_method("test-locked", locked, needs_data=True)
    try:
        with pytest.raises(ValueError, match="method 'test-locked' cannot be sent to the Ray workers.*lock"):
            run_coverage([tiny("test-locked")], tmp_path, backend="ray", progress=False)
        assert not (tmp_path / "cells" / "beta-bernoulli").exists() or not list(
            (tmp_path / "cells" / "beta-bernoulli").iterdir()
        )
    finally:
        REG.pop("test-locked", None)


def _normal_model(x):
    import numpyro
    import numpyro.distributions as dist

    mu = numpyro.sample("mu", dist.Normal(0.0, 1.0))
    with numpyro.plate("records", x.shape[0]):
        numpyro.sample("x", dist.Normal(mu, 1.0), obs=x)


def _simulate_normal(key, num_records):
    import jax

    k_mu, k_x = jax.random.split(key)
    mu = jax.random.normal(k_mu)
    return {"mu": mu}, (mu + jax.random.normal(k_x, (num_records,)),)


def test_a_user_registered_model_runs_on_ray_workers(tmp_path, local_cluster):
    """A model registered in the driver (register_model) is shipped to the Ray workers with its task (its
    functions by value, as the workers cannot import this test file) and gives the in-process backend's
    cell; its fingerprint, computed in the worker, is the driver's. Before register_model, the workers
    (and the driver) knew only the papers' models."""
    from dpposterior.experiments import CellConfig
    from dpposterior.models import MODELS, ModelSpec, model_fingerprint, register_model

    register_model(ModelSpec("test-ray-normal", _normal_model, _simulate_normal, clip=3.0, beta_rho=100.0))
    try:
        cell = CellConfig(
            "test-ray-normal", 1.0, "naive", replicates=4, repeats=2, num_steps=60, num_records=100, num_draws=100
        )
        local = run_coverage([cell], tmp_path / "local", progress=False)
        remote = run_coverage([cell], tmp_path / "ray", backend="ray", progress=False)
        assert remote.computed == [cell] and remote.results[0]["execution"]["backend"] == "ray"
        assert os.getpid() != remote.results[0]["execution"]["pid"]
        assert comparable(remote.results[0]) == comparable(local.results[0])
        assert remote.results[0]["model_fingerprint"] == model_fingerprint("test-ray-normal") is not None
        assert MODELS["test-ray-normal"].simulate is _simulate_normal  # the driver's registry is as it was
    finally:
        MODELS.pop("test-ray-normal", None)


def test_a_model_that_cannot_be_sent_to_ray_workers_is_refused_before_anything_runs(tmp_path, monkeypatch):
    """A user's model whose simulator cannot be pickled is an error naming it, before Ray starts."""
    import threading

    from dpposterior.experiments import CellConfig
    from dpposterior.models import MODELS, ModelSpec, register_model

    lock = threading.Lock()

    def locked(key, num_records):
        with lock:
            return _simulate_normal(key, num_records)

    monkeypatch.setattr(ray, "init", lambda *a, **k: pytest.fail("Ray started"))
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    register_model(ModelSpec("test-locked-model", _normal_model, locked, clip=3.0, beta_rho=100.0))
    try:
        cell = CellConfig("test-locked-model", 1.0, "naive", replicates=4, num_steps=60, num_records=100)
        with pytest.raises(ValueError, match="model 'test-locked-model' cannot be sent to the Ray workers.*lock"):
            run_coverage([cell], tmp_path, backend="ray", progress=False)
    finally:
        MODELS.pop("test-locked-model", None)


def _all_nan_draws(releases, settings):
    """A post-processing method whose draws are all NaN: its cell cannot be measured."""
    from dpposterior.experiments.methods import naive_method

    out = naive_method(releases, settings)
    return out._replace(draws=np.full_like(np.asarray(out.draws), np.nan))


def test_a_cell_that_cannot_be_measured_on_a_ray_worker_is_named_and_the_others_saved(tiny, tmp_path, local_cluster):
    from dpposterior.experiments import CellsUnusableError, register_method
    from dpposterior.experiments.store import ResultStore
    from dpposterior.experiments.methods import METHODS as REG

    register_method("test-all-nan-ray", _all_nan_draws)
    try:
        bad, good = tiny("test-all-nan-ray"), tiny("naive")
        with pytest.raises(CellsUnusableError, match=r"test-all-nan-ray.*fewer than 2 replicates") as err:
            run_coverage([bad, good], tmp_path, backend="ray", progress=False)
        assert [c for c, _ in err.value.failed] == [bad] and err.value.computed == 1
        saved = ResultStore(tmp_path).load(good)
        assert saved is not None and saved["execution"]["backend"] == "ray"
        assert ResultStore(tmp_path).load(bad) is None
    finally:
        REG.pop("test-all-nan-ray", None)
