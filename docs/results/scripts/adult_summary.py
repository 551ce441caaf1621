"""The UCI Adult table of the re-run from its result files: calibration RMSE (mean ± sd over the
releases) and sharpness per epsilon and method. Used in docs/results/na-dpvi-misses.md:

    .venv/bin/python docs/results/scripts/adult_summary.py [work folder]

Reads only the released posteriors' evaluation records of a reproduction (fixed keys, public split).
"""

import collections
import json
import statistics
import sys
from pathlib import Path

work = Path(sys.argv[1] if len(sys.argv) > 1 else "docs/results/na-dpvi-work")
folders = sorted((work / "adult").glob("eps*-*"), key=lambda p: float(p.name[3:].split("-")[0]))
if not folders:
    sys.exit(f"no Adult result folders under {work / 'adult'}")
for folder in folders:
    rmse, sharp = collections.defaultdict(list), collections.defaultdict(list)
    files = sorted(folder.glob("repeat*.json"))
    for f in files:
        for method, v in json.loads(f.read_text())["methods"].items():
            rmse[method].append(v["calibration_rmse"])
            sharp[method].append(v["sharpness"])
    print(f"{folder.name}: {len(files)} releases")
    for method, values in rmse.items():
        sd = statistics.stdev(values) if len(values) > 1 else float("nan")
        print(f"  {method:24s} {statistics.mean(values):.4f} ± {sd:.4f}   sharpness {statistics.mean(sharp[method]):.3f}")
