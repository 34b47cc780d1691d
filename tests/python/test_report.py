"""`pfcsim report`: one self-contained HTML page per store, checked in a headless Chromium."""

import json
import re
import shutil
import tomllib
from pathlib import Path
from typing import Any

import matplotlib
import numpy as np
import pytest
from matplotlib.figure import Figure

import pfcsim
from chromium import Chromium, find_binary
from conftest import TINY_TOML
from pfcsim import interactive, plots, reproduce
from pfcsim.report import (
    REPRODUCTION_FILE,
    _converted,
    _monitor_figures,
    standard_requests,
)
from test_cli import cli
from test_reproduce import root  # noqa: F401 (the experiments folder fixture)

matplotlib.use("Agg")


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> pfcsim.Store:
    """ECMP and RPS on the tiny spec under load, with a queue and a PFC monitor: two runs."""
    spec: dict[str, Any] = tomllib.loads(TINY_TOML)
    spec["traffic"][0]["load"] = 0.8
    spec["cc"] = {"kind": "none"}
    spec["monitor"] = [
        {"kind": "queue", "nodes": ["leaf:*"], "interval": "5us", "end": "1ms"},
        {"kind": "pfc"},
    ]
    out = tmp_path_factory.mktemp("report") / "store"
    pfcsim.sweep({"base": spec, "grid": {"lb.scheme": ["ecmp", "rps"]}}, out=out, workers=1)
    return pfcsim.open_store(out)


@pytest.fixture(scope="module")
def page(store: pfcsim.Store) -> Path:
    """The store's report, written by `Store.report` to its default place."""
    path = store.report()
    assert path == store.path / "report.html"
    return path


#: Per figure of the page: how it is shown, and for a drawn one how many of its pixels are
#: coloured (neither white nor grey: the series, not the axes and text).
FIGURES_JS = """
(() => {
  const deep = (root, selector) => {
    const found = Array.from(root.querySelectorAll(selector));
    for (const e of root.querySelectorAll("*")) {
      if (e.shadowRoot) found.push(...deep(e.shadowRoot, selector));
    }
    return found;
  };
  return Array.from(document.querySelectorAll("figure.pfc-figure"), (figure) => {
    const render = figure.dataset.render;
    const canvases = render === "image" ? Array.from(figure.querySelectorAll("img"))
      : deep(figure, "canvas");
    let coloured = 0;
    for (const source of canvases) {
      const width = source.naturalWidth || source.width;
      const height = source.naturalHeight || source.height;
      if (!width || !height) continue;
      const canvas = document.createElement("canvas");
      canvas.width = width; canvas.height = height;
      const context = canvas.getContext("2d");
      context.drawImage(source, 0, 0);
      const pixels = context.getImageData(0, 0, width, height).data;
      for (let i = 0; i < pixels.length; i += 4) {
        const [r, g, b, a] = pixels.slice(i, i + 4);
        if (a > 0 && Math.max(r, g, b) - Math.min(r, g, b) > 40) coloured += 1;
      }
    }
    return [figure.querySelector("figcaption").textContent, render, coloured];
  });
})()
"""

#: Coloured pixels that a drawn figure has at least: a figure of two points with its legend
#: has about 440; axes, grid and text alone have none.
DRAWN = 200

#: The values of a runs-table column, in the rows' order.
COLUMN_JS = """
(() => {
  const table = document.getElementById("runs-table");
  const names = Array.from(table.tHead.rows[0].cells, (th) => th.textContent);
  const column = names.indexOf(%s);
  return Array.from(table.tBodies[0].rows, (row) => row.cells[column].dataset.v
    ?? row.cells[column].textContent);
})()
"""


def test_the_report_loads_draws_its_figures_and_sorts_its_runs_in_chromium(
    page: Path, tmp_path: Path
) -> None:
    binary = find_binary()
    if binary is None:
        pytest.skip(
            "no Chromium to open the report in: install Debian's chromium package "
            "(apt-get install chromium; .ci/run does) or set CHROMIUM to a Chrome binary"
        )
    with Chromium(binary, tmp_path / "profile") as browser:
        browser.open(page.as_uri())
        figures = browser.poll(FIGURES_JS, until=lambda fs: all(f[2] > DRAWN for f in fs))
        screenshot = browser.screenshot(tmp_path / "report.png")
        print(f"screenshot of the report: {tmp_path / 'report.png'}")
        assert screenshot[:8] == b"\x89PNG\r\n\x1a\n"
        # Every standard figure and both monitor figures, all interactive and drawn.
        captions = [f[0] for f in figures]
        for kind in (*plots.STANDARD_KINDS, "queue", "pfc-timeline"):
            assert any(c.startswith(f"{kind}:") for c in captions), (kind, captions)
        assert all(f[1] == "interactive" for f in figures), figures
        assert all(f[2] > DRAWN for f in figures), figures
        # The page asks for nothing but itself (and inline data).
        assert all(u == page.as_uri() or u.startswith("data:") for u in browser.requested_urls())
        # Sorting: a click on a header orders the rows by it, a second click the other way.
        for column in ('"fct_p99_us"', '"scheme"'):
            before = browser.evaluate(COLUMN_JS % column)
            browser.click(f"#runs-table th:nth-child({_column_number(browser, column)})")
            ascending = browser.evaluate(COLUMN_JS % column)
            browser.click(f"#runs-table th:nth-child({_column_number(browser, column)})")
            descending = browser.evaluate(COLUMN_JS % column)
            key = float if column == '"fct_p99_us"' else str
            assert sorted(before, key=key) == ascending, column
            assert sorted(before, key=key, reverse=True) == descending, column
            assert ascending != descending, column
        # Filtering: words, or column=text.
        browser.type_into("input[data-filter]", "scheme=rps")
        shown = browser.evaluate(
            "Array.from(document.querySelectorAll('#runs-table tbody tr'))"
            ".filter((r) => !r.hidden).map((r) => r.cells[3].textContent)"
        )
        assert shown == ["rps"]
        assert browser.console_errors() == []


def _column_number(browser: Chromium, name: str) -> int:
    """The 1-based position of a runs-table column."""
    names = browser.evaluate(
        "Array.from(document.querySelectorAll('#runs-table thead th'), (th) => th.textContent)"
    )
    return names.index(name.strip('"')) + 1


def test_the_report_holds_the_runs_the_swept_fields_and_the_shared_spec(
    store: pfcsim.Store, page: Path
) -> None:
    text = page.read_text()
    # Self-contained: no file, script or style from elsewhere (the scripts' text aside).
    markup = re.sub(r"<script>.*?</script>", "", text, flags=re.DOTALL)
    assert "<script>" in text
    assert not re.search(r"""(src|href)=["']?(https?:|//)""", markup)
    assert "<link" not in markup
    runs = store.runs
    for key, fingerprint in zip(runs["key"], runs["fingerprint"], strict=True):
        assert key in text
        assert fingerprint in text
    assert text.count(f"<td>{pfcsim.__version__}</td>") == 2
    # Swept: the scheme; the shared spec has the load and lists the scheme as differing.
    assert "swept: scheme</th><td>ecmp, rps" in text
    spec = text[text.index('id="spec"') :]
    assert "load = 0.8" in spec
    assert "Differ between runs" in spec
    assert "#   lb.scheme" in spec
    assert 'scheme = "ecmp"' not in spec


def test_monitor_figures_show_at_most_max_panels_runs_and_say_so(
    store: pfcsim.Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(plots, "MAX_PANELS", 1)
    figures = _monitor_figures(store, store.runs)
    assert [f.caption.split(":")[0] for f in figures] == ["queue", "pfc-timeline"]
    assert figures[0].caption.endswith("(the first 1 of 2 runs with a queue monitor)")
    assert "--y" not in figures[0].caption
    layout = figures[0].layout
    assert layout is not None
    assert len(layout.children) == 1  # one panel: one run


def test_the_report_command_names_a_bad_store(tmp_path: Path) -> None:
    bad = cli("report", "nowhere", cwd=tmp_path)
    assert bad.returncode == 2
    assert bad.stderr.startswith("error: nowhere is not a results store")
    assert "Traceback" not in bad.stderr


def test_reproduce_writes_the_report_with_the_experiment_and_its_claims(
    root: Path,  # noqa: F811 (the fixture imported above)
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    out = tmp_path / "store"
    experiment = reproduce.load_experiment(root, "demo/tiny")
    # Each of the experiment's figures is drawn once, for its files and the report together.
    drawn: list[str | None] = []
    make_figure = plots.make_figure

    def counted(store: pfcsim.Store, request: plots.FigureRequest) -> Figure:
        drawn.append(request.name)
        return make_figure(store, request)

    monkeypatch.setattr(plots, "make_figure", counted)
    result = reproduce.reproduce(experiment, quick=True, out=out)
    named = [name for name in drawn if name is not None]
    assert named == [f.name for f in experiment.figures] == ["p99", "retx"]
    assert result.report == out / "report.html"
    assert (out / REPRODUCTION_FILE).is_file()
    text = result.report.read_text()
    assert "<h1>Tiny: ECMP vs RPS</h1>" in text
    assert "quick run: one load, 0.5 ms" in text
    assert "RPS cuts the p99 FCT by up to 10% against ECMP" in text
    start = text.index('id="claims-table"')
    claims = text[start : text.index("</table>", start)]
    ours = result.claims[0]["ours"]
    assert f'data-v="{ours!r}"' in claims
    assert "The experiment&#x27;s figures" in text
    # A run of another sweep in the store (an older version of the experiment, say): the
    # report, also from `pfcsim report`, shows the runs of the experiment's sweep only.
    current = set(pfcsim.open_store(out).runs["key"])
    assert len(current) == 4
    shutil.copytree(out / "runs" / min(current), out / "runs" / ("f" * 16))
    assert len(pfcsim.open_store(out).runs) == 5
    done = cli("report", str(out), "-o", "page.html", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "page.html"
    keys = r"<tr><td>([0-9a-f]{16})</td>"  # the first cell of a runs-table row
    shown = set(re.findall(keys, (tmp_path / "page.html").read_text()))
    assert shown == current == set(_reproduction_keys(out))


def _reproduction_keys(store: Path) -> list[str]:
    """The keys of the current sweep's points that `reproduce` recorded."""
    return json.loads((store / REPRODUCTION_FILE).read_text())["keys"]


def test_the_standard_figures_pick_series_x_and_groups_from_the_swept_fields() -> None:
    import pandas as pd

    nan = float("nan")
    # RLB around two schemes, two workloads, two loads; a table size only DRILL has (one
    # value: it follows the series), a granularity CLB has in two values (it splits a series).
    runs = pd.DataFrame(
        {
            "scheme": ["drill", "rlb", "rlb", "clb", "clb"] * 4,
            "lb.inner.scheme": [None, "drill", "presto", None, None] * 4,
            "lb.table_size": [64, nan, nan, nan, nan] * 4,
            "lb.granularity": [None, None, None, "packet", "flow"] * 4,
            "workload": ["web_search"] * 10 + ["hadoop"] * 10,
            "load": ([0.5] * 5 + [0.8] * 5) * 2,
            "seed": [1] * 20,
            "sweep": ["s"] * 20,
        }
    )
    axes = ["scheme", "lb.inner.scheme", "lb.table_size", "lb.granularity", "workload", "load"]
    requests = standard_requests(runs, axes)
    assert [r.kind for _, r in requests] == [*plots.STANDARD_KINDS] * 2
    assert {r.series for _, r in requests} == {("scheme", "lb.inner.scheme", "lb.granularity")}
    assert {r.x for _, r in requests} == {"load"}
    assert [r.where for _, r in requests[::4]] == [
        (("workload", "web_search"),),
        (("workload", "hadoop"),),
    ]
    assert requests[0][0].endswith("; workload = web_search")
    # Without a load: the first other swept field is the x axis; without one, the sweep.
    no_load = runs.assign(load=None)
    assert {r.x for _, r in standard_requests(no_load, axes)} == {"workload"}
    alone = [a for a in axes if a not in ("workload", "load")]
    assert {r.x for _, r in standard_requests(no_load, alone)} == {"sweep"}
    # More combinations of the other fields than MAX_GROUPS: pooled, and said so.
    many = runs.assign(workload=[f"w{i // 4}" for i in range(20)])
    pooled = standard_requests(many, axes)
    assert len(pooled) == len(plots.STANDARD_KINDS)
    assert all(r.where == () for _, r in pooled)
    assert pooled[0][0].endswith("(pooled over workload: 5 combinations)")


def test_a_long_line_is_thinned_to_its_envelope() -> None:
    x = np.arange(100_000, dtype=float)
    y = np.sin(x / 500) + (x == 77_777) * 5.0  # one spike
    tx, ty = interactive._thin(x, y)
    assert tx.size <= interactive.MAX_POINTS + 4
    assert ty.max() == y.max()
    assert ty.min() == y.min()
    assert (tx[0], tx[-1]) == (x[0], x[-1])
    assert np.all(np.diff(tx) > 0)
    short = np.arange(10, dtype=float)
    assert interactive._thin(short, short)[0] is short


def test_a_step_line_is_a_bokeh_step_of_its_points_hovered_at_them() -> None:
    import matplotlib.pyplot as plt
    from bokeh.models import HoverTool

    figure, ax = plt.subplots()
    x, y = [0.0, 1.0, 3.0], [5.0, 6.0, 7.0]
    ax.step(x, y, where="post", label="post")
    ax.step(x, y, where="pre", label="pre")
    ax.legend()
    layout = interactive.to_bokeh(figure)
    plt.close(figure)
    assert layout is not None
    plot = layout.children[0][0]
    steps = {r.name: r for r in plot.renderers if r.glyph.__class__.__name__ == "Step"}
    assert {name: r.glyph.mode for name, r in steps.items()} == {"post": "after", "pre": "before"}
    (hover,) = [t for t in plot.tools if isinstance(t, HoverTool)]
    for name, renderer in steps.items():
        data = renderer.data_source.data
        assert (list(data["x"]), list(data["y"])) == (x, y), name  # the points, no corners
        (points,) = [r for r in hover.renderers if r.name == name]
        assert points.data_source is renderer.data_source
        assert points.glyph.__class__.__name__ == "Scatter"
        assert points.glyph.fill_alpha == points.glyph.line_alpha == 0


def test_a_series_hidden_in_one_panel_is_hidden_in_every_panel(store: pfcsim.Store) -> None:
    figure = plots.make_figure(store, plots.FigureRequest("vs-load"))
    layout = interactive.to_bokeh(figure)
    assert layout is not None
    panels = [child[0] for child in layout.children]
    assert len(panels) == 2
    for renderer in panels[0].renderers:
        (callback,) = renderer.js_property_callbacks["change:visible"]
        group = {id(r) for r in callback.args["group"]}
        twins = [r for r in panels[1].renderers if r.name == renderer.name]
        assert twins
        assert {id(r) for r in twins} <= group
        assert id(renderer) in group


def test_bars_keep_their_categories_and_a_log_axis_draws_them_from_its_bottom(
    store: pfcsim.Store,
) -> None:
    request = plots.FigureRequest("bars", x="scheme", y="pfc_pauses", series="load", logy=True)
    figure = plots.make_figure(store, request)
    layout = interactive.to_bokeh(figure)
    assert layout is not None
    plot = layout.children[0][0]
    assert plot.x_scale.__class__.__name__ == "LinearScale"
    assert plot.y_scale.__class__.__name__ == "LogScale"
    assert set(plot.xaxis[0].major_label_overrides.values()) == {"ecmp", "rps"}
    (quads,) = [r for r in plot.renderers if r.glyph.__class__.__name__ == "Quad"]
    data = quads.data_source.data
    assert data["xt"] == ["ecmp", "rps"]
    assert min(data["bottom"]) > 0


def test_a_figure_without_an_interactive_version_is_embedded_as_its_image() -> None:
    import matplotlib.pyplot as plt

    figure, ax = plt.subplots()
    ax.plot([1, 2], [3, 4], label="a")
    assert interactive.to_bokeh(figure) is not None
    ax.annotate("a note", (1.5, 3.5))
    assert interactive.to_bokeh(figure) is None
    shown = _converted(figure, "annotated")
    assert shown.layout is None
    assert shown.png is not None
    assert shown.png[:4] == b"\x89PNG"
    assert not plt.fignum_exists(figure.number)
    bars, ax = plt.subplots()
    ax.errorbar([1, 2], [3, 4], yerr=[0.5, 0.5])
    assert interactive.to_bokeh(bars) is None
    plt.close(bars)


def test_an_empty_store_has_nothing_to_report(tmp_path: Path) -> None:
    (tmp_path / "empty" / "runs").mkdir(parents=True)
    with pytest.raises(ValueError, match="has no finished run yet: nothing to report"):
        pfcsim.open_store(tmp_path / "empty").report()
