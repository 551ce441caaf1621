"""The one-line error of a ``dpposterior`` command run in-process (the command-line tests share it)."""

from __future__ import annotations

from dpposterior.cli import main


def cli_error(capsys, argv, command):
    """Runs the CLI and returns its one-line error (exit code 2, no traceback)."""
    rc = main([str(a) for a in argv])
    err = capsys.readouterr().err.strip()
    prefix = f"dpposterior {command}: error: "
    assert rc == 2, err
    assert "\n" not in err and err.startswith(prefix), err
    return err[len(prefix) :]
