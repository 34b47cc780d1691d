"""Property tests (Hypothesis) over the spec schema: valid specs and their mutations.

The specs are drawn over the schema of docs/reference/spec.md: leaf-spine and fat-tree fabrics,
every load-balancing scheme, switch, NIC, congestion-control and transport tables, every traffic
kind, faults, monitors; then up to three mutations each: a value of the wrong type, a number out of
range, a size, rate or time that is huge, zero, negative or in a bad unit, an unknown key, a key
left out, an array where a table belongs, or a broken line of the TOML text. Whatever the spec:

- reading it raises nothing but `pfcsim.SpecError` (no traceback), and the command line
  prints one `error:` line and exits with status 2;
- a refusal names a key path (`traffic[0].load: ...`, `... raise switch.buffer`), or for a
  TOML syntax error, the line;
- an accepted spec, run under tight guards (`run.max_events`, `run.max_sim_time`, a small
  `run.max_memory`), finishes within them.

Budget: the `ci` profile (conftest.py), a fixed number of examples drawn deterministically
(`derandomize=True`), about 15 s in all. A longer, random search:
`PFCSIM_HYPOTHESIS=deep python -m pytest tests/python/test_properties.py` (10,000 examples
per property; docs/reference/architecture.md, Tests).
"""

import contextlib
import io
import math
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest
import tomli_w
from hypothesis import event, given
from hypothesis import strategies as st

import pfcsim
from pfcsim import cli

#: The guards every accepted spec runs under.
MAX_EVENTS = 20_000
MAX_SIM_TIME_PS = 2_000_000_000
GUARDS = {"max_memory": "64MB", "max_events": MAX_EVENTS, "max_sim_time": "2ms"}

SCHEMES = {s["name"]: s["defaults"] for s in pfcsim.schemes()}
WORKLOADS = [w["name"] for w in pfcsim.workloads()]
TOP_LEVEL_KEYS = {
    "name",
    "seed",
    "topology",
    "switch",
    "nic",
    "cc",
    "lb",
    "coflow",
    "transport",
    "traffic",
    "run",
    "faults",
    "monitor",
}

# ---- Valid specs over the schema.

rates = st.sampled_from(["10Gbps", "25Gbps", "40Gbps", "100Gbps", "12.5Gbps"])
delays = st.sampled_from(["100ns", "500ns", "1us", "2us"])
small_sizes = st.sampled_from(["1KB", "10KB", "64KB", "1MB"])


def links() -> st.SearchStrategy[dict[str, str]]:
    """A `{ rate, delay }` link table."""
    return st.fixed_dictionaries({"rate": rates, "delay": delays})


@st.composite
def topologies(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, int]]:
    """A small fabric and its counts of hosts and of each switch role."""
    if draw(st.booleans()):
        k = draw(st.sampled_from([2, 4]))
        table = {"kind": "fat_tree", "k": k, "host_link": draw(links())}
        table["fabric_link"] = draw(links())
        return table, {"host": k**3 // 4, "edge": k * k // 2, "agg": k * k // 2}
    leaves = draw(st.integers(1, 3))
    spines = draw(st.integers(1, 3))
    hosts = draw(st.integers(2 if leaves == 1 else 1, 3))
    table: dict[str, Any] = {
        "kind": "leaf_spine",
        "leaves": leaves,
        "spines": spines,
        "hosts_per_leaf": hosts,
        "host_link": draw(links()),
    }
    if draw(st.booleans()):
        table["fabric_link"] = draw(links())
    else:
        table["fabric_link"] = {"delay": draw(delays)}
        table["oversubscription"] = draw(st.sampled_from([0.5, 1.0, 2.0]))
    if draw(st.booleans()):
        table["degrade"] = {"fraction": draw(st.sampled_from([0.0, 0.25, 1.0])), "rate": "1Gbps"}
    return table, {"host": leaves * hosts, "leaf": leaves, "spine": spines}


@st.composite
def traffic_entries(draw: st.DrawFn, hosts: int) -> dict[str, Any]:
    """One `[[traffic]]` table of any kind over `hosts` hosts."""
    host = st.integers(0, hosts - 1)
    pair = st.builds(lambda src, step: [src, (src + step) % hosts], host, st.integers(1, hosts - 1))
    kind = draw(st.sampled_from(["poisson", "incast", "background", "scripted", "coflow"]))
    entry: dict[str, Any] = {"kind": kind}
    if kind == "poisson":
        entry["cdf"] = draw(st.sampled_from(WORKLOADS))
        entry["load"] = draw(st.floats(0.05, 0.9))
        entry["duration"] = draw(st.sampled_from(["100us", "500us", "1ms"]))
    elif kind == "incast":
        entry["receiver"] = draw(host)
        entry["senders"] = draw(st.integers(1, hosts - 1))
        entry["total_size"] = draw(small_sizes)
        entry["repeat"] = draw(st.integers(1, 3))
        entry["period"] = "100us"
    elif kind == "background":
        entry["pairs"] = draw(st.lists(pair, min_size=1, max_size=3))
        entry["size"] = draw(small_sizes)
    elif kind == "scripted":
        flow = st.builds(
            lambda p, size, start: {"src": p[0], "dst": p[1], "size": size, "start": start},
            pair,
            small_sizes,
            st.sampled_from(["0s", "1us", "50us"]),
        )
        entry["flows"] = draw(st.lists(flow, min_size=1, max_size=3))
    else:
        entry["arrival"] = "together"
        entry["coflows"] = draw(st.integers(1, 3))
        entry["flows_per_coflow"] = draw(st.integers(1, 3))
        entry["size"] = draw(small_sizes)
    if kind != "scripted" and draw(st.booleans()):
        entry["priority"] = draw(st.integers(1, 7))
    if draw(st.booleans()):
        entry["transport"] = draw(st.sampled_from(["roce", "tcp"]))
    return entry


@st.composite
def valid_specs(draw: st.DrawFn) -> dict[str, Any]:
    """A spec valid key by key, which its parts together may still make refused.

    (A generator that makes no flow in its short duration, say.)
    """
    topology, counts = draw(topologies())
    scheme = draw(st.sampled_from(sorted(SCHEMES)))
    spec: dict[str, Any] = {
        "name": "property",
        "seed": draw(st.integers(0, 2**63 - 1)),
        "topology": topology,
        "lb": {"scheme": scheme},
        "traffic": draw(st.lists(traffic_entries(counts["host"]), min_size=1, max_size=2)),
        "run": dict(GUARDS),
    }
    switch: dict[str, Any] = {}
    if scheme == "rlb":
        switch["loopback"] = {"rate": "40Gbps", "delay": "500ns"}
    if draw(st.booleans()):
        switch["buffer"] = draw(st.sampled_from(["2MB", "9MB", "32MB"]))
        switch["pfc"] = {"enabled": draw(st.booleans())}
        switch["ecn"] = {"kmin": "50KB", "kmax": "200KB", "pmax": draw(st.floats(0, 1))}
    if switch:
        spec["switch"] = switch
    if draw(st.booleans()):
        spec["nic"] = {
            "payload": draw(st.sampled_from(["500B", "1000B", "4000B"])),
            "ack_interval": draw(st.integers(1, 4)),
            "rto": draw(st.sampled_from(["0s", "1ms", "4ms"])),
        }
    if draw(st.booleans()):
        spec["cc"] = {"kind": draw(st.sampled_from(["dcqcn", "none"]))}
    if draw(st.booleans()):
        spec["transport"] = {"kind": "tcp", "tcp": {"cc": "newreno"}}
    if draw(st.booleans()):
        role = draw(st.sampled_from(sorted(r for r in counts if r != "host")))
        switch_name = f"{role}:{draw(st.integers(0, counts[role] - 1))}"
        fault = {"kind": "silent_drop", "switch": switch_name, "probability": 0.01}
        if "spine" in counts and draw(st.booleans()):
            fault = {"kind": "link_down", "link": ["leaf:0", "spine:0"], "at": "10us"}
        spec["faults"] = [fault]
    if draw(st.booleans()):
        kind = draw(st.sampled_from(["queue", "link_util", "pfc", "rate"]))
        monitor = {"kind": kind, "end": "2ms"}
        if kind != "pfc":
            monitor["interval"] = "10us"
        spec["monitor"] = [monitor]
    if draw(st.booleans()):
        spec["run"]["stop_at"] = draw(st.sampled_from(["100us", "1ms", "10s"]))
    return spec


# ---- Mutations.

#: Values of every type, and numbers at and beyond the edges of what keys take.
WRONG_VALUES = st.one_of(
    st.sampled_from(
        [0, 1, -1, 2**31, 2**32, 2**63 - 1, -(2**63), 0.0, -0.5, 1.5, 1e308, math.inf, math.nan]
    ),
    st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.text(max_size=12),
    st.lists(st.integers(0, 3), max_size=3),
    st.dictionaries(st.sampled_from(["kind", "rate", "x"]), st.integers(0, 3), max_size=2),
)
#: Sizes, rates and times that are huge, zero, negative, not exact or in a bad unit.
BAD_QUANTITIES = st.sampled_from(
    [
        "0s",
        "0ps",
        "-1ms",
        "-0s",
        "0.1ps",
        "1000000s",
        "18446744073709551615ps",
        "18446744073709551616ps",
        "99999999999999999999GB",
        "1e30MB",
        "18446744073709551616B",
        "0B",
        "0Gbps",
        "99999999Tbps",
        "0.5bps",
        "5 parsecs",
        "100Gbs",
        "100GB",
        "1e3us",
        "1 ms",
        "ms",
        "",
        "9000",
        "µs",
        "nan",
        "infms",
    ]
)
#: What the guards may become: nothing that lets a run go on for longer or take more memory.
BAD_GUARDS = st.sampled_from([0, -1, "0s", "0B", "1B", "-1ms", "2", 1.5, [], {}, "1ns", 1])


def key_paths(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every key path in a spec value (tables, their keys, list items), the root first."""
    paths = [path]
    if isinstance(value, dict):
        for key, item in value.items():
            paths += key_paths(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            paths += key_paths(item, (*path, index))
    return paths


def is_guard(path: tuple[Any, ...]) -> bool:
    """Whether `path` is one of the guards (or the `[run]` table holding them)."""
    return path[:1] == ("run",) and (len(path) == 1 or path[1] in GUARDS)


@st.composite
def mutated_specs(draw: st.DrawFn) -> dict[str, Any]:
    """A valid spec with one to three of its values, keys or tables broken."""
    spec = draw(valid_specs())
    for _ in range(draw(st.integers(1, 3))):
        paths = key_paths(spec)
        path = draw(st.sampled_from(paths))
        parent = _at(spec, path[:-1]) if path else None
        how = draw(
            st.sampled_from(
                ["value", "quantity", "unknown key", "drop", "array for table", "table for value"]
            )
        )
        if is_guard(path) and path != ("run",):
            parent[path[-1]] = draw(BAD_GUARDS)
        elif how == "unknown key" and isinstance(_at(spec, path), dict):
            _at(spec, path)[draw(st.sampled_from(["bogus", "Kind", "rate ", "loadd"]))] = 1
        elif not path or is_guard(path):
            continue
        elif how == "drop" and isinstance(parent, dict):
            del parent[path[-1]]
        elif how == "array for table" and isinstance(parent[path[-1]], dict):
            parent[path[-1]] = draw(st.sampled_from([[], [parent[path[-1]]]]))
        elif how == "table for value":
            parent[path[-1]] = {}
        elif how == "quantity":
            parent[path[-1]] = draw(BAD_QUANTITIES)
        else:
            parent[path[-1]] = draw(WRONG_VALUES)
    return spec


def _at(spec: Any, path: tuple[Any, ...]) -> Any:
    """The value at `path` in `spec`."""
    for key in path:
        spec = spec[key]
    return spec


@st.composite
def broken_toml(draw: st.DrawFn) -> str:
    """The TOML text of a valid spec with one line cut, doubled or given a stray character."""
    lines = tomli_w.dumps(draw(valid_specs())).splitlines()
    at = draw(st.integers(0, len(lines) - 1))
    how = draw(st.sampled_from(["cut", "double", "insert"]))
    if how == "cut":
        lines[at] = lines[at][: draw(st.integers(0, len(lines[at])))]
    elif how == "double":
        lines.insert(at, lines[at])
    else:
        char = draw(st.sampled_from([*"[]{}=\"',#.\\", "\x00", "\t", "é"]))
        column = draw(st.integers(0, len(lines[at])))
        lines[at] = lines[at][:column] + char + lines[at][column:]
    return "\n".join(lines) + "\n"


# ---- The checks.

KEY_PATH = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\[\d+\]|\.[A-Za-z0-9_]+)*")


def names_a_key_or_line(message: str, origin: str) -> bool:
    """Whether a refusal names a key path or a line of the spec file `origin`.

    The message may start with the origin (`<dict>: `, `/path/spec.toml (line N): `); after it
    comes a key path and a colon, or the message names a key path of two parts or more
    elsewhere (`... raise switch.buffer`), or the missing or unknown key in backquotes.
    """
    pattern = re.escape(origin) + r"( \(line \d+\))?: "
    rest = re.sub("^" + pattern, "", message, count=1)
    head = rest.split(": ", 1)[0]
    if KEY_PATH.fullmatch(head) and re.split(r"[.\[]", head)[0] in TOP_LEVEL_KEYS:
        return True
    for match in KEY_PATH.finditer(rest):
        word = match.group()
        if word.split(".")[0].split("[")[0] in TOP_LEVEL_KEYS and re.search(r"[.\[]", word):
            return True
    if re.search(r"(missing|unknown) field `[^`]+`", rest):
        return True
    # A file's refusal may name only its line.
    return origin != "<dict>" and bool(re.match(re.escape(origin) + r" \(line \d+\): ", message))


def check_refusal(error: pfcsim.SpecError, origin: str = "<dict>") -> None:
    """A refusal of the spec `origin` names a key path or a line."""
    message = str(error)
    event("refused")
    assert names_a_key_or_line(message, origin), message
    assert "Traceback" not in message, message


def run_within_guards(spec: dict[str, Any], base_dir: Path) -> None:
    """Runs an accepted spec under the tight guards; it must end within them."""
    guarded = {**spec, "run": {**spec.get("run", {}), **GUARDS}}
    try:
        results = pfcsim.run(guarded, base_dir=base_dir)
        event("run complete")
    except pfcsim.IncompleteRunError as stopped:
        results = stopped.results
        event("run stopped by a guard")
    except pfcsim.SpecError as e:  # the guards themselves may refuse what validate took
        check_refusal(e)
        return
    assert results.stats["events"] <= MAX_EVENTS
    assert results.stats["end_ps"] <= MAX_SIM_TIME_PS


def check_dict_spec(spec: dict[str, Any], base_dir: Path) -> None:
    """The properties of a spec given as a dict."""
    try:
        pfcsim.validate(spec, base_dir=base_dir)
    except pfcsim.SpecError as e:
        check_refusal(e)
        return
    run_within_guards(spec, base_dir)


def check_file_spec(text: str, folder: Path) -> None:
    """The properties of a spec file, through the library and the command line."""
    path = folder / "spec.toml"
    path.write_text(text)
    try:
        pfcsim.validate(path)
        accepted = True
    except pfcsim.SpecError as e:
        check_refusal(e, str(path))
        accepted = False
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(io.StringIO()):
        status = cli.main(["validate", str(path)])
    assert status == (0 if accepted else 2), stderr.getvalue()
    if not accepted:
        assert stderr.getvalue().startswith("error: "), stderr.getvalue()
        assert stderr.getvalue().count("error: ") == 1, stderr.getvalue()
    if accepted:
        # (TOML that Python's reader would refuse but Rust's reads has been checked above.)
        with contextlib.suppress(tomllib.TOMLDecodeError):
            run_within_guards(tomllib.loads(text), folder)


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder for the spec files (the specs refer to no other file)."""
    return tmp_path_factory.mktemp("properties")


@given(valid_specs())
def test_valid_specs_are_accepted_or_refused_by_key_and_run_within_guards(
    folder: Path, spec: dict[str, Any]
) -> None:
    check_dict_spec(spec, folder)


@given(mutated_specs())
def test_mutated_specs_are_refused_by_key_or_run_within_guards(
    folder: Path, spec: dict[str, Any]
) -> None:
    check_dict_spec(spec, folder)


@given(st.one_of(mutated_specs().map(tomli_w.dumps), broken_toml()))
def test_mutated_spec_files_give_one_error_line_naming_a_key_or_line(
    folder: Path, text: str
) -> None:
    check_file_spec(text, folder)
