"""The tables of docs/results/transport/compare.md, from a store of `transport/compare(-r1)`.

    python experiments/transport/tables.py results/reproduce/transport/compare
    python experiments/transport/tables.py results/reproduce/transport/compare-r1

Prints one Markdown table per metric: a row per scheme, a column per (transport, load).
Small flows are those below 100 KB, large flows the others; the p99 is the nearest-rank
percentile of the flows' FCTs.
"""

import argparse
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet as pq

import pfcsim

SCHEMES = ("ecmp", "presto", "letflow", "drill", "conga", "hermes", "clove")
TRANSPORTS = {"tcp": "DCTCP", "roce": "RoCE"}
SMALL = 100_000


def main() -> None:
    """Prints the tables of the store named on the command line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("store", type=Path, help="the results store of the experiment")
    store = parser.parse_args().store
    runs = pfcsim.open_store(store).runs

    def flows(run: pd.Series) -> pd.DataFrame:
        return pq.read_table(store / "runs" / run["key"] / "flows.parquet").to_pandas()

    def stats(run: pd.Series) -> dict[str, Any]:
        return json.loads((store / "runs" / run["key"] / "stats.json").read_text())

    def small_fcts(run: pd.Series) -> pd.Series:
        table = flows(run)
        return table.loc[table["size_bytes"] < SMALL, "fct_us"].dropna().sort_values()

    def p99(fcts: pd.Series) -> float:
        return float(fcts.iloc[math.ceil(0.99 * len(fcts)) - 1])

    whole = "{:.0f}".format
    short = "{:.3g}".format
    tables: list[tuple[str, Callable[[pd.Series], Any], Callable[[Any], str]]] = [
        ("AFCT (µs), all flows", lambda r: r["fct_avg_us"], whole),
        ("p99 FCT (µs), all flows", lambda r: r["fct_p99_us"], whole),
        ("AFCT (µs), small flows", lambda r: small_fcts(r).mean(), whole),
        ("p99 FCT (µs), small flows", lambda r: p99(small_fcts(r)), whole),
        (
            "AFCT (µs), large flows",
            lambda r: flows(r).query(f"size_bytes >= {SMALL}")["fct_us"].mean(),
            whole,
        ),
        ("loss rate", lambda r: stats(r).get("loss_rate", 0), short),
        ("fast retransmits", lambda r: flows(r)["fast_retransmits"].sum(), short),
        ("retransmission timeouts", lambda r: flows(r)["timeouts"].sum(), short),
        ("retransmitted MB", lambda r: flows(r)["retransmitted_bytes"].sum() / 1e6, short),
        ("PFC pause rate", lambda r: r["pfc_pause_rate"], short),
        ("flows finished", lambda r: f"{r['flows_finished']}/{r['flows_total']}", str),
    ]
    loads = sorted(runs["load"].unique())
    columns = [(t, load) for t in TRANSPORTS for load in loads]
    for title, value, show in tables:
        print(f"### {title}\n")
        print("| scheme | " + " | ".join(f"{TRANSPORTS[t]} {load}" for t, load in columns) + " |")
        print("|---|" + "---:|" * len(columns))
        for scheme in SCHEMES:
            cells = []
            for transport, load in columns:
                run = runs[
                    (runs["scheme"] == scheme)
                    & (runs["transport.kind"] == transport)
                    & (runs["load"] == load)
                ]
                cells.append(show(value(run.iloc[0])) if len(run) == 1 else "")
            print(f"| {scheme} | " + " | ".join(cells) + " |")
        print()


if __name__ == "__main__":
    main()
