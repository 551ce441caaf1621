"""Joint and per-latent marginal TARP and 90% coverage of NA-DPVI (grid) on saved releases
(regression_releases.py), with the identifiability rule (unidentified latents get the model prior) and
without it ("keep").

    python docs/results/scripts/regression_rule_coverage.py /tmp/releases-lr-0.1-100.npz [more.npz ...] \
        [--features 3]

Several files (replicates 0..K1-1, then K1.. of the same cell, regression_releases.py --start) are
joined in order into one cell of their total K.

As a coverage cell (dpposterior.experiments.cell.evaluate_cell): M = 20,000 draws, R = 20 reference
re-draws centred on the mu-trace mean, Uniform(-4, 4) posterior sds, seed 0 keys. A marginal TARP is the
same on one coordinate (draws, truth and references restricted to it); 90% coverage is the share of
replicates whose truth lies in the central 90% interval of that coordinate's draws.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from dpposterior import validation
from dpposterior.experiments import CellConfig
from dpposterior.experiments.config import postprocessing_keys, reference_key
from dpposterior.experiments.methods import CellReleases, MethodSettings, grid_method
from dpposterior.experiments.replicates import _model_structure, prior_sampler
from dpposterior.noise_aware.stats import TraceStats


def tarp(draws, theta, refs):
    res = validation.tarp_coverage_repeats(draws, theta, refs)
    return float(res.rmse)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("releases", nargs="+")
    ap.add_argument("--features", type=int, default=0)
    ap.add_argument("--num-draws", type=int, default=20_000)
    a = ap.parse_args()
    parts = [dict(np.load(f)) for f in a.releases]
    z = dict(parts[0])
    for key in ["theta", "final_phi"] + [k for k in z if k.startswith("stats_")]:
        z[key] = np.concatenate([p[key] for p in parts])
    z["wall_seconds"] = sum(float(p["wall_seconds"]) for p in parts)
    model = "linear-regression"
    if a.features:
        import importlib.util
        import pathlib

        spec = importlib.util.spec_from_file_location(
            "rr", pathlib.Path(__file__).with_name("regression_releases.py"))
        rr = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(rr)
        model = rr._register_logistic(a.features)
    theta = z["theta"]
    k, n = theta.shape
    stats = TraceStats(*(z["stats_" + f] for f in TraceStats._fields))
    num_records = 2000 if a.features else 5000
    _, layout, _, _ = _model_structure(model, num_records)
    names = layout.coordinate_names()
    cfg = CellConfig(model, 1.0, "grid", replicates=k, num_records=num_records)
    out = {"files": a.releases, "K": k, "dpsgd_wall_seconds": float(z["wall_seconds"]), "coordinates": names}
    refs = validation.repeated_reference_points(reference_key(0), np.asarray(stats.phi_mean, np.float64)[:, :n],
                                                np.ones((k, n)), 20)  # rescaled per method below
    u = (refs - np.asarray(stats.phi_mean, np.float64)[None, :, :n])    # Uniform(-4, 4) offsets
    for choice in ("prior", "keep"):
        t0 = time.perf_counter()
        rel = CellReleases(stats=stats, final_phi=z["final_phi"], noise_sd=z["noise_sd"],
                           sampling_rate=float(z["sampling_rate"]), num_latent=n,
                           learning_rate=z["learning_rate"], prior_sampler=prior_sampler(model, num_records))
        settings = MethodSettings(keys=np.asarray(postprocessing_keys(0, "grid", k)), num_draws=a.num_draws,
                                  options={"unidentified": choice})
        res = grid_method(rel, settings)
        draws = np.asarray(res.draws)
        sd = res.posterior_sd
        rf = np.asarray(stats.phi_mean, np.float64)[None, :, :n] + u * sd[None]
        row = {"joint_tarp_rmse": tarp(draws, theta, rf), "sharpness": res.sharpness,
               "diagnostics": res.diagnostics}
        lo, hi = np.quantile(draws, [0.05, 0.95], axis=1)
        inside = (theta >= lo) & (theta <= hi)
        row["marginal_tarp_rmse"] = {names[j]: tarp(draws[:, :, j:j + 1], theta[:, j:j + 1], rf[:, :, j:j + 1])
                                     for j in range(n)}
        row["coverage90"] = {names[j]: float(inside[:, j].mean()) for j in range(n)}
        row["posterior_sd"] = {names[j]: float(sd[:, j].mean()) for j in range(n)}
        row["z_sd"] = {names[j]: float(np.std((theta[:, j] - draws[:, :, j].mean(1)) / sd[:, j])) for j in range(n)}
        row["seconds"] = time.perf_counter() - t0
        out[choice] = row
        print(choice, "joint", round(row["joint_tarp_rmse"], 4), "max marginal",
              round(max(row["marginal_tarp_rmse"].values()), 4),
              "cov90", {k2: round(v, 3) for k2, v in row["coverage90"].items()}, flush=True)
        print("  marginal", {k2: round(v, 4) for k2, v in row["marginal_tarp_rmse"].items()})
        print("  rule", res.diagnostics.get("unidentified_replicates_per_latent"),
              "tau", [f"{x:.3g}" for x in res.diagnostics.get("median_relaxation_steps_of_means", [])],
              "z", [f"{x:.2f}" for x in res.diagnostics.get("median_slope_z_of_means", [])], flush=True)
    name = a.releases[0].replace(".npz", f"-K{k}-coverage.json")
    with open(name, "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
