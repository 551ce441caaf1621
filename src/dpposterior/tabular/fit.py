"""``dpposterior fit`` and ``dpposterior compare``: a user's table in, a report folder out.

The data path: the table and its schema -> the design matrix (data-independent transforms only;
:mod:`.design`) -> the mechanisms (``dpvi``, ``dpvim``, the Laplace sufficient statistics of
Gibbs-SS-Noisy), the only code that reads the records -> releases with their PrivacySpent, composed
in a :class:`~dpposterior.privacy.Ledger` -> post-processing (posteriors, tables, figures) that sees
only the releases. The report marks the one number that is read from the data without noise: the
number of records N, treated as public (as in the papers).
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import json
import math
import re
import time
import warnings
from pathlib import Path
from typing import Any, Callable, Sequence, cast

import numpy as np

from .._checks import (
    check_delta,
    check_epsilon,
    check_output_dir,
    check_output_file,
    check_positive,
    check_positive_int,
    check_sampling_rate,
    check_seed,
)
from .._io import write_bytes_atomic
from ..privacy.secure import check_secure
from ..privacy.spent import Neighbouring
from .design import INTERCEPT, Design, build_design
from .read import read_table
from .releases import save_release
from .report import Report
from .schema import load_schema

MODELS = ("logistic", "linear")
COMPARE_METHODS = ("na-dpvi", "naive", "dpvim", "gibbs-ss-noisy", "dp-fast-mh")
#: the Gibbs-SS-Noisy chain of ``compare``: warm-up sweeps and draws.
GSN_WARMUP, GSN_DRAWS = 500, 2000
BUDGETS = ("split", "each")


def resolve_model(spec: str) -> tuple[Callable, str, bool, str]:
    """``"logistic"``, ``"linear"``, ``"module:function"`` or ``"path/file.py:function"`` -> (model,
    target kind, intercept column?, label). A module is looked up from the working directory first.

    A custom model is called as ``model(X, y)`` with X the design matrix (with an intercept column
    as its last column) and y the target (0/1 codes if the target is declared binary, else rescaled
    numbers); it needs a plate over the records.
    """
    from .. import models

    if spec == "logistic":
        return models.logistic_regression, "binary", True, "logistic regression"
    if spec == "linear":
        return models.linear_regression, "numeric", False, "linear regression"
    if not isinstance(spec, str) or spec.count(":") != 1:
        raise ValueError(
            f"model must be 'logistic', 'linear' or a NumPyro model given as 'module:function', got {spec!r}"
        )
    mod_name, fn_name = spec.split(":")
    try:
        if mod_name.endswith(".py"):  # a file: path/to/models.py:function
            if not Path(mod_name).is_file():
                raise ImportError(f"no file {mod_name!r}")
            from importlib import util as import_util
            from importlib.abc import Loader
            from importlib.machinery import ModuleSpec

            # a .py file always gets a spec with a source-file loader (None only for unknown suffixes)
            loader_spec = cast(ModuleSpec, import_util.spec_from_file_location(Path(mod_name).stem, mod_name))
            module = import_util.module_from_spec(loader_spec)
            cast(Loader, loader_spec.loader).exec_module(module)
        else:  # a module importable from the working directory (as `python -m` would) or the environment
            import sys

            if "" not in sys.path and str(Path.cwd()) not in sys.path:
                sys.path.insert(0, str(Path.cwd()))
            module = importlib.import_module(mod_name)
    except ImportError as e:
        raise ValueError(f"cannot import module {mod_name!r} of model {spec!r}: {e}") from None
    except SyntaxError as e:  # the user's file does not parse
        raise ValueError(
            f"cannot import module {mod_name!r} of model {spec!r}: SyntaxError: {e.msg} ({e.filename}, line {e.lineno})"
        ) from e
    except Exception as e:  # the module raised while it was imported (a NameError, its own error)
        import traceback

        where = traceback.extract_tb(e.__traceback__)[-1]
        raise ValueError(
            f"cannot import module {mod_name!r} of model {spec!r}: importing it raised "
            f"{type(e).__name__}: {e} ({where.filename}, line {where.lineno})"
        ) from e
    fn = getattr(module, fn_name, None)
    if not callable(fn):
        raise ValueError(f"module {mod_name!r} has no callable {fn_name!r} (model {spec!r})")
    return fn, "", True, spec


#: the target kinds a user may declare for a model of their own.
TARGET_KINDS = ("binary", "numeric")


def _target_kind(schema, target: str, declared: str, requested: str | None = None) -> str:
    """The target's kind: the built-in model's (``declared``), the user's ``requested`` one for a model of
    their own, else from the schema alone (two categories, or numeric bounds [0, 1]: binary), never
    from the data."""
    if requested is not None and requested not in TARGET_KINDS:
        raise ValueError(f"target_kind must be one of {TARGET_KINDS} or None, got {requested!r}")
    if declared:
        if requested is not None and requested != declared:
            raise ValueError(
                f"target_kind={requested!r} does not fit the built-in model, whose target is {declared}; "
                "give target_kind (--target-kind) only with a model of your own (--model module:function)"
            )
        return declared
    if requested is not None:
        return requested
    col = schema.column(target)
    binary = col.type == "categorical" and len(col.categories) == 2
    binary = binary or (col.type == "numeric" and col.bounds == (0.0, 1.0))
    return "binary" if binary else "numeric"


def _load(
    data: str | Path,
    schema_path: str | Path,
    target: str,
    model: str,
    features: Sequence[str] | None,
    log: Callable[[str], Any],
    step: str = "[1/4]",
    target_kind: str | None = None,
) -> tuple[Design, Callable, str, Any]:
    fn, kind, intercept, label = resolve_model(model)
    schema = load_schema(schema_path)
    log(f"{step} reading {data} (schema {schema_path})")
    frame = read_table(data)
    kind = _target_kind(schema, target, kind, target_kind)  # from the schema and the model, never the data
    design = build_design(
        frame, schema, target, features=None if features is None else features, intercept=intercept, target_kind=kind
    )
    log(f"      {design.X.shape[1]} design columns: {', '.join(design.feature_names)}")
    return design, fn, label, schema


@contextlib.contextmanager
def _after_release(saved: Path, ledger: str | Path | None, made: dict[str, Any] | None = None):
    """Adds to an error that comes after a DP release that the release is saved (and where).

    ``made``: for ``compare``, the releases made so far, saved in the folder ``saved`` (no note while
    none is made); None for ``fit``'s one release, the file ``saved``.
    """
    try:
        yield
    except ReleaseWriteError:
        raise  # already says where the release is
    except (ValueError, TypeError, OSError) as e:
        if made is not None and not made:
            raise
        text = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        what = "the DP releases, which are" if made is not None else "the DP release, which is"
        raise ValueError(
            f"{text} (this came after {what} saved in {str(saved)!r}"
            + (f" and recorded in the ledger {str(ledger)!r}" if ledger is not None else "")
            + ("" if made is not None else "; dpposterior.DPVITrace.load reads it for other post-processing")
            + ")"
        ) from e


class ReleaseWriteError(ValueError):
    """A DP release was made (its privacy spent) but a file could not be written where asked.

    The message says which write failed and why, where the release was saved instead (a folder made by
    :func:`tempfile.mkdtemp`), and where it is recorded in the ledger; the run stops there, so no
    further release is made.
    """


def _why(e: BaseException) -> str:
    """A short reason for a failed write: the OS's words without the errno number."""
    if isinstance(e, OSError) and e.strerror:
        return e.strerror + (f": {e.filename}" if e.filename else "")
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def _save_or_spare(
    save: Callable[[Path], Any], path: Path, what: str, log: Callable[[str], Any], problems: list[str]
) -> Path | None:
    """Writes with ``save(path)``; if that fails, writes the same with ``save`` into a new temporary folder
    and appends to ``problems`` a sentence saying where. Returns the path written, or None when both
    writes failed (``problems`` says so)."""
    try:
        save(path)
        return path
    except (OSError, ValueError) as e:
        first = _why(e)
    import tempfile

    try:
        spare = Path(tempfile.mkdtemp(prefix="dpposterior-release-")) / path.name
        save(spare)
    except (OSError, ValueError) as e:
        problems.append(
            f"{what} could not be written to {str(path)!r} ({first}), nor to a temporary folder ({_why(e)}): it is lost"
        )
        return None
    log(f"      WARNING: {what} could not be written to {path} ({first}); it is saved in {spare}")
    problems.append(f"{what} could not be written to {str(path)!r} ({first}); it is saved in {str(spare)!r}")
    return spare


def _stop_if(problems: list[str], ledger_at: Path | None) -> None:
    """Raises :class:`ReleaseWriteError` stating ``problems`` (the writes that failed after a release) and
    ``ledger_at``, where the ledger that records the releases was written (None: no ledger)."""
    if problems:
        raise ReleaseWriteError(
            "; ".join(problems)
            + ("" if ledger_at is None else f"; the releases made are recorded in the ledger {str(ledger_at)!r}")
            + ". Nothing more was released and no report was written: fix the output "
            "folder (space, permissions) and move the saved files back, or use another"
        )


def _check_outputs(paths: Sequence[Path]) -> None:
    """Every file a run will write can be written (checked before any data is read or budget spent)."""
    for path in paths:
        check_output_file(path, "output file")


def planned_dpsgd_privacy(epsilon: float, delta: float, sampling_rate: float, num_steps: int) -> Any:
    """The PrivacySpent that ``dpvi`` / ``dpvim`` will record for these settings (noise multiplier
    calibrated as they calibrate it, PLD), computed before the release from public settings alone."""
    from ..privacy import PrivacySpent, calibrate_noise_multiplier, dpsgd_epsilon

    sigma = calibrate_noise_multiplier(epsilon, delta, sampling_rate, num_steps)
    return PrivacySpent(
        epsilon=dpsgd_epsilon(sigma, delta, sampling_rate, num_steps),
        delta=delta,
        neighbouring="add_remove",
        accountant="pld",
        mechanism="poisson_subsampled_gaussian",
        noise_multiplier=sigma,
        sampling_rate=sampling_rate,
        num_steps=num_steps,
    )


def _open_ledger(path: str | Path, planned: Sequence[tuple[str, Any]], delta: float) -> Any:
    """The ledger at ``path`` (empty if the file is missing), after checking that it can be written and
    that it composes with this run's ``planned`` releases (label, PrivacySpent) at ``delta`` or at
    ``delta`` plus the recorded deltas: an unreadable or uncomposable ledger is refused here, before any
    data is read or budget spent, not after the release."""
    from ..privacy import Ledger

    check_output_file(path, "ledger")
    book = Ledger.load(path) if Path(path).exists() else Ledger()
    trial = Ledger()
    for e in book.entries:
        trial.add(e.privacy, e.label)
    for label, privacy in planned:
        trial.add(privacy, label)
    fallback = delta + trial.delta_used()
    if not fallback < 1:
        raise ValueError(
            f"the releases recorded in the ledger {str(path)!r} already use a total delta of "
            f"{fallback - delta:g}: with this run's delta = {delta:g} no total below 1 exists; "
            "use a new ledger for other data"
        )
    try:
        _composed_total(trial, delta, fallback)
    except ValueError as e:
        raise ValueError(
            f"the ledger {str(path)!r} cannot be composed with this run's release(s), so its total "
            f"could not be stated: {e}; nothing was released (use a new ledger, or remove that "
            "release from it)"
        ) from e
    return book


def _check_inputs(data: Any, schema: Any, target: Any) -> None:
    """The paths and the target name are what they must be (a DataFrame is a plausible mistake)."""
    import os

    if not isinstance(data, (str, os.PathLike)):
        raise TypeError(
            f"data must be the path of a CSV or Parquet file, got {type(data).__name__}; save a "
            "DataFrame first (df.to_csv(path, index=False)), or build the design matrix in memory with "
            "build_design and fit it with dpposterior.dpvi"
        )
    if not isinstance(schema, (str, os.PathLike)):
        raise TypeError(f"schema must be the path of a TOML schema file, got {type(schema).__name__}")
    if not isinstance(target, str):
        raise TypeError(f"target must be the name of one column (a string), got {target!r}")


def _check_common(epsilon, delta, num_steps, sampling_rate, clip, prob):
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta)
    num_steps = check_positive_int(num_steps, "num_steps")
    sampling_rate = check_sampling_rate(sampling_rate)
    if clip is not None:
        clip = check_positive(clip, "clip")
    if not (isinstance(prob, float) and 0 < prob < 1):
        raise ValueError(f"prob (the interval's probability) must lie in (0, 1), got {prob!r}")
    return epsilon, delta, num_steps, sampling_rate, clip


#: the post-processing's burn-in (``noise_aware_posterior``'s default) and the DP-Fast MH chain's
NA_DPVI_BURN_IN = 0.2
DP_FAST_MH_BURN_IN = 0.5


def min_steps(method: str) -> int:
    """The fewest steps (iterations) whose release the report's post-processing of ``method`` can use.

    ``"na-dpvi"``/``"naive"``: at least ``MIN_STEPS_AFTER_BURN_IN`` steps after the 20% burn-in of the
    noise-aware model; ``"dpvim"``: two steps in each of its convergence windows; ``"dp-fast-mh"``: as
    many draws after its 50% burn-in; ``"gibbs-ss-noisy"`` has no steps (1).
    """
    from ..noise_aware.stats import MIN_STEPS_AFTER_BURN_IN, burn_in_start
    from ..vi._dpvim import DEFAULT_NUM_WINDOWS

    burn_in = {"na-dpvi": NA_DPVI_BURN_IN, "naive": NA_DPVI_BURN_IN, "dp-fast-mh": DP_FAST_MH_BURN_IN}.get(method)
    if method == "dpvim":
        return 2 * DEFAULT_NUM_WINDOWS
    if burn_in is None:
        return 1
    t = MIN_STEPS_AFTER_BURN_IN
    while t - burn_in_start(t, burn_in) < MIN_STEPS_AFTER_BURN_IN:
        t += 1
    return t


def _check_steps(num_steps: int, methods: Sequence[str]) -> None:
    """Refuses, before any release, a ``num_steps`` too short for a method's post-processing (the
    release would be computed, its privacy spent, and then lost)."""
    need = {m: min_steps(m) for m in methods}
    short = {m: t for m, t in need.items() if num_steps < t}
    if short:
        worst = max(short.values())
        raise ValueError(
            f"steps (num_steps) must be at least {worst} here, got {num_steps}: "
            + ", ".join(f"{m} needs {t}" for m, t in short.items())
            + " for its post-processing (checked before the release, which would otherwise be "
            "computed and then lost)"
        )


#: the linear model's prior in ``fit``/``compare`` (the target is rescaled to [-1, 1], so its residual
#: variance is at most 1): sigma2 ~ InvGamma(2, 0.5) (mean 0.5), w ~ N(0, 4 sigma2 I). The papers'
#: InvGamma(20, 0.5) (mean 0.026) suits their simulated data, not an arbitrary table.
LINEAR_PRIOR = {"prior_shape": 2.0, "prior_scale": 0.5, "weight_scale": 4.0}


def model_kwargs(model: str) -> dict[str, Any]:
    """Keyword arguments ``fit``/``compare`` pass to the model: :data:`LINEAR_PRIOR` for ``"linear"``."""
    return dict(LINEAR_PRIOR) if model == "linear" else {}


def _release_clips(clip: Any, made: dict[str, Any]) -> str:
    """The clip of each DP-SGD release of ``compare`` (each chose its own with clip="auto")."""
    used = [(m, r) for m, r in made.items() if hasattr(r, "clip") and hasattr(r, "privacy")]
    if not used:
        return _clip_text(clip)
    return "; ".join(f"{m}: {_clip_text(float(r.clip), r.privacy)}" for m, r in used)


def _clip_text(clip: Any, privacy: Any = None) -> str:
    """The clip as the log and the report show it: "auto" before the run; after it, the clip used and,
    when it was chosen privately, that it was (the pilot's clip too)."""
    if isinstance(clip, str):
        return clip
    if privacy is not None and privacy.detail("clip_choice") == "auto":
        pilot = privacy.detail("pilot_steps")
        if pilot:
            return f"{clip:.4g} (chosen privately; the first {pilot} steps at {privacy.detail('pilot_clip'):.4g})"
        return f"{clip:.4g} (chosen privately)"
    return f"{clip:.4g}"


def _param_names(post, design: Design, model: str) -> dict[str, str]:
    """Maps summary labels (``w[3]``) to design-column names where the model's weights line up."""
    names = {}
    sites = {s.name: s.shape for s in post.layout.sites}
    if model == "linear":
        cols = [c for c in design.feature_names if c != INTERCEPT] + [INTERCEPT]
        names["sigma2"] = "sigma2 (residual variance, rescaled target)"
    else:
        cols = list(design.feature_names)
    if sites.get("w") == (len(cols),):
        names.update({f"w[{j}]": c for j, c in enumerate(cols)})
    return names


def _with_columns(warning: str, names: dict[str, str]) -> str:
    """``warning`` followed by the design column of each coordinate it names (``w[0]`` is ``age``).

    A posterior's warnings name latents as the library does (``w[0]``), while the report's tables and the
    terminal name the rows by their design columns (``_param_names``); without the key, a reader cannot tell
    which coefficient a warning is about.
    """
    seen = dict.fromkeys(m for m in re.findall(r"\b\w+\[[\d, ]+\]", warning) if m in names)
    if not seen:
        return warning
    return warning + " (" + "; ".join(f"{label} is {names[label]}" for label in seen) + ")"


def arviz_names(post: Any, design: Design, model: str = "logistic") -> dict[str, Any]:
    """ArviZ's ``coords`` and ``dims`` that name the weights ``w`` by their design columns.

    For :meth:`Posterior.to_arviz <dpposterior.noise_aware.Posterior.to_arviz>`:
    ``post.to_arviz(**arviz_names(post, design, model))`` gives ``w`` the dimension ``feature``, labelled
    by the design's column names (``age``, ``region=south``, ``(intercept)``), where the model's weights
    line up with them (the built-in models; a model of your own whose ``w`` has one entry per column);
    otherwise ``{}`` (ArviZ's numbered dimensions).
    """
    sites = {s.name: s.shape for s in post.layout.sites}
    cols = (
        [c for c in design.feature_names if c != INTERCEPT] + [INTERCEPT]
        if model == "linear"
        else list(design.feature_names)
    )
    if sites.get("w") != (len(cols),):
        return {}
    return {"coords": {"feature": cols}, "dims": {"w": ["feature"]}}


def _inference_data(post, key, design: Design, model: str):
    """``post.to_arviz`` named by the design's columns, in 4 chains, or 1 where a sampler stored too few
    draws for 4 chains of at least 4 (ArviZ warns of more chains than draws)."""
    draws = getattr(post, "num_draws", None)
    chains = 4 if draws is None or draws >= 16 else 1
    return post.to_arviz(key, num_chains=chains, **arviz_names(post, design, model))


def _summaries(post, design: Design, model: str, prob: float, key) -> list[dict[str, Any]]:
    rows = post.summary(key, 4000, prob=prob)
    names = _param_names(post, design, model)
    out = []
    from ..releases.summary import interval_labels  # not at import: the CLI starts without JAX

    lo_key, hi_key = interval_labels(prob)
    for r in rows:
        out.append(
            {
                "parameter": names.get(r["parameter"], r["parameter"]),
                "mean": r["mean"],
                "sd": r["sd"],
                "robust_sd": r["robust_sd"],
                "lo": r[lo_key],
                "hi": r[hi_key],
            }
        )
    return out


def _effects(post, design: Design, model: str, prob: float, key) -> list[dict[str, Any]]:
    """The coefficients in original units (:mod:`.effects`) for the built-in models; [] for a model of the
    user's own, whose weights this module cannot map to columns."""
    from .effects import original_unit_effects

    kinds = {"linear": "numeric", "logistic": "binary"}
    names = _param_names(post, design, model)
    columns = [names.get(f"w[{j}]") for j in range(len(design.feature_names))]
    if kinds.get(model) != design.target_kind or None in columns:
        return []
    w = np.asarray(post.sample(key, 4000)["w"]).reshape(4000, -1)
    return original_unit_effects(w, cast(list[str], columns), design, model, prob)  # no None: checked above


def _interval_rows(summary: list[dict[str, Any]]) -> dict[str, tuple[float, float, float]]:
    return {r["parameter"]: (r["lo"], r["mean"], r["hi"]) for r in summary}


#: the most parameters an interval figure shows (a figure of thousands of rows, from a wide table, takes
#: minutes to draw and exceeds matplotlib's image size); the report's table lists every parameter
MAX_FIGURE_PARAMETERS = 60


def _figure_intervals(rows, labels, path: Path, title: str) -> Path:
    from .. import plots

    names = list(dict.fromkeys(k for r in rows for k in r))
    if len(names) > MAX_FIGURE_PARAMETERS:
        keep = set(names[:MAX_FIGURE_PARAMETERS])
        rows = [{k: v for k, v in r.items() if k in keep} for r in rows]
        title = f"{title}\n(the first {MAX_FIGURE_PARAMETERS} of {len(names)} parameters; the table lists all)"
    return plots.interval_plot(
        rows, labels, path, title=title, xlabel="coefficient on the rescaled features (dashed line: no effect)"
    )


def _every_parameter(summary: list[dict[str, Any]]) -> str:
    """'every parameter', or which ones an interval figure shows when there are too many."""
    n = len(summary)
    return (
        "every parameter"
        if n <= MAX_FIGURE_PARAMETERS
        else f"the first {MAX_FIGURE_PARAMETERS} of the {n} parameters (the table lists all)"
    )


def _composed_total(ledger, delta: float, fallback: float):
    """The ledger's total at ``delta``, or at the larger ``fallback`` delta (basic composition of the
    releases' deltas) when their own deltas already use ``delta``: a release composed from its
    (epsilon, delta), such as a DP-Fast MH chain given the full delta under budget "each", has no
    finite total epsilon at that delta together with others."""
    try:
        return ledger.total(delta)
    except ValueError:
        if not delta < fallback < 1:
            raise
        return ledger.total(fallback)


def _privacy_block(report: Report, ledger, delta: float, seeded_by: set[str]) -> None:
    report.heading("Privacy spent")
    total = ledger.total(delta)
    lines = [f"{e.label}: {e.privacy.summary()}" for e in ledger.entries]
    if len(ledger) > 1:
        lines.append(
            f"all releases together (PLD composition, privacy.Ledger): epsilon = {total.epsilon:.4g} at "
            f"delta = {total.delta:.3g} ({total.neighbouring} neighbours)"
        )
    report.paragraph(plain_privacy(total.epsilon, total.delta, total.neighbouring))
    report.bullets(lines)
    if "user" in seeded_by:
        report.paragraph(
            "WARNING: the privacy noise was seeded with --seed (reproduction only). Anyone who knows "
            "the seed can remove the noise: do not publish this report as a private release.",
            note=True,
        )


def _next_steps(warned: Sequence[str], seeded_by: str, ledger: bool) -> list[str]:
    """What the reader of a fit report can do next, given what it shows."""
    steps = []
    if any("does not identify latents" in w for w in warned):
        steps.append(
            "Some coefficients are not identified by this release (Warnings above): read their intervals "
            "as 'unknown', not as estimates. A larger epsilon, more records or fewer features identify "
            "them; more DP-SGD steps at the same epsilon do not (the noise per step grows)."
        )
    elif warned:
        steps.append("Act on the warnings above before using the intervals.")
    if seeded_by == "user":
        steps.append("This run used --seed, so it is not private: rerun without --seed before publishing anything.")
    steps.append(
        "Post-process again at no privacy cost from the release itself: "
        'trace = dpposterior.DPVITrace.load("trace.npz"); '
        'dpposterior.noise_aware_posterior(trace, method="nuts") (or "laplace").'
    )
    steps.append(
        "Every further fit on the same data spends more privacy: "
        + ("the ledger records it (--ledger)." if ledger else "pass --ledger FILE to keep count of the total.")
    )
    steps.append(
        "The user guide (docs/user-guide.md in the source distribution), section 'Reading the report', "
        "explains every part of this report."
    )
    return steps


def _version() -> str:
    from .. import __version__

    return __version__


def plain_privacy(epsilon: float, delta: float, neighbouring: str) -> str:
    """The (epsilon, delta) guarantee in words, for a reader who does not know differential privacy."""
    who = (
        "adding or removing any one person's record"
        if neighbouring == "add_remove"
        else "replacing any one person's record by another"
    )
    factor = math.exp(epsilon)
    return (
        f"What the privacy guarantee means: {who} changes the probability of anything this report could show "
        f"by at most a factor of e^epsilon = {factor:.3g} (epsilon = {epsilon:.3g}), except with probability "
        f"delta = {delta:.3g}. So whatever one learns about a person from the report, one would learn nearly as "
        "well if their record had not been used; the smaller epsilon, the stronger that promise. It holds "
        "whatever else the reader knows, and it covers every number and figure below, which are computed from "
        "the releases alone."
    )


#: a clipped share above this is flagged in the report (clipping bias: docs/user-guide.md).
CLIPPED_SHARE_WARNING = 0.05


def _check_clip_check(epsilon: Any) -> float | None:
    """``clip_check`` (``--clip-check``): None, or the histogram's epsilon, finite and > 0 with a Laplace
    scale 1 / epsilon that float32 noise can carry; checked before any release (the histogram comes
    after the DP-SGD release, whose privacy would otherwise be spent on a run that then stops)."""
    from .._checks import check_laplace_scale

    if epsilon is None:
        return None
    what = "clip_check (--clip-check, the epsilon of the gradient-norm histogram)"
    epsilon = check_epsilon(epsilon, what)
    check_laplace_scale(1.0 / epsilon, f"1/{what} = 1/{epsilon!r}")
    return epsilon


#: the methods of ``compare`` whose release ``--clip-check`` checks: the two DP-SGD releases, NA-DPVI's
#: (a DPVITrace, which "naive" shares) and DPVIm's (a DPVImTrace); the other methods clip no gradients.
CLIP_CHECK_METHODS = ("na-dpvi", "naive", "dpvim")
#: where ``compare --clip-check`` saves the check of each DP-SGD release (in the report folder); the
#: NA-DPVI release's keeps the name ``fit`` gives its check.
CLIP_CHECK_FILES = {"na-dpvi": "clip_check.json", "dpvim": "clip_check_dpvim.json"}


def _check_clip_check_methods(methods: Sequence[str]) -> None:
    """Refuses ``--clip-check`` in a ``compare`` without a DP-SGD release (na-dpvi, naive or dpvim)."""
    if any(m in CLIP_CHECK_METHODS for m in methods):
        return
    other = [m for m in methods if m in ("gibbs-ss-noisy", "dp-fast-mh")]
    raise ValueError(
        f"clip_check (--clip-check) checks the clip of the DP-SGD releases (na-dpvi or naive, and "
        f"dpvim), which the methods {list(methods)} do not make: {' and '.join(other)} clip no "
        "per-record gradients (no DP-SGD release); add na-dpvi, naive or dpvim to the methods, or "
        "drop --clip-check"
    )


#: what the clip check's seeded key folds into ``PRNGKey(seed)``: the index of a step no run reaches
CLIP_CHECK_KEY_INDEX = 2**32 - 1


def clip_check_key(seed: int) -> Any:
    """The key of the clip check of the DP-SGD run seeded with ``seed`` (``--seed``, reproduction only):
    ``fold_in(PRNGKey(seed), 2**32 - 1)``.

    DP-SGD's step t draws its sampling, ELBO and noise keys from ``split(fold_in(PRNGKey(seed), t), 3)``
    (DPVIm's from ``fold_in`` of that step key), and threefry's ``split`` gives the same first keys
    whatever the count, so ``fold_in(PRNGKey(seed), 1)`` (an earlier choice) handed the check the
    sampling and ELBO keys of step 1. The index 2**32 - 1 is a step no run reaches (a trace of 2**32
    steps exceeds any memory), so no key is shared.
    """
    import jax

    return jax.random.fold_in(jax.random.PRNGKey(seed), CLIP_CHECK_KEY_INDEX)


def _clip_check(
    trace: Any,
    fn: Callable,
    design: Design,
    model: str,
    epsilon: float,
    seed: int | None,
    secure: bool,
    out: Path,
    log: Callable[[str], Any],
    *,
    method: str | None = None,
    problems: list[str] | None = None,
) -> Any:
    """The gradient-norm histogram release of ``fit --clip-check`` (and ``compare --clip-check``, of the
    DP-SGD release of ``method``), saved as ``out/clip_check.json`` (``compare``:
    ``out/CLIP_CHECK_FILES[method]``). With ``seed``, its key is :func:`clip_check_key` of it, no key
    that the DP-SGD run seeded with ``seed`` (``PRNGKey(seed)``, or ``seed + i`` in ``compare``) uses.

    In ``compare`` (``method`` given) the record names the checked release and states the release and
    its check composed (``"release"``, ``"release_and_check"``: PLD, :class:`~dpposterior.privacy.Ledger`,
    at the release's delta); the histogram is returned with that total, ``(hist, total)``.

    A file that cannot be written is written into a temporary folder instead, and ``problems`` gets a
    sentence saying where (the caller records the histogram in the ledger, then stops)."""
    from ..privacy import Ledger
    from ..vi import gradient_norm_histogram

    key = None if seed is None else clip_check_key(seed)  # none of the DP-SGD run's keys
    hist = gradient_norm_histogram(
        trace, fn, design.X, design.y, epsilon=epsilon, rng_key=key, secure=secure, **model_kwargs(model)
    )
    record = {
        "edges": [float(e) for e in hist.edges],
        "counts": [float(c) for c in hist.counts],
        "clip": hist.clip,
        "noise_scale": hist.noise_scale,
        "num_records": hist.num_records,
        "clipped_fraction": hist.clipped_fraction,
        "privacy": hist.privacy.to_dict(),
    }
    together = None
    if method is not None:
        pair = Ledger()
        pair.add(trace, method)
        pair.add(hist, f"clip check of {method}")
        together = pair.total(trace.privacy.delta)
        record.update(
            {
                "release": method,
                "release_and_check": {
                    "epsilon": together.epsilon,
                    "delta": together.delta,
                    "neighbouring": together.neighbouring,
                    "accountant": together.accountant,
                },
            }
        )
    name = "clip_check.json" if method is None else CLIP_CHECK_FILES[method]
    text = (json.dumps(record, indent=1) + "\n").encode()
    _save_or_spare(
        lambda path: write_bytes_atomic(path, text),
        out / name,
        "the clip check's histogram",
        log,
        [] if problems is None else problems,
    )
    log(
        f"      clip check{'' if method in (None, 'na-dpvi') else f' of {method}'}: {hist.clipped_fraction:.1%} of "
        f"the records at or above C = {hist.clip:.4g} (noisy; {hist.privacy.summary()})"
    )
    return hist if method is None else (hist, together)


def _clip_block(
    report: Report,
    hist: Any,
    heading: str = "Clip check (a second DP release)",
    run: str = "the run",
    again: str = "fit again",
    together: Any = None,
    what: str = "",
) -> None:
    report.heading(heading)
    share = hist.clipped_fraction
    report.paragraph(
        f"Per-record gradient norms at the end of {run}, counted in bins at multiples of the clip "
        f"C = {hist.clip:.4g} with Laplace noise of scale {hist.noise_scale:.3g} on every count, "
        f"rounded to a public grid (the snapping mechanism; the counts are noisy and may be negative). Share of the records at or above C: {share:.1%} "
        f"(standard error {hist.clipped_fraction_se:.1%})."
    )
    if together is not None:
        report.paragraph(
            f"{what} and its clip check together (PLD composition, privacy.Ledger): epsilon = "
            f"{together.epsilon:.4g} at delta = {together.delta:.3g} ({together.neighbouring} "
            "neighbours)."
        )
    report.table(
        ["gradient norm", "multiples of C", "noisy count", "share of N"],
        [[r["bin"], r["multiples_of_clip"], f"{r['count']:.1f}", f"{r['fraction']:.1%}"] for r in hist.table()],
    )
    if share > CLIPPED_SHARE_WARNING:
        report.paragraph(
            f"WARNING: about {share:.0%} of the records were clipped. Clipping that many moves the fit, "
            "and the noise-aware intervals do not account for it (docs/user-guide.md, 'Was the clip "
            f"too small?'): {again} with a larger --clip (a new release: its budget adds up).",
            note=True,
        )


def _public_block(report: Report, design: Design, schema_name: str) -> None:
    report.heading("What is private and what is not")
    items = [
        "Every posterior number in this report (means, sds, intervals, figures) is a post-processing of the DP "
        "release(s) listed above and is covered by their privacy guarantee.",
        f"NOT PRIVATISED, treated as public: the number of records N = {design.num_records} (it sets the "
        "scale of the likelihood, as in the papers). If N itself is sensitive, do not publish it.",
        f"Public by declaration: the schema ({schema_name}: column types, bounds, categories) and the settings.",
    ]
    if design.clipped_to_bounds:
        items.append(
            "Numeric values outside their declared bounds were clipped to the bounds before fitting "
            '(out_of_bounds = "clip"): a fixed, data-independent transform of each record; how many '
            "records were clipped is private and was not computed."
        )
    else:
        items.append(
            'NOT PRIVATE: out_of_bounds = "error", so that this report exists reveals that every record '
            'lay within its declared bounds (use "clip" to reveal nothing about it).'
        )
    items.append(
        "NOT PRIVATE, one fact: that the run finished reveals that the data passed the schema's checks "
        "(no missing values, every category declared, every target value inside the support of the "
        "model's likelihood)."
    )
    items += design.transforms()
    report.bullets(items)


def dp_fast_mh_logistic(
    design: Design,
    *,
    epsilon: float,
    delta: float,
    num_steps: int,
    rng_key: Any = None,
    secure: bool = False,
    layout: Any = None,
    burn_in: float = DP_FAST_MH_BURN_IN,
) -> Any:
    """DP-Fast MH (``dpposterior.mcmc``) for logistic regression on a design in [-1, 1]^p.

    Energies U_i(w) = softplus(-(2 y_i - 1) x_i . w) with bound constants c_i = sqrt(p): softplus is
    1-Lipschitz and ||x_i|| <= sqrt(p) on the rescaled design, so |U_i(w) - U_i(w')| <= sqrt(p) ||w - w'||
    for every record (a bound from the schema alone). Prior N(0, I) (as ``models.logistic_regression``),
    box [-10, 10]^p, start at 0 (data-independent). The total (epsilon, delta) is split into
    per-iteration parameters by :func:`dpposterior.mcmc.calibrate_chain` and the chain's release
    is accounted by :func:`dpposterior.mcmc.run_chain` (replace-one adjacency). The random-walk
    scale makes the full-batch noise on the log ratio about 1 per step: at small N the chain then
    barely moves (docs/user-guide.md), which ``diagnostics["moved"]`` (a function of the released
    samples) shows.

    Returns:
      A :class:`~dpposterior.baselines.DrawsPosterior` of the draws after ``burn_in``.
    """
    import jax
    import jax.numpy as jnp

    from .. import mcmc
    from ..baselines import DrawsPosterior

    if design.target_kind != "binary":
        raise ValueError("dp-fast-mh is offered for logistic regression (a binary target) only")
    X, y = design.X, design.y
    n, p = X.shape
    c = math.sqrt(p)
    signs = (2.0 * y - 1.0).astype("float32")

    def energy(w, record):
        x, s = record
        return jax.nn.softplus(-s * jnp.dot(x, w))

    def log_prior(w):
        return -0.5 * jnp.sum(w * w)

    model = mcmc.energy_model(
        energy, (X, signs), log_prior_fn=log_prior, bound_constants=[c] * n, box=([-10.0] * p, [10.0] * p)
    )
    per = mcmc.calibrate_chain("dp_fast_mh", epsilon, delta, num_steps)
    eps_i = cast(float, per.epsilon)  # never None for dp_fast_mh (only the penalty method's can be)
    batch_cap = eps_i * model.total_bound / (6.0 * model.max_bound)
    sigma2 = math.sqrt(2.0 * math.log(1.25 / per.delta)) / eps_i
    scale = 1.0 / (sigma2 * 2.0 * c * math.sqrt(p))
    kernel = mcmc.dp_fast_mh_kernel(
        model, mcmc.random_walk(scale), epsilon=per.epsilon, delta=per.delta, batch_cap=batch_cap
    )
    res = mcmc.run_chain(kernel, [0.0] * p, num_steps, rng_key=rng_key, total_delta=delta, secure=secure)
    samples = np.asarray(res.samples[0], np.float32)
    steps = np.linalg.norm(np.diff(samples, axis=0), axis=1)
    diagnostics = {
        "moved": float(np.mean(steps > 0)),
        "mean_step": float(np.mean(steps)),
        "distance_from_start": float(np.linalg.norm(samples[-1])),
        "proposal_scale": scale,
        "batch_cap": batch_cap,
        "per_iteration_epsilon": per.epsilon,
    }
    draws = samples[int(burn_in * num_steps) :]
    return DrawsPosterior(layout=layout, draws=draws, privacy=res.privacy, method="dp_fast_mh", diagnostics=diagnostics)


#: the files ``fit`` writes into its report folder (each checked writable before any release)
FIT_FILES = (
    "trace.npz",
    "clip_check.json",
    "intervals.png",
    "naive_vs_noise_aware.png",
    "trace.png",
    "summary.md",
    "summary.html",
)
#: the files ``compare`` writes into its report folder, besides ``releases/<method>.npz``, the clip checks
#: and the ledger (``ledger.json`` there unless ``--ledger`` names another file)
COMPARE_FILES = ("compare_intervals.png", "summary.md", "summary.html")


def _planned_clip_check(epsilon: float) -> Any:
    """The PrivacySpent a clip check at ``epsilon`` will record (pure epsilon-DP, add/remove-one)."""
    from ..privacy import PrivacySpent

    return PrivacySpent(
        epsilon=epsilon, delta=0.0, neighbouring="add_remove", accountant="pure", mechanism="laplace_histogram"
    )


def fit_table(
    data: str | Path,
    schema: str | Path,
    target: str,
    *,
    model: str = "logistic",
    epsilon: float,
    delta: float,
    num_steps: int = 2000,
    sampling_rate: float = 0.1,
    clip: float | None = None,
    beta_rho: float = 100.0,
    method: str = "grid",
    out: str | Path = "report",
    seed: int | None = None,
    features: Sequence[str] | None = None,
    prob: float = 0.9,
    progress: bool = True,
    ledger: str | Path | None = None,
    log: Callable[[str], Any] = print,
    secure: bool = False,
    target_kind: str | None = None,
    clip_check: float | None = None,
    command: str | None = None,
) -> dict[str, Any]:
    """Fits a regression model to a table with NA-DPVI and writes a report folder.

    Privacy: one DPVI release (``dpposterior.dpvi``; Poisson-subsampled DP-SGD, add/remove-one
    adjacency, PLD accountant) at the target (epsilon, delta); everything else in the report is
    post-processing, except N (marked as not privatised). The release is saved (``out/trace.npz``)
    and added to ``ledger`` as soon as it is made, before any post-processing that could fail.

    Args:
      data: a CSV (header row) or Parquet file of records.
      schema: the TOML schema (:mod:`dpposterior.tabular.schema`).
      target: the target column.
      model: ``"logistic"``, ``"linear"`` or ``"module:function"``.
      epsilon, delta: the privacy target.
      num_steps, sampling_rate, clip, beta_rho: DP-SGD settings (clip default None: ``dpvi``'s ``clip="auto"``).
      method: the noise-aware solver, ``"grid"``, ``"nuts"`` or ``"laplace"``.
      out: the report folder (created if missing; a file there is refused before any release).
      seed: None (noise from the OS) or an int in [0, 2**32) (reproduction only; the report warns).
      features: the feature columns (default: every declared column but the target).
      prob: the probability of the reported central intervals.
      progress: show DP-SGD's progress bar.
      ledger: a ledger file (JSON, :meth:`dpposterior.privacy.Ledger.save`) of earlier releases from the
        same data: this run's release is added to it and the report gives the composed total of all (at
        ``delta`` plus :meth:`~dpposterior.privacy.Ledger.delta_used` when the earlier releases' own
        deltas use up ``delta``).
        Created if missing.
      log: where progress lines go.
      secure: draw the DP-SGD noise and sampling bits from the OS CSPRNG (``dpvi(secure=True)``);
        ``seed`` must then be None.
      target_kind: for a model of your own, ``"binary"`` (0/1 codes) or ``"numeric"`` (the target
        rescaled by its bounds, as a feature); None: binary for two categories or numeric bounds
        [0, 1], else numeric (so give ``"numeric"`` for a proportion in [0, 1]). The built-in models
        fix it (logistic: binary, linear: numeric).
      clip_check: None, or the epsilon of a second release: a Laplace histogram of the per-record
        gradient norms at the trace's end (:func:`dpposterior.vi.gradient_norm_histogram`; pure
        epsilon-DP, add/remove-one), saved as ``out/clip_check.json``, added to the ledger, composed with
        the DPVI release in the report, which says what share of the records C clipped.
      command: the command line that ran this (recorded in the report; the CLI passes its own).

    Returns:
      ``{"trace", "posterior", "naive", "design", "summary", "naive_summary", "report_md", "report_html"}``,
      ``"inference_data"`` (the noise-aware posterior's ArviZ InferenceData, the draws the summary
      describes, ``w`` labelled by the design's columns: :func:`arviz_names`), and ``"clip_check"`` (the :class:`~dpposterior.vi.GradientNormHistogram`, or None).

    Raises:
      ValueError, TypeError: a setting outside its range, a table or schema that does not fit, an
        ``out`` file or ``ledger`` that cannot be written, or a ledger that cannot be composed with this
        run's release (composed with its privacy record, computed from the settings alone); all checked
        before the data is read. An error of the post-processing after the release is a ValueError that
        says where the release was saved.
      ReleaseWriteError: (a ValueError) the release was made but ``out/trace.npz`` (or the ledger, or
        the clip check) could not be written: it was written into a new temporary folder instead and
        recorded in the ledger, and the message says why and where.
      FileNotFoundError: no data or schema file.
    """
    import jax

    from ..noise_aware import METHODS, noise_aware_posterior
    from ..privacy import Ledger
    from ..vi import RunOptions, dpvi

    _check_inputs(data, schema, target)
    epsilon, delta, num_steps, sampling_rate, clip = _check_common(epsilon, delta, num_steps, sampling_rate, clip, prob)
    beta_rho = check_positive(beta_rho, "beta_rho")
    if secure and seed is not None:
        raise ValueError(
            "--seed cannot be combined with --secure: secure mode draws the noise from the operating "
            "system's CSPRNG, with no seed to give"
        )
    seed = check_seed(seed)
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    clip_check = _check_clip_check(clip_check)
    out = check_output_dir(out, "out")  # before the release, so that no result is lost
    _check_outputs([out / name for name in FIT_FILES])
    _check_steps(num_steps, ["na-dpvi"])
    book = None
    if ledger is not None:
        # the composed total is stated at delta, or (when the earlier releases' own deltas use it up) at
        # delta plus their deltas (basic composition); a ledger with no valid total, or one the accountant
        # cannot compose with this run's release, is refused here, before the release, not after it
        planned = [("this run", planned_dpsgd_privacy(epsilon, delta, sampling_rate, num_steps))]
        if clip_check is not None:
            planned.append(("this run's clip check", _planned_clip_check(clip_check)))
        book = _open_ledger(ledger, planned, delta)
        fallback = delta + book.delta_used()
    t0 = time.perf_counter()
    design, fn, label, _ = _load(data, schema, target, model, features, log, target_kind=target_kind)
    clip_arg: float | str = "auto" if clip is None else clip
    # N is read from the data without noise: its label goes with it wherever it is shown (here the log)
    log(
        f"[2/4] DPVI: ({epsilon:g}, {delta:g})-DP, T={num_steps}, q={sampling_rate:g}, C={_clip_text(clip_arg)}, "
        f"N={design.num_records} (not privatised, treated as public)"
    )
    trace = dpvi(
        fn,
        design.X,
        design.y,
        epsilon=epsilon,
        delta=delta,
        num_steps=num_steps,
        sampling_rate=sampling_rate,
        clip=clip_arg,
        beta_rho=beta_rho,
        rng_key=None if seed is None else jax.random.PRNGKey(seed),
        run_options=RunOptions(progress=progress),
        model_name=label,
        secure=secure,
        **model_kwargs(model),
    )
    clip = trace.clip  # the clip the release used (chosen privately with clip="auto")
    log(f"      privacy spent: {trace.privacy.summary()}")
    # the release first: whatever fails in the post-processing below cannot lose it (nor its ledger entry);
    # a write that fails puts it in a temporary folder instead, records it, and stops with where it is
    problems: list[str] = []
    with contextlib.suppress(OSError):  # a folder that cannot be made: the write below says so
        out.mkdir(parents=True, exist_ok=True)
    saved = _save_or_spare(trace.save, out / "trace.npz", "the DPVI release", log, problems)
    ledger_at = None
    if book is not None:
        book.add(trace, f"fit {Path(data).name} -> {out.name}")
        # book is not None only when a ledger was given
        ledger_at = _save_or_spare(book.save, Path(cast(str | Path, ledger)), "the ledger", log, problems)
    _stop_if(problems, ledger_at)
    # _save_or_spare returns None only after adding to problems, when _stop_if has raised
    saved = cast(Path, saved)
    hist = None
    with contextlib.suppress(OSError):
        (out / "clip_check.json").unlink(missing_ok=True)  # an earlier run's into this folder: not this report's
    if clip_check is not None:  # a second release from the data, saved and recorded at once, like the first
        with _after_release(saved, ledger):
            hist = _clip_check(trace, fn, design, model, clip_check, seed, secure, out, log, problems=problems)
            if book is not None:  # only when a ledger was given
                book.add(hist, f"fit {Path(data).name} -> {out.name}: gradient-norm histogram")
                ledger_at = _save_or_spare(book.save, Path(cast(str | Path, ledger)), "the ledger", log, problems)
            _stop_if(problems, ledger_at)
    with _after_release(saved, ledger):
        log(f"[3/4] noise-aware posterior ({method}) from the release alone")
        naive = trace.last_iterate_posterior()
        post = noise_aware_posterior(trace, method=method, burn_in=NA_DPVI_BURN_IN)
        key = jax.random.PRNGKey(0)  # post-processing randomness: no privacy role
        s_aware = _summaries(post, design, model, prob, key)
        s_naive = _summaries(naive, design, model, prob, key)

        log(f"[4/4] writing the report to {out}")
        from .. import plots

        pct = f"{100 * prob:g}%"
        f_int = _figure_intervals(
            [_interval_rows(s_aware)],
            [f"noise-aware ({method})"],
            out / "intervals.png",
            f"{pct} posterior intervals (noise-aware)",
        )
        f_cmp = _figure_intervals(
            [_interval_rows(s_naive), _interval_rows(s_aware)],
            ["naive (last iterate)", f"noise-aware ({method})"],
            out / "naive_vs_noise_aware.png",
            f"{pct} intervals: naive vs noise-aware",
        )
        coord = trace.layout.coordinate_names()
        f_tr = plots.trace_plot(
            trace, out / "trace.png", names=[_param_names(post, design, model).get(c, c) for c in coord]
        )

        report = Report(f"dpposterior fit: {label} of {target!r} on {Path(data).name}")
        if post.warnings:
            report.heading("Warnings")
            labels = _param_names(post, design, model)
            for w in (_with_columns(w, labels) for w in post.warnings):
                report.paragraph(w, note=True)
                log(f"      warning: {w}")
        this = Ledger()
        this.add(trace, "DPVI (DP-SGD on the ELBO)")
        if hist is not None:
            this.add(hist, "gradient-norm histogram (clip check)")
        _privacy_block(report, this, delta, {trace.privacy.seeded_by})
        if book is not None:  # only when a ledger was given
            total = _composed_total(book, delta, fallback)
            report.bullets(
                [
                    f"with the {len(book) - 1} earlier release(s) recorded in {Path(cast(str | Path, ledger)).name}, all "
                    f"{len(book)} releases from this data together (PLD, privacy.Ledger): epsilon = "
                    f"{total.epsilon:.4g} at delta = {total.delta:g} ({total.neighbouring} neighbours)"
                    + (
                        ""
                        if total.delta == delta
                        else f"; stated at this larger delta (this run's {delta:g} plus the earlier releases' own "
                        f"deltas) because the releases composed from their (epsilon, delta) already use "
                        f"{delta:g}, so no finite epsilon exists at it"
                    )
                ]
            )
            log(
                f"      ledger {ledger}: {len(book)} releases, together epsilon = {total.epsilon:.4g} at "
                f"delta = {total.delta:g}"
            )
        if hist is not None:
            _clip_block(report, hist)
        report.heading(f"Posterior ({pct} central intervals)")
        report.paragraph(
            "Noise-aware intervals include the uncertainty added by the privacy noise; the naive ones "
            "(the last DP-SGD iterate) ignore it and are usually too narrow. Coefficients are on the "
            'rescaled features (see the transforms below). "robust sd" is the sd of the normal '
            "with the same interval: where it is much smaller than sd, the posterior has heavy tails and "
            'the interval describes its bulk better than mean +- sd does. "width ratio" is the '
            "noise-aware interval's width over the naive one's: how much the privacy noise widens it."
        )
        header = [
            "parameter",
            "mean",
            "sd",
            "robust sd",
            f"{pct} interval (noise-aware)",
            f"{pct} interval (naive)",
            "width ratio",
        ]
        rows = []
        for a, b in zip(s_aware, s_naive):
            wa, wb = a["hi"] - a["lo"], b["hi"] - b["lo"]
            rows.append(
                [
                    a["parameter"],
                    a["mean"],
                    a["sd"],
                    a["robust_sd"],
                    f"[{a['lo']:+.4g}, {a['hi']:+.4g}]",
                    f"[{b['lo']:+.4g}, {b['hi']:+.4g}]",
                    wa / wb if wb > 0 else float("inf"),
                ]
            )
        report.table(header, rows)
        effects = _effects(post, design, model, prob, key)
        if effects:
            report.heading(f"Effects in the table's units ({pct} central intervals, noise-aware)")
            report.paragraph(
                "Each row translates one coefficient back to the original columns: for a numeric "
                "feature, the effect of the stated increase with the other features held fixed; for "
                "a category, the difference from its reference level. "
                + (
                    "An odds ratio above 1 raises the odds of the outcome, below 1 lowers them; an "
                    "interval that contains 1 does not tell the direction."
                    if model == "logistic"
                    else f"Changes are in the units of {target}; an interval that contains 0 does not tell "
                    "the direction."
                )
            )
            report.table(
                ["term", "per", "measure", "median", f"{pct} interval"],
                [[e["term"], e["per"], e["measure"], e["median"], f"[{e['lo']:.4g}, {e['hi']:.4g}]"] for e in effects],
            )
            log(f"      estimates ({pct} intervals, noise-aware):")
            width = max(len(f"{e['measure']} per {e['per']}") for e in effects)
            for e in effects:
                what = f"{e['measure']} per {e['per']}"
                log(f"        {what:<{width}}  {e['median']:.4g}  [{e['lo']:.4g}, {e['hi']:.4g}]")
        report.heading("Figures")
        report.figure(f_int, f"{pct} noise-aware posterior intervals of {_every_parameter(s_aware)}")
        report.figure(f_cmp, "naive (last iterate) vs noise-aware intervals")
        report.figure(f_tr, "the released DP-SGD trace of the variational parameters (dashed: burn-in cut)")
        _public_block(report, design, Path(schema).name)
        report.heading("Settings")
        report.table(
            ["setting", "value"],
            [
                ["data", Path(data).name],
                ["model", label],
                ["target", f"{target} ({design.target_kind})"],
                ["epsilon, delta (target)", f"{epsilon:g}, {delta:g}"],
                ["DP-SGD steps T", num_steps],
                ["sampling rate q", sampling_rate],
                ["clip norm C", _clip_text(clip, trace.privacy)],
                ["beta_rho", beta_rho],
                ["noise multiplier sigma", f"{trace.noise_multiplier:.4g}"],
                ["noise-aware solver", method],
                ["model options", ", ".join(f"{k}={v:g}" for k, v in model_kwargs(model).items()) or "defaults"],
                ["noise seeded by", trace.privacy.seeded_by],
                ["dpposterior version", _version()],
                ["command", command or "dpposterior.tabular.fit_table (called from Python)"],
            ],
        )
        report.heading("What to do next")
        report.bullets(_next_steps(post.warnings, trace.privacy.seeded_by, ledger is not None))
        md, page = report.write(out)
        log(f"      wrote {md} and {page} ({time.perf_counter() - t0:.1f} s)")
    return {
        "trace": trace,
        "posterior": post,
        "naive": naive,
        "design": design,
        "summary": s_aware,
        "naive_summary": s_naive,
        "inference_data": post.to_arviz(key, **arviz_names(post, design, model)),
        "report_md": md,
        "report_html": page,
        "clip_check": hist,
    }


#: how the report names a neighbouring relation
_RELATION_WORDS = {"add_remove": "add/remove-one", "replace_one": "replace-one"}
#: the neighbouring relation each release of ``compare`` is accounted under
RELATIONS: dict[str, Neighbouring] = {
    "na-dpvi": "add_remove",
    "dpvim": "add_remove",
    "gibbs-ss-noisy": "add_remove",
    "dp-fast-mh": "replace_one",
}


def split_budget(
    releases: Sequence[str], epsilon: float, delta: float, budget: str = "split"
) -> dict[str, tuple[float, float]]:
    """The (epsilon, delta) each release of ``compare`` gets.

    ``"each"``: the full (epsilon, delta) each. ``"split"``: shares whose basic composition is
    (epsilon, delta) under the relation the total is stated for. When the k releases share a
    neighbouring relation, (epsilon / k, delta / k) each. When they mix (``"dp-fast-mh"`` is replace-one,
    the others add/remove-one), the total is for replace-one neighbours, and each release gets 1/k of the
    budget as a replace-one guarantee: a replace-one release (epsilon / k, delta / k), an add/remove
    release (e, d) = (epsilon / (2k), delta / (k (1 + e^e))), since by group privacy it is (2e, (1 + e^e) d)
    for replace-one neighbours (a replacement is a removal and an addition). Without that, a DP-Fast MH
    chain beside NA-DPVI, each given (epsilon / 2, delta / 2) at epsilon 1, composed to about 1.5 for
    replace-one neighbours.

    Raises:
      ValueError: an unknown release or budget.
    """
    if budget not in BUDGETS:
        raise ValueError(f"budget must be one of {BUDGETS}, got {budget!r}")
    unknown = [m for m in releases if m not in RELATIONS]
    if unknown or not releases:
        raise ValueError(f"releases must be among {tuple(RELATIONS)}, got {list(releases)}")
    k = len(releases)
    if budget == "each":
        return {m: (epsilon, delta) for m in releases}
    if len({RELATIONS[m] for m in releases}) == 1:
        return {m: (epsilon / k, delta / k) for m in releases}
    shares = {}
    for m in releases:
        if RELATIONS[m] == "replace_one":
            shares[m] = (epsilon / k, delta / k)
        else:
            e = epsilon / (2 * k)
            shares[m] = (e, delta / (k * (1.0 + math.exp(e))))
    return shares


def _planned_release(method: str, epsilon: float, delta: float, sampling_rate: float, num_steps: int) -> Any:
    """The PrivacySpent that the release of ``method`` at (epsilon, delta) will record, or one that the
    ledger composes no better (composed from its (epsilon, delta) under its relation), from public
    settings alone: to check before any release that the ledger can take it."""
    from ..privacy import PrivacySpent

    if method in ("na-dpvi", "dpvim"):
        return planned_dpsgd_privacy(epsilon, delta, sampling_rate, num_steps)
    if method == "gibbs-ss-noisy":
        return PrivacySpent(
            epsilon=epsilon,
            delta=0.0,
            neighbouring="add_remove",
            accountant="pure",
            mechanism="laplace_sufficient_statistics",
        )
    return PrivacySpent(
        epsilon=epsilon, delta=delta, neighbouring=RELATIONS[method], accountant="planned", mechanism=method
    )


def compare_table(
    data: str | Path,
    schema: str | Path,
    target: str,
    *,
    model: str = "logistic",
    methods: Sequence[str] = ("na-dpvi", "naive", "dpvim"),
    epsilon: float,
    delta: float,
    budget: str = "split",
    num_steps: int = 2000,
    sampling_rate: float = 0.1,
    clip: float | None = None,
    out: str | Path = "compare-report",
    seed: int | None = None,
    features: Sequence[str] | None = None,
    prob: float = 0.9,
    progress: bool = True,
    log: Callable[[str], Any] = print,
    target_kind: str | None = None,
    clip_check: float | None = None,
    ledger: str | Path | None = None,
    secure: bool = False,
) -> dict[str, Any]:
    """Runs several methods on one table under one privacy budget and reports them side by side.

    Methods: ``"na-dpvi"`` (DPVI + noise-aware grid), ``"naive"`` (the last iterate of the SAME DPVI
    release: no extra cost), ``"dpvim"`` (its own DP-SGD release), ``"gibbs-ss-noisy"`` (linear
    model only: Laplace-noised sufficient statistics, pure epsilon-DP, using the declared bounds),
    ``"dp-fast-mh"`` (logistic model only: a DP-Fast MH chain of ``num_steps`` iterations,
    :func:`dp_fast_mh_logistic`; replace-one adjacency; mixes only at large N).

    Budget: ``"split"`` (default): the k separate releases share (epsilon, delta) so that together
    they are (epsilon, delta)-DP by basic composition (the ledger's PLD total, reported, is lower), under
    the relation the total is stated for (:func:`split_budget`): (epsilon / k, delta / k) each when the
    releases share a neighbouring relation; with ``"dp-fast-mh"`` (replace-one) beside add/remove
    releases, shares for replace-one adjacency, an add/remove release getting epsilon / (2k) (group
    privacy doubles it for a replacement). ``"each"``: every release gets the full (epsilon, delta) (a
    fair method comparison; the report states the larger composed total).

    Settings as :func:`fit_table` (``target_kind`` and ``secure`` included: with ``secure=True`` every
    release, and the clip checks, draw their noise and sampling bits from the OS CSPRNG); release i of the
    k is seeded with ``seed + i`` when ``seed`` is given. Each release is written as soon as it is made, before the next method runs:
    ``out/releases/<method>.npz`` (:func:`dpposterior.tabular.releases.save_release`) and the ledger,
    ``ledger`` (default ``out/ledger.json``), to which each release is appended: the ledger is
    append-only, so a second run into the same ``out`` (or with the same ``ledger``) adds its releases to
    those recorded before, and the report states the total of all of them. Before anything is read from
    the data, every output path is checked writable and the ledger is composed with this run's planned
    releases (an unreadable or uncomposable ledger is refused then, not after a release). An error after
    a release says where they are; a release whose file cannot be written is written into a temporary
    folder instead, recorded in the ledger, and the run stops with a :class:`ReleaseWriteError` that
    says where it is.

    Clip check: ``clip_check`` None, or the epsilon of one more release per DP-SGD release, as
    ``fit_table``'s: a Laplace histogram of the per-record gradient norms at the release's final
    iterate (:func:`dpposterior.vi.gradient_norm_histogram`; pure epsilon-DP, add/remove-one), made
    right after that release and added to ``out/ledger.json``. The NA-DPVI release (shared by
    ``"na-dpvi"`` and ``"naive"``) is checked on dpvi's beta-scaled ELBO gradients, saved as
    ``out/clip_check.json``; the DPVIm release on the vector DPVIm clips (each record's loc gradient
    at one draw of theta shared by the records, not beta-scaled) at its own clip, saved as
    ``out/clip_check_dpvim.json``. Each file also states its release and check composed
    (``"release_and_check"``, PLD at the release's delta), as the report's section of the check
    does. The other methods clip no gradients: a ``compare`` without na-dpvi, naive or dpvim refuses
    ``clip_check``. Its epsilon is NOT taken from the budget: under ``"split"`` and ``"each"`` alike
    the methods' releases get what they would get without it, and each check comes on top, composed
    into the reported total (which can then exceed (epsilon, delta) under ``"split"``). The report
    tables the noisy bins and warns when more than 5% of the records were clipped (the seeded key,
    with ``seed``: :func:`clip_check_key` of ``seed + i`` for the checked release i).

    Returns:
      ``{"posteriors": {method: posterior}, "inference_data": {method: its ArviZ InferenceData, the
      weights named by the design's columns as in fit_table}, "ledger": Ledger of this run's releases,
      "total": PrivacySpent of them, "ledger_total": PrivacySpent of every release in the ledger file,
      "report_html",
      "clip_check": the NA-DPVI release's GradientNormHistogram or None, "clip_checks": {"na-dpvi" /
      "dpvim": GradientNormHistogram} of every checked release, ...}``.

    Raises:
      ValueError, TypeError: a setting outside its range, a table or schema that does not fit, an
        ``out`` or ``ledger`` that cannot be written, or a ledger that cannot be composed with this run's
        releases; all checked before any release.
      ReleaseWriteError: (a ValueError) a release was made but could not be written where asked; the
        message says where it was saved instead and where it is recorded.
      FileNotFoundError: no data or schema file.
    """
    import jax

    from ..privacy import Ledger

    _check_inputs(data, schema, target)
    epsilon, delta, num_steps, sampling_rate, clip = _check_common(epsilon, delta, num_steps, sampling_rate, clip, prob)
    if isinstance(methods, str):
        raise TypeError(
            f"methods must be a list of method names, got the single string {methods!r}; write [{methods!r}]"
        )
    methods = list(dict.fromkeys(methods))
    bad = [m for m in methods if m not in COMPARE_METHODS]
    if bad or not methods:
        raise ValueError(f"methods must be among {COMPARE_METHODS}, got {list(methods)}")
    if budget not in BUDGETS:
        raise ValueError(f"budget must be one of {BUDGETS}, got {budget!r}")
    if "gibbs-ss-noisy" in methods and model != "linear":
        raise ValueError("gibbs-ss-noisy is a linear-regression method: use --model linear or drop it")
    if "dp-fast-mh" in methods and model != "logistic":
        raise ValueError("dp-fast-mh is offered for --model logistic only (its energy bounds are derived for it)")
    clip_check = _check_clip_check(clip_check)
    if clip_check is not None:
        _check_clip_check_methods(methods)
    t0 = time.perf_counter()
    releases = [m for m in methods if m != "naive"]
    if "naive" in methods and "na-dpvi" not in methods:
        releases.append("na-dpvi")  # naive needs the DPVI release
    k = len(releases)
    secure = check_secure(secure)
    if secure and seed is not None:
        raise ValueError(
            "--seed cannot be combined with --secure: secure mode draws the noise from the operating "
            "system's CSPRNG, with no seed to give"
        )
    seed = check_seed(seed)
    if seed is not None and seed + k - 1 >= 2**32:
        raise ValueError(
            f"seed must be an integer in [0, 2**32 - {k - 1}) here: release i of the {k} is seeded "
            f"with seed + i, and JAX keeps only 32 bits of a seed; got {seed}"
        )
    out = check_output_dir(out, "out")  # before the releases, so that no result is lost
    folder = out / "releases"
    ledger_path = out / "ledger.json" if ledger is None else Path(check_output_file(ledger, "ledger"))
    checked_files = [] if clip_check is None else [out / CLIP_CHECK_FILES[m] for m in _checked(releases)]
    _check_outputs(
        [out / name for name in COMPARE_FILES] + [folder / f"{m}.npz" for m in releases] + [ledger_path] + checked_files
    )
    _check_steps(num_steps, releases)
    budgets = split_budget(releases, epsilon, delta, budget)
    if "dp-fast-mh" in releases:  # its calibration can refuse the budget: find out before any release
        from .. import mcmc

        mcmc.calibrate_chain("dp_fast_mh", *budgets["dp-fast-mh"], num_steps)
    planned = [(m, _planned_release(m, *budgets[m], sampling_rate, num_steps)) for m in releases]
    if clip_check is not None:
        planned += [(f"clip check of {m}", _planned_clip_check(clip_check)) for m in _checked(releases)]
    this_run = Ledger()
    for name, privacy in planned:
        this_run.add(privacy, name)
    try:  # the report's total of this run: refused now rather than after the releases
        _composed_total(this_run, delta, k * delta)
    except ValueError as e:
        raise ValueError(
            f"the releases of this run could not be composed into a total: {e}; nothing was released"
        ) from e
    book = _open_ledger(ledger_path, planned, delta)  # append-only: earlier runs' releases are kept
    earlier = len(book)
    design, fn, label, _ = _load(data, schema, target, model, features, log, f"[1/{k + 2}]", target_kind)
    clip_arg: float | str = "auto" if clip is None else clip
    shares = "; ".join(f"{m} ({e:.4g}, {d:.3g})" for m, (e, d) in budgets.items())
    log(
        f"      {k} release(s) (budget {budget!r}): {shares}"
        + (
            ""
            if clip_check is None
            else f"; and the clip check of {' and '.join(_checked(releases))} at epsilon "
            f"{clip_check:g}{' each' if len(_checked(releases)) > 1 else ''}, beyond the "
            "budget"
        )
    )

    if "gibbs-ss-noisy" in releases:  # a function of public sizes (the schema's features): said before any release
        from ..baselines.regression_gibbs import slow_sampler_message

        slow = slow_sampler_message(sum(c != INTERCEPT for c in design.feature_names), GSN_WARMUP + GSN_DRAWS)
        if slow is not None:
            log(f"      note: {slow}")

    def key(i):
        return None if seed is None else jax.random.PRNGKey(seed + i)

    run_ledger = Ledger()
    # the releases first, each written to disk with the ledger as soon as it is made: a failure of a
    # later release or of the post-processing below cannot lose the privacy already spent
    with contextlib.suppress(OSError):  # a folder that cannot be made: the first write says so
        folder.mkdir(parents=True, exist_ok=True)
    for name in CLIP_CHECK_FILES.values():  # an earlier run's into this folder: not this report's
        with contextlib.suppress(OSError):
            (out / name).unlink(missing_ok=True)
    made: dict[str, Any] = {}
    with _after_release(folder, ledger_path, made):
        checks = _make_releases(
            made,
            releases,
            (run_ledger, book),
            folder,
            ledger_path,
            design,
            fn,
            label,
            model,
            budgets,
            num_steps,
            sampling_rate,
            clip_arg,
            progress,
            key,
            k,
            log,
            clip_check=clip_check,
            seed=seed,
            secure=secure,
        )
        return _compare_report(
            made,
            methods,
            releases,
            run_ledger,
            design,
            model,
            label,
            prob,
            out,
            data,
            schema,
            target,
            epsilon,
            delta,
            budgets,
            budget,
            num_steps,
            sampling_rate,
            clip_arg,
            k,
            t0,
            log,
            checks,
            book=book,
            earlier=earlier,
            ledger_path=ledger_path,
        )


def _checked(releases: Sequence[str]) -> list[str]:
    """The releases of ``compare`` that ``--clip-check`` checks (its DP-SGD releases), in order."""
    return [m for m in releases if m in CLIP_CHECK_FILES]


def _make_releases(
    made,
    releases,
    ledgers,
    folder,
    ledger_path,
    design,
    fn,
    label,
    model,
    budgets,
    num_steps,
    sampling_rate,
    clip,
    progress,
    key,
    k,
    log,
    *,
    clip_check=None,
    seed=None,
    secure=False,
) -> Any:
    """The mechanisms of :func:`compare_table`, in order, release ``m`` at the ``budgets[m]`` (epsilon,
    delta); each release is added to ``made`` and to both ``ledgers`` (this run's, and the ledger file's,
    which is written to ``ledger_path``) as soon as it exists, and written. With ``clip_check``, the
    gradient-norm histogram of each DP-SGD release (na-dpvi, dpvim) follows it at once (``folder.parent /
    CLIP_CHECK_FILES[method]``, and the ledgers). A file that cannot be written goes to a temporary folder,
    is recorded, and the run stops (:class:`ReleaseWriteError`). Returns ``{method: (histogram, release and
    check composed)}`` for the checked releases (empty without ``clip_check``)."""
    from ..baselines import release_regression_statistics
    from ..vi import RunOptions, dpvi
    from ..vi._dpvim import dpvim

    run_ledger, book = ledgers
    problems: list[str] = []

    def record(release, what):
        run_ledger.add(release, what)
        book.add(release, what)
        at = _save_or_spare(book.save, ledger_path, "the ledger", log, problems)
        _stop_if(problems, at)

    checks: dict[str, Any] = {}
    for i, m in enumerate(releases):
        eps_each, delta_each = budgets[m]
        log(f"[{i + 2}/{k + 2}] {m}")
        if m == "na-dpvi":
            made[m] = dpvi(
                fn,
                design.X,
                design.y,
                epsilon=eps_each,
                delta=delta_each,
                num_steps=num_steps,
                sampling_rate=sampling_rate,
                clip=clip,
                rng_key=key(i),
                run_options=RunOptions(progress=progress),
                model_name=label,
                secure=secure,
                **model_kwargs(model),
            )
            what = "na-dpvi (DPVI release; naive shares it)"
        elif m == "dpvim":
            made[m] = dpvim(
                fn,
                design.X,
                design.y,
                epsilon=eps_each,
                delta=delta_each,
                num_steps=num_steps,
                sampling_rate=sampling_rate,
                clip=clip,
                rng_key=key(i),
                model_name=label,
                secure=secure,
                **model_kwargs(model),
            )
            what = "dpvim (its own DP-SGD release)"
        elif m == "dp-fast-mh":
            from ..vi.model_inspect import inspect_model

            layout = inspect_model(fn, (design.X, design.y), {})
            made[m] = dp_fast_mh_logistic(
                design,
                epsilon=eps_each,
                delta=delta_each,
                num_steps=num_steps,
                rng_key=key(i),
                layout=layout,
                secure=secure,
            )
            what = "dp-fast-mh (DP MCMC chain, replace-one)"
            dg = made[m].diagnostics
            log(
                f"      dp-fast-mh: mean step {dg['mean_step']:.3g}, final distance from the start "
                f"{dg['distance_from_start']:.3g}"
            )
        else:  # gibbs-ss-noisy: the design's numeric features and target are in [-1, 1] by construction
            Xf = design.X[:, [j for j, c in enumerate(design.feature_names) if c != INTERCEPT]]
            made[m] = release_regression_statistics(
                Xf, design.y, epsilon=eps_each, x_bound=1.0, y_bound=1.0, rng_key=key(i), secure=secure
            )
            what = "gibbs-ss-noisy (Laplace sufficient statistics)"
        _save_or_spare(functools.partial(save_release, made[m]), folder / f"{m}.npz", f"the {m} release", log, problems)
        record(made[m], what)
        if m in CLIP_CHECK_FILES and clip_check is not None:  # one more release, beyond the budget: saved at once
            checks[m] = _clip_check(
                made[m],
                fn,
                design,
                model,
                clip_check,
                None if seed is None else seed + i,
                secure,
                folder.parent,
                log,
                method=m,
                problems=problems,
            )
            record(checks[m][0], f"clip check of {m} (gradient-norm histogram, beyond the budget)")
    return checks


def _compare_report(
    made,
    methods,
    releases,
    ledger,
    design,
    model,
    label,
    prob,
    out,
    data,
    schema,
    target,
    epsilon,
    delta,
    budgets,
    budget,
    num_steps,
    sampling_rate,
    clip,
    k,
    t0,
    log,
    checks=None,
    *,
    book=None,
    earlier=0,
    ledger_path=None,
):
    """The post-processing of :func:`compare_table`: posteriors from the releases alone, the report
    (with ``checks``, ``{method: (gradient-norm histogram, release and check composed)}`` of the clip
    checks, a section each; with ``earlier`` releases recorded in the ledger file ``book`` before this
    run, the total of all of them too)."""
    import jax

    from ..baselines import gibbs_ss_noisy
    from ..noise_aware import noise_aware_posterior

    posts: dict[str, Any] = {}
    trace = made.get("na-dpvi")
    if "na-dpvi" in methods:
        posts["na-dpvi"] = noise_aware_posterior(trace, method="grid", burn_in=NA_DPVI_BURN_IN)
    if "naive" in methods:
        posts["naive"] = trace.last_iterate_posterior()
    if "dpvim" in made:
        posts["dpvim"] = made["dpvim"].noise_aware_posterior()
    if "dp-fast-mh" in made:
        posts["dp-fast-mh"] = made["dp-fast-mh"]
    if "gibbs-ss-noisy" in made:
        with warnings.catch_warnings():  # its cost estimate was logged before the releases
            warnings.filterwarnings("ignore", message="Gibbs-SS-Noisy with p = ", category=RuntimeWarning)
            posts["gibbs-ss-noisy"] = gibbs_ss_noisy(
                made["gibbs-ss-noisy"],
                num_warmup=GSN_WARMUP,
                num_draws=GSN_DRAWS,
                prior=LINEAR_PRIOR,
                rng_key=jax.random.PRNGKey(0),
            )
    total = _composed_total(ledger, delta, k * delta)
    log(f"      all releases together: epsilon = {total.epsilon:.4g} at delta = {total.delta:g}")
    book_total = None
    if book is not None:
        book_total = _composed_total(book, delta, delta + book.delta_used())
    if earlier:
        log(
            f"      ledger {ledger_path}: {len(book)} releases ({earlier} from earlier runs), together epsilon = "
            f"{book_total.epsilon:.4g} at delta = {book_total.delta:g}"
        )
    log(f"[{k + 2}/{k + 2}] writing the report to {out}")
    pkey = jax.random.PRNGKey(0)
    sums = {m: _summaries(posts[m], design, model, prob, pkey) for m in methods}
    pct = f"{100 * prob:g}%"
    fig = _figure_intervals(
        [_interval_rows(sums[m]) for m in methods], methods, out / "compare_intervals.png", f"{pct} intervals by method"
    )
    report = Report(f"dpposterior compare: {label} of {target!r} on {Path(data).name}")
    flagged = [
        (m, _with_columns(w, _param_names(posts[m], design, model) if hasattr(posts[m], "layout") else {}))
        for m in methods
        if m != "naive"
        for w in getattr(posts[m], "warnings", ())
    ]
    if flagged:
        report.heading("Warnings")
        for m, w in flagged:
            report.paragraph(f"{m}: {w}", note=True)
            log(f"      warning ({m}): {w}")
    report.heading("How the budget was shared")
    (eps_each, delta_each), mixed = budgets[releases[0]], len({RELATIONS[m] for m in releases}) > 1
    if budget == "each":
        share = (
            f"budget 'each': each of the {k} releases got the full ({epsilon:g}, {delta:g}) so the methods are "
            "compared at equal cost; together they spent more (below)"
        )
    elif not mixed:
        share = (
            f"budget 'split': each of the {k} releases got (epsilon, delta) = ({eps_each:.4g}, {delta_each:.3g}), "
            f"1/{k} of the total ({epsilon:g}, {delta:g}); by basic composition they are within it together"
        )
    else:
        share = (
            f"budget 'split' for replace-one neighbours (the releases' neighbouring relations differ, so the "
            f"total is stated for replace-one adjacency): each of the {k} releases got 1/{k} of ({epsilon:g}, "
            f"{delta:g}) as a replace-one guarantee: "
            + "; ".join(
                f"{m} ({e:.4g}, {d:.3g}) for {_RELATION_WORDS[RELATIONS[m]]} neighbours"
                for m, (e, d) in budgets.items()
            )
            + ". An add/remove (e, d) release is (2e, (1 + e^e) d) for replace-one neighbours (group privacy: a "
            "replacement is a removal and an addition), so by basic composition they are within "
            f"({epsilon:g}, {delta:g}) together for replace-one neighbours"
        )
    checks = dict(checks or {})
    hists = {m: h for m, (h, _) in checks.items()}
    hist = hists.get("na-dpvi")
    notes = []
    if hists:
        eps_check = next(iter(hists.values())).privacy.epsilon
        one = len(hists) == 1
        notes.append(
            f"clip check (--clip-check {eps_check:g}): "
            + ("one more release" if one else f"{len(hists)} more releases, one per DP-SGD release")
            + ", BEYOND this budget: a noisy histogram of the per-record gradient norms of the "
            + (f"{next(iter(hists))} release" if one else f"each of the {' and '.join(hists)} releases")
            + f" (pure epsilon = {eps_check:g}, delta = 0{'' if one else ', each'}), not taken from any "
            + f"method's share; the composed total below includes {'it' if one else 'them'}"
            + (
                f" and can exceed ({epsilon:g}, {delta:g}), which bounds the methods' releases only"
                if budget == "split"
                else ""
            )
        )
    if "dp-fast-mh" in posts:
        dg = posts["dp-fast-mh"].diagnostics
        notes.append(
            f"dp-fast-mh: over {num_steps} iterations the chain's mean step was {dg['mean_step']:.3g} and it "
            f"ended {dg['distance_from_start']:.3g} from its start at 0 (computed from the released samples): "
            "a chain that has not travelled a posterior's width has not mixed, and its interval then says "
            "nothing about the data (at small N it cannot: docs/user-guide.md). "
            "Its guarantee is for replace-one neighbours, so the composed total below is "
            "stated for replace-one adjacency (DP-SGD re-accounted for it)"
            + (", for which the budget was split" if budget == "split" else "")
        )
    report.bullets(
        [
            share,
            "'naive' is the last iterate of the na-dpvi release: it costs nothing extra",
            *notes,
            f"composed total of everything released (PLD, privacy.Ledger): epsilon = {total.epsilon:.4g} "
            f"at delta = {total.delta:g}"
            + (
                ""
                if total.delta == delta
                else f" ({k} x delta: the releases' own deltas, composed from (epsilon, delta), already use all of "
                f"delta = {delta:g}, so no finite epsilon exists at it)"
            ),
            "each release is saved in releases/ (one .npz per method, with its PrivacySpent; "
            "dpposterior.DPVITrace.load reads na-dpvi.npz) and recorded in "
            + (
                "ledger.json"
                if ledger_path is None or ledger_path == out / "ledger.json"
                else f"the ledger {Path(ledger_path).name}"
            )
            + (
                ""
                if not earlier
                else f", which also records {earlier} release(s) of earlier runs: all {len(book)} together "
                f"(PLD, privacy.Ledger): epsilon = {book_total.epsilon:.4g} at delta = {book_total.delta:g} "
                f"({book_total.neighbouring} neighbours)"
            )
            + (
                ""
                if not hists
                else "; the clip check "
                + ", ".join(f"{'' if len(hists) == 1 else f'of {m} '}in {CLIP_CHECK_FILES[m]}" for m in hists)
            ),
        ]
    )
    _privacy_block(report, ledger, total.delta, {e.privacy.seeded_by for e in ledger.entries})
    runs = {
        "na-dpvi": "the na-dpvi run (the release that 'naive' shares)",
        "dpvim": "the dpvim run (its last iterate; the vector DPVIm clips: each record's loc gradient at one "
        "draw of theta shared by the records, not beta-scaled)",
    }
    for m, (h, together) in checks.items():
        _clip_block(
            report,
            h,
            f"Clip check of the {m} release (a DP release beyond the budget)",
            runs[m],
            "compare again",
            together,
            f"The {m} release",
        )
    report.heading(f"Posteriors side by side ({pct} central intervals)")
    names = [r["parameter"] for r in sums[methods[0]]]
    rows = []
    for j, name in enumerate(names):
        row = [name]
        for m in methods:
            r = sums[m][j] if j < len(sums[m]) and sums[m][j]["parameter"] == name else None
            row.append("-" if r is None else f"{r['mean']:+.3g} [{r['lo']:+.3g}, {r['hi']:+.3g}]")
        rows.append(row)
    report.table(["parameter", *methods], rows)
    report.figure(fig, f"{pct} intervals of {_every_parameter(sums[methods[0]])}, one colour per method")
    _public_block(report, design, Path(schema).name)
    report.heading("Settings")
    report.table(
        ["setting", "value"],
        [
            ["data", Path(data).name],
            ["model", label],
            ["methods", ", ".join(methods)],
            ["budget", budget],
            ["DP-SGD steps T (dpvi, dpvim)", num_steps],
            ["sampling rate q", sampling_rate],
            ["clip norm C", _release_clips(clip, made)],
            *(
                []
                if not hists
                else [
                    [
                        "clip check epsilon (beyond the budget)",
                        f"{eps_check:g}" + ("" if len(hists) == 1 else f" each ({', '.join(hists)})"),
                    ]
                ]
            ),
        ],
    )
    md, page = report.write(out)
    log(f"      wrote {md} and {page} ({time.perf_counter() - t0:.1f} s)")
    return {
        "posteriors": posts,
        "inference_data": {m: _inference_data(posts[m], pkey, design, model) for m in methods},
        "ledger": ledger,
        "total": total,
        "ledger_total": book_total,
        "design": design,
        "summaries": sums,
        "trace": trace,
        "report_md": md,
        "report_html": page,
        "clip_check": hist,
        "clip_checks": hists,
    }
