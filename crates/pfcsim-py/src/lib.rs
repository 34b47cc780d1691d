//! `pfcsim._core`: the Python extension module of pfcsim.
//!
//! A thin layer over `pfcsim-core`, used by the `pfcsim` Python package (`python/pfcsim`),
//! which is the public interface. Specs arrive as TOML text (the package turns a dict into
//! TOML first, so both forms go through the same reader and give the same messages); every
//! problem with a spec raises `pfcsim.SpecError` with the core's message. The simulation runs
//! with the GIL released; the GIL is taken back only to report progress (and to let Ctrl-C
//! interrupt the run). Results go to a run folder, from which the package reads the Parquet
//! tables.

use pfcsim_core::cdf::FlowSizeCdf;
use pfcsim_core::engine::Fingerprint;
use pfcsim_core::lb::registry;
use pfcsim_core::metrics::PORT_TOTALS;
use pfcsim_core::run::{build_simulation, run_scenario, stats_json, summarize, write_run_dir};
use pfcsim_core::spec::{self, Spec};
use pfcsim_core::units::{Bytes, Rate, Time};
use pyo3::create_exception;
use pyo3::exceptions::{PyOSError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::ops::ControlFlow;
use std::path::PathBuf;

/// jemalloc, built to back all of its memory with transparent huge pages
/// (`.cargo/config.toml`), as in the CLI: fewer TLB misses in a large fabric
/// (`docs/reference/architecture.md`, "Huge pages"). It serves the module's own (Rust) allocations;
/// Python's are Python's. Linux only; elsewhere the system allocator.
#[cfg(target_os = "linux")]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

create_exception!(
    pfcsim,
    SpecError,
    PyValueError,
    "A problem with a spec, found before or while setting up a simulation. The message names \
     the spec, the key path of the offending value and what would be valid."
);

fn spec_error(e: spec::SpecError) -> PyErr {
    SpecError::new_err(e.message)
}

/// Reads, validates and prepares (topology and flows) the spec `text`. `origin` names it in
/// messages; relative paths inside it are resolved against `base_dir`. Without
/// `line_numbers`, the " (line N)" after `origin` is left out of messages (for specs that
/// were not written as TOML by the user, whose line numbers would mean nothing to them).
fn load(
    text: &str,
    origin: &str,
    base_dir: &std::path::Path,
    line_numbers: bool,
) -> Result<spec::Scenario, spec::SpecError> {
    let spec = Spec::from_toml(text, origin).map_err(|mut e| {
        if !line_numbers {
            e.message = without_line_number(&e.message, origin);
        }
        e
    })?;
    spec::Scenario::prepare(spec, base_dir)
}

/// `message` without the " (line N)" that `Spec::from_toml` puts right after `origin`.
fn without_line_number(message: &str, origin: &str) -> String {
    let Some(rest) = message.strip_prefix(origin) else {
        return message.to_string();
    };
    let Some(after) = rest.strip_prefix(" (line ") else {
        return message.to_string();
    };
    match after.split_once(')') {
        Some((line, tail)) if line.bytes().all(|b| b.is_ascii_digit()) => {
            format!("{origin}{tail}")
        }
        _ => message.to_string(),
    }
}

/// What a prepared scenario holds, before it runs.
struct Info {
    name: String,
    hosts: usize,
    switches: usize,
    flows: usize,
    scheme: &'static str,
    first_start: Time,
    last_start: Time,
    resolved_spec: String,
    inputs_digest: u64,
}

impl Info {
    fn of(sc: &spec::Scenario) -> Info {
        let starts = sc.flows.iter().map(|f| f.start);
        Info {
            name: sc.spec.name.clone(),
            hosts: sc.topology.hosts.len(),
            switches: sc.topology.nodes() - sc.topology.hosts.len(),
            flows: sc.flows.len(),
            scheme: sc.spec.lb.name(),
            first_start: starts.clone().min().unwrap_or(Time::ZERO),
            last_start: starts.max().unwrap_or(Time::ZERO),
            resolved_spec: sc.spec.resolved_toml(),
            inputs_digest: inputs_digest(sc),
        }
    }

    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        d.set_item("name", &self.name)?;
        d.set_item("hosts", self.hosts)?;
        d.set_item("switches", self.switches)?;
        d.set_item("flows", self.flows)?;
        d.set_item("scheme", self.scheme)?;
        d.set_item("first_start_s", self.first_start.as_secs_f64())?;
        d.set_item("last_start_s", self.last_start.as_secs_f64())?;
        d.set_item("resolved_spec", &self.resolved_spec)?;
        d.set_item("inputs_digest", format!("{:016x}", self.inputs_digest))?;
        Ok(d)
    }
}

/// A digest of everything a run reads besides the spec text: the built topology (every link)
/// and the flow table. Two prepared scenarios with the same resolved spec but a different
/// topology, CDF or flow file (edited on disk) get different digests, so a sweep that keys its
/// points by spec and digest reruns them.
fn inputs_digest(sc: &spec::Scenario) -> u64 {
    let mut digest = Fingerprint::default();
    for link in &sc.topology.links {
        digest.add(link.delay, (u64::from(link.a) << 32) | u64::from(link.b));
        digest.add(Time(link.rate.0), 1);
    }
    for f in &sc.flows {
        digest.add(f.start, (u64::from(f.src) << 32) | u64::from(f.dst));
        digest.add(
            Time(f.size),
            u64::from(f.priority) << 48 | u64::from(f.dport) << 32,
        );
        digest.add(Time(u64::from(f.path_tag)), 2);
        if let Some(c) = f.coflow {
            digest.add(Time(u64::from(c)), 3);
        }
    }
    digest.value()
}

/// Checks a spec completely without running it: reads and validates it, builds its topology
/// and flows, and sets up the fabric. Returns the summary of `Scenario.info`.
#[pyfunction]
#[pyo3(signature = (text, origin, base_dir, line_numbers = true))]
fn validate<'py>(
    py: Python<'py>,
    text: &str,
    origin: &str,
    base_dir: PathBuf,
    line_numbers: bool,
) -> PyResult<Bound<'py, PyDict>> {
    let info = py
        .detach(|| {
            let sc = load(text, origin, &base_dir, line_numbers)?;
            let info = Info::of(&sc);
            build_simulation(sc)?;
            Ok(info)
        })
        .map_err(spec_error)?;
    info.to_dict(py)
}

/// Reads, validates and prepares a spec (see `validate`), ready to run once.
#[pyfunction]
#[pyo3(signature = (text, origin, base_dir, line_numbers = true))]
fn prepare(
    py: Python<'_>,
    text: &str,
    origin: &str,
    base_dir: PathBuf,
    line_numbers: bool,
) -> PyResult<Scenario> {
    let sc = py
        .detach(|| load(text, origin, &base_dir, line_numbers))
        .map_err(spec_error)?;
    Ok(Scenario {
        info: Info::of(&sc),
        scenario: Some(sc),
    })
}

/// A prepared scenario: topology built and flows generated.
#[pyclass(module = "pfcsim._core")]
struct Scenario {
    info: Info,
    /// `None` once it has run.
    scenario: Option<spec::Scenario>,
}

/// What a finished run hands back before the GIL is taken again.
struct Finished {
    stats_json: String,
    summary_table: String,
    resolved_spec: String,
    peak_packets: usize,
}

#[pymethods]
impl Scenario {
    /// name, hosts, switches, flows, scheme, the first and last flow start times
    /// (`first_start_s`, `last_start_s`, in simulated seconds), the resolved spec TOML
    /// (`resolved_spec`) and the digest of the built topology and flow table
    /// (`inputs_digest`, 16 hexadecimal digits).
    #[getter]
    fn info<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        self.info.to_dict(py)
    }

    /// Runs the scenario with the GIL released and writes its run folder `out_dir`.
    ///
    /// `progress(now_s)` is called with the simulated time in seconds every 2^18 events and
    /// at the end. If it raises (or Ctrl-C is pressed while the run is in the main thread),
    /// the run is abandoned and the exception propagates. Returns `stats` (the run-wide
    /// counters), `summary_table` (the FCT summary as text), `spec` (the resolved spec TOML)
    /// and `peak_packets` (most packets alive at once).
    #[pyo3(signature = (out_dir, progress = None))]
    fn run<'py>(
        &mut self,
        py: Python<'py>,
        out_dir: PathBuf,
        progress: Option<Py<PyAny>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let sc = self.scenario.take().ok_or_else(|| {
            PyRuntimeError::new_err("this scenario has already run; prepare the spec again")
        })?;
        let finished = py.detach(move || -> PyResult<Finished> {
            let spec = sc.spec.clone();
            let mut failure: Option<PyErr> = None;
            let mut tick = |now: Time| {
                let reported = Python::attach(|py| {
                    py.check_signals()?;
                    match &progress {
                        Some(callback) => callback.call1(py, (now.as_secs_f64(),)).map(drop),
                        None => Ok(()),
                    }
                });
                match reported {
                    Ok(()) => ControlFlow::Continue(()),
                    Err(e) => {
                        // A signal (Ctrl-C) or an exception in the callback stops the run.
                        failure = Some(e);
                        ControlFlow::Break(())
                    }
                }
            };
            let output = run_scenario(sc, &mut tick).map_err(spec_error)?;
            if let Some(e) = failure {
                return Err(e);
            }
            let summary = summarize(&spec, &output);
            write_run_dir(&out_dir, &spec, &output, &summary)
                .map_err(|e| PyOSError::new_err(e.to_string()))?;
            Ok(Finished {
                stats_json: stats_json(&output.stats),
                summary_table: summary.to_table(),
                resolved_spec: spec.resolved_toml(),
                peak_packets: output.peak_packets,
            })
        })?;
        let d = PyDict::new(py);
        // Through JSON, so that a counter added to `RunStats` needs no change here.
        let stats = py
            .import("json")?
            .call_method1("loads", (finished.stats_json,))?;
        d.set_item("stats", stats)?;
        d.set_item("summary_table", finished.summary_table)?;
        d.set_item("spec", finished.resolved_spec)?;
        d.set_item("peak_packets", finished.peak_packets)?;
        Ok(d)
    }
}

/// Every load-balancing scheme: `name`, `doc` (one line) and `defaults` (its parameters with
/// their default values, as TOML; empty for a scheme without parameters).
#[pyfunction]
fn schemes(py: Python<'_>) -> PyResult<Vec<Bound<'_, PyDict>>> {
    registry()
        .into_iter()
        .map(|scheme| {
            let params: String = scheme
                .default_keys()
                .iter()
                .map(|l| format!("{l}\n"))
                .collect();
            let d = PyDict::new(py);
            d.set_item("name", scheme.name)?;
            d.set_item("doc", scheme.summary)?;
            d.set_item("defaults", params)?;
            Ok(d)
        })
        .collect()
}

/// Every shipped flow-size workload: `name`, `mean` (exact mean flow size, bytes) and `max`
/// (largest flow size, bytes).
#[pyfunction]
fn workloads(py: Python<'_>) -> PyResult<Vec<Bound<'_, PyDict>>> {
    FlowSizeCdf::builtin_names()
        .iter()
        .map(|&name| {
            let cdf = FlowSizeCdf::builtin(name).expect("shipped workloads parse");
            let d = PyDict::new(py);
            d.set_item("name", name)?;
            d.set_item("mean", cdf.mean())?;
            d.set_item("max", cdf.max_size())?;
            Ok(d)
        })
        .collect()
}

/// A spec quantity read as the core reads it: `("time", picoseconds)`, `("rate", bits per
/// second)` or `("size", bytes)` for `"2us"`, `"40Gbps"`, `"64KB"`; `None` for any other text.
#[pyfunction]
fn quantity(text: &str) -> Option<(&'static str, u64)> {
    if let Ok(t) = text.parse::<Time>() {
        return Some(("time", t.ps()));
    }
    if let Ok(r) = text.parse::<Rate>() {
        return Some(("rate", r.0));
    }
    text.parse::<Bytes>().ok().map(|b| ("size", b.0))
}

/// The totals over a run's ports that a results store adds to its `runs` table, in column
/// order, as `(name, aggregate, column)`: `aggregate` (`sum` or `max`) of the `ports.parquet`
/// column, in microseconds when a total named `_us` folds a column in picoseconds
/// (`metrics::PORT_TOTALS`).
#[pyfunction]
fn port_totals() -> Vec<(&'static str, &'static str, &'static str)> {
    PORT_TOTALS
        .iter()
        .map(|t| (t.name, t.aggregate, t.column))
        .collect()
}

#[pymodule]
#[pyo3(name = "_core")]
fn pfcsim_core_module(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("SpecError", m.py().get_type::<SpecError>())?;
    m.add_class::<Scenario>()?;
    m.add_function(wrap_pyfunction!(validate, m)?)?;
    m.add_function(wrap_pyfunction!(prepare, m)?)?;
    m.add_function(wrap_pyfunction!(schemes, m)?)?;
    m.add_function(wrap_pyfunction!(workloads, m)?)?;
    m.add_function(wrap_pyfunction!(quantity, m)?)?;
    m.add_function(wrap_pyfunction!(port_totals, m)?)?;
    Ok(())
}
