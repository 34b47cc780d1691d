//! Property tests of the file readers (proptest): ns-3 topology files, ns-3 flow files and
//! CDF tables, as arbitrary bytes, as structured mutations of valid files (tokens swapped for
//! edge values, lines deleted, repeated, swapped or cut short), and as topology and flow files
//! written from scratch (random fabrics, flows between any nodes). Whatever the file, reading
//! it never panics and every error names a line of the file; a spec that uses the file is
//! either refused with one message naming its key path, or set up and run within its guards.
//!
//! Budget: proptest's default of 256 cases per property, from a fixed seed so that a run is
//! repeatable: under a second for the five in a release build. A bigger search, from another
//! seed: `PROPTEST_CASES=20000 PROPTEST_RNG_SEED=<any u64> cargo test --release -p pfcsim-core
//! --test integration parsers::` (about 25 s; docs/reference/architecture.md, Tests).

use crate::testing::{tiny, tiny_dir, to_text};
use pfcsim_core::cdf::FlowSizeCdf;
use pfcsim_core::ns3::{parse_flows, parse_topology};
use pfcsim_core::run::run_scenario;
use pfcsim_core::spec::{Scenario, Spec};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed};
use std::ops::ControlFlow;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A leaf-spine of 2 leaves (4, 5), 2 spines (6, 7) and 4 hosts in the ns-3 format.
const TOPOLOGY: &str = "8 4 8\n4 5 6 7\n0 4 100Gbps 1000ns 0\n1 4 100Gbps 1000ns 0\n\
                        2 5 100Gbps 1000ns 0\n3 5 100Gbps 1000ns 0\n4 6 100Gbps 1000ns 0\n\
                        4 7 100Gbps 1000ns 0\n5 6 100Gbps 1000ns 0\n5 7 100Gbps 1000ns 0\n";
/// Flows between the tiny spec's hosts (0..=3), in the 5-column format.
const FLOWS: &str = "3\n0 2 3 10000 0.000001\n1 3 3 20000 0.000002\n\n2 1 3 5000 0.0000025\n";
/// The same in the 6-column (HPCC) format.
const FLOWS_HPCC: &str = "2\n0 2 3 100 10000 0.000001\n3 1 3 100 20000 0.000002\n";
/// A CDF table with a comment, a blank line and a point mass.
const CDF: &str = "# size cdf\n0 0\n1000 0.5\n\n1000 0.6\n10000 0.9\n100000 1\n";

/// Values that break readers: signs, the edges of 32- and 64-bit integers, floats that are
/// not finite or not exact, empty and odd text, units at their limits.
const EDGE_TOKENS: &[&str] = &[
    "0",
    "1",
    "2",
    "3",
    "7",
    "8",
    "-1",
    "-0",
    "4294967295",
    "4294967296",
    "18446744073709551615",
    "18446744073709551616",
    "1e308",
    "1e-320",
    "nan",
    "inf",
    "0.5",
    "1.0000000001",
    "",
    "x",
    "#",
    "\u{feff}",
    "100Gbps",
    "0Gbps",
    "1bps",
    "99999999Tbps",
    "1000ns",
    "0ns",
    "0ps",
    "18446744073709551615ps",
    "2.000000070",
    "18446744.073709551615",
    "99999999999.9",
    "1e-3",
];

/// One change to the lines of a file; indices are taken modulo the number of lines (or
/// fields).
#[derive(Clone, Debug)]
enum Mutation {
    /// Field `field` of line `line` becomes `EDGE_TOKENS[token]`.
    Token {
        line: usize,
        field: usize,
        token: usize,
    },
    /// Line `line` gets `EDGE_TOKENS[token]` as one more field.
    Append {
        line: usize,
        token: usize,
    },
    Delete(usize),
    Repeat(usize),
    Swap(usize, usize),
    Blank(usize),
    /// The file ends `keep` bytes in (at a character boundary).
    Truncate(usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let token = 0..EDGE_TOKENS.len();
    prop_oneof![
        4 => (any::<usize>(), any::<usize>(), token.clone())
            .prop_map(|(line, field, token)| Mutation::Token { line, field, token }),
        1 => (any::<usize>(), token).prop_map(|(line, token)| Mutation::Append { line, token }),
        1 => any::<usize>().prop_map(Mutation::Delete),
        1 => any::<usize>().prop_map(Mutation::Repeat),
        1 => (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Mutation::Swap(a, b)),
        1 => any::<usize>().prop_map(Mutation::Blank),
        1 => any::<usize>().prop_map(Mutation::Truncate),
    ]
}

/// `text` with the `mutations` applied in turn.
fn mutate(text: &str, mutations: &[Mutation]) -> String {
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    for m in mutations {
        let n = lines.len().max(1);
        if lines.is_empty() {
            lines.push(String::new());
        }
        match *m {
            Mutation::Token { line, field, token } => {
                let mut fields: Vec<&str> = lines[line % n].split_whitespace().collect();
                if fields.is_empty() {
                    fields.push("");
                }
                let at = field % fields.len();
                fields[at] = EDGE_TOKENS[token];
                lines[line % n] = fields.join(" ");
            }
            Mutation::Append { line, token } => {
                lines[line % n] = format!("{} {}", lines[line % n], EDGE_TOKENS[token]);
            }
            Mutation::Delete(line) => {
                lines.remove(line % n);
            }
            Mutation::Repeat(line) => lines.insert(line % n, lines[line % n].clone()),
            Mutation::Swap(a, b) => lines.swap(a % n, b % n),
            Mutation::Blank(line) => lines.insert(line % n, String::new()),
            Mutation::Truncate(keep) => {
                let joined = lines.join("\n");
                let mut at = keep % (joined.len() + 1);
                while !joined.is_char_boundary(at) {
                    at -= 1;
                }
                lines = joined[..at].lines().map(str::to_string).collect();
            }
        }
    }
    let mut out = lines.join("\n");
    out.push('\n');
    out
}

/// A valid file among `files`, mutated 1 to 3 times.
fn mutated(files: &'static [&'static str]) -> impl Strategy<Value = String> {
    (
        proptest::sample::select(files),
        proptest::collection::vec(mutation(), 1..=3),
    )
        .prop_map(|(file, mutations)| mutate(file, &mutations))
}

/// Topology files written from scratch in the format: 2 to 6 hosts, each linked to a random
/// one of 1 to 4 switches, and random links between switches (cycles, parallel links, none
/// at all); now and then a link between any two nodes, rates and delays from the small to the
/// large, and a header that counts one switch or link too many or too few.
fn generated_topology() -> impl Strategy<Value = String> {
    let rate = prop_oneof![
        8 => proptest::sample::select(vec!["10Gbps", "100Gbps", "400Gbps"]),
        1 => proptest::sample::select(vec!["1bps", "1Tbps"]),
    ];
    let delay = prop_oneof![
        8 => proptest::sample::select(vec!["0ns", "1ps", "1000ns", "2us"]),
        1 => Just("1000s"),
    ];
    let off = prop_oneof![18 => Just(0i64), 1 => Just(-1i64), 1 => Just(1i64)];
    (2u32..=6, 1u32..=4).prop_flat_map(move |(hosts, switches)| {
        let nodes = hosts + switches;
        (
            proptest::collection::vec(hosts..nodes, hosts as usize),
            proptest::collection::vec((0..switches, 1..switches.max(2)), 0..=6),
            proptest::option::weighted(0.2, (0..nodes, 0..nodes)),
            proptest::collection::vec((rate.clone(), delay.clone()), 16),
            (off.clone(), off.clone()),
        )
            .prop_map(move |(uplinks, fabric, extra, units, (off_s, off_l))| {
                let mut links: Vec<(u32, u32)> = (0..hosts).zip(uplinks).collect();
                // Between two different switches (none with a single switch).
                let fabric = fabric.into_iter().filter(|_| switches > 1);
                links.extend(fabric.map(|(a, step)| (hosts + a, hosts + (a + step) % switches)));
                links.extend(extra);
                let count = |n: usize, off: i64| (n as i64 + off).max(0);
                let ids: Vec<String> = (hosts..nodes).map(|id| id.to_string()).collect();
                let mut text = format!(
                    "{nodes} {} {}\n{}\n",
                    count(ids.len(), off_s),
                    count(links.len(), off_l),
                    ids.join(" ")
                );
                for (i, (a, b)) in links.into_iter().enumerate() {
                    let (rate, delay) = units[i % units.len()];
                    text += &format!("{a} {b} {rate} {delay} 0\n");
                }
                text
            })
    })
}

/// Flow files written from scratch: flows between nodes 0..6 of the tiny fabric (its hosts
/// are 0..=3), with priorities, sizes and start times from the valid to the absurd, in
/// either format.
fn generated_flows() -> impl Strategy<Value = String> {
    let size = proptest::sample::select(vec!["1", "1000", "1000000", "18446744073709551615"]);
    let start = proptest::sample::select(vec![
        "0",
        "0.000001",
        "2.000000070",
        "18446744.073709551615",
        "18446744.073709551",
    ]);
    let flow = (0u32..6, 0u32..6, 0u8..9, size, start);
    (proptest::collection::vec(flow, 0..=6), any::<bool>()).prop_map(|(flows, hpcc)| {
        let mut text = format!("{}\n", flows.len());
        for (src, dst, priority, size, start) in flows {
            let dport = if hpcc { "100 " } else { "" };
            text += &format!("{src} {dst} {priority} {dport}{size} {start}\n");
        }
        text
    })
}

/// Arbitrary bytes (read as the reader would get them: invalid UTF-8 replaced) or a mutated
/// valid file, half and half.
fn any_file(files: &'static [&'static str]) -> impl Strategy<Value = String> {
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..256)
            .prop_map(|bytes| String::from_utf8_lossy(&bytes).into_owned()),
        mutated(files),
    ]
}

/// The config of every property here: the number of cases from `PROPTEST_CASES` (default
/// 256), a fixed seed unless `PROPTEST_RNG_SEED` gives one, and no files of failures.
fn config() -> Config {
    let mut config = Config::default();
    if std::env::var_os("PROPTEST_RNG_SEED").is_none() {
        config.rng_seed = RngSeed::Fixed(22);
    }
    config.failure_persistence = None;
    config
}

/// Whether `message` names a line of `text`: "line N" with N from 1 to one past the last
/// line (where a file that ends too early is reported).
fn names_a_line(message: &str, text: &str) -> bool {
    let last = text.lines().count() + 1;
    message.match_indices("line ").any(|(at, word)| {
        let digits: String = message[at + word.len()..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        digits
            .parse::<usize>()
            .is_ok_and(|n| (1..=last).contains(&n))
    })
}

/// The top-level keys of a spec: a key path starts with one of them.
const TOP_LEVEL_KEYS: &[&str] = &[
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
];

/// Whether `message` names a key path: it starts with one (`traffic[0].path: ...`), or
/// names one with at least two parts (`... raise switch.buffer`).
fn names_a_key(message: &str) -> bool {
    let is_path = |word: &str| {
        let top = word.split(['.', '[']).next().unwrap_or("");
        TOP_LEVEL_KEYS.contains(&top)
            && word
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "_.[]".contains(c))
    };
    let first = message.split(": ").next().unwrap_or("");
    is_path(first)
        || message
            .split(|c: char| c.is_whitespace() || c == ',' || c == ';' || c == '`')
            .any(|word| is_path(word) && (word.contains('.') || word.contains('[')))
}

/// A file of this test process holding `text`, by absolute path, new at each call.
fn temp_file(ext: &str, text: &str) -> PathBuf {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!("pfcsim-parsers-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temporary folder");
    let path = dir.join(format!("{}.{ext}", NEXT.fetch_add(1, Ordering::Relaxed)));
    std::fs::write(&path, text).expect("a temporary file");
    path
}

/// Reads, prepares and runs the spec `text` under tight guards. A refusal must be one line
/// that names a key path; a run must stay within its guards.
fn refused_or_run_within_guards(text: &str) -> Result<(), TestCaseError> {
    const MAX_EVENTS: u64 = 5_000;
    let text = format!(
        "{text}\n[run]\nmax_memory = \"64MB\"\nmax_events = {MAX_EVENTS}\nmax_sim_time = \"1ms\"\n"
    );
    let outcome = Spec::from_toml(&text, "s.toml")
        .and_then(|spec| Scenario::prepare(spec, &tiny_dir()))
        .and_then(|sc| run_scenario(sc, &mut |_| ControlFlow::Continue(())));
    match outcome {
        Err(e) => {
            prop_assert!(!e.message.contains('\n'), "{}", e.message);
            prop_assert!(names_a_key(&e.message), "names no key: {}", e.message);
        }
        Ok(out) => {
            prop_assert!(
                out.stats.events <= MAX_EVENTS,
                "{} events",
                out.stats.events
            );
            prop_assert!(
                out.stats.end_ps <= 1_000_000_000,
                "ended at {} ps",
                out.stats.end_ps
            );
        }
    }
    Ok(())
}

/// The tiny spec with its `[topology]` replaced by `table` (TOML), as spec text.
fn with_topology(table: &str) -> String {
    let mut spec = tiny();
    spec.insert(
        "topology".into(),
        table.parse::<toml::Table>().expect("TOML").into(),
    );
    to_text(&spec)
}

/// The tiny spec with its `[[traffic]]` replaced by `entry` (TOML keys), as spec text.
fn with_traffic(entry: &str) -> String {
    let mut spec = tiny();
    spec.remove("traffic");
    format!("{}\n[[traffic]]\n{entry}\n", to_text(&spec))
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn topology_files_never_panic_and_errors_name_a_line(text in any_file(&[TOPOLOGY])) {
        if let Err(e) = parse_topology(&text) {
            let message = e.to_string();
            prop_assert!(names_a_line(&message, &text), "{message}\n--- file:\n{text}");
        }
    }

    #[test]
    fn flow_files_never_panic_and_errors_name_a_line(
        text in any_file(&[FLOWS, FLOWS_HPCC]),
    ) {
        if let Err(e) = parse_flows(&text) {
            let message = e.to_string();
            prop_assert!(names_a_line(&message, &text), "{message}\n--- file:\n{text}");
        }
    }

    #[test]
    fn cdf_files_never_panic_and_errors_name_a_line(text in any_file(&[CDF])) {
        match FlowSizeCdf::parse("test", &text) {
            Ok(cdf) => {
                prop_assert!(cdf.mean() > 0.0);
                prop_assert!(cdf.sample(0.5) >= 1);
            }
            Err(e) => {
                let message = e.to_string();
                prop_assert!(names_a_line(&message, &text), "{message}\n--- file:\n{text}");
            }
        }
    }

    #[test]
    fn specs_with_mutated_topology_files_are_refused_or_run(
        text in prop_oneof![mutated(&[TOPOLOGY]), generated_topology()],
    ) {
        let path = temp_file("topo", &text);
        let spec = with_topology(&format!("kind = \"ns3_file\"\npath = {:?}", path.to_str().unwrap()));
        refused_or_run_within_guards(&spec)?;
        std::fs::remove_file(path).ok();
    }

    #[test]
    fn specs_with_mutated_flow_and_cdf_files_are_refused_or_run(
        flows in prop_oneof![mutated(&[FLOWS, FLOWS_HPCC]), generated_flows()],
        cdf in mutated(&[CDF]),
    ) {
        let flows = temp_file("flows", &flows);
        refused_or_run_within_guards(&with_traffic(&format!(
            "kind = \"flow_file\"\npath = {:?}",
            flows.to_str().unwrap()
        )))?;
        std::fs::remove_file(flows).ok();
        let cdf = temp_file("cdf", &cdf);
        refused_or_run_within_guards(&with_traffic(&format!(
            "kind = \"poisson\"\ncdf = {:?}\nload = 0.3\nduration = \"100us\"",
            cdf.to_str().unwrap()
        )))?;
        std::fs::remove_file(cdf).ok();
    }
}
