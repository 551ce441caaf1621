"""XLA settings for experiment processes on CPU hosts (the CLI and the benchmarks; never tests).

Two process-wide XLA CPU flags matter for the coverage engine. Both are read once, when JAX creates
its backend, so they must be in ``XLA_FLAGS`` before the first computation of the process:

* ``--xla_cpu_experimental_ynn_fusion_type=-reduce``: the jaxlib in use (0.10) lowers small reductions
  of the per-record ELBO gradients to YNNPACK fusions that run several times slower than XLA's own loops
  (on the vmapped DP-SGD step of Beta-Bernoulli with 10 Monte Carlo draws). Removing the reduce fusion type keeps
  the other YNNPACK fusions (the matmuls of the Poisson sampler) and restores the speed.
* ``--xla_force_host_platform_device_count=D``: splits the CPU into D XLA devices; the replicate
  axis is then split over them (``shard_map``, :mod:`.replicates`). One CPU device does not keep
  two cores busy; two devices use both.

Results depend on these flags only in the last bits of floating point (different loop code, same
arithmetic); the Ray backend gives its workers the driver's ``XLA_FLAGS`` so that backends agree bit
for bit.
"""

from __future__ import annotations

import functools
import mmap
import os
from pathlib import Path

YNN_REDUCE_FLAG = "--xla_cpu_experimental_ynn_fusion_type=-reduce"
DEVICE_COUNT_FLAG = "--xla_force_host_platform_device_count"


def backend_initialized() -> bool:
    """Whether JAX has created its backends in this process (after which XLA_FLAGS are ignored)."""
    try:
        from jax._src import xla_bridge

        return bool(xla_bridge.backends_are_initialized())
    except Exception:  # noqa: BLE001 - private API moved: assume the worst
        return True


@functools.lru_cache(maxsize=1)
def ynn_flag_supported() -> bool:
    """Whether this jaxlib knows the YNN fusion-type flag (an unknown XLA flag aborts the process)."""
    try:
        import jaxlib
    except ImportError:
        return False
    needle = b"xla_cpu_experimental_ynn_fusion_type"
    for lib in Path(jaxlib.__file__).parent.glob("*.so"):
        try:
            with open(lib, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
                if m.find(needle) >= 0:
                    return True
        except (OSError, ValueError):
            continue
    return False


def configure_xla_cpu(devices: int | None = None, *, ynn_reduce_fix: bool = True) -> dict[str, object]:
    """Adds the coverage engine's XLA CPU flags to ``XLA_FLAGS`` if JAX has not started yet.

    Flags the user already set in ``XLA_FLAGS`` are kept and win. Call it first thing in a process
    that runs experiments (the ``coverage`` command and the benchmarks do); it does nothing once JAX
    has created its backend, and says so in the returned dict.

    Args:
      devices: the number of XLA CPU devices to create (None: leave the device count alone).
      ynn_reduce_fix: add :data:`YNN_REDUCE_FLAG` when this jaxlib supports it.

    Returns:
      ``{"applied": bool, "xla_flags": the resulting XLA_FLAGS, "reason": str}``.
    """
    current = os.environ.get("XLA_FLAGS", "")
    if backend_initialized():
        return {"applied": False, "xla_flags": current, "reason": "JAX backend already initialised"}
    flags = current.split()
    if ynn_reduce_fix and ynn_flag_supported() and not any("ynn_fusion_type" in f for f in flags):
        flags.append(YNN_REDUCE_FLAG)
    if devices is not None:
        if isinstance(devices, bool) or not isinstance(devices, int) or devices < 1:
            raise ValueError(f"devices must be an integer >= 1, got {devices!r}")
        if not any(f.startswith(DEVICE_COUNT_FLAG) for f in flags):
            flags.append(f"{DEVICE_COUNT_FLAG}={devices}")
    os.environ["XLA_FLAGS"] = " ".join(flags)
    return {"applied": True, "xla_flags": os.environ["XLA_FLAGS"], "reason": ""}
