"""A results store: the run folders of sweeps, indexed in one DuckDB database.

The run folders (`runs/<key>/`, see `pfcsim.sweep`) are the source of truth; `index.duckdb` is
derived from them and brought up to date by `Store.sync` (every command that reads a store
calls it), so an interrupted sweep or a deleted run folder never leaves the index wrong for
long. Tables (docs/guides/sweeps.md):

* `runs`: one row per run: `key`, the sweep and point it came from, every field of its
  resolved spec as a column named by its key path (`"lb.scheme"`, `"traffic[0].load"`), the
  shorthands `scheme`, `workload`, `load`, `seed`, the run-wide counters and rates of
  `stats.json` (among them `ooo_ratio`, `ood_p99`, `pfc_pause_rate`), the `all` row of its
  summary, and totals over its ports and flows;
* `flows`, `ports`, `summary`: the run folders' Parquet tables, with a first column `run_key`;
* `reorder_queues`, `alerts`, `coflows`, `deadlocks`, `monitor_queue`, `monitor_pfc`,
  `monitor_rate`, `monitor_link_util`, `monitor_scheme`: the same for the tables only some
  runs write, made once a run has one.
"""

from __future__ import annotations

import copy
import fcntl
import json
import os
import tomllib
from contextlib import contextmanager
from importlib.metadata import version
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

from pfcsim import _core
from pfcsim.results import OPTIONAL_TABLES, TABLES, Results
from pfcsim.sweep import POINT_FILE, finished_keys, unreadable_run

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator

    import duckdb
    import pandas as pd
    import polars as pl

#: The file name of the index inside a store.
INDEX_FILE = "index.duckdb"
#: The file locked while a process has the index open (see `Store.connect`).
INDEX_LOCK_FILE = "index.lock"


def _port_total(name: str, aggregate: str, column: str) -> str:
    """The SQL of a port total: `aggregate(column)`, in µs for a `_us` total of a `_ps` column."""
    sql = f"{aggregate}({column})"
    return f"{sql} / 1e6" if name.endswith("_us") and column.endswith("_ps") else sql


#: Totals over a run's ports and flows added to the `runs` table: column -> SQL aggregate.
#: The port totals are defined with the port record (`PORT_TOTALS` in the core's `metrics.rs`).
PORT_TOTALS = {name: _port_total(name, *total) for name, *total in _core.port_totals()}
#: (Totals of retransmitted bytes, out-of-order arrivals and stalled flows come with the
#: summary's `all` row.)
FLOW_TOTALS = {
    "max_ooo_degree": "max(max_ooo_degree)",
    "nacks": "sum(nacks_received)",
    "timeouts": "sum(timeouts)",
    # The completion time of the flows of the first [[traffic]] entry (the last of them to
    # finish; NULL while one is unfinished): for a one-flow entry, such as the victim flow of
    # a scripted scenario, its FCT.
    "traffic0_fct_us": (
        "CASE WHEN count(*) FILTER (WHERE generator = 0 AND fct_ps IS NULL) = 0"
        " THEN max(fct_ps) FILTER (WHERE generator = 0) / 1e6 END"
    ),
}

#: Incast completion times added to the `runs` table. An incast is the set of flows of an
#: `incast` generator that start at the same instant towards the same receiver (one
#: repetition); it completes when its last flow finishes, and its completion time is that
#: finish minus the common start. An incast with an unfinished flow has no completion time.
#: Two incast generators firing at the same instant at the same receiver count as one incast.
#: Runs without incast flows get `incasts = 0` and NULL times.
INCAST_PER_INCAST = (
    "SELECT run_key, CASE WHEN count(finish_ps) = count(*) THEN max(finish_ps) - start_ps END"
    " AS ct_ps FROM flows WHERE source = 'incast' GROUP BY run_key, dst, start_ps"
)
INCAST_TOTALS = {
    "incasts": "count(*)",
    "incasts_finished": "count(ct_ps)",
    "incast_ct_avg_us": "avg(ct_ps) / 1e6",
    "incast_ct_max_us": "max(ct_ps) / 1e6",
}

#: Columns the tables of a run folder gained after their first version, with their DuckDB
#: types (from the history of the records, crates/pfcsim-core/src/metrics.rs: a column added
#: to a record goes here too). The index has every one of them, NULL for the runs of
#: older versions, so the totals above and queries naming them work on a store of old runs.
ADDED_COLUMNS: dict[str, dict[str, str]] = {
    "flows": {
        "sport": "USMALLINT",
        "dport": "USMALLINT",
        "packets_received": "UBIGINT",
        "generator": "USMALLINT",
        "transport": "VARCHAR",
        "fast_retransmits": "UINTEGER",
        "dup_acks": "UINTEGER",
        "coflow": "UINTEGER",
        "ooo_buffer_max_bytes": "UBIGINT",
    },
    "ports": {
        "mean_queue_bytes": "DOUBLE",
        "lb_messages_sent": "UBIGINT",
        "fault_drops": "UBIGINT",
        "reorder_queues_max": "UINTEGER",
        "reorder_queues_mean": "DOUBLE",
        "egress_drops": "UBIGINT",
    },
    "monitor_rate": {"cwnd_bytes": "UBIGINT"},
}

#: Columns of the `runs` table that name the most-used spec fields.
SHORTHANDS = ("scheme", "workload", "load", "seed")

#: Spec fields that never make a comparison axis.
NOT_AXES = ("name",)


class Store:
    """A results store folder (made by `pfcsim sweep`), with its DuckDB index.

    `runs` gives the `runs` table as a pandas DataFrame (`runs_pl`: polars); `sql` runs any
    query against the index; `results(key)` loads one run as `Results`; `comparison` pivots
    a metric by scheme and swept fields; `report` writes the HTML report. `only(keys)` is a
    view restricted to some runs.
    """

    #: The runs this view is restricted to (None: every run of the store). Restricts `runs`,
    #: `runs_pl`, `axes` and `comparison`; `sql` and `arrow` see the whole index.
    keys: frozenset[str] | None = None

    def __init__(self, path: str | os.PathLike[str]) -> None:
        """Opens the store at `path` and brings its index up to date (see `sync`)."""
        self.path = Path(path)
        if not (self.path / "runs").is_dir():
            raise FileNotFoundError(
                f"{self.path} is not a results store (no runs/ folder); "
                "make one with `pfcsim sweep sweep.toml -o DIR`"
            )
        self.sync()

    @property
    def index_path(self) -> Path:
        """The DuckDB database file."""
        return self.path / INDEX_FILE

    @contextmanager
    def connect(self, *, read_only: bool = True) -> Iterator[duckdb.DuckDBPyConnection]:
        """A DuckDB connection to the index, closed when the block ends.

        DuckDB refuses to open a database that another process has open for writing (and to
        open one for writing that another has open at all), so the connection holds a lock on
        `index.lock` (shared to read, exclusive to write): processes wait for each other
        instead, such as two sweeps that finish together on one store.
        """
        import duckdb

        lock = os.open(self.path / INDEX_LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(lock, fcntl.LOCK_SH if read_only else fcntl.LOCK_EX)
            con = duckdb.connect(str(self.index_path), read_only=read_only)
            try:
                yield con
            finally:
                con.close()
        finally:
            os.close(lock)

    def sync(self) -> int:
        """Makes the index match the run folders: adds new runs, drops deleted ones.

        Runs in one transaction, so an interruption leaves the previous index. Returns the
        number of runs indexed.
        """
        with self.connect(read_only=False) as con:
            on_disk = finished_keys(self.path)  # under the lock: what the last sync saw, or more
            current = _index_format(con) == _INDEX_FORMAT
            indexed = _indexed_keys(con) if current else set()
            if current and indexed == on_disk and indexed:
                return len(indexed)
            con.execute("BEGIN TRANSACTION")
            if not current:
                for table in (*TABLES, *OPTIONAL_TABLES, "runs", "spec_columns", "index_format"):
                    con.execute(f"DROP TABLE IF EXISTS {table}")
                con.execute("CREATE TABLE index_format AS SELECT ? AS format", [_INDEX_FORMAT])
            gone = sorted(indexed - on_disk)
            new = sorted(on_disk - indexed)
            for table in (*TABLES, *OPTIONAL_TABLES):
                if gone and _has_table(con, table):
                    con.execute(f"DELETE FROM {table} WHERE run_key IN ?", [gone])
                folders = [self.path / "runs" / k for k in new]
                if table in OPTIONAL_TABLES:
                    folders = [f for f in folders if (f / f"{table}.parquet").is_file()]
                if folders:
                    _append_runs(con, table, folders)
            _rebuild_runs_table(con, self.path, sorted(on_disk))
            con.execute("COMMIT")
        return len(on_disk)

    def only(self, keys: Iterable[str]) -> Store:
        """A view of this store restricted to the runs with these keys.

        E.g. one sweep's points, in a store that also holds runs of other sweeps or of older
        versions of it.
        """
        view = copy.copy(self)
        view.keys = frozenset(keys)
        return view

    @property
    def runs(self) -> pd.DataFrame:
        """The `runs` table (pandas), ordered by sweep and point index."""
        return self.sql(*self._runs_query())

    @property
    def runs_pl(self) -> pl.DataFrame:
        """The `runs` table (polars), ordered by sweep and point index."""
        return self.sql_pl(*self._runs_query())

    def _runs_query(self) -> tuple[str, list[Any] | None]:
        """The query of the `runs` table of this view, with its parameters."""
        order = "ORDER BY sweep, point_index, key"
        if self.keys is None:
            return f"SELECT * FROM runs {order}", None
        return f"SELECT * FROM runs WHERE key IN ? {order}", [sorted(self.keys)]

    def sql(self, query: str, params: list[Any] | None = None) -> pd.DataFrame:
        """The result of a SQL query against the index, as a pandas DataFrame."""
        with self.connect() as con:
            return con.sql(query, params=params).df()

    def sql_pl(self, query: str, params: list[Any] | None = None) -> pl.DataFrame:
        """The result of a SQL query against the index, as a polars DataFrame."""
        with self.connect() as con:
            return con.sql(query, params=params).pl()

    def arrow(self, query: str, params: list[Any] | None = None) -> pa.Table:
        """The result of a SQL query against the index, as an Arrow table."""
        with self.connect() as con:
            relation = con.sql(query, params=params)
            # `to_arrow_table` since DuckDB 1.4; `fetch_arrow_table` before.
            fetch = getattr(relation, "to_arrow_table", None) or relation.fetch_arrow_table
            return fetch()

    def results(self, key: str) -> Results:
        """The run with key `key` (a prefix is enough if it is unique) as `Results`."""
        keys = [k for k in finished_keys(self.path) if k.startswith(key)]
        if len(keys) != 1:
            raise KeyError(f"{len(keys)} runs in {self.path} have a key starting with {key!r}")
        return Results.from_folder(self.path / "runs" / keys[0])

    def axes(self) -> list[str]:
        """The fields that differ between runs (the sweep's axes), in spec order.

        A field counts if its values (where it is set) take more than one value: a parameter
        of one scheme only, at its default, does not. A field equal in every run to one of the
        shorthands `scheme`, `workload`, `load`, `seed` is given by the shorthand's name.
        """
        runs = self.runs
        spec_columns = self.sql("SELECT name FROM spec_columns ORDER BY position")["name"]
        axes = []
        for column in spec_columns:
            values = runs[column].dropna().astype(str)
            if column in NOT_AXES or values.nunique() < 2:
                continue
            same = (
                short
                for short in SHORTHANDS
                if short in runs.columns
                and runs[short].astype(str).tolist() == runs[column].astype(str).tolist()
            )
            axes.append(next(same, column))
        return list(dict.fromkeys(axes))

    def report(self, out: str | os.PathLike[str] | None = None) -> Path:
        """Writes the store's HTML report (one self-contained page; `pfcsim.report`).

        To `out`, default `<store>/report.html`; returns its path. A store made by `pfcsim
        reproduce` shows its experiment, claims and figures, and only the runs of its current
        sweep (a view made with `only` shows its own runs).
        """
        from pfcsim.report import write_report

        return write_report(self, None if out is None else Path(out))

    def comparison(
        self,
        metric: str,
        *,
        rows: list[str] | None = None,
        columns: str | None = "scheme",
    ) -> pd.DataFrame:
        """`metric` averaged over the runs of each (rows, columns) cell, as a pivot table.

        `rows` default to the axes other than `columns`, `scheme` and `seed` (runs that differ
        only by seed are averaged); `columns` is a spec field or None for a single column.
        """
        runs = self.runs
        if metric not in runs.columns:
            raise KeyError(f"no column {metric!r} in the runs table; see docs/guides/sweeps.md")
        if columns is not None and columns not in runs.columns:
            raise KeyError(f"no column {columns!r} in the runs table")
        if rows is None:
            skip = {columns, "scheme", "seed"}
            rows = [a for a in self.axes() if a not in skip]
        for r in rows:
            if r not in runs.columns:
                raise KeyError(f"no column {r!r} in the runs table")
        frame = runs.copy()
        if not rows:
            frame["all runs"] = ""
            rows = ["all runs"]
        if columns is None:
            return frame.groupby(rows, dropna=False)[metric].mean().to_frame(metric)
        table = frame.pivot_table(
            index=rows, columns=columns, values=metric, aggfunc="mean", dropna=False
        )
        # Columns in the order the runs come (the sweep's order), not sorted.
        return table[[c for c in dict.fromkeys(frame[columns]) if c in table.columns]]


#: The layout of the index: a store indexed by another pfcsim version is indexed again.
_INDEX_FORMAT = f"pfcsim {version('pfcsim')}, index layout 7"


def _index_format(con: duckdb.DuckDBPyConnection) -> str | None:
    """The layout the index was built with (None for a new or older index)."""
    if not _has_table(con, "index_format"):
        return None
    row = con.execute("SELECT format FROM index_format").fetchone()
    return row[0] if row else None


def _indexed_keys(con: duckdb.DuckDBPyConnection) -> set[str]:
    """Keys in the index's `runs` table (none if there is no table yet)."""
    if not _has_table(con, "runs"):
        return set()
    return {row[0] for row in con.execute("SELECT key FROM runs").fetchall()}


def _has_table(con: duckdb.DuckDBPyConnection, name: str) -> bool:
    """Whether the index has table `name`."""
    # fetchall: a result left unfinished would block the connection's next `register`.
    found = con.execute(
        "SELECT count(*) FROM information_schema.tables WHERE table_name = ?", [name]
    ).fetchall()
    return bool(found and found[0][0])


def _append_runs(con: duckdb.DuckDBPyConnection, table: str, folders: list[Path]) -> None:
    """Appends `<table>.parquet` of every run folder in `folders` to `table`, with `run_key`.

    Runs of different pfcsim versions may have different columns: the table gets the union
    of them, every column of `ADDED_COLUMNS` too, and NULL where a run's file lacks one. A
    file DuckDB cannot read stops it with a `ValueError` naming the run folder and why.
    """
    import duckdb

    files = [str(f / f"{table}.parquet") for f in folders]
    select = (
        r"SELECT regexp_extract(filename, '([0-9a-f]{16})[/\\][a-z_]+\.parquet$', 1) AS run_key,"
        " * EXCLUDE (filename) FROM read_parquet(?, filename = true, union_by_name = true)"
    )
    try:
        if _has_table(con, table):
            read = con.sql(select, params=[files])
            _add_columns(con, table, dict(zip(read.columns, map(str, read.types), strict=True)))
            con.execute(f"INSERT INTO {table} BY NAME {select}", [files])
        else:
            con.execute(f"CREATE TABLE {table} AS {select}", [files])
    except duckdb.Error as e:
        raise _unreadable(table, folders, e) from None
    _add_columns(con, table, ADDED_COLUMNS.get(table, {}))


def _add_columns(con: duckdb.DuckDBPyConnection, table: str, columns: dict[str, str]) -> None:
    """Adds to `table` those of `columns` (name -> DuckDB type) it lacks, NULL in every row."""
    have = {row[0] for row in con.execute(f"DESCRIBE {table}").fetchall()}
    for name, kind in columns.items():
        if name not in have:
            con.execute(f'ALTER TABLE {table} ADD COLUMN "{name}" {kind}')


def _unreadable(table: str, folders: list[Path], error: Exception) -> ValueError:
    """The error of `folders`' `<table>.parquet` files that DuckDB failed to read.

    Names the first run folder whose file Arrow cannot read either (with Arrow's reason), or
    else gives DuckDB's message.
    """
    for folder in folders:
        try:
            pq.read_schema(folder / f"{table}.parquet")
        except (OSError, pa.ArrowException) as e:
            return unreadable_run(folder, f"{table}.parquet", e)
    message = " ".join(line.strip() for line in str(error).splitlines() if line.strip())
    return ValueError(f"cannot index the {table} tables of {len(folders)} runs: {message}")


def _rebuild_runs_table(con: duckdb.DuckDBPyConnection, store: Path, keys: list[str]) -> None:
    """Replaces the `runs` table with one row per run folder of `keys`."""
    rows = [_run_row(store / "runs" / key) for key in keys]
    table = _rows_to_arrow(rows)
    con.register("run_rows", table)
    port_totals = ", ".join(f"{sql} AS {name}" for name, sql in PORT_TOTALS.items())
    flow_totals = ", ".join(f"{sql} AS {name}" for name, sql in FLOW_TOTALS.items())
    incast_totals = ", ".join(f"{sql} AS {name}" for name, sql in INCAST_TOTALS.items())
    incast_columns = ", ".join(
        f"coalesce(i.{name}, 0) AS {name}" if name.startswith("incasts") else f"i.{name}"
        for name in INCAST_TOTALS
    )
    if keys:
        con.execute(
            f"""CREATE OR REPLACE TABLE runs AS
            SELECT r.*, p.* EXCLUDE (run_key), f.* EXCLUDE (run_key), {incast_columns}
            FROM run_rows r
            LEFT JOIN (SELECT run_key, {port_totals} FROM ports GROUP BY run_key) p
                ON p.run_key = r.key
            LEFT JOIN (SELECT run_key, {flow_totals} FROM flows GROUP BY run_key) f
                ON f.run_key = r.key
            LEFT JOIN (SELECT run_key, {incast_totals} FROM ({INCAST_PER_INCAST})
                GROUP BY run_key) i
                ON i.run_key = r.key"""
        )
    else:
        con.execute("CREATE OR REPLACE TABLE runs AS SELECT * FROM run_rows")
    con.unregister("run_rows")
    spec_columns = list(dict.fromkeys(c for row in rows for c in _flatten_keys(row)))
    con.execute("CREATE OR REPLACE TABLE spec_columns (position INTEGER, name VARCHAR)")
    if spec_columns:
        con.executemany("INSERT INTO spec_columns VALUES (?, ?)", list(enumerate(spec_columns)))


def _run_row(folder: Path) -> dict[str, Any]:
    """The `runs` row of one run folder, before the port and flow totals.

    A file of the folder that cannot be read stops it with a `ValueError` naming the folder,
    the file and why.
    """
    point = _read_run_file(folder, POINT_FILE, _json_object)
    spec = _read_run_file(folder, "spec.toml", lambda f: tomllib.loads(f.read_text()))
    stats = _read_run_file(folder, "stats.json", _json_object)
    if missing := [k for k in ("fingerprint", "end_ps") if k not in stats]:
        raise unreadable_run(folder, "stats.json", f"no {' or '.join(missing)}")
    summary = _read_run_file(folder, "summary.parquet", lambda f: pq.read_table(f).to_pylist())
    overall = next((s for s in summary if s["bucket"] == "all"), {})
    row: dict[str, Any] = {
        "key": folder.name,
        "sweep": point.get("sweep"),
        "point_index": point.get("index"),
        "label": point.get("label"),
        "point_wall_seconds": point.get("wall_seconds"),
        # NULL for runs made before point.json recorded the version.
        "pfcsim_version": point.get("pfcsim_version"),
        "finished_at": point.get("finished_at"),
    }
    row.update(_shorthands(spec))
    row["fingerprint"] = f"{stats.pop('fingerprint'):016x}"
    row.update(stats)
    row["sim_time_ms"] = stats["end_ps"] / 1e9
    row.update({k: v for k, v in overall.items() if k not in ("bucket", "flows", "finished")})
    row.update(_edge_buckets(summary))
    flat = _spec_fields(spec)
    row.update(flat)
    row[_SPEC_KEYS] = list(flat)
    return row


def _read_run_file(folder: Path, name: str, read: Callable[[Path], Any]) -> Any:
    """`read(folder / name)`; a failure becomes the error of an unreadable run folder."""
    try:
        return read(folder / name)
    except (OSError, ValueError, pa.ArrowException) as e:
        raise unreadable_run(folder, name, e) from None


def _json_object(path: Path) -> dict[str, Any]:
    """The JSON object in file `path` (a `ValueError` if it holds something else)."""
    value = json.loads(path.read_text())
    if not isinstance(value, dict):
        raise ValueError(f"a JSON {type(value).__name__}, not an object")
    return value


def _edge_buckets(summary: list[dict[str, Any]]) -> dict[str, Any]:
    """`small_*` and `large_*`: flows, FCT mean and p99 of the edge flow-size buckets.

    Small is the first bucket (below `run.size_buckets[0]`), large the last (at or above the
    last bound); nothing without bounds.
    """
    buckets = [s for s in summary if s["bucket"] != "all"]
    if len(buckets) < 2:
        return {}
    out: dict[str, Any] = {}
    for name, bucket in (("small", buckets[0]), ("large", buckets[-1])):
        out[f"{name}_flows"] = bucket["flows"]
        for stat in ("fct_avg_us", "fct_p99_us"):
            out[f"{name}_{stat}"] = bucket[stat]
    return out


#: A private entry of a row from `_run_row`: the key paths of its spec fields, in order.
_SPEC_KEYS = "__spec_keys__"


def _flatten_keys(row: dict[str, Any]) -> list[str]:
    """The spec key paths of a row from `_run_row`."""
    return row[_SPEC_KEYS]


def _shorthands(spec: dict[str, Any]) -> dict[str, Any]:
    """`scheme`, `workload`, `load`, `load_of` (of the first generator with a load), `seed`."""
    generator = next((t for t in spec.get("traffic", []) if "load" in t), {})
    return {
        "scheme": spec.get("lb", {}).get("scheme"),
        "workload": generator.get("cdf"),
        "load": generator.get("load"),
        "load_of": generator.get("load_of"),
        "seed": spec.get("seed"),
    }


def _spec_fields(spec: dict[str, Any]) -> dict[str, Any]:
    """The spec columns of a run: `_flatten` of its resolved spec, with `transport.kind`.

    The resolved spec leaves out the default `[transport]` (every flow RoCE), so that a RoCE
    run's point key is the same whether or not its spec names the transport; the runs table
    names it, so that a sweep over transports has `transport.kind` on every row.
    """
    fields = _flatten(spec)
    fields.setdefault("transport.kind", "roce")
    return fields


def _flatten(spec: dict[str, Any]) -> dict[str, Any]:
    """Every scalar of a spec by key path; arrays of scalars as JSON text; empty arrays skipped."""
    out: dict[str, Any] = {}

    def walk(node: Any, path: str) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                walk(value, f"{path}.{key}" if path else key)
        elif isinstance(node, list):
            if node and all(isinstance(v, dict) for v in node):
                for i, value in enumerate(node):
                    walk(value, f"{path}[{i}]")
            elif node:
                out[path] = json.dumps(node)
        else:
            out[path] = node

    walk(spec, "")
    return out


def _rows_to_arrow(rows: list[dict[str, Any]]) -> pa.Table:
    """The rows as an Arrow table; a column whose values mix types becomes text."""
    columns: dict[str, None] = {}
    for row in rows:
        columns.update(dict.fromkeys(k for k in row if k != _SPEC_KEYS))
    arrays = {}
    for name in columns:
        values = [row.get(name) for row in rows]
        try:
            arrays[name] = pa.array(values)
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            arrays[name] = pa.array([None if v is None else str(v) for v in values])
    if not arrays:  # no finished run yet: the columns every row has, empty
        point = {"key": pa.string(), "sweep": pa.string(), "point_index": pa.int64()}
        point |= {"label": pa.string(), "scheme": pa.string(), "load": pa.float64()}
        point |= {"seed": pa.int64(), "name": pa.string()}
        return pa.table({name: pa.array([], kind) for name, kind in point.items()})
    return pa.table(arrays)
