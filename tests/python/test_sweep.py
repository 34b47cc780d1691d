"""Sweeps, the results store and its DuckDB index, comparison tables and plots."""

import copy
import fcntl
import json
import os
import signal
import subprocess
import sys
import time
import tomllib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet as pq
import pytest

import pfcsim
from conftest import TINY_TOML
from pfcsim.sweep import (
    PointOutcome,
    PointTask,
    _task,
    check,
    execute,
    finished_keys,
    load_sweep,
    ray_backend,
    run_sweep,
)
from test_cli import cli, pfcsim_command

#: Schemes x loads x seeds over the tiny spec: 8 points.
SWEEP_TOML = """\
base = "spec.toml"

[grid]
lb.scheme = ["ecmp", "rps"]
"traffic[0].load" = [0.2, 0.4]
seed = [1, 2]
"""


@pytest.fixture
def sweep_file(tiny_file: Path) -> Path:
    """`sweep.toml` beside the tiny spec."""
    path = tiny_file.parent / "sweep.toml"
    path.write_text(SWEEP_TOML)
    return path


def test_grid_expands_in_order_with_the_last_key_fastest(sweep_file: Path) -> None:
    sweep = load_sweep(sweep_file)
    assert sweep.name == "sweep"
    labels = [p.label for p in sweep.points]
    assert len(labels) == 8
    assert labels[:3] == [
        "lb.scheme=ecmp traffic[0].load=0.2 seed=1",
        "lb.scheme=ecmp traffic[0].load=0.2 seed=2",
        "lb.scheme=ecmp traffic[0].load=0.4 seed=1",
    ]
    last = sweep.points[-1].spec
    assert last["lb"] == {"scheme": "rps"}
    assert last["traffic"][0]["load"] == 0.4
    assert last["seed"] == 2
    # The base spec is not modified by the expansion.
    assert "lb" not in sweep.base


def test_zip_groups_advance_together_and_cross_the_grid(tiny_file: Path) -> None:
    sweep = load_sweep(
        {
            "base": str(tiny_file),
            "grid": {"seed": [1, 2]},
            "zip": {
                "topology.host_link.rate": ["25Gbps", "100Gbps"],
                "topology.fabric_link.rate": ["25Gbps", "100Gbps"],
            },
        }
    )
    rates = [
        (
            p.spec["seed"],
            p.spec["topology"]["host_link"]["rate"],
            p.spec["topology"]["fabric_link"]["rate"],
        )
        for p in sweep.points
    ]
    assert rates == [
        (1, "25Gbps", "25Gbps"),
        (1, "100Gbps", "100Gbps"),
        (2, "25Gbps", "25Gbps"),
        (2, "100Gbps", "100Gbps"),
    ]


def test_grid_tables_are_a_union_of_products_each_crossed_with_the_zips(tiny_file: Path) -> None:
    sweep = load_sweep(
        {
            "base": str(tiny_file),
            "grid": [
                {"lb.scheme": ["ecmp"], "seed": [1, 2]},
                {"lb.scheme": ["rps", "ecmp"], "seed": [1]},
            ],
            "zip": {"traffic[0].load": [0.2, 0.4]},
        }
    )
    settings = [
        (p.index, p.spec["lb"]["scheme"], p.spec["seed"], p.spec["traffic"][0]["load"])
        for p in sweep.points
    ]
    assert settings == [
        (0, "ecmp", 1, 0.2),
        (1, "ecmp", 1, 0.4),
        (2, "ecmp", 2, 0.2),
        (3, "ecmp", 2, 0.4),
        (4, "rps", 1, 0.2),
        (5, "rps", 1, 0.4),
        (6, "ecmp", 1, 0.2),
        (7, "ecmp", 1, 0.4),
    ]
    # The two tables share their (ecmp, seed 1) points: they run once.
    distinct = check(sweep)
    assert [p.index for p in distinct] == [0, 1, 2, 3, 4, 5]


def test_a_tables_axis_is_applied_before_the_axes_of_keys_inside_it(tiny_file: Path) -> None:
    # Written after the load axis, the whole-generator axis must not wipe the load out.
    generator = {"kind": "poisson", "cdf": "web_search", "duration": "100us"}
    sweep = load_sweep(
        {
            "base": str(tiny_file),
            "grid": {"traffic[0].load": [0.2, 0.4], "traffic[0]": [generator]},
        }
    )
    assert [p.spec["traffic"][0] for p in sweep.points] == [
        {**generator, "load": 0.2},
        {**generator, "load": 0.4},
    ]


@pytest.mark.parametrize(
    ("sweep", "message"),
    [
        ({"grid": {"seed": [1]}}, "<dict>: missing key `base`: the spec to sweep"),
        ({"base": "spec.toml", "grids": {}}, "<dict>: unknown key `grids` in a sweep spec"),
        (
            {"base": "spec.toml", "grid": {"seed": 3}},
            "<dict>: grid.seed: expected a non-empty list of values, got 3",
        ),
        (
            {"base": "spec.toml", "grid": [{"seed": [1]}, {"seed": 2}]},
            "<dict>: grid[1].seed: expected a non-empty list of values, got 2",
        ),
        (
            {"base": "spec.toml", "grid": []},
            "<dict>: grid: expected a table (or a non-empty array of tables) of key = [values]",
        ),
        (
            {"base": "spec.toml", "zip": {"seed": [1, 2], "lb.scheme": ["ecmp"]}},
            "<dict>: zip: the lists of a zip must have equal lengths (seed has 2, lb.scheme has 1)",
        ),
        (
            {"base": "spec.toml", "grid": {"traffic[3].load": [0.1]}},
            "<dict>: `traffic[3].load`: the base spec has 1 entries in `traffic`, "
            "so traffic[3] does not exist",
        ),
        (
            {"base": "spec.toml", "grid": {"traffic[x].load": [0.1]}},
            "`traffic[x].load` is not a key path",
        ),
        ({"base": "missing.toml"}, "missing.toml: cannot read: No such file or directory"),
    ],
)
def test_bad_sweep_specs_name_the_key(tiny_file: Path, sweep: dict[str, Any], message: str) -> None:
    with pytest.raises(pfcsim.SpecError) as e:
        load_sweep(sweep, base_dir=tiny_file.parent)
    assert message in str(e.value)


def test_a_bad_point_is_rejected_before_anything_runs(sweep_file: Path, tmp_path: Path) -> None:
    sweep_file.write_text(SWEEP_TOML.replace("[0.2, 0.4]", "[0.2, 1.5]"))
    store = tmp_path / "store"
    with pytest.raises(pfcsim.SpecError) as e:
        pfcsim.sweep(sweep_file, out=store, workers=1)
    assert "point 2 (lb.scheme=ecmp traffic[0].load=1.5 seed=1)" in str(e.value)
    assert "traffic[0]" in str(e.value)
    assert not store.exists()


def test_points_with_equal_resolved_specs_share_one_key(tiny_file: Path) -> None:
    # ECMP's salt is 0 by default: both points resolve to the same spec.
    grid = {"lb": [{"scheme": "ecmp"}, {"scheme": "ecmp", "salt": 0}]}
    sweep = load_sweep({"base": "spec.toml", "grid": grid}, tiny_file.parent)
    assert len(sweep.points) == 2
    assert len(check(sweep)) == 1


def test_a_changed_input_file_changes_the_key(tmp_path: Path) -> None:
    cdf = tmp_path / "mine.cdf"
    cdf.write_text("1000 0\n10000 1\n")
    spec = tomllib.loads(TINY_TOML)
    spec["traffic"][0]["cdf"] = "mine.cdf"
    sweep = {"base": spec}
    before = check(load_sweep(sweep, tmp_path))[0].key
    cdf.write_text("1000 0\n20000 1\n")
    after = check(load_sweep(sweep, tmp_path))[0].key
    assert before != after


def test_sweep_runs_every_point_and_a_rerun_skips_them(sweep_file: Path, tmp_path: Path) -> None:
    store = tmp_path / "store"
    report = pfcsim.sweep(sweep_file, out=store, workers=2)
    assert report.complete
    assert len(report.ran) == 8
    assert finished_keys(store) == set(report.ran)
    for key in report.ran:
        folder = store / "runs" / key
        point = json.loads((folder / "point.json").read_text())
        assert point["key"] == key
        assert pfcsim.Results.from_folder(folder).stats["flows_finished"] > 0
    again = pfcsim.sweep(sweep_file, out=store, workers=2)
    assert again.ran == []
    assert sorted(again.skipped) == sorted(report.ran)


def test_a_failing_point_is_reported_and_the_others_finish(
    sweep_file: Path, tmp_path: Path
) -> None:
    sweep = load_sweep(sweep_file)
    points = check(sweep)
    doomed = points[3].key

    def backend(tasks: Iterable[PointTask]) -> Iterator[PointOutcome]:
        for task in tasks:
            if task.key == doomed:
                yield PointOutcome(task.key, None, "boom", 0.0)
            else:
                yield execute(task)

    store = tmp_path / "store"
    report = run_sweep(sweep, store, backend, points=points)
    assert report.failed == {doomed: "boom"}
    assert len(report.ran) == 7
    record = json.loads((store / "failed" / f"{doomed}.json").read_text())
    assert record["error"] == "boom"
    assert record["label"] == points[3].label
    # A rerun retries the failed point only, and forgets the failure once it ran.
    rerun = run_sweep(sweep, store, lambda tasks: map(execute, tasks), points=points)
    assert rerun.ran == [doomed]
    assert not (store / "failed" / f"{doomed}.json").exists()


def test_a_store_whose_points_all_failed_reads_as_empty(sweep_file: Path, tmp_path: Path) -> None:
    sweep = load_sweep(sweep_file)
    store = tmp_path / "store"
    run_sweep(sweep, store, lambda tasks: (PointOutcome(t.key, None, "boom", 0.0) for t in tasks))
    assert pfcsim.open_store(store).runs.empty
    done = cli("results", str(store), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"{store}: no finished run yet\n"
    assert "8 points failed" in done.stderr


def test_a_worker_reports_a_bad_point_instead_of_raising() -> None:
    outcome = execute(PointTask("k", "nonsense = [", "broken.toml", "."))
    assert outcome.files is None
    assert outcome.error is not None
    assert "broken.toml" in outcome.error


def test_a_sweep_killed_mid_way_resumes_losing_nothing(sweep_file: Path, tmp_path: Path) -> None:
    # 16 points run one at a time; SIGKILL the whole sweep once a few have finished.
    sweep_file.write_text(SWEEP_TOML.replace("seed = [1, 2]", "seed = [1, 2, 3, 4]"))
    store = tmp_path / "store"
    process = subprocess.Popen(
        [pfcsim_command(), "sweep", str(sweep_file), "-o", str(store), "-j", "1", "-q"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + 120
    while len(finished_keys(store)) < 3 and time.monotonic() < deadline:
        time.sleep(0.02)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    survived = finished_keys(store)
    assert 3 <= len(survived) < 16, "the kill must land mid-way"
    stamps = {k: (store / "runs" / k / "point.json").stat().st_mtime_ns for k in survived}

    done = cli("sweep", str(sweep_file), "-o", str(store), "-j", "2", "-q", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    summary = done.stdout.splitlines()[0]
    assert summary == f"16 points: {16 - len(survived)} ran, {len(survived)} already done, 0 failed"
    assert len(finished_keys(store)) == 16
    assert not list((store / "runs").glob("*.partial-*"))
    # The points that finished before the kill were not run again.
    for key, stamp in stamps.items():
        assert (store / "runs" / key / "point.json").stat().st_mtime_ns == stamp
    assert len(pfcsim.open_store(store).runs) == 16


@pytest.fixture(scope="module")
def local_ray() -> Iterator[Any]:
    """A local Ray instance of two CPUs, started once for the tests of this module."""
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


def test_ray_gives_the_same_results_as_the_process_pool(
    sweep_file: Path, tmp_path: Path, local_ray: Any
) -> None:
    pool = pfcsim.sweep(sweep_file, out=tmp_path / "pool", workers=2)
    ray = pfcsim.sweep(sweep_file, out=tmp_path / "ray", ray="local")
    assert sorted(pool.ran) == sorted(ray.ran)
    for key in pool.ran:
        a, b = tmp_path / "pool" / "runs" / key, tmp_path / "ray" / "runs" / key
        # Byte for byte, but stats.json (which holds the wall time).
        for name in ("flows.parquet", "ports.parquet", "summary.parquet", "spec.toml", "fct.txt"):
            assert (a / name).read_bytes() == (b / name).read_bytes(), (key, name)
        fingerprint = [json.loads((f / "stats.json").read_text())["fingerprint"] for f in (a, b)]
        assert fingerprint[0] == fingerprint[1]


def test_a_ray_sweep_takes_a_point_only_when_a_cpu_is_free(
    sweep_file: Path, local_ray: Any
) -> None:
    sweep = load_sweep(sweep_file)
    points = check(sweep)
    taken: list[str] = []

    def tasks() -> Iterator[PointTask]:
        for point in points:
            taken.append(point.key)  # the backend takes the task: the point is claimed
            yield _task(sweep, point)

    outcomes = ray_backend("local")(tasks())
    first = next(outcomes)
    # Two tasks for the two CPUs, then one for the CPU the first one freed.
    assert len(taken) == 3
    rest = list(outcomes)
    assert [o.error for o in [first, *rest]] == [None] * len(points)
    assert sorted(o.key for o in [first, *rest]) == sorted(p.key for p in points)


@pytest.fixture
def store(sweep_file: Path, tmp_path: Path) -> pfcsim.Store:
    """A store holding the finished 8-point sweep."""
    report = pfcsim.sweep(sweep_file, out=tmp_path / "store", workers=2)
    assert report.complete
    return pfcsim.open_store(report.store)


def test_duckdb_tables_match_the_parquet_files(store: pfcsim.Store) -> None:
    keys = sorted(finished_keys(store.path))
    for table, order in (("flows", "flow_id"), ("ports", "node, port"), ("summary", "rowid")):
        for key in keys:
            expected = pq.read_table(store.path / "runs" / key / f"{table}.parquet")
            got = store.arrow(
                f"SELECT * EXCLUDE (run_key) FROM {table} WHERE run_key = ? ORDER BY {order}",
                [key],
            )
            assert got.schema.names == expected.schema.names
            pd.testing.assert_frame_equal(got.to_pandas(), expected.to_pandas())
    runs = store.runs
    assert store.runs_pl["key"].to_list() == runs["key"].tolist()
    assert sorted(runs["key"]) == keys
    for _, run in runs.iterrows():
        folder = store.path / "runs" / run["key"]
        stats = json.loads((folder / "stats.json").read_text())
        assert run["fingerprint"] == f"{stats['fingerprint']:016x}"
        assert run["flows_finished"] == stats["flows_finished"]
        flows = pq.read_table(folder / "flows.parquet").to_pandas()
        assert run["ooo_arrivals"] == flows["ooo_arrivals"].sum()
        # The reordering and PFC rates of stats.json are columns too.
        for column in ("ooo_ratio", "ood_p50", "ood_p99", "ood_max", "data_packets_received"):
            assert run[column] == stats[column], column
        for column in ("pfc_pause_rate", "pfc_pauses_per_port_s"):
            assert run[column] == pytest.approx(stats[column]), column
        received = flows["packets_received"].sum()
        assert run["ooo_ratio"] == pytest.approx(flows["ooo_arrivals"].sum() / received)
        spec = tomllib.loads((folder / "spec.toml").read_text())
        assert run["lb.scheme"] == run["scheme"] == spec["lb"]["scheme"]
        assert run["traffic[0].load"] == run["load"] == spec["traffic"][0]["load"]
        # The edge buckets: below the first size bound and at or above the last one.
        bounds = [10_000, 10_000_000]  # the default run.size_buckets' first and last
        for name, sizes in (
            ("small", flows[flows["size_bytes"] < bounds[0]]),
            ("large", flows[flows["size_bytes"] >= bounds[1]]),
        ):
            assert run[f"{name}_flows"] == len(sizes), name
            done = sizes["fct_us"].dropna()
            if done.empty:
                assert pd.isna(run[f"{name}_fct_avg_us"]), name
            else:
                assert run[f"{name}_fct_avg_us"] == pytest.approx(done.mean()), name
        ports = pq.read_table(folder / "ports.parquet").to_pandas()
        assert run["peak_queue_bytes"] == ports["peak_queue_bytes"].max()


def test_incast_completion_times_come_from_the_last_flow_of_each_incast(
    tiny_dict: dict[str, Any], tmp_path: Path
) -> None:
    """Per run: the incasts and the mean and largest of last finish minus start.

    An incast is the flows of an incast generator with one start and one receiver; runs
    without incasts have none.
    """
    spec = copy.deepcopy(tiny_dict)
    spec["traffic"].append(
        {
            "kind": "incast",
            "receiver": 0,
            "senders": 3,
            "total_size": "300KB",
            "start": "100us",
            "period": "150us",
            "repeat": 3,
        }
    )
    sweep = {"base": spec, "grid": {"lb.scheme": ["ecmp"], "traffic[1].repeat": [1, 3]}}
    report = pfcsim.sweep(sweep, out=tmp_path / "store", workers=1)
    assert report.complete
    store = pfcsim.open_store(report.store)
    plain = pfcsim.sweep(
        {"base": tiny_dict, "grid": {"lb.scheme": ["ecmp"]}}, out=tmp_path / "store", workers=1
    )
    assert plain.complete
    runs = store.runs.set_index("key")
    assert len(runs) == 3
    seen = 0
    for key, run in runs.iterrows():
        flows = pq.read_table(store.path / "runs" / key / "flows.parquet").to_pandas()
        incast = flows[flows["source"] == "incast"]
        if incast.empty:
            assert run["incasts"] == 0
            assert run["incasts_finished"] == 0
            assert pd.isna(run["incast_ct_avg_us"])
            assert pd.isna(run["incast_ct_max_us"])
            continue
        seen += 1
        groups = incast.groupby(["dst", "start_ps"])
        times = (groups["finish_ps"].max() - groups["start_ps"].first()) / 1e6
        assert run["incasts"] == run["incasts_finished"] == len(times)
        assert len(times) == run["traffic[1].repeat"]
        assert run["incast_ct_avg_us"] == pytest.approx(times.mean())
        assert run["incast_ct_max_us"] == pytest.approx(times.max())
        # The last flow decides, not the average flow of the incast.
        assert run["incast_ct_avg_us"] > groups["fct_us"].mean().mean()
    assert seen == 2


def test_an_incast_with_an_unfinished_flow_has_no_completion_time(
    tiny_dict: dict[str, Any], tmp_path: Path
) -> None:
    spec = copy.deepcopy(tiny_dict)
    # Two generators at receiver 0 fire together: one incast, part of it unfinished at the
    # stop. The incast at receiver 1, at the same instant, is another one and finishes.
    incast = {"kind": "incast", "senders": 3, "start": "0us"}
    spec["traffic"] = [
        incast | {"receiver": 0, "total_size": "3MB"},
        incast | {"receiver": 0, "total_size": "30KB"},
        incast | {"receiver": 1, "total_size": "30KB"},
    ]
    spec["run"] = {"stop_at": "100us"}
    report = pfcsim.sweep({"base": spec}, out=tmp_path / "store", workers=1)
    assert report.complete
    (run,) = [r for _, r in pfcsim.open_store(report.store).runs.iterrows()]
    flows = pq.read_table(report.store / "runs" / run["key"] / "flows.parquet").to_pandas()
    small = flows[flows["dst"] == 1]
    merged = flows[flows["dst"] == 0]["finish_ps"]
    assert merged.isna().any()
    assert merged.notna().any()
    assert small["finish_ps"].notna().all()
    assert run["incasts"] == 2
    assert run["incasts_finished"] == 1
    expected = (small["finish_ps"].max() - small["start_ps"].min()) / 1e6
    assert run["incast_ct_avg_us"] == pytest.approx(expected)
    assert run["incast_ct_max_us"] == pytest.approx(expected)


def test_the_index_follows_deleted_run_folders(store: pfcsim.Store) -> None:
    import shutil

    victim = sorted(finished_keys(store.path))[0]
    shutil.rmtree(store.path / "runs" / victim)
    again = pfcsim.open_store(store.path)
    assert victim not in set(again.runs["key"])
    assert again.sql("SELECT count(*) AS n FROM flows WHERE run_key = ?", [victim])["n"][0] == 0


def test_each_run_records_the_pfcsim_version_that_made_it(store: pfcsim.Store) -> None:
    runs = store.runs
    assert set(runs["pfcsim_version"]) == {pfcsim.__version__}
    assert runs["finished_at"].notna().all()
    key = runs["key"][0]
    point = json.loads((store.path / "runs" / key / "point.json").read_text())
    assert point["pfcsim_version"] == pfcsim.__version__
    # A run of an older pfcsim, whose point.json has no version: NULL, not an error.
    del point["pfcsim_version"]
    (store.path / "runs" / key / "point.json").write_text(json.dumps(point))
    (store.path / "index.duckdb").unlink()
    runs = pfcsim.open_store(store.path).runs.set_index("key")
    assert runs["pfcsim_version"].isna()[key]
    assert runs["pfcsim_version"].notna().sum() == len(runs) - 1


@pytest.fixture(scope="module")
def monitored_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store of the tiny spec with a rate monitor, seeds 1 and 2 (copy it before changing it)."""
    spec = tomllib.loads(TINY_TOML)
    spec["monitor"] = [{"kind": "rate", "flows": [0], "min_spacing": "1us"}]
    out = tmp_path_factory.mktemp("monitored") / "store"
    report = pfcsim.sweep({"base": spec, "grid": {"seed": [1, 2]}}, out=out, workers=1)
    assert report.complete
    return out


def _copy_store(store: Path, to: Path) -> Path:
    """A copy of the run folders of `store` in `to`, without its index."""
    import shutil

    shutil.copytree(store / "runs", to / "runs")
    return to


def _make_old(folder: Path, columns: dict[str, Iterable[str]]) -> None:
    """Rewrites the run folder's tables without `columns` (table -> names), as older versions."""
    for table, names in columns.items():
        path = folder / f"{table}.parquet"
        pq.write_table(pq.read_table(path).drop(list(names)), path)


def test_the_columns_added_over_time_have_the_types_the_writers_give(
    monitored_store: Path,
) -> None:
    """`ADDED_COLUMNS`, which an index of older runs gets as NULL, is typed as runs are now."""
    from pfcsim.store import ADDED_COLUMNS

    store = pfcsim.open_store(monitored_store)
    for table, columns in ADDED_COLUMNS.items():
        types = dict(store.sql(f"DESCRIBE {table}")[["column_name", "column_type"]].values)
        assert {name: types.get(name) for name in columns} == columns, table


def test_a_store_of_runs_older_than_some_columns_opens_with_them_null(
    monitored_store: Path, tmp_path: Path
) -> None:
    """Runs written before a column existed: the index has it, NULL for them, and works."""
    from pfcsim.store import ADDED_COLUMNS

    path = _copy_store(monitored_store, tmp_path / "store")
    keys = sorted(finished_keys(path))
    for key in keys:  # every run old: no file has the columns (the tables are made from them)
        _make_old(path / "runs" / key, ADDED_COLUMNS)
    store = pfcsim.open_store(path)
    runs = store.runs.set_index("key")
    assert sorted(runs.index) == keys
    assert runs["traffic0_fct_us"].isna().all()  # from `generator`, NULL for every flow
    assert runs["lb_messages"].isna().all()
    assert (runs["flows_finished"] > 0).all()
    for table, columns in ADDED_COLUMNS.items():
        nulls = ", ".join(f"count({c}) AS {c}" for c in columns)
        counts = store.sql(f"SELECT count(*) AS n, {nulls} FROM {table}")
        assert counts["n"][0] > 0, table
        assert (counts[list(columns)] == 0).all(axis=None), table
    # A run of the current version added to that index has its values, the old ones NULL.
    report = pfcsim.sweep(
        {"base": tomllib.loads(TINY_TOML), "grid": {"seed": [3]}}, out=path, workers=1
    )
    assert report.complete
    (new,) = set(finished_keys(path)) - set(keys)
    flows = pfcsim.open_store(path).sql(
        "SELECT run_key, count(generator) AS tagged, count(*) AS n FROM flows GROUP BY run_key"
    )
    tagged = dict(zip(flows["run_key"], flows["tagged"] == flows["n"], strict=True))
    assert tagged == {new: True} | dict.fromkeys(keys, False)


def test_a_column_the_index_lacks_is_added_when_a_run_brings_it(
    monitored_store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A column of a newer run that the index of older runs lacks: added, not an error."""
    import pfcsim.store

    path = _copy_store(monitored_store, tmp_path / "store")
    old, new = sorted(finished_keys(path))
    newer = path.parent / "newer"
    (newer / "runs").mkdir(parents=True)
    (path / "runs" / new).rename(newer / "runs" / new)
    _make_old(path / "runs" / old, {"flows": ["dup_acks"]})
    # As if the column were new and not yet in `ADDED_COLUMNS`.
    monkeypatch.setattr(pfcsim.store, "ADDED_COLUMNS", {})
    store = pfcsim.open_store(path)
    assert "dup_acks" not in set(store.sql("DESCRIBE flows")["column_name"])
    (newer / "runs" / new).rename(path / "runs" / new)
    store = pfcsim.open_store(path)
    got = store.sql("SELECT run_key, count(dup_acks) AS n FROM flows GROUP BY run_key")
    counts = dict(zip(got["run_key"], got["n"], strict=True))
    assert counts[old] == 0
    assert counts[new] == pq.read_table(path / "runs" / new / "flows.parquet").num_rows > 0


@pytest.mark.parametrize(
    ("file", "content", "why"),
    [
        ("flows.parquet", b"PAR1 not a Parquet file", "flows.parquet: "),
        ("ports.parquet", b"", "ports.parquet: "),
        ("summary.parquet", b"PAR1", "summary.parquet: "),
        ("monitor_rate.parquet", b"x" * 100, "monitor_rate.parquet: "),
        ("stats.json", b"{", "stats.json: Expecting"),
        ("stats.json", b"[1]", "stats.json: a JSON list, not an object"),
        ("stats.json", b'{"end_ps": 1}', "stats.json: no fingerprint"),
        ("point.json", b"7", "point.json: a JSON int, not an object"),
        ("spec.toml", b"seed = ", "spec.toml: "),
    ],
)
def test_an_unreadable_run_is_named_with_its_file_and_why(
    monitored_store: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    file: str,
    content: bytes,
    why: str,
) -> None:
    from pfcsim.cli import main

    path = _copy_store(monitored_store, tmp_path / "store")
    victim = path / "runs" / sorted(finished_keys(path))[1]
    (victim / file).write_bytes(content)
    with pytest.raises(ValueError, match="unreadable") as error:
        pfcsim.open_store(path)
    assert f"run folder {victim} is unreadable: {why}" in str(error.value)
    assert main(["results", str(path)]) == 2
    assert capsys.readouterr() == ("", f"error: {error.value}\n")


def test_a_sweep_over_a_run_with_unreadable_stats_names_it(
    monitored_store: Path, tmp_path: Path
) -> None:
    """A sweep reads the stored runs' stats.json (which ended early): a broken one is named."""
    path = _copy_store(monitored_store, tmp_path / "store")
    victim = path / "runs" / sorted(finished_keys(path))[0]
    (victim / "stats.json").write_text("{")
    spec = tomllib.loads(TINY_TOML)
    spec["monitor"] = [{"kind": "rate", "flows": [0], "min_spacing": "1us"}]
    with pytest.raises(ValueError, match=f"run folder {victim} is unreadable: stats.json: "):
        pfcsim.sweep({"base": spec, "grid": {"seed": [1, 2]}}, out=path, workers=1)


def test_comparison_averages_seeds_per_scheme_and_load(store: pfcsim.Store) -> None:
    assert store.axes() == ["seed", "scheme", "load"]
    table = store.comparison("fct_p99_us")
    assert list(table.columns) == ["ecmp", "rps"]
    assert list(table.index) == [0.2, 0.4]
    runs = store.runs
    cell = runs[(runs["scheme"] == "rps") & (runs["load"] == 0.4)]["fct_p99_us"]
    assert len(cell) == 2
    assert table.loc[0.4, "rps"] == pytest.approx(cell.mean())


def test_results_command_prints_a_table_per_metric(store: pfcsim.Store, tmp_path: Path) -> None:
    done = cli("results", str(store.path), "-m", "fct_avg_us", "-m", "pfc_pauses", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == f"{store.path}: 8 runs; swept fields: seed, scheme, load"
    assert "fct_avg_us (mean over 2 seeds)" in lines
    assert "pfc_pauses (mean over 2 seeds)" in lines
    header = lines[lines.index("fct_avg_us (mean over 2 seeds)") + 1]
    assert header.split() == ["scheme", "ecmp", "rps"]
    sql = cli("results", str(store.path), "--sql", "SELECT count(*) AS n FROM runs", cwd=tmp_path)
    assert sql.stdout.split() == ["n", "8"]
    # A bad query is one error line, not DuckDB's traceback.
    for query, message in (
        ("SELEC 1", 'error: --sql: Parser Error: syntax error at or near "SELEC"\n'),
        ("SELECT * FROM nope", "error: --sql: Catalog Error: Table with name nope does not "),
    ):
        bad_sql = cli("results", str(store.path), "--sql", query, cwd=tmp_path)
        assert bad_sql.returncode == 2
        assert bad_sql.stderr.startswith(message), bad_sql.stderr
        assert bad_sql.stderr.count("\n") == 1, bad_sql.stderr
    bad = cli("results", str(store.path), "-m", "nope", cwd=tmp_path)
    assert bad.returncode == 2
    assert "error: no column 'nope' in the runs table" in bad.stderr


def test_plot_writes_every_figure_as_png_and_svg(store: pfcsim.Store, tmp_path: Path) -> None:
    out = tmp_path / "figures"
    done = cli("plot", str(store.path), "-o", str(out), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    for kind in ("fct-cdf", "vs-load", "buckets", "pause"):
        png, svg = out / f"{kind}.png", out / f"{kind}.svg"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", kind
        assert "<svg" in svg.read_text()[:1000], kind
    where = cli("plot", str(store.path), "-k", "fct-cdf", "--where", "load=9", cwd=tmp_path)
    assert where.returncode == 2
    assert "no run matches the --where filters" in where.stderr


def test_sweep_command_reports_and_exits_zero(sweep_file: Path, tmp_path: Path) -> None:
    done = cli("sweep", str(sweep_file), "-o", "store", "-q", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == "8 points: 8 ran, 0 already done, 0 failed"
    assert (tmp_path / "store" / "index.duckdb").is_file()
    assert (tmp_path / "store" / "sweeps" / "sweep.toml").read_text() == SWEEP_TOML


def test_a_point_a_guard_ends_is_stored_and_reported_incomplete(
    tiny_file: Path, tmp_path: Path
) -> None:
    (tmp_path / "guarded.toml").write_text(
        'base = "spec.toml"\n\n[grid]\n"run.max_events" = [1000, 100000000]\n'
    )
    done = cli("sweep", "guarded.toml", "-o", "store", "-q", cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "2 points: 2 ran, 0 already done, 0 failed"
    assert lines[1] == "1 point ended early (incomplete; results stored):"
    assert lines[2].split(": ", 1)[1].startswith("run.max_events (1000): the run stopped after ")
    store = pfcsim.open_store(tmp_path / "store")
    assert store.runs["incomplete"].notna().sum() == 1
    # A rerun runs nothing and says so again; the report lists the run.
    again = cli("sweep", "guarded.toml", "-o", "store", "-q", cwd=tmp_path)
    assert again.returncode == 1
    assert again.stdout.splitlines()[1:3] == lines[1:3]
    page = store.report().read_text()
    assert "runs ended early (incomplete)" in page
    assert "run.max_events (1000): the run stopped after " in page


def test_sweep_list_shows_points_and_their_state(sweep_file: Path, tmp_path: Path) -> None:
    first = cli("sweep", str(sweep_file), "-o", "store", "--list", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    lines = first.stdout.splitlines()
    assert lines[-1] == "8 points (8 before merging equal ones), 8 to run"
    assert lines[0].split()[0] == "0"
    assert lines[0].split()[2:] == ["to", "run", "lb.scheme=ecmp", "traffic[0].load=0.2", "seed=1"]
    assert not (tmp_path / "store").exists()
    # A point whose claim a live sweep holds is running, not to run.
    key = lines[0].split()[1]
    (tmp_path / "store" / "claims").mkdir(parents=True)
    claim = os.open(tmp_path / "store" / "claims" / key, os.O_RDWR | os.O_CREAT)
    fcntl.flock(claim, fcntl.LOCK_EX)
    try:
        held = cli("sweep", str(sweep_file), "-o", "store", "--list", cwd=tmp_path)
    finally:
        os.close(claim)
    assert held.stdout.splitlines()[0].split()[2] == "running"
    assert held.stdout.splitlines()[-1] == (
        "8 points (8 before merging equal ones), 7 to run, 1 running in another sweep"
    )
    cli("sweep", str(sweep_file), "-o", "store", "-q", cwd=tmp_path)
    again = cli("sweep", str(sweep_file), "-o", "store", "--list", cwd=tmp_path)
    assert again.stdout.splitlines()[-1] == "8 points (8 before merging equal ones), 0 to run"
    assert all(line.split()[2] == "done" for line in again.stdout.splitlines()[:-1])


def test_sweep_progress_lines_in_a_log(sweep_file: Path, tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pfcsim", "sweep", str(sweep_file), "-o", "s", "-j", "2"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    err = done.stderr.splitlines()
    assert err[0] == "sweep sweep: 8 points, 0 already done, 8 to run on 2 local processes"
    assert sum(" done in " in line for line in err) == 8


def test_the_runs_table_names_the_transport_of_every_run(tiny_file: Path, tmp_path: Path) -> None:
    """RoCE, the default, is left out of the resolved spec but named in the runs table."""
    sweep = tiny_file.parent / "transports.toml"
    sweep.write_text(
        'base = "spec.toml"\n[grid]\n"transport.kind" = ["roce", "tcp"]\n'
        '"transport.tcp.cc" = ["newreno"]\n'
    )
    report = pfcsim.sweep(sweep, out=tmp_path / "store", workers=1)
    assert report.complete
    runs = pfcsim.open_store(report.store).runs
    assert sorted(runs["transport.kind"]) == ["roce", "tcp"]
    roce = runs[runs["transport.kind"] == "roce"].iloc[0]
    assert "transport" not in (Path(report.store) / "runs" / roce["key"] / "spec.toml").read_text()
