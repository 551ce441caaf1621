"""Layouts, the variational family and the DPVITrace file format."""

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dpposterior.privacy import PrivacySpent, dpsgd_epsilon
from dpposterior.vi import DPVITrace, ParamLayout
from dpposterior.releases import family
from dpposterior.releases.layout import Site, spec_to_support, support_to_spec
from numpyro.distributions import constraints


def _layout():
    return ParamLayout(
        (
            Site("a", (), (), {"kind": "positive"}),
            Site("p", (3,), (2,), {"kind": "simplex"}),
            Site("w", (2,), (2,), {"kind": "independent", "base": {"kind": "real"}, "ndims": 1}),
            Site("u", (), (), {"kind": "interval", "low": -1.0, "high": 2.0}),
        )
    )


def _trace(layout=None, T=20):
    layout = layout or _layout()
    d = 2 * layout.num_latent
    rng = np.random.default_rng(0)
    # a record that describes the trace (DPVITrace.load checks it): sigma 2 on gradients of noise std 2
    spent = PrivacySpent(
        epsilon=dpsgd_epsilon(2.0, 1e-5, 0.1, T),
        delta=1e-5,
        neighbouring="add_remove",
        accountant="pld",
        mechanism="poisson_subsampled_gaussian",
        noise_multiplier=2.0,
        sampling_rate=0.1,
        num_steps=T,
        seeded_by="user",
    )
    return DPVITrace(
        phi=rng.normal(size=(T, d)),
        grads=2.0 * rng.normal(size=(T, d)),
        final_phi=rng.normal(size=d),
        beta=np.ones(d),
        learning_rate=0.01,
        clip=1.0,
        noise_multiplier=2.0,
        sampling_rate=0.1,
        num_steps=T,
        dataset_size=100,
        num_mc=10,
        layout=layout,
        privacy=spent,
        model_name="m",
    )


def test_layout_constrain_unconstrain_round_trip():
    L = _layout()
    assert L.num_latent == 6
    theta = jax.random.normal(jax.random.PRNGKey(1), (5, 6))
    vals = L.constrain(theta)
    assert vals["p"].shape == (5, 3)
    np.testing.assert_allclose(vals["p"].sum(-1), 1.0, rtol=1e-5)
    assert bool(jnp.all(vals["a"] > 0)) and bool(jnp.all((vals["u"] > -1) & (vals["u"] < 2)))
    np.testing.assert_allclose(L.unconstrain(vals), theta, atol=1e-4)


def test_log_det_matches_autodiff_jacobian():
    L = _layout()
    theta = jax.random.normal(jax.random.PRNGKey(2), (6,))
    _, ldj = L.constrain_with_log_det(theta)
    # a (positive), u (interval) and w are elementwise: check those parts against autodiff
    site_a = L.sites[0].transform()
    da = jax.grad(lambda t: site_a(t))(theta[0])
    site_u = L.sites[3].transform()
    du = jax.grad(lambda t: site_u(t))(theta[5])
    simplex = L.sites[1].transform()
    p = simplex(theta[1:3])
    ldj_simplex = simplex.log_abs_det_jacobian(theta[1:3], p)
    np.testing.assert_allclose(ldj, jnp.log(da) + jnp.log(du) + ldj_simplex, rtol=1e-5)


def test_support_specs_round_trip():
    for c in (
        constraints.real,
        constraints.positive,
        constraints.unit_interval,
        constraints.simplex,
        constraints.interval(0.0, 3.0),
        constraints.greater_than(1.5),
        constraints.independent(constraints.positive, 1),
    ):
        spec = support_to_spec(c)
        assert spec["kind"] != "unknown"
        json.dumps(spec)
        assert support_to_spec(spec_to_support(spec)) == spec


def test_unknown_support_spec_is_a_clear_error():
    with pytest.raises(ValueError, match="cannot rebuild the support"):
        spec_to_support({"kind": "weird"})


def test_family_inverse_scale_and_log_prob():
    sd = jnp.array([1e-3, 0.1, 1.0, 30.0])
    np.testing.assert_allclose(family.scale(family.inverse_scale(sd)), sd, rtol=1e-5)
    phi = jnp.array([0.5, -1.0, family.inverse_scale(0.3), family.inverse_scale(2.0)])
    theta = jnp.array([0.1, 0.2])
    expected = jax.scipy.stats.norm.logpdf(0.1, 0.5, 0.3) + jax.scipy.stats.norm.logpdf(0.2, -1.0, 2.0)
    np.testing.assert_allclose(family.log_prob(theta, phi), expected, rtol=1e-5)


def test_trace_save_load_round_trip(tmp_path):
    tr = _trace()
    path = tr.save(tmp_path / "t.npz")
    back = DPVITrace.load(path)
    np.testing.assert_array_equal(back.phi, tr.phi)
    np.testing.assert_array_equal(back.grads, tr.grads)
    assert back.privacy == tr.privacy
    assert back.layout == tr.layout
    assert (back.clip, back.noise_multiplier, back.num_steps, back.dataset_size) == (1.0, 2.0, 20, 100)


def test_trace_load_detects_truncation(tmp_path):
    path = _trace().save(tmp_path / "t.npz")
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match="truncated or corrupted"):
        DPVITrace.load(path)


def test_trace_load_detects_tampering(tmp_path):
    tr = _trace()
    path = tr.save(tmp_path / "t.npz")
    with np.load(path) as z:
        contents = {k: z[k] for k in z.files}
    contents["grads"] = contents["grads"] * 0.5  # someone rescales the noisy gradients
    np.savez_compressed(path, **contents)
    with pytest.raises(ValueError, match="checksum mismatch"):
        DPVITrace.load(path)


def test_trace_load_rejects_other_version(tmp_path):
    tr = _trace()
    path = tr.save(tmp_path / "t.npz")
    with np.load(path) as z:
        contents = {k: z[k] for k in z.files}
    meta = json.loads(contents["metadata"].tobytes().decode())
    meta["version"] = 99
    text = json.dumps(meta, sort_keys=True)
    from dpposterior._io import array_digest as _digest

    arrays = {k: contents[k] for k in ("phi", "grads", "final_phi", "beta", "learning_rate")}
    contents["metadata"] = np.frombuffer(text.encode(), dtype=np.uint8)
    contents["checksum"] = np.frombuffer(_digest(arrays, text).encode(), dtype=np.uint8)
    np.savez_compressed(path, **contents)
    with pytest.raises(ValueError, match="version 99 is not supported"):
        DPVITrace.load(path)


def test_trace_load_rejects_non_trace_file(tmp_path):
    p = tmp_path / "x.npz"
    np.savez(p, a=np.zeros(3))
    with pytest.raises(ValueError, match="not a DPVI trace file"):
        DPVITrace.load(p)
    p2 = tmp_path / "y.npz"
    p2.write_text("hello")
    with pytest.raises(ValueError, match="not a readable DPVI trace"):
        DPVITrace.load(p2)


def test_trace_shape_errors():
    L = _layout()
    with pytest.raises(ValueError, match="d must be 2n"):
        DPVITrace(
            phi=np.zeros((5, 4)),
            grads=np.zeros((5, 4)),
            final_phi=np.zeros(4),
            beta=1.0,
            learning_rate=1.0,
            clip=1.0,
            noise_multiplier=1.0,
            sampling_rate=0.1,
            num_steps=5,
            dataset_size=10,
            num_mc=1,
            layout=L,
            privacy=_trace().privacy,
        )


def test_last_iterate_posterior_is_the_gaussian_at_phi_T():
    tr = _trace(ParamLayout.flat(2))
    post = tr.last_iterate_posterior()
    draws = post.sample_unconstrained(jax.random.PRNGKey(0), 20000)
    mu, rho = family.split_phi(jnp.asarray(tr.final_phi))
    np.testing.assert_allclose(draws.mean(0), mu, atol=4 * float(family.scale(rho).max()) / np.sqrt(20000))
    np.testing.assert_allclose(draws.std(0), family.scale(rho), rtol=0.03)
    assert post.privacy is tr.privacy


def test_posterior_sample_phi_and_summary_refuse_bad_counts_keys_and_probs():
    # sample_phi(key, 0) returned an empty array and -1 a JAX broadcast error; summary(prob="0.9")
    # was "'<' not supported between instances of 'int' and 'str'"
    post = _trace().last_iterate_posterior()
    assert post.sample_phi(jax.random.PRNGKey(0), 3).shape == (3, 12)
    assert post.sample_phi(5, 2).shape == (2, 12)  # an int seed, as sample() takes
    for bad in (0, -1, 2.0):
        with pytest.raises(ValueError, match="num_samples must be an integer >= 1"):
            post.sample_phi(jax.random.PRNGKey(0), bad)
    with pytest.raises(TypeError, match="key must be a JAX PRNG key"):
        post.sample_phi("k", 3)
    with pytest.raises(TypeError, match="prob must be a real number"):
        post.summary(num_samples=10, prob="0.9")
    with pytest.raises(ValueError, match="prob must lie in"):
        post.summary(num_samples=10, prob=float("nan"))


def test_trace_save_to_a_folder_or_an_unwritable_place_is_a_clear_error(tmp_path):
    # were IsADirectoryError / FileNotFoundError naming the hidden temporary file
    t = _trace()
    with pytest.raises(ValueError, match="is a folder, not a file"):
        t.save(tmp_path)
    (tmp_path / "f").write_text("")
    with pytest.raises(ValueError, match="is a file, not a folder"):
        t.save(tmp_path / "f" / "trace.npz")
    with pytest.raises(TypeError, match="path must be a file path"):
        t.save(3)
    assert DPVITrace.load(t.save(tmp_path / "new" / "trace.npz")).num_steps == t.num_steps
