"""The `pfcsim` command line, end to end in a subprocess."""

import shutil
import subprocess
import sys
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


@pytest.mark.skipif(sys.platform != "linux", reason="RLIMIT_AS is enforced on Linux")
def test_specs_too_large_are_refused_within_2_gib(tmp_path: Path) -> None:
    # Under a 2 GiB address-space limit, specs whose runs would not fit (or never end) are
    # refused with one error line, not an allocation failure, a hang or a traceback.
    import resource

    from test_bad_specs import BAD_SPECS, FILES, TOO_LARGE

    def two_gib() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))

    for name, text in FILES.items():
        (tmp_path / name).write_text(text)
    chosen = {"CDF of zero sizes", "ns-3 node count beyond the links", "RTO below the base RTT"}
    cases = [case[:2] for case in TOO_LARGE] + [c[:2] for c in BAD_SPECS if c[0] in chosen]
    assert len(cases) == len(TOO_LARGE) + len(chosen)
    for name, text in cases:
        (tmp_path / "spec.toml").write_text(text)
        done = subprocess.run(
            [pfcsim_command(), "run", "-q", "spec.toml"],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
            preexec_fn=two_gib,
        )
        assert done.returncode == 2, (name, done.stderr)
        assert done.stderr.startswith("error: "), (name, done.stderr)
        assert done.stderr.count("\n") == 1, (name, done.stderr)


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
