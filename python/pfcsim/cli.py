"""`pfcsim`: run, validate and inspect scenarios from the command line.

Mirrors the Rust command line (crates/pfcsim-cli). Errors print `error: <message>` on stderr
and exit with status 2.
"""

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import tomli_w

import pfcsim


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the command line with `argv` (default: the process arguments); the exit status."""
    args = _parser().parse_args(argv)
    try:
        args.command(args)
    except (pfcsim.SpecError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    return 0


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
    results = pfcsim.run(args.spec, out=out, progress=not args.quiet)
    print(results.report())


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
