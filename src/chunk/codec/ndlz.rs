//! NDLZ (Blosc2 codec 32, a plugin python-blosc2 ships for 2-D arrays of 1-byte items):
//! an LZ codec whose unit is a square cell of the block rather than a run of bytes.
//! `spec/codecs.md` §1 only names it; this module is its format, checked byte for byte
//! against python-blosc2 4.14.1's decoding.
//!
//! - The codec's meta byte is the cell side, 4 or 8.
//! - A stream opens with 9 bytes: the number of dimensions (2), then the block's rows and
//!   columns as little-endian `i32`. The block holds rows × columns bytes, C order.
//! - Then one token per cell, cells in C order; cells at the block's far edges are
//!   partial (`h` × `w` items). Every cell's bytes are `h` rows of `w` bytes, one after
//!   the other.
//! - References point back into the *stream*, at the literal rows of earlier cells: the
//!   token at `at` is followed by a little-endian `u16` `o`, and the reference is
//!   `at - o`. Side 4's row tokens compute it as C-Blosc2 does, `at + 3 - ((o + 3) mod
//!   2^16)` (`+ 5` for the two references of a two-pair token), which differs for `o`
//!   near 2^16.
//! - Tokens for both sides: 0 literal cell (its `h·w` bytes follow); `0x40` a cell of one
//!   value (the byte follows); `0xC0` a cell equal to the `h·w` bytes at the reference.
//! - Side 4 only (whole cells): `0xE0 | …` three rows at the reference (rows 1–3 for
//!   `0xE0`; rows 0,1,2 / 0,1,3 / 0,2,3 for `token >> 3` 29 / 30 / 31) and the fourth row
//!   literal; `0x80 | i << 5 | j << 3` rows `i` and `j` (2 and 3 for `0x80`) at the
//!   reference and the other two literal, in row order; `0x20 | j << 3` (j in 1..=3) rows
//!   0 and `j` at a first reference and the other two rows at a second.
//! - Side 8 only: `0xA8 | r` rows `r..r+3` at the reference, `0x88 | r` rows `r..r+2`;
//!   the other rows literal, in row order.

/// Decodes the NDLZ stream `src` of one block into `out` (exactly the block's bytes) with
/// cells of `side` (the codec's meta byte).
///
/// # Errors
/// A side other than 4 or 8, a header that is not 2-D or whose shape does not make
/// `out.len()` bytes, an unknown token, or a literal or reference outside the stream;
/// messages name the cell and the stream offset.
pub fn decompress_into(src: &[u8], out: &mut [u8], side: u8) -> Result<(), String> {
    let side = match side {
        4 | 8 => side as usize,
        other => return Err(format!("ndlz: cell side {other} (NDLZ has 4 and 8)")),
    };
    let header = src
        .get(..9)
        .ok_or_else(|| format!("ndlz: a stream of {} bytes has no header", src.len()))?;
    if header[0] != 2 {
        return Err(format!(
            "ndlz: {} dimensions in the header (NDLZ codes 2)",
            header[0]
        ));
    }
    let dim = |at: usize| i32::from_le_bytes([src[at], src[at + 1], src[at + 2], src[at + 3]]);
    let (rows, cols) = (dim(1), dim(5));
    if rows < 0 || cols < 0 || rows as u64 * cols as u64 != out.len() as u64 {
        return Err(format!(
            "ndlz: a block of {rows} x {cols} bytes in the header, {} expected",
            out.len()
        ));
    }
    let (rows, cols) = (rows as usize, cols as usize);
    if side == 4 {
        decode_cells::<4>(src, out, rows, cols)
    } else {
        decode_cells::<8>(src, out, rows, cols)
    }
}

/// The cells of a `rows` × `cols` block of side `SIDE`, after the header, into `out`.
/// Whole cells are copied a row of `SIDE` bytes at a time (a fixed size: one load and
/// store, where a row of run-time length was a `memcpy` call).
fn decode_cells<const SIDE: usize>(
    src: &[u8],
    out: &mut [u8],
    rows: usize,
    cols: usize,
) -> Result<(), String> {
    let mut cells = Cells {
        src,
        pos: 9,
        local: [0; 64],
    };
    for ci in 0..rows.div_ceil(SIDE) {
        for cj in 0..cols.div_ceil(SIDE) {
            let h = SIDE.min(rows - ci * SIDE);
            let w = SIDE.min(cols - cj * SIDE);
            let at = cells.pos;
            let n = h * w;
            let found = if SIDE == 4 {
                cells.next4(n)
            } else {
                cells.next8(n)
            }
            .map_err(|bad| {
                format!(
                    "ndlz: cell ({ci}, {cj}), token at offset {at}: {}",
                    bad.message(src.len())
                )
            })?;
            let first = ci * SIDE * cols + cj * SIDE;
            // The cell's rows in the output: row `r` at `r * cols`.
            let dst = &mut out[first..first + (h - 1) * cols + w];
            if h == SIDE && w == SIDE {
                let cell: &[u8] = match found {
                    CellBytes::Same(v) => {
                        for r in 0..SIDE {
                            dst[r * cols..r * cols + SIDE].fill(v);
                        }
                        continue;
                    }
                    CellBytes::Stream(from) => &src[from..from + SIDE * SIDE],
                    CellBytes::Local => &cells.local[..SIDE * SIDE],
                };
                for (r, row) in cell.as_chunks::<SIDE>().0.iter().enumerate() {
                    dst[r * cols..r * cols + SIDE].copy_from_slice(row);
                }
            } else {
                // A partial cell: `h` rows of `w` bytes, one after the other.
                let cell: &[u8] = match found {
                    CellBytes::Same(v) => {
                        for r in 0..h {
                            dst[r * cols..r * cols + w].fill(v);
                        }
                        continue;
                    }
                    CellBytes::Stream(from) => &src[from..from + n],
                    CellBytes::Local => &cells.local[..],
                };
                for (r, row) in cell.chunks_exact(w).take(h).enumerate() {
                    dst[r * cols..r * cols + w].copy_from_slice(row);
                }
            }
        }
    }
    Ok(())
}

/// Where a cell's bytes are once its token is read.
enum CellBytes {
    /// In the stream, from this offset (checked to hold the cell).
    Stream(usize),
    /// Every byte this value.
    Same(u8),
    /// In `Cells::local`.
    Local,
}

/// The stream as it is read, cell by cell.
struct Cells<'a> {
    src: &'a [u8],
    /// Offset of the next token.
    pos: usize,
    /// A cell assembled from rows at references and literal rows (rows of `side` bytes);
    /// kept from cell to cell, as C-Blosc2 keeps its buffer.
    local: [u8; 64],
}

/// What was wrong with a stream, kept small (its message is made once, by
/// [`Bad::message`]): a `Result` of it stays in registers in the cell loop, where one
/// holding a `String` went through the stack.
#[derive(Debug, Clone, Copy)]
enum Bad {
    /// `n` bytes at offset `at` were needed.
    Short { at: usize, n: usize },
    /// A reference `back` bytes back from offset `base`.
    Back { base: usize, back: u16 },
    /// An unknown token.
    Token(u8),
    /// A row match of `rows` rows from row `first` that leaves the cell.
    Rows { first: u8, rows: u8 },
}

impl Bad {
    /// The message, for a stream of `len` bytes.
    fn message(self, len: usize) -> String {
        match self {
            Bad::Short { at, n } => format!("{n} bytes at offset {at} of a stream of {len} bytes"),
            Bad::Back { base, back } => {
                format!("a reference {back} bytes back from offset {base}")
            }
            Bad::Token(t) => format!("invalid token {t:#04x}"),
            Bad::Rows { first, rows } => {
                format!("rows {first}.. of a {rows}-row match leave the cell")
            }
        }
    }
}

impl<'a> Cells<'a> {
    /// `n` bytes at `at` of the stream.
    #[inline(always)]
    fn bytes(&self, at: usize, n: usize) -> Result<&'a [u8], Bad> {
        let src: &'a [u8] = self.src;
        at.checked_add(n)
            .and_then(|end| src.get(at..end))
            .ok_or(Bad::Short { at, n })
    }

    /// The next `n` bytes of the stream, consumed.
    #[inline(always)]
    fn take(&mut self, n: usize) -> Result<&'a [u8], Bad> {
        let b = self.bytes(self.pos, n)?;
        self.pos += n;
        Ok(b)
    }

    /// The next little-endian `u16`, consumed.
    #[inline(always)]
    fn offset(&mut self) -> Result<u16, Bad> {
        let b = self.take(2)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }

    /// The stream offset `base - back`, where a reference lands.
    #[inline(always)]
    fn back(base: usize, back: u16) -> Result<usize, Bad> {
        base.checked_sub(back.into())
            .ok_or(Bad::Back { base, back })
    }

    /// The cell of `n` bytes for a token that both sides share (literal, one value, cell
    /// match), the token at `at` having been read.
    #[inline(always)]
    fn common(&mut self, token: u8, at: usize, n: usize) -> Result<CellBytes, Bad> {
        Ok(match token {
            0 => {
                let from = self.pos;
                self.take(n)?;
                CellBytes::Stream(from)
            }
            0x40 => CellBytes::Same(self.take(1)?[0]),
            _ => {
                let from = Self::back(at, self.offset()?)?;
                self.bytes(from, n)?;
                CellBytes::Stream(from)
            }
        })
    }

    /// Copies rows `rows` (of `w` bytes, consecutive in the stream at `from`) into
    /// `local`.
    #[inline(always)]
    fn rows_from(&mut self, from: usize, rows: &[usize], w: usize) -> Result<(), Bad> {
        let r = self.bytes(from, rows.len() * w)?;
        for (k, &row) in rows.iter().enumerate() {
            self.local[row * w..row * w + w].copy_from_slice(&r[k * w..k * w + w]);
        }
        Ok(())
    }

    /// Fills the rows of `local` (side `w`) that `matched` leaves out from literal rows
    /// that follow in the stream, in row order.
    #[inline(always)]
    fn literal_rows(&mut self, matched: impl Fn(usize) -> bool, w: usize) -> Result<(), Bad> {
        for row in (0..w).filter(|&r| !matched(r)) {
            let lit = self.take(w)?;
            self.local[row * w..row * w + w].copy_from_slice(lit);
        }
        Ok(())
    }

    /// Reads the next cell of side 4 (`n` bytes).
    #[inline(always)]
    fn next4(&mut self, n: usize) -> Result<CellBytes, Bad> {
        let at = self.pos;
        let token = self.take(1)?[0];
        match token {
            0 | 0x40 | 0xC0 => return self.common(token, at, n),
            0xE0..=0xFF => {
                let rows: [usize; 3] = match token >> 3 {
                    28 => [1, 2, 3],
                    29 => [0, 1, 2],
                    30 => [0, 1, 3],
                    _ => [0, 2, 3],
                };
                let off = self.offset()?.wrapping_add(3);
                self.rows_from(Self::back(at + 3, off)?, &rows, 4)?;
                self.literal_rows(|r| rows.contains(&r), 4)?;
            }
            0x80..=0xBF => {
                let t = usize::from(token - 0x80);
                let (i, j) = if t == 0 {
                    (2, 3)
                } else {
                    (t >> 5, (t >> 3) - 4 * (t >> 5))
                };
                let off = self.offset()?.wrapping_add(3);
                self.rows_from(Self::back(at + 3, off)?, &[i, j], 4)?;
                self.literal_rows(|r| r == i || r == j, 4)?;
            }
            0x28..=0x3F => {
                let j = usize::from(token - 0x20) >> 3;
                let off1 = self.offset()?.wrapping_add(5);
                let off2 = self.offset()?.wrapping_add(5);
                // The two rows other than 0 and `j`, in order.
                let (l, m) = match j {
                    1 => (2, 3),
                    2 => (1, 3),
                    _ => (1, 2),
                };
                self.rows_from(Self::back(at + 5, off1)?, &[0, j], 4)?;
                self.rows_from(Self::back(at + 5, off2)?, &[l, m], 4)?;
            }
            _ => return Err(Bad::Token(token)),
        }
        Ok(CellBytes::Local)
    }

    /// Reads the next cell of side 8 (`n` bytes).
    #[inline(always)]
    fn next8(&mut self, n: usize) -> Result<CellBytes, Bad> {
        let at = self.pos;
        let token = self.take(1)?[0];
        let rows = match token {
            0 | 0x40 | 0xC0 => return self.common(token, at, n),
            _ => match token >> 3 {
                21 => 3,
                17 => 2,
                _ => return Err(Bad::Token(token)),
            },
        };
        let first = token & 7;
        if first + rows > 8 {
            return Err(Bad::Rows { first, rows });
        }
        let off = self.offset()?;
        let matched = usize::from(first)..usize::from(first + rows);
        let all = [0, 1, 2, 3, 4, 5, 6, 7];
        self.rows_from(Self::back(at, off)?, &all[matched.clone()], 8)?;
        self.literal_rows(|r| matched.contains(&r), 8)?;
        Ok(CellBytes::Local)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stream header for a `rows` × `cols` block.
    fn header(rows: i32, cols: i32) -> Vec<u8> {
        let mut s = vec![2];
        s.extend_from_slice(&rows.to_le_bytes());
        s.extend_from_slice(&cols.to_le_bytes());
        s
    }

    #[test]
    fn literal_one_value_and_matched_cells_fill_a_block_with_partial_cells() {
        // A 5 x 6 block in cells of 4: cells (0,0) 4x4, (0,1) 4x2, (1,0) 1x4, (1,1) 1x2.
        let mut s = header(5, 6);
        s.push(0);
        s.extend(0..16u8);
        s.extend([0x40, 7]);
        // Cell (1,0): the first 4 bytes of cell (0,0)'s literal, 10 bytes back.
        let at = s.len();
        s.push(0xC0);
        s.extend(((at - 10) as u16).to_le_bytes());
        s.extend([0, 200, 201]);
        let mut out = vec![0xAA; 30];
        decompress_into(&s, &mut out, 4).unwrap();
        let want: Vec<u8> = [
            [0, 1, 2, 3, 7, 7],
            [4, 5, 6, 7, 7, 7],
            [8, 9, 10, 11, 7, 7],
            [12, 13, 14, 15, 7, 7],
            [0, 1, 2, 3, 200, 201],
        ]
        .concat();
        assert_eq!(out, want);
    }

    #[test]
    fn row_matches_take_rows_from_earlier_literals() {
        // An 8 x 4 block in cells of 4: a literal cell, then a cell whose rows 1 and 3
        // are the first one's rows 0 and 1 (token 0x80 | 1 << 5 | 3 << 3 = 0xB8) and
        // whose rows 0 and 2 are literal.
        let mut s = header(8, 4);
        s.push(0);
        s.extend(0..16u8);
        let at = s.len();
        s.push(0xB8);
        // The reference is `at + 3 - (offset + 3)`: the literal's start, 10.
        s.extend(((at - 10) as u16).to_le_bytes());
        s.extend([90, 91, 92, 93, 94, 95, 96, 97]);
        let mut out = vec![0; 32];
        decompress_into(&s, &mut out, 4).unwrap();
        assert_eq!(
            &out[16..],
            &[90, 91, 92, 93, 0, 1, 2, 3, 94, 95, 96, 97, 4, 5, 6, 7]
        );
    }

    #[test]
    fn bad_streams_are_errors() {
        let mut out = vec![0; 16];
        let mut ok = header(4, 4);
        ok.extend([0x40, 1]);
        decompress_into(&ok, &mut out, 4).unwrap();
        assert_eq!(out, [1; 16]);
        let cases: Vec<(Vec<u8>, u8, &str)> = vec![
            (ok.clone(), 5, "cell side 5"),
            (ok[..8].to_vec(), 4, "no header"),
            ([&[3][..], &ok[1..]].concat(), 4, "3 dimensions"),
            (header(4, 5), 4, "4 x 5"),
            (header(-4, -4), 4, "-4 x -4"),
            (
                [header(4, 4), vec![0x41, 0]].concat(),
                4,
                "invalid token 0x41",
            ),
            (
                [header(4, 4), vec![0, 1, 2]].concat(),
                4,
                "16 bytes at offset 10",
            ),
            (
                [header(4, 4), vec![0xC0, 20, 0]].concat(),
                4,
                "20 bytes back from offset 9",
            ),
            (
                [header(4, 4), vec![0xC0, 2, 0]].concat(),
                4,
                "16 bytes at offset 7",
            ),
            (
                [header(4, 4), vec![0x40]].concat(),
                4,
                "1 bytes at offset 10",
            ),
            ([header(4, 4)].concat(), 4, "cell (0, 0)"),
        ];
        for (s, side, want) in cases {
            let e = decompress_into(&s, &mut out, side).unwrap_err();
            assert!(e.contains(want), "{want}: {e}");
        }
        // Side 8: a triple match that leaves the cell, and a truncated literal row.
        let mut out = vec![0; 64];
        let e = decompress_into(&[header(8, 8), vec![0xAE, 0, 0]].concat(), &mut out, 8);
        assert!(e.unwrap_err().contains("leave the cell"));
        let mut s = header(8, 8);
        s.push(0);
        s.extend([5; 64]);
        let at = s.len();
        s.push(0x88);
        s.extend(((at - 10) as u16).to_le_bytes());
        s.extend([1; 40]);
        let mut out = vec![0; 128];
        let e = decompress_into(&[header(16, 8), s[9..].to_vec()].concat(), &mut out, 8);
        assert!(
            e.unwrap_err().contains("8 bytes at offset"),
            "truncated literal"
        );
        s.extend([1; 8]);
        decompress_into(&[header(16, 8), s[9..].to_vec()].concat(), &mut out, 8).unwrap();
        assert_eq!(&out[64..80], &[5; 16]);
        assert_eq!(&out[80..], &[1; 48]);
    }
}
