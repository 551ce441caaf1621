"""The PAC-Bayes risk certificate: a bound on the true 0-1 error of a posterior Q, with its parts.

Two cases:
- a DP data-dependent prior P(S) (its ``PrivacySpent`` is pure epsilon-DP): the bound of Dziugaite & Roy (2018),
  kl(R_S(Q) || R_D(Q)) <= [KL(Q||P(S)) + ln(2 sqrt m) + 2 max{ln(3/delta), m eps^2}] / m;
- a data-independent prior (``prior_privacy=None``): the Maurer/Seeger bound,
  kl(R_S(Q) || R_D(Q)) <= [KL(Q||P) + ln(2 sqrt m) + ln(1/delta)] / m.
R_S(Q) is estimated from n hypotheses h_i ~ Q and replaced by its Monte Carlo upper bound
kl^{-1}(estimate, ln(2/delta')/n), so the certificate holds with probability >= 1 - delta - delta'.

The certificate is NOT a private release: it reports the training error of Q (and Q may be fitted to
the data). Differential privacy is used only to make the data-dependent prior admissible.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from .._checks import FLOAT32_MAX
from .._checks import check_delta
from .._checks import check_positive_int
from ..privacy.spent import PrivacySpent
from .bounds import _check_m
from .bounds import _check_nonneg
from .bounds import _finite_rhs
from .bounds import gaussian_kl
from .bounds import mc_kl_rhs
from .kl import kl_inv_upper

__all__ = ["PacBayesCertificate", "certify", "certify_gaussian"]


@dataclasses.dataclass(frozen=True)
class PacBayesCertificate:
    """A bound on the true 0-1 error R_D(Q) and every term that went into it.

    NOT a private release: ``bound``, ``empirical_error`` and ``empirical_error_upper`` are computed from the
    training records (and Q may be fitted to them) without noise; the prior's privacy only makes a
    data-dependent prior admissible in the bound. Publish them only where the training data may be seen.

    Attributes:
      bound: upper bound on R_D(Q), valid with probability >= 1 - delta - delta_mc (or 1 - delta when
        R_S(Q) was given exactly, n_samples = 0).
      empirical_error: the Monte Carlo estimate (1/n) sum_i R_S(h_i), h_i ~ Q.
      empirical_error_upper: its upper confidence bound kl^{-1}(empirical_error, mc_term).
      kl_divergence: KL(Q || P) in nats.
      m: number of training records.
      delta, delta_mc: the confidence parameters of the PAC-Bayes bound and of the MC estimate.
      n_samples: the number of hypotheses drawn from Q (0: R_S(Q) exact).
      complexity_term: (KL + ln(2 sqrt m)) / m.
      confidence_term: 2 ln(3/delta) / m (DP prior) or ln(1/delta) / m (data-independent prior).
      privacy_term: the excess that privacy adds, (2 max{ln(3/delta), m eps^2} - 2 ln(3/delta)) / m;
        0 for a data-independent prior.
      kl_rhs: complexity_term + confidence_term + privacy_term, the bound on kl(R_S || R_D).
      mc_term: ln(2/delta_mc) / n_samples (0 when n_samples = 0).
      epsilon: the prior's epsilon for replace-one neighbours, as the bound uses it: the recorded
        epsilon, or twice it for a record with add/remove-one neighbours (None: data-independent prior).
      prior_privacy: the PrivacySpent of the prior (None: data-independent prior).
      caveat: what the guarantee assumes beyond the theorem (e.g. the SGLD approximation).
    """

    bound: float
    empirical_error: float
    empirical_error_upper: float
    kl_divergence: float
    m: int
    delta: float
    delta_mc: float
    n_samples: int
    complexity_term: float
    confidence_term: float
    privacy_term: float
    kl_rhs: float
    mc_term: float
    epsilon: float | None
    prior_privacy: PrivacySpent | None
    caveat: str

    def to_dict(self) -> dict[str, Any]:
        """The certificate as plain JSON-able values."""
        d = dataclasses.asdict(self)
        d["prior_privacy"] = None if self.prior_privacy is None else self.prior_privacy.to_dict()
        return d


def certify(
    empirical_errors,
    kl_divergence: float,
    m: int,
    *,
    delta: float,
    delta_mc: float | None = None,
    prior_privacy: PrivacySpent | None = None,
) -> PacBayesCertificate:
    """The certificate from the training errors of sampled hypotheses and KL(Q || P).

    Not a private release (see :class:`PacBayesCertificate`): it restates the training errors it is given.

    Args:
      empirical_errors: R_S(h_i) in [0, 1] for n >= 1 hypotheses h_i drawn i.i.d. from Q (a 1-D
        array of length n, each entry a mean over the m records), or a scalar R_S(Q) known exactly
        (then ``delta_mc`` must be None).
      kl_divergence: KL(Q || P) >= 0, exact (not itself estimated: a KL estimated from samples has no
        confidence term here, and the bound would then be only approximate).
      m: the number of training records.
      delta: the PAC-Bayes confidence parameter in (0, 1).
      delta_mc: the Monte Carlo confidence parameter in (0, 1) (required for sampled errors).
      prior_privacy: the PrivacySpent of a data-dependent prior: must be pure epsilon-DP (delta = 0,
        finite epsilon). The bound (Dziugaite & Roy 2018; Dziugaite's thesis 2019,
        Theorem 3.3.2) is stated for replace-one neighbours; a record with ``neighbouring="add_remove"`` is
        used with 2 epsilon (group privacy: a replacement is a removal and an addition). None for a
        prior chosen without the data.

    Raises:
      ValueError: invalid numbers, errors of more than one dimension, delta + delta_mc >= 1, a
        prior_privacy that is not pure and finite epsilon-DP, or a kl bound that overflows the float
        range (e.g. epsilon 1e200).
      TypeError: non-numeric errors (bools, strings), or a prior_privacy that is not a PrivacySpent.
    """
    kl_divergence = _check_nonneg("kl_divergence", kl_divergence)
    m = _check_m(m)
    delta = check_delta(delta)
    errs = np.asarray(empirical_errors)
    if errs.dtype.kind not in "iuf":
        raise TypeError(f"empirical_errors must hold real numbers (not bools or strings), got dtype {errs.dtype}")
    errs = errs.astype(np.float64)
    if errs.ndim > 1:
        # n is errs.size below: a (n, m) array of per-record 0-1 losses would count as n * m hypotheses and
        # shrink the Monte Carlo term ln(2 / delta_mc) / n, an over-optimistic certificate
        raise ValueError(
            f"empirical_errors must be a scalar R_S(Q) or a 1-D array of n training errors R_S(h_i), one "
            f"per hypothesis h_i ~ Q, got shape {errs.shape}; for per-record 0-1 losses of each "
            "hypothesis, average over the records first (each row's mean is R_S(h_i))"
        )
    if errs.size == 0:
        raise ValueError("empirical_errors must be a non-empty array of 0-1 errors in [0, 1], got an empty array")
    outside = np.isnan(errs) | (errs < 0) | (errs > 1)
    if np.any(outside):
        raise ValueError(
            f"empirical_errors must be 0-1 errors in [0, 1] (the bound is for losses in [0, 1]; "
            f"nothing is clipped), got {int(np.count_nonzero(outside))} of {errs.size} values NaN or "
            f"outside [0, 1] (range [{np.nanmin(errs) if not np.all(np.isnan(errs)) else np.nan:.4g}, "
            f"{np.nanmax(errs) if not np.all(np.isnan(errs)) else np.nan:.4g}])"
        )
    if errs.ndim == 0:
        if delta_mc is not None:
            raise ValueError("delta_mc must be None when the empirical error is given exactly (a scalar)")
        n, estimate, mc_term, dmc = 0, float(errs), 0.0, 0.0
        upper = estimate
    else:
        if delta_mc is None:
            raise ValueError("delta_mc (in (0, 1)) is required when the errors are sampled from Q")
        dmc = check_delta(delta_mc, name="delta_mc")
        if not delta + dmc < 1.0:
            raise ValueError(
                f"delta + delta_mc must be < 1 (the certificate holds with probability >= 1 - delta - "
                f"delta_mc), got delta={delta!r}, delta_mc={delta_mc!r}"
            )
        n = int(errs.size)
        estimate = float(np.mean(errs))
        mc_term = mc_kl_rhs(n, dmc)
        upper = float(kl_inv_upper(estimate, mc_term))

    complexity = (kl_divergence + math.log(2.0 * math.sqrt(m))) / m
    if prior_privacy is None:
        eps = None
        confidence = math.log(1.0 / delta) / m
        privacy = 0.0
        caveat = "data-independent prior (chosen without the training data)"
    else:
        if not isinstance(prior_privacy, PrivacySpent):
            raise TypeError(f"prior_privacy must be a PrivacySpent or None, got {type(prior_privacy).__name__}")
        if not prior_privacy.is_private or prior_privacy.delta != 0:
            raise ValueError(
                "the DP-prior bound needs a pure epsilon-DP prior (finite epsilon, delta = 0); got "
                f"{prior_privacy.summary()}"
            )
        # the theorem (Dziugaite & Roy) is stated for replace-one neighbours (data sets of the same size m
        # that differ in one record); a pure epsilon-DP guarantee under add/remove-one gives 2 epsilon for
        # replace-one (a replacement is a removal and an addition: group privacy of size 2)
        eps = float(prior_privacy.epsilon)
        if prior_privacy.neighbouring == "add_remove":
            eps = 2.0 * eps
        confidence = 2.0 * math.log(3.0 / delta) / m
        # eps * eps (inf if huge), not eps**2 (OverflowError); an infinite bound is refused as dp_prior_kl_rhs does
        privacy = 2.0 * max(math.log(3.0 / delta), m * eps * eps) / m - confidence
        caveat = str(prior_privacy.detail("caveat", "")) or "prior is epsilon-DP as recorded"
        if prior_privacy.neighbouring == "add_remove":
            caveat += (
                f"; the prior's epsilon={float(prior_privacy.epsilon):.6g} is for add/remove-one neighbours, "
                f"used as 2 epsilon = {eps:.6g} for the replace-one neighbours of the bound"
            )
    rhs = _finite_rhs(
        complexity + confidence + privacy, "the kl bound (KL + ln(2 sqrt m) + the confidence and privacy terms) / m"
    )
    bound = float(kl_inv_upper(upper, rhs))
    return PacBayesCertificate(
        bound=bound,
        empirical_error=estimate,
        empirical_error_upper=upper,
        kl_divergence=kl_divergence,
        m=m,
        delta=delta,
        delta_mc=dmc,
        n_samples=n,
        complexity_term=complexity,
        confidence_term=confidence,
        privacy_term=privacy,
        kl_rhs=rhs,
        mc_term=mc_term,
        epsilon=eps,
        prior_privacy=prior_privacy,
        caveat=caveat,
    )


def _check_key(key: Any) -> None:
    typed = isinstance(key, jax.Array) and jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key)
    raw = isinstance(key, (jax.Array, np.ndarray)) and key.ndim == 1 and key.dtype == np.uint32
    if not (typed or raw):
        raise TypeError(f"key must be a JAX PRNG key (jax.random.key(seed) or jax.random.PRNGKey(seed)), got {key!r}")


def _check_xy(data: Any) -> tuple[np.ndarray, np.ndarray]:
    """``data`` as a pair (X, y) of numeric arrays with one shared, non-empty leading record axis."""
    if not isinstance(data, (tuple, list)) or len(data) != 2:
        raise TypeError(
            f"data must be a pair (X, y), got {type(data).__name__}"
            + (f" of length {len(data)}" if isinstance(data, (tuple, list)) else "")
        )
    x, y = (np.asarray(a) for a in data)
    for name, a in (("X", x), ("y", y)):
        if a.dtype.kind not in "biuf" or a.ndim < 1:
            raise ValueError(
                f"data {name} must be a numeric array with a leading record axis, got dtype {a.dtype} "
                f"and shape {a.shape}"
            )
    if x.shape[0] != y.shape[0]:
        raise ValueError(f"X and y must have one entry per record: got {x.shape[0]} and {y.shape[0]} records")
    if x.shape[0] == 0:
        raise ValueError("data must hold at least one record, got 0")
    return x, y


@functools.partial(jax.jit, static_argnames=("error_fn", "chunk"))
def _gaussian_errors(key, mean, std, x, y, *, error_fn, chunk):
    # data and weights are arguments (not closed-over constants), so one compilation serves every
    # call with the same error_fn, chunk and shapes
    eps = jax.random.normal(key, (chunk,) + mean.shape, mean.dtype)
    return jax.vmap(lambda e: error_fn(mean + std * e, x, y))(eps)


def sample_gaussian_errors(
    key: jax.Array, mean, std, error_fn: Callable, data, n_samples: int, chunk: int = 16
) -> np.ndarray:
    """Training errors R_S(h_i) of n weight vectors h_i ~ N(mean, diag(std^2)).

    ``error_fn(w, X, y)`` returns the mean 0-1 error of the network with flat weights w. Evaluated
    ``chunk`` hypotheses at a time (vmap) to bound memory.

    Raises:
      ValueError / TypeError: n_samples or chunk not an integer >= 1, a key that is not a JAX PRNG
        key, data that is not a pair (X, y) of arrays with one shared, non-empty record axis, an
        ``error_fn`` that does not return a scalar (e.g. one 0-1 loss per record), or labels that
        an ``error_fn`` with a ``check_data(w, X, y)`` attribute (``pacbayes.entropy_sgld.classifier_error``)
        refuses (outside {0, ..., classes - 1}).
    """
    n_samples = check_positive_int(n_samples, "n_samples")
    chunk = check_positive_int(chunk, "chunk")
    _check_key(key)
    if not callable(error_fn):
        raise TypeError(f"error_fn must be callable, got {error_fn!r}")
    mean = jnp.asarray(mean)
    std = jnp.broadcast_to(jnp.asarray(std, mean.dtype), mean.shape)
    x, y = (jnp.asarray(a) for a in _check_xy(data))
    # a vector (e.g. one 0-1 loss per record) would be flattened into n x m "hypotheses" by certify
    out = jax.eval_shape(error_fn, mean, x, y)
    if getattr(out, "shape", None) != ():
        raise ValueError(
            f"error_fn(w, X, y) must return the mean 0-1 error over the records (a scalar), got "
            f"{'shape ' + str(out.shape) if hasattr(out, 'shape') else type(out).__name__}: average "
            "per-record errors inside error_fn"
        )
    check = getattr(error_fn, "check_data", None)
    if check is not None:  # e.g. pacbayes.entropy_sgld.classifier_error: labels the network can index
        check(mean, x, y)
    out = []
    for k in jax.random.split(key, -(-n_samples // chunk)):
        out.append(np.asarray(_gaussian_errors(k, mean, std, x, y, error_fn=error_fn, chunk=chunk)))
    return np.concatenate(out)[:n_samples].astype(np.float64)


def certify_gaussian(
    key: jax.Array,
    *,
    prior_mean,
    prior_var,
    posterior_mean,
    posterior_var,
    error_fn: Callable,
    data,
    delta: float,
    delta_mc: float,
    n_samples: int,
    prior_privacy: PrivacySpent | None = None,
    chunk: int = 16,
) -> PacBayesCertificate:
    """The certificate of a diagonal Gaussian posterior Q against a Gaussian prior P.

    Reads the training data (mechanism side): the bound needs R_S(Q). The result is not private.

    Args:
      key: PRNG key for the hypotheses drawn from Q.
      prior_mean, prior_var: P = N(prior_mean, diag(prior_var)); for Entropy-SGLD the released w and
        1 / (tau gamma).
      posterior_mean, posterior_var: Q = N(posterior_mean, diag(posterior_var)).
      error_fn: error_fn(w, X, y) -> mean 0-1 error of the network with flat weights w.
      data: (X, y), the m training records the prior and the bound use.
      delta, delta_mc, n_samples, prior_privacy: as in ``certify``.

    Raises:
      ValueError / TypeError: what :func:`gaussian_kl`, :func:`sample_gaussian_errors` and
        :func:`certify` refuse (e.g. an ``error_fn`` returning per-record errors), or a
        ``posterior_var`` whose square root leaves the float32 range.
    """
    kl_div = gaussian_kl(posterior_mean, posterior_var, prior_mean, prior_var)
    m = int(_check_xy(data)[0].shape[0])
    std = np.sqrt(np.asarray(posterior_var, dtype=np.float64))  # > 0 and finite (checked by gaussian_kl)
    if not np.all(std <= FLOAT32_MAX):  # the hypotheses are drawn in float32: an inf std gives NaN weights
        raise ValueError(
            f"posterior_var must have a square root within the float32 range (<= {FLOAT32_MAX:.4g}) "
            f"the hypotheses are drawn in, got a largest variance of {float(np.max(posterior_var)):.4g}"
        )
    std = std.astype(np.float32)
    errs = sample_gaussian_errors(
        key, jnp.asarray(posterior_mean, jnp.float32), std, error_fn, data, n_samples, chunk=chunk
    )
    if not np.all((errs >= 0) & (errs <= 1)):  # also NaN
        raise ValueError(
            "error_fn must return the mean 0-1 error (a number in [0, 1]), but returned NaN or values "
            "outside [0, 1] for some hypotheses: the bound holds for losses in [0, 1] and nothing is "
            "clipped; a surrogate loss with another range (e.g. the bounded cross-entropy, in "
            "[0, loss_max]) must be divided by the length of its range, or use "
            "pacbayes.entropy_sgld.classifier_error"
        )
    return certify(errs, kl_div, m, delta=delta, delta_mc=delta_mc, prior_privacy=prior_privacy)
