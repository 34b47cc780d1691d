//! Coflow metrics: one record per coflow, and the run-wide coflow completion time and
//! stalled-flow ratio, made from the flow records of a run with coflows.

use super::table::record;
use super::{ps_to_us, FlowRecord};
use std::collections::BTreeMap;

record! {
    /// Everything measured about one coflow (a row of `coflows.parquet`).
    #[derive(Clone, Debug, Default, PartialEq)]
    pub struct CoflowRecord {
        /// The coflow's id, as in the flows' `coflow` column (unique over the run).
        pub coflow_id: u32,
        /// Flows of the coflow.
        pub flows: u32,
        /// Flows of the coflow that finished.
        pub finished_flows: u32,
        /// Bytes of the coflow (sum of its flows' sizes).
        pub bytes: u64,
        /// Arrival: the start of its first flow.
        pub arrival_ps: u64,
        /// When its last flow finished (`None`: a flow had not finished when the run ended).
        pub finish_ps: Option<u64>,
        /// Coflow completion time, `finish - arrival`.
        pub cct_ps: Option<u64>,
        /// Flows of the coflow held up by PFC at least once (their `stalled`).
        pub stalled_flows: u32,
    }
    /// The CCT in microseconds, `cct_ps / 10^6` (`None`: not finished).
    derived cct_us: Option<f64> = |c| c.cct_ps.map(ps_to_us);
}

/// Run-wide coflow numbers (in `stats.json` only for runs with coflows).
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct CoflowStats {
    /// Coflows of the run.
    pub coflows_total: u64,
    /// Coflows whose every flow finished.
    pub coflows_finished: u64,
    /// Average coflow completion time (ACCT) over the finished coflows, in microseconds
    /// (NaN, written as null, if none finished).
    pub acct_us: f64,
    /// Largest coflow completion time over the finished coflows, in microseconds.
    pub cct_max_us: f64,
    /// Flows in coflows held up by PFC at least once over all flows in coflows: the CLB
    /// paper's stalled-flow ratio.
    pub stalled_flow_ratio: f64,
}

/// The records of the coflows of `flows`, by coflow id (empty if no flow is in a coflow).
pub fn coflow_records(flows: &[FlowRecord]) -> Vec<CoflowRecord> {
    let mut by_id: BTreeMap<u32, CoflowRecord> = BTreeMap::new();
    for f in flows {
        let Some(id) = f.coflow else { continue };
        let c = by_id.entry(id).or_insert_with(|| CoflowRecord {
            coflow_id: id,
            arrival_ps: u64::MAX,
            finish_ps: Some(0),
            ..Default::default()
        });
        c.flows += 1;
        c.bytes += f.size_bytes;
        c.arrival_ps = c.arrival_ps.min(f.start_ps);
        c.finish_ps = match (c.finish_ps, f.finish_ps) {
            (Some(a), Some(b)) => Some(a.max(b)),
            _ => None,
        };
        c.finished_flows += u32::from(f.finish_ps.is_some());
        c.stalled_flows += u32::from(f.stalled);
    }
    by_id
        .into_values()
        .map(|mut c| {
            c.cct_ps = c.finish_ps.map(|f| f - c.arrival_ps);
            c
        })
        .collect()
}

/// The run-wide numbers of `coflows` (`None` if there are none).
pub fn coflow_stats(coflows: &[CoflowRecord]) -> Option<CoflowStats> {
    if coflows.is_empty() {
        return None;
    }
    let ccts: Vec<f64> = coflows
        .iter()
        .filter_map(|c| c.cct_ps)
        .map(|p| p as f64 / 1e6)
        .collect();
    let flows: u64 = coflows.iter().map(|c| u64::from(c.flows)).sum();
    let stalled: u64 = coflows.iter().map(|c| u64::from(c.stalled_flows)).sum();
    Some(CoflowStats {
        coflows_total: coflows.len() as u64,
        coflows_finished: ccts.len() as u64,
        acct_us: if ccts.is_empty() {
            f64::NAN
        } else {
            ccts.iter().sum::<f64>() / ccts.len() as f64
        },
        cct_max_us: ccts.iter().copied().fold(f64::NAN, f64::max),
        stalled_flow_ratio: stalled as f64 / flows as f64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flow(coflow: Option<u32>, start: u64, finish: Option<u64>, stalled: bool) -> FlowRecord {
        FlowRecord {
            coflow,
            size_bytes: 1000,
            start_ps: start,
            finish_ps: finish,
            stalled,
            ..Default::default()
        }
    }

    #[test]
    fn a_coflow_completes_with_its_last_flow_from_its_first_start() {
        let flows = [
            flow(Some(3), 10, Some(50), false),
            flow(None, 0, Some(1_000), true),
            flow(Some(3), 20, Some(90), true),
            flow(Some(1), 5, Some(15), false),
            flow(Some(1), 5, None, false),
        ];
        let c = coflow_records(&flows);
        assert_eq!(c.len(), 2);
        assert_eq!(
            (c[0].coflow_id, c[0].flows, c[0].finished_flows, c[0].cct_ps),
            (1, 2, 1, None)
        );
        assert_eq!(
            (c[1].coflow_id, c[1].arrival_ps, c[1].finish_ps, c[1].cct_ps),
            (3, 10, Some(90), Some(80))
        );
        assert_eq!((c[1].bytes, c[1].stalled_flows), (2000, 1));
        let s = coflow_stats(&c).unwrap();
        assert_eq!((s.coflows_total, s.coflows_finished), (2, 1));
        assert_eq!(s.acct_us, 80e-6);
        assert_eq!(
            s.stalled_flow_ratio, 0.25,
            "the flow outside coflows is not counted"
        );
        assert!(coflow_stats(&coflow_records(&flows[1..2])).is_none());
    }
}
