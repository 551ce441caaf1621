"""Each release of ``dpposterior compare`` written to disk as soon as it is made.

A release is the output of a mechanism that read the records (a DPVI or DPVIm trace, a DP-Fast MH
chain, Gibbs-SS-Noisy's Laplace sufficient statistics); what follows it (posteriors, tables, figures)
is post-processing that can fail. Writing each release at once, with its PrivacySpent, means such a
failure, or a later method's, loses no privacy that was spent: the file holds the released numbers.

Files: ``<folder>/<method>.npz``, one ``.npz`` with the released arrays, a JSON metadata text (the kind of
release, its scalar settings, its PrivacySpent as :meth:`~dpposterior.privacy.PrivacySpent.to_dict`) and
a SHA-256 checksum, written atomically. A DPVI trace is written by :meth:`DPVITrace.save
<dpposterior.releases.trace.DPVITrace.save>` (``DPVITrace.load`` reads it); the others are read with
``numpy.load`` (arrays by name, ``metadata`` as UTF-8 bytes).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from .._io import write_checked_npz

#: the version of the files written here (metadata key ``version``)
FORMAT_VERSION = 1


def _parts(release: Any) -> tuple[str, dict[str, np.ndarray], dict[str, Any]]:
    """(kind, released arrays, scalar metadata) of a release object."""
    from ..baselines import DrawsPosterior
    from ..releases.statistics import RegressionStatisticsRelease
    from ..releases.dpvim_trace import DPVImTrace

    if isinstance(release, DPVImTrace):
        arrays = {"mu": release.mu, "rho": release.rho, "loc_grads": release.loc_grads, "final_phi": release.final_phi}
        meta = {
            "clip": release.clip,
            "noise_multiplier": release.noise_multiplier,
            "sampling_rate": release.sampling_rate,
            "num_steps": release.num_steps,
            "dataset_size": release.dataset_size,
            "natural_gradient": release.natural_gradient,
            "learning_rate": np.asarray(release.learning_rate, np.float64).tolist(),
            "model_name": release.model_name,
            "layout": release.layout.to_dict(),
        }
        return "dpvim_trace", {k: np.asarray(v) for k, v in arrays.items()}, meta
    if isinstance(release, DrawsPosterior):
        meta = {
            "method": release.method,
            "diagnostics": release.diagnostics,
            "layout": None if release.layout is None else release.layout.to_dict(),
        }
        return "draws", {"draws": np.asarray(release.draws)}, meta
    if isinstance(release, RegressionStatisticsRelease):
        arrays = {f"noisy_{k}": np.asarray(v) for k, v in release.noisy.items()}
        arrays["x_bound"] = np.asarray(release.x_bound)
        meta = {
            "num_records": release.num_records,
            "num_features": release.num_features,
            "y_bound": release.y_bound,
            "epsilon": release.epsilon,
            "epsilon_parts": release.epsilon_parts,
            "sensitivities": release.sensitivities,
            "noise_scales": release.noise_scales,
            "neighbouring": release.neighbouring,
            "snapped": release.snapped is not None,
        }
        return "regression_statistics", arrays, meta
    raise TypeError(f"cannot save a release of type {type(release).__name__}")


def save_release(release: Any, path: str | os.PathLike) -> Path:
    """Writes one release (with its PrivacySpent) to ``path`` (``.npz``), atomically; returns the path.

    Raises:
      TypeError: a release of a kind this module does not know.
    """
    from ..releases.trace import DPVITrace

    path = Path(path)
    if isinstance(release, DPVITrace):
        return release.save(path)
    kind, arrays, meta = _parts(release)
    text = json.dumps(
        {
            "format": "dpposterior-release",
            "version": FORMAT_VERSION,
            "kind": kind,
            "privacy": release.privacy.to_dict(),
            **meta,
        },
        sort_keys=True,
        default=_jsonable,
    )
    write_checked_npz(path, arrays, text)
    return path


def _jsonable(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    return repr(value)
