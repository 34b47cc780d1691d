//! The Parquet files of a run: per-flow and per-port records, reorder-queue changes, RLB*
//! alerts, PFC deadlocks, the monitors' rows, the coflows and the FCT summary.

use super::ps_to_us;
use super::summary::{Summary, SummaryRow};
use crate::metrics::{
    AlertRecord, CoflowRecord, DeadlockRecord, FlowRecord, LinkUtilSample, MonitorOutput, PfcEvent,
    PortRecord, QueueSample, RateSample, ReorderChange, SchemeSample,
};
use arrow_array::types::{
    ArrowPrimitiveType, Float64Type, UInt16Type, UInt32Type, UInt64Type, UInt8Type,
};
use arrow_array::{ArrayRef, BooleanArray, PrimitiveArray, RecordBatch, StringArray};
use arrow_schema::{ArrowError, Field, Schema};
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::errors::ParquetError;
use parquet::file::properties::WriterProperties;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Largest number of rows in one Parquet row group (and one in-memory batch).
const ROWS_PER_GROUP: usize = 1 << 20;

/// Failure to write a results file; every message names the file.
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    /// The file could not be created.
    #[error("cannot create {}: {source}", path.display())]
    Io {
        /// The file being written.
        path: PathBuf,
        /// The underlying I/O error.
        source: std::io::Error,
    },
    /// The Parquet writer failed (including I/O errors while writing or closing the file).
    #[error("cannot write Parquet file {}: {source}", path.display())]
    Parquet {
        /// The file being written.
        path: PathBuf,
        /// The underlying Parquet error.
        source: ParquetError,
    },
    /// The columns did not form a valid Arrow record batch.
    #[error("cannot assemble the columns of {}: {source}", path.display())]
    Arrow {
        /// The file being written.
        path: PathBuf,
        /// The underlying Arrow error.
        source: ArrowError,
    },
}

/// Writes one row per flow to `path`: every [`FlowRecord`] field, plus `fct_us` (nullable
/// Float64), the FCT in microseconds.
pub fn write_flows_parquet(path: &Path, flows: &[FlowRecord]) -> Result<(), OutputError> {
    write_table(path, flows, ROWS_PER_GROUP, flow_columns)
}

/// Writes one row per egress port to `path`: every [`PortRecord`] field.
pub fn write_ports_parquet(path: &Path, ports: &[PortRecord]) -> Result<(), OutputError> {
    write_table(path, ports, ROWS_PER_GROUP, port_columns)
}

/// Writes one row per change of the reorder queues in use at a port (`time_ps`, `port_id`,
/// `node`, `port`, `in_use`), in time order; `ports` gives each port's node and local index.
pub fn write_reorder_parquet(
    path: &Path,
    log: &[ReorderChange],
    ports: &[PortRecord],
) -> Result<(), OutputError> {
    write_table(path, log, ROWS_PER_GROUP, |rows| {
        reorder_columns(rows, ports)
    })
}

/// Writes one row per [`AlertRecord`] to `path` (`time_ps`, `node`, `port`, `downstream`),
/// in time order: the faulty switches reported by RLB*.
pub fn write_alerts_parquet(path: &Path, alerts: &[AlertRecord]) -> Result<(), OutputError> {
    write_table(path, alerts, ROWS_PER_GROUP, alert_columns)
}

/// Writes one row per [`DeadlockRecord`] to `path` (`deadlock`, `detected_ps`, `formed_ps`,
/// `node`, `port`, `peer`, `priority`, `paused_since_ps`, `stuck_bytes`): the egresses of
/// the PFC deadlocks found (none in a run without one).
pub fn write_deadlocks_parquet(path: &Path, rows: &[DeadlockRecord]) -> Result<(), OutputError> {
    write_table(path, rows, ROWS_PER_GROUP, deadlock_columns)
}

/// The monitor files of a run, `monitor_<kind>.parquet` (kinds: queue, pfc, rate, link_util,
/// scheme), each with its table if the run has a monitor of that kind (`None`: the file must
/// not be there).
pub fn monitor_files(out: Option<&MonitorOutput>) -> [(&'static str, Option<MonitorTable<'_>>); 5] {
    let table = |f: fn(&MonitorOutput) -> Option<MonitorTable<'_>>| out.and_then(f);
    [
        (
            "monitor_queue.parquet",
            table(|m| m.queue.as_deref().map(MonitorTable::Queue)),
        ),
        (
            "monitor_pfc.parquet",
            table(|m| m.pfc.as_deref().map(MonitorTable::Pfc)),
        ),
        (
            "monitor_rate.parquet",
            table(|m| m.rate.as_deref().map(MonitorTable::Rate)),
        ),
        (
            "monitor_link_util.parquet",
            table(|m| m.link_util.as_deref().map(MonitorTable::LinkUtil)),
        ),
        (
            "monitor_scheme.parquet",
            table(|m| m.scheme.as_deref().map(MonitorTable::Scheme)),
        ),
    ]
}

/// The rows of one monitor file.
pub enum MonitorTable<'a> {
    Queue(&'a [QueueSample]),
    Pfc(&'a [PfcEvent]),
    Rate(&'a [RateSample]),
    LinkUtil(&'a [LinkUtilSample]),
    Scheme(&'a [SchemeSample]),
}

/// Writes a monitor table to `path`, one row per record, columns named as its fields
/// (`docs/metrics.md`).
pub fn write_monitor_parquet(path: &Path, table: &MonitorTable) -> Result<(), OutputError> {
    match table {
        MonitorTable::Queue(rows) => write_table(path, rows, ROWS_PER_GROUP, queue_columns),
        MonitorTable::Pfc(rows) => write_table(path, rows, ROWS_PER_GROUP, pfc_columns),
        MonitorTable::Rate(rows) => write_table(path, rows, ROWS_PER_GROUP, rate_columns),
        MonitorTable::LinkUtil(rows) => write_table(path, rows, ROWS_PER_GROUP, link_columns),
        MonitorTable::Scheme(rows) => write_table(path, rows, ROWS_PER_GROUP, scheme_columns),
    }
}

fn queue_columns(rows: &[QueueSample]) -> Columns<'_, QueueSample> {
    Columns::new(rows)
        .prim::<UInt16Type>("monitor", |r| r.monitor)
        .prim::<UInt64Type>("time_ps", |r| r.time_ps)
        .prim::<UInt32Type>("node", |r| r.node)
        .prim::<UInt16Type>("port", |r| r.port)
        .prim::<UInt8Type>("priority", |r| r.priority)
        .prim::<UInt64Type>("egress_bytes", |r| r.egress_bytes)
        .prim::<UInt64Type>("ingress_bytes", |r| r.ingress_bytes)
        .prim::<UInt64Type>("xoff_bytes", |r| r.xoff_bytes)
}

fn pfc_columns(rows: &[PfcEvent]) -> Columns<'_, PfcEvent> {
    Columns::new(rows)
        .prim::<UInt16Type>("monitor", |r| r.monitor)
        .prim::<UInt64Type>("time_ps", |r| r.time_ps)
        .prim::<UInt32Type>("node", |r| r.node)
        .prim::<UInt16Type>("port", |r| r.port)
        .prim::<UInt32Type>("peer", |r| r.peer)
        .prim::<UInt8Type>("priority", |r| r.priority)
        .utf8("direction", |r| r.direction)
        .utf8("frame", |r| r.frame)
        .opt::<UInt64Type>("duration_ps", |r| r.duration_ps)
}

fn rate_columns(rows: &[RateSample]) -> Columns<'_, RateSample> {
    Columns::new(rows)
        .prim::<UInt16Type>("monitor", |r| r.monitor)
        .prim::<UInt64Type>("time_ps", |r| r.time_ps)
        .prim::<UInt32Type>("flow_id", |r| r.flow_id)
        .prim::<Float64Type>("rate_bps", |r| r.rate_bps)
        .opt::<Float64Type>("target_bps", |r| r.target_bps)
        .opt::<UInt64Type>("cwnd_bytes", |r| r.cwnd_bytes)
        .prim::<UInt64Type>("acked_bytes", |r| r.acked_bytes)
        .prim::<UInt32Type>("cnps", |r| r.cnps)
}

fn link_columns(rows: &[LinkUtilSample]) -> Columns<'_, LinkUtilSample> {
    Columns::new(rows)
        .prim::<UInt16Type>("monitor", |r| r.monitor)
        .prim::<UInt64Type>("time_ps", |r| r.time_ps)
        .prim::<UInt32Type>("node", |r| r.node)
        .prim::<UInt16Type>("port", |r| r.port)
        .prim::<UInt32Type>("peer", |r| r.peer)
        .prim::<UInt64Type>("tx_bytes", |r| r.tx_bytes)
        .prim::<Float64Type>("utilization", |r| r.utilization)
}

fn scheme_columns(rows: &[SchemeSample]) -> Columns<'_, SchemeSample> {
    Columns::new(rows)
        .prim::<UInt16Type>("monitor", |r| r.monitor)
        .prim::<UInt64Type>("time_ps", |r| r.time_ps)
        .prim::<UInt32Type>("node", |r| r.node)
        .utf8("signal", |r| r.signal)
        .prim::<UInt32Type>("key", |r| r.key)
        .prim::<Float64Type>("value", |r| r.value)
}

/// Writes one row per [`SummaryRow`] to `path`, in order, with the same column names as its
/// fields. Statistics of empty buckets are NaN (the columns are not nullable).
pub fn write_summary_parquet(path: &Path, summary: &Summary) -> Result<(), OutputError> {
    write_table(path, &summary.rows, ROWS_PER_GROUP, summary_columns)
}

fn flow_columns(rows: &[FlowRecord]) -> Columns<'_, FlowRecord> {
    Columns::new(rows)
        .prim::<UInt32Type>("flow_id", |f| f.flow_id)
        .utf8("source", |f| f.source)
        .prim::<UInt16Type>("generator", |f| f.generator)
        .opt::<UInt32Type>("coflow", |f| f.coflow)
        .prim::<UInt32Type>("src", |f| f.src)
        .prim::<UInt32Type>("dst", |f| f.dst)
        .prim::<UInt16Type>("sport", |f| f.sport)
        .prim::<UInt16Type>("dport", |f| f.dport)
        .prim::<UInt8Type>("priority", |f| f.priority)
        .prim::<UInt64Type>("size_bytes", |f| f.size_bytes)
        .prim::<UInt64Type>("start_ps", |f| f.start_ps)
        .opt::<UInt64Type>("finish_ps", |f| f.finish_ps)
        .opt::<UInt64Type>("fct_ps", |f| f.fct_ps)
        .prim::<UInt64Type>("ideal_fct_ps", |f| f.ideal_fct_ps)
        .opt::<Float64Type>("slowdown", |f| f.slowdown)
        .prim::<UInt64Type>("packets_sent", |f| f.packets_sent)
        .prim::<UInt64Type>("retransmitted_bytes", |f| f.retransmitted_bytes)
        .prim::<UInt32Type>("nacks_received", |f| f.nacks_received)
        .prim::<UInt32Type>("timeouts", |f| f.timeouts)
        .prim::<UInt32Type>("cnps_received", |f| f.cnps_received)
        .prim::<UInt64Type>("packets_received", |f| f.packets_received)
        .prim::<UInt64Type>("ooo_arrivals", |f| f.ooo_arrivals)
        .prim::<UInt32Type>("max_ooo_degree", |f| f.max_ooo_degree)
        .prim::<UInt64Type>("pfc_paused_packets", |f| f.pfc_paused_packets)
        .prim::<UInt64Type>("pfc_wait_total_ps", |f| f.pfc_wait_total_ps)
        .prim::<UInt64Type>("pfc_wait_max_ps", |f| f.pfc_wait_max_ps)
        .bool("stalled", |f| f.stalled)
        .prim::<UInt8Type>("paths_used", |f| f.paths_used)
        .prim::<UInt32Type>("path_changes", |f| f.path_changes)
        .utf8("transport", |f| f.transport)
        .prim::<UInt32Type>("fast_retransmits", |f| f.fast_retransmits)
        .prim::<UInt32Type>("dup_acks", |f| f.dup_acks)
        .opt::<Float64Type>("fct_us", |f| f.fct_ps.map(ps_to_us))
}

fn port_columns(rows: &[PortRecord]) -> Columns<'_, PortRecord> {
    Columns::new(rows)
        .prim::<UInt32Type>("node", |p| p.node)
        .prim::<UInt16Type>("port", |p| p.port)
        .prim::<UInt32Type>("peer", |p| p.peer)
        .bool("is_switch", |p| p.is_switch)
        .prim::<UInt64Type>("rate_bps", |p| p.rate_bps)
        .prim::<UInt64Type>("delay_ps", |p| p.delay_ps)
        .prim::<UInt64Type>("tx_packets", |p| p.tx_packets)
        .prim::<UInt64Type>("tx_bytes", |p| p.tx_bytes)
        .prim::<UInt64Type>("pfc_pauses_sent", |p| p.pfc_pauses_sent)
        .prim::<UInt64Type>("pfc_resumes_sent", |p| p.pfc_resumes_sent)
        .prim::<UInt64Type>("pfc_pauses_received", |p| p.pfc_pauses_received)
        .prim::<UInt64Type>("paused_time_ps", |p| p.paused_time_ps)
        .prim::<UInt64Type>("peak_queue_bytes", |p| p.peak_queue_bytes)
        .prim::<Float64Type>("mean_queue_bytes", |p| p.mean_queue_bytes)
        .prim::<UInt64Type>("ecn_marks", |p| p.ecn_marks)
        .prim::<UInt64Type>("drops", |p| p.drops)
        .prim::<UInt64Type>("egress_drops", |p| p.egress_drops)
        .prim::<UInt64Type>("fault_drops", |p| p.fault_drops)
        .prim::<UInt64Type>("lb_messages_sent", |p| p.lb_messages_sent)
        .prim::<UInt32Type>("reorder_queues_max", |p| p.reorder_queues_max)
        .prim::<Float64Type>("reorder_queues_mean", |p| p.reorder_queues_mean)
}

fn reorder_columns<'a>(
    rows: &'a [ReorderChange],
    ports: &'a [PortRecord],
) -> Columns<'a, ReorderChange> {
    Columns::new(rows)
        .prim::<UInt64Type>("time_ps", |r| r.time_ps)
        .prim::<UInt32Type>("port_id", |r| r.port_id)
        .prim::<UInt32Type>("node", |r| ports[r.port_id as usize].node)
        .prim::<UInt16Type>("port", |r| ports[r.port_id as usize].port)
        .prim::<UInt32Type>("in_use", |r| r.in_use)
}

/// Writes one row per coflow to `path`: every [`CoflowRecord`] field, plus `cct_us`
/// (nullable Float64), the CCT in microseconds.
pub fn write_coflows_parquet(path: &Path, coflows: &[CoflowRecord]) -> Result<(), OutputError> {
    write_table(path, coflows, ROWS_PER_GROUP, coflow_columns)
}

fn coflow_columns(rows: &[CoflowRecord]) -> Columns<'_, CoflowRecord> {
    Columns::new(rows)
        .prim::<UInt32Type>("coflow_id", |c| c.coflow_id)
        .prim::<UInt32Type>("flows", |c| c.flows)
        .prim::<UInt32Type>("finished_flows", |c| c.finished_flows)
        .prim::<UInt64Type>("bytes", |c| c.bytes)
        .prim::<UInt64Type>("arrival_ps", |c| c.arrival_ps)
        .opt::<UInt64Type>("finish_ps", |c| c.finish_ps)
        .opt::<UInt64Type>("cct_ps", |c| c.cct_ps)
        .prim::<UInt32Type>("stalled_flows", |c| c.stalled_flows)
        .opt::<Float64Type>("cct_us", |c| c.cct_ps.map(ps_to_us))
}

fn alert_columns(rows: &[AlertRecord]) -> Columns<'_, AlertRecord> {
    Columns::new(rows)
        .prim::<UInt64Type>("time_ps", |a| a.time_ps)
        .prim::<UInt32Type>("node", |a| a.node)
        .prim::<UInt16Type>("port", |a| a.port)
        .prim::<UInt32Type>("downstream", |a| a.downstream)
}

fn deadlock_columns(rows: &[DeadlockRecord]) -> Columns<'_, DeadlockRecord> {
    Columns::new(rows)
        .prim::<UInt32Type>("deadlock", |d| d.deadlock)
        .prim::<UInt64Type>("detected_ps", |d| d.detected_ps)
        .prim::<UInt64Type>("formed_ps", |d| d.formed_ps)
        .prim::<UInt32Type>("node", |d| d.node)
        .prim::<UInt16Type>("port", |d| d.port)
        .prim::<UInt32Type>("peer", |d| d.peer)
        .prim::<UInt8Type>("priority", |d| d.priority)
        .prim::<UInt64Type>("paused_since_ps", |d| d.paused_since_ps)
        .prim::<UInt64Type>("stuck_bytes", |d| d.stuck_bytes)
}

fn summary_columns(rows: &[SummaryRow]) -> Columns<'_, SummaryRow> {
    Columns::new(rows)
        .utf8("bucket", |r| &r.bucket)
        .prim::<UInt64Type>("flows", |r| r.flows)
        .prim::<UInt64Type>("finished", |r| r.finished)
        .prim::<Float64Type>("fct_avg_us", |r| r.fct_avg_us)
        .prim::<Float64Type>("fct_p50_us", |r| r.fct_p50_us)
        .prim::<Float64Type>("fct_p95_us", |r| r.fct_p95_us)
        .prim::<Float64Type>("fct_p99_us", |r| r.fct_p99_us)
        .prim::<Float64Type>("fct_p999_us", |r| r.fct_p999_us)
        .prim::<Float64Type>("slowdown_avg", |r| r.slowdown_avg)
        .prim::<Float64Type>("slowdown_p50", |r| r.slowdown_p50)
        .prim::<Float64Type>("slowdown_p95", |r| r.slowdown_p95)
        .prim::<Float64Type>("slowdown_p99", |r| r.slowdown_p99)
        .prim::<Float64Type>("slowdown_p999", |r| r.slowdown_p999)
        .prim::<UInt64Type>("retransmitted_bytes", |r| r.retransmitted_bytes)
        .prim::<UInt64Type>("ooo_arrivals", |r| r.ooo_arrivals)
        .prim::<UInt64Type>("stalled_flows", |r| r.stalled_flows)
}

/// The columns of one batch of rows, built field by field.
struct Columns<'a, R> {
    rows: &'a [R],
    fields: Vec<Field>,
    arrays: Vec<ArrayRef>,
}

impl<'a, R> Columns<'a, R> {
    fn new(rows: &'a [R]) -> Self {
        Columns {
            rows,
            fields: Vec::new(),
            arrays: Vec::new(),
        }
    }

    fn push(mut self, name: &str, nullable: bool, array: ArrayRef) -> Self {
        self.fields
            .push(Field::new(name, array.data_type().clone(), nullable));
        self.arrays.push(array);
        self
    }

    /// A non-nullable column of a primitive type.
    fn prim<T: ArrowPrimitiveType>(self, name: &str, f: impl Fn(&'a R) -> T::Native) -> Self {
        let array = PrimitiveArray::<T>::from_iter_values(self.rows.iter().map(f));
        self.push(name, false, Arc::new(array))
    }

    /// A nullable column of a primitive type (`None` is null).
    fn opt<T: ArrowPrimitiveType>(
        self,
        name: &str,
        f: impl Fn(&'a R) -> Option<T::Native>,
    ) -> Self {
        let array: PrimitiveArray<T> = self.rows.iter().map(f).collect();
        self.push(name, true, Arc::new(array))
    }

    fn bool(self, name: &str, f: impl Fn(&'a R) -> bool) -> Self {
        let array = BooleanArray::from(self.rows.iter().map(f).collect::<Vec<bool>>());
        self.push(name, false, Arc::new(array))
    }

    fn utf8(self, name: &str, f: impl Fn(&'a R) -> &'a str) -> Self {
        let array = StringArray::from_iter_values(self.rows.iter().map(f));
        self.push(name, false, Arc::new(array))
    }
}

/// Writes `rows` to a Snappy-compressed Parquet file at `path`, one row group (and one batch of
/// arrays built by `columns`) per chunk of at most `rows_per_group` rows (which must be > 0).
fn write_table<'a, R>(
    path: &Path,
    rows: &'a [R],
    rows_per_group: usize,
    columns: impl Fn(&'a [R]) -> Columns<'a, R>,
) -> Result<(), OutputError> {
    let parquet_err = |source| OutputError::Parquet {
        path: path.to_path_buf(),
        source,
    };
    // The schema comes from the same builder run on no rows, so it cannot drift from the batches.
    let schema = Arc::new(Schema::new(columns(&rows[..0]).fields));
    let file = File::create(path).map_err(|source| OutputError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let props = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .set_max_row_group_size(rows_per_group)
        .set_dictionary_enabled(false)
        .build();
    let mut writer =
        ArrowWriter::try_new(file, schema.clone(), Some(props)).map_err(parquet_err)?;
    for chunk in rows.chunks(rows_per_group) {
        let batch =
            RecordBatch::try_new(schema.clone(), columns(chunk).arrays).map_err(|source| {
                OutputError::Arrow {
                    path: path.to_path_buf(),
                    source,
                }
            })?;
        writer.write(&batch).map_err(parquet_err)?;
    }
    writer.close().map_err(parquet_err)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::summary::tests::{sample, US};
    use arrow_array::cast::AsArray;
    use arrow_array::Array;
    use arrow_schema::DataType;
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

    /// A fresh directory under the system temp dir, unique to this process and test.
    fn scratch_dir(test: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("pfcsim-output-{}-{test}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn read_back(path: &Path) -> (usize, Vec<RecordBatch>) {
        let builder = ParquetRecordBatchReaderBuilder::try_new(File::open(path).unwrap()).unwrap();
        let meta = builder.metadata().clone();
        for group in meta.row_groups() {
            for column in group.columns() {
                assert_eq!(column.compression(), Compression::SNAPPY);
            }
        }
        let batches = builder.build().unwrap().map(Result::unwrap).collect();
        (meta.num_row_groups(), batches)
    }

    #[test]
    fn flows_round_trip() {
        let dir = scratch_dir("flows");
        let path = dir.join("flows.parquet");
        let (flows, _) = sample();
        write_flows_parquet(&path, &flows).unwrap();
        let (groups, batches) = read_back(&path);
        assert_eq!((groups, batches.len()), (1, 1));
        let batch = &batches[0];
        assert_eq!(batch.num_rows(), 6);

        let schema = batch.schema();
        let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
        assert_eq!(
            names,
            [
                "flow_id",
                "source",
                "generator",
                "coflow",
                "src",
                "dst",
                "sport",
                "dport",
                "priority",
                "size_bytes",
                "start_ps",
                "finish_ps",
                "fct_ps",
                "ideal_fct_ps",
                "slowdown",
                "packets_sent",
                "retransmitted_bytes",
                "nacks_received",
                "timeouts",
                "cnps_received",
                "packets_received",
                "ooo_arrivals",
                "max_ooo_degree",
                "pfc_paused_packets",
                "pfc_wait_total_ps",
                "pfc_wait_max_ps",
                "stalled",
                "paths_used",
                "path_changes",
                "transport",
                "fast_retransmits",
                "dup_acks",
                "fct_us",
            ]
        );
        let finish = schema.field_with_name("finish_ps").unwrap();
        assert_eq!(
            (finish.data_type(), finish.is_nullable()),
            (&DataType::UInt64, true)
        );
        let start = schema.field_with_name("start_ps").unwrap();
        assert_eq!(
            (start.data_type(), start.is_nullable()),
            (&DataType::UInt64, false)
        );
        assert_eq!(
            schema.field_with_name("priority").unwrap().data_type(),
            &DataType::UInt8
        );
        assert_eq!(
            schema.field_with_name("source").unwrap().data_type(),
            &DataType::Utf8
        );

        let col = |name: &str| batch.column_by_name(name).unwrap().clone();
        let finish = col("finish_ps");
        let finish = finish.as_primitive::<UInt64Type>();
        assert_eq!(finish.null_count(), 2);
        assert!(finish.is_null(3) && finish.is_null(5));
        assert_eq!(finish.value(1), 10 * US + 4 * US);
        let fct_us = col("fct_us");
        let fct_us = fct_us.as_primitive::<Float64Type>();
        assert_eq!((fct_us.value(2), fct_us.null_count()), (10.0, 2));
        assert_eq!(col("flow_id").as_primitive::<UInt32Type>().value(4), 4);
        assert_eq!(col("source").as_string::<i32>().value(0), "poisson");
        assert!(col("stalled").as_boolean().value(3));
        assert_eq!(col("slowdown").as_primitive::<Float64Type>().value(4), 3.0);
        assert_eq!(
            col("size_bytes").as_primitive::<UInt64Type>().value(5),
            2_000_000
        );
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn ports_round_trip_in_several_row_groups() {
        let dir = scratch_dir("ports");
        let ports: Vec<PortRecord> = (0..10)
            .map(|i| PortRecord {
                node: i,
                port: 2 * i as u16,
                is_switch: i % 2 == 0,
                tx_bytes: 1_000 * u64::from(i),
                ..PortRecord::default()
            })
            .collect();

        let path = dir.join("ports.parquet");
        write_ports_parquet(&path, &ports).unwrap();
        let (groups, batches) = read_back(&path);
        assert_eq!(groups, 1);
        assert_eq!(batches.iter().map(RecordBatch::num_rows).sum::<usize>(), 10);
        let schema = batches[0].schema();
        assert_eq!(schema.fields().len(), 21);
        assert_eq!(
            schema.field_with_name("port").unwrap().data_type(),
            &DataType::UInt16
        );
        assert_eq!(
            schema.field_with_name("is_switch").unwrap().data_type(),
            &DataType::Boolean
        );

        let chunked = dir.join("chunked.parquet");
        write_table(&chunked, &ports, 4, port_columns).unwrap();
        let (groups, batches) = read_back(&chunked);
        assert_eq!(groups, 3);
        let tx: Vec<u64> = batches
            .iter()
            .flat_map(|b| {
                b.column_by_name("tx_bytes")
                    .unwrap()
                    .as_primitive::<UInt64Type>()
                    .values()
                    .to_vec()
            })
            .collect();
        assert_eq!(tx, (0..10).map(|i| 1_000 * i).collect::<Vec<u64>>());

        let empty = dir.join("empty.parquet");
        write_ports_parquet(&empty, &[]).unwrap();
        let (groups, batches) = read_back(&empty);
        assert_eq!((groups, batches.len()), (0, 0));
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn summary_round_trip() {
        let dir = scratch_dir("summary");
        let path = dir.join("summary.parquet");
        let (flows, buckets) = sample();
        let summary = Summary::compute(&flows, &buckets);
        write_summary_parquet(&path, &summary).unwrap();
        let (_, batches) = read_back(&path);
        let batch = &batches[0];
        assert_eq!(batch.num_rows(), 5);
        assert_eq!(batch.num_columns(), 16);
        let bucket = batch.column_by_name("bucket").unwrap().as_string::<i32>();
        assert_eq!((bucket.value(0), bucket.value(4)), ("all", ">=1MB"));
        let avg = batch
            .column_by_name("fct_avg_us")
            .unwrap()
            .as_primitive::<Float64Type>();
        assert_eq!(avg.value(0), 9.0);
        assert!(avg.value(4).is_nan());
        let flows = batch
            .column_by_name("flows")
            .unwrap()
            .as_primitive::<UInt64Type>();
        assert_eq!(flows.values().to_vec(), [6, 2, 2, 1, 1]);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn io_errors_name_the_file() {
        let path = scratch_dir("errors")
            .join("no-such-dir")
            .join("flows.parquet");
        let err = write_flows_parquet(&path, &[]).unwrap_err();
        assert!(matches!(err, OutputError::Io { .. }), "{err:?}");
        assert!(err.to_string().contains("no-such-dir"), "{err}");
        std::fs::remove_dir_all(path.parent().unwrap().parent().unwrap()).unwrap();
    }
}
