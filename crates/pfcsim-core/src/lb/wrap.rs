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

    /// Adds the inner scheme's counters to `out`, under its own name.
    pub fn counters(&self, out: &mut Counters) {
        out.of(self.name, |out| self.scheme.counters(out))
    }
}
