//! Wrapping: a scheme that runs around another one (RLB around DRILL, `[lb.inner]`).
//!
//! The wrapper holds its inner scheme as an [`Inner`] and calls it from its own hooks where
//! its algorithm says (RLB asks the inner scheme's choice first, then may override it). Every
//! call through [`Inner`] runs as [`Layer::Base`], so the messages and timers the inner
//! scheme sets are tagged as its own; the switch hands those straight back to it
//! ([`super::on_timer`], [`super::on_control`]), never to the wrapper. The wrapper's own run as
//! [`Layer::Wrapper`]. A wrapper's capabilities include the inner scheme's (a wrapper around
//! ConWeave sees data packets at ingress because ConWeave does). Wrappers do not nest.

use super::{Capabilities, Counters, Ingress, Layer, LbConfig, LbCtx, LbFabric, SwitchScheme};
use crate::packet::{LbHeader, Packet};

/// The scheme a wrapper wraps, with its name (its counters are written under it) and
/// capabilities.
#[derive(Debug)]
pub struct Inner {
    name: &'static str,
    capabilities: Capabilities,
    scheme: Box<dyn SwitchScheme>,
}

impl Inner {
    /// The instance of `cfg` for switch `fabric.node`.
    pub fn new(cfg: &LbConfig, fabric: &LbFabric) -> Inner {
        Inner {
            name: cfg.name(),
            capabilities: cfg.capabilities(),
            scheme: cfg.instantiate(fabric),
        }
    }

    /// What the inner scheme asks of the switch.
    pub fn capabilities(&self) -> Capabilities {
        self.capabilities
    }

    #[inline]
    pub fn choose(&mut self, ctx: &mut LbCtx, pkt: &Packet, candidates: &[u16]) -> u16 {
        ctx.as_layer(Layer::Base, |ctx| self.scheme.choose(ctx, pkt, candidates))
    }

    pub fn on_start(&mut self, ctx: &mut LbCtx) {
        ctx.as_layer(Layer::Base, |ctx| self.scheme.on_start(ctx))
    }

    /// The inner scheme's `on_dequeue`, if it asks for it ([`Capabilities::dequeue`]); its
    /// scheme word is scratch (the word belongs to the wrapper).
    #[inline]
    pub fn on_dequeue(&mut self, ctx: &mut LbCtx, port: u16, pkt: &mut Packet) {
        if !self.capabilities.dequeue {
            return;
        }
        let mut scratch = 0;
        ctx.as_layer(Layer::Base, |ctx| {
            self.scheme.on_dequeue(ctx, port, pkt, &mut scratch)
        })
    }

    pub fn on_ingress(&mut self, ctx: &mut LbCtx, pkt: &mut Packet, candidates: &[u16]) -> Ingress {
        ctx.as_layer(Layer::Base, |ctx| {
            self.scheme.on_ingress(ctx, pkt, candidates)
        })
    }

    pub fn on_control(&mut self, ctx: &mut LbCtx, port: u16, header: &LbHeader) {
        ctx.as_layer(Layer::Base, |ctx| self.scheme.on_control(ctx, port, header))
    }

    pub fn on_timer(&mut self, ctx: &mut LbCtx, token: u64) {
        ctx.as_layer(Layer::Base, |ctx| self.scheme.on_timer(ctx, token))
    }

    /// See [`SwitchScheme::adopt`].
    pub fn adopt(&mut self, pkt: &Packet, port: u16) {
        self.scheme.adopt(pkt, port)
    }

    /// The inner scheme's values (see [`SwitchScheme::samples`]).
    pub fn samples(&self, now: crate::units::Time, emit: &mut dyn FnMut(&'static str, u32, f64)) {
        self.scheme.samples(now, emit)
    }

    /// Adds the inner scheme's counters to `out`, under its own name.
    pub fn counters(&self, out: &mut Counters) {
        out.of(self.name, |out| self.scheme.counters(out))
    }
}

#[cfg(test)]
mod tests {
    use crate::lb::probe::ProbeConfig;
    use crate::lb::rlb::cnm_meta;
    use crate::lb::{
        on_control, on_timer, Layer, LbAction, LbConfig, LbFabric, PortDir, Rlb, RlbConfig,
        SwitchScheme, TestSwitch,
    };
    use crate::packet::{LbHeader, Packet, PacketKind};
    use crate::units::Time;

    /// The test-only scheme (which answers a PING message with a PONG, and whose first
    /// decision sets timer 7) inside RLB, at a switch of four uplinks.
    fn wrapped_probe() -> Rlb {
        let cfg = RlbConfig {
            inner: Box::new(LbConfig::Probe(ProbeConfig {})),
            recirculation: false,
            ..RlbConfig::default()
        };
        let fabric = LbFabric {
            nodes: 8,
            port_dir: vec![PortDir::Up; 4],
            port_rate_bps: vec![100_000_000_000; 4],
            port_delay_ps: vec![1_000_000; 4],
            ..LbFabric::default()
        };
        Rlb::new(&cfg, &fabric)
    }

    /// The inner scheme's timers and messages are its own (`Layer::Base`) and come back to it;
    /// the wrapper's go to the wrapper. Checked to fail when `Inner` does not run its scheme as
    /// `Layer::Base`, and when `on_control` or `on_timer` ignore the layer.
    #[test]
    fn the_inner_schemes_timers_and_messages_reach_it_and_the_wrappers_reach_the_wrapper() {
        let mut rlb = wrapped_probe();
        let mut sw = TestSwitch::new(0);
        sw.layer = Layer::Wrapper;
        let mut pkt = Packet::new(PacketKind::Data);
        pkt.priority = 3;
        assert_eq!(rlb.choose(&mut sw.ctx(0), &pkt, &[3]), 3);
        let timer = LbAction::SetTimer {
            at: Time::from_us(1),
            token: 7,
            layer: Layer::Base,
        };
        assert_eq!(sw.actions.drain(..).collect::<Vec<_>>(), [timer]);
        let (ping, pong) = (
            LbHeader {
                path_tag: 0,
                meta: 42,
            },
            LbHeader {
                path_tag: 0,
                meta: 43,
            },
        );
        on_timer(&mut rlb, &mut sw.ctx(1_000), Layer::Base, 7);
        let sent = |header| LbAction::SendControl {
            port: 3,
            header,
            layer: Layer::Base,
        };
        assert_eq!(sw.actions.drain(..).collect::<Vec<_>>(), [sent(ping)]);
        on_control(&mut rlb, &mut sw.ctx(2_000), Layer::Base, 3, &ping);
        assert_eq!(sw.actions.drain(..).collect::<Vec<_>>(), [sent(pong)]);
        // A wrapper message is RLB's: a warning of port 3, priority 3; the inner scheme sees
        // nothing of it.
        let warning = LbHeader {
            path_tag: 0,
            meta: cnm_meta(true, 3, 3),
        };
        on_control(&mut rlb, &mut sw.ctx(3_000), Layer::Wrapper, 3, &warning);
        assert!(sw.actions.is_empty());
        assert!(rlb.warned(3, 3, Time::from_ns(3_000)));
    }
}
