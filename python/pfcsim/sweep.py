"""Sweeps: one base spec expanded over grids and zips of keys, run point by point into a store.

A sweep spec (TOML file or dict, docs/sweeps.md) names a base spec and the keys to vary:

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
is recorded in `failed/<key>.json` and the others go on.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import itertools
import json
import multiprocessing
import os
import re
import shutil
import tempfile
import time
import tomllib
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
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
    #: Points that failed: key -> error message.
    failed: dict[str, str] = field(default_factory=dict)
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
            for key, value in params.items():
                set_key(spec, key, copy.deepcopy(value), origin)
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


#: Runs a list of tasks somewhere; yields each outcome as it finishes (see `execute`).
Backend = Callable[[Sequence["PointTask"]], Iterator["PointOutcome"]]


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
) -> SweepReport:
    """Runs the points of `sweep` missing from `store` with `backend`.

    `points` are the checked points (default: `check(sweep)`). `on_start(points, done)` is
    called once the work is known, `on_point(point, outcome)` after each point is stored.
    Ctrl-C stops the sweep: what finished is kept, and the report says `interrupted`.
    """
    if points is None:
        points = check(sweep)
    store.mkdir(parents=True, exist_ok=True)
    (store / "runs").mkdir(exist_ok=True)
    _remove_partial_runs(store)
    _save_sweep_spec(sweep, store)
    done = finished_keys(store)
    report = SweepReport(store, points)
    report.skipped = [p.key for p in points if p.key in done]
    todo = [p for p in points if p.key not in done]
    if on_start is not None:
        on_start(points, done)
    by_key = {p.key: p for p in todo}
    tasks = [_task(sweep, p) for p in todo]
    try:
        for outcome in backend(tasks):
            point = by_key[outcome.key]
            if outcome.files is not None:
                _store_run(store, sweep, point, outcome)
                _forget_failure(store, point.key)
                report.ran.append(point.key)
            else:
                _record_failure(store, sweep, point, outcome)
                report.failed[point.key] = outcome.error or "failed"
            if on_point is not None:
                on_point(point, outcome)
    except KeyboardInterrupt:
        report.interrupted = True
    return report


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
    (folder / f"{point.key}.json").write_text(json.dumps(record, indent=2, default=str) + "\n")


def _forget_failure(store: Path, key: str) -> None:
    """Removes the failure record of a point that has now run."""
    with contextlib.suppress(FileNotFoundError):
        (store / "failed" / f"{key}.json").unlink()


def _remove_partial_runs(store: Path) -> None:
    """Deletes run folders left half-written by an interrupted sweep."""
    for partial in (store / "runs").glob("*.partial-*"):
        shutil.rmtree(partial, ignore_errors=True)


def _save_sweep_spec(sweep: Sweep, store: Path) -> None:
    """Keeps the sweep spec as given in `sweeps/<name>.toml`, its base in `<name>.base.toml`."""
    folder = store / "sweeps"
    folder.mkdir(exist_ok=True)
    (folder / f"{sweep.name}.toml").write_text(sweep.text)
    (folder / f"{sweep.name}.base.toml").write_text(dict_to_toml(sweep.base))


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
            [{key: v} for v in values] for key, values in _flatten_axes(grid, where, origin).items()
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
        lists = _flatten_axes(group, where, origin)
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


def _flatten_axes(table: Mapping[str, Any], where: str, origin: str) -> dict[str, list[Any]]:
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


def process_pool(workers: int) -> Backend:
    """A backend running points on `workers` local processes (started fresh, not forked).

    If a worker process dies (a crash, or the kernel's out-of-memory killer), the points it
    and its siblings were running are tried once more in a new pool, then reported failed.
    """

    def run(tasks: Sequence[PointTask]) -> Iterator[PointOutcome]:
        attempts = dict.fromkeys((t.key for t in tasks), 0)
        pending = list(tasks)
        while pending:
            pool = ProcessPoolExecutor(
                max_workers=max(1, min(workers, len(pending))),
                mp_context=multiprocessing.get_context("spawn"),
            )
            broken: list[PointTask] = []
            try:
                futures = {pool.submit(execute, t): t for t in pending}
                for future in as_completed(futures):
                    task = futures[future]
                    try:
                        yield future.result()
                    except BrokenProcessPool:
                        attempts[task.key] += 1
                        if attempts[task.key] < 2:
                            broken.append(task)
                        else:
                            yield PointOutcome(task.key, None, _WORKER_DIED, 0.0)
            finally:
                pool.shutdown(wait=False, cancel_futures=True)
            pending = broken

    return run


_WORKER_DIED = (
    "the worker process died while running this point or one beside it (a crash or out of "
    "memory), twice; rerun the sweep with -j 1 to tell which"
)


def ray_backend(address: str) -> Backend:
    """A backend running each point as a Ray task (one CPU each).

    `address` is `local` (start a Ray instance on this machine), `auto` (join the cluster this
    machine belongs to, or start a local instance if there is none) or a cluster address
    (`ray://host:10001`, `host:6379`). Workers need pfcsim installed, and files named by the
    specs (CDF, topology and flow files) at the same paths; the shipped workloads are built
    in. Results come back to this process, which writes the store.
    """

    def run(tasks: Sequence[PointTask]) -> Iterator[PointOutcome]:
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
        refs = {remote.remote(t): t for t in tasks}
        try:
            while refs:
                ready, _ = ray.wait(list(refs), num_returns=1)
                for ref in ready:
                    task = refs.pop(ref)
                    try:
                        yield ray.get(ref)
                    except ray.exceptions.RayError as e:
                        yield PointOutcome(task.key, None, f"the Ray task failed: {e}", 0.0)
        finally:
            for ref in refs:
                ray.cancel(ref, force=True)

    return run
