"""Experiments: `pfcsim reproduce` runs a sweep, draws its figures and tabulates its claims."""

import csv
import dataclasses
import shutil
from pathlib import Path

import pandas as pd
import pytest

import pfcsim
from conftest import TINY_TOML
from pfcsim import plots, reproduce
from pfcsim.plots import FigureRequest
from test_cli import cli

#: The repository's experiments.
REPO_EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"

TINY_EXPERIMENT = """\
title = "Tiny: ECMP vs RPS"
source = "a test experiment"
sweep = "sweep.toml"

[quick]
note = "one load, 0.5 ms"
set = { "traffic[0].duration" = "0.5ms" }
grid = { "traffic[0].load" = [0.3] }

[[figure]]
name = "p99"
kind = "lines"
y = "fct_p99_us"

[[figure]]
name = "retx"
kind = "bars"
x = "scheme"
y = "retransmitted_bytes"
series = "load"
xlabel = "load balancer"

[[claim]]
text = "RPS cuts the p99 FCT by up to 10% against ECMP"
metric = "fct_p99_us"
compare = "reduction"
series = "rps"
baseline = "ecmp"
over = "max"
paper = 0.10

[[claim]]
text = "RPS reorders packets"
metric = "ooo_ratio"
series = "rps"
over = "mean"
"""

TINY_SWEEP = """\
base = "spec.toml"
[grid]
lb.scheme = ["ecmp", "rps"]
"traffic[0].load" = [0.2, 0.4]
seed = [1, 2]
"""


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """An experiments folder with the one experiment `demo/tiny`."""
    folder = tmp_path / "experiments" / "demo" / "tiny"
    folder.mkdir(parents=True)
    (folder / "spec.toml").write_text(TINY_TOML)
    (folder / "sweep.toml").write_text(TINY_SWEEP)
    (folder / "experiment.toml").write_text(TINY_EXPERIMENT)
    return tmp_path / "experiments"


def test_list_names_every_experiment(root: Path, tmp_path: Path) -> None:
    done = cli("reproduce", "--list", "--experiments", str(root), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[0].split() == ["demo/tiny", "Tiny:", "ECMP", "vs", "RPS"]


def test_list_orders_numbers_in_names_numerically(root: Path) -> None:
    for name in ("fig12", "fig3"):
        shutil.copytree(root / "demo" / "tiny", root / "demo" / name)
    names = [e.name for e in reproduce.list_experiments(root)]
    assert names == ["demo/fig3", "demo/fig12", "demo/tiny"]


def test_quick_run_draws_the_figures_and_tabulates_the_claims(root: Path, tmp_path: Path) -> None:
    done = cli("reproduce", "demo/tiny", "--quick", "-q", "--experiments", str(root), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    store = tmp_path / "results" / "reproduce" / "demo" / "tiny-quick"
    for name in ("p99", "retx"):
        assert (store / "figures" / f"{name}.png").read_bytes()[:4] == b"\x89PNG"
        assert "<svg" in (store / "figures" / f"{name}.svg").read_text()[:1000]
    assert "quick run" in done.stdout
    # The quick sweep: one load (0.3), 0.5 ms of arrivals, both schemes and seeds.
    runs = pfcsim.open_store(store).runs
    assert sorted(set(runs["load"])) == [0.3]
    assert len(runs) == 4
    assert set(runs["traffic[0].duration"]) == {"500us"}
    rows = list(csv.DictReader((store / "claims.csv").open()))
    assert [r["claim"] for r in rows] == [
        "RPS cuts the p99 FCT by up to 10% against ECMP",
        "RPS reorders packets",
    ]
    assert float(rows[0]["paper"]) == 0.1
    # A claim takes a run-wide rate of stats.json by its column name.
    ooo = runs[runs["scheme"] == "rps"]["ooo_ratio"].mean()
    assert rows[1]["metric"] == "ooo_ratio"
    assert float(rows[1]["ours"]) == pytest.approx(ooo)
    assert ooo > 0
    assert "RPS cuts the p99 FCT" in done.stdout
    assert "report: results/reproduce/demo/tiny-quick/report.html" in done.stdout.splitlines()
    assert (store / "report.html").read_text().startswith("<!DOCTYPE html>")


# The tests below skip the HTML report (seconds each); test_report.py tests it.


def test_figures_and_claims_take_only_the_runs_of_the_current_sweep(
    root: Path, tmp_path: Path
) -> None:
    out = tmp_path / "store"
    reproduce.reproduce(
        reproduce.load_experiment(root, "demo/tiny"), quick=True, out=out, report=False
    )
    # The experiment changes its load: the store keeps the old runs beside the new ones.
    text = TINY_EXPERIMENT.replace('"traffic[0].load" = [0.3]', '"traffic[0].load" = [0.5]')
    (root / "demo" / "tiny" / "experiment.toml").write_text(text)
    result = reproduce.reproduce(
        reproduce.load_experiment(root, "demo/tiny"), quick=True, out=out, report=False
    )
    runs = pfcsim.open_store(out).runs
    assert sorted(set(runs["load"])) == [0.3, 0.5]
    rps = runs[runs["scheme"] == "rps"]
    current = rps[rps["load"] == 0.5]["ooo_ratio"].mean()
    assert result.claims[1]["ours"] == pytest.approx(current)
    assert rps["ooo_ratio"].mean() != pytest.approx(current)
    # The view behind the figures: the current runs, whose only axes are scheme and seed.
    keys = set(runs[runs["load"] == 0.5]["key"])
    view = pfcsim.open_store(out).only(keys)
    assert set(view.runs["key"]) == keys
    assert sorted(view.axes()) == ["scheme", "seed"]
    assert set(view.runs_pl["key"]) == keys


def test_a_claim_naming_a_series_without_runs_says_which_series_exist(
    root: Path, tmp_path: Path
) -> None:
    misnamed = (
        '\n[[claim]]\ntext = "misnamed"\nmetric = "fct_p99_us"\ncompare = "reduction"\n'
        'series = "RPS"\nbaseline = "ecmp"\n'
        '\n[[claim]]\ntext = "no such load"\nmetric = "fct_p99_us"\nseries = "rps"\n'
        "where = { load = 0.9 }\n"
    )
    (root / "demo" / "tiny" / "experiment.toml").write_text(TINY_EXPERIMENT + misnamed)
    experiment = reproduce.load_experiment(root, "demo/tiny")
    result = reproduce.reproduce(experiment, quick=True, out=tmp_path / "store", report=False)
    notes = {row["claim"]: row["note"] for row in result.claims}
    assert notes["RPS cuts the p99 FCT by up to 10% against ECMP"] == ""
    assert notes["misnamed"] == "no run of series 'RPS' (the series of scheme here: ecmp, rps)"
    assert notes["no such load"] == "no run matches where { load = 0.9 }"
    table = reproduce.format_claims(result.claims)
    assert "- misnamed: no run of series 'RPS'" in table
    rows = list(csv.DictReader((tmp_path / "store" / "claims.csv").open()))
    assert rows[2]["note"] == notes["misnamed"]


def test_a_quick_zip_replaces_the_zip_groups_of_the_sweep(root: Path) -> None:
    folder = root / "demo" / "tiny"
    sweep = TINY_SWEEP.replace('"traffic[0].load" = [0.2, 0.4]\n', "")
    sweep += '[zip]\n"traffic[0].load" = [0.2, 0.4]\n"traffic[0].duration" = ["1ms", "2ms"]\n'
    (folder / "sweep.toml").write_text(sweep)
    experiment = reproduce.load_experiment(root, "demo/tiny")
    loads = {
        (p.spec["traffic"][0]["load"], p.spec["traffic"][0]["duration"])
        for p in experiment.sweep(quick=False).points
    }
    assert loads == {(0.2, "1ms"), (0.4, "2ms")}
    # The quick variant's own zip replaces the sweep's, and its `set` still applies.
    text = TINY_EXPERIMENT.replace(
        '"traffic[0].load" = [0.3] }',
        '"traffic[0].load" = [0.3] }\nzip = { "traffic[0].load" = [0.1], seed = [7] }',
    )
    (folder / "experiment.toml").write_text(text)
    quick = reproduce.load_experiment(root, "demo/tiny").sweep(quick=True)
    settings = {
        (p.spec["traffic"][0]["load"], p.spec["traffic"][0]["duration"], p.spec["seed"])
        for p in quick.points
    }
    assert settings == {(0.1, "0.5ms", 7)}


def test_quick_axes_apply_to_every_grid_table_of_the_sweep(root: Path) -> None:
    folder = root / "demo" / "tiny"
    sweep = TINY_SWEEP.replace("[grid]", "[[grid]]")
    sweep += '[[grid]]\nlb.scheme = ["rps"]\n"traffic[0].load" = [0.6]\nseed = [3, 4, 5]\n'
    (folder / "sweep.toml").write_text(sweep)
    experiment = reproduce.load_experiment(root, "demo/tiny")
    assert len(experiment.sweep(quick=False).points) == 8 + 3
    # The quick load replaces each table's loads; the tables keep their own seeds.
    quick = experiment.sweep(quick=True)
    settings = [
        (p.spec["lb"]["scheme"], p.spec["traffic"][0]["load"], p.spec["seed"]) for p in quick.points
    ]
    assert settings == [
        ("ecmp", 0.3, 1),
        ("ecmp", 0.3, 2),
        ("rps", 0.3, 1),
        ("rps", 0.3, 2),
        ("rps", 0.3, 3),
        ("rps", 0.3, 4),
        ("rps", 0.3, 5),
    ]


def test_a_figure_draws_its_own_x_label(root: Path, tmp_path: Path) -> None:
    from pfcsim import plots

    experiment = reproduce.load_experiment(root, "demo/tiny")
    lines, bars = experiment.figures
    assert (lines.xlabel, bars.xlabel) == (None, "load balancer")
    result = reproduce.reproduce(
        experiment, quick=True, out=tmp_path / "store", workers=1, report=False
    )
    store = pfcsim.open_store(result.store)
    runs = plots._selected_runs(store, bars)
    assert plots._generic(store, runs, bars).axes[0].get_xlabel() == "load balancer"
    runs = plots._selected_runs(store, lines)
    axes = plots._generic(store, runs, lines).axes[0]
    assert axes.get_xlabel() == "offered load (of host capacity)"
    # Numbers on the x axis stay upright; text categories are slanted.
    assert {t.get_rotation() for t in axes.get_xticklabels()} == {0.0}
    by_scheme = dataclasses.replace(lines, x="scheme")
    axes = plots._generic(store, runs, by_scheme).axes[0]
    assert {t.get_rotation() for t in axes.get_xticklabels()} == {30.0}
    # Bars likewise, with the same categories in every panel.
    bars = dataclasses.replace(by_scheme, kind="bars", panels="seed")
    figure = plots._generic(store, runs, bars)
    ticks = [[t.get_text() for t in ax.get_xticklabels()] for ax in figure.axes]
    assert ticks[0] == ticks[1]
    assert sorted(ticks[0]) == ["ecmp", "rps"]
    assert {t.get_rotation() for ax in figure.axes for t in ax.get_xticklabels()} == {30.0}
    # Series named by the x field: one centred, full-width bar per category.
    alone = dataclasses.replace(bars, series="scheme", panels=None)
    figure = plots._generic(store, runs, alone)
    drawn = [bar for bars in figure.axes[0].containers for bar in bars]
    centres = sorted(bar.get_x() + bar.get_width() / 2 for bar in drawn if bar.get_height() > 0)
    assert centres == pytest.approx([0.0, 1.0])
    assert [bar.get_width() for bar in drawn] == pytest.approx([0.8] * len(drawn))


def test_a_reduction_claim_is_the_largest_over_the_loads_of_the_seed_means(root: Path) -> None:
    experiment = reproduce.load_experiment(root, "demo/tiny")
    result = reproduce.reproduce(
        experiment, quick=False, out=root.parent / "store", workers=2, report=False
    )
    runs = pfcsim.open_store(result.store).runs
    p99 = runs.groupby(["scheme", "load"])["fct_p99_us"].mean()
    expected = max(1 - p99["rps", load] / p99["ecmp", load] for load in (0.2, 0.4))
    claim, _ = result.claims
    assert claim["ours"] == pytest.approx(expected)
    assert claim["ratio"] == pytest.approx(expected / 0.10)


def test_a_reduction_against_a_baseline_of_zero_has_no_value(root: Path) -> None:
    # ECMP never reorders packets: RPS against it has no ratio (not an infinite one).
    text = TINY_EXPERIMENT + (
        '\n[[claim]]\ntext = "reordering against ECMP"\nmetric = "ooo_ratio"\n'
        'compare = "ratio"\nseries = "rps"\nbaseline = "ecmp"\n'
    )
    (root / "demo" / "tiny" / "experiment.toml").write_text(text)
    experiment = reproduce.load_experiment(root, "demo/tiny")
    result = reproduce.reproduce(
        experiment, quick=True, out=root.parent / "store", workers=2, report=False
    )
    runs = pfcsim.open_store(result.store).runs
    assert (runs.loc[runs["scheme"] == "ecmp", "ooo_ratio"] == 0).all()
    assert runs.loc[runs["scheme"] == "rps", "ooo_ratio"].mean() > 0
    assert result.claims[-1]["ours"] is None
    assert result.claims[-1]["note"] == (
        "ooo_ratio is 0 in every run of the baseline: a ratio against 0 is undefined"
    )


def test_claims_on_runs_a_guard_ended_say_so(root: Path, tmp_path: Path) -> None:
    (root / "demo" / "tiny" / "spec.toml").write_text(TINY_TOML + "\n[run]\nmax_events = 1000\n")
    done = cli(
        "reproduce", "demo/tiny", "--quick", "--experiments", str(root), "-o", "out",
        "--no-report", cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    runs = pfcsim.open_store(tmp_path / "out").runs
    assert len(runs) > 0
    assert runs["incomplete"].notna().all()
    assert f"{len(runs)} points ended early (incomplete)" in done.stdout
    claims = pd.read_csv(tmp_path / "out" / "claims.csv")
    for claim in claims.itertuples():
        used = runs["scheme"].isin(["rps", "ecmp"] if claim.metric == "fct_p99_us" else ["rps"])
        assert f"{used.sum()} of its {used.sum()} runs ended early (incomplete" in claim.note


def test_parameters_some_series_lack_do_not_split_the_conditions(root: Path) -> None:
    # `lb.flowlet_timeout` is 100us for LetFlow, 50us for HULA and NULL for ECMP, which has
    # no such key: it follows the series, so LetFlow and ECMP are still compared per load.
    folder = root / "demo" / "tiny"
    (folder / "sweep.toml").write_text(
        TINY_SWEEP.replace(
            'lb.scheme = ["ecmp", "rps"]',
            'lb = [{ scheme = "ecmp" }, { scheme = "letflow" },'
            ' { scheme = "hula", flowlet_timeout = "50us" }]',
        )
    )
    experiment_toml = folder / "experiment.toml"
    experiment_toml.write_text(
        experiment_toml.read_text().replace('series = "rps"', 'series = "letflow"')
    )
    experiment = reproduce.load_experiment(root, "demo/tiny")
    result = reproduce.reproduce(
        experiment, quick=True, out=root.parent / "store", workers=2, report=False
    )
    runs = pfcsim.open_store(result.store).runs
    assert runs.loc[runs["scheme"] == "ecmp", "lb.flowlet_timeout"].isna().all()
    assert runs["lb.flowlet_timeout"].nunique() == 2
    p99 = runs.groupby("scheme")["fct_p99_us"].mean()
    claim, _ = result.claims
    assert claim["ours"] == pytest.approx(1 - p99["letflow"] / p99["ecmp"])


def test_a_claim_over_several_baselines_folds_every_baseline_and_load(root: Path) -> None:
    folder = root / "demo" / "tiny"
    (folder / "sweep.toml").write_text(
        TINY_SWEEP.replace('["ecmp", "rps"]', '["ecmp", "rps", "drb"]')
    )
    text = TINY_EXPERIMENT.replace('baseline = "ecmp"', 'baseline = ["ecmp", "drb"]')
    (folder / "experiment.toml").write_text(text.replace('over = "max"', 'over = "min"', 1))
    experiment = reproduce.load_experiment(root, "demo/tiny")
    assert experiment.claims[0].baseline == ("ecmp", "drb")
    result = reproduce.reproduce(
        experiment, quick=False, out=root.parent / "store", workers=2, report=False
    )
    p99 = pfcsim.open_store(result.store).runs.groupby(["scheme", "load"])["fct_p99_us"].mean()
    each = {
        base: [1 - p99["rps", load] / p99[base, load] for load in (0.2, 0.4)]
        for base in ("ecmp", "drb")
    }
    # The smallest over both baselines and both loads, not over one baseline only: listed in
    # either order, the claim gives the same number.
    assert min(each["ecmp"]) != min(each["drb"])
    assert result.claims[0]["ours"] == pytest.approx(min(each["ecmp"] + each["drb"]))
    reversed_claim = dataclasses.replace(experiment.claims[0], baseline=("drb", "ecmp"))
    store = pfcsim.open_store(result.store)
    assert reproduce.evaluate(reversed_claim, store)["ours"] == result.claims[0]["ours"]


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        ('title = "T"', "unknown key `colour`"),
        ('kind = "lines"', "figure[0]: kind: expected one of"),
        ('compare = "reduction"', "claim[0]: compare: expected one of value, reduction, ratio"),
        ('over = "max"', "claim[0]: over: expected one of max, min, mean, got 'top'"),
        ('baseline = "ecmp"', "claim[0]: baseline: compare = 'reduction' needs the baseline"),
        ('y = "fct_p99_us"', "figure[0]: normalize: expected one of min, max, got 'best'"),
        ('name = "fct-cdf"', "figure[0]: normalize: a fct-cdf figure cannot be normalized"),
        ('over = "mean"', "claim[1]: normalize: expected one of min, max, got 'top'"),
        (
            'series = "rps"\nbaseline = "ecmp"',
            "claim[0]: baseline: expected a series name or a list of them, got []",
        ),
    ],
)
def test_bad_experiment_files_name_the_key(root: Path, edit: str, message: str) -> None:
    path = root / "demo" / "tiny" / "experiment.toml"
    replacement = {
        'title = "T"': 'title = "T"\ncolour = "red"',
        'kind = "lines"': 'kind = "pie"',
        'compare = "reduction"': 'compare = "better"',
        'over = "max"': 'over = "top"',
        'baseline = "ecmp"': "",
        'y = "fct_p99_us"': 'y = "fct_p99_us"\nnormalize = "best"',
        'name = "fct-cdf"': 'name = "fct-cdf"\nnormalize = "min"',
        'over = "mean"': 'over = "mean"\nnormalize = "top"',
        'series = "rps"\nbaseline = "ecmp"': 'series = "rps"\nbaseline = []',
    }[edit]
    text = TINY_EXPERIMENT.replace('title = "Tiny: ECMP vs RPS"', 'title = "T"')
    if edit == 'name = "fct-cdf"':
        text = text.replace('name = "p99"\nkind = "lines"', 'name = "fct-cdf"\nkind = "fct-cdf"')
    path.write_text(text.replace(edit, replacement, 1))
    with pytest.raises(pfcsim.SpecError) as e:
        reproduce.load_experiment(root, "demo/tiny")
    assert message in str(e.value)


def test_normalize_divides_each_series_by_its_best_condition(root: Path) -> None:
    experiment = reproduce.load_experiment(root, "demo/tiny")
    result = reproduce.reproduce(
        experiment, quick=False, out=root.parent / "store", workers=2, report=False
    )
    store = pfcsim.open_store(result.store)
    p99 = store.runs.groupby(["scheme", "load"])["fct_p99_us"].mean()
    rps, ecmp = p99["rps"], p99["ecmp"]
    assert rps.max() / rps.min() > 1.01, "the test needs p99s that differ between the loads"

    def claim(**fields: object) -> float:
        data = {"text": "t", "metric": "fct_p99_us", "series": "rps", "over": "max", **fields}
        return reproduce.evaluate(reproduce._claim(data, "test"), store)["ours"]

    # A claim: each series' value per load over its best (smallest) load, then folded.
    assert claim(normalize="min") == pytest.approx(rps.max() / rps.min())
    assert claim(normalize="max", over="min") == pytest.approx(rps.min() / rps.max())
    assert claim() == pytest.approx(rps.max())
    # Against a baseline, each side is normalized to its own best load before comparing.
    reduction = 1 - (rps / rps.min()) / (ecmp / ecmp.min())
    assert claim(normalize="min", compare="reduction", baseline="ecmp") == pytest.approx(
        reduction.max()
    )
    # A figure: each series' line over its smallest value in the panel.
    for kind in ("lines", "bars"):
        request = FigureRequest(kind=kind, y="fct_p99_us", normalize="min")
        figure = plots._generic(store, plots._selected_runs(store, request), request)
        if kind == "lines":
            drawn = {line.get_label(): list(line.get_ydata()) for line in figure.axes[0].lines}
        else:
            drawn = {
                bars.get_label(): [bar.get_height() for bar in bars]
                for bars in figure.axes[0].containers
            }
        assert drawn["rps"] == pytest.approx(list(rps / rps.min()))
        assert drawn["ecmp"] == pytest.approx(list(ecmp / ecmp.min()))
    request = FigureRequest(kind="vs-load", normalize="min")
    figure = plots._vs_load(store, plots._selected_runs(store, request), request)
    p99_line = {line.get_label(): list(line.get_ydata()) for line in figure.axes[1].lines}
    assert p99_line["rps"] == pytest.approx(list(rps / rps.min()))


def test_quantities_with_units_are_ordered_by_magnitude() -> None:
    rates = ["100Gbps", "10Gbps", "40Gbps", "25Gbps"]
    assert sorted(rates, key=plots._sort_key) == ["10Gbps", "25Gbps", "40Gbps", "100Gbps"]
    times = ["16us", "500ns", "2us", "1.5us"]
    assert sorted(times, key=plots._sort_key) == ["500ns", "1.5us", "2us", "16us"]
    assert sorted(["240KB", "5KB", "1MB", "64KiB"], key=plots._sort_key) == [
        "5KB",
        "64KiB",
        "240KB",
        "1MB",
    ]
    # The core's own unit parser reads them.
    assert pfcsim._core.quantity("40Gbps") == ("rate", 40_000_000_000)
    assert pfcsim._core.quantity("1.5us") == ("time", 1_500_000)
    assert pfcsim._core.quantity("64KiB") == ("size", 65_536)
    assert pfcsim._core.quantity("drill") is None
    # Numbers first, then quantities, then text.
    assert sorted(["b", "2us", 3, "a"], key=plots._sort_key) == [3, "2us", "a", "b"]
    # Bar categories of one kind of quantity come in order; mixed kinds keep their order.
    runs = pd.DataFrame({"rate": ["100Gbps", "10Gbps", "25Gbps"]})
    assert plots._categories(runs, "rate") == ["10Gbps", "25Gbps", "100Gbps"]
    mixed = pd.DataFrame({"v": ["2us", "10Gbps"]})
    assert plots._categories(mixed, "v") == ["2us", "10Gbps"]


def test_a_boolean_field_names_itself_in_a_series_name() -> None:
    runs = pd.DataFrame(
        {
            "scheme": ["rlb", "rlb", "presto"],
            "lb.inner.scheme": ["presto", "presto", None],
            "lb.recirculation": pd.array([True, False, None], dtype="boolean"),
        }
    )
    fields = ["scheme", "lb.inner.scheme", "lb.recirculation"]
    assert plots.series_names(runs, fields) == [
        "rlb+presto+recirculation=true",
        "rlb+presto+recirculation=false",
        "presto",
    ]


TINY_VARIANT = """\
variant_of = "demo/tiny"
title = "Tiny without PFC"
notes = "the lossy fabric"
[variant]
set = { "switch.pfc.enabled" = false }
grid = { seed = [9] }
"""


def test_a_variant_runs_its_bases_sweep_with_its_changes_and_keeps_its_claims(
    root: Path,
) -> None:
    folder = root / "demo" / "tiny-lossy"
    folder.mkdir()
    (folder / "experiment.toml").write_text(TINY_VARIANT)
    base = reproduce.load_experiment(root, "demo/tiny")
    variant = reproduce.load_experiment(root, "demo/tiny-lossy")
    assert (variant.name, variant.title, variant.notes) == (
        "demo/tiny-lossy",
        "Tiny without PFC",
        "the lossy fabric",
    )
    assert (variant.source, variant.claims, variant.figures) == (
        base.source,
        base.claims,
        base.figures,
    )
    full = variant.sweep(quick=False).points
    # Its `set` in every point, its axis replacing the base's seeds; the base unchanged.
    assert {(p.spec["switch"]["pfc"]["enabled"], p.spec["seed"]) for p in full} == {(False, 9)}
    assert len(full) == 4
    assert all(p.spec.get("switch", {}).get("pfc") is None for p in base.sweep(quick=False).points)
    # --quick applies the base's [quick] on top of the variant.
    quick = variant.sweep(quick=True).points
    assert {(p.spec["traffic"][0]["load"], p.spec["seed"]) for p in quick} == {(0.3, 9)}
    assert all(p.spec["switch"]["pfc"]["enabled"] is False for p in quick)
    assert "demo/tiny-lossy" in [e.name for e in reproduce.list_experiments(root)]


def test_a_variant_drops_axes_of_its_base(root: Path) -> None:
    folder = root / "demo" / "tiny-rps"
    folder.mkdir()
    (folder / "experiment.toml").write_text(
        TINY_VARIANT.replace(
            "grid = { seed = [9] }", 'drop = ["lb.scheme"]\ngrid = { lb = [{ scheme = "rps" }] }'
        )
    )
    points = reproduce.load_experiment(root, "demo/tiny-rps").sweep(quick=False).points
    # The base's lb.scheme axis (ecmp, rps) is gone: lb is the variant's alone.
    assert {p.spec["lb"]["scheme"] for p in points} == {"rps"}
    assert len(points) == 4  # two loads x two seeds


def test_a_variants_own_quick_replaces_its_bases(root: Path) -> None:
    folder = root / "demo" / "tiny-rps"
    folder.mkdir()
    (folder / "experiment.toml").write_text(
        TINY_VARIANT.replace("grid = { seed = [9] }", 'grid = { lb = [{ scheme = "rps" }] }')
        + '[quick]\nnote = "rps at one load"\ngrid = { "traffic[0].load" = [0.2], seed = [1] }\n'
    )
    variant = reproduce.load_experiment(root, "demo/tiny-rps")
    assert variant.quick["note"] == "rps at one load"
    quick = variant.sweep(quick=True).points
    # The variant's quick, not the base's (load 0.3, 0.5 ms), on top of the variant's lb axis.
    assert {
        (p.spec["lb"]["scheme"], p.spec["traffic"][0]["load"], p.spec["seed"]) for p in quick
    } == {("rps", 0.2, 1)}
    assert all(p.spec["traffic"][0]["duration"] != "0.5ms" for p in quick)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        ('title = "Tiny without PFC"', "unknown key `claim`"),
        ('variant_of = "demo/tiny"', "variant_of: no experiment 'demo/none'"),
        ("[variant]", "variant: unknown key `colour`"),
        ("grid = { seed = [9] }", "variant.set: "),
        ("[variant]\n", "variant.drop: no grid axis 'colour' in the base's sweep"),
        ('notes = "the lossy fabric"', "quick: unknown key `colour`"),
    ],
)
def test_bad_variants_name_the_key(root: Path, edit: str, message: str) -> None:
    folder = root / "demo" / "tiny-lossy"
    folder.mkdir()
    replacement = {
        'title = "Tiny without PFC"': 'title = "T"\n[[claim]]\ntext = "x"',
        'variant_of = "demo/tiny"': 'variant_of = "demo/none"',
        "[variant]": '[variant]\ncolour = "red"',
        "grid = { seed = [9] }": "",
        "[variant]\n": '[variant]\ndrop = ["colour"]\n',
        'notes = "the lossy fabric"': 'notes = "n"\nquick = { colour = "red" }',
    }[edit]
    text = TINY_VARIANT.replace(edit, replacement, 1)
    if edit == "grid = { seed = [9] }":
        text = text.replace('set = { "switch.pfc.enabled" = false }', 'set = { "nope[x]" = 1 }')
    (folder / "experiment.toml").write_text(text)
    with pytest.raises(pfcsim.SpecError) as e:
        reproduce.load_experiment(root, "demo/tiny-lossy").sweep(quick=False)
    assert message in str(e.value)


def test_an_unknown_experiment_lists_the_known_ones(root: Path) -> None:
    with pytest.raises(pfcsim.SpecError) as e:
        reproduce.load_experiment(root, "demo/huge")
    assert "no experiment 'demo/huge'" in str(e.value)
    assert "known: demo/tiny" in str(e.value)


@pytest.mark.parametrize(
    "name", [e.name for e in reproduce.list_experiments(REPO_EXPERIMENTS)] or ["(none)"]
)
def test_every_experiment_of_the_repository_runs_quick(name: str, tmp_path: Path) -> None:
    if name == "(none)":
        pytest.skip("no experiments in the repository")
    # Without the HTML report: it would add seconds per experiment (test_report.py tests it).
    done = cli(
        "reproduce",
        name,
        "--quick",
        "-q",
        "--no-report",
        "--experiments",
        str(REPO_EXPERIMENTS),
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert "report:" not in done.stdout
    experiment = reproduce.load_experiment(REPO_EXPERIMENTS, name)
    figures = tmp_path / "results" / "reproduce" / f"{name}-quick" / "figures"
    for figure in experiment.figures:
        for suffix in ("png", "svg"):
            assert (figures / f"{figure.name or figure.kind}.{suffix}").is_file()


def test_every_experiments_sweep_keeps_its_points_through_its_toml_text() -> None:
    """`reproduce` hands the sweep on as TOML text, which may reorder a grid's axes.

    The points may come out in another order, but with the same specs.
    """
    import json

    from pfcsim.sweep import Sweep, load_sweep

    def specs(sweep: Sweep) -> list[str]:
        return sorted(json.dumps(p.spec, sort_keys=True) for p in sweep.points)

    for experiment in reproduce.list_experiments(REPO_EXPERIMENTS):
        for quick in (False, True):
            sweep = experiment.sweep(quick=quick)
            again = load_sweep(reproduce._as_dict(sweep), base_dir=sweep.base_dir)
            assert specs(again) == specs(sweep), f"{experiment.name} (quick: {quick})"


@pytest.mark.parametrize(
    "name", [e.name for e in reproduce.list_experiments(REPO_EXPERIMENTS)] or ["(none)"]
)
def test_every_claim_of_the_repository_names_series_its_full_sweep_makes(name: str) -> None:
    """Every claim's series, baselines and `where` match points of the full sweep.

    A misnamed series leaves a claim without a number in the full run only (a quick run may
    lack series on purpose), so the names are checked against the full sweep's points.
    """
    if name == "(none)":
        pytest.skip("no experiments in the repository")
    import tomllib

    from pfcsim.store import _shorthands, _spec_fields
    from pfcsim.sweep import check

    experiment = reproduce.load_experiment(REPO_EXPERIMENTS, name)
    specs = [tomllib.loads(p.resolved_spec) for p in check(experiment.sweep(quick=False))]
    points = pd.DataFrame([{**_shorthands(spec), **_spec_fields(spec)} for spec in specs])
    for claim in experiment.claims:
        runs = points
        for field, value in claim.where:
            runs = runs[runs[field].astype(str) == value]
        assert not runs.empty, f"{claim.text}: no point matches where {claim.where}"
        present = set(plots.series_names(runs, list(claim.series_fields)))
        baselines = [claim.baseline] if isinstance(claim.baseline, str) else claim.baseline or []
        for series in [claim.series, *baselines]:
            assert series in present, f"{claim.text}: no series {series!r} in {sorted(present)}"
