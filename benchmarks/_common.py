"""Shared pieces of the benchmark scripts: the single-threaded restart, the clock, the logistic loss.

Import this module BEFORE JAX in a script: :func:`single_thread_restart` must run before JAX starts.
"""

from __future__ import annotations

import os
import sys
import time

SINGLE_THREAD_FLAGS = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
_ENV = "DPSGD_BENCH_SINGLE_THREAD"


def single_thread_restart(script: str) -> None:
    """With ``--single-thread`` on the command line, re-executes ``script`` with XLA on one thread.

    XLA reads its flags when JAX starts, so the flags must be in the environment of a fresh process.
    """
    if "--single-thread" in sys.argv[1:] and os.environ.get(_ENV) != "1":
        env = dict(os.environ, **{_ENV: "1"},
                   XLA_FLAGS=(os.environ.get("XLA_FLAGS", "") + " " + SINGLE_THREAD_FLAGS).strip())
        os.execve(sys.executable, [sys.executable, os.path.abspath(script), *sys.argv[1:]], env)


def clock():
    """The benchmark clock: wall time, or process CPU time in a ``--single-thread`` process."""
    return time.process_time if os.environ.get(_ENV) == "1" else time.perf_counter


def logistic_loss(w, record):
    """Per-record logistic regression loss (labels in {0, 1})."""
    import jax
    import jax.numpy as jnp

    x, y = record
    z = jnp.dot(x, w)
    return jax.nn.softplus(z) - y * z
