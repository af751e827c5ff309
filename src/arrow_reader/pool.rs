//! `BufferPool`: recycles the value buffers of a scan's batches once every consumer has
//! dropped them, so the next unit decodes into memory that is already mapped and needs no
//! zeroing (a full scan otherwise spends several percent of its time zero-filling fresh
//! buffers that the decoder overwrites at once). Safe code only: a buffer is taken back
//! through [`Buffer::into_mutable`], which succeeds only when the pool holds the last
//! reference.

use crate::io::worth_reusing;
use arrow::buffer::{Buffer, MutableBuffer};
use std::sync::Mutex;

/// Buffers handed out by one scan, kept for reuse (at most [`BufferPool::KEEP`]).
#[derive(Debug, Default)]
pub struct BufferPool {
    bufs: Mutex<Vec<Buffer>>,
}

impl BufferPool {
    /// Buffers remembered at most (the oldest is forgotten first).
    pub const KEEP: usize = 4;

    /// A buffer of `len` bytes whose contents are unspecified (recycled bytes, or zeros):
    /// the caller must overwrite all of them.
    pub fn take(&self, len: usize) -> MutableBuffer {
        let mut bufs = self.bufs.lock().unwrap_or_else(|e| e.into_inner());
        // A free buffer of about the right size.
        let fits = |b: &Buffer| b.strong_count() == 1 && worth_reusing(b.capacity(), len);
        if let Some(k) = bufs.iter().position(fits) {
            let b = bufs.remove(k);
            drop(bufs);
            if let Ok(mut m) = b.into_mutable() {
                // Only bytes past the old length are written (zeros).
                m.resize(len, 0);
                return m;
            }
        }
        MutableBuffer::from_len_zeroed(len)
    }

    /// Remembers `buf` (a clone of a buffer [`BufferPool::take`] gave out) for reuse once
    /// its other holders drop it.
    pub fn give(&self, buf: &Buffer) {
        let mut bufs = self.bufs.lock().unwrap_or_else(|e| e.into_inner());
        if bufs.len() >= Self::KEEP {
            bufs.remove(0);
        }
        bufs.push(buf.clone());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reuses_only_buffers_nobody_else_holds() {
        let pool = BufferPool::default();
        let mut a = pool.take(10_000);
        a.as_slice_mut().fill(7);
        let a: Buffer = a.into();
        pool.give(&a);
        // Still held by `a`: a fresh zeroed buffer.
        let b = pool.take(10_000);
        assert!(b.as_slice().iter().all(|&x| x == 0));
        let ptr = a.as_ptr();
        drop(a);
        // Released: the same memory comes back, at the asked length.
        let c = pool.take(9_000);
        assert_eq!(c.as_ptr(), ptr);
        assert_eq!(c.len(), 9_000);
        // Given back and too big for a small request: not used.
        let c: Buffer = c.into();
        pool.give(&c);
        drop(c);
        let d = pool.take(100);
        assert_ne!(d.as_ptr(), ptr);
        for _ in 0..10 {
            pool.give(&Buffer::from(vec![1u8; 64]));
        }
        assert_eq!(pool.bufs.lock().unwrap().len(), BufferPool::KEEP);
    }
}
