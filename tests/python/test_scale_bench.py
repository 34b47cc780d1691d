"""The scale benchmark script `benches/scale.py`, on a stand-in binary (nothing is timed).

The stand-in writes the `stats.json` a run folder holds, or fails as the CLI does, so that the
script's reading of the child (exit status, resource usage, stats) and its records and table
are checked in well under a second.
"""

import importlib.util
import json
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benches" / "scale.py"
spec = importlib.util.spec_from_file_location("scale_bench", SCRIPT)
assert spec is not None
assert spec.loader is not None
scale = importlib.util.module_from_spec(spec)
sys.modules["scale_bench"] = scale  # its dataclasses look their module up there
spec.loader.exec_module(scale)

STATS = {"events": 3_000_000, "flows_total": 12, "flows_finished": 11, "fingerprint": 255}


def stand_in(tmp_path: Path, body: str) -> Path:
    """An executable Python script standing in for `pfcsim-rs`, running `body`."""
    path = tmp_path / "pfcsim-rs"
    path.write_text(f"#!{sys.executable}\nimport json, pathlib, sys\n{body}\n")
    path.chmod(0o755)
    return path


def test_a_run_is_recorded_from_the_child_and_its_stats(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Called as `BIN run SPEC -o FOLDER -q`: writes FOLDER/stats.json.
    binary = stand_in(
        tmp_path,
        "out = pathlib.Path(sys.argv[4]); out.mkdir(parents=True)\n"
        f"(out / 'stats.json').write_text(json.dumps({STATS!r}))",
    )
    out = tmp_path / "records"
    status = scale.main(["--cases", "fat-tree-128,r1", "--binary", str(binary), "--out", str(out)])
    assert status == 0
    [json_path] = out.glob("scale-*.json")
    records = json.loads(json_path.read_text())
    assert [r["case"] for r in records] == ["r1", "fat-tree-128"], "in suite order"
    for r in records:
        assert (r["events"], r["flows"], r["finished"]) == (3_000_000, 12, 11)
        assert r["fingerprint"] == "00000000000000ff"
        assert r["error"] is None
        assert r["peak_rss_mb"] > 1, "the child's peak RSS (a Python interpreter)"
        assert r["mevents_per_cpu_s"] == round(3.0 / r["cpu_s"], 3)
    csv_lines = json_path.with_suffix(".csv").read_text().splitlines()
    assert csv_lines[0].split(",") == scale.COLUMNS
    assert len(csv_lines) == 3
    assert not any(out.glob("tmp*")), "the run folders are removed"
    table = capsys.readouterr().out
    assert "| r1 | 128 | 12 (11) | 3,000,000 |" in table
    assert "`00000000000000ff`" in table


def test_a_failed_run_is_recorded_with_its_error(tmp_path: Path) -> None:
    binary = stand_in(
        tmp_path, "print('error: traffic[0].kind: unknown', file=sys.stderr)\nsys.exit(2)"
    )
    out = tmp_path / "records"
    assert scale.main(["--cases", "r1", "--binary", str(binary), "--out", str(out)]) == 1
    [record] = json.loads(next(out.glob("scale-*.json")).read_text())
    assert record["error"] == "error: traffic[0].kind: unknown"
    assert record["events"] is None
    assert "| r1 | 128 | - | - |" in scale.table([record])


def test_the_table_of_recorded_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    record = dict.fromkeys(scale.COLUMNS)
    record.update(
        case="leaf-spine-1024",
        hosts=1024,
        flows=782441,
        finished=782441,
        events=428_800_000,
        wall_s=401.26,
        cpu_s=379.04,
        mevents_per_cpu_s=1.131,
        peak_rss_mb=1234.56,
        fingerprint="0123456789abcdef",
        load_avg=3.5,
    )
    recorded = tmp_path / "a.json"
    recorded.write_text(json.dumps([record]))
    assert scale.main(["--table", str(recorded)]) == 0
    assert capsys.readouterr().out.splitlines()[2] == (
        "| leaf-spine-1024 | 1,024 | 782,441 (782,441) | 428,800,000 | 401.3 | 379.0 | 1.13 "
        "| 1,234.6 | `0123456789abcdef` | 3.50 |"
    )


def test_bad_arguments_give_one_error_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert scale.main(["--cases", "r1,r2"]) == 2
    assert capsys.readouterr().err == (
        "error: --cases: r2 is not a case; use a comma-separated list of r1, leaf-spine-512, "
        "leaf-spine-1024, leaf-spine-4096, fat-tree-128, fat-tree-1024\n"
    )
    assert scale.main(["--binary", str(tmp_path / "none")]) == 2
    assert "is not an executable file" in capsys.readouterr().err


def test_two_recorded_builds_plot_as_two_series(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")

    def records(cpu_scale: float) -> list[dict]:
        rows = []
        for case, hosts, events in [("r1", 128, 49_794_039), ("leaf-spine-1024", 1024, 4e8)]:
            row = dict.fromkeys(scale.COLUMNS)
            cpu = events / 1e7 * cpu_scale
            row.update(
                case=case,
                hosts=hosts,
                events=events,
                cpu_s=cpu,
                mevents_per_cpu_s=events / 1e6 / cpu,
            )
            rows.append(row)
        return rows

    before, after = tmp_path / "before.json", tmp_path / "after.json"
    before.write_text(json.dumps(records(2.0)))
    after.write_text(json.dumps(records(1.0)))
    png = tmp_path / "scale.png"
    series = [(p.stem, scale.read_records([str(p)])) for p in (before, after)]
    assert scale.plot(series, png) == ["before: leaf-spine", "after: leaf-spine"]
    assert png.stat().st_size > 0
    assert scale.plot(series[:1], png) == ["leaf-spine"], "one build: no series label"
