//! Shared helpers: fixture paths, hashing, plan text.

use std::path::PathBuf;

/// `tests/fixtures/<rel>`.
pub fn fixture(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(rel)
}

/// `../shared/testdata/c-blosc2/<rel>` (beside the repo, as CI lays it out), or the copy
/// under `tests/fixtures/c-blosc2/` when present.
pub fn c_blosc2(rel: &str) -> PathBuf {
    let local = fixture("c-blosc2").join(rel);
    if local.exists() {
        return local;
    }
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/testdata/c-blosc2")
        .join(rel)
}

/// First 16 hex digits of the sha256 of `data`.
pub fn sha256_16(data: &[u8]) -> String {
    sha256_hex(data)[..16].to_string()
}

/// Hex sha256 (small self-contained implementation, FIPS 180-4).
pub fn sha256_hex(data: &[u8]) -> String {
    const K: [u32; 64] = [
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
        0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
        0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
        0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
        0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
        0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
        0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
        0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
        0xc67178f2,
    ];
    let mut h: [u32; 8] = [
        0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab,
        0x5be0cd19,
    ];
    let mut msg = data.to_vec();
    msg.push(0x80);
    while msg.len() % 64 != 56 {
        msg.push(0);
    }
    msg.extend_from_slice(&((data.len() as u64) * 8).to_be_bytes());
    for block in msg.chunks_exact(64) {
        let mut w = [0u32; 64];
        for i in 0..16 {
            w[i] = u32::from_be_bytes(block[i * 4..i * 4 + 4].try_into().unwrap());
        }
        for i in 16..64 {
            let s0 = w[i - 15].rotate_right(7) ^ w[i - 15].rotate_right(18) ^ (w[i - 15] >> 3);
            let s1 = w[i - 2].rotate_right(17) ^ w[i - 2].rotate_right(19) ^ (w[i - 2] >> 10);
            w[i] = w[i - 16]
                .wrapping_add(s0)
                .wrapping_add(w[i - 7])
                .wrapping_add(s1);
        }
        let mut v = h;
        for i in 0..64 {
            let s1 = v[4].rotate_right(6) ^ v[4].rotate_right(11) ^ v[4].rotate_right(25);
            let ch = (v[4] & v[5]) ^ (!v[4] & v[6]);
            let t1 = v[7]
                .wrapping_add(s1)
                .wrapping_add(ch)
                .wrapping_add(K[i])
                .wrapping_add(w[i]);
            let s0 = v[0].rotate_right(2) ^ v[0].rotate_right(13) ^ v[0].rotate_right(22);
            let maj = (v[0] & v[1]) ^ (v[0] & v[2]) ^ (v[1] & v[2]);
            let t2 = s0.wrapping_add(maj);
            v = [
                t1.wrapping_add(t2),
                v[0],
                v[1],
                v[2],
                v[3].wrapping_add(t1),
                v[4],
                v[5],
                v[6],
            ];
        }
        for (a, b) in h.iter_mut().zip(v) {
            *a = a.wrapping_add(b);
        }
    }
    h.iter().map(|x| format!("{x:08x}")).collect()
}

/// The writers' expected values `tests/fixtures/expected/<name>` (a JSON file).
pub fn expected_json(name: &str) -> serde_json::Value {
    let path = fixture(&format!("expected/{name}"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path:?}: {e}"))
}

/// The plan text of `EXPLAIN <sql>` in `ctx`: the plan column's rows, one per line.
pub async fn explain(ctx: &datafusion::prelude::SessionContext, sql: &str) -> String {
    use datafusion::arrow::array::{Array, AsArray};
    let batches = ctx
        .sql(&format!("EXPLAIN {sql}"))
        .await
        .unwrap_or_else(|e| panic!("EXPLAIN {sql}: {e}"))
        .collect()
        .await
        .unwrap();
    let mut s = String::new();
    for b in &batches {
        let plans = b.column(1).as_string::<i32>();
        for i in 0..plans.len() {
            s.push_str(plans.value(i));
            s.push('\n');
        }
    }
    s
}

/// Compares two results value by value: `Float64` to `rel_tol` relative (sums added in
/// another order), NaN and null as themselves, everything else exactly; the `Utf8` and
/// the `Binary` types are alike among themselves (Parquet reads them as views).
/// `Err` says where they first differ.
pub fn compare_batches(
    a: &[datafusion::arrow::array::RecordBatch],
    b: &[datafusion::arrow::array::RecordBatch],
    rel_tol: f64,
) -> Result<(), String> {
    use datafusion::arrow::array::{Array, AsArray};
    use datafusion::arrow::datatypes::{DataType, Float64Type};
    use datafusion::arrow::util::display::array_value_to_string;
    let rows =
        |x: &[datafusion::arrow::array::RecordBatch]| x.iter().map(|b| b.num_rows()).sum::<usize>();
    if rows(a) != rows(b) {
        return Err(format!("{} rows against {}", rows(a), rows(b)));
    }
    if a.is_empty() || b.is_empty() {
        return Ok(());
    }
    let a = datafusion::arrow::compute::concat_batches(&a[0].schema(), a).unwrap();
    let b = datafusion::arrow::compute::concat_batches(&b[0].schema(), b).unwrap();
    if a.num_columns() != b.num_columns() {
        return Err(format!(
            "{} columns against {}",
            a.num_columns(),
            b.num_columns()
        ));
    }
    let family = |t: &DataType| match t {
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => 1,
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView => 2,
        _ => 0,
    };
    for (i, (x, y)) in a.columns().iter().zip(b.columns()).enumerate() {
        let alike = family(x.data_type()) > 0 && family(x.data_type()) == family(y.data_type());
        let y = &if x.data_type() != y.data_type() && alike {
            datafusion::arrow::compute::cast(y, x.data_type()).unwrap()
        } else {
            std::sync::Arc::clone(y)
        };
        if x.data_type() != y.data_type() {
            return Err(format!(
                "column {i}: {} against {}",
                x.data_type(),
                y.data_type()
            ));
        }
        for r in 0..x.len() {
            let text = |c: &dyn Array| array_value_to_string(c, r).unwrap();
            let same = match (x.is_null(r), y.is_null(r)) {
                (true, true) => true,
                (false, false) if *x.data_type() == DataType::Float64 => {
                    let (p, q) = (
                        x.as_primitive::<Float64Type>().value(r),
                        y.as_primitive::<Float64Type>().value(r),
                    );
                    p == q
                        || (p - q).abs() <= rel_tol * p.abs().max(q.abs())
                        || (p.is_nan() && q.is_nan())
                }
                (false, false) => text(x) == text(y),
                _ => false,
            };
            if !same {
                return Err(format!(
                    "column {i} row {r}: {} against {}",
                    text(x),
                    text(y)
                ));
            }
        }
    }
    Ok(())
}

/// A xorshift64 generator for the tests' random cases (seeded, so failures repeat).
pub struct Rng(pub u64);

impl Rng {
    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// The next value below `n`.
    pub fn next(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
}
