"""Empirical privacy auditing: statistical LOWER bounds on the epsilon of a mechanism.

An accountant gives an upper bound on epsilon; an audit gives a lower bound that holds with a stated
confidence. If an audit's lower bound exceeds the claimed epsilon, the mechanism (or its accounting)
is broken. Two auditors:

Many-run distinguishing (:func:`audit_many_runs`, :func:`epsilon_lower_bound_from_scores`).
  Run the mechanism R times on each of two neighbouring datasets (add/remove one canary record) and
  reduce each output to a scalar score (higher: "canary present"). For a threshold t, the test
  "present iff score > t" has false positive rate FPR = P[score > t | absent] and false negative
  rate FNR = P[score <= t | present]. (epsilon, delta)-DP implies, for every t (applied to the
  event {score > t} and to its complement),

      FPR + e^eps FNR >= 1 - delta   and   e^eps FPR + FNR >= 1 - delta,

  so eps >= log((1 - delta - FNR) / FPR) ("inequality 1") and eps >= log((1 - delta - FPR) / FNR)
  ("inequality 2"). The reversed test "present iff score <= t" (a score oriented the wrong way)
  gives the same two bounds with its own error rates 1 - FPR and 1 - FNR. We replace the
  unknown rates by one-sided Clopper-Pearson UPPER bounds from the counts, which keeps the bound a
  valid lower bound with the stated confidence. The threshold must not be chosen on the data it is
  evaluated on:
  - ``selection="split"`` (default): the first half of each sample picks the threshold, the rule
    (above/below) and the inequality (the largest bound computed on that half); the second, held-out half
    evaluates it. Two
    Clopper-Pearson bounds (FPR and FNR) at level alpha/2 each (Bonferroni), alpha = 1 - confidence.
  - ``selection="grid"``: a grid of thresholds fixed in advance by the caller (it must not depend on
    the scores); all scores are used, and a union bound runs over the 4K error rates involved (FPR,
    FNR and their complements at each of K thresholds), each bounded at level alpha/(4K); the
    reported bound is the maximum over thresholds, rules and inequalities.
  Either way: if the mechanism is (eps, delta)-DP, P[reported bound > eps] <= 1 - confidence.

One-run canary audit (:func:`one_run_epsilon_lower_bound`), after Steinke, Nasr and Jagielski,
  "Privacy auditing with one (1) training run", NeurIPS 2023 (arXiv:2305.08846).
  m canaries are each included independently with probability 1/2 in ONE run; the auditor reads
  the output, scores each canary, guesses "included" for the k+ highest scores and "excluded" for
  the k- lowest (abstains on the rest; k+ and k- fixed in advance), making r = k+ + k- guesses of
  which v are correct. Their theorem: for an eps-DP mechanism, the number of correct guesses is
  stochastically dominated by Binomial(r, e^eps / (1 + e^eps)). For (eps, delta)-DP their theorem
  adds to the tail P[Binomial(r, p_eps) >= v] a term 2 m delta times a factor that is at most 1 (a
  maximum over i of P[v - i <= Binomial(r, p_eps) < v] / i). We use the CONSERVATIVE form

      P[W >= v] <= P[Binomial(r, p_eps) >= v] + 2 m delta,   p_eps = e^eps / (1 + e^eps),

  and report the largest eps at which this p-value is still below alpha = 1 - confidence, i.e.
  p* = the one-sided Clopper-Pearson lower bound at level alpha - 2 m delta for v successes in r
  trials, and eps_lb = logit(p*) (0 if p* <= 1/2). It requires 2 m delta < alpha. The bound is
  valid for any mechanism satisfying (eps, delta)-DP under add/remove of one canary, but it is not
  tight for Gaussian noise (it is tight for randomised response); its largest possible value with
  r guesses is about log(r / log(1/alpha)).

All bounds here are about the neighbouring relation of the experiment that produced the scores
(add/remove one record for the auditors as used in the tests). Deliberately broken mechanisms used as
positive controls live in the tests, never in this package.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable, Literal, Sequence

import numpy as np
from scipy import stats

from .._checks import check_delta, check_positive_int, check_real
from .randomness import resolve_key

Selection = Literal["split", "grid"]


@dataclasses.dataclass(frozen=True)
class AuditResult:
    """A statistical lower bound on epsilon from an audit.

    Attributes:
      epsilon_lower: the lower bound (>= 0). If the mechanism is (eps, delta)-DP with
        eps < epsilon_lower, what was observed has probability at most 1 - confidence.
      confidence: the confidence level, e.g. 0.95.
      delta: the delta the bound is stated at.
      method: ``"many_run/split"``, ``"many_run/grid"`` or ``"one_run"``.
      details: method-specific numbers (counts, threshold, rate bounds), as (name, value) pairs.
    """

    epsilon_lower: float
    confidence: float
    delta: float
    method: str
    details: tuple[tuple[str, Any], ...] = ()

    def detail(self, name: str) -> Any:
        """The value of one entry of ``details``."""
        for k, v in self.details:
            if k == name:
                return v
        raise KeyError(name)


# ------------------------------------------------------------------------------------------------
# validation


def _check_confidence(confidence: Any) -> float:
    c = check_real("confidence", confidence)
    if not math.isfinite(c) or not 0.0 < c < 1.0:
        raise ValueError(f"confidence must lie in (0, 1), e.g. 0.95, got {confidence!r}")
    return c


def _check_scores(scores: Any, name: str, minimum: int = 1) -> np.ndarray:
    try:
        a = np.asarray(scores)
    except ValueError as e:  # ragged nested lists
        raise TypeError(f"{name} must be a 1-D array of real numbers, could not convert it: {e}") from e
    if a.dtype.kind not in "biuf":
        raise TypeError(f"{name} must be an array of real numbers, got dtype {a.dtype}")
    if a.ndim != 1:
        raise ValueError(f"{name} must be a 1-D array of scores, got shape {a.shape}")
    if a.shape[0] < minimum:
        raise ValueError(f"{name} must hold at least {minimum} scores, got {a.shape[0]}")
    a = a.astype(np.float64)
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name} must be finite: found {int(np.sum(~np.isfinite(a)))} NaN or inf values")
    return a


# ------------------------------------------------------------------------------------------------
# Clopper-Pearson


def _check_binomial(successes: Any, trials: Any, alpha: Any) -> tuple[int, int, float]:
    """(successes, trials, alpha) checked: integers 0 <= successes <= trials, trials >= 1, alpha in (0, 1)."""
    k = check_positive_int(successes, "successes", minimum=0)
    n = check_positive_int(trials, "trials")
    if k > n:
        raise ValueError(f"successes must be <= trials, got {k} successes of {n} trials")
    a = check_real("alpha", alpha)
    if not 0.0 < a < 1.0:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha!r}")
    return k, n, a


def clopper_pearson_upper(successes: int, trials: int, alpha: float) -> float:
    """One-sided Clopper-Pearson upper bound on a binomial rate: P[p > bound] <= alpha.

    ``Beta(1 - alpha; k + 1, n - k)`` quantile; 1 when k = n. Exact (conservative) coverage.

    Raises:
      TypeError: counts that are not integers (bools and floats such as 2.5 refused), or a
        non-numeric alpha.
      ValueError: successes < 0, trials < 1, successes > trials, or alpha outside (0, 1).
    """
    k, n, alpha = _check_binomial(successes, trials, alpha)
    if k == n:
        return 1.0
    return float(stats.beta.ppf(1.0 - alpha, k + 1, n - k))


def clopper_pearson_lower(successes: int, trials: int, alpha: float) -> float:
    """One-sided Clopper-Pearson lower bound on a binomial rate: P[p < bound] <= alpha.

    ``Beta(alpha; k, n - k + 1)`` quantile; 0 when k = 0.

    Raises:
      TypeError, ValueError: as :func:`clopper_pearson_upper`.
    """
    k, n, alpha = _check_binomial(successes, trials, alpha)
    if k == 0:
        return 0.0
    return float(stats.beta.ppf(alpha, k, n - k + 1))


def _eps_from_rates(fpr: float, fnr: float, delta: float) -> float:
    """max(0, log((1 - delta - fnr) / fpr)) with the conventions of a lower bound."""
    num = 1.0 - delta - fnr
    if num <= 0.0:
        return 0.0
    if fpr <= 0.0:
        return math.inf
    return max(0.0, math.log(num / fpr))


def _bound(fpr_u: float, fnr_u: float, delta: float, inequality: int) -> float:
    """Inequality 1: log((1 - delta - FNR) / FPR); inequality 2: log((1 - delta - FPR) / FNR)."""
    return _eps_from_rates(fpr_u, fnr_u, delta) if inequality == 1 else _eps_from_rates(fnr_u, fpr_u, delta)


def epsilon_lower_bound_from_counts(
    false_positives: int,
    num_negatives: int,
    false_negatives: int,
    num_positives: int,
    *,
    delta: float,
    confidence: float = 0.95,
    num_tests: int = 1,
) -> float:
    """Lower bound on epsilon from the error counts of ONE fixed test, both inequalities.

    ``max(log((1 - delta - FNR_u) / FPR_u), log((1 - delta - FPR_u) / FNR_u), 0)`` where FPR_u and
    FNR_u are one-sided Clopper-Pearson upper bounds at level ``alpha / (2 num_tests)``,
    alpha = 1 - confidence. ``num_tests`` > 1 makes the bound simultaneously valid for that many
    tests fixed in advance (union bound); the caller maximises over them.

    Args:
      false_positives: runs without the canary that the test called "present" (of num_negatives).
      false_negatives: runs with the canary that the test called "absent" (of num_positives).
      delta: in [0, 1).
      confidence: in (0, 1).
      num_tests: number of tests covered by the union bound (>= 1).

    Raises:
      TypeError: counts that are not integers (bools and floats refused).
      ValueError: negative counts, more errors than runs, delta outside [0, 1) or confidence outside
        (0, 1).
    """
    delta = check_delta(delta, allow_zero=True)
    conf = _check_confidence(confidence)
    k = check_positive_int(num_tests, "num_tests")
    nn = check_positive_int(num_negatives, "num_negatives")
    npos = check_positive_int(num_positives, "num_positives")
    fp = check_positive_int(false_positives, "false_positives", minimum=0)
    fn = check_positive_int(false_negatives, "false_negatives", minimum=0)
    if fp > nn or fn > npos:
        raise ValueError(
            f"false_positives must be <= num_negatives and false_negatives <= num_positives, got "
            f"{fp} of {nn} and {fn} of {npos}"
        )
    a = (1.0 - conf) / (2.0 * k)
    fpr_u = clopper_pearson_upper(fp, nn, a)
    fnr_u = clopper_pearson_upper(fn, npos, a)
    return max(_eps_from_rates(fpr_u, fnr_u, delta), _eps_from_rates(fnr_u, fpr_u, delta))


# ------------------------------------------------------------------------------------------------
# many-run distinguishing


def _error_counts(out: np.ndarray, inn: np.ndarray, thresholds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(false positives #{out > t}, false negatives #{in <= t}) for each threshold t."""
    so, si = np.sort(out), np.sort(inn)
    fp = so.size - np.searchsorted(so, thresholds, side="right")
    fn = np.searchsorted(si, thresholds, side="right")
    return fp, fn


#: the two tests a threshold t defines: "present iff score > t" and "present iff score <= t".
RULES = ("present_if_above", "present_if_below")


def _rule_counts(fp: Any, nn: int, fn: Any, npos: int, rule: str) -> tuple[Any, Any]:
    """(false positives, false negatives) of ``rule`` from those of "present iff score > t"."""
    return (fp, fn) if rule == "present_if_above" else (nn - fp, npos - fn)


#: the split method tries at most this many candidate thresholds (quantiles of the selection half).
MAX_CANDIDATES = 2000


def _selection_eps(
    fp: np.ndarray, nn: int, fn: np.ndarray, npos: int, delta: float, alpha: float
) -> tuple[np.ndarray, np.ndarray]:
    """Both inequalities' bounds on the selection half, with Clopper-Pearson upper rates at alpha/2.

    Choosing by the conservative bound rather than the point estimate avoids thresholds deep in a
    tail, where a count of 0 looks good by chance and then fails on the held-out half.
    """
    a = alpha / 2.0
    fpr = np.where(fp >= nn, 1.0, stats.beta.ppf(1.0 - a, fp + 1, np.maximum(nn - fp, 1)))
    fnr = np.where(fn >= npos, 1.0, stats.beta.ppf(1.0 - a, fn + 1, np.maximum(npos - fn, 1)))
    with np.errstate(divide="ignore", invalid="ignore"):
        d1 = np.log(np.maximum(1.0 - delta - fnr, 1e-300) / fpr)
        d2 = np.log(np.maximum(1.0 - delta - fpr, 1e-300) / fnr)
    return d1, d2


def epsilon_lower_bound_from_scores(
    scores_without: Any,
    scores_with: Any,
    *,
    delta: float,
    confidence: float = 0.95,
    selection: Selection = "split",
    thresholds: Sequence[float] | None = None,
) -> AuditResult:
    """Many-run distinguishing audit from the scores of runs without and with the canary.

    See the module docstring for the bound and why it is valid. Higher scores should mean "canary
    present", but both rules ("present iff score > t" and "<= t") are tried, so a reversed score
    still works (at the cost of the larger union bound in the grid).

    Args:
      scores_without: scores of independent runs on the dataset WITHOUT the canary (1-D).
      scores_with: scores of independent runs on the neighbouring dataset WITH the canary (1-D).
      delta: the delta in [0, 1) at which the lower bound on epsilon is stated.
      confidence: in (0, 1), default 0.95.
      selection: ``"split"`` (threshold chosen on the first half of each sample, evaluated on the
        second half) or ``"grid"`` (``thresholds`` fixed in advance, union bound over them).
      thresholds: the grid for ``selection="grid"`` (1-D, finite); must not be chosen from these
        scores. Not allowed with ``"split"``.

    Returns:
      An :class:`AuditResult` with details: threshold, rule ("present_if_above" or
      "present_if_below"), inequality (1 or 2), false_positives (of the rule), num_negatives,
      false_negatives, num_positives, fpr_upper,
      fnr_upper.
    """
    delta = check_delta(delta, allow_zero=True)
    conf = _check_confidence(confidence)
    out = _check_scores(scores_without, "scores_without", 2 if selection == "split" else 1)
    inn = _check_scores(scores_with, "scores_with", 2 if selection == "split" else 1)
    alpha = 1.0 - conf

    if selection == "split":
        if thresholds is not None:
            raise ValueError(
                "thresholds are only used with selection='grid'; "
                "selection='split' picks its threshold on the first half"
            )
        ho, hi = out.size // 2, inn.size // 2
        sel_out, ev_out = out[:ho], out[ho:]
        sel_in, ev_in = inn[:hi], inn[hi:]
        cand = np.unique(np.concatenate([sel_out, sel_in]))
        if cand.size > MAX_CANDIDATES:
            cand = np.unique(np.quantile(cand, np.linspace(0.0, 1.0, MAX_CANDIDATES)))
        fp, fn = _error_counts(sel_out, sel_in, cand)
        best = (-np.inf, 0, "present_if_above", 1)
        for rule in RULES:
            fpr_c, fnr_c = _rule_counts(fp, sel_out.size, fn, sel_in.size, rule)
            d1, d2 = _selection_eps(fpr_c, sel_out.size, fnr_c, sel_in.size, delta, alpha)
            for ineq, d in ((1, d1), (2, d2)):
                j = int(np.argmax(d))
                if d[j] > best[0]:
                    best = (float(d[j]), j, rule, ineq)
        _, j, rule, ineq = best
        t = float(cand[j])
        fp_e, fn_e = _error_counts(ev_out, ev_in, np.array([t]))
        fp_e, fn_e = _rule_counts(int(fp_e[0]), ev_out.size, int(fn_e[0]), ev_in.size, rule)
        a = alpha / 2.0
        fpr_u = clopper_pearson_upper(fp_e, ev_out.size, a)
        fnr_u = clopper_pearson_upper(fn_e, ev_in.size, a)
        eps = _bound(fpr_u, fnr_u, delta, ineq)
        details: tuple[tuple[str, Any], ...] = (
            ("threshold", t),
            ("rule", rule),
            ("inequality", ineq),
            ("false_positives", int(fp_e)),
            ("num_negatives", int(ev_out.size)),
            ("false_negatives", int(fn_e)),
            ("num_positives", int(ev_in.size)),
            ("fpr_upper", fpr_u),
            ("fnr_upper", fnr_u),
        )
        return AuditResult(float(eps), conf, delta, "many_run/split", details)

    if selection == "grid":
        if thresholds is None:
            raise ValueError("selection='grid' needs thresholds: a 1-D grid fixed before seeing the scores")
        grid = _check_scores(thresholds, "thresholds")
        k = grid.size
        fp, fn = _error_counts(out, inn, grid)
        # 4 rates per threshold (FPR, FNR of the rule "above" and their complements, the rates of
        # the rule "below"), each bounded at alpha / (4 k): all hold together with prob >= 1 - alpha.
        a = alpha / (4.0 * k)
        top = (0.0, float(grid[0]), "present_if_above", 1, int(fp[0]), int(fn[0]), 1.0, 1.0)
        for j in range(k):
            for rule in RULES:
                fpc, fnc = _rule_counts(int(fp[j]), out.size, int(fn[j]), inn.size, rule)
                fpr_u = clopper_pearson_upper(fpc, out.size, a)
                fnr_u = clopper_pearson_upper(fnc, inn.size, a)
                for ineq in (1, 2):
                    e = _bound(fpr_u, fnr_u, delta, ineq)
                    if e > top[0]:
                        top = (e, float(grid[j]), rule, ineq, fpc, fnc, fpr_u, fnr_u)
        eps, t, rule, ineq, fpc, fnc, fpr_u, fnr_u = top
        details = (
            ("threshold", t),
            ("rule", rule),
            ("inequality", ineq),
            ("false_positives", fpc),
            ("num_negatives", int(out.size)),
            ("false_negatives", fnc),
            ("num_positives", int(inn.size)),
            ("fpr_upper", fpr_u),
            ("fnr_upper", fnr_u),
            ("num_thresholds", k),
        )
        return AuditResult(float(eps), conf, delta, "many_run/grid", details)

    raise ValueError(f"selection must be 'split' or 'grid', got {selection!r}")


def audit_many_runs(
    run: Callable[[Any, Any], Any],
    *,
    num_runs: int,
    delta: float,
    rng_key: Any,
    confidence: float = 0.95,
    selection: Selection = "split",
    thresholds: Sequence[float] | None = None,
    static_include: bool = True,
) -> AuditResult:
    """Runs a mechanism ``num_runs`` times with and without the canary and audits the scores.

    ``run(key, include_canary)`` must return a scalar score (e.g. the released noisy gradient sum
    projected on the canary's direction) from ONE run of the mechanism with randomness ``key``, on
    the dataset with (true) or without (false) the canary. It is vmapped over independent keys and
    jitted, so R runs are one compiled call:
    - ``static_include=True`` (default): ``include_canary`` is a Python bool; one program is compiled
      per dataset.
    - ``static_include=False``: ``include_canary`` is a traced JAX bool (write the run with
      ``jnp.where``, not ``if``); one program serves both datasets (half the compile time).

    Args:
      run: the mechanism-plus-score function, written with JAX (jit and vmap compatible).
      num_runs: R >= 2 runs per dataset.
      delta: the delta in [0, 1) of the bound.
      rng_key: an int seed or JAX key for the audit's runs (the audit is a test, not a release);
        None seeds them from the operating system.
      confidence, selection, thresholds: as :func:`epsilon_lower_bound_from_scores`.
      static_include: see above.

    Returns:
      :class:`AuditResult`; details also hold ``num_runs``.
    """
    import jax
    import jax.numpy as jnp

    if not callable(run):
        raise TypeError(f"run must be a callable run(key, include_canary) -> scalar, got {type(run).__name__}")
    r = check_positive_int(num_runs, "num_runs", minimum=2)
    if not isinstance(static_include, (bool, np.bool_)):
        raise TypeError(f"static_include must be True or False, got {static_include!r}")
    key = jax.random.wrap_key_data(resolve_key(rng_key)[0])
    k_out, k_in = jax.random.split(key)
    keys_out, keys_in = jax.random.split(k_out, r), jax.random.split(k_in, r)
    if static_include:
        s_out = jax.jit(jax.vmap(lambda k: run(k, False)))(keys_out)
        s_in = jax.jit(jax.vmap(lambda k: run(k, True)))(keys_in)
    else:
        flags = jnp.concatenate([jnp.zeros((r,), bool), jnp.ones((r,), bool)])
        both = jax.jit(jax.vmap(run))(jnp.concatenate([keys_out, keys_in]), flags)
        s_out, s_in = both[:r], both[r:]
    s_out, s_in = np.asarray(s_out), np.asarray(s_in)
    if s_out.shape != (r,) or s_in.shape != (r,):
        raise ValueError(f"run must return a scalar score per run, got shape {s_out.shape[1:]} per run")
    res = epsilon_lower_bound_from_scores(
        s_out, s_in, delta=delta, confidence=confidence, selection=selection, thresholds=thresholds
    )
    return dataclasses.replace(res, details=res.details + (("num_runs", r),))


# ------------------------------------------------------------------------------------------------
# one-run canary audit (Steinke, Nasr and Jagielski 2023)


def one_run_epsilon_lower_bound(
    num_canaries: int, num_guesses: int, num_correct: int, *, delta: float, confidence: float = 0.95
) -> float:
    """The one-run audit's lower bound on epsilon from its counts (conservative in delta).

    With m canaries each included independently with probability 1/2, r guesses and v correct,
    returns the largest eps with P[Binomial(r, e^eps/(1+e^eps)) >= v] + 2 m delta <= 1 - confidence
    (module docstring), i.e. logit of the one-sided Clopper-Pearson lower bound on the guessing
    accuracy at level ``1 - confidence - 2 m delta``; 0 when that accuracy bound is <= 1/2.

    Args:
      num_canaries: m >= 1.
      num_guesses: r in [0, m] (abstentions excluded); r = 0 gives 0.
      num_correct: v in [0, r].
      delta: in [0, 1); 2 m delta must be below 1 - confidence.
      confidence: in (0, 1).

    Raises:
      ValueError: counts out of range, or 2 m delta >= 1 - confidence (no valid bound).
    """
    m = check_positive_int(num_canaries, "num_canaries")
    r = check_positive_int(num_guesses, "num_guesses", minimum=0)
    v = check_positive_int(num_correct, "num_correct", minimum=0)
    if r > m:
        raise ValueError(f"num_guesses must be <= num_canaries={m}, got {r}")
    if v > r:
        raise ValueError(f"num_correct must be <= num_guesses={r}, got {v}")
    delta = check_delta(delta, allow_zero=True)
    conf = _check_confidence(confidence)
    level = (1.0 - conf) - 2.0 * m * delta
    if level <= 0.0:
        raise ValueError(
            f"the one-run bound needs 2 * num_canaries * delta < 1 - confidence: got "
            f"2 * {m} * {delta} = {2 * m * delta} >= {1 - conf}; "
            "use fewer canaries or a smaller delta"
        )
    if r == 0 or v == 0:
        return 0.0
    p = clopper_pearson_lower(v, r, level)
    if p <= 0.5:
        return 0.0
    return float(math.log(p) - math.log1p(-p))


def audit_one_run(
    scores: Any,
    included: Any,
    *,
    num_positive_guesses: int,
    num_negative_guesses: int,
    delta: float,
    confidence: float = 0.95,
) -> AuditResult:
    """One-run canary audit (Steinke, Nasr and Jagielski 2023) from per-canary scores.

    Guesses "included" for the ``num_positive_guesses`` highest scores and "excluded" for the
    ``num_negative_guesses`` lowest, abstains on the rest, counts correct guesses against the true
    inclusion and returns :func:`one_run_epsilon_lower_bound`. Validity needs: each canary included
    independently with probability 1/2 (by the caller), the scores computed from the mechanism's
    output alone, and the numbers of guesses fixed before seeing the scores. Ties are broken by
    canary index (a fixed rule).

    Args:
      scores: (m,) one score per canary from the single run (higher: more likely included).
      included: (m,) bool, the true inclusion of each canary.
      num_positive_guesses, num_negative_guesses: k+, k- >= 0 with k+ + k- <= m.
      delta, confidence: as :func:`one_run_epsilon_lower_bound`.

    Returns:
      :class:`AuditResult` (method ``"one_run"``) with details num_canaries, num_guesses,
      num_correct.
    """
    s = _check_scores(scores, "scores")
    inc = np.asarray(included)
    if inc.dtype != bool or inc.shape != s.shape:
        raise ValueError(
            f"included must be a bool array with the shape of scores {s.shape}, "
            f"got dtype {inc.dtype} and shape {inc.shape}"
        )
    m = s.size
    kp = check_positive_int(num_positive_guesses, "num_positive_guesses", minimum=0)
    kn = check_positive_int(num_negative_guesses, "num_negative_guesses", minimum=0)
    if kp + kn > m:
        raise ValueError(f"num_positive_guesses + num_negative_guesses must be <= {m} canaries, got {kp + kn}")
    order = np.argsort(s, kind="stable")
    low, high = order[:kn], order[m - kp :] if kp else order[:0]
    correct = int(np.sum(inc[high])) + int(np.sum(~inc[low]))
    eps = one_run_epsilon_lower_bound(m, kp + kn, correct, delta=delta, confidence=confidence)
    details = (("num_canaries", m), ("num_guesses", kp + kn), ("num_correct", correct))
    return AuditResult(eps, _check_confidence(confidence), float(delta), "one_run", details)
