//! The states of a fused aggregation grouped by one key that maps to a small dense range
//! (`keys.rs`: an array coordinate, `GROUP BY dim_k`, or a dictionary column's codes). The
//! states are dense vectors indexed by the group: a row costs an indexed add, and a run
//! of rows in one group (a row of the array, grouped by `dim_0`) one slice sum (or one
//! slice `min`/`max`). Semantics are those of [`super::fold`] and `extremes.rs`.

use super::fold::{AggKind, SumType};
use super::keys::{self, GroupKeys, KeyKind};
use super::{FusedAggregate, Group};
use crate::chunk::simd::reduce::{self, AsF64, AsI64};
use arrow::array::{Array, ArrayRef, AsArray, Float64Array, Int64Array, RecordBatch, UInt64Array};
use arrow::buffer::NullBuffer;
use arrow::datatypes::{
    DataType, Float16Type, Float32Type, Float64Type, Int8Type, Int16Type, Int32Type, Int64Type,
    SchemaRef, UInt8Type, UInt16Type, UInt32Type, UInt64Type,
};
use datafusion::error::{DataFusionError, Result};
use std::sync::Arc;

/// Per-group sums of one aggregate.
#[derive(Debug)]
enum Sums {
    /// `count` keeps none.
    None,
    I64(Vec<i64>),
    U64(Vec<u64>),
    F64(Vec<f64>),
    /// `min` and `max`: the least and greatest order keys (`extremes.rs`).
    Extremes {
        lo: Vec<i64>,
        hi: Vec<i64>,
    },
}

/// Per-group states of all the aggregates of a fused node.
#[derive(Debug)]
pub struct GroupedStates {
    /// Rows per group (a group exists once a row has its key).
    rows: Vec<u64>,
    /// Per aggregate: values counted per group, and sums.
    /// (`None` for `count(*)`, which counts the rows.)
    counts: Vec<Option<Vec<u64>>>,
    sums: Vec<Sums>,
}

impl GroupedStates {
    /// States for keys `0..bound`.
    pub fn new(aggs: &[FusedAggregate], bound: usize) -> Self {
        let mut states = GroupedStates {
            rows: Vec::new(),
            counts: aggs.iter().map(|a| a.column.map(|_| Vec::new())).collect(),
            sums: aggs
                .iter()
                .map(|a| match (a.kind, a.sum_type) {
                    (AggKind::Min | AggKind::Max, _) => Sums::Extremes {
                        lo: Vec::new(),
                        hi: Vec::new(),
                    },
                    (AggKind::Count, _) | (_, None) => Sums::None,
                    (_, Some(SumType::I64)) => Sums::I64(Vec::new()),
                    (_, Some(SumType::U64)) => Sums::U64(Vec::new()),
                    (_, Some(SumType::F64)) => Sums::F64(Vec::new()),
                })
                .collect(),
        };
        states.grow(bound);
        states
    }

    /// The number of groups the states hold.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// Adds states for groups up to `groups`: no row yet, each state at its start (zero
    /// sums, extremes that any value replaces).
    pub fn grow(&mut self, groups: usize) {
        if groups <= self.rows.len() {
            return;
        }
        self.rows.resize(groups, 0);
        for c in self.counts.iter_mut().flatten() {
            c.resize(groups, 0);
        }
        for s in &mut self.sums {
            match s {
                Sums::None => {}
                Sums::I64(v) => v.resize(groups, 0),
                Sums::U64(v) => v.resize(groups, 0),
                Sums::F64(v) => v.resize(groups, 0.0),
                Sums::Extremes { lo, hi } => {
                    lo.resize(groups, i64::MAX);
                    hi.resize(groups, i64::MIN);
                }
            }
        }
    }

    /// Folds `batch` in, the group of row `i` being `keys[i]`.
    ///
    /// # Errors
    /// A key outside the states' bound (the callers map keys into it: array
    /// coordinates, whose bound is the array's shape; dictionary codes).
    pub fn add_batch(
        &mut self,
        batch: &RecordBatch,
        keys: &[i64],
        aggs: &[FusedAggregate],
    ) -> Result<()> {
        // The rows counted and the keys checked in one pass (a key out of range fails the
        // query, so rows counted before it do not matter).
        let mut out_of_range = keys.len() != batch.num_rows();
        let rows = &mut self.rows;
        for_runs(keys, |g, i, j| match rows.get_mut(g) {
            Some(r) => *r += (j - i) as u64,
            None => out_of_range = true,
        });
        if out_of_range {
            return Err(DataFusionError::Internal(format!(
                "grouped Blosc2 aggregate: keys are not {} groups below {}",
                batch.num_rows(),
                self.rows.len()
            )));
        }
        for ((a, counts), sums) in aggs.iter().zip(&mut self.counts).zip(&mut self.sums) {
            // `count(*)`: the rows per group.
            let (Some(c), Some(counts)) = (a.column, counts) else {
                continue;
            };
            let col = batch.column(c);
            let nulls = col.logical_nulls();
            let nulls = nulls.as_ref().filter(|n| n.null_count() > 0);
            match sums {
                Sums::None => match nulls {
                    Some(n) => n
                        .valid_indices()
                        .for_each(|i| counts[keys[i] as usize] += 1),
                    None => for_runs(keys, |g, i, j| counts[g] += (j - i) as u64),
                },
                Sums::F64(s) => add_floats(col, keys, nulls, counts, s),
                Sums::Extremes { lo, hi } => {
                    super::extremes::add_grouped(col.as_ref(), keys, counts, lo, hi)
                }
                Sums::I64(s) => {
                    add_ints(col, keys, nulls, counts, |g, x| s[g] = s[g].wrapping_add(x))
                }
                Sums::U64(s) => add_ints(col, keys, nulls, counts, |g, x| {
                    s[g] = s[g].wrapping_add(x as u64)
                }),
            }
        }
        Ok(())
    }

    /// The output rows, one per group with rows, the key first (`schema`'s order: `key`
    /// builds it from the groups): per aggregate the columns of [`super::output_types`].
    pub fn output(
        &self,
        schema: &SchemaRef,
        aggs: &[FusedAggregate],
        output: super::Output,
        key: impl FnOnce(&[usize]) -> Result<ArrayRef>,
    ) -> Result<RecordBatch> {
        let groups: Vec<usize> = (0..self.rows.len()).filter(|&g| self.rows[g] > 0).collect();
        let mut cols: Vec<ArrayRef> = vec![key(&groups)?];
        for ((a, counts), sums) in aggs.iter().zip(&self.counts).zip(&self.sums) {
            // `count(*)` counts the rows (it keeps no counts of its own).
            let counts = counts.as_deref().unwrap_or(&self.rows);
            let some = |g: usize| counts[g] > 0;
            let count_column = || -> ArrayRef {
                Arc::new(Int64Array::from_iter_values(
                    groups.iter().map(|&g| counts[g] as i64),
                ))
            };
            // Built only for the aggregates that yield a sum.
            let sum = || -> ArrayRef {
                match sums {
                    Sums::I64(s) => Arc::new(Int64Array::from_iter(
                        groups.iter().map(|&g| some(g).then_some(s[g])),
                    )),
                    Sums::U64(s) => Arc::new(UInt64Array::from_iter(
                        groups.iter().map(|&g| some(g).then_some(s[g])),
                    )),
                    Sums::F64(s) => Arc::new(Float64Array::from_iter(
                        groups.iter().map(|&g| some(g).then_some(s[g])),
                    )),
                    Sums::None | Sums::Extremes { .. } => count_column(),
                }
            };
            match (a.kind, sums) {
                (AggKind::Min | AggKind::Max, Sums::Extremes { lo, hi }) => {
                    let e = groups.iter().map(|&g| some(g).then_some((lo[g], hi[g])));
                    cols.push(super::extremes::results(a, e)?);
                }
                (AggKind::Min | AggKind::Max, _) => {
                    return Err(DataFusionError::Internal(
                        "fused min/max without extremes".into(),
                    ));
                }
                (AggKind::Count, _) | (_, Sums::None) => cols.push(count_column()),
                (AggKind::Sum, _) => cols.push(sum()),
                (AggKind::Avg, Sums::F64(s)) if output == super::Output::Final => {
                    cols.push(Arc::new(Float64Array::from_iter(
                        groups
                            .iter()
                            .map(|&g| some(g).then(|| s[g] / counts[g] as f64)),
                    )));
                }
                // A group with no value has a null count, as DataFusion's own partial
                // state does: its final `avg` takes a group with any non-null state as
                // seen, and a count of 0 would give 0 / 0 = NaN instead of NULL.
                (AggKind::Avg, _) => {
                    cols.push(Arc::new(UInt64Array::from_iter(
                        groups.iter().map(|&g| some(g).then_some(counts[g])),
                    )));
                    cols.push(sum());
                }
            }
        }
        Ok(RecordBatch::try_new(Arc::clone(schema), cols)?)
    }
}

/// The grouped aggregation of one partition: its rows' groups ([`GroupKeys`]) and their
/// states, folded piece by piece. With a `flush` limit (partial states only: the final
/// aggregation merges rows of one key), the groups of texts or integers past it are
/// output as they are ([`GroupedFold::take_flushed`]) and counted afresh, so that a
/// column of many distinct values does not hold them all. Integer or text keys that
/// prove nearly all distinct (more than 4 groups in 5 rows after [`PROBE_ROWS`] rows, as
/// DataFusion's partial aggregation probes) are then not looked up at all: each row is
/// output as its own group's state, its text converted or checked with its batch's
/// ([`keys::texts_of`]), not numbered in the table of groups (10 M distinct `U10` SKUs:
/// 12.7 s before either, 2.0 s now).
pub struct GroupedFold {
    group: Group,
    keys: GroupKeys,
    states: GroupedStates,
    aggs: Vec<FusedAggregate>,
    output: super::Output,
    schema: SchemaRef,
    flush: Option<usize>,
    flushed: Vec<RecordBatch>,
    /// Rows folded, until the probe decides.
    rows_seen: usize,
    /// Each row its own group (keys found nearly all distinct).
    row_groups: bool,
}

/// Rows folded before the fold checks how many of their keys are distinct.
pub const PROBE_ROWS: usize = 100_000;

impl GroupedFold {
    /// The fold of `aggs` grouped by `group`, producing `output` in `schema` (the key
    /// first).
    pub fn new(
        group: Group,
        aggs: Vec<FusedAggregate>,
        output: super::Output,
        schema: SchemaRef,
        flush: Option<usize>,
    ) -> Self {
        let keys = GroupKeys::new(group.keys.clone(), group.bound);
        let states = GroupedStates::new(&aggs, keys.groups());
        let flush = flush.filter(|_| {
            matches!(
                group.keys,
                KeyKind::Text(_) | KeyKind::Converted(_) | KeyKind::Integer
            )
        });
        GroupedFold {
            group,
            keys,
            states,
            aggs,
            output,
            schema,
            flush,
            flushed: Vec::new(),
            rows_seen: 0,
            row_groups: false,
        }
    }

    /// Folds `batch` in.
    ///
    /// # Errors
    /// A key column not of the grouping's kind ([`GroupKeys::map`]).
    pub fn add(&mut self, batch: &RecordBatch) -> Result<()> {
        if self.row_groups {
            return self.add_row_groups(batch);
        }
        let col = batch.column(self.group.column);
        self.keys.map(col)?;
        self.states.grow(self.keys.groups());
        self.states
            .add_batch(batch, self.keys.of(col), &self.aggs)?;
        if self.flush.is_some_and(|limit| self.states.len() > limit) {
            self.flush_held()?;
        }
        // A flush limit is set for text and integer keys only (`new`): those probed.
        if self.flush.is_some() && !self.probed() {
            self.rows_seen += batch.num_rows();
            if self.probed() && self.states.len() * 5 > self.rows_seen * 4 {
                self.flush_held()?;
                self.row_groups = true;
            }
        }
        Ok(())
    }

    /// Outputs the states of the groups held ([`GroupedFold::take_flushed`]) and forgets
    /// the groups.
    fn flush_held(&mut self) -> Result<()> {
        let out = self.output_states()?;
        self.flushed.push(out);
        self.keys.reset();
        self.states = GroupedStates::new(&self.aggs, self.keys.groups());
        Ok(())
    }

    fn probed(&self) -> bool {
        self.rows_seen >= PROBE_ROWS
    }

    /// Outputs the rows of `batch` each as its own group's state (rows of a null key in
    /// one group).
    fn add_row_groups(&mut self, batch: &RecordBatch) -> Result<()> {
        let col = match &self.group.keys {
            KeyKind::Text(text) => &keys::texts_of(batch.column(self.group.column), text)?,
            _ => batch.column(self.group.column),
        };
        let nulls = col.logical_nulls();
        let null = |i: usize| nulls.as_ref().is_some_and(|n| n.is_null(i));
        let keys: Vec<i64> = (0..batch.num_rows())
            .map(|i| if null(i) { 0 } else { i as i64 + 1 })
            .collect();
        let mut states = GroupedStates::new(&self.aggs, keys.len() + 1);
        states.add_batch(batch, &keys, &self.aggs)?;
        let key_type = self.schema.field(0).data_type();
        let out = states.output(&self.schema, &self.aggs, self.output, |groups| {
            let rows = arrow::array::UInt32Array::from_iter(
                groups.iter().map(|&g| g.checked_sub(1).map(|r| r as u32)),
            );
            let keys = arrow::compute::take(col.as_ref(), &rows, None)?;
            Ok(arrow::compute::cast(&keys, key_type)?)
        })?;
        self.flushed.push(out);
        Ok(())
    }

    /// The rows output since the last call, as the flush limit passed: the caller sends
    /// them on, so the fold no longer holds them.
    pub fn take_flushed(&mut self) -> Vec<RecordBatch> {
        std::mem::take(&mut self.flushed)
    }

    /// The output rows of the groups held (those flushed are taken by
    /// [`GroupedFold::take_flushed`]).
    ///
    /// # Errors
    /// Building the key column ([`GroupKeys::column`]) or the batch.
    pub fn finish(self) -> Result<RecordBatch> {
        self.output_states()
    }

    fn output_states(&self) -> Result<RecordBatch> {
        let key_type = self.schema.field(0).data_type();
        self.states
            .output(&self.schema, &self.aggs, self.output, |g| {
                self.keys.column(g, key_type)
            })
    }
}

/// Calls `f(key, start, end)` for each run of equal keys. Where the keys' first 64 mostly
/// change from row to row (dictionary codes, texts, integer values in no order), each row
/// is its own run, without looking for the run's end.
#[inline(always)]
fn for_runs(keys: &[i64], mut f: impl FnMut(usize, usize, usize)) {
    let head = &keys[..keys.len().min(64)];
    if head.windows(2).filter(|w| w[0] != w[1]).count() * 2 > head.len() {
        for (i, &k) in keys.iter().enumerate() {
            f(k as usize, i, i + 1);
        }
        return;
    }
    let mut i = 0;
    while i < keys.len() {
        let k = keys[i];
        let mut j = i + 1;
        while j < keys.len() && keys[j] == k {
            j += 1;
        }
        f(k as usize, i, j);
        i = j;
    }
}

/// `$body` with `$v` the values of primitive column `$col` for each listed type; nothing
/// for another type (the rule admits none: `SumType::of`).
macro_rules! by_type {
    ($col:expr, $v:ident => $body:expr; $($dt:ident => $t:ty),*) => {
        match $col.data_type() {
            $(DataType::$dt => {
                let $v = $col.as_primitive::<$t>().values();
                $body
            })*
            _ => {}
        }
    };
}

/// Runs at least this long are summed as slices (vectorized), shorter ones value by value.
pub(super) const SLICE_RUN: usize = 16;

fn add_floats(
    col: &ArrayRef,
    keys: &[i64],
    nulls: Option<&NullBuffer>,
    counts: &mut [u64],
    sums: &mut [f64],
) {
    fn go<T: AsF64>(
        v: &[T],
        keys: &[i64],
        nulls: Option<&NullBuffer>,
        counts: &mut [u64],
        sums: &mut [f64],
    ) {
        match nulls {
            Some(n) => n.valid_indices().for_each(|i| {
                let g = keys[i] as usize;
                counts[g] += 1;
                sums[g] += v[i].as_f64();
            }),
            None => for_runs(keys, |g, i, j| {
                counts[g] += (j - i) as u64;
                sums[g] += if j - i >= SLICE_RUN {
                    reduce::sum_f64(&v[i..j])
                } else {
                    v[i..j].iter().map(|x| x.as_f64()).sum::<f64>()
                };
            }),
        }
    }
    if let Some(v) = col.as_primitive_opt::<Float16Type>() {
        let w: Vec<f64> = v.values().iter().map(|&x| f64::from(x)).collect();
        return go(&w, keys, nulls, counts, sums);
    }
    by_type!(col, v => go(v, keys, nulls, counts, sums);
        Float32 => Float32Type, Float64 => Float64Type, Int8 => Int8Type, Int16 => Int16Type,
        Int32 => Int32Type, Int64 => Int64Type, UInt8 => UInt8Type, UInt16 => UInt16Type,
        UInt32 => UInt32Type, UInt64 => UInt64Type);
}

fn add_ints(
    col: &ArrayRef,
    keys: &[i64],
    nulls: Option<&NullBuffer>,
    counts: &mut [u64],
    mut add: impl FnMut(usize, i64),
) {
    fn go<T: AsI64>(
        v: &[T],
        keys: &[i64],
        nulls: Option<&NullBuffer>,
        counts: &mut [u64],
        add: &mut impl FnMut(usize, i64),
    ) {
        match nulls {
            Some(n) => n.valid_indices().for_each(|i| {
                let g = keys[i] as usize;
                counts[g] += 1;
                add(g, v[i].as_i64());
            }),
            None => for_runs(keys, |g, i, j| {
                counts[g] += (j - i) as u64;
                add(
                    g,
                    if j - i >= SLICE_RUN {
                        reduce::sum_wrapping(&v[i..j])
                    } else {
                        v[i..j].iter().fold(0i64, |a, x| a.wrapping_add(x.as_i64()))
                    },
                );
            }),
        }
    }
    let a = &mut add;
    by_type!(col, v => go(v, keys, nulls, counts, a);
        Int8 => Int8Type, Int16 => Int16Type, Int32 => Int32Type, Int64 => Int64Type,
        UInt8 => UInt8Type, UInt16 => UInt16Type, UInt32 => UInt32Type, UInt64 => UInt64Type);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arrow_reader::reader::RawText;
    use crate::provider::aggregate::Output;
    use crate::provider::exec::RawTextColumn;
    use arrow::array::{Float32Array, Int8Array};
    use arrow::datatypes::{Field, Schema};

    fn agg(kind: AggKind, column: Option<usize>, sum_type: Option<SumType>) -> FusedAggregate {
        FusedAggregate {
            kind,
            column,
            sum_type,
            value_type: None,
            text: None,
            argument: None,
            name: String::new(),
        }
    }

    /// Runs long and short, nulls, wrapping integer sums, a group with no value (null
    /// sum), a key never seen (no row): against sums written out by hand.
    #[test]
    fn groups_fold_like_the_ungrouped_states() {
        let keys: Vec<i64> = [vec![0; 20], vec![2, 3, 2, 3], vec![3; 3]].concat();
        let n = keys.len();
        let floats: Vec<Option<f32>> = (0..n)
            .map(|i| {
                (i % 5 != 4 && !(20..24).contains(&i) || i == 20 || i == 22).then_some(i as f32)
            })
            .collect();
        let ints: Vec<i8> = (0..n).map(|_| 100).collect();
        let batch = RecordBatch::try_new(
            Arc::new(Schema::new(vec![
                Field::new("k", DataType::Int64, false),
                Field::new("f", DataType::Float32, true),
                Field::new("i", DataType::Int8, false),
            ])),
            vec![
                Arc::new(Int64Array::from(keys.clone())),
                Arc::new(Float32Array::from(floats.clone())),
                Arc::new(Int8Array::from(ints)),
            ],
        )
        .unwrap();
        let aggs = [
            agg(AggKind::Count, None, None),
            agg(AggKind::Avg, Some(1), Some(SumType::F64)),
            agg(AggKind::Sum, Some(2), Some(SumType::I64)),
            agg(AggKind::Count, Some(1), None),
        ];
        let mut states = GroupedStates::new(&aggs, 5);
        states.add_batch(&batch, &keys, &aggs).unwrap();
        states.add_batch(&batch, &keys, &aggs).unwrap();
        let schema = Arc::new(Schema::new(vec![
            Field::new("k", DataType::Int64, false),
            Field::new("rows", DataType::Int64, false),
            Field::new("avg", DataType::Float64, true),
            Field::new("sum", DataType::Int64, true),
            Field::new("count", DataType::Int64, false),
        ]));
        let out = states
            .output(&schema, &aggs, Output::Final, group_numbers)
            .unwrap();
        let col = |c: usize| out.column(c).clone();
        assert_eq!(col(0).as_primitive::<Int64Type>().values(), &[0, 2, 3]);
        assert_eq!(col(1).as_primitive::<Int64Type>().values(), &[40, 4, 10]);
        let want = |g: i64| {
            let v: Vec<f64> = keys
                .iter()
                .zip(&floats)
                .filter(|(k, f)| **k == g && f.is_some())
                .map(|(_, f)| f.unwrap() as f64)
                .collect();
            (v.len(), v.iter().sum::<f64>() / v.len() as f64)
        };
        let avg = col(2);
        let avg = avg.as_primitive::<Float64Type>();
        for (row, g) in [0, 2, 3].into_iter().enumerate() {
            let (count, mean) = want(g);
            assert_eq!(
                col(4).as_primitive::<Int64Type>().value(row),
                2 * count as i64
            );
            assert_eq!(avg.is_null(row), count == 0, "group {g}");
            if count > 0 {
                assert!((avg.value(row) - mean).abs() < 1e-12, "group {g}");
            }
        }
        // 40 × 100 in i64, no i8 overflow.
        assert_eq!(col(3).as_primitive::<Int64Type>().value(0), 4000);
        let bad = RecordBatch::try_new(
            Arc::new(Schema::new(vec![Field::new("k", DataType::Int64, false)])),
            vec![Arc::new(Int64Array::from(vec![5]))],
        )
        .unwrap();
        let count = [agg(AggKind::Count, None, None)];
        assert!(
            GroupedStates::new(&count, 5)
                .add_batch(&bad, &[5], &count)
                .is_err()
        );
    }

    /// The key column of coordinate keys: each group's number.
    fn group_numbers(g: &[usize]) -> Result<ArrayRef> {
        Ok(Arc::new(Int64Array::from_iter_values(
            g.iter().map(|&g| g as i64),
        )))
    }

    /// The same rows in an order where each key changes from row to row (each row its
    /// own run) and sorted by key (long runs, summed as slices): the same rows, sums and
    /// counts per group (the floats are small integers, so their sums are exact).
    #[test]
    fn short_and_long_runs_fold_alike() {
        let n = 1000;
        let keys: Vec<i64> = (0..n).map(|i| (i * 7 % 5) as i64).collect();
        let fold = |order: &[usize]| {
            let k: Vec<i64> = order.iter().map(|&i| keys[i]).collect();
            let batch = RecordBatch::try_new(
                Arc::new(Schema::new(vec![
                    Field::new("f", DataType::Float32, false),
                    Field::new("i", DataType::Int8, false),
                ])),
                vec![
                    Arc::new(Float32Array::from_iter_values(
                        order.iter().map(|&i| (i % 13) as f32),
                    )),
                    Arc::new(Int8Array::from_iter_values(
                        order.iter().map(|&i| (i % 200) as i8),
                    )),
                ],
            )
            .unwrap();
            let aggs = [
                agg(AggKind::Count, None, None),
                agg(AggKind::Sum, Some(0), Some(SumType::F64)),
                agg(AggKind::Sum, Some(1), Some(SumType::I64)),
                agg(AggKind::Count, Some(0), None),
            ];
            let mut states = GroupedStates::new(&aggs, 5);
            states.add_batch(&batch, &k, &aggs).unwrap();
            let schema = Arc::new(Schema::new(vec![
                Field::new("k", DataType::Int64, false),
                Field::new("rows", DataType::Int64, false),
                Field::new("f", DataType::Float64, true),
                Field::new("i", DataType::Int64, true),
                Field::new("count", DataType::Int64, false),
            ]));
            states
                .output(&schema, &aggs, Output::Final, group_numbers)
                .unwrap()
        };
        let shuffled: Vec<usize> = (0..n).collect();
        let mut sorted = shuffled.clone();
        sorted.sort_by_key(|&i| keys[i]);
        let (a, b) = (fold(&shuffled), fold(&sorted));
        assert_eq!(a, b);
        assert_eq!(a.column(1).as_primitive::<Int64Type>().values(), &[200; 5]);
        let sum_f: f64 = (0..n).map(|i| (i % 13) as f64).sum();
        let got: f64 = a
            .column(2)
            .as_primitive::<Float64Type>()
            .values()
            .iter()
            .sum();
        assert_eq!(got, sum_f);
    }

    /// The schema of the batches [`fold_distinct`] folds: key `k` of type `key`, value
    /// `v` (the row number).
    fn fold_input(key: DataType) -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("k", key, true),
            Field::new("v", DataType::Int64, false),
        ]))
    }

    /// `count(*)` and `sum(v)` of rows `0..n` as partial states grouped by keys of
    /// `kind` (`column(rows)` gives those rows' keys, of type `key_in`; the output key is
    /// `key_out`), with the flush limit of a plan of several partitions, in batches of
    /// 16 Ki rows; the fold, and the rows it output so far.
    fn fold_distinct(
        kind: KeyKind,
        key_in: DataType,
        key_out: DataType,
        n: usize,
        column: impl Fn(std::ops::Range<usize>) -> ArrayRef,
    ) -> (GroupedFold, Vec<RecordBatch>) {
        let aggs = [
            agg(AggKind::Count, None, None),
            agg(AggKind::Sum, Some(1), Some(SumType::I64)),
        ];
        let schema = Arc::new(Schema::new(vec![
            Field::new("k", key_out, true),
            Field::new("rows", DataType::Int64, false),
            Field::new("sum", DataType::Int64, true),
        ]));
        let group = Group {
            column: 0,
            bound: 0,
            keys: kind,
        };
        let mut fold = GroupedFold::new(
            group,
            aggs.to_vec(),
            Output::PartialState,
            schema,
            Some(1 << 20),
        );
        let schema_in = fold_input(key_in);
        let mut outs = Vec::new();
        for at in (0..n).step_by(16 * 1024) {
            let to = (at + 16 * 1024).min(n);
            let values = Arc::new(Int64Array::from_iter_values((at..to).map(|i| i as i64)));
            let batch =
                RecordBatch::try_new(Arc::clone(&schema_in), vec![column(at..to), values]).unwrap();
            fold.add(&batch).unwrap();
            outs.extend(fold.take_flushed());
        }
        (fold, outs)
    }

    /// Text keys nearly all distinct, as `U8` records and as UTF-8 items: past the
    /// probe, each row is output as its own group under its text; merged per text, the
    /// rows and sums are each text's. Null rows (the records' nulls, and those whose text
    /// is the column's `null_text`) share the null key.
    #[test]
    fn distinct_texts_pass_rows_through() {
        use crate::array::dtype::{DType, Endian};
        use crate::arrow_reader::reader::RawText;
        use crate::provider::exec::RawTextColumn;
        use arrow::array::{FixedSizeBinaryArray, LargeBinaryArray};
        use std::collections::HashMap;
        let n = 2 * PROBE_ROWS + 5000;
        // 17 in 20 distinct: past the probe's 4 in 5.
        let text = |i: usize| match i % 20 {
            3 => None,
            5 => Some("NA".to_string()),
            7 => Some("same".to_string()),
            _ => Some(format!("k{i}")),
        };
        let key = |i: usize| text(i).filter(|t| t != "NA");
        let utf32 = RawText::Utf32(DType::Unicode {
            chars: 8,
            endian: Endian::Little,
        });
        for raw in [utf32, RawText::Utf8] {
            let records = |rows: std::ops::Range<usize>| -> ArrayRef {
                let texts: Vec<Option<String>> = rows.map(text).collect();
                match &raw {
                    RawText::Utf32(_) => {
                        let recs = texts.iter().map(|t| {
                            t.as_ref().map(|t| {
                                let mut r: Vec<u8> =
                                    t.chars().flat_map(|c| (c as u32).to_le_bytes()).collect();
                                r.resize(32, 0);
                                r
                            })
                        });
                        Arc::new(
                            FixedSizeBinaryArray::try_from_sparse_iter_with_size(recs, 32).unwrap(),
                        )
                    }
                    RawText::Utf8 => Arc::new(LargeBinaryArray::from_iter(
                        texts.iter().map(|t| t.as_ref().map(|t| t.as_bytes())),
                    )),
                }
            };
            let what = RawTextColumn {
                raw: raw.clone(),
                null_text: Some("NA".into()),
                what: "test column".into(),
            };
            let (mut fold, mut outs) = fold_distinct(
                KeyKind::Text(what),
                raw.data_type(),
                DataType::Utf8,
                n,
                records,
            );
            assert!(fold.row_groups);
            // Passed through, an item that is not UTF-8 is still refused, naming the column.
            if raw == RawText::Utf8 {
                let bad = RecordBatch::try_new(
                    fold_input(raw.data_type()),
                    vec![
                        Arc::new(LargeBinaryArray::from_iter_values([
                            b"ok".as_slice(),
                            b"\xff",
                        ])),
                        Arc::new(Int64Array::from_iter_values([0, 1])),
                    ],
                )
                .unwrap();
                let e = fold.add(&bad).unwrap_err().to_string();
                assert!(e.contains("test column") && e.contains("not UTF-8"), "{e}");
            }
            outs.push(fold.finish().unwrap());
            let mut want: HashMap<Option<String>, (i64, i64)> = HashMap::new();
            for i in 0..n {
                let e = want.entry(key(i)).or_default();
                e.0 += 1;
                e.1 += i as i64;
            }
            let mut got: HashMap<Option<String>, (i64, i64)> = HashMap::new();
            for b in &outs {
                let k = b.column(0).as_string::<i32>();
                for r in 0..b.num_rows() {
                    let e = got
                        .entry(k.is_valid(r).then(|| k.value(r).to_string()))
                        .or_default();
                    e.0 += b.column(1).as_primitive::<Int64Type>().value(r);
                    e.1 += b.column(2).as_primitive::<Int64Type>().value(r);
                }
            }
            assert_eq!(got, want, "{raw:?}");
        }
    }

    /// Integer keys nearly all distinct: past the probe, each row is output as its own
    /// group; merged per key, the rows and sums are each key's (nulls in one group).
    #[test]
    fn distinct_integers_pass_rows_through() {
        use arrow::array::Int32Array;
        use std::collections::HashMap;
        let n = 3 * PROBE_ROWS;
        let key = |i: usize| match i % 10 {
            3 => None,
            7 => Some(5),
            _ => Some(i as i32),
        };
        let column = |rows: std::ops::Range<usize>| -> ArrayRef {
            Arc::new(Int32Array::from_iter(rows.map(key)))
        };
        let (fold, mut outs) = fold_distinct(
            KeyKind::Integer,
            DataType::Int32,
            DataType::Int32,
            n,
            column,
        );
        assert!(fold.row_groups);
        outs.push(fold.finish().unwrap());
        let mut want: HashMap<Option<i32>, (i64, i64)> = HashMap::new();
        for i in 0..n {
            let e = want.entry(key(i)).or_default();
            e.0 += 1;
            e.1 += i as i64;
        }
        let mut got: HashMap<Option<i32>, (i64, i64)> = HashMap::new();
        for b in &outs {
            let k = b.column(0).as_primitive::<arrow::datatypes::Int32Type>();
            for r in 0..b.num_rows() {
                let e = got.entry(k.is_valid(r).then(|| k.value(r))).or_default();
                e.0 += b.column(1).as_primitive::<Int64Type>().value(r);
                e.1 += b.column(2).as_primitive::<Int64Type>().value(r);
            }
        }
        assert_eq!(got, want);
    }

    /// `U<n>` keys folded with a flush limit of 2 groups: partial rows are output as the
    /// limit passes, and merged per key they give each key's rows and sum; without a
    /// limit, one row per key.
    #[test]
    fn text_groups_flush_past_their_limit() {
        use crate::array::dtype::{DType, Endian};
        use arrow::array::{AsArray, FixedSizeBinaryArray};
        use std::collections::BTreeMap;
        let words = ["b", "a", "c", "a", "d", "b", "a", "e", "c"];
        let record = |w: &str| -> Vec<u8> {
            let mut r: Vec<u8> = w.chars().flat_map(|c| (c as u32).to_le_bytes()).collect();
            r.resize(8, 0);
            r
        };
        let schema_in = Arc::new(Schema::new(vec![
            Field::new("w", DataType::FixedSizeBinary(8), true),
            Field::new("v", DataType::Int64, false),
        ]));
        let batch = |from: usize, to: usize| {
            let bytes: Vec<u8> = words[from..to].iter().flat_map(|w| record(w)).collect();
            RecordBatch::try_new(
                Arc::clone(&schema_in),
                vec![
                    Arc::new(FixedSizeBinaryArray::try_new(8, bytes.into(), None).unwrap()),
                    Arc::new(Int64Array::from_iter_values((from..to).map(|i| i as i64))),
                ],
            )
            .unwrap()
        };
        let aggs = [
            agg(AggKind::Count, None, None),
            agg(AggKind::Sum, Some(1), Some(SumType::I64)),
        ];
        let schema = Arc::new(Schema::new(vec![
            Field::new("w", DataType::Utf8, true),
            Field::new("rows", DataType::Int64, false),
            Field::new("sum", DataType::Int64, true),
        ]));
        let group = Group {
            column: 0,
            bound: 0,
            keys: KeyKind::Text(RawTextColumn {
                raw: RawText::Utf32(DType::Unicode {
                    chars: 2,
                    endian: Endian::Little,
                }),
                null_text: None,
                what: "test".into(),
            }),
        };
        let mut want: BTreeMap<String, (i64, i64)> = BTreeMap::new();
        for (i, w) in words.iter().enumerate() {
            let e = want.entry(w.to_string()).or_default();
            e.0 += 1;
            e.1 += i as i64;
        }
        for (flush, output) in [(Some(2), Output::PartialState), (None, Output::Final)] {
            let mut fold =
                GroupedFold::new(group.clone(), aggs.to_vec(), output, schema.clone(), flush);
            let mut outs = Vec::new();
            for (from, to) in [(0, 4), (4, 5), (5, 9)] {
                fold.add(&batch(from, to)).unwrap();
                outs.extend(fold.take_flushed());
            }
            outs.push(fold.finish().unwrap());
            assert_eq!(outs.len() > 1, flush.is_some());
            let out = arrow::compute::concat_batches(&schema, &outs).unwrap();
            let mut got: BTreeMap<String, (i64, i64)> = BTreeMap::new();
            for r in 0..out.num_rows() {
                let w = out.column(0).as_string::<i32>().value(r).to_string();
                let e = got.entry(w).or_default();
                e.0 += out.column(1).as_primitive::<Int64Type>().value(r);
                e.1 += out.column(2).as_primitive::<Int64Type>().value(r);
            }
            assert_eq!(got, want, "{flush:?}");
            let rows = out.num_rows();
            assert!(if flush.is_some() {
                rows > want.len()
            } else {
                rows == want.len()
            });
        }
    }
}
