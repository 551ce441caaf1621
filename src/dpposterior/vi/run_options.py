"""How :func:`dpposterior.dpvi` runs, kept apart from what it releases."""

from __future__ import annotations

import os
from typing import Any, Literal, NamedTuple

#: the names that were keyword arguments of dpvi before they moved into :class:`RunOptions`
FIELDS = ("progress", "checkpoint", "checkpoint_every", "sampling")


class RunOptions(NamedTuple):
    """The operational settings of :func:`dpposterior.dpvi`: none of them changes the mechanism, its
    privacy or the distribution of what it releases.

    ``dpvi(model, x, epsilon=1.0, delta=1e-5, run_options=RunOptions(progress=False))``.

    Attributes:
      progress: show a progress bar (None, the default: automatic for long runs).
      checkpoint: a file where a long run saves its progress every ``checkpoint_every`` steps and from
        which a killed run resumes with the same noise stream (:func:`dpposterior.dpsgd.dpsgd`). The file
        holds the noise key: keep it secret; it is deleted when the run finishes. Needs a given clip
        (``clip="auto"`` chooses it in a pilot that a resumed run would pay for again).
      checkpoint_every: the steps between checkpoints (default 2000).
      sampling: the DP-SGD engine's sampler: ``"packed"`` (default, O(qN) per step) or ``"masked"`` (a
        full-N inclusion mask, O(N) per step, the reference implementation's approach; the same Poisson
        sampling and privacy, kept for comparison: benchmarks/pipeline.py).
    """

    progress: bool | None = None
    checkpoint: str | os.PathLike | None = None
    checkpoint_every: int = 2000
    sampling: Literal["packed", "masked"] = "packed"


def check_run_options(run_options: Any) -> RunOptions:
    """``run_options`` as a :class:`RunOptions` (None: the defaults).

    Raises:
      TypeError: anything else (a dict of the fields included), naming the type expected.
    """
    if run_options is None:
        return RunOptions()
    if not isinstance(run_options, RunOptions):
        raise TypeError(
            "run_options must be a dpposterior.vi.RunOptions, e.g. RunOptions(progress=False), got "
            f"{type(run_options).__name__}"
        )
    return run_options


def refuse_moved_settings(model_kwargs: dict[str, Any], fitter: str) -> None:
    """Refuses a model keyword named like a field of :class:`RunOptions` that the model does not take.

    Those were keyword arguments of ``fitter``; given that way now they would reach the model as its
    keywords.

    Raises:
      TypeError: one of :data:`FIELDS` among ``model_kwargs``, with the call that sets it.
    """
    moved = [k for k in FIELDS if k in model_kwargs]
    if moved:
        name = moved[0]
        raise TypeError(
            f"{name}= is not a keyword of {fitter}: it is a field of run_options, as in "
            f"{fitter}(..., run_options=dpposterior.vi.RunOptions({name}={model_kwargs[name]!r})); a model "
            f"keyword of that name goes through functools.partial(model, {name}=...)"
        )
