"""A private look at clipping: how many records' gradients exceed the clip C at the end of a DPVI run.

Clipping bias is the one error of NA-DPVI that no post-processing can see: a clip C below the typical
per-record gradient norm moves DP-SGD's fixed point, and the noise-aware posterior is then confidently
wrong (docs/user-guide.md: a log-normal model at C = 5 covered with RMSE 0.217, at C = 50 with 0.029).
The released trace holds no per-record quantity, so whether C was too small cannot be read from it.
:func:`gradient_norm_histogram` spends a little more budget to find out: it releases a Laplace-noised
histogram of the per-record gradient norms (beta-scaled, as DP-SGD clips them) at the trace's final
iterate, in bins at multiples of C, with a bin of its own for the gradients that are not finite (those
DP-SGD drops).

It takes a DPVIm release too (:class:`~dpposterior.releases.dpvim_trace.DPVImTrace`, the aligned-gradient baseline):
there the vector DP-SGD clipped is not dpvi's beta-scaled ELBO gradient but the per-record loc gradient
grad f_i(theta) at theta = mu + softplus(rho) * eta, one standard-normal eta shared by every record
(:func:`dpposterior.vi._dpvim.make_loc_loss`), clipped at DPVIm's own C with no beta; the histogram
counts those norms, at DPVIm's final iterate.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from .._checks import check_epsilon, check_laplace_scale
from ..privacy.secure import resolve_noise_source
from ..privacy.snapping import snap
from ..privacy.spent import PrivacySpent
from .dpvi import _cached_loss, cached_model_loss
from ..releases.dpvim_trace import DPVImTrace
from ._dpvim import make_loc_loss
from .model_inspect import check_data, inspect_model
from .record_norms import BATCH_RECORDS, MC_SEED, record_norms  # noqa: F401 - BATCH_RECORDS, MC_SEED: the public names
from ..releases.trace import DPVITrace

#: the default bin edges, as multiples of the clip C.
DEFAULT_MULTIPLES = (0.25, 0.5, 1.0, 2.0, 4.0)
MECHANISM = "laplace_histogram"


@dataclasses.dataclass(frozen=True)
class GradientNormHistogram:
    """A Laplace-noised histogram of per-record gradient norms (:func:`gradient_norm_histogram`).

    Attributes:
      edges: the bin edges in gradient-norm units, ``(0, m_1 C, ..., m_k C, inf)``; bin i holds norms in
        ``[edges[i], edges[i+1])``.
      counts: the noisy counts of the k + 1 bins followed by the count of gradients that are not finite
        (k + 2 values, float64; Laplace noise can make them negative or fractional: they are left so, an
        unbiased estimate).
      clip: C of the trace.
      noise_scale: the Laplace scale of every count (1 / epsilon, slightly more for the snapping slack).
      num_records: the public N the fractions divide by (the trace's ``dataset_size``).
      privacy: the :class:`~dpposterior.privacy.PrivacySpent` of this release (compose it with the
        trace's, e.g. in a :class:`~dpposterior.privacy.Ledger`).
    """

    edges: np.ndarray
    counts: np.ndarray
    clip: float
    noise_scale: float
    num_records: int
    privacy: PrivacySpent

    @property
    def clipped_fraction(self) -> float:
        """The noisy share of records whose gradient norm is at least C (the bins from C up), over N;
        its standard error is :attr:`clipped_fraction_se`. Not clamped to [0, 1]."""
        return float(np.sum(self.counts[:-1][self._above_clip]) / self.num_records)

    @property
    def clipped_fraction_se(self) -> float:
        """The standard error of :attr:`clipped_fraction` from the noise alone: ``sqrt(2 k) b / N`` for k
        bins from C up (a Laplace(b) variate has variance 2 b^2)."""
        return float(np.sqrt(2.0 * np.sum(self._above_clip)) * self.noise_scale / self.num_records)

    @property
    def _above_clip(self) -> np.ndarray:
        return self.edges[:-1] >= self.clip

    @property
    def non_finite_fraction(self) -> float:
        """The noisy share of records whose gradient is not finite (dropped by DP-SGD), over N."""
        return float(self.counts[-1] / self.num_records)

    def table(self) -> list[dict[str, Any]]:
        """One row per bin: its range (in norm units and in multiples of C), noisy count and share of N."""
        rows = []
        for i in range(len(self.edges) - 1):
            lo, hi = self.edges[i], self.edges[i + 1]
            rows.append(
                {
                    "bin": f"[{lo:.4g}, {hi:.4g})",
                    "multiples_of_clip": f"[{lo / self.clip:.4g}, {hi / self.clip:.4g})",
                    "count": float(self.counts[i]),
                    "fraction": float(self.counts[i] / self.num_records),
                }
            )
        rows.append(
            {
                "bin": "not finite",
                "multiples_of_clip": "-",
                "count": float(self.counts[-1]),
                "fraction": self.non_finite_fraction,
            }
        )
        return rows


def _check_multiples(multiples: Any) -> np.ndarray:
    try:
        m = np.asarray(multiples, dtype=np.float64)
    except (TypeError, ValueError):
        m = np.asarray([np.nan])
    if (
        m.ndim != 1
        or m.size == 0
        or np.asarray(multiples).dtype.kind == "b"
        or not np.all(np.isfinite(m))
        or np.any(m <= 0)
        or np.any(np.diff(m) <= 0)
        or 1.0 not in m
    ):
        raise ValueError(
            "multiples must be a non-empty, strictly increasing sequence of finite numbers > 0 that "
            f"contains 1.0 (the clip itself), e.g. {DEFAULT_MULTIPLES}; got {multiples!r}"
        )
    return m


def _noisy_counts(
    counts: np.ndarray, epsilon: float, noise_key: Any, num_records: int
) -> tuple[np.ndarray, float, tuple]:
    """The release step of :func:`gradient_norm_histogram`: exact counts -> noisy counts (the only
    randomness that protects them; audited in tests/privacy/test_audit_clip_check.py).

    Mironov's snapping mechanism (:mod:`dpposterior.privacy.snapping`) on the public range
    [0, num_records] of every count, with Laplace scale about 1 / epsilon: its bits come from
    ``noise_key`` (a JAX key, typed or raw: the default mode, OS-seeded unless the user gave a key)
    or, when ``noise_key`` is None, from the OS CSPRNG (secure mode). Plain floating-point Laplace
    noise would leak the counts' low-order bits (Mironov 2012), so there is no unsnapped path.

    Returns:
      (noisy counts as float64, the Laplace scale of the noise, extra PrivacySpent details).
    """
    raw = None
    if noise_key is not None:
        key = jnp.asarray(noise_key)
        raw = np.asarray(
            jax.random.key_data(key) if jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key) else key, np.uint32
        )
    snapped = snap(
        counts, centre=0.5 * num_records, half_width=0.5 * num_records, sensitivity=1.0, epsilon=epsilon, raw_key=raw
    )
    extra = (
        ("snapping", "Mironov 2012: clamp to [0, N], float64 Laplace, round to the grid"),
        ("snapping_grid", snapped.grid),
        ("snapping_slack", snapped.slack),
    )
    return np.asarray(snapped.value, np.float64), float(snapped.scale), extra


def gradient_norm_histogram(
    trace: DPVITrace | DPVImTrace,
    model: Callable,
    *data: Any,
    epsilon: float,
    multiples: Any = DEFAULT_MULTIPLES,
    rng_key: Any = None,
    secure: bool = False,
    **model_kwargs: Any,
) -> GradientNormHistogram:
    """Releases a noisy histogram of the per-record gradient norms at the trace's final iterate.

    Privacy: each record's beta-scaled gradient of the per-record ELBO loss (the vector DP-SGD clips,
    with the trace's ``num_mc`` Monte Carlo draws, shared by every record as in a DP-SGD step) at the
    public ``trace.final_phi`` falls into exactly one bin (norm bins at ``multiples`` x C, and a bin for
    gradients that are not finite) at each of :data:`~dpposterior.vi.record_norms.NUM_DRAWS` public
    Monte Carlo draws, and each count is the mean over the draws (what a typical DP-SGD step sees).
    Adding or removing one record changes the counts by 1 in all: L1 sensitivity 1 under
    add/remove-one adjacency. For a DPVIm release (a
    :class:`~dpposterior.releases.dpvim_trace.DPVImTrace`) the vector is the one DPVIm's DP-SGD clips instead: each
    record's loc gradient grad f_i(theta) at theta = mu + softplus(rho) * eta of the public
    ``trace.final_phi``, with one standard-normal eta per draw shared by every record (as in a DPVIm step), not
    beta-scaled, binned at DPVIm's clip C; the sensitivity and the noise are the same. Laplace noise
    of scale 1 / epsilon on every count makes the release epsilon-DP (pure, delta = 0). It is a second
    release from the same data as the trace: compose the two (``Ledger``; basic composition gives
    epsilon_trace + epsilon here). The number of records N is treated as public (the trace's
    ``dataset_size``), as in the papers.
    Reference: the Laplace histogram (Dwork et al. 2006); why it is needed: Räisä et al. 2024, section 5
    (clipping bias is outside the noise-aware model).

    Randomness: the counts are released by the snapping mechanism (Mironov 2012,
    :func:`dpposterior.privacy.snapping.snap`: clamped to the public range [0, N], float64 Laplace
    noise, rounded to a power-of-two grid; epsilon-DP in total, the slack taken from the budget), its
    bits from JAX's threefry generator seeded from the OS (or from ``rng_key``, recorded as
    ``seeded_by="user"``), or with ``secure=True`` from the OS CSPRNG. The Monte Carlo draws (DPVIm:
    the eta draws) come from fixed public keys (:data:`MC_SEED`): they protect nothing, and fixing them
    makes the exact counts a function of the data and the public trace, so the privacy noise is the
    only randomness of the release and ``clipped_fraction_se`` its real standard error.

    Args:
      trace: the DPVITrace of the run (its layout, clip, beta, num_mc, dataset_size, final_phi), or the
        DPVImTrace of a :func:`~dpposterior.vi.dpvim` run (its layout, clip, dataset_size, final_phi).
      model: the model of that run.
      *data: the private data arrays of that run.
      epsilon: the budget of this release, finite and > 0 (e.g. a tenth of the trace's).
      multiples: the inner bin edges as multiples of C: strictly increasing, > 0, containing 1.0.
      rng_key: None (OS seed) or an int / key (reproduction only).
      secure: draw the Laplace noise from the OS CSPRNG; ``rng_key`` must then be None.
      **model_kwargs: the model's keyword arguments of that run.

    Returns:
      A frozen :class:`GradientNormHistogram` with its PrivacySpent.

    Raises:
      TypeError: ``trace`` neither a DPVITrace nor a DPVImTrace, a model that is not callable, data
        that are not numeric.
      ValueError: an invalid epsilon or ``multiples``, a model whose latent sites differ from the
        trace's, the data checks of :func:`~dpposterior.vi.dpvi`, or a noise scale 1 / epsilon too large
        for float32 noise.
    """
    if not isinstance(trace, (DPVITrace, DPVImTrace)):
        raise TypeError(
            f"trace must be a DPVITrace (from dpvi) or a DPVImTrace (from dpposterior.vi.dpvim), got {type(trace).__name__}"
        )
    if not callable(model):
        raise TypeError(f"model must be the NumPyro model of the trace (a callable), got {type(model).__name__}")
    epsilon = check_epsilon(epsilon)
    m = _check_multiples(multiples)
    scale = 1.0 / epsilon
    check_laplace_scale(scale, f"1/epsilon = 1/{epsilon!r}")
    arrays = check_data(data, model_kwargs)
    layout = inspect_model(model, arrays, model_kwargs)
    if layout.to_dict() != trace.layout.to_dict():
        raise ValueError(
            f"the model's latent sites {[s.name for s in layout.sites]} (shapes "
            f"{[s.shape for s in layout.sites]}) are not the trace's "
            f"{[s.name for s in trace.layout.sites]} ({[s.shape for s in trace.layout.sites]}): pass the "
            "model, data and keyword arguments of the run that released the trace"
        )
    raw_key, seeded_by = resolve_noise_source(rng_key, secure)
    # The ELBO's Monte Carlo draws come from fixed, public keys (record_norms.MC_SEED; they protect nothing),
    # and the counts are means over record_norms.NUM_DRAWS of them (the typical step, not one arbitrary draw):
    # the exact counts are then a function of the data and the public trace alone, and the privacy noise is
    # the count's only randomness, so clipped_fraction_se is its real standard error.
    k_noise = None if raw_key is None else jax.random.split(jax.random.wrap_key_data(raw_key))[1]
    if isinstance(trace, DPVImTrace):  # the loc gradient DPVIm clips (its rho half is 0), one shared eta, no beta
        loss = cached_model_loss(make_loc_loss, model, layout, int(trace.dataset_size), model_kwargs)
        beta = np.ones(int(np.asarray(trace.final_phi).shape[0]), np.float32)
        statistic = (
            "per-record loc gradient norms of DPVIm (one eta shared by the records, no beta) at "
            "trace.final_phi, binned at multiples of C"
        )
    else:
        loss = _cached_loss(model, layout, int(trace.dataset_size), int(trace.num_mc), model_kwargs)
        beta = np.asarray(trace.beta, np.float32)
        statistic = "per-record gradient norms (beta-scaled) at trace.final_phi, binned at multiples of C"
    norms = record_norms(loss, beta, trace.final_phi, arrays)
    clip = float(trace.clip)
    edges = np.concatenate([[0.0], m * clip, [np.inf]])
    finite = np.isfinite(norms)
    bins = np.searchsorted(m * clip, norms[finite], side="right")  # bin i: [edges[i], edges[i + 1])
    # the mean over the public draws of each bin's count: a record adds 1 in all, so L1 sensitivity 1
    counts = np.concatenate([np.bincount(bins, minlength=m.size + 1), [np.sum(~finite)]]) / norms.shape[0]
    noisy, scale, extra = _noisy_counts(counts, epsilon, k_noise, int(trace.dataset_size))
    privacy = PrivacySpent(
        epsilon=epsilon,
        delta=0.0,
        neighbouring="add_remove",
        accountant="pure",
        mechanism=MECHANISM,
        noise_multiplier=None,
        sampling_rate=1.0,
        num_steps=1,
        seeded_by=seeded_by,
        details=(
            ("statistic", statistic),
            ("multiples_of_clip", tuple(float(x) for x in m)),
            ("sensitivity_l1", 1.0),
            ("noise_scale", scale),
            ("num_records", "public"),
        )
        + extra,
    )
    return GradientNormHistogram(
        edges=edges, counts=noisy, clip=clip, noise_scale=scale, num_records=int(trace.dataset_size), privacy=privacy
    )
