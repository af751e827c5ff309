//! Where a scan partition gets its next unit: its own planned list, or, when the session
//! lets sibling partitions share work (DataFusion's
//! `datafusion.execution.enable_file_stream_work_stealing`, on by default), queues shared
//! by the partitions of one execution, from which a partition that has run out of its own
//! units takes the last zone of the sibling with the most left.
//!
//! Plans balance partitions by an estimate of bytes; decode speed differs from chunk to
//! chunk and other work competes for the cores, so one partition used to finish several
//! milliseconds before the other on a full scan of a few tens (`benches/README.md`).
//! Taking from the back keeps both sides on neighbouring units: the owner walks its list
//! forward, the taker backward, and at most the chunk where they meet is fetched twice.
//! Every unit is still read exactly once per execution, by one partition or another.
//!
//! An execution also holds the zones its partitions each read a part of
//! ([`ZonePieces`]), so that a zone the plan split between partitions is still mapped.

use super::zone_maps::ZonePieces;
use crate::arrow_reader::zones::ZonedUnit;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};

/// The units of every partition of one execution, shared by its partitions, and the
/// zones they read in part.
#[derive(Debug)]
pub(crate) struct SharedUnits {
    queues: Vec<Mutex<VecDeque<ZonedUnit>>>,
    /// Which partitions this execution has opened: opening one again starts a new
    /// execution (a plan executed twice without `reset_state`).
    opened: Mutex<Vec<bool>>,
    /// The zones split between partitions, pieced together.
    pieces: Arc<ZonePieces>,
}

impl SharedUnits {
    fn new(partitions: &[Vec<ZonedUnit>], share: bool) -> Self {
        SharedUnits {
            queues: partitions
                .iter()
                .map(|p| {
                    Mutex::new(if share {
                        p.iter().cloned().collect()
                    } else {
                        VecDeque::new()
                    })
                })
                .collect(),
            opened: Mutex::new(vec![false; partitions.len()]),
            pieces: Arc::default(),
        }
    }

    /// Marks `partition` opened; false when it already was.
    fn open(&self, partition: usize) -> bool {
        let mut opened = lock(&self.opened);
        !std::mem::replace(&mut opened[partition], true)
    }

    /// The next unit for `partition`: the front of its own queue, else the last zone of
    /// the sibling queue with the most units left, taken whole, or its last unit when
    /// that queue holds one zone (which its owner is reading: the zone's pieces meet in
    /// [`ZonePieces`]); `None` when nothing is left to take.
    fn next(&self, partition: usize) -> Option<ZonedUnit> {
        loop {
            if let Some(u) = lock(&self.queues[partition]).pop_front() {
                return Some(u);
            }
            let mut victims: Vec<(usize, usize)> = self
                .queues
                .iter()
                .enumerate()
                .map(|(i, q)| (i, lock(q).len()))
                .filter(|&(_, n)| n > 0)
                .collect();
            victims.sort_by_key(|&(_, n)| std::cmp::Reverse(n));
            let stolen = victims
                .iter()
                .find_map(|&(v, _)| take_zone(&mut lock(&self.queues[v])));
            let mut stolen = stolen?;
            // Taken from the back: put back in order.
            stolen.reverse();
            lock(&self.queues[partition]).extend(stolen);
        }
    }
}

/// The units of the last zone of `q`, removed from its back (last first); its last unit
/// alone when all its units lie in one zone; `None` when the queue is empty. Units
/// outside zone planning (`zone_rows == 0`) go one at a time.
fn take_zone(q: &mut VecDeque<ZonedUnit>) -> Option<Vec<ZonedUnit>> {
    let back = q.back()?;
    let zone = back.zone;
    if back.zone_rows == 0 || q.front().is_some_and(|f| f.zone == zone) {
        return q.pop_back().map(|u| vec![u]);
    }
    let mut out = Vec::new();
    while q.back().is_some_and(|u| u.zone == zone) {
        out.extend(q.pop_back());
    }
    Some(out)
}

/// A poisoned queue still holds whole units (a panic cannot leave one half-popped).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The execution state a scan node keeps between `execute` calls: the current
/// execution's zone pieces, and its shared queues if sharing is on.
#[derive(Debug, Default)]
pub(crate) struct ExecutionUnits {
    current: Mutex<Option<Arc<SharedUnits>>>,
}

impl ExecutionUnits {
    /// The source of `partition`'s units for an execution of a scan planned as
    /// `partitions` (shared with its siblings when `share` and there is more than one),
    /// and the zone pieces of that execution.
    pub(crate) fn source(
        &self,
        partitions: &[Vec<ZonedUnit>],
        partition: usize,
        share: bool,
    ) -> (UnitSource, Arc<ZonePieces>) {
        if partition >= partitions.len() {
            return (UnitSource::Own(Vec::new().into_iter()), Arc::default());
        }
        let share = share && partitions.len() > 1;
        let mut current = lock(&self.current);
        let execution = match &*current {
            Some(s) if s.open(partition) => Arc::clone(s),
            _ => {
                let s = Arc::new(SharedUnits::new(partitions, share));
                s.open(partition);
                *current = Some(Arc::clone(&s));
                s
            }
        };
        let pieces = Arc::clone(&execution.pieces);
        let source = if share {
            UnitSource::Shared {
                shared: execution,
                partition,
            }
        } else {
            UnitSource::Own(partitions[partition].clone().into_iter())
        };
        (source, pieces)
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
        let mut a = ex.source(&plan, 0, true).0;
        let mut b = ex.source(&plan, 1, true).0;
        let got_b: Vec<u64> = b.by_ref().take(4).map(|u| start(&u)).collect();
        // Its own two, then the back of partition 0's.
        assert_eq!(got_b, vec![6, 7, 5, 4]);
        let got_a: Vec<u64> = a.by_ref().map(|u| start(&u)).collect();
        assert_eq!(got_a, vec![0, 1, 2, 3]);
        assert!(b.next().is_none());
    }

    #[test]
    fn zones_are_taken_whole_and_a_zone_being_read_unit_by_unit() {
        let zoned = |r: u64, zone: u64| ZonedUnit {
            unit: ScanUnit::Rows(r..r + 1),
            zone,
            zone_rows: 2,
        };
        let plan = vec![
            vec![
                zoned(0, 0),
                zoned(1, 0),
                zoned(2, 1),
                zoned(3, 1),
                zoned(4, 2),
            ],
            vec![zoned(5, 3)],
        ];
        let ex = ExecutionUnits::default();
        let mut a = ex.source(&plan, 0, true).0;
        let mut b = ex.source(&plan, 1, true).0;
        assert_eq!(start(&a.next().unwrap()), 0);
        let got_b: Vec<u64> = b.by_ref().take(3).map(|u| start(&u)).collect();
        // Its own, then zone 2, then zone 1 in order.
        assert_eq!(got_b, vec![5, 4, 2]);
        assert_eq!(start(&b.next().unwrap()), 3);
        // Zone 0, which partition 0 is reading, is taken a unit at a time.
        assert_eq!(start(&b.next().unwrap()), 1);
        assert!(b.next().is_none());
        assert!(a.next().is_none());
    }

    #[test]
    fn a_second_execution_starts_over() {
        let plan = vec![units(0..3), units(3..5)];
        let ex = ExecutionUnits::default();
        for _ in 0..2 {
            let mut all: Vec<u64> = ex.source(&plan, 0, true).0.map(|u| start(&u)).collect();
            all.extend(ex.source(&plan, 1, true).0.map(|u| start(&u)));
            all.sort_unstable();
            assert_eq!(all, vec![0, 1, 2, 3, 4]);
        }
    }

    #[test]
    fn without_sharing_each_partition_reads_its_own() {
        let plan = vec![units(0..3), units(3..5)];
        let ex = ExecutionUnits::default();
        let b: Vec<u64> = ex.source(&plan, 1, false).0.map(|u| start(&u)).collect();
        assert_eq!(b, vec![3, 4]);
        let a: Vec<u64> = ex.source(&plan, 0, false).0.map(|u| start(&u)).collect();
        assert_eq!(a, vec![0, 1, 2]);
    }
}
