//! `pfcsim-rs`: run, validate and inspect pfcsim scenarios from the command line, without
//! Python (the `pfcsim` command of the Python package offers the same and more).

use clap::{Parser, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use pfcsim_core::cdf::FlowSizeCdf;
use pfcsim_core::lb::{registry, registry_markdown};
use pfcsim_core::run::{build_simulation, run_scenario, summarize, write_run_dir};
use pfcsim_core::spec::{Scenario, Spec, SpecError};
use pfcsim_core::units::Time;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// jemalloc, built to back all of its memory with transparent huge pages
/// (`.cargo/config.toml`): fewer TLB misses in a large fabric (`docs/reference/architecture.md`,
/// "Huge pages"). Linux only; elsewhere the system allocator.
#[cfg(target_os = "linux")]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[derive(Parser)]
#[command(
    name = "pfcsim",
    version,
    about = "Packet-level simulator of lossless (PFC, RoCEv2) datacenter fabrics"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run one scenario and write its results to a run folder.
    Run {
        /// The scenario spec (TOML).
        spec: PathBuf,
        /// Run folder (default: runs/<spec file name>).
        #[arg(short, long)]
        out: Option<PathBuf>,
        /// No progress bar.
        #[arg(short, long)]
        quiet: bool,
    },
    /// Check a spec (and build its topology and traffic) without running it.
    Validate { spec: PathBuf },
    /// List the load-balancing schemes with their parameters and defaults.
    Schemes {
        /// Print them as the Markdown table of docs/reference/spec.md's `[lb]` section.
        #[arg(long)]
        markdown: bool,
    },
    /// List the shipped flow-size workloads with their mean flow size.
    Workloads,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Run { spec, out, quiet } => run(&spec, out, quiet),
        Command::Validate { spec } => validate(&spec),
        Command::Schemes { markdown } => {
            schemes(markdown);
            Ok(())
        }
        Command::Workloads => {
            workloads();
            Ok(())
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

fn load(path: &Path) -> Result<Scenario, SpecError> {
    let text = std::fs::read_to_string(path).map_err(|e| SpecError {
        message: format!("cannot read {}: {e}", path.display()),
    })?;
    let spec = Spec::from_toml(&text, &path.display().to_string())?;
    let base = path.parent().unwrap_or(Path::new("."));
    Scenario::prepare(spec, base)
}

fn validate(path: &Path) -> Result<(), String> {
    let sc = load(path).map_err(|e| e.to_string())?;
    let line = format!(
        "{}: valid; {} hosts, {} switches, {} flows, scheme {}",
        path.display(),
        sc.topology.hosts.len(),
        sc.topology.nodes() - sc.topology.hosts.len(),
        sc.flows.len(),
        sc.spec.lb.name()
    );
    build_simulation(sc).map_err(|e| e.to_string())?;
    println!("{line}");
    Ok(())
}

fn run(path: &Path, out: Option<PathBuf>, quiet: bool) -> Result<(), String> {
    let sc = load(path).map_err(|e| e.to_string())?;
    let out_dir = out.unwrap_or_else(|| {
        let stem = path.file_stem().unwrap_or_default().to_string_lossy();
        PathBuf::from("runs").join(stem.as_ref())
    });
    let spec = sc.spec.clone();
    let first = sc.flows.iter().map(|f| f.start).min().unwrap_or(Time::ZERO);
    let last = sc.flows.iter().map(|f| f.start).max().unwrap_or(Time::ZERO);
    eprintln!(
        "{}: {} flows on {} hosts, scheme {}",
        path.display(),
        sc.flows.len(),
        sc.topology.hosts.len(),
        spec.lb.name()
    );
    let bar = if quiet {
        ProgressBar::hidden()
    } else {
        // The bar covers the flow arrivals in simulated microseconds; after the last arrival
        // the run drains the remaining flows.
        let span = (last - first).ps() / 1_000_000;
        let bar = ProgressBar::new(span.max(1));
        bar.set_style(
            ProgressStyle::with_template(
                "{spinner} [{elapsed_precise}] {bar:40} {percent:>3}% of arrivals  {msg}",
            )
            .expect("valid template"),
        );
        bar
    };
    let mut progress = |now: Time| {
        let done = (now.saturating_sub(first)).ps() / 1_000_000;
        bar.set_position(done.min(bar.length().unwrap_or(0)));
        let phase = if now > last { "draining" } else { "arrivals" };
        bar.set_message(format!("t = {:.3} ms ({phase})", now.as_secs_f64() * 1e3));
        ControlFlow::Continue(())
    };
    let output = run_scenario(sc, &mut progress).map_err(|e| e.to_string())?;
    bar.finish_and_clear();
    let summary = summarize(&spec, &output);
    write_run_dir(&out_dir, &spec, &output, &summary).map_err(|e| e.to_string())?;

    let s = &output.stats;
    println!("{}", summary.to_table());
    let pauses: u64 = output.ports.iter().map(|p| p.pfc_pauses_sent).sum();
    let retx: u64 = output.flows.iter().map(|f| f.retransmitted_bytes).sum();
    let ooo: u64 = output.flows.iter().map(|f| f.ooo_arrivals).sum();
    println!(
        "flows finished {}/{}  PFC pauses {}  drops {}  retransmitted {} B  out-of-order arrivals {}",
        s.flows_finished, s.flows_total, pauses, s.packets_dropped, retx, ooo
    );
    if let Some(c) = &s.coflows {
        println!(
            "coflows finished {}/{}  ACCT {:.2} us  stalled-flow ratio {:.4}",
            c.coflows_finished, c.coflows_total, c.acct_us, c.stalled_flow_ratio
        );
    }
    println!(
        "simulated {:.3} ms in {:.2} s wall: {} events, {:.2} M events/s, peak memory {}",
        s.end_ps as f64 / 1e9,
        s.wall_seconds,
        s.events,
        s.events as f64 / s.wall_seconds / 1e6,
        peak_memory().unwrap_or_else(|| "unknown".into())
    );
    println!(
        "fingerprint {:016x}  peak packets in flight {}",
        s.fingerprint, output.peak_packets
    );
    println!("results in {}", out_dir.display());
    // A guard of [run] ended the run early: the results are written, and the run failed.
    match &s.incomplete {
        Some(reason) => Err(reason.clone()),
        None => Ok(()),
    }
}

/// Peak resident memory of this process (Linux), e.g. "41.2 MB".
fn peak_memory() -> Option<String> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(format!("{:.1} MB", kb * 1024.0 / 1e6))
}

fn schemes(markdown: bool) {
    if markdown {
        print!("{}", registry_markdown());
        return;
    }
    for scheme in registry() {
        println!("{}: {}", scheme.name, scheme.summary);
        for key in scheme.default_keys() {
            println!("    {key}");
        }
    }
}

fn workloads() {
    for name in FlowSizeCdf::builtin_names() {
        let cdf = FlowSizeCdf::builtin(name).expect("shipped workloads parse");
        println!(
            "{name:<22} mean {:>12.0} B   max {:>12} B",
            cdf.mean(),
            cdf.max_size()
        );
    }
}

#[cfg(test)]
mod tests {
    /// The allocator asks for huge pages: a large allocation lies in a mapping that the kernel
    /// has been told to back with them (`hg` among its flags in `/proc/self/smaps`). jemalloc
    /// asks only where the system's THP mode is `madvise` (the usual one): under `always` every
    /// mapping gets them anyway, under `never` none does, and a kernel may have no transparent
    /// huge pages at all; there is nothing to check then.
    #[cfg(target_os = "linux")]
    #[test]
    fn large_allocations_ask_for_huge_pages() {
        let mode = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled")
            .unwrap_or_default();
        if !mode.contains("[madvise]") {
            eprintln!("THP mode {:?}, not madvise: nothing to check", mode.trim());
            return;
        }
        let block = vec![1u8; 64 << 20];
        let address = block.as_ptr() as usize + block.len() / 2;
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let mut inside = false;
        let mut flags = None;
        for line in smaps.lines() {
            let first = line.split_whitespace().next().unwrap_or("");
            if let Some((start, end)) = first.split_once('-').filter(|(s, _)| !s.is_empty()) {
                if let (Ok(start), Ok(end)) = (
                    usize::from_str_radix(start, 16),
                    usize::from_str_radix(end, 16),
                ) {
                    inside = (start..end).contains(&address);
                    continue;
                }
            }
            if inside {
                if let Some(f) = line.strip_prefix("VmFlags:") {
                    flags = Some(f.split_whitespace().map(str::to_owned).collect::<Vec<_>>());
                    break;
                }
            }
        }
        let flags = flags.expect("the block's mapping is in /proc/self/smaps");
        assert!(
            flags.iter().any(|f| f == "hg"),
            "the block's mapping was not advised for huge pages: flags {flags:?}"
        );
        drop(block);
    }
}
