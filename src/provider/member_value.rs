//! The value of a path column (a hive partition key, or `filename`) in one member's scan of
//! a multi-file table: a constant that DataFusion is not told is constant.
//!
//! Why not a `Literal`: the union of the members' scans then has a column that is constant
//! in each partition but differs between partitions, and DataFusion 55 drops such
//! columns from a partitioned `SortExec`'s keys (`ORDER BY filename, dim_0 LIMIT k` sorts
//! each partition by `dim_0` alone). Its TopK shares one dynamic-filter threshold between
//! all partitions, so a threshold on `dim_0` reached in one file's partition dropped rows
//! of another file that sort before it (found by the SQL differential test). With this
//! expression each partition sorts on the whole key, whose threshold is valid everywhere.

use arrow::datatypes::{DataType, Schema};
use arrow::record_batch::RecordBatch;
use datafusion::common::{Result, ScalarValue};
use datafusion::logical_expr::ColumnarValue;
use datafusion::physical_expr::PhysicalExpr;
use std::fmt;
use std::sync::Arc;

/// A member's value of one path column, evaluated as a scalar for every batch.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MemberValue {
    value: ScalarValue,
}

impl MemberValue {
    /// The path column's value in one member.
    pub fn new(value: ScalarValue) -> Self {
        MemberValue { value }
    }

    /// The path column's value in this member.
    pub fn value(&self) -> &ScalarValue {
        &self.value
    }
}

impl fmt::Display for MemberValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "member({})", self.value)
    }
}

impl PhysicalExpr for MemberValue {
    fn data_type(&self, _input_schema: &Schema) -> Result<DataType> {
        Ok(self.value.data_type())
    }

    fn nullable(&self, _input_schema: &Schema) -> Result<bool> {
        Ok(self.value.is_null())
    }

    fn evaluate(&self, _batch: &RecordBatch) -> Result<ColumnarValue> {
        Ok(ColumnarValue::Scalar(self.value.clone()))
    }

    fn children(&self) -> Vec<&Arc<dyn PhysicalExpr>> {
        vec![]
    }

    fn with_new_children(
        self: Arc<Self>,
        _children: Vec<Arc<dyn PhysicalExpr>>,
    ) -> Result<Arc<dyn PhysicalExpr>> {
        Ok(self)
    }

    fn fmt_sql(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}
