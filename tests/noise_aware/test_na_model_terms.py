"""noise_aware_posterior with the model's curvature terms of a trace (noise_aware.model_terms)."""

from __future__ import annotations

import dataclasses
import warnings

import jax
import numpy as np
import pytest

from dpposterior import noise_aware_posterior
from dpposterior.noise_aware import (
    CoupledLatentsWarning,
    CurvatureFromTraceWarning,
    UnidentifiedLatentsWarning,
    model_terms,
)
from dpposterior.releases.layout import ParamLayout, Site
from dpposterior.releases.model_curvature import ModelCurvature

A_TRUE = np.array([300.0, 1000.0, 3000.0])


def _terms(trace, curvature=A_TRUE, shift=None, slope=None, hessian_means=None):
    d = trace.num_params
    phi = np.asarray(trace.phi, np.float64)
    return ModelCurvature(
        point=phi[int(0.2 * phi.shape[0]) :].mean(0),
        curvature=np.asarray(curvature, np.float64),
        hessian_diag=np.r_[A_TRUE, np.ones(d // 2)],
        hessian_diag_slope=np.zeros((d, d)) if slope is None else slope,
        clip_shift=np.zeros(d) if shift is None else shift,
        num_records=100,
        hessian_means=hessian_means,
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


#: a Hessian over the three means whose first two latents are correlated at -0.8 (the third independent)
H_CORRELATED = np.array(
    [[300.0, -0.8 * np.sqrt(300.0 * 1000.0), 0.0], [-0.8 * np.sqrt(300.0 * 1000.0), 1000.0, 0.0], [0.0, 0.0, 3000.0]]
)


def test_the_linear_response_gives_q_the_marginal_spread_of_correlated_latents(small_trace):
    """q's sd 1 / sqrt(H_jj) is the spread with the other latents held fixed; with the linear-response
    shape the posterior's draws spread as sqrt((H^-1)_jj) (= 1 / sqrt(1 - 0.8^2) = 5/3 times wider for the
    correlated pair) and carry H's correlation; the independent latent is unchanged."""
    trace = dataclasses.replace(small_trace, model_curvature=_terms(small_trace, hessian_means=H_CORRELATED))
    with pytest.warns(CoupledLatentsWarning, match=r"couples latents \['theta\[0\]', 'theta\[1\]'\].*1\.67x"):
        post = noise_aware_posterior(trace, rng_key=0)
    assert any("couples latents" in w for w in post.warnings)
    plain = noise_aware_posterior(dataclasses.replace(small_trace, model_curvature=_terms(small_trace)), rng_key=0)
    assert plain.linear_response is None and plain.diagnostics["linear_response"] == {
        f"theta[{j}]": 1.0 for j in range(3)
    }
    widen = post.diagnostics["linear_response"]
    np.testing.assert_allclose([widen[f"theta[{j}]"] for j in range(3)], [5 / 3, 5 / 3, 1.0], rtol=1e-6)
    shape = post.linear_response
    np.testing.assert_allclose(shape @ shape.T, [[25 / 9, 20 / 9, 0], [20 / 9, 25 / 9, 0], [0, 0, 1]], atol=1e-9)
    # one phi*: theta = mu* + sd * (L eps), so the draws' covariance is diag(sd) L L^T diag(sd)
    point = dataclasses.replace(post, phi_star=post.phi_star[:1], phi_sampler=None)
    draws = np.asarray(point.sample_unconstrained(jax.random.PRNGKey(1), 200_000), np.float64)
    sd = np.asarray(jax.nn.softplus(post.phi_star[0, 3:]), np.float64)
    np.testing.assert_allclose(np.cov(draws.T), np.outer(sd, sd) * (shape @ shape.T), rtol=0.03, atol=2e-4)
    np.testing.assert_allclose(np.asarray(point.sd_unconstrained()), sd * np.array([5 / 3, 5 / 3, 1.0]), rtol=1e-5)
    # the mixture over phi* draws: sd_unconstrained adds Var[mu*] to the widened q variance
    wide = np.asarray(post.sample_unconstrained(jax.random.PRNGKey(2), 200_000), np.float64).std(0)
    np.testing.assert_allclose(np.asarray(post.sd_unconstrained()), wide, rtol=0.02)
    assert np.all(wide[:2] > 1.5 * np.asarray(plain.sample_unconstrained(jax.random.PRNGKey(2), 200_000)).std(0)[:2])


def test_the_linear_response_is_left_out_where_it_cannot_be_formed(small_trace):
    """No Hessian block, one latent, or a Hessian that is not positive definite: q keeps its diagonal shape;
    the last says so. A prior-only latent keeps R_jj = 1 and no correlation."""
    assert model_terms.linear_response(_terms(small_trace)) is None
    indefinite = H_CORRELATED.copy()
    indefinite[0, 1] = indefinite[1, 0] = -1.2 * np.sqrt(300.0 * 1000.0)
    assert model_terms.linear_response(_terms(small_trace, hessian_means=indefinite)) is None
    trace = dataclasses.replace(small_trace, model_curvature=_terms(small_trace, hessian_means=indefinite))
    with pytest.warns(RuntimeWarning, match="not positive definite at the trace mean, so q keeps its diagonal"):
        post = noise_aware_posterior(trace, rng_key=0)
    assert post.linear_response is None and any("not positive definite" in w for w in post.warnings)
    one = _terms(small_trace, hessian_means=H_CORRELATED)._replace(hessian_means=np.array([[300.0]]))
    assert model_terms.linear_response(one) is None
    shape = model_terms.linear_response(_terms(small_trace, hessian_means=H_CORRELATED), np.array([True, False, False]))
    np.testing.assert_allclose(shape @ shape.T, np.diag([1.0, 25 / 9, 1.0]), atol=1e-9)


def test_a_posterior_refuses_a_malformed_linear_response(small_trace):
    post = noise_aware_posterior(dataclasses.replace(small_trace, model_curvature=_terms(small_trace)), rng_key=0)
    for bad in (np.eye(2), np.ones((3, 3)), np.full((3, 3), np.nan)):
        with pytest.raises(ValueError, match="linear_response must be None or a finite lower-triangular"):
            dataclasses.replace(post, linear_response=bad)


def test_the_hessian_block_round_trips_and_is_checked(small_trace):
    from dpposterior.releases.model_curvature import check_model_curvature

    terms = _terms(small_trace, hessian_means=H_CORRELATED)
    back = ModelCurvature.from_dict(terms.to_dict())
    np.testing.assert_array_equal(back.hessian_means, H_CORRELATED)
    assert ModelCurvature.from_dict(_terms(small_trace).to_dict()).hessian_means is None
    with pytest.raises(ValueError, match=r"hessian_means must have shape \(3, 3\)"):
        check_model_curvature(terms._replace(hessian_means=np.eye(2)), 6)
    skew = H_CORRELATED.copy()
    skew[0, 1] += 1.0
    with pytest.raises(ValueError, match="hessian_means must be symmetric"):
        check_model_curvature(terms._replace(hessian_means=skew), 6)


def test_the_trace_slope_warning_names_every_reason_a_release_has_no_curvature(small_trace):
    said = model_terms.trace_slope_message(small_trace)
    for reason in ("covariates", "a mask or a factor likelihood", "more than 32 variational parameters"):
        assert reason in said


def test_latents_coupled_below_the_limit_give_no_warning(small_trace):
    """At correlation 0.45 the widening is 1.12, under COUPLING_LIMIT: the shape is applied, silently."""
    weak = np.diag(np.diag(H_CORRELATED)).copy()
    weak[0, 1] = weak[1, 0] = -0.45 * np.sqrt(300.0 * 1000.0)
    trace = dataclasses.replace(small_trace, model_curvature=_terms(small_trace, hessian_means=weak))
    with warnings.catch_warnings():
        warnings.simplefilter("error", CoupledLatentsWarning)
        post = noise_aware_posterior(trace, rng_key=0)
    assert post.diagnostics["linear_response"]["theta[0]"] == pytest.approx(1 / np.sqrt(1 - 0.45**2), rel=1e-6)


def test_the_noise_part_read_per_coordinate_narrows_coupled_intervals(small_trace):
    """The per-coordinate gradient model gives phi*_j the error s_j / H_jj; solved jointly it is
    (H^-1 S H^-1)_jj. Two latents of equal noise at correlation r, with q's part negligible, are too narrow
    by sqrt(1 + r^2) / (1 - r^2): 1.38 at r = 0.45, where q's linear-response widening is only 1.12 and
    would not warn. A large q part dilutes it; uncorrelated latents give 1; prior-only latents are left
    uncoupled."""
    r = 0.45
    h = np.array([[100.0, -r * 100.0], [-r * 100.0, 100.0]])
    terms = _terms(small_trace)._replace(hessian_means=h)
    noise_sd = np.array([0.1, 0.1, 0.5, 0.5])  # phi* sds: means, then rho (not read)
    np.testing.assert_allclose(
        model_terms.noise_narrowing(terms, np.zeros(2), noise_sd), np.sqrt(1 + r * r) / (1 - r * r), rtol=1e-9
    )
    wide_q = model_terms.noise_narrowing(terms, np.full(2, 1.0), noise_sd)
    assert np.all((1 < wide_q) & (wide_q < 1.01))
    diag = terms._replace(hessian_means=np.diag([100.0, 400.0]))
    np.testing.assert_allclose(model_terms.noise_narrowing(diag, np.zeros(2), noise_sd), 1.0)
    np.testing.assert_allclose(model_terms.noise_narrowing(terms, np.zeros(2), noise_sd, np.array([True, False])), 1.0)
    assert (
        model_terms.noise_narrowing(
            terms._replace(hessian_means=np.array([[1.0, 2.0], [2.0, 1.0]])), np.zeros(2), noise_sd
        )
        is None
    )
    # the warning compares the larger of the two factors with the limit
    assert model_terms.coupled({"a": 1.12, "b": 1.12}, {"a": 1.38, "b": 1.1}) == {"a": 1.38}
    assert model_terms.coupled({"a": 1.2}, None) == {"a": 1.2}
    # a posterior records the factor it computed from its own phi* posterior
    trace = dataclasses.replace(small_trace, model_curvature=_terms(small_trace, hessian_means=H_CORRELATED))
    with pytest.warns(CoupledLatentsWarning):
        post = noise_aware_posterior(trace, rng_key=0)
    mean = np.asarray(post.diagnostics["phi_star_mean"], np.float64)
    q_sd = np.log1p(np.exp(mean[3:])) * np.array([5 / 3, 5 / 3, 1.0])
    expect = model_terms.noise_narrowing(trace.model_curvature, q_sd, post.diagnostics["phi_star_sd"])
    got = post.diagnostics["noise_coupling"]
    np.testing.assert_allclose([got[f"theta[{j}]"] for j in range(3)], expect, rtol=1e-5)
    assert got["theta[2]"] == pytest.approx(1.0) and got["theta[0]"] > 1.0
