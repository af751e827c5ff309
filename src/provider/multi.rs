//! Several containers with one schema as one table: a glob (`data/temps_*.b2nd`) or a
//! directory that is not itself a container (its `.b2nd`, `.b2frame`, `.b2f`, `.b2z` and
//! `.b2d` entries, and those of its hive partition directories, `year=2024/…`). Each
//! member is a [`Blosc2Table`] (its own pushdown, pruning, zone maps and statistics); the
//! scan is the union of the members' scans, in path order. A member's scan drops the
//! chunks its reads keep when it ends (400 members kept 105 MB between queries).
//!
//! Array members keep their own coordinates: `dim_k` restarts at 0 in each file. After
//! the members' columns come the path columns, whose values come from each member's path:
//! the hive partition columns ([`super::partition`]), then [`FILENAME_COLUMN`] (the
//! member's path below the table's root), so rows of different files can be told apart.
//! A filter on path columns alone picks the members to scan while planning (and is exact:
//! a member's rows all pass it or all fail it).

use super::in_order_union::InOrderUnionExec;
use super::member_value::MemberValue;
use super::partition::{inferred_type, inferred_value, partition_values};
use super::table::Blosc2Table;
use crate::arrow_reader::schema::{ATTRS_KEY, FILES_KEY};
use arrow::array::{Array, ArrayRef, BooleanArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use async_trait::async_trait;
use datafusion::catalog::Session;
use datafusion::common::stats::Precision;
use datafusion::common::{ColumnStatistics, DFSchema, ScalarValue, Statistics};
use datafusion::datasource::{TableProvider, TableType};
use datafusion::error::{DataFusionError, Result};
use datafusion::logical_expr::{Expr, TableProviderFilterPushDown};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::empty::EmptyExec;
use datafusion::physical_plan::projection::ProjectionExec;
use datafusion::physical_plan::union::UnionExec;
use std::sync::Arc;

/// The column of a multi-file table that holds each row's member: its path below the
/// table's directory (`temps_2025.b2nd`, or `year=2025/temps.b2nd` in a partition
/// directory). Not added when the members or the partitions have a column of that name.
pub const FILENAME_COLUMN: &str = "filename";

/// The schema field of [`FILENAME_COLUMN`] (never null): dictionary-encoded text, as a
/// partition column without a declared type.
fn filename_field() -> Field {
    Field::new(FILENAME_COLUMN, inferred_type(), false)
}

/// Extensions of the entries a directory or glob contributes.
pub const MEMBER_EXTENSIONS: [&str; 5] = [".b2nd", ".b2frame", ".b2f", ".b2z", ".b2d"];

/// One container of a [`Blosc2MultiTable`].
#[derive(Debug)]
struct Member {
    /// Its path below the table's root (`year=2024/part-0.b2nd`, or a glob's match).
    rel: String,
    table: Blosc2Table,
    /// Its value of each path column (partition columns, then the file column).
    values: Vec<ScalarValue>,
}

/// Member tables with one schema, read as one.
#[derive(Debug)]
pub struct Blosc2MultiTable {
    members: Vec<Member>,
    schema: SchemaRef,
    /// How many of `schema`'s columns are the members' own (the first ones); the rest are
    /// path columns, whose values come from each member's path.
    stored: usize,
    /// Scan the members one after another in one partition ([`Self::with_in_order`]).
    in_order: bool,
}

impl Blosc2MultiTable {
    /// Builds the table from members (at least one) named by their paths below `root`,
    /// which must share column names and types. `partitions` are the hive partition
    /// columns their paths declare (`year=2024/…`, see [`super::partition`]); they follow
    /// the members' columns, then [`FILENAME_COLUMN`] holds `rel` (unless the members or
    /// the partitions have a column of that name).
    ///
    /// # Errors
    /// No members; a member whose columns differ from the first's; a partition column
    /// that is also a member column; a member path without the partition directories.
    pub fn try_new(
        root: &str,
        members: Vec<(String, Blosc2Table)>,
        partitions: &[(String, DataType)],
    ) -> Result<Self> {
        let Some((first_name, first)) = members.first() else {
            return Err(DataFusionError::Plan("no Blosc2 containers matched".into()));
        };
        let base = first.schema();
        for (name, t) in &members[1..] {
            let s = t.schema();
            let same = s.fields().len() == base.fields().len()
                && s.fields().iter().zip(base.fields()).all(|(a, b)| {
                    a.name() == b.name()
                        && a.data_type() == b.data_type()
                        && a.is_nullable() == b.is_nullable()
                });
            if !same {
                return Err(DataFusionError::Plan(format!(
                    "{root}/{name} has columns {:?}, but {root}/{first_name} has {:?}: one table \
                     needs one schema",
                    field_list(&s),
                    field_list(&base)
                )));
            }
        }
        if let Some((p, _)) = partitions.iter().find(|(p, _)| base.index_of(p).is_ok()) {
            return Err(DataFusionError::Plan(format!(
                "{root}: partition column {p} is also a column of {root}/{first_name}"
            )));
        }
        // Per-file attributes do not describe the union; the kind does.
        let mut meta = base.metadata().clone();
        meta.remove(ATTRS_KEY);
        meta.insert(FILES_KEY.into(), members.len().to_string());
        let mut fields: Vec<Arc<Field>> = base.fields().iter().cloned().collect();
        let stored = fields.len();
        fields.extend(
            partitions
                .iter()
                .map(|(p, ty)| Arc::new(Field::new(p, ty.clone(), false))),
        );
        let filename = !fields.iter().any(|f| f.name() == FILENAME_COLUMN);
        if filename {
            fields.push(Arc::new(filename_field()));
        }
        let schema = Arc::new(Schema::new_with_metadata(fields, meta.clone()));
        let members = members
            .into_iter()
            .map(|(rel, t)| {
                let mut values = partition_values(root, &rel, partitions)?;
                if filename {
                    values.push(inferred_value(&rel));
                }
                Ok(Member {
                    rel,
                    table: t
                        .with_schema_metadata(meta.clone())
                        .with_kept_chunks_released(),
                    values,
                })
            })
            .collect::<Result<_>>()?;
        Ok(Blosc2MultiTable {
            members,
            schema,
            stored,
            in_order: false,
        })
    }

    /// Scans in one partition, the members one after another in path order and each
    /// in its stored order, the next ones starting while one is handed out: with
    /// `in_order` members ([`Blosc2Table::with_in_order`], which read ahead themselves)
    /// the rows come as stored, file after file ([`super::Blosc2Options::in_order`]).
    pub fn with_in_order(mut self, on: bool) -> Self {
        self.in_order = on;
        self
    }

    /// True when `name` is a path column (a partition column or [`FILENAME_COLUMN`]).
    fn is_path_column(&self, name: &str) -> bool {
        self.path_columns().any(|p| p == name)
    }

    /// True when `e` names a path column.
    fn names_path_column(&self, e: &Expr) -> bool {
        e.column_refs().iter().any(|c| self.is_path_column(&c.name))
    }

    /// True when `e` names path columns and no other column: the scan evaluates it
    /// exactly, per member ([`Self::members_passing`]).
    fn picks_members(&self, e: &Expr) -> bool {
        let refs = e.column_refs();
        !refs.is_empty() && refs.iter().all(|c| self.is_path_column(&c.name))
    }

    /// The filters the members see: those that name no path column.
    fn member_filters<'a>(&self, filters: impl IntoIterator<Item = &'a Expr>) -> Vec<&'a Expr> {
        filters
            .into_iter()
            .filter(|f| !self.names_path_column(f))
            .collect()
    }

    /// Which members pass `filters` (each naming only path columns): each is evaluated on
    /// a one-row batch of the member's path values; null counts as false.
    fn members_passing(&self, state: &dyn Session, filters: &[&Expr]) -> Result<Vec<bool>> {
        let mut keep = vec![true; self.members.len()];
        if filters.is_empty() {
            return Ok(keep);
        }
        let schema = Arc::new(Schema::new(self.schema.fields()[self.stored..].to_vec()));
        let df_schema = DFSchema::try_from(schema.as_ref().clone())?;
        let exprs = filters
            .iter()
            .map(|f| state.create_physical_expr((*f).clone(), &df_schema))
            .collect::<Result<Vec<_>>>()?;
        for (m, k) in self.members.iter().zip(&mut keep) {
            let cols = m
                .values
                .iter()
                .map(|v| v.to_array())
                .collect::<Result<Vec<ArrayRef>>>()?;
            let batch = RecordBatch::try_new(Arc::clone(&schema), cols)?;
            for e in &exprs {
                let v = e.evaluate(&batch)?.into_array(1)?;
                let b = v.as_any().downcast_ref::<BooleanArray>();
                if !b.is_some_and(|b| b.is_valid(0) && b.value(0)) {
                    *k = false;
                }
            }
        }
        Ok(keep)
    }

    /// `plan` (a member's scan of the member columns of `wanted`, in order) with the path
    /// columns put back where `wanted` has them, holding the member's values.
    fn add_path_columns(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        wanted: &[usize],
        member: &Member,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let mut pos = 0;
        let exprs: Vec<(Arc<dyn PhysicalExpr>, String)> = wanted
            .iter()
            .map(|&i| {
                let field_name = self.schema.field(i).name().clone();
                if i >= self.stored {
                    let value = member.values[i - self.stored].clone();
                    // Not a `Literal`: see `member_value`.
                    (Arc::new(MemberValue::new(value)) as _, field_name)
                } else {
                    pos += 1;
                    (Arc::new(Column::new(&field_name, pos - 1)) as _, field_name)
                }
            })
            .collect();
        Ok(Arc::new(ProjectionExec::try_new(exprs, plan)?))
    }

    /// The names of the path columns: the partition columns, then [`FILENAME_COLUMN`]
    /// (unless a member or partition column has that name).
    pub fn path_columns(&self) -> impl Iterator<Item = &str> {
        self.schema.fields()[self.stored..]
            .iter()
            .map(|f| f.name().as_str())
    }

    /// The members' paths below the table's root and their tables, in scan order.
    pub fn members(&self) -> impl Iterator<Item = (&str, &Blosc2Table)> {
        self.members.iter().map(|m| (m.rel.as_str(), &m.table))
    }
}

fn field_list(s: &Schema) -> Vec<String> {
    s.fields()
        .iter()
        .map(|f| format!("{} {}", f.name(), f.data_type()))
        .collect()
}

#[async_trait]
impl TableProvider for Blosc2MultiTable {
    fn schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    fn supports_filters_pushdown(
        &self,
        filters: &[&Expr],
    ) -> Result<Vec<TableProviderFilterPushDown>> {
        // A filter on path columns alone picks whole members: exact. One naming them with
        // other columns is DataFusion's alone. The others get the weakest answer any
        // member gives.
        use TableProviderFilterPushDown::*;
        let rest = self.member_filters(filters.iter().copied());
        let mut weakest = vec![Exact; rest.len()];
        for m in &self.members {
            for (o, p) in weakest
                .iter_mut()
                .zip(m.table.supports_filters_pushdown(&rest)?)
            {
                *o = match (&*o, p) {
                    (Unsupported, _) | (_, Unsupported) => Unsupported,
                    (Inexact, _) | (_, Inexact) => Inexact,
                    _ => Exact,
                };
            }
        }
        let mut weakest = weakest.into_iter();
        Ok(filters
            .iter()
            .map(|f| {
                if self.picks_members(f) {
                    Exact
                } else if self.names_path_column(f) {
                    Unsupported
                } else {
                    weakest.next().unwrap_or(Unsupported)
                }
            })
            .collect())
    }

    fn statistics(&self) -> Option<Statistics> {
        let stats: Vec<Statistics> = self
            .members
            .iter()
            .map(|m| m.table.statistics())
            .collect::<Option<_>>()?;
        let mut merged =
            Statistics::try_merge_iter(&stats, &self.members[0].table.schema()).ok()?;
        // Members without rows hold no value of their path columns.
        let holding: Vec<&Member> = self
            .members
            .iter()
            .zip(&stats)
            .filter(|(_, s)| s.num_rows != Precision::Exact(0))
            .map(|(m, _)| m)
            .collect();
        let exact = stats.iter().all(|s| s.num_rows.is_exact() == Some(true));
        for i in self.stored..self.schema.fields().len() {
            let values = holding.iter().map(|m| &m.values[i - self.stored]);
            merged
                .column_statistics
                .push(path_column_statistics(values, exact));
        }
        Some(merged)
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        // Filters on path columns alone pick members; the members get the filters that
        // name none.
        let picking: Vec<&Expr> = filters.iter().filter(|f| self.picks_members(f)).collect();
        let rest: Vec<Expr> = self.member_filters(filters).into_iter().cloned().collect();
        let keep = self.members_passing(state, &picking)?;
        let wanted: Vec<usize> = match projection {
            Some(p) => p.clone(),
            None => (0..self.schema.fields().len()).collect(),
        };
        // What the members produce: the requested member columns, in order.
        let member_proj: Vec<usize> = wanted
            .iter()
            .copied()
            .filter(|&i| i < self.stored)
            .collect();
        let with_paths = member_proj.len() < wanted.len();
        let mut plans = Vec::with_capacity(self.members.len());
        for (m, _) in self.members.iter().zip(&keep).filter(|(_, k)| **k) {
            let plan = m
                .table
                .scan(state, Some(&member_proj), &rest, limit)
                .await?;
            plans.push(if with_paths {
                self.add_path_columns(plan, &wanted, m)?
            } else {
                plan
            });
        }
        let schema = Arc::new(self.schema.project(&wanted)?);
        if plans.is_empty() {
            return Ok(Arc::new(EmptyExec::new(schema)));
        }
        if self.in_order {
            // The member being handed out and the next one.
            return Ok(Arc::new(InOrderUnionExec::new(schema, plans, 2)));
        }
        UnionExec::try_new(plans)
    }
}

/// Statistics of a path column from the values of the members holding rows: no nulls, and
/// its smallest and largest value (exact when which members hold rows is known exactly).
fn path_column_statistics<'a>(
    values: impl Iterator<Item = &'a ScalarValue>,
    exact: bool,
) -> ColumnStatistics {
    let (mut min, mut max): (Option<&ScalarValue>, Option<&ScalarValue>) = (None, None);
    for v in values {
        if min.is_none_or(|m| v.partial_cmp(m) == Some(std::cmp::Ordering::Less)) {
            min = Some(v);
        }
        if max.is_none_or(|m| v.partial_cmp(m) == Some(std::cmp::Ordering::Greater)) {
            max = Some(v);
        }
    }
    let mut s = ColumnStatistics::new_unknown().with_null_count(Precision::Exact(0));
    let known = |v: &ScalarValue| match exact {
        true => Precision::Exact(v.clone()),
        false => Precision::Inexact(v.clone()),
    };
    if let (Some(lo), Some(hi)) = (min, max) {
        s = s.with_min_value(known(lo)).with_max_value(known(hi));
    }
    s
}
