"""A DP-SGD run for the checkpoint tests, importable by the test and by a subprocess that gets killed."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

N, D, STEPS, CHUNK, EVERY = 400, 3, 400, 20, 20


def loss(w, record):
    x, y = record
    z = x @ w
    return jnp.logaddexp(0.0, z) - y * z


def data():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(N, D)).astype(np.float32)
    return x, (rng.random(N) < 0.5).astype(np.float32)


def run(checkpoint=None, rng_key=7, secure=False, **overrides):
    from dpposterior.dpsgd import dpsgd

    kw = dict(
        noise_multiplier=1.0,
        clip=1.0,
        sampling_rate=0.1,
        num_steps=STEPS,
        learning_rate=0.01,
        delta=1e-5,
        chunk_steps=CHUNK,
        progress=False,
        checkpoint=checkpoint,
        checkpoint_every=EVERY,
        rng_key=rng_key,
        secure=secure,
    )
    kw.update(overrides)
    return dpsgd(loss, np.zeros(D, np.float32), data(), **kw)


def main(argv: list[str]) -> None:
    """The subprocess of the kill test: a run slowed down (a sleep per chunk) so it is killed part-way."""
    import time

    from dpposterior.dpsgd import engine

    store = engine._store

    def slow_store(*a, **k):
        time.sleep(0.2)
        return store(*a, **k)

    engine._store = slow_store
    run(checkpoint=argv[0], rng_key=None if len(argv) > 1 and argv[1] == "os" else 7)
