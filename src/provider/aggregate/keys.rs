//! How the rows of a grouped fused aggregation find their group, and how the groups get
//! their keys back: an array coordinate is its own group; a dictionary column's row is
//! in the group of its code. Both keys lie in a range known when the plan is made (the
//! array's shape, the dictionary's length), so the states stay dense (`grouped.rs`).
//!
//! Dictionary codes: python-blosc2 writes each distinct value once, but a dictionary
//! that repeats a value must still give it one group (a one-partition plan's output is
//! final), so each code's group is the first code of its value. Null rows (the null
//! code, or a null dictionary value) share one group after the codes, keyed NULL.

use arrow::array::{Array, ArrayRef, AsArray, DictionaryArray, Int32Array, Int64Array};
use arrow::datatypes::{DataType, Int32Type, Int64Type};
use datafusion::error::{DataFusionError, Result};
use std::collections::HashMap;
use std::sync::Arc;

/// What a grouped fused node groups by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyKind {
    /// An array coordinate: `Int64` in `0..bound`, never null.
    Coordinate,
    /// The int32 codes of a dictionary column of `bound` values.
    DictionaryCodes,
}

/// The groups of the rows of one partition's batches, by [`KeyKind`].
#[derive(Debug)]
pub struct GroupKeys {
    kind: KeyKind,
    /// The keys' bound (the shape along the coordinate, the dictionary's length).
    bound: usize,
    /// Dictionary codes: the values of the first batch, which every batch must share.
    values: Option<ArrayRef>,
    /// Dictionary codes: each code's group.
    code_groups: Vec<i64>,
    /// The groups of the current batch's rows, when they are not its column's values.
    buf: Vec<i64>,
}

impl GroupKeys {
    /// Keys of `kind` below `bound`.
    pub fn new(kind: KeyKind, bound: usize) -> Self {
        GroupKeys {
            kind,
            bound,
            values: None,
            code_groups: Vec::new(),
            buf: Vec::new(),
        }
    }

    /// How many groups the states need: the bound, and a null group after the codes.
    pub fn groups(&self) -> usize {
        match self.kind {
            KeyKind::Coordinate => self.bound,
            KeyKind::DictionaryCodes => self.bound + 1,
        }
    }

    /// The group of each row of key column `col`.
    ///
    /// # Errors
    /// A column that is not the kind's (the rule admits only the kind's columns), or a
    /// dictionary other than the first batch's or of another length than planned.
    pub fn of<'a>(&'a mut self, col: &'a ArrayRef) -> Result<&'a [i64]> {
        let wrong = |what: &str| {
            DataFusionError::Internal(format!("grouped Blosc2 aggregate: the key {what}"))
        };
        match self.kind {
            KeyKind::Coordinate => match col.as_primitive_opt::<Int64Type>() {
                Some(k) if k.null_count() == 0 => Ok(k.values()),
                _ => Err(wrong("is not a coordinate")),
            },
            KeyKind::DictionaryCodes => {
                let d = col
                    .as_dictionary_opt::<Int32Type>()
                    .ok_or_else(|| wrong("is not a dictionary of int32 codes"))?;
                match &self.values {
                    None => {
                        if d.values().len() != self.bound {
                            return Err(wrong("dictionary is not of the planned length"));
                        }
                        self.code_groups = code_groups(d.values())?;
                        self.values = Some(Arc::clone(d.values()));
                    }
                    Some(v)
                        if Arc::ptr_eq(v, d.values()) || v.to_data() == d.values().to_data() => {}
                    Some(_) => return Err(wrong("dictionary changed between batches")),
                }
                let null_group = self.bound as i64;
                let groups = &self.code_groups;
                self.buf.clear();
                match d.keys().nulls().filter(|n| n.null_count() > 0) {
                    Some(n) => self.buf.extend(d.keys().values().iter().zip(n.iter()).map(
                        |(&c, valid)| match valid {
                            true => groups.get(c as usize).copied().unwrap_or(i64::MAX),
                            false => null_group,
                        },
                    )),
                    None => self.buf.extend(
                        (d.keys().values().iter())
                            .map(|&c| groups.get(c as usize).copied().unwrap_or(i64::MAX)),
                    ),
                }
                Ok(&self.buf)
            }
        }
    }

    /// The key column of `groups` (ascending), in type `key_type` (the output schema's).
    ///
    /// # Errors
    /// A type the keys cannot be cast to.
    pub fn column(&self, groups: &[usize], key_type: &DataType) -> Result<ArrayRef> {
        let keys: ArrayRef = match (self.kind, &self.values) {
            (KeyKind::Coordinate, _) => Arc::new(Int64Array::from_iter_values(
                groups.iter().map(|&g| g as i64),
            )),
            // No batch: no group.
            (KeyKind::DictionaryCodes, None) => arrow::array::new_empty_array(key_type),
            (KeyKind::DictionaryCodes, Some(values)) => {
                let codes = Int32Array::from_iter(
                    groups.iter().map(|&g| (g < self.bound).then_some(g as i32)),
                );
                Arc::new(DictionaryArray::<Int32Type>::try_new(
                    codes,
                    Arc::clone(values),
                )?)
            }
        };
        if keys.data_type() == key_type {
            return Ok(keys);
        }
        Ok(arrow::compute::cast(&keys, key_type)?)
    }
}

/// Each code's group among `values`: the first code with its value; null values in the
/// null group (`values.len()`).
fn code_groups(values: &ArrayRef) -> Result<Vec<i64>> {
    let null_group = values.len() as i64;
    let Some(text) = values.as_string_opt::<i32>() else {
        return Err(DataFusionError::Internal(format!(
            "grouped Blosc2 aggregate: dictionary values of type {}",
            values.data_type()
        )));
    };
    let mut first: HashMap<&str, i64> = HashMap::with_capacity(text.len());
    Ok((0..text.len())
        .map(|i| match text.is_valid(i) {
            true => *first.entry(text.value(i)).or_insert(i as i64),
            false => null_group,
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::StringArray;

    /// Codes of a dictionary that repeats a value and holds a null, null codes, and a
    /// second batch sharing the dictionary: groups, then keys back as text.
    #[test]
    fn dictionary_codes_group_by_value() {
        let values: ArrayRef = Arc::new(StringArray::from(vec![
            Some("a"),
            Some("b"),
            Some("a"),
            None,
        ]));
        let batch = |codes: Vec<Option<i32>>| -> ArrayRef {
            Arc::new(
                DictionaryArray::<Int32Type>::try_new(Int32Array::from(codes), Arc::clone(&values))
                    .unwrap(),
            )
        };
        let mut keys = GroupKeys::new(KeyKind::DictionaryCodes, 4);
        assert_eq!(keys.groups(), 5);
        let first = batch(vec![Some(0), Some(1), Some(2), None, Some(3)]);
        assert_eq!(keys.of(&first).unwrap(), &[0, 1, 0, 4, 4]);
        let second = batch(vec![Some(2), Some(1)]);
        assert_eq!(keys.of(&second).unwrap(), &[0, 1]);
        let text = keys.column(&[0, 1, 4], &DataType::Utf8).unwrap();
        let text = text.as_string::<i32>();
        assert_eq!(
            (text.value(0), text.value(1), text.is_null(2)),
            ("a", "b", true)
        );
        let dict = keys
            .column(
                &[1, 4],
                &DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8)),
            )
            .unwrap();
        let dict = dict.as_dictionary::<Int32Type>();
        assert_eq!(dict.keys(), &Int32Array::from(vec![Some(1), None]));
        // Another dictionary, or another length than planned, is refused.
        let other: ArrayRef = Arc::new(
            DictionaryArray::<Int32Type>::try_new(
                Int32Array::from(vec![0]),
                Arc::new(StringArray::from(vec!["z", "b", "a", "c"])),
            )
            .unwrap(),
        );
        assert!(keys.of(&other).is_err());
        assert!(
            GroupKeys::new(KeyKind::DictionaryCodes, 3)
                .of(&first)
                .is_err()
        );
        // Coordinates are their own groups; nulls are refused.
        let mut coords = GroupKeys::new(KeyKind::Coordinate, 9);
        let c: ArrayRef = Arc::new(Int64Array::from(vec![3, 8]));
        assert_eq!(coords.of(&c).unwrap(), &[3, 8]);
        let c: ArrayRef = Arc::new(Int64Array::from(vec![Some(3), None]));
        assert!(coords.of(&c).is_err());
    }
}
