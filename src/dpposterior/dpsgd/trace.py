"""The DP-SGD release: the trace of parameters and noisy gradients, with its privacy record."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any, Callable

import numpy as np

from .._checks import check_output_file
from .._io import check_dpsgd_fields, read_checked_npz, write_checked_npz
from ..privacy import PrivacySpent
from ..privacy.dpsgd_record import check_dpsgd_privacy

_ARRAYS = ("params", "grads", "final_params", "learning_rate", "beta")
_SCALARS = ("clip", "noise_multiplier", "sampling_rate", "num_steps", "num_records")
FORMAT = "dpposterior.DPSGDTrace"
FORMAT_VERSION = 1


def _frozen(x: Any) -> np.ndarray:
    a = np.array(x, dtype=np.float32, copy=True)
    a.setflags(write=False)
    return a


@dataclasses.dataclass(frozen=True, eq=False)
class DPSGDTrace:
    """What a DP-SGD run releases: the iterates, the noisy gradients and the privacy spent.

    The release holds no per-record quantity and no data-dependent count (no realised batch sizes,
    no clip fractions, no losses). ``num_records`` N is the public dataset size the run was
    configured with (as in the papers' setups, N is treated as public: add/remove-one DP protects
    each record's presence given the released N is not itself secret).

    Attributes:
      params: (T, d) float32; row t is phi_t, the flat parameters BEFORE the update of step t.
      grads: (T, d) float32; row t is the noisy gradient g~_t used in that update,
        phi_{t+1} = phi_t - learning_rate * g~_t.
      final_params: (d,) float32, phi_T (after the last update).
      learning_rate: (d,) float32, the elementwise step size.
      beta: (d,) float32, the preconditioning (ones when not given).
      clip: the clip norm C (applied to beta-scaled per-example gradients).
      noise_multiplier: sigma; the noise added to each step's clipped sum is N(0, (sigma C)^2 I).
      sampling_rate: the Poisson sampling rate q.
      num_steps: T.
      num_records: N.
      privacy: the :class:`~dpposterior.privacy.PrivacySpent` of the whole trace.
      unravel: maps a flat (d,) vector back to the user's parameter pytree (not compared, not saved).
    """

    params: np.ndarray
    grads: np.ndarray
    final_params: np.ndarray
    learning_rate: np.ndarray
    beta: np.ndarray
    clip: float
    noise_multiplier: float
    sampling_rate: float
    num_steps: int
    num_records: int
    privacy: PrivacySpent
    unravel: Callable[[Any], Any] | None = dataclasses.field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        for name in _ARRAYS:
            object.__setattr__(self, name, _frozen(getattr(self, name)))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, DPSGDTrace):
            return NotImplemented
        return (
            all(np.array_equal(getattr(self, n), getattr(other, n)) for n in _ARRAYS)
            and all(getattr(self, n) == getattr(other, n) for n in _SCALARS)
            and self.privacy == other.privacy
        )

    __hash__ = None  # type: ignore[assignment]

    @property
    def num_params(self) -> int:
        """d, the length of the flat parameter vector."""
        return int(self.final_params.shape[0])

    def params_tree(self, t: int | None = None) -> Any:
        """phi_t (or the final parameters when ``t`` is None) as the user's parameter pytree."""
        flat = self.final_params if t is None else self.params[t]
        if self.unravel is None:
            return flat
        import jax.numpy as jnp

        return self.unravel(jnp.asarray(flat))

    def save(self, path: str | os.PathLike) -> Path:
        """Writes the release to one ``.npz`` file (arrays, scalars, the privacy record and a SHA-256
        checksum), atomically: a reader never sees a partial file.

        The release is checked as :meth:`load` checks it before anything is written, so a file is never
        written that :meth:`load` would refuse.

        Raises:
          TypeError: ``path`` is not a str or os.PathLike.
          ValueError: ``path`` is a folder, or its folder cannot be created or written; or the release holds
            what :meth:`load` refuses (a privacy record that contradicts the settings, an invalid field).
        """
        path = check_output_file(path, "path")
        meta = {
            "format": FORMAT,
            "version": FORMAT_VERSION,
            **{n: getattr(self, n) for n in _SCALARS},
            "privacy": self.privacy.to_dict(),
        }
        try:
            _check_loaded(json.loads(json.dumps(meta)), {n: getattr(self, n) for n in _ARRAYS})
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(
                f"the trace cannot be saved to {path}: DPSGDTrace.load would refuse the file ({e}); nothing was written"
            ) from e
        write_checked_npz(
            path, {n: getattr(self, n) for n in _ARRAYS}, json.dumps(meta, sort_keys=True), compress=False
        )
        return path

    @classmethod
    def load(cls, path: str | os.PathLike, unravel: Callable[[Any], Any] | None = None) -> "DPSGDTrace":
        """Reads a release written by :meth:`save`; ``unravel`` may be supplied again.

        The SHA-256 checksum is unkeyed: it catches accidental corruption, not an edit that writes a fresh
        checksum. The fields are checked, and the privacy record against the settings and the arrays
        (:func:`dpposterior.privacy.dpsgd_record.check_dpsgd_privacy`: noise multiplier, sampling rate, steps, rows, clip,
        the epsilon recomputed by the record's accountant, within 1%, and the noise the released gradients
        carry, by a chi-square bound), so a record that contradicts the release is refused; a consistently rewritten file cannot be told from a real one.

        Raises:
          FileNotFoundError: no such file.
          ValueError: the file is truncated or corrupted (checksum), holds an invalid field, has a privacy
            record that contradicts its settings or arrays (naming what disagrees), or is of an unknown
            format version.
        """
        path = Path(path)
        if _is_unreleased_format(path):
            raise ValueError(
                f"{path}: a DP-SGD trace of a format that was never released (no checksum, a 'meta' "
                f"entry); this dpposterior reads format version {FORMAT_VERSION} only: run the "
                "release again to get a file of it"
            )
        meta_text, arrays = read_checked_npz(path, _ARRAYS, "DP-SGD trace")
        try:
            meta = json.loads(meta_text)
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}: unreadable metadata: {e}") from e
        if not isinstance(meta, dict):
            raise ValueError(f"{path}: unreadable metadata: expected a JSON object, got {type(meta).__name__}")
        if meta.get("format") != FORMAT:
            raise ValueError(f"{path}: not a DP-SGD trace (format {meta.get('format')!r})")
        if meta.get("version") != FORMAT_VERSION:
            raise ValueError(
                f"{path}: DP-SGD trace format version {meta.get('version')!r} is not "
                f"supported by this dpposterior (reads version {FORMAT_VERSION})"
            )
        try:
            _check_loaded(meta, arrays)
            return cls(
                **arrays,
                clip=float(meta["clip"]),
                noise_multiplier=float(meta["noise_multiplier"]),
                sampling_rate=float(meta["sampling_rate"]),
                num_steps=int(meta["num_steps"]),
                num_records=int(meta["num_records"]),
                privacy=PrivacySpent.from_dict(meta["privacy"]),
                unravel=unravel,
            )
        except (KeyError, TypeError, ValueError) as e:
            what = f"missing field {e}" if isinstance(e, KeyError) else str(e)
            raise ValueError(f"{path}: invalid DP-SGD trace contents: {what}") from e


def _is_unreleased_format(path: Path) -> bool:
    """Whether ``path`` is a trace file of the format before the checksum (a ``meta`` entry, no checksum),
    which no release of dpposterior wrote; it is refused with a message that says so."""
    if not path.exists():
        raise FileNotFoundError(f"no such DP-SGD trace file: {path}")
    try:
        with open(path, "rb") as f, np.load(f, allow_pickle=False) as z:  # reads the zip directory only
            return "meta" in z.files and "checksum" not in z.files
    except Exception:  # noqa: BLE001 - unreadable: read_checked_npz names the problem
        return False


def _check_loaded(meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
    """Checks a loaded trace's fields: all present, real finite arrays of consistent shapes, valid scalars,
    and a privacy record that agrees with them (:func:`~dpposterior.privacy.dpsgd_record.check_dpsgd_privacy`)."""
    missing = [k for k in _ARRAYS if k not in arrays] + [k for k in _SCALARS + ("privacy",) if k not in meta]
    if missing:
        raise ValueError(f"the file lacks {missing}")
    check_dpsgd_fields(meta, arrays, (("num_steps", 1), ("num_records", 1)))
    d = arrays["final_params"].shape
    if len(d) != 1:
        raise ValueError(f"final_params must be a vector (d,), got shape {d}")
    for name in ("params", "grads"):
        if arrays[name].shape != (meta["num_steps"],) + d:
            raise ValueError(
                f"{name} must have shape (num_steps={meta['num_steps']}, d={d[0]}), got {arrays[name].shape}"
            )
    for name in ("learning_rate", "beta"):
        if arrays[name].shape != d:
            raise ValueError(f"{name} must have shape (d={d[0]},), got {arrays[name].shape}")
    check_dpsgd_privacy(
        PrivacySpent.from_dict(meta["privacy"]), meta, arrays["params"].shape[0], arrays["grads"], arrays["beta"]
    )
