//! python-blosc2 stores: `.b2d` directories and `.b2z` zip files whose members are STORED
//! frames read in place by byte window (`spec/stores.md` §2).

use super::frame::Frame;
use crate::error::{Error, Result};
use crate::io::Location;
use std::collections::BTreeMap;

/// A store root: a directory or a zip file.
#[derive(Debug, Clone)]
pub enum StoreRoot {
    /// `.b2d` or any directory.
    Dir(Location),
    /// `.b2z`: member name → (data offset, size).
    Zip {
        /// The zip file.
        file: Location,
        /// Stored members by name.
        members: BTreeMap<String, (u64, u64)>,
    },
}

fn le(b: &[u8], at: usize, n: usize) -> u64 {
    b[at..at + n]
        .iter()
        .rev()
        .fold(0u64, |a, &x| (a << 8) | x as u64)
}

impl StoreRoot {
    /// Opens a zip store: reads the end record and central directory, then each member's
    /// local header to find where its data starts.
    ///
    /// # Errors
    /// Not a zip, ZIP64 archives, or deflated members.
    pub async fn open_zip(file: &Location) -> Result<StoreRoot> {
        let path = file.display();
        let size = file.size().await?.ok_or_else(|| Error::NotFound {
            path: path.into(),
            what: String::new(),
        })?;
        let tail_len = size.min(65_557);
        let tail = file.get_range(size - tail_len..size).await?;
        let eocd = (0..tail.len().saturating_sub(21))
            .rev()
            .find(|&i| tail[i..i + 4] == [0x50, 0x4b, 0x05, 0x06])
            .ok_or_else(|| Error::corrupt(path, "zip", "no end-of-central-directory record"))?;
        let cd_size = le(&tail, eocd + 12, 4);
        let cd_off = le(&tail, eocd + 16, 4);
        if cd_off == 0xFFFF_FFFF || cd_size == 0xFFFF_FFFF {
            return Err(Error::unsupported(path, "ZIP64 archive"));
        }
        if cd_off + cd_size > size {
            return Err(Error::corrupt(
                path,
                "zip central directory",
                format!("{cd_off}+{cd_size} past the end ({size})"),
            ));
        }
        let cd = file.get_range(cd_off..cd_off + cd_size).await?;
        let mut entries = Vec::new();
        let mut p = 0usize;
        while p + 46 <= cd.len() && cd[p..p + 4] == [0x50, 0x4b, 0x01, 0x02] {
            let method = le(&cd, p + 10, 2);
            let csize = le(&cd, p + 20, 4);
            let nlen = le(&cd, p + 28, 2) as usize;
            let xlen = le(&cd, p + 30, 2) as usize;
            let clen = le(&cd, p + 32, 2) as usize;
            let lho = le(&cd, p + 42, 4);
            let name_end = p + 46 + nlen;
            if name_end > cd.len() {
                return Err(Error::corrupt(
                    path,
                    "zip central directory",
                    "entry name past the directory",
                ));
            }
            let name = String::from_utf8_lossy(&cd[p + 46..name_end]).into_owned();
            if method == 0 && !name.ends_with('/') {
                entries.push((name, lho, csize));
            }
            p = name_end + xlen + clen;
        }
        let mut members = BTreeMap::new();
        let ranges: Vec<_> = entries
            .iter()
            .map(|(_, lho, _)| *lho..(*lho + 30).min(size))
            .collect();
        let heads = file.get_ranges(&ranges).await?;
        for ((name, lho, csize), h) in entries.into_iter().zip(heads) {
            if h.len() < 30 || h[..4] != [0x50, 0x4b, 0x03, 0x04] {
                return Err(Error::corrupt(
                    path,
                    "zip local header",
                    format!("member {name:?} at {lho}"),
                ));
            }
            let data = lho + 30 + le(&h, 26, 2) + le(&h, 28, 2);
            if data + csize > size {
                return Err(Error::corrupt(
                    path,
                    "zip local header",
                    format!("member {name:?} data past the end"),
                ));
            }
            members.insert(name, (data, csize));
        }
        Ok(StoreRoot::Zip {
            file: file.clone(),
            members,
        })
    }

    /// How errors name the store.
    pub fn display(&self) -> &str {
        match self {
            StoreRoot::Dir(d) => d.display(),
            StoreRoot::Zip { file, .. } => file.display(),
        }
    }

    /// Opens the frame stored under relative path `rel` (e.g. `_cols/x.b2nd`); `None` when
    /// it does not exist.
    ///
    /// # Errors
    /// As [`Frame::open`].
    pub async fn open_frame(&self, rel: &str) -> Result<Option<Frame>> {
        match self {
            StoreRoot::Dir(d) => match Frame::open(&d.child(rel)).await {
                Ok(f) => Ok(Some(f)),
                Err(Error::NotFound { .. }) => Ok(None),
                Err(e) => Err(e),
            },
            StoreRoot::Zip { file, members } => match members.get(rel) {
                Some(&(off, len)) => {
                    let mut f = Frame::open_at(file, off, len).await?;
                    f.set_display(format!("{}:{rel}", file.display()));
                    Ok(Some(f))
                }
                None => Ok(None),
            },
        }
    }
}
