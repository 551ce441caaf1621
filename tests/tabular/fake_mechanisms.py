"""Stand-ins for the mechanisms of ``fit`` and ``compare``: each returns a release of the kind the real
one returns, with the privacy record the real one would write for the (epsilon, delta) it is given, but
no JAX program to compile. For tests of what happens around a release (ledgers, files, budgets)."""

from __future__ import annotations

import numpy as np

from dpposterior.baselines import DrawsPosterior
from dpposterior.privacy import PrivacySpent, calibrate_noise_multiplier, dpsgd_epsilon
from dpposterior.tabular import fit
from dpposterior.vi import DPVITrace, ParamLayout

#: what each stand-in was asked for: (method, epsilon, delta)
CALLS: list[tuple[str, float, float]] = []


def dpvi(
    model,
    X,
    y,
    *,
    epsilon,
    delta,
    num_steps,
    sampling_rate,
    clip,
    rng_key=None,
    progress=True,
    model_name="",
    secure=False,
    beta_rho=100.0,
    **model_kwargs,
):
    """A DPVITrace as dpvi records it: sigma calibrated for (epsilon, delta), gradients carrying its noise."""
    CALLS.append(("na-dpvi", epsilon, delta))
    clip = 1.0 if clip == "auto" else clip  # the fake stands for a run whose private search chose 1
    sigma = calibrate_noise_multiplier(epsilon, delta, sampling_rate, num_steps)
    privacy = PrivacySpent(
        epsilon=dpsgd_epsilon(sigma, delta, sampling_rate, num_steps),
        delta=delta,
        neighbouring="add_remove",
        accountant="pld",
        mechanism="poisson_subsampled_gaussian",
        noise_multiplier=sigma,
        sampling_rate=sampling_rate,
        num_steps=num_steps,
        details=(("clip", clip), ("sampling", "poisson"), ("dataset_size", "public")),
    )
    rng = np.random.default_rng(0)
    return DPVITrace(
        phi=rng.normal(size=(num_steps, 4)),
        grads=rng.normal(size=(num_steps, 4)) * sigma * clip,
        final_phi=np.zeros(4),
        beta=np.ones(4),
        learning_rate=0.01,
        clip=clip,
        noise_multiplier=sigma,
        sampling_rate=sampling_rate,
        num_steps=num_steps,
        dataset_size=int(X.shape[0]),
        num_mc=1,
        layout=ParamLayout.flat(2),
        privacy=privacy,
        model_name=model_name,
    )


def dp_fast_mh_logistic(design, *, epsilon, delta, num_steps, rng_key=None, layout=None, secure=False):
    """A DP-Fast MH release: replace-one, (epsilon, delta) as calibrated (the chain's record is at most that)."""
    CALLS.append(("dp-fast-mh", epsilon, delta))
    p = design.X.shape[1]
    privacy = PrivacySpent(
        epsilon=epsilon,
        delta=delta,
        neighbouring="replace_one",
        accountant="stand-in",
        mechanism="dp_fast_mh",
        num_steps=num_steps,
    )
    return DrawsPosterior(
        layout=ParamLayout.flat(p),
        draws=np.zeros((10, p), np.float32),
        privacy=privacy,
        method="dp_fast_mh",
        diagnostics={"mean_step": 0.0, "distance_from_start": 0.0},
    )


def install(monkeypatch, report: bool = False) -> list[tuple[str, float, float]]:
    """Puts the stand-ins in place of dpvi and DP-Fast MH (and, unless ``report``, of compare's
    post-processing, which then returns ``{"ledger": this run's Ledger}``); returns the calls list."""
    import dpposterior.vi

    CALLS.clear()
    monkeypatch.setattr(dpposterior.vi, "dpvi", dpvi)
    monkeypatch.setattr(fit, "dp_fast_mh_logistic", dp_fast_mh_logistic)
    if not report:
        monkeypatch.setattr(fit, "_compare_report", lambda made, methods, releases, ledger, *a, **k: {"ledger": ledger})
    return CALLS
