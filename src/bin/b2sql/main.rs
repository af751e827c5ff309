//! `b2sql`: SQL over Blosc2 frames, b2nd arrays, CTables and bcolz directories.
//!
//! Commands: `query` (or an interactive prompt), `export` (to Parquet), `schema`,
//! `inspect`, and `decode` (one raw chunk to raw bytes). Errors are printed as one or two
//! lines on stderr with exit code 1 (2 for usage errors).

/// `println!` that ends the process quietly when stdout is closed (`b2sql … | head`)
/// instead of panicking, and with an error for other write failures.
macro_rules! outln {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        if let Err(e) = writeln!(std::io::stdout(), $($t)*) {
            $crate::stdout_failed(e)
        }
    }};
}

/// Exit for a failed write to stdout: quietly (status 0) when the reader went away.
fn stdout_failed(e: std::io::Error) -> ! {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        std::process::exit(0)
    }
    eprintln!("error: writing to stdout: {e}");
    std::process::exit(1)
}

mod output;
mod parquet_out;
mod repl;
mod stores;

use clap::{Parser, Subcommand, ValueEnum};
use datafusion::prelude::{SessionConfig, SessionContext};
use datafusion_blosc2::arrow_reader::schema::{ATTRS_KEY, FILES_KEY};
use datafusion_blosc2::dataset::{Dataset, OpenOptions};
use datafusion_blosc2::provider::{
    Blosc2Options, Blosc2SessionExt, member_locations, open_provider, resolve_location,
};
use parquet_out::ParquetOut;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

/// SQL over compressed Blosc2 and bcolz data.
#[derive(Parser)]
#[command(name = "b2sql", version, long_version = long_version(), about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// `b2sql --version`: the version and the decode kernels this CPU runs (what
/// `DATAFUSION_BLOSC2_SIMD` changes), for reports about speed.
fn long_version() -> &'static str {
    static TEXT: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    TEXT.get_or_init(|| {
        format!(
            "{}\ndecode kernels: {}",
            env!("CARGO_PKG_VERSION"),
            datafusion_blosc2::chunk::simd::active_kernels()
        )
    })
}

#[derive(Subcommand)]
enum Command {
    /// Run SQL (or open a prompt when no SQL is given and stdin is a terminal).
    Query {
        /// Register a table: NAME=PATH (any container kind; 'store.b2z#/key' for one leaf of
        /// a python-blosc2 store; a glob 'dir/*.b2nd' or plain directory for several
        /// same-schema files, its hive partition directories 'year=2024/' included).
        /// Repeatable.
        #[arg(short = 't', long = "table", value_name = "NAME=PATH")]
        tables: Vec<String>,
        /// Output format.
        #[arg(short, long, value_enum, default_value_t = Format::Table)]
        format: Format,
        /// Write the result to FILE instead of stdout.
        #[arg(short, long, value_name = "FILE")]
        output: Option<PathBuf>,
        /// Open the prompt even when stdin is not a terminal.
        #[arg(short, long)]
        interactive: bool,
        /// The SQL to run (several statements separated by ';'). Read from stdin when absent
        /// and stdin is not a terminal.
        sql: Option<String>,
    },
    /// Write the table PATH maps to as Parquet (streaming).
    Export {
        /// Container to export (or a glob / directory of same-schema containers).
        path: String,
        /// Parquet file to write.
        out: PathBuf,
        /// Parquet compression.
        #[arg(long, value_enum, default_value_t = Compression::Zstd)]
        compression: Compression,
        /// Rows per row group.
        #[arg(long, default_value_t = 1_048_576)]
        row_group_size: usize,
        /// Element type override (NumPy dtype string, e.g. '<f4').
        #[arg(long)]
        dtype: Option<String>,
    },
    /// Print the Arrow schema and the user attributes.
    Schema {
        /// Container (or a glob / directory of same-schema containers).
        path: String,
        /// Element type override.
        #[arg(long)]
        dtype: Option<String>,
    },
    /// Describe a container: kind, codec, filters, geometry, sizes, attributes (for a
    /// python-blosc2 DictStore/TreeStore/EmbedStore: every key).
    Inspect {
        /// Container, store, 'store#/key', or a glob / directory of containers (each is
        /// described).
        path: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
        /// Element type override.
        #[arg(long)]
        dtype: Option<String>,
    },
    /// Decode one raw Blosc1/Blosc2 chunk file to its raw bytes.
    Decode {
        /// File holding exactly one chunk.
        chunk: PathBuf,
        /// Where to write the decoded bytes.
        out: PathBuf,
    },
}

/// Output formats of `query`.
#[derive(Clone, Copy, ValueEnum, PartialEq, Eq, Debug)]
pub enum Format {
    /// Aligned text table.
    Table,
    /// CSV with a header row.
    Csv,
    /// A JSON array of objects.
    Json,
    /// One JSON object per line.
    Ndjson,
    /// Parquet (needs --output or a redirected stdout).
    Parquet,
    /// Arrow IPC stream.
    Arrow,
}

#[derive(Clone, Copy, ValueEnum)]
enum Compression {
    Zstd,
    Snappy,
    None,
}

/// Stack of the thread that plans queries. DataFusion's planner, its optimizer and the
/// table's filter analyses recurse once per level of an expression, and a generated
/// `x = 0 OR x = 1 OR …` of thousands of terms is thousands of levels deep: on the
/// default 8 MiB main stack, 5,000 terms overflowed it, which aborts the process. A
/// stack only takes memory as deep as a query reaches.
const PLANNER_STACK_BYTES: usize = 1 << 30;

/// Stack of the runtime's threads, which evaluate those expressions (recursively too).
const WORKER_STACK_BYTES: usize = 256 << 20;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let planner = std::thread::Builder::new()
        .name("b2sql".into())
        .stack_size(PLANNER_STACK_BYTES)
        .spawn(move || run_with_runtime(cli));
    match planner.map(std::thread::JoinHandle::join) {
        Ok(Ok(code)) => code,
        // The panic has been reported by the panic hook.
        Ok(Err(_)) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("error: cannot start a thread: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Runs the command on a new multi-threaded runtime.
fn run_with_runtime(cli: Cli) -> ExitCode {
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_stack_size(WORKER_STACK_BYTES)
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match rt.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        // The reader of stdout went away (`| head`): not an error of ours.
        Err(e) if e.contains("Broken pipe") => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// A user-facing error: one line, plus the first distinct cause.
type CliResult<T = ()> = Result<T, String>;

fn msg(e: impl std::fmt::Display) -> String {
    let s = e.to_string();
    // DataFusion wraps our errors as "External error: …"; users don't need that prefix.
    s.strip_prefix("External error: ").unwrap_or(&s).to_string()
}

fn context() -> SessionContext {
    context_with(SessionConfig::new().with_information_schema(true))
}

fn context_with(config: SessionConfig) -> SessionContext {
    let runtime = datafusion::execution::runtime_env::RuntimeEnvBuilder::new()
        .with_object_store_registry(Arc::new(stores::RemoteStores::default()))
        .build_arc()
        .expect("a runtime of default settings");
    let ctx = SessionContext::new_with_config_rt(config, runtime).with_blosc2_url_tables();
    ctx.enable_blosc2();
    ctx
}

/// Options for a table opened for one use (`schema`, `export`): zone maps would serve no
/// later query.
fn opts(dtype: Option<String>) -> Blosc2Options {
    Blosc2Options {
        dtype,
        zone_maps: false,
        ..Blosc2Options::default()
    }
}

async fn open(ctx: &SessionContext, path: &str, dtype: Option<String>) -> CliResult<Dataset> {
    let od = match dtype {
        Some(s) => Some(
            datafusion_blosc2::array::dtype::DType::parse(&s)
                .map_err(|e| format!("--dtype {s:?}: {e}"))?,
        ),
        None => None,
    };
    let (file, key) = datafusion_blosc2::provider::session::split_key(path);
    let loc = resolve_location(&ctx.runtime_env(), file).map_err(msg)?;
    let o = OpenOptions { dtype: od };
    match key {
        Some(k) => Dataset::open_key(&loc, k, &o).await,
        None => Dataset::open(&loc, &o).await,
    }
    .map_err(msg)
}

/// Streams the table at `path` into a Parquet file, batch by batch (memory stays flat),
/// with a progress line on stderr when stderr is a terminal.
async fn export(
    path: &str,
    out: &std::path::Path,
    compression: Compression,
    row_group_size: usize,
    dtype: Option<String>,
) -> CliResult {
    use datafusion::parquet::basic::{Compression as PqCompression, ZstdLevel};
    use futures::StreamExt;
    // The rows keep the container's order: a single container is scanned in one
    // partition that reads ahead on every core (`in_order`), a multi-file table's members
    // one after another in one partition, each reading ahead; no round-robin repartition
    // after it. The Parquet encoding runs on every core.
    let config =
        SessionConfig::new().set_bool("datafusion.optimizer.enable_round_robin_repartition", false);
    let ctx = context_with(config);
    let table = open_provider(&ctx.runtime_env(), path, &opts(dtype).with_in_order(true))
        .await
        .map_err(msg)?;
    let total = table
        .statistics()
        .and_then(|s| s.num_rows.get_value().copied());
    let df = ctx.read_table(table).map_err(msg)?;
    let codec = match compression {
        Compression::Zstd => PqCompression::ZSTD(ZstdLevel::try_new(3).map_err(msg)?),
        Compression::Snappy => PqCompression::SNAPPY,
        Compression::None => PqCompression::UNCOMPRESSED,
    };
    let props = datafusion::parquet::file::properties::WriterProperties::builder()
        .set_compression(codec)
        .set_max_row_group_row_count(Some(row_group_size.max(1)))
        .build();
    let mut stream = df.execute_stream().await.map_err(msg)?;
    let file = std::fs::File::create(out).map_err(|e| format!("{}: {e}", out.display()))?;
    let file = std::io::BufWriter::with_capacity(1 << 20, file);
    let mut writer = ParquetOut::try_new(file, stream.schema(), props).map_err(msg)?;
    let progress = std::io::stderr().is_terminal();
    let mut rows = 0usize;
    let mut last = std::time::Instant::now();
    while let Some(batch) = stream.next().await {
        let batch = batch.map_err(msg)?;
        rows += batch.num_rows();
        writer.write(&batch).map_err(msg)?;
        if progress && last.elapsed() > std::time::Duration::from_millis(200) {
            last = std::time::Instant::now();
            eprint!("\r{}", progress_bar(rows, total));
        }
    }
    writer.close().map_err(msg)?;
    if progress {
        eprintln!("\r{}", progress_bar(rows, total));
    }
    eprintln!("wrote {rows} rows to {}", out.display());
    Ok(())
}

/// `[#####.....]  52%  1200000/2300000 rows` (or a row count when the total is unknown).
fn progress_bar(rows: usize, total: Option<usize>) -> String {
    match total {
        Some(t) if t > 0 => {
            let pct = (rows * 100 / t).min(100);
            let filled = pct / 5;
            format!(
                "[{}{}] {pct:>3}%  {rows}/{t} rows",
                "#".repeat(filled),
                ".".repeat(20 - filled)
            )
        }
        _ => format!("{rows} rows"),
    }
}

async fn run(cli: Cli) -> CliResult {
    match cli.command {
        Command::Decode { chunk, out } => {
            let buf = std::fs::read(&chunk).map_err(|e| format!("{}: {e}", chunk.display()))?;
            let bytes = datafusion_blosc2::chunk::decode_chunk(&buf)
                .map_err(|e| format!("{}: {e}", chunk.display()))?;
            std::fs::write(&out, bytes).map_err(|e| format!("{}: {e}", out.display()))
        }
        Command::Inspect { path, json, dtype } => {
            let ctx = context();
            let d = match open(&ctx, &path, dtype).await {
                Ok(ds) => {
                    ds.open_all_columns().await.map_err(msg)?;
                    datafusion_blosc2::describe::describe(&ds)
                }
                // A glob or a directory of containers: describe each. A DictStore /
                // TreeStore / EmbedStore: describe its leaves.
                Err(e) => match member_locations(&ctx.runtime_env(), &path).await {
                    Ok(locations) if !locations.is_empty() => {
                        let members: Vec<_> = locations
                            .into_iter()
                            .map(|l| (l.display().to_string(), l))
                            .collect();
                        datafusion_blosc2::describe::describe_files(&path, &members).await
                    }
                    _ => {
                        let loc = resolve_location(&ctx.runtime_env(), &path).map_err(msg)?;
                        datafusion_blosc2::describe::describe_store(&loc)
                            .await
                            .map_err(|_| e)?
                    }
                },
            };
            if json {
                outln!("{}", serde_json::to_string_pretty(&d).map_err(msg)?);
            } else {
                output::print_description(&d, 0);
            }
            Ok(())
        }
        Command::Schema { path, dtype } => {
            let ctx = context();
            let table = open_provider(&ctx.runtime_env(), &path, &opts(dtype))
                .await
                .map_err(msg)?;
            let schema = table.schema();
            for f in schema.fields() {
                outln!(
                    "{}: {}{}",
                    f.name(),
                    f.data_type(),
                    if f.is_nullable() { "" } else { " not null" }
                );
            }
            let meta = schema.metadata();
            if let Some(n) = meta.get(FILES_KEY) {
                outln!("files: {n}");
            }
            if let Some(a) = meta.get(ATTRS_KEY) {
                outln!("attributes: {a}");
            }
            if let Some(n) = meta.get(datafusion_blosc2::provider::computed::OMITTED_KEY) {
                for line in n.lines() {
                    outln!("computed column left out: {line}");
                }
            }
            Ok(())
        }
        Command::Export {
            path,
            out,
            compression,
            row_group_size,
            dtype,
        } => export(&path, &out, compression, row_group_size, dtype).await,
        Command::Query {
            tables,
            format,
            output,
            interactive,
            sql,
        } => {
            let ctx = context();
            // `None`: the interactive prompt.
            let statements = match sql {
                Some(s) => Some(repl::split_statements(&s)),
                None if interactive || std::io::stdin().is_terminal() => None,
                None => {
                    let mut s = String::new();
                    std::io::Read::read_to_string(&mut std::io::stdin(), &mut s).map_err(msg)?;
                    Some(repl::split_statements(&s))
                }
            };
            // Zone maps serve the statements after the one that records them: a single
            // statement would only pay for recording them.
            let zone_maps = statements.as_ref().is_none_or(|s| s.len() > 1);
            for t in &tables {
                let (name, path) = t
                    .split_once('=')
                    .ok_or_else(|| format!("-t {t:?}: expected NAME=PATH"))?;
                let opts = Blosc2Options::default().with_zone_maps(zone_maps);
                ctx.register_blosc2(name, path, opts).await.map_err(msg)?;
            }
            let Some(statements) = statements else {
                return repl::run(&ctx, format).await;
            };
            let mut out = output::Sink::open(output.as_deref(), format)?;
            for stmt in statements {
                output::run_sql(&ctx, &stmt, &mut out).await?;
            }
            out.finish()
        }
    }
}
