//! One decompressor per codec: `&[u8]` stream in, exactly `out.len()` bytes out.
//!
//! BloscLZ is ours (`blosclz.rs`); LZ4 uses `lz4_flex`, zlib `flate2` (zlib-rs backend),
//! Zstd the `zstd` crate. Stream forms: `spec/codecs.md` §2.

pub mod blosclz;

use super::header::Codec;
use std::cell::RefCell;

/// Decompresses one stream of `codec` into `out` (exact size), with an optional chunk
/// dictionary (`spec/chunk.md` §7).
///
/// # Errors
/// A message saying what the codec reported.
pub fn decompress_stream(
    codec: Codec,
    src: &[u8],
    out: &mut [u8],
    dict: Option<&[u8]>,
) -> Result<(), String> {
    match codec {
        Codec::BloscLz => {
            if dict.is_some() {
                return Err("blosclz does not use dictionaries".into());
            }
            blosclz::decompress_into(src, out)
                .map_err(|e| format!("{} (input offset {})", e.why, e.at))
        }
        Codec::Lz4 => {
            let n = match dict {
                None => lz4_flex::block::decompress_into(src, out),
                Some(d) => lz4_flex::block::decompress_into_with_dict(src, out, d),
            }
            .map_err(|e| e.to_string())?;
            if n != out.len() {
                return Err(format!("produced {n} bytes, expected {}", out.len()));
            }
            Ok(())
        }
        Codec::Zlib => {
            let mut z = flate2::Decompress::new(true);
            let status = z
                .decompress(src, out, flate2::FlushDecompress::Finish)
                .map_err(|e| e.to_string())?;
            if z.total_out() as usize != out.len() || status != flate2::Status::StreamEnd {
                return Err(format!(
                    "produced {} bytes, expected {}",
                    z.total_out(),
                    out.len()
                ));
            }
            Ok(())
        }
        Codec::Zstd => zstd_decompress(src, out, dict),
        Codec::Snappy => Err("snappy streams are not supported (Blosc1-only codec)".into()),
    }
}

thread_local! {
    static ZSTD_CTX: RefCell<Option<zstd::bulk::Decompressor<'static>>> = const { RefCell::new(None) };
}

fn zstd_decompress(src: &[u8], out: &mut [u8], dict: Option<&[u8]>) -> Result<(), String> {
    let n = if let Some(d) = dict {
        let mut dec = zstd::bulk::Decompressor::with_dictionary(d).map_err(|e| e.to_string())?;
        dec.decompress_to_buffer(src, out)
            .map_err(|e| e.to_string())?
    } else {
        ZSTD_CTX.with(|cell| -> Result<usize, String> {
            let mut slot = cell.borrow_mut();
            if slot.is_none() {
                *slot = Some(zstd::bulk::Decompressor::new().map_err(|e| e.to_string())?);
            }
            let dec = slot.as_mut().expect("zstd context was just created");
            dec.decompress_to_buffer(src, out)
                .map_err(|e| e.to_string())
        })?
    };
    if n != out.len() {
        return Err(format!("produced {n} bytes, expected {}", out.len()));
    }
    Ok(())
}
