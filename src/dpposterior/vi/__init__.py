"""Variational inference: DPVI and the DPVIm baseline (mechanisms), their released traces, the
variational family and site layouts, and a private histogram of the per-record gradient norms that shows
whether the clip was too small."""

from ..releases.layout import ParamLayout
from ..releases.layout import Site
from .dpvi import dpvi
from ._dpvim import dpvim
from .run_options import RunOptions
from .clip_check import GradientNormHistogram
from .clip_check import gradient_norm_histogram
from ..releases.trace import DPVITrace

__all__ = [
    "DPVITrace",
    "GradientNormHistogram",
    "ParamLayout",
    "RunOptions",
    "Site",
    "dpvi",
    "dpvim",
    "gradient_norm_histogram",
]
