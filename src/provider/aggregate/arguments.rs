//! Aggregate arguments that are expressions rather than columns (`avg(length(text))`,
//! `sum(price * qty)`, `max(abs(x))`): where an `AggregateExec`'s projection computes
//! them, the fused node evaluates them itself, on each piece of the rows it folds (after
//! its filter, as the projection saw them), and appends their values as columns after
//! the scan's; its aggregates then read them as they read any column. This module owns
//! that evaluation and the rewriting of an argument from the projection's output to the
//! columns below it.

use arrow::array::RecordBatch;
use arrow::datatypes::{Field, Schema};
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::error::Result;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_plan::projection::ProjectionExec;
use std::cell::Cell;
use std::sync::Arc;

/// `e`, an expression over `projection`'s output, as an expression over its input: each
/// column replaced by the expression that computes it. `e` itself without a projection.
pub fn below_projection(
    e: &Arc<dyn PhysicalExpr>,
    projection: Option<&ProjectionExec>,
) -> Option<Arc<dyn PhysicalExpr>> {
    let Some(p) = projection else {
        return Some(Arc::clone(e));
    };
    replace_columns(e, |c| Some(Arc::clone(&p.expr().get(c.index())?.expr)))
}

/// `e` with each column `c` renumbered and named as `to(c)` says; `None` where a column
/// has no number.
pub fn renumbered(
    e: &Arc<dyn PhysicalExpr>,
    to: impl Fn(usize) -> Option<(usize, String)>,
) -> Option<Arc<dyn PhysicalExpr>> {
    replace_columns(e, |c| {
        let (j, name) = to(c.index())?;
        Some(Arc::new(Column::new(&name, j)))
    })
}

/// `e` with each column replaced by what `by` gives for it; `None` where it gives none.
fn replace_columns(
    e: &Arc<dyn PhysicalExpr>,
    by: impl Fn(&Column) -> Option<Arc<dyn PhysicalExpr>>,
) -> Option<Arc<dyn PhysicalExpr>> {
    let known = Cell::new(true);
    let out = replace_calls(e, |x| {
        let to = by(x.downcast_ref::<Column>()?);
        known.set(known.get() && to.is_some());
        to
    });
    known.get().then_some(out)
}

/// `e` with each node for which `by` gives a replacement replaced, from the leaves up.
pub fn replace_calls(
    e: &Arc<dyn PhysicalExpr>,
    by: impl Fn(&Arc<dyn PhysicalExpr>) -> Option<Arc<dyn PhysicalExpr>>,
) -> Arc<dyn PhysicalExpr> {
    let out = Arc::clone(e).transform(|x| {
        Ok(match by(&x) {
            Some(to) => Transformed::yes(to),
            None => Transformed::no(x),
        })
    });
    // `by` fails nothing, so neither does the walk.
    out.map_or_else(|_| Arc::clone(e), |t| t.data)
}

/// The expressions a fused node evaluates on each piece of its input, over the input's
/// columns; their values follow the input's columns, in order.
#[derive(Debug, Clone, Default)]
pub struct Arguments {
    exprs: Vec<Arc<dyn PhysicalExpr>>,
}

impl Arguments {
    /// These expressions, in the order their columns follow the input's.
    pub fn new(exprs: Vec<Arc<dyn PhysicalExpr>>) -> Self {
        Arguments { exprs }
    }

    /// The expressions.
    pub fn exprs(&self) -> &[Arc<dyn PhysicalExpr>] {
        &self.exprs
    }

    /// `batch` with each expression's values, evaluated on it, as a further column.
    ///
    /// # Errors
    /// Evaluating an expression, as DataFusion's projection would have failed on it.
    pub fn append(&self, batch: RecordBatch) -> Result<RecordBatch> {
        if self.exprs.is_empty() {
            return Ok(batch);
        }
        let rows = batch.num_rows();
        let values = (self.exprs.iter())
            .map(|e| e.evaluate(&batch)?.into_array(rows))
            .collect::<Result<Vec<_>>>()?;
        let (schema, mut columns, _) = batch.into_parts();
        let mut fields: Vec<Arc<Field>> = schema.fields().iter().cloned().collect();
        for (k, v) in values.iter().enumerate() {
            fields.push(Arc::new(Field::new(
                format!("argument {k}"),
                v.data_type().clone(),
                true,
            )));
        }
        columns.extend(values);
        let schema = Arc::new(Schema::new_with_metadata(fields, schema.metadata().clone()));
        let options = arrow::array::RecordBatchOptions::new().with_row_count(Some(rows));
        Ok(RecordBatch::try_new_with_options(
            schema, columns, &options,
        )?)
    }
}
