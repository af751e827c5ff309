//! Page-aligned buffers for the decode benches (`decode.rs`, `hot.rs`).

/// Zeroed bytes that start at a page boundary, as `reference.py` gives C-Blosc2 its
/// chunk and output: both sides then decode with the same alignment (a `Vec` of 4 MiB
/// starts 16 bytes into a page, where half of the 32-byte stores of an unshuffle straddle
/// two cache lines).
pub struct PageAligned {
    /// `PAGE` bytes more than asked for, so that a page boundary lies in the first `PAGE`.
    buf: Vec<u8>,
    /// Where the page boundary is.
    at: usize,
}

const PAGE: usize = 4096;

impl PageAligned {
    /// `len` zeroed bytes at a page boundary.
    pub fn zeroed(len: usize) -> Self {
        let buf = vec![0u8; len + PAGE];
        let at = buf.as_ptr().align_offset(PAGE);
        PageAligned { buf, at }
    }

    /// The bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.buf[self.at..][..self.buf.len() - PAGE]
    }

    /// The bytes, to write.
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        let len = self.buf.len() - PAGE;
        &mut self.buf[self.at..][..len]
    }
}
