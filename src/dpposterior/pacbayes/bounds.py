"""PAC-Bayes and DP tail bounds on the 0-1 risk, and the privacy of a local-entropy Gibbs sample.

References: Dziugaite & Roy, "Data-dependent PAC-Bayes priors via differential privacy" (2018); Dziugaite,
"Revisiting generalization for deep learning: PAC-Bayes, flat minima, and generative models" (PhD thesis,
2019), Theorems 3.3.2, 4.5.1 and 4.5.2. Every bound holds with probability at least ``1 - delta`` over
the draw of the m training records (and, for the Monte Carlo correction, of the n hypotheses drawn).
None of them is clamped: a bound above 1 is returned as it is (it is vacuous), never cut to 1.
"""

from __future__ import annotations

import math

import numpy as np

from .._checks import check_delta
from .._checks import check_real
from .kl import kl_inv_upper

__all__ = [
    "dp_prior_kl_rhs",
    "dp_prior_pacbayes_bound",
    "gaussian_kl",
    "h_bound",
    "c_bound",
    "local_entropy_gibbs_epsilon",
    "mc_kl_rhs",
    "mc_risk_upper",
    "oneto_epsilon_bar",
    "seeger_kl_rhs",
    "seeger_bound",
]


#: the largest m accepted: integers up to 2**53 are exact in float64, where the bounds are computed.
MAX_M = 2**53


def _check_m(m) -> int:
    if isinstance(m, bool) or not isinstance(m, (int, np.integer)):
        raise TypeError(f"m (the number of training records) must be an integer, got {m!r}")
    if not 1 <= m <= MAX_M:
        raise ValueError(f"m (the number of training records) must lie in [1, 2**53], got {m!r}")
    return int(m)


def _finite_rhs(value: float, what: str) -> float:
    if not math.isfinite(value):
        raise ValueError(
            f"{what} overflows the float range (got {value}); the arguments are far outside any meaningful bound"
        )
    return value


def _check_nonneg(name: str, value) -> float:
    v = check_real(name, value)
    if not math.isfinite(v) or v < 0:
        raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
    return v


def _check_pos(name: str, value) -> float:
    v = check_real(name, value)
    if not math.isfinite(v) or v <= 0:
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    return v


def _replace_one_epsilon(epsilon, neighbouring: str) -> float:
    """epsilon as the replace-one guarantee the DP bounds are stated for: as is, or doubled for add/remove-one.

    A replacement is a removal and an addition, so an add/remove-one epsilon-DP mechanism is 2 epsilon-DP for
    replace-one neighbours (group privacy of size 2); the converse does not hold.
    """
    epsilon = _check_nonneg("epsilon", epsilon)
    if neighbouring not in ("replace_one", "add_remove"):
        raise ValueError(
            f"neighbouring must be 'replace_one' or 'add_remove' (the relation epsilon is stated for), got "
            f"{neighbouring!r}"
        )
    return 2.0 * epsilon if neighbouring == "add_remove" else epsilon


def _check_risk(name: str, value) -> float:
    v = check_real(name, value)
    if not (0.0 <= v <= 1.0):  # also rejects NaN
        raise ValueError(f"{name} (a 0-1 risk) must lie in [0, 1], got {value!r}")
    return v


# --------------------------------------------------------------------------------------------------
# Maurer / Seeger (data-independent prior)


def seeger_kl_rhs(kl_divergence: float, m: int, delta: float) -> float:
    """The right-hand side of the Maurer/Seeger bound: (KL(Q||P) + ln(2 sqrt(m) / delta)) / m.

    With probability >= 1 - delta over S ~ D^m, for all Q at once,
    kl(R_S(Q) || R_D(Q)) <= this, for a prior P chosen before seeing S (Maurer 2004).
    """
    kl_divergence = _check_nonneg("kl_divergence", kl_divergence)
    m = _check_m(m)
    delta = check_delta(delta)
    return (kl_divergence + math.log(2.0 * math.sqrt(m) / delta)) / m


def seeger_bound(empirical_risk: float, kl_divergence: float, m: int, delta: float) -> float:
    """Upper bound on the true 0-1 risk R_D(Q) from the Maurer/Seeger PAC-Bayes bound.

    Args:
      empirical_risk: R_S(Q), the Q-average 0-1 error on the m training records, in [0, 1].
      kl_divergence: KL(Q || P) >= 0 (nats), P fixed before seeing the data.
      m: the number of training records (>= 1).
      delta: the confidence parameter in (0, 1).

    Returns:
      kl^{-1}_upper(R_S(Q), seeger_kl_rhs(...)), in [0, 1].
    """
    q = _check_risk("empirical_risk", empirical_risk)
    return float(kl_inv_upper(q, seeger_kl_rhs(kl_divergence, m, delta)))


# --------------------------------------------------------------------------------------------------
# DP data-dependent prior (Dziugaite's thesis, Theorem 3.3.2)


def dp_prior_kl_rhs(
    kl_divergence: float, m: int, delta: float, epsilon: float, *, neighbouring: str = "replace_one"
) -> float:
    """[KL(Q||P(S)) + ln(2 sqrt(m)) + 2 max{ln(3/delta), m epsilon^2}] / m.

    The right-hand side of the bound on kl(R_S(Q) || R_D(Q)) when the prior P(S) is chosen by an
    epsilon-differentially private mechanism from the same data S (pure epsilon-DP; epsilon = 0 is
    allowed and means a prior that ignores S, at a looser constant than ``seeger_kl_rhs``).

    The theorem (Dziugaite & Roy, thesis Theorem 3.3.2) takes epsilon for replace-one neighbours (data
    sets of m records differing in one). ``neighbouring="add_remove"``: ``epsilon`` is an add/remove-one
    guarantee and 2 epsilon is used (group privacy), as :func:`~dpposterior.pacbayes.certify` does.
    """
    kl_divergence = _check_nonneg("kl_divergence", kl_divergence)
    m = _check_m(m)
    delta = check_delta(delta)
    epsilon = _replace_one_epsilon(epsilon, neighbouring)
    privacy = 2.0 * max(math.log(3.0 / delta), m * epsilon * epsilon)  # inf, not OverflowError, if huge
    return _finite_rhs(
        (kl_divergence + math.log(2.0 * math.sqrt(m)) + privacy) / m,
        "the DP-prior kl bound (KL + ln(2 sqrt m) + 2 max{ln(3/delta), m epsilon^2}) / m",
    )


def dp_prior_pacbayes_bound(
    empirical_risk: float,
    kl_divergence: float,
    m: int,
    delta: float,
    epsilon: float,
    *,
    neighbouring: str = "replace_one",
) -> float:
    """Upper bound on R_D(Q) when the prior P(S) is epsilon-DP in S (Dziugaite's thesis, Theorem 3.3.2, inverted).

    With probability >= 1 - delta over S ~ D^m, for all Q,
    kl(R_S(Q) || R_D(Q)) <= dp_prior_kl_rhs(KL(Q||P(S)), m, delta, epsilon); this returns the
    largest R_D(Q) allowed by it. ``epsilon`` is for replace-one neighbours; an add/remove-one epsilon
    is doubled with ``neighbouring="add_remove"`` (see :func:`dp_prior_kl_rhs`).
    """
    q = _check_risk("empirical_risk", empirical_risk)
    return float(kl_inv_upper(q, dp_prior_kl_rhs(kl_divergence, m, delta, epsilon, neighbouring=neighbouring)))


# --------------------------------------------------------------------------------------------------
# Privacy of one exact sample from the local-entropy Gibbs distribution (thesis Theorem 4.5.2)


def local_entropy_gibbs_epsilon(beta: float, loss_range: float, tau: float, m: int) -> float:
    """epsilon = 2 beta L_max tau / m for ONE EXACT sample from P exp(beta F_{gamma,tau}(.; S)).

    The local entropy F_{gamma,tau}(w; S) has sensitivity L_max tau / m when one of the m records is
    replaced (the loss takes values in an interval of length L_max = ``loss_range``); the exponential
    mechanism at inverse temperature beta then is 2 beta L_max tau / m - DP (McSherry & Talwar 2007).
    Example of the text: tau = sqrt(m), L_max = 4, beta = 1, m = 60,000 gives 0.0327.

    Caveat: Entropy-SGLD only approximates a sample from this distribution (SGLD with biased inner
    gradient estimates, run for finitely many steps); the guarantee holds for the exact sample, and
    for the SGLD output only up to a convergence term that is not computed here. Bounds that use it
    are therefore optimistic (the text's own reading).
    """
    beta = _check_pos("beta", beta)
    loss_range = _check_pos("loss_range", loss_range)
    tau = _check_pos("tau", tau)
    m = _check_m(m)
    return _finite_rhs(2.0 * beta * loss_range * tau / m, "epsilon = 2 beta loss_range tau / m")


# --------------------------------------------------------------------------------------------------
# Monte Carlo confidence correction (Langford & Caruana 2001; as used by Dziugaite & Roy)


def mc_kl_rhs(n_samples: int, delta_mc: float) -> float:
    """ln(2 / delta') / n: the kl radius around a Monte Carlo estimate from n hypotheses h ~ Q."""
    if isinstance(n_samples, bool) or not isinstance(n_samples, (int, np.integer)):
        raise TypeError(f"n_samples must be an integer >= 1, got {n_samples!r}")
    if n_samples < 1:
        raise ValueError(f"n_samples must be an integer >= 1, got {n_samples!r}")
    delta_mc = check_delta(delta_mc, name="delta_mc")
    return math.log(2.0 / delta_mc) / int(n_samples)


def mc_risk_upper(estimate: float, n_samples: int, delta_mc: float) -> float:
    """Upper bound on R_S(Q) from its estimate by n i.i.d. hypotheses h_i ~ Q.

    ``estimate`` is (1/n) sum_i R_S(h_i) (each R_S(h_i) in [0, 1]); with probability >= 1 - delta'
    over the draw of the h_i, R_S(Q) <= kl^{-1}_upper(estimate, ln(2/delta') / n). Use it in place of
    R_S(Q) in a PAC-Bayes bound, whose confidence then becomes 1 - delta - delta'.
    """
    q = _check_risk("estimate", estimate)
    return float(kl_inv_upper(q, mc_kl_rhs(n_samples, delta_mc)))


# --------------------------------------------------------------------------------------------------
# Tail bounds for a classifier learned with epsilon-DP (Oneto, Ridella & Anguita 2017, Lem. 2 and 3,
# as stated in the thesis text, Theorem 4.5.1)


def oneto_epsilon_bar(epsilon: float, m: int, delta: float, *, neighbouring: str = "replace_one") -> float:
    """epsilon_bar = max{epsilon, sqrt(ln(3/delta) / m)}.

    ``epsilon`` for replace-one neighbours (Oneto et al. 2017); ``neighbouring="add_remove"`` doubles it.
    """
    epsilon = _replace_one_epsilon(epsilon, neighbouring)
    m = _check_m(m)
    delta = check_delta(delta)
    return max(epsilon, math.sqrt(math.log(3.0 / delta) / m))


def h_bound(empirical_risk: float, epsilon: float, m: int, delta: float, *, neighbouring: str = "replace_one") -> float:
    """The Hoeffding-style ("H") bound: R_D(A(S)) <= R_S(A(S)) + epsilon_bar + m^{-1/2}.

    For ONE classifier A(S) output by an epsilon-DP algorithm A (not a distribution over
    classifiers); with probability >= 1 - delta over S ~ D^m (thesis Theorem 4.5.1, from Oneto et
    al. 2017, Lem. 2). The text states the two-sided form |R_D - R_S| < epsilon_bar + m^{-1/2}; this
    returns its upper side, unclamped (it can exceed 1). ``epsilon`` for replace-one neighbours;
    ``neighbouring="add_remove"`` doubles it (group privacy).
    """
    q = _check_risk("empirical_risk", empirical_risk)
    return q + oneto_epsilon_bar(epsilon, m, delta, neighbouring=neighbouring) + 1.0 / math.sqrt(_check_m(m))


def c_bound(empirical_risk: float, epsilon: float, m: int, delta: float, *, neighbouring: str = "replace_one") -> float:
    """The relative-deviation ("C", Chernoff-style) bound for an epsilon-DP classifier.

    R_D(A(S)) <= R_S(A(S)) + sqrt(6 R_S(A(S))) (epsilon_bar + m^{-1/2}) + 6 (epsilon_bar^2 + 1/m),
    with probability >= 1 - delta over S ~ D^m (thesis Theorem 4.5.1, from Oneto et al. 2017,
    Lem. 3). Assumption: the extracted text of the thesis is garbled at this formula; we read the
    square root as covering 6 R_S only (the reading whose deviation term scales as
    sqrt(R_S / m) + 1/m, as a Bernstein/Chernoff bound does), and "the same holds for the upper bound"
    as: this expression bounds the deviation R_D - R_S with the same probability. Unclamped.
    ``epsilon`` for replace-one neighbours; ``neighbouring="add_remove"`` doubles it (group privacy).
    """
    q = _check_risk("empirical_risk", empirical_risk)
    m = _check_m(m)
    eb = oneto_epsilon_bar(epsilon, m, delta, neighbouring=neighbouring)
    return q + math.sqrt(6.0 * q) * (eb + 1.0 / math.sqrt(m)) + 6.0 * (eb**2 + 1.0 / m)


# --------------------------------------------------------------------------------------------------
# KL between Gaussians (diagonal / isotropic), the usual Q and P of the certificate


def gaussian_kl(mean_q, var_q, mean_p, var_p) -> float:
    """KL(N(mean_q, diag(var_q)) || N(mean_p, diag(var_p))) in nats.

    Args:
      mean_q, mean_p: arrays of the same length (the flattened network weights).
      var_q, var_p: positive variances, scalars (isotropic) or arrays broadcastable to the means.

    Returns:
      0.5 * sum(var_q/var_p + (mean_p - mean_q)^2/var_p - 1 - ln(var_q/var_p)), accurate (log1p
      form) when the variance ratio is near 1.

    Raises:
      ValueError / TypeError: means of different sizes, empty or not finite; variances not > 0 and
        finite or of the wrong size; non-numeric inputs; a KL that overflows the float range.
    """

    def real(name: str, value) -> np.ndarray:
        a = np.asarray(value)
        if a.dtype.kind not in "iuf":
            raise TypeError(f"{name} must hold real numbers (not bools or strings), got dtype {a.dtype}")
        return a.astype(np.float64).ravel()

    mq, mp = real("mean_q", mean_q), real("mean_p", mean_p)
    if mq.shape != mp.shape:
        raise ValueError(f"mean_q and mean_p must have the same size, got {mq.size} and {mp.size}")
    if mq.size == 0:
        raise ValueError("mean_q and mean_p must hold at least one weight, got empty arrays")
    if not (np.all(np.isfinite(mq)) and np.all(np.isfinite(mp))):
        raise ValueError("mean_q and mean_p must be finite")
    variances = []
    for name, var in (("var_q", var_q), ("var_p", var_p)):
        v = real(name, var)
        if v.size not in (1, mq.size):
            raise ValueError(f"{name} must be a scalar or have one entry per weight ({mq.size}), got {v.size}")
        v = np.broadcast_to(v, mq.shape)
        if not np.all(np.isfinite(v) & (v > 0)):
            raise ValueError(f"{name} must be finite and > 0")
        variances.append(v)
    vq, vp = variances
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        out = _gaussian_kl(mq, vq, mp, vp)
    if not math.isfinite(out):
        raise ValueError(
            "KL(Q || P) overflows the float range: the variances or means differ by too many orders "
            "of magnitude for a meaningful bound"
        )
    return out


def _gaussian_kl(mq: np.ndarray, vq: np.ndarray, mp: np.ndarray, vp: np.ndarray) -> float:
    r = vq / vp
    # r - 1 - ln r = -(log1p(r - 1) - (r - 1)), accurate for r near 1
    t = r - 1.0
    small = np.abs(t) < 1e-3
    ts = np.where(small, t, 0.0)
    series = ts * ts * (1 / 2 - ts * (1 / 3 - ts * (1 / 4 - ts / 5)))
    direct = t - (np.log(vq) - np.log(vp))  # ln r from the logs: r itself may underflow to 0
    trace_log = np.where(small, series, direct)
    return float(0.5 * np.sum(trace_log + (mp - mq) ** 2 / vp))
