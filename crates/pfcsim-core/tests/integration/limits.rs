//! Bounded resources for any input: a spec that would take more memory than a run may plan
//! for (`run.max_memory`), or that could never finish, is refused before anything large is
//! built and before the simulation starts, with one message that names the key, the estimate
//! and the limit. Without these checks each spec here took all of the machine's memory (the
//! allocator aborted the process) or ran without end.

use crate::testing::{tiny, tiny_dir, to_text, TINY};
use pfcsim_core::run::{build_simulation, run_scenario};
use pfcsim_core::sim::RunOutput;
use pfcsim_core::spec::{Scenario, Spec};
use std::ops::ControlFlow;
use std::path::PathBuf;

/// The message the spec `text` is refused with, at reading, preparation or setup (it must be
/// refused); relative paths resolve from the tiny spec's folder.
fn refusal(text: &str) -> String {
    let built = Spec::from_toml(text, "s.toml")
        .and_then(|spec| Scenario::prepare(spec, &tiny_dir()))
        .and_then(build_simulation);
    match built {
        Ok(_) => panic!("accepted:\n{text}"),
        Err(e) => e.message,
    }
}

/// Checks that the spec `text` is accepted, simulation set up included.
fn accepted(text: &str) {
    let spec = Spec::from_toml(text, "s.toml").unwrap_or_else(|e| panic!("{e}"));
    let sc = Scenario::prepare(spec, &tiny_dir()).unwrap_or_else(|e| panic!("{e}"));
    build_simulation(sc).unwrap_or_else(|e| panic!("{e}"));
}

/// The tiny spec with the keys of `table` (TOML) set in its `[topology]`, or replacing it
/// with `replace`.
fn with_topology(table: &str, replace: bool) -> String {
    let mut spec = tiny();
    let keys: toml::Table = table.parse().unwrap();
    let topology = spec["topology"].as_table_mut().unwrap();
    if replace {
        topology.clear();
    }
    topology.extend(keys);
    to_text(&spec)
}

/// The tiny spec with its traffic replaced by the `[[traffic]]` entry `entry` (TOML keys) and
/// `run` as the body of its `[run]` table.
fn with_traffic(entry: &str, run: &str) -> String {
    let mut spec = tiny();
    spec.remove("traffic");
    format!("{}\n[run]\n{run}\n[[traffic]]\n{entry}\n", to_text(&spec))
}

/// A file `name` with `text` in a folder of this test process, by absolute path.
fn temp_file(name: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("pfcsim-limits-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// A CDF whose sizes are all 0 bytes made the Poisson generator's arrival rate infinite: it
/// drew flows at one instant without end.
#[test]
fn a_cdf_of_zero_sizes_is_refused() {
    for (name, table) in [("zero.cdf", "0 1\n"), ("zeros.cdf", "0 0\n0 1\n")] {
        let path = temp_file(name, table);
        let text = TINY.replace("\"web_search\"", &format!("{:?}", path.to_str().unwrap()));
        let lines = table.lines().count();
        assert_eq!(
            refusal(&text),
            format!(
                "traffic[0].cdf: {}: CDF line {lines}: all of the probability is at size 0, so \
                 the mean flow size is 0 bytes, expected sizes above 0",
                path.display()
            )
        );
    }
}

/// Fabrics of billions of nodes or links were built (and their routing computed) before
/// anything checked their size.
#[test]
fn fabrics_too_large_are_refused_before_they_are_built() {
    let leaf_spine = |leaves: u64, spines: u64, hosts: u64| {
        with_topology(
            &format!("leaves = {leaves}\nspines = {spines}\nhosts_per_leaf = {hosts}"),
            false,
        )
    };
    let fat_tree = with_topology(
        "kind = \"fat_tree\"\nk = 1000\nhost_link = { rate = \"100Gbps\", delay = \"1us\" }\n\
         fabric_link = { rate = \"100Gbps\", delay = \"1us\" }",
        true,
    );
    for (text, shape) in [
        (
            leaf_spine(2, 2_147_483_648, 2),
            "4 hosts, 2147483650 switches and 4294967300 links (leaves = 2, spines = \
             2147483648, hosts_per_leaf = 2)",
        ),
        (
            leaf_spine(100_000, 2, 100_000),
            "10000000000 hosts, 100002 switches and 10000200000 links (leaves = 100000, spines \
             = 2, hosts_per_leaf = 100000)",
        ),
        (
            fat_tree,
            "250000000 hosts, 1250000 switches and 750000000 links (k = 1000)",
        ),
    ] {
        let e = refusal(&text);
        assert!(
            e.starts_with(&format!("topology: a fabric of {shape}: about ")),
            "{e}"
        );
        assert!(
            e.contains(" to simulate, above run.max_memory (unset: ")
                && e.ends_with("; make the fabric smaller, or raise run.max_memory"),
            "{e}"
        );
    }
    // Within the limit, the limit is what the message gives.
    let e = refusal(&format!(
        "{}\n[run]\nmax_memory = \"100KB\"\n",
        leaf_spine(8, 8, 16)
    ));
    assert!(
        e.starts_with("topology: a fabric of 128 hosts, 16 switches and 192 links")
            && e.contains(" to simulate, above run.max_memory (100KB); "),
        "{e}"
    );
    accepted(&format!(
        "{}\n[run]\nmax_memory = \"1GB\"\n",
        leaf_spine(8, 8, 16)
    ));
}

/// An ns-3 topology file announcing four billion nodes for five links had them allocated
/// before its lines were checked.
#[test]
fn an_ns3_header_beyond_its_lines_is_refused() {
    let links = "0 2 100Gbps 1000ns 0\n1 2 100Gbps 1000ns 0\n2 3 100Gbps 1000ns 0\n\
                 4 3 100Gbps 1000ns 0\n5 3 100Gbps 1000ns 0\n";
    let path = temp_file("huge.topo", &format!("4000000000 2 5\n2 3\n{links}"));
    let text = with_topology(
        &format!("kind = \"ns3_file\"\npath = {:?}", path.to_str().unwrap()),
        true,
    );
    assert_eq!(
        refusal(&text),
        format!(
            "topology.path: {}: topology line 1: node count 4000000000 is more than 2 switches \
             and 5 links can make (every host has exactly one link), expected at most 7 nodes",
            path.display()
        )
    );
}

/// With a timeout below the round-trip time every packet timed out before its ACK could come
/// back and was sent again, without end (`rto = "1ps"` never finished).
#[test]
fn an_rto_below_the_base_rtt_is_refused() {
    // The tiny fabric's longest path: 4 links of 100 Gbps and 1 us; a 1048-byte packet and a
    // 64-byte ACK take 4 x (83.84 ns + 1 us) + 4 x (5.12 ns + 1 us) = 8355.84 ns.
    let rto = |value: &str| format!("{TINY}\n[nic]\nrto = \"{value}\"\n");
    for value in ["1ps", "8us", "8355840ps"] {
        let e = refusal(&rto(value));
        assert!(
            e.starts_with(&format!(
                "nic.rto: {value} is not above the base RTT of flow "
            )),
            "{e}"
        );
        assert!(
            e.contains(
                "), 8.356us: a full packet out and its ACK back on the idle path; every \
                 packet would time out before its ACK could arrive, and be sent again without \
                 end; give a timeout well above it (default \"4ms\"), or \"0s\" for none"
            ),
            "{e}"
        );
    }
    accepted(&rto("8356ns"));
    accepted(&rto("0s"));
}

/// Poisson traffic over a long duration and incasts repeated a hundred million times were
/// generated in full, flow by flow, until the allocator gave up.
#[test]
fn traffic_too_large_is_refused_before_it_is_made() {
    let poisson = |cdf: &str, duration: &str| {
        format!("kind = \"poisson\"\ncdf = \"{cdf}\"\nload = 0.5\nduration = \"{duration}\"")
    };
    let e = refusal(&with_traffic(&poisson("web_search", "1000000s"), ""));
    assert!(
        e.starts_with(
            "traffic[0].duration: about 14609203798 flows (Poisson arrivals at 1.461e4 per \
             second for 1000000s), about "
        ) && e.contains(" to simulate with the fabric, above run.max_memory (unset: ")
            && e.ends_with("; shorten the duration or lower the load, or raise run.max_memory"),
        "{e}"
    );
    // 6.1 million flows of 40 KB on average over 10 s, against a limit of 1 GB.
    let e = refusal(&with_traffic(
        &poisson("alistorage", "10s"),
        "max_memory = \"1GB\"",
    ));
    assert!(
        e.starts_with(
            "traffic[0].duration: about 6116986 flows (Poisson arrivals at 6.117e5 per second \
             for 10s), about "
        ) && e.contains(
            " to simulate with the fabric, above run.max_memory (1GB), which leaves \
             room for about "
        ),
        "{e}"
    );
    let incast = "kind = \"incast\"\nreceiver = 0\nsenders = 2\ntotal_size = \"2MB\"\n\
                  period = \"1ms\"\nrepeat = 100000000";
    let e = refusal(&with_traffic(incast, ""));
    assert!(
        e.starts_with(
            "traffic[0].repeat: about 200000000 flows (100000000 repetitions of 2 senders), \
             about "
        ) && e.ends_with("; lower repeat or senders, or raise run.max_memory"),
        "{e}"
    );
    // What the first generator made counts against the second's room.
    let room = with_traffic(
        &format!(
            "{}\n[[traffic]]\n{}",
            poisson("alistorage", "100ms"),
            incast
        ),
        "max_memory = \"1GB\"",
    );
    let e = refusal(&room);
    assert!(e.starts_with("traffic[1].repeat: "), "{e}");
}

/// An array where a table belongs was read field by field, so `switch = []` stood for the
/// default `[switch]`.
#[test]
fn an_array_where_a_table_belongs_is_refused() {
    for key in ["switch", "nic", "run", "transport", "coflow"] {
        assert_eq!(
            refusal(&format!("{key} = []\n{TINY}")),
            format!("s.toml (line 1): {key}: invalid type: sequence, expected a table")
        );
    }
    let e = refusal(&TINY.replace(
        "host_link = { rate = \"100Gbps\", delay = \"1us\" }",
        "host_link = [\"100Gbps\", \"1us\"]",
    ));
    assert_eq!(
        e,
        "s.toml (line 8): topology.host_link: invalid type: sequence, expected a table"
    );
}

/// Runs the tiny spec with `run` as the body of its `[run]` table.
fn run_tiny(run: &str) -> RunOutput {
    let text = format!("{TINY}\n[run]\n{run}\n");
    let spec = Spec::from_toml(&text, "s.toml").unwrap_or_else(|e| panic!("{e}"));
    let sc = Scenario::prepare(spec, &tiny_dir()).unwrap_or_else(|e| panic!("{e}"));
    run_scenario(sc, &mut |_| ControlFlow::Continue(())).unwrap()
}

/// `run.max_events` and `run.max_sim_time` end a run that goes on too long where they say,
/// with its results up to there and the reason in `incomplete`; a guard the run does not
/// reach changes nothing.
#[test]
fn guards_end_a_run_early_and_mark_it_incomplete() {
    let whole = run_tiny("");
    assert_eq!(whole.stats.incomplete, None);
    assert_eq!(whole.stats.flows_finished, 14);

    let by_events = run_tiny("max_events = 1000");
    assert_eq!(by_events.stats.events, 1000);
    assert!(by_events.stats.flows_finished < 14);
    let reason = by_events.stats.incomplete.clone().unwrap();
    assert!(
        reason.starts_with("run.max_events (1000): the run stopped after 1000 events, at ")
            && reason.ends_with(
                " flows finished; what it measured up to there is in the results, marked \
                 incomplete; raise run.max_events if the run needs more, or look for what \
                 keeps it going (a retransmission storm, a PFC deadlock)"
            ),
        "{reason}"
    );

    let by_time = run_tiny("max_sim_time = \"100us\"");
    assert_eq!(by_time.stats.end_ps, 100_000_000);
    let reason = by_time.stats.incomplete.clone().unwrap();
    assert!(
        reason.starts_with(
            "run.max_sim_time (\"100us\"): the run reached it, at 0.100000 ms of simulated \
             time, with "
        ),
        "{reason}"
    );

    // Guards beyond the run's end: the same run, complete.
    for run in ["max_events = 100000000", "max_sim_time = \"10s\""] {
        let out = run_tiny(run);
        assert_eq!(out.stats.incomplete, None, "{run}");
        assert_eq!(out.stats.fingerprint, whole.stats.fingerprint, "{run}");
        assert_eq!(out.stats.events, whole.stats.events, "{run}");
    }
    for (run, message) in [
        (
            "max_events = 0",
            "s.toml: run.max_events: must be at least 1, or left out for no limit",
        ),
        (
            "max_sim_time = \"0s\"",
            "s.toml: run.max_sim_time: must be above 0 (e.g. \"100ms\"), or left out for no \
             limit",
        ),
    ] {
        assert_eq!(refusal(&format!("{TINY}\n[run]\n{run}\n")), message);
    }
}

/// Times near the end of the 64-bit picosecond clock wrapped around: a flow-file flow at
/// 18446744.07 s ran nothing (the default stop, its start + 1 s, wrapped to before it), an
/// incast whose repetitions passed the clock's end started them early, and with
/// `stop_when_done = false` such a flow made a run that never ended. Times beyond
/// `Time::SPEC_MAX` (1000000 s) are refused where they are written, and flows that would start
/// after it where they are made.
#[test]
fn times_beyond_the_clock_are_refused() {
    let late = "traffic[0]: a flow would start at 18446744.073710 s, after 1000000s, the latest \
                start a run may have (the simulated clock counts picoseconds in 64 bits); start \
                the traffic earlier";
    let flows = temp_file("late.flows", "1\n0 2 3 10000 18446744.073709551615\n");
    assert_eq!(
        refusal(&with_traffic(
            &format!("kind = \"flow_file\"\npath = {:?}", flows.to_str().unwrap()),
            ""
        )),
        late
    );
    let incast = "kind = \"incast\"\nreceiver = 0\nsenders = 1\ntotal_size = \"1KB\"\n\
                  period = \"1000000s\"\nrepeat = 20";
    let e = refusal(&with_traffic(incast, ""));
    assert!(
        e.starts_with("traffic[0]: a flow would start at 2000000.000000 s, after 1000000s"),
        "{e}"
    );
    let e = refusal(&with_traffic(
        "kind = \"scripted\"\nflows = [{ src = 0, dst = 2, size = \"1KB\", start = \"18446744s\" }]",
        "",
    ));
    assert_eq!(
        e,
        "s.toml (line 21): traffic[0].flows[0].start: '18446744s' is longer than 1000000s, the \
         longest time a spec may give (the simulated clock counts picoseconds in 64 bits)"
    );
    // At the limit, a flow starts and finishes.
    let at_limit = with_traffic(
        "kind = \"scripted\"\nflows = [{ src = 0, dst = 2, size = \"1KB\", start = \"1000000s\" }]",
        "",
    );
    let spec = Spec::from_toml(&at_limit, "s.toml").unwrap_or_else(|e| panic!("{e}"));
    let sc = Scenario::prepare(spec, &tiny_dir()).unwrap_or_else(|e| panic!("{e}"));
    let out = run_scenario(sc, &mut |_| ControlFlow::Continue(())).unwrap();
    assert_eq!(out.stats.flows_finished, 1);
}
