"""Coflow traffic from Python (docs/reference/coflows.md).

The run's coflows table, ACCT in its stats, and a results store that indexes coflows like flows.
"""

import copy
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

import pfcsim

COFLOWS = {
    "kind": "coflow",
    "coflows": 4,
    "flows_per_coflow": [2, 4],
    "size": {"kind": "uniform", "min": "10KB", "max": "100KB"},
    "arrival": "together",
    "cross_tor_only": True,
}


def coflow_spec(tiny: dict[str, Any], **coflow: Any) -> dict[str, Any]:
    spec = copy.deepcopy(tiny)
    spec["traffic"].append(COFLOWS)
    spec.update(coflow)
    return spec


def test_a_run_with_coflows_writes_their_completion_times(
    tiny_dict: dict[str, Any], tmp_path: Path
) -> None:
    out = tmp_path / "run"
    res = pfcsim.run(coflow_spec(tiny_dict), out=out)
    coflows = res.coflows
    assert coflows is not None
    assert len(coflows) == 4
    assert list(coflows.columns) == [
        "coflow_id",
        "flows",
        "finished_flows",
        "bytes",
        "arrival_ps",
        "finish_ps",
        "cct_ps",
        "stalled_flows",
        "cct_us",
    ]
    flows = res.flows
    members = flows[flows["coflow"].notna()]
    # CCT: last finish of the coflow's flows minus its first start.
    by = members.groupby("coflow")
    assert list(coflows["coflow_id"]) == sorted(by.groups)
    assert list(coflows["cct_ps"]) == list(by["finish_ps"].max() - by["start_ps"].min())
    assert list(coflows["flows"]) == list(by.size())
    assert res.stats["coflows_total"] == res.stats["coflows_finished"] == 4
    assert res.stats["acct_us"] == pytest.approx(coflows["cct_us"].mean())
    assert res.stats["stalled_flow_ratio"] == pytest.approx(members["stalled"].mean())
    assert flows[flows["coflow"].isna()]["source"].eq("poisson").all()
    assert pfcsim.Results.from_folder(out).coflows.equals(coflows)
    # A run without coflows in the same folder leaves no stale table behind.
    again = pfcsim.run(tiny_dict, out=out)
    assert not (out / "coflows.parquet").exists()
    assert again.coflows is None
    assert "acct_us" not in again.stats


def test_varys_runs_under_any_scheme_and_the_store_indexes_coflows(
    tiny_dict: dict[str, Any], tmp_path: Path
) -> None:
    spec = coflow_spec(tiny_dict, coflow={"scheduler": "varys"})
    sweep = {"base": spec, "grid": {"lb.scheme": ["ecmp", "letflow"]}}
    report = pfcsim.sweep(sweep, out=tmp_path / "store", workers=1)
    assert report.complete
    plain = pfcsim.sweep(
        {"base": tiny_dict, "grid": {"lb.scheme": ["ecmp"]}}, out=tmp_path / "store", workers=1
    )
    assert plain.complete
    store = pfcsim.open_store(report.store)
    runs = store.runs.set_index("key")
    assert len(runs) == 3
    for key, run in runs.iterrows():
        path = store.path / "runs" / key / "coflows.parquet"
        if run["coflow.scheduler"] != "varys":
            assert not path.exists()
            assert run["acct_us"] != run["acct_us"]  # NaN: no coflows
            continue
        table = pq.read_table(path).to_pandas()
        indexed = store.sql(
            "SELECT * EXCLUDE (run_key) FROM coflows WHERE run_key = ? ORDER BY coflow_id", [key]
        )
        assert list(indexed.columns) == list(table.columns)
        assert list(indexed["cct_ps"]) == list(table["cct_ps"])
        assert run["acct_us"] == pytest.approx(table["cct_us"].mean())


def test_bad_coflow_keys_name_the_key(tiny_dict: dict[str, Any]) -> None:
    spec = coflow_spec(tiny_dict)
    spec["traffic"][1] = {**COFLOWS, "arrival": "poisson_flow"}
    with pytest.raises(pfcsim.SpecError, match=r"traffic\[1\]\.lambda: missing"):
        pfcsim.run(spec)
    with pytest.raises(pfcsim.SpecError, match=r"coflow\.scheduler: \"varys\" schedules coflows"):
        pfcsim.run({**tiny_dict, "coflow": {"scheduler": "varys"}})
