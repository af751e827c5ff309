//! Several containers with one schema as one table: a glob (`data/temps_*.b2nd`) or a
//! directory that is not itself a container (its `.b2nd`, `.b2frame`, `.b2f`, `.b2z` and
//! `.b2d` entries). Each member is a [`Blosc2Table`] (its own pushdown, pruning, zone maps
//! and statistics); the scan is the union of the members' scans, in file-name order.
//!
//! Array members keep their own coordinates: `dim_k` restarts at 0 in each file. The last
//! column, [`FILENAME_COLUMN`], names each row's member (its name in the directory), so
//! rows of different files can be told apart; a filter on it alone picks the members to
//! scan while planning (and is exact: a member's rows all pass it or all fail it).

use super::table::Blosc2Table;
use crate::arrow_reader::schema::{ATTRS_KEY, FILES_KEY};
use arrow::array::{Array, ArrayRef, BooleanArray, DictionaryArray, StringArray, UInt16Array};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef, UInt16Type};
use arrow::record_batch::RecordBatch;
use async_trait::async_trait;
use datafusion::catalog::Session;
use datafusion::common::{ColumnStatistics, DFSchema, ScalarValue, Statistics};
use datafusion::datasource::{TableProvider, TableType};
use datafusion::error::{DataFusionError, Result};
use datafusion::logical_expr::{Expr, TableProviderFilterPushDown};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr::expressions::{Column, Literal};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::empty::EmptyExec;
use datafusion::physical_plan::projection::ProjectionExec;
use datafusion::physical_plan::union::UnionExec;
use std::sync::Arc;

/// The column of a multi-file table that holds each row's member file name (the entry's
/// name in the table's directory, e.g. `temps_2025.b2nd`). Not added when the members
/// already have a column of that name.
pub const FILENAME_COLUMN: &str = "filename";

/// The type of [`FILENAME_COLUMN`]: dictionary-encoded, as DataFusion's own partition
/// columns are.
fn filename_type() -> DataType {
    DataType::Dictionary(Box::new(DataType::UInt16), Box::new(DataType::Utf8))
}

/// The schema field of [`FILENAME_COLUMN`] (never null).
fn filename_field() -> Field {
    Field::new(FILENAME_COLUMN, filename_type(), false)
}

/// Extensions of the entries a directory or glob contributes.
pub const MEMBER_EXTENSIONS: [&str; 5] = [".b2nd", ".b2frame", ".b2f", ".b2z", ".b2d"];

/// True when `name` matches `pattern` (`*` = any run, `?` = one character).
pub fn glob_match(pattern: &str, name: &str) -> bool {
    let (p, n): (Vec<char>, Vec<char>) = (pattern.chars().collect(), name.chars().collect());
    // Classic two-pointer match with backtracking to the last `*`.
    let (mut i, mut j, mut star, mut mark) = (0, 0, None, 0);
    while j < n.len() {
        if i < p.len() && (p[i] == '?' || p[i] == n[j]) {
            i += 1;
            j += 1;
        } else if i < p.len() && p[i] == '*' {
            star = Some(i);
            mark = j;
            i += 1;
        } else if let Some(s) = star {
            i = s + 1;
            mark += 1;
            j = mark;
        } else {
            return false;
        }
    }
    p[i..].iter().all(|&c| c == '*')
}

/// Member tables with one schema, read as one.
#[derive(Debug)]
pub struct Blosc2MultiTable {
    members: Vec<(String, Blosc2Table)>,
    schema: SchemaRef,
    /// Index of [`FILENAME_COLUMN`] in `schema` (the last column), when it was added.
    filename: Option<usize>,
}

impl Blosc2MultiTable {
    /// Builds the table from named members (at least one), which must share column names
    /// and types.
    ///
    /// # Errors
    /// No members, or a member whose columns differ from the first's.
    pub fn try_new(members: Vec<(String, Blosc2Table)>) -> Result<Self> {
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
                    "{name} has columns {:?}, but {first_name} has {:?}: one table needs one schema",
                    field_list(&s),
                    field_list(&base)
                )));
            }
        }
        // Per-file attributes do not describe the union; the kind does.
        let mut meta = base.metadata().clone();
        meta.remove(ATTRS_KEY);
        meta.insert(FILES_KEY.into(), members.len().to_string());
        let mut fields: Vec<Arc<Field>> = base.fields().iter().cloned().collect();
        let filename = (base.index_of(FILENAME_COLUMN).is_err()).then(|| {
            fields.push(Arc::new(filename_field()));
            fields.len() - 1
        });
        let schema = Arc::new(Schema::new_with_metadata(fields, meta.clone()));
        let members = members
            .into_iter()
            .map(|(n, t)| (n, t.with_schema_metadata(meta.clone())))
            .collect();
        Ok(Blosc2MultiTable {
            members,
            schema,
            filename,
        })
    }

    /// True when `e` names [`FILENAME_COLUMN`] (and the table has it).
    fn names_filename(&self, e: &Expr) -> bool {
        self.filename.is_some() && e.column_refs().iter().any(|c| c.name == FILENAME_COLUMN)
    }

    /// True when `e` names [`FILENAME_COLUMN`] and no other column: the scan evaluates it
    /// exactly, per member ([`Self::members_passing`]).
    fn picks_members(&self, e: &Expr) -> bool {
        let refs = e.column_refs();
        self.filename.is_some()
            && !refs.is_empty()
            && refs.iter().all(|c| c.name == FILENAME_COLUMN)
    }

    /// The filters the members see: those that do not name [`FILENAME_COLUMN`].
    fn member_filters<'a>(&self, filters: impl IntoIterator<Item = &'a Expr>) -> Vec<&'a Expr> {
        filters
            .into_iter()
            .filter(|f| !self.names_filename(f))
            .collect()
    }

    /// Which members pass `filters` (each naming only [`FILENAME_COLUMN`]): each is
    /// evaluated on a one-row batch holding the member's name; null counts as false.
    fn members_passing(&self, state: &dyn Session, filters: &[&Expr]) -> Result<Vec<bool>> {
        let mut keep = vec![true; self.members.len()];
        if filters.is_empty() {
            return Ok(keep);
        }
        let schema = Arc::new(Schema::new(vec![filename_field()]));
        let df_schema = DFSchema::try_from(schema.as_ref().clone())?;
        let exprs = filters
            .iter()
            .map(|f| state.create_physical_expr((*f).clone(), &df_schema))
            .collect::<Result<Vec<_>>>()?;
        for ((name, _), k) in self.members.iter().zip(&mut keep) {
            let col: ArrayRef = Arc::new(DictionaryArray::<UInt16Type>::new(
                UInt16Array::from(vec![0u16]),
                Arc::new(StringArray::from(vec![member_name(name)])),
            ));
            let batch = RecordBatch::try_new(Arc::clone(&schema), vec![col])?;
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

    /// `plan` (a member's scan of the columns of `wanted` but the file column, in order)
    /// with the file column put back where `wanted` has it, holding `name` on every row.
    fn add_filename(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        wanted: &[usize],
        name: &str,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let value = ScalarValue::Dictionary(
            Box::new(DataType::UInt16),
            Box::new(ScalarValue::Utf8(Some(name.to_string()))),
        );
        let mut pos = 0;
        let exprs: Vec<(Arc<dyn PhysicalExpr>, String)> = wanted
            .iter()
            .map(|&i| {
                let field_name = self.schema.field(i).name().clone();
                if Some(i) == self.filename {
                    (Arc::new(Literal::new(value.clone())) as _, field_name)
                } else {
                    pos += 1;
                    (Arc::new(Column::new(&field_name, pos - 1)) as _, field_name)
                }
            })
            .collect();
        Ok(Arc::new(ProjectionExec::try_new(exprs, plan)?))
    }

    /// The members, in scan order.
    pub fn members(&self) -> &[(String, Blosc2Table)] {
        &self.members
    }
}

/// The value of [`FILENAME_COLUMN`] for the member at `path`: its last path component.
fn member_name(path: &str) -> &str {
    path.trim_end_matches('/')
        .rsplit('/')
        .next()
        .unwrap_or(path)
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
        // A filter on the file column alone picks whole members: exact. One naming it with
        // other columns is DataFusion's alone. The others get the weakest answer any
        // member gives.
        use TableProviderFilterPushDown::*;
        let rest = self.member_filters(filters.iter().copied());
        let mut weakest = vec![Exact; rest.len()];
        for (_, t) in &self.members {
            for (o, m) in weakest.iter_mut().zip(t.supports_filters_pushdown(&rest)?) {
                *o = match (&*o, m) {
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
                } else if self.names_filename(f) {
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
            .map(|(_, t)| t.statistics())
            .collect::<Option<_>>()?;
        let mut merged = Statistics::try_merge_iter(&stats, &self.members[0].1.schema()).ok()?;
        if self.filename.is_some() {
            merged
                .column_statistics
                .push(ColumnStatistics::new_unknown());
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
        // Filters on the file column alone pick members; the members get the filters that
        // do not name it.
        let picking: Vec<&Expr> = filters.iter().filter(|f| self.picks_members(f)).collect();
        let rest: Vec<Expr> = self.member_filters(filters).into_iter().cloned().collect();
        let keep = self.members_passing(state, &picking)?;
        let wanted: Vec<usize> = match projection {
            Some(p) => p.clone(),
            None => (0..self.schema.fields().len()).collect(),
        };
        let with_name = self.filename.is_some_and(|f| wanted.contains(&f));
        // What the members produce: the requested columns but the file column, in order.
        let member_proj: Option<Vec<usize>> = match (projection, self.filename) {
            (Some(p), Some(f)) => Some(p.iter().copied().filter(|&i| i != f).collect()),
            (Some(p), None) => Some(p.clone()),
            (None, _) => None,
        };
        let mut plans = Vec::with_capacity(self.members.len());
        for ((path, t), _) in self.members.iter().zip(&keep).filter(|(_, k)| **k) {
            let plan = t.scan(state, member_proj.as_ref(), &rest, limit).await?;
            plans.push(if with_name {
                self.add_filename(plan, &wanted, member_name(path))?
            } else {
                plan
            });
        }
        if plans.is_empty() {
            return Ok(Arc::new(EmptyExec::new(Arc::new(
                self.schema.project(&wanted)?,
            ))));
        }
        UnionExec::try_new(plans)
    }
}
