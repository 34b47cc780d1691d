//! The Parquet files of a run: per-flow and per-port records, reorder-queue changes, RLB*
//! alerts, PFC deadlocks, the monitors' rows, the coflows and the FCT summary.

use super::summary::Summary;
use crate::metrics::table::Table;
use crate::metrics::{
    AlertRecord, CoflowRecord, DeadlockRecord, FlowRecord, LinkUtilSample, MonitorOutput, PfcEvent,
    PortRecord, QueueSample, RateSample, ReorderChange, ReorderRow, SchemeSample,
};
use arrow_array::RecordBatch;
use arrow_schema::ArrowError;
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
    write_table(path, flows, ROWS_PER_GROUP)
}

/// Writes one row per egress port to `path`: every [`PortRecord`] field.
pub fn write_ports_parquet(path: &Path, ports: &[PortRecord]) -> Result<(), OutputError> {
    write_table(path, ports, ROWS_PER_GROUP)
}

/// Writes one row per change of the reorder queues in use at a port (`time_ps`, `port_id`,
/// `node`, `port`, `in_use`), in time order; `ports` gives each port's node and local index.
pub fn write_reorder_parquet(
    path: &Path,
    log: &[ReorderChange],
    ports: &[PortRecord],
) -> Result<(), OutputError> {
    let rows: Vec<ReorderRow> = log.iter().map(|c| ReorderRow::new(c, ports)).collect();
    write_table(path, &rows, ROWS_PER_GROUP)
}

/// Writes one row per [`AlertRecord`] to `path` (`time_ps`, `node`, `port`, `downstream`),
/// in time order: the faulty switches reported by RLB*.
pub fn write_alerts_parquet(path: &Path, alerts: &[AlertRecord]) -> Result<(), OutputError> {
    write_table(path, alerts, ROWS_PER_GROUP)
}

/// Writes one row per [`DeadlockRecord`] to `path` (`deadlock`, `detected_ps`, `formed_ps`,
/// `node`, `port`, `peer`, `priority`, `paused_since_ps`, `stuck_bytes`): the egresses of
/// the PFC deadlocks found (none in a run without one).
pub fn write_deadlocks_parquet(path: &Path, rows: &[DeadlockRecord]) -> Result<(), OutputError> {
    write_table(path, rows, ROWS_PER_GROUP)
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
/// (`docs/reference/metrics.md`).
pub fn write_monitor_parquet(path: &Path, table: &MonitorTable) -> Result<(), OutputError> {
    match table {
        MonitorTable::Queue(rows) => write_table(path, rows, ROWS_PER_GROUP),
        MonitorTable::Pfc(rows) => write_table(path, rows, ROWS_PER_GROUP),
        MonitorTable::Rate(rows) => write_table(path, rows, ROWS_PER_GROUP),
        MonitorTable::LinkUtil(rows) => write_table(path, rows, ROWS_PER_GROUP),
        MonitorTable::Scheme(rows) => write_table(path, rows, ROWS_PER_GROUP),
    }
}

/// Writes one row per [`SummaryRow`] to `path`, in order, with the same column names as its
/// fields. Statistics of empty buckets are NaN (the columns are not nullable).
pub fn write_summary_parquet(path: &Path, summary: &Summary) -> Result<(), OutputError> {
    write_table(path, &summary.rows, ROWS_PER_GROUP)
}

/// Writes one row per coflow to `path`: every [`CoflowRecord`] field, plus `cct_us`
/// (nullable Float64), the CCT in microseconds.
pub fn write_coflows_parquet(path: &Path, coflows: &[CoflowRecord]) -> Result<(), OutputError> {
    write_table(path, coflows, ROWS_PER_GROUP)
}

/// Writes `rows` to a Snappy-compressed Parquet file at `path`, one row group (and one batch of
/// arrays) per chunk of at most `rows_per_group` rows (which must be > 0), with the columns of
/// the record's [`Table`] definition.
fn write_table<R: Table>(
    path: &Path,
    rows: &[R],
    rows_per_group: usize,
) -> Result<(), OutputError> {
    let parquet_err = |source| OutputError::Parquet {
        path: path.to_path_buf(),
        source,
    };
    let schema = Arc::new(R::schema());
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
        let batch = RecordBatch::try_new(schema.clone(), R::arrays(chunk)).map_err(|source| {
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
    use arrow_array::types::{Float64Type, UInt32Type, UInt64Type};
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
                "ooo_buffer_max_bytes",
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
        write_table(&chunked, &ports, 4).unwrap();
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
