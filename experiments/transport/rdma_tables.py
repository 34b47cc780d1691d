"""The tables of docs/results/transport/rdma.md, from a store of `transport/rdma`.

    python experiments/transport/rdma_tables.py results/reproduce/transport/rdma

Prints, per size bucket (all flows, below 100 KB, 100 KB and above), a table of the average
and one of the p99 slowdown of each (scheme, setting): the mean over the seeds with its 95%
interval (Student's t), then the retransmitted bytes, drops, PFC pauses and timeouts per
run (mean over the seeds). The p99 is numpy's linear-interpolation percentile of the flows'
slowdowns, as the summary of a run computes it.
"""

import argparse
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

import pfcsim

SCHEMES = ("ecmp", "letflow", "conga", "drill", "conweave", "hermes")
SETTINGS = {
    "gbn-pfc": "go-back-N, PFC",
    "irn-lossy": "IRN, PFC off",
    "irn-pfc": "IRN, PFC on",
    "irn-lossy-1mb": "IRN, PFC off, 1 MB cap",
    "irn-lossy-unsacked": "IRN, PFC off, resend unSACKed",
    "gbn-pfc-timely": "go-back-N, PFC, TIMELY",
    "gbn-pfc-hpcc": "go-back-N, PFC, HPCC",
}
#: Student's t at 97.5% for 1..10 degrees of freedom (two-sided 95% interval).
T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228)
BUCKETS = {
    "all": lambda size: size >= 0,
    "< 100 KB": lambda size: size < 100_000,
    "≥ 100 KB": lambda size: size >= 100_000,
}


def interval(values: list[float]) -> str:
    """Mean and the half-width of its 95% interval over the seeds."""
    x = np.asarray(values)
    if len(x) < 2:
        return f"{x.mean():.3g}"
    half = T975[len(x) - 2] * x.std(ddof=1) / np.sqrt(len(x))
    return f"{x.mean():.3g} ± {half:.2g}"


def main() -> None:
    """Prints the tables of the store named on the command line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("store", type=Path, help="the results store of the experiment")
    store = parser.parse_args().store
    runs = pfcsim.open_store(store).runs
    # One run per point: a store kept across versions of the sweep may hold an older run of
    # the same point under another key (a spec key added since); the newest counts.
    runs = runs.sort_values("finished_at").drop_duplicates(
        ["lb.scheme", "name", "seed"], keep="last"
    )
    per_run: dict[tuple[str, str], list[dict[str, float]]] = {}
    for _, run in runs.iterrows():
        flows = pq.read_table(store / "runs" / run["key"] / "flows.parquet").to_pandas()
        row: dict[str, float] = {}
        for bucket, chosen in BUCKETS.items():
            slowdown = flows.loc[chosen(flows["size_bytes"]), "slowdown"].dropna()
            row[f"{bucket} avg"] = float(slowdown.mean())
            row[f"{bucket} p99"] = float(np.percentile(slowdown, 99))
        row["retransmitted MB"] = float(flows["retransmitted_bytes"].sum()) / 1e6
        row["drops"] = float(run["packets_dropped"])
        row["PFC pauses"] = float(run["pfc_pauses"])
        row["timeouts"] = float(run["timeouts"])
        row["unfinished"] = float(run["flows_total"] - run["flows_finished"])
        per_run.setdefault((run["lb.scheme"], run["name"]), []).append(row)
    seeds = sorted({len(v) for v in per_run.values()})
    print(f"seeds per cell: {seeds}\n")
    for bucket in BUCKETS:
        for stat, title in (("avg", "average"), ("p99", "p99")):
            print(f"### Slowdown, {bucket}: {title}\n")
            print("| scheme | " + " | ".join(SETTINGS.values()) + " |")
            print("|---" * (1 + len(SETTINGS)) + "|")
            for scheme in SCHEMES:
                cells = []
                for setting in SETTINGS:
                    values = [r[f"{bucket} {stat}"] for r in per_run.get((scheme, setting), [])]
                    cells.append(interval(values) if values else "-")
                print(f"| {scheme} | " + " | ".join(cells) + " |")
            print()
    counters = ("retransmitted MB", "drops", "PFC pauses", "timeouts", "unfinished")
    print("### Per run (mean over the seeds)\n")
    print("| scheme | setting | " + " | ".join(counters) + " |")
    print("|---|---" + "|---:" * len(counters) + "|")
    for scheme in SCHEMES:
        for setting, label in SETTINGS.items():
            rows = per_run.get((scheme, setting), [])
            if not rows:
                continue
            means = pd.DataFrame(rows)[list(counters)].mean()
            cells = [
                f"{means[c]:,.0f}" if c != "retransmitted MB" else f"{means[c]:,.1f}"
                for c in counters
            ]
            print(f"| {scheme} | {label} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
