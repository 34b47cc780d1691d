//! Spec in, results out: the one-call path used by the command-line front end and the
//! benchmark.
//!
//! A run folder holds `spec.toml` (the resolved spec, every default filled in),
//! `flows.parquet`, `ports.parquet`, `summary.parquet`, `summary.txt` (the summary as the
//! command line prints it), `alerts.parquet` (RLB runs: faulty switches reported),
//! `coflows.parquet` (runs with coflows: one row per coflow, with its completion time),
//! `deadlocks.parquet` (the egresses of the PFC deadlocks that ended the run; empty without),
//! `monitor_<kind>.parquet` (runs with monitors of that kind), `stats.json` (run-wide counters and the fingerprint) and `fct.txt` (flow completion times in the format of the ns-3 RDMA
//! simulators, for side-by-side comparisons).

use crate::metrics::RunStats;
use crate::output::summary::{SizeBuckets, Summary};
use crate::output::writers::{
    monitor_files, write_alerts_parquet, write_coflows_parquet, write_deadlocks_parquet,
    write_flows_parquet, write_monitor_parquet, write_ports_parquet, write_reorder_parquet,
    write_summary_parquet, OutputError,
};
use crate::sim::{Guards, RunOutput, Simulation};
use crate::spec::{Scenario, Spec, SpecError, DEFAULT_DEADLOCK_CHECK};
use crate::units::Time;
use std::ops::ControlFlow;
use std::path::Path;

/// Sets up the simulation of a prepared scenario, catching what only the full fabric
/// reveals (such as a buffer too small for its headroom), with the guards of its `[run]`
/// (the watchdog and deadlock detection at their defaults if it leaves them out).
pub fn build_simulation(sc: Scenario) -> Result<Simulation, SpecError> {
    let run = &sc.spec.run;
    let guards = Guards {
        max_events: run.max_events,
        max_sim_time: run.max_sim_time,
        no_progress: Some(sc.no_progress()),
        deadlock_check: Some(run.deadlock_check.unwrap_or(DEFAULT_DEADLOCK_CHECK)),
    };
    let sim =
        Simulation::new(&sc.topology, sc.fabric, sc.flows, sc.spec.seed, sc.stop).map_err(|e| {
            SpecError {
                message: e.to_string(),
            }
        })?;
    Ok(sim
        .with_faults(&sc.topology, sc.faults)
        .with_monitors(sc.monitors)
        .with_guards(guards))
}

/// Sets up and runs a prepared scenario; `progress` may stop it (see [`Simulation::run`]).
pub fn run_scenario(
    sc: Scenario,
    progress: &mut dyn FnMut(Time) -> ControlFlow<()>,
) -> Result<RunOutput, SpecError> {
    Ok(build_simulation(sc)?.run(progress))
}

/// The summary of a run with the spec's size buckets.
pub fn summarize(spec: &Spec, out: &RunOutput) -> Summary {
    let buckets = SizeBuckets(spec.run.size_buckets.iter().map(|b| b.0).collect());
    Summary::compute(&out.flows, &buckets)
}

/// Writes the run folder `dir` (created if needed).
pub fn write_run_dir(
    dir: &Path,
    spec: &Spec,
    out: &RunOutput,
    summary: &Summary,
) -> Result<(), OutputError> {
    let io = |path: &Path, source| OutputError::Io {
        path: path.to_path_buf(),
        source,
    };
    std::fs::create_dir_all(dir).map_err(|e| io(dir, e))?;
    let spec_path = dir.join("spec.toml");
    std::fs::write(&spec_path, spec.resolved_toml()).map_err(|e| io(&spec_path, e))?;
    write_flows_parquet(&dir.join("flows.parquet"), &out.flows)?;
    write_ports_parquet(&dir.join("ports.parquet"), &out.ports)?;
    write_summary_parquet(&dir.join("summary.parquet"), summary)?;
    let table_path = dir.join("summary.txt");
    std::fs::write(&table_path, summary.to_table()).map_err(|e| io(&table_path, e))?;
    let reorder_path = dir.join("reorder_queues.parquet");
    match &out.reorder_log {
        Some(log) => write_reorder_parquet(&reorder_path, log, &out.ports)?,
        // A file left by an earlier run in the same folder would describe another run.
        None => {
            let _ = std::fs::remove_file(&reorder_path);
        }
    }
    let alerts_path = dir.join("alerts.parquet");
    if spec.lb.capabilities().alerts {
        write_alerts_parquet(&alerts_path, &out.alerts)?;
    } else {
        let _ = std::fs::remove_file(&alerts_path);
    }
    write_deadlocks_parquet(&dir.join("deadlocks.parquet"), &out.deadlocks)?;
    let coflows_path = dir.join("coflows.parquet");
    if out.coflows.is_empty() {
        let _ = std::fs::remove_file(&coflows_path);
    } else {
        write_coflows_parquet(&coflows_path, &out.coflows)?;
    }
    for (name, table) in monitor_files(out.monitors.as_ref()) {
        let path = dir.join(name);
        match table {
            Some(table) => write_monitor_parquet(&path, &table)?,
            None => {
                let _ = std::fs::remove_file(&path);
            }
        }
    }
    let stats_path = dir.join("stats.json");
    std::fs::write(&stats_path, stats_json(&out.stats)).map_err(|e| io(&stats_path, e))?;
    let fct_path = dir.join("fct.txt");
    let mut fct = String::new();
    for f in &out.flows {
        if let Some(fct_ps) = f.fct_ps {
            crate::ns3::write_fct_line(
                &mut fct,
                f.src,
                f.dst,
                f.sport,
                f.dport,
                f.size_bytes,
                f.start_ps / 1000,
                fct_ps / 1000,
                f.ideal_fct_ps / 1000,
            );
        }
    }
    std::fs::write(&fct_path, fct).map_err(|e| io(&fct_path, e))?;
    Ok(())
}

/// Run-wide counters as JSON.
pub fn stats_json(s: &RunStats) -> String {
    serde_json::to_string_pretty(s).expect("stats always serialize")
}
