"""DPVITrace.load refuses a privacy record that contradicts the trace, whatever its checksum says.

The checksum is an unkeyed SHA-256 that anyone can recompute, so each forged file here carries a valid
one (written by ``write_checked_npz``): only the consistency check between the record, the settings and
the arrays can refuse it.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from dpposterior._io import write_checked_npz
from dpposterior.privacy import Ledger, PrivacySpent, dpsgd_epsilon
from dpposterior.vi import DPVITrace, ParamLayout

SIGMA, Q, T, DELTA, CLIP = 16.7, 0.1, 2000, 1e-5, 1.0
NAMES = ("phi", "grads", "final_phi", "beta", "learning_rate")


def _record(sigma=SIGMA, steps=T, epsilon=None, **kw):
    eps = dpsgd_epsilon(sigma, DELTA, Q, steps) if epsilon is None else epsilon
    fields = dict(
        epsilon=eps,
        delta=DELTA,
        neighbouring="add_remove",
        accountant="pld",
        mechanism="poisson_subsampled_gaussian",
        noise_multiplier=sigma,
        sampling_rate=Q,
        num_steps=steps,
        seeded_by="os",
        details=(("clip", CLIP), ("sampling", "poisson"), ("dataset_size", "public")),
    )
    fields.update(kw)
    return PrivacySpent(**fields)


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """A release as dpvi makes it: gradients carrying noise of std sigma C / beta, a matching record."""
    rng = np.random.default_rng(0)
    beta = np.array([1.0, 1.0, 100.0, 100.0])
    grads = 0.3 + rng.normal(size=(T, 4)) * SIGMA * CLIP / beta
    trace = DPVITrace(
        phi=rng.normal(size=(T, 4)),
        grads=grads,
        final_phi=np.zeros(4),
        beta=beta,
        learning_rate=0.01,
        clip=CLIP,
        noise_multiplier=SIGMA,
        sampling_rate=Q,
        num_steps=T,
        dataset_size=500,
        num_mc=1,
        layout=ParamLayout.flat(2),
        privacy=_record(),
        model_name="m",
    )
    path = trace.save(tmp_path_factory.mktemp("trace") / "trace.npz")
    with np.load(path) as z:
        meta = json.loads(z["metadata"].tobytes())
        arrays = {k: z[k] for k in NAMES}
    return trace, path, meta, arrays


def _forge(tmp_path, meta, arrays, privacy, **settings):
    """The saved file with another privacy record (and settings), under a freshly computed checksum."""
    forged = dict(meta, privacy=privacy.to_dict(), **settings)
    return write_checked_npz(tmp_path / "forged.npz", arrays, json.dumps(forged, sort_keys=True))


def test_a_consistent_release_loads_and_keeps_its_record(saved):
    trace, path, _, _ = saved
    assert DPVITrace.load(path).privacy == trace.privacy


def test_a_record_of_fewer_steps_and_more_noise_is_refused(saved, tmp_path):
    # 10 steps at sigma 1000 claimed for a 2,000-row trace of sigma 16.7 (epsilon about 1 each): a
    # ledger would compose two copies of the forged record to under 0.01
    trace, _, meta, arrays = saved
    forged = _record(sigma=1000.0, steps=10)
    book = Ledger()
    book.add(forged)
    book.add(forged)
    assert book.total(2 * DELTA).epsilon < 0.01  # what the ledger would have believed
    with pytest.raises(ValueError, match=r"noise_multiplier=1000.0, but the settings' noise_multiplier give 16.7"):
        DPVITrace.load(_forge(tmp_path, meta, arrays, forged))
    with pytest.raises(ValueError, match=r"num_steps=10, but the settings' num_steps give 2000"):
        DPVITrace.load(_forge(tmp_path, meta, arrays, _record(steps=10)))


def test_a_record_whose_epsilon_is_not_its_settings_is_refused(saved, tmp_path):
    _, _, meta, arrays = saved
    with pytest.raises(ValueError, match=r"claims epsilon=0.0007, but the pld accountant gives 1\.0"):
        DPVITrace.load(_forge(tmp_path, meta, arrays, _record(epsilon=0.0007)))


@pytest.mark.parametrize(
    "change,match",
    [
        (dict(neighbouring="replace_one"), "'replace_one' neighbours"),
        (dict(mechanism="gaussian"), "names the mechanism 'gaussian'"),
        (dict(sampling_rate=0.001), "sampling_rate=0.001"),
        (dict(details=(("clip", 50.0),)), "clip=50.0, but the settings' clip give 1.0"),
        (dict(accountant="made-up"), "names the accountant 'made-up'"),
    ],
)
def test_a_record_that_names_other_settings_is_refused(saved, tmp_path, change, match):
    _, _, meta, arrays = saved
    with pytest.raises(ValueError, match=match):
        DPVITrace.load(_forge(tmp_path, meta, arrays, _record(**change)))


def test_settings_rewritten_to_match_a_forged_record_are_caught_by_the_gradients(saved, tmp_path):
    # record and settings agree on sigma 1000 (epsilon recomputed): only the arrays can tell, and the
    # released gradients carry the noise of sigma 16.7
    _, _, meta, arrays = saved
    with pytest.raises(ValueError, match="does not fit the released gradients"):
        DPVITrace.load(_forge(tmp_path, meta, arrays, _record(sigma=1000.0), noise_multiplier=1000.0))
    # and a private record for a trace whose settings say no noise was added
    with pytest.raises(ValueError, match="noise multiplier is 0"):
        DPVITrace.load(_forge(tmp_path, meta, arrays, _record(), noise_multiplier=0.0))


def test_save_refuses_what_load_would_refuse(saved, tmp_path):
    trace, _, _, _ = saved
    import dataclasses

    bad = dataclasses.replace(trace, privacy=_record(epsilon=0.0007))
    with pytest.raises(ValueError, match="nothing was written"):
        bad.save(tmp_path / "bad.npz")
    assert not (tmp_path / "bad.npz").exists()
