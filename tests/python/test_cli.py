"""The `pfcsim` command line, end to end in a subprocess."""

import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

import pfcsim


def pfcsim_command() -> str:
    """The installed `pfcsim` console script of this Python environment."""
    script = Path(sys.executable).parent / "pfcsim"
    found = str(script) if script.exists() else shutil.which("pfcsim")
    assert found, "the pfcsim package is not installed (pip install -e .)"
    return found


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Runs `pfcsim ARGS` in `cwd`; its exit status and output."""
    return subprocess.run(
        [pfcsim_command(), *args], cwd=cwd, capture_output=True, text=True, check=False
    )


def test_run_writes_the_run_folder_and_prints_the_summary(tiny_file: Path) -> None:
    done = cli("run", "spec.toml", "-o", "out", cwd=tiny_file.parent)
    assert done.returncode == 0, done.stderr
    out = tiny_file.parent / "out"
    for name in ("spec.toml", "flows.parquet", "ports.parquet", "summary.parquet", "stats.json"):
        assert (out / name).is_file(), name
    lines = done.stdout.splitlines()
    assert "FCT (us)" in lines[0]
    assert lines[1].split() == ["bucket", "flows", "done", *["avg", "p50", "p99", "p99.9"] * 2]
    assert lines[2].split()[:3] == ["all", "14", "14"]
    assert any(
        line.startswith("flows finished 14/14  PFC pauses ") and "out-of-order arrivals" in line
        for line in lines
    )
    assert f"fingerprint {pfcsim.run(tiny_file).fingerprint}" in done.stdout
    assert lines[-1] == "results in out"
    assert "spec.toml: 14 flows on 4 hosts, scheme ecmp" in done.stderr


def test_run_defaults_to_runs_spec_name(tiny_file: Path) -> None:
    done = cli("run", "-q", "spec.toml", cwd=tiny_file.parent)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert (tiny_file.parent / "runs" / "spec" / "flows.parquet").is_file()
    assert done.stdout.splitlines()[-1] == f"results in {Path('runs') / 'spec'}"


def test_validate(tiny_file: Path) -> None:
    done = cli("validate", "spec.toml", cwd=tiny_file.parent)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "spec.toml: valid; 4 hosts, 4 switches, 14 flows, scheme ecmp\n"


def test_schemes_and_workloads(tmp_path: Path) -> None:
    schemes = cli("schemes", cwd=tmp_path)
    assert schemes.returncode == 0
    assert schemes.stdout.startswith("ecmp: per-flow 5-tuple hash")
    assert "    salt = 0\n" in schemes.stdout
    workloads = cli("workloads", cwd=tmp_path)
    assert workloads.returncode == 0
    assert len(workloads.stdout.splitlines()) == len(pfcsim.workloads())
    assert any(line.startswith("web_search ") for line in workloads.stdout.splitlines())


@pytest.mark.parametrize("command", ["run", "validate"])
def test_errors_exit_2_without_traceback(tiny_file: Path, command: str) -> None:
    missing = cli(command, "nope.toml", cwd=tiny_file.parent)
    assert missing.returncode == 2
    assert (
        missing.stderr == "error: cannot read nope.toml: No such file or directory (os error 2)\n"
    )
    tiny_file.write_text(tiny_file.read_text().replace("load = 0.3", "load = 1.5"))
    bad = cli(command, "spec.toml", cwd=tiny_file.parent)
    assert bad.returncode == 2
    assert bad.stderr == (
        "error: traffic[0].load: 1.5 is not a valid load; give a fraction strictly between 0 "
        "and 1 (e.g. 0.5)\n"
    )
    assert bad.stdout == ""


#: The address-space limit of the memory cap test, and what the default run.max_memory makes
#: of it (half of it, in the units of the messages).
TWO_GIB = 2 << 30
TWO_GIB_DEFAULT = "run.max_memory (unset: 1.1 GB, half of the 2.1 GB this process may use)"


def _under_two_gib() -> None:
    """Limits the address space of the calling (child) process to 2 GiB."""
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (TWO_GIB, TWO_GIB))


@pytest.mark.skipif(sys.platform != "linux", reason="RLIMIT_AS is enforced on Linux")
def test_every_bad_input_is_refused_or_finishes_within_2_gib(tmp_path: Path) -> None:
    # Every spec of the bad-input tests (test_bad_specs.py and this file's) under a 2 GiB
    # address-space limit: `pfcsim run` finishes, or refuses it with its one error line; no
    # allocation failure, no hang, no traceback. The default run.max_memory is half of the
    # limit, which the refusals of specs too large for it give.
    from test_bad_specs import BAD_SPECS, FILES, TOO_LARGE

    tiny = (Path(__file__).parents[1] / "data" / "tiny.toml").read_text()

    def exactly(message: str) -> Callable[[str], bool]:
        return lambda stderr: stderr == f"error: {message}\n"

    def too_large(start: str, end: str) -> Callable[[str], bool]:
        return lambda stderr: (
            stderr.startswith(f"error: {start}")
            and stderr.endswith(f"{end}\n")
            and TWO_GIB_DEFAULT in stderr
            and stderr.count("\n") == 1
        )

    # (name, spec text or None for none, arguments after `run -q`, exit status, stderr check)
    cases: list[tuple[str, str | None, list[str], int, Callable[[str], bool]]] = [
        (name, text, ["spec.toml"], 2, exactly(message)) for name, text, message in BAD_SPECS
    ]
    cases += [(name, text, ["spec.toml"], 2, too_large(*ends)) for name, text, *ends in TOO_LARGE]
    cases += [
        ("the tiny spec", tiny, ["spec.toml"], 0, lambda stderr: stderr == ""),
        (
            "missing spec file",
            None,
            ["nope.toml"],
            2,
            exactly("cannot read nope.toml: No such file or directory (os error 2)"),
        ),
        (
            "a guard ends the run",
            tiny + '\n[run]\nmax_sim_time = "100us"\n',
            ["spec.toml"],
            2,
            lambda stderr: (
                stderr.startswith('error: run.max_sim_time ("100us"): ') and stderr.count("\n") == 1
            ),
        ),
        (
            "unwritable run folder",
            tiny,
            ["spec.toml", "-o", "spec.toml"],
            2,
            lambda stderr: (
                stderr.startswith("error: cannot create spec.toml: ") and stderr.count("\n") == 1
            ),
        ),
    ]

    def start(index: int) -> subprocess.Popen[str]:
        _, text, args, _, _ = cases[index]
        folder = tmp_path / str(index)
        folder.mkdir()
        for file, content in FILES.items():
            (folder / file).write_text(content)
        if text is not None:
            (folder / "spec.toml").write_text(text)
        return subprocess.Popen(
            [pfcsim_command(), "run", "-q", *args],
            cwd=folder,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=_under_two_gib,
        )

    # Two at a time (each is mostly the start of a Python process), from this thread only:
    # preexec_fn is not safe in a process with other threads.
    outcomes = []
    for first in range(0, len(cases), 2):
        batch = [start(index) for index in range(first, min(first + 2, len(cases)))]
        for process in batch:
            _, stderr = process.communicate(timeout=120)
            outcomes.append((cases[len(outcomes)][0], process.returncode, stderr))
    for (name, status, stderr), (_, _, _, expected_status, check) in zip(
        outcomes, cases, strict=True
    ):
        assert status == expected_status, (name, stderr)
        assert check(stderr), (name, stderr)


def test_a_guard_ends_the_run_with_the_report_then_an_error(tiny_file: Path) -> None:
    tiny_file.write_text(tiny_file.read_text() + '\n[run]\nmax_sim_time = "100us"\n')
    done = cli("run", "-q", "spec.toml", "-o", "out", cwd=tiny_file.parent)
    assert done.returncode == 2
    assert done.stderr.startswith(
        'error: run.max_sim_time ("100us"): the run reached it, at 0.100000 ms of simulated '
        "time, with "
    )
    assert done.stderr.count("\n") == 1
    assert done.stdout.splitlines()[-2].startswith('incomplete: run.max_sim_time ("100us")')
    assert done.stdout.splitlines()[-1] == "results in out"
    assert "incomplete" in (tiny_file.parent / "out" / "stats.json").read_text()


def test_an_unwritable_run_folder_exits_2(tiny_file: Path) -> None:
    (tiny_file.parent / "taken").write_text("a file, not a folder")
    done = cli("run", "-q", "spec.toml", "-o", "taken", cwd=tiny_file.parent)
    assert done.returncode == 2
    assert done.stderr.startswith("error: cannot create taken: ")
    assert "Traceback" not in done.stderr
