"""Bad specs fail before anything runs, with the exact message of the Rust reader."""

import tomllib
from pathlib import Path

import pytest

import pfcsim
from conftest import TINY_TOML

HEAD, TRAFFIC = TINY_TOML.split("[[traffic]]")
TOPOLOGY = HEAD[HEAD.index("[topology]") :]
ALL_WORKLOADS = (
    "alistorage, cache_follower, cache_follower_homa, data_mining, data_mining_conga, "
    "data_mining_xpass, enterprise, google_rpc_2008, google_search_rpc, hadoop, "
    "hadoop_fbhdp2015, solar2022, web_search, web_search_pias, web_search_xpass, web_server, "
    "web_server_homa"
)

#: Files the bad specs refer to, written next to them.
FILES = {
    # The cumulative probability goes down at line 3.
    "sizes.cdf": "# size cdf\n1000 0.2\n2000 0.1\n3000 1.0\n",
    # Hosts 0 and 1 hang off switches 2 and 3, which are not linked.
    "split.topo": "4 2 2\n2 3\n0 2 100Gbps 1000ns 0\n1 3 100Gbps 1000ns 0\n",
    # The tiny fabric has hosts 0..=3.
    "far.flows": "2\n0 1 3 10000 0.000001\n0 7 3 10000 0.000002\n",
    # Every flow would be 0 bytes.
    "zero.cdf": "0 0\n0 1\n",
    # Four billion nodes announced for 2 switches and 5 links.
    "huge.topo": "4000000000 2 5\n2 3\n0 2 100Gbps 1000ns 0\n1 2 100Gbps 1000ns 0\n"
    "2 3 100Gbps 1000ns 0\n4 3 100Gbps 1000ns 0\n5 3 100Gbps 1000ns 0\n",
    # A comment and no data.
    "empty.cdf": "# size cdf\n",
    # A flow at the end of the 64-bit picosecond clock.
    "late.flows": "1\n0 2 3 10000 18446744.073709551615\n",
}

#: (test id, spec text, exact message). The spec file is `spec.toml` in the current folder.
BAD_SPECS = [
    (
        "unknown key",
        TINY_TOML + '\n[switch]\nbufer = "9MB"\n',
        "spec.toml (line 18): switch.bufer: unknown field `bufer`, expected one of `buffer`, "
        "`control_strict_priority`, `pfc`, `ecn`, `loopback`, "
        "`egress_limit`",
    ),
    (
        "missing unit",
        TINY_TOML + '\n[switch]\nbuffer = "9000"\n',
        "spec.toml (line 18): switch.buffer: '9000' has no size unit; write it with one of B, "
        'KB, MB, GB, KiB, MiB, GiB (e.g. "9MB")',
    ),
    (
        "number without unit",
        TINY_TOML.replace('duration = "1ms"', "duration = 1"),
        "spec.toml (line 15): traffic[0].duration: 1 has no unit; write it as a string with a "
        'unit, a time such as "2us"',
    ),
    (
        "wrong unit",
        TINY_TOML.replace('host_link = { rate = "100Gbps"', 'host_link = { rate = "100GB"'),
        "spec.toml (line 8): topology.host_link.rate: '100GB' has unknown rate unit 'GB'; use "
        'one of bps, Kbps, Mbps, Gbps, Tbps (e.g. "100Gbps")',
    ),
    (
        "zero rate",
        TINY_TOML.replace('fabric_link = { rate = "100Gbps"', 'fabric_link = { rate = "0Gbps"'),
        "spec.toml (line 9): topology.fabric_link.rate: '0Gbps' is a zero rate; a rate must be "
        "positive",
    ),
    (
        "load 0",
        TINY_TOML.replace("load = 0.3", "load = 0.0"),
        "traffic[0].load: 0 is not a valid load; give a fraction strictly between 0 and 1 "
        "(e.g. 0.5)",
    ),
    (
        "load 1.5",
        TINY_TOML.replace("load = 0.3", "load = 1.5"),
        "traffic[0].load: 1.5 is not a valid load; give a fraction strictly between 0 and 1 "
        "(e.g. 0.5)",
    ),
    (
        "kmin above kmax",
        TINY_TOML + '\n[switch.ecn]\nkmin = "500KB"\nkmax = "200KB"\n',
        "spec.toml: switch.ecn: kmin (500KB) is above kmax (200KB); kmin must be <= kmax",
    ),
    (
        "unknown scheme",
        TINY_TOML + '\n[lb]\nscheme = "magic"\n',
        "spec.toml (line 18): lb.scheme: unknown variant `magic`, expected one of "
        + ", ".join(f"`{s['name']}`" for s in pfcsim.schemes()),
    ),
    (
        "fault on a switch the topology lacks",
        TINY_TOML + '\n[[faults]]\nkind = "silent_drop"\nswitch = "spine:5"\nprobability = 0.01\n',
        'faults[0].switch: "spine:5" names no node of this topology; use node:<id>, '
        "host:0..3, leaf:0..1, spine:0..1",
    ),
    (
        "fault with a bad unit",
        TINY_TOML + '\n[[faults]]\nkind = "link_down"\nlink = ["leaf:0", "spine:0"]\nat = 5\n',
        "spec.toml (line 20): faults[0].at: 5 has no unit; write it as a string with a unit, "
        'a time such as "2us"',
    ),
    (
        "zero flowlet timeout",
        TINY_TOML + '\n[lb]\nscheme = "letflow"\nflowlet_timeout = "0us"\n',
        'spec.toml: lb.flowlet_timeout: must be above 0; give a time such as "100us" (valid: > 0s)',
    ),
    (
        "empty flowlet table",
        TINY_TOML + '\n[lb]\nscheme = "letflow"\ntable_size = 0\n',
        "spec.toml: lb.table_size: 0 is out of range; use 1..=16777216 entries (e.g. 65536)",
    ),
    (
        "DRILL with no sample",
        TINY_TOML + '\n[lb]\nscheme = "drill"\nd = 0\n',
        "spec.toml: lb.d: 0 is out of range; use 1..=16 random samples per packet "
        "(DRILL default 2)",
    ),
    (
        "DRILL with too much memory",
        TINY_TOML + '\n[lb]\nscheme = "drill"\nm = 9\n',
        "spec.toml: lb.m: 9 is out of range; use 0..=8 remembered ports (DRILL default 1)",
    ),
    (
        "clove weight cut",
        TINY_TOML + '\n[lb]\nscheme = "clove"\nweight_cut = 1.5\n',
        "spec.toml: lb.weight_cut: 1.5 is out of range; use 0 < weight_cut < 1 "
        "(the fraction of a path's weight cut per ECN echo, Clove default 0.33)",
    ),
    (
        "clove mode",
        TINY_TOML + '\n[lb]\nscheme = "clove"\nmode = "int"\n',
        "spec.toml (line 19): lb.mode: unknown variant `int`, expected `ecn` or `edge_flowlet`",
    ),
    (
        "bad scheme parameter",
        TINY_TOML + '\n[lb]\nscheme = "ecmp"\nsalt = "x"\n',
        'spec.toml (line 19): lb.salt: invalid type: string "x", expected u64',
    ),
    (
        "unknown traffic key",
        TINY_TOML.replace("load = 0.3", "lod = 0.3"),
        "spec.toml (line 14): traffic[0].lod: unknown field `lod`, expected one of `cdf`, "
        "`load`, `load_of`, `start`, `duration`, `cross_tor_only`, `priority`, `transport`",
    ),
    (
        "unknown traffic kind",
        TINY_TOML.replace('"poisson"', '"poison"'),
        "spec.toml (line 12): traffic[0].kind: unknown variant `poison`, expected one of "
        "`poisson`, `incast`, `background`, `scripted`, `flow_file`, `coflow`, `permutation`",
    ),
    (
        "unknown workload",
        TINY_TOML.replace('"web_search"', '"web_searh"'),
        f"traffic[0].cdf: 'web_searh' is not a shipped workload ({ALL_WORKLOADS}) nor a path "
        "to a .cdf file",
    ),
    (
        "non-monotone CDF file",
        TINY_TOML.replace('"web_search"', '"sizes.cdf"'),
        "traffic[0].cdf: sizes.cdf: CDF not monotone at line 3: cumulative probability 0.1 "
        "after 0.2, expected probabilities that never decrease",
    ),
    (
        "CDF of zero sizes",
        TINY_TOML.replace('"web_search"', '"zero.cdf"'),
        "traffic[0].cdf: zero.cdf: CDF line 2: all of the probability is at size 0, so the mean "
        "flow size is 0 bytes, expected sizes above 0",
    ),
    (
        "CDF without data lines",
        TINY_TOML.replace('"web_search"', '"empty.cdf"'),
        "traffic[0].cdf: empty.cdf: CDF line 2: file ends without a data line, expected lines "
        'of "<size_bytes> <cumulative_probability>"',
    ),
    (
        "ns-3 node count beyond the links",
        '[topology]\nkind = "ns3_file"\npath = "huge.topo"\n\n[[traffic]]' + TRAFFIC,
        "topology.path: huge.topo: topology line 1: node count 4000000000 is more than 2 "
        "switches and 5 links can make (every host has exactly one link), expected at most 7 "
        "nodes",
    ),
    (
        "array for a table",
        "switch = []\n" + TINY_TOML,
        "spec.toml (line 1): switch: invalid type: sequence, expected a table",
    ),
    (
        "RTO below the base RTT",
        TINY_TOML + '\n[nic]\nrto = "1ps"\n',
        "nic.rto: 1ps is not above the base RTT of flow 0 (host 1 to host 2), 8.356us: a full "
        "packet out and its ACK back on the idle path; every packet would time out before its "
        "ACK could arrive, and be sent again without end; give a timeout well above it "
        '(default "4ms"), or "0s" for none',
    ),
    (
        "IRN parameters under go-back-N",
        TINY_TOML + '\n[nic.irn]\nrto_low = "50us"\n',
        'spec.toml: nic.irn: parameters of IRN, but nic.recovery is "go_back_n"; set '
        'nic.recovery = "irn", or remove the table',
    ),
    (
        "IRN high timeout below the low one",
        TINY_TOML + '\n[nic]\nrecovery = "irn"\n[nic.irn]\nrto_high = "50us"\n',
        "spec.toml: nic.irn.rto_high: 50us is below nic.irn.rto_low (100us); the high timeout "
        'must be at least the low one (e.g. "320us" and "100us")',
    ),
    (
        "IRN low timeout below the base RTT",
        TINY_TOML + '\n[nic]\nrecovery = "irn"\n[nic.irn]\nrto_low = "1us"\n',
        "nic.irn.rto_low: 1us is not above the base RTT of flow 0 (host 1 to host 2), 8.356us: "
        "a full packet out and its ACK back on the idle path; every packet would time out "
        "before its ACK could arrive, and be sent again without end; give a timeout well above "
        'it (default "100us")',
    ),
    (
        "disconnected ns-3 topology",
        '[topology]\nkind = "ns3_file"\npath = "split.topo"\n\n[[traffic]]' + TRAFFIC,
        "topology.path: split.topo: the topology is disconnected: host 1 cannot be reached "
        "from host 0",
    ),
    (
        "flow-file host out of range",
        TOPOLOGY + '[[traffic]]\nkind = "flow_file"\npath = "far.flows"\n',
        "traffic[0].path: far.flows: flow 1 (line 3): destination 7 is not a host of the "
        "topology; hosts are 0..=3",
    ),
    (
        "flow starting after the clock's end",
        TOPOLOGY + '[[traffic]]\nkind = "flow_file"\npath = "late.flows"\n',
        "traffic[0]: a flow would start at 18446744.073710 s, after 1000000s, the latest start "
        "a run may have (the simulated clock counts picoseconds in 64 bits); start the traffic "
        "earlier",
    ),
    (
        "time beyond the clock's end",
        TINY_TOML + '\n[run]\nstop_at = "18446744s"\n',
        "spec.toml (line 18): run.stop_at: '18446744s' is longer than 1000000s, the longest "
        "time a spec may give (the simulated clock counts picoseconds in 64 bits)",
    ),
    (
        "buffer smaller than headroom",
        TINY_TOML + '\n[switch]\nbuffer = "100KB"\n',
        "switch 4: the buffer (100000 B) leaves no shared pool after its ports' headroom and "
        "reserve (128576 B); raise switch.buffer or lower switch.pfc.headroom",
    ),
    (
        "missing topology",
        "[[traffic]]" + TRAFFIC,
        "spec.toml (line 1): missing field `topology`",
    ),
    (
        "rate and oversubscription",
        TINY_TOML.replace("host_link = ", "oversubscription = 2.0\nhost_link = "),
        "spec.toml: topology.oversubscription: give either it or topology.fabric_link.rate, "
        "not both",
    ),
    (
        "priority out of range",
        TINY_TOML + "priority = 9\n",
        "traffic[0].priority: 9 is out of range; use 1..=7 (0 is the control class)",
    ),
    (
        "TOML syntax",
        TINY_TOML.replace("leaves = 2", "leaves = "),
        "spec.toml (line 5): invalid string\nexpected `\"`, `'`",
    ),
]


@pytest.fixture
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A temporary current folder holding the files of `FILES`."""
    monkeypatch.chdir(tmp_path)
    for name, text in FILES.items():
        (tmp_path / name).write_text(text)
    return tmp_path


@pytest.mark.parametrize(
    ("text", "message"), [case[1:] for case in BAD_SPECS], ids=[case[0] for case in BAD_SPECS]
)
def test_bad_spec_file(in_tmp: Path, text: str, message: str) -> None:
    (in_tmp / "spec.toml").write_text(text)
    for check in (pfcsim.validate, pfcsim.run):
        with pytest.raises(pfcsim.SpecError) as caught:
            check("spec.toml")
        assert str(caught.value) == message


@pytest.mark.parametrize(
    ("text", "message"),
    [case[1:] for case in BAD_SPECS if case[0] != "TOML syntax"],
    ids=[case[0] for case in BAD_SPECS if case[0] != "TOML syntax"],
)
def test_bad_spec_dict(in_tmp: Path, text: str, message: str) -> None:
    # The same message, with <dict> for the file and no line number.
    expected = message.replace("spec.toml", "<dict>", 1)
    if expected.startswith("<dict> (line "):
        expected = "<dict>" + expected[expected.index(")") + 1 :]
    with pytest.raises(pfcsim.SpecError) as caught:
        pfcsim.validate(tomllib.loads(text), base_dir=in_tmp)
    assert str(caught.value) == expected


def test_dict_values_toml_cannot_hold_are_named_by_key_path() -> None:
    spec = tomllib.loads(TINY_TOML)
    spec["traffic"][0]["load"] = {0.3}
    with pytest.raises(pfcsim.SpecError) as caught:
        pfcsim.validate(spec)
    assert str(caught.value) == (
        "<dict>: traffic[0].load: set {0.3} is not a spec value; use a string, number, bool, "
        "list or dict"
    )


#: (test id, spec text, start of the message, its end): specs whose runs would take more
#: memory than they may plan for; the estimate between start and end depends on the sizes of
#: the simulator's structures, and the default limit on the machine.
TOO_LARGE = [
    (
        "leaf-spine of 10^10 hosts",
        TINY_TOML.replace("leaves = 2", "leaves = 100000").replace(
            "hosts_per_leaf = 2", "hosts_per_leaf = 100000"
        ),
        "topology: a fabric of 10000000000 hosts, 100002 switches and 10000200000 links "
        "(leaves = 100000, spines = 2, hosts_per_leaf = 100000): about ",
        "; make the fabric smaller, or raise run.max_memory",
    ),
    (
        "Poisson arrivals over 1000000 s",
        TINY_TOML.replace('duration = "1ms"', 'duration = "1000000s"'),
        "traffic[0].duration: about 8765522279 flows (Poisson arrivals at 8.766e3 per second "
        "for 1000000s), about ",
        "; shorten the duration or lower the load, or raise run.max_memory",
    ),
    (
        "incast repeated 10^8 times",
        HEAD + '[[traffic]]\nkind = "incast"\nreceiver = 0\nsenders = 2\n'
        'total_size = "2MB"\nperiod = "1ms"\nrepeat = 100000000\n',
        "traffic[0].repeat: about 200000000 flows (100000000 repetitions of 2 senders), about ",
        "; lower repeat or senders, or raise run.max_memory",
    ),
]


@pytest.mark.parametrize(
    ("text", "start", "end"), [case[1:] for case in TOO_LARGE], ids=[c[0] for c in TOO_LARGE]
)
def test_specs_beyond_the_memory_limit_are_refused(
    in_tmp: Path, text: str, start: str, end: str
) -> None:
    (in_tmp / "spec.toml").write_text(text)
    for check in (pfcsim.validate, pfcsim.run):
        with pytest.raises(pfcsim.SpecError) as caught:
            check("spec.toml")
        message = str(caught.value)
        assert message.startswith(start), message
        assert message.endswith(end), message
        assert "above run.max_memory (unset: " in message, message


def test_missing_spec_file(in_tmp: Path) -> None:
    with pytest.raises(pfcsim.SpecError) as caught:
        pfcsim.run("nope.toml")
    assert str(caught.value) == "cannot read nope.toml: No such file or directory (os error 2)"
