"""DP-SGD checkpoints: a killed run resumes, continues the same noise stream, and ends with the same trace."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import ckpt_workload as W
from dpposterior.dpsgd.checkpoint import load_checkpoint

HERE = Path(__file__).resolve().parent


@contextlib.contextmanager
def _crash_after(monkeypatch, chunks: int):
    """Makes the engine raise KeyboardInterrupt (a simulated crash) after storing ``chunks`` chunks."""
    from dpposterior.dpsgd import engine

    store, calls = engine._store, []

    def crash(*a, **k):
        calls.append(1)
        if len(calls) > chunks:
            raise KeyboardInterrupt("simulated crash")
        return store(*a, **k)

    monkeypatch.setattr(engine, "_store", crash)
    try:
        yield
    finally:
        monkeypatch.setattr(engine, "_store", store)


def _start_and_kill(path: Path, key: str = "user") -> None:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]))
    code = "import sys, ckpt_workload; ckpt_workload.main(sys.argv[1:])"
    proc = subprocess.Popen(
        [sys.executable, "-c", code, str(path), key], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    try:
        deadline = time.monotonic() + 120
        while not path.exists():
            if proc.poll() is not None:
                raise AssertionError(
                    f"the run ended before writing a checkpoint: {proc.stderr.read().decode()[-2000:]}"
                )
            if time.monotonic() > deadline:
                raise AssertionError("no checkpoint within 120 s")
            time.sleep(0.05)
        time.sleep(0.3)
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
        proc.stderr.close()


def test_killed_run_resumes_to_the_uninterrupted_trace(tmp_path):
    path = tmp_path / "run.ckpt"
    _start_and_kill(path)
    assert path.exists(), "the killed run left its checkpoint"
    done = load_checkpoint(path, _settings()).steps_done
    assert 0 < done < W.STEPS and done % W.EVERY == 0
    resumed = W.run(checkpoint=path)
    full = W.run()
    np.testing.assert_array_equal(resumed.grads, full.grads)
    np.testing.assert_array_equal(resumed.params, full.params)
    np.testing.assert_array_equal(resumed.final_params, full.final_params)
    assert resumed.privacy == full.privacy and resumed.privacy.num_steps == W.STEPS  # accounted once, T steps
    assert not path.exists(), "a finished run deletes its checkpoint (it holds the noise key)"


def test_os_seeded_run_resumes_the_stored_stream(tmp_path):
    path = tmp_path / "run.ckpt"
    _start_and_kill(path, "os")
    copy = tmp_path / "copy.ckpt"
    shutil.copy(path, copy)
    a = W.run(checkpoint=path, rng_key=None)
    b = W.run(checkpoint=copy, rng_key=None)
    np.testing.assert_array_equal(a.grads, b.grads)  # the stream is the stored one, not a new OS seed
    assert a.privacy.seeded_by == "os"


def test_checkpoint_of_another_run_or_key_is_refused(tmp_path):
    path = tmp_path / "run.ckpt"
    _start_and_kill(path)
    with pytest.raises(ValueError, match="different run: .*noise_multiplier"):
        W.run(checkpoint=path, noise_multiplier=2.0)
    with pytest.raises(ValueError, match="another rng_key"):
        W.run(checkpoint=path, rng_key=8)
    raw = bytearray(path.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    path.write_bytes(bytes(raw))
    with pytest.raises(ValueError, match="checkpoint"):
        W.run(checkpoint=path)


def test_crashed_secure_run_resumes_with_fresh_noise(tmp_path, monkeypatch):
    path = tmp_path / "secure.ckpt"
    with _crash_after(monkeypatch, 3), pytest.raises(KeyboardInterrupt):
        W.run(checkpoint=path, rng_key=None, secure=True, num_steps=200)
    ck = load_checkpoint(path, {**_settings(), "num_steps": 200, "seeded_by": "secure"})
    assert ck.base_key is None and ck.steps_done == 3 * W.CHUNK  # no key stored in secure mode
    resumed = W.run(checkpoint=path, rng_key=None, secure=True, num_steps=200)
    np.testing.assert_array_equal(resumed.grads[: ck.steps_done], ck.grads)  # the checkpointed steps are kept
    assert np.isfinite(resumed.grads).all() and resumed.privacy.seeded_by == "secure"
    assert not path.exists()
    with pytest.raises(ValueError, match="rng_key"):
        W.run(checkpoint=path, rng_key=3, secure=True)


def test_bad_checkpoint_arguments(tmp_path):
    with pytest.raises(ValueError, match="checkpoint_every"):
        W.run(checkpoint=tmp_path / "x", checkpoint_every=0)
    with pytest.raises(ValueError, match="directory"):
        W.run(checkpoint=tmp_path)
    with pytest.raises(TypeError, match="checkpoint must be a file path"):
        W.run(checkpoint=3)


def _settings():
    from dpposterior.dpsgd import default_capacity
    from dpposterior.dpsgd.checkpoint import run_settings

    return run_settings(
        loss=W.loss,
        num_records=W.N,
        num_params=W.D,
        sampling_rate=0.1,
        capacity=default_capacity(W.N, 0.1),
        sampling="packed",
        noise_multiplier=1.0,
        clip=1.0,
        learning_rate=np.full(W.D, 0.01, np.float32),
        beta=np.ones(W.D, np.float32),
        num_steps=W.STEPS,
        accountant="pld",
        delta=1e-5,
        phi0=np.zeros(W.D, np.float32),
        seeded_by="user",
        loss_needs_key=False,
    )


def test_dpvi_passes_checkpoints_through_and_refuses_another_models(tmp_path, monkeypatch):
    import numpyro
    import numpyro.distributions as dist

    from dpposterior import dpvi
    from dpposterior.vi import RunOptions

    def model_a(x):
        mu = numpyro.sample("mu", dist.Normal(0.0, 5.0))
        with numpyro.plate("records", x.shape[0]):
            numpyro.sample("x", dist.Normal(mu, 1.0), obs=x)

    def model_b(x):
        mu = numpyro.sample("mu", dist.Normal(0.0, 5.0))
        with numpyro.plate("records", x.shape[0]):
            numpyro.sample("x", dist.Normal(mu, 2.0), obs=x)

    x = np.random.default_rng(0).normal(1.0, 1.0, 300).astype(np.float32)
    kw = dict(epsilon=2.0, delta=1e-5, num_steps=2500, clip=2.0, rng_key=5)
    path = tmp_path / "dpvi.ckpt"
    options = RunOptions(progress=False, checkpoint=path, checkpoint_every=20)
    with _crash_after(monkeypatch, 2), pytest.raises(KeyboardInterrupt):
        dpvi(model_a, x, run_options=options, **kw)
    assert path.exists()
    with pytest.raises(ValueError, match="different run: loss"):
        dpvi(model_b, x, run_options=options, **kw)
    resumed = dpvi(model_a, x, run_options=options, **kw)
    full = dpvi(model_a, x, run_options=RunOptions(progress=False), **kw)
    np.testing.assert_array_equal(resumed.grads, full.grads)
    assert not path.exists()


@pytest.mark.parametrize("started_with, wrong_key", [(7, 8), (7, None), (None, 7)])
def test_a_refused_resume_names_the_arguments_that_resume(tmp_path, monkeypatch, started_with, wrong_key):
    """Each refusal names what resumes the run, and following it does (it once suggested rng_key=None for
    a keyed run's checkpoint, which was then refused as a different run)."""
    path = tmp_path / "run.ckpt"
    with _crash_after(monkeypatch, 3), pytest.raises(KeyboardInterrupt):
        W.run(checkpoint=path, rng_key=started_with)
    with pytest.raises(ValueError) as refused:
        W.run(checkpoint=path, rng_key=wrong_key)
    message = str(refused.value)
    if started_with is None:
        assert "resume with rng_key=None" in message
    else:
        assert (
            "resume with the rng_key that run was started with" in message or "resume with that same rng_key" in message
        )
        assert "or rng_key=None to continue" not in message
    done = W.run(checkpoint=path, rng_key=started_with)  # the suggested arguments resume it
    assert done.privacy.num_steps == W.STEPS and not path.exists()
