"""The check that a loaded DP-SGD release's privacy record is the one its settings and arrays imply.

The DP-SGD and DPVI trace loaders (:mod:`dpposterior.dpsgd.trace`, :mod:`dpposterior.releases.trace`) call
:func:`check_dpsgd_privacy` after the file's own field checks (:func:`dpposterior._io.check_dpsgd_fields`).
It recomputes epsilon with the DP-SGD accountant of this package, so it lives beside it.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .dpsgd_accounting import ACCOUNTANTS, dpsgd_epsilon

#: how far a loaded release's recorded epsilon may lie from the one recomputed from its settings,
#: relative: the PLD accountant converges to about 0.1%, and another dp-accounting release may move the
#: last digits; a record that disagrees by more was not computed from these settings.
EPSILON_RTOL = 1e-2
#: the absolute part of that tolerance (epsilons near 0)
EPSILON_ATOL = 1e-6
#: the mechanism name of the DP-SGD releases' records (``dpsgd.engine.MECHANISM``)
DPSGD_MECHANISM = "poisson_subsampled_gaussian"
#: the false-alarm probability of the noise-level check of :func:`check_dpsgd_privacy` on a real release
NOISE_CHECK_LEVEL = 1e-9


def check_dpsgd_privacy(
    privacy: Any, meta: dict[str, Any], num_rows: int, grads: np.ndarray | None = None, beta: np.ndarray | None = None
) -> None:
    """Checks that a loaded DP-SGD release's privacy record is the one its settings and arrays imply.

    The checksum of a release file is an unkeyed SHA-256: anyone who edits the file can write a fresh one.
    It catches accidental corruption only. This check catches a record that contradicts the release:
    a private record must name the Poisson-subsampled Gaussian mechanism under add/remove-one adjacency,
    with the noise multiplier, sampling rate and number of steps of the settings (``meta``), as many steps
    as the trace has rows (``num_rows``), the same clip norm (when it records one), the same dataset size
    (when it records a number), and the epsilon that :func:`~dpposterior.privacy.dpsgd_epsilon` gives for
    them at its delta and accountant, to within ``EPSILON_RTOL`` (relative) or ``EPSILON_ATOL``. A record
    that is not private (epsilon = inf) claims nothing and passes; a private one with a noise multiplier
    of 0 in the settings does not.

    With the released noisy gradients ``grads`` (T, d) and the preconditioning ``beta`` (d,), the noise
    multiplier is also checked against the arrays: each row is g_t = (a_t + sigma C xi_t) / beta with
    a_t fixed by the steps before it and xi_t standard normal, so given the past each (beta_j g_tj /
    (sigma C))^2 is a noncentral chi-square of one degree of freedom, which is stochastically larger than a
    central one; their sum over the T d entries is then stochastically larger than chi-square(T d). A sum
    below that distribution's ``NOISE_CHECK_LEVEL`` quantile means the gradients hold less noise than the
    record claims (a real release is refused with probability at most ``NOISE_CHECK_LEVEL``).

    Raises:
      ValueError: naming what disagrees, with both values.
    """
    if not privacy.is_private:
        return
    sigma, q, steps = meta["noise_multiplier"], meta["sampling_rate"], meta["num_steps"]
    where = "the privacy record"
    if privacy.mechanism != DPSGD_MECHANISM:
        raise ValueError(
            f"{where} names the mechanism {privacy.mechanism!r}, but the release is DP-SGD ({DPSGD_MECHANISM!r})"
        )
    if privacy.neighbouring != "add_remove":
        raise ValueError(
            f"{where} states {privacy.neighbouring!r} neighbours, but DP-SGD with Poisson sampling is "
            "accounted under 'add_remove'"
        )
    if sigma == 0:
        raise ValueError(
            f"{where} claims (epsilon={privacy.epsilon!r}, delta={privacy.delta!r})-DP, but the "
            "settings' noise multiplier is 0 (no noise): such a release is not private"
        )
    pairs = [
        ("noise_multiplier", privacy.noise_multiplier, sigma, "the settings' noise_multiplier"),
        ("sampling_rate", privacy.sampling_rate, q, "the settings' sampling_rate"),
        ("num_steps", privacy.num_steps, steps, "the settings' num_steps"),
        ("num_steps", privacy.num_steps, num_rows, "the trace's rows"),
    ]
    clip = privacy.detail("clip")
    if isinstance(clip, (int, float)) and not isinstance(clip, bool):
        pairs.append(("clip", clip, meta["clip"], "the settings' clip"))
    for size_key in ("dataset_size", "num_records"):  # N, where the record holds a number (dpvi writes "public")
        size = privacy.detail(size_key)
        if isinstance(size, int) and not isinstance(size, bool) and size_key in meta:
            pairs.append((size_key, size, meta[size_key], f"the settings' {size_key}"))
    for name, recorded, actual, what in pairs:
        if recorded is None or not math.isclose(float(recorded), float(actual), rel_tol=1e-6):
            raise ValueError(
                f"{where} has {name}={recorded!r}, but {what} give {actual!r}: the record does not "
                "describe this release"
            )
    if grads is not None and beta is not None:
        grads = np.asarray(grads)
        pilot, pilot_clip = privacy.detail("pilot_steps", 0), privacy.detail("pilot_clip")
        if isinstance(pilot, int) and not isinstance(pilot, bool) and 0 < pilot < grads.shape[0] and pilot_clip:
            # clip='auto': the pilot's steps ran at their own clip (vi.auto_clip), the noise's scale there
            _check_noise_level(sigma, float(pilot_clip), grads[:pilot], np.asarray(beta, np.float64))
            grads = grads[pilot:]
        _check_noise_level(sigma, float(meta["clip"]), grads, np.asarray(beta, np.float64))
    if privacy.accountant not in ACCOUNTANTS:
        raise ValueError(
            f"{where} names the accountant {privacy.accountant!r}; a DP-SGD release is accounted "
            f"with one of {ACCOUNTANTS}, so its epsilon cannot be checked"
        )
    # the recorded delta includes the noise sampler's tail term (privacy.noise), which the accountant's does not
    tail = privacy.detail("noise_tail_delta", 0.0)
    # a private pre-release composed with the run (the clip's search, the clip check): one Gaussian
    # mechanism of sensitivity 1 with this noise multiplier (vi.auto_clip.composed_privacy)
    extra = privacy.detail("extra_gaussian")
    if extra is not None and not (
        isinstance(extra, (int, float)) and not isinstance(extra, bool) and math.isfinite(extra) and extra > 0
    ):
        raise ValueError(f"{where}'s extra_gaussian must be a finite noise multiplier > 0, got {extra!r}")
    if not (isinstance(tail, (int, float)) and not isinstance(tail, bool) and 0.0 <= tail):
        raise ValueError(f"{where}'s noise_tail_delta must be a number >= 0, got {tail!r}")
    if privacy.delta >= 1.0:  # a vacuous guarantee (the tail term reached 1 at a huge epsilon) claims nothing
        return
    if tail >= privacy.delta:
        raise ValueError(f"{where}'s noise_tail_delta {tail!r} is not below its delta {privacy.delta!r}")
    try:
        expected = dpsgd_epsilon(sigma, privacy.delta - tail, q, steps, privacy.accountant, extra_gaussian=extra)
    except (TypeError, ValueError) as e:
        raise ValueError(
            f"{where}'s epsilon cannot be recomputed from its settings (noise multiplier {sigma!r}, "
            f"sampling rate {q!r}, {steps} steps, delta {privacy.delta!r}, accountant "
            f"{privacy.accountant!r}): {e}"
        ) from e
    if abs(privacy.epsilon - expected) > EPSILON_RTOL * expected + EPSILON_ATOL:
        raise ValueError(
            f"{where} claims epsilon={privacy.epsilon:.6g}, but the {privacy.accountant} accountant "
            f"gives {expected:.6g} for its noise multiplier {sigma!r}, sampling rate {q!r}, {steps} "
            f"steps and delta {privacy.delta!r} (allowed: within {EPSILON_RTOL:.0%}): the record does "
            "not describe this release"
        )


def _check_noise_level(sigma: float, clip: float, grads: np.ndarray, beta: np.ndarray) -> None:
    """The chi-square check of :func:`check_dpsgd_privacy`: the released gradients carry the noise
    sigma C / beta_j that the record claims (a ValueError if they carry clearly less)."""
    from scipy import stats

    k = grads.size
    if k == 0 or grads.ndim != 2 or beta.shape not in ((), (grads.shape[1],)):
        return  # shapes that the release's own field checks refuse, naming the array
    scale = np.broadcast_to(beta / (sigma * clip), (grads.shape[1],))
    # summed in float64 over blocks of about 4M entries: a float64 copy of a whole large trace would
    # double its memory
    rows = max(1, 2**22 // grads.shape[1])
    total = 0.0
    for start in range(0, grads.shape[0], rows):
        block = grads[start : start + rows].astype(np.float64) * scale
        total += float(np.sum(block * block))
    floor = float(stats.chi2.ppf(NOISE_CHECK_LEVEL, k))
    if total < floor:
        implied = sigma * math.sqrt(total / k)
        raise ValueError(
            f"the privacy record's noise multiplier {sigma!r} does not fit the released gradients: with noise of "
            f"std {sigma!r} x clip / beta in each of their {k} entries, the mean square of the standardised "
            f"gradients is at least about 1, but it is {total / k:.3g} (below the chi-square({k}) quantile at "
            f"{NOISE_CHECK_LEVEL:g}); the gradients carry the noise of a multiplier of at most about "
            f"{implied:.3g}"
        )
