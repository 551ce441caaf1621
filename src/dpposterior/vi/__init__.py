"""Variational inference: the variational family, site layouts, DPVI and its released trace."""

from .layout import ParamLayout
from .layout import Site
from .dpvi import dpvi
from .trace import DPVITrace

__all__ = [
    "DPVITrace",
    "ParamLayout",
    "Site",
    "dpvi",
]
