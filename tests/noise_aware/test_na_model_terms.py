"""noise_aware_posterior with the model's curvature terms of a trace (noise_aware.model_terms)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from dpposterior import noise_aware_posterior
from dpposterior.noise_aware import CurvatureFromTraceWarning, UnidentifiedLatentsWarning, model_terms
from dpposterior.releases.layout import ParamLayout, Site
from dpposterior.releases.model_curvature import ModelCurvature

A_TRUE = np.array([300.0, 1000.0, 3000.0])


def _terms(trace, curvature=A_TRUE, shift=None, slope=None):
    d = trace.num_params
    phi = np.asarray(trace.phi, np.float64)
    return ModelCurvature(
        point=phi[int(0.2 * phi.shape[0]) :].mean(0),
        curvature=np.asarray(curvature, np.float64),
        hessian_diag=np.r_[A_TRUE, np.ones(d // 2)],
        hessian_diag_slope=np.zeros((d, d)) if slope is None else slope,
        clip_shift=np.zeros(d) if shift is None else shift,
        num_records=100,
    )


def test_the_default_uses_the_terms_a_trace_carries(small_trace):
    trace = dataclasses.replace(small_trace, model_curvature=_terms(small_trace))
    post = noise_aware_posterior(trace, rng_key=0)
    assert post.diagnostics["h_prior"] == "model curvature"
    assert post.diagnostics["model_terms"] is trace.model_curvature
    h_loc = np.asarray(post.diagnostics["priors"].h_loc)
    np.testing.assert_allclose(h_loc[:3], A_TRUE + np.log(-np.expm1(-A_TRUE)), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(post.diagnostics["priors"].h_scale)[:3], 0.05 * A_TRUE, rtol=1e-6)
    paper = noise_aware_posterior(trace, rng_key=0, priors="paper")
    assert paper.diagnostics["h_prior"] == "trace slope" and paper.diagnostics["model_terms"] is None


def test_a_trace_without_terms_keeps_the_trace_slope(small_trace):
    with pytest.warns(CurvatureFromTraceWarning, match="trace's own slope"):
        post = noise_aware_posterior(small_trace, rng_key=0)
    assert post.diagnostics["h_prior"] == "trace slope"
    assert any("trace's own slope" in w for w in post.warnings)
    with pytest.raises(ValueError, match='priors="model" needs a trace that carries'):
        noise_aware_posterior(small_trace, priors="model")


def test_the_clip_shift_moves_phi_star(small_trace):
    shift = np.array([0.01, -0.02, 0.0, 0.0, 0.0, 0.0])
    base = noise_aware_posterior(dataclasses.replace(small_trace, model_curvature=_terms(small_trace)), rng_key=0)
    moved = noise_aware_posterior(
        dataclasses.replace(small_trace, model_curvature=_terms(small_trace, shift=shift)), rng_key=0
    )
    np.testing.assert_allclose(moved.diagnostics["phi_star_mean"] - base.diagnostics["phi_star_mean"], shift, atol=1e-6)
    draws = np.asarray(moved.phi_star) - np.asarray(base.phi_star)
    np.testing.assert_allclose(draws, np.broadcast_to(shift, draws.shape), atol=1e-5)


def test_forcing_removes_the_other_coordinates_push(small_trace):
    """grad_k loses q/2 sum_{j != k} dH_jj/dphi_k (phi_j,t - point_j)^2; a coordinate's own term stays."""
    d = small_trace.num_params
    slope = np.zeros((d, d))
    slope[1, 0] = 7.0  # H_11 changes with phi_0: phi_1's wander pushes phi_0's gradient
    slope[0, 0] = 5.0  # own term: kept
    terms = _terms(small_trace, slope=slope)
    out = model_terms.without_forcing(small_trace, terms)
    phi = np.asarray(small_trace.phi, np.float64)
    expected = np.asarray(small_trace.grads, np.float64)
    expected[:, 0] -= small_trace.sampling_rate * 0.5 * 7.0 * (phi[:, 1] - terms.point[1]) ** 2
    np.testing.assert_allclose(np.asarray(out.grads, np.float64), expected, rtol=1e-6, atol=1e-6)


def test_the_posterior_keeps_the_privacy_record(small_trace):
    trace = dataclasses.replace(small_trace, model_curvature=_terms(small_trace))
    assert noise_aware_posterior(trace, rng_key=0).privacy == trace.privacy


def test_a_latent_the_models_curvature_cannot_relax_is_not_identified(small_trace):
    """The default reads the trace at the model's curvature; where 1 / (eta q A) at that curvature exceeds
    the window, the trace drifted, and the latent is flagged even though the trace's own slope passes."""
    assert noise_aware_posterior(small_trace, rng_key=0, priors="paper").diagnostics["unidentified_latents"] == {}
    flat = np.array([1e-9, 1000.0, 3000.0])  # latent 0: the model says it barely moves in the run
    trace = dataclasses.replace(small_trace, model_curvature=_terms(small_trace, curvature=flat))
    with pytest.warns(RuntimeWarning) as caught:  # the grid's edge-mass warning too: the trace did not settle
        post = noise_aware_posterior(trace, rng_key=0)
    flagged = [str(w.message) for w in caught if issubclass(w.category, UnidentifiedLatentsWarning)]
    assert len(flagged) == 1 and "does not identify latents ['theta[0]']" in flagged[0], flagged
    why = post.diagnostics["unidentified_latents"]
    assert list(why) == ["theta[0]"] and "model's curvature" in why["theta[0]"]
    ident = post.diagnostics["identifiability"]
    assert ident.prior_only.tolist() == [True, False, False]
    assert ident.model_relaxation_steps[0] > ident.window[0] > ident.model_relaxation_steps[1]
    steady = noise_aware_posterior(dataclasses.replace(small_trace, model_curvature=_terms(small_trace)), rng_key=0)
    assert steady.diagnostics["unidentified_latents"] == {}


def test_an_unidentified_simplex_coordinate_is_named_as_unconstrained(small_trace):
    """A simplex's unconstrained coordinates (3 for 4 entries) are not the summary's entries: the warning
    that names them says so, with both shapes; a site whose shapes agree gets no such note."""
    simplex = ParamLayout((Site("p", (4,), (3,), {"kind": "simplex"}),))
    flat = np.array([1e-9, 1000.0, 3000.0])  # coordinate 0 barely moves at the model's curvature
    trace = dataclasses.replace(small_trace, layout=simplex, model_curvature=_terms(small_trace, curvature=flat))
    with pytest.warns(RuntimeWarning) as caught:
        noise_aware_posterior(trace, rng_key=0)
    said = [str(w.message) for w in caught if issubclass(w.category, UnidentifiedLatentsWarning)]
    assert len(said) == 1 and "['p[0]']" in said[0], said
    assert "the indices of p number the site's unconstrained coordinates" in said[0]
    assert "p (3,) against (4,)" in said[0]
    plain = dataclasses.replace(small_trace, model_curvature=_terms(small_trace, curvature=flat))
    with pytest.warns(RuntimeWarning) as caught:
        noise_aware_posterior(plain, rng_key=0)
    said = [str(w.message) for w in caught if issubclass(w.category, UnidentifiedLatentsWarning)]
    assert len(said) == 1 and "unconstrained coordinates" not in said[0], said
