//! ZFP, the lossy float codec python-blosc2 offers for b2nd arrays (Blosc2 codecs 33–35:
//! `ZFP_ACC`, `ZFP_PREC`, `ZFP_RATE`): each Blosc2 block is one ZFP stream of a float32 or
//! float64 field shaped like the array's block (1–4 dimensions), without a ZFP header.
//! `spec/codecs.md` §1 only lists these codecs as plugins; this module is their format,
//! checked bit for bit against python-blosc2 4.14.1's decoding.
//!
//! - The stream is read least significant bit first. The field is cut into cells of 4^d
//!   values, partial at the far end of a dimension; cells follow C order, the last
//!   dimension fastest.
//! - A cell is one bit (0: all zeros), then its common exponent (8 bits for float32, 11
//!   for float64, biased), then its integer coefficients coded by bit plane, most
//!   significant first, with group tests, in the order of increasing sequency
//!   (`PERMUTATIONS`).
//! - Decoding reverses the negabinary map, the decorrelating lifting transform along each
//!   dimension (outermost first) and the block-floating-point scaling.
//! - The codec's meta byte only changes how many bits and planes a cell holds
//!   (`ZfpParams`): an absolute error of 10^meta (meta as `i8`), meta + 3 + 2·d planes,
//!   or meta percent of the input's bits per cell (fixed rate, at least 1 + the exponent
//!   bits).

/// How a ZFP chunk was compressed: the codec and its meta byte (`compcode_meta`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ZfpMode {
    /// Codec 33: an absolute error of at most 10^meta (meta read as `i8`).
    Accuracy(i8),
    /// Codec 34: `meta` bit planes beyond what the dimensions need.
    Precision(u8),
    /// Codec 35: `meta` percent of the input's bits.
    Rate(u8),
}

impl ZfpMode {
    /// The mode of Blosc2 codec `compcode` with meta byte `meta`; `None` for other codecs.
    pub fn of(compcode: u8, meta: u8) -> Option<Self> {
        match compcode {
            33 => Some(ZfpMode::Accuracy(meta as i8)),
            34 => Some(ZfpMode::Precision(meta)),
            35 => Some(ZfpMode::Rate(meta)),
            _ => None,
        }
    }

    /// Blosc2's name of the codec.
    pub fn name(self) -> &'static str {
        match self {
            ZfpMode::Accuracy(_) => "zfp_acc",
            ZfpMode::Precision(_) => "zfp_prec",
            ZfpMode::Rate(_) => "zfp_rate",
        }
    }
}

/// The shape of the field one Blosc2 block holds: the b2nd array's block shape, outermost
/// dimension first (1 to 4 dimensions).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ZfpBlockShape {
    ndim: usize,
    /// Extents, the last dimension fastest; unused entries are 1.
    dims: [usize; 4],
}

impl ZfpBlockShape {
    /// The block shape `shape` (C order), if ZFP can hold it: 1 to 4 dimensions, none 0.
    fn new(shape: &[u64]) -> Option<Self> {
        if shape.is_empty() || shape.len() > 4 || shape.contains(&0) {
            return None;
        }
        let mut dims = [1usize; 4];
        for (d, &s) in dims.iter_mut().zip(shape) {
            *d = usize::try_from(s).ok()?;
        }
        Some(ZfpBlockShape {
            ndim: shape.len(),
            dims,
        })
    }

    /// Values in the field.
    fn values(&self) -> Option<usize> {
        self.dims[..self.ndim]
            .iter()
            .try_fold(1usize, |n, &d| n.checked_mul(d))
    }
}

/// The bit budget and precision limits of a stream, as ZFP's `zfp_stream_set_accuracy`,
/// `…_precision` and `…_rate` set them for what the Blosc2 codec asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ZfpParams {
    /// Bits a cell takes at least (fixed rate: exactly).
    minbits: i64,
    /// Bits a cell takes at most.
    maxbits: i64,
    /// Bit planes coded at most.
    maxprec: u32,
    /// Smallest exponent of a coded bit (accuracy).
    minexp: i32,
}

/// ZFP's limits: bits per cell, bit planes, smallest float64 exponent.
const MIN_BITS: i64 = 1;
const MAX_BITS: i64 = 16658;
const MAX_PREC: u32 = 64;
const MIN_EXP: i32 = -1074;

impl ZfpParams {
    fn of(mode: ZfpMode, typesize: usize, ndim: usize) -> Self {
        let (ebits, _) = exponent_bits(typesize);
        match mode {
            ZfpMode::Accuracy(k) => {
                // The tolerance 10^k (k in −128..=127: a normal, finite float64); the
                // exponent of the power of two at or below it.
                let tolerance = 10f64.powi(k.into());
                let exponent = ((tolerance.to_bits() >> 52) & 0x7ff) as i32 - 1023;
                ZfpParams {
                    minbits: MIN_BITS,
                    maxbits: MAX_BITS,
                    maxprec: MAX_PREC,
                    minexp: exponent,
                }
            }
            ZfpMode::Precision(p) => ZfpParams {
                minbits: MIN_BITS,
                maxbits: MAX_BITS,
                maxprec: (u32::from(p) + 3 + 2 * ndim as u32).min(MAX_PREC),
                minexp: MIN_EXP,
            },
            ZfpMode::Rate(percent) => {
                let rate = f64::from(percent) / 100.0 * typesize as f64 * 8.0;
                let cell = (1usize << (2 * ndim)) as f64;
                let bits = ((cell * rate + 0.5).floor() as i64).max(1 + ebits as i64);
                ZfpParams {
                    minbits: bits,
                    maxbits: bits,
                    maxprec: MAX_PREC,
                    minexp: MIN_EXP,
                }
            }
        }
    }
}

/// Exponent bits and bias of a cell's common exponent, by typesize (4 or 8).
fn exponent_bits(typesize: usize) -> (u32, i32) {
    if typesize == 4 { (8, 127) } else { (11, 1023) }
}

/// The coefficient orders of cells of 1–4 dimensions, by increasing sequency (sum of the
/// coordinates, then of their squares, ties as ZFP orders them): coordinates of each
/// coefficient as digits, the first dimension (x, fastest) first.
const PERMUTATIONS: [&str; 3] = [
    // 2-D
    "00 10 01 11 20 02 21 12 30 03 22 31 13 32 23 33",
    // 3-D
    "000 100 010 001 011 101 110 200 020 002 111 210 201 021 120 102 012 300 030 003 \
     211 121 112 022 202 220 310 301 031 130 103 013 122 212 221 311 131 113 320 302 \
     032 230 203 023 222 321 312 132 231 213 123 033 303 330 322 232 223 133 313 331 \
     233 323 332 333",
    // 4-D
    "0000 1000 0100 0010 0001 1100 0011 1010 0101 1001 0110 2000 0200 0020 0002 0111 \
     1011 1101 1110 2100 2010 2001 0210 0201 1200 0021 1020 0120 1002 0102 0012 3000 \
     0300 0030 0003 1111 2011 2101 2110 1201 1210 0211 1120 0121 1021 0112 1012 1102 \
     2200 0022 2020 0202 2002 0220 3100 3010 3001 0310 0301 1300 0031 1030 0130 1003 \
     0103 0013 2111 1211 1121 1112 1022 1202 1220 2102 2120 0122 2210 0212 2012 0221 \
     2021 2201 3011 3101 3110 1301 1310 0311 1130 0131 1031 0113 1013 1103 3200 3020 \
     3002 0320 0302 2300 0032 2030 0230 2003 0203 0023 2211 1122 2121 1212 2112 1221 \
     0222 2022 2202 2220 3111 1311 1131 1113 3210 3201 3021 3120 3102 3012 0321 1320 \
     1302 0312 2310 2301 1032 0132 2130 2031 0231 1230 2103 2013 0213 1203 1023 0123 \
     3300 0033 3030 0303 3003 0330 1222 2122 2212 2221 3211 3121 3112 1321 1312 2311 \
     1132 2131 1231 2113 1213 1123 3022 3202 3220 2302 2320 0322 2230 0232 2032 0223 \
     2023 2203 1033 1303 1330 3103 3130 0133 3310 0313 3013 0331 3031 3301 2222 3122 \
     3212 3221 2312 2321 1322 2231 1232 2132 1223 2123 2213 3311 1133 3131 1313 3113 \
     1331 2033 2303 2330 3203 3230 0233 3320 0323 3023 0332 3032 3302 3222 2322 2232 \
     2223 2133 2313 2331 3213 3231 1233 3321 1323 3123 1332 3132 3312 0333 3033 3303 \
     3330 3322 2233 3232 2323 3223 2332 1333 3133 3313 3331 2333 3233 3323 3332 3333",
];

/// The coefficient order of a cell of `ndim` dimensions: position `i` of the coded
/// sequence goes to index `order[i]` of the cell (x fastest).
fn permutation(ndim: usize) -> Vec<usize> {
    if ndim == 1 {
        return (0..4).collect();
    }
    PERMUTATIONS[ndim - 2]
        .split_whitespace()
        .map(|c| {
            c.bytes()
                .rev()
                .fold(0, |at, digit| at * 4 + usize::from(digit - b'0'))
        })
        .collect()
}

/// The orders of 2-, 3- and 4-D cells, made once.
fn permutations() -> &'static [Vec<usize>; 4] {
    static ORDERS: std::sync::OnceLock<[Vec<usize>; 4]> = std::sync::OnceLock::new();
    ORDERS.get_or_init(|| {
        [
            permutation(1),
            permutation(2),
            permutation(3),
            permutation(4),
        ]
    })
}

/// A ZFP bit stream: least significant bit of each byte first, read through a 64-bit
/// buffer. Reads past the end give zeros; [`BitReader::overran`] says whether any did
/// (every loop of the decoder is bounded by its bit budget and the field's size, so none
/// runs on).
struct BitReader<'a> {
    src: &'a [u8],
    /// Bytes moved into `buf` so far (past the end: zeros).
    loaded: usize,
    /// The next `avail` bits, the next one in bit 0; the bits above are zero.
    buf: u64,
    avail: u32,
}

impl<'a> BitReader<'a> {
    fn new(src: &'a [u8]) -> Self {
        BitReader {
            src,
            loaded: 0,
            buf: 0,
            avail: 0,
        }
    }

    /// Tops the buffer up to 56–63 bits.
    #[inline]
    fn refill(&mut self) {
        let word = match self.src.get(self.loaded..self.loaded + 8) {
            Some(b) => u64::from_le_bytes(b.try_into().expect("8 bytes")),
            None => {
                let mut tail = [0u8; 8];
                let rest = self.src.get(self.loaded..).unwrap_or(&[]);
                tail[..rest.len()].copy_from_slice(rest);
                u64::from_le_bytes(tail)
            }
        };
        self.buf |= word << self.avail;
        self.loaded += ((63 - self.avail) >> 3) as usize;
        self.avail |= 56;
    }

    /// At least 56 of the next bits (more may be zero beyond `avail`): the buffer.
    #[inline]
    fn peek(&mut self) -> u64 {
        if self.avail < 56 {
            self.refill();
        }
        self.buf
    }

    /// Drops `n` bits (at most the `avail` ones).
    #[inline]
    fn consume(&mut self, n: u32) {
        debug_assert!(n <= self.avail);
        self.buf = if n >= 64 { 0 } else { self.buf >> n };
        self.avail -= n;
    }

    #[inline]
    fn bit(&mut self) -> bool {
        if self.avail == 0 {
            self.refill();
        }
        let b = self.buf & 1;
        self.buf >>= 1;
        self.avail -= 1;
        b != 0
    }

    /// The next `n` (≤ 56) bits, the first read in bit 0.
    #[inline]
    fn bits(&mut self, n: u32) -> u64 {
        debug_assert!(n <= 56);
        let v = self.peek() & ((1u64 << n) - 1);
        self.consume(n);
        v
    }

    /// Position in bits.
    fn position(&self) -> usize {
        self.loaded * 8 - self.avail as usize
    }

    fn skip(&mut self, n: i64) {
        if n > 0 && n <= i64::from(self.avail) {
            self.consume(n as u32);
        } else if n > 0 {
            let to = self.position().saturating_add(n as usize);
            self.loaded = to / 8;
            self.buf = 0;
            self.avail = 0;
            self.peek();
            self.consume((to % 8) as u32);
        }
    }

    fn overran(&self) -> bool {
        self.position() > self.src.len().saturating_mul(8)
    }
}

/// The integer type of a float's coefficients (`i32` for float32, `i64` for float64),
/// with ZFP's reversible integer steps.
trait Coefficient: Copy + Default {
    /// Bits of the type.
    const BITS: u32;
    /// Bytes of the float type.
    const BYTES: usize;
    /// The unsigned pattern of the same width.
    type Bits: Pattern;
    /// Maps a negabinary bit pattern (as `u64`, the type's low bits) to the integer.
    fn from_negabinary(u: u64) -> Self;
    /// The inverse lifting step on four values.
    fn inv_lift(v: [Self; 4]) -> [Self; 4];
    /// The value as the float type, scaled by the power of two `scale` (exactly as the
    /// C library computes `(Scalar)(s * x)`), written little-endian into `out`.
    fn write_scaled(self, scale: f64, out: &mut [u8]);
    /// 2^e in the float type (0 below its smallest subnormal, infinity above its range),
    /// as an `f64` holding it exactly.
    fn power_of_two(e: i32) -> f64;
}

macro_rules! coefficient {
    ($int:ty, $uint:ty, $float:ty, $mask:expr, $min_sub:expr, $max:expr) => {
        impl Coefficient for $int {
            const BITS: u32 = <$int>::BITS;
            const BYTES: usize = <$int>::BITS as usize / 8;
            type Bits = $uint;

            #[inline]
            fn from_negabinary(u: u64) -> Self {
                let u = u as $uint;
                (u ^ $mask).wrapping_sub($mask) as $int
            }

            #[inline]
            fn inv_lift([mut x, mut y, mut z, mut w]: [Self; 4]) -> [Self; 4] {
                y = y.wrapping_add(w >> 1);
                w = w.wrapping_sub(y >> 1);
                y = y.wrapping_add(w);
                w = w.wrapping_shl(1).wrapping_sub(y);
                z = z.wrapping_add(x);
                x = x.wrapping_shl(1).wrapping_sub(z);
                y = y.wrapping_add(z);
                z = z.wrapping_shl(1).wrapping_sub(y);
                w = w.wrapping_add(x);
                x = x.wrapping_shl(1).wrapping_sub(w);
                [x, y, z, w]
            }

            #[inline]
            fn write_scaled(self, scale: f64, out: &mut [u8]) {
                // `scale` holds a power of two of the float type exactly.
                let v = (self as $float) * (scale as $float);
                out.copy_from_slice(&v.to_le_bytes());
            }

            fn power_of_two(e: i32) -> f64 {
                if e < $min_sub {
                    0.0
                } else if e > $max {
                    f64::INFINITY
                } else {
                    exact_power_of_two(e)
                }
            }
        }
    };
}

coefficient!(i32, u32, f32, 0xaaaa_aaaau32, -149, 127);
coefficient!(i64, u64, f64, 0xaaaa_aaaa_aaaa_aaaau64, -1074, 1023);

/// 2^e as an `f64`, exactly, for e in −1074..=1023 (subnormals included).
fn exact_power_of_two(e: i32) -> f64 {
    if e >= -1022 {
        f64::from_bits(((e + 1023) as u64) << 52)
    } else {
        f64::from_bits(1u64 << (e + 1074))
    }
}

/// A coefficient's bit pattern while its planes are decoded: `u32` for float32 cells (four
/// to a 128-bit register when planes are deposited), `u64` for float64.
trait Pattern: Copy + Default {
    /// For each 4-bit piece of a plane, the four coefficients' masks: all ones where the
    /// piece's bit is set.
    const SPREAD: [[Self; 4]; 16];
    /// Bit `k` set.
    fn bit(k: u32) -> Self;
    fn or(self, other: Self) -> Self;
    fn and(self, other: Self) -> Self;
    fn widen(self) -> u64;
}

/// [`Pattern::SPREAD`] for a type whose all-ones value is `ones`.
macro_rules! spread {
    ($ones:expr) => {{
        let mut t = [[0; 4]; 16];
        let mut piece = 0;
        while piece < 16 {
            let mut j = 0;
            while j < 4 {
                if piece & (1 << j) != 0 {
                    t[piece][j] = $ones;
                }
                j += 1;
            }
            piece += 1;
        }
        t
    }};
}

macro_rules! pattern {
    ($t:ty) => {
        impl Pattern for $t {
            const SPREAD: [[Self; 4]; 16] = spread!(<$t>::MAX);
            #[inline]
            fn bit(k: u32) -> Self {
                1 << k
            }
            #[inline]
            fn or(self, other: Self) -> Self {
                self | other
            }
            #[inline]
            fn and(self, other: Self) -> Self {
                self & other
            }
            #[inline]
            fn widen(self) -> u64 {
                self.into()
            }
        }
    };
}

pattern!(u32);
pattern!(u64);

/// Decodes one cell's integer coefficients, bit plane by bit plane, into `data` (as
/// unsigned patterns), within a budget of `maxbits` bits and `maxprec` planes. Returns
/// the bits read. Each plane is gathered in `W` words (64 coefficients a word: 1 for
/// cells of up to 3 dimensions, 4 for 4-D cells of 256), then deposited without branches.
fn decode_ints<P: Pattern, const W: usize>(
    r: &mut BitReader,
    maxbits: i64,
    maxprec: u32,
    intprec: u32,
    data: &mut [P],
) -> i64 {
    let size = data.len();
    debug_assert!(size <= 64 * W && size.is_multiple_of(4));
    data.fill(P::default());
    let kmin = intprec.saturating_sub(maxprec);
    let mut bits = maxbits.max(0);
    let mut k = intprec;
    let mut n = 0usize;
    while bits > 0 && k > kmin {
        k -= 1;
        // The first n coefficients, already significant: one verbatim bit each.
        let m = (n as i64).min(bits) as usize;
        bits -= m as i64;
        let mut plane = [0u64; W];
        let mut i = 0;
        while i < m {
            let take = (m - i).min(56);
            let word = r.bits(take as u32);
            let (at, shift) = (i / 64, i % 64);
            plane[at] |= word << shift;
            if shift + take > 64 {
                // (Only for W > 1: a cell of up to 64 coefficients has m <= 64.)
                if let Some(next) = plane.get_mut(at + 1) {
                    *next |= word >> (64 - shift);
                }
            }
            i += take;
        }
        // The rest by group tests: a 1 says another coefficient becomes significant,
        // found by a unary run; a 0 ends the plane.
        while bits > 0 && n < size {
            bits -= 1;
            if !r.bit() {
                break;
            }
            // Up to `left` zeros, then (unless they ran out) the one that ends the run.
            let mut left = bits.min((size - 1 - n) as i64);
            while left > 0 {
                let window = left.min(56) as u32;
                let zeros = r.peek().trailing_zeros();
                if zeros < window {
                    r.consume(zeros + 1);
                    n += zeros as usize;
                    bits -= i64::from(zeros) + 1;
                    break;
                }
                r.consume(window);
                n += window as usize;
                bits -= i64::from(window);
                left -= i64::from(window);
            }
            plane[n / 64] |= 1u64 << (n % 64);
            n += 1;
        }
        // Four coefficients at a time, their masks looked up by the plane's 4 bits (cells
        // hold a multiple of 4; bits at n and above are zero).
        let bit = P::bit(k);
        for (g, quad) in data[..n.div_ceil(4) * 4].chunks_exact_mut(4).enumerate() {
            let spread = &P::SPREAD[((plane[g / 16] >> (4 * (g % 16))) & 15) as usize];
            for (d, &m) in quad.iter_mut().zip(spread) {
                *d = d.or(m.and(bit));
            }
        }
    }
    maxbits.max(0) - bits
}

/// Decodes one cell of `ndim` dimensions into `coefs` (4^ndim integers, x fastest) and
/// returns the power of two that scales them to the float type; `None` for a cell of
/// zeros.
fn decode_cell<C: Coefficient>(
    r: &mut BitReader,
    p: &ZfpParams,
    ndim: usize,
    ints: &mut [C::Bits],
    coefs: &mut [C],
) -> Option<f64> {
    let mut bits: i64 = 1;
    if !r.bit() {
        if p.minbits > bits {
            r.skip(p.minbits - bits);
        }
        return None;
    }
    let (ebits, bias) = exponent_bits(C::BYTES);
    bits += i64::from(ebits);
    let emax = r.bits(ebits) as i32 - bias;
    let planes = (emax - p.minexp + 2 * ndim as i32 + 2).max(0) as u32;
    let maxprec = p.maxprec.min(planes);
    let budget = p.maxbits - bits;
    let used = if ndim < 4 {
        decode_ints::<C::Bits, 1>(r, budget, maxprec, C::BITS, ints)
    } else {
        decode_ints::<C::Bits, 4>(r, budget, maxprec, C::BITS, ints)
    };
    if used < p.minbits - bits {
        r.skip(p.minbits - bits - used);
    }
    let order = &permutations()[ndim - 1];
    for (&u, &at) in ints.iter().zip(order) {
        coefs[at] = C::from_negabinary(u.widen());
    }
    // The inverse transform along each dimension, the outermost (largest stride) first.
    for axis in (0..ndim).rev() {
        let stride = 1usize << (2 * axis);
        for group in coefs.chunks_exact_mut(4 * stride) {
            let (a, rest) = group.split_at_mut(stride);
            let (b, rest) = rest.split_at_mut(stride);
            let (c, d) = rest.split_at_mut(stride);
            for (((x, y), z), w) in a.iter_mut().zip(b).zip(c).zip(d) {
                [*x, *y, *z, *w] = C::inv_lift([*x, *y, *z, *w]);
            }
        }
    }
    Some(C::power_of_two(emax - (C::BITS as i32 - 2)))
}

/// Decodes the cells of a field of extents `ext` (x first) into `out`, C order.
///
/// Never inlined, nor is [`decompress_into`]: once ZFP went through the codec dispatcher,
/// the float32 rows lost 5–8 % of their speed to how the instances were inlined into it;
/// kept apart, they run as before or faster (session 54 in `benches/README.md`).
#[inline(never)]
fn decode_field<C: Coefficient>(
    r: &mut BitReader,
    p: &ZfpParams,
    ndim: usize,
    ext: [usize; 4],
    out: &mut [u8],
) -> Result<(), String> {
    let size = 1usize << (2 * ndim);
    let ts = C::BYTES;
    let cells = ext.map(|e| e.div_ceil(4));
    let mut ints = vec![C::Bits::default(); size];
    let mut coefs = vec![C::default(); size];
    for cw in 0..cells[3] {
        for cz in 0..cells[2] {
            for cy in 0..cells[1] {
                for cx in 0..cells[0] {
                    let scale = decode_cell(r, p, ndim, &mut ints, &mut coefs);
                    if r.overran() {
                        return Err(format!(
                            "the stream ({} bytes) ends inside cell ({cw}, {cz}, {cy}, {cx})",
                            r.src.len()
                        ));
                    }
                    let origin = [cx * 4, cy * 4, cz * 4, cw * 4];
                    let n = [0, 1, 2, 3].map(|a| (ext[a] - origin[a]).min(4));
                    for lw in 0..n[3] {
                        for lz in 0..n[2] {
                            for ly in 0..n[1] {
                                let at = ((origin[3] + lw) * ext[2] + origin[2] + lz) * ext[1]
                                    + origin[1]
                                    + ly;
                                let dst = (at * ext[0] + origin[0]) * ts;
                                let row = &mut out[dst..dst + n[0] * ts];
                                let Some(scale) = scale else {
                                    row.fill(0);
                                    continue;
                                };
                                let from = (lw * 16 + lz * 4 + ly) * 4;
                                for (c, o) in coefs[from..from + n[0]]
                                    .iter()
                                    .zip(row.chunks_exact_mut(ts))
                                {
                                    c.write_scaled(scale, o);
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    Ok(())
}

/// Whether ZFP can code fields of the block shape `shape` (C order): 1 to 4 dimensions,
/// none of them 0.
pub fn codes_shape(shape: &[u64]) -> bool {
    ZfpBlockShape::new(shape).is_some()
}

/// Decodes the ZFP stream `src` of one Blosc2 block, a field of `shape` values (the b2nd
/// block shape, C order) of `typesize` 4 (float32) or 8 (float64), into `out` (exactly
/// the field's bytes, C order).
///
/// # Errors
/// A typesize other than 4 or 8, a shape ZFP does not code ([`codes_shape`]), an `out`
/// of another size, or a stream that ends before the field does.
#[inline(never)]
pub fn decompress_into(
    src: &[u8],
    out: &mut [u8],
    mode: ZfpMode,
    typesize: usize,
    shape: &[u64],
) -> Result<(), String> {
    if typesize != 4 && typesize != 8 {
        return Err(format!(
            "typesize {typesize} (ZFP codes float32 and float64 only)"
        ));
    }
    let shape = ZfpBlockShape::new(shape)
        .ok_or_else(|| format!("block shape {shape:?} (ZFP codes 1 to 4 dimensions)"))?;
    let values = shape.values().ok_or("block shape overflows")?;
    if values.checked_mul(typesize) != Some(out.len()) {
        return Err(format!(
            "the block holds {} bytes, its shape {:?} of {typesize}-byte values needs {}",
            out.len(),
            &shape.dims[..shape.ndim],
            values.saturating_mul(typesize)
        ));
    }
    let ndim = shape.ndim;
    let params = ZfpParams::of(mode, typesize, ndim);
    // Dimensions x (fastest) first.
    let mut ext = [1usize; 4];
    for (e, &d) in ext.iter_mut().zip(shape.dims[..ndim].iter().rev()) {
        *e = d;
    }
    let mut r = BitReader::new(src);
    if typesize == 4 {
        decode_field::<i32>(&mut r, &params, ndim, ext, out)
    } else {
        decode_field::<i64>(&mut r, &params, ndim, ext, out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permutations_are_permutations_ordered_by_sequency() {
        for ndim in 1..=4 {
            let order = permutation(ndim);
            let mut seen = order.clone();
            seen.sort_unstable();
            assert_eq!(
                seen,
                (0..1usize << (2 * ndim)).collect::<Vec<_>>(),
                "{ndim}-D"
            );
            let sums: Vec<usize> = order
                .iter()
                .map(|&i| (0..ndim).map(|a| (i >> (2 * a)) & 3).sum())
                .collect();
            assert!(sums.windows(2).all(|w| w[0] <= w[1]), "{ndim}-D");
        }
    }

    #[test]
    fn negabinary_and_lifting_invert_small_cases() {
        // 0b11 in negabinary is -2 + 1 = -1; 0b110 is 4 - 2 = 2.
        assert_eq!(i32::from_negabinary(0b11), -1);
        assert_eq!(i64::from_negabinary(0b110), 2);
        // A constant signal lifts to its DC coefficient alone.
        assert_eq!(i32::inv_lift([8, 0, 0, 0]), [8, 8, 8, 8]);
    }

    #[test]
    fn parameters_follow_the_codec_meta() {
        // 10^-3 lies in [2^-10, 2^-9).
        assert_eq!(ZfpParams::of(ZfpMode::Accuracy(-3), 8, 2).minexp, -10);
        assert_eq!(ZfpParams::of(ZfpMode::Accuracy(0), 4, 1).minexp, 0);
        assert_eq!(ZfpParams::of(ZfpMode::Precision(20), 8, 2).maxprec, 27);
        assert_eq!(ZfpParams::of(ZfpMode::Precision(200), 8, 4).maxprec, 64);
        // 30 % of 64 bits is 19.2 bits a value; 16 values a 2-D cell.
        let rate = ZfpParams::of(ZfpMode::Rate(30), 8, 2);
        assert_eq!((rate.minbits, rate.maxbits), (307, 307));
        assert_eq!(ZfpParams::of(ZfpMode::Rate(0), 4, 1).maxbits, 9);
    }

    #[test]
    fn the_buffered_reader_reads_bits_in_stream_order() {
        // Against the bits taken one by one from the bytes, over mixed reads and skips.
        let src: Vec<u8> = (0..97u32)
            .map(|i| (i.wrapping_mul(0x9E37_79B9) >> 13) as u8)
            .collect();
        let bit_at = |p: usize| src.get(p / 8).is_some_and(|b| (b >> (p % 8)) & 1 == 1);
        let mut r = BitReader::new(&src);
        let mut p = 0usize;
        for step in 0..400usize {
            match step % 5 {
                0 => {
                    assert_eq!(r.bit(), bit_at(p), "step {step}");
                    p += 1;
                }
                1 | 2 => {
                    let n = (step * 7 % 57) as u32;
                    let want =
                        (0..n as usize).fold(0u64, |v, i| v | (u64::from(bit_at(p + i)) << i));
                    assert_eq!(r.bits(n), want, "step {step}");
                    p += n as usize;
                }
                3 => {
                    let zeros = r.peek().trailing_zeros().min(56) as usize;
                    assert!((0..zeros).all(|i| !bit_at(p + i)), "step {step}");
                    r.consume(zeros as u32);
                    p += zeros;
                }
                _ => {
                    r.skip((step % 13) as i64);
                    p += step % 13;
                }
            }
            assert_eq!(r.position(), p);
            assert_eq!(r.overran(), p > src.len() * 8);
        }
    }

    #[test]
    fn truncated_streams_are_refused() {
        let shape = [8, 8];
        let mut out = vec![0u8; 64 * 8];
        // A cell that says it holds values, then nothing.
        let e = decompress_into(&[1], &mut out, ZfpMode::Accuracy(-3), 8, &shape).unwrap_err();
        assert!(e.contains("ends inside cell"), "{e}");
        // All-zero cells take one bit each: 4 cells fit in a byte.
        decompress_into(&[0], &mut out, ZfpMode::Accuracy(-3), 8, &shape).unwrap();
        assert!(out.iter().all(|&b| b == 0));
        let e = decompress_into(&[0], &mut out[8..], ZfpMode::Accuracy(-3), 8, &shape);
        assert!(e.unwrap_err().contains("needs 512"));
    }
}
