"""benchmarks/peers.py --quick --no-build runs without the peers' venvs (no torch, no download, no build)."""

from __future__ import annotations

import re
import sys


def test_peers_benchmark_quick_without_venvs(capsys, tmp_path, benchmark_script):
    module = benchmark_script("peers")
    venvs = tmp_path / "venvs"  # empty: as on a fresh clone, whatever this machine has built
    assert module.main(["--quick", "--no-build", "--venv-dir", str(venvs)]) == 0
    out = capsys.readouterr().out
    for peer in ("opacus", "d3p"):
        assert f"SKIPPED {peer}: no built venv at {venvs / peer} and --no-build given" in out
    assert not venvs.exists()  # nothing was built
    assert "torch" not in sys.modules
    row = re.search(r"^ +tiny +2,000 +20 +0\.1 +200 +100 +([\d.]+) +- +- .*not measured$", out, re.M)
    assert row and float(row.group(1)) > 0
    assert re.search(r"tiny +ours: +[\d.]+ ms +fixed", out)
    assert "load average during the run" in out


def test_peer_worker_protocol(tmp_path, benchmark_script):
    """A worker's PEER_RESULT line is read back; a failing worker is reported, not raised."""
    module = benchmark_script("peers")
    good = tmp_path / "good.py"
    good.write_text(
        "import json, sys\ncfg = json.loads(sys.argv[1])\n"
        "print('noise')\nprint('PEER_RESULT ' + json.dumps({'per_step': cfg['n'] * 1e-3}))\n"
    )
    bad = tmp_path / "bad.py"
    bad.write_text("raise SystemExit('no torch here')\n")
    out = module.run_worker(sys.executable, str(good), {"n": 3}, timeout=60)
    assert out["per_step"] == 3e-3 and len(out["load"]) == 2
    err = module.run_worker(sys.executable, str(bad), {"n": 3}, timeout=60)
    assert "no torch here" in err["error"]
