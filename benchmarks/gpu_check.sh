#!/usr/bin/env bash
# The GPU timings of issue 11 in one short run (about 5 minutes; each part under its own timeout):
# a K = 500 coverage cell (benchmarks/coverage_cell.py: vmapped, against a subset run one by one) and
# our NA-DPVI pipeline on Adult (benchmarks/pipeline.py --ours-only), on whatever accelerator JAX
# sees. Needs a jax with GPU support already installed in the Python it is given (PYTHON, default
# .venv/bin/python); it stops at once, saying so, if JAX sees no GPU. Outputs go to $OUT (or
# ./gpu-results) as text files, with the device list and the date.
#
#   OUT=/tmp/gpu bash benchmarks/gpu_check.sh
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
out=${OUT:-gpu-results}
mkdir -p "$out"
date -u +%FT%TZ > "$out/date.txt"
"$PY" -c "import jax; d = jax.devices(); print(d); raise SystemExit(0 if d[0].platform == 'gpu' else 3)" \
    | tee "$out/devices.txt" || { echo "JAX sees no GPU: nothing to time" | tee -a "$out/devices.txt"; exit 3; }
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$out/nvidia-smi.txt" 2>&1 || true
timeout 240 "$PY" benchmarks/coverage_cell.py --devices 1 --subset 2 2>&1 | tee "$out/coverage_cell.txt" || true
timeout 180 "$PY" benchmarks/pipeline.py --ours-only 2>&1 | tee "$out/pipeline.txt" || true
