"""Running a grid of coverage cells: in this process (default) or as Ray tasks, resumable on disk.

Cells of one *group* (same model, epsilon, sizes and seed; only the method differs) share their
replicates: the group's K DP-SGD runs are computed once (one compiled program, :mod:`.replicates`) and
every missing method of the group is evaluated on them, so methods are compared on the same traces.
Each finished cell is written at once, atomically (:mod:`.store`). A re-run skips every cell whose
file holds the same configuration; a group with some cells missing re-runs its replicates (the same
keys give the same traces) and computes only the missing cells. No cell is computed twice. Methods
with their own mechanism (the baselines, ``Method.needs_data``) release the group's synthetic data
sets, simulated once per group from the replicates' keys (:func:`.replicates.cell_data`). Their TARP
references are centred on their own posterior means (:mod:`.cell`), so they never read the DP-SGD
releases: a group of such methods alone runs no DP-SGD (:func:`compute_group`).

Backends:

* ``"local"``: groups run one after the other in this process, with progress bars over cells and
  over each group's replicates.
* ``"ray"``: each group with missing cells is one Ray task (``num_cpus`` each); the driver writes
  each cell file as its task returns. A method of the user's own (:func:`.methods.register_method` in
  the driver) is sent with each task that needs it, pickled by Ray's cloudpickle (its functions by
  value when they live in the user's own files, which the workers may not be able to import), and
  registered in the worker for that task; the worker checks that its fingerprint is the driver's
  (:func:`.methods.method_fingerprint`), and so does the driver for each record. A model of the user's
  own (:func:`dpposterior.models.register_model`) is carried and checked the same way
  (:func:`dpposterior.models.model_fingerprint`). ``address`` is passed
  to ``ray.init`` (None starts or joins a local instance; ``"auto"`` joins a running cluster). Workers
  receive the driver's ``XLA_FLAGS``, and the driver fixes the device count and batch sizes, so a
  cell's numbers equal the local backend's bit for bit (on the same jax/jaxlib and CPU type). Ray is
  an optional dependency (``pip install dpposterior[distributed]``).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import sys
import time
from typing import Any, Callable, Sequence

from ..models.registry import model_fingerprint
from .cell import CellUnusableError, evaluate_cell
from .config import CellConfig
from .methods import method_fingerprint
from .replicates import model_settings
from .store import ResultStore

BACKENDS = ("local", "ray")

#: evaluation order inside a group: cheap methods first, so an interrupted group keeps the most cells.
_COST_RANK = {"naive": 0, "grid": 1, "laplace": 2, "bernstein-sheldon": 3, "gibbs-ss-noisy": 4, "dpvim": 8, "nuts": 9}


@dataclasses.dataclass
class RunSummary:
    """What a run did.

    Attributes:
      results: one result record per requested cell, in the order requested.
      computed: the cells computed by this run.
      skipped: the cells found finished on disk (not recomputed).
      wall_seconds: wall time of the run.
      stale: the cells found on disk but computed under other model settings (:func:`stale_reason`),
        recomputed by this run.
      execution_differs: the cells found on disk (reused, in ``skipped``) whose DP-SGD replicates ran
        with other devices or another batch size than this run would use (:func:`execution_difference`):
        equal to this run's numbers up to the last bits of floating point, not bit for bit.
    """

    results: list[dict[str, Any]]
    computed: list[CellConfig]
    skipped: list[CellConfig]
    wall_seconds: float
    stale: list[CellConfig] = dataclasses.field(default_factory=list)
    execution_differs: list[CellConfig] = dataclasses.field(default_factory=list)


class CellsUnusableError(ValueError):
    """Cells of a run that could not be measured (:class:`~.cell.CellUnusableError`), raised by
    :func:`run_coverage` after it computed and saved every other cell.

    Attributes:
      failed: (cell, reason) pairs.
      computed: how many cells the run computed and saved.
    """

    def __init__(self, failed: list[tuple[CellConfig, str]], computed: int, out: Any) -> None:
        self.failed = list(failed)
        self.computed = computed
        lines = "; ".join(why for _, why in self.failed)
        super().__init__(
            f"{len(self.failed)} cell(s) could not be measured: {lines}. The run's other {computed} "
            f"computed cell(s) are saved in {os.fspath(out)!s} (a re-run skips them); change the "
            "failed cells' settings or leave them out"
        )


def execution_difference(
    record: dict[str, Any], config: CellConfig, devices: int, batch_size: int | None
) -> tuple[int, int] | None:
    """(devices, replicates per batch) of a finished cell's DP-SGD replicates when they differ from what a
    run with ``devices`` and ``batch_size`` (None: the default) would use for ``config``; None when they
    are the same, when the cell's group ran no DP-SGD (a group of mechanism-only methods: the settings
    do not enter its numbers), or when the record does not say.

    Devices and batch size are not part of a cell's configuration: they change its numbers only in the
    last bits of floating point (the order of float operations), and a configuration must name the same
    cell on every machine, so finished cells stay reusable where another device count is the default.
    They are recorded under ``execution`` instead, and a resumed run with other values says so.
    """
    from .replicates import replicate_batch_size

    exe = record.get("execution") or {}
    num_latent = len(record.get("coordinates") or ())
    rec_devices, rec_batch = exe.get("devices"), exe.get("batch_size")
    if (
        exe.get("group_ran_dpsgd") is False
        or num_latent == 0
        or not isinstance(rec_devices, int)
        or not isinstance(rec_batch, int)
        or rec_devices < 1
        or rec_batch < 1
    ):
        return None
    theirs = (rec_devices, replicate_batch_size(config, num_latent, rec_devices, rec_batch))
    mine = (devices, replicate_batch_size(config, num_latent, devices, batch_size))
    return None if theirs == mine else theirs


def _report_execution_differs(
    differs: list[tuple[CellConfig, tuple[int, int]]], out: Any, devices: int, batch_size: int | None
) -> None:
    """One line per recorded (devices, batch size) of the reused cells that differ from this run's."""
    by: dict[tuple[int, int], list[CellConfig]] = {}
    for c, theirs in differs:
        by.setdefault(theirs, []).append(c)
    mine = f"devices={devices}, batch_size={'default' if batch_size is None else batch_size}"
    for (d, b), cells in sorted(by.items()):
        print(
            f"note: {len(cells)} finished cell(s) reused from {out} (e.g. {cells[0].label()}) were computed with "
            f"devices={d}, batch_size={b} (this run: {mine}); their numbers equal this run's up to the last bits "
            f"of floating point, not bit for bit (devices and batching change the order of float operations). "
            f"For bit-identical results run with devices={d}, batch_size={b} (--devices {d} --batch-size {b}), "
            "or delete those cell files to recompute them.",
            file=sys.stderr,
        )


def stale_reason(record: dict[str, Any], config: CellConfig) -> str | None:
    """Why a finished result no longer holds for ``config`` under the current code, or None if it holds.

    A cell's results depend on its model's DP-SGD settings and unconstrained maps, which its
    :class:`CellConfig` does not name (:func:`.replicates.model_settings`), and, for a method of the
    user's own, on its function (:func:`.methods.method_fingerprint`), and for a model of the user's own on
    its functions (:func:`dpposterior.models.model_fingerprint`). A record that holds them is
    stale when they differ from the current ones; an older record without them is stale when its clip
    or beta_rho differ (its learning-rate scale and maps cannot be checked).
    """
    fingerprint = method_fingerprint(config.method)
    if fingerprint is not None and record.get("method_fingerprint") != fingerprint:
        return (
            f"method {config.method!r} is now another function ({fingerprint}; the cell was computed by "
            f"{record.get('method_fingerprint')})"
        )
    fingerprint = model_fingerprint(config.model)
    if fingerprint is not None and record.get("model_fingerprint") != fingerprint:
        return (
            f"model {config.model!r} is now other functions ({fingerprint}; the cell was computed with "
            f"{record.get('model_fingerprint')})"
        )
    current = json.loads(json.dumps(model_settings(config.model, config.num_records)))
    recorded = record.get("model_settings")
    if recorded is not None:
        changed = sorted(k for k in set(current) | set(recorded) if recorded.get(k) != current.get(k))
        return f"model settings changed: {', '.join(changed)}" if changed else None
    beta = record.get("beta") or []
    if float(record.get("clip", float("nan"))) != current["clip"] or not beta or float(beta[-1]) != current["beta_rho"]:
        return (
            f"clip/beta_rho changed: recorded {record.get('clip')}/{beta[-1] if beta else None}, "
            f"now {current['clip']}/{current['beta_rho']}"
        )
    return None


def _sorted_group(configs: Sequence[CellConfig]) -> list[CellConfig]:
    return sorted(configs, key=lambda c: (_COST_RANK.get(c.method, 5), c.method))


def compute_group(
    configs: Sequence[CellConfig],
    *,
    devices: int = 1,
    batch_size: int | None = None,
    progress: bool = False,
    on_result: Callable[[dict[str, Any]], None] | None = None,
    execution: dict[str, Any] | None = None,
    on_failure: Callable[[CellConfig, str], None] | None = None,
) -> list[dict[str, Any]]:
    """Computes the cells of one group: the replicates once, then each method on them.

    The replicates' DP-SGD runs only when a post-processing method is in the group; a group of methods
    with their own mechanism (the baselines) only simulates the data sets.

    Args:
      configs: cells that share :meth:`CellConfig.group_key` (the methods may differ).
      devices: XLA devices the replicate axis is split over.
      batch_size: replicates per compiled batch (default :func:`.replicates.default_batch_size`).
      progress: show a progress bar over the group's replicates.
      on_result: called with each finished cell's record as soon as it is ready (e.g. to save it).
      execution: extra fields recorded under ``"execution"`` in each record.
      on_failure: called with (cell, reason) for a cell that cannot be measured
        (:class:`~.cell.CellUnusableError`), after which the group's other cells are computed; None
        (the default) raises the error.

    Returns:
      The records of the cells computed, cheap methods first.
    """
    from .methods import get_method
    from .replicates import (
        ReplicateSummaries,
        cell_data,
        cpu_linalg_kernels,
        default_batch_size,
        dpvi_setup,
        run_replicates,
        simulate_data,
    )

    batch_size = _check_batch_size(batch_size)
    configs = _sorted_group(configs)
    if not configs:
        return []
    keys = {c.group_key() for c in configs}
    if len(keys) != 1:
        raise ValueError("compute_group needs cells that differ only in their method")
    first = configs[0]
    started_at = time.time()  # wall-clock epoch seconds: shows which groups ran at the same time
    t0 = time.perf_counter()
    setup = dpvi_setup(first)
    # Only post-processing methods read the group's DP-SGD releases (a method with its own mechanism
    # gets none, and its TARP references are centred on its own posterior): a group of mechanism-only
    # methods simulates its data sets and skips DP-SGD.
    dpsgd = not all(get_method(c.method).needs_data for c in configs)
    method_devices = devices  # each method program is checked for custom kernels on its own (map_in_chunks)
    linalg = cpu_linalg_kernels(first, setup) if dpsgd and devices > 1 else ()
    if linalg:  # jaxlib's CPU kernels deadlock across several XLA CPU devices (cpu_linalg_kernels)
        print(
            f"{first.model} eps={first.epsilon:g}: its DP-SGD program calls custom CPU kernels "
            f"({', '.join(linalg)}), which hang when several XLA CPU devices run them at once; running this "
            f"group's replicates on one device instead of {devices}",
            file=sys.stderr,
        )
        devices = 1
    if batch_size is None:
        batch_size = default_batch_size(first, setup.num_latent, devices)
    data = None  # the group's synthetic data sets, simulated once if a method runs its own mechanism
    if dpsgd:
        bar = None
        if progress:
            from tqdm.auto import tqdm

            bar = tqdm(
                total=first.replicates,
                desc=f"{first.model} eps={first.epsilon:g}: DP-SGD replicates",
                unit="rep",
                leave=False,
                file=sys.stderr,
                dynamic_ncols=True,
            )
        try:
            summaries = run_replicates(first, setup, batch_size=batch_size, devices=devices, progress=bar)
        finally:
            if bar is not None:
                bar.close()
    else:
        theta, arrays = simulate_data(first)
        summaries = ReplicateSummaries(theta=theta, final_phi=None, stats=None)
        data = cell_data(first, setup, arrays=arrays)
    rep_seconds = time.perf_counter() - t0
    exe = dict(execution or {})
    exe.update(
        devices=devices,
        batch_size=batch_size,
        xla_flags=os.environ.get("XLA_FLAGS", ""),
        group_methods=[c.method for c in configs],
        pid=os.getpid(),
        group_started_at=started_at,
        group_ran_dpsgd=dpsgd,
        method_devices=method_devices,
    )
    records = []
    for cfg in configs:
        if data is None and get_method(cfg.method).needs_data:
            data = cell_data(cfg, setup)
        try:
            rec = evaluate_cell(
                cfg,
                setup,
                summaries,
                data=data,
                replicates_seconds=rep_seconds,
                execution=dict(exe, finished_at=time.time()),
                devices=method_devices,
            )
        except CellUnusableError as e:  # the other methods of the group still run on its replicates
            if on_failure is None:
                raise
            on_failure(cfg, str(e))
            continue
        if on_result is not None:
            on_result(rec)
        records.append(rec)
    return records


def _ray_compute_group(
    config_dicts: list[dict[str, Any]],
    devices: int,
    batch_size: int | None,
    execution: dict[str, Any],
    methods: dict[str, tuple[bytes | None, str | None]] | None = None,
    models: dict[str, tuple[bytes | None, str | None]] | None = None,
) -> list[dict[str, Any]]:
    """The body of a Ray task: one group, returned as records (the driver writes them).

    ``methods`` maps each method of the group to (its pickled :class:`~.methods.Method` or None for the
    package's own, the driver's fingerprint): the user's methods are registered in the worker for the
    task only (the worker's registry is restored after it, as the worker serves other tasks), and every
    method must have the driver's fingerprint, so a cell is computed by the function the driver named.
    ``models`` does the same for the group's model (its pickled
    :class:`~dpposterior.models.ModelSpec` when it is the user's, :func:`~dpposterior.models.register_model`).
    """
    from ..models.registry import MODELS, models_changed
    from .methods import METHODS

    saved_models: dict[str, Any] = {}
    saved_methods: dict[str, Any] = {}
    try:
        _install_for_task(MODELS, models, model_fingerprint, "model", saved_models, models_changed)
        _install_for_task(METHODS, methods, method_fingerprint, "method", saved_methods)
        configs = [CellConfig.from_dict(d) for d in config_dicts]
        failed: list[dict[str, Any]] = []
        records = compute_group(
            configs,
            devices=devices,
            batch_size=batch_size,
            progress=False,
            execution=execution,
            on_failure=lambda c, why: failed.append({_FAILED: c.to_dict(), "reason": why}),
        )
        return records + failed
    finally:
        _restore(METHODS, saved_methods)
        _restore(MODELS, saved_models)
        if saved_models:
            models_changed()


def _install_for_task(
    registry: dict[str, Any],
    entries: dict[str, tuple[bytes | None, str | None]] | None,
    fingerprint: Callable[[str], str | None],
    kind: str,
    saved: dict[str, Any],
    changed: Callable[[], None] | None = None,
) -> None:
    """Registers each pickled entry of the user's in a Ray worker's ``registry`` (what it replaces goes to
    ``saved``, for :func:`_restore`), then checks every entry's fingerprint against the driver's.

    Raises:
      ValueError: an entry the worker does not know, or one whose functions are not the driver's.
    """
    for name, (payload, expected) in (entries or {}).items():
        if payload is not None:
            from ray import cloudpickle

            saved.setdefault(name, registry.get(name))
            registry[name] = cloudpickle.loads(payload)
            if changed is not None:
                changed()
        if name not in registry:
            raise ValueError(f"{kind} {name!r} is not registered in the Ray worker (pid {os.getpid()})")
        got = fingerprint(name)
        if got != expected:
            raise ValueError(
                f"{kind} {name!r} in the Ray worker (pid {os.getpid()}) is other functions than the "
                f"driver's (fingerprint {got}, the driver's {expected}); the cell is not computed"
            )


def _restore(registry: dict[str, Any], saved: dict[str, Any]) -> None:
    """Puts back what :func:`_install_for_task` replaced (None: the name was not registered before)."""
    for name, entry in saved.items():
        if entry is None:
            registry.pop(name, None)
        else:
            registry[name] = entry


def _installed_module(module: Any) -> bool:
    """True for a module of an installed package or of Python itself (the Ray workers import it by name);
    False for the user's own code (a script's folder, a notebook, a test file), shipped by value."""
    import sysconfig

    path = getattr(module, "__file__", None)
    if path is None:
        return True  # a built-in module
    roots = {sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    real = os.path.realpath(path)
    return any(real.startswith(os.path.realpath(r) + os.sep) for r in roots)


def _pickled(obj: Any, functions: Sequence[Any], what: str) -> bytes:
    """``obj`` pickled by Ray's cloudpickle for the workers: the modules of ``functions`` by value unless
    they are installed (or the package's, or ``__main__``, which goes by value anyway), as the workers may
    not be able to import the user's own files.

    Raises:
      ValueError: pickling failed (naming ``what`` and why).
    """
    from ray import cloudpickle

    modules = []
    registered = cloudpickle.list_registry_pickle_by_value()
    for f in functions:
        while isinstance(f, functools.partial):
            f = f.func
        module = sys.modules.get(getattr(f, "__module__", None) or "")
        if (
            module is None
            or module in modules
            or module.__name__ in registered
            or module.__name__ == "__main__"
            or module.__name__.startswith("dpposterior")
            or _installed_module(module)
        ):
            continue  # __main__ goes by value anyway; the package's and installed modules by name
        modules.append(module)
    try:
        for module in modules:
            cloudpickle.register_pickle_by_value(module)
        return cloudpickle.dumps(obj)
    except Exception as e:  # any pickling failure: a lock, an open file, a compiled object ...
        raise ValueError(
            f"{what} cannot be sent to the Ray workers: pickling it failed "
            f"({type(e).__name__}: {e}); keep its functions free of such objects (create them "
            "inside the functions), or use the local backend"
        ) from e
    finally:
        for module in modules:
            cloudpickle.unregister_pickle_by_value(module)


def _user_payloads(
    names: set[str],
    kind: str,
    fingerprint: Callable[[str], str | None],
    get: Callable[[str], Any],
    functions: Callable[[Any], tuple[Callable, ...]],
) -> dict[str, tuple[bytes | None, str | None]]:
    """What the Ray tasks need to know of the groups' methods or models (:func:`_ray_compute_group`): for
    each name, the registered object pickled by Ray's cloudpickle when it is the user's (its fingerprint
    is not None; its ``functions``' own modules by value unless installed), None for the package's, and
    the driver's fingerprint. Checked before Ray starts.

    Raises:
      ValueError: a user's method or model that cannot be pickled (naming it and why).
    """
    out: dict[str, tuple[bytes | None, str | None]] = {}
    for name in sorted(names):
        fp = fingerprint(name)
        if fp is None:
            out[name] = (None, None)
            continue
        obj = get(name)
        out[name] = (_pickled(obj, functions(obj), f"{kind} {name!r}"), fp)
    return out


def _method_payloads(groups: Sequence[Sequence[CellConfig]]) -> dict[str, tuple[bytes | None, str | None]]:
    """:func:`_user_payloads` of the groups' methods (a :class:`~.methods.Method` of the user's own)."""
    from .methods import get_method

    return _user_payloads(
        {c.method for g in groups for c in g},
        "method",
        method_fingerprint,
        get_method,
        lambda m: (m.fn, m.check_options, m.canonical_options),
    )


def _model_payloads(groups: Sequence[Sequence[CellConfig]]) -> dict[str, tuple[bytes | None, str | None]]:
    """:func:`_user_payloads` of the groups' models (a :class:`~dpposterior.models.ModelSpec` registered
    with :func:`dpposterior.models.register_model`)."""
    from ..models.registry import get_model

    return _user_payloads(
        {c.model for g in groups for c in g},
        "model",
        model_fingerprint,
        get_model,
        lambda spec: (spec.model, spec.simulate),
    )


def _check_batch_size(batch_size: Any) -> int | None:
    """None (the default batching) or an integer >= 1; a float or 0 is refused, never truncated."""
    if batch_size is None:
        return None
    from .._checks import check_positive_int

    return check_positive_int(batch_size, "batch_size (replicates per compiled batch)")


def _resolve_devices(devices: int | None) -> int:
    import jax

    available = jax.device_count()
    if devices is None:
        return available
    if isinstance(devices, bool) or not isinstance(devices, int) or devices < 1:
        raise ValueError(f"devices must be an integer >= 1, got {devices!r}")
    if devices > available:
        raise ValueError(
            f"devices={devices} but JAX has {available} device(s) in this process; on a CPU host set "
            "XLA_FLAGS=--xla_force_host_platform_device_count before JAX starts (the coverage command "
            "does this with --devices)"
        )
    return devices


def run_coverage(
    configs: Sequence[CellConfig],
    out: str | os.PathLike,
    *,
    backend: str = "local",
    address: str | None = None,
    devices: int | None = None,
    batch_size: int | None = None,
    progress: bool = True,
    ray_num_cpus: float = 1.0,
) -> RunSummary:
    """Computes every cell of ``configs`` that ``out`` does not already hold, and returns all results.

    Args:
      configs: the cells (any order; duplicates are computed once).
      out: the results folder (:mod:`.store`).
      backend: ``"local"`` or ``"ray"`` (module docstring).
      address: the Ray address (``ray`` backend only).
      devices: XLA devices to split replicates over (default: all devices JAX has in this process).
      batch_size: replicates per compiled batch (default from the configuration). Devices and batch
        size change a cell's numbers in the last bits of floating point only and are not part of its
        configuration: they are recorded in each cell's ``execution``, and finished cells computed with
        other values are reused, listed in ``RunSummary.execution_differs`` and named on stderr
        (:func:`execution_difference`).
      progress: show progress bars (cells; replicates with the local backend).
      ray_num_cpus: CPUs each Ray task reserves.

    Returns:
      A :class:`RunSummary`.

    Raises:
      ValueError: unknown backend, an address without the Ray backend, too many devices, a batch size
        that is not an integer >= 1, an ``out`` (or a
        cell folder under it) that is a file or cannot be created (checked before anything is computed).
      CorruptResultError: a results file for one of the cells is unreadable or inconsistent.
      CellsUnusableError: cells that could not be measured (fewer than 2 replicates with a finite trace
        and posterior); raised after every other cell was computed and saved, naming each.
      ImportError: the Ray backend without Ray installed.
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    if address is not None and backend != "ray":
        raise ValueError("address is only used with backend='ray'")
    batch_size = _check_batch_size(batch_size)
    if isinstance(ray_num_cpus, bool) or not isinstance(ray_num_cpus, (int, float)) or not ray_num_cpus > 0:
        raise ValueError(f"ray_num_cpus must be a number > 0 (CPUs each Ray task reserves), got {ray_num_cpus!r}")
    t_start = time.perf_counter()
    unique: list[CellConfig] = []
    for c in configs:
        if not isinstance(c, CellConfig):
            raise TypeError(f"configs must hold CellConfig objects, got {type(c).__name__}")
        if c not in unique:
            unique.append(c)
    from pathlib import Path

    from .._checks import check_output_dir

    check_output_dir(out, "out")  # before any computation, so that no finished cell is lost at its save
    for model in sorted({c.model for c in unique}):
        check_output_dir(Path(out) / "cells" / model, "the cell folder")
    store = ResultStore(out)
    done: dict[CellConfig, dict[str, Any]] = {}
    stale: list[CellConfig] = []
    for c in unique:  # read every existing file first: a corrupted one stops the run before any work
        rec = store.load(c)
        if rec is not None:
            why = stale_reason(rec, c)
            if why is None:
                done[c] = rec
            else:
                stale.append(c)
                print(f"recomputing {c.label()}: its result on disk is stale ({why})", file=sys.stderr)
    skipped = [c for c in unique if c in done]
    missing = [c for c in unique if c not in done]
    groups: dict[tuple, list[CellConfig]] = {}
    for c in missing:
        groups.setdefault(c.group_key(), []).append(c)
    devices = _resolve_devices(devices)
    differs = [(c, d) for c in skipped if (d := execution_difference(done[c], c, devices, batch_size)) is not None]
    if differs:
        _report_execution_differs(differs, out, devices, batch_size)
    computed: list[CellConfig] = []

    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(
            total=len(unique),
            initial=len(skipped),
            desc="coverage cells",
            unit="cell",
            file=sys.stderr,
            dynamic_ncols=True,
        )

    def save(rec: dict[str, Any]) -> None:
        store.save(rec)
        cfg = CellConfig.from_dict(rec["config"])
        done[cfg] = rec
        computed.append(cfg)
        if bar is not None:
            bar.update(1)
            bar.set_postfix_str(f"{cfg.label()}: RMSE {rec['rmse']:.3f}")

    failed: list[tuple[CellConfig, str]] = []

    def fail(cfg: CellConfig, why: str) -> None:
        failed.append((cfg, why))
        print(f"not measured: {why}; computing the other cells", file=sys.stderr)
        if bar is not None:
            bar.update(1)

    try:
        if backend == "local":
            for group in groups.values():
                compute_group(
                    group,
                    devices=devices,
                    batch_size=batch_size,
                    progress=progress,
                    on_result=save,
                    execution={"backend": "local"},
                    on_failure=fail,
                )
        elif groups:
            _run_ray(
                list(groups.values()),
                address=address,
                devices=devices,
                batch_size=batch_size,
                save=save,
                num_cpus=ray_num_cpus,
                fail=fail,
            )
    finally:
        if bar is not None:
            bar.close()
    if failed:
        raise CellsUnusableError(failed, len(computed), out)
    return RunSummary(
        results=[done[c] for c in configs],
        computed=computed,
        skipped=skipped,
        wall_seconds=time.perf_counter() - t_start,
        stale=stale,
        execution_differs=[c for c, _ in differs],
    )


def _import_ray():
    try:
        import ray
    except ImportError as e:
        raise ImportError(
            "the Ray backend needs Ray: pip install 'dpposterior[distributed]' (or pip install ray)"
        ) from e
    return ray


#: the key that marks a failed cell in what a Ray task returns (beside the records).
_FAILED = "failed_cell"


def _run_ray(
    groups: list[list[CellConfig]],
    *,
    address: str | None,
    devices: int,
    batch_size: int | None,
    save: Callable[[dict[str, Any]], None],
    num_cpus: float,
    fail: Callable[[CellConfig, str], None],
) -> None:
    ray = _import_ray()
    payloads = _method_payloads(groups)  # before Ray starts: a method that cannot be sent stops the run here
    model_payloads = _model_payloads(groups)  # and so does a model
    started = False
    if not ray.is_initialized():
        ray.init(address=address, include_dashboard=False, log_to_driver=False)
        started = True
    try:
        env = {"env_vars": {"XLA_FLAGS": os.environ.get("XLA_FLAGS", "")}}
        remote = ray.remote(_ray_compute_group).options(num_cpus=num_cpus, runtime_env=env, max_retries=0)
        pending = [
            remote.remote(
                [c.to_dict() for c in g],
                devices,
                batch_size,
                {"backend": "ray"},
                {c.method: payloads[c.method] for c in g},
                {g[0].model: model_payloads[g[0].model]},
            )
            for g in groups
        ]
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            for rec in ray.get(ready[0]):
                if _FAILED in rec:  # a cell the worker could not measure (CellUnusableError)
                    fail(CellConfig.from_dict(rec[_FAILED]), rec["reason"])
                    continue
                method = rec["config"]["method"]
                if rec.get("method_fingerprint") != payloads[method][1]:  # the worker checked it; so does the driver
                    raise ValueError(
                        f"a Ray worker computed {rec.get('label')} with method {method!r} of fingerprint "
                        f"{rec.get('method_fingerprint')}, not the driver's {payloads[method][1]}"
                    )
                model = rec["config"]["model"]
                if rec.get("model_fingerprint") != model_payloads[model][1]:
                    raise ValueError(
                        f"a Ray worker computed {rec.get('label')} with model {model!r} of fingerprint "
                        f"{rec.get('model_fingerprint')}, not the driver's {model_payloads[model][1]}"
                    )
                save(rec)
    finally:
        if started:
            ray.shutdown()
