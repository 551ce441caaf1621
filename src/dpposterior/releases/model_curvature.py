"""What the model itself says about DP-SGD's gradient near a trace's fixed point (a public record).

NA-DPVI models the trace's mean gradient as q A (phi_t - phi*) and reads A from the trace's own slope.
Where a coordinate relaxes slowly against the trace window, that slope is biased upwards, and the
intervals come out too narrow (docs/results/calibration-suite.md, "Why the learning rate alone cannot
cure it"). Where the model can simulate its own records (every data argument is an observed site: a
model without covariates), the model gives A without reading the data: N times the expected derivative
of the clipped per-record gradient, over records simulated from the model at the trace mean, with the
release's public clip and preconditioning. A regression's records hold covariates, whose distribution
the model does not state; there the simulated records take their covariates from a public sample the
user gives (``dpvi(..., public_covariates=...)``). The same records give the second-order push the wander of
the other coordinates puts on each gradient, the shift of the fixed point that clipping causes, and the
Hessian's off-diagonal over the means, which says how much a diagonal (mean-field) q understates each
latent's marginal spread.

:class:`ModelCurvature` holds those numbers. It is computed from the released trace, the public
settings and the model alone (:func:`dpposterior.vi.model_curvature.model_curvature`), so it is a
post-processing of the release and costs no privacy.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

#: where a :class:`ModelCurvature`'s simulated records took their covariates from.
COVARIATE_SOURCES = ("none", "public sample")


class ModelCurvature(NamedTuple):
    """The model's curvature terms at a trace's mean, from records simulated from the model.

    Attributes:
      point: (d,) phibar, the trace mean (after the default burn-in of a fifth) where the terms are taken.
      curvature: (n,) A_j of each mean coordinate: N E[d g_clip,j / d phi_j] at ``point``, with g_clip the
        beta-scaled, clipped per-record ELBO gradient divided by beta again (what DP-SGD sums).
      hessian_diag: (d,) H_jj, the diagonal of the Hessian of the unclipped negative ELBO of N records.
      hessian_diag_slope: (d, d) dH_jj / dphi_k at ``point`` (row j, column k).
      clip_shift: (d,) phi*_ELBO - phi*_clipped: where the unclipped gradient's zero lies relative to the
        clipped one's, to first order, -(N E[g - g_clip]) / H_jj (0 where H_jj is not positive).
      num_records: how many records were simulated.
      hessian_means: (n, n) the Hessian of the unclipped negative ELBO of N records over the mean
        coordinates (its diagonal is ``hessian_diag[:n]``), or None for a record made without it.
      covariates: where the simulated records' covariates came from: "none" (the model has none: every
        data argument was simulated from the model) or "public sample" (drawn from the public sample given
        to dpvi; the observed values simulated from the model).
    """

    point: np.ndarray
    curvature: np.ndarray
    hessian_diag: np.ndarray
    hessian_diag_slope: np.ndarray
    clip_shift: np.ndarray
    num_records: int
    covariates: str = "none"
    hessian_means: np.ndarray | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (floats written exactly)."""
        return {
            "point": [float(x) for x in self.point],
            "curvature": [float(x) for x in self.curvature],
            "hessian_diag": [float(x) for x in self.hessian_diag],
            "hessian_diag_slope": [[float(x) for x in row] for row in self.hessian_diag_slope],
            "clip_shift": [float(x) for x in self.clip_shift],
            "num_records": int(self.num_records),
            "covariates": str(self.covariates),
        } | (
            {}
            if self.hessian_means is None
            else {"hessian_means": [[float(x) for x in row] for row in np.asarray(self.hessian_means)]}
        )

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "ModelCurvature":
        """Reads :meth:`to_dict`'s dict.

        Raises:
          KeyError: a field is missing.
          ValueError: a field is not finite or has the wrong shape (:func:`check_model_curvature`).
        """
        return cls(
            point=np.asarray(d["point"], np.float64),
            curvature=np.asarray(d["curvature"], np.float64),
            hessian_diag=np.asarray(d["hessian_diag"], np.float64),
            hessian_diag_slope=np.asarray(d["hessian_diag_slope"], np.float64),
            clip_shift=np.asarray(d["clip_shift"], np.float64),
            num_records=int(d["num_records"]),
            covariates=str(d.get("covariates", "none")),
            hessian_means=None if d.get("hessian_means") is None else np.asarray(d["hessian_means"], np.float64),
        )


def check_model_curvature(value: Any, num_params: int) -> ModelCurvature | None:
    """``value`` as a checked :class:`ModelCurvature` for a trace of ``num_params`` = d = 2n parameters.

    Raises:
      TypeError: ``value`` is neither None nor a ModelCurvature.
      ValueError: a field has the wrong shape, is not finite, a curvature is not > 0, ``hessian_means``
        is not symmetric, ``num_records`` is not a positive integer, or ``covariates`` is not one of
        :data:`COVARIATE_SOURCES`.
    """
    if value is None:
        return None
    if not isinstance(value, ModelCurvature):
        raise TypeError(f"model_curvature must be None or a ModelCurvature, got {type(value).__name__}")
    d, n = num_params, num_params // 2
    shapes = {
        "point": (d,),
        "curvature": (n,),
        "hessian_diag": (d,),
        "hessian_diag_slope": (d, d),
        "clip_shift": (d,),
    }
    fields = {}
    for name, shape in shapes.items():
        a = np.asarray(getattr(value, name), np.float64)
        if a.shape != shape:
            raise ValueError(f"model_curvature.{name} must have shape {shape}, got {a.shape}")
        if not np.all(np.isfinite(a)):
            raise ValueError(f"model_curvature.{name} holds NaN or inf")
        fields[name] = a
    if value.hessian_means is not None:
        h = np.asarray(value.hessian_means, np.float64)
        if h.shape != (n, n):
            raise ValueError(f"model_curvature.hessian_means must have shape {(n, n)}, got {h.shape}")
        if not np.all(np.isfinite(h)):
            raise ValueError("model_curvature.hessian_means holds NaN or inf")
        if not np.allclose(h, h.T, rtol=1e-6, atol=0.0):
            raise ValueError("model_curvature.hessian_means must be symmetric")
        fields["hessian_means"] = h
    if not np.all(fields["curvature"] > 0):
        raise ValueError(f"model_curvature.curvature must be > 0, got {fields['curvature'].tolist()}")
    num = value.num_records
    if isinstance(num, bool) or not isinstance(num, (int, np.integer)) or num < 1:
        raise ValueError(f"model_curvature.num_records must be a positive integer, got {num!r}")
    if value.covariates not in COVARIATE_SOURCES:
        raise ValueError(f"model_curvature.covariates must be one of {COVARIATE_SOURCES}, got {value.covariates!r}")
    return ModelCurvature(num_records=int(num), covariates=value.covariates, **fields)
