"""Arguments of the ``dpposterior`` commands checked before any computation: output folders and ledgers that
cannot be written, seeds that JAX would alias, batch sizes, repeated flags, and errors that name the flags
the user typed. Commands run ``dpposterior.cli.main`` in-process and stop at the checks.
"""

from __future__ import annotations

import pytest

from cli_errors import cli_error as _error

COVERAGE = [
    "coverage",
    "--model",
    "beta-bernoulli",
    "--epsilon",
    "1",
    "--replicates",
    "2",
    "--repeats",
    "1",
    "--num-steps",
    "20",
    "--num-records",
    "10",
    "--num-draws",
    "2",
    "--no-progress",
]


@pytest.fixture
def files(tiny_table):
    (tiny_table / "a_file").write_text("not a folder")
    return tiny_table


def _table_argv(tmp, command, *extra, out="out"):
    return [
        command,
        tmp / "d.csv",
        "--target",
        "y",
        "--bounds",
        tmp / "s.toml",
        "--epsilon",
        "1",
        "--delta",
        "1e-5",
        "--steps",
        "20",
        "--no-progress",
        "--out",
        tmp / out,
        *extra,
    ]


def _no_release(monkeypatch):
    """Makes any DP release fail loudly: the checks under test must come first."""

    def boom(*a, **k):
        raise AssertionError("a release was computed before the argument check")

    monkeypatch.setattr("dpposterior.vi.dpvi", boom)
    monkeypatch.setattr("dpposterior.vi._dpvim.dpvim", boom)


# --out that is a file: refused before the computation, not a traceback after it
@pytest.mark.parametrize("command", ["fit", "compare"])
def test_table_out_that_is_a_file_is_refused_before_the_release(capsys, files, monkeypatch, command):
    _no_release(monkeypatch)
    msg = _error(capsys, _table_argv(files, command, out="a_file"), command)
    assert "is a file, not a folder" in msg and "a_file" in msg


def test_table_out_below_a_file_is_refused(capsys, files, monkeypatch):
    _no_release(monkeypatch)
    msg = _error(capsys, _table_argv(files, "fit", out="a_file/report"), "fit")
    assert "cannot be created" in msg and "is a file, not a folder" in msg


def test_ledger_below_a_file_is_refused_before_the_release(capsys, files, monkeypatch):
    # the ledger was saved after the release, and its failure lost the report
    _no_release(monkeypatch)
    msg = _error(capsys, _table_argv(files, "fit", "--ledger", files / "a_file" / "ledger.json"), "fit")
    assert msg.startswith("ledger ") and "cannot be created" in msg


def test_coverage_out_that_is_a_file_is_refused_before_any_cell(capsys, files, monkeypatch):
    def boom(*a, **k):
        raise AssertionError("cells were computed before the --out check")

    monkeypatch.setattr("dpposterior.experiments.runner.run_coverage", boom)
    msg = _error(capsys, [*COVERAGE, "--out", files / "a_file"], "coverage")
    assert msg.startswith("--out ") and "is a file, not a folder" in msg


def test_demo_out_that_is_a_file_is_an_error_not_a_traceback(capsys, files):
    msg = _error(capsys, ["demo", "--steps", "5", "--out", files / "a_file"], "demo")
    assert "is a file, not a folder" in msg


# values silently clamped or aliased
@pytest.mark.parametrize("size", ["0", "-3"])
def test_coverage_batch_size_below_one_is_refused_not_clamped(capsys, tmp_path, size):
    msg = _error(capsys, [*COVERAGE, "--out", tmp_path / "c", "--batch-size", size], "coverage")
    assert msg == f"--batch-size must be >= 1 (replicates per compiled batch), got {size}"


@pytest.mark.parametrize("seed", [2**32 + 5, -1])
def test_table_seed_that_jax_would_alias_is_refused(capsys, files, monkeypatch, seed):
    # --seed 4294967301 gave the same privacy noise as --seed 5, and -1 the same as 4294967295
    _no_release(monkeypatch)
    msg = _error(capsys, _table_argv(files, "fit", "--seed", seed), "fit")
    assert msg.startswith("seed must be an integer in [0, 2**32)")


def test_huge_seed_is_an_error_not_an_overflow_traceback(capsys, files, monkeypatch):
    _no_release(monkeypatch)
    msg = _error(capsys, _table_argv(files, "compare", "--seed", 10**30), "compare")
    assert msg.startswith("seed must be an integer in [0, 2**32)")
    assert _error(capsys, ["demo", "--seed", 10**30, "--out", files / "d"], "demo").startswith("seed must be")


def test_compare_seed_plus_release_index_must_stay_below_2_32(capsys, files, monkeypatch):
    _no_release(monkeypatch)
    # na-dpvi and dpvim: the second release would be seeded with 2**32, i.e. seed 0
    msg = _error(capsys, _table_argv(files, "compare", "--seed", 2**32 - 1), "compare")
    assert "seed + i" in msg


def test_fit_beta_rho_is_checked_before_the_data_are_read(capsys, files, monkeypatch):
    _no_release(monkeypatch)
    monkeypatch.setattr("dpposterior.tabular.fit.read_table", lambda *a: pytest.fail("data read first"))
    assert (
        _error(capsys, _table_argv(files, "fit", "--beta-rho", "-1"), "fit")
        == "beta_rho must be a finite number > 0, got -1.0"
    )


# `dpposterior coverage --epsilon 0.1 --epsilon 1` (a flag given twice, as with most command lines)
# kept only the last value: the run silently dropped epsilon 0.1 (likewise --model and --method).
@pytest.mark.parametrize(
    "flags, cells",
    [
        (
            ["--model", "beta-bernoulli", "--epsilon", "0.1", "--epsilon", "1"],
            [
                ("beta-bernoulli", 0.1, "grid"),
                ("beta-bernoulli", 0.1, "naive"),
                ("beta-bernoulli", 1.0, "grid"),
                ("beta-bernoulli", 1.0, "naive"),
            ],
        ),
        (
            ["--model", "beta-bernoulli", "--model", "gamma-exponential", "--epsilon", "1", "--method", "naive"],
            [("beta-bernoulli", 1.0, "naive"), ("gamma-exponential", 1.0, "naive")],
        ),
        (
            ["--model", "beta-bernoulli", "--epsilon", "1", "--method", "grid", "--method", "laplace"],
            [("beta-bernoulli", 1.0, "grid"), ("beta-bernoulli", 1.0, "laplace")],
        ),
        (
            ["--model", "beta-bernoulli", "--epsilon", "1", "0.5"],  # the default methods
            [
                ("beta-bernoulli", 1.0, "grid"),
                ("beta-bernoulli", 1.0, "naive"),
                ("beta-bernoulli", 0.5, "grid"),
                ("beta-bernoulli", 0.5, "naive"),
            ],
        ),
    ],
)
def test_coverage_command_keeps_every_value_of_a_repeated_flag(flags, cells, tmp_path, monkeypatch):
    import dpposterior.experiments.runner as runner
    from dpposterior.cli import main

    seen = []

    def stop(configs, out, **kw):
        seen.extend((c.model, c.epsilon, c.method) for c in configs)
        raise ImportError("stop before computing (test)")

    monkeypatch.setattr(runner, "run_coverage", stop)
    assert main(["coverage", *flags, "--out", str(tmp_path / "out"), "--no-progress"]) == 2
    assert seen == cells


# the coverage command's errors from CellConfig named its fields ("replicates must be ...",
# "num_steps ..."), not the flags the user typed
def test_coverage_command_errors_name_the_flags(capsys, tmp_path):
    from cli_errors import cli_error

    base = ["coverage", "--model", "beta-bernoulli", "--epsilon", "1", "--out", tmp_path / "o", "--no-progress"]
    assert cli_error(capsys, base + ["--replicates", "1"], "coverage").startswith("--replicates must be")
    msg = cli_error(capsys, base + ["--method", "dpvim", "--num-steps", "20"], "coverage")
    assert "--num-steps" in msg and "num_steps" not in msg.replace("--num-steps", ""), msg


@pytest.mark.parametrize("command", ["fit", "compare"])
def test_advice_to_pass_a_clip_names_the_flag(capsys, files, monkeypatch, command):
    """The library's advice "pass clip= by hand" reads "--clip" on the command line."""

    def refuse(*a, **k):
        raise ValueError("clip='auto' cannot choose a clip privately for N = 3 records. Pass clip= by hand")

    monkeypatch.setattr("dpposterior.vi.dpvi", refuse)
    monkeypatch.setattr("dpposterior.vi._dpvim.dpvim", refuse)
    argv = _table_argv(files, command)
    argv[argv.index("--steps") + 1] = "40"  # what compare's DPVIm needs
    err = _error(capsys, argv, command)
    assert "Pass --clip by hand" in err and "clip=" not in err.replace("clip='auto'", "")
