"""DP-SGD throughput against the peers: our engine, Opacus (PyTorch, CPU) and d3p (NumPyro DPVI).

Logistic regression (d parameters, no bias), the same q, sigma, C and step counts for all three, on
three rows: Adult-sized (N = 30,000, d = 100, q = 0.1), N = 1,000,000 with d = 100 (q = 0.01, batches of
about 10,000), and d = 10,000 (N = 10,000, q = 0.1: 400 MB of float32 data, batches of about 1,000).

- ``ours``: ``dpposterior.dpsgd.dpsgd(..., sampling="packed")``, the whole public call (exact Poisson
  sampling), data passed as device arrays (the documented way for large data);
- ``opacus``: Opacus's ``PrivacyEngine.make_private(..., poisson_sampling=True)`` on an
  ``nn.Linear(d, 1)`` (benchmarks/_peer_opacus.py: batch gathering vectorised; timed with torch on
  1 thread and on all CPUs, the faster reported);
- ``d3p``: ``d3p.svi.DPSVI`` with its standard fixed-size subsampling (d3p has no Poisson sampling;
  benchmarks/_peer_d3p.py).

Each peer runs in its own virtual environment, built by this script on first use from PyPI with
pinned versions (benchmarks/.venvs/<peer>; see PEERS below). Every (row, implementation) is a fresh
worker process that makes the same data from the same seed, times the marginal cost of a step (a long
run minus a short run over the extra steps; compilation and warm-up excluded; best of several
interleaved short/long repeats) and reports its peak resident memory. Reported per row: ms per step,
records per second (the expected batch qN over the step time), the peer's time over ours, and the
memory: the worker's peak resident set (VmHWM) minus that of the same worker idle (framework loaded,
no data), so it includes the N x d float32 data and any copies the framework makes of it.

Usage:
  .venv/bin/python benchmarks/peers.py               # the recorded benchmark (builds the venvs once)
  .venv/bin/python benchmarks/peers.py --quick       # tiny sizes, seconds (smoke test)
  .venv/bin/python benchmarks/peers.py --quick --no-build   # never builds: absent peers are skipped

Target (issue 11): ours faster than both peers on every row.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _peer_common import RESULT_TAG  # noqa: E402

SIGMA = 1.0
CLIP = 1.0
LR = 1e-3
SEED = 0

#: (label, N, d, q, short steps, long steps): the same for every implementation
ROWS = [
    ("Adult-sized", 30_000, 100, 0.1, 20, 120),
    ("N = 1,000,000", 1_000_000, 100, 0.01, 5, 45),
    ("d = 10,000", 10_000, 10_000, 0.1, 3, 23),
]
QUICK_ROWS = [("tiny", 2_000, 20, 0.1, 5, 105)]

#: peer: (worker script, pinned requirements installed into benchmarks/.venvs/<peer>)
PEERS = {
    # torch 2.13.0 is pinned (the CPU build); never an unpinned torch, which pulls the CUDA build
    "opacus": ("_peer_opacus.py", ["torch==2.13.0", "opacus==1.6.0", "numpy==2.4.6"]),
    # d3p 0.2.0 (its last release) names jax 0.3.23 / numpyro 0.10.1 as its tested versions, but
    # jaxlib has no Python 3.11 wheel before 0.4.13: the oldest JAX that installs here, with the
    # numpyro of that time and the scipy / ml_dtypes that jax 0.4.13 still imports cleanly
    "d3p": ("_peer_d3p.py", ["d3p==0.2.0", "jax==0.4.13", "jaxlib==0.4.13", "numpyro==0.12.1",
                             "scipy==1.11.4", "ml_dtypes==0.2.0", "numpy==1.26.4"]),
}
#: timed variants of each implementation (the fastest is the row's figure); Opacus's threads:
#: torch's OpenMP pool on 2 threads was 10x slower than 1 thread on this shared machine (spinning
#: under other jobs' load), so both are timed. grad_sample_mode "hooks" (Opacus's default) was the
#: fastest in trials here: "ew" (expanded weights) 6.2 against 5.5 ms per step on the Adult-sized row
#: (1 thread), "functorch" 24.5 against 3.4 ms on a tiny one (2 threads); "ew" can be passed as mode
OPACUS_VARIANTS = [{"mode": "hooks", "threads": 1}, {"mode": "hooks", "threads": os.cpu_count() or 1}]
#: ours and d3p (JAX): XLA's default threading, and the process pinned to one CPU. d3p's steps were
#: bimodal between processes with the default thread pool under other jobs' load (Adult-sized row:
#: 1.5-6 ms or 28-42 ms per step), and steadily about 1 ms pinned to one CPU; ours gets the same choice
JAX_VARIANTS = [{"pin": False}, {"pin": True}]


def venv_python(venv_dir: Path, peer: str) -> Path:
    return venv_dir / peer / "bin" / "python"


def ensure_venv(venv_dir: Path, peer: str, build: bool) -> tuple[Path | None, str]:
    """The peer's Python, building its venv if needed and allowed; (None, why) when unavailable."""
    _, reqs = PEERS[peer]
    py = venv_python(venv_dir, peer)
    marker = venv_dir / peer / ".peers-requirements"
    if py.exists() and marker.exists() and marker.read_text().split() == reqs:
        return py, ""
    if not build:
        return None, f"no built venv at {venv_dir / peer} and --no-build given"
    print(f"building {venv_dir / peer}: pip install {' '.join(reqs)} (once; minutes)", flush=True)
    venv_dir.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv_dir / peer)], check=True)
    r = subprocess.run([str(py), "-m", "pip", "install", "-q", *reqs], capture_output=True, text=True)
    if r.returncode != 0:
        tail = "\n".join(line for line in (r.stdout + r.stderr).splitlines()
                         if "is ignored: it is neither" not in line)[-2000:]
        return None, f"pip install failed for {peer}:\n{tail}"
    marker.write_text("\n".join(reqs) + "\n")
    return py, ""


def run_worker(python: str, script: str, cfg: dict, env_extra: dict | None = None,
               timeout: float = 900) -> dict:
    """Runs one worker process and returns its result (or {"error": ...})."""
    env = dict(os.environ, **(env_extra or {}))
    env.pop("XLA_FLAGS", None)  # every JAX worker with XLA's defaults
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    load0 = os.getloadavg()[0]
    try:
        r = subprocess.run([python, str(HERE / script), json.dumps(cfg)], capture_output=True,
                           text=True, timeout=timeout, env=env, cwd=str(HERE))
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    for line in r.stdout.splitlines():
        if line.startswith(RESULT_TAG):
            out = json.loads(line[len(RESULT_TAG):])
            out["load"] = (load0, os.getloadavg()[0])
            return out
    return {"error": f"exit {r.returncode}: " + (r.stderr or r.stdout).strip()[-1500:]}


def run_ours(cfg: dict, in_process: bool) -> dict:
    if not in_process:
        return run_worker(sys.executable, "_peer_ours.py", cfg)
    import _peer_ours  # the quick smoke test: no second JAX start-up

    load0 = os.getloadavg()[0]
    out = _peer_ours.run_row(cfg)
    out["load"] = (load0, os.getloadavg()[0])
    out["detail"] += " (in-process: memory not per row)"
    return out


def resolved(r: dict | None) -> bool:
    """A per-step time above the timing noise (the long run measurably longer than the short one)."""
    return bool(r) and r.get("per_step", 0) > 1e-9


def fmt_ms(r: dict | None) -> str:
    if not r or "per_step" not in r:
        return "-"
    return f"{1e3 * r['per_step']:.3f}" if resolved(r) else "in noise"


def fmt_rps(r: dict | None, batch: float) -> str:
    return f"{batch / r['per_step']:,.0f}" if resolved(r) else "-"


def fmt_mb(r: dict | None) -> str:
    return "-" if not r or "peak_kb" not in r else f"{(r['peak_kb'] - r['idle_kb']) / 1024:,.0f}"


def fmt_run_mb(r: dict | None) -> str:
    if not r or r.get("loaded_kb") is None:
        return "-"
    return f"{(r['run_peak_kb'] - r['loaded_kb']) / 1024:,.0f}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="tiny sizes, seconds (smoke test)")
    ap.add_argument("--no-build", action="store_true",
                    help="never build a peer's venv (absent peers are skipped with a message)")
    ap.add_argument("--venv-dir", default=str(HERE / ".venvs"), help="where the peers' venvs live")
    ap.add_argument("--peers", default="opacus,d3p", help="comma-separated peers to run ('' for none)")
    ap.add_argument("--rows", default=None,
                    help="comma-separated 0-based indices of the rows to run (default: all)")
    ap.add_argument("--repeats", type=int, default=None, help="interleaved short/long repeats per worker")
    args = ap.parse_args(argv)

    rows = QUICK_ROWS if args.quick else ROWS
    if args.rows:
        rows = [rows[int(i)] for i in args.rows.split(",")]
    repeats = args.repeats or (2 if args.quick else 3)
    peers = [p for p in args.peers.split(",") if p]
    venv_dir = Path(args.venv_dir)

    pythons, skipped = {}, {}
    for peer in peers:
        if peer not in PEERS:
            ap.error(f"unknown peer {peer!r} (known: {', '.join(PEERS)})")
        py, why = ensure_venv(venv_dir, peer, build=not args.no_build)
        if py is None:
            skipped[peer] = why
            print(f"SKIPPED {peer}: {why}")
        else:
            pythons[peer] = str(py)

    print(f"DP-SGD throughput against peers: logistic regression, sigma={SIGMA}, C={CLIP}, "
          f"lr={LR} (sum of clipped gradients; d3p: lr x batch on its mean)")
    print(f"{os.cpu_count()} CPUs, {platform.processor() or platform.machine()}, Python "
          f"{platform.python_version()}; wall time; marginal per-step time (long run minus short run, "
          f"over the extra steps), best of {repeats} interleaved repeats, compile excluded; "
          "one fresh worker process per row and implementation")

    results = []
    for label, n, d, q, short, long in rows:
        cfg = dict(n=n, d=d, q=q, sigma=SIGMA, clip=CLIP, lr=LR, seed=SEED, short=short, long=long,
                   repeats=repeats)
        row = {"label": label, "cfg": cfg, "runs": {}}
        # --quick: ours in this process, in chunks of the short run (one compilation, seconds)
        if args.quick:
            row["runs"]["ours"] = [run_ours(dict(cfg, chunk=short), in_process=True)]
        else:
            row["runs"]["ours"] = [run_ours(dict(cfg, **v), in_process=False) for v in JAX_VARIANTS]
        if "opacus" in pythons:
            row["runs"]["opacus"] = [
                run_worker(pythons["opacus"], PEERS["opacus"][0], dict(cfg, mode=v["mode"]),
                           {"PEER_THREADS": str(v["threads"])}) for v in OPACUS_VARIANTS]
        if "d3p" in pythons:
            row["runs"]["d3p"] = [run_worker(pythons["d3p"], PEERS["d3p"][0], dict(cfg, **v))
                                  for v in JAX_VARIANTS]
        results.append(row)
        print(f"  {label}: done", flush=True)

    def best(row, name):
        ok = [r for r in row["runs"].get(name, []) if "per_step" in r]
        return min(ok, key=lambda r: r["per_step"]) if ok else None

    names = ["ours"] + peers
    hdr = (f"{'row':>14} {'N':>10} {'d':>7} {'q':>5} {'qN':>7} {'steps':>7} "
           + " ".join(f"{n + ' ms':>10}" for n in names)
           + "".join(f" {p + '/ours':>12}" for p in peers) + f" {'target: ours fastest':>26}")
    print("\nms per step (marginal); ratio = peer time / our time (above 1: ours faster)"
          + ("  [--quick: a smoke test at tiny sizes, not a measurement]" if args.quick else ""))
    print(hdr)
    print("-" * len(hdr))
    all_met = True
    for row in results:
        c = row["cfg"]
        b = {nm: best(row, nm) for nm in names}
        ratios, verdict = [], []
        for p in peers:
            if resolved(b[p]) and resolved(b["ours"]):
                ratio = b[p]["per_step"] / b["ours"]["per_step"]
                ratios.append(f"{ratio:>11.2f}x")
                verdict.append(ratio > 1.0)
            else:
                ratios.append(f"{'-':>12}")
        met = ("no peer" if not peers else "not measured" if len(verdict) < len(peers) or not b["ours"]
               else "met" if all(verdict) else "NOT MET")
        if peers:
            all_met &= met == "met"
        print(f"{row['label']:>14} {c['n']:>10,} {c['d']:>7,} {c['q']:>5g} {c['q'] * c['n']:>7,.0f} "
              f"{c['long'] - c['short']:>7} " + " ".join(f"{fmt_ms(b[nm]):>10}" for nm in names)
              + " " + " ".join(ratios) + f" {met:>26}")

    hdr2 = (f"{'row':>14} " + " ".join(f"{n + ' rec/s':>14}" for n in names) + " "
            + " ".join(f"{n + ' MB':>10}" for n in names) + " "
            + " ".join(f"{n + ' run MB':>12}" for n in names) + f" {'data MB':>9}")
    print("\nthroughput (records per second = qN / step time) and peak memory: MB = the worker's peak "
          "RSS minus the idle worker's (data and any copy made while loading it included); run MB = "
          "the peak during the steps minus the RSS with the data loaded (what the run adds)")
    print(hdr2)
    print("-" * len(hdr2))
    for row in results:
        c = row["cfg"]
        b = {nm: best(row, nm) for nm in names}
        print(f"{row['label']:>14} " + " ".join(f"{fmt_rps(b[nm], c['q'] * c['n']):>14}" for nm in names)
              + " " + " ".join(f"{fmt_mb(b[nm]):>10}" for nm in names)
              + " " + " ".join(f"{fmt_run_mb(b[nm]):>12}" for nm in names)
              + f" {c['n'] * c['d'] * 4 / 2**20:>9,.0f}")

    print("\nevery timed variant (ms per step; fixed cost of one call; peak MB; 1-min load average "
          "at the worker's start/end):")
    loads = []
    for row in results:
        for name, runs in row["runs"].items():
            for r in runs:
                if "error" in r:
                    print(f"  {row['label']:>14} {name:>7}: FAILED {r['error']}")
                    continue
                loads.extend(r["load"])
                print(f"  {row['label']:>14} {name:>7}: {fmt_ms(r):>9} ms  fixed {1e3 * r['fixed_s']:8.1f} ms  "
                      f"{fmt_mb(r):>6} MB (run {fmt_run_mb(r):>5})  load {r['load'][0]:.1f}/{r['load'][1]:.1f}  "
                      f"{r['version']}; {r['detail']}"
                      + ("; NON-FINITE final weights" if r.get("finite") is False else ""))
    for peer, why in skipped.items():
        print(f"  {peer}: SKIPPED ({why.splitlines()[0]})")
    if loads:
        print(f"load average during the run: {min(loads):.2f} to {max(loads):.2f} "
              f"(1 min; mean {sum(loads) / len(loads):.2f})")
    return 0 if all_met or args.quick else 1


if __name__ == "__main__":
    sys.exit(main())
