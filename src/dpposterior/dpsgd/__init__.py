"""The DP-SGD engine: exact Poisson subsampling, per-example clipping, preconditioning, the trace.

Public:
  dpsgd: a private DP-SGD run returning a :class:`DPSGDTrace` with its ``PrivacySpent``.
  make_dpsgd_run: the pure, vmappable core (no accounting) for many replicates at once.
  DPSGDTrace: the release.
  step_keys, default_capacity: how a step's randomness and buffer are derived.
Non-private debug tools (never release their output):
  poisson_sample_indices, debug_batch_sizes, per_example_gradients, clip_gradients.
"""

from .engine import clip_gradients
from .engine import dpsgd
from .engine import make_dpsgd_run
from .engine import per_example_gradients
from .sampling import debug_batch_sizes
from .sampling import default_capacity
from .sampling import poisson_sample_indices
from .sampling import step_keys
from .trace import DPSGDTrace

__all__ = [
    "DPSGDTrace",
    "clip_gradients",
    "debug_batch_sizes",
    "default_capacity",
    "dpsgd",
    "make_dpsgd_run",
    "per_example_gradients",
    "poisson_sample_indices",
    "step_keys",
]
