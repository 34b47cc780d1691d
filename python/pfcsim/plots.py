"""The standard figures of a results store, drawn with matplotlib (PNG and SVG).

Each figure compares series (by default one per load-balancing scheme) over the store's runs;
values of runs that differ only by seed are pooled (CDF) or averaged (everything else):

* `fct-cdf`: CDF of the flow completion time, one panel per value of the x field;
* `vs-load`: average and 99th-percentile FCT (or slowdown) against the x field (the load);
* `buckets`: average and 99th-percentile slowdown by flow-size bucket, one panel per x value;
* `pause`: PFC pause frames sent and total time ports spent paused, against the x field;
* `lines`: any `runs` column (`y`) against the x field, one panel per value of `panels`;
* `bars`: any `runs` column per value of the x field (categories), bars grouped by series,
  one panel per value of `panels`.

The figures of a run's monitors (`RUN_KINDS`, docs/reference/metrics.md) draw one panel per run (at
most `MAX_PANELS`; narrow them with `where`), titled by its series, time on the x axis:

* `queue`: the bytes charged to each watched (switch ingress port, priority), as
  `node<-peer`, with each switch's PFC XOFF level dashed (`y = "egress_bytes"`: the egress
  queues, `node->peer`);
* `pfc-timeline`: the intervals during which each link direction was paused by PFC (a Gantt
  chart of the `MAX_SERIES` paused longest, from the frames received; from the frames sent
  for the links whose paused end the monitor did not watch);
* `rate`: each watched flow's sending rate (`y = "acked_bytes"`: bytes acknowledged);
* `util`: each watched port's utilization per interval (`y = "tx_bytes"`: bytes sent).

`normalize = "min"` (or `"max"`) divides each series' values in a panel by that series'
smallest (largest) value there: "normalized to the best parameter" for a lower-is-better
metric such as the FCT. Values of x that are pfcsim quantities with units (`"10Gbps"`, `"2us"`,
`"64KB"`) are ordered by magnitude, not as text.

The series may combine several fields (`("lb.scheme", "lb.inner")` names a series
`rlb+drill`; fields a run does not have are left out of its name).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pfcsim import _core

if TYPE_CHECKING:
    from pathlib import Path

    import pandas as pd
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from pfcsim.results import Results
    from pfcsim.store import Store

#: Every figure kind, with what it shows.
KINDS = {
    "fct-cdf": "CDF of flow completion time per scheme",
    "vs-load": "average and p99 FCT (or slowdown) against load per scheme",
    "buckets": "average and p99 slowdown by flow-size bucket per scheme",
    "pause": "PFC pauses sent and port time paused against load per scheme",
    "lines": "any runs column (--y) against --x per scheme, panels by --panels",
    "bars": "any runs column (--y) per --x category, bars per scheme, panels by --panels",
    "queue": "a run's queue monitor: bytes per switch ingress (--y egress_bytes: egress) and XOFF",
    "pfc-timeline": "a run's pfc monitor: paused intervals per link direction",
    "rate": "a run's rate monitor: each flow's sending rate (--y acked_bytes: bytes acked)",
    "util": "a run's link_util monitor: each port's utilization (--y tx_bytes: bytes sent)",
}

#: The kinds drawn from a run's monitors: kind -> (monitor table, default y, allowed y).
RUN_KINDS = {
    "queue": ("queue", "ingress_bytes", ("ingress_bytes", "egress_bytes")),
    "pfc-timeline": ("pfc", None, ()),
    "rate": ("rate", "rate_bps", ("rate_bps", "acked_bytes")),
    "util": ("link_util", "utilization", ("utilization", "tx_bytes")),
}

#: The queue monitor's `xoff_bytes` under a PFC model without a per-ingress threshold (the
#: egress model: u64::MAX, docs/reference/metrics.md): no XOFF line is drawn for it.
NO_XOFF = 2**64 - 1

#: The figures `pfcsim plot` draws for a store when no kind is named (and the report's).
STANDARD_KINDS = ("fct-cdf", "vs-load", "buckets", "pause")

#: Most series (or timeline rows) drawn in one panel: the largest ones are kept.
MAX_SERIES = 12

#: Most panels drawn side by side; beyond that, narrow the runs with `where`.
MAX_PANELS = 6

#: How `normalize` scales each series (within a panel): divide by its min or its max.
NORMALIZE = ("min", "max")

#: Axis labels of the fields and metrics the figures use.
LABELS = {
    "topology.fabric_link.rate": "leaf-spine link rate",
    "load": "offered load",
    "fct": "FCT (µs)",
    "slowdown": "slowdown (FCT / ideal FCT)",
    "pfc_pauses": "PFC pause frames sent",
    "pfc_paused_time_us": "port time paused by PFC (ms, all ports)",
    "pfc_pause_rate": "PFC pause rate (paused share of port time)",
    "pfc_pauses_per_port_s": "PFC pause frames per port per second",
    "ooo_ratio": "ratio of out-of-order packets",
    "ood_p50": "median out-of-order degree (packets)",
    "ood_p99": "99th-percentile out-of-order degree (packets)",
    "ood_max": "largest out-of-order degree (packets)",
}


@dataclass(frozen=True)
class FigureRequest:
    """What to draw: the kind, the series and x fields, the metric and a run filter."""

    kind: str
    #: Field(s) whose values make the series (lines or bars); several are joined with `+`.
    series: str | tuple[str, ...] = "scheme"
    #: Field on the x axis (`vs-load`, `pause`, `lines`, `bars`) or that splits panels
    #: (`fct-cdf`, `buckets`).
    x: str = "load"
    #: `fct` or `slowdown`, for `vs-load`.
    metric: str = "fct"
    #: Only runs whose fields equal these values (as text).
    where: tuple[tuple[str, str], ...] = ()
    #: The `runs` column drawn by `lines` and `bars`.
    y: str | None = None
    #: Field whose values split `lines` and `bars` into panels (None: one panel).
    panels: str | None = None
    #: Figure title, y-axis label, log-scale y (`lines`, `bars`).
    title: str | None = None
    ylabel: str | None = None
    #: x-axis label of `lines` and `bars` (default: the x field's label).
    xlabel: str | None = None
    logy: bool = False
    #: File name stem (default: the kind).
    name: str | None = None
    #: `vs-load`, `pause`, `lines`, `bars`: divide each series' values in a panel by their
    #: `"min"` or `"max"` there (None: raw values).
    normalize: str | None = None


def draw(store: Store, request: FigureRequest, out_dir: Path) -> list[Path]:
    """Draws one figure of `store` into `out_dir` as `<kind>.png` and `<kind>.svg`."""
    return _save_and_close(make_figure(store, request), request, out_dir)


def make_figure(store: Store, request: FigureRequest) -> Figure:
    """One figure of `store` (matplotlib), as `draw` saves it; close it with `plt.close`."""
    import matplotlib

    matplotlib.use("Agg")

    if request.kind not in KINDS:
        kinds = ", ".join(KINDS)
        raise ValueError(f"unknown figure kind {request.kind!r}; expected one of {kinds}")
    if request.metric not in ("fct", "slowdown"):
        raise ValueError(f"unknown metric {request.metric!r}; expected fct or slowdown")
    if request.kind in RUN_KINDS:
        _check_run_request(request)
        runs = _selected_runs(store, request, fields=_series_fields(request))
        if len(runs) > MAX_PANELS:
            raise ValueError(
                f"{len(runs)} runs would make too many panels; narrow them with --where FIELD=VALUE"
            )
        return run_figure(
            [
                (name, store.results(key))
                for name, key in zip(runs[SERIES], runs["key"], strict=True)
            ],
            request,
        )
    if request.kind in ("lines", "bars") and request.y is None:
        raise ValueError(f"a {request.kind} figure needs the runs column to draw (y)")
    if request.normalize is not None:
        if request.normalize not in NORMALIZE:
            raise ValueError(
                f"unknown normalize {request.normalize!r}; expected one of {', '.join(NORMALIZE)}"
            )
        if request.kind in ("fct-cdf", "buckets"):
            raise ValueError(
                f"a {request.kind} figure cannot be normalized; use it with vs-load, pause, "
                "lines or bars"
            )
    runs = _selected_runs(store, request)
    drawer = {
        "fct-cdf": _fct_cdf,
        "vs-load": _vs_load,
        "buckets": _buckets,
        "pause": _pause,
        "lines": _generic,
        "bars": _generic,
    }[request.kind]
    drawn = drawer(store, runs, request)
    if request.title is not None:
        drawn.suptitle(request.title)
    return drawn


def save(figure: Figure, request: FigureRequest, out_dir: Path) -> list[Path]:
    """Writes `figure` as `<name or kind>.png` and `.svg` into `out_dir`; leaves it open."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for suffix in ("png", "svg"):
        path = out_dir / f"{request.name or request.kind}.{suffix}"
        figure.savefig(path, dpi=150, bbox_inches="tight")
        written.append(path)
    return written


def _save_and_close(figure: Figure, request: FigureRequest, out_dir: Path) -> list[Path]:
    """`save`, then closes the figure."""
    import matplotlib.pyplot as plt

    try:
        return save(figure, request, out_dir)
    finally:
        plt.close(figure)


def _selected_runs(
    store: Store, request: FigureRequest, fields: list[str] | None = None
) -> pd.DataFrame:
    """The runs matching `request.where`, with `fields` checked (default: series, x, y, panels)."""
    runs = store.runs
    if runs.empty:
        raise ValueError(f"{store.path} has no finished run yet")
    if fields is None:
        fields = [*_series_fields(request), request.x, request.y, request.panels]
    for field in fields:
        if field is not None and field not in runs.columns:
            raise ValueError(f"no field {field!r} in the runs table of {store.path}")
    for field, value in request.where:
        if field not in runs.columns:
            raise ValueError(f"--where {field}={value}: no field {field!r} in the runs table")
        runs = runs[runs[field].astype(str) == value]
    if runs.empty:
        raise ValueError("no run matches the --where filters")
    return runs.assign(**{SERIES: series_names(runs, _series_fields(request))})


#: The column of the selected runs that names each run's series.
SERIES = "__series__"


def _series_fields(request: FigureRequest) -> list[str]:
    """The fields that name a series."""
    return [request.series] if isinstance(request.series, str) else list(request.series)


def series_names(runs: pd.DataFrame, fields: list[str]) -> list[str]:
    """Each run's series name: its values of `fields` joined by `+`, missing ones left out.

    A boolean value is written `<last part of the field>=<true|false>` (`recirculation=false`
    for `lb.recirculation`), since a bare `True` would not say what is true.
    """
    import pandas as pd

    names = []
    for _, run in runs[fields].iterrows():
        parts = [
            _series_part(field, value)
            for field, value in zip(fields, run.tolist(), strict=True)
            if not pd.isna(value)
        ]
        names.append("+".join(parts) or "-")
    return names


def _series_part(field: str, value: Any) -> str:
    """One field's part of a series name."""
    import numpy as np

    if isinstance(value, bool | np.bool_):
        return f"{field.rsplit('.', 1)[-1]}={str(bool(value)).lower()}"
    return str(value)


def _series_values(runs: pd.DataFrame, field: str) -> list[Any]:
    """The distinct values of `field`, in the order they first appear."""
    return list(dict.fromkeys(runs[field].tolist()))


def _panel_values(runs: pd.DataFrame, field: str) -> list[Any]:
    """The distinct values of `field` that make panels, sorted; at most `MAX_PANELS`."""
    values = sorted(set(runs[field].tolist()), key=_sort_key)
    if len(values) > MAX_PANELS:
        raise ValueError(
            f"{len(values)} values of {field!r} would make too many panels; "
            f"narrow the runs with --where {field}=VALUE"
        )
    return values


def _sort_key(value: Any) -> tuple[int, Any]:
    """Numbers first in numeric order, then quantities with units, then anything else as text.

    Quantities (`"10Gbps"`, `"2us"`) are ordered by kind, then by magnitude within a kind.
    """
    if isinstance(value, int | float) and not (isinstance(value, float) and math.isnan(value)):
        return (0, value)
    quantity = _core.quantity(value) if isinstance(value, str) else None
    if quantity is not None:
        return (1, quantity)
    return (2, str(value))


def _panels(count: int, *, sharey: bool = False) -> tuple[Figure, list[Axes]]:
    """A figure with `count` panels side by side (with one y scale if `sharey`)."""
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(
        1, count, figsize=(4.8 * count, 3.6), squeeze=False, sharey=sharey, layout="constrained"
    )
    return figure, list(axes[0])


def _fct_cdf(store: Store, runs: pd.DataFrame, request: FigureRequest) -> Figure:
    """CDF of the FCT of all finished flows, one line per series, one panel per x value."""
    import numpy as np

    panels = _panel_values(runs, request.x)
    figure, axes = _panels(len(panels))
    for ax, value in zip(axes, panels, strict=True):
        chosen = runs[runs[request.x] == value]
        for series in _series_values(chosen, SERIES):
            keys = chosen[chosen[SERIES] == series]["key"].tolist()
            fct = store.sql(
                "SELECT fct_us FROM flows WHERE run_key IN ? AND fct_us IS NOT NULL", [keys]
            )["fct_us"].to_numpy()
            if fct.size == 0:
                continue
            fct = np.sort(fct)
            ax.step(fct, np.arange(1, fct.size + 1) / fct.size, where="post", label=str(series))
        ax.set_xscale("log")
        ax.set_xlabel(LABELS["fct"])
        ax.set_ylabel("fraction of flows")
        ax.set_ylim(0, 1.01)
        ax.set_title(f"{_label(request.x, runs)} = {value}")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(title=_series_title(request), fontsize="small")
    figure.suptitle("Flow completion time (finished flows)")
    return figure


def _vs_load(_store: Store, runs: pd.DataFrame, request: FigureRequest) -> Figure:
    """Average and p99 of FCT or slowdown against x, one line per series (mean over seeds)."""
    columns = (
        ("fct_avg_us", "fct_p99_us")
        if request.metric == "fct"
        else ("slowdown_avg", "slowdown_p99")
    )
    figure, axes = _panels(2)
    for ax, column, stat in zip(axes, columns, ("average", "99th percentile"), strict=True):
        _lines(ax, runs, request, column)
        scaled = f" / its {request.normalize} (per series)" if request.normalize else ""
        ax.set_ylabel(f"{stat} {_label(request.metric)}{scaled}")
        ax.set_title(f"{stat} {request.metric.upper() if request.metric == 'fct' else 'slowdown'}")
    return figure


def _pause(_store: Store, runs: pd.DataFrame, request: FigureRequest) -> Figure:
    """PFC pause frames and paused port time against x, one line per series."""
    figure, axes = _panels(2)
    runs = runs.assign(pfc_paused_time_ms=runs["pfc_paused_time_us"] / 1e3)
    for ax, column, label in (
        (axes[0], "pfc_pauses", LABELS["pfc_pauses"]),
        (axes[1], "pfc_paused_time_ms", LABELS["pfc_paused_time_us"]),
    ):
        _lines(ax, runs, request, column)
        ax.set_ylabel(label + (f" / its {request.normalize}" if request.normalize else ""))
    axes[0].set_title("PFC pause frames")
    axes[1].set_title("time paused by PFC")
    return figure


def _lines(ax: Axes, runs: pd.DataFrame, request: FigureRequest, column: str) -> None:
    """One line per series of `column` (mean over runs with equal x) against x."""
    for series in _series_values(runs, SERIES):
        points = (
            runs[runs[SERIES] == series]
            .groupby(request.x)[column]
            .mean()
            .sort_index(key=lambda idx: idx.map(_sort_key))
        )
        points = normalized(points, request.normalize)
        ax.plot(points.index, points.to_numpy(), marker="o", label=str(series))
    if not all(_sort_key(v)[0] == 0 for v in runs[request.x]):
        # Text categories (names, file names) are long: slant them so they do not overlap.
        ax.tick_params(axis="x", labelrotation=30)
    ax.set_xlabel(request.xlabel or _label(request.x, runs))
    ax.grid(True, alpha=0.3)
    ax.legend(title=_series_title(request), fontsize="small")


def _buckets(store: Store, runs: pd.DataFrame, request: FigureRequest) -> Figure:
    """Average and p99 slowdown by flow-size bucket, one line per series, panels by x."""
    from matplotlib.ticker import LogLocator, NullFormatter, ScalarFormatter

    panels = _panel_values(runs, request.x)
    figure, axes = _panels(len(panels), sharey=True)
    for ax, value in zip(axes, panels, strict=True):
        chosen = runs[runs[request.x] == value]
        for series in _series_values(chosen, SERIES):
            keys = chosen[chosen[SERIES] == series]["key"].tolist()
            table = store.sql(
                "SELECT bucket, avg(slowdown_avg) AS avg, avg(slowdown_p99) AS p99, "
                "min(rowid) AS position FROM summary WHERE run_key IN ? AND bucket <> 'all' "
                "GROUP BY bucket ORDER BY position",
                [keys],
            )
            (line,) = ax.plot(table["bucket"], table["p99"], marker="o", label=f"{series} p99")
            ax.plot(
                table["bucket"],
                table["avg"],
                marker="s",
                linestyle="--",
                color=line.get_color(),
                label=f"{series} avg",
            )
        ax.set_yscale("log")
        ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        ax.yaxis.set_major_formatter(ScalarFormatter())
        ax.yaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel("flow size")
        ax.set_ylabel(LABELS["slowdown"])
        ax.set_title(f"{_label(request.x, runs)} = {value}")
        ax.tick_params(axis="x", labelrotation=30)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize="x-small", ncol=2)
    figure.suptitle("Slowdown by flow size (average dashed, p99 solid)")
    return figure


def _generic(_store: Store, runs: pd.DataFrame, request: FigureRequest) -> Figure:
    """`lines` or `bars` of column `y` against `x`, one panel per value of `panels`."""
    import numpy as np

    assert request.y is not None, "checked in draw"
    panels = _panel_values(runs, request.panels) if request.panels else [None]
    figure, axes = _panels(len(panels), sharey=False)
    # Bars: the same categories and series, in the same order, in every panel.
    categories = _categories(runs, request.x)
    names = _series_values(runs, SERIES)
    for ax, value in zip(axes, panels, strict=True):
        chosen = runs if value is None else runs[runs[request.panels] == value]
        if request.kind == "lines":
            _lines(ax, chosen, request, request.y)
        else:
            # Series named by the x field itself: one full-width bar per category.
            alone = _series_fields(request) == [request.x]
            width = 0.8 if alone else 0.8 / max(len(names), 1)
            colors = _bar_colors(len(names))
            for i, series in enumerate(names):
                means = chosen[chosen[SERIES] == series].groupby(request.x)[request.y].mean()
                means = normalized(means, request.normalize)
                heights = [means.get(c, np.nan) for c in categories]
                shift = 0 if alone else (i - (len(names) - 1) / 2) * width
                ax.bar(
                    np.arange(len(categories)) + shift,
                    heights,
                    width=width,
                    label=series,
                    color=colors[i],
                )
            ax.set_xticks(np.arange(len(categories)), [str(c) for c in categories])
            if not all(_sort_key(c)[0] == 0 for c in categories):
                # Text categories (scheme names) are long: slant them, each ending under its
                # bar, so that they do not overlap.
                ax.tick_params(axis="x", labelrotation=30)
                for label in ax.get_xticklabels():
                    label.set_horizontalalignment("right")
                    label.set_rotation_mode("anchor")
            ax.set_xlabel(request.xlabel or _label(request.x, runs))
            ax.grid(True, axis="y", alpha=0.3)
            if len(names) <= BARS_LEGEND_INSIDE:
                ax.legend(title=_series_title(request), fontsize="small")
        ylabel = request.ylabel or _label(request.y)
        if request.normalize is not None and request.ylabel is None:
            ylabel = f"{ylabel} / its {request.normalize} (per series)"
        ax.set_ylabel(ylabel)
        if request.logy:
            ax.set_yscale("log")
        if value is not None:
            ax.set_title(f"{_label(request.panels, runs)} = {value}")
    if request.kind == "bars" and len(names) > BARS_LEGEND_INSIDE:
        # Many series: one legend beside the panels, not over their bars.
        width, height = figure.get_size_inches()
        figure.set_size_inches(width + 3.2, height)
        figure.legend(title=_series_title(request), fontsize="small", loc="outside right center")
    return figure


#: The most bar series whose legend is drawn inside the panel.
BARS_LEGEND_INSIDE = 4


def _bar_colors(count: int) -> list[Any]:
    """A colour per bar series: the ten default colours, or twenty past ten series."""
    import matplotlib

    if count <= 10:
        return [f"C{i}" for i in range(count)]
    palette = matplotlib.colormaps["tab20"]
    return [palette(i % 20) for i in range(count)]


def normalized(values: pd.Series, how: str | None) -> pd.Series:
    """`values` divided by their `how` (`"min"` or `"max"`, NaN ignored); unchanged for None."""
    if how is None:
        return values
    scale = getattr(values, how)()
    return values / scale


def _categories(runs: pd.DataFrame, field: str) -> list[Any]:
    """The values of `field` as categories, sorted if they compare, else as they come.

    They compare if all are numbers, or all quantities of one kind (all rates, say).
    """
    values = _series_values(runs, field)
    keys = [_sort_key(v) for v in values]
    if all(k[0] == 0 for k in keys) or (
        all(k[0] == 1 for k in keys) and len({k[1][0] for k in keys}) == 1
    ):
        return sorted(values, key=_sort_key)
    return values


def _series_title(request: FigureRequest) -> str:
    """The legend title: the series field(s)."""
    return " + ".join(_series_fields(request))


def _label(field: str, runs: pd.DataFrame | None = None) -> str:
    """The axis label of a field or metric; for the load, what it is a fraction of."""
    if field == "load" and runs is not None and "load_of" in runs.columns:
        loads_of = set(runs["load_of"].dropna())
        if len(loads_of) == 1:
            return f"offered load (of {loads_of.pop()} capacity)"
    return LABELS.get(field, field)


def draw_run(results: Results, request: FigureRequest, out_dir: Path) -> list[Path]:
    """Draws a figure of one run's monitors into `out_dir` (`<kind>.png` and `.svg`)."""
    _check_run_request(request)
    return _save_and_close(run_figure([(None, results)], request), request, out_dir)


def _check_run_request(request: FigureRequest) -> None:
    """Refuses a monitor figure request with a `y` its kind does not draw."""
    allowed = RUN_KINDS[request.kind][2]
    if request.y is not None and request.y not in allowed:
        valid = ", ".join(allowed) or "none"
        raise ValueError(f"a {request.kind} figure draws y = {valid}, not {request.y!r}")


def run_figure(runs: list[tuple[str | None, Results]], request: FigureRequest) -> Figure:
    """A figure of the monitors of `runs` (name, results): one panel per run, stacked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    table, default_y, _ = RUN_KINDS[request.kind]
    _check_run_request(request)
    y = request.y or default_y
    figure, axes = plt.subplots(
        len(runs), 1, figsize=(9, 3.4 * len(runs)), squeeze=False, layout="constrained"
    )
    for ax, (name, results) in zip(axes[:, 0], runs, strict=True):
        rows = results.monitor(table)
        if rows is None:
            where = f" {results.path}" if results.path is not None else ""
            raise ValueError(
                f"the run{where} has no {table} monitor; add a [[monitor]] with kind = "
                f'"{table}" to its spec (docs/reference/spec.md)'
            )
        drawer = {
            "queue": _queue_panel,
            "pfc-timeline": _pfc_panel,
            "rate": _rate_panel,
            "util": _util_panel,
        }[request.kind]
        drawer(ax, rows, results, y)
        ax.set_xlabel("time (µs)")
        ax.grid(True, alpha=0.3)
        if name is not None:
            ax.set_title(name)
    if request.title is not None:
        figure.suptitle(request.title)
    return figure


def _largest(rows: pd.DataFrame, keys: list[str], value: str) -> list[tuple[Any, ...]]:
    """The `MAX_SERIES` groups of `rows` by `keys` of largest peak `value`, in key order."""
    peaks = rows.groupby(keys)[value].max().sort_values(ascending=False)
    groups = peaks.index[:MAX_SERIES].tolist()
    return sorted(g if isinstance(g, tuple) else (g,) for g in groups)


def _peers(results: Results) -> dict[tuple[int, int], int]:
    """(node, port) -> the node at the far end of the port's link."""
    ports = results.ports
    return {
        (int(n), int(p)): int(q)
        for n, p, q in zip(ports["node"], ports["port"], ports["peer"], strict=True)
    }


def _queue_panel(ax: Axes, rows: pd.DataFrame, results: Results, y: str) -> None:
    """Bytes per (port, priority) against time, with each switch's XOFF level dashed."""
    peers = _peers(results)
    arrow = "<-" if y == "ingress_bytes" else "->"
    keys = ["node", "port", "priority"]
    priorities = rows["priority"].nunique()
    for node, port, priority in _largest(rows, keys, y):
        series = rows[
            (rows["node"] == node) & (rows["port"] == port) & (rows["priority"] == priority)
        ]
        label = f"{node}{arrow}{peers[(node, port)]}" + (f" p{priority}" if priorities > 1 else "")
        ax.step(series["time_ps"] / 1e6, series[y] / 1e3, where="post", label=label)
    if y == "ingress_bytes":
        for node in sorted(rows["node"].unique()):
            xoff = rows[rows["node"] == node].drop_duplicates("time_ps")
            if (xoff["xoff_bytes"] == NO_XOFF).all():
                continue  # a PFC model without a per-ingress threshold (egress)
            ax.step(
                xoff["time_ps"] / 1e6,
                xoff["xoff_bytes"] / 1e3,
                where="post",
                color="black",
                linestyle="--",
                linewidth=1,
                label=f"XOFF at {node}",
            )
    what = "charged to the ingress" if y == "ingress_bytes" else "in the egress queue"
    ax.set_ylabel(f"KB {what}")
    ax.legend(fontsize="x-small", ncol=2, loc="upper right")


def _pfc_panel(ax: Axes, rows: pd.DataFrame, results: Results, _y: str | None) -> None:
    """The intervals each link direction was paused (any priority), as horizontal bars."""
    import pandas as pd

    # A received frame stops the receiving port's egress; a frame sent out of a port stops the
    # far end's egress, which counts from the sent frames only where no received one says so
    # (the monitor did not watch the far end: a host, or a switch left out).
    received = rows[rows["direction"] == "received"]
    received = received.assign(source=received["node"], target=received["peer"])
    sent = rows[rows["direction"] == "sent"]
    sent = sent.assign(source=sent["peer"], target=sent["node"])
    seen = set(zip(received["source"], received["target"], strict=True))
    unseen = [(s, t) not in seen for s, t in zip(sent["source"], sent["target"], strict=True)]
    links = pd.concat([received, sent[unseen]])
    end = results.stats["end_ps"]
    intervals: dict[tuple[int, int], list[tuple[float, float]]] = {}
    open_since: dict[tuple[int, int, int], int] = {}
    for row in links.sort_values("time_ps", kind="stable").itertuples():
        link = (int(row.source), int(row.target))
        slot = (*link, int(row.priority))
        if row.frame == "pause":
            open_since.setdefault(slot, int(row.time_ps))
        elif slot in open_since:
            start = open_since.pop(slot)
            intervals.setdefault(link, []).append((start, int(row.time_ps) - start))
    for (source, target, _), start in open_since.items():
        intervals.setdefault((source, target), []).append((start, end - start))
    total = {link: sum(d for _, d in spans) for link, spans in intervals.items()}
    shown = sorted(sorted(total, key=total.__getitem__, reverse=True)[:MAX_SERIES])
    for i, link in enumerate(shown):
        spans = [(start / 1e6, max(d / 1e6, 1e-3)) for start, d in intervals[link]]
        ax.broken_barh(spans, (i - 0.4, 0.8), color=f"C{i % 10}")
    ax.set_yticks(range(len(shown)), [f"{s}->{t}" for s, t in shown])
    ax.set_ylim(-0.6, max(len(shown), 1) - 0.4)
    ax.set_xlim(0, end / 1e6)
    hidden = len(total) - len(shown)
    more = f" ({hidden} more not shown)" if hidden > 0 else ""
    ax.set_ylabel(f"link paused{more}")


def _rate_panel(ax: Axes, rows: pd.DataFrame, _results: Results, y: str) -> None:
    """Each flow's rate (Gbps) or bytes acknowledged (MB) against time."""
    scale = 1e9 if y == "rate_bps" else 1e6
    for (flow,) in _largest(rows, ["flow_id"], y):
        series = rows[rows["flow_id"] == flow]
        ax.step(series["time_ps"] / 1e6, series[y] / scale, where="post", label=f"flow {flow}")
    ax.set_ylabel("sending rate (Gbps)" if y == "rate_bps" else "bytes acknowledged (MB)")
    ax.legend(fontsize="x-small", ncol=2)


def _util_panel(ax: Axes, rows: pd.DataFrame, results: Results, y: str) -> None:
    """Each port's utilization (or bytes sent) per interval, at the interval's end."""
    peers = _peers(results)
    for node, port in _largest(rows, ["node", "port"], y):
        series = rows[(rows["node"] == node) & (rows["port"] == port)]
        values = series[y] if y == "utilization" else series[y] / 1e3
        ax.step(
            series["time_ps"] / 1e6, values, where="pre", label=f"{node}->{peers[(node, port)]}"
        )
    ax.set_ylabel("utilization" if y == "utilization" else "KB sent per interval")
    ax.legend(fontsize="x-small", ncol=2)
