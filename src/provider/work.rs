//! Where a scan partition gets its next unit: its own planned list, or, when the session
//! lets sibling partitions share work (DataFusion's
//! `datafusion.execution.enable_file_stream_work_stealing`, on by default), queues shared
//! by the partitions of one execution, from which a partition that has run out of its own
//! units takes the last unit of the sibling with the most left.
//!
//! Plans balance partitions by an estimate of bytes; decode speed differs from chunk to
//! chunk and other work competes for the cores, so one partition used to finish several
//! milliseconds before the other on a full scan of a few tens (`benches/README.md`).
//! Taking from the back keeps both sides on neighbouring units: the owner walks its list
//! forward, the taker backward, and at most the chunk where they meet is fetched twice.
//! Every unit is still read exactly once per execution, by one partition or another.

use crate::arrow_reader::zones::ZonedUnit;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};

/// The units of every partition of one execution, shared by its partitions.
#[derive(Debug)]
pub(crate) struct SharedUnits {
    queues: Vec<Mutex<VecDeque<ZonedUnit>>>,
    /// Which partitions this execution has opened: opening one again starts a new
    /// execution (a plan executed twice without `reset_state`).
    opened: Mutex<Vec<bool>>,
}

impl SharedUnits {
    fn new(partitions: &[Vec<ZonedUnit>]) -> Self {
        SharedUnits {
            queues: partitions
                .iter()
                .map(|p| Mutex::new(p.iter().cloned().collect()))
                .collect(),
            opened: Mutex::new(vec![false; partitions.len()]),
        }
    }

    /// Marks `partition` opened; false when it already was.
    fn open(&self, partition: usize) -> bool {
        let mut opened = lock(&self.opened);
        !std::mem::replace(&mut opened[partition], true)
    }

    /// The next unit for `partition`: the front of its own queue, else the back of the
    /// sibling queue with the most units left; `None` when every queue is empty.
    fn next(&self, partition: usize) -> Option<ZonedUnit> {
        if let Some(u) = lock(&self.queues[partition]).pop_front() {
            return Some(u);
        }
        loop {
            let (victim, left) = self
                .queues
                .iter()
                .enumerate()
                .map(|(i, q)| (i, lock(q).len()))
                .max_by_key(|&(_, n)| n)?;
            if left == 0 {
                return None;
            }
            // Another partition may have emptied it since it was counted: look again.
            if let Some(u) = lock(&self.queues[victim]).pop_back() {
                return Some(u);
            }
        }
    }
}

/// A poisoned queue still holds whole units (a panic cannot leave one half-popped).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The execution state a scan node keeps between `execute` calls: the shared queues of
/// the current execution, if sharing is on.
#[derive(Debug, Default)]
pub(crate) struct ExecutionUnits {
    current: Mutex<Option<Arc<SharedUnits>>>,
}

impl ExecutionUnits {
    /// The source of `partition`'s units for an execution of a scan planned as
    /// `partitions`: shared with its siblings when `share` and there is more than one.
    pub(crate) fn source(
        &self,
        partitions: &[Vec<ZonedUnit>],
        partition: usize,
        share: bool,
    ) -> UnitSource {
        let own = partitions.get(partition).cloned().unwrap_or_default();
        if !share || partitions.len() < 2 || partition >= partitions.len() {
            return UnitSource::Own(own.into_iter());
        }
        let mut current = lock(&self.current);
        let shared = match &*current {
            Some(s) if s.open(partition) => Arc::clone(s),
            _ => {
                let s = Arc::new(SharedUnits::new(partitions));
                s.open(partition);
                *current = Some(Arc::clone(&s));
                s
            }
        };
        UnitSource::Shared { shared, partition }
    }
}

/// Where one partition's stream takes its units from.
pub(crate) enum UnitSource {
    /// Its planned units, in order.
    Own(std::vec::IntoIter<ZonedUnit>),
    /// The queues of its execution.
    Shared {
        /// The queues.
        shared: Arc<SharedUnits>,
        /// The partition this stream is.
        partition: usize,
    },
}

impl Iterator for UnitSource {
    type Item = ZonedUnit;

    fn next(&mut self) -> Option<ZonedUnit> {
        match self {
            UnitSource::Own(it) => it.next(),
            UnitSource::Shared { shared, partition } => shared.next(*partition),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arrow_reader::reader::ScanUnit;

    fn units(rows: std::ops::Range<u64>) -> Vec<ZonedUnit> {
        rows.map(|r| ZonedUnit::unzoned(ScanUnit::Rows(r..r + 1)))
            .collect()
    }

    fn start(u: &ZonedUnit) -> u64 {
        match &u.unit {
            ScanUnit::Rows(r) => r.start,
            ScanUnit::Box(_) => unreachable!(),
        }
    }

    #[test]
    fn an_idle_partition_takes_the_siblings_last_units() {
        let plan = vec![units(0..6), units(6..8)];
        let ex = ExecutionUnits::default();
        let mut a = ex.source(&plan, 0, true);
        let mut b = ex.source(&plan, 1, true);
        let got_b: Vec<u64> = b.by_ref().take(4).map(|u| start(&u)).collect();
        // Its own two, then the back of partition 0's.
        assert_eq!(got_b, vec![6, 7, 5, 4]);
        let got_a: Vec<u64> = a.by_ref().map(|u| start(&u)).collect();
        assert_eq!(got_a, vec![0, 1, 2, 3]);
        assert!(b.next().is_none());
    }

    #[test]
    fn a_second_execution_starts_over() {
        let plan = vec![units(0..3), units(3..5)];
        let ex = ExecutionUnits::default();
        for _ in 0..2 {
            let mut all: Vec<u64> = ex.source(&plan, 0, true).map(|u| start(&u)).collect();
            all.extend(ex.source(&plan, 1, true).map(|u| start(&u)));
            all.sort_unstable();
            assert_eq!(all, vec![0, 1, 2, 3, 4]);
        }
    }

    #[test]
    fn without_sharing_each_partition_reads_its_own() {
        let plan = vec![units(0..3), units(3..5)];
        let ex = ExecutionUnits::default();
        let b: Vec<u64> = ex.source(&plan, 1, false).map(|u| start(&u)).collect();
        assert_eq!(b, vec![3, 4]);
        let a: Vec<u64> = ex.source(&plan, 0, false).map(|u| start(&u)).collect();
        assert_eq!(a, vec![0, 1, 2]);
    }
}
