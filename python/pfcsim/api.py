"""The library functions: run and validate specs, list the schemes and workloads."""

import os
import tempfile
import tomllib
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    Progress,
    SpinnerColumn,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
)

from pfcsim import _core
from pfcsim._spec import SpecLike, load_spec
from pfcsim.results import Results

#: A progress callback: called with the simulated time in seconds.
ProgressCallback = Callable[[float], object]


def run(
    spec: SpecLike,
    *,
    out: str | os.PathLike[str] | None = None,
    progress: bool | ProgressCallback = False,
    base_dir: str | os.PathLike[str] | None = None,
) -> Results:
    """Runs one scenario and returns its results.

    `spec` is a path to a TOML spec file or the same structure as a dict (docs/spec.md).
    `out` is the run folder to write (created if needed, files overwritten); without it the
    results are only kept in memory. `progress` is True for a progress bar on stderr, or a
    callable given the simulated time in seconds from time to time. Relative paths inside the
    spec resolve against `base_dir`, by default the spec file's folder (the current directory
    for a dict).

    The simulation runs with the GIL released, so other Python threads keep running. Raises
    `SpecError` for a spec that is invalid or cannot be read, `OSError` if the run folder
    cannot be written; an exception raised by the progress callable (or Ctrl-C) abandons the
    run and propagates.
    """
    source = load_spec(spec, base_dir)
    scenario = _core.prepare(source.text, source.origin, str(source.base_dir), source.line_numbers)
    if progress is True:
        with _arrival_bar(scenario.info, source.origin) as callback:
            return _run_prepared(scenario, out, callback)
    return _run_prepared(scenario, out, progress or None)


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
