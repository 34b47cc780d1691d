//! `docs/reference/metrics.md` documents every column of every Parquet file a run writes, with its
//! type, in file order, and no column that is not written; and every key of `stats.json`. The
//! columns come from the records' [`Table`] definitions, the keys from [`RunStats`].

use crate::metrics::table::Table;
use crate::metrics::{
    AlertRecord, CoflowRecord, CoflowStats, DeadlockRecord, FlowRecord, LinkUtilSample, PfcEvent,
    PortRecord, QueueSample, RateSample, ReorderRow, RunStats, SchemeSample,
};
use crate::output::summary::SummaryRow;
use arrow_schema::Schema;

/// Every Parquet file of a run folder with the record of its rows.
fn tables() -> Vec<(&'static str, Schema)> {
    vec![
        ("flows.parquet", FlowRecord::schema()),
        ("ports.parquet", PortRecord::schema()),
        ("summary.parquet", SummaryRow::schema()),
        ("reorder_queues.parquet", ReorderRow::schema()),
        ("coflows.parquet", CoflowRecord::schema()),
        ("alerts.parquet", AlertRecord::schema()),
        ("deadlocks.parquet", DeadlockRecord::schema()),
        ("monitor_queue.parquet", QueueSample::schema()),
        ("monitor_pfc.parquet", PfcEvent::schema()),
        ("monitor_rate.parquet", RateSample::schema()),
        ("monitor_link_util.parquet", LinkUtilSample::schema()),
        ("monitor_scheme.parquet", SchemeSample::schema()),
    ]
}

fn page() -> String {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/reference/metrics.md"
    );
    std::fs::read_to_string(path).expect("docs/reference/metrics.md")
}

/// The names in backquotes of a table cell: `` `src`, `dst` `` gives `src` and `dst`.
fn quoted(cell: &str) -> Vec<String> {
    cell.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

/// The cells of the body rows of the Markdown tables in `text` (header and rule rows left
/// out).
fn table_rows(text: &str) -> Vec<Vec<&str>> {
    let mut rows = Vec::new();
    let mut in_table = false;
    for line in text.lines() {
        let Some(inner) = line.trim().strip_prefix('|') else {
            in_table = false;
            continue;
        };
        if !in_table {
            in_table = true; // the header
            continue;
        }
        let cells: Vec<&str> = inner.trim_end_matches('|').split(" | ").collect();
        if !cells[0].starts_with("---") {
            rows.push(cells.iter().map(|c| c.trim()).collect());
        }
    }
    rows
}

/// The section of `page` under the heading `heading` (a line of its own), up to the next
/// heading of the same or a higher level.
fn section<'a>(page: &'a str, heading: &str) -> Option<&'a str> {
    let level = heading.split(' ').next().expect("a heading");
    let start = page.find(&format!("\n{heading}\n"))? + heading.len() + 2;
    let rest = &page[start..];
    let end = rest
        .match_indices("\n#")
        .find(|(i, _)| {
            let marks = rest[i + 1..].chars().take_while(|&c| c == '#').count();
            marks <= level.len()
        })
        .map_or(rest.len(), |(i, _)| i);
    Some(&rest[..end])
}

/// The columns a section's tables document, in order, as `name: Type` (`, nullable` added
/// for a nullable column). A row may document several columns: `` `src`, `dst` `` with one
/// type for all, or `` `node`, `port` `` with `UInt32, UInt16`, one type each.
fn documented(section: &str) -> Vec<String> {
    let mut columns = Vec::new();
    for cells in table_rows(section) {
        let names = quoted(cells[0]);
        // The types, each with its `, nullable` if any.
        let mut types: Vec<String> = Vec::new();
        for part in cells[1].split(", ") {
            match (part, types.last_mut()) {
                ("nullable", Some(last)) => last.push_str(", nullable"),
                _ => types.push(part.to_string()),
            }
        }
        for (i, name) in names.iter().enumerate() {
            let ty = if types.len() == names.len() {
                &types[i]
            } else {
                &types[0]
            };
            columns.push(format!("{name}: {ty}"));
        }
    }
    columns
}

/// The columns of `schema`, as [`documented`] gives them.
fn written(schema: &Schema) -> Vec<String> {
    schema
        .fields()
        .iter()
        .map(|f| {
            let nullable = if f.is_nullable() { ", nullable" } else { "" };
            format!("{}: {:?}{nullable}", f.name(), f.data_type())
        })
        .collect()
}

/// What differs between the columns written and those documented, in words.
fn difference(written: &[String], docs: &[String]) -> String {
    let missing: Vec<_> = written.iter().filter(|c| !docs.contains(c)).collect();
    let extra: Vec<_> = docs.iter().filter(|c| !written.contains(c)).collect();
    if missing.is_empty() && extra.is_empty() {
        let at = written
            .iter()
            .zip(docs)
            .position(|(w, d)| w != d)
            .unwrap_or(0);
        return format!("documented in another order (from {})", written[at]);
    }
    format!("written but not documented {missing:?}; documented but not written {extra:?}")
}

#[test]
fn every_column_written_is_documented_with_its_type_in_file_order() {
    let page = page();
    // The columns every monitor file starts with, documented once for all.
    let monitors = section(&page, "## Monitors").expect("the Monitors section");
    let shared = documented(&monitors[..monitors.find("\n###").unwrap_or(monitors.len())]);
    assert!(
        !shared.is_empty(),
        "the Monitors section documents their first columns"
    );
    let mut wrong = Vec::new();
    for (file, schema) in tables() {
        let (heading, first) = if file.starts_with("monitor_") {
            (format!("### `{file}`"), shared.clone())
        } else {
            (format!("## `{file}`"), Vec::new())
        };
        let Some(text) = section(&page, &heading) else {
            wrong.push(format!("{file}: no section `{heading}`"));
            continue;
        };
        let docs = [first, documented(text)].concat();
        let columns = written(&schema);
        if docs != columns {
            wrong.push(format!("{file}: {}", difference(&columns, &docs)));
        }
    }
    assert!(
        wrong.is_empty(),
        "docs/reference/metrics.md does not document the columns written (a record field, or a \
         derived column, of metrics.rs without its row, or a row of no column):\n{}",
        wrong.join("\n")
    );
}

#[test]
fn the_run_folder_table_and_the_sections_name_the_parquet_files_written() {
    let page = page();
    let folder = section(&page, "## Run folder").expect("the Run folder section");
    let mut listed: Vec<String> = table_rows(folder)
        .iter()
        .flat_map(|cells| quoted(cells[0]))
        .filter(|name| name.ends_with(".parquet"))
        .collect();
    let mut sections: Vec<String> = page
        .lines()
        .filter(|line| line.starts_with('#'))
        .filter_map(|line| line.trim_start_matches('#').strip_prefix(" `"))
        .filter_map(|rest| rest.strip_suffix(".parquet`"))
        .map(|name| format!("{name}.parquet"))
        .collect();
    let mut files: Vec<String> = tables().iter().map(|(f, _)| f.to_string()).collect();
    files.sort();
    listed.sort();
    sections.sort();
    assert_eq!(listed, files, "the files of the Run folder table");
    assert_eq!(sections, files, "the sections of the Parquet files");
}

#[test]
fn every_key_of_stats_json_is_documented() {
    let page = page();
    let text = section(&page, "## `stats.json`").expect("the stats.json section");
    // The table of the keys, not that of the scheme counters below it.
    let text = &text[..text.find("\n###").unwrap_or(text.len())];
    let mut documented: Vec<String> = table_rows(text)
        .iter()
        .flat_map(|cells| quoted(cells[0]))
        .filter(|key| !key.starts_with('<'))
        .collect();
    // Every key a run can write: the optional ones set, one monitor counter.
    let stats = RunStats {
        coflows: Some(CoflowStats::default()),
        deadlock_formed_ps: Some(0),
        deadlock_cycles: Some(String::new()),
        incomplete: Some(String::new()),
        monitor_counters: [("monitor.pfc_events_dropped".to_string(), 0)].into(),
        ..RunStats::default()
    };
    let json = serde_json::to_value(&stats).expect("stats serialize");
    let mut keys: Vec<String> = json
        .as_object()
        .expect("an object")
        .keys()
        .cloned()
        .collect();
    keys.sort();
    documented.sort();
    assert_eq!(
        documented, keys,
        "the keys of docs/reference/metrics.md's stats.json table"
    );
}

#[test]
fn the_doc_parser_reads_shared_and_paired_types() {
    let text = "| column | type | unit |\n|---|---|---|\n\
                | `src`, `dst` | UInt32 | node id |\n\
                | `node`, `port` | UInt32, UInt16 | — |\n\
                | `fct_us` | Float64, nullable | µs |\n";
    assert_eq!(
        documented(text),
        [
            "src: UInt32",
            "dst: UInt32",
            "node: UInt32",
            "port: UInt16",
            "fct_us: Float64, nullable"
        ]
    );
    let page = "# A\n## `x`\ntext\n### sub\nmore\n## `y`\nend\n";
    assert_eq!(section(page, "## `x`"), Some("text\n### sub\nmore"));
    assert_eq!(section(page, "### sub"), Some("more"));
}
