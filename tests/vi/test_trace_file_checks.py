"""``DPVITrace.load`` on a file that is truncated, has a flipped byte, or was rewritten with a valid checksum:
an error naming the file or the field, or the same trace; never a silently different one.
"""

from __future__ import annotations

import io
import json

import jax
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dpposterior._io import array_digest as _digest
from dpposterior.vi import DPVITrace
from input_checks import FAST
from release_fakes import fake_trace

# DPVITrace.load: truncated, tampered with, or another version (tests/vi covers the basic four)
ARRAYS = ("phi", "grads", "final_phi", "beta", "learning_rate")


def _saved(tmp_path):
    path = fake_trace(T=12).save(tmp_path / "t.npz")
    return path, path.read_bytes()


def _rewrite(path, contents, meta=None):
    """Writes ``contents`` back with a freshly computed checksum (a deliberate tamperer's file)."""
    contents = dict(contents)
    text = contents["metadata"].tobytes().decode() if meta is None else json.dumps(meta, sort_keys=True)
    contents["metadata"] = np.frombuffer(text.encode(), dtype=np.uint8)
    contents["checksum"] = np.frombuffer(_digest({k: contents[k] for k in ARRAYS}, text).encode(), dtype=np.uint8)
    np.savez_compressed(path, **contents)


def _contents(raw):
    with np.load(io.BytesIO(raw)) as z:
        return {k: z[k] for k in z.files}


@FAST
@given(position=st.integers(0, 10**6), flip=st.integers(1, 255))
def test_trace_load_with_a_flipped_byte_is_an_error_or_the_same_trace(tmp_path_factory, position, flip):
    path, raw = _saved(tmp_path_factory.mktemp("flip"))
    original = DPVITrace.load(path)
    data = bytearray(raw)
    data[position % len(data)] ^= flip
    path.write_bytes(bytes(data))
    try:
        back = DPVITrace.load(path)
    except ValueError as e:
        assert str(path) in str(e)
    else:  # the flip hit bytes that carry no content (e.g. a zip timestamp): nothing changed
        for k in ARRAYS:
            np.testing.assert_array_equal(getattr(back, k), getattr(original, k))
        assert back.privacy == original.privacy and back.layout == original.layout


@FAST
@given(keep=st.floats(0.0, 0.999))
def test_trace_load_truncated_anywhere_is_an_error(tmp_path_factory, keep):
    path, raw = _saved(tmp_path_factory.mktemp("trunc"))
    path.write_bytes(raw[: int(len(raw) * keep)])
    with pytest.raises(ValueError, match="t.npz"):
        DPVITrace.load(path)


@pytest.mark.parametrize(
    "change,match",
    [
        (lambda c, m: c.__setitem__("phi", np.full_like(c["phi"], np.nan)), "NaN or inf"),
        (lambda c, m: c.__setitem__("phi", c["phi"][:5]), "shape"),
        (lambda c, m: c.__setitem__("grads", c["grads"].astype(str)), "real numbers"),
        (lambda c, m: c.__setitem__("beta", np.ones(3)), "beta"),
        (lambda c, m: m.pop("clip"), "clip"),
        (lambda c, m: m.__setitem__("clip", "big"), "clip"),
        (lambda c, m: m.__setitem__("num_steps", 12.5), "num_steps"),
        (lambda c, m: m.__setitem__("num_steps", 99), "num_steps"),
        (lambda c, m: m.__setitem__("sampling_rate", 0.0), "sampling_rate"),
        (lambda c, m: m.__setitem__("privacy", {"epsilon": 1.0}), "privacy"),
        (lambda c, m: m.__setitem__("layout", {"sites": [{"name": "w"}]}), "layout"),
        (lambda c, m: m.__setitem__("version", "1"), "version"),
    ],
)
def test_trace_load_rewritten_with_a_valid_checksum_is_still_checked(tmp_path, change, match):
    path, raw = _saved(tmp_path)
    contents = _contents(raw)
    meta = json.loads(contents["metadata"].tobytes().decode())
    change(contents, meta)
    _rewrite(path, contents, meta)
    with pytest.raises(ValueError, match=match):
        DPVITrace.load(path)


def test_trace_load_metadata_that_is_not_a_json_object(tmp_path):
    path, raw = _saved(tmp_path)
    contents = _contents(raw)
    for text in ("[1, 2]", '"trace"', "null"):
        contents["metadata"] = np.frombuffer(text.encode(), dtype=np.uint8)
        contents["checksum"] = np.frombuffer(_digest({k: contents[k] for k in ARRAYS}, text).encode(), np.uint8)
        np.savez_compressed(path, **contents)
        with pytest.raises(ValueError, match="metadata"):
            DPVITrace.load(path)


def test_trace_load_rejects_a_pickled_object_array(tmp_path):
    path, raw = _saved(tmp_path)
    contents = _contents(raw)
    contents["phi"] = np.array([object()] * 3, dtype=object)
    np.savez(path, **contents)  # needs pickle to read: refused (allow_pickle=False)
    with pytest.raises(ValueError, match="not a readable DPVI trace"):
        DPVITrace.load(path)


def test_an_untouched_trace_file_loads(tmp_path):
    """Power check of the load tests above: the file they tamper with is valid to begin with, and
    the stricter load still reads a simulated trace (dataset_size = num_mc = 0, not private)."""
    path, _ = _saved(tmp_path)
    assert DPVITrace.load(path).num_params == 4
    from dpposterior.noise_aware.simulate import simulate_trace

    sim = simulate_trace(jax.random.key(0), np.zeros(4), 1.0, num_steps=20)
    back = DPVITrace.load(sim.save(tmp_path / "sim.npz"))
    np.testing.assert_array_equal(back.phi, sim.phi)
    assert back.privacy == sim.privacy
