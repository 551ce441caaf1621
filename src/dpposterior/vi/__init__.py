"""Variational inference: the variational family, site layouts, DPVI, its released trace, and a private
histogram of the per-record gradient norms that shows whether the clip was too small."""

from ..releases.layout import ParamLayout
from ..releases.layout import Site
from .dpvi import dpvi
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
    "gradient_norm_histogram",
]
