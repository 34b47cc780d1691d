"""One self-contained HTML page per results store: `pfcsim report` and `Store.report`.

The page needs nothing from the network: its scripts, styles and images are inside it. It
shows, in order:

* for a reproduction (a store made by `pfcsim reproduce`, which keeps `reproduction.json`):
  the experiment (title, source, notes, whether it is the quick variant), its claims next to
  our numbers (paper / ours / ours over paper / note) and its figures;
* what was run: the store, its runs and failed points, the swept fields with their values;
* the standard figures of `pfcsim plot` (`plots.STANDARD_KINDS`): series by scheme (and the inner
  scheme of a wrapper), the load on the x axis (or the first other swept field if the runs
  have no load), one set of figures per combination of the other swept fields when there are
  at most `MAX_GROUPS` of them (more are pooled, as `pfcsim plot` does, and the caption says
  so); a figure that cannot be drawn for the store is listed with the reason;
* the figures of the runs' monitors (`pfcsim.plots.RUN_KINDS`), one panel per run, at most
  `pfcsim.plots.MAX_PANELS` runs per kind;
* a table of every run (its key, swept fields, main metrics, fingerprint, the pfcsim version
  that made it, its wall time), which sorts by any column (click its header) and filters
  (words that every shown row contains, or `column=text`);
* the resolved base spec: the fields every run has with the same value, every default written
  out, and the sweep specs as given.

The figures are drawn by `pfcsim.plots` and made interactive by `pfcsim.interactive` (Bokeh:
zoom, hover values, series toggled from the legend); a figure it cannot convert is embedded
as its PNG image. Bokeh's script (about 1.3 MB) is inlined once per page, only if the page
has an interactive figure. Of a reproduction, only the runs of the experiment's current sweep
are shown, as `pfcsim reproduce` uses them.
"""

from __future__ import annotations

import base64
import dataclasses
import html
import io
import itertools
import json
import math
import re
import tomllib
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pfcsim import plots
from pfcsim._spec import dict_to_toml

if TYPE_CHECKING:
    import pandas as pd
    from bokeh.models import LayoutDOM
    from matplotlib.figure import Figure

    from pfcsim.reproduce import Experiment
    from pfcsim.store import Store

#: The file in a store that `pfcsim reproduce` writes: the experiment and its claims.
REPRODUCTION_FILE = "reproduction.json"
#: The report's default file name, in the store.
REPORT_FILE = "report.html"
#: Most combinations of the other swept fields drawn as separate sets of standard figures.
MAX_GROUPS = 4
#: Metrics shown in the runs table (those the runs have), after the swept fields.
METRICS = (
    "flows_finished",
    "flows_total",
    "fct_avg_us",
    "fct_p99_us",
    "slowdown_avg",
    "slowdown_p99",
    "pfc_pauses",
    "pfc_paused_time_us",
    "pfc_pause_rate",
    "ooo_ratio",
    "ood_p99",
    "retransmitted_bytes",
)
#: What made each run, shown last in the runs table.
RUN_INFO = (
    "incomplete",
    "fingerprint",
    "pfcsim_version",
    "wall_seconds",
    "sim_time_ms",
    "events",
    "finished_at",
)


@dataclass
class _Figure:
    """One figure of the page: interactive, an image, or the reason it is missing."""

    caption: str
    layout: LayoutDOM | None = None
    png: bytes | None = None
    missing: str | None = None


def save_reproduction(
    store_dir: Path,
    experiment: Experiment,
    *,
    quick: bool,
    keys: list[str],
    figures: list[plots.FigureRequest],
    claims: list[dict[str, Any]],
) -> None:
    """Keeps what `pfcsim reproduce` made in `store_dir/reproduction.json`, for the report.

    The experiment's name, title, source and notes, the quick note (None for a full run), the
    keys of the current sweep's points, the figures drawn (plot requests) and the claims (rows
    of `reproduce.evaluate`).
    """
    record = {
        "experiment": experiment.name,
        "title": experiment.title,
        "source": experiment.source,
        "notes": experiment.notes,
        "quick": experiment.quick.get("note", "reduced sweep") if quick else None,
        "keys": sorted(keys),
        "figures": [dataclasses.asdict(f) for f in figures],
        "claims": claims,
    }
    text = json.dumps(record, indent=1, default=str)
    (store_dir / REPRODUCTION_FILE).write_text(text + "\n")


def write_report(
    store: Store, out: Path | None = None, *, drawn: list[Figure] | None = None
) -> Path:
    """Writes the report of `store` to `out` (default `<store>/report.html`); returns the path.

    A store view (`Store.only`) shows its runs; otherwise a reproduction's store shows the
    runs of its current sweep, and any other store all its runs. `drawn`: the experiment's
    figures already drawn (by `pfcsim reproduce`, in the order of its `reproduction.json`),
    used (and closed) instead of drawing them again.
    """
    reproduction = _load_reproduction(store.path)
    if store.keys is None and reproduction is not None:
        store = store.only(reproduction["keys"])
    runs = store.runs
    if runs.empty:
        raise ValueError(f"{store.path} has no finished run yet: nothing to report")
    axes = store.axes()
    figures: list[tuple[str, list[_Figure]]] = []
    if reproduction is not None:
        requests = [_request(r) for r in reproduction["figures"]]
        captions = [r.title or r.name or r.kind for r in requests]
        if drawn is None:
            made = [_store_figure(store, r, c) for r, c in zip(requests, captions, strict=True)]
        else:
            made = [_converted(f, c) for f, c in zip(drawn, captions, strict=True)]
        figures.append(("The experiment's figures", made))
    figures.append(("Standard figures", _standard_figures(store, runs, axes)))
    monitors = _monitor_figures(store, runs)
    if monitors:
        figures.append(("Monitors", monitors))
    extra = _experiment_columns(reproduction)
    sections = [
        *_reproduction_sections(reproduction),
        _runs_summary(store, runs, axes),
        *(_figure_section(title, items) for title, items in figures),
        _runs_table(runs, axes, extra),
        _spec_section(store, runs),
    ]
    title = reproduction["title"] if reproduction else f"Results store {store.path.name}"
    page = _page(title, store, len(runs), sections, [f for _, items in figures for f in items])
    target = out if out is not None else store.path / REPORT_FILE
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(page, encoding="utf-8")
    return target


def _load_reproduction(store_dir: Path) -> dict[str, Any] | None:
    """The store's `reproduction.json`, or None for a store not made by `pfcsim reproduce`."""
    path = store_dir / REPRODUCTION_FILE
    if not path.is_file():
        return None
    return json.loads(path.read_text())


def _request(data: dict[str, Any]) -> plots.FigureRequest:
    """A plot request from its JSON form (lists back to tuples)."""
    options = dict(data)
    if isinstance(options.get("series"), list):
        options["series"] = tuple(options["series"])
    options["where"] = tuple(tuple(pair) for pair in options.get("where", ()))
    return plots.FigureRequest(**options)


# --- figures ---------------------------------------------------------------------------------


def _store_figure(store: Store, request: plots.FigureRequest, caption: str) -> _Figure:
    """A figure of the store, or why it cannot be drawn."""
    try:
        figure = plots.make_figure(store, request)
    except ValueError as e:
        return _Figure(caption, missing=str(e))
    return _converted(figure, caption)


def _converted(figure: Figure, caption: str) -> _Figure:
    """The interactive version of a matplotlib figure, else its PNG; closes the figure."""
    import matplotlib.pyplot as plt

    from pfcsim import interactive

    layout = interactive.to_bokeh(figure)
    if layout is not None:
        plt.close(figure)
        return _Figure(caption, layout=layout)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=110, bbox_inches="tight")
    plt.close(figure)
    return _Figure(caption, png=buffer.getvalue())


def _standard_figures(store: Store, runs: pd.DataFrame, axes: list[str]) -> list[_Figure]:
    """The standard figures of `pfcsim plot` for the store (see `standard_requests`)."""
    return [_store_figure(store, r, caption) for caption, r in standard_requests(runs, axes)]


def standard_requests(runs: pd.DataFrame, axes: list[str]) -> list[tuple[str, plots.FigureRequest]]:
    """The standard figures for these runs and swept fields: (caption, request) pairs.

    Series: the scheme, a wrapper's inner scheme, and the fields only some runs have that take
    several values within a series. x: the load, else the first other swept field, else the
    sweep (one panel). The other swept fields (but the seed, and fields with one value per
    series) make one set of figures per combination of their values, if there are at most
    `MAX_GROUPS`; with more, the runs are pooled and the caption says so.
    """
    series = ["scheme", *(a for a in axes if a.startswith("lb.") and a.endswith(".scheme"))]
    # A field only some runs have (a parameter of one scheme, a variant of one series' setup)
    # names series too where it splits one (`clb+flowlet`; `ecmp` for the runs without it).
    for axis in axes:
        some_runs = axis not in (*series, "seed") and runs[axis].isna().any()
        if some_runs and not _follows(runs, axis, series):
            series.append(axis)
    x = "load" if "load" in runs.columns and runs["load"].notna().any() else None
    others = [a for a in axes if a not in (*series, "seed", x) and not _follows(runs, a, series)]
    if x is None:
        x = others.pop(0) if others else "sweep"
    groups: list[tuple[tuple[str, str], ...]] = [()]
    pooled = ""
    if others:
        combos = runs[others].astype(str).drop_duplicates().itertuples(index=False)
        found = [tuple(zip(others, combo, strict=True)) for combo in combos]
        if len(found) <= MAX_GROUPS:
            groups = found
        else:
            pooled = f" (pooled over {', '.join(others)}: {len(found)} combinations)"
    requests = []
    for where, kind in itertools.product(groups, plots.STANDARD_KINDS):
        condition = ", ".join(f"{field} = {value}" for field, value in where)
        caption = f"{kind}: {plots.KINDS[kind]}" + (f"; {condition}" if condition else pooled)
        requests.append(
            (caption, plots.FigureRequest(kind, series=tuple(series), x=x, where=where))
        )
    return requests


def _follows(runs: pd.DataFrame, field: str, series: list[str]) -> bool:
    """Whether `field` has one value per series (a parameter of one scheme, say)."""
    names = plots.series_names(runs, [s for s in series if s in runs.columns])
    values = runs[field].astype(str)
    return bool((values.groupby(names).nunique(dropna=False) <= 1).all())


def _monitor_figures(store: Store, runs: pd.DataFrame) -> list[_Figure]:
    """The figures of the runs' monitors: one per kind, a panel per run (at most MAX_PANELS)."""
    tables = set(store.sql("SELECT table_name FROM information_schema.tables")["table_name"])
    labels = dict(zip(runs["key"], runs["label"].fillna(runs["key"]), strict=True))
    drawn = []
    for kind, (table, _, _) in plots.RUN_KINDS.items():
        if f"monitor_{table}" not in tables:
            continue
        watched = set(store.sql(f"SELECT DISTINCT run_key FROM monitor_{table}")["run_key"])
        keys = [k for k in runs["key"] if k in watched]
        if not keys:
            continue
        shown = keys[: plots.MAX_PANELS]
        # The kind's description without the command line's `--y` alternative it names.
        what = re.sub(r" \(--y [^)]*\)", "", plots.KINDS[kind])
        caption = f"{kind}: {what}"
        if len(keys) > len(shown):
            caption += f" (the first {len(shown)} of {len(keys)} runs with a {table} monitor)"
        results = [(labels[k], store.results(k)) for k in shown]
        figure = plots.run_figure(results, plots.FigureRequest(kind))
        drawn.append(_converted(figure, caption))
    return drawn


# --- sections --------------------------------------------------------------------------------


def _reproduction_sections(reproduction: dict[str, Any] | None) -> list[str]:
    """The experiment's description and its claims table (none for a plain store)."""
    if reproduction is None:
        return []
    name = reproduction["experiment"]
    quick = reproduction["quick"]
    command = f"pfcsim reproduce {name}" + (" --quick" if quick else "")
    rows = [
        ("experiment", f"<code>{_e(name)}</code> (<code>experiments/{_e(name)}/</code>)"),
        ("source", _e(reproduction["source"])),
        ("run", f"quick run: {_e(quick)}" if quick else "full run"),
        ("made by", f"<code>{_e(command)}</code>"),
    ]
    if reproduction["notes"]:
        rows.append(("notes", _e(reproduction["notes"])))
    description = "".join(f"<tr><th>{k}</th><td>{v}</td></tr>" for k, v in rows)
    parts = [
        '<section id="experiment"><h2>Experiment</h2>',
        f'<table class="facts">{description}</table></section>',
    ]
    claims = reproduction["claims"]
    if claims:
        header = "".join(
            f'<th scope="col">{h}</th>'
            for h in ("claim", "metric", "paper", "ours", "ours / paper", "note")
        )
        body = "".join(
            "<tr>"
            + _text_cell(c["claim"])
            + _text_cell(c["metric"])
            + "".join(_number_cell(c[k], digits=3) for k in ("paper", "ours", "ratio"))
            + _text_cell(c.get("note") or "")
            + "</tr>"
            for c in claims
        )
        parts += [
            '<section id="claims"><h2>Claims: the paper against our numbers</h2>',
            '<table class="sortable data" id="claims-table">',
            f"<thead><tr>{header}</tr></thead><tbody>{body}</tbody></table>",
            "<p class='note'>ours / paper: 1 is agreement; a claim without a number says why "
            "in its note (docs/guides/reproduce.md).</p></section>",
        ]
    return ["".join(parts)]


def _runs_summary(store: Store, runs: pd.DataFrame, axes: list[str]) -> str:
    """The store, its runs and failed points, the swept fields and their values."""
    rows = [
        ("store", f"<code>{_e(str(store.path))}</code>"),
        ("runs", f"{len(runs)} ({_e(', '.join(dict.fromkeys(runs['sweep'].astype(str))))})"),
    ]
    for axis in axes:
        values = sorted(set(runs[axis].dropna().tolist()), key=plots._sort_key)
        shown = ", ".join(str(v) for v in values[:20])
        more = f" and {len(values) - 20} more" if len(values) > 20 else ""
        rows.append((f"swept: {_e(axis)}", _e(shown + more)))
    if not axes:
        rows.append(("swept fields", "none"))
    failed = _failed_points(store)
    if failed:
        items = "".join(f"<li><code>{_e(k)}</code>: {_e(error)}</li>" for k, error in failed)
        rows.append(("failed points", f"{len(failed)}<ul>{items}</ul>"))
    if "incomplete" in runs.columns:
        cut = runs[runs["incomplete"].notna()]
        items = "".join(
            f"<li><code>{_e(k)}</code>: {_e(why)}</li>"
            for k, why in zip(cut["key"], cut["incomplete"], strict=True)
        )
        if items:
            rows.append(("runs ended early (incomplete)", f"{len(cut)}<ul>{items}</ul>"))
    body = "".join(f"<tr><th>{k}</th><td>{v}</td></tr>" for k, v in rows)
    table = f'<table class="facts">{body}</table>'
    return f'<section id="summary"><h2>What was run</h2>{table}</section>'


def _failed_points(store: Store) -> list[tuple[str, str]]:
    """(key, error) of the failed points of this view of the store."""
    failed = []
    for path in sorted((store.path / "failed").glob("*.json")):
        if store.keys is None or path.stem in store.keys:
            failed.append((path.stem, str(json.loads(path.read_text()).get("error", ""))))
    return failed


def _figure_section(title: str, figures: list[_Figure]) -> str:
    """A section of figures; each interactive one holds a placeholder for its Bokeh div."""
    anchor = title.lower().replace(" ", "-").replace("'", "")
    items = []
    for figure in figures:
        caption = f"<figcaption>{_e(figure.caption)}</figcaption>"
        if figure.layout is not None:
            body, render = f"<!--bokeh:{id(figure)}-->", "interactive"
        elif figure.png is not None:
            data = base64.b64encode(figure.png).decode()
            body = f'<img alt="{_e(figure.caption)}" src="data:image/png;base64,{data}">'
            render = "image"
        else:
            body = f"<p class='note'>not drawn: {_e(figure.missing or '')}</p>"
            render = "missing"
        items.append(f'<figure class="pfc-figure" data-render="{render}">{caption}{body}</figure>')
    return f'<section id="{anchor}"><h2>{_e(title)}</h2>{"".join(items)}</section>'


def _experiment_columns(reproduction: dict[str, Any] | None) -> list[str]:
    """The runs columns an experiment's claims and figures use."""
    if reproduction is None:
        return []
    used = [c["metric"] for c in reproduction["claims"]]
    used += [f["y"] for f in reproduction["figures"] if f.get("y")]
    return list(dict.fromkeys(used))


def _runs_table(runs: pd.DataFrame, axes: list[str], extra: list[str]) -> str:
    """Every run, sortable and filterable in the page."""
    wanted = ["key", "sweep", "point_index", *axes, *METRICS, *extra, *RUN_INFO]
    columns = [c for c in dict.fromkeys(wanted) if c in runs.columns]
    header = "".join(f'<th scope="col">{_e(c)}</th>' for c in columns)
    body = "".join(
        "<tr>" + "".join(_cell(row[c]) for c in columns) + "</tr>"
        for row in runs[columns].to_dict("records")
    )
    return (
        '<section id="runs"><h2>Runs</h2>'
        '<p><label>Filter: <input type="search" data-filter="runs-table" '
        'placeholder="words, or column=text"></label> <span id="runs-table-count"></span></p>'
        '<p class="note">Click a column header to sort by it (again: the other way).</p>'
        f'<div class="scroll"><table class="sortable data" id="runs-table">'
        f"<thead><tr>{header}</tr></thead><tbody>{body}</tbody></table></div></section>"
    )


def _spec_section(store: Store, runs: pd.DataFrame) -> str:
    """The resolved base spec (the fields every run shares) and the sweep specs as given."""
    common, differ = _common_spec(store, list(runs["key"]))
    note = (
        "# The fields every run of this report has with the same value: its resolved spec\n"
        "# (every default written out). Differ between runs (see the runs table):\n"
        + "".join(f"#   {line}\n" for line in _wrap(differ))
    )
    parts = [
        '<section id="spec"><h2>Resolved base spec</h2>',
        f"<pre>{_e(note + dict_to_toml(common or {}))}</pre>",
    ]
    for name in dict.fromkeys(runs["sweep"].astype(str)):
        path = store.path / "sweeps" / f"{name}.toml"
        if path.is_file():
            parts.append(
                f"<details><summary>The sweep spec as given: <code>sweeps/{_e(name)}.toml"
                f"</code></summary><pre>{_e(path.read_text())}</pre></details>"
            )
    parts.append("</section>")
    return "".join(parts)


def _common_spec(store: Store, keys: list[str]) -> tuple[dict[str, Any], list[str]]:
    """The first run's resolved spec without the fields that differ; the differing key paths."""
    from pfcsim.store import _flatten

    specs = [tomllib.loads((store.path / "runs" / k / "spec.toml").read_text()) for k in keys]
    flats = [_flatten(spec) for spec in specs]
    paths = list(dict.fromkeys(p for flat in flats for p in flat))
    first = flats[0]
    common = {p for p in paths if all(p in f and f[p] == first.get(p) for f in flats)}
    return _prune(specs[0], "", common), [p for p in paths if p not in common]


def _prune(node: Any, path: str, keep: set[str]) -> Any:
    """`node` with only the leaves (key paths as `store._flatten` names them) in `keep`."""
    if isinstance(node, dict):
        out = {}
        for key, value in node.items():
            child = f"{path}.{key}" if path else key
            pruned = _prune(value, child, keep)
            if pruned is not None:
                out[key] = pruned
        return out or None
    if isinstance(node, list) and node and all(isinstance(v, dict) for v in node):
        items = [_prune(v, f"{path}[{i}]", keep) or {} for i, v in enumerate(node)]
        return items if any(items) else None
    return node if path in keep else None


def _wrap(paths: list[str]) -> list[str]:
    """Key paths joined by commas in lines of at most about 90 characters.

    The paths of a table with more than `_LISTED` of them are given as `table.* (N fields)`.
    """
    tables: dict[str, list[str]] = {}
    for path in paths:
        tables.setdefault(path.split(".")[0], []).append(path)
    names = []
    for table, inside in tables.items():
        listed = len(inside) <= _LISTED or inside == [table]
        names += inside if listed else [f"{table}.* ({len(inside)} fields)"]
    lines, line = [], ""
    for path in names:
        if line and len(line) + len(path) > 88:
            lines.append(line + ",")
            line = ""
        line = f"{line}, {path}" if line else path
    return [*lines, line] if line else lines or ["(none)"]


#: Most differing fields of one table listed by name in the spec's header.
_LISTED = 6


# --- cells and the page ----------------------------------------------------------------------


def _e(text: Any) -> str:
    """HTML-escaped text."""
    return html.escape(str(text), quote=True)


def _cell(value: Any) -> str:
    """A table cell; numbers carry their exact value for sorting."""
    import numpy as np

    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, int | float):
        return _text_cell("" if _missing(value) else value)
    return _number_cell(value)


def _missing(value: Any) -> bool:
    """Whether a value is null (None, NaN, pandas NA)."""
    import pandas as pd

    try:
        return bool(pd.isna(value))
    except (TypeError, ValueError):
        return False


def _text_cell(value: Any) -> str:
    """A cell of text (booleans as true / false)."""
    text = str(value).lower() if isinstance(value, bool) else str(value)
    return f"<td>{_e(text)}</td>"


def _number_cell(value: float | None, digits: int = 4) -> str:
    """A number with thousands separators or `digits` significant digits; empty if null."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return '<td data-v=""></td>'
    if isinstance(value, int) or abs(value) >= 1e4:
        text = f"{value:,.0f}"
    else:
        text = f"{value:.{digits}g}"
    return f'<td class="num" data-v="{value!r}">{_e(text)}</td>'


def _page(title: str, store: Store, count: int, sections: list[str], figures: list[_Figure]) -> str:
    """The whole page: sections, Bokeh's script and figures, the table script, inlined."""
    body = "".join(sections)
    interactive = [f for f in figures if f.layout is not None]
    head_script = ""
    if interactive:
        from bokeh.embed import components
        from bokeh.resources import Resources

        script, divs = components([f.layout for f in interactive])
        for figure, div in zip(interactive, divs, strict=True):
            body = body.replace(f"<!--bokeh:{id(figure)}-->", div)
        body += script
        head_script = "".join(
            f"<script>{js}</script>" for js in Resources(mode="inline", components=["bokeh"]).js_raw
        )
    toc = "".join(
        f'<a href="#{anchor}">{name}</a>'
        for anchor, name in (
            ("experiment", "experiment"),
            ("claims", "claims"),
            ("summary", "what was run"),
            ("the-experiments-figures", "the experiment's figures"),
            ("standard-figures", "standard figures"),
            ("monitors", "monitors"),
            ("runs", "runs"),
            ("spec", "spec"),
        )
        if f'id="{anchor}"' in body
    )
    made = f"pfcsim {version('pfcsim')} report of {_e(store.path)}: {count} runs"
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{_e(title)}</title><style>{_STYLE}</style>{head_script}</head><body>"
        f"<header><h1>{_e(title)}</h1><p class='note'>{made}</p><nav>{toc}</nav></header>"
        f"<main>{body}</main><script>{_TABLE_SCRIPT}</script></body></html>\n"
    )


_STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 0 auto; max-width: 1240px;
  padding: 0 16px 48px; color: #1a1a1a; }
h1 { font-size: 22px; margin: 18px 0 4px; } h2 { font-size: 18px; margin: 28px 0 8px;
  border-bottom: 1px solid #ddd; padding-bottom: 4px; }
nav a { margin-right: 14px; } .note { color: #555; font-size: 13px; }
code, pre { font: 12.5px/1.4 ui-monospace, monospace; }
pre { background: #f6f6f6; padding: 10px; overflow: auto; max-height: 520px; }
table { border-collapse: collapse; } th, td { padding: 3px 8px; text-align: left;
  vertical-align: top; } .facts th { color: #444; white-space: nowrap; }
.data td, .data th { border-bottom: 1px solid #e4e4e4; white-space: nowrap; }
.data td.num { text-align: right; font-variant-numeric: tabular-nums; }
#claims-table td:first-child, #claims-table td:last-child { white-space: normal;
  max-width: 460px; }
.sortable th { cursor: pointer; user-select: none; background: #f3f3f3; }
.scroll th { position: sticky; top: 0; }
.sortable th[aria-sort=ascending]::after { content: " \\25B2"; }
.sortable th[aria-sort=descending]::after { content: " \\25BC"; }
.scroll { overflow: auto; max-height: 640px; border: 1px solid #e4e4e4; }
figure { margin: 18px 0; } figcaption { font-weight: 600; margin-bottom: 6px; }
figure img { max-width: 100%; }
"""

_TABLE_SCRIPT = """
"use strict";
for (const table of document.querySelectorAll("table.sortable")) {
  const headers = Array.from(table.tHead.rows[0].cells);
  headers.forEach((th, column) => {
    th.tabIndex = 0;
    const sort = () => {
      const ascending = th.getAttribute("aria-sort") !== "ascending";
      for (const h of headers) h.removeAttribute("aria-sort");
      th.setAttribute("aria-sort", ascending ? "ascending" : "descending");
      const body = table.tBodies[0];
      const rows = Array.from(body.rows);
      const value = (row) => {
        const cell = row.cells[column];
        return cell.dataset.v !== undefined ? cell.dataset.v : cell.textContent.trim();
      };
      const numeric = rows.every((r) => value(r) === "" || !Number.isNaN(Number(value(r))));
      rows.sort((a, b) => {
        const x = value(a), y = value(b);
        if (x === "" || y === "") return (x === "") - (y === "");
        const order = numeric ? Number(x) - Number(y)
          : x.localeCompare(y, undefined, { numeric: true });
        return ascending ? order : -order;
      });
      body.append(...rows);
    };
    th.addEventListener("click", sort);
    th.addEventListener("keydown", (event) => {
      if (event.key === "Enter" || event.key === " ") { event.preventDefault(); sort(); }
    });
  });
}
for (const input of document.querySelectorAll("input[data-filter]")) {
  const table = document.getElementById(input.dataset.filter);
  const count = document.getElementById(input.dataset.filter + "-count");
  const names = Array.from(table.tHead.rows[0].cells, (th) => th.textContent.toLowerCase());
  const rows = Array.from(table.tBodies[0].rows);
  const texts = rows.map((row) => Array.from(row.cells, (c) => c.textContent.toLowerCase()));
  const matches = (cells, term) => {
    const split = term.indexOf("=");
    const column = split > 0 ? names.indexOf(term.slice(0, split)) : -1;
    if (column >= 0) return cells[column].includes(term.slice(split + 1));
    return cells.some((text) => text.includes(term));
  };
  const update = () => {
    const terms = input.value.toLowerCase().split(/\\s+/).filter(Boolean);
    let shown = 0;
    rows.forEach((row, i) => {
      row.hidden = !terms.every((term) => matches(texts[i], term));
      if (!row.hidden) shown += 1;
    });
    count.textContent = shown + " of " + rows.length + " runs shown";
  };
  input.addEventListener("input", update);
  update();
}
"""
