"""Importing the package starts no JAX backend.

JAX reads XLA_FLAGS (and the platform settings) when its first backend starts. A module that computes
with JAX at import starts it, so flags set after ``import dpposterior`` (by a user, by
``dpposterior.experiments.xla``, or by the test suite's conftest, which pytest runs after importing the
warning categories named in pyproject.toml) would silently not apply in that process while applying in
its subprocesses.
"""

from __future__ import annotations

import subprocess
import sys

CHECK = """
import importlib, pkgutil
import jax._src.xla_bridge as xb
import dpposterior
names = [m.name for m in pkgutil.walk_packages(dpposterior.__path__, "dpposterior.")]
for name in names:
    importlib.import_module(name)
    if xb._backends:
        raise SystemExit(f"importing {name} started a JAX backend")
print(len(names))
"""


def test_importing_every_module_starts_no_jax_backend():
    done = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert int(done.stdout.split()[-1]) > 100  # every module was imported


def test_the_check_sees_a_backend_started_at_import():
    start = "import jax.numpy as jnp; float(jnp.ones(()))\n"
    done = subprocess.run(
        [sys.executable, "-c", CHECK.replace("import dpposterior\n", "import dpposterior\n" + start)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode != 0 and "started a JAX backend" in done.stdout + done.stderr
