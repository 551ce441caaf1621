"""benchmarks/postprocess.py --quick runs and prints its table."""

from __future__ import annotations

import pytest


@pytest.mark.slow  # long: kept out of the default run, which must stay short
def test_postprocess_benchmark_quick(capsys, benchmark_script):
    module = benchmark_script("postprocess")
    assert module.main(["--quick"]) == 0
    out = capsys.readouterr().out
    assert "simulated from the trace model (--quick)" in out
    for method in ("full-trace NUTS", "stats NUTS", "laplace", "grid"):
        assert f"| {method} |" in out
    assert "NUTS speed-up from the statistics" in out


@pytest.mark.slow  # long: kept out of the default run, which must stay short
def test_quadrature_posteriors_agree_and_detect_a_different_trace(benchmark_script):
    """The benchmark's no-Monte-Carlo check: the full-trace and the statistics posteriors, integrated on the
    same nodes, agree with each other and with the grid solver; a perturbed trace is told apart."""
    import dataclasses

    import numpy as np

    import dpposterior.noise_aware as na

    module = benchmark_script("postprocess")
    trace = module.simulated_trace(num_latent=2, num_steps=600, seed=3)
    grid = na.noise_aware_posterior(trace, "grid", rng_key=0)
    ref_mean, ref_sd = grid.diagnostics["phi_star_mean"], grid.diagnostics["phi_star_sd"]
    full = module.quadrature_moments(trace, grid, 0.2, full=True)
    stats = module.quadrature_moments(trace, grid, 0.2, full=False)
    assert np.max(np.abs(full["mean"] - stats["mean"]) / stats["sd"]) < 1e-6
    assert np.max(np.abs(full["sd"] / stats["sd"] - 1)) < 1e-6
    assert np.max(np.abs(full["mean"] - ref_mean) / ref_sd) < 1e-3
    assert np.max(np.abs(full["sd"] / ref_sd - 1)) < 1e-3
    assert full["edge_h"] < 1e-6 and full["edge_phi"] < 1e-6
    # negative control: the same check on a trace with its gradients shifted must fail
    shifted = dataclasses.replace(trace, grads=np.asarray(trace.grads) + 0.5 * np.asarray(trace.grads).std(0))
    other = module.quadrature_moments(shifted, grid, 0.2, full=True)
    assert np.max(np.abs(other["mean"] - ref_mean) / ref_sd) > 0.05
