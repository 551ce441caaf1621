"""DPSGDTrace.load refuses a privacy record that contradicts the release (the checksum cannot: anyone
can recompute it)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from dpposterior._io import write_checked_npz
from dpposterior.dpsgd import DPSGDTrace
from dpposterior.privacy import PrivacySpent, dpsgd_epsilon

SIGMA, Q, T, DELTA, CLIP = 2.0, 0.05, 300, 1e-5, 0.5
NAMES = ("params", "grads", "final_params", "learning_rate", "beta")


def _record(sigma=SIGMA, steps=T, epsilon=None):
    eps = dpsgd_epsilon(sigma, DELTA, Q, steps) if epsilon is None else epsilon
    return PrivacySpent(
        epsilon=eps,
        delta=DELTA,
        neighbouring="add_remove",
        accountant="pld",
        mechanism="poisson_subsampled_gaussian",
        noise_multiplier=sigma,
        sampling_rate=Q,
        num_steps=steps,
        seeded_by="os",
        details=(("clip", CLIP), ("sampling", "poisson")),
    )


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    rng = np.random.default_rng(1)
    trace = DPSGDTrace(
        params=rng.normal(size=(T, 3)),
        grads=rng.normal(size=(T, 3)) * SIGMA * CLIP,
        final_params=np.zeros(3),
        learning_rate=np.full(3, 0.1),
        beta=np.ones(3),
        clip=CLIP,
        noise_multiplier=SIGMA,
        sampling_rate=Q,
        num_steps=T,
        num_records=1000,
        privacy=_record(),
    )
    path = trace.save(tmp_path_factory.mktemp("dpsgd") / "trace.npz")
    with np.load(path) as z:
        meta = json.loads(z["metadata"].tobytes())
        arrays = {k: z[k] for k in NAMES}
    return trace, path, meta, arrays


def _forge(tmp_path, meta, arrays, privacy, **settings):
    text = json.dumps(dict(meta, privacy=privacy.to_dict(), **settings), sort_keys=True)
    return write_checked_npz(tmp_path / "forged.npz", arrays, text, compress=False)


def test_a_consistent_release_round_trips(saved):
    trace, path, _, _ = saved
    assert DPSGDTrace.load(path) == trace


def test_a_forged_record_is_refused_naming_what_disagrees(saved, tmp_path):
    _, _, meta, arrays = saved
    with pytest.raises(ValueError, match=r"num_steps=10, but the settings' num_steps give 300"):
        DPSGDTrace.load(_forge(tmp_path, meta, arrays, _record(sigma=SIGMA, steps=10)))
    with pytest.raises(ValueError, match=r"claims epsilon=0.01, but the pld accountant gives"):
        DPSGDTrace.load(_forge(tmp_path, meta, arrays, _record(epsilon=0.01)))
    with pytest.raises(ValueError, match="does not fit the released gradients"):
        DPSGDTrace.load(_forge(tmp_path, meta, arrays, _record(sigma=50.0), noise_multiplier=50.0))


def test_save_refuses_a_record_that_contradicts_the_release(saved, tmp_path):
    import dataclasses

    trace, _, _, _ = saved
    with pytest.raises(ValueError, match="nothing was written"):
        dataclasses.replace(trace, privacy=_record(steps=10)).save(tmp_path / "bad.npz")
