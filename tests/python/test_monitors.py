"""Monitors from Python: specs as dicts, the tables in Results and the store, their figures."""

import copy
from pathlib import Path
from typing import Any

import pytest

import pfcsim
from pfcsim import plots
from test_cli import cli

#: Monitors of every kind the figures draw, bounded to the tiny spec's first 2 ms.
MONITORS = [
    {"kind": "queue", "nodes": ["leaf:*"], "interval": "1us", "end": "2ms"},
    {"kind": "pfc"},
    {"kind": "rate", "flows": [0, 1], "min_spacing": "1us", "end": "2ms"},
    {"kind": "link_util", "nodes": ["spine:0"], "interval": "10us", "end": "2ms"},
]


@pytest.fixture
def watched(tiny_dict: dict[str, Any]) -> dict[str, Any]:
    """The tiny spec with `MONITORS`, under load enough for PFC to pause."""
    spec = copy.deepcopy(tiny_dict)
    spec["traffic"][0]["load"] = 0.8
    spec["cc"] = {"kind": "none"}
    spec["monitor"] = MONITORS
    return spec


def test_a_dict_spec_with_monitors_gives_their_tables_and_the_same_run(
    watched: dict[str, Any], tmp_path: Path
) -> None:
    res = pfcsim.run(watched, out=tmp_path / "run")
    plain = pfcsim.run({k: v for k, v in watched.items() if k != "monitor"})
    assert res.fingerprint == plain.fingerprint
    assert plain.monitor("queue") is None
    queue = res.monitor("queue")
    assert set(queue["node"]) == {4, 5}
    assert queue["time_ps"].max() <= 2_000_000_000
    assert (queue["ingress_bytes"] >= 0).all()
    assert (queue["xoff_bytes"] > 0).all()
    pfc = res.monitor("pfc", polars=True)
    assert set(pfc["direction"]) == {"sent", "received"}
    assert (
        pfc.height
        == 2 * res.ports["pfc_pauses_sent"].sum() + 2 * res.ports["pfc_resumes_sent"].sum()
    )
    assert set(res.monitor("rate")["flow_id"]) == {0, 1}
    assert res.stats["monitor.pfc_events_dropped"] == 0
    # The run folder has them too, read back alike.
    again = pfcsim.Results.from_folder(tmp_path / "run")
    assert len(again.monitor("link_util")) == len(res.monitor("link_util"))
    with pytest.raises(ValueError, match="unknown monitor kind 'queues'"):
        res.monitor("queues")


def test_a_bad_monitor_in_a_dict_is_refused_with_the_key(watched: dict[str, Any]) -> None:
    watched["monitor"] = [{"kind": "queue", "interval": "1us", "nodes": ["host:0"]}]
    with pytest.raises(pfcsim.SpecError, match=r"monitor\[0\].nodes: node 0 is a host"):
        pfcsim.run(watched)
    watched["monitor"] = [{"kind": "link_util", "interval": "1ns"}]
    with pytest.raises(pfcsim.SpecError, match=r"raise run\.monitor_limit"):
        pfcsim.validate(watched)


def test_results_plot_and_the_plot_command_draw_the_monitor_figures(
    watched: dict[str, Any], tmp_path: Path
) -> None:
    res = pfcsim.run(watched, out=tmp_path / "run")
    figure = res.plot("queue")
    labels = [line.get_label() for line in figure.axes[0].get_lines()]
    assert "XOFF at 4" in labels
    assert "XOFF at 5" in labels
    assert res.plot("rate", y="acked_bytes").axes[0].get_ylabel() == "bytes acknowledged (MB)"
    with pytest.raises(ValueError, match="a util figure draws y = utilization, tx_bytes"):
        res.plot("util", y="rate_bps")
    done = cli("plot", "run", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    for kind in plots.RUN_KINDS:
        assert (tmp_path / "run" / "plots" / f"{kind}.png").is_file(), kind
    bare = pfcsim.run({k: v for k, v in watched.items() if k != "monitor"}, out=tmp_path / "bare")
    assert bare.monitor("pfc") is None
    refused = cli("plot", "bare", cwd=tmp_path)
    assert refused.returncode == 2
    assert "is a run folder without monitors" in refused.stderr
    wrong = cli("plot", "run", "-k", "fct-cdf", cwd=tmp_path)
    assert "it has the figures queue, pfc-timeline, rate, util, not fct-cdf" in wrong.stderr


def test_the_queue_figure_draws_no_xoff_line_for_a_model_without_one(
    watched: dict[str, Any],
) -> None:
    """Under the egress PFC model `xoff_bytes` is u64::MAX: no line, so the queues show."""
    watched["switch"] = {"pfc": {"model": "egress", "egress": {"xoff": "20KB"}}}
    watched["monitor"] = [MONITORS[0]]
    res = pfcsim.run(watched)
    assert set(res.monitor("queue")["xoff_bytes"]) == {plots.NO_XOFF}
    ax = res.plot("queue").axes[0]
    assert not [line for line in ax.get_lines() if line.get_label().startswith("XOFF")]
    assert ax.get_ylim()[1] < 1e4  # KB: the queues' scale, not 1.8e16


def test_the_store_indexes_the_monitor_tables_and_draws_one_panel_per_run(
    watched: dict[str, Any], tmp_path: Path
) -> None:
    sweep = {"base": watched, "grid": {"lb.scheme": ["ecmp", "rps"]}}
    report = pfcsim.sweep(sweep, out=tmp_path / "store", workers=1)
    store = pfcsim.open_store(report.store)
    counts = store.sql("SELECT run_key, count(*) AS n FROM monitor_queue GROUP BY run_key")
    assert sorted(counts["run_key"]) == sorted(store.runs["key"])
    one = store.results(counts["run_key"][0]).monitor("queue")
    assert int(counts["n"][0]) == len(one)
    request = plots.FigureRequest("pfc-timeline", name="paused")
    written = plots.draw(store, request, tmp_path / "figures")
    assert [p.name for p in written] == ["paused.png", "paused.svg"]
    ecmp = plots.FigureRequest("queue", where=(("scheme", "ecmp"),))
    runs = plots._selected_runs(store, ecmp, fields=["scheme"])
    assert list(runs["scheme"]) == ["ecmp"]
