"""Checkpoints of a running DP-SGD release, so that a killed run resumes instead of starting over.

A checkpoint holds what the run has computed so far (phi_t and g~_t for the finished steps, the
current parameters) and what is needed to continue the SAME mechanism: the run's settings and its
base key, from which every later step's sampling, loss and noise keys derive (``sampling.step_keys``).
A resumed run therefore draws exactly the randomness the uninterrupted run would have drawn, and its
final trace equals the uninterrupted one's. The trace is released once, at the end, with the
PrivacySpent of all T steps; steps that were computed after the last checkpoint and lost in the kill
were never released, and are recomputed with the same keys, so nothing is released twice and no
fresh noise is mixed in.

THREAT MODEL. A checkpoint file is SECRET: it contains the base key of the noise, and anyone holding
it together with the final release could regenerate the noise and remove it. It also contains the
unreleased iterates. Keep it where the private data are kept; the engine deletes it when the run
finishes. In secure mode (noise from the OS generator, no key) a checkpoint holds no key: the resumed
steps draw fresh secure noise, which keeps the guarantee (every released step's noise is fresh and
independent) but the final trace then differs from an uninterrupted run's.

The settings are compared on resume (N, d, q, buffer, sampling, sigma, C, learning rate, beta, T,
accountant, delta, the loss's name, the initial parameters); a checkpoint of another run is refused
with an error naming the fields that differ. No digest of the private data is stored (a hash of the
data is itself a non-private release); the caller is responsible for resuming on the same data.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from .._io import read_checked_npz, write_checked_npz

FORMAT = "dpposterior.DPSGDCheckpoint"
FORMAT_VERSION = 1


class Checkpoint(NamedTuple):
    """A DP-SGD run after ``steps_done`` steps.

    Attributes:
      settings: the run's settings (JSON-ready; compared on resume).
      steps_done: finished steps t (the arrays hold rows 0..t-1).
      phi: (d,) float32 parameters after step t - 1 (phi_t).
      phis, grads: (t, d) float32 iterates before each update and noisy gradients.
      base_key: (2,) uint32 raw base key of the noise, or None in secure mode.
    """

    settings: dict[str, Any]
    steps_done: int
    phi: np.ndarray
    phis: np.ndarray
    grads: np.ndarray
    base_key: np.ndarray | None


def run_settings(
    *,
    loss: Any,
    num_records: int,
    num_params: int,
    sampling_rate: float,
    capacity: int,
    sampling: str,
    noise_multiplier: float,
    clip: float,
    learning_rate: np.ndarray,
    beta: np.ndarray,
    num_steps: int,
    accountant: str,
    delta: float,
    phi0: np.ndarray,
    seeded_by: str,
    loss_needs_key: bool,
) -> dict[str, Any]:
    """The settings a checkpoint must match to be resumed (JSON-ready)."""

    def digest(a: np.ndarray) -> str:
        return hashlib.sha256(np.ascontiguousarray(a, np.float32).tobytes()).hexdigest()

    name = getattr(loss, "__qualname__", None) or type(loss).__name__
    module = getattr(loss, "__module__", "") or ""
    return {
        "num_records": int(num_records),
        "num_params": int(num_params),
        "sampling_rate": float(sampling_rate),
        "capacity": int(capacity),
        "sampling": str(sampling),
        "noise_multiplier": float(noise_multiplier),
        "clip": float(clip),
        "learning_rate": digest(learning_rate),
        "beta": digest(beta),
        "num_steps": int(num_steps),
        "accountant": str(accountant),
        "delta": float(delta),
        "loss": f"{module}.{name}",
        "initial_params": digest(phi0),
        "seeded_by": str(seeded_by),
        "loss_needs_key": bool(loss_needs_key),
    }


def save_checkpoint(path: str | os.PathLike, ckpt: Checkpoint) -> Path:
    """Writes ``ckpt`` atomically (a reader sees the previous checkpoint or the whole new one)."""
    meta = json.dumps(
        {
            "format": FORMAT,
            "version": FORMAT_VERSION,
            "settings": ckpt.settings,
            "steps_done": int(ckpt.steps_done),
            "secure": ckpt.base_key is None,
        },
        sort_keys=True,
    )
    arrays = {
        "phi": np.asarray(ckpt.phi, np.float32),
        "phis": np.asarray(ckpt.phis, np.float32),
        "grads": np.asarray(ckpt.grads, np.float32),
        "base_key": (
            np.zeros((0,), np.uint32) if ckpt.base_key is None else np.asarray(ckpt.base_key, np.uint32).reshape(-1)
        ),
    }
    return write_checked_npz(path, arrays, meta, compress=False)


_RESUME_WITH = {
    "user": "; it was started with an rng_key: resume with that same rng_key",
    "os": "; it was started with rng_key=None and secure=False: resume with rng_key=None (the OS seed it "
    "drew is stored in the checkpoint, and the run continues that stream)",
    "secure": "; it was started with secure=True: resume with secure=True and rng_key=None",
}


def _how_to_resume(saved: dict[str, Any], differ: list[str]) -> str:
    """When the noise source differs: the rng_key/secure arguments that resume the saved run."""
    return _RESUME_WITH.get(saved.get("seeded_by", ""), "") if "seeded_by" in differ else ""


def load_checkpoint(path: str | os.PathLike, settings: dict[str, Any]) -> Checkpoint:
    """Reads a checkpoint and checks it belongs to a run with ``settings``.

    Raises:
      ValueError: the file is truncated, corrupted, of another format version, inconsistent, or the
        checkpoint of a run with other settings (the differing fields are named).
    """
    path = Path(path)
    meta_text, arrays = read_checked_npz(path, ("phi", "phis", "grads", "base_key"), "DP-SGD checkpoint")
    try:
        meta = json.loads(meta_text)
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: unreadable checkpoint metadata: {e}") from e
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise ValueError(f"{path}: not a DP-SGD checkpoint")
    if meta.get("version") != FORMAT_VERSION:
        raise ValueError(
            f"{path}: checkpoint format version {meta.get('version')!r} is not supported "
            f"(this dpposterior reads version {FORMAT_VERSION})"
        )
    saved = meta.get("settings")
    if not isinstance(saved, dict):
        raise ValueError(f"{path}: checkpoint without settings")
    differ = sorted(k for k in set(saved) | set(settings) if saved.get(k) != settings.get(k))
    if differ:
        raise ValueError(
            f"{path} is the checkpoint of a different run: {', '.join(differ)} differ "
            f"(delete it to start afresh, or resume with the same settings{_how_to_resume(saved, differ)})"
        )
    t = meta.get("steps_done")
    d, total = int(settings["num_params"]), int(settings["num_steps"])
    phis, grads, phi = arrays["phis"], arrays["grads"], arrays["phi"]
    if (
        isinstance(t, bool)
        or not isinstance(t, int)
        or not 0 <= t <= total
        or phis.shape != (t, d)
        or grads.shape != (t, d)
        or phi.shape != (d,)
    ):
        raise ValueError(
            f"{path}: inconsistent checkpoint (steps_done={t!r}, arrays {phis.shape}, {grads.shape}, "
            f"{phi.shape} for d={d})"
        )
    key = arrays["base_key"]
    secure = bool(meta.get("secure"))
    if secure != (key.size == 0) or (not secure and key.shape != (2,)):
        raise ValueError(f"{path}: inconsistent checkpoint key")
    return Checkpoint(
        settings=saved,
        steps_done=t,
        phi=phi,
        phis=phis,
        grads=grads,
        base_key=None if secure else key.astype(np.uint32),
    )
