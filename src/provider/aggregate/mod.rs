//! Aggregates fused into the scan: a `sum`, `avg`, `count`, `min` or `max` (`extremes.rs`;
//! ungrouped over a text column's stored records or items, `text_extremes.rs`) straight
//! over a [`Blosc2Exec`], ungrouped or grouped by one array coordinate (`GROUP BY dim_k`, in
//! dense states over the coordinate's exact range: `grouped.rs`), is folded as the scan's
//! batches arrive, without the `CAST` copies and per-batch work of DataFusion's partial
//! `AggregateExec` (which cost about 80 % of the LZ4 decode of a `Float32` column on a
//! full-column `sum`, and DataFusion's hashing of the keys when grouped). Grouped by a
//! CTable dictionary column (`GROUP BY category`), the rows are grouped by their codes in
//! dense states the same way (`keys.rs`), not by DataFusion's hashing of the
//! dictionary-encoded text (which took about 95 % of such a query over 2,000 values).
//! Grouped by a table's text column (`U<n>`, `utf8`, `vlstring`), the scan yields the
//! stored records (`Blosc2Exec::with_raw_records`: UTF-32 records, unchecked UTF-8 items)
//! and the node numbers them in a hash table of its own (`records.rs`), converting or
//! checking each distinct one once, where DataFusion's plan converted or checked every
//! value, built a string array and then hashed the strings. Grouped by an integer column
//! (not a coordinate with exact bounds), its values are numbered as they come
//! (`ints.rs`); so are the values of an integer or temporal expression over the scan's
//! columns (`GROUP BY date_trunc('day', t)`). Arguments that are expressions
//! (`avg(length(text))`, `sum(price * qty)`) are evaluated by the node on the rows it
//! folds (`arguments.rs`), as DataFusion's projection below its aggregation did. Grouped
//! by the path columns of a partitioned directory (`GROUP BY station` over `station=…/`
//! members), each
//! member's node folds its rows ungrouped and outputs them under the member's constant
//! keys ([`Blosc2AggregateExec::with_constant_keys`]), beside one of the keys above if
//! grouped by one too.
//!
//! [`Blosc2AggregatePushdown`] is a physical optimizer rule. It replaces
//! `AggregateExec(Partial)` (optionally over a `ProjectionExec` of columns and expressions, then
//! a `FilterExec`, whose predicate the fused node evaluates on each batch) over a
//! `Blosc2Exec` (optionally in DataFusion's `CooperativeExec`; in a multi-file table,
//! optionally under the member's projection of its path columns) with a
//! [`Blosc2AggregateExec`] that yields the same partial state, one row per partition, so
//! DataFusion's final aggregation above it is unchanged. A one-partition scan under
//! `AggregateExec(Single)` gets the aggregates' values the same way; a multi-file table (a
//! union of scans) gets one fused node per member. The scan under a fused node yields
//! whole scan units instead of `batch_size` slices, which the node folds in cache-sized
//! pieces. Ungrouped `min`/`max` alone keep DataFusion's plan once earlier scans mapped
//! zones of their columns in the scan (its dynamic filter then skips units on them).
//! Anything the rule does not recognise exactly (grouping by anything but path columns
//! and at most one coordinate, dictionary column, integer or temporal column or
//! expression, or text column, the text column one no aggregate, argument or filter
//! reads; `min`/`max` of text other than ungrouped over a column no other aggregate,
//! argument or filter reads; `DISTINCT`, `FILTER`, other aggregate functions, decimals,
//! arguments of other types than the aggregate takes, a group limit) keeps DataFusion's
//! plan.

mod arguments;
pub(crate) mod extremes;
mod fold;
mod grouped;
mod ints;
mod keys;
mod records;
mod text_extremes;
mod text_length;

use super::exec::Blosc2Exec;
use super::member_value::MemberValue;
use super::pushdown::is_text;
use arguments::Arguments;
use arrow::array::{ArrayRef, Float64Array, Int64Array, RecordBatch, UInt64Array};
use arrow::datatypes::{DataType, SchemaRef};
use datafusion::common::ScalarValue;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TransformedResult, TreeNode, TreeNodeRecursion};
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::aggregate::AggregateFunctionExpr;
use datafusion::physical_expr::expressions::{CastExpr, Column, Literal};
use datafusion::physical_expr::utils::{collect_columns, conjunction_opt};
use datafusion::physical_expr::{EquivalenceProperties, PhysicalExpr};
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::aggregates::{AggregateExec, AggregateMode};
use datafusion::physical_plan::coop::CooperativeExec;
use datafusion::physical_plan::execution_plan::{
    Boundedness, ChildrenPropertiesMode, EmissionType, ReplaceChildrenOptions,
};
use datafusion::physical_plan::filter::FilterExec;
use datafusion::physical_plan::metrics::{BaselineMetrics, ExecutionPlanMetricsSet, MetricsSet};
use datafusion::physical_plan::projection::ProjectionExec;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::union::UnionExec;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PlanProperties,
};
pub use fold::{AggKind, SumType};
use fold::{AggState, Sum};
use futures::{StreamExt, TryStreamExt};
use grouped::GroupedFold;
use keys::KeyKind;
use std::fmt;
use std::sync::Arc;
use text_extremes::{TextExtreme, TextSource};

/// The physical optimizer rule that fuses `sum`/`avg`/`count`/`min`/`max` into Blosc2 scans
/// (see the module docs). [`crate::provider::Blosc2SessionExt`] installs it.
#[derive(Debug, Default)]
pub struct Blosc2AggregatePushdown;

/// The name the rule goes by in a session.
pub const RULE_NAME: &str = "blosc2_aggregate_pushdown";

impl PhysicalOptimizerRule for Blosc2AggregatePushdown {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        _config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        plan.transform_down(|p| {
            Ok(match fuse(&p) {
                Some(f) => Transformed::yes(f),
                None => Transformed::no(p),
            })
        })
        .data()
    }

    fn name(&self) -> &str {
        RULE_NAME
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// One aggregate the fused node computes.
#[derive(Debug, Clone)]
pub struct FusedAggregate {
    /// What it computes.
    pub kind: AggKind,
    /// The scan column it reads; `None` counts rows (`count(*)`).
    pub column: Option<usize>,
    /// The accumulator type of `sum` and `avg` (`count`, `min` and `max` use none).
    pub sum_type: Option<SumType>,
    /// The column's type, for `min` and `max` (their result's type).
    pub value_type: Option<DataType>,
    /// For `min` and `max` of a text column: where they read its values
    /// (`text_extremes.rs`). Set for each member scan.
    pub text: Option<TextSource>,
    /// An argument that is no column but an expression over them, which the node
    /// evaluates (`arguments.rs`): over the columns below the aggregation's projection
    /// while the rule plans, then over its member scan's, where `column` is set to the
    /// column its values are appended as.
    pub argument: Option<Arc<dyn PhysicalExpr>>,
    /// DataFusion's name of the aggregate, for display.
    pub name: String,
}

/// `plan` with its partial aggregation fused into the scan below it, if it has that shape.
fn fuse(plan: &Arc<dyn ExecutionPlan>) -> Option<Arc<dyn ExecutionPlan>> {
    let agg = plan.downcast_ref::<AggregateExec>()?;
    let partitions = agg.input().properties().partitioning.partition_count();
    let output = match agg.mode() {
        AggregateMode::Partial => Output::PartialState,
        // Small scans plan one partition and a one-step aggregation.
        AggregateMode::Single if partitions == 1 => Output::Final,
        _ => return None,
    };
    if agg.filter_expr().iter().any(Option::is_some) || agg.limit_options().is_some() {
        return None;
    }
    let (below, projection) = match agg.input().downcast_ref::<ProjectionExec>() {
        Some(p) => (p.input(), Some(p)),
        None => (agg.input(), None),
    };
    // A filter DataFusion kept above the scan (one without a limit of its own) is
    // evaluated by the fused node on each batch, over the scan's columns; the columns
    // below are numbered in its output (`filter_output`), then in the scan's.
    let filter_output = below.schema();
    let (below, filter, kept) = match below.downcast_ref::<FilterExec>() {
        Some(f) if f.fetch().is_none() => (
            f.input(),
            Some(Arc::clone(f.predicate())),
            f.projection().clone(),
        ),
        Some(_) => return None,
        None => (below, None, None),
    };
    let to_scan = |c: usize| kept.as_ref().map_or(Some(c), |k| k.get(c).copied());
    // Columns below the filter, as expressions name them.
    let union_schema = below.schema();
    let below_filter = |c: usize| {
        let j = to_scan(c)?;
        Some((j, union_schema.fields().get(j)?.name().clone()))
    };
    // Grouping: none, one scan column (an array coordinate, a dictionary column or a
    // text column) or integer expression over them, or columns that are constant in each
    // member of a multi-file table (hive partition keys): numbered in the union's columns
    // here, mapped into each member's scan below.
    let group_keys: Vec<Key> = match agg.group_expr() {
        g if g.is_empty() => Vec::new(),
        g if g.is_single() => g
            .expr()
            .iter()
            .map(|(e, _)| {
                let e = arguments::below_projection(e, projection)?;
                match resolve(&e)? {
                    Arg::Column(c, None) => Some(Key::Column(to_scan(c)?)),
                    Arg::Rows => None,
                    Arg::Column(..) | Arg::Expr => {
                        let e = arguments::renumbered(&e, below_filter)?;
                        let t = e.data_type(&union_schema).ok()?;
                        (ints::supported(&t) || is_text(&t)).then_some(Key::Computed(e))
                    }
                }
            })
            .collect::<Option<_>>()?,
        _ => return None,
    };
    // The scans: one, or a multi-file table's union of them (whose partitions are its
    // members' partitions, so one fused node per member yields the same rows).
    let union = below.downcast_ref::<UnionExec>();
    let scans = match union {
        Some(u) if output == Output::PartialState => u.children(),
        Some(_) => return None,
        None => vec![below],
    };
    // Members that filter (DataFusion pushes a filter over a union into each member;
    // one without a limit of its own): each fused node evaluates its member's predicate,
    // after the one above the union if any. Members that add path columns (a projection
    // of scan columns and member values) are read through it.
    let mut members: Vec<Member> = Vec::with_capacity(scans.len());
    for s in scans {
        let (s, member_filter, kept) = match s.downcast_ref::<FilterExec>() {
            Some(f) if f.fetch().is_none() && union.is_some() => (
                f.input(),
                Some(Arc::clone(f.predicate())),
                f.projection().clone(),
            ),
            _ => (s, None, None),
        };
        let (scan, sources) = match s.downcast_ref::<ProjectionExec>() {
            Some(p) if union.is_some() => (p.input(), Some(member_sources(p))),
            _ => (s, None),
        };
        members.push(Member {
            scan,
            filter: member_filter,
            kept,
            sources,
        });
    }
    let mut aggs = agg
        .aggr_expr()
        .iter()
        .map(|a| fused_aggregate(a, projection, &filter_output))
        .collect::<Option<Vec<_>>>()?;
    for a in &mut aggs {
        a.column = match a.column {
            Some(c) => Some(to_scan(c)?),
            None => None,
        };
        // An argument the node evaluates: over the columns below the filter.
        if let Some(e) = &a.argument {
            a.argument = Some(arguments::renumbered(e, below_filter)?);
        }
    }
    // Ungrouped `min`/`max` alone stay with DataFusion once earlier scans mapped zones of
    // their columns in these units: its aggregation pushes a dynamic filter (`value < min
    // so far OR value > max so far`) into the scan, which then skips the units whose zone
    // maps cannot change the answer. (Where every zone of the whole array is mapped, the table's exact
    // statistics answer them without a scan.) Before that, the fused node is faster.
    let extremes_only = aggs
        .iter()
        .all(|a| matches!(a.kind, AggKind::Min | AggKind::Max));
    let mapped = |m: &Member| {
        let columns: Vec<usize> = (aggs.iter())
            .filter_map(|a| match m.source(a.column?)? {
                Source::Scan(j) => Some(j),
                Source::Constant(_) => None,
            })
            .collect();
        has_mapped_zones(m.scan, &columns)
    };
    if group_keys.is_empty() && extremes_only && members.iter().any(mapped) {
        return None;
    }
    let schema = agg.schema();
    let key_types: Vec<DataType> = group_keys
        .iter()
        .map(|k| match k {
            Key::Column(c) => Some(union_schema.field(*c).data_type().clone()),
            Key::Computed(e) => e.data_type(&union_schema).ok(),
        })
        .collect::<Option<_>>()?;
    let types = key_types.iter().cloned().chain(output_types(&aggs, output));
    if !types.eq(schema.fields().iter().map(|f| f.data_type().clone())) {
        return None;
    }
    // Each member's fused node, over its scan's own columns. Its grouping: by a
    // coordinate (bound by its exact range in the scan's statistics), a dictionary
    // column's codes (bound by the dictionary's length), a text column's records (no
    // aggregate or filter reading it: they would see records, not text), or by keys
    // constant in the member. Its scan is rebuilt only once the aggregates are known to
    // fuse (a rebuild copies the scan's unit lists).
    let fused = members
        .iter()
        .map(|m| {
            let scan_column = |c: usize| match m.source(c)? {
                Source::Scan(j) => Some(j),
                Source::Constant(_) => None,
            };
            // Arguments the node evaluates, over the member scan's columns: their values
            // follow the scan's columns.
            let width = m.scan.schema().fields().len();
            let mut evaluated = Vec::new();
            // A computed key's values: the first evaluated column.
            let computed_keys = (group_keys.iter())
                .filter_map(|k| match k {
                    Key::Computed(e) => Some(e),
                    Key::Column(_) => None,
                })
                .map(|e| m.to_scan_expr(e, true));
            for e in computed_keys {
                evaluated.push(e?);
            }
            let member_aggs = aggs
                .iter()
                .map(|a| {
                    let column = match (&a.argument, a.column) {
                        (Some(e), _) => {
                            evaluated.push(m.to_scan_expr(e, true)?);
                            Some(width + evaluated.len() - 1)
                        }
                        (None, Some(c)) => Some(scan_column(c)?),
                        (None, None) => None,
                    };
                    // A text column's `min`/`max`: its stored records or items, or a
                    // dictionary column's codes.
                    let text = match (column, &a.value_type) {
                        (Some(j), Some(t)) if is_text(t) => {
                            let source = match m.scan.schema().field(j).data_type() {
                                DataType::Dictionary(k, _) if **k == DataType::Int32 => {
                                    TextSource::Dictionary
                                }
                                _ => TextSource::Raw(scan_exec(m.scan)?.raw_text_column(j)?),
                            };
                            TextExtreme::new(&source, a.kind == AggKind::Max)?;
                            Some(source)
                        }
                        _ => None,
                    };
                    Some(FusedAggregate {
                        column,
                        text,
                        ..a.clone()
                    })
                })
                .collect::<Option<Vec<_>>>()?;
            let evaluated_len = evaluated.len();
            let predicate = (filter.iter().map(|f| m.to_scan_expr(f, true)))
                .chain(m.filter.iter().map(|f| m.to_scan_expr(f, false)))
                .collect::<Option<Vec<_>>>()?;
            // `length(t)` of text columns nothing else reads, in the arguments, keys and
            // filter: from their records.
            let aggregated: Vec<usize> = member_aggs.iter().filter_map(|a| a.column).collect();
            let mut exprs: Vec<_> = evaluated.into_iter().chain(predicate).collect();
            let raw_lengths =
                text_length::from_records(&mut exprs, &aggregated, &m.scan.schema(), |j| {
                    scan_exec(m.scan)?.raw_text_column(j)
                });
            let predicate = exprs.split_off(evaluated_len);
            let evaluated = exprs;
            // The scan columns expressions read: the filter's and the evaluated arguments'.
            let read_columns: Vec<usize> = (predicate.iter().chain(&evaluated))
                .flat_map(|f| collect_columns(f).into_iter().map(|c| c.index()))
                .collect();
            // At most one key read from the scan (or computed from it); the others
            // constant in the member.
            let mut group = None;
            let mut constants = Vec::new();
            for (at, (key, t)) in group_keys.iter().zip(&key_types).enumerate() {
                let source = match key {
                    Key::Column(c) => m.source(*c)?,
                    Key::Computed(_) if group.is_some() => return None,
                    Key::Computed(e) => {
                        let keys = match is_text(t) {
                            true => KeyKind::converted(format!("the key {e}")),
                            false => KeyKind::Integer,
                        };
                        group = Some(Group {
                            column: width,
                            bound: 0,
                            keys,
                        });
                        continue;
                    }
                };
                match source {
                    Source::Constant(v) => constants.push((at, v.clone())),
                    Source::Scan(_) if group.is_some() => return None,
                    Source::Scan(j) => {
                        let key_read = member_aggs.iter().any(|a| a.column == Some(j))
                            || read_columns.contains(&j);
                        group = Some(group_of(m.scan, j, t, key_read)?);
                    }
                }
            }
            // Columns only counted (not filtered on): read for their nulls alone.
            let key_column = group.as_ref().map(|g| g.column);
            let counted_only: Vec<usize> = (member_aggs.iter().filter_map(|a| a.column))
                .filter(|&c| {
                    c < width
                        && key_column != Some(c)
                        && !read_columns.contains(&c)
                        && (member_aggs.iter())
                            .all(|a| a.column != Some(c) || a.kind == AggKind::Count)
                })
                .collect();
            // Text columns whose `min`/`max` fold over records: ungrouped, and read by
            // nothing else (the records are no text, and a sentinel is not applied).
            let raw_text = |a: &FusedAggregate| matches!(a.text, Some(TextSource::Raw(_)));
            let text_columns: Vec<usize> = (member_aggs.iter())
                .filter(|a| raw_text(a))
                .filter_map(|a| a.column)
                .collect();
            let read_otherwise = |c: &usize| {
                read_columns.contains(c)
                    || (member_aggs.iter()).any(|a| a.column == Some(*c) && !raw_text(a))
            };
            let texts = member_aggs.iter().any(|a| a.text.is_some());
            if (texts && group.is_some()) || text_columns.iter().any(read_otherwise) {
                return None;
            }
            let mut raw: Vec<usize> = group
                .iter()
                .filter(|g| matches!(g.keys, KeyKind::Text(_)))
                .map(|g| g.column)
                .chain(text_columns)
                .chain(raw_lengths)
                .collect();
            raw.sort_unstable();
            raw.dedup();
            let scan = unit_batch_scan(m.scan, &counted_only, &raw)?;
            let node =
                Blosc2AggregateExec::new(scan, member_aggs, group, output, Arc::clone(&schema))
                    .with_constant_keys(constants)
                    .with_arguments(Arguments::new(evaluated));
            let node: Arc<dyn ExecutionPlan> = Arc::new(match conjunction_opt(predicate) {
                Some(f) => node.with_filter(f),
                None => node,
            });
            Some(node)
        })
        .collect::<Option<Vec<_>>>()?;
    match union {
        Some(_) => UnionExec::try_new(fused).ok(),
        None => fused.into_iter().next(),
    }
}

/// A group key of a fused aggregation, over the columns below its filter.
enum Key {
    /// A column.
    Column(usize),
    /// An expression the node evaluates (`arguments.rs`), of a type [`ints::supported`]
    /// takes or text ([`KeyKind::Converted`]).
    Computed(Arc<dyn PhysicalExpr>),
}

/// Where a column of a multi-file table's union comes from in one member.
#[derive(Debug, Clone)]
enum Source {
    /// The member scan's column at this index.
    Scan(usize),
    /// A value constant in the member (a path column's).
    Constant(ScalarValue),
}

/// One member of a fused aggregation's input: its scan, the predicate it filters by, and
/// the sources of the union's columns when it reads them through a projection.
struct Member<'a> {
    scan: &'a Arc<dyn ExecutionPlan>,
    /// Over the columns of the member's projection (the scan's if none).
    filter: Option<Arc<dyn PhysicalExpr>>,
    /// The columns of the projection that the filter keeps, as the union's (`None`: all).
    kept: Option<Arc<[usize]>>,
    /// Per union column, its source (`None`: an expression the node cannot read); `None`
    /// when the union's columns are the scan's.
    sources: Option<Vec<Option<Source>>>,
}

impl Member<'_> {
    /// The source of union column `c` in this member.
    fn source(&self, c: usize) -> Option<Source> {
        let c = match &self.kept {
            Some(k) => *k.get(c)?,
            None => c,
        };
        self.projected_source(c)
    }

    /// The source of column `c` of the member's projection.
    fn projected_source(&self, c: usize) -> Option<Source> {
        match &self.sources {
            None => Some(Source::Scan(c)),
            Some(s) => s.get(c)?.clone(),
        }
    }

    /// `e` over the member scan's columns: its columns renumbered, its member constants
    /// as literals. `e` is over the union's columns if `over_union`, else over the
    /// member's projection (as the member's own filter is).
    fn to_scan_expr(
        &self,
        e: &Arc<dyn PhysicalExpr>,
        over_union: bool,
    ) -> Option<Arc<dyn PhysicalExpr>> {
        if self.sources.is_none() && (self.kept.is_none() || !over_union) {
            return Some(Arc::clone(e));
        }
        let scan_schema = self.scan.schema();
        let mut readable = true;
        let out = Arc::clone(e)
            .transform(|x| {
                let Some(c) = x.downcast_ref::<Column>() else {
                    return Ok(Transformed::no(x));
                };
                let source = match over_union {
                    true => self.source(c.index()),
                    false => self.projected_source(c.index()),
                };
                let to: Arc<dyn PhysicalExpr> = match source {
                    Some(Source::Scan(j)) => Arc::new(Column::new(scan_schema.field(j).name(), j)),
                    Some(Source::Constant(v)) => Arc::new(Literal::new(v)),
                    None => {
                        readable = false;
                        return Ok(Transformed::no(x));
                    }
                };
                Ok(Transformed::yes(to))
            })
            .ok()?
            .data;
        readable.then_some(out)
    }
}

/// The sources of the columns a member's projection yields: scan columns, member values
/// and literals; `None` for any other expression.
fn member_sources(p: &ProjectionExec) -> Vec<Option<Source>> {
    p.expr()
        .iter()
        .map(|e| {
            let e = &e.expr;
            if let Some(c) = e.downcast_ref::<Column>() {
                Some(Source::Scan(c.index()))
            } else if let Some(v) = e.downcast_ref::<MemberValue>() {
                Some(Source::Constant(v.value().clone()))
            } else {
                e.downcast_ref::<Literal>()
                    .map(|l| Source::Constant(l.value().clone()))
            }
        })
        .collect()
}

/// The most groups a fused node keeps (dense states: 24 bytes per group and aggregate).
const MAX_GROUPS: u64 = 1 << 20;

/// The most groups of texts or integers a fused node computing partial states keeps:
/// past them, it outputs the states it has and starts afresh (DataFusion's final
/// aggregation merges the rows of one key). A one-partition node, which outputs final
/// values, keeps all.
const MAX_PARTIAL_GROUPS: usize = 1 << 20;

/// The grouping of a fused node: by scan column `column`, whose keys lie in `0..bound`
/// (coordinates, dictionary codes; texts are numbered as they come).
#[derive(Debug, Clone)]
pub struct Group {
    /// The key column of the scan.
    pub column: usize,
    /// One past the largest key (coordinate or dictionary code; 0 for texts).
    pub bound: usize,
    /// What the key column holds.
    pub keys: KeyKind,
}

/// One past the largest value of scan column `c`, when the scan's statistics bound it
/// exactly to `0..=max` with `max < MAX_GROUPS` (as they do array coordinates).
fn coordinate_bound(scan: &Arc<dyn ExecutionPlan>, c: usize) -> Option<usize> {
    use datafusion::common::ScalarValue;
    use datafusion::common::stats::Precision;
    use datafusion::physical_plan::statistics::{StatisticsArgs, StatisticsContext};
    let stats = StatisticsContext::new()
        .compute(scan.as_ref(), &StatisticsArgs::new())
        .ok()?;
    let col = stats.column_statistics.get(c)?;
    match (&col.min_value, &col.max_value, &col.null_count) {
        (
            Precision::Exact(ScalarValue::Int64(Some(lo))),
            Precision::Exact(ScalarValue::Int64(Some(hi))),
            Precision::Exact(0),
        ) if *lo >= 0 && (*hi as u64) < MAX_GROUPS && hi >= lo => Some(*hi as usize + 1),
        _ => None,
    }
}

/// The grouping of `scan` by its column `c`, of type `t`, if the fused node can group by
/// it: an array coordinate (or an `Int64` column bound as one), a CTable dictionary
/// column of fewer than [`MAX_GROUPS`] values, an integer column, a table's text
/// column as its records where no aggregate or filter reads it (`key_read`), or any
/// text column as its text.
fn group_of(
    scan: &Arc<dyn ExecutionPlan>,
    c: usize,
    t: &DataType,
    key_read: bool,
) -> Option<Group> {
    let exec = || scan_exec(scan);
    let (keys, bound) = match t {
        DataType::Dictionary(k, _) if **k == DataType::Int32 => {
            let n = exec()?.dictionary_len(c)?;
            ((n as u64) < MAX_GROUPS).then_some((KeyKind::DictionaryCodes, n))?
        }
        // A coordinate (or a column bound as one): dense states over its range.
        DataType::Int64 if let Some(bound) = coordinate_bound(scan, c) => {
            (KeyKind::Coordinate, bound)
        }
        t if ints::supported(t) => (KeyKind::Integer, 0),
        // A text column: its records, or its text where it is also read as text or has
        // no records to group.
        t if is_text(t) => match exec().and_then(|e| e.raw_text_column(c)) {
            Some(raw) if !key_read => (KeyKind::Text(raw), 0),
            _ => (
                KeyKind::converted(format!("the key {}", scan.schema().field(c).name())),
                0,
            ),
        },
        _ => return None,
    };
    Some(Group {
        column: c,
        bound,
        keys,
    })
}

/// `a` as a fused aggregate over a scan of `scan_schema` (below `projection`, if any), if
/// it is one: `count`, `sum` or `avg` of a column (or a widening cast of one, as
/// DataFusion coerces `sum`/`avg` arguments), `count(*)`, `min`/`max` of a numeric,
/// temporal or text column (or of a dictionary column of text cast to text), or any of
/// these but `count(*)` and text `min`/`max` over an expression the node evaluates
/// (`argument`, whose type must then be the sum type or one `min`/`max` folds).
fn fused_aggregate(
    a: &AggregateFunctionExpr,
    projection: Option<&ProjectionExec>,
    scan_schema: &SchemaRef,
) -> Option<FusedAggregate> {
    if a.is_distinct() || !a.order_bys().is_empty() {
        return None;
    }
    let kind = match a.fun().name() {
        "count" => AggKind::Count,
        "sum" => AggKind::Sum,
        "avg" => AggKind::Avg,
        "min" => AggKind::Min,
        "max" => AggKind::Max,
        _ => return None,
    };
    let [arg] = a.expressions().try_into().ok()?;
    let expr = arguments::below_projection(&arg, projection)?;
    let fused = |column, sum_type, value_type, argument| FusedAggregate {
        kind,
        column,
        sum_type,
        value_type,
        text: None,
        argument,
        name: a.name().to_string(),
    };
    let extremes = matches!(kind, AggKind::Min | AggKind::Max);
    match (kind, resolve(&expr)?) {
        // A text column's are folded over its records, where each member's scan can
        // yield them (checked per member).
        (_, Arg::Column(c, None))
            if extremes && {
                let t = scan_schema.field(c).data_type();
                extremes::supported(t) || is_text(t)
            } =>
        {
            let t = scan_schema.field(c).data_type().clone();
            return Some(fused(Some(c), None, Some(t), None));
        }
        // A dictionary column of text, cast to text (as DataFusion coerces `min`/`max`
        // of it): folded over the values its codes name.
        (_, Arg::Column(c, Some(cast)))
            if extremes
                && is_text(&cast)
                && matches!(scan_schema.field(c).data_type(),
                    DataType::Dictionary(k, v) if **k == DataType::Int32 && is_text(v)) =>
        {
            return Some(fused(Some(c), None, Some(cast), None));
        }
        (AggKind::Count, Arg::Rows) => return Some(fused(None, None, None, None)),
        (_, Arg::Rows) => return None,
        (AggKind::Count, Arg::Column(c, None)) => return Some(fused(Some(c), None, None, None)),
        (AggKind::Sum | AggKind::Avg, Arg::Column(c, cast)) => {
            // The argument's type must be the sum type: the column itself or a widening
            // cast to it.
            let t = scan_schema.field(c).data_type();
            if let Some(st) = SumType::of(kind, t)
                && cast.as_ref().unwrap_or(t) == &st.data_type()
            {
                return Some(fused(Some(c), Some(st), None, None));
            }
        }
        _ => {}
    }
    // Anything else the node evaluates (a cast that may fail or narrow, a function, an
    // arithmetic expression): its type must be one the fold takes.
    let t = expr.data_type(scan_schema).ok()?;
    match kind {
        AggKind::Count => Some(fused(None, None, None, Some(expr))),
        AggKind::Min | AggKind::Max => {
            extremes::supported(&t).then(|| fused(None, None, Some(t), Some(expr)))
        }
        AggKind::Sum | AggKind::Avg => {
            let st = SumType::of(kind, &t).filter(|st| st.data_type() == t)?;
            Some(fused(None, Some(st), None, Some(expr)))
        }
    }
}

/// Whether `plan` is a `Blosc2Exec` (alone or in a `CooperativeExec`) some of whose
/// units' zones earlier scans mapped for one of its output `columns`
/// ([`Blosc2Exec::has_mapped_zones`]).
fn has_mapped_zones(plan: &Arc<dyn ExecutionPlan>, columns: &[usize]) -> bool {
    scan_exec(plan).is_some_and(|s| s.has_mapped_zones(columns))
}

/// `plan` as a `Blosc2Exec`, alone or in a `CooperativeExec`.
fn scan_exec(plan: &Arc<dyn ExecutionPlan>) -> Option<&Blosc2Exec> {
    let scan = match plan.downcast_ref::<CooperativeExec>() {
        Some(c) => c.input(),
        None => plan,
    };
    scan.downcast_ref::<Blosc2Exec>()
}

/// `plan` if it is a `Blosc2Exec`, alone or in the `CooperativeExec` DataFusion may wrap
/// it in (which stays), rebuilt to yield whole scan units
/// ([`Blosc2Exec::with_unit_batches`]), to read the columns at `counted_only` for
/// their nulls alone ([`Blosc2Exec::with_validity_only`]) and those at `raw` as their
/// stored records ([`Blosc2Exec::with_raw_records`]); `None` for anything else.
fn unit_batch_scan(
    plan: &Arc<dyn ExecutionPlan>,
    counted_only: &[usize],
    raw: &[usize],
) -> Option<Arc<dyn ExecutionPlan>> {
    let unit_batches = |p: &Arc<dyn ExecutionPlan>| -> Option<Arc<dyn ExecutionPlan>> {
        let mut scan = p
            .downcast_ref::<Blosc2Exec>()?
            .with_unit_batches()
            .with_validity_only(counted_only);
        if !raw.is_empty() {
            scan = scan.with_raw_records(raw);
        }
        Some(Arc::new(scan))
    };
    match plan.downcast_ref::<CooperativeExec>() {
        Some(c) => Arc::clone(plan)
            .replace_children(
                vec![unit_batches(c.input())?],
                ReplaceChildrenOptions::new(ChildrenPropertiesMode::Keep),
            )
            .ok(),
        None => unit_batches(plan),
    }
}

/// What an aggregate's argument reads.
enum Arg {
    /// Every row (a non-null literal, as `count(*)` plans).
    Rows,
    /// A scan column, optionally cast to a type.
    Column(usize, Option<DataType>),
    /// Any other expression, which the node evaluates (`arguments.rs`).
    Expr,
}

/// Resolves an aggregate argument or group key, over the input of the projection below
/// the aggregation ([`arguments::below_projection`]), to what it reads: a column, a
/// column under one cast, a non-null literal, or an expression the node evaluates.
fn resolve(e: &Arc<dyn PhysicalExpr>) -> Option<Arg> {
    if let Some(c) = e.downcast_ref::<Column>() {
        return Some(Arg::Column(c.index(), None));
    }
    if let Some(cast) = e.downcast_ref::<CastExpr>()
        && let Some(c) = cast.expr().downcast_ref::<Column>()
    {
        return Some(Arg::Column(c.index(), Some(cast.cast_type().clone())));
    }
    match e.downcast_ref::<Literal>() {
        Some(l) if !l.value().is_null() => Some(Arg::Rows),
        Some(_) => None,
        None => Some(Arg::Expr),
    }
}

/// What the fused node yields, as the `AggregateExec` it replaces did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    /// DataFusion's partial state (mode `Partial`), for its final aggregation above.
    PartialState,
    /// The aggregates' values (mode `Single`, over one partition).
    Final,
}

/// The column types `aggs` produce in order: `count` → `Int64`; `sum` → its sum type;
/// `avg` → `Float64`, or as partial state a `UInt64` count and a `Float64` sum
/// (DataFusion's state fields); `min`/`max` → the column's type (value and state alike).
fn output_types(aggs: &[FusedAggregate], output: Output) -> impl Iterator<Item = DataType> + '_ {
    aggs.iter().flat_map(move |a| match (a.kind, a.sum_type) {
        (AggKind::Min | AggKind::Max, _) => vec![a.value_type.clone().unwrap_or(DataType::Null)],
        (AggKind::Count, _) => vec![DataType::Int64],
        (AggKind::Sum, Some(t)) => vec![t.data_type()],
        (AggKind::Avg, _) if output == Output::Final => vec![DataType::Float64],
        (AggKind::Avg, _) => vec![DataType::UInt64, DataType::Float64],
        // Not built (a sum always has a sum type); `Null` matches no state field.
        (AggKind::Sum, None) => vec![DataType::Null],
    })
}

/// The aggregation of a scan: reads every batch of its input partition and yields one row,
/// of DataFusion's partial aggregate state or of the aggregates' values ([`Output`]).
#[derive(Debug)]
pub struct Blosc2AggregateExec {
    input: Arc<dyn ExecutionPlan>,
    aggs: Vec<FusedAggregate>,
    group: Option<Group>,
    /// A predicate over the input's batches: only the rows it holds true for are folded.
    filter: Option<Arc<dyn PhysicalExpr>>,
    /// Group keys constant over the whole input (a member's path columns): their places
    /// in the schema and values.
    constant_keys: Vec<(usize, ScalarValue)>,
    /// Arguments evaluated on each piece of the filtered rows, their values appended
    /// after the input's columns.
    arguments: Arguments,
    output: Output,
    schema: SchemaRef,
    /// The most groups of texts or integers kept when computing partial states
    /// ([`MAX_PARTIAL_GROUPS`]).
    flush_groups: usize,
    props: Arc<PlanProperties>,
    metrics: ExecutionPlanMetricsSet,
}

impl Blosc2AggregateExec {
    /// The fused aggregation of `aggs` over `input`, grouped by `group` if given,
    /// producing `output` in `schema` (the output schema of the `AggregateExec` it
    /// replaces: the key first when grouped).
    pub fn new(
        input: Arc<dyn ExecutionPlan>,
        aggs: Vec<FusedAggregate>,
        group: Option<Group>,
        output: Output,
        schema: SchemaRef,
    ) -> Self {
        let partitions = input.properties().partitioning.partition_count();
        let props = PlanProperties::new(
            EquivalenceProperties::new(Arc::clone(&schema)),
            Partitioning::UnknownPartitioning(partitions),
            EmissionType::Final,
            Boundedness::Bounded,
        );
        Self {
            input,
            aggs,
            group,
            filter: None,
            constant_keys: Vec::new(),
            arguments: Arguments::default(),
            output,
            schema,
            flush_groups: MAX_PARTIAL_GROUPS,
            props: Arc::new(props),
            metrics: ExecutionPlanMetricsSet::new(),
        }
    }

    /// This aggregation over only the rows of its input for which `predicate` (over the
    /// input's schema) is true: the filter of a `FilterExec` it replaces as well.
    pub fn with_filter(mut self, predicate: Arc<dyn PhysicalExpr>) -> Self {
        self.filter = Some(predicate);
        self
    }

    /// This aggregation also grouped by `keys`, constant over its whole input (a
    /// member's path columns, as `GROUP BY station` over a directory partitioned by
    /// `station=…`): each `(place, value)` is the value of the schema's column at that
    /// place (one of its group columns) in every output row. The aggregation computes the
    /// other columns as if its schema had no such column; ungrouped otherwise, it yields
    /// one row, or none where no input row passes the filter.
    pub fn with_constant_keys(mut self, keys: Vec<(usize, ScalarValue)>) -> Self {
        self.constant_keys = keys;
        self
    }

    /// This aggregation with `arguments` evaluated on the rows it folds (after its
    /// filter), their values appended after the input's columns, where the aggregates'
    /// `column`s read them.
    pub fn with_arguments(mut self, arguments: Arguments) -> Self {
        self.arguments = arguments;
        self
    }

    /// The schema without the constant keys' columns: what the fold produces.
    fn folded_schema(&self) -> SchemaRef {
        let fields = (self.schema.fields().iter().enumerate())
            .filter(|(i, _)| self.constant_keys.iter().all(|(at, _)| at != i))
            .map(|(_, f)| Arc::clone(f));
        Arc::new(arrow::datatypes::Schema::new_with_metadata(
            fields.collect::<Vec<_>>(),
            self.schema.metadata().clone(),
        ))
    }

    /// The aggregates it computes.
    pub fn aggregates(&self) -> &[FusedAggregate] {
        &self.aggs
    }
}

/// The rows of `batch` for which `predicate` is true (not false or null).
///
/// # Errors
/// Evaluating the predicate; a predicate that is not boolean.
fn filtered(predicate: Option<&Arc<dyn PhysicalExpr>>, batch: RecordBatch) -> Result<RecordBatch> {
    let Some(p) = predicate else {
        return Ok(batch);
    };
    let mask = p.evaluate(&batch)?.into_array(batch.num_rows())?;
    let mask = arrow::array::AsArray::as_boolean_opt(&mask).ok_or_else(|| {
        DataFusionError::Internal(format!(
            "Blosc2AggregateExec: the filter {p} is not boolean"
        ))
    })?;
    Ok(arrow::compute::filter_record_batch(&batch, mask)?)
}

impl DisplayAs for Blosc2AggregateExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        let names: Vec<&str> = self.aggs.iter().map(|a| a.name.as_str()).collect();
        let mode = match self.output {
            Output::PartialState => "Partial",
            Output::Final => "Single",
        };
        write!(f, "Blosc2AggregateExec: mode={mode}, ")?;
        let keys = self.constant_keys.len() + usize::from(self.group.is_some());
        if keys > 0 {
            let keys: Vec<String> = (self.schema.fields().iter().take(keys).enumerate())
                .map(
                    |(i, f)| match self.constant_keys.iter().find(|(at, _)| *at == i) {
                        Some((_, v)) => format!("{}={v}", f.name()),
                        None => f.name().to_string(),
                    },
                )
                .collect();
            write!(f, "gby=[{}], ", keys.join(", "))?;
        }
        write!(f, "aggr=[{}]", names.join(", "))?;
        if let Some(p) = &self.filter {
            write!(f, ", filter={p}")?;
        }
        let args: Vec<String> = (self.arguments.exprs().iter())
            .map(|e| e.to_string())
            .collect();
        if !args.is_empty() {
            write!(f, ", arguments=[{}]", args.join(", "))?;
        }
        Ok(())
    }
}

impl ExecutionPlan for Blosc2AggregateExec {
    fn name(&self) -> &str {
        "Blosc2AggregateExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.props
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.input]
    }

    fn apply_expressions(
        &self,
        f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        for e in self.filter.iter().chain(self.arguments.exprs()) {
            if f(e)? == TreeNodeRecursion::Stop {
                return Ok(TreeNodeRecursion::Stop);
            }
        }
        Ok(TreeNodeRecursion::Continue)
    }

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let [input] = <[_; 1]>::try_from(children)
            .map_err(|_| DataFusionError::Internal("Blosc2AggregateExec has one child".into()))?;
        let node = Self::new(
            input,
            self.aggs.clone(),
            self.group.clone(),
            self.output,
            Arc::clone(&self.schema),
        );
        Ok(Arc::new(Self {
            filter: self.filter.clone(),
            constant_keys: self.constant_keys.clone(),
            arguments: self.arguments.clone(),
            flush_groups: self.flush_groups,
            ..node
        }))
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        let mut input = self.input.execute(partition, context)?;
        let filter = self.filter.clone();
        let arguments = self.arguments.clone();
        let aggs = self.aggs.clone();
        let output = self.output;
        // The fold's columns; the constant keys are added to each batch it yields.
        let schema = self.folded_schema();
        let keyed = !self.constant_keys.is_empty();
        let with_keys = {
            let (keys, schema) = (self.constant_keys.clone(), Arc::clone(&self.schema));
            move |b: Result<RecordBatch>| add_constant_keys(b?, &keys, &schema)
        };
        let baseline = BaselineMetrics::new(&self.metrics, partition);
        if let Some(group) = self.group.clone() {
            // Partial states are output early when the groups of texts or integers grow too
            // many (or, past the probe, keys prove nearly all distinct), and sent on at
            // once: the node holds at most that many groups.
            let flush = (output == Output::PartialState).then_some(self.flush_groups);
            let fold = GroupedFold::new(group, aggs, output, Arc::clone(&schema), flush);
            let start = Some((input, fold, baseline, false));
            let out = futures::stream::try_unfold(start, move |state| {
                let filter = filter.clone();
                let arguments = arguments.clone();
                async move {
                    // `sent`: whether rows were flushed before.
                    let Some((mut input, mut fold, baseline, sent)) = state else {
                        return Ok::<_, DataFusionError>(None);
                    };
                    while let Some(batch) = input.next().await {
                        let _t = baseline.elapsed_compute().timer();
                        let batch = filtered(filter.as_ref(), batch?)?;
                        for piece in cache_sized(&batch) {
                            fold.add(&arguments.append(piece)?)?;
                        }
                        let flushed = fold.take_flushed();
                        if !flushed.is_empty() {
                            flushed
                                .iter()
                                .for_each(|b| baseline.record_output(b.num_rows()));
                            drop(_t); // It borrows `baseline`, which moves on.
                            return Ok(Some((flushed, Some((input, fold, baseline, true)))));
                        }
                    }
                    let batch = fold.finish()?;
                    baseline.record_output(batch.num_rows());
                    baseline.done();
                    // An empty last batch only when it is the whole output.
                    let last = (batch.num_rows() > 0 || !sent).then_some(batch);
                    Ok(Some((last.into_iter().collect(), None)))
                }
            })
            .map_ok(|batches| futures::stream::iter(batches.into_iter().map(Ok)))
            .try_flatten()
            .map(with_keys);
            return Ok(Box::pin(RecordBatchStreamAdapter::new(
                Arc::clone(&self.schema),
                out,
            )));
        }
        let out = futures::stream::once(async move {
            let mut states: Vec<AggState> = aggs
                .iter()
                // `count` keeps no sum; any sum type does.
                .map(|a| AggState::new(a.sum_type.unwrap_or(SumType::I64)))
                .collect();
            // A text column's `min`/`max` (the rule built each once before).
            let mut texts: Vec<Option<TextExtreme>> = (aggs.iter())
                .map(|a| {
                    let max = a.kind == AggKind::Max;
                    a.text.as_ref().and_then(|c| TextExtreme::new(c, max))
                })
                .collect();
            let mut rows = 0;
            while let Some(batch) = input.next().await {
                let _t = baseline.elapsed_compute().timer();
                let batch = filtered(filter.as_ref(), batch?)?;
                rows += batch.num_rows();
                for batch in cache_sized(&batch) {
                    let batch = arguments.append(batch)?;
                    for ((a, s), t) in aggs.iter().zip(&mut states).zip(&mut texts) {
                        if let (Some(t), Some(c)) = (t, a.column) {
                            t.add(batch.column(c))?;
                            continue;
                        }
                        match (a.kind, a.column) {
                            (_, None) => s.add_rows(batch.num_rows()),
                            (AggKind::Count, Some(c)) => s.add_count(batch.column(c).as_ref()),
                            (AggKind::Min | AggKind::Max, Some(c)) => {
                                s.add_extremes(batch.column(c).as_ref())
                            }
                            (_, Some(c)) => s.add_values(batch.column(c)),
                        }
                    }
                }
            }
            // Grouped by constant keys alone: no input row, no group.
            let batch = match !keyed || rows > 0 {
                true => output_batch(&schema, &aggs, output, &states, &texts)?,
                false => RecordBatch::new_empty(Arc::clone(&schema)),
            };
            baseline.record_output(batch.num_rows());
            baseline.done();
            Ok(batch)
        })
        .map(with_keys);
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            Arc::clone(&self.schema),
            out,
        )))
    }

    fn metrics(&self) -> Option<MetricsSet> {
        Some(self.metrics.clone_inner())
    }
}

/// Rows folded at a time: the scan yields whole units (up to millions of rows), and each
/// aggregate reads its column once per piece, so pieces of this size are read again from
/// the cache rather than from memory.
const PIECE_ROWS: usize = 16 * 1024;

/// `batch` in pieces of at most [`PIECE_ROWS`] rows (views of it, no copy).
fn cache_sized(batch: &RecordBatch) -> impl Iterator<Item = RecordBatch> + '_ {
    let n = batch.num_rows();
    (0..n.max(1))
        .step_by(PIECE_ROWS)
        .map(move |at| batch.slice(at, PIECE_ROWS.min(n - at)))
}

/// `batch` with the columns of the constant `keys` (`(place, value)`) inserted at their
/// places in `schema`.
///
/// # Errors
/// A value that cannot be cast to its column's type.
fn add_constant_keys(
    batch: RecordBatch,
    keys: &[(usize, ScalarValue)],
    schema: &SchemaRef,
) -> Result<RecordBatch> {
    if keys.is_empty() {
        return Ok(batch);
    }
    let n = batch.num_rows();
    let mut folded = batch.columns().iter();
    let mut cols = Vec::with_capacity(schema.fields().len());
    for (i, f) in schema.fields().iter().enumerate() {
        cols.push(match keys.iter().find(|(at, _)| *at == i) {
            Some((_, v)) => arrow::compute::cast(&v.to_array_of_size(n)?, f.data_type())?,
            None => Arc::clone(folded.next().ok_or_else(|| {
                DataFusionError::Internal("Blosc2AggregateExec: a column short".into())
            })?),
        });
    }
    let options = arrow::array::RecordBatchOptions::new().with_row_count(Some(n));
    Ok(RecordBatch::try_new_with_options(
        Arc::clone(schema),
        cols,
        &options,
    )?)
}

/// The one output row: per aggregate, the columns [`output_types`] lists, from its
/// state (`texts`: of a text column's `min`/`max`). A sum or average over no non-null
/// value is null, as in DataFusion.
fn output_batch(
    schema: &SchemaRef,
    aggs: &[FusedAggregate],
    output: Output,
    states: &[AggState],
    texts: &[Option<TextExtreme>],
) -> Result<RecordBatch> {
    let mut cols = Vec::new();
    for ((a, s), t) in aggs.iter().zip(states).zip(texts) {
        if let (Some(t), Some(v)) = (t, &a.value_type) {
            cols.push(t.result(v)?);
            continue;
        }
        let sum: ArrayRef = match (s.count > 0, s.sum) {
            (true, Sum::I64(x)) => Arc::new(Int64Array::from(vec![x])),
            (true, Sum::U64(x)) => Arc::new(UInt64Array::from(vec![x])),
            (true, Sum::F64(x)) => Arc::new(Float64Array::from(vec![x])),
            (false, Sum::I64(_)) => Arc::new(Int64Array::from(vec![None])),
            (false, Sum::U64(_)) => Arc::new(UInt64Array::from(vec![None])),
            (false, Sum::F64(_)) => Arc::new(Float64Array::from(vec![None])),
        };
        match a.kind {
            AggKind::Min | AggKind::Max => {
                let e = (s.count > 0).then_some((s.lo, s.hi));
                cols.push(extremes::results(a, std::iter::once(e))?);
            }
            AggKind::Count => cols.push(Arc::new(Int64Array::from(vec![s.count as i64]))),
            AggKind::Sum => cols.push(sum),
            AggKind::Avg if output == Output::Final => {
                let avg = match s.sum {
                    Sum::F64(x) if s.count > 0 => Some(x / s.count as f64),
                    _ => None,
                };
                cols.push(Arc::new(Float64Array::from(vec![avg])));
            }
            AggKind::Avg => {
                cols.push(Arc::new(UInt64Array::from(vec![s.count])));
                cols.push(sum);
            }
        }
    }
    Ok(RecordBatch::try_new(Arc::clone(schema), cols)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arrow_reader::reader::RawText;
    use arrow::array::{AsArray, LargeBinaryArray};
    use arrow::datatypes::{Field, Int64Type, Schema};
    use datafusion::datasource::memory::MemorySourceConfig;
    use std::collections::BTreeMap;

    /// Partial states grouped by UTF-8 items, with a flush limit of 3 groups: the rows
    /// flushed leave the node as separate batches while it still reads its input, and
    /// merged per key they give each key's count.
    #[tokio::test]
    async fn flushed_text_groups_stream_out() {
        let words = ["a", "b", "c", "d", "a", "e", "f", "g", "b", "a", "b", "i"];
        let input_schema = Arc::new(Schema::new(vec![Field::new(
            "w",
            DataType::LargeBinary,
            true,
        )]));
        let batches: Vec<RecordBatch> = words
            .chunks(4)
            .map(|ws| {
                let col = LargeBinaryArray::from_iter_values(ws.iter().map(|w| w.as_bytes()));
                RecordBatch::try_new(Arc::clone(&input_schema), vec![Arc::new(col)]).unwrap()
            })
            .collect();
        let input = MemorySourceConfig::try_new_exec(&[batches], input_schema, None).unwrap();
        let count = FusedAggregate {
            kind: AggKind::Count,
            column: None,
            sum_type: None,
            value_type: None,
            text: None,
            argument: None,
            name: "count(*)".into(),
        };
        let schema = Arc::new(Schema::new(vec![
            Field::new("w", DataType::Utf8, true),
            Field::new("count(*)", DataType::Int64, false),
        ]));
        let group = Group {
            column: 0,
            bound: 0,
            keys: KeyKind::Text(crate::provider::exec::RawTextColumn {
                raw: RawText::Utf8,
                null_text: None,
                what: "test".into(),
            }),
        };
        let mut node = Blosc2AggregateExec::new(
            input,
            vec![count],
            Some(group),
            Output::PartialState,
            schema,
        );
        node.flush_groups = 3;
        let stream = node.execute(0, Arc::new(TaskContext::default())).unwrap();
        let out: Vec<RecordBatch> = stream.try_collect().await.unwrap();
        // The limit counts the group of nulls: groups a-d pass it in the first batch, a
        // and e-g in the second, b, a and i in the third; no group is left.
        assert_eq!(
            out.iter().map(|b| b.num_rows()).collect::<Vec<_>>(),
            [4, 4, 3]
        );
        let mut got: BTreeMap<String, i64> = BTreeMap::new();
        for b in &out {
            for r in 0..b.num_rows() {
                let w = b.column(0).as_string::<i32>().value(r).to_string();
                *got.entry(w).or_default() += b.column(1).as_primitive::<Int64Type>().value(r);
            }
        }
        let mut want: BTreeMap<String, i64> = BTreeMap::new();
        for w in words {
            *want.entry(w.to_string()).or_default() += 1;
        }
        assert_eq!(got, want);
    }
}
