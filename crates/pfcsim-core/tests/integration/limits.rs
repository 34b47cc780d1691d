//! Bounded resources for any input: a spec whose run would take all of the machine's memory
//! or could never finish is refused before anything large is built and before the simulation
//! starts, with one message that names the key and the reason.

use crate::testing::{tiny, tiny_dir, to_text, TINY};
use pfcsim_core::run::build_simulation;
use pfcsim_core::spec::{Scenario, Spec};
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
