"""Experiments: a sweep, the figures drawn from it, and the numbers it is compared against.

An experiment is a folder `experiments/<group>/<name>/` holding `experiment.toml`
(docs/guides/reproduce.md):

    title = "Fig. 12: FCT CDF, symmetric leaf-spine, web search, 60% load"
    source = "RLB (ToN 2024), Fig. 12 and Sec. VI-B.1"
    sweep = "sweep.toml"                     # a sweep spec, relative to this folder

    [quick]                                  # --quick: a reduced sweep that runs in minutes
    note = "1 ms of arrivals instead of 10 ms"
    set = { "traffic[0].duration" = "1ms" }  # keys set in every point
    grid = { "traffic[0].load" = [0.6] }     # axes replaced (or added), in every grid table
    zip = { ... }                            # the zip group(s), replaced as a whole

    [[figure]]                               # pfcsim.plots kinds and options
    name = "fct-cdf"
    kind = "fct-cdf"
    series = ["lb.scheme", "lb.inner"]

    [[claim]]                                # a number the source reports
    text = "RLB cuts the p99 FCT by up to 72% over DRILL"
    metric = "fct_p99_us"
    compare = "reduction"                    # 1 - value(series) / value(baseline)
    series = "rlb+drill"
    baseline = "drill"                       # or a list: one comparison per baseline
    over = "max"                             # "up to": the largest over the other fields
    paper = 0.72

A variant is an experiment run again with some keys changed, say under another PFC model.
Its folder holds only an `experiment.toml` naming its base experiment; it takes the base's
sweep, quick version, figures and claims, and changes its sweep as `[quick]` does:

    variant_of = "rlb/fig12"                 # the base experiment, by name
    title = "PFC-prone variant (egress PFC): Fig. 12 ..."
    notes = "what differs, and why"
    [variant]
    set = { "switch.pfc" = { model = "egress", egress = { xoff = "256KB" } } }
    grid = { ... }                           # axes replaced (or added), in every grid table
    drop = ["switch.pfc.enabled"]            # axes of the base's sweep removed
    [quick]                                  # optional: in place of the base's [quick], when
    grid = { ... }                           # the base's would replace what the variant changes

`pfcsim reproduce <group>/<name>` runs the sweep into a store (resumable, local or Ray),
draws the figures into the store's `figures/` (PNG and SVG), prints the claims next to
our numbers with their ratio (also written to `claims.csv`), and writes the store's HTML
report (`report.html`, `pfcsim.report`; the experiment is kept in `reproduction.json`).
"""

from __future__ import annotations

import copy
import csv
import dataclasses
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pfcsim._core import SpecError
from pfcsim.plots import KINDS, NORMALIZE, FigureRequest, normalized, series_names
from pfcsim.sweep import flatten_axes, load_sweep, set_key

if TYPE_CHECKING:
    import pandas as pd

    from pfcsim.store import Store
    from pfcsim.sweep import Sweep

#: Keys of `experiment.toml`.
EXPERIMENT_KEYS = ("title", "source", "sweep", "quick", "figure", "claim", "notes")
QUICK_KEYS = ("note", "set", "grid", "zip")
#: Keys of a variant's `experiment.toml`, and of its `[variant]` table.
VARIANT_KEYS = ("variant_of", "title", "source", "notes", "variant", "quick")
VARIANT_TABLE_KEYS = ("set", "grid", "zip", "drop")
FIGURE_KEYS = (
    "name",
    "kind",
    "series",
    "x",
    "metric",
    "where",
    "y",
    "panels",
    "title",
    "ylabel",
    "xlabel",
    "logy",
    "normalize",
)
CLAIM_KEYS = (
    "text",
    "metric",
    "compare",
    "series",
    "baseline",
    "series_fields",
    "where",
    "over",
    "normalize",
    "paper",
)
#: How a claim turns runs into one number.
COMPARES = ("value", "reduction", "ratio")
#: How a claim folds the values left after `where` (one per remaining combination of fields).
OVERS = ("max", "min", "mean")


@dataclass(frozen=True)
class Claim:
    """A number the source reports, and how to compute ours."""

    text: str
    metric: str
    compare: str
    series: str
    #: The series compared against; several (a tuple): one comparison per baseline and
    #: condition, all folded by `over` ("up to 20% over the other schemes").
    baseline: str | tuple[str, ...] | None
    series_fields: tuple[str, ...]
    where: tuple[tuple[str, str], ...]
    over: str
    paper: float | None
    #: Divide each series' per-condition values by their "min" or "max" over the conditions
    #: before comparing and folding (None: raw values).
    normalize: str | None = None


@dataclass(frozen=True)
class Experiment:
    """An experiment folder, read and checked."""

    #: `<group>/<name>`, the folder relative to the experiments root.
    name: str
    folder: Path
    title: str
    source: str
    sweep_path: Path
    quick: dict[str, Any]
    figures: list[FigureRequest]
    claims: list[Claim]
    notes: str = ""
    #: For a variant: the name of its base experiment, and its `[variant]` changes.
    variant_of: str | None = None
    variant: dict[str, Any] = field(default_factory=dict)

    def sweep(self, *, quick: bool) -> Sweep:
        """The experiment's sweep: a variant's changes, then `[quick]` if asked."""
        sweep = load_sweep(self.sweep_path)
        if self.variant_of is not None:
            sweep = _changed(sweep, self.variant, f"{self.name}: variant", self.name)
        if quick:
            sweep = _changed(sweep, self.quick, f"{self.name}: quick", f"{sweep.name}-quick")
        return sweep


def _changed(sweep: Sweep, changes: dict[str, Any], where: str, name: str) -> Sweep:
    """`sweep` with `changes` (`set`, `grid`, `zip` of `[quick]` or `[variant]`) applied."""
    data = tomllib.loads(sweep.text)
    data["base"] = copy.deepcopy(sweep.base)
    for key, value in changes.get("set", {}).items():
        set_key(data["base"], key, value, f"{where}.set")
    # A variant's `drop` removes axes from every grid table; the axes of `grid` replace (or
    # add) their keys in every grid table.
    grids = data.get("grid", {})
    tables = [grids] if isinstance(grids, dict) else grids
    drop = changes.get("drop", [])
    axes = changes.get("grid", {})
    if drop:  # by key path: `lb.scheme = [...]` unquoted is a nested table in TOML
        tables = [flatten_axes(t, "grid", where) if isinstance(t, dict) else t for t in tables]
        axes = flatten_axes(axes, "grid", where)
    for axis in drop:
        if not any(isinstance(t, dict) and axis in t for t in tables):
            raise SpecError(f"{where}.drop: no grid axis {axis!r} in the base's sweep")
    data["grid"] = [
        {**{k: v for k, v in table.items() if k not in drop}, **axes}
        if isinstance(table, dict)
        else table
        for table in tables
    ]
    if "zip" in changes:
        data["zip"] = copy.deepcopy(changes["zip"])
    data["name"] = name.replace("/", "-")
    return load_sweep(data, base_dir=sweep.base_dir)


@dataclass
class Reproduction:
    """What `reproduce` made."""

    experiment: Experiment
    store: Path
    figures: list[Path] = field(default_factory=list)
    #: One row per claim: text, paper, ours, ratio (ours / paper).
    claims: list[dict[str, Any]] = field(default_factory=list)
    failed_points: int = 0
    #: Points whose runs a guard or a stall ended early (their claims say so in their notes).
    incomplete_points: int = 0
    #: The HTML report (`pfcsim.report`) in the store; None if not asked or no point finished.
    report: Path | None = None


def default_root() -> Path:
    """The experiments folder: `./experiments` if there is one, else the repository's."""
    here = Path("experiments")
    if here.is_dir():
        return here
    return Path(__file__).resolve().parents[2] / "experiments"


def list_experiments(root: Path) -> list[Experiment]:
    """Every experiment under `root`, by name, numbers in names in numeric order (fig3, fig12)."""
    names = [f.parent.relative_to(root).as_posix() for f in root.glob("*/*/experiment.toml")]
    return [load_experiment(root, name) for name in sorted(names, key=_natural_key)]


def _natural_key(name: str) -> list[tuple[int, str | int]]:
    """Sort key reading each run of digits in `name` as a number."""
    return [(1, int(part)) if part.isdigit() else (0, part) for part in re.split(r"(\d+)", name)]


def load_experiment(root: Path, name: str) -> Experiment:
    """Reads and checks `root/<name>/experiment.toml`; `SpecError` names the bad key."""
    folder = root / name
    path = folder / "experiment.toml"
    if not path.is_file():
        known = ", ".join(
            e.parent.relative_to(root).as_posix() for e in root.glob("*/*/experiment.toml")
        )
        raise SpecError(f"no experiment {name!r} in {root}; known: {known or 'none'}")
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as e:
        raise SpecError(f"{path}: {e}") from None
    where = str(path)
    if "variant_of" in data:
        return _load_variant(root, name, data, where)
    _no_unknown(data, EXPERIMENT_KEYS, where)
    for key in ("title", "source", "sweep"):
        if not isinstance(data.get(key), str):
            raise SpecError(f"{where}: {key}: expected a string")
    quick = data.get("quick", {})
    _no_unknown(quick, QUICK_KEYS, f"{where}: quick")
    figures = [_figure(f, f"{where}: figure[{i}]") for i, f in enumerate(data.get("figure", []))]
    claims = [_claim(c, f"{where}: claim[{i}]") for i, c in enumerate(data.get("claim", []))]
    return Experiment(
        name=name,
        folder=folder,
        title=data["title"],
        source=data["source"],
        sweep_path=folder / data["sweep"],
        quick=quick,
        figures=figures,
        claims=claims,
        notes=data.get("notes", ""),
    )


def _load_variant(root: Path, name: str, data: dict[str, Any], where: str) -> Experiment:
    """A variant's `experiment.toml`: its base, with its own title, notes and changes."""
    _no_unknown(
        data,
        VARIANT_KEYS,
        f"{where} (a variant takes the sweep, figures and claims of its base, and its"
        " [quick] unless it gives its own)",
    )
    base_name = data["variant_of"]
    if not isinstance(base_name, str):
        raise SpecError(f'{where}: variant_of: expected an experiment name, e.g. "rlb/fig12"')
    if not isinstance(data.get("title"), str):
        raise SpecError(f"{where}: title: expected a string (what the variant changes)")
    base_path = root / base_name / "experiment.toml"
    if base_path.is_file() and "variant_of" in tomllib.loads(base_path.read_text("utf-8")):
        raise SpecError(f"{where}: variant_of: {base_name!r} is itself a variant; name its base")
    try:
        base = load_experiment(root, base_name)
    except SpecError as e:
        raise SpecError(f"{where}: variant_of: {e}") from None
    variant = data.get("variant", {})
    _no_unknown(variant, VARIANT_TABLE_KEYS, f"{where}: variant")
    drop = variant.get("drop", [])
    if not (isinstance(drop, list) and all(isinstance(axis, str) for axis in drop)):
        raise SpecError(f'{where}: variant.drop: expected a list of axis names, e.g. ["seed"]')
    if not variant:
        raise SpecError(f"{where}: variant: give what the variant changes (set, grid, zip, drop)")
    # Its own [quick], if given, replaces the base's: a base's [quick] that sets a grid axis
    # whole (say `lb`) would otherwise undo the variant's change of that axis in quick runs.
    quick = data.get("quick", base.quick)
    _no_unknown(quick, QUICK_KEYS, f"{where}: quick")
    return dataclasses.replace(
        base,
        name=name,
        folder=root / name,
        title=data["title"],
        source=data.get("source", base.source),
        notes=data.get("notes", base.notes),
        quick=quick,
        variant_of=base_name,
        variant=variant,
    )


def reproduce(
    experiment: Experiment,
    *,
    quick: bool,
    out: Path | None = None,
    workers: int | None = None,
    ray: str | None = None,
    progress: bool = False,
    report: bool = True,
) -> Reproduction:
    """Runs the experiment's sweep, draws its figures, computes its claims, writes the report.

    The HTML report (`pfcsim.report`) only if `report` and a point finished; the store keeps
    the experiment in `reproduction.json` either way, so `pfcsim report` can make it later.
    """
    from pfcsim.api import sweep as run_sweep
    from pfcsim.plots import make_figure, save
    from pfcsim.report import save_reproduction, write_report
    from pfcsim.store import Store

    sweep = experiment.sweep(quick=quick)
    store_dir = out or Path("results") / "reproduce" / (
        experiment.name + ("-quick" if quick else "")
    )
    outcome = run_sweep(
        _as_dict(sweep),
        out=store_dir,
        workers=workers,
        ray=ray,
        progress=progress,
        base_dir=sweep.base_dir,
    )
    # Only this sweep's runs: the store may also hold runs of its older versions.
    store = Store(store_dir).only(point.key for point in outcome.points)
    result = Reproduction(
        experiment,
        store_dir,
        failed_points=len(outcome.failed),
        incomplete_points=len(outcome.incomplete),
    )
    label = f" (quick run: {experiment.quick.get('note', 'reduced sweep')})" if quick else ""
    titled = [
        dataclasses.replace(request, title=(request.title or experiment.title) + label)
        for request in experiment.figures
    ]
    # Each figure is drawn once: saved as files here, then made interactive by the report.
    drawn = []
    try:
        for request in titled:
            drawn.append(make_figure(store, request))
            result.figures.extend(save(drawn[-1], request, store_dir / "figures"))
        result.claims = [evaluate(claim, store) for claim in experiment.claims]
        _write_claims(result.claims, store_dir / "claims.csv")
        keys = [point.key for point in outcome.points]
        save_reproduction(
            store_dir, experiment, quick=quick, keys=keys, figures=titled, claims=result.claims
        )
        if report and not store.runs.empty:
            result.report = write_report(store, drawn=drawn)
    finally:
        if drawn:  # (pyplot imported after make_figure chose its backend)
            import matplotlib.pyplot as plt

            for figure in drawn:
                plt.close(figure)
    return result


def evaluate(claim: Claim, store: Store) -> dict[str, Any]:
    """Our number for `claim` from the runs of `store`, next to the paper's."""
    runs = store.runs
    for name, value in claim.where:
        runs = runs[runs[name].astype(str) == value]
    runs = runs.assign(series=series_names(runs, list(claim.series_fields)))
    conditions = _conditions(store, runs)
    ours = _claim_value(claim, runs, conditions)
    ratio = None
    if ours is not None and claim.paper not in (None, 0.0):
        ratio = ours / claim.paper
    note = _missing_series(claim, runs)
    if ours is None and not note:
        note = _no_value(claim, runs)
    cut = _cut_short(claim, runs)
    if cut:
        note = f"{note}; {cut}" if note else cut
    return {
        "claim": claim.text,
        "metric": claim.metric,
        "paper": claim.paper,
        "ours": ours,
        "ratio": ratio,
        "note": note,
    }


def _no_value(claim: Claim, runs: pd.DataFrame) -> str:
    """Why a claim whose series all have runs has no number."""
    if claim.compare != "value":
        baselines = [claim.baseline] if isinstance(claim.baseline, str) else claim.baseline
        base = runs.loc[runs["series"].isin(baselines or []), claim.metric].dropna()
        if not base.empty and (base == 0).all():
            return (
                f"{claim.metric} is 0 in every run of the baseline: a {claim.compare} "
                "against 0 is undefined"
            )
    return f"{claim.metric} has no value in the runs compared (e.g. no flow finished)"


def _missing_series(claim: Claim, runs: pd.DataFrame) -> str:
    """Why a claim has no number because a series it names has no run ("" if none is missing).

    A quick run may lack a series on purpose; in a full run this is a misnamed series.
    """
    if runs.empty:
        where = ", ".join(f"{name} = {value}" for name, value in claim.where)
        return f"no run matches where {{ {where} }}"
    present = sorted(set(runs["series"]))
    missing = [name for name in _named_series(claim) if name not in present]
    if not missing:
        return ""
    fields = ", ".join(claim.series_fields)
    return (
        f"no run of series {', '.join(repr(m) for m in missing)} "
        f"(the series of {fields} here: {', '.join(present)})"
    )


def _named_series(claim: Claim) -> list[str]:
    """The series a claim reads: its own and its baselines."""
    baselines = [] if claim.baseline is None else claim.baseline
    return [claim.series, *([baselines] if isinstance(baselines, str) else baselines)]


def _cut_short(claim: Claim, runs: pd.DataFrame) -> str:
    """Says how many runs of the claim's series a guard or a stall ended early ("" if none)."""
    if "incomplete" not in runs.columns:
        return ""
    used = runs[runs["series"].isin(_named_series(claim))]
    count = int(used["incomplete"].notna().sum())
    if count == 0:
        return ""
    return (
        f"{count} of its {len(used)} runs ended early (incomplete: a guard or a stall; the "
        "runs table's incomplete column says why), so their numbers measure them up to there"
    )


def _conditions(store: Store, runs: pd.DataFrame) -> list[str]:
    """The fields that tell apart the conditions a claim is folded over (e.g. the loads).

    The spec fields that vary among `runs`, but the seed and the fields that only follow the
    series (each series has one value of them, like `lb.scheme`).
    """
    spec_columns = store.sql("SELECT name FROM spec_columns ORDER BY position")["name"]
    conditions = []
    for column in spec_columns:
        if column in ("seed", "name") or column not in runs.columns:
            continue
        values = runs[column].astype(str)
        if values.nunique() < 2:
            continue
        # A field a series lacks (NaN) counts as one value, so that schemes with different
        # parameter sets (a `table_size` here, none there) do not split the conditions.
        follows_series = (values.groupby(runs["series"]).nunique(dropna=False) == 1).all()
        if not follows_series:
            conditions.append(column)
    return conditions


def _claim_value(claim: Claim, runs: pd.DataFrame, conditions: list[str]) -> float | None:
    """The claim's number: one value per condition (mean over seeds), folded by `over`."""
    import pandas as pd

    def per_condition(series: str) -> pd.Series:
        chosen = runs[runs["series"] == series]
        if not conditions:
            return pd.Series([chosen[claim.metric].mean()])
        return chosen.groupby(conditions, dropna=False)[claim.metric].mean()

    values = normalized(per_condition(claim.series), claim.normalize)
    if claim.compare != "value":
        assert claim.baseline is not None, "checked when read"
        baselines = [claim.baseline] if isinstance(claim.baseline, str) else claim.baseline
        compared = []
        for baseline in baselines:
            base = normalized(per_condition(baseline), claim.normalize)
            ours, base = values.align(base, join="inner")
            # Against a baseline of 0 a reduction or ratio is undefined: that condition drops.
            base = base.where(base != 0)
            compared.append(1 - ours / base if claim.compare == "reduction" else ours / base)
        values = pd.concat(compared, ignore_index=True)
    values = values.dropna()
    if values.empty:
        return None
    return float(getattr(values, claim.over)())


def format_claims(rows: list[dict[str, Any]]) -> str:
    """The claims as a text table: claim, metric, paper, ours, ratio."""

    def number(v: Any) -> str:
        return "-" if v is None else f"{v:.3g}"

    width = max((len(r["claim"]) for r in rows), default=5)
    width = min(width, 70)
    lines = [f"{'claim':<{width}}  {'paper':>8}  {'ours':>8}  {'ours/paper':>10}"]
    for r in rows:
        text = r["claim"] if len(r["claim"]) <= width else r["claim"][: width - 1] + "…"
        numbers = f"{number(r['paper']):>8}  {number(r['ours']):>8}  {number(r['ratio']):>10}"
        lines.append(f"{text:<{width}}  {numbers}")
    notes = [f"- {r['claim']}: {r['note']}" for r in rows if r.get("note")]
    if notes:
        lines += ["", "claims without a number, and why:", *notes]
    return "\n".join(lines)


def _write_claims(rows: list[dict[str, Any]], path: Path) -> None:
    """Writes the claims table as CSV."""
    with path.open("w", newline="") as f:
        fields = ["claim", "metric", "paper", "ours", "ratio", "note"]
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)


def _as_dict(sweep: Sweep) -> dict[str, Any]:
    """A loaded sweep as a sweep-spec dict (the base inline), for `pfcsim.sweep`."""
    data = tomllib.loads(sweep.text) if sweep.text else {}
    data["base"] = sweep.base
    data["name"] = sweep.name
    return data


def _figure(data: dict[str, Any], where: str) -> FigureRequest:
    """A `[[figure]]` table as a plot request."""
    _no_unknown(data, FIGURE_KEYS, where)
    kind = data.get("kind")
    if kind not in KINDS:
        raise SpecError(f"{where}: kind: expected one of {', '.join(KINDS)}, got {kind!r}")
    normalize = data.get("normalize")
    if normalize is not None:
        if normalize not in NORMALIZE:
            raise SpecError(
                f"{where}: normalize: expected one of {', '.join(NORMALIZE)}, got {normalize!r}"
            )
        if kind in ("fct-cdf", "buckets"):
            raise SpecError(
                f"{where}: normalize: a {kind} figure cannot be normalized; "
                "use vs-load, pause, lines or bars"
            )
    options = dict(data)
    if isinstance(options.get("series"), list):
        options["series"] = tuple(options["series"])
    if "where" in options:
        options["where"] = tuple((k, str(v)) for k, v in options["where"].items())
    return FigureRequest(**options)


def _claim(data: dict[str, Any], where: str) -> Claim:
    """A `[[claim]]` table, checked."""
    _no_unknown(data, CLAIM_KEYS, where)
    for key in ("text", "metric", "series"):
        if not isinstance(data.get(key), str):
            raise SpecError(f"{where}: {key}: expected a string")
    compare = data.get("compare", "value")
    if compare not in COMPARES:
        raise SpecError(f"{where}: compare: expected one of {', '.join(COMPARES)}, got {compare!r}")
    baseline = data.get("baseline")
    if isinstance(baseline, list) and baseline and all(isinstance(b, str) for b in baseline):
        baseline = tuple(baseline)
    elif baseline is not None and not isinstance(baseline, str):
        raise SpecError(
            f"{where}: baseline: expected a series name or a list of them, got {baseline!r}"
        )
    if compare != "value" and baseline is None:
        raise SpecError(f"{where}: baseline: compare = {compare!r} needs the baseline series")
    over = data.get("over", "mean")
    if over not in OVERS:
        raise SpecError(f"{where}: over: expected one of {', '.join(OVERS)}, got {over!r}")
    normalize = data.get("normalize")
    if normalize is not None and normalize not in NORMALIZE:
        raise SpecError(
            f"{where}: normalize: expected one of {', '.join(NORMALIZE)}, got {normalize!r}"
        )
    fields = data.get("series_fields", ["scheme"])
    fields = [fields] if isinstance(fields, str) else fields
    paper = data.get("paper")
    if paper is not None and not isinstance(paper, int | float):
        raise SpecError(
            f"{where}: paper: expected a number (or leave it out if only a plot shows it)"
        )
    return Claim(
        text=data["text"],
        metric=data["metric"],
        compare=compare,
        series=data["series"],
        baseline=baseline,
        series_fields=tuple(fields),
        where=tuple((k, str(v)) for k, v in data.get("where", {}).items()),
        over=over,
        paper=float(paper) if paper is not None else None,
        normalize=normalize,
    )


def _no_unknown(data: dict[str, Any], known: tuple[str, ...], where: str) -> None:
    """Raises `SpecError` for the first key of `data` not in `known`."""
    unknown = sorted(set(data) - set(known))
    if unknown:
        raise SpecError(f"{where}: unknown key `{unknown[0]}`; expected one of {', '.join(known)}")
