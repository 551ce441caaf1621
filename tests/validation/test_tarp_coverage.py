"""TARP coverage: agreement with an independent loop and with the `tarp` package, marginal and
repeated-reference variants, bootstrap bands, the RMSE, and the reference points."""

import ast
import pathlib

import jax
import jax.numpy as jnp
from fractions import Fraction

import numpy as np
import pytest

import dpposterior.validation as val
from dpposterior.validation import coverage as coverage_module


def _problem(seed, K, M, n, spread=1.0):
    """Draws from a Gaussian 'posterior' around a noisy centre, with truths and references."""
    rng = np.random.default_rng(seed)
    theta = rng.normal(size=(K, n))
    centre = theta + rng.normal(size=(K, n))
    draws = centre[:, None, :] + spread * rng.normal(size=(K, M, n))
    references = centre + rng.uniform(-2.0, 2.0, size=(K, n))
    return draws, theta, references


def _loop_tarp(draws, theta, references, alpha):
    """An independent, plain per-replicate implementation of papers/na-dpvi.txt 13.4."""
    K, M, _ = draws.shape
    f, closer_counts = [], []
    for i in range(K):
        radius = np.linalg.norm(theta[i] - references[i])
        closer = 0
        for j in range(M):
            if np.linalg.norm(draws[i, j] - references[i]) < radius:
                closer += 1
        f.append(closer / M)
        closer_counts.append(closer)
    coverage = []
    for a in alpha:
        coverage.append(sum(1 for c in closer_counts if _below(c, M, a)) / K)
    return np.array(f), np.array(coverage)


def _below(closer, M, a):
    """closer / M < 1 - a in exact rational arithmetic, alpha read as the decimal it was written as
    (0.7, not the float 0.6999999999999999556): the strict rule, whatever the rounding of 1 - a."""
    return Fraction(closer, M) < 1 - Fraction(float(a)).limit_denominator(10**6)


def test_default_alpha_grid():
    alpha = val.default_alpha_grid()
    assert alpha.shape == (999,)
    assert alpha[0] == 0.001 and alpha[-1] == 0.999
    np.testing.assert_allclose(np.diff(alpha), 0.001, rtol=1e-9)


def test_tarp_coverage_equals_plain_loop():
    draws, theta, refs = _problem(0, K=60, M=150, n=3)
    alpha = val.default_alpha_grid()
    f_loop, cov_loop = _loop_tarp(draws, theta, refs, alpha)
    result = val.tarp_coverage(draws, theta, refs)
    a, cov = result  # unpacks as (alpha, coverage)
    np.testing.assert_array_equal(a, alpha)
    np.testing.assert_array_equal(result.f, f_loop)
    np.testing.assert_array_equal(cov, cov_loop)
    np.testing.assert_array_equal(val.tarp_f_values(draws, theta, refs), f_loop)
    np.testing.assert_array_equal(val.coverage_from_f(f_loop), cov_loop)


def test_ties_count_as_not_closer():
    # Integer points give many exact distance ties; "closer" is strict, as in the paper.
    rng = np.random.default_rng(1)
    draws = rng.integers(-2, 3, size=(40, 50, 2)).astype(float)
    theta = rng.integers(-2, 3, size=(40, 2)).astype(float)
    refs = rng.integers(-1, 2, size=(40, 2)).astype(float)
    alpha = np.array([0.1, 0.3, 0.5, 0.7, 0.9])
    f_loop, cov_loop = _loop_tarp(draws, theta, refs, alpha)
    result = val.tarp_coverage(draws, theta, refs, alpha)
    np.testing.assert_array_equal(result.f, f_loop)
    np.testing.assert_array_equal(result.coverage, cov_loop)


def test_chunking_and_input_types_do_not_change_the_result(monkeypatch):
    draws, theta, refs = _problem(2, K=37, M=64, n=4)
    full = val.tarp_coverage(draws, theta, refs)
    full_marginal = val.marginal_coverage(draws, theta, refs)
    refs_r = np.stack([refs, refs + 0.3])
    full_repeats = val.tarp_coverage_repeats(draws, theta, refs_r)
    # One replicate per chunk, then 5 replicates per chunk (37 is not a multiple of 5).
    for per_chunk in (1, 5):
        monkeypatch.setattr(coverage_module, "_CHUNK_BYTES", per_chunk * 64 * 4 * 8)
        np.testing.assert_array_equal(val.tarp_coverage(draws, theta, refs).f, full.f)
        np.testing.assert_array_equal(val.marginal_coverage(draws, theta, refs).f, full_marginal.f)
        np.testing.assert_array_equal(val.tarp_coverage_repeats(draws, theta, refs_r).f, full_repeats.f)
    monkeypatch.undo()
    # float32 JAX arrays: the same as the float32 values handled in numpy.
    d32, t32, r32 = (x.astype(np.float32) for x in (draws, theta, refs))
    via_jax = val.tarp_coverage(jnp.asarray(d32), jnp.asarray(t32), jnp.asarray(r32))
    np.testing.assert_array_equal(via_jax.f, val.tarp_coverage(d32, t32, r32).f)


def _import_tarp():
    try:
        import tarp  # noqa: PLC0415
    except ImportError as err:  # tarp 0.1.1 imports `deprecation` and `tqdm` without declaring them
        pytest.skip(f"the tarp package cannot be imported here: {err}")
    return tarp


def test_agrees_with_tarp_package():
    """Same draws and references, no normalisation (norm=False).

    The package bins the f values into ``num_alpha_bins`` equal-width bins between min(f) and
    max(f) and returns, at each bin edge x, ecp(x) = share of f below x (its "alpha" is our
    credibility 1 - alpha). We compare (1) exactly at its bin edges, which pins down that both
    compute the same f values, and (2) our curve on our grid against its curve interpolated there,
    within the binning tolerance: the largest share of replicates that falls in one of its bins.
    """
    tarp = _import_tarp()
    K, M, n = 300, 400, 3
    draws, theta, refs = _problem(3, K, M, n, spread=0.8)
    ours = val.tarp_coverage(draws, theta, refs)
    state = np.random.get_state()  # the package reseeds numpy's global generator
    try:
        ecp, edges = tarp.get_tarp_coverage(
            np.ascontiguousarray(np.transpose(draws, (1, 0, 2))),  # (n_samples, n_sims, n_dims)
            theta.copy(),
            references=refs.copy(),
            metric="euclidean",
            num_alpha_bins=50,
            norm=False,
            bootstrap=False,
        )
    finally:
        np.random.set_state(state)
    # (1) at the package's bin edges: ecp[k] = share of f_i < edge_k (the last edge includes max f).
    below_edges = (ours.f[:, None] < edges[None, :-1]).mean(axis=0)
    np.testing.assert_allclose(ecp[:-1], below_edges, atol=1e-12)
    assert ecp[-1] == pytest.approx(1.0)
    # (2) on our grid, within the binning tolerance.
    theirs = np.interp(1.0 - ours.alpha, edges, ecp, left=0.0, right=1.0)
    tolerance = np.max(np.diff(ecp)) + 1e-12
    assert np.max(np.abs(ours.coverage - theirs)) <= tolerance
    assert tolerance < 0.06  # the comparison is not vacuous


def test_marginal_coverage_matches_one_dimensional_tarp():
    draws, theta, refs = _problem(4, K=80, M=120, n=3)
    marginal = val.marginal_coverage(draws, theta, refs)
    assert marginal.coverage.shape == (3, 999) and marginal.f.shape == (80, 3)
    for j in range(3):
        one_d = val.tarp_coverage(draws[..., j : j + 1], theta[:, j : j + 1], refs[:, j : j + 1])
        np.testing.assert_array_equal(marginal.f[:, j], one_d.f)
        np.testing.assert_array_equal(marginal.coverage[j], one_d.coverage)
    # n = 1: the marginal and the joint coverage are the same thing.
    d1, t1, r1 = draws[..., :1], theta[:, :1], refs[:, :1]
    np.testing.assert_array_equal(val.marginal_coverage(d1, t1, r1).coverage[0], val.tarp_coverage(d1, t1, r1).coverage)
    assert marginal.rmse.shape == (3,)


def test_coverage_rmse_values():
    alpha = val.default_alpha_grid()
    assert val.coverage_rmse(alpha, 1.0 - alpha) == 0.0
    np.testing.assert_array_equal(val.coverage_rmse(alpha, np.stack([1.0 - alpha] * 4)), np.zeros(4))
    a = np.array([0.25, 0.5, 0.75])
    c = np.array([0.85, 0.4, 0.25])
    assert val.coverage_rmse(a, c) == pytest.approx(np.sqrt((0.1**2 + 0.1**2 + 0.0) / 3), rel=1e-12)
    stack = np.stack([c, 1.0 - a])
    np.testing.assert_allclose(val.coverage_rmse(a, stack), [np.sqrt(0.02 / 3), 0.0], atol=1e-15)
    assert isinstance(val.coverage_rmse(a, c), float)


def test_coverage_from_f_several_curves():
    rng = np.random.default_rng(5)
    f = rng.uniform(size=(200, 3))
    alpha = np.array([0.05, 0.5, 0.95])
    curves = val.coverage_from_f(f, alpha)
    assert curves.shape == (3, 3)
    for j in range(3):
        np.testing.assert_array_equal(curves[j], [(f[:, j] < 1 - a).mean() for a in alpha])


def test_repeats_average_single_curves():
    draws, theta, refs = _problem(6, K=50, M=80, n=2)
    centre = refs  # any release statistic will do here
    refs_r = val.repeated_reference_points(7, centre, np.full(centre.shape, 0.5), repeats=4)
    result = val.tarp_coverage_repeats(draws, theta, refs_r)
    assert result.per_repeat.shape == (4, 999) and result.f.shape == (4, 50)
    for r in range(4):
        single = val.tarp_coverage(draws, theta, refs_r[r])
        np.testing.assert_array_equal(result.per_repeat[r], single.coverage)
        np.testing.assert_array_equal(result.f[r], single.f)
    np.testing.assert_allclose(result.coverage, result.per_repeat.mean(axis=0), atol=1e-15)
    alpha, coverage = result
    assert result.rmse == val.coverage_rmse(alpha, coverage)
    np.testing.assert_array_equal(result.single_draw_rmse, val.coverage_rmse(alpha, result.per_repeat))
    assert result.std.shape == (999,)


def test_bootstrap_band():
    K = 400
    draws, theta, refs = _problem(8, K=K, M=100, n=2)
    result = val.tarp_coverage(draws, theta, refs, bootstrap=500, rng_key=0)
    alpha, coverage = result  # still unpacks as two arrays
    assert result.bootstrap_coverage.shape == (500, 999)
    assert result.lower.shape == result.upper.shape == (999,)
    assert np.all(result.lower <= result.upper)
    assert np.all((result.lower <= coverage + 1e-12) & (coverage - 1e-12 <= result.upper))
    again = val.tarp_coverage(draws, theta, refs, bootstrap=500, rng_key=jax.random.PRNGKey(0))
    np.testing.assert_array_equal(again.lower, result.lower)
    # The 95% band of a share p from K replicates is about 2 * 1.96 * sqrt(p (1 - p) / K) wide;
    # 500 resamples estimate that width to within a few percent, so 20% is a safe tolerance.
    k = int(np.argmin(np.abs(alpha - 0.5)))
    p = coverage[k]
    expected = 2 * 1.96 * np.sqrt(p * (1 - p) / K)
    assert abs((result.upper[k] - result.lower[k]) - expected) <= 0.2 * expected
    marginal = val.marginal_coverage(draws, theta, refs, bootstrap=50, rng_key=1)
    assert marginal.lower.shape == (2, 999) and marginal.bootstrap_coverage.shape == (50, 2, 999)


def test_reference_points():
    K, n = 5000, 2
    centre = np.tile([1.0, -3.0], (K, 1))
    scale = np.tile([0.5, 2.0], (K, 1))
    refs = val.reference_points(jax.random.PRNGKey(11), centre, scale)
    assert refs.shape == (K, n) and refs.dtype == np.float64
    offsets = (refs - centre) / scale
    assert offsets.min() >= -4.0 and offsets.max() < 4.0
    # Uniform(-4, 4): mean 0, sd 8 / sqrt(12); 5 standard errors of the mean over 10,000 values.
    assert abs(offsets.mean()) < 5 * (8 / np.sqrt(12)) / np.sqrt(K * n)
    assert offsets.min() < -3.9 and offsets.max() > 3.9
    np.testing.assert_array_equal(val.reference_points(11, centre, scale), refs)
    np.testing.assert_array_equal(val.reference_points(jax.random.key(11), centre, scale), refs)
    assert not np.array_equal(val.reference_points(12, centre, scale), refs)
    narrow = val.reference_points(3, centre, scale, low=-1.0, high=0.5)
    assert ((narrow - centre) / scale).min() >= -1.0 and ((narrow - centre) / scale).max() < 0.5
    repeated = val.repeated_reference_points(11, centre[:10], scale[:10], repeats=3)
    assert repeated.shape == (3, 10, n)
    keys = jax.random.split(jax.random.PRNGKey(11), 3)
    for r in range(3):
        np.testing.assert_array_equal(repeated[r], val.reference_points(keys[r], centre[:10], scale[:10]))


def test_validation_never_imports_datasets():
    package = pathlib.Path(val.__file__).parent
    for path in package.glob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                names = [node.module or ""] + [a.name for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            assert not any("datasets" in name for name in names), f"{path.name} imports {names}"


@pytest.mark.slow
def test_paper_scale_is_fast_and_chunked():
    import resource  # noqa: PLC0415
    import time  # noqa: PLC0415

    K, M, n = 500, 20_000, 11
    rng = np.random.default_rng(0)
    draws = rng.standard_normal((K, M, n), dtype=np.float32)
    theta = rng.standard_normal((K, n))
    refs = rng.standard_normal((K, n))
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    result = val.tarp_coverage(draws, theta, refs)
    elapsed = time.perf_counter() - start
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert result.coverage.shape == (999,)
    assert elapsed < 30.0
    assert grown_mib < 1024  # the draws take 420 MiB; a float64 copy of them all would take 840 MiB


def test_a_statistic_equal_to_the_level_is_never_covered():
    """f_i = 1 - alpha is outside the (1 - alpha) region at every alpha, whatever the rounding of
    1.0 - alpha: f = 0.3 at alpha = 0.7 (1.0 - 0.7 = 0.30000000000000004) was counted as covered,
    f = 0.7 at alpha = 0.3 (1.0 - 0.3 = 0.7) was not; with M = 1000 draws on the default grid 211 of
    the 999 levels counted such ties as covered."""
    np.testing.assert_array_equal(val.coverage_from_f(np.full(5, 0.3), [0.7]), [0.0])
    np.testing.assert_array_equal(val.coverage_from_f(np.full(5, 0.7), [0.3]), [0.0])
    alpha = val.default_alpha_grid()
    for M in (10, 100, 1000):
        j = np.arange(M + 1)
        expected = [np.mean([_below(c, M, a) for c in j]) for a in alpha[::37]]
        np.testing.assert_array_equal(val.coverage_from_f(j / M, alpha[::37]), expected)
    # through tarp_coverage: M = 10 draws, 3 of them closer than the truth in every replicate
    K, M = 8, 10
    theta = np.zeros((K, 1))
    refs = np.full((K, 1), 1.0)
    draws = np.tile(np.array([0.5] * 3 + [3.0] * 7)[None, :, None], (K, 1, 1))
    result = val.tarp_coverage(draws, theta, refs, alpha=[0.3, 0.69, 0.7, 0.71], bootstrap=20, rng_key=0)
    np.testing.assert_array_equal(result.f, np.full(K, 0.3))
    np.testing.assert_array_equal(result.coverage, [1.0, 1.0, 0.0, 0.0])
    np.testing.assert_array_equal(result.upper, [1.0, 1.0, 0.0, 0.0])
    rep = val.tarp_coverage_repeats(draws, theta, refs[None], alpha=[0.7])
    np.testing.assert_array_equal(rep.coverage, [0.0])


def test_statistics_given_in_float32_follow_the_same_tie_rule():
    """f computed in JAX is float32, and float32(0.7) = 0.69999999 was counted as
    covered at alpha = 0.3 while float32(0.3) = 0.30000001 was not at alpha = 0.7: for f = j / 1000, 489 of
    the 999 default levels differed from the float64 curve. Now a float32 (or float16) statistic within two
    ulps of 1 - alpha counts as equal to it; up to M = 4,000 draws the curves equal the float64 ones."""
    np.testing.assert_array_equal(val.coverage_from_f(np.full(5, 0.7, np.float32), [0.3]), [0.0])
    np.testing.assert_array_equal(val.coverage_from_f(np.full(5, 0.3, np.float32), [0.7]), [0.0])
    for M in (10, 100, 1000, 4000):
        j = np.arange(M + 1)
        exact = val.coverage_from_f(j / M)
        np.testing.assert_array_equal(val.coverage_from_f((j / M).astype(np.float32)), exact)
        shares = jnp.mean(jnp.arange(M)[None, :] < jnp.asarray(j)[:, None], axis=1)  # as a JAX user gets f
        assert shares.dtype == jnp.float32
        np.testing.assert_array_equal(val.coverage_from_f(shares), exact)
    np.testing.assert_array_equal(
        val.coverage_from_f(np.float16([0.25, 0.5, 0.75]), [0.25, 0.5, 0.75]), [2 / 3, 1 / 3, 0.0]
    )
    np.testing.assert_array_equal(val.coverage_from_f([0, 1], [0.5]), [0.5])  # integers: as float64
