"""Interactive versions of pfcsim's figures: a matplotlib figure converted to Bokeh.

`pfcsim.plots` draws every figure with matplotlib; `to_bokeh` rebuilds one as Bokeh plots
(zoom, pan, hover values, series hidden and shown by clicking their legend entry), from the
drawn figure itself, so that the interactive and the static figure show the same data. It
converts what the figures of `pfcsim.plots` are made of:

* lines (plain, dashed, with markers, and steps), with their colours and legend labels;
* bars (`Axes.bar`, also on a log scale) and the interval bars of `Axes.broken_barh`;
* panels side by side or stacked, with their titles, axis labels, log scales, shared y axes,
  and category axes (text ticks), legends in a panel or beside the figure.

Anything else (text annotations, images, scatter or filled collections, patches that are not
bars) makes `to_bokeh` return None: the figure has no interactive version and is shown as its
image. A line of more than `MAX_POINTS` points is thinned to the first, last, lowest and
highest point of each stretch of consecutive points, so that its envelope (the peaks of a
queue, the tail of a CDF) stays while the page stays small; zooming in shows no more detail
than that. Clicking a legend entry hides or shows that series in every panel of the figure.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    from bokeh.models import LayoutDOM, Plot
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

#: Most points kept of one line (see the module's doc).
MAX_POINTS = 2000

#: Width of the page's figures in CSS pixels, and the height of one panel.
WIDTH = 1100
PANEL_HEIGHT = 340

#: Most entries of a legend drawn inside its panel; a longer one goes beside it.
LEGEND_INSIDE = 8

#: matplotlib markers -> Bokeh markers (others are drawn as circles).
MARKERS = {"o": "circle", "s": "square", "^": "triangle", "v": "inverted_triangle", "D": "diamond"}
#: matplotlib line styles -> Bokeh dash patterns.
DASHES = {"-": "solid", "--": "dashed", ":": "dotted", "-.": "dashdot"}
#: matplotlib step draw styles -> the mode of Bokeh's step glyph.
STEPS = {"steps-post": "after", "steps-pre": "before", "steps": "before", "steps-mid": "center"}


def to_bokeh(figure: Figure) -> LayoutDOM | None:
    """The Bokeh layout of a drawn matplotlib figure, or None if it cannot be converted."""
    from bokeh.layouts import gridplot

    axes = [ax for ax in figure.axes if ax.get_visible()]
    if not axes:
        return None
    rows = max(ax.get_subplotspec().rowspan.stop for ax in axes)
    columns = max(ax.get_subplotspec().colspan.stop for ax in axes)
    width = max(300, (WIDTH - (150 if figure.legends else 0)) // columns)
    plots: dict[Axes, Plot] = {}
    for ax in axes:
        plot = _panel(ax, width)
        if plot is None:
            return None
        plots[ax] = plot
    _share_y(plots)
    if figure.legends:
        last = plots[axes[-1]]
        _legend(last, [t.get_text() for t in figure.legends[0].get_texts()], outside=True)
    _link_visibility(list(plots.values()))
    grid: list[list[Plot | None]] = [[None] * columns for _ in range(rows)]
    for ax, plot in plots.items():
        spec = ax.get_subplotspec()
        grid[spec.rowspan.start][spec.colspan.start] = plot
    return gridplot(grid, toolbar_location="right", merge_tools=True)


def _panel(ax: Axes, width: int) -> Plot | None:
    """One panel as a Bokeh plot; None if it holds something not converted."""
    from bokeh.plotting import figure as bokeh_figure
    from matplotlib.container import BarContainer

    if ax.texts or ax.images or ax.tables or _loose_patches(ax):
        return None
    if not all(isinstance(container, BarContainer) for container in ax.containers):
        return None  # error bars, stems
    plot = bokeh_figure(
        width=width,
        height=PANEL_HEIGHT,
        title=ax.get_title(),
        x_axis_type="log" if ax.get_xscale() == "log" else "linear",
        y_axis_type="log" if ax.get_yscale() == "log" else "linear",
        x_range=ax.get_xlim(),
        y_range=ax.get_ylim(),
        tools="pan,box_zoom,wheel_zoom,reset,save",
        active_drag="box_zoom",
    )
    plot.xaxis.axis_label = ax.get_xlabel()
    plot.yaxis.axis_label = ax.get_ylabel()
    plot.title.text_font_size = "10pt"
    plot.toolbar.logo = None
    _category_ticks(ax, plot)
    xname, yname = ax.get_xlabel() or "x", ax.get_ylabel() or "y"
    category_x = _is_category(ax.xaxis)
    lines = []
    for line in ax.get_lines():
        if line.get_visible():
            lines.extend(_line(plot, ax, line, category_x=category_x))
    x_value = "@xt" if category_x else "@x{%.6g}"
    _hover(plot, lines, [("", "$name"), (xname, x_value), (yname, "@y{%.4g}")])
    bars = [r for container in ax.containers for r in _bars(plot, ax, container)]
    _hover(plot, bars, [("", "$name"), (xname, "@xt"), (yname, "@y{%.4g}")])
    intervals = []
    for collection in ax.collections:
        renderer = _intervals(plot, ax, collection)
        if renderer is None:
            return None
        intervals.append(renderer)
    _hover(plot, intervals, [("", "$name"), ("from", "@x{%.6g}"), ("for", "@y{%.4g}")])
    legend = ax.get_legend()
    if legend is not None:
        _legend(plot, [t.get_text() for t in legend.get_texts()], outside=False)
    return plot


def _loose_patches(ax: Axes) -> bool:
    """Whether the panel has patches that are not bars of a bar container."""
    in_bars = {id(patch) for container in ax.containers for patch in container}
    return any(id(patch) not in in_bars for patch in ax.patches)


def _category_ticks(ax: Axes, plot: Plot) -> None:
    """Text ticks (categories, named rows) as fixed ticks with their labels, slanted like them."""
    from bokeh.models import FixedTicker

    for axis, bokeh_axis in ((ax.xaxis, plot.xaxis[0]), (ax.yaxis, plot.yaxis[0])):
        if not _is_category(axis):
            continue
        ticks = [float(t) for t in axis.get_majorticklocs()]
        labels = [t.get_text() for t in axis.get_majorticklabels()]
        bokeh_axis.ticker = FixedTicker(ticks=ticks)
        bokeh_axis.major_label_overrides = dict(zip(ticks, labels, strict=True))
        rotation = axis.get_majorticklabels()[0].get_rotation() if labels else 0
        if rotation:
            bokeh_axis.major_label_orientation = math.radians(rotation)


def _line(plot: Plot, ax: Axes, line: Any, *, category_x: bool) -> list[Any]:
    """A matplotlib line (and its markers) drawn in `plot`; the renderers to hover.

    On a text x axis the points carry their category's name (`xt`) for the hover.
    """
    from bokeh.models import ColumnDataSource
    from matplotlib.colors import to_hex

    xy = line.get_xydata()
    x, y = _finite(xy[:, 0], xy[:, 1])
    if x.size == 0:
        return []
    x, y = _thin(x, y)
    label = _label(line.get_label())
    color = to_hex(line.get_color())
    step = STEPS.get(line.get_drawstyle())
    columns: dict[str, Any] = {"x": x, "y": y}
    if category_x:
        columns["xt"] = [_tick_label(ax, v) for v in x]
    source = ColumnDataSource(columns)
    renderers = []
    marker = line.get_marker()
    has_marker = marker not in (None, "None", "", " ")
    if line.get_linestyle() not in ("None", " ", ""):
        style = {
            "source": source,
            "color": color,
            "line_width": max(line.get_linewidth(), 1.0),
            "line_dash": DASHES.get(line.get_linestyle(), "solid"),
            "name": label,
        }
        if step is None:
            renderers.append(plot.line("x", "y", **style))
        else:
            plot.step("x", "y", mode=step, **style)
            if not has_marker:
                # Bokeh's step glyph cannot be hovered: its points, unseen, can.
                renderers.append(plot.scatter("x", "y", source=source, size=8, alpha=0, name=label))
    if has_marker:
        renderers.append(
            plot.scatter(
                "x",
                "y",
                source=source,
                marker=MARKERS.get(str(marker), "circle"),
                size=6,
                color=color,
                name=label,
            )
        )
    return renderers


def _bars(plot: Plot, ax: Axes, container: Any) -> list[Any]:
    """A bar container drawn as quads (from the axis' bottom on a log scale)."""
    from bokeh.models import ColumnDataSource
    from matplotlib.colors import to_hex

    floor = ax.get_ylim()[0] if ax.get_yscale() == "log" else None
    columns: dict[str, list[Any]] = {"left": [], "right": [], "bottom": [], "top": []}
    columns |= {"xt": [], "y": []}
    for patch in container:
        height = patch.get_height()
        if not math.isfinite(height):
            continue
        bottom = patch.get_y() if floor is None else max(patch.get_y(), floor)
        columns["left"].append(patch.get_x())
        columns["right"].append(patch.get_x() + patch.get_width())
        columns["bottom"].append(bottom)
        columns["top"].append(patch.get_y() + height)
        columns["y"].append(height)
        columns["xt"].append(_tick_label(ax, patch.get_x() + patch.get_width() / 2))
    if not columns["left"]:
        return []
    label = _label(container.get_label())
    color = to_hex(container.patches[0].get_facecolor())
    quads = plot.quad(
        "left", "right", "top", "bottom", source=ColumnDataSource(columns), color=color, name=label
    )
    return [quads]


def _intervals(plot: Plot, ax: Axes, collection: Any) -> Any | None:
    """Axis-aligned rectangles (`broken_barh`) as quads; None for any other collection."""
    from bokeh.models import ColumnDataSource
    from matplotlib.collections import PolyCollection
    from matplotlib.colors import to_hex

    if not isinstance(collection, PolyCollection):
        return None
    columns: dict[str, list[Any]] = {
        "left": [],
        "right": [],
        "bottom": [],
        "top": [],
        "x": [],
        "y": [],
    }
    for path in collection.get_paths():
        vertices = path.vertices
        xs, ys = sorted(set(vertices[:, 0])), sorted(set(vertices[:, 1]))
        if len(xs) > 2 or len(ys) > 2:
            return None  # not a rectangle
        columns["left"].append(xs[0])
        columns["right"].append(xs[-1])
        columns["bottom"].append(ys[0])
        columns["top"].append(ys[-1])
        columns["x"].append(xs[0])
        columns["y"].append(xs[-1] - xs[0])
    row = (columns["bottom"][0] + columns["top"][0]) / 2 if columns["left"] else 0.0
    label = _tick_label(ax, row, axis="y")
    colors = collection.get_facecolor()
    color = to_hex(colors[0]) if len(colors) else "#1f77b4"
    return plot.quad(
        "left", "right", "top", "bottom", source=ColumnDataSource(columns), color=color, name=label
    )


def _hover(plot: Plot, renderers: list[Any], tooltips: list[tuple[str, str]]) -> None:
    """A hover tool on `renderers` (if any) with these tooltips."""
    from bokeh.models import HoverTool

    if renderers:
        formatters = {"@x": "printf", "@y": "printf"}
        plot.add_tools(HoverTool(renderers=renderers, tooltips=tooltips, formatters=formatters))


def _legend(plot: Plot, labels: list[str], *, outside: bool) -> None:
    """A legend of the plot's renderers named in `labels` (click an entry to hide it).

    Inside the panel (top right, as pfcsim's figures place theirs) unless `outside` or longer
    than `LEGEND_INSIDE` entries: then beside it, where it hides no data.
    """
    from bokeh.models import Legend, LegendItem

    by_name: dict[str, list[Any]] = {}
    for renderer in plot.renderers:
        by_name.setdefault(renderer.name or "", []).append(renderer)
    items = [LegendItem(label=text, renderers=by_name[text]) for text in labels if text in by_name]
    if not items:
        return
    legend = Legend(
        items=items,
        click_policy="hide",
        label_text_font_size="8pt",
        glyph_height=12,
        glyph_width=18,
        spacing=0,
        padding=4,
        background_fill_alpha=0.7,
    )
    if outside or len(items) > LEGEND_INSIDE:
        plot.add_layout(legend, "right")
    else:
        legend.location = "top_right"
        plot.add_layout(legend)


def _link_visibility(plots: list[Plot]) -> None:
    """Hiding a series (by its legend entry) hides the renderers of that name in every panel."""
    from bokeh.models import CustomJS

    by_name: dict[str, list[Any]] = {}
    for plot in plots:
        for renderer in plot.renderers:
            if renderer.name:
                by_name.setdefault(renderer.name, []).append(renderer)
    for renderers in by_name.values():
        if len(renderers) < 2:
            continue
        follow = CustomJS(
            args={"group": renderers},
            code="for (const r of group) { if (r.visible != cb_obj.visible) "
            "r.visible = cb_obj.visible }",
        )
        for renderer in renderers:
            renderer.js_on_change("visible", follow)


def _share_y(plots: dict[Axes, Plot]) -> None:
    """Panels whose matplotlib y axes are shared share one Bokeh y range."""
    axes = list(plots)
    for i, ax in enumerate(axes):
        for other in axes[:i]:
            if ax.get_shared_y_axes().joined(ax, other):
                plots[ax].y_range = plots[other].y_range
                break


def _tick_label(ax: Axes, value: float, *, axis: str = "x") -> str:
    """The text of the tick nearest to `value` on a text axis, else `value` as text."""
    target = ax.xaxis if axis == "x" else ax.yaxis
    if _is_category(target):
        ticks = list(target.get_majorticklocs())
        labels = [t.get_text() for t in target.get_majorticklabels()]
        if ticks and len(labels) == len(ticks):
            nearest = min(range(len(ticks)), key=lambda i: abs(ticks[i] - value))
            return labels[nearest]
    return f"{value:.4g}"


def _is_category(axis: Any) -> bool:
    """Whether a matplotlib axis has text ticks (categories, or ticks set with their labels)."""
    from matplotlib.category import StrCategoryFormatter
    from matplotlib.ticker import FixedLocator

    return isinstance(axis.get_major_locator(), FixedLocator) or isinstance(
        axis.get_major_formatter(), StrCategoryFormatter
    )


def _label(text: str) -> str:
    """A legend label; matplotlib's unlabelled artists (`_child0`) have none."""
    return "" if text.startswith("_") else text


def _finite(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The points whose coordinates are both finite, as 32-bit floats (half the page size).

    Seven significant digits: more than the axes and the hover show.
    """
    import numpy as np

    x, y = np.asarray(x, dtype=np.float32), np.asarray(y, dtype=np.float32)
    keep = np.isfinite(x) & np.isfinite(y)
    return x[keep], y[keep]


def _thin(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """At most about `MAX_POINTS` points: each stretch's first, last, lowest and highest."""
    import numpy as np

    if x.size <= MAX_POINTS:
        return x, y
    stretch = math.ceil(x.size / (MAX_POINTS // 4))
    keep = []
    for start in range(0, x.size, stretch):
        part = y[start : start + stretch]
        lowest, highest = start + int(np.argmin(part)), start + int(np.argmax(part))
        keep.extend((start, lowest, highest, start + part.size - 1))
    index = np.unique(np.array(keep))
    return x[index], y[index]
