#!/usr/bin/env python3
"""The scale benchmark suite: how pfcsim's cost grows with the fabric (benches/README.md).

Runs the release CLI (`pfcsim-rs run SPEC -o FRESH_FOLDER -q`) once per case, as a child
process, and records its wall time, user + system CPU time and peak resident memory (from the
child's resource usage, `os.wait4`), and the run's event count, flows and fingerprint (from the
run folder's `stats.json`). Writes the records as JSON and CSV under the output folder and
prints them as a Markdown table; `--plot` draws events per CPU-second and CPU-seconds against
the number of hosts.

    benches/scale.py                               # every case, target/release/pfcsim-rs
    benches/scale.py --cases r1,fat-tree-128       # a subset
    benches/scale.py --binary OTHER/pfcsim-rs      # another build, to compare two
    benches/scale.py --table A.json B.json         # the table of recorded runs, nothing run
    benches/scale.py --table A.json --plot benches/img/scale.png
    benches/scale.py --table BEFORE.json AFTER.json --plot benches/img/scale.png   # two builds

Only the Python standard library is needed to run the suite; `--plot` needs matplotlib.
Speed is read from CPU time, never asserted: the machine may be shared.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Case:
    """One benchmark case: a spec and what it is."""

    name: str
    spec: str  # relative to the repository's root
    hosts: int
    family: str  # the series it is plotted in
    about: str
    window: str  # the traffic, as the plot labels the point


CASES = [
    Case("r1", "scenarios/r1/r1.toml", 128, "leaf-spine", "R1: 8x8 leaf-spine, 97,737 flows", "R1"),
    Case(
        "leaf-spine-512",
        "benches/scale/leaf-spine-512.toml",
        512,
        "leaf-spine",
        "32x8 leaf-spine, R1 settings, 10 ms",
        "10 ms",
    ),
    Case(
        "leaf-spine-1024",
        "benches/scale/leaf-spine-1024.toml",
        1024,
        "leaf-spine",
        "64x8 leaf-spine, R1 settings, 10 ms",
        "10 ms",
    ),
    Case(
        "leaf-spine-4096",
        "benches/scale/leaf-spine-4096.toml",
        4096,
        "leaf-spine",
        "256x8 leaf-spine, R1 settings, 0.5 ms",
        "0.5 ms",
    ),
    Case(
        "fat-tree-128",
        "benches/scale/fat-tree-128.toml",
        128,
        "fat-tree",
        "k=8 fat-tree, 2 MB permutation, no CC",
        "2 MB perm.",
    ),
    Case(
        "fat-tree-1024",
        "benches/scale/fat-tree-1024.toml",
        1024,
        "fat-tree",
        "k=16 fat-tree, 2 MB permutation, no CC",
        "2 MB perm.",
    ),
]

COLUMNS = [
    "case",
    "hosts",
    "flows",
    "finished",
    "events",
    "wall_s",
    "cpu_s",
    "mevents_per_cpu_s",
    "peak_rss_mb",
    "fingerprint",
    "load_avg",
    "binary",
    "started",
    "error",
]


class BenchError(Exception):
    """A problem worth one `error:` line (bad arguments, unreadable files)."""


def select(names: str | None) -> list[Case]:
    """The cases named in a comma-separated list (all of them for None), in suite order."""
    if names is None:
        return CASES
    wanted = [n.strip() for n in names.split(",") if n.strip()]
    known = {c.name for c in CASES}
    unknown = [n for n in wanted if n not in known]
    if unknown or not wanted:
        raise BenchError(
            f"--cases: {', '.join(unknown) or 'nothing'} is not a case; "
            f"use a comma-separated list of {', '.join(c.name for c in CASES)}"
        )
    return [c for c in CASES if c.name in wanted]


def run_case(case: Case, binary: Path, scratch: Path) -> dict:
    """Runs one case in a fresh run folder under `scratch`; returns its record."""
    out = Path(tempfile.mkdtemp(prefix=f"{case.name}-", dir=scratch))
    run_dir = out / "run"
    record: dict = {c: None for c in COLUMNS}
    record.update(
        case=case.name,
        hosts=case.hosts,
        binary=str(binary),
        load_avg=round(os.getloadavg()[0], 2),
        started=datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    )
    start = time.monotonic()
    with (out / "stdout.txt").open("w") as so, (out / "stderr.txt").open("w") as se:
        child = subprocess.Popen(
            [str(binary), "run", str(ROOT / case.spec), "-o", str(run_dir), "-q"],
            stdout=so,
            stderr=se,
        )
        _, status, usage = os.wait4(child.pid, 0)
        child.returncode = os.waitstatus_to_exitcode(status)
    record["wall_s"] = round(time.monotonic() - start, 3)
    cpu = round(usage.ru_utime + usage.ru_stime, 3)
    record["cpu_s"] = cpu
    record["peak_rss_mb"] = round(usage.ru_maxrss / 1024, 1)  # Linux: ru_maxrss in KiB
    stats_file = run_dir / "stats.json"
    if child.returncode != 0 or not stats_file.exists():
        lines = (out / "stderr.txt").read_text().strip().splitlines()
        record["error"] = lines[-1] if lines else f"exit status {child.returncode}"
    else:
        stats = json.loads(stats_file.read_text())
        record.update(
            flows=stats["flows_total"],
            finished=stats["flows_finished"],
            events=stats["events"],
            fingerprint=f"{stats['fingerprint']:016x}",
            mevents_per_cpu_s=round(stats["events"] / cpu / 1e6, 3) if cpu > 0 else None,
        )
    shutil.rmtree(out)
    return record


def write_records(records: list[dict], folder: Path, stem: str) -> tuple[Path, Path]:
    """Writes the records as `<stem>.json` and `<stem>.csv` in `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    json_path, csv_path = folder / f"{stem}.json", folder / f"{stem}.csv"
    json_path.write_text(json.dumps(records, indent=1) + "\n")
    with csv_path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(records)
    return json_path, csv_path


def read_records(paths: list[str]) -> list[dict]:
    """The records of JSON files written by this script, in order."""
    records = []
    for p in paths:
        try:
            records.extend(json.loads(Path(p).read_text()))
        except (OSError, ValueError) as e:
            raise BenchError(f"--table: {p}: {e}") from None
    return records


def _num(value: float | None, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def table(records: list[dict]) -> str:
    """The records as a Markdown table (one row per run)."""
    head = (
        "| case | hosts | flows (finished) | events | wall s | CPU s | M events per CPU-s "
        "| peak RSS MB | fingerprint | load avg |\n|---|---|---|---|---|---|---|---|---|---|"
    )
    rows = [head]
    for r in records:
        if r.get("error"):
            flows, fingerprint = "-", f"error: {r['error']}"
        else:
            flows, fingerprint = f"{r['flows']:,} ({r['finished']:,})", f"`{r['fingerprint']}`"
        rows.append(
            f"| {r['case']} | {r['hosts']:,} | {flows} | {_num(r.get('events'), ',')} "
            f"| {_num(r['wall_s'], '.1f')} | {_num(r['cpu_s'], '.1f')} "
            f"| {_num(r.get('mevents_per_cpu_s'), '.2f')} | {_num(r['peak_rss_mb'], ',.1f')} "
            f"| {fingerprint} | {_num(r['load_avg'], '.2f')} |"
        )
    return "\n".join(rows)


def plot(series: list[tuple[str, list[dict]]], path: Path) -> list[str]:
    """Events per CPU-second and CPU-seconds against hosts, one line per family of cases.

    `series` pairs a label with its records (one pair per JSON file given to `--table`, or the
    run just made); with more than one, each line is labelled with its series, so that two
    builds' records plot side by side (a family keeps its colour; the first series is drawn
    solid, the others dashed). Returns the lines' labels, in the order drawn.
    """
    import matplotlib  # only --plot needs it

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cases = {c.name: c for c in CASES}
    fig, (rate_ax, cpu_ax) = plt.subplots(1, 2, figsize=(10, 4))
    labels = []
    for index, (label, records) in enumerate(series):
        style = "-" if index == 0 else "--"
        for fam, marker, color in [("leaf-spine", "o", "C0"), ("fat-tree", "s", "C1")]:
            points = sorted(
                (r["hosts"], r["mevents_per_cpu_s"], r["cpu_s"], cases[r["case"]].window)
                for r in records
                if r["case"] in cases and cases[r["case"]].family == fam and not r.get("error")
            )
            if not points:
                continue
            hosts = [p[0] for p in points]
            name = fam if len(series) == 1 else f"{label}: {fam}"
            labels.append(name)
            rate_ax.plot(
                hosts, [p[1] for p in points], style, marker=marker, color=color, label=name
            )
            cpu_ax.plot(
                hosts, [p[2] for p in points], style, marker=marker, color=color, label=name
            )
            if index == 0:
                for h, _, cpu, window in points:
                    cpu_ax.annotate(
                        window, (h, cpu), fontsize=7, xytext=(4, -3), textcoords="offset pixels"
                    )
    for ax in (rate_ax, cpu_ax):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("hosts")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    rate_ax.set_ylabel("M events per CPU-second")
    rate_ax.set_ylim(bottom=0)
    cpu_ax.set_yscale("log")
    cpu_ax.set_ylabel("CPU seconds per run (user + system)")
    cpu_ax.set_title("labels: the traffic of each run", fontsize=9)
    fig.suptitle("pfcsim's cost against fabric size (benches/scale.py)")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return labels


def main(argv: list[str] | None = None) -> int:
    """Command line; returns the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", help="comma-separated case names (default: every case)")
    parser.add_argument(
        "--binary",
        type=Path,
        default=ROOT / "target/release/pfcsim-rs",
        help="the pfcsim-rs binary to run (default: target/release/pfcsim-rs)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=ROOT / "benches/scale/out",
        help="folder of the JSON and CSV records (default: benches/scale/out)",
    )
    parser.add_argument(
        "--table", nargs="+", metavar="JSON", help="print the table of recorded runs; run nothing"
    )
    parser.add_argument("--plot", type=Path, metavar="PNG", help="also plot the growth here")
    parser.add_argument("--list", action="store_true", help="list the cases and exit")
    args = parser.parse_args(argv)
    try:
        if args.list:
            for c in CASES:
                print(f"{c.name:16} {c.hosts:5} hosts  {c.spec}  ({c.about})")
            return 0
        if args.table:
            series = [(Path(p).stem, read_records([p])) for p in args.table]
            records = [r for _, rs in series for r in rs]
        else:
            cases = select(args.cases)
            if not (args.binary.is_file() and os.access(args.binary, os.X_OK)):
                raise BenchError(
                    f"--binary: {args.binary} is not an executable file; build it with "
                    "`cargo build --release -p pfcsim-cli` or give another path"
                )
            args.out.mkdir(parents=True, exist_ok=True)
            stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
            records = []
            with tempfile.TemporaryDirectory(dir=args.out) as scratch:
                for case in cases:
                    print(f"running {case.name} ({case.about})...", file=sys.stderr, flush=True)
                    records.append(run_case(case, args.binary.resolve(), Path(scratch)))
                    write_records(records, args.out, f"scale-{stamp}")
            print(f"records: {args.out / f'scale-{stamp}'}.json and .csv", file=sys.stderr)
            series = [(f"scale-{stamp}", records)]
        print(table(records))
        if args.plot:
            plot(series, args.plot)
            print(f"plot: {args.plot}", file=sys.stderr)
    except BenchError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 1 if any(r.get("error") for r in records) else 0


if __name__ == "__main__":
    sys.exit(main())
