"""The clip chosen privately (``clip="auto"``) and the private clip check of dpvi and dpvim.

Why. A clip C below the typical per-record gradient norm moves DP-SGD's fixed point, and the
noise-aware posterior is then confidently wrong; no post-processing of the trace can see it. A clip
far above the norms is safe but adds noise in proportion to C. So the default picks C from the data,
privately, inside the user's budget: about the 99th percentile of the per-record gradient norms, the
exact vector DP-SGD clips (dpvi: the beta-scaled per-record ELBO gradient with the run's ``num_mc``
draws; DPVIm: the per-record loc gradient), where the run settles. The norms are taken at several
public Monte Carlo draws and the counts are means over them (:mod:`dpposterior.vi.record_norms`), so
the quantile is that of a typical step, not of one arbitrary draw. Targeting a quantile of the norms
is the idea of Andrew, Thakkar, McMahan & Ramaswamy, "Differentially private learning with adaptive
clipping" (2021); here it is two private searches around a pilot.

Where. The norms that matter are those near the fixed point; at the data-independent start phi_0 (the
prior median) a model whose prior sits far from the data has norms many times larger (a normal model
with its mean 3 prior sds out: about 30x). So dpvi runs a PILOT, the first :data:`PILOT_FRACTION` of
the steps (the noise-aware posterior's default burn-in), at a clip equal to a private median norm at
phi_0 (:func:`search_median`: stage 1 below alone), and chooses the clip of the other steps at the
pilot's last iterate (:func:`search_clip`: both stages). The pilot's steps carry their own clip, recorded
as ``pilot_clip`` and ``pilot_steps`` in the release's privacy details; the noise multiplier is the
same over all steps, so the accounting is that of one T-step run. DPVIm, a baseline, has no pilot: both
searches look at phi_0. A checkpointed run needs a given clip (a resumed pilot would be paid again).

The search: a noisy binary search over a FIXED PUBLIC geometric grid of
candidate clips, the edges ``2^(k/4)`` for integer k (:data:`GRID_LOWEST` <= k <= :data:`GRID_HIGHEST`:
from 6e-8 to 9e11). Each query releases one count, the number of records whose norm is at least an
edge (its mean over the public draws), plus Gaussian noise; adding or removing one record changes a
count by at most 1 (L2 sensitivity 1, add/remove-one adjacency). Gradients that are not finite (DP-SGD
drops them) are counted in no query.

1. Stage 1 (:data:`MEDIAN_QUERIES` = 8 queries over the 256 edges): the smallest edge whose noisy
   count is at most N / 2, about the median norm m. Far from the median the answer of a query is
   clear even under strong noise.
2. Stage 2 (:data:`WINDOW_QUERIES` = 4 queries): in the window of the 16 edges above m (up to 16 m),
   the smallest edge whose noisy count is at most (1 - :data:`TARGET_QUANTILE`) N, then
   :data:`MARGIN_STEPS` edge up (a factor 2^(1/4) = 1.19). That is the clip.

N is the public ``dataset_size`` (treated as public, as in the papers), not a noisy total. Why two
stages and a window: with one search over the whole grid, a count near 0 compared with a target of 1%
of N under noise of tens of records goes the wrong way often, and every wrong step upwards is final:
in simulation at N = 5000 and epsilon = 0.3, about one search in ten ended at a clip 1e5 times too
large. The window bounds that overshoot at 16 times the private median, at the price that a tail of
norms beyond it is clipped; the search then warns (:class:`ClipBindsWarning`) when its last query says
so. Where N epsilon is small the 1% target is beyond what the noise resolves, and the search errs on
the side of a larger clip (more noise, not bias).

The ends of the grid: a median norm below the lowest edge (6e-8) gives a clip of 2^(-94/4) or so (no
record is clipped more than the target allows); a median norm above the highest edge (9e11) is
refused with a ValueError (such gradients are not usable with float32 DP-SGD).

Budget (:data:`AUTO_CLIP_SHARE`): the :data:`NUM_NORMALS` = 20 queries' noise (two median searches and
one window) is set so that together they are one Gaussian
mechanism of noise multiplier ``sigma_h`` (Gaussian mechanisms compose exactly: noise multipliers s_i
give ``(sum_i s_i^-2)^-1/2``; Dong, Roth & Su, "Gaussian differential privacy", 2022), where sigma_h
is the noise with which one Gaussian mechanism ALONE would be (AUTO_CLIP_SHARE x epsilon, delta)-DP
(Balle & Wang, "Improving the Gaussian mechanism for differential privacy", 2018). The median
queries get twice the noise of the window's (:data:`MEDIAN_NOISE_RATIO`). Where that noise exceeds
N / 4 the median cannot be found, and ``clip="auto"`` is refused before any release
(:func:`check_resolvable`). DP-SGD's noise
multiplier is then calibrated so that the COMPOSITION of that Gaussian mechanism and the T-step
Poisson-subsampled Gaussian is (epsilon, delta)-DP (:func:`dpposterior.privacy.calibrate_noise_multiplier`
with ``extra_gaussian``, by the run's accountant). Because Gaussian privacy losses add in quadrature,
the pre-pass raises DP-SGD's noise multiplier by about 1/sqrt(1 - 0.3^2) - 1 = 5%, not by 30%.

The clip check (:func:`check_clip_share`, ``check_clip=True``): one more count, the number of records
whose norm at the run's FINAL iterate is at least C, with Gaussian noise of the multiplier with which it
alone would be (:data:`CLIP_CHECK_SHARE` x epsilon, delta)-DP, composed the same way. A noisy share above
:data:`~dpposterior.privacy.clip_binds.CLIP_WARN_SHARE` (by more than two standard errors) warns with
:class:`ClipBindsWarning`.

Randomness: the noise is :mod:`dpposterior.privacy.noise`'s float64 Box-Muller normal (no gap in its
support), added to the exact count in float64 and rounded once to float32; its words come from
``fold_in(rng_key, AUTO_CLIP_KEY_INDEX)`` (the check: :data:`CLIP_CHECK_KEY_INDEX`; the pilot's DP-SGD
key: :data:`PILOT_KEY_INDEX`), indices no DP-SGD step reaches, from a fresh OS seed when ``rng_key`` is None, or from the OS CSPRNG when ``secure=True``.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from typing import Any

import jax
import numpy as np

from .._checks import check_float32_positive, check_positive
from ..privacy.clip_binds import ClipBindsWarning, binds, binds_message
from ..privacy.dpsgd_accounting import Accountant, dpsgd_epsilon
from ..privacy.gaussian import analytic_gaussian_sigma
from ..privacy.noise import normal_words, normals_from_words_np, with_noise_tail
from ..privacy.secure import resolve_noise_source, secure_normal
from ..privacy.spent import PrivacySpent
from ..releases.window import burn_in_start
from .record_norms import count_at_least

#: the grid: candidate clips 2^(k / GRID_STEPS_PER_OCTAVE) for integer k in [GRID_LOWEST, GRID_HIGHEST].
GRID_STEPS_PER_OCTAVE = 4
GRID_LOWEST = -96
GRID_HIGHEST = 159
#: stage 1: the queries of the binary search for the median over the 256 edges of the grid.
MEDIAN_QUERIES = 8
#: stage 2: the window above the private median (16 edges: up to 16 times it) and its queries.
WINDOW_STEPS = 16
WINDOW_QUERIES = 4
#: the clip is this many edges above the edge the search found (one: a factor 2^(1/4) = 1.19).
MARGIN_STEPS = 1
#: the search's target: at most (1 - TARGET_QUANTILE) N records at or above the found edge.
TARGET_QUANTILE = 0.99
#: the noise of a stage-1 query over that of a stage-2 query.
MEDIAN_NOISE_RATIO = 2.0
#: the budget rule of the search: its queries together are one Gaussian mechanism whose noise multiplier
#: makes it alone (AUTO_CLIP_SHARE x epsilon, delta)-DP; DP-SGD gets what the composition leaves.
AUTO_CLIP_SHARE = 0.3
#: the same rule for the clip check at the end of a run (``check_clip=True``).
CLIP_CHECK_SHARE = 0.1
#: the indices folded into the user's key for the search's and the check's noise: steps no run reaches
#: (fit's clip check uses 2**32 - 1).
AUTO_CLIP_KEY_INDEX = 2**32 - 2
CLIP_CHECK_KEY_INDEX = 2**32 - 3
#: the pilot: the first PILOT_FRACTION of the steps (the noise-aware posterior's default burn-in), run at a
#: clip near the private median norm at phi_0; its noise comes from the key folded with PILOT_KEY_INDEX.
PILOT_FRACTION = 0.2
PILOT_KEY_INDEX = 2**32 - 4
#: the queries of the search at the pilot's end; with the median search at phi_0, the noise draws of all.
NUM_QUERIES = MEDIAN_QUERIES + WINDOW_QUERIES
NUM_NORMALS = MEDIAN_QUERIES + NUM_QUERIES


def check_clip_arg(clip: Any) -> bool:
    """Whether ``clip`` asks for the private choice ("auto"); a number must be finite, > 0 and float32."""
    if isinstance(clip, str):
        if clip != "auto":
            raise ValueError(f"clip must be 'auto' (the default: chosen privately) or a number > 0, got {clip!r}")
        return True
    check_float32_positive(check_positive(clip, "clip"), "clip")
    return False


def grid_edge(k: int) -> float:
    """The grid's edge ``2^(k / 4)``, rounded to float32 (DP-SGD clips in float32, so the edge the
    search counts at is exactly the clip the run uses)."""
    return float(np.float32(2.0 ** (k / GRID_STEPS_PER_OCTAVE)))


def auto_clip_noise_multiplier(epsilon: float, delta: float) -> float:
    """sigma_h: the noise multiplier of the search as one Gaussian mechanism (module docstring)."""
    return analytic_gaussian_sigma(AUTO_CLIP_SHARE * epsilon, delta)


def clip_check_noise_multiplier(epsilon: float, delta: float) -> float:
    """The noise multiplier of the clip check's one count (module docstring)."""
    return analytic_gaussian_sigma(CLIP_CHECK_SHARE * epsilon, delta)


def query_noise(noise_multiplier: float) -> tuple[float, float]:
    """(noise sd of a median query, of a window query) for the searches' total ``noise_multiplier``: the
    two median searches and the window, ``2 MEDIAN_QUERIES / s1^2 + WINDOW_QUERIES / s2^2 = 1 / sigma_h^2``
    with ``s1 = MEDIAN_NOISE_RATIO s2``."""
    s2 = noise_multiplier * math.sqrt(2 * MEDIAN_QUERIES / MEDIAN_NOISE_RATIO**2 + WINDOW_QUERIES)
    return MEDIAN_NOISE_RATIO * s2, s2


#: the median search is refused when its queries' noise sd exceeds N / MIN_RECORDS_PER_NOISE_SD: a query at
#: an edge far from the median (true count 0 or N) must answer the right way at two noise sds
MIN_RECORDS_PER_NOISE_SD = 4.0


def check_resolvable(num_records: int, noise_multiplier: float) -> None:
    """Refuses ``clip="auto"`` (before anything is released) where the search's noise is too large for N.

    With noise sd s1 per median query, a query at an edge where no record (or every record) lies answers
    against N / 2 correctly only while s1 is well below N / 2; above N / 4 a search wanders to clips many
    orders of magnitude off (a table of 47 records at epsilon 1 got C = 6.5e11). A function of the public
    N and epsilon, delta alone.

    Raises:
      ValueError: naming N, the noise and what to do.
    """
    s1, _ = query_noise(noise_multiplier)
    if s1 > num_records / MIN_RECORDS_PER_NOISE_SD:
        need = math.ceil(MIN_RECORDS_PER_NOISE_SD * s1)
        raise ValueError(
            f"clip='auto' cannot choose a clip privately for N = {num_records} records at this epsilon and delta: "
            f"the private search's counts carry noise of sd {s1:.0f} records, more than N / "
            f"{MIN_RECORDS_PER_NOISE_SD:g}, so it cannot find even the median gradient norm (it needs N >= {need} "
            "here, or a larger epsilon). Pass clip= by hand (a bound on the per-record gradient norm that you "
            "know without looking at the data); nothing was released"
        )


def pilot_steps(num_steps: int) -> int:
    """The pilot's steps of a ``num_steps`` run: floor(PILOT_FRACTION T), at least 1 and leaving at least 1.

    The floor is the noise-aware posterior's T* = floor(burn_in T) at its default burn-in
    (:func:`dpposterior.releases.window.burn_in_start`), so the steps that posterior models never hold a
    pilot step, whose clip and learning rate are not the run's (it refuses a burn-in that would keep one).
    """
    if num_steps < 2:
        raise ValueError(f"clip='auto' needs num_steps >= 2 (a pilot and the run), got {num_steps}")
    return min(max(1, burn_in_start(num_steps, PILOT_FRACTION)), num_steps - 1)


def pilot_key(rng_key: Any, secure: bool) -> Any:
    """The pilot's DP-SGD key: None (the OS, or the OS CSPRNG with ``secure``) when ``rng_key`` is None or
    ``secure``; else the user's key folded with :data:`PILOT_KEY_INDEX` (no key of the run is shared)."""
    if rng_key is None or secure:
        return None
    raw, _ = resolve_noise_source(rng_key, False)
    return jax.random.fold_in(jax.numpy.asarray(raw, jax.numpy.uint32), PILOT_KEY_INDEX)


def whole_run_record(run_privacy: PrivacySpent, num_steps: int, delta: float, accountant: Accountant) -> PrivacySpent:
    """The record of the pilot and the run together: the same noise multiplier and sampling rate over all
    ``num_steps`` steps (the clip sets the noise's scale, not the privacy), epsilon recomputed for them."""
    sigma = float(run_privacy.noise_multiplier)  # type: ignore[arg-type]
    eps = dpsgd_epsilon(sigma, delta, run_privacy.sampling_rate, num_steps, accountant)
    return dataclasses.replace(run_privacy, num_steps=num_steps, epsilon=eps, delta=delta)


def combined_noise_multiplier(*noise_multipliers: float | None) -> float | None:
    """The one Gaussian mechanism that the given ones (of sensitivity 1) compose into:
    ``(sum s_i^-2)^-1/2`` (None when none is given)."""
    given = [float(s) for s in noise_multipliers if s is not None]
    if not given:
        return None
    return 1.0 / math.sqrt(math.fsum(1.0 / (s * s) for s in given))


@dataclasses.dataclass(frozen=True)
class AutoClip:
    """What the private search released and chose (all of it a post-processing of its noisy counts).

    Attributes:
      clip: the chosen clip C.
      median_edge: the stage-1 edge, about the median norm.
      queries: one ``(edge, noisy count, noise sd)`` per query, in order.
      noise_multiplier: sigma_h, the search as one Gaussian mechanism.
      tail_beyond_window: True when the last query found clearly more than the target share above the
        window's top edge (the clip then binds for a tail of the records: :class:`ClipBindsWarning`).
      pilot_clip: the pilot's clip (the median search at phi_0).
    """

    clip: float
    median_edge: float
    queries: tuple[tuple[float, float, float], ...]
    noise_multiplier: float
    tail_beyond_window: bool
    pilot_clip: float


def _noisy_count(norms: np.ndarray, edge: float, sd: float, z: float) -> float:
    """The count of records at or above ``edge`` (:func:`~dpposterior.vi.record_norms.count_at_least`: the
    mean over the public draws) plus ``sd * z``, in float64, rounded once to float32."""
    return float(np.float32(count_at_least(norms, edge) + sd * z))


@dataclasses.dataclass(frozen=True)
class StartMedian:
    """The median search at phi_0: its edge is the pilot's clip; ``queries`` as in :class:`AutoClip`."""

    clip: float
    queries: tuple[tuple[float, float, float], ...]


def _median_search(norms: np.ndarray, num_records: int, sd: float, z: np.ndarray) -> tuple[int, list]:
    """Stage 1: the smallest grid index whose noisy count of norms at or above its edge is at most N / 2."""
    queries = []
    lo, hi = GRID_LOWEST, GRID_HIGHEST
    for i in range(MEDIAN_QUERIES):  # 256 candidates: exactly 8 halvings
        mid = (lo + hi) // 2
        noisy = _noisy_count(norms, grid_edge(mid), sd, z[i])
        queries.append((grid_edge(mid), noisy, sd))
        if noisy <= 0.5 * num_records:
            hi = mid
        else:
            lo = mid + 1
    if lo != hi:  # pragma: no cover - the grid's size is a power of two
        raise AssertionError("the median search did not narrow to one edge")
    if lo == GRID_HIGHEST:
        raise ValueError(
            "clip='auto': the private search found the median per-record gradient norm above the grid's "
            f"highest edge {grid_edge(GRID_HIGHEST):.3g}: gradients that large are not usable with float32 "
            "DP-SGD. Check the model and the scale of the data (rescale it), or pass clip= by hand (the "
            "budget of this search is spent; nothing else was released)"
        )
    return lo, queries


def _normals(normals: Any) -> np.ndarray:
    z = np.asarray(normals, np.float64).reshape(-1)
    if z.shape != (NUM_NORMALS,):
        raise ValueError(f"normals must hold {NUM_NORMALS} standard normals, got shape {z.shape}")
    return z


def search_median(norms: Any, num_records: int, noise_multiplier: float, normals: Any) -> StartMedian:
    """Stage 1 alone, at phi_0 (:data:`MEDIAN_QUERIES` noisy counts, ``normals[:MEDIAN_QUERIES]``): the
    pilot's clip, about the median norm there.

    Privacy: counts of records with a norm at or above an edge, each of L2 sensitivity 1 under
    add/remove-one adjacency, with Gaussian noise of sd ``query_noise(noise_multiplier)[0]``; with
    :func:`search_clip` one Gaussian mechanism of noise multiplier ``noise_multiplier``.

    Raises:
      ValueError: the median norm lies above the grid's highest edge (2^(159/4), about 9e11).
    """
    z = _normals(normals)
    s1, _ = query_noise(noise_multiplier)
    k, queries = _median_search(np.asarray(norms), num_records, s1, z[:MEDIAN_QUERIES])
    return StartMedian(clip=grid_edge(k), queries=tuple(queries))


def search_clip(norms: Any, num_records: int, noise_multiplier: float, normals: Any, start: StartMedian) -> AutoClip:
    """The two-stage noisy binary search of the module docstring, at the pilot's last iterate
    (``normals[MEDIAN_QUERIES:]``).

    Privacy: :data:`NUM_QUERIES` adaptively chosen counts of records with a norm at or above an edge,
    each of L2 sensitivity 1 under add/remove-one adjacency, with Gaussian noise of sd
    :func:`query_noise` (``noise_multiplier``); with the median search at phi_0 (``start``) one Gaussian
    mechanism of noise multiplier ``noise_multiplier`` (Dong, Roth & Su 2022). Everything returned is a
    post-processing of the noisy counts and the public N.

    Args:
      norms: the exact per-record norms at the pilot's last iterate, draws x records
        (:func:`dpposterior.vi.record_norms.record_norms`).
      num_records: the public N of the thresholds (N / 2, then (1 - TARGET_QUANTILE) N).
      noise_multiplier: sigma_h.
      normals: :data:`NUM_NORMALS` standard normals (the privacy noise of both searches).
      start: the median search at phi_0 (:func:`search_median`, the pilot's clip).

    Returns:
      The :class:`AutoClip`.

    Raises:
      ValueError: the median norm lies above the grid's highest edge (2^(159/4), about 9e11).
    """
    norms = np.asarray(norms)
    z = _normals(normals)[MEDIAN_QUERIES:]
    s1, s2 = query_noise(noise_multiplier)
    median_k, queries = _median_search(norms, num_records, s1, z[:MEDIAN_QUERIES])
    target = (1.0 - TARGET_QUANTILE) * num_records
    lo, hi = median_k + 1, median_k + WINDOW_STEPS
    last = None
    for i in range(WINDOW_QUERIES):  # 16 candidates: exactly 4 halvings
        mid = (lo + hi) // 2
        noisy = _noisy_count(norms, grid_edge(mid), s2, z[MEDIAN_QUERIES + i])
        queries.append((grid_edge(mid), noisy, s2))
        last = noisy
        if noisy <= target:
            hi = mid
        else:
            lo = mid + 1
    tail = lo == median_k + WINDOW_STEPS and last is not None and last > target + 2.0 * s2
    return AutoClip(
        clip=grid_edge(lo + MARGIN_STEPS),
        median_edge=grid_edge(median_k),
        queries=tuple(start.queries) + tuple(queries),
        noise_multiplier=float(noise_multiplier),
        tail_beyond_window=bool(tail),
        pilot_clip=start.clip,
    )


def privacy_normals(rng_key: Any, secure: bool, index: int, num: int) -> tuple[np.ndarray, str]:
    """``num`` float64 standard normals for a pre-release, and the record's ``seeded_by``.

    Keyed (``rng_key`` given): the words of :func:`dpposterior.privacy.noise.normal_words` under
    ``fold_in(rng_key, index)`` (``index`` is a step no DP-SGD run reaches, so no key of the run is
    shared). ``rng_key`` None: a fresh OS seed. ``secure=True``: the OS CSPRNG
    (:func:`dpposterior.privacy.secure.secure_normal`). The same Box-Muller transform in every case.
    """
    raw, seeded_by = resolve_noise_source(rng_key, secure)
    if raw is None:
        return np.asarray(secure_normal((num,)), np.float64), seeded_by
    key = jax.random.fold_in(jax.random.wrap_key_data(jax.numpy.asarray(raw, jax.numpy.uint32)), index)
    return normals_from_words_np(np.asarray(normal_words(key, num)), num), seeded_by


def check_clip_share(norms: Any, clip: float, num_records: int, noise_multiplier: float, z: float) -> dict[str, float]:
    """The clip check's release: the noisy count of records whose norm is at least ``clip``.

    Privacy: one count of L2 sensitivity 1 under add/remove-one adjacency, plus Gaussian noise of sd
    ``noise_multiplier`` (``z`` a standard normal): a Gaussian mechanism. The share divides by the public N.

    Returns:
      ``{"count", "share", "se"}``: the noisy count, the noisy share of N and its standard error
      ``noise_multiplier / N`` (the noise is the only randomness: the norms use fixed public draws, and
      the count is their mean over the draws).
    """
    count = _noisy_count(np.asarray(norms), clip, noise_multiplier, z)
    return {"count": count, "share": count / num_records, "se": noise_multiplier / num_records}


def warn_if_binds(check: dict[str, float], clip: float, fitter: str, auto: bool = False) -> None:
    """Warns :class:`ClipBindsWarning` when the check :func:`binds` (``auto``: the clip was chosen privately)."""
    if binds(check):
        warnings.warn(f"{fitter}: {binds_message(check, clip, auto)}", ClipBindsWarning, stacklevel=3)


def warn_tail(choice: AutoClip, fitter: str) -> None:
    """Warns :class:`ClipBindsWarning` when the search's window ended below a tail of the norms."""
    if choice.tail_beyond_window:
        warnings.warn(
            f"{fitter}: clip='auto' chose C = {choice.clip:.4g}, the top of its window (16 times the private "
            f"median norm {choice.median_edge:.3g}), and its last query still counts about "
            f"{choice.queries[-1][1]:.0f} records (noise sd {choice.queries[-1][2]:.0f}) above "
            f"{choice.queries[-1][0]:.4g} or with a gradient that is not finite (DP-SGD drops those): the "
            "per-record gradients have a heavy tail that this clip binds for, or the likelihood is not finite "
            "for some records. The noise-aware posterior accounts for neither: pass a larger clip by hand, or "
            "check the likelihood of the records",
            ClipBindsWarning,
            stacklevel=3,
        )


def composed_privacy(
    run_privacy: PrivacySpent,
    *,
    delta: float,
    accountant: Accountant,
    num_normals: int,
    choice: AutoClip | None,
    check: dict[str, float] | None,
    check_noise_multiplier: float | None,
    pilot_steps: int | None = None,
) -> PrivacySpent:
    """The record of the whole release: the DP-SGD run composed with the search and/or the check.

    ``run_privacy`` is the run's own record (DP-SGD alone, with its noise-tail term). The returned record
    keeps its mechanism, noise multiplier, sampling rate and steps, and states the composed epsilon
    (:func:`~dpposterior.privacy.dpsgd_epsilon` with ``extra_gaussian``, the parts combined into one
    Gaussian mechanism), at ``delta`` plus the noise-tail term of all ``num_normals`` normals drawn.
    Its ``details`` show the split: ``extra_gaussian`` (the parts' combined noise multiplier, which
    the trace loader and the ledger compose), ``dpsgd_epsilon`` (the run alone), and per part its noise
    multiplier, the epsilon it alone would cost, and what it released.
    """
    sigma_h = None if choice is None else choice.noise_multiplier
    extra = combined_noise_multiplier(sigma_h, check_noise_multiplier)
    if extra is None:
        return run_privacy
    if run_privacy.noise_multiplier is None:
        raise ValueError("composed_privacy needs the DP-SGD run's record, which has a noise multiplier")
    sigma = float(run_privacy.noise_multiplier)
    q, steps = run_privacy.sampling_rate, run_privacy.num_steps
    eps = dpsgd_epsilon(sigma, delta, q, steps, accountant, extra_gaussian=extra)
    details = [(k, v) for k, v in run_privacy.details if k != "noise_tail_delta"]
    details += [
        ("extra_gaussian", extra),
        ("dpsgd_epsilon", float(run_privacy.epsilon)),
    ]
    if choice is not None:
        details += [
            ("clip_choice", "auto"),
            ("auto_clip_noise_multiplier", choice.noise_multiplier),
            ("auto_clip_share", AUTO_CLIP_SHARE),
            ("auto_clip_median_edge", choice.median_edge),
            ("pilot_steps", int(pilot_steps or 0)),
            ("pilot_clip", choice.pilot_clip),
            ("auto_clip_queries", tuple(tuple(float(x) for x in qr) for qr in choice.queries)),
        ]
    else:
        details.append(("clip_choice", "given"))
    if check is not None:
        if check_noise_multiplier is None:
            raise ValueError("composed_privacy: a clip check needs its noise multiplier")
        details += [
            ("clip_check_noise_multiplier", float(check_noise_multiplier)),
            ("clip_check_share", CLIP_CHECK_SHARE),
            ("clip_check_clipped_share", float(check["share"])),
            ("clip_check_se", float(check["se"])),
        ]
    record = dataclasses.replace(run_privacy, epsilon=eps, delta=delta, details=tuple(details))
    return with_noise_tail(record, num_normals)
