//! How users reach the provider: [`Blosc2SessionExt`] (`register_blosc2`, `read_blosc2`,
//! `enable_blosc2`), [`Blosc2TableFactory`] for `CREATE EXTERNAL TABLE … STORED AS BLOSC2`,
//! and [`Blosc2UrlTableFactory`] for `SELECT * FROM 'path.b2nd'`.
//!
//! Locations with a scheme (`s3://bucket/x.b2nd`, `http://host/x.b2nd`, `memory:///x`)
//! use the object store registered in the session's runtime; plain paths are local files.

use super::aggregate::{Blosc2AggregatePushdown, RULE_NAME};
use super::format::Blosc2FormatFactory;
use super::members::{MemberList, is_glob, is_member_name, list_members};
use super::multi::Blosc2MultiTable;
use super::partition::{infer_keys, inferred_type};
use super::table::Blosc2Table;
use super::to_df;
use crate::array::dtype::DType;
use crate::dataset::{Dataset, OpenOptions};
use crate::io::Location;
use arrow::datatypes::DataType;
use async_trait::async_trait;
use datafusion::catalog::{Session, TableProvider, TableProviderFactory, UrlTableFactory};
use datafusion::dataframe::DataFrame;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::object_store::ObjectStoreUrl;
use datafusion::execution::runtime_env::RuntimeEnv;
use datafusion::logical_expr::CreateExternalTable;
use datafusion::prelude::SessionContext;
use futures::{StreamExt, TryStreamExt};
use std::sync::Arc;

/// Options for opening a container as a table.
///
/// In SQL: `OPTIONS ('dtype' '<f4', 'value_pruning' 'false', 'zone_maps' 'false')`.
#[derive(Debug, Clone)]
pub struct Blosc2Options {
    /// Element type override as a NumPy dtype string (e.g. `<f4`).
    pub dtype: Option<String>,
    /// Skip zones whose min/max statistics prove no row passes the filters (default on).
    pub value_pruning: bool,
    /// Record min/max of each zone a scan decodes whole, for later queries (default on).
    pub zone_maps: bool,
    /// The hive partition columns of a directory table (`year=2024/…`) and their types:
    /// the first of its `key=value` directories, in order. `None` (the default) takes
    /// every key the members' paths share, as dictionary-encoded text; `Some(vec![])`
    /// takes none.
    pub partition_cols: Option<Vec<(String, DataType)>>,
    /// Scan in one partition, rows in stored order, reading ahead on the session's
    /// `target_partitions` threads (big chunks: their blocks in parallel; else several
    /// units at once, handed out in order). A multi-file table goes file after file in
    /// path order, the next file starting while one is handed out. Default off: the scan
    /// is split between partitions, whose rows DataFusion interleaves.
    pub in_order: bool,
}

impl Default for Blosc2Options {
    fn default() -> Self {
        Blosc2Options {
            dtype: None,
            value_pruning: true,
            zone_maps: true,
            partition_cols: None,
            in_order: false,
        }
    }
}

impl Blosc2Options {
    /// Sets the element type override.
    pub fn with_dtype(mut self, dtype: impl Into<String>) -> Self {
        self.dtype = Some(dtype.into());
        self
    }

    /// Turns value pruning on or off.
    pub fn with_value_pruning(mut self, on: bool) -> Self {
        self.value_pruning = on;
        self
    }

    /// Turns zone maps on or off.
    pub fn with_zone_maps(mut self, on: bool) -> Self {
        self.zone_maps = on;
        self
    }

    /// Turns in-order scans ([`Blosc2Options::in_order`]) on or off.
    pub fn with_in_order(mut self, on: bool) -> Self {
        self.in_order = on;
        self
    }

    /// Sets the partition columns of a directory table (see [`Self::partition_cols`]).
    pub fn with_partition_cols(mut self, cols: Vec<(String, DataType)>) -> Self {
        self.partition_cols = Some(cols);
        self
    }

    /// Reads `OPTIONS (…)` of `CREATE EXTERNAL TABLE` (keys may carry a `format.` prefix).
    ///
    /// # Errors
    /// Unknown keys and values that are not `true`/`false`.
    pub fn from_sql_options<'a>(
        options: impl IntoIterator<Item = (&'a String, &'a String)>,
    ) -> Result<Self> {
        let mut o = Blosc2Options::default();
        let flag = |k: &str, v: &str| match v.to_ascii_lowercase().as_str() {
            "true" | "on" | "1" => Ok(true),
            "false" | "off" | "0" => Ok(false),
            _ => Err(DataFusionError::Configuration(format!(
                "option {k:?} takes true or false, not {v:?}"
            ))),
        };
        for (k, v) in options {
            match k.rsplit('.').next().unwrap_or(k) {
                "dtype" => o.dtype = Some(v.clone()),
                "value_pruning" => o.value_pruning = flag(k, v)?,
                "zone_maps" => o.zone_maps = flag(k, v)?,
                "in_order" => o.in_order = flag(k, v)?,
                other => {
                    return Err(DataFusionError::Configuration(format!(
                        "unknown BLOSC2 option {other:?} (known: dtype, value_pruning, \
                         zone_maps, in_order)"
                    )));
                }
            }
        }
        Ok(o)
    }

    fn open_options(&self) -> Result<OpenOptions> {
        let dtype = match &self.dtype {
            Some(s) => Some(
                DType::parse(s)
                    .map_err(|e| DataFusionError::Configuration(format!("dtype {s:?}: {e}")))?,
            ),
            None => None,
        };
        Ok(OpenOptions { dtype })
    }
}

/// Resolves a location string against the runtime's object stores.
///
/// # Errors
/// An unparsable URL or a scheme with no registered store.
pub fn resolve_location(runtime: &RuntimeEnv, s: &str) -> Result<Location> {
    if let Some((scheme, _)) = s.split_once("://")
        && scheme != "file"
    {
        let url =
            url::Url::parse(s).map_err(|e| DataFusionError::Configuration(format!("{s}: {e}")))?;
        let base = ObjectStoreUrl::parse(format!(
            "{}://{}",
            url.scheme(),
            &url[url::Position::BeforeHost..url::Position::AfterPort]
        ))?;
        let store = runtime.object_store(&base)?;
        let path = object_store::path::Path::from_url_path(url.path())
            .map_err(|e| DataFusionError::External(Box::new(e)))?;
        return Ok(Location::new(store, path, s));
    }
    let local = s.strip_prefix("file://").unwrap_or(s);
    Location::local(local).map_err(to_df)
}

/// Splits `store.b2z#/grp/temps` into the store path and the key (`/grp/temps`).
pub fn split_key(location: &str) -> (&str, Option<&str>) {
    match location.rsplit_once('#') {
        Some((path, key)) if key.starts_with('/') && !path.is_empty() => (path, Some(key)),
        _ => (location, None),
    }
}

/// Opens `location` as a [`Blosc2Table`]; `store#/key` opens one leaf (an array or a
/// CTable subtree) of a DictStore, TreeStore or EmbedStore.
///
/// # Errors
/// Container errors as DataFusion errors.
pub async fn open_table(
    runtime: &RuntimeEnv,
    location: &str,
    opts: &Blosc2Options,
) -> Result<Blosc2Table> {
    let (path, key) = split_key(location);
    let loc = resolve_location(runtime, path)?;
    let ds = match key {
        Some(k) => Dataset::open_key(&loc, k, &opts.open_options()?).await,
        None => Dataset::open(&loc, &opts.open_options()?).await,
    }
    .map_err(to_df)?;
    Ok(configured(ds, opts))
}

/// A table over `ds` with the pruning settings of `opts`.
fn configured(ds: Dataset, opts: &Blosc2Options) -> Blosc2Table {
    Blosc2Table::new(ds)
        .with_value_pruning(opts.value_pruning)
        .with_zone_maps(opts.zone_maps)
        .with_in_order(opts.in_order)
}

/// How many members of a multi-file table are opened at once.
const OPEN_CONCURRENCY: usize = 16;

/// One table over the containers of `list` (at least one), which must share a schema;
/// partitioned by `opts.partition_cols`, or by the keys their paths share when that is
/// `None`.
async fn open_members(list: MemberList, opts: &Blosc2Options) -> Result<Arc<dyn TableProvider>> {
    let partitions = match &opts.partition_cols {
        Some(cols) => cols.clone(),
        None => infer_keys(&list.root, &list.rels)?
            .into_iter()
            .map(|k| (k, inferred_type()))
            .collect(),
    };
    // Opened a few at a time: on a remote store each open is a round trip or two.
    let open_options = opts.open_options()?;
    let opening: Vec<_> = list
        .rels
        .iter()
        .cloned()
        .zip(list.locations())
        .map(|(rel, loc)| {
            let (open_options, opts) = (open_options.clone(), opts.clone());
            async move {
                let ds = Dataset::open(&loc, &open_options).await.map_err(to_df)?;
                Ok::<_, DataFusionError>((rel, configured(ds, &opts)))
            }
        })
        .collect();
    let members: Vec<(String, Blosc2Table)> = futures::stream::iter(opening)
        .buffered(OPEN_CONCURRENCY)
        .try_collect()
        .await?;
    // A glob that matches one file is still a multi-file table: its schema (with the
    // file column) does not depend on how many files match today.
    Ok(Arc::new(
        Blosc2MultiTable::try_new(&list.root, members, &partitions)?.with_in_order(opts.in_order),
    ))
}

/// Opens `location` as a table provider: one container, or several with one schema when
/// `location` is a glob (`dir/temps_*.b2nd`, `dir/year=*/*.b2nd`, `dir/**/*.b2nd`; see
/// [`member_locations`](super::members::member_locations)) or
/// a directory that is not itself a container (its `.b2nd`, `.b2frame`, `.b2f`, `.b2z`
/// and `.b2d` entries).
///
/// # Errors
/// Container errors as DataFusion errors; no match; members whose schemas differ.
pub async fn open_provider(
    runtime: &RuntimeEnv,
    location: &str,
    opts: &Blosc2Options,
) -> Result<Arc<dyn TableProvider>> {
    if split_key(location).1.is_some() {
        return Ok(Arc::new(open_table(runtime, location, opts).await?));
    }
    if !is_glob(location) {
        let loc = resolve_location(runtime, location)?;
        match Dataset::open(&loc, &opts.open_options()?).await {
            Ok(_) if opts.partition_cols.as_ref().is_some_and(|c| !c.is_empty()) => {
                return Err(DataFusionError::Plan(format!(
                    "{location} is one container: partition columns need a directory of them"
                )));
            }
            Ok(ds) => return Ok(Arc::new(configured(ds, opts))),
            Err(e) if e.kind() == crate::ErrorKind::NotAContainer => {
                let list = list_members(runtime, location).await?;
                if list.rels.is_empty() {
                    return Err(to_df(e));
                }
                return open_members(list, opts).await;
            }
            Err(e) => return Err(to_df(e)),
        }
    }
    let list = list_members(runtime, location).await?;
    if list.rels.is_empty() {
        return Err(DataFusionError::Plan(format!(
            "{location}: no entry of {} matches",
            list.root
        )));
    }
    open_members(list, opts).await
}

/// `CREATE EXTERNAL TABLE t STORED AS BLOSC2 LOCATION '…' [OPTIONS ('dtype' '<f4')]`.
#[derive(Debug, Default)]
pub struct Blosc2TableFactory;

#[async_trait]
impl TableProviderFactory for Blosc2TableFactory {
    async fn create(
        &self,
        state: &dyn Session,
        cmd: &CreateExternalTable,
    ) -> Result<Arc<dyn TableProvider>> {
        let location = match cmd.locations.as_slice() {
            [one] => one,
            [] => {
                return Err(DataFusionError::Plan(
                    "STORED AS BLOSC2 needs a LOCATION".into(),
                ));
            }
            _ => {
                return Err(DataFusionError::NotImplemented(
                    "several LOCATIONs for one BLOSC2 table".into(),
                ));
            }
        };
        let mut opts = Blosc2Options::from_sql_options(&cmd.options)?;
        let declared = cmd.schema.as_arrow();
        opts.partition_cols = if !cmd.table_partition_cols.is_empty() {
            // `PARTITIONED BY (year INT)` declares a type; `PARTITIONED BY (year)` not.
            Some(
                cmd.table_partition_cols
                    .iter()
                    .map(|p| {
                        let ty = declared.field_with_name(p).ok().map(|f| f.data_type());
                        (p.clone(), ty.cloned().unwrap_or_else(inferred_type))
                    })
                    .collect(),
            )
        } else if state
            .config_options()
            .execution
            .listing_table_factory_infer_partitions
        {
            None
        } else {
            Some(Vec::new())
        };
        let table = open_provider(state.runtime_env(), location, &opts).await?;
        let path_columns: Vec<String> = match table.downcast_ref::<Blosc2MultiTable>() {
            Some(m) => m.path_columns().map(str::to_string).collect(),
            None => Vec::new(),
        };
        check_declared(location, declared, &table.schema(), &path_columns)?;
        Ok(table)
    }
}

/// Checks the columns `CREATE EXTERNAL TABLE t (…)` declares (if any) against those of
/// the container: the same names, each with the container's type (any text type for a
/// text column, any binary type for a binary one). The path columns of a directory
/// table (partitions, `filename`) may be left out; declaring only partition columns
/// (`PARTITIONED BY (year INT)`) gives their types and checks nothing.
fn check_declared(
    location: &str,
    declared: &arrow::datatypes::Schema,
    actual: &arrow::datatypes::Schema,
    path_columns: &[String],
) -> Result<()> {
    // `PARTITIONED BY (year INT)` declares the partition column alone.
    if declared
        .fields()
        .iter()
        .all(|f| path_columns.contains(f.name()))
    {
        return Ok(());
    }
    let family = |t: &DataType| match t {
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => DataType::Utf8,
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView => DataType::Binary,
        other => other.clone(),
    };
    let optional = |name: &str| path_columns.iter().any(|p| p == name);
    let matches = declared.fields().iter().all(|d| {
        actual
            .field_with_name(d.name())
            .is_ok_and(|a| family(a.data_type()) == family(d.data_type()))
    }) && actual
        .fields()
        .iter()
        .all(|a| optional(a.name()) || declared.field_with_name(a.name()).is_ok());
    if matches {
        return Ok(());
    }
    let list = |s: &arrow::datatypes::Schema| {
        s.fields()
            .iter()
            .map(|f| format!("{} {}", f.name(), f.data_type()))
            .collect::<Vec<_>>()
            .join(", ")
    };
    Err(DataFusionError::Plan(format!(
        "{location}: the declared columns ({}) are not the container's ({}); leave the \
         column list out to take the container's",
        list(declared),
        list(actual)
    )))
}

/// Lets `SELECT * FROM 'data/x.b2nd'` open a container by its quoted path, and
/// `'data/*.b2nd'` or a directory with Blosc2 entries (`'data/'`) the multi-file table
/// `CREATE EXTERNAL TABLE` would make; other paths (`'out.parquet'`, a directory of
/// Parquet files) go to the factory it was given to fall back on.
#[derive(Debug)]
pub struct Blosc2UrlTableFactory {
    runtime: Arc<RuntimeEnv>,
    fallback: Arc<dyn UrlTableFactory>,
}

/// The options of quoted-path tables. DataFusion opens such a table again for every
/// statement that names it, so zone maps recorded by one statement would never serve
/// another: they are not recorded.
fn url_table_options() -> Blosc2Options {
    Blosc2Options::default().with_zone_maps(false)
}

#[async_trait]
impl UrlTableFactory for Blosc2UrlTableFactory {
    async fn try_new(&self, url: &str) -> Result<Option<Arc<dyn TableProvider>>> {
        let opts = url_table_options();
        if split_key(url).1.is_some() {
            return open_table(&self.runtime, url, &opts)
                .await
                .map(|t| Some(Arc::new(t) as Arc<dyn TableProvider>));
        }
        if is_glob(url) {
            // Globs of Blosc2 files (or every container below, `dir/**`) only; other
            // globs are left to other factories.
            let last = url.rsplit('/').next().unwrap_or(url);
            if !is_member_name(last) && last != "**" {
                return self.fallback.try_new(url).await;
            }
            return open_provider(&self.runtime, url, &opts).await.map(Some);
        }
        let loc = resolve_location(&self.runtime, url)?;
        // A name with a Blosc2 extension means a container: that it is missing or is not
        // one is the error to show, not DataFusion's "table '….x.b2nd' not found".
        let ours = is_member_name(url.trim_end_matches('/'));
        match Dataset::open(&loc, &OpenOptions::default()).await {
            Ok(ds) => Ok(Some(Arc::new(configured(ds, &opts)))),
            Err(e) if !ours && e.kind() == crate::ErrorKind::NotAContainer => {
                // A directory with Blosc2 entries is one table of them (as in DDL); one
                // without (a directory of Parquet files) is for the fallback.
                match list_members(&self.runtime, url).await {
                    Ok(list) if !list.rels.is_empty() => open_members(list, &opts).await.map(Some),
                    _ => self.fallback.try_new(url).await,
                }
            }
            Err(e) if !ours && e.kind() == crate::ErrorKind::NotFound => {
                self.fallback.try_new(url).await
            }
            Err(e) => Err(to_df(e)),
        }
    }
}

/// Adds [`Blosc2AggregatePushdown`] to the physical optimizer of `ctx`, once.
fn install_aggregate_pushdown(ctx: &SessionContext) {
    let state = ctx.state_ref();
    let mut state = state.write();
    if state
        .physical_optimizers()
        .iter()
        .any(|r| r.name() == RULE_NAME)
    {
        return;
    }
    *state = datafusion::execution::SessionStateBuilder::new_from_existing(state.clone())
        .with_physical_optimizer_rule(Arc::new(Blosc2AggregatePushdown))
        .build();
}

/// Blosc2 methods on [`SessionContext`]. Each also installs [`Blosc2AggregatePushdown`]
/// in the session (ungrouped `sum`/`avg`/`count` folded in the scan).
#[async_trait]
pub trait Blosc2SessionExt {
    /// Registers the container at `location` (or the containers a glob or directory
    /// holds, see [`open_provider`]) as table `name`.
    async fn register_blosc2(&self, name: &str, location: &str, opts: Blosc2Options) -> Result<()>;
    /// Opens the container at `location` as a DataFrame.
    async fn read_blosc2(&self, location: &str, opts: Blosc2Options) -> Result<DataFrame>;
    /// Installs `STORED AS BLOSC2` in this session, and registers
    /// [`Blosc2FormatFactory`] among its file formats.
    fn enable_blosc2(&self);
    /// Returns a context where quoted paths in FROM open containers directly, and other
    /// files DataFusion reads (`'out.parquet'`, CSV, …) as DataFusion's own
    /// [`SessionContext::enable_url_table`] would.
    fn with_blosc2_url_tables(self) -> SessionContext;
}

#[async_trait]
impl Blosc2SessionExt for SessionContext {
    async fn register_blosc2(&self, name: &str, location: &str, opts: Blosc2Options) -> Result<()> {
        let t = open_provider(&self.runtime_env(), location, &opts).await?;
        install_aggregate_pushdown(self);
        self.register_table(name, t)?;
        Ok(())
    }

    async fn read_blosc2(&self, location: &str, opts: Blosc2Options) -> Result<DataFrame> {
        let t = open_provider(&self.runtime_env(), location, &opts).await?;
        install_aggregate_pushdown(self);
        self.read_table(t)
    }

    fn enable_blosc2(&self) {
        install_aggregate_pushdown(self);
        let state = self.state_ref();
        let mut state = state.write();
        state
            .table_factories_mut()
            .insert("BLOSC2".into(), Arc::new(Blosc2TableFactory));
        // `COPY … STORED AS BLOSC2` then says writing is not supported, rather than
        // that the format is unknown. Replacing an earlier registration cannot fail.
        let _ = state.register_file_format(Arc::new(Blosc2FormatFactory::default()), true);
    }

    fn with_blosc2_url_tables(self) -> SessionContext {
        use datafusion::catalog::DynamicFileCatalog;
        use datafusion::datasource::dynamic_file::DynamicListTableFactory;
        let state = self.state();
        let listing = Arc::new(DynamicListTableFactory::default());
        let list = Arc::new(DynamicFileCatalog::new(
            Arc::clone(state.catalog_list()),
            Arc::new(Blosc2UrlTableFactory {
                runtime: Arc::clone(state.runtime_env()),
                fallback: Arc::clone(&listing) as Arc<dyn UrlTableFactory>,
            }),
        ));
        let ctx: SessionContext =
            datafusion::execution::SessionStateBuilder::new_from_existing(state)
                .with_catalog_list(list)
                .build()
                .into();
        // DataFusion's listing factory reads the session it serves through this handle.
        listing.session_store().with_state(ctx.state_weak_ref());
        ctx.enable_blosc2();
        ctx
    }
}
