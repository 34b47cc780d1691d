"""The processes of a sweep and of a store's readers.

The waits below are bounded (`wait_until`) so that a broken mechanism fails the test instead of
hanging it; none of them measures how fast something is.
"""

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pfcsim
from pfcsim.sweep import execute, load_sweep, run_sweep
from test_cli import pfcsim_command


def wait_until(condition: Callable[[], bool], what: str, seconds: float = 60) -> None:
    """Polls `condition` until it holds; fails the test after `seconds`."""
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.02)


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
