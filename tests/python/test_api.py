"""The library functions: run, validate, schemes, workloads."""

import sys
import threading
import time
from pathlib import Path
from typing import Any

import pandas as pd
import polars as pl
import pyarrow.parquet as pq
import pytest

import pfcsim

RUN_FOLDER_FILES = {
    "spec.toml",
    "flows.parquet",
    "ports.parquet",
    "summary.parquet",
    "summary.txt",
    "stats.json",
    "fct.txt",
    "deadlocks.parquet",
}


def test_run_dict_gives_tables_that_match_the_stats(tiny_dict: dict[str, Any]) -> None:
    res = pfcsim.run(tiny_dict)
    assert res.path is None
    stats = res.stats
    assert stats["flows_total"] == 14
    assert stats["flows_finished"] == stats["flows_total"]
    assert isinstance(res.flows, pd.DataFrame)
    assert isinstance(res.flows_pl, pl.DataFrame)
    assert len(res.flows) == res.flows_pl.height == stats["flows_total"]
    assert int(res.flows["fct_ps"].notna().sum()) == stats["flows_finished"]
    assert int(res.flows["size_bytes"].sum()) == stats["bytes_delivered"]
    # 4 host links and 4 leaf-spine links, one port at each end.
    assert len(res.ports) == res.ports_pl.height == 16
    # "all", then the 5 buckets of the default bounds.
    assert res.summary["bucket"].tolist() == [
        "all",
        "<10KB",
        "10KB-100KB",
        "100KB-1MB",
        "1MB-10MB",
        ">=10MB",
    ]
    assert res.summary_pl["flows"][0] == stats["flows_total"]
    assert 'scheme = "ecmp"' in res.spec
    assert res.fingerprint == f"{stats['fingerprint']:016x}"


def test_flows_that_did_not_finish_have_nulls(tiny_dict: dict[str, Any]) -> None:
    tiny_dict["run"] = {"stop_at": "200us"}
    res = pfcsim.run(tiny_dict)
    unfinished = res.stats["flows_total"] - res.stats["flows_finished"]
    assert unfinished > 0
    assert str(res.flows["fct_ps"].dtype) == "UInt64"
    assert int(res.flows["fct_ps"].isna().sum()) == unfinished
    assert int(res.flows["slowdown"].isna().sum()) == unfinished
    assert res.flows_pl["fct_ps"].null_count() == unfinished


def test_a_guard_ends_the_run_with_an_error_holding_the_results(
    tiny_dict: dict[str, Any], tmp_path: Path
) -> None:
    tiny_dict["run"] = {"max_events": 1000}
    out = tmp_path / "run"
    with pytest.raises(pfcsim.IncompleteRunError) as caught:
        pfcsim.run(tiny_dict, out=out)
    message = str(caught.value)
    assert message.startswith("run.max_events (1000): the run stopped after 1000 events, at ")
    res = caught.value.results
    assert res.stats["events"] == 1000
    assert res.stats["incomplete"] == message
    assert res.stats["flows_finished"] < res.stats["flows_total"]
    assert pfcsim.Results.from_folder(out).stats == res.stats
    assert f"incomplete: {message}" in res.report()
    # Not reached, a guard changes nothing.
    tiny_dict["run"] = {"max_events": 10**9, "max_sim_time": "10s"}
    guarded = pfcsim.run(tiny_dict)
    assert "incomplete" not in guarded.stats
    del tiny_dict["run"]
    assert guarded.fingerprint == pfcsim.run(tiny_dict).fingerprint


def test_same_spec_same_fingerprint_other_seed_other_fingerprint(
    tiny_dict: dict[str, Any],
) -> None:
    first = pfcsim.run(tiny_dict).stats["fingerprint"]
    assert pfcsim.run(tiny_dict).stats["fingerprint"] == first
    assert pfcsim.run({**tiny_dict, "seed": 2}).stats["fingerprint"] != first


def test_file_and_dict_specs_run_the_same(tiny_file: Path, tiny_dict: dict[str, Any]) -> None:
    assert pfcsim.run(tiny_file).fingerprint == pfcsim.run(tiny_dict).fingerprint


def test_run_writes_the_run_folder(tiny_dict: dict[str, Any], tmp_path: Path) -> None:
    out = tmp_path / "runs" / "tiny"
    res = pfcsim.run(tiny_dict, out=out)
    assert res.path == out
    assert {p.name for p in out.iterdir()} == RUN_FOLDER_FILES
    assert (out / "spec.toml").read_text() == res.spec
    report = res.report()
    assert f"fingerprint {res.fingerprint}" in report
    assert report.endswith(f"results in {out}")
    saved = pfcsim.Results.from_folder(out)
    assert saved.stats == res.stats
    assert saved.flows.equals(res.flows)
    assert saved.report().splitlines()[0] == report.splitlines()[0]


def test_pause_rate_is_the_paused_share_of_pausable_port_time_in_ports_parquet(
    tiny_dict: dict[str, Any], tmp_path: Path
) -> None:
    # Three senders at line rate into one receiver of the tiny fabric trigger PFC.
    spec = {
        **tiny_dict,
        "cc": {"kind": "none"},
        "traffic": [{"kind": "incast", "receiver": 0, "senders": 3, "total_size": "3MB"}],
    }
    out = tmp_path / "incast"
    res = pfcsim.run(spec, out=out)
    stats = res.stats
    ports = pq.read_table(out / "ports.parquet").to_pandas()
    # Pausable ports: those whose peer is a switch (PAUSE frames come from switches only).
    switches = set(ports.loc[ports["is_switch"], "node"])
    pausable = ports[ports["peer"].isin(switches)]
    assert len(pausable) == 12  # 4 host NICs and both ends of 4 leaf-spine links
    seconds = (stats["end_ps"] - stats["measure_from_ps"]) / 1e12
    port_time_ps = len(pausable) * seconds * 1e12
    rate = pausable["paused_time_ps"].sum() / port_time_ps
    frames = ports["pfc_pauses_sent"].sum() / (len(pausable) * seconds)
    assert 0 < stats["pfc_pause_rate"] < 1
    assert stats["pfc_pause_rate"] == pytest.approx(rate, rel=1e-12)
    assert stats["pfc_pauses_per_port_s"] == pytest.approx(frames, rel=1e-12)
    # One path per flow: nothing arrives out of order.
    assert (stats["ooo_arrivals"], stats["ooo_ratio"], stats["ood_p99"]) == (0, 0.0, 0)
    assert stats["data_packets_received"] == res.flows["packets_received"].sum() == 3000
    assert "PFC pause rate" in res.report()


def test_spraying_reports_the_out_of_order_ratio_and_degrees(tiny_dict: dict[str, Any]) -> None:
    res = pfcsim.run({**tiny_dict, "lb": {"scheme": "rps"}})
    stats, flows = res.stats, res.flows
    assert stats["ooo_arrivals"] == flows["ooo_arrivals"].sum() > 0
    assert stats["data_packets_received"] == flows["packets_received"].sum()
    assert stats["ooo_ratio"] == stats["ooo_arrivals"] / stats["data_packets_received"]
    assert 1 <= stats["ood_p50"] <= stats["ood_p99"] <= stats["ood_max"]
    assert stats["ood_max"] == flows["max_ooo_degree"].max()
    assert "out-of-order ratio" in res.report()


def test_conweave_writes_its_reorder_queue_log(tiny_dict: dict[str, Any], tmp_path: Path) -> None:
    out = tmp_path / "cw"
    res = pfcsim.run({**tiny_dict, "lb": {"scheme": "conweave"}}, out=out)
    assert {p.name for p in out.iterdir()} == RUN_FOLDER_FILES | {"reorder_queues.parquet"}
    log = pl.read_parquet(out / "reorder_queues.parquet")
    assert log.columns == ["time_ps", "port_id", "node", "port", "in_use"]
    assert {"reorder_queues_max", "reorder_queues_mean"} <= set(res.ports.columns)
    assert res.reorder_queues_pl.equals(log)
    assert pfcsim.Results.from_folder(out).reorder_queues.equals(res.reorder_queues)
    # Another scheme in the same folder leaves no stale log behind.
    again = pfcsim.run(tiny_dict, out=out)
    assert {p.name for p in out.iterdir()} == RUN_FOLDER_FILES
    assert again.reorder_queues is None


def test_relative_paths_of_a_dict_resolve_against_base_dir(
    tiny_dict: dict[str, Any], tmp_path: Path
) -> None:
    (tmp_path / "sizes.cdf").write_text("1000 0\n5000 1\n")
    tiny_dict["traffic"][0]["cdf"] = "sizes.cdf"
    info = pfcsim.validate(tiny_dict, base_dir=tmp_path)
    assert info["flows"] > 0
    res = pfcsim.run(tiny_dict, base_dir=tmp_path)
    assert res.flows["size_bytes"].between(1000, 5000).all()


def test_validate_summarizes(tiny_file: Path) -> None:
    info = pfcsim.validate(tiny_file)
    assert {k: info[k] for k in ("name", "hosts", "switches", "flows", "scheme")} == {
        "name": "tiny",
        "hosts": 4,
        "switches": 4,
        "flows": 14,
        "scheme": "ecmp",
    }
    assert 0 <= info["first_start_s"] <= info["last_start_s"] < 1e-3


def test_progress_callable_sees_simulated_time(tiny_dict: dict[str, Any]) -> None:
    seen: list[float] = []
    res = pfcsim.run(tiny_dict, progress=seen.append)
    assert seen
    assert seen == sorted(seen)
    assert seen[-1] == pytest.approx(res.stats["end_ps"] * 1e-12)


def test_progress_bar_runs(tiny_dict: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    pfcsim.run(tiny_dict, progress=True)
    assert "<dict>: 14 flows on 4 hosts, scheme ecmp" in capsys.readouterr().err


def test_an_exception_in_the_progress_callable_abandons_the_run(
    tiny_dict: dict[str, Any], tmp_path: Path
) -> None:
    class Stop(Exception):
        pass

    def stop(now: float) -> None:
        raise Stop(now)

    with pytest.raises(Stop):
        pfcsim.run(tiny_dict, out=tmp_path / "out", progress=stop)
    assert not (tmp_path / "out").exists()


def test_other_threads_run_while_a_simulation_runs(tiny_dict: dict[str, Any]) -> None:
    # A thread counts while the simulation runs in this one; the progress calls sample the
    # count. The switch interval is made longer than the run, so the GIL is never taken away
    # from a thread that holds it: the count can only move between two progress calls if the
    # simulation released the GIL.
    tiny_dict["topology"].update(leaves=4, spines=4, hosts_per_leaf=8)
    counter = 0
    done = threading.Event()

    def count() -> None:
        nonlocal counter
        while not done.is_set():
            counter += 1
            time.sleep(0.001)  # lets the simulation take the GIL back for a progress call

    samples: list[int] = []
    counting = threading.Thread(target=count)
    interval = sys.getswitchinterval()
    sys.setswitchinterval(30.0)
    counting.start()
    try:
        res = pfcsim.run(tiny_dict, progress=lambda _now: samples.append(counter))
    finally:
        done.set()
        counting.join()
        sys.setswitchinterval(interval)
    assert res.stats["events"] > 2**20  # several progress calls
    assert len(samples) >= 4
    assert samples[-1] > samples[0]


def test_schemes_list_their_defaults() -> None:
    schemes = {s["name"]: s for s in pfcsim.schemes()}
    assert set(schemes) == {
        "ecmp",
        "rps",
        "drb",
        "letflow",
        "drill",
        "conga",
        "hula",
        "conweave",
        "presto",
        "hermes",
        "rlb",
        "plb",
        "lbodsn",
        "clove",
        "clb",
        "flb",
    }
    assert schemes["ecmp"]["defaults"] == {"salt": 0}
    assert schemes["rps"]["defaults"] == {}
    assert schemes["drb"]["defaults"] == {"order": "round_robin"}
    assert schemes["letflow"]["defaults"] == {
        "flowlet_timeout": "100us",
        "table_size": 65536,
        "decision": "every_switch",
    }
    assert schemes["drill"]["defaults"] == {"d": 2, "m": 1, "queue": "priority"}
    assert schemes["presto"]["defaults"] == {
        "flowcell": "64KB",
        "resequence": True,
        "reorder_timeout": "100us",
        "reorder_buffer": 256,
    }
    assert schemes["clove"]["defaults"] == {
        "mode": "ecn",
        "flowlet_timeout": "50us",
        "half_rtt": "4us",
        "weight_cut": pytest.approx(1 / 3),
        "weight_recovery": "0ps",
    }
    assert all(s["doc"] for s in schemes.values())


def test_workloads_list_mean_and_max() -> None:
    workloads = {w["name"]: w for w in pfcsim.workloads()}
    assert "web_search" in workloads
    assert all(0 < w["mean"] <= w["max"] for w in workloads.values())


def test_a_spec_is_a_path_or_a_dict() -> None:
    with pytest.raises(TypeError, match="path to a TOML file or a dict"):
        pfcsim.validate(42)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"tomllib\.loads"):
        pfcsim.validate('name = "x"\n[topology]\n')
