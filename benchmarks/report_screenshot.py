"""Renders a report's summary.html in headless Chromium and saves a screenshot (a recorded check
that the HTML report opens and shows its figures).

    python benchmarks/report_screenshot.py REPORT/summary.html docs/results/report-screenshot.png
    python benchmarks/report_screenshot.py --make-example docs/results/report-screenshot.png

``--make-example`` first runs the README's ``dpposterior fit`` on the synthetic ``loans.csv`` (not
Adult) in a temporary folder, then screenshots its report. Needs Debian's ``chromium`` (``apt-get install chromium``).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

BROWSERS = ("chromium", "chromium-browser", "google-chrome")


def find_browser() -> str | None:
    """The first headless-capable Chromium on PATH, or None."""
    for name in BROWSERS:
        path = shutil.which(name)
        if path:
            return path
    return None


def screenshot(html: str | Path, png: str | Path, *, width: int = 1100, height: int = 2600,
               timeout: float = 120.0) -> Path:
    """Renders ``html`` headless (no network, no GPU, a throw-away profile) into ``png``."""
    browser = find_browser()
    if browser is None:
        raise FileNotFoundError("no chromium on PATH (apt-get install chromium)")
    html, png = Path(html).resolve(), Path(png).resolve()
    png.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as profile:
        cmd = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
               "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars",
               f"--user-data-dir={profile}", f"--window-size={width},{height}", f"--screenshot={png}",
               html.as_uri()]
        subprocess.run(cmd, check=True, capture_output=True, timeout=timeout)
    if not png.exists() or png.stat().st_size == 0:
        raise RuntimeError(f"chromium wrote no screenshot to {png}")
    return png


def make_example(folder: Path) -> Path:
    """Runs the README's ``dpposterior fit`` on the synthetic ``loans.csv`` into ``folder``; the report's HTML."""
    from dpposterior.cli import main
    from dpposterior.tabular.example import write_example

    csv, toml = write_example(folder)
    rc = main(["fit", str(csv), "--target", "default", "--model", "logistic", "--epsilon", "1", "--delta", "1e-5",
               "--bounds", str(toml), "--out", str(folder / "report"), "--no-progress"])
    if rc != 0:
        raise RuntimeError(f"dpposterior fit failed with exit code {rc}")
    return folder / "report" / "summary.html"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("paths", nargs="+", help="HTML PNG, or with --make-example only PNG")
    p.add_argument("--make-example", action="store_true", help="fit a synthetic CSV first and shoot its report")
    args = p.parse_args(argv)
    if args.make_example:
        if len(args.paths) != 1:
            p.error("--make-example takes one path: the PNG to write")
        with tempfile.TemporaryDirectory() as tmp:
            out = screenshot(make_example(Path(tmp)), args.paths[0])
    else:
        if len(args.paths) != 2:
            p.error("give the HTML file and the PNG to write")
        out = screenshot(args.paths[0], args.paths[1])
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
