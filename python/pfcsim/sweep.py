"""Sweeps: one base spec expanded over grids and zips of keys, run point by point into a store.

A sweep spec (TOML file or dict, docs/guides/sweeps.md) names a base spec and the keys to vary:

    base = "quickstart.toml"
    [grid]
    "lb.scheme" = ["ecmp", "rps"]
    "traffic[0].load" = [0.3, 0.5, 0.7]
    seed = [1, 2]

Every point is the base spec with its keys set, checked completely (like `pfcsim validate`)
before anything runs, and keyed by a content hash of its resolved spec and inputs (`point_key`).
The store folder holds one run folder per finished point, `runs/<key>/`, written atomically
(files go to a temporary folder renamed when complete), so an interrupted sweep, even killed
with SIGKILL, keeps every point that finished and reruns only the others. A point that fails
is recorded in `failed/<key>.json` and the others go on. A sweep runs a point only while it
holds the point's claim (`claims/<key>`, a file lock that ends with its process), so sweeps
running at once on one store share the points instead of each running all of them.
"""

from __future__ import annotations

import contextlib
import copy
import fcntl
import hashlib
import itertools
import json
import multiprocessing
import multiprocessing.connection
import os
import re
import shutil
import signal
import sys
import tempfile
import threading
import time
import tomllib
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from multiprocessing import resource_tracker
from multiprocessing.connection import Connection
from multiprocessing.context import SpawnContext
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any

from pfcsim import _core
from pfcsim._core import SpecError
from pfcsim._spec import DICT_ORIGIN, SpecSource, dict_to_toml

#: A sweep spec as the public functions take it: a path to a TOML file, or a dict.
SweepLike = str | os.PathLike[str] | Mapping[str, Any]

#: The keys of a sweep spec.
SWEEP_KEYS = ("name", "base", "grid", "zip")

#: What marks a run folder as complete: written last, inside the folder, before it is renamed.
POINT_FILE = "point.json"

#: The name of a complete run folder: its key (a half-written one has a `.partial-` suffix).
_RUN_FOLDER = re.compile(r"[0-9a-f]{16}")

_KEY_SEGMENT = re.compile(r"([A-Za-z0-9_-]+)((?:\[\d+\])*)")


@dataclass(frozen=True)
class Point:
    """One run of a sweep: the base spec with some keys set."""

    #: Position in the sweep's expansion order (from 0).
    index: int
    #: The keys set, by key path (`"traffic[0].load"`), in the order of the sweep spec.
    params: dict[str, Any]
    #: The spec of this point, as a dict.
    spec: dict[str, Any]
    #: Content hash of the resolved spec and inputs (see `point_key`); filled by `check`.
    key: str = ""
    #: The spec with every default written out (TOML); filled by `check`.
    resolved_spec: str = ""

    @property
    def label(self) -> str:
        """The point's settings as `key=value` pairs, for messages and progress."""
        return " ".join(f"{k}={_short(v)}" for k, v in self.params.items()) or "(base spec)"


@dataclass(frozen=True)
class Sweep:
    """A sweep spec read and expanded."""

    name: str
    #: Names the sweep in messages: the file path as given, or `<dict>`.
    origin: str
    #: The base spec as a dict.
    base: dict[str, Any]
    #: Folder against which relative paths inside the base spec resolve.
    base_dir: Path
    #: Every point, in expansion order (grid tables in turn; the last key varies fastest).
    points: list[Point]
    #: The sweep spec as given, as TOML text, saved in the store.
    text: str


@dataclass
class SweepReport:
    """What `run_sweep` did."""

    #: The store folder.
    store: Path
    #: Every distinct point of the sweep (points with equal keys count once).
    points: list[Point]
    #: Keys of the points that were already in the store.
    skipped: list[str] = field(default_factory=list)
    #: Keys of the points run now.
    ran: list[str] = field(default_factory=list)
    #: Keys of the points that another sweep on the same store ran while this one waited.
    elsewhere: list[str] = field(default_factory=list)
    #: Points that failed: key -> error message.
    failed: dict[str, str] = field(default_factory=dict)
    #: Points whose stored runs a guard or a stall ended early (`[run]` in docs/reference/spec.md):
    #: key -> the `incomplete` message of their stats.json. Their results measure the run up to
    #: there; running them again gives the same.
    incomplete: dict[str, str] = field(default_factory=dict)
    #: True if the sweep was stopped (Ctrl-C) before every point ran.
    interrupted: bool = False

    @property
    def complete(self) -> bool:
        """Whether every point of the sweep now has its results in the store."""
        return not self.failed and not self.interrupted


def load_sweep(sweep: SweepLike, base_dir: str | os.PathLike[str] | None = None) -> Sweep:
    """Reads a sweep spec (TOML file path or dict) and expands its points (not yet checked).

    `base` is a path (relative to the sweep file's folder, or to `base_dir` or the current
    directory for a dict) or an inline table. Raises `SpecError` naming the key for anything
    malformed.
    """
    if isinstance(sweep, Mapping):
        origin = DICT_ORIGIN
        data = dict(sweep)
        folder = Path(base_dir) if base_dir is not None else Path.cwd()
        text = dict_to_toml(data)
    else:
        origin = os.fspath(sweep)
        path = Path(origin)
        text, data = _read_toml(path, origin)
        folder = Path(base_dir) if base_dir is not None else path.parent

    unknown = sorted(set(data) - set(SWEEP_KEYS))
    if unknown:
        raise SpecError(
            f"{origin}: unknown key `{unknown[0]}` in a sweep spec; "
            f"expected one of {', '.join(SWEEP_KEYS)}"
        )
    if "base" not in data:
        raise SpecError(f"{origin}: missing key `base`: the spec to sweep (a path or a table)")
    base, spec_dir, default_name = _read_base(data["base"], origin, folder)
    name = data.get("name", default_name if origin == DICT_ORIGIN else Path(origin).stem)
    if not isinstance(name, str) or not name:
        raise SpecError(f"{origin}: name: expected a non-empty string, got {name!r}")

    points = []
    for axes in _axes(data, origin):
        for combo in itertools.product(*axes):
            params: dict[str, Any] = {}
            for part in combo:
                params.update(part)
            spec = copy.deepcopy(base)
            # A whole table's axis goes before the axes of keys inside it (`traffic[0]`
            # before `traffic[0].load`), whatever their order in the spec: fewer segments
            # first, the spec's order among equals.
            for key in sorted(params, key=lambda k: len(_parse_key(k, origin))):
                set_key(spec, key, copy.deepcopy(params[key]), origin)
            points.append(Point(len(points), params, spec))
    return Sweep(name, origin, base, spec_dir, points, text)


def check(sweep: Sweep, on_checked: Callable[[int], object] | None = None) -> list[Point]:
    """Checks every point completely (as `pfcsim validate` does) and computes its key.

    Returns the distinct points (a point whose key equals an earlier one's is dropped), each
    with `key` and `resolved_spec` filled in. Raises `SpecError` for the first bad point, its
    message naming the point's settings. `on_checked(n)` is called after each point.
    """
    distinct: dict[str, Point] = {}
    for n, point in enumerate(sweep.points, start=1):
        source = _source(sweep, point)
        try:
            info = _core.validate(source.text, source.origin, str(source.base_dir), False)
        except SpecError as e:
            raise SpecError(_naming(source.origin, str(e))) from None
        key = point_key(info["resolved_spec"], info["inputs_digest"])
        if key not in distinct:
            distinct[key] = Point(point.index, point.params, point.spec, key, info["resolved_spec"])
        if on_checked is not None:
            on_checked(n)
    return list(distinct.values())


def point_key(resolved_spec: str, inputs_digest: str) -> str:
    """The content hash that names a point's run folder: 16 hexadecimal digits.

    SHA-256 of the pfcsim version, the digest of the built topology and flow table, and the
    resolved spec. Equal keys mean the same simulation; a new pfcsim version, an edited spec
    value or an edited CDF or flow file gives a new key.
    """
    from pfcsim import __version__

    digest = hashlib.sha256()
    for part in (f"pfcsim {__version__}", inputs_digest, resolved_spec):
        digest.update(part.encode())
        digest.update(b"\0")
    return digest.hexdigest()[:16]


def finished_keys(store: Path) -> set[str]:
    """Keys of the points whose run folders in `store` are complete."""
    runs = store / "runs"
    if not runs.is_dir():
        return set()
    return {
        p.name
        for p in runs.iterdir()
        if _RUN_FOLDER.fullmatch(p.name) and (p / POINT_FILE).is_file()
    }


def running_keys(store: Path) -> set[str]:
    """Keys of the points a sweep is running now: their claims in `store` are held."""
    folder = store / "claims"
    if not folder.is_dir():
        return set()
    return {p.name for p in folder.iterdir() if not _claim_free(p)}


def _claim_free(path: Path) -> bool:
    """Whether no live process holds the claim file `path` (without taking it)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(fd)
    return True


#: Runs tasks somewhere and yields each outcome as it finishes (see `execute`). A backend takes
#: a task from the iterator only when it can start it (the iterator claims the point then).
Backend = Callable[[Iterator["PointTask"]], Iterator["PointOutcome"]]


@dataclass(frozen=True)
class PointTask:
    """What a worker needs to run one point: picklable, independent of the store."""

    key: str
    text: str
    origin: str
    base_dir: str


@dataclass(frozen=True)
class PointOutcome:
    """What a worker hands back: the run folder's files, or the error."""

    key: str
    files: dict[str, bytes] | None
    error: str | None
    wall_seconds: float
    #: The most packets alive at once (0 if the point failed).
    peak_packets: int = 0


def execute(task: PointTask) -> PointOutcome:
    """Runs one point in a private temporary folder and returns its files (or the error).

    Runs in a worker process (pool or Ray); never raises for a failing simulation, so one bad
    point cannot stop the others.
    """
    start = time.perf_counter()
    try:
        with tempfile.TemporaryDirectory(prefix="pfcsim-point-") as tmp:
            scenario = _core.prepare(task.text, task.origin, task.base_dir, False)
            outcome = scenario.run(tmp, None)
            files = {p.name: p.read_bytes() for p in sorted(Path(tmp).iterdir()) if p.is_file()}
        wall = time.perf_counter() - start
        return PointOutcome(task.key, files, None, wall, outcome["peak_packets"])
    except Exception as e:  # any failure is reported as the point's outcome
        message = str(e) if isinstance(e, SpecError) else f"{type(e).__name__}: {e}"
        message = _naming(task.origin, message)
        return PointOutcome(task.key, None, message, time.perf_counter() - start)


def run_sweep(
    sweep: Sweep,
    store: Path,
    backend: Backend,
    *,
    points: list[Point] | None = None,
    on_start: Callable[[list[Point], set[str]], object] | None = None,
    on_point: Callable[[Point, PointOutcome], object] | None = None,
    on_elsewhere: Callable[[Point, str | None], object] | None = None,
) -> SweepReport:
    """Runs the points of `sweep` missing from `store` with `backend`.

    `points` are the checked points (default: `check(sweep)`). `on_start(points, done)` is
    called once the work is known, `on_point(point, outcome)` after each point is stored, and
    `on_elsewhere(point, error)` for each point that another sweep on the store ran (`error`
    is None) or failed meanwhile.

    Each point runs under its claim (`_Claims`): a point that another sweep is running is
    left to it, and this sweep waits for it at the end (and runs it if that sweep dies first).
    Ctrl-C stops the sweep at once: what finished is kept, the points in flight are abandoned
    (the next run of the sweep runs them), and the report says `interrupted`.
    """
    if points is None:
        points = check(sweep)
    store.mkdir(parents=True, exist_ok=True)
    (store / "runs").mkdir(exist_ok=True)
    claims = _Claims(store)
    _remove_partial_runs(store, claims)
    _save_sweep_spec(sweep, store)
    done = finished_keys(store)
    report = SweepReport(store, points)
    report.skipped = [p.key for p in points if p.key in done]
    waiting = [p for p in points if p.key not in done]
    if on_start is not None:
        on_start(points, done)
    runner = _Runner(sweep, store, claims, report, on_point, on_elsewhere)
    try:
        while waiting:
            waiting = runner.wait_for(runner.run(backend, waiting))
    except KeyboardInterrupt:
        report.interrupted = True
    finally:
        runner.release_all()
    for key in [*report.skipped, *report.ran, *report.elsewhere]:
        message = _incomplete(store / "runs" / key)
        if message is not None:
            report.incomplete[key] = message
    return report


def _incomplete(folder: Path) -> str | None:
    """The `incomplete` message of the stored run `folder` (None: it ran to its end)."""
    try:
        stats = json.loads((folder / "stats.json").read_text())
        if not isinstance(stats, dict):
            raise ValueError(f"a JSON {type(stats).__name__}, not an object")
    except (OSError, ValueError) as e:
        raise unreadable_run(folder, "stats.json", e) from None
    return stats.get("incomplete")


def unreadable_run(folder: Path, name: str, why: object) -> ValueError:
    """The error of run folder `folder`, whose file `name` cannot be read because of `why`."""
    return ValueError(
        f"run folder {folder} is unreadable: {name}: {why} (remove the folder; a sweep that has "
        "its point runs it again)"
    )


#: How often a sweep looks at the points another sweep is running, while it waits for them.
_POLL_SECONDS = 0.5


class _Runner:
    """The state of `run_sweep`: the claims it holds, the report, the callbacks."""

    def __init__(
        self,
        sweep: Sweep,
        store: Path,
        claims: _Claims,
        report: SweepReport,
        on_point: Callable[[Point, PointOutcome], object] | None,
        on_elsewhere: Callable[[Point, str | None], object] | None,
    ) -> None:
        """A runner of `sweep` into `store`, filling `report`."""
        self.sweep = sweep
        self.store = store
        self.claims = claims
        self.report = report
        self.on_point = on_point
        self.on_elsewhere = on_elsewhere
        #: The claims held, by key: open file descriptors of the claim files.
        self.held: dict[str, int] = {}
        #: The failure records present at the start, by key: their modification times. A
        #: record newer than this was written by another sweep running now.
        self.old_failures = _failure_stamps(store)

    def run(self, backend: Backend, points: list[Point]) -> list[Point]:
        """Runs the points it can claim; returns those that another sweep holds."""
        others: list[Point] = []
        by_key: dict[str, Point] = {}

        def tasks() -> Iterator[PointTask]:
            for point in points:
                fd = self.claims.take(point.key)
                if fd is None:
                    others.append(point)
                    continue
                self.held[point.key] = fd
                if self.finished_elsewhere(point):
                    self.release(point.key)
                    continue
                by_key[point.key] = point
                yield _task(self.sweep, point)

        outcomes = backend(tasks())
        try:
            for outcome in outcomes:
                point = by_key[outcome.key]
                if outcome.files is not None:
                    _store_run(self.store, self.sweep, point, outcome)
                    _forget_failure(self.store, point.key)
                    self.report.ran.append(point.key)
                else:
                    _record_failure(self.store, self.sweep, point, outcome)
                    self.report.failed[point.key] = outcome.error or "failed"
                self.release(point.key)
                if self.on_point is not None:
                    self.on_point(point, outcome)
        finally:
            # Stops the backend's workers now (a generator's `finally`), not when collected.
            close = getattr(outcomes, "close", None)
            if close is not None:
                close()
        return others

    def wait_for(self, points: list[Point]) -> list[Point]:
        """Waits until the points another sweep holds are done or one of them is free.

        Returns those left to run (empty once another sweep finished all of them).
        """
        while True:
            points = [p for p in points if not self.finished_elsewhere(p)]
            if not points or any(self.claims.free(p.key) for p in points):
                return points
            time.sleep(_POLL_SECONDS)

    def finished_elsewhere(self, point: Point) -> bool:
        """Whether another sweep has run the point, or failed it, since this one started."""
        if (self.store / "runs" / point.key / POINT_FILE).is_file():
            self.report.elsewhere.append(point.key)
            error = None
        else:
            record = self.store / "failed" / f"{point.key}.json"
            stamp = _mtime(record)
            if stamp is None or stamp == self.old_failures.get(point.key):
                return False
            error = json.loads(record.read_text())["error"] or "failed"
            self.report.failed[point.key] = error
        if self.on_elsewhere is not None:
            self.on_elsewhere(point, error)
        return True

    def release(self, key: str) -> None:
        """Gives up the claim of `key`."""
        self.claims.release(key, self.held.pop(key))

    def release_all(self) -> None:
        """Gives up every claim still held (points abandoned by Ctrl-C or an error)."""
        for key in list(self.held):
            self.release(key)


class _Claims:
    """The claims of a store's points: `claims/<key>`, held while a sweep runs the point.

    A claim is an exclusive `flock` on the claim file. The kernel drops the lock when the
    process that holds it ends, however it ends (SIGKILL included), so a claim never outlives
    its sweep: "dead" needs no process id (ids are reused) and no timeout. A claim file
    without a lock is what a killed sweep leaves; the next sweep takes it over. A sweep
    removes the file when it gives the claim up; `take` checks, once it has the lock, that the
    file is still the one at the path, so a file removed meanwhile cannot be held twice.
    Claims work between processes of one machine, and between machines on a filesystem whose
    locks do (NFS with its lock service).
    """

    def __init__(self, store: Path) -> None:
        """The claims of `store`, in `store/claims/`."""
        self.folder = store / "claims"
        self.folder.mkdir(exist_ok=True)

    def take(self, key: str) -> int | None:
        """Claims point `key`: the open claim file, or None if a live process holds it."""
        path = self.folder / key
        while True:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                return None
            with contextlib.suppress(FileNotFoundError):
                if path.stat().st_ino == os.fstat(fd).st_ino:
                    return fd
            os.close(fd)  # its holder removed the file before we locked it: try again

    def release(self, key: str, fd: int) -> None:
        """Gives up the claim `fd` of `key`: removes the file, then unlocks it."""
        with contextlib.suppress(FileNotFoundError):
            (self.folder / key).unlink()
        os.close(fd)

    def free(self, key: str) -> bool:
        """Whether no live process holds the claim of `key` (without taking it)."""
        return _claim_free(self.folder / key)


def _task(sweep: Sweep, point: Point) -> PointTask:
    """The worker's task for a checked point."""
    source = _source(sweep, point)
    return PointTask(point.key, source.text, source.origin, str(source.base_dir))


def _source(sweep: Sweep, point: Point) -> SpecSource:
    """The point's spec as the core reads it, named `<sweep> point <i> (<settings>)`."""
    origin = f"{sweep.origin} point {point.index} ({point.label})"
    return SpecSource(dict_to_toml(point.spec), origin, sweep.base_dir, line_numbers=False)


def _naming(origin: str, message: str) -> str:
    """`message` starting with `origin` (the core names the spec only in some messages)."""
    return message if message.startswith(origin) else f"{origin}: {message}"


def _store_run(store: Path, sweep: Sweep, point: Point, outcome: PointOutcome) -> None:
    """Writes a finished point's run folder atomically: all files, then the rename."""
    assert outcome.files is not None
    final = store / "runs" / point.key
    partial = store / "runs" / f"{point.key}.partial-{os.getpid()}"
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir()
    for name, data in outcome.files.items():
        (partial / name).write_bytes(data)
    from pfcsim import __version__

    record = {
        "key": point.key,
        "sweep": sweep.name,
        "index": point.index,
        "params": point.params,
        "label": point.label,
        "pfcsim_version": __version__,
        "wall_seconds": outcome.wall_seconds,
        "peak_packets": outcome.peak_packets,
        "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    point_file = partial / POINT_FILE
    point_file.write_text(json.dumps(record, indent=2, default=str) + "\n")
    with point_file.open("rb") as f:
        os.fsync(f.fileno())
    if final.exists():  # an incomplete folder from an older layout: replace it
        shutil.rmtree(final)
    partial.rename(final)


def _record_failure(store: Path, sweep: Sweep, point: Point, outcome: PointOutcome) -> None:
    """Writes `failed/<key>.json` with the point's settings and error."""
    folder = store / "failed"
    folder.mkdir(exist_ok=True)
    record = {
        "key": point.key,
        "sweep": sweep.name,
        "index": point.index,
        "params": point.params,
        "label": point.label,
        "error": outcome.error,
        "spec": point.resolved_spec,
    }
    _write_atomically(
        folder / f"{point.key}.json", json.dumps(record, indent=2, default=str) + "\n"
    )


def _forget_failure(store: Path, key: str) -> None:
    """Removes the failure record of a point that has now run."""
    with contextlib.suppress(FileNotFoundError):
        (store / "failed" / f"{key}.json").unlink()


def _failure_stamps(store: Path) -> dict[str, int]:
    """The modification times of the store's failure records, by key."""
    stamps = {}
    for record in (store / "failed").glob("*.json"):
        stamp = _mtime(record)
        if stamp is not None:
            stamps[record.stem] = stamp
    return stamps


def _mtime(path: Path) -> int | None:
    """The modification time of `path` in nanoseconds (None if there is no such file)."""
    try:
        return path.stat().st_mtime_ns
    except FileNotFoundError:
        return None


def _remove_partial_runs(store: Path, claims: _Claims) -> None:
    """Deletes run folders left half-written by a sweep that was stopped.

    A sweep writes a run folder under the point's claim: a folder whose claim is held is being
    written by a live sweep and is left alone.
    """
    for partial in (store / "runs").glob("*.partial-*"):
        key = partial.name.partition(".")[0]
        fd = claims.take(key)
        if fd is not None:
            shutil.rmtree(partial, ignore_errors=True)
            claims.release(key, fd)


def _save_sweep_spec(sweep: Sweep, store: Path) -> None:
    """Keeps the sweep spec as given in `sweeps/<name>.toml`, its base in `<name>.base.toml`."""
    folder = store / "sweeps"
    folder.mkdir(exist_ok=True)
    _write_atomically(folder / f"{sweep.name}.toml", sweep.text)
    _write_atomically(folder / f"{sweep.name}.base.toml", dict_to_toml(sweep.base))


def _write_atomically(path: Path, text: str) -> None:
    """Writes `path` through a temporary file renamed over it.

    A reader (another sweep on the store) sees the old content or the new, never a part.
    """
    partial = path.with_name(f"{path.name}.partial-{os.getpid()}")
    partial.write_text(text)
    partial.replace(path)


def _read_base(value: Any, origin: str, folder: Path) -> tuple[dict[str, Any], Path, str]:
    """The base spec as a dict, the folder its relative paths resolve against, its name."""
    if isinstance(value, Mapping):
        return dict(value), folder, str(value.get("name", "")) or "sweep"
    if not isinstance(value, str):
        raise SpecError(
            f"{origin}: base: expected a path to a spec file or a table, got {_short(value)}"
        )
    path = Path(value) if Path(value).is_absolute() else folder / value
    _, data = _read_toml(path, f"{origin}: base: {path}")
    return data, path.parent, path.stem


def _read_toml(path: Path, origin: str) -> tuple[str, dict[str, Any]]:
    """The text of TOML file `path` and what it holds; `SpecError`s start with `origin`."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise SpecError(f"{origin}: cannot read: {e.strerror} (os error {e.errno})") from None
    try:
        return text, tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise SpecError(f"{origin}: {e}") from None


def _axes(data: Mapping[str, Any], origin: str) -> list[list[list[dict[str, Any]]]]:
    """The sweep's parts, each a list of axes whose product is a set of points.

    `grid` is one table or an array of tables (`[[grid]]`): each table is a part, and the
    sweep is the union of the parts, in order. In a part every grid key is its own axis and
    every zip group (shared by all parts) is one axis whose lists advance together. Axes are
    in the spec's order; each is a list of alternatives, each alternative a dict of settings.
    """
    grids = data.get("grid", {})
    tables = [grids] if isinstance(grids, Mapping) else grids
    if not isinstance(tables, list) or not tables:
        raise SpecError(
            f"{origin}: grid: expected a table (or a non-empty array of tables) of key = [values]"
        )
    zip_axes = _zip_axes(data, origin)
    parts = []
    for i, grid in enumerate(tables):
        where = "grid" if isinstance(grids, Mapping) else f"grid[{i}]"
        if not isinstance(grid, Mapping):
            raise SpecError(f"{origin}: {where}: expected a table of key = [values]")
        axes = [
            [{key: v} for v in values] for key, values in flatten_axes(grid, where, origin).items()
        ]
        parts.append(axes + zip_axes)
    return parts


def _zip_axes(data: Mapping[str, Any], origin: str) -> list[list[dict[str, Any]]]:
    """One axis per zip group: its lists advance together."""
    axes: list[list[dict[str, Any]]] = []
    zips = data.get("zip", [])
    groups = [zips] if isinstance(zips, Mapping) else zips
    if not isinstance(groups, list):
        raise SpecError(f"{origin}: zip: expected a table (or array of tables) of key = [values]")
    for i, group in enumerate(groups):
        where = "zip" if isinstance(zips, Mapping) else f"zip[{i}]"
        if not isinstance(group, Mapping):
            raise SpecError(f"{origin}: {where}: expected a table of key = [values]")
        lists = flatten_axes(group, where, origin)
        lengths = {k: len(v) for k, v in lists.items()}
        if len(set(lengths.values())) > 1:
            sizes = ", ".join(f"{k} has {n}" for k, n in lengths.items())
            raise SpecError(
                f"{origin}: {where}: the lists of a zip must have equal lengths ({sizes})"
            )
        if lists:
            n = next(iter(lengths.values()))
            axes.append([{k: v[j] for k, v in lists.items()} for j in range(n)])
    return axes


def flatten_axes(table: Mapping[str, Any], where: str, origin: str) -> dict[str, list[Any]]:
    """`{key path: values}` from a grid or zip table; nested tables become dotted key paths.

    (`lb.scheme = [...]` written unquoted is a nested table in TOML; `"lb.scheme" = [...]`
    is one key: both mean the key path `lb.scheme`.)
    """
    out: dict[str, list[Any]] = {}

    def walk(node: Mapping[str, Any], prefix: str) -> None:
        for key, value in node.items():
            path = f"{prefix}.{key}" if prefix else key
            if isinstance(value, Mapping):
                walk(value, path)
            elif isinstance(value, list) and value:
                _parse_key(path, f"{origin}: {where}")
                out[path] = value
            else:
                raise SpecError(
                    f"{origin}: {where}.{path}: expected a non-empty list of values, "
                    f"got {_short(value)}"
                )

    walk(table, "")
    return out


def _parse_key(path: str, where: str) -> list[str | int]:
    """The segments of a key path such as `traffic[0].load`: names and list indices."""
    segments: list[str | int] = []
    for part in path.split("."):
        m = _KEY_SEGMENT.fullmatch(part)
        if m is None:
            raise SpecError(
                f"{where}: `{path}` is not a key path; write names joined by dots, "
                "with [i] for an entry of an array of tables, e.g. traffic[0].load"
            )
        segments.append(m.group(1))
        segments.extend(int(i) for i in re.findall(r"\[(\d+)\]", m.group(2)))
    return segments


def set_key(spec: dict[str, Any], path: str, value: Any, origin: str) -> None:
    """Sets key path `path` of `spec` to `value`; missing tables on the way are created."""
    segments = _parse_key(path, origin)
    node: Any = spec
    walked = ""
    for i, segment in enumerate(segments):
        last = i == len(segments) - 1
        if isinstance(segment, int):
            if not isinstance(node, list) or segment >= len(node):
                count = len(node) if isinstance(node, list) else 0
                raise SpecError(
                    f"{origin}: `{path}`: the base spec has {count} entries in `{walked}`, "
                    f"so {walked}[{segment}] does not exist"
                )
            walked = f"{walked}[{segment}]"
            if last:
                node[segment] = value
            else:
                node = node[segment]
            continue
        if not isinstance(node, dict):
            raise SpecError(f"{origin}: `{path}`: `{walked}` is not a table in the base spec")
        walked = f"{walked}.{segment}" if walked else segment
        if last:
            node[segment] = value
        else:
            node = node.setdefault(segment, [] if isinstance(segments[i + 1], int) else {})


def _short(value: Any) -> str:
    """A compact rendering of a setting: inline TOML for tables, repr-like otherwise."""
    if isinstance(value, Mapping):
        inner = ", ".join(f"{k}={_short(v)}" for k, v in value.items())
        return "{" + inner + "}"
    if isinstance(value, str):
        return value
    return repr(value)


class WorkerStartError(RuntimeError):
    """A worker process of a sweep's pool ended before it could run a point."""


def process_pool(workers: int) -> Backend:
    """A backend running points on up to `workers` local processes (started fresh, not forked).

    A worker runs one point at a time and is handed the next task when it is free. Workers
    end with the sweep: Ctrl-C (or any error) in the sweep kills them at once, abandoning the
    points they were running, and a sweep killed outright (SIGKILL) leaves none behind (each
    worker watches its parent, see `_worker`). If a worker dies while running a point (a
    crash, or the kernel's out-of-memory killer), that point is tried once more on a new
    worker, then reported failed. A worker that ends before it can run anything (it could not
    import pfcsim, or the main script, which spawned workers import again) raises
    `WorkerStartError`.
    """
    if multiprocessing.current_process().name.startswith(_WORKER_NAME):
        # This is a pool worker importing a main script that starts a sweep when imported (an
        # unguarded script): end quietly, with a status that lets the parent say so once.
        raise SystemExit(_IMPORTS_A_SWEEP)

    def run(tasks: Iterable[PointTask]) -> Iterator[PointOutcome]:
        context = multiprocessing.get_context("spawn")
        source = iter(tasks)
        numbers = itertools.count(1)
        retries: list[PointTask] = []
        attempts: dict[str, int] = {}
        pool: list[_Worker] = []
        completed = False
        try:
            while True:
                # Give every idle worker a task; start workers (up to `workers`) for more.
                idle = [w for w in pool if w.task is None]
                while idle or len(pool) < workers:
                    task = retries.pop() if retries else next(source, None)
                    if task is None:
                        break
                    worker = idle.pop() if idle else _Worker.start(context, next(numbers), pool)
                    worker.give(task)
                if all(w.task is None for w in pool):
                    break
                ready = multiprocessing.connection.wait([w.conn for w in pool])
                for worker in [w for w in pool if w.conn in ready]:
                    try:
                        message = worker.conn.recv()
                    except (EOFError, OSError):  # the worker died
                        pool.remove(worker)
                        code = worker.end(kill=False)
                        if not worker.started:
                            raise WorkerStartError(_could_not_start(code)) from None
                        task = worker.task
                        if task is None:
                            continue
                        attempts[task.key] = attempts.get(task.key, 0) + 1
                        if attempts[task.key] < 2:
                            retries.append(task)
                        else:
                            yield PointOutcome(task.key, None, _died(code), 0.0)
                        continue
                    if message == _READY:
                        worker.started = True
                        worker.send_task()
                    else:
                        worker.task = None
                        yield message
            completed = True
        finally:
            for worker in pool:
                worker.end(kill=not completed)

    return run


#: The name of a pool worker process (followed by its number).
_WORKER_NAME = "pfcsim-sweep-worker"
#: What a worker sends once it has started.
_READY = "ready"
#: The exit status of a worker whose import of the main script starts a sweep.
_IMPORTS_A_SWEEP = 3


@dataclass
class _Worker:
    """A worker process of `process_pool`, its end of the pipe, and the task it runs."""

    process: BaseProcess
    conn: Connection
    #: Whether it has said it is ready (it imported everything it needs).
    started: bool = False
    #: The task given to it, until its outcome comes back.
    task: PointTask | None = None

    @staticmethod
    def start(context: SpawnContext, number: int, pool: list[_Worker]) -> _Worker:
        """Starts worker `number` and adds it to `pool`.

        The worker is started with SIGINT blocked, and keeps it blocked (a signal mask is
        inherited): a terminal's Ctrl-C goes to the whole process group, and the sweep alone
        decides what it means (it kills its workers), from the worker's first instruction
        on. The worker joins `pool` before SIGINT is unblocked here, so that a Ctrl-C pending
        meanwhile cannot leave it out of the pool that the sweep stops. (multiprocessing
        starts its resource tracker with the first process it starts, and unblocks SIGINT
        after that: the tracker is started first.)
        """
        conn, child_conn = context.Pipe()
        process = context.Process(
            target=_worker, args=(child_conn,), name=f"{_WORKER_NAME}-{number}", daemon=True
        )
        resource_tracker.ensure_running()
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            process.start()
            worker = _Worker(process, conn)
            pool.append(worker)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
            child_conn.close()  # the worker holds the only other end: it reads EOF if we go
        return worker

    def give(self, task: PointTask) -> None:
        """Hands `task` to the worker (sent once it has started)."""
        self.task = task
        if self.started:
            self.send_task()

    def send_task(self) -> None:
        """Sends the task given to the worker, if any."""
        if self.task is not None:
            with contextlib.suppress(OSError):  # it died: `run` reads EOF next
                self.conn.send(self.task)

    def end(self, *, kill: bool) -> int | None:
        """Stops the process (kills it, or lets it finish) and returns its exit code."""
        if kill:
            self.process.kill()
        self.conn.close()  # an idle worker reads EOF and returns
        self.process.join(timeout=10)
        if self.process.exitcode is None:
            self.process.kill()
            self.process.join()
        code = self.process.exitcode
        self.process.close()
        return code


def _worker(conn: Connection) -> None:
    """A pool worker: runs the tasks that come through `conn`, one at a time, until EOF.

    (It runs with SIGINT blocked, see `_Worker.start`.) A daemon thread waits on the pipe
    `multiprocessing.parent_process().sentinel`, whose other end only the parent holds: it
    reads EOF as soon as the parent process ends, however it ends (SIGKILL included), and the
    thread then ends the worker at once, in the middle of a point too (the simulation runs
    without the GIL). PR_SET_PDEATHSIG would do the same through ctypes on Linux only, and it
    fires when the thread that started the worker ends rather than its process.
    """
    parent = multiprocessing.parent_process()
    assert parent is not None
    threading.Thread(target=_exit_with, args=(parent.sentinel,), daemon=True).start()
    # The parent may go between two messages: its EOF or a failed send ends the worker.
    with contextlib.suppress(EOFError, OSError):
        conn.send(_READY)
        while True:
            conn.send(execute(conn.recv()))


def _exit_with(sentinel: int) -> None:
    """Ends this process as soon as `sentinel` (the parent's) is ready."""
    multiprocessing.connection.wait([sentinel])
    os._exit(1)


def _could_not_start(code: int | None) -> str:
    """The error of a worker that ended, with exit code `code`, before it could run a point."""
    guard = 'put the sweep under `if __name__ == "__main__":`'
    path = getattr(sys.modules["__main__"], "__file__", None)
    main = f"the main script {path}" if path else "the main script"
    if code == _IMPORTS_A_SWEEP:
        return (
            f"the worker process could not start: like every spawned process, it imports "
            f"{main} again, and the script starts a sweep when imported; {guard} "
            "(docs/guides/sweeps.md)"
        )
    return (
        f"the worker process could not start ({_exit_reason(code)}; its error is printed "
        f"above): it imports pfcsim, and like every spawned process {main} again; if the "
        f"script starts a sweep, {guard} (docs/guides/sweeps.md)"
    )


def _died(code: int | None) -> str:
    """The error of a point whose worker died while running it, twice (last with `code`)."""
    return (
        f"the worker process died while running this point, twice (last {_exit_reason(code)}): "
        "a crash, or out of memory"
    )


def _exit_reason(code: int | None) -> str:
    """How a process ended: `exit status N` or `killed by SIGNAME`."""
    if code is not None and code < 0:
        with contextlib.suppress(ValueError):
            return f"killed by {signal.Signals(-code).name}"
        return f"killed by signal {-code}"
    return f"exit status {code}"


def ray_backend(address: str) -> Backend:
    """A backend running each point as a Ray task (one CPU each).

    `address` is `local` (start a Ray instance on this machine), `auto` (join the cluster this
    machine belongs to, or start a local instance if there is none) or a cluster address
    (`ray://host:10001`, `host:6379`). Workers need pfcsim installed, and files named by the
    specs (CDF, topology and flow files) at the same paths; the shipped workloads are built
    in. Results come back to this process, which writes the store.
    """

    def run(tasks: Iterable[PointTask]) -> Iterator[PointOutcome]:
        try:
            import ray
        except ImportError:
            raise SpecError(
                "--ray needs the ray package: pip install 'pfcsim[ray]' (or pip install ray)"
            ) from None
        if not ray.is_initialized():
            quiet = {"include_dashboard": False, "log_to_driver": False}
            if address == "local":
                ray.init(**quiet)
            elif address == "auto":
                try:
                    ray.init(address="auto", log_to_driver=False)
                except ConnectionError:
                    ray.init(**quiet)
            else:
                ray.init(address=address, log_to_driver=False)
        remote = ray.remote(num_cpus=1, max_retries=1)(execute)
        pending = iter(tasks)
        refs: dict[Any, PointTask] = {}

        def fill() -> None:
            # A task is taken (its point claimed) only when the cluster has a CPU for it, so
            # that other sweeps of the store can run the points this one has not reached.
            while len(refs) < max(1, int(ray.cluster_resources().get("CPU", 1))):
                task = next(pending, None)
                if task is None:
                    return
                refs[remote.remote(task)] = task

        fill()
        try:
            while refs:
                ready, _ = ray.wait(list(refs), num_returns=1)
                for ref in ready:
                    task = refs.pop(ref)
                    fill()
                    try:
                        yield ray.get(ref)
                    except ray.exceptions.RayError as e:
                        yield PointOutcome(task.key, None, f"the Ray task failed: {e}", 0.0)
        finally:
            for ref in refs:
                ray.cancel(ref, force=True)

    return run
