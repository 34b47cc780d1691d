"""The processes of a sweep: its workers end with it, Ctrl-C, sweeps sharing a store, scripts.

The waits below are bounded (`wait_until`) so that a broken mechanism fails the test instead of
hanging it; none of them measures how fast something is.
"""

import contextlib
import fcntl
import multiprocessing
import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time
import tomllib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import pfcsim
from conftest import TINY_TOML
from pfcsim._spec import dict_to_toml
from pfcsim.sweep import (
    PointOutcome,
    PointTask,
    check,
    execute,
    finished_keys,
    load_sweep,
    process_pool,
    run_sweep,
)
from test_cli import pfcsim_command

#: Grid keys making a slow point: one flow of 1000 GB, simulated for 80 s, which takes many
#: minutes, so that the point still runs when a test stops the sweep (its validation is
#: instant).
SLOW_KEYS = """\
traffic = [[{ kind = "scripted", flows = [{ src = 0, dst = 3, size = "1000GB" }] }]]
"run.stop_at" = ["1000s"]
"""

#: Two slow points.
SLOW_SWEEP = f"""\
base = "spec.toml"

[grid]
seed = [1, 2]
{SLOW_KEYS}"""

#: Three quick points (the tiny spec), then three slow ones.
MIXED_SWEEP = f"""\
base = "spec.toml"

[[grid]]
seed = [1, 2, 3]

[[grid]]
seed = [1, 2, 3]
{SLOW_KEYS}"""

#: Eight quick points.
QUICK_SWEEP = """\
base = "spec.toml"

[grid]
lb.scheme = ["ecmp", "rps"]
seed = [1, 2, 3, 4]
"""

README = Path(__file__).resolve().parents[2] / "README.md"


def wait_until(condition: Callable[[], bool], what: str, seconds: float = 60) -> None:
    """Polls `condition` until it holds; fails the test after `seconds`."""
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.02)


def proc_stat(pid: int) -> tuple[str, int, int] | None:
    """The state, parent pid and start time of process `pid` (from /proc), or None."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rpartition(")")[2].split()  # after the command name, which may hold spaces
    return fields[0], int(fields[1]), int(fields[19])


def descendants(pid: int) -> dict[int, int]:
    """The processes below `pid` (children, their children...): pid -> start time."""
    stats = {int(p.name): proc_stat(int(p.name)) for p in Path("/proc").glob("[0-9]*")}
    found: dict[int, int] = {}
    parents = {pid}
    while parents:
        children = {
            child: stat[2]
            for child, stat in stats.items()
            if stat is not None and stat[1] in parents and child not in found
        }
        found.update(children)
        parents = set(children)
    return found


def blocked_signals(pid: int) -> set[signal.Signals]:
    """The signals that process `pid` blocks (`SigBlk` of /proc/PID/status)."""
    status = Path(f"/proc/{pid}/status").read_text()
    mask = int(re.search(r"^SigBlk:\s*([0-9a-f]+)$", status, flags=re.MULTILINE)[1], 16)
    return {s for s in signal.Signals if mask >> (s - 1) & 1}


def alive(pid: int, start: int) -> bool:
    """Whether process `pid`, started at `start`, still runs (a zombie has ended)."""
    stat = proc_stat(pid)
    return stat is not None and stat[2] == start and stat[0] != "Z"


def start_sweep(
    sweep: Path, store: Path, jobs: int, env: dict[str, str] | None = None, *, quiet: bool = True
) -> subprocess.Popen[str]:
    """`pfcsim sweep SWEEP -o STORE -j JOBS [-q]` in its own process group."""
    options = ["-q"] if quiet else []
    return subprocess.Popen(
        [pfcsim_command(), "sweep", str(sweep), "-o", str(store), "-j", str(jobs), *options],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
    )


@contextlib.contextmanager
def stopped_at_the_end(processes: list[subprocess.Popen[str]]) -> Iterator[None]:
    """Kills what is left of the process groups of `processes` when the block ends.

    (The leftovers of a failed test: checks of what survives belong inside the block.)
    """
    try:
        yield
    finally:
        for process in processes:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def hold_claim(store: Path, key: str) -> int:
    """Takes the claim of point `key` as a sweep does: returns the open claim file.

    Closing it leaves the file as a sweep killed with SIGKILL does: there, but unlocked.
    """
    (store / "claims").mkdir(parents=True, exist_ok=True)
    fd = os.open(store / "claims" / key, os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)
    return fd


@contextlib.contextmanager
def holding_claim(store: Path, key: str) -> Iterator[None]:
    """Holds the claim of point `key` during the block (see `hold_claim`)."""
    fd = hold_claim(store, key)
    try:
        yield
    finally:
        os.close(fd)


def claims(store: Path) -> list[str]:
    """The claim files of `store`."""
    return sorted(p.name for p in (store / "claims").iterdir())


def test_a_sweep_killed_with_sigkill_leaves_no_process_behind(
    tiny_file: Path, tmp_path: Path
) -> None:
    sweep = tmp_path / "slow.toml"
    sweep.write_text(SLOW_SWEEP)
    temp = tmp_path / "temp"  # where the workers make a folder for the point they run
    temp.mkdir()
    process = start_sweep(sweep, tmp_path / "store", 2, {**os.environ, "TMPDIR": str(temp)})
    with stopped_at_the_end([process]):
        wait_until(lambda: len(list(temp.iterdir())) == 2, "both workers to run a point")
        below = descendants(process.pid)
        assert len(below) >= 2  # the workers, and multiprocessing's resource tracker
        os.kill(process.pid, signal.SIGKILL)  # the sweep alone, not its process group
        process.wait()
        # The points take minutes: the workers end because their parent did.
        wait_until(
            lambda: not any(alive(pid, start) for pid, start in below.items()),
            "the workers and the resource tracker to end",
            seconds=30,
        )


def test_ctrl_c_stops_a_sweep_at_once_keeping_the_points_that_finished(
    tiny_file: Path, tmp_path: Path
) -> None:
    sweep = tmp_path / "mixed.toml"
    sweep.write_text(MIXED_SWEEP)
    store = tmp_path / "store"
    points = check(load_sweep(sweep))
    quick = {p.key for p in points[:3]}
    temp = tmp_path / "temp"  # where the workers make a folder for the point they run
    temp.mkdir()
    process = start_sweep(sweep, store, 2, {**os.environ, "TMPDIR": str(temp)})
    with stopped_at_the_end([process]):
        # The quick points are stored, and the two workers run slow ones.
        wait_until(
            lambda: finished_keys(store) == quick and len(list(temp.iterdir())) == 2,
            "the quick points to finish and two slow ones to start",
        )
        below = descendants(process.pid)
        # The workers do not take Ctrl-C for themselves: they run with SIGINT blocked.
        workers = [
            pid for pid in below if b"spawn_main" in Path(f"/proc/{pid}/cmdline").read_bytes()
        ]
        assert len(workers) == 2
        for pid in workers:
            assert signal.SIGINT in blocked_signals(pid)
        os.killpg(process.pid, signal.SIGINT)  # as a terminal does: to the whole group
        # The slow points would take minutes: the sweep does not wait for them.
        out, err = process.communicate(timeout=15)
        wait_until(
            lambda: not any(alive(pid, start) for pid, start in below.items()),
            "the workers and the resource tracker to end",
            seconds=30,
        )
    assert process.returncode == 130
    assert out.splitlines()[0] == (
        "6 points: 3 ran, 0 already done, 0 failed, interrupted (rerun to resume)"
    )
    assert err == "interrupted\n"  # no traceback, from the sweep or its workers
    assert finished_keys(store) == quick
    assert claims(store) == []  # the abandoned points are free for the next run
    assert not list((store / "runs").glob("*.partial-*"))


def test_two_sweeps_on_one_store_run_every_point_once_between_them(
    tiny_file: Path, tmp_path: Path
) -> None:
    sweep = tmp_path / "sweep.toml"
    sweep.write_text(QUICK_SWEEP)
    store = tmp_path / "store"
    keys = [p.key for p in check(load_sweep(sweep))]
    # A live process (this one) holds the first point: both sweeps must leave it and wait.
    claim = hold_claim(store, keys[0])
    sweeps = [start_sweep(sweep, store, 1, quiet=False) for _ in range(2)]
    with stopped_at_the_end(sweeps):
        try:
            wait_until(lambda: finished_keys(store) == set(keys[1:]), "the other points")
            assert [s.poll() for s in sweeps] == [None, None]  # both wait for the held point
        finally:
            # The holder lets go, leaving the file as a killed sweep does: one of the sweeps
            # runs the point, the other finds it done.
            os.close(claim)
        outputs = [s.communicate(timeout=60) for s in sweeps]
    ran = 0
    for s, (out, err) in zip(sweeps, outputs, strict=True):
        assert s.returncode == 0, err
        summary = re.fullmatch(
            r"8 points: (\d+) ran, (\d+) already done, (?:(\d+) done by another sweep, )?0 failed",
            out.splitlines()[0],
        )
        assert summary is not None, out
        counts = [int(n or 0) for n in summary.groups()]
        assert sum(counts) == 8
        ran += counts[0]
        # Its log (stderr is not a terminal) has a line for every point it ran or saw done.
        assert sum(" done in " in line for line in err.splitlines()) == counts[0]
        assert (
            sum(line.endswith(" done by another sweep") for line in err.splitlines()) == (counts[2])
        )
    assert ran == 8
    # The store is what one sweep makes.
    assert sorted(p.name for p in store.iterdir()) == [
        "claims",
        "index.duckdb",
        "index.lock",
        "runs",
        "sweeps",
    ]
    assert sorted(p.name for p in (store / "runs").iterdir()) == sorted(keys)
    assert claims(store) == []
    assert sorted(pfcsim.open_store(store).runs["key"]) == sorted(keys)


def test_a_point_another_sweep_failed_meanwhile_is_reported_failed_not_run_again(
    tiny_file: Path, tmp_path: Path
) -> None:
    (tmp_path / "sweep.toml").write_text(QUICK_SWEEP)
    sweep = load_sweep(tmp_path / "sweep.toml")
    store = tmp_path / "store"
    held = check(sweep)[0].key
    reports = []
    runner = threading.Thread(
        target=lambda: reports.append(run_sweep(sweep, store, lambda t: map(execute, t)))
    )
    with holding_claim(store, held):
        runner.start()
        wait_until(lambda: len(finished_keys(store)) == 7, "the other points")
        # The holder fails the point, as a sweep does: the record, then the claim let go.
        (store / "failed").mkdir()
        (store / "failed" / f"{held}.json").write_text('{"error": "boom"}')
    runner.join(timeout=60)
    (report,) = reports
    assert report.failed == {held: "boom"}
    assert len(report.ran) == 7
    assert held not in finished_keys(store)


def test_a_sweep_removes_half_written_run_folders_unless_a_live_sweep_writes_them(
    tiny_dict: dict[str, Any], tmp_path: Path
) -> None:
    store = tmp_path / "store"
    live, dead = "0123456789abcdef", "fedcba9876543210"
    for key in (live, dead):
        (store / "runs" / f"{key}.partial-1").mkdir(parents=True)
    with holding_claim(store, live):
        run_sweep(load_sweep({"base": tiny_dict}), store, lambda tasks: map(execute, tasks))
        assert (store / "runs" / f"{live}.partial-1").is_dir()
    assert not (store / "runs" / f"{dead}.partial-1").exists()
    assert len(finished_keys(store)) == 1


def test_a_process_opening_the_index_waits_for_one_that_has_it_open(
    tiny_dict: dict[str, Any], tmp_path: Path
) -> None:
    store = tmp_path / "store"
    run_sweep(load_sweep({"base": tiny_dict}), store, lambda tasks: map(execute, tasks))

    def waiting_for_a_lock(pid: int) -> bool:
        # /proc/locks lists a process blocked on a lock as `N: -> FLOCK ... <pid> ...`.
        lines = Path("/proc/locks").read_text().splitlines()
        return any("->" in line.split() and str(pid) in line.split() for line in lines)

    readers: list[subprocess.Popen[str]] = []
    with stopped_at_the_end(readers):
        with pfcsim.open_store(store).connect(read_only=False):
            # DuckDB alone would refuse this process the index at once.
            reader = subprocess.Popen(
                [
                    pfcsim_command(),
                    "results",
                    str(store),
                    "--sql",
                    "SELECT count(*) AS n FROM runs",
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                start_new_session=True,
            )
            readers.append(reader)
            wait_until(
                lambda: reader.poll() is not None or waiting_for_a_lock(reader.pid),
                "the reader to wait for the index",
            )
            assert reader.poll() is None, reader.communicate()
        # (A failed test lets go of the index before it stops the reader, not to wait for it.)
        out, err = reader.communicate(timeout=60)
    assert reader.returncode == 0, err
    assert out.split() == ["n", "1"]


def test_a_point_whose_worker_dies_is_tried_once_more_then_failed(
    tiny_dict: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    temp = tmp_path / "temp"  # where the worker makes a folder for the point it runs
    temp.mkdir()
    monkeypatch.setenv("TMPDIR", str(temp))
    slow = tomllib.loads(SLOW_KEYS)
    spec = {**tiny_dict, "traffic": slow["traffic"][0], "run": {"stop_at": slow["run.stop_at"][0]}}
    task = PointTask("0123456789abcdef", dict_to_toml(spec), "<dict>", str(tmp_path))
    outcomes: list[PointOutcome] = []
    pool = threading.Thread(target=lambda: outcomes.extend(process_pool(1)([task])))
    pool.start()
    for attempt in (1, 2):
        wait_until(lambda n=attempt: len(list(temp.iterdir())) == n, f"attempt {attempt}")
        (worker,) = [
            p for p in multiprocessing.active_children() if p.name.startswith("pfcsim-sweep")
        ]
        worker.kill()
    pool.join(timeout=60)
    assert not pool.is_alive()
    assert outcomes == [
        PointOutcome(
            task.key,
            None,
            "the worker process died while running this point, twice (last killed by SIGKILL): "
            "a crash, or out of memory",
            0.0,
        )
    ]


def readme_sweep_examples() -> list[str]:
    """The README's Python examples that run a sweep."""
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.DOTALL)
    return [block for block in blocks if "pfcsim.sweep(" in block]


def unguarded(example: str) -> str:
    """`example` with the body of its `if __name__ == "__main__":` at the top level."""
    head, guard, body = example.partition('if __name__ == "__main__":')
    assert guard, example
    return head + textwrap.dedent(body.partition("\n")[2])


@pytest.fixture
def example_dir(tmp_path: Path) -> Path:
    """A folder for the README's examples: its `scenarios/` has the tiny spec and 2 points."""
    scenarios = tmp_path / "scenarios"
    scenarios.mkdir()
    (scenarios / "quickstart.toml").write_text(TINY_TOML)
    (scenarios / "quickstart-sweep.toml").write_text(
        'base = "quickstart.toml"\n[grid]\nlb.scheme = ["ecmp", "rps"]\n'
    )
    return tmp_path


def run_script(folder: Path, name: str, code: str) -> subprocess.CompletedProcess[str]:
    """Runs `code` as the script `folder/name` (its working directory `folder`)."""
    (folder / name).write_text(code)
    return subprocess.run(
        [sys.executable, name], cwd=folder, capture_output=True, text=True, check=False
    )


def test_the_readme_sweep_examples_run_as_scripts(example_dir: Path) -> None:
    examples = readme_sweep_examples()
    assert len(examples) == 2
    for n, example in enumerate(examples):
        done = run_script(example_dir, f"example{n}.py", example)
        assert done.returncode == 0, done.stderr
    assert len(finished_keys(example_dir / "results" / "quickstart-sweep")) == 2
    assert len(finished_keys(example_dir / "results" / "mine")) == 4


def test_a_script_that_sweeps_without_the_guard_is_told_to_add_it(example_dir: Path) -> None:
    done = run_script(example_dir, "example.py", unguarded(readme_sweep_examples()[0]))
    assert done.returncode == 1
    # One traceback, the script's own: the workers end quietly and the sweep says why.
    assert done.stderr.count("Traceback") == 1, done.stderr
    assert done.stderr.splitlines()[-1] == (
        "pfcsim.sweep.WorkerStartError: the worker process could not start: like every "
        f"spawned process, it imports the main script {example_dir / 'example.py'} again, and "
        'the script starts a sweep when imported; put the sweep under `if __name__ == "__main__":`'
        " (docs/guides/sweeps.md)"
    )
    assert finished_keys(example_dir / "results" / "quickstart-sweep") == set()


def test_a_worker_that_cannot_import_the_script_stops_the_sweep_saying_so(
    example_dir: Path,
) -> None:
    failing = 'if __name__ == "__mp_main__":\n    raise ImportError("not in a worker")\n'
    done = run_script(example_dir, "example.py", failing + readme_sweep_examples()[0])
    assert done.returncode == 1
    assert "ImportError: not in a worker" in done.stderr  # the worker's own error
    assert done.stderr.splitlines()[-1] == (
        "pfcsim.sweep.WorkerStartError: the worker process could not start (exit status 1; its "
        "error is printed above): it imports pfcsim, and like every spawned process the main "
        f"script {example_dir / 'example.py'} again; if the script starts a sweep, put the sweep "
        'under `if __name__ == "__main__":` (docs/guides/sweeps.md)'
    )
