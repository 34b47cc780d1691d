"""PFC deadlocks from Python: a run that one ends, and its `deadlocks` table.

`Results` and a results store read the table (docs/reference/fabric.md, "PFC deadlocks").
"""

from pathlib import Path
from typing import Any

import pytest

import pfcsim

#: Five switches in a ring (nodes 5..9), one host on each (host i on switch 5 + i).
RING = Path(__file__).resolve().parents[1] / "data" / "ring5.topo"
#: The ring's clockwise egresses as (switch, port, peer): the cycle of its deadlock.
CYCLE = [(5, 1, 6), (6, 2, 7), (7, 2, 8), (8, 2, 9), (9, 2, 5)]
COLUMNS = [
    "deadlock",
    "detected_ps",
    "formed_ps",
    "node",
    "port",
    "peer",
    "priority",
    "paused_since_ps",
    "stuck_bytes",
]


def ring(senders: range = range(5)) -> dict[str, Any]:
    """Host i sends 10 MB to host i + 2 along the ring; with all five, routes form a cycle."""
    flows = [{"src": i, "dst": (i + 2) % 5, "size": "10MB"} for i in senders]
    return {
        "topology": {"kind": "ns3_file", "path": str(RING)},
        "cc": {"kind": "none"},
        "traffic": [{"kind": "scripted", "flows": flows}],
    }


def test_a_deadlock_ends_the_run_and_results_read_its_table(
    tiny_dict: dict[str, Any], tmp_path: Path
) -> None:
    out = tmp_path / "ring"
    with pytest.raises(pfcsim.IncompleteRunError) as caught:
        pfcsim.run(ring(), out=out)
    assert str(caught.value).startswith('run.deadlock_check ("1ms"): a PFC deadlock, found at ')
    res = caught.value.results
    table = res.deadlocks
    assert table is not None
    assert list(table.columns) == COLUMNS
    assert list(zip(table["node"], table["port"], table["peer"], strict=True)) == CYCLE
    assert set(table["priority"]) == {3}
    formed = table["formed_ps"].iloc[0]
    assert res.stats["deadlocks"] == 1
    assert res.stats["deadlock_formed_ps"] == formed
    assert res.stats["deadlock_cycles"].startswith("priority 3: switch 5 port 1 -> 6, ")
    assert res.stats["end_ps"] == table["detected_ps"].iloc[0]
    assert pfcsim.Results.from_folder(out).deadlocks.equals(table)
    # A run without a deadlock has the table, empty.
    plain = pfcsim.run(tiny_dict, out=out)
    assert plain.deadlocks is not None
    assert list(plain.deadlocks.columns) == COLUMNS
    assert len(plain.deadlocks) == 0
    assert plain.stats["deadlocks"] == 0
    assert "deadlock_cycles" not in plain.stats


def test_the_store_indexes_the_deadlocks_table(tmp_path: Path) -> None:
    store_path = tmp_path / "store"
    for senders in (range(5), range(4)):
        sweep = {"base": ring(senders), "grid": {"seed": [1]}}
        assert pfcsim.sweep(sweep, out=store_path, workers=1).complete
    store = pfcsim.open_store(store_path)
    runs = store.sql("SELECT key, deadlocks, flows_finished FROM runs ORDER BY deadlocks")
    assert list(runs["deadlocks"]) == [0, 1]
    assert list(runs["flows_finished"]) == [4, 0]
    deadlocked = runs["key"].iloc[1]
    rows = store.sql("SELECT * FROM deadlocks ORDER BY node")
    assert list(rows.columns) == ["run_key", *COLUMNS]
    assert set(rows["run_key"]) == {deadlocked}
    assert list(zip(rows["node"], rows["port"], rows["peer"], strict=True)) == CYCLE
