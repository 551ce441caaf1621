"""The DP-SGD release: the trace of parameters and noisy gradients, with its privacy record."""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any, Callable

import numpy as np

from ..privacy import PrivacySpent

_ARRAYS = ("params", "grads", "final_params", "learning_rate", "beta")
_SCALARS = ("clip", "noise_multiplier", "sampling_rate", "num_steps", "num_records")


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
        return (all(np.array_equal(getattr(self, n), getattr(other, n)) for n in _ARRAYS)
                and all(getattr(self, n) == getattr(other, n) for n in _SCALARS)
                and self.privacy == other.privacy)

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

    def save(self, path: str | os.PathLike) -> None:
        """Writes the release to an ``.npz`` file (arrays, scalars and the privacy record)."""
        meta = {n: getattr(self, n) for n in _SCALARS}
        meta["privacy"] = self.privacy.to_dict()
        with open(path, "wb") as f:
            np.savez(f, **{n: getattr(self, n) for n in _ARRAYS}, meta=np.array(json.dumps(meta)))

    @classmethod
    def load(cls, path: str | os.PathLike, unravel: Callable[[Any], Any] | None = None) -> "DPSGDTrace":
        """Reads a release written by :meth:`save`; ``unravel`` may be supplied again."""
        with np.load(path, allow_pickle=False) as z:
            arrays = {n: z[n] for n in _ARRAYS}
            meta = json.loads(str(z["meta"]))
        privacy = PrivacySpent.from_dict(meta.pop("privacy"))
        return cls(**arrays, clip=float(meta["clip"]), noise_multiplier=float(meta["noise_multiplier"]),
                   sampling_rate=float(meta["sampling_rate"]), num_steps=int(meta["num_steps"]),
                   num_records=int(meta["num_records"]), privacy=privacy, unravel=unravel)
