"""The results of one run: the flows, ports and summary tables, the run-wide counters, the spec."""

from __future__ import annotations

import json
import os
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

if TYPE_CHECKING:
    # Imported when first used (by `to_pandas`, `_to_polars`): they take a while to load, and
    # neither `pfcsim run` nor `pfcsim.run` needs them (nor pyarrow.compute, which `_total`
    # imports for `report`).
    import pandas as pd
    import polars as pl
    from matplotlib.figure import Figure

#: The tables of a run folder, each read from `<name>.parquet`.
TABLES = ("flows", "ports", "summary")
#: The monitor kinds of a spec's `[[monitor]]` entries; a run with monitors of a kind writes
#: `monitor_<kind>.parquet` (docs/reference/metrics.md).
MONITOR_KINDS = ("queue", "pfc", "rate", "link_util", "scheme")
#: Tables only some runs write (`reorder_queues`: schemes with reorder queues, ConWeave;
#: `alerts`: RLB runs; `coflows`: runs with coflow traffic; `monitor_<kind>`: runs with
#: monitors of that kind; `deadlocks`: every run of a version with PFC deadlock detection,
#: empty unless a deadlock ended it).
OPTIONAL_TABLES = (
    "reorder_queues",
    "alerts",
    "coflows",
    "deadlocks",
    *(f"monitor_{kind}" for kind in MONITOR_KINDS),
)


class Results:
    """What one run produced (column definitions: docs/reference/metrics.md).

    The tables are read once, as Arrow tables; `flows`, `ports` and `summary` give them as
    pandas DataFrames and `flows_pl`, `ports_pl` and `summary_pl` as polars DataFrames, each
    converted on first use. Null means "not available" (a flow that did not finish has null
    `finish_ps`, `fct_ps`, `slowdown`, `fct_us`); in the pandas frames the nullable integer
    columns have the pandas nullable type `UInt64` (null is `<NA>`) and the float columns
    hold NaN.
    """

    def __init__(
        self,
        *,
        path: Path | None,
        spec: str,
        stats: dict[str, Any],
        peak_packets: int | None,
        summary_table: str,
        tables: dict[str, pa.Table],
    ) -> None:
        """Results of a run; `tables` maps each name of `TABLES` to its Arrow table."""
        #: The run folder, or None if the run was not kept on disk.
        self.path = path
        #: The resolved spec (every default written out) as TOML text.
        self.spec = spec
        #: The run-wide counters of stats.json, with the integer `fingerprint`.
        self.stats = stats
        #: The largest number of packets alive at once during the run (None if not recorded).
        self.peak_packets = peak_packets
        self._summary_table = summary_table
        self._tables = tables

    @classmethod
    def from_run(cls, folder: Path, outcome: dict[str, Any], *, keep_path: bool) -> Results:
        """Results of a run that wrote the run folder `folder` and returned `outcome`.

        `outcome` is what `_core.Scenario.run` returns. The tables are read into memory, and
        `path` is `folder` if `keep_path`, else None (for a folder about to be deleted).
        """
        return cls(
            path=folder if keep_path else None,
            spec=outcome["spec"],
            stats=outcome["stats"],
            peak_packets=outcome["peak_packets"],
            summary_table=outcome["summary_table"],
            tables=_read_tables(folder),
        )

    @classmethod
    def from_folder(cls, folder: str | os.PathLike[str]) -> Results:
        """The results saved in a run folder (by `pfcsim run -o DIR` or a sweep).

        `peak_packets` is known only for folders of a sweep (it is kept in `point.json`).
        """
        path = Path(folder)
        point_file = path / "point.json"
        point = json.loads(point_file.read_text()) if point_file.is_file() else {}
        return cls(
            path=path,
            spec=(path / "spec.toml").read_text(),
            stats=json.loads((path / "stats.json").read_text()),
            peak_packets=point.get("peak_packets"),
            summary_table=(path / "summary.txt").read_text(),
            tables=_read_tables(path),
        )

    @cached_property
    def flows(self) -> pd.DataFrame:
        """One row per flow, in `flow_id` order (pandas)."""
        return _to_pandas(self._tables["flows"])

    @cached_property
    def ports(self) -> pd.DataFrame:
        """One row per egress port (pandas)."""
        return _to_pandas(self._tables["ports"])

    @cached_property
    def summary(self) -> pd.DataFrame:
        """FCT and slowdown statistics: the `all` row, then one per flow-size bucket (pandas)."""
        return _to_pandas(self._tables["summary"])

    @cached_property
    def reorder_queues(self) -> pd.DataFrame | None:
        """Reorder queues in use per port over time (pandas); None without reorder queues.

        Written by schemes that hold packets at the destination ToR (ConWeave).
        """
        table = self._tables.get("reorder_queues")
        return None if table is None else _to_pandas(table)

    @cached_property
    def reorder_queues_pl(self) -> pl.DataFrame | None:
        """`reorder_queues` as a polars DataFrame; None for schemes without reorder queues."""
        table = self._tables.get("reorder_queues")
        return None if table is None else _to_polars(table)

    @cached_property
    def alerts(self) -> pd.DataFrame | None:
        """Faulty switches reported by RLB* (pandas); None for runs of other schemes.

        Columns `time_ps`, `node`, `port`, `downstream` (docs/reference/metrics.md).
        """
        table = self._tables.get("alerts")
        return None if table is None else _to_pandas(table)

    @cached_property
    def deadlocks(self) -> pd.DataFrame | None:
        """The egresses of the PFC deadlocks that ended the run, one row each (pandas).

        Empty for a run without a deadlock (None for a run folder of an older version).
        Columns `deadlock`, `detected_ps`, `formed_ps`, `node`, `port`, `peer`, `priority`,
        `paused_since_ps`, `stuck_bytes` (docs/reference/metrics.md); such a run is incomplete and
        its `stats` say which cycle (`deadlock_cycles`) and when it formed.
        """
        table = self._tables.get("deadlocks")
        return None if table is None else _to_pandas(table)

    @cached_property
    def coflows(self) -> pd.DataFrame | None:
        """One row per coflow (pandas); None for runs without coflow traffic.

        Columns `coflow_id`, `flows`, `finished_flows`, `bytes`, `arrival_ps`, `finish_ps`,
        `cct_ps`, `stalled_flows`, `cct_us` (docs/reference/metrics.md); the run's ACCT and
        stalled-flow ratio are in `stats` (`acct_us`, `stalled_flow_ratio`).
        """
        table = self._tables.get("coflows")
        return None if table is None else _to_pandas(table)

    @cached_property
    def coflows_pl(self) -> pl.DataFrame | None:
        """`coflows` as a polars DataFrame; None for runs without coflow traffic."""
        table = self._tables.get("coflows")
        return None if table is None else _to_polars(table)

    def monitor(self, kind: str, *, polars: bool = False) -> pd.DataFrame | pl.DataFrame | None:
        """What the run's monitors of `kind` recorded (pandas, or polars if `polars`).

        `kind` is one of `MONITOR_KINDS` (`queue`, `pfc`, `rate`, `link_util`, `scheme`); None
        if the run had no monitor of that kind. Columns: docs/reference/metrics.md.
        """
        if kind not in MONITOR_KINDS:
            raise ValueError(f"unknown monitor kind {kind!r}; expected one of {MONITOR_KINDS}")
        table = self._tables.get(f"monitor_{kind}")
        if table is None:
            return None
        return _to_polars(table) if polars else _to_pandas(table)

    def plot(self, kind: str, *, y: str | None = None, title: str | None = None) -> Figure:
        """A figure of the run's monitors (matplotlib; save it with `savefig`).

        `kind`: `queue` (bytes charged to each watched ingress, or `y = "egress_bytes"`, with
        the PFC XOFF level dashed), `pfc-timeline` (the time each link direction was paused),
        `rate` (each watched flow's rate, or `y = "acked_bytes"`) or `util` (each watched
        port's utilization, or `y = "tx_bytes"`); see `pfcsim.plots.RUN_KINDS`.
        """
        from pfcsim import plots

        return plots.run_figure([(None, self)], plots.FigureRequest(kind, y=y, title=title))

    @cached_property
    def flows_pl(self) -> pl.DataFrame:
        """One row per flow, in `flow_id` order (polars)."""
        return _to_polars(self._tables["flows"])

    @cached_property
    def ports_pl(self) -> pl.DataFrame:
        """One row per egress port (polars)."""
        return _to_polars(self._tables["ports"])

    @cached_property
    def summary_pl(self) -> pl.DataFrame:
        """FCT and slowdown statistics: the `all` row, then one per flow-size bucket (polars)."""
        return _to_polars(self._tables["summary"])

    @property
    def fingerprint(self) -> str:
        """The run's fingerprint as 16 hexadecimal digits (equal for equal specs and seeds)."""
        return f"{self.stats['fingerprint']:016x}"

    def report(self) -> str:
        """A text report of the run, as the command line prints it.

        The FCT and slowdown table by flow-size bucket (avg, p50, p99, p99.9), then the flows
        finished, PFC pauses, drops, retransmitted bytes, out-of-order arrivals, the reordering
        and PFC rates (out-of-order ratio, out-of-order degree p50/p99/max, PFC pause rate and
        PAUSE frames per port per second; runs of older versions lack them), the coflows
        finished, ACCT and stalled-flow ratio (runs with coflows), the simulated and
        wall time, the fingerprint, why the run is incomplete (a guard of `[run]` ended it,
        or it stalled) and the run folder.
        """
        s = self.stats
        flows, ports = self._tables["flows"], self._tables["ports"]
        pauses = _total(ports, "pfc_pauses_sent")
        retransmitted = _total(flows, "retransmitted_bytes")
        out_of_order = _total(flows, "ooo_arrivals")
        wall = s["wall_seconds"]
        rate = f"{s['events'] / wall / 1e6:.2f} M events/s" if wall > 0 else "-"
        lines = [
            self._summary_table.rstrip("\n"),
            "",
            f"flows finished {s['flows_finished']}/{s['flows_total']}  PFC pauses {pauses}  "
            f"drops {s['packets_dropped']}  retransmitted {retransmitted} B  "
            f"out-of-order arrivals {out_of_order}",
            *_rates_line(s),
            *_coflows_line(s),
            f"simulated {s['end_ps'] / 1e9:.3f} ms in {wall:.2f} s wall: "
            f"{s['events']} events, {rate}",
            f"fingerprint {self.fingerprint}"
            + (f"  peak packets in flight {self.peak_packets}" if self.peak_packets else ""),
        ]
        if "incomplete" in s:
            lines.append(f"incomplete: {s['incomplete']}")
        if self.path is not None:
            lines.append(f"results in {self.path}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        """Where the results are, how many flows finished, and the fingerprint."""
        s = self.stats
        return (
            f"<pfcsim.Results {s['flows_finished']}/{s['flows_total']} flows finished, "
            f"fingerprint {self.fingerprint}, path {self.path}>"
        )


def _coflows_line(stats: dict[str, Any]) -> list[str]:
    """The coflow line of `Results.report`: only for runs with coflows."""
    if "coflows_total" not in stats:
        return []
    acct = stats["acct_us"]
    acct_text = "-" if acct is None else f"{acct:.2f} us"
    return [
        f"coflows finished {stats['coflows_finished']}/{stats['coflows_total']}  "
        f"ACCT {acct_text}  stalled-flow ratio {stats['stalled_flow_ratio']:.4f}"
    ]


def _rates_line(stats: dict[str, Any]) -> list[str]:
    """The report line of the reordering and PFC rates (none for stats without them)."""
    if "ooo_ratio" not in stats:
        return []
    return [
        f"out-of-order ratio {stats['ooo_ratio']:.4g}  out-of-order degree p50/p99/max "
        f"{stats['ood_p50']}/{stats['ood_p99']}/{stats['ood_max']}  "
        f"PFC pause rate {stats['pfc_pause_rate']:.4g}  "
        f"PAUSE frames {stats['pfc_pauses_per_port_s']:.4g} per port per s"
    ]


def _read_tables(folder: Path) -> dict[str, pa.Table]:
    """The tables of run folder `folder`: every one of `TABLES`, and the optional ones it has."""
    tables = {name: read_parquet(folder / f"{name}.parquet") for name in TABLES}
    for name in OPTIONAL_TABLES:
        path = folder / f"{name}.parquet"
        if path.is_file():
            tables[name] = read_parquet(path)
    return tables


def read_parquet(path: Path) -> pa.Table:
    """The table of the Parquet file `path`.

    Read with `ParquetFile`, not `pq.read_table`: the latter goes through `pyarrow.dataset`,
    whose import loads pandas (about 40 MB and a quarter of a second) when it is installed.
    """
    with pq.ParquetFile(path) as f:
        return f.read()


def _to_pandas(table: pa.Table) -> pd.DataFrame:
    """`table` as a pandas DataFrame; nullable integer columns get pandas nullable types.

    (By default they would become float64 if they hold a null and stay integers otherwise.)
    """
    import pandas as pd  # loaded on first use, see the imports above

    nullable = {
        pa.uint8(): pd.UInt8Dtype(),
        pa.uint16(): pd.UInt16Dtype(),
        pa.uint32(): pd.UInt32Dtype(),
        pa.uint64(): pd.UInt64Dtype(),
        pa.int8(): pd.Int8Dtype(),
        pa.int16(): pd.Int16Dtype(),
        pa.int32(): pd.Int32Dtype(),
        pa.int64(): pd.Int64Dtype(),
    }
    frame = table.to_pandas()
    for field in table.schema:
        if field.nullable and field.type in nullable:
            frame[field.name] = table[field.name].to_pandas(types_mapper=nullable.get)
    return frame


def _to_polars(table: pa.Table) -> pl.DataFrame:
    """`table` as a polars DataFrame."""
    import polars as pl  # loaded on first use, see the imports above

    frame = pl.from_arrow(table)
    assert isinstance(frame, pl.DataFrame), "a table converts to a DataFrame"
    return frame


def _total(table: pa.Table, column: str) -> int:
    """Sum of an integer column (0 for an empty table)."""
    import pyarrow.compute as pc

    return pc.sum(table[column]).as_py() or 0
