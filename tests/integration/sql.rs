//! Runs `sql-tests/*.slt` (sqllogictest) against a DataFusion session with Blosc2 enabled:
//! `STORED AS BLOSC2`, quoted-path tables, 2 target partitions.

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::util::display::{ArrayFormatter, FormatOptions};
use datafusion::prelude::{SessionConfig, SessionContext};
use datafusion_blosc2::provider::Blosc2SessionExt;
use sqllogictest::{AsyncDB, DBOutput, DefaultColumnType};
use std::path::PathBuf;

struct Db {
    ctx: SessionContext,
}

#[derive(Debug)]
struct DbError(String);
impl std::fmt::Display for DbError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}
impl std::error::Error for DbError {}

fn render(batches: &[RecordBatch]) -> Vec<Vec<String>> {
    let opts = FormatOptions::default().with_null("NULL");
    let mut rows = Vec::new();
    for b in batches {
        let fmts: Vec<_> = b
            .columns()
            .iter()
            .map(|c| ArrayFormatter::try_new(c.as_ref(), &opts).unwrap())
            .collect();
        for i in 0..b.num_rows() {
            let cells: Vec<String> = fmts
                .iter()
                .map(|f| {
                    let s = f.value(i).to_string();
                    if s.is_empty() {
                        "(empty)".to_string()
                    } else {
                        s
                    }
                })
                .collect();
            // Multi-line cells (plans) continue on rows of their own, one trimmed line each.
            let mut first = Vec::new();
            let mut extra = Vec::new();
            for c in cells {
                let mut lines = c.lines().map(str::trim_end);
                first.push(lines.next().unwrap_or("").to_string());
                extra.extend(lines.map(|l| vec![l.to_string()]));
            }
            rows.push(first);
            rows.extend(extra);
        }
    }
    rows
}

#[async_trait::async_trait]
impl AsyncDB for Db {
    type Error = DbError;
    type ColumnType = DefaultColumnType;

    async fn run(&mut self, sql: &str) -> Result<DBOutput<DefaultColumnType>, DbError> {
        let df = self
            .ctx
            .sql(sql)
            .await
            .map_err(|e| DbError(e.to_string()))?;
        let ncols = df.schema().fields().len();
        let batches = df.collect().await.map_err(|e| DbError(e.to_string()))?;
        if ncols == 0 {
            return Ok(DBOutput::StatementComplete(0));
        }
        Ok(DBOutput::Rows {
            types: vec![DefaultColumnType::Any; ncols],
            rows: render(&batches),
        })
    }

    async fn shutdown(&mut self) {}
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sql_logic_tests() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("sql-tests");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "slt"))
        // `B2_SLT=partitioned cargo test sql_logic` runs the files whose name has it.
        .filter(|p| {
            std::env::var("B2_SLT").map_or(true, |only| p.to_string_lossy().contains(&only))
        })
        .collect();
    files.sort();
    assert!(!files.is_empty());
    std::env::set_current_dir(env!("CARGO_MANIFEST_DIR")).unwrap();
    let mut failures = Vec::new();
    for f in &files {
        let mut runner = sqllogictest::Runner::new(|| async {
            let cfg = SessionConfig::new()
                .with_target_partitions(2)
                .with_batch_size(4096);
            Ok(Db {
                ctx: SessionContext::new_with_config(cfg).with_blosc2_url_tables(),
            })
        });
        runner.with_column_validator(|_, _| true);
        if let Err(e) = runner.run_file_async(f).await {
            failures.push(format!("{}: {e}", f.display()));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
