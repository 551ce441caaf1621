"""DP PAC-Bayes certificates on MNIST 7 vs 9 (Dziugaite & Roy, "Data-dependent PAC-Bayes priors via
differential privacy" (2018)).

    from dpposterior.reproduce.pacbayes import run_pacbayes, format_table
    rows = run_pacbayes(quick=True)        # toy sizes: a smoke test of the pipeline
    print(format_table(rows))

Pipeline, for true labels and for random labels (random train AND test labels, so the true error of
any classifier is 0.5):
- features: the images projected on the top ``pca_dims`` principal directions of the PUBLIC digits
  (``load_mnist_public_digits``, digits other than 7 and 9), scaled by the public singular values; a
  fixed map, so it costs no privacy;
- the classifier: a small fully connected ReLU network (``hidden = 0``: a linear softmax layer);
- DP data-dependent prior, at each epsilon: Entropy-SGLD from a fixed initialisation w0 with
  beta = epsilon m / (2 L_max tau), tau = sqrt(m); prior P(S) = N(w, (tau gamma)^{-1} I) around the
  released w (epsilon-DP under the exact-sample caveat, GIBBS_SAMPLE_CAVEAT); posterior
  Q = N(w, (f sigma_P)^2 I) for f in ``posterior_factors``; the DP-prior PAC-Bayes bound;
- data-independent prior: Entropy-SGD (not private) from w0 to w_sgd; prior N(w0, s_P^2 I) for s_P in
  ``prior_stds``; posterior N(w_sgd, s^2 I) for s in ``posterior_stds``; the Maurer/Seeger bound;
- every grid of (prior, posterior) scales is paid for by a union bound (delta and delta_mc divided
  by the grid size), and the reported bound is the grid's minimum;
- the H- and C-bounds (Oneto et al.) of the deterministic epsilon-DP network w, from its training
  error, at the same delta.
Reported per row: the training and test error of the mean network, the test error of the stochastic
classifier Q (Monte Carlo on the test set), the bound and its parts.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import numbers
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

from .._checks import SEED_LIMIT
from .._checks import check_delta
from .._checks import check_positive
from .._checks import check_positive_int
from .._checks import check_seed
from ..datasets import load_mnist79
from ..datasets import load_mnist_public_digits
from ..pacbayes import certificate as cert_mod
from ..pacbayes import entropy_sgld as es
from ..pacbayes.bounds import c_bound
from ..pacbayes.bounds import h_bound
from .console import Column
from .console import RowPrinter

__all__ = [
    "FULL",
    "QUICK",
    "PacBayesSettings",
    "format_table",
    "public_pca_features",
    "public_pca_rank",
    "run_pacbayes",
]

#: the progress table ``run_pacbayes(verbose=True)`` prints, one line per row (epsilon "-": not private)
PROGRESS_COLUMNS = (
    Column("labels", "labels", "s", 6),
    Column("prior", "prior", "s", 16),
    Column("epsilon", "epsilon", "g", 7),
    Column("train_error", "train err", ".4f", 9),
    Column("test_error", "test err", ".4f", 8),
    Column("stochastic_test_error", "test err Q", ".4f", 10),
    Column("kl", "KL", ".4g", 8),
    Column("bound", "bound", ".4f", 6),
    Column("h_bound", "H-bound", ".4f", 7),
    Column("c_bound", "C-bound", ".4f", 7),
    Column("seconds", "seconds", ".1f", 7),
)


@dataclasses.dataclass(frozen=True)
class PacBayesSettings:
    """The experiment's sizes and hyperparameters (see the module docstring)."""

    m: int | None  # training records used (None: all 12,214)
    pca_dims: int
    hidden: int  # 0: linear softmax
    outer_steps: int
    epsilons: tuple[float, ...]
    posterior_factors: tuple[float, ...]  # DP prior: Q std = factor * sigma_P
    prior_stds: tuple[float, ...]  # data-independent prior stds
    posterior_stds: tuple[float, ...]  # data-independent prior: posterior stds
    n_samples: int  # hypotheses h ~ Q for the Monte Carlo estimate of R_S(Q)
    n_test_samples: int
    gamma: float = 3.6
    eta: float = 0.002
    eta_inner: float = 0.1
    sgd_eta: float = 0.002
    delta: float = 0.05
    delta_mc: float = 0.01
    seed: int = 0

    def __post_init__(self) -> None:
        """Every field checked before anything runs (a bad one used to fail minutes into the run, e.g. an empty
        grid as "cannot unpack non-iterable NoneType object" after Entropy-SGD had run).

        Raises:
          TypeError / ValueError: naming the field, the value and what is allowed.
        """
        if self.m is not None:
            check_positive_int(self.m, "PacBayesSettings.m (or None for all 12,214 records)")
        if (
            isinstance(self.pca_dims, bool)
            or not isinstance(self.pca_dims, numbers.Integral)
            or not 1 <= self.pca_dims <= 784
        ):
            raise ValueError(f"PacBayesSettings.pca_dims must be an integer in [1, 784], got {self.pca_dims!r}")
        check_positive_int(self.hidden, "PacBayesSettings.hidden (0: a linear softmax layer)", minimum=0)
        for name in ("outer_steps", "n_samples", "n_test_samples"):
            check_positive_int(getattr(self, name), f"PacBayesSettings.{name}")
        for name in ("epsilons", "posterior_factors", "prior_stds", "posterior_stds"):
            values = getattr(self, name)
            if not isinstance(values, (tuple, list)) or len(values) == 0:
                raise ValueError(
                    f"PacBayesSettings.{name} must be a non-empty tuple of finite numbers > 0, got {values!r}"
                )
            for v in values:
                check_positive(v, f"each of PacBayesSettings.{name}")
        for name in ("gamma", "eta", "eta_inner", "sgd_eta"):
            check_positive(getattr(self, name), f"PacBayesSettings.{name}")
        check_delta(self.delta, "PacBayesSettings.delta")
        check_delta(self.delta_mc, "PacBayesSettings.delta_mc")
        if not self.delta + self.delta_mc < 1:
            raise ValueError(
                f"PacBayesSettings.delta + delta_mc must be < 1 (each certificate holds with probability "
                f">= 1 - delta - delta_mc), got {self.delta!r} + {self.delta_mc!r}"
            )
        seed = check_seed(self.seed, "PacBayesSettings.seed")
        if seed is None or seed >= SEED_LIMIT - 1000:  # the network's initialisation uses the key 1000 + seed
            raise ValueError(f"PacBayesSettings.seed must be an integer in [0, 2**32 - 1000), got {self.seed!r}")


QUICK = PacBayesSettings(
    m=1000,
    pca_dims=10,
    hidden=4,
    outer_steps=40,
    epsilons=(0.3,),
    posterior_factors=(1.0,),
    prior_stds=(1.0,),
    posterior_stds=(0.05,),
    n_samples=64,
    n_test_samples=16,
)
FULL = PacBayesSettings(
    m=None,
    pca_dims=50,
    hidden=20,
    outer_steps=500,
    epsilons=(0.03, 0.1, 0.3),
    posterior_factors=(1.0,),
    prior_stds=(0.1, 0.3, 1.0),
    posterior_stds=(0.01, 0.03),
    n_samples=2000,
    n_test_samples=200,
)


def public_pca_features(dims: int, name: str = "dims") -> tuple[np.ndarray, np.ndarray]:
    """(centre, projection): x -> (x - centre) @ projection, fitted on the public digits only.

    The projection is onto the top ``dims`` eigenvectors of the public images' covariance, each
    scaled by 1 / sqrt(its eigenvalue) (whitened on the public data). Cached.

    Args:
      dims: the number of directions, an int from 1 to the rank of the public covariance
        (:func:`public_pca_rank`, 625): beyond it the eigenvalues are zero up to rounding, and
        whitening by them gives NaN or features of size 1e8 made of rounding noise.
      name: what to call ``dims`` in an error message (a caller's setting, e.g. ``"pca_dims"``).

    Raises:
      ValueError: ``dims`` not an int in [1, rank].
    """
    rank = public_pca_rank()
    if isinstance(dims, bool) or not (isinstance(dims, int) and 1 <= dims <= rank):
        raise ValueError(
            f"{name} must be an integer in [1, {rank}] (at most the rank of the public digits' "
            "covariance: the whitening divides by the square root of each direction's eigenvalue, "
            f"and beyond the rank those are zero up to rounding), got {dims!r}"
        )
    centre, proj = _public_pca(dims)
    return centre.copy(), proj.copy()


def public_pca_rank() -> int:
    """The numerical rank of the public digits' covariance (625 of 784 pixels' directions): its
    eigenvalues above ``max eigenvalue * 784 * float64 eps`` (NumPy's ``matrix_rank`` rule)."""
    _, evals, _ = _public_eigh()
    return int(np.sum(evals > evals.max() * evals.shape[0] * np.finfo(np.float64).eps))


@functools.lru_cache(maxsize=1)
def _public_eigh() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    pub = load_mnist_public_digits().astype(np.float64)
    centre = pub.mean(axis=0)
    centred = pub - centre
    evals, evecs = np.linalg.eigh(centred.T @ centred / pub.shape[0])
    return centre, evals, evecs


@functools.lru_cache(maxsize=4)
def _public_pca(dims: int) -> tuple[np.ndarray, np.ndarray]:
    centre, evals, evecs = _public_eigh()
    order = np.argsort(evals)[::-1][:dims]
    return centre, evecs[:, order] / np.sqrt(evals[order])


def _error_fn(unravel):
    return es.classifier_error(es.mlp_apply, unravel)


def _best_certificate(key, grid, *, error_fn, data, s: PacBayesSettings, prior_privacy):
    """The tightest certificate over ``grid`` of (prior mean, prior var, posterior mean, posterior
    std), each at delta / len(grid) and delta_mc / len(grid) (a union bound over the grid)."""
    best = None
    for i, (pm, pv, qm, qs) in enumerate(grid):
        c = cert_mod.certify_gaussian(
            jax.random.fold_in(key, i),
            prior_mean=pm,
            prior_var=pv,
            posterior_mean=qm,
            posterior_var=qs**2,
            error_fn=error_fn,
            data=data,
            delta=s.delta / len(grid),
            delta_mc=s.delta_mc / len(grid),
            n_samples=s.n_samples,
            prior_privacy=prior_privacy,
            chunk=64,
        )
        if best is None or c.bound < best[0].bound:
            best = (c, qm, qs)
    return best


def run_pacbayes(quick: bool = False, settings: PacBayesSettings | None = None, verbose: bool = False) -> list[dict]:
    """Runs the experiment; one row (a dict) per (labels, prior[, epsilon]).

    Mechanism-side (reads MNIST 7 vs 9). The rows are not private releases (they report training
    errors); only the priors' means are epsilon-DP, under the exact-sample caveat. Each row carries the
    settings it was computed with (``row["settings"]``, which :func:`write_pacbayes_report` states).

    Raises:
      TypeError / ValueError: ``settings`` not a PacBayesSettings, or its ``m`` above the 12,214 training
        records (before anything is computed).
    """
    if settings is not None and not isinstance(settings, PacBayesSettings):
        raise TypeError(
            f"settings must be a PacBayesSettings (e.g. dataclasses.replace(QUICK, m=400)) or None, got "
            f"{type(settings).__name__}"
        )
    s = settings or (QUICK if quick else FULL)
    t_start = time.time()
    show = RowPrinter(PROGRESS_COLUMNS, title="one row per certificate (every field in the report's JSON file):")
    key = jax.random.PRNGKey(s.seed)
    centre, proj = public_pca_features(s.pca_dims, "pca_dims")
    x_tr, y_tr = load_mnist79("train")
    if s.m is not None and s.m > x_tr.shape[0]:  # before any computation
        raise ValueError(
            f"PacBayesSettings.m must be at most the {x_tr.shape[0]:,} training records of MNIST 7 vs 9 "
            f"(or None for all of them), got {s.m!r}"
        )
    x_te, y_te = load_mnist79("test")
    rng = np.random.default_rng(s.seed)
    if s.m is not None:
        idx = rng.choice(x_tr.shape[0], size=s.m, replace=False)
        x_tr, y_tr = x_tr[idx], y_tr[idx]
    feats_tr = jnp.asarray(((x_tr - centre) @ proj).astype(np.float32))
    feats_te = jnp.asarray(((x_te - centre) @ proj).astype(np.float32))
    m = int(feats_tr.shape[0])
    tau = math.sqrt(m)
    sizes = (s.pca_dims, 2) if s.hidden == 0 else (s.pca_dims, s.hidden, 2)
    w0, unravel = ravel_pytree(es.init_mlp(jax.random.PRNGKey(1000 + s.seed), sizes))
    w0_np = np.asarray(w0)
    loss = es.classifier_loss(es.mlp_apply, unravel)
    error_fn = _error_fn(unravel)
    rows = []
    for labels in ("true", "random"):
        if labels == "random":
            ytr = jnp.asarray(rng.integers(0, 2, size=m).astype(np.int32))
            yte = jnp.asarray(rng.integers(0, 2, size=feats_te.shape[0]).astype(np.int32))
        else:
            ytr, yte = jnp.asarray(y_tr), jnp.asarray(y_te)
        data = (feats_tr, ytr)

        def row(prior, eps, w, c, qm, qs, k):
            test_q = cert_mod.sample_gaussian_errors(
                k, jnp.asarray(qm, jnp.float32), np.float32(qs), error_fn, (feats_te, yte), s.n_test_samples
            )
            tr = float(error_fn(w, *data))
            out = dict(
                labels=labels,
                prior=prior,
                epsilon=eps,
                m=m,
                num_params=int(w0.size),
                train_error=tr,
                test_error=float(error_fn(w, feats_te, yte)),
                stochastic_test_error=float(np.mean(test_q)),
                posterior_std=float(qs),
                bound=c.bound,
                empirical_error=c.empirical_error,
                kl=c.kl_divergence,
                h_bound=None if eps is None else h_bound(tr, eps, m, s.delta),
                c_bound=None if eps is None else c_bound(tr, eps, m, s.delta),
                certificate=c.to_dict(),
                seconds=round(time.time() - t_start, 1),
                settings=dataclasses.asdict(s),
            )
            if verbose:
                show(out)
            return out

        # data-independent prior (Entropy-SGD, not private)
        base = es.EntropySGLDParams(tau=tau, gamma=s.gamma, eta=s.sgd_eta, eta_inner=s.eta_inner, beta=None)
        key, k_run, k_cert, k_test = jax.random.split(key, 4)
        state, _ = es.run(k_run, es.init(w0), s.outer_steps, data=data, params=base, loss_fn=loss)
        w = np.asarray(state.position)
        grid = [(w0_np, sp**2, w, sq) for sp in s.prior_stds for sq in s.posterior_stds]
        c, qm, qs = _best_certificate(k_cert, grid, error_fn=error_fn, data=data, s=s, prior_privacy=None)
        rows.append(row("data-independent", None, state.position, c, qm, qs, k_test))

        # DP data-dependent prior (Entropy-SGLD) at each epsilon
        sigma_p = 1.0 / math.sqrt(tau * s.gamma)
        for eps in s.epsilons:
            params = base._replace(eta=s.eta, beta=es.beta_for_epsilon(eps, base.loss_max, tau, m))
            key, k_run, k_cert, k_test = jax.random.split(key, 4)
            state, _ = es.run(k_run, es.init(w0), s.outer_steps, data=data, params=params, loss_fn=loss)
            w = np.asarray(state.position)
            privacy = es.entropy_sgld_privacy(params, m, num_steps=s.outer_steps, seeded_by="user")
            grid = [(w, sigma_p**2, w, f * sigma_p) for f in s.posterior_factors]
            c, qm, qs = _best_certificate(k_cert, grid, error_fn=error_fn, data=data, s=s, prior_privacy=privacy)
            rows.append(row("dp", eps, state.position, c, qm, qs, k_test))
    return rows


def format_table(rows: list[dict]) -> str:
    """A Markdown table of the rows of ``run_pacbayes``."""
    head = (
        "| labels | prior | epsilon | train err | test err | test err of Q | R_S(Q) est. | KL | "
        "PAC-Bayes bound | H-bound | C-bound |"
    )
    lines = [head, "|" + "---|" * 11]

    def f(v, nd=4):
        return "-" if v is None else f"{v:.{nd}g}"

    for r in rows:
        lines.append(
            f"| {r['labels']} | {r['prior']} | {f(r['epsilon'], 3)} | {f(r['train_error'])} | "
            f"{f(r['test_error'])} | {f(r['stochastic_test_error'])} | {f(r['empirical_error'])} | "
            f"{f(r['kl'], 4)} | {f(r['bound'])} | {f(r['h_bound'])} | {f(r['c_bound'])} |"
        )
    return "\n".join(lines)


def pacbayes_figure(rows: list[dict], path) -> Path:
    """Bars per (labels, prior, epsilon): test error of Q against the PAC-Bayes, H- and C-bounds."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    from .._io import save_figure_atomic

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    for ax, labels in zip(axes, ("true", "random")):
        rs = [r for r in rows if r["labels"] == labels]
        names = ["data-indep." if r["epsilon"] is None else f"DP eps={r['epsilon']:g}" for r in rs]
        xs = np.arange(len(rs))
        series = (
            ("test error of Q", "stochastic_test_error"),
            ("PAC-Bayes bound", "bound"),
            ("H-bound", "h_bound"),
            ("C-bound", "c_bound"),
        )
        for j, (label, k) in enumerate(series):
            vals = [np.nan if r[k] is None else min(r[k], 1.05) for r in rs]
            ax.bar(xs + (j - 1.5) * 0.2, vals, width=0.2, label=label)
        ax.axhline(0.5, color="k", lw=0.8, ls=":")
        ax.set_xticks(xs, names, fontsize=8)
        ax.set_title(f"MNIST 7 vs 9, {labels} labels", fontsize=9)
        ax.set_ylim(0, 1.1)
    axes[0].set_ylabel("error / bound on the error (capped at 1.05)")
    # one legend for both panels, in a band below them, so that it covers no bar
    handles, labels_ = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels_, loc="lower center", ncol=len(labels_), fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    try:
        return save_figure_atomic(fig, Path(path))
    finally:
        plt.close(fig)


def write_pacbayes_report(rows: list[dict], out, *, quick: bool, wall_seconds: float, command: str) -> Path:
    """Writes ``pacbayes[-quick].md``, its figure and ``pacbayes[-quick].json`` (the settings and every
    row) under ``out``; returns the Markdown path.

    The settings stated are the ones recorded in the rows (``row["settings"]``, from :func:`run_pacbayes`), or
    QUICK / FULL (by ``quick``) for rows without them.
    """
    import datetime
    import json
    import os
    import platform

    from ..experiments.store import write_text_atomic

    out = Path(out)
    name = "pacbayes-quick" if quick else "pacbayes"
    fig = pacbayes_figure(rows, out / f"{name}.png")
    # the settings the rows were computed with (run_pacbayes records them in every row); QUICK / FULL only for
    # rows that carry none: a report of a custom run used to state FULL's settings beside its numbers
    recorded = rows[0].get("settings") if rows else None
    settings = recorded if isinstance(recorded, dict) else dataclasses.asdict(QUICK if quick else FULL)
    lines = [
        f"# DP PAC-Bayes reproduction{' (--quick smoke test: toy sizes, NOT results)' if quick else ''}",
        "",
        f"Command: `{command}`",
        "",
        f"Written {datetime.datetime.now(datetime.timezone.utc).isoformat(timespec='seconds')} on "
        f"{platform.platform()} ({os.cpu_count()} CPUs); wall time {wall_seconds:.0f} s.",
        "",
        f"Settings: {json.dumps(settings, default=str)}",
        "",
        "Features: PCA fitted on the PUBLIC digits other than 7 and 9 (no privacy cost). Priors: "
        "data-independent (centred at the initialisation, widths paid for by a union bound) and "
        "DP data-dependent (Entropy-SGLD mean, epsilon-DP under the exact-sample assumption: SGLD only "
        "approximates the exponential mechanism, so the DP rows are optimistic by that gap). "
        "The H- and C-bounds certify the deterministic network w; the PAC-Bayes bounds certify the "
        "Gaussian posterior Q. The rows report training errors and are NOT private releases.",
        "",
        f"Every row, with its certificate, is in `{name}.json`.",
        "",
        format_table(rows),
        "",
        f"![bounds]({fig.name})",
        "",
    ]
    write_text_atomic(out / f"{name}.json", json.dumps({"settings": settings, "rows": rows}, indent=1, default=str))
    return write_text_atomic(out / f"{name}.md", "\n".join(lines))
