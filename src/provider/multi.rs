//! Several containers with one schema as one table: a glob (`data/temps_*.b2nd`) or a
//! directory that is not itself a container (its `.b2nd`, `.b2frame`, `.b2f`, `.b2z` and
//! `.b2d` entries). Each member is a [`Blosc2Table`] (its own pushdown, pruning, zone maps
//! and statistics); the scan is the union of the members' scans, in file-name order.
//!
//! Array members keep their own coordinates: `dim_k` restarts at 0 in each file.

use super::table::Blosc2Table;
use arrow::datatypes::{Schema, SchemaRef};
use async_trait::async_trait;
use datafusion::catalog::Session;
use datafusion::common::Statistics;
use datafusion::datasource::{TableProvider, TableType};
use datafusion::error::{DataFusionError, Result};
use datafusion::logical_expr::{Expr, TableProviderFilterPushDown};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::union::UnionExec;
use std::sync::Arc;

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
        meta.remove("blosc2.attributes");
        meta.insert("blosc2.files".into(), members.len().to_string());
        let schema = Arc::new(Schema::new_with_metadata(
            base.fields().clone(),
            meta.clone(),
        ));
        let members = members
            .into_iter()
            .map(|(n, t)| (n, t.with_schema_metadata(meta.clone())))
            .collect();
        Ok(Blosc2MultiTable { members, schema })
    }

    /// The members, in scan order.
    pub fn members(&self) -> &[(String, Blosc2Table)] {
        &self.members
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
        // The weakest answer any member gives.
        let mut out = vec![TableProviderFilterPushDown::Exact; filters.len()];
        for (_, t) in &self.members {
            for (o, m) in out.iter_mut().zip(t.supports_filters_pushdown(filters)?) {
                use TableProviderFilterPushDown::*;
                *o = match (&*o, m) {
                    (Unsupported, _) | (_, Unsupported) => Unsupported,
                    (Inexact, _) | (_, Inexact) => Inexact,
                    _ => Exact,
                };
            }
        }
        Ok(out)
    }

    fn statistics(&self) -> Option<Statistics> {
        let stats: Vec<Statistics> = self
            .members
            .iter()
            .map(|(_, t)| t.statistics())
            .collect::<Option<_>>()?;
        Statistics::try_merge_iter(&stats, &self.schema).ok()
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let mut plans = Vec::with_capacity(self.members.len());
        for (_, t) in &self.members {
            plans.push(t.scan(state, projection, filters, limit).await?);
        }
        UnionExec::try_new(plans)
    }
}
