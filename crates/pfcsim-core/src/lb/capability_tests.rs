//! The check that every scheme's optional hooks agree with its [`Capabilities`]: the switch
//! calls `on_ingress`, `on_dequeue` (data packets; ACKs and NACKs) and `on_arrival` only when
//! the flag that asks for them is set, and hands `on_dequeue` the packet's arrival time only
//! with `sojourn`, so a hook that acts without its flag is silently never called (or reads
//! `Time::ZERO`). The same holds at the hosts: `may_send` is called only if `clocks_sending`,
//! and a scheme's host side is built only with [`Capabilities::hosts`].
//!
//! For every row of the registry with its defaults, every preset, and RLB around each of
//! them (both RTT measurements), the test builds the scheme's instances for the switches of a
//! two-leaf, two-spine fabric (as `sim/switch.rs` builds them: the fabric knowledge only with
//! [`Capabilities::fabric`], a loopback only with [`Capabilities::loopback`], an empty buffer)
//! and sends data packets, ACKs and NACKs through them, calling the hooks the switch would
//! call. It then runs the same traffic once per flag that is off, calling that flag's hook
//! too at every place the switch would if the flag were set (or handing `on_dequeue` the real
//! arrival time), and requires that call to do nothing: no action, packet, scheme word or
//! RNG draw changed, `Ingress::Forward`, and every later decision and the scheme's final
//! state (its `Debug` form) as in the run without the call. A scheme whose modes use
//! different hooks (CONGA's `timing`) must therefore make the hooks of the other modes do
//! nothing. Not checked: the other flags (`fabric`, `loopback`, `pinned`, ...), which give
//! data, not calls; and a hook that acts only on state built by scheme messages, timers or a
//! filling buffer, which the test does not carry out or fill (LBODSN's CNP filter, which
//! acts only on the flows its FCN messages moved, is not reached).

use super::host::{AckEcho, FlowInfo, HostScheme, TestHost};
use super::{
    flow_hash, pick_index, pinned_choice, registry, Capabilities, Ingress, Layer, LbAction,
    LbConfig, LbCtx, LbFabric, PortDir, RlbConfig, RttMeasurement, SwitchScheme, NO_TOR, PRESETS,
};
use crate::engine::{rng_stream, Rng, StreamKind};
use crate::mmu::{Mmu, Threshold};
use crate::packet::{Packet, PacketKind};
use crate::port::PortState;
use crate::units::Time;
use rand::RngCore as _;

/// Every config checked: the registry's defaults, the presets, and RLB around each of them
/// (with piggybacked and probed RTTs; RLB itself and the schemes RLB cannot wrap left out),
/// each with a name for the messages.
fn configs() -> Vec<(String, LbConfig)> {
    let mut configs: Vec<(String, LbConfig)> = registry()
        .into_iter()
        .map(|row| (format!("`{}` (defaults)", row.name), row.defaults))
        .collect();
    for (scheme, preset, _) in PRESETS {
        let table = format!("scheme = \"{scheme}\"\npreset = \"{preset}\"");
        let cfg: LbConfig = toml::from_str(&table).expect("the presets parse");
        configs.push((format!("`{scheme}` (preset \"{preset}\")"), cfg));
    }
    let mut wrapped = Vec::new();
    for (name, inner) in &configs {
        for rtt_measurement in [RttMeasurement::Piggyback, RttMeasurement::Probe] {
            let rlb = LbConfig::Rlb(RlbConfig {
                inner: Box::new(inner.clone()),
                rtt_measurement,
                ..RlbConfig::default()
            });
            if rlb.validate().is_ok() {
                wrapped.push((format!("`rlb` ({rtt_measurement:?}) around {name}"), rlb));
            }
        }
    }
    configs.extend(wrapped);
    for (name, cfg) in &configs {
        assert_eq!(cfg.validate(), Ok(()), "{name}");
    }
    configs
}

/// The hosts and switches: hosts 0, 1 under leaf 4 (ToR 0) and 2, 3 under leaf 5 (ToR 1),
/// spines 6 and 7. A leaf's ports 0 and 1 lead to its hosts and 2, 3 up to spines 6, 7; a
/// spine's port `t` leads down to leaf `4 + t`. With a loopback, each switch's next two ports
/// are its two ends.
const SWITCHES: [u32; 4] = [4, 5, 6, 7];
const NODES: u32 = 8;

fn tor_of(node: u32) -> u32 {
    if node < 4 {
        node / 2
    } else {
        NO_TOR
    }
}

/// What the scheme of switch `node` is told about the fabric (as `sim/switch.rs` tells it).
fn lb_fabric(node: u32, caps: &Capabilities) -> LbFabric {
    let mut fabric = LbFabric {
        node,
        nodes: NODES,
        ..LbFabric::default()
    };
    if !caps.fabric {
        return fabric;
    }
    let leaf = node < 6;
    fabric.tor_of = (0..NODES).map(tor_of).collect();
    fabric.tors = 2;
    fabric.my_tor = leaf.then_some(node - 4);
    fabric.port_dir = if leaf {
        vec![PortDir::Host, PortDir::Host, PortDir::Up, PortDir::Up]
    } else {
        vec![PortDir::Down, PortDir::Down]
    };
    if caps.loopback {
        fabric.port_dir.extend([PortDir::Loopback; 2]);
    }
    let ports = fabric.port_dir.len();
    fabric.port_rate_bps = vec![100_000_000_000; ports];
    fabric.port_delay_ps = vec![1_000_000; ports];
    fabric.tor_hops = match fabric.my_tor {
        Some(0) => vec![0, 2],
        Some(_) => vec![2, 0],
        None => vec![1, 1],
    };
    fabric
}

/// A hook whose flag is off, called where the switch would call it if the flag were set (or,
/// for `Arrived`, the arrival time handed to `on_dequeue` without `sojourn`).
#[derive(Clone, Copy, Debug, PartialEq)]
enum Unasked {
    Ingress,
    DequeueData,
    DequeueAcks,
    Arrival,
    Arrived,
}

impl Unasked {
    /// The calls that `caps` leaves out.
    fn of(caps: &Capabilities) -> Vec<Unasked> {
        [
            (Unasked::Ingress, !caps.ingress),
            (Unasked::DequeueData, !caps.dequeue),
            (Unasked::DequeueAcks, !caps.acks),
            (Unasked::Arrival, !caps.scheme_word),
            (
                Unasked::Arrived,
                !caps.sojourn && (caps.dequeue || caps.acks),
            ),
        ]
        .into_iter()
        .filter_map(|(call, off)| off.then_some(call))
        .collect()
    }

    fn describe(self) -> &'static str {
        match self {
            Unasked::Ingress => "`on_ingress` (a data packet) although `ingress` is off",
            Unasked::DequeueData => "`on_dequeue` (a data packet) although `dequeue` is off",
            Unasked::DequeueAcks => "`on_dequeue` (an ACK or NACK) although `acks` is off",
            Unasked::Arrival => "`on_arrival` although `scheme_word` is off",
            Unasked::Arrived => {
                "`on_dequeue` with the packet's arrival time although `sojourn` is off (the \
                 switch hands it `Time::ZERO`)"
            }
        }
    }
}

/// One switch: its scheme instance and what its hooks see.
struct Switch {
    node: u32,
    scheme: Box<dyn SwitchScheme>,
    rng: Rng,
    ports: Vec<PortState>,
    mmu: Mmu,
    loopback: Option<u16>,
    layer: Layer,
    actions: Vec<LbAction>,
}

impl Switch {
    fn new(cfg: &LbConfig, node: u32) -> Switch {
        let caps = cfg.capabilities();
        let fabric_ports = if node < 6 { 4 } else { 2 };
        let ports = fabric_ports + if caps.loopback { 2 } else { 0 };
        Switch {
            node,
            scheme: cfg.instantiate(&lb_fabric(node, &caps)),
            rng: rng_stream(1, StreamKind::Switch, node as u64),
            ports: PortState::test_ports(ports, 100_000_000_000, Time::from_us(1)),
            mmu: Mmu::new(
                12_000_000,
                3_000,
                3_000,
                Threshold::Static { bytes: 300_000 },
                true,
                vec![60_000; ports],
            ),
            loopback: caps.loopback.then_some(fabric_ports as u16),
            layer: if caps.wrapper {
                Layer::Wrapper
            } else {
                Layer::Base
            },
            actions: Vec::new(),
        }
    }

    /// Calls `hook` with the scheme and the context the switch would build at `now`.
    fn call<R>(
        &mut self,
        now: Time,
        arrived: Time,
        hook: impl FnOnce(&mut dyn SwitchScheme, &mut LbCtx) -> R,
    ) -> R {
        let mut ctx = LbCtx {
            now,
            node: self.node,
            ports: &self.ports,
            loopback: self.loopback,
            mmu: Some(&self.mmu),
            rng: &mut self.rng,
            layer: self.layer,
            arrived,
            actions: &mut self.actions,
        };
        hook(&mut *self.scheme, &mut ctx)
    }

    /// The egresses towards host `dst`, in port order.
    fn candidates(&self, dst: u32) -> Vec<u16> {
        match self.node {
            leaf @ (4 | 5) if tor_of(dst) == leaf - 4 => vec![(dst % 2) as u16],
            4 | 5 => vec![2, 3],
            _ => vec![tor_of(dst) as u16],
        }
    }

    /// Where egress `port` leads: the next switch and its ingress, or `None` for a host.
    fn peer(&self, port: u16) -> Option<(u32, u16)> {
        if Some(port) == self.loopback {
            return Some((self.node, port + 1));
        }
        match (self.node, port) {
            (4 | 5, 0 | 1) => None,
            (leaf @ (4 | 5), up) => Some((6 + up as u32 - 2, (leaf - 4) as u16)),
            (spine, down) => Some((4 + down as u32, 2 + (spine - 6) as u16)),
        }
    }
}

/// A run of the test traffic through one config's switches: what every hook the switch calls
/// did, in order, for comparing runs; and the breaches found on the way.
struct Run {
    caps: Capabilities,
    unasked: Option<Unasked>,
    switches: Vec<Switch>,
    trace: Vec<String>,
    breaches: Vec<String>,
}

/// A nonzero scheme word, handed to `on_arrival` when `scheme_word` is off.
const SOME_WORD: u64 = 0x0123_4567_89ab_cdef;

impl Run {
    fn new(cfg: &LbConfig, unasked: Option<Unasked>) -> Run {
        let mut run = Run {
            caps: cfg.capabilities(),
            unasked,
            switches: SWITCHES.iter().map(|&n| Switch::new(cfg, n)).collect(),
            trace: Vec::new(),
            breaches: Vec::new(),
        };
        for s in 0..run.switches.len() {
            run.switches[s].call(Time::ZERO, Time::ZERO, |lb, ctx| lb.on_start(ctx));
            run.note(s, "on_start", "");
        }
        run
    }

    /// Records what a call the switch makes did.
    fn note(&mut self, s: usize, hook: &str, what: &str) {
        let sw = &mut self.switches[s];
        let actions = std::mem::take(&mut sw.actions);
        let draw = sw.rng.clone().next_u64();
        self.trace.push(format!(
            "switch {} {hook}: {what} actions {actions:?} rng {draw:x}",
            sw.node
        ));
    }

    /// Calls the hook whose flag is off (`call`, if it is the one this run adds) and checks
    /// that it did nothing at once: no action, no RNG draw, the packet and `word` unchanged,
    /// `Ingress::Forward`.
    fn unasked_call(
        &mut self,
        s: usize,
        call: Unasked,
        now: Time,
        pkt: &mut Packet,
        hook: impl FnOnce(&mut dyn SwitchScheme, &mut LbCtx, &mut Packet, &mut u64) -> Ingress,
    ) {
        if self.unasked != Some(call) {
            return;
        }
        let sw = &mut self.switches[s];
        let (before, rng) = (format!("{pkt:?}"), sw.rng.clone());
        let mut word = if call == Unasked::Arrival {
            SOME_WORD
        } else {
            0
        };
        let word_before = word;
        let verdict = sw.call(now, Time::ZERO, |lb, ctx| hook(lb, ctx, pkt, &mut word));
        let mut changed = Vec::new();
        if verdict != Ingress::Forward {
            changed.push(format!("returned {verdict:?}"));
        }
        if !sw.actions.is_empty() {
            changed.push(format!("asked for {:?}", sw.actions));
            sw.actions.clear();
        }
        if format!("{pkt:?}") != before {
            changed.push(format!("changed the packet to {pkt:?}"));
        }
        if word != word_before {
            changed.push(format!("changed the scheme word to {word:#x}"));
        }
        if sw.rng != rng {
            changed.push("drew from the switch's RNG".to_string());
        }
        if !changed.is_empty() {
            self.breaches.push(format!(
                "at switch {}, {}: {}",
                sw.node,
                call.describe(),
                changed.join("; ")
            ));
        }
    }

    /// Sends `pkt` from its source host to its destination through the switches.
    fn send(&mut self, mut pkt: Packet, mut now: Time) {
        let caps = self.caps;
        let (mut s, mut in_port) = (tor_of(pkt.src) as usize, (pkt.src % 2) as u16);
        let mut word = 0u64;
        for _ in 0..16 {
            pkt.set_ingress_port(in_port);
            let arrived = now;
            if caps.scheme_word && word != 0 {
                let sw = &mut self.switches[s];
                sw.call(now, Time::ZERO, |lb, ctx| {
                    lb.on_arrival(ctx, &pkt, &mut word)
                });
                self.note(s, "on_arrival", &format!("word {word:#x}"));
            }
            self.unasked_call(s, Unasked::Arrival, now, &mut pkt, |lb, ctx, pkt, word| {
                lb.on_arrival(ctx, pkt, word);
                Ingress::Forward
            });
            let candidates = self.switches[s].candidates(pkt.dst);
            if pkt.kind == PacketKind::Data {
                if caps.ingress {
                    let sw = &mut self.switches[s];
                    let verdict = sw.call(now, Time::ZERO, |lb, ctx| {
                        lb.on_ingress(ctx, &mut pkt, &candidates)
                    });
                    self.note(s, "on_ingress", &format!("{verdict:?} {pkt:?}"));
                }
                self.unasked_call(s, Unasked::Ingress, now, &mut pkt, |lb, ctx, pkt, _| {
                    lb.on_ingress(ctx, pkt, &candidates)
                });
            }
            let pinned =
                pkt.kind.follows_path_tag() && !(pkt.kind == PacketKind::Data && caps.pinned);
            let out = if candidates.len() == 1 {
                candidates[0]
            } else if let Some(c) = pinned.then(|| pinned_choice(&pkt, &candidates)).flatten() {
                c
            } else if pkt.kind == PacketKind::Data {
                let sw = &mut self.switches[s];
                let out = sw.call(now, Time::ZERO, |lb, ctx| lb.choose(ctx, &pkt, &candidates));
                self.note(s, "choose", &format!("{out}"));
                out
            } else {
                candidates[pick_index(flow_hash(&pkt, s as u64), candidates.len())]
            };
            now += Time::from_us(1);
            let shown = match pkt.kind {
                PacketKind::Data => caps.dequeue,
                _ => caps.acks,
            };
            if shown {
                let arrived = if caps.sojourn || self.unasked == Some(Unasked::Arrived) {
                    arrived
                } else {
                    Time::ZERO
                };
                let mut scratch = 0;
                let w = if caps.scheme_word {
                    &mut word
                } else {
                    &mut scratch
                };
                let sw = &mut self.switches[s];
                sw.call(now, arrived, |lb, ctx| lb.on_dequeue(ctx, out, &mut pkt, w));
                self.note(s, "on_dequeue", &format!("{pkt:?} word {word:#x}"));
                if scratch != 0 {
                    self.breaches.push(format!(
                        "at switch {}, `on_dequeue` wrote a scheme word although \
                         `scheme_word` is off (the switch hands it scratch)",
                        self.switches[s].node
                    ));
                }
            }
            let call = match pkt.kind {
                PacketKind::Data => Unasked::DequeueData,
                _ => Unasked::DequeueAcks,
            };
            self.unasked_call(s, call, now, &mut pkt, |lb, ctx, pkt, word| {
                lb.on_dequeue(ctx, out, pkt, word);
                Ingress::Forward
            });
            if pkt.kind == PacketKind::Data && Some(out) != self.switches[s].loopback {
                pkt.hop += 1;
            }
            match self.switches[s].peer(out) {
                Some((node, port)) => (s, in_port) = ((node - 4) as usize, port),
                None => return,
            }
            now += Time::from_us(1);
        }
        panic!("a packet went round in the fabric");
    }

    /// The test traffic: two rounds, 1 ms apart (past every flowlet timeout), of data
    /// packets of six flows both ways between the leaves, each answered by an ACK, and a NACK
    /// per flow.
    fn traffic(&mut self) {
        for round in 0..2u64 {
            for flow in 0..6u32 {
                let (src, dst) = if flow < 4 { (0, 2) } else { (3, 1) };
                for seq in 0..3u64 {
                    let t = Time::from_us(round * 1_000 + (flow as u64 * 3 + seq) * 5);
                    let mut data = Packet::new(PacketKind::Data);
                    (data.flow, data.src, data.dst) = (flow, src, dst);
                    (data.sport, data.dport, data.priority) = (1_000 + flow as u16, 4_791, 3);
                    (data.seq, data.sent_at) = (seq * 1_000, t);
                    (data.payload, data.wire_bytes) = (1_000, 1_048);
                    self.send(data, t);
                    let kind = if seq == 1 {
                        PacketKind::Nack
                    } else {
                        PacketKind::Ack
                    };
                    let mut ack = Packet::new(kind);
                    (ack.flow, ack.src, ack.dst) = (flow, dst, src);
                    (ack.sport, ack.dport, ack.priority) = (data.dport, data.sport, 3);
                    (ack.seq, ack.sent_at, ack.wire_bytes) = ((seq + 1) * 1_000, t, 64);
                    self.send(ack, t + Time::from_us(3));
                }
            }
        }
    }

    /// The trace, closed by each switch's scheme state, and the breaches found.
    fn finish(mut self) -> (Vec<String>, Option<String>) {
        for sw in &self.switches {
            self.trace
                .push(format!("switch {} state {:?}", sw.node, sw.scheme));
        }
        (self.trace, first_of(&self.breaches))
    }
}

/// The first of `breaches` (one per call), with the number of the others.
fn first_of(breaches: &[String]) -> Option<String> {
    let first = breaches.first()?;
    Some(match breaches.len() {
        1 => first.clone(),
        n => format!("{first} ({} more calls alike)", n - 1),
    })
}

/// Where traces `a` (without the unasked call) and `b` (with it) first differ, shortened.
fn first_difference(a: &[String], b: &[String]) -> Option<String> {
    let at = (0..a.len().max(b.len())).find(|&i| a.get(i) != b.get(i))?;
    let (x, y) = (
        a.get(at).map_or("", String::as_str),
        b.get(at).map_or("", String::as_str),
    );
    let from = x.chars().zip(y.chars()).take_while(|(p, q)| p == q).count();
    let cut = |s: &str| {
        s.chars()
            .skip(from.saturating_sub(60))
            .take(160)
            .collect::<String>()
    };
    Some(format!(
        "without it: `...{}`; with it: `...{}`",
        cut(x),
        cut(y)
    ))
}

/// The switch-side hooks of every config: a hook whose flag is off does nothing.
#[test]
fn a_switch_hook_acts_only_if_its_capability_asks_for_it() {
    let mut breaches = Vec::new();
    for (name, cfg) in configs() {
        let mut baseline = Run::new(&cfg, None);
        baseline.traffic();
        let caps = baseline.caps;
        let (expected, found) = baseline.finish();
        breaches.extend(found.map(|b| format!("{name} {b}")));
        for call in Unasked::of(&caps) {
            let mut run = Run::new(&cfg, Some(call));
            run.traffic();
            let (trace, found) = run.finish();
            breaches.extend(found.map(|b| format!("{name} {b}")));
            if let Some(diff) = first_difference(&expected, &trace) {
                breaches.push(format!(
                    "{name}: {} changed the scheme's later decisions or state: {diff}",
                    call.describe()
                ));
            }
        }
    }
    // A breach of every run (a word written without `scheme_word`) is reported once.
    let mut seen = std::collections::BTreeSet::new();
    breaches.retain(|b| seen.insert(b.clone()));
    assert!(
        breaches.is_empty(),
        "a hook acts although its capability is off, so the switch never calls it; set the \
         flag in the scheme's `capabilities()`, or make the hook do nothing in the modes that \
         leave the flag off:\n{}",
        breaches.join("\n")
    );
}

/// The hosts' side: a scheme's host part exists only with `hosts`, and `may_send` of a
/// scheme that does not clock its flows' sending (`clocks_sending`) does nothing.
#[test]
fn a_host_hook_acts_only_if_its_scheme_asks_for_it() {
    let mut breaches = Vec::new();
    for (name, cfg) in configs() {
        let host = TestHost::new(4);
        let Some(scheme) = cfg.scheme().host_scheme(8, &host.fabric) else {
            continue;
        };
        if !cfg.capabilities().hosts {
            breaches.push(format!(
                "{name}: `host_scheme` gives a host side although `hosts` is off (the run \
                 never builds it)"
            ));
        }
        if scheme.clocks_sending() {
            continue;
        }
        let (expected, _) = host_run(&cfg, false);
        let (trace, found) = host_run(&cfg, true);
        breaches.extend(found.map(|b| format!("{name}: {b}")));
        if let Some(diff) = first_difference(&expected, &trace) {
            breaches.push(format!(
                "{name}: `may_send`, called although `clocks_sending` is false, changed the \
                 scheme's later decisions or state: {diff}"
            ));
        }
    }
    assert!(
        breaches.is_empty(),
        "a host-side hook acts although the scheme does not ask for it, so it is never \
         called:\n{}",
        breaches.join("\n")
    );
}

/// Flows of host 0 through `cfg`'s host side: their start, packets, ACKs (a NACK, a
/// timeout) and end, with `may_send` before each packet if `unasked`; the trace of the
/// calls, and the breaches of `may_send`.
fn host_run(cfg: &LbConfig, unasked: bool) -> (Vec<String>, Option<String>) {
    let mut host = TestHost::new(4);
    let mut scheme: Box<dyn HostScheme> = cfg
        .scheme()
        .host_scheme(8, &host.fabric)
        .expect("a host side");
    let (mut trace, mut breaches) = (Vec::new(), Vec::new());
    let mut note = |host: &mut TestHost, what: String| {
        let actions = std::mem::take(&mut host.actions);
        let draw = host.rng.clone().next_u64();
        trace.push(format!("{what} actions {actions:?} rng {draw:x}"));
    };
    scheme.on_start(&mut host.ctx(0));
    note(&mut host, "on_start".to_string());
    for round in 0..2u64 {
        for id in 0..4u32 {
            let start = round * 1_000_000 + id as u64 * 20_000;
            let mut flow = FlowInfo {
                start: Time::from_ns(start),
                ..TestHost::flow(round as u32 * 4 + id, 8_000)
            };
            scheme.on_flow_start(&mut host.ctx(start), &flow);
            note(&mut host, format!("on_flow_start {}", flow.id));
            for k in 0..8u64 {
                let t = start + k * 1_000;
                if unasked {
                    let rng = host.rng.clone();
                    let may = scheme.may_send(&mut host.ctx(t), &flow);
                    if !may || !host.actions.is_empty() || host.rng != rng {
                        breaches.push(format!(
                            "`may_send` acts although `clocks_sending` is false: gave {may}, \
                             asked for {:?}{}",
                            host.actions,
                            if host.rng != rng {
                                ", drew from the RNG"
                            } else {
                                ""
                            }
                        ));
                        host.actions.clear();
                    }
                }
                let tag = scheme.path_tag(&mut host.ctx(t), &flow, k * 1_000, 1_000);
                flow.high_sent = (k + 1) * 1_000;
                note(&mut host, format!("path_tag {} {k} -> {tag}", flow.id));
                let echo = AckEcho {
                    nack: k == 5,
                    path_tag: tag,
                    ce: k % 3 == 0,
                    rtt: Time::from_us(8 + k),
                    newly_acked: if k == 5 { 0 } else { 1_000 },
                };
                let now = t + 8_000 + k * 1_000;
                if k != 5 {
                    flow.snd_una = (k + 1) * 1_000;
                }
                scheme.on_ack(&mut host.ctx(now), &flow, &echo);
                note(&mut host, format!("on_ack {} {k}", flow.id));
            }
            scheme.on_timeout(&mut host.ctx(start + 100_000), &flow);
            note(&mut host, format!("on_timeout {}", flow.id));
            flow.snd_una = flow.size;
            scheme.on_flow_end(&mut host.ctx(start + 200_000), &flow);
            note(&mut host, format!("on_flow_end {}", flow.id));
        }
    }
    trace.push(format!("state {scheme:?}"));
    (trace, first_of(&breaches))
}
