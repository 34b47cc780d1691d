//! Files of the ns-3 RDMA simulators (alibaba-edu/High-Precision-Congestion-Control and
//! conweave-project/conweave-ns3, which extends it), so that existing setups can be run in
//! pfcsim and their results compared like with like.
//!
//! - Topology: line 1 `<nodes> <switches> <links>`, line 2 the switch ids, then one line per
//!   link `<a> <b> <rate> <delay> <error_rate>` such as `0 128 100Gbps 1000ns 0`. Lines after
//!   the links are free text and ignored. The node count may not exceed the switches and links
//!   together (every host has exactly one link), so that no count the file cannot back sizes
//!   anything.
//! - Flows: line 1 the number of flows, then one flow per line, either
//!   `<src> <dst> <priority> <size_bytes> <start_seconds>` (conweave-ns3) or
//!   `<src> <dst> <priority> <dport> <size_bytes> <start_seconds>` (HPCC).
//! - FCT output: one line per finished flow, written by [`write_fct_line`].
//!
//! Fields are separated by any whitespace. Blank lines before and between records are skipped,
//! as the simulators' own readers (which read whitespace-separated tokens) skip them. Line
//! numbers in errors count every line of the file from 1. Node ids are checked against the
//! topology's node count here; whether flow endpoints are hosts of a given topology is for the
//! caller to check.

use crate::units::{Rate, Time, UnitError};
use std::fmt;
use std::str::FromStr;

/// A bidirectional link between two nodes of an ns-3 topology.
#[derive(Clone, Debug, PartialEq)]
pub struct Ns3Link {
    /// One end (node id).
    pub a: u32,
    /// The other end (node id).
    pub b: u32,
    /// Line rate, the same in both directions.
    pub rate: Rate,
    /// One-way propagation delay.
    pub delay: Time,
    /// Probability that a packet sent on the link is lost.
    pub error_rate: f64,
}

/// A topology in the ns-3 RDMA simulators' format: nodes `0..nodes`, of which `switches` are
/// switches and all others hosts.
#[derive(Clone, Debug, PartialEq)]
pub struct Ns3Topology {
    /// Number of nodes, hosts and switches together.
    pub nodes: u32,
    /// Ids of the switch nodes, in file order (distinct, each `< nodes`).
    pub switches: Vec<u32>,
    /// The links, in file order.
    pub links: Vec<Ns3Link>,
}

/// One flow of an ns-3 flow file: a message of `size_bytes` from host `src` to host `dst`
/// handed to the sender at `start`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ns3Flow {
    /// Sending host (node id).
    pub src: u32,
    /// Receiving host (node id).
    pub dst: u32,
    /// Priority group (PFC class) of the flow's data packets.
    pub priority: u8,
    /// Destination port given by the 6-column HPCC format; `None` in the 5-column format,
    /// where the simulator assigns ports itself.
    pub dport: Option<u16>,
    /// Message size in bytes (> 0).
    pub size_bytes: u64,
    /// Absolute simulated start time (the generators start traffic at 2 s).
    pub start: Time,
    /// Line of the file the flow was read from (1-based).
    pub line: usize,
}

/// Which kind of file an [`Ns3Error`] is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ns3FileKind {
    /// A topology file, read by [`parse_topology`].
    Topology,
    /// A flow file, read by [`parse_flows`].
    Flows,
}

impl fmt::Display for Ns3FileKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Ns3FileKind::Topology => "topology",
            Ns3FileKind::Flows => "flow file",
        })
    }
}

/// Why an ns-3 topology or flow file was rejected.
#[derive(Debug, thiserror::Error, Clone, PartialEq)]
pub enum Ns3Error {
    /// The file ends before a line it must have.
    #[error("{kind} line {line}: file ends, expected {expected}")]
    MissingLine {
        kind: Ns3FileKind,
        line: usize,
        expected: String,
    },
    /// A line has the wrong number of fields.
    #[error("{kind} line {line}: wrong number of fields ({found}), expected {expected}")]
    FieldCount {
        kind: Ns3FileKind,
        line: usize,
        found: usize,
        expected: String,
    },
    /// A field cannot be read as what it must be.
    #[error("{kind} line {line}: {field} '{value}' is invalid, expected {expected}")]
    BadField {
        kind: Ns3FileKind,
        line: usize,
        field: &'static str,
        value: String,
        expected: String,
    },
    /// A node id is not below the topology's node count.
    #[error("topology line {line}: node id {id} is out of range, expected an id below {nodes} (the node count)")]
    NodeOutOfRange { line: usize, id: u32, nodes: u32 },
    /// The switch list names a node twice.
    #[error("topology line {line}: switch id {id} is listed twice, expected distinct ids")]
    DuplicateSwitch { line: usize, id: u32 },
    /// A link connects a node to itself.
    #[error("topology line {line}: link from node {node} to itself, expected two different nodes")]
    SelfLoop { line: usize, node: u32 },
    /// The node count of the header is more than its switches and links can make: every
    /// node that is not a switch is a host, with exactly one link.
    #[error("topology line {line}: node count {nodes} is more than {switches} switches and {links} links can make (every host has exactly one link), expected at most {most} nodes")]
    TooManyNodes {
        line: usize,
        nodes: u32,
        switches: usize,
        links: usize,
        most: u64,
    },
    /// A flow is sent from a host to itself.
    #[error("flow file line {line}: source and destination are both node {node}, expected two different hosts")]
    SelfFlow { line: usize, node: u32 },
    /// A non-blank line follows the last flow announced on line 1.
    #[error("flow file line {line}: text after the last flow (line 1 announces {count}), expected only blank lines")]
    TrailingText { line: usize, count: usize },
}

/// Reads a topology file (see the module documentation for the format).
pub fn parse_topology(text: &str) -> Result<Ns3Topology, Ns3Error> {
    let mut records = Records::new(Ns3FileKind::Topology, text);

    let header = records.next_required(|| "<nodes> <switches> <links>".to_string())?;
    header.expect_len(3, "3: <nodes> <switches> <links>")?;
    let nodes: u32 = header.parse(0, "node count", NON_NEGATIVE)?;
    let switch_count: usize = header.parse(1, "switch count", NON_NEGATIVE)?;
    let link_count: usize = header.parse(2, "link count", NON_NEGATIVE)?;

    // Counts come from the file: no capacity is reserved from them.
    let mut switches = Vec::new();
    if switch_count > 0 {
        let ids = records.next_required(|| format!("the {switch_count} switch ids"))?;
        ids.expect_len(switch_count, &format!("{switch_count} switch ids"))?;
        for index in 0..switch_count {
            let id = ids.node_id(index, "switch id", nodes)?;
            if switches.contains(&id) {
                return Err(Ns3Error::DuplicateSwitch { line: ids.line, id });
            }
            switches.push(id);
        }
    }

    let mut links = Vec::new();
    for n in 1..=link_count {
        let link = records.next_required(|| format!("link {n} of {link_count}"))?;
        link.expect_len(5, "5: <a> <b> <rate> <delay> <error_rate>")?;
        let a = link.node_id(0, "node a", nodes)?;
        let b = link.node_id(1, "node b", nodes)?;
        if a == b {
            return Err(Ns3Error::SelfLoop {
                line: link.line,
                node: a,
            });
        }
        let rate = link.parse_unit(2, "rate", "a rate such as 100Gbps")?;
        let delay = link.parse_unit(3, "delay", "a delay such as 1000ns")?;
        let error_rate: f64 = link.parse(4, "error rate", PROBABILITY)?;
        if !(0.0..=1.0).contains(&error_rate) {
            return Err(link.invalid(4, "error rate", PROBABILITY));
        }
        links.push(Ns3Link {
            a,
            b,
            rate,
            delay,
            error_rate,
        });
    }
    // The node count is checked only now, against the lines read, so that an error in them
    // is reported first; a node count the file cannot back is refused before anything is
    // sized by it.
    let most = switch_count as u64 + link_count as u64;
    if u64::from(nodes) > most {
        return Err(Ns3Error::TooManyNodes {
            line: header.line,
            nodes,
            switches: switch_count,
            links: link_count,
            most,
        });
    }
    // Whatever follows the links is free text.
    Ok(Ns3Topology {
        nodes,
        switches,
        links,
    })
}

/// Reads a flow file in the 5-column (conweave-ns3) or 6-column (HPCC) format; all flow lines
/// must use the same one. Exactly the announced number of flows must follow line 1; only blank
/// lines may come after them. Start times are read exactly as decimal seconds; digits beyond
/// the 12th decimal (below a picosecond) are dropped.
pub fn parse_flows(text: &str) -> Result<Vec<Ns3Flow>, Ns3Error> {
    let mut records = Records::new(Ns3FileKind::Flows, text);

    let header = records.next_required(|| "the number of flows".to_string())?;
    header.expect_len(1, "1: the number of flows")?;
    let count: usize = header.parse(0, "flow count", NON_NEGATIVE)?;

    let mut flows = Vec::new();
    // Column count and line number of the first flow, which all others must match.
    let mut first: Option<(usize, usize)> = None;
    for n in 1..=count {
        let flow =
            records.next_required(|| format!("flow {n} of the {count} announced on line 1"))?;
        match first {
            // The message is written only when the count differs (not once per flow).
            Some((columns, _)) if flow.fields.len() == columns => {}
            Some((columns, line)) => flow.expect_len(
                columns,
                &format!("{columns} as on line {line} (all flows must have the same columns)"),
            )?,
            None if flow.fields.len() == 6 => {}
            None => flow.expect_len(
                5,
                "5 (<src> <dst> <priority> <size_bytes> <start_seconds>) \
                 or 6 (<src> <dst> <priority> <dport> <size_bytes> <start_seconds>)",
            )?,
        }
        first.get_or_insert((flow.fields.len(), flow.line));
        flows.push(flow.to_flow()?);
    }

    if let Some(extra) = records.next_non_blank() {
        return Err(Ns3Error::TrailingText {
            line: extra.line,
            count,
        });
    }
    Ok(flows)
}

/// Appends one line of the FCT output of conweave-ns3 (`fct.txt`) to `out`:
/// `<src> <dst> <sport> <dport> <size_bytes> <start_ns> <fct_ns> <ideal_fct_ns>`, node ids in
/// decimal. `ideal_ns` is the FCT of the flow alone in the fabric (the simulators'
/// "standalone FCT"); slowdown = fct / ideal. (The HPCC simulator writes the same columns but
/// with the source and destination as hexadecimal IP addresses.)
#[allow(clippy::too_many_arguments)] // one argument per column of the format
pub fn write_fct_line(
    out: &mut String,
    src: u32,
    dst: u32,
    sport: u16,
    dport: u16,
    size: u64,
    start_ns: u64,
    fct_ns: u64,
    ideal_ns: u64,
) {
    // `itoa` formats an integer in a few dozen instructions, a tenth of `write!`'s machinery:
    // R1 writes 97,737 lines.
    let mut digits = itoa::Buffer::new();
    let columns = [
        src as u64,
        dst as u64,
        sport as u64,
        dport as u64,
        size,
        start_ns,
        fct_ns,
        ideal_ns,
    ];
    for (i, value) in columns.into_iter().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        out.push_str(digits.format(value));
    }
    out.push('\n');
}

const NON_NEGATIVE: &str = "a non-negative integer";
const PROBABILITY: &str = "a probability in [0, 1]";
const POSITIVE_SIZE: &str = "a positive number of bytes";
const SECONDS: &str = "seconds as a plain decimal number such as 2.000000070";

/// Converts decimal seconds such as `2.000000070` to a [`Time`] exactly, with integer
/// arithmetic. Digits beyond the 12th decimal are dropped (truncated toward zero). `None` if
/// the text is not a plain non-negative decimal number or overflows.
fn seconds_to_time(text: &str) -> Option<Time> {
    const PS_DIGITS: usize = 12;
    let (int, frac) = text.split_once('.').unwrap_or((text, ""));
    let all_digits = |s: &str| s.bytes().all(|c| c.is_ascii_digit());
    if (int.is_empty() && frac.is_empty()) || !all_digits(int) || !all_digits(frac) {
        return None;
    }
    let whole: u64 = if int.is_empty() { 0 } else { int.parse().ok()? };
    // The fraction as picoseconds: its first 12 digits, padded with zeros to 12.
    let frac = &frac[..frac.len().min(PS_DIGITS)];
    let ps: u64 = format!("{frac:0<PS_DIGITS$}").parse().ok()?;
    whole
        .checked_mul(1_000_000_000_000)?
        .checked_add(ps)
        .map(Time)
}

/// The non-blank lines of a file, as records.
struct Records<'a> {
    kind: Ns3FileKind,
    lines: std::iter::Enumerate<std::str::Lines<'a>>,
    /// Number of lines in the file, to name the line after the last one.
    total: usize,
}

impl<'a> Records<'a> {
    fn new(kind: Ns3FileKind, text: &'a str) -> Self {
        Records {
            kind,
            lines: text.lines().enumerate(),
            total: text.lines().count(),
        }
    }

    /// The next non-blank line, if any.
    fn next_non_blank(&mut self) -> Option<Record<'a>> {
        let kind = self.kind;
        self.lines
            .by_ref()
            .find(|(_, text)| !text.trim().is_empty())
            .map(|(index, text)| Record {
                kind,
                line: index + 1,
                fields: text.split_whitespace().collect(),
            })
    }

    /// The next non-blank line; `expected` describes what it should hold, for the error if the
    /// file ends first.
    fn next_required(&mut self, expected: impl FnOnce() -> String) -> Result<Record<'a>, Ns3Error> {
        self.next_non_blank().ok_or_else(|| Ns3Error::MissingLine {
            kind: self.kind,
            line: self.total + 1,
            expected: expected(),
        })
    }
}

/// One non-blank line split into whitespace-separated fields.
struct Record<'a> {
    kind: Ns3FileKind,
    /// 1-based line number in the file.
    line: usize,
    fields: Vec<&'a str>,
}

impl Record<'_> {
    fn expect_len(&self, count: usize, expected: &str) -> Result<(), Ns3Error> {
        if self.fields.len() == count {
            return Ok(());
        }
        Err(Ns3Error::FieldCount {
            kind: self.kind,
            line: self.line,
            found: self.fields.len(),
            expected: expected.to_string(),
        })
    }

    /// Parses field `index` (which exists) with `FromStr`; `expected` describes a valid value.
    fn parse<T: FromStr>(
        &self,
        index: usize,
        name: &'static str,
        expected: &str,
    ) -> Result<T, Ns3Error> {
        self.fields[index]
            .parse()
            .map_err(|_| self.invalid(index, name, expected))
    }

    /// Parses field `index`, a quantity with a unit, adding the reason given by `units.rs`.
    fn parse_unit<T: FromStr<Err = UnitError>>(
        &self,
        index: usize,
        name: &'static str,
        example: &str,
    ) -> Result<T, Ns3Error> {
        self.fields[index]
            .parse()
            .map_err(|e: UnitError| self.invalid(index, name, &format!("{example} ({e})")))
    }

    /// Parses field `index` as a node id below `nodes`.
    fn node_id(&self, index: usize, name: &'static str, nodes: u32) -> Result<u32, Ns3Error> {
        let id: u32 = self.parse(index, name, NON_NEGATIVE)?;
        if id >= nodes {
            return Err(Ns3Error::NodeOutOfRange {
                line: self.line,
                id,
                nodes,
            });
        }
        Ok(id)
    }

    /// A flow from a line whose column count (5 or 6) has been checked.
    fn to_flow(&self) -> Result<Ns3Flow, Ns3Error> {
        let src: u32 = self.parse(0, "src", NON_NEGATIVE)?;
        let dst: u32 = self.parse(1, "dst", NON_NEGATIVE)?;
        if src == dst {
            return Err(Ns3Error::SelfFlow {
                line: self.line,
                node: src,
            });
        }
        let priority: u8 = self.parse(2, "priority", "an integer from 0 to 255")?;
        let (dport, size_at) = if self.fields.len() == 6 {
            let port: u16 = self.parse(3, "dport", "a port number from 0 to 65535")?;
            (Some(port), 4)
        } else {
            (None, 3)
        };
        let size_bytes: u64 = self.parse(size_at, "size", POSITIVE_SIZE)?;
        if size_bytes == 0 {
            return Err(self.invalid(size_at, "size", POSITIVE_SIZE));
        }
        let start_at = size_at + 1;
        let start = seconds_to_time(self.fields[start_at])
            .ok_or_else(|| self.invalid(start_at, "start time", SECONDS))?;
        Ok(Ns3Flow {
            src,
            dst,
            priority,
            dport,
            size_bytes,
            start,
            line: self.line,
        })
    }

    fn invalid(&self, index: usize, name: &'static str, expected: &str) -> Ns3Error {
        Ns3Error::BadField {
            kind: self.kind,
            line: self.line,
            field: name,
            value: self.fields[index].to_string(),
            expected: expected.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const R1_TOPOLOGY: &str = include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../scenarios/r1/leaf_spine_128_100G_OS2.topo"
    ));
    const R1_FLOWS: &str = include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../scenarios/r1/alistorage_hostload25_128hosts_10ms.flows"
    ));

    fn topology_error(text: &str) -> String {
        parse_topology(text).unwrap_err().to_string()
    }

    fn flows_error(text: &str) -> String {
        parse_flows(text).unwrap_err().to_string()
    }

    #[test]
    fn reads_the_r1_topology() {
        let topo = parse_topology(R1_TOPOLOGY).unwrap();
        assert_eq!(topo.nodes, 144);
        assert_eq!(topo.switches, (128..144).collect::<Vec<u32>>());
        assert_eq!(topo.links.len(), 192);
        assert_eq!(
            topo.links[0],
            Ns3Link {
                a: 0,
                b: 128,
                rate: Rate::gbps(100),
                delay: Time::from_ns(1000),
                error_rate: 0.0,
            }
        );
        assert!(topo
            .links
            .iter()
            .all(|l| l.rate == Rate::gbps(100) && l.delay == Time::from_us(1)));
    }

    #[test]
    fn reads_the_r1_flows() {
        let flows = parse_flows(R1_FLOWS).unwrap();
        assert_eq!(flows.len(), 97_737);
        assert_eq!(
            flows[0],
            Ns3Flow {
                src: 21,
                dst: 7,
                priority: 3,
                dport: None,
                size_bytes: 102_905,
                start: Time(2_000_000_070_000),
                line: 2,
            }
        );
        assert_eq!(flows[flows.len() - 1].start, Time(2_009_999_610_000));
    }

    #[test]
    fn reads_both_flow_formats() {
        let conweave = parse_flows("2\n1 2 3 1000 2.5\n2 1 3 500 2.000001\n").unwrap();
        assert_eq!(conweave[1].dport, None);
        assert_eq!(conweave[1].size_bytes, 500);
        assert_eq!(conweave[1].start, Time::from_ns(2_000_001_000));
        let hpcc = parse_flows("1\n1 2 3 100 1000 2.000000070\n\n").unwrap();
        assert_eq!(
            hpcc,
            vec![Ns3Flow {
                src: 1,
                dst: 2,
                priority: 3,
                dport: Some(100),
                size_bytes: 1000,
                start: Time(2_000_000_070_000),
                line: 2,
            }]
        );
        assert_eq!(parse_flows("0\n").unwrap(), vec![]);
    }

    #[test]
    fn start_times_are_exact() {
        let start = |s: &str| seconds_to_time(s).unwrap().ps();
        assert_eq!(start("2.000000070"), 2_000_000_070_000);
        assert_eq!(start("2"), 2_000_000_000_000);
        assert_eq!(start("0.1"), 100_000_000_000);
        assert_eq!(start(".5"), 500_000_000_000);
        assert_eq!(start("2."), 2_000_000_000_000);
        // Below a picosecond is truncated.
        assert_eq!(start("1.0000000000019"), 1_000_000_000_001);
        for bad in ["", ".", "-1", "1e-3", "1.2.3", "99999999999"] {
            assert_eq!(seconds_to_time(bad), None, "{bad}");
        }
    }

    #[test]
    fn writes_fct_lines() {
        let mut out = String::new();
        write_fct_line(
            &mut out, 21, 7, 10000, 100, 102905, 2000000070, 12345, 10000,
        );
        write_fct_line(&mut out, 1, 2, 3, 4, 5, 6, 7, 8);
        assert_eq!(
            out,
            "21 7 10000 100 102905 2000000070 12345 10000\n1 2 3 4 5 6 7 8\n"
        );
    }

    #[test]
    fn topology_missing_line() {
        assert_eq!(
            topology_error("3 1 2\n2\n0 2 100Gbps 1000ns 0\n"),
            "topology line 4: file ends, expected link 2 of 2"
        );
        assert_eq!(
            topology_error(""),
            "topology line 1: file ends, expected <nodes> <switches> <links>"
        );
    }

    #[test]
    fn topology_field_count() {
        assert_eq!(
            topology_error("3 1 1\n2\n0 2 100Gbps 1000ns\n"),
            "topology line 3: wrong number of fields (4), expected 5: <a> <b> <rate> <delay> <error_rate>"
        );
        assert_eq!(
            topology_error("4 2 1\n2\n"),
            "topology line 2: wrong number of fields (1), expected 2 switch ids"
        );
    }

    #[test]
    fn topology_bad_field() {
        assert_eq!(
            topology_error("3 one 1\n"),
            "topology line 1: switch count 'one' is invalid, expected a non-negative integer"
        );
        assert_eq!(
            topology_error("3 1 1\n2\n0 2 100 1000ns 0\n"),
            "topology line 3: rate '100' is invalid, expected a rate such as 100Gbps \
             ('100' has no rate unit; write it with one of bps, Kbps, Mbps, Gbps, Tbps (e.g. \"100Gbps\"))"
        );
        assert_eq!(
            topology_error("3 1 1\n2\n0 2 100Gbps 1000ns 1.5\n"),
            "topology line 3: error rate '1.5' is invalid, expected a probability in [0, 1]"
        );
    }

    #[test]
    fn huge_counts_are_errors_not_allocations() {
        assert_eq!(
            flows_error("18446744073709551615\n"),
            "flow file line 2: file ends, expected flow 1 of the 18446744073709551615 announced on line 1"
        );
        assert_eq!(
            topology_error("3 0 4000000000\n"),
            "topology line 2: file ends, expected link 1 of 4000000000"
        );
    }

    /// A node count the switches and links cannot back is refused before anything is sized
    /// by it (four billion nodes were allocated for five links).
    #[test]
    fn a_node_count_beyond_the_links_is_an_error() {
        let links = "0 2 100Gbps 1000ns 0\n1 2 100Gbps 1000ns 0\n2 3 100Gbps 1000ns 0\n\
                     4 3 100Gbps 1000ns 0\n5 3 100Gbps 1000ns 0\n";
        assert_eq!(
            topology_error(&format!("4000000000 2 5\n2 3\n{links}")),
            "topology line 1: node count 4000000000 is more than 2 switches and 5 links can make \
             (every host has exactly one link), expected at most 7 nodes"
        );
        let t = parse_topology(&format!("6 2 5\n2 3\n{links}")).unwrap();
        assert_eq!((t.nodes, t.links.len()), (6, 5));
    }

    #[test]
    fn topology_node_out_of_range() {
        assert_eq!(
            topology_error("3 1 1\n2\n0 3 100Gbps 1000ns 0\n"),
            "topology line 3: node id 3 is out of range, expected an id below 3 (the node count)"
        );
    }

    #[test]
    fn topology_duplicate_switch() {
        assert_eq!(
            topology_error("4 2 0\n3 3\n"),
            "topology line 2: switch id 3 is listed twice, expected distinct ids"
        );
    }

    #[test]
    fn topology_self_loop() {
        assert_eq!(
            topology_error("3 1 1\n2\n2 2 100Gbps 1000ns 0\n"),
            "topology line 3: link from node 2 to itself, expected two different nodes"
        );
    }

    #[test]
    fn flows_missing_line() {
        assert_eq!(
            flows_error("3\n1 2 3 1000 2.0\n"),
            "flow file line 3: file ends, expected flow 2 of the 3 announced on line 1"
        );
    }

    #[test]
    fn flows_field_count() {
        assert_eq!(
            flows_error("1\n1 2 3 1000\n"),
            "flow file line 2: wrong number of fields (4), expected 5 (<src> <dst> <priority> <size_bytes> \
             <start_seconds>) or 6 (<src> <dst> <priority> <dport> <size_bytes> <start_seconds>)"
        );
        assert_eq!(
            flows_error("2\n1 2 3 1000 2.0\n1 2 3 100 1000 2.0\n"),
            "flow file line 3: wrong number of fields (6), expected 5 as on line 2 (all flows must have the same columns)"
        );
        assert_eq!(
            flows_error("1 2\n"),
            "flow file line 1: wrong number of fields (2), expected 1: the number of flows"
        );
    }

    #[test]
    fn flows_bad_field() {
        assert_eq!(
            flows_error("1\n1 2 3 0 2.0\n"),
            "flow file line 2: size '0' is invalid, expected a positive number of bytes"
        );
        assert_eq!(
            flows_error("1\n1 2 3 100 1000 2e0\n"),
            "flow file line 2: start time '2e0' is invalid, \
             expected seconds as a plain decimal number such as 2.000000070"
        );
        assert_eq!(
            flows_error("1\n1 2 300 1000 2.0\n"),
            "flow file line 2: priority '300' is invalid, expected an integer from 0 to 255"
        );
    }

    #[test]
    fn flows_self_flow() {
        assert_eq!(
            flows_error("1\n7 7 3 1000 2.0\n"),
            "flow file line 2: source and destination are both node 7, expected two different hosts"
        );
    }

    #[test]
    fn flows_trailing_text() {
        assert_eq!(
            flows_error("1\n1 2 3 1000 2.0\n\n2 1 3 1000 2.0\n"),
            "flow file line 4: text after the last flow (line 1 announces 1), expected only blank lines"
        );
    }
}
