"""`pfcsim`: run, sweep, validate and inspect scenarios, tabulate and plot results.

`run`, `validate`, `schemes` and `workloads` mirror the Rust command line (crates/pfcsim-cli);
`sweep`, `results` and `plot` work on results stores (docs/guides/sweeps.md). Errors print
`error: <message>` on stderr and exit with status 2; a sweep or reproduction with failed or
incomplete points exits with 1.
"""

import argparse
import itertools
import sys
from collections.abc import Sequence
from pathlib import Path

import tomli_w

import pfcsim
from pfcsim import plots, reproduce
from pfcsim.sweep import check, finished_keys, load_sweep, running_keys


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the command line with `argv` (default: the process arguments); the exit status."""
    args = _parser().parse_args(argv)
    try:
        args.command(args)
    except (
        pfcsim.SpecError,
        pfcsim.IncompleteRunError,
        pfcsim.WorkerStartError,
        OSError,
        KeyError,
        ValueError,
    ) as e:
        message = e.args[0] if isinstance(e, KeyError) and e.args else e
        print(f"error: {message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    return args.status if hasattr(args, "status") else 0


def _parser() -> argparse.ArgumentParser:
    """The argument parser; each subcommand sets `command` to its handler."""
    parser = argparse.ArgumentParser(
        prog="pfcsim",
        description="Packet-level simulator of lossless (PFC, RoCEv2) datacenter fabrics",
    )
    parser.add_argument("--version", action="version", version=f"pfcsim {pfcsim.__version__}")
    sub = parser.add_subparsers(required=True, metavar="COMMAND")

    run = sub.add_parser("run", help="run one scenario and write its results to a run folder")
    run.add_argument("spec", type=Path, help="the scenario spec (TOML)")
    run.add_argument("-o", "--out", type=Path, help="run folder (default: runs/<spec file name>)")
    run.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    run.set_defaults(command=_run)

    sweep = sub.add_parser(
        "sweep", help="run a base spec over grids of keys into a results store (resumable)"
    )
    sweep.add_argument("spec", type=Path, help="the sweep spec (TOML), see docs/guides/sweeps.md")
    sweep.add_argument(
        "-o", "--out", type=Path, help="results store folder (default: results/<sweep name>)"
    )
    sweep.add_argument(
        "-j", "--jobs", type=int, help="local worker processes (default: one per CPU)"
    )
    sweep.add_argument(
        "--ray",
        metavar="auto|local|ADDRESS",
        help="run points as Ray tasks: on the cluster this machine belongs to (auto), on a new "
        "local instance (local), or on the cluster at ADDRESS",
    )
    sweep.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    sweep.add_argument(
        "--list",
        action="store_true",
        help="check the points and list them with their keys and state; run nothing",
    )
    sweep.set_defaults(command=_sweep)

    results = sub.add_parser(
        "results", help="comparison tables (scheme x swept fields x metric) of a results store"
    )
    results.add_argument("store", type=Path, help="the results store folder")
    results.add_argument(
        "-m",
        "--metric",
        action="append",
        help=f"a column of the runs table (repeatable; default: {', '.join(DEFAULT_METRICS)})",
    )
    results.add_argument(
        "--rows", help="comma-separated row fields (default: the swept fields but scheme, seed)"
    )
    results.add_argument(
        "--columns", default="scheme", help="column field (default: scheme; 'none' for one)"
    )
    results.add_argument("--sql", help="run this SQL query against the index instead")
    results.add_argument("--csv", action="store_true", help="print CSV instead of tables")
    results.set_defaults(command=_results)

    plot = sub.add_parser(
        "plot", help="draw the standard figures of a results store, or a run's monitors (PNG, SVG)"
    )
    plot.add_argument(
        "store", type=Path, help="the results store folder, or a run folder (monitor figures)"
    )
    plot.add_argument(
        "-k",
        "--kind",
        action="append",
        choices=list(plots.KINDS),
        help="figure kind (repeatable; default: all of a store's, or those of a run's monitors): "
        + "; ".join(f"{k}: {v}" for k, v in plots.KINDS.items()),
    )
    plot.add_argument("-o", "--out", type=Path, help="output folder (default: DIR/plots)")
    plot.add_argument("--series", default="scheme", help="field making the series")
    plot.add_argument("--x", default="load", help="field on the x axis or splitting panels")
    plot.add_argument(
        "--metric", choices=["fct", "slowdown"], default="fct", help="for vs-load (default fct)"
    )
    plot.add_argument(
        "--y", help="runs column drawn by lines and bars; a monitor figure's other quantity"
    )
    plot.add_argument("--panels", help="field splitting lines and bars into panels")
    plot.add_argument(
        "--where",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="only runs whose field has this value (repeatable)",
    )
    plot.set_defaults(command=_plot)

    repro = sub.add_parser(
        "reproduce",
        help="run an experiment (a paper figure): sweep, figures, our numbers beside the paper's",
    )
    repro.add_argument("experiment", nargs="?", help="<group>/<name>, e.g. rlb/fig12")
    repro.add_argument("--list", action="store_true", help="list the experiments")
    repro.add_argument(
        "--quick", action="store_true", help="the reduced version (minutes), labelled as such"
    )
    repro.add_argument(
        "--experiments", type=Path, help="experiments folder (default: ./experiments or the repo's)"
    )
    repro.add_argument("-o", "--out", type=Path, help="store (default: results/reproduce/<name>)")
    repro.add_argument("-j", "--jobs", type=int, help="local worker processes")
    repro.add_argument("--ray", metavar="auto|local|ADDRESS", help="run points as Ray tasks")
    repro.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    repro.add_argument(
        "--no-report",
        action="store_true",
        help="write no HTML report (pfcsim report STORE makes it later)",
    )
    repro.set_defaults(command=_reproduce)

    report = sub.add_parser(
        "report",
        help="one self-contained HTML page of a results store: runs, figures, claims, spec",
    )
    report.add_argument("store", type=Path, help="the results store folder")
    report.add_argument("-o", "--out", type=Path, help="the HTML file (default: STORE/report.html)")
    report.set_defaults(command=_report)

    validate = sub.add_parser(
        "validate", help="check a spec (and build its topology and traffic) without running it"
    )
    validate.add_argument("spec", type=Path, help="the scenario spec (TOML)")
    validate.set_defaults(command=_validate)

    schemes = sub.add_parser(
        "schemes", help="list the load-balancing schemes with their parameters and defaults"
    )
    schemes.set_defaults(command=_schemes)

    workloads = sub.add_parser(
        "workloads", help="list the shipped flow-size workloads with their mean and maximum size"
    )
    workloads.set_defaults(command=_workloads)
    return parser


def _run(args: argparse.Namespace) -> None:
    """`pfcsim run`: runs the spec, writes the run folder and prints the report."""
    out = args.out if args.out is not None else Path("runs") / args.spec.stem
    try:
        results = pfcsim.run(args.spec, out=out, progress=not args.quiet)
    except pfcsim.IncompleteRunError as e:
        # What the run measured is written: report it, then the error.
        print(e.results.report())
        raise
    print(results.report())


def _sweep(args: argparse.Namespace) -> None:
    """`pfcsim sweep`: runs the missing points, then prints what happened and where."""
    if args.list:
        _list_points(args)
        return
    report = pfcsim.sweep(
        args.spec, out=args.out, workers=args.jobs, ray=args.ray, progress=not args.quiet
    )
    ran, skipped, failed = len(report.ran), len(report.skipped), len(report.failed)
    elsewhere = f"{len(report.elsewhere)} done by another sweep, " if report.elsewhere else ""
    print(
        f"{len(report.points)} points: {ran} ran, {skipped} already done, {elsewhere}"
        f"{failed} failed" + (", interrupted (rerun to resume)" if report.interrupted else "")
    )
    for key, error in report.failed.items():
        print(f"  failed {key}: {error}")
    if report.incomplete:
        ended = len(report.incomplete)
        print(f"{ended} point{'s' * (ended != 1)} ended early (incomplete; results stored):")
        for key, why in report.incomplete.items():
            print(f"  incomplete {key}: {why}")
    print(f"results in {report.store}; tables: pfcsim results {report.store}")
    if report.interrupted:
        raise KeyboardInterrupt
    args.status = 1 if report.failed or report.incomplete else 0


def _list_points(args: argparse.Namespace) -> None:
    """`pfcsim sweep --list`: every point with its key and state (done, running, failed, to run)."""
    sweep = load_sweep(args.spec)
    store = args.out if args.out is not None else Path("results") / sweep.name
    done = finished_keys(store)
    running = running_keys(store) - done
    failed = {p.stem for p in (store / "failed").glob("*.json")}
    points = check(sweep)
    for point in points:
        if point.key in done:
            state = "done"
        elif point.key in running:
            state = "running"
        elif point.key in failed:
            state = "failed"
        else:
            state = "to run"
        print(f"{point.index:>4}  {point.key}  {state:<7}  {point.label}")
    waiting = sum(p.key not in done and p.key not in running for p in points)
    now = sum(p.key in running for p in points)
    print(
        f"{len(points)} points ({len(sweep.points)} before merging equal ones), {waiting} to run"
        + (f", {now} running in another sweep" if now else "")
    )


#: The metrics `pfcsim results` shows by default (those the store's runs have).
DEFAULT_METRICS = (
    "fct_avg_us",
    "fct_p99_us",
    "slowdown_p99",
    "pfc_pauses",
    "pfc_pause_rate",
    "ooo_ratio",
    "ood_p99",
)


def _one_line(error: Exception) -> str:
    """A DuckDB error on one line: its message without the quoted query that follows it."""
    lines = [line.strip() for line in str(error).splitlines()]
    message = itertools.takewhile(lambda line: not line.startswith("LINE "), lines)
    return " ".join(line for line in message if line)


def _results(args: argparse.Namespace) -> None:
    """`pfcsim results`: one table per metric, or the result of a SQL query."""
    import duckdb
    import pandas as pd

    store = pfcsim.open_store(args.store)
    if args.sql:
        try:
            frame = store.sql(args.sql)
        except duckdb.Error as e:
            raise ValueError(f"--sql: {_one_line(e)}") from None
        print(frame.to_csv(index=False) if args.csv else frame.to_string(index=False))
        return
    failed = sorted((store.path / "failed").glob("*.json"))
    if failed:
        print(f"{len(failed)} points failed: see {store.path / 'failed'}", file=sys.stderr)
    runs = store.runs
    if runs.empty:
        print(f"{store.path}: no finished run yet")
        return
    print(f"{store.path}: {len(runs)} runs; swept fields: {', '.join(store.axes()) or 'none'}")
    columns = None if args.columns == "none" else args.columns
    rows = args.rows.split(",") if args.rows else None
    seeds = runs["seed"].nunique() if "seed" in runs.columns else 1
    with pd.option_context("display.width", 200, "display.max_columns", 50):
        defaults = [m for m in DEFAULT_METRICS if m in runs.columns]
        for metric in args.metric or defaults:
            table = store.comparison(metric, rows=rows, columns=columns)
            if args.csv:
                print(f"# {metric}")
                print(table.to_csv())
                continue
            note = f" (mean over {seeds} seeds)" if seeds > 1 else ""
            print(f"\n{metric}{note}")
            print(table.to_string(float_format=_cell))


def _cell(value: float) -> str:
    """A table cell: large values with thousands separators, others with 4 significant digits."""
    return f"{value:,.0f}" if abs(value) >= 10_000 else f"{value:.4g}"


def _plot(args: argparse.Namespace) -> None:
    """`pfcsim plot`: draws the requested figures and prints the files written."""
    if (args.store / "stats.json").is_file():
        _plot_run(args)
        return
    store = pfcsim.open_store(args.store)
    where = []
    for item in args.where:
        field, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"--where {item}: expected FIELD=VALUE")
        where.append((field, value))
    out = args.out if args.out is not None else store.path / "plots"
    for kind in args.kind or plots.STANDARD_KINDS:
        request = plots.FigureRequest(
            kind,
            series=args.series,
            x=args.x,
            metric=args.metric,
            where=tuple(where),
            y=args.y,
            panels=args.panels,
        )
        for path in plots.draw(store, request, out):
            print(path)


def _plot_run(args: argparse.Namespace) -> None:
    """`pfcsim plot RUN_FOLDER`: the figures of the run's monitors."""
    results = pfcsim.Results.from_folder(args.store)
    kinds = args.kind or [
        kind
        for kind, (table, _, _) in plots.RUN_KINDS.items()
        if results.monitor(table) is not None
    ]
    if not kinds:
        raise ValueError(
            f"{args.store} is a run folder without monitors: nothing to draw "
            "(add [[monitor]] entries to its spec, docs/reference/spec.md)"
        )
    for kind in kinds:
        if kind not in plots.RUN_KINDS:
            raise ValueError(
                f"{args.store} is a run folder; it has the figures "
                f"{', '.join(plots.RUN_KINDS)}, not {kind} (a results store has the others)"
            )
    out = args.out if args.out is not None else args.store / "plots"
    for kind in kinds:
        request = plots.FigureRequest(kind, y=args.y)
        for path in plots.draw_run(results, request, out):
            print(path)


def _reproduce(args: argparse.Namespace) -> None:
    """`pfcsim reproduce`: lists experiments, or runs one and prints its claims table."""
    root = args.experiments or reproduce.default_root()
    if args.list or args.experiment is None:
        for experiment in reproduce.list_experiments(root):
            print(f"{experiment.name:<28} {experiment.title}")
            print(f"{'':<28} {experiment.source}")
        return
    experiment = reproduce.load_experiment(root, args.experiment)
    result = reproduce.reproduce(
        experiment,
        quick=args.quick,
        out=args.out,
        workers=args.jobs,
        ray=args.ray,
        progress=not args.quiet,
        report=not args.no_report,
    )
    kind = "quick run" if args.quick else "full run"
    print(f"{experiment.name}: {experiment.title} ({kind})")
    print(f"source: {experiment.source}")
    for path in result.figures:
        print(f"figure: {path}")
    if result.claims:
        print()
        print(reproduce.format_claims(result.claims))
        print(f"\nclaims table: {result.store / 'claims.csv'}")
    if result.report is not None:
        print(f"report: {result.report}")
    if result.failed_points:
        print(f"{result.failed_points} points failed: see {result.store / 'failed'}")
        args.status = 1
    if result.incomplete_points:
        print(
            f"{result.incomplete_points} points ended early (incomplete): see the claims' notes "
            f"and pfcsim results {result.store} --sql "
            '"SELECT key, incomplete FROM runs WHERE incomplete IS NOT NULL"'
        )
        args.status = 1


def _report(args: argparse.Namespace) -> None:
    """`pfcsim report`: writes the store's HTML report and prints where."""
    print(pfcsim.open_store(args.store).report(args.out))


def _validate(args: argparse.Namespace) -> None:
    """`pfcsim validate`: checks the spec and prints a one-line summary."""
    info = pfcsim.validate(args.spec)
    print(
        f"{args.spec}: valid; {info['hosts']} hosts, {info['switches']} switches, "
        f"{info['flows']} flows, scheme {info['scheme']}"
    )


def _schemes(_args: argparse.Namespace) -> None:
    """`pfcsim schemes`: every scheme with its one-line doc, then its parameters and defaults."""
    for scheme in pfcsim.schemes():
        print(f"{scheme['name']}: {scheme['doc']}")
        params = tomli_w.dumps(scheme["defaults"]).splitlines()
        for line in params or ["(no parameters)"]:
            print(f"    {line}")


def _workloads(_args: argparse.Namespace) -> None:
    """`pfcsim workloads`: every shipped workload with its mean and maximum flow size."""
    for w in pfcsim.workloads():
        print(f"{w['name']:<22} mean {w['mean']:>12.0f} B   max {w['max']:>12} B")
