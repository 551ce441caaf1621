"""The released DPVI trace: everything post-processing may use, and nothing more."""

from __future__ import annotations

import dataclasses
import json
import math
import os
from pathlib import Path
from typing import Any

import jax.numpy as jnp
import numpy as np

from .._checks import check_output_file
from .._io import check_dpsgd_fields, read_checked_npz, write_checked_npz
from ..privacy.spent import PrivacySpent
from ..privacy.dpsgd_record import check_dpsgd_privacy
from .layout import ParamLayout
from .model_curvature import ModelCurvature, check_model_curvature
from .posterior import point_posterior

FORMAT = "dpposterior.DPVITrace"
FORMAT_VERSION = 1


@dataclasses.dataclass(frozen=True, eq=False)
class DPVITrace:
    """A DPVI release: the DP-SGD trace of the variational parameters and its noisy gradients.

    Every array here is a post-processing of the DP-SGD mechanism's noisy gradients (plus public
    settings), so it is covered by ``privacy``. It holds no per-record quantity and no realised
    batch size.

    Attributes:
      phi: (T, d) float32, phi_t, the variational parameters BEFORE the update of step t.
      grads: (T, d) float32, the noisy preconditioned gradient g~_t = (sum clip(beta*g_i) + sigma C xi)/beta
        used in that update (phi_{t+1} = phi_t - learning_rate * g~_t).
      final_phi: (d,) the parameters after the last update (the last iterate phi_T).
      beta: (d,) preconditioning vector (beta_mu = 1, beta_rho as chosen).
      learning_rate: (d,) elementwise learning rate.
      clip: the clip norm C applied to beta-scaled per-record gradients.
      noise_multiplier: sigma; the noise std on the gradient sum is sigma * C before dividing by beta.
      sampling_rate: the Poisson sampling rate q.
      num_steps: T.
      dataset_size: the N used in the per-record loss (treated as public, as in the papers; a user
        may pass a public size instead of the true one).
      num_mc: Monte Carlo draws per step in the ELBO.
      layout: the model's latent sites, to map phi to constrained draws.
      privacy: what the release cost.
      model_name: a label for the model (informative only).
      model_curvature: None, or the model's own curvature terms at the trace mean, computed from the trace,
        the public settings and records simulated from the model (no private data; a
        :class:`~dpposterior.releases.model_curvature.ModelCurvature`). dpvi adds them where the model
        can simulate its records (no covariates); :func:`dpposterior.noise_aware_posterior` uses them.
    """

    phi: Any
    grads: Any
    final_phi: Any
    beta: Any
    learning_rate: Any
    clip: float
    noise_multiplier: float
    sampling_rate: float
    num_steps: int
    dataset_size: int
    num_mc: int
    layout: ParamLayout
    privacy: PrivacySpent
    model_name: str = ""
    model_curvature: ModelCurvature | None = None

    def __post_init__(self) -> None:
        phi = np.asarray(self.phi, dtype=np.float32)
        grads = np.asarray(self.grads, dtype=np.float32)
        if phi.ndim != 2 or grads.shape != phi.shape:
            raise ValueError(f"phi and grads must both have shape (T, d); got {phi.shape} and {grads.shape}")
        d = phi.shape[1]
        if d != 2 * self.layout.num_latent:
            raise ValueError(
                f"the trace has d={d} variational parameters but the layout has "
                f"{self.layout.num_latent} latent coordinates (d must be 2n)"
            )
        for name in ("final_phi", "beta", "learning_rate"):
            v = np.asarray(getattr(self, name), dtype=np.float32)
            if v.ndim == 0:
                v = np.full((d,), v, dtype=np.float32)
            if v.shape != (d,):
                raise ValueError(f"{name} must have shape ({d},), got {v.shape}")
            object.__setattr__(self, name, v)
        object.__setattr__(self, "phi", phi)
        object.__setattr__(self, "grads", grads)
        object.__setattr__(self, "model_curvature", check_model_curvature(self.model_curvature, d))

    @property
    def num_params(self) -> int:
        """d, the number of variational parameters."""
        return int(self.phi.shape[1])

    def last_iterate_posterior(self):
        """The naive baseline q(theta; phi_T): ignores the DP noise entirely.

        Raises:
          ValueError: ``final_phi`` holds NaN or inf (its summaries would be NaN).
        """
        if not np.all(np.isfinite(self.final_phi)):
            bad = np.nonzero(~np.isfinite(self.final_phi))[0][:10].tolist()
            raise ValueError(f"final_phi contains NaN or inf (at {bad}); the last iterate is no posterior")

        return point_posterior(self.layout, jnp.asarray(self.final_phi), self.privacy, "last_iterate")

    # ---------------------------------------------------------------- persistence
    def _metadata(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "version": FORMAT_VERSION,
            "clip": float(self.clip),
            "noise_multiplier": float(self.noise_multiplier),
            "sampling_rate": float(self.sampling_rate),
            "num_steps": int(self.num_steps),
            "dataset_size": int(self.dataset_size),
            "num_mc": int(self.num_mc),
            "model_name": self.model_name,
            "layout": self.layout.to_dict(),
            "privacy": self.privacy.to_dict(),
        } | ({} if self.model_curvature is None else {"model_curvature": self.model_curvature.to_dict()})

    def save(self, path: str | os.PathLike) -> Path:
        """Writes the trace to one ``.npz`` file (arrays + JSON metadata + SHA-256 checksum), atomically.

        The trace is checked as :meth:`load` checks it before anything is written, so a file is never
        written that :meth:`load` would refuse.

        Raises:
          TypeError: ``path`` is not a str or os.PathLike.
          ValueError: ``path`` is a folder, or its folder cannot be created or written; or the trace holds
            what :meth:`load` refuses (NaN or inf in an array, ``num_steps`` other than the number of rows
            of ``phi``, a negative count, clip <= 0, noise multiplier < 0, sampling rate outside (0, 1], a
            privacy record that contradicts the settings).
        """
        path = check_output_file(path, "path")
        arrays = {
            "phi": self.phi,
            "grads": self.grads,
            "final_phi": self.final_phi,
            "beta": self.beta,
            "learning_rate": self.learning_rate,
        }
        metadata = self._metadata()
        try:
            _check_loaded(json.loads(json.dumps(metadata)), arrays)
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(
                f"the trace cannot be saved to {path}: DPVITrace.load would refuse the file ({e}); nothing was written"
            ) from e
        meta = json.dumps(metadata, sort_keys=True)
        write_checked_npz(path, arrays, meta)
        return path

    @classmethod
    def load(cls, path: str | os.PathLike) -> "DPVITrace":
        """Reads a trace written by :meth:`save`, checking that it is whole and that its privacy record
        describes it.

        What is checked, and what that protects against: the file's SHA-256 checksum is unkeyed, so it
        catches accidental corruption (a truncated or altered file) but not someone who edits the file and
        writes a fresh checksum. Every field is then checked, and the privacy record against the release
        (:func:`dpposterior.privacy.dpsgd_record.check_dpsgd_privacy`): its noise multiplier, sampling rate, number of steps
        and clip must be the settings', its number of steps the trace's rows, and its epsilon the one the
        record's accountant gives for them at its delta (within 1%); and the released gradients must carry
        the noise the record claims (a chi-square bound on their standardised sum of squares, failed by a
        real release with probability at most 1e-9). A record that contradicts the arrays and settings is
        refused; a file rewritten consistently (other arrays and a matching record) cannot be
        told from a real release: keep releases where only trusted writers can change them.

        Raises:
          FileNotFoundError: no such file.
          ValueError: the file is truncated or corrupted (checksum), of an unknown format version, holds an
            invalid field, or its privacy record contradicts the settings or the trace (naming what
            disagrees).
        """
        path = Path(path)
        names = ("phi", "grads", "final_phi", "beta", "learning_rate")
        meta_text, arrays = read_checked_npz(path, names, "DPVI trace")
        try:
            meta = json.loads(meta_text)
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}: unreadable metadata: {e}") from e
        if not isinstance(meta, dict):
            raise ValueError(f"{path}: unreadable metadata: expected a JSON object, got {type(meta).__name__}")
        if meta.get("format") != FORMAT:
            raise ValueError(f"{path}: not a DPVI trace (format {meta.get('format')!r})")
        if meta.get("version") != FORMAT_VERSION:
            raise ValueError(
                f"{path}: trace format version {meta.get('version')!r} is not supported by this "
                f"dpposterior (reads version {FORMAT_VERSION})"
            )
        # The checksum catches accidental corruption only (anyone can recompute it): the fields and the
        # privacy record are checked against each other, so a record that contradicts the trace is refused.
        try:
            _check_loaded(meta, arrays)
            return cls(
                layout=ParamLayout.from_dict(meta["layout"]),
                privacy=PrivacySpent.from_dict(meta["privacy"]),
                clip=float(meta["clip"]),
                noise_multiplier=float(meta["noise_multiplier"]),
                sampling_rate=float(meta["sampling_rate"]),
                num_steps=int(meta["num_steps"]),
                dataset_size=int(meta["dataset_size"]),
                num_mc=int(meta["num_mc"]),
                model_name=str(meta["model_name"]),
                model_curvature=(
                    ModelCurvature.from_dict(meta["model_curvature"]) if "model_curvature" in meta else None
                ),
                **arrays,
            )
        except (KeyError, TypeError, ValueError) as e:
            what = f"missing field {e}" if isinstance(e, KeyError) else str(e)
            raise ValueError(f"{path}: invalid DPVI trace contents: {what}") from e


_META_FIELDS = (
    "clip",
    "noise_multiplier",
    "sampling_rate",
    "num_steps",
    "dataset_size",
    "num_mc",
    "model_name",
    "layout",
    "privacy",
)


def _check_loaded(meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
    """Checks the fields of a loaded trace: types, ranges, finite float arrays, T = num_steps, and a
    privacy record that agrees with them (:func:`~dpposterior.privacy.dpsgd_record.check_dpsgd_privacy`)."""
    missing = [k for k in _META_FIELDS if k not in meta]
    if missing:
        raise ValueError(f"metadata lacks {missing}")
    # dataset_size and num_mc are 0 for a simulated trace
    check_dpsgd_fields(meta, arrays, (("num_steps", 1), ("dataset_size", 0), ("num_mc", 0)))
    phi = arrays["phi"]
    if phi.ndim != 2 or phi.shape[0] != meta["num_steps"]:
        raise ValueError(f"phi must have shape (num_steps={meta['num_steps']}, d), got {phi.shape}")
    check_dpsgd_privacy(PrivacySpent.from_dict(meta["privacy"]), meta, phi.shape[0], arrays["grads"], arrays["beta"])


def _is_finite(x: float) -> bool:
    return math.isfinite(float(x))
