"""The library functions: run, sweep and validate specs, list the schemes and workloads."""

from __future__ import annotations

import os
import tempfile
import tomllib
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pfcsim import _core
from pfcsim._core import SpecError
from pfcsim._spec import SpecLike, load_spec
from pfcsim.results import Results
from pfcsim.store import Store
from pfcsim.sweep import (
    Point,
    PointOutcome,
    SweepLike,
    SweepReport,
    check,
    load_sweep,
    process_pool,
    ray_backend,
    run_sweep,
)

if TYPE_CHECKING:
    # rich draws the progress bars and is imported only where one is drawn: a run without
    # progress (and `import pfcsim`) does without it.
    from rich.console import Console

#: A progress callback: called with the simulated time in seconds.
ProgressCallback = Callable[[float], object]


class IncompleteRunError(RuntimeError):
    """A run that a guard of its `[run]` table ended early, or that stalled.

    The guards are `max_events` and `max_sim_time`; a stall is a PFC deadlock
    (`deadlock_check`) or no progress (`no_progress`), docs/reference/spec.md "Guards". The message
    says which, where the run stood and what to do; `results` holds what the run measured up
    to there (its run folder is written, with `stats["incomplete"]`, and a deadlock's
    egresses in `results.deadlocks`).
    """

    def __init__(self, results: Results) -> None:
        """The error of the incomplete run `results`."""
        super().__init__(results.stats["incomplete"])
        #: What the run measured before the guard or the stall ended it.
        self.results = results


def run(
    spec: SpecLike,
    *,
    out: str | os.PathLike[str] | None = None,
    progress: bool | ProgressCallback = False,
    base_dir: str | os.PathLike[str] | None = None,
) -> Results:
    """Runs one scenario and returns its results.

    `spec` is a path to a TOML spec file or the same structure as a dict (docs/reference/spec.md).
    `out` is the run folder to write (created if needed, files overwritten); without it the
    results are only kept in memory. `progress` is True for a progress bar on stderr, or a
    callable given the simulated time in seconds from time to time. Relative paths inside the
    spec resolve against `base_dir`, by default the spec file's folder (the current directory
    for a dict).

    The simulation runs with the GIL released, so other Python threads keep running. Raises
    `SpecError` for a spec that is invalid or cannot be read, `OSError` if the run folder
    cannot be written, and `IncompleteRunError` (holding the results so far) if a guard of
    `[run]` (`max_events`, `max_sim_time`) ended the run or it stalled (a PFC deadlock, no
    progress: `deadlock_check`, `no_progress`); an exception raised by the progress
    callable (or Ctrl-C) abandons the run and propagates.
    """
    source = load_spec(spec, base_dir)
    scenario = _core.prepare(source.text, source.origin, str(source.base_dir), source.line_numbers)
    if progress is True:
        with _arrival_bar(scenario.info, source.origin) as callback:
            results = _run_prepared(scenario, out, callback)
    else:
        results = _run_prepared(scenario, out, progress or None)
    if "incomplete" in results.stats:
        raise IncompleteRunError(results)
    return results


def sweep(
    spec: SweepLike,
    *,
    out: str | os.PathLike[str] | None = None,
    workers: int | None = None,
    ray: str | None = None,
    progress: bool = False,
    base_dir: str | os.PathLike[str] | None = None,
) -> SweepReport:
    """Runs a sweep (docs/guides/sweeps.md) into a results store and indexes it.

    `spec` is a sweep spec file or dict. `out` is the store folder (default
    `results/<sweep name>`). Points run on `workers` local processes (default: one per CPU),
    or as Ray tasks if `ray` is `"local"`, `"auto"` or a cluster address. Every point is
    checked before any runs (a bad one raises `SpecError`); points already in the store are
    skipped; a point that fails is reported in the returned `SweepReport` (and in
    `failed/<key>.json`) without stopping the others. Sweeps running at once on one store
    share its points (`report.elsewhere`: those another sweep ran). `progress` shows a bar over
    points on stderr. Ctrl-C stops the sweep within moments, keeping every finished point and
    abandoning those in flight (`report.interrupted`). In a script, call it under
    `if __name__ == "__main__":` (worker processes import the script again); a worker that
    cannot start raises `WorkerStartError`.
    """
    loaded = load_sweep(spec, base_dir)
    store = Path(out) if out is not None else Path("results") / loaded.name
    if workers is not None and workers < 1:
        raise SpecError(f"workers must be at least 1, got {workers}")
    backend = ray_backend(ray) if ray else process_pool(workers or os.cpu_count() or 1)
    where = f"Ray ({ray})" if ray else f"{workers or os.cpu_count() or 1} local processes"
    from rich.console import Console

    console = Console(stderr=True)
    with _status(console, progress, f"checking {len(loaded.points)} points"):
        points = check(loaded)
    if not progress:
        report = run_sweep(loaded, store, backend, points=points)
    else:
        with _point_bar(console, loaded.name, where) as (on_start, on_point, on_elsewhere):
            report = run_sweep(
                loaded,
                store,
                backend,
                points=points,
                on_start=on_start,
                on_point=on_point,
                on_elsewhere=on_elsewhere,
            )
    Store(store)  # brings the index up to date
    return report


def open_store(path: str | os.PathLike[str]) -> Store:
    """The results store at `path` (made by `sweep`), with its DuckDB index up to date."""
    return Store(path)


def validate(spec: SpecLike, *, base_dir: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """Checks a spec completely without running it and summarizes it.

    Reads and validates the spec, builds its topology and flows and sets up the fabric (which
    catches a buffer too small for its headroom). Returns `name`, `hosts`, `switches`,
    `flows`, `scheme`, and the first and last flow start times `first_start_s` and
    `last_start_s` (simulated seconds). Raises `SpecError` with the first problem found.
    `spec` and `base_dir` are as for `run`.
    """
    source = load_spec(spec, base_dir)
    return _core.validate(source.text, source.origin, str(source.base_dir), source.line_numbers)


def schemes() -> list[dict[str, Any]]:
    """Every load-balancing scheme: `name`, `doc` (one line) and `defaults`.

    `defaults` maps each parameter of the scheme's `[lb]` table to its default value.
    """
    return [{**s, "defaults": tomllib.loads(s["defaults"])} for s in _core.schemes()]


def workloads() -> list[dict[str, Any]]:
    """Every shipped flow-size workload: `name`, `mean` and `max` flow size in bytes."""
    return _core.workloads()


def _run_prepared(
    scenario: _core.Scenario,
    out: str | os.PathLike[str] | None,
    progress: ProgressCallback | None,
) -> Results:
    """Runs a prepared scenario into the run folder `out`, or a temporary one if None."""
    if out is not None:
        folder = Path(out)
        return Results.from_run(folder, scenario.run(str(folder), progress), keep_path=True)
    with tempfile.TemporaryDirectory(prefix="pfcsim-run-") as tmp:
        folder = Path(tmp)
        return Results.from_run(folder, scenario.run(str(folder), progress), keep_path=False)


@contextmanager
def _arrival_bar(info: Mapping[str, Any], label: str) -> Iterator[ProgressCallback]:
    """Shows a progress bar on stderr; yields the callback that moves it.

    First prints what is about to run. The bar covers the flow arrivals in simulated time;
    after the last arrival the run drains the remaining flows. It disappears when done, and
    is not drawn at all when stderr is not a terminal.
    """
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        Progress,
        SpinnerColumn,
        TaskProgressColumn,
        TextColumn,
        TimeElapsedColumn,
    )

    console = Console(stderr=True)
    console.print(
        f"{label}: {info['flows']} flows on {info['hosts']} hosts, scheme {info['scheme']}",
        highlight=False,
        markup=False,
    )
    first, last = info["first_start_s"], info["last_start_s"]
    span = last - first
    columns = (
        SpinnerColumn(),
        TimeElapsedColumn(),
        BarColumn(),
        TaskProgressColumn(),
        TextColumn("of arrivals  {task.description}"),
    )
    # Nothing to redraw in a log file: there the bar stays off.
    shown = console.is_interactive or console.is_jupyter
    with Progress(*columns, console=console, transient=True, disable=not shown) as bar:
        total = span if span > 0 else 1.0
        task = bar.add_task("", total=total)

        def advance(now: float) -> None:
            """Moves the bar to simulated time `now` (seconds)."""
            arrivals_done = now >= last
            bar.update(
                task,
                completed=total if arrivals_done else max(now - first, 0.0),
                description=f"t = {now * 1e3:.3f} ms "
                + ("(draining)" if arrivals_done else "(arrivals)"),
            )

        yield advance


@contextmanager
def _status(console: Console, shown: bool, message: str) -> Iterator[None]:
    """A spinner with `message` while the block runs, if `shown`."""
    if not shown:
        yield
        return
    with console.status(message):
        yield


PointBarCallbacks = tuple[
    Callable[[list[Point], set[str]], object],
    Callable[[Point, PointOutcome], object],
    Callable[[Point, str | None], object],
]


@contextmanager
def _point_bar(console: Console, name: str, where: str) -> Iterator[PointBarCallbacks]:
    """A progress bar over the points of a sweep; yields `run_sweep`'s three callbacks.

    Prints what will run, then a line for each failed point. Where stderr is not a terminal
    (a log file), it prints a line for every finished point instead of drawing the bar.
    """
    from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    shown = console.is_interactive or console.is_jupyter
    columns = (
        SpinnerColumn(),
        TimeElapsedColumn(),
        BarColumn(),
        TextColumn("{task.completed}/{task.total} points"),
        TextColumn("{task.description}"),
    )
    with Progress(*columns, console=console, transient=True, disable=not shown) as bar:
        task = bar.add_task("", total=1)
        failures = 0

        def on_start(points: list[Point], done: set[str]) -> None:
            already = sum(p.key in done for p in points)
            console.print(
                f"sweep {name}: {len(points)} points, {already} already done, "
                f"{len(points) - already} to run on {where}",
                highlight=False,
                markup=False,
                soft_wrap=True,
            )
            bar.update(task, total=len(points), completed=already)

        def finished(point: Point, error: str | None, done: str) -> None:
            nonlocal failures
            bar.advance(task)
            if error is not None:
                failures += 1
                console.print(
                    f"point {point.index} ({point.label}) failed: {error}",
                    highlight=False,
                    markup=False,
                    soft_wrap=True,
                )
            elif not shown:
                console.print(
                    f"point {point.index} ({point.label}) {done}",
                    highlight=False,
                    markup=False,
                    soft_wrap=True,
                )
            bar.update(task, description=f"{failures} failed" if failures else "")

        def on_point(point: Point, outcome: PointOutcome) -> None:
            finished(point, outcome.error, f"done in {outcome.wall_seconds:.1f} s")

        def on_elsewhere(point: Point, error: str | None) -> None:
            finished(point, error, "done by another sweep")

        yield on_start, on_point, on_elsewhere
