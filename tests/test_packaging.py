"""The package as a release: its version, its licence, its type marker and its change log."""

from __future__ import annotations

import ast
import importlib.metadata
import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import dpposterior
from dpposterior.cli import main

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "dpposterior"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_version_option_prints_the_package_version(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.strip() == f"dpposterior {dpposterior.__version__}"


def test_python_dash_m_prints_the_version():
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, "-m", "dpposterior", "--version"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"dpposterior {dpposterior.__version__}"


def test_the_version_is_written_in_one_place():
    project = PYPROJECT["project"]
    assert "version" not in project and "version" in project["dynamic"]
    assert PYPROJECT["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "dpposterior.__version__"}
    # a plain string literal, so that setuptools reads it without importing the package
    tree = ast.parse((PACKAGE / "__init__.py").read_text())
    literals = [
        node.value.value
        for node in tree.body
        if isinstance(node, ast.Assign)
        and [getattr(t, "id", None) for t in node.targets] == ["__version__"]
        and isinstance(node.value, ast.Constant)
    ]
    assert literals == [dpposterior.__version__]
    assert re.fullmatch(r"\d+\.\d+\.\d+(\.dev\d+|rc\d+)?", dpposterior.__version__)


def test_the_licence_is_an_spdx_expression_with_its_file():
    project = PYPROJECT["project"]
    assert project["license"] == "Apache-2.0"
    assert project["license-files"] == ["LICENSE"]
    text = (ROOT / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION" in text
    assert not any("License ::" in c for c in project.get("classifiers", ())), "SPDX replaces licence classifiers"
    build = PYPROJECT["build-system"]["requires"]
    assert any(
        re.fullmatch(r"setuptools>=(\d+).*", r) and int(re.match(r"setuptools>=(\d+)", r)[1]) >= 77 for r in build
    ), "setuptools 77 is the first to read an SPDX project.license"


def test_installed_metadata_carries_the_licence_and_version():
    """Checked when the installed distribution is this checkout (``make test``'s editable install)."""
    try:
        dist = importlib.metadata.distribution("dpposterior")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("dpposterior is not installed")
    direct = dist.read_text("direct_url.json")
    url = json.loads(direct).get("url", "") if direct else ""
    if url.rstrip("/") != ROOT.as_uri():
        pytest.skip(f"the installed dpposterior is not this checkout ({url or 'no direct_url.json'})")
    meta = dist.metadata
    assert meta["Version"] == dpposterior.__version__
    assert meta["License-Expression"] == "Apache-2.0"
    assert "LICENSE" in (meta.get_all("License-File") or [])


def test_the_package_is_typed():
    assert (PACKAGE / "py.typed").is_file()
    assert "py.typed" in PYPROJECT["tool"]["setuptools"]["package-data"]["dpposterior"]


def test_the_change_log_has_unreleased_and_the_current_version():
    text = (ROOT / "CHANGELOG.md").read_text()
    assert "keepachangelog.com" in text
    headings = re.findall(r"^## \[([^\]]+)\]", text, flags=re.M)
    assert headings[0] == "Unreleased"
    assert dpposterior.__version__ in headings


def test_ci_installs_a_wheel_not_editable_and_runs_it_outside_the_checkout():
    """The README documented only ``pip install -e .``; nothing checked the package as users install it."""
    script = ROOT / ".ci" / "wheel_check"
    assert os.access(script, os.X_OK)
    text = script.read_text()
    assert "pip wheel" in text and "-m venv" in text and "--version" in text
    assert re.search(r'"\$work/venv/bin/dpposterior" demo ', text), "the wheel check does not run the demo"
    assert " -e " not in text and "--editable" not in text
    assert re.search(r"^wheel-check:.*\n\t\.ci/wheel_check ", (ROOT / "Makefile").read_text(), flags=re.M)
    ci = (ROOT / ".ci" / "run").read_text()
    assert "make wheel-check" in ci and ci.index("make wheel-check") < ci.index("make test")
    readme = (ROOT / "README.md").read_text()
    assert "pip install .  " in readme and 'pip install -e ".[dev]"' in readme


@pytest.mark.slow  # builds a wheel and installs its dependencies into a fresh environment (the package registry)
def test_the_wheel_installs_and_runs_outside_the_checkout():
    done = subprocess.run(
        [str(ROOT / ".ci" / "wheel_check"), sys.executable], capture_output=True, text=True, timeout=600, check=False
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert f"wheel check: dpposterior {dpposterior.__version__} from a non-editable install" in done.stdout
    assert "(demo run)" in done.stdout
