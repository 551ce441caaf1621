"""ArviZ, imported without its refactor notice.

ArviZ 0.23 emits a ``FutureWarning`` on import announcing its 1.0 refactor; it says nothing about
this library's use of it, and under ``-W error`` (our test suite, some users' CI) the first import
would fail wherever it happens. Every ArviZ import of the package goes through here.
"""

from __future__ import annotations

import warnings
from typing import Any


def import_arviz() -> Any:
    """The ``arviz`` module, its import-time refactor notice silenced (only that warning)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"\s*ArviZ is undergoing a major refactor", category=FutureWarning)
        import arviz
    return arviz
