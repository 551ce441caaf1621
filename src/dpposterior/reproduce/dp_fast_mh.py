"""DP-Fast MH against the penalty algorithm and DP Barker (Zhang, Zhang & De Sa, "DP-Fast MH: private,
fast, and accurate Metropolis-Hastings for large-scale Bayesian inference", 2023).

    from dpposterior.reproduce.dp_fast_mh import run_dp_fast_mh, write_dp_fast_mh_report
    results = run_dp_fast_mh(quick=True)          # toy sizes: a smoke test of the pipeline

Two experiments of that paper, every method run from the same public start with the same
Gaussian random-walk proposal:

- Gaussian mixture: N = 50,000 records x_i ~ 0.5 N(0, 2) + 0.5 N(1, 2), likelihood
  0.5 N(theta1, 2) + 0.5 N(theta1 + theta2, 2), temperature 500, prior N(0, diag(10, 1)), box
  |theta_j| <= 3, c_i as in the paper. The four samplers (DP-Fast MH, penalty, DP Barker; TunaMH the
  non-private reference) and the non-private versions of the DP ones, at several per-iteration
  epsilons. Metric: symmetric KL between the 2-D histogram of a chain's first t samples and the
  EXACT posterior's bin probabilities (computed on a fine grid: an exact reference, better than a
  long reference chain), against iterations and wall-clock time; density plots (the paper's Fig. 2).
- MNIST 7 vs 9: logistic regression without bias (temperature 1, prior N(0, I)) on 50 principal
  components, c_i = ||x_i||. Once as the paper (PCA fitted on the private training images and c_i
  from the private features: an unaccounted release) and once with a projection fitted on the
  public other digits and features clipped to a public norm R, c_i = R (no unaccounted release).
  Metric: test accuracy of the posterior predictive (samples t/2..t) against wall-clock time, and
  the average batch size.

Settings chosen before the runs, by rules (not by the results):
- DP-Fast MH: lambda = 10 (the authors'), and the batch cap K that makes the minibatch branch
  noise-free for every proposal that takes it: the K solving lambda (exp(epsilon'/2) - 1) = K -
  lambda with epsilon' = epsilon C / (6 K c_max) (so D1 < epsilon' whenever lambda + C M < K). The
  paper's own recommendation K = epsilon C / (6 c_max) is also run, as its own row.
- DP Barker: the largest batch size whose per-iteration epsilon (RDP, subsampled) meets the target.
- Step sizes: one random-walk scale per experiment for every method.
Privacy is compared at equal per-iteration epsilon, as the paper does; the chain totals are
reported too (they are large: the per-iteration budgets compose over 10^4 iterations).
"""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Any, cast

import jax
import jax.numpy as jnp
import numpy as np

from .. import mcmc
from ..mcmc.accounting import classic_noise_multiplier
from ..mcmc.barker import barker_correction
from .console import Column, RowPrinter

__all__ = [
    "FULL",
    "QUICK",
    "DpFastMhSettings",
    "fast_mh_batch_cap",
    "gmm_model",
    "run_dp_fast_mh",
    "symmetric_kl",
    "write_dp_fast_mh_report",
]

#: the progress tables ``run_dp_fast_mh(verbose=True)`` prints, one line per chain (epsilon "-": not private)
GMM_COLUMNS = (
    Column("label", "method", "s", 18),
    Column("epsilon", "epsilon", "g", 7),
    Column("seed", "seed", "d", 4),
    Column("kl_final", "KL at T", ".3f", 7),
    Column("wall_seconds", "seconds", ".1f", 7),
    Column("nonprivate_acceptance", "acceptance", ".2f", 10),
    Column("nonprivate_mean_batch", "mean batch", ".0f", 10),
)
MNIST_COLUMNS = (
    Column("projection", "PCA", "s", 7),
    Column("label", "method", "s", 18),
    Column("epsilon", "epsilon", "g", 7),
    Column("accuracy_final", "accuracy", ".4f", 8),
    Column("wall_seconds", "seconds", ".1f", 7),
    Column("nonprivate_mean_batch", "mean batch", ".0f", 10),
    Column("nonprivate_full_batch_fraction", "full batch", ".2f", 10),
)


@dataclasses.dataclass(frozen=True)
class DpFastMhSettings:
    """Sizes and constants of both experiments (see the module docstring)."""

    gmm_records: int
    gmm_steps: int
    gmm_epsilons: tuple[float, ...]
    gmm_seeds: int
    gmm_step_size: float
    mnist_records: int | None  # None: all 12,214
    mnist_dims: int
    mnist_steps: int
    mnist_epsilons: tuple[float, ...]
    mnist_step_size: float | None  # None: the rule of mnist_step_size()
    mnist_projections: tuple[str, ...]
    segment: int  # steps per timed segment
    nonprivate_versions: bool
    paper_k_row: bool
    tuna_rows: bool = True  # the non-private TunaMH rows (the quick run skips them)
    mnist_labels: tuple[str, ...] | None = None  # only these MNIST rows (None: all; the quick run: penalty)
    gmm_temperature: float = 500.0
    gmm_start: tuple[float, float] = (0.0, 0.0)
    bin_width: float = 0.2
    lam: float = 10.0
    delta: float = 1e-5
    mnist_clip_quantile: float = 0.99  # public R: this quantile of the public digits' feature norms
    seed: int = 0


QUICK = DpFastMhSettings(
    gmm_records=1000,
    gmm_steps=300,
    gmm_epsilons=(0.05,),
    gmm_seeds=1,
    gmm_step_size=0.06,
    mnist_records=500,
    mnist_dims=10,
    mnist_steps=200,
    mnist_epsilons=(0.05,),
    mnist_step_size=None,
    mnist_projections=("public",),
    segment=200,
    nonprivate_versions=False,
    paper_k_row=False,
    tuna_rows=False,
    mnist_labels=("penalty",),
)
FULL = DpFastMhSettings(
    gmm_records=50_000,
    gmm_steps=10_000,
    gmm_epsilons=(0.02, 0.05, 0.2),
    gmm_seeds=8,
    gmm_step_size=0.06,
    mnist_records=None,
    mnist_dims=50,
    mnist_steps=20_000,
    mnist_epsilons=(0.05, 0.2),
    mnist_step_size=None,
    mnist_projections=("private", "public"),
    segment=500,
    nonprivate_versions=True,
    paper_k_row=True,
)


# --------------------------------------------------------------------------------------------
# models


def gmm_data(n: int, seed: int) -> np.ndarray:
    """x_i ~ 0.5 N(0, 2) + 0.5 N(1, 2) (variance 2), float32."""
    rng = np.random.default_rng(seed)
    comp = rng.random(n) < 0.5
    return np.where(comp, rng.normal(0.0, math.sqrt(2.0), n), rng.normal(1.0, math.sqrt(2.0), n)).astype(np.float32)


def gmm_model(x: np.ndarray, temperature: float) -> mcmc.EnergyModel:
    """The tempered mixture posterior as an EnergyModel with the paper's bound constants on |theta_j| <= 3."""
    t = float(temperature)

    def energy(theta, xi):
        a = -0.25 * (xi - theta[0]) ** 2
        b = -0.25 * (xi - theta[0] - theta[1]) ** 2
        return -(jnp.logaddexp(a, b) + math.log(0.5) - 0.5 * math.log(4.0 * math.pi)) / t

    def log_prior(theta):
        return -(theta[0] ** 2) / 20.0 - theta[1] ** 2 / 2.0

    ax = np.abs(x.astype(np.float64))
    c = np.sqrt(((2.0 * ax + 9.0) / 2.0) ** 2 + ((ax + 6.0) / 2.0) ** 2) / t
    return mcmc.energy_model(
        energy, x, log_prior_fn=log_prior, bound_constants=c, box=(-3.0 * np.ones(2), 3.0 * np.ones(2))
    )


def _log_post_on(model: mcmc.EnergyModel, points: np.ndarray, chunk: int = 128) -> np.ndarray:
    data = model.data

    @jax.jit
    def block(ths):
        e = jax.vmap(lambda th: jnp.sum(jax.vmap(model.energy_fn, (None, 0))(th, data)))(ths)
        return jax.vmap(model.log_prior_fn)(ths) - e

    pts = np.asarray(points, np.float32)
    pad = (-len(pts)) % chunk
    pts_p = np.concatenate([pts, np.repeat(pts[-1:], pad, 0)])
    out = [np.asarray(block(jnp.asarray(pts_p[i : i + chunk]))) for i in range(0, len(pts_p), chunk)]
    return np.concatenate(out)[: len(pts)].astype(np.float64)


def gmm_reference(model: mcmc.EnergyModel, edges: tuple[np.ndarray, np.ndarray], sub: int = 3) -> np.ndarray:
    """Exact posterior mass of each histogram bin (midpoint rule on sub x sub points per bin), plus
    the mass outside the window (last entry, from a coarse grid of the whole box)."""
    e1, e2 = edges
    h1, h2 = np.diff(e1)[0] / sub, np.diff(e2)[0] / sub
    g1 = e1[0] + h1 * (np.arange((len(e1) - 1) * sub) + 0.5)
    g2 = e2[0] + h2 * (np.arange((len(e2) - 1) * sub) + 0.5)
    pts = np.stack(np.meshgrid(g1, g2, indexing="ij"), -1).reshape(-1, 2)
    # the box outside the window, coarsely (its mass is ~0 for a window that covers the posterior)
    gb = np.linspace(-3.0 + 0.05, 3.0 - 0.05, 60)
    pb = np.stack(np.meshgrid(gb, gb, indexing="ij"), -1).reshape(-1, 2)
    outside = ~((pb[:, 0] >= e1[0]) & (pb[:, 0] < e1[-1]) & (pb[:, 1] >= e2[0]) & (pb[:, 1] < e2[-1]))
    lp_all = _log_post_on(model, np.concatenate([pts, pb[outside]]))  # one compiled evaluator
    lp = lp_all[: len(pts)].reshape(len(g1), len(g2))
    lp_out = lp_all[len(pts) :] if outside.any() else np.array([-np.inf])
    top = max(lp.max(), lp_out.max())
    inside = np.exp(lp - top) * h1 * h2
    out_mass = float(np.sum(np.exp(lp_out - top))) * (gb[1] - gb[0]) ** 2
    bins = inside.reshape(len(e1) - 1, sub, len(e2) - 1, sub).sum(axis=(1, 3)).ravel()
    p = np.concatenate([bins, [out_mass]])
    return p / p.sum()


def sample_probs(samples: np.ndarray, edges: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    """Histogram of 2-D samples on ``edges`` plus an outside bin, smoothed by half a count per bin
    (the Krichevsky-Trofimov estimator, so empty bins do not make the KL infinite)."""
    e1, e2 = edges
    h, _, _ = np.histogram2d(samples[:, 0], samples[:, 1], bins=[e1, e2])
    counts = np.concatenate([h.ravel(), [len(samples) - h.sum()]])
    return (counts + 0.5) / (counts.sum() + 0.5 * counts.size)


def symmetric_kl(p: np.ndarray, q: np.ndarray) -> float:
    """KL(p || q) + KL(q || p) for strictly positive probability vectors."""
    p, q = np.asarray(p, np.float64), np.asarray(q, np.float64)
    if p.shape != q.shape or np.any(p <= 0) or np.any(q <= 0):
        raise ValueError("symmetric_kl needs two strictly positive probability vectors of one shape")
    return float(np.sum((p - q) * (np.log(p) - np.log(q))))


# --------------------------------------------------------------------------------------------
# the samplers


def fast_mh_batch_cap(epsilon: float, total_bound: float, max_bound: float, lam: float) -> float:
    """The K at which DP-Fast MH's minibatch branch is noise-free for every proposal it takes.

    The minibatch branch runs when lam + C M < K and adds noise when D1 = 2 log(1 + C M / lam) >=
    epsilon' = epsilon C / (6 K c_max). At the branch boundary C M = K - lam, D1 < epsilon' iff
    lam (exp(epsilon'/2) - 1) > K - lam; the left side falls and the right side grows with K: the
    K solving the equality (bisection) is the largest with no noise in the minibatch branch.
    """
    a = epsilon * total_bound / (6.0 * max_bound)

    def gap(k):
        return lam * math.expm1(a / (2.0 * k)) - (k - lam)

    lo, hi = lam * (1 + 1e-9), lam + 1.0
    while gap(hi) > 0:
        hi = lam + 2.0 * (hi - lam)
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if gap(mid) > 0 else (lo, mid)
    return lo


def _kernels(
    model: mcmc.EnergyModel,
    prop: mcmc.Proposal,
    eps: float | None,
    s: DpFastMhSettings,
    nonprivate: bool,
    paper_k: bool,
) -> list[tuple[str, str, Any]]:
    """(label, method, kernel) for one per-iteration epsilon (eps None: the non-private versions)."""
    big_c, c_max, n = model.total_bound, model.max_bound, model.num_records
    out = []
    if eps is None:
        k = fast_mh_batch_cap(0.05, big_c, c_max, s.lam)
        out.append(("TunaMH", "tuna_mh", mcmc.tuna_mh_kernel(model, prop)))
        if nonprivate:
            out.append(
                (
                    "DP-Fast MH (non-DP)",
                    "dp_fast_mh",
                    mcmc.dp_fast_mh_kernel(
                        model, prop, epsilon=None, delta=None, batch_cap=k, lam=s.lam, private=False
                    ),
                )
            )
            out.append(("penalty (non-DP)", "penalty", mcmc.penalty_kernel(model, prop, private=False)))
            out.append(("Barker (non-DP, exact)", "dp_barker", mcmc.dp_barker_kernel(model, prop, private=False)))
        return out
    k = fast_mh_batch_cap(eps, big_c, c_max, s.lam)
    out.append(
        (
            "DP-Fast MH",
            "dp_fast_mh",
            mcmc.dp_fast_mh_kernel(model, prop, epsilon=eps, delta=s.delta, batch_cap=k, lam=s.lam),
        )
    )
    if paper_k:
        k_paper = max(eps * big_c / (6.0 * c_max), s.lam * 1.01)
        out.append(
            (
                "DP-Fast MH (paper's K)",
                "dp_fast_mh",
                mcmc.dp_fast_mh_kernel(model, prop, epsilon=eps, delta=s.delta, batch_cap=k_paper, lam=s.lam),
            )
        )
    out.append(("penalty", "penalty", mcmc.penalty_kernel(model, prop, epsilon=eps, delta=s.delta)))
    try:
        b = mcmc.barker_batch_size(eps, s.delta, n)
    except ValueError:
        b = None
    if b is not None:
        out.append(("DP Barker", "dp_barker", mcmc.dp_barker_kernel(model, prop, batch_size=b, delta=s.delta)))
    return out


def timed_chain(kernel, start: np.ndarray, num_steps: int, segment: int, key) -> dict:
    """One chain in jitted segments: samples (T, d), NON-PRIVATE info, cumulative wall time after
    each segment (compilation excluded: the segment function is compiled and run once first)."""
    seg = min(segment, num_steps)
    n_seg = math.ceil(num_steps / seg)
    model = kernel.model

    @jax.jit
    def run_seg(k, state, data, c):  # data as arguments, not constants folded into the program
        def body(carry, kk):
            new, info = kernel.step_on_data(kk, carry, data, c)
            return new, (new.position, info)

        return jax.lax.scan(body, state, jax.random.split(k, seg))

    state = kernel.init(np.asarray(start, np.float64))
    data, c = model.data, model.bound_constants
    jax.block_until_ready(run_seg(jax.random.key(12345), state, data, c))  # compile
    keys = jax.random.split(key, n_seg)
    samples, infos, times = [], [], []
    t0 = time.perf_counter()
    for i in range(n_seg):
        state, (pos, info) = run_seg(keys[i], state, data, c)
        pos = np.asarray(pos)
        times.append(time.perf_counter() - t0)
        samples.append(pos)
        infos.append(jax.tree.map(np.asarray, info))
    info = jax.tree.map(lambda *a: np.concatenate(a)[:num_steps], *infos)
    return dict(
        samples=np.concatenate(samples)[:num_steps],
        info=info,
        seg_steps=seg * np.arange(1, n_seg + 1),
        seg_times=np.asarray(times),
    )


def _chain_totals(kernel, num_steps: int, delta: float) -> dict:
    if kernel.method == "tuna_mh" or not kernel.config.private:
        return dict(total_epsilon=None, total_delta=None)
    p = mcmc.chain_privacy(
        kernel, num_steps, total_delta=None if kernel.method == "dp_fast_mh" else delta, seeded_by="user"
    )
    per_iter = p.detail("per_iteration_epsilon")
    return dict(total_epsilon=p.epsilon, total_delta=p.delta, accountant=p.accountant, per_iteration_epsilon=per_iter)


def _summary(label, method, eps, kernel, run, s, extra) -> dict:
    info = run["info"]
    row = dict(
        label=label,
        method=method,
        epsilon=eps,
        private=bool(getattr(kernel.config, "private", False)),
        nonprivate_acceptance=float(info.accepted.mean()),
        nonprivate_mean_batch=float(info.batch_size.mean()),
        nonprivate_full_batch_fraction=float(info.used_full_batch.mean()),
        nonprivate_bound_violations=int(info.bound_violations.sum()),
        wall_seconds=float(run["seg_times"][-1]),
        seg_steps=run["seg_steps"].tolist(),
        seg_times=run["seg_times"].tolist(),
    )
    if method == "dp_fast_mh":
        row["batch_cap"] = kernel.config.batch_cap
    if method == "dp_barker":
        row["barker_batch_size"] = kernel.config.batch_size
    row.update(extra)
    return row


# --------------------------------------------------------------------------------------------
# the Gaussian mixture


def run_gmm(s: DpFastMhSettings, verbose: bool = False) -> dict:
    x = gmm_data(s.gmm_records, s.seed)
    model = gmm_model(x, s.gmm_temperature)
    prop = mcmc.random_walk(s.gmm_step_size)
    w = s.bin_width
    edges = (np.arange(-1.2, 2.2 + 1e-9, w), np.arange(-2.6, 2.6 + 1e-9, w))
    t0 = time.perf_counter()
    ref = gmm_reference(model, edges, sub=3 if s.gmm_records > 10_000 else 2)
    ref_seconds = time.perf_counter() - t0
    checkpoints = sorted({int(v) for v in np.unique(np.geomspace(100, s.gmm_steps, 12).astype(int))} | {s.gmm_steps})
    rows, density = [], {}
    show = RowPrinter(GMM_COLUMNS, title="Gaussian mixture, one row per chain (NON-PRIVATE diagnostics):")
    groups: list[tuple[float | None, list[tuple[str, str, Any]]]] = (
        [(None, _kernels(model, prop, None, s, s.nonprivate_versions, False))] if s.tuna_rows else []
    )
    groups += [(eps, _kernels(model, prop, eps, s, False, s.paper_k_row)) for eps in s.gmm_epsilons]
    for eps, kernels in groups:
        for label, method, kernel in kernels:
            totals = _chain_totals(kernel, s.gmm_steps, s.delta)
            for seed in range(s.gmm_seeds):
                key = jax.random.key(1000 * s.seed + 17 * seed + 3)
                run = timed_chain(kernel, np.asarray(s.gmm_start), s.gmm_steps, s.segment, key)
                smp = run["samples"]
                kl = [symmetric_kl(sample_probs(smp[:t], edges), ref) for t in checkpoints]
                row = _summary(
                    label, method, eps, kernel, run, s, dict(seed=seed, checkpoints=checkpoints, kl=kl, **totals)
                )
                rows.append(row)
                if seed == 0:
                    density[(label, eps)] = smp
                if verbose:
                    show({**row, "kl_final": kl[-1]})
    return dict(
        rows=rows,
        reference=ref,
        edges=[e.tolist() for e in edges],
        density=density,
        reference_seconds=ref_seconds,
        total_bound=model.total_bound,
        max_bound=model.max_bound,
        num_records=model.num_records,
    )


# --------------------------------------------------------------------------------------------
# MNIST 7 vs 9


def _pca(images: np.ndarray, dims: int) -> tuple[np.ndarray, np.ndarray]:
    centre = images.mean(axis=0, dtype=np.float64)
    centred = (images - centre).astype(np.float32)
    cov = (centred.T @ centred).astype(np.float64) / images.shape[0]
    evals, evecs = np.linalg.eigh(cov)
    return centre, evecs[:, np.argsort(evals)[::-1][:dims]]


def mnist_features(projection: str, dims: int, records: int | None, seed: int, clip_quantile: float) -> dict:
    """Features and bound constants for the two set-ups (see the module docstring)."""
    from ..datasets import load_mnist79, load_mnist_public_digits

    x_tr, y_tr = load_mnist79("train")
    x_te, y_te = load_mnist79("test")
    if records is not None:
        idx = np.random.default_rng(seed).choice(x_tr.shape[0], size=records, replace=False)
        x_tr, y_tr = x_tr[idx], y_tr[idx]
    if projection == "private":  # the paper's way: PCA of the private training images (unaccounted)
        centre, proj = _pca(x_tr, dims)
        f_tr, f_te = (x_tr - centre) @ proj, (x_te - centre) @ proj
        scale = float(np.max(np.linalg.norm(f_tr, axis=1)))  # private too (unaccounted)
        f_tr, f_te = f_tr / scale, f_te / scale
        c = np.linalg.norm(f_tr, axis=1)
        clip = None
    elif projection == "public":  # PCA of the public digits; features clipped to a public norm R
        pub = load_mnist_public_digits()
        centre, proj = _pca(pub, dims)
        clip = float(np.quantile(np.linalg.norm((pub - centre) @ proj, axis=1), clip_quantile))
        f_tr, f_te = (x_tr - centre) @ proj, (x_te - centre) @ proj

        def clip_rows(f):
            nrm = np.linalg.norm(f, axis=1, keepdims=True)
            return f * np.minimum(1.0, clip / np.maximum(nrm, 1e-12))

        f_tr, f_te = clip_rows(f_tr) / clip, clip_rows(f_te) / clip
        c = np.ones(f_tr.shape[0])
    else:
        raise ValueError(f"projection must be 'private' or 'public', got {projection!r}")
    return dict(
        train=(f_tr.astype(np.float32), (2 * y_tr - 1).astype(np.float32)),
        test=(f_te.astype(np.float32), y_te.astype(np.int32)),
        c=c,
        clip=clip,
    )


def mnist_model(feats: dict) -> mcmc.EnergyModel:
    def energy(w, rec):
        f, y = rec
        return jax.nn.softplus(-y * jnp.dot(f, w))  # -log sigmoid(y w.x); |dU| <= ||x|| ||w - w'||

    def log_prior(w):
        return -0.5 * jnp.sum(w**2)

    return mcmc.energy_model(energy, feats["train"], log_prior_fn=log_prior, bound_constants=feats["c"])


def mnist_step_size(s: DpFastMhSettings, model: mcmc.EnergyModel) -> float:
    """``s.mnist_step_size``, or (None) the public rule: the random-walk scale whose typical move
    M = scale sqrt(d) gets full-batch noise std 1 at per-iteration epsilon 0.05 (std = sigma2 2 c_max M)."""
    if s.mnist_step_size is not None:
        return float(s.mnist_step_size)
    sigma2 = classic_noise_multiplier(0.05, s.delta)
    return 1.0 / (2.0 * model.max_bound * sigma2 * math.sqrt(s.mnist_dims))


def _accuracy_curve(samples: np.ndarray, test: tuple[np.ndarray, np.ndarray], points: list[int]) -> list[float]:
    f, y = test
    thin = max(1, len(samples) // 400)
    idx = np.arange(thin - 1, len(samples), thin)
    probs = 1.0 / (1.0 + np.exp(-(f.astype(np.float64) @ samples[idx].T.astype(np.float64))))  # (n_test, draws)
    csum = np.cumsum(probs, axis=1)
    out = []
    for t in points:  # posterior predictive from the samples t/2..t
        hi = int(np.searchsorted(idx, t - 1, side="right"))
        lo = int(np.searchsorted(idx, t // 2, side="left"))
        if hi <= lo:
            lo = max(hi - 1, 0)
        p = (csum[:, hi - 1] - (csum[:, lo - 1] if lo > 0 else 0.0)) / (hi - lo)
        out.append(float(np.mean((p > 0.5) == (y == 1))))
    return out


def run_mnist(s: DpFastMhSettings, verbose: bool = False) -> list[dict]:
    rows = []
    show = RowPrinter(MNIST_COLUMNS, title="MNIST 7 vs 9, one row per chain (NON-PRIVATE diagnostics):")
    for projection in s.mnist_projections:
        feats = mnist_features(projection, s.mnist_dims, s.mnist_records, s.seed, s.mnist_clip_quantile)
        model = mnist_model(feats)
        prop = mcmc.random_walk(mnist_step_size(s, model))
        groups: list[tuple[float | None, list[tuple[str, str, Any]]]] = (
            [(None, _kernels(model, prop, None, s, s.nonprivate_versions, False))] if s.tuna_rows else []
        )
        groups += [(eps, _kernels(model, prop, eps, s, False, s.paper_k_row)) for eps in s.mnist_epsilons]
        for eps, kernels in groups:
            for label, method, kernel in kernels:
                if s.mnist_labels is not None and label not in s.mnist_labels:
                    continue
                totals = _chain_totals(kernel, s.mnist_steps, s.delta)
                run = timed_chain(
                    kernel, np.zeros(s.mnist_dims), s.mnist_steps, s.segment, jax.random.key(7 + 1000 * s.seed)
                )
                acc = _accuracy_curve(run["samples"], feats["test"], run["seg_steps"].tolist())
                row = _summary(
                    label,
                    method,
                    eps,
                    kernel,
                    run,
                    s,
                    dict(
                        projection=projection,
                        accuracy=acc,
                        total_bound=model.total_bound,
                        step_size=mnist_step_size(s, model),
                        max_bound=model.max_bound,
                        feature_clip=feats["clip"],
                        **totals,
                    ),
                )
                rows.append(row)
                if verbose:
                    show({**row, "accuracy_final": acc[-1]})
    return rows


def run_dp_fast_mh(quick: bool = False, settings: DpFastMhSettings | None = None, verbose: bool = False) -> dict:
    """Runs both experiments. Mechanism-side (reads the data); the returned rows carry NON-PRIVATE
    diagnostics (acceptance, batch sizes) and are not releases."""
    import os

    s = settings or (QUICK if quick else FULL)
    load_start = os.getloadavg()[0]
    t0 = time.perf_counter()
    gmm = run_gmm(s, verbose)
    t1 = time.perf_counter()
    mnist = run_mnist(s, verbose)
    return dict(
        settings=s,
        gmm=gmm,
        mnist=mnist,
        gmm_seconds=t1 - t0,
        mnist_seconds=time.perf_counter() - t1,
        load_start=load_start,
        load_end=os.getloadavg()[0],
    )


# --------------------------------------------------------------------------------------------
# the report


def _groups(rows: list[dict], keys=("label", "epsilon")) -> dict:
    out: dict = {}
    for r in rows:
        out.setdefault(tuple(r[k] for k in keys), []).append(r)
    return out


def _fmt(v, nd=3) -> str:
    if v is None:
        return "-"
    if isinstance(v, float) and not math.isfinite(v):
        return "inf"
    return f"{v:.{nd}g}" if isinstance(v, float) else str(v)


def _eps_label(e) -> str:
    return "non-DP" if e is None else f"{e:g}"


def gmm_done_when(gmm: dict, epsilon: float = 0.05) -> dict:
    """The issue's Done-when numbers on the mixture: mean KL after the last iteration per method at
    ``epsilon`` (over seeds), and DP-Fast MH's mean batch size over N."""
    g = _groups(gmm["rows"])

    def mean_kl(label):
        rs = g.get((label, epsilon), [])
        return (float(np.mean([r["kl"][-1] for r in rs])), float(np.std([r["kl"][-1] for r in rs]))) if rs else None

    fast, pen, bar = mean_kl("DP-Fast MH"), mean_kl("penalty"), mean_kl("DP Barker")
    batch = float(np.mean([r["nonprivate_mean_batch"] for r in g.get(("DP-Fast MH", epsilon), [])] or [np.nan]))
    # at equal wall-clock time: each method's mean KL at the last checkpoint reached within DP-Fast MH's
    # mean run time (time of a checkpoint = its iterations x the run's mean time per iteration)
    at_time: dict[str, tuple[int, float] | float | None] = {}
    if g.get(("DP-Fast MH", epsilon)):
        t_fast = float(np.mean([r["wall_seconds"] for r in g[("DP-Fast MH", epsilon)]]))
        for label in ("DP-Fast MH", "penalty", "DP Barker"):
            rs = g.get((label, epsilon))
            if not rs:
                continue
            per_it = float(np.mean([r["wall_seconds"] for r in rs])) / rs[0]["checkpoints"][-1]
            cps = np.asarray(rs[0]["checkpoints"])
            i = int(np.searchsorted(cps * per_it, t_fast * (1 + 1e-9), side="right")) - 1
            at_time[label] = None if i < 0 else (int(cps[i]), float(np.mean([r["kl"][i] for r in rs])))
        at_time["seconds"] = t_fast
    return dict(
        epsilon=epsilon,
        kl_fast=fast,
        kl_penalty=pen,
        kl_barker=bar,
        batch_fast=batch,
        at_time=at_time,
        batch_fraction=batch / gmm["num_records"],
        lower_than_penalty=None if not (fast and pen) else fast[0] < pen[0],
        lower_than_barker=None if not (fast and bar) else fast[0] < bar[0],
    )


def _acc_at(row: dict, t: float) -> float | None:
    """Accuracy after the last segment finished by time t (None if none was)."""
    times = np.asarray(row["seg_times"])
    i = np.searchsorted(times, t * (1 + 1e-9), side="right") - 1
    return None if i < 0 else row["accuracy"][i]


def mnist_done_when(rows: list[dict], epsilon: float = 0.05) -> list[dict]:
    """Per projection: DP-Fast MH's and the penalty method's test accuracy at the same wall-clock
    time (the shorter of the two runs' times, the last segment finished by then)."""
    out = []
    for proj in sorted({r["projection"] for r in rows}):
        g = _groups([r for r in rows if r["projection"] == proj])
        fast, pen = g.get(("DP-Fast MH", epsilon)), g.get(("penalty", epsilon))
        if not fast or not pen:
            continue
        f, p = fast[0], pen[0]
        t = min(f["wall_seconds"], p["wall_seconds"])
        af, ap = _acc_at(f, t), _acc_at(p, t)
        out.append(
            dict(
                projection=proj,
                epsilon=epsilon,
                seconds=t,
                acc_fast=af,
                acc_penalty=ap,
                final_fast=f["accuracy"][-1],
                final_penalty=p["accuracy"][-1],
                batch_fast=f["nonprivate_mean_batch"],
                holds=None if af is None or ap is None else af >= ap,
            )
        )
    return out


def _gmm_figures(gmm: dict, s: DpFastMhSettings, out, name: str) -> list:
    from pathlib import Path

    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt
    from matplotlib.colors import ListedColormap  # what plt.cm.tab20 is; typed as its base, Colormap

    from .._io import save_figure_atomic

    out = Path(out)
    paths = []
    g = _groups(gmm["rows"])
    eps_main = 0.05 if 0.05 in s.gmm_epsilons else s.gmm_epsilons[0]
    labels = [k for k in g if k[1] in (eps_main, None)]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for ax in axes:
        ax.set_prop_cycle(color=cast(ListedColormap, plt.cm.tab20).colors)  # more than 10 lines
    for label, eps in labels:
        rs = g[(label, eps)]
        kl = np.mean([r["kl"] for r in rs], axis=0)
        style = "--" if eps is None else "-"
        name_l = label if eps is None else f"{label} (eps={eps:g})"
        axes[0].plot(rs[0]["checkpoints"], kl, style, marker=".", label=name_l)
        per_step = np.mean([r["wall_seconds"] / s.gmm_steps for r in rs])
        axes[1].plot(np.asarray(rs[0]["checkpoints"]) * per_step, kl, style, marker=".", label=name_l)
    for ax, xl in zip(axes, ("iterations", "wall-clock seconds (mean per iteration x iterations)")):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel(xl)
        ax.set_ylabel("symmetric KL to the exact posterior")
    axes[0].legend(fontsize=7)
    fig.suptitle(
        f"Gaussian mixture, N={gmm['num_records']}, per-iteration epsilon {eps_main:g} "
        f"(mean over {s.gmm_seeds} chains)",
        fontsize=9,
    )
    fig.tight_layout()
    paths.append(save_figure_atomic(fig, out / f"{name}-gmm-kl.png"))
    plt.close(fig)

    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for label in ("DP-Fast MH", "DP-Fast MH (paper's K)", "penalty", "DP Barker"):
        es = [e for e in s.gmm_epsilons if (label, e) in g]
        if not es:
            continue
        axes[0].plot(es, [np.mean([r["kl"][-1] for r in g[(label, e)]]) for e in es], marker="o", label=label)
        axes[1].plot(
            es, [np.mean([r["nonprivate_mean_batch"] for r in g[(label, e)]]) for e in es], marker="o", label=label
        )
    axes[0].set_ylabel(f"symmetric KL after {s.gmm_steps} iterations")
    axes[1].set_ylabel("average batch size (NON-PRIVATE diagnostic)")
    for ax in axes:
        ax.set_xscale("log")
        ax.set_xlabel("per-iteration epsilon")
        ax.legend(fontsize=7)
    fig.tight_layout()
    paths.append(save_figure_atomic(fig, out / f"{name}-gmm-epsilon.png"))
    plt.close(fig)

    e1, e2 = (np.asarray(e) for e in gmm["edges"])
    panels = [("exact posterior", None)] + [
        (f"{lab} (eps={_eps_label(eps)})", (lab, eps))
        for (lab, eps) in gmm["density"]
        if eps in (eps_main, None) and lab in ("TunaMH", "DP-Fast MH", "penalty", "DP Barker")
    ]
    fig, axes = plt.subplots(1, len(panels), figsize=(3.0 * len(panels), 3.2), sharey=True)
    ref = gmm["reference"][:-1].reshape(len(e1) - 1, len(e2) - 1)
    for ax, (title, key) in zip(np.atleast_1d(axes), panels):
        if key is None:
            img = ref
        else:
            smp = gmm["density"][key]
            img, _, _ = np.histogram2d(smp[:, 0], smp[:, 1], bins=[e1, e2])
        ax.imshow(img.T, origin="lower", extent=(e1[0], e1[-1], e2[0], e2[-1]), aspect="auto", cmap="viridis")
        ax.set_title(title, fontsize=8)
        ax.set_xlabel("theta1")
    np.atleast_1d(axes)[0].set_ylabel("theta2")
    fig.suptitle(f"density after {s.gmm_steps} iterations (first chain)", fontsize=9)
    fig.tight_layout()
    paths.append(save_figure_atomic(fig, out / f"{name}-gmm-density.png"))
    plt.close(fig)
    return paths


def _mnist_figure(rows: list[dict], out, name: str):
    from pathlib import Path

    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt
    from matplotlib.colors import ListedColormap  # what plt.cm.tab20 is; typed as its base, Colormap

    from .._io import save_figure_atomic

    projs = sorted({r["projection"] for r in rows})
    fig, axes = plt.subplots(1, len(projs), figsize=(5.5 * len(projs), 4), squeeze=False)
    for ax, proj in zip(axes[0], projs):
        ax.set_prop_cycle(color=cast(ListedColormap, plt.cm.tab20).colors)  # more than 10 lines
        for r in rows:
            if r["projection"] != proj:
                continue
            style = "--" if r["epsilon"] is None else "-"
            ax.plot(
                r["seg_times"], r["accuracy"], style, marker=".", label=f"{r['label']} (eps={_eps_label(r['epsilon'])})"
            )
        ax.set_xscale("log")
        ax.set_xlabel("wall-clock seconds")
        ax.set_ylabel("test accuracy")
        ax.set_title(f"MNIST 7 vs 9, {proj} PCA", fontsize=9)
        ax.legend(fontsize=6)
    fig.tight_layout()
    path = save_figure_atomic(fig, Path(out) / f"{name}-mnist.png")
    plt.close(fig)
    return path


def _calibration_lines(s: DpFastMhSettings, gmm: dict) -> list[str]:
    lines = [
        "| total (epsilon, delta) over T | DP-Fast MH per-iteration epsilon (optimal composition) | "
        "penalty noise multiplier (PLD) and its classic per-iteration epsilon | DP Barker batch size (RDP) |",
        "|---|---|---|---|",
    ]
    t = s.gmm_steps
    for eps_t in (1.0, 10.0):
        try:
            fast = mcmc.calibrate_chain("dp_fast_mh", eps_t, s.delta, t)
            f = f"{fast.epsilon:.4g} (delta {fast.delta:.2g})"
        except ValueError as e:
            f = f"infeasible ({e})"
        pen = mcmc.calibrate_chain("penalty", eps_t, s.delta, t)
        p = f"{pen.noise_multiplier:.4g} ({_fmt(pen.epsilon, 3)})"
        try:
            b = str(mcmc.barker_batch_size(eps_t, s.delta, gmm["num_records"], t))
        except ValueError:
            b = "infeasible (no batch size)"
        lines.append(f"| ({eps_t:g}, {s.delta:g}) over {t} | {f} | {p} | {b} |")
    return lines


def write_dp_fast_mh_report(results: dict, out, *, quick: bool, wall_seconds: float, command: str):
    """Writes ``dp-fast-mh[-quick].md``, its figures and ``dp-fast-mh[-quick].json`` (the settings and
    every chain's row) under ``out``; returns the Markdown path."""
    import datetime
    import json
    import os
    import platform
    from pathlib import Path

    from ..experiments.store import write_text_atomic

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    name = "dp-fast-mh-quick" if quick else "dp-fast-mh"
    s: DpFastMhSettings = results["settings"]
    gmm, mrows = results["gmm"], results["mnist"]
    figs = _gmm_figures(gmm, s, out, name)
    mfig = _mnist_figure(mrows, out, name) if mrows else None
    corr = barker_correction()
    lines = [
        f"# DP-Fast MH reproduction{' (--quick smoke test: toy sizes, NOT results)' if quick else ''}",
        "",
        f"Command: `{command}`",
        "",
        f"Written {datetime.datetime.now(datetime.timezone.utc).isoformat(timespec='seconds')} on "
        f"{platform.platform()} ({os.cpu_count()} CPUs); wall time {wall_seconds:.0f} s (mixture "
        f"{results['gmm_seconds']:.0f} s, MNIST {results['mnist_seconds']:.0f} s). Load average "
        f"(1 min) at the start {results.get('load_start', float('nan')):.1f}, at the end "
        f"{results.get('load_end', float('nan')):.1f}: wall times are of a shared machine.",
        "",
        f"Settings: `{json.dumps(dataclasses.asdict(s), default=str)}`",
        "",
        f"Every chain's row (NON-PRIVATE diagnostics included) is in `{name}.json`.",
        "",
        "Privacy is compared at equal per-iteration (epsilon, delta) as in the paper; the totals over a chain "
        "(composed by `mcmc.chain_privacy`) are in the tables. Acceptance, batch sizes and full-batch "
        "fractions are NON-PRIVATE diagnostics (data-dependent, not covered by any guarantee). C = sum c_i and "
        "c_max depend on the data in both experiments below except MNIST with the public projection; like the "
        "paper we treat them as public, which is an unaccounted release.",
        "",
    ]
    # ---- mixture
    dw = gmm_done_when(gmm)
    lines += [
        "## Gaussian mixture",
        "",
        f"N = {gmm['num_records']}, temperature {s.gmm_temperature:g}, start {s.gmm_start}, random walk "
        f"scale {s.gmm_step_size} for every method, {s.gmm_steps} iterations, {s.gmm_seeds} chain(s) per row. "
        f"C = {gmm['total_bound']:.4g}, c_max = {gmm['max_bound']:.4g}. Reference: the exact posterior's "
        f"mass in {len(gmm['reference']) - 1} bins of width {s.bin_width} (plus one bin outside), by "
        f"quadrature ({gmm['reference_seconds']:.0f} s); the KL uses all samples 1..t of a chain, binned and "
        "smoothed by half a count per bin. DP Barker's correction: a symmetric Gaussian mixture, largest CDF "
        f"error {corr.max_cdf_error:.2g}.",
        "",
        "| method | per-iteration epsilon | KL after T (mean +- sd over chains) | wall s | "
        "mean batch (NON-PRIVATE) | full-batch fraction (NON-PRIVATE) | acceptance (NON-PRIVATE) | "
        "K / Barker b | chain total epsilon (delta; accountant) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for (label, eps), rs in _groups(gmm["rows"]).items():
        kls = [r["kl"][-1] for r in rs]
        r0 = rs[0]
        tot = (
            "-"
            if r0.get("total_epsilon") is None
            else f"{r0['total_epsilon']:.4g} ({r0['total_delta']:.3g}; {r0['accountant']})"
        )
        kb = _fmt(r0.get("batch_cap") or r0.get("barker_batch_size"), 4)
        lines.append(
            f"| {label} | {_eps_label(eps)} | {np.mean(kls):.3f} +- {np.std(kls):.3f} | "
            f"{np.mean([r['wall_seconds'] for r in rs]):.1f} | "
            f"{np.mean([r['nonprivate_mean_batch'] for r in rs]):.0f} | "
            f"{np.mean([r['nonprivate_full_batch_fraction'] for r in rs]):.2f} | "
            f"{np.mean([r['nonprivate_acceptance'] for r in rs]):.2f} | {kb} | {tot} |"
        )
    no_barker = []
    for e in s.gmm_epsilons:
        try:
            mcmc.barker_batch_size(e, s.delta, gmm["num_records"])
        except ValueError:
            no_barker.append(f"{e:g}")
    if no_barker:
        lines += [
            "",
            f"DP Barker has no row at per-iteration epsilon {', '.join(no_barker)}: no batch size meets it "
            "(its RDP bound at b = N is already larger).",
        ]
    lines += [
        "",
        f"![KL]({figs[0].name})",
        "",
        f"![KL and batch size against epsilon]({figs[1].name})",
        "",
        f"![densities]({figs[2].name})",
        "",
    ]

    def kl_s(v):
        return "n/a" if v is None else f"{v[0]:.3f} +- {v[1]:.3f}"

    lines += [
        "### Done-when (mixture, per-iteration epsilon 0.05)",
        "",
        f"- Symmetric KL after {s.gmm_steps} iterations: DP-Fast MH {kl_s(dw['kl_fast'])}, penalty "
        f"{kl_s(dw['kl_penalty'])}, DP Barker {kl_s(dw['kl_barker'])}. Lower than penalty: "
        f"**{dw['lower_than_penalty']}**; lower than Barker: **{dw['lower_than_barker']}**.",
        f"- DP-Fast MH's average batch size: {dw['batch_fast']:.0f} = {dw['batch_fraction']:.3f} N "
        "(NON-PRIVATE diagnostic).",
    ]
    if dw["at_time"]:
        parts = [
            f"{lab} {v[1]:.3f} (after {v[0]} iterations)" if v else f"{lab} n/a (no checkpoint reached)"
            for lab, v in dw["at_time"].items()
            if lab != "seconds"
        ]
        lines.append(
            f"- At equal wall-clock time ({dw['at_time']['seconds']:.1f} s, DP-Fast MH's mean run time), "
            "symmetric KL: " + "; ".join(parts) + "."
        )
    lines.append("")
    # ---- MNIST
    if mrows:
        assert mfig is not None  # drawn above whenever there are MNIST rows
        lines += [
            "## MNIST 7 vs 9",
            "",
            f"Logistic regression without bias on {s.mnist_dims} principal components scaled to norm <= 1, "
            "temperature 1, prior N(0, I), random walk scale "
            f"{_fmt(mrows[0].get('step_size'), 4)} (the rule: full-batch noise std 1 at the typical move at "
            f"epsilon 0.05), {s.mnist_steps} iterations from 0. Test accuracy of "
            "the posterior predictive from samples t/2..t. `private` PCA: fitted on the private training "
            "images as in the paper, scaled by the largest training feature norm, with c_i = ||x_i||: an "
            "UNACCOUNTED release (the projection, the scale and C depend on every training image). `public` PCA: fitted on the "
            "public other digits, features clipped to the public norm R (the "
            f"{s.mnist_clip_quantile} quantile of the public digits' feature norms) and divided by R, c_i = 1: "
            "no unaccounted release.",
            "",
            "| PCA | method | per-iteration epsilon | final accuracy | wall s | mean batch (NON-PRIVATE) | "
            "full-batch fraction (NON-PRIVATE) | acceptance (NON-PRIVATE) | K / Barker b | chain total epsilon |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        for r in mrows:
            tot = "-" if r.get("total_epsilon") is None else f"{r['total_epsilon']:.4g} ({r['total_delta']:.3g})"
            kb = _fmt(r.get("batch_cap") or r.get("barker_batch_size"), 4)
            lines.append(
                f"| {r['projection']} | {r['label']} | {_eps_label(r['epsilon'])} | {r['accuracy'][-1]:.4f} | "
                f"{r['wall_seconds']:.1f} | {r['nonprivate_mean_batch']:.0f} | "
                f"{r['nonprivate_full_batch_fraction']:.2f} | {r['nonprivate_acceptance']:.2f} | {kb} | {tot} |"
            )
        lines += [
            "",
            f"![MNIST accuracy against time]({mfig.name})",
            "",
            "### Done-when (MNIST, per-iteration epsilon 0.05)",
            "",
        ]
        for d in mnist_done_when(mrows):
            lines.append(
                f"- {d['projection']} PCA: at {d['seconds']:.1f} s (the shorter run), DP-Fast MH accuracy "
                f"{_fmt(d['acc_fast'], 4)} vs penalty {_fmt(d['acc_penalty'], 4)}: at least the penalty's: "
                f"**{d['holds']}** (final: {d['final_fast']:.4f} vs {d['final_penalty']:.4f}; DP-Fast MH's "
                f"mean batch {d['batch_fast']:.0f})."
            )
        lines.append("")
    lines += (
        [
            "## Budgets over a whole chain (`mcmc.calibrate_chain`, `mcmc.barker_batch_size`)",
            "",
            "What a total budget allows per iteration over the mixture chain's length (the paper's per-iteration "
            "0.05 composes to far more, see the tables):",
            "",
        ]
        + _calibration_lines(s, gmm)
        + [""]
    )
    rows = {
        "settings": dataclasses.asdict(s),
        "gmm": gmm["rows"],
        "mnist": mrows,
        "gmm_seconds": results["gmm_seconds"],
        "mnist_seconds": results["mnist_seconds"],
    }
    write_text_atomic(out / f"{name}.json", json.dumps(rows, indent=1, default=_jsonable))
    return write_text_atomic(out / f"{name}.md", "\n".join(lines))


def _jsonable(value: Any) -> Any:
    """A NumPy value of a row as plain JSON (anything else as its text)."""
    if hasattr(value, "tolist"):
        return value.tolist()
    return str(value)
