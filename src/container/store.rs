//! python-blosc2 stores: `.b2d` directories and `.b2z` zip files whose members are STORED
//! frames read in place by byte window (`spec/stores.md` §2), EmbedStores (§1), and the
//! DictStore / TreeStore view of them: leaves by key, CTable subtrees (§3).

use super::embed::{EmbedRole, EmbedStore};
use super::frame::Frame;
use crate::error::{Error, Result};
use crate::io::Location;
use std::collections::BTreeMap;
use std::sync::Arc;

/// A store root: a directory, a zip file (or a subtree of either), or an EmbedStore.
#[derive(Debug, Clone)]
pub enum StoreRoot {
    /// `.b2d` or any directory.
    Dir(Location),
    /// `.b2z`: member name → (data offset, size).
    Zip {
        /// The zip file.
        file: Location,
        /// Stored members by full name.
        members: BTreeMap<String, (u64, u64)>,
        /// Subtree this root stands for (`""` or `grp/table/`).
        prefix: String,
    },
    /// An EmbedStore: keys `/name` (relative paths lose their extension).
    Embed(Arc<EmbedStore>),
}

/// What a store key holds.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum LeafKind {
    /// A frame file (`.b2nd`, `.b2f`, `.b2b`) or an embedded frame.
    Frame,
    /// A CTable subtree (`_object_registry`, or a `_meta` with kind `ctable`).
    CTable,
}

/// What [`StoreRoot::resolve`] found under a key.
#[derive(Debug)]
pub enum Leaf {
    /// A CTable subtree.
    CTable,
    /// A frame: an external file or an embedded one.
    Frame(Box<Frame>),
}

/// Relative path of a key's frame under a root, with one of the store's extensions.
const LEAF_EXTENSIONS: [&str; 3] = [".b2nd", ".b2f", ".b2b"];

fn le(b: &[u8], at: usize, n: usize) -> u64 {
    b[at..at + n]
        .iter()
        .rev()
        .fold(0u64, |a, &x| (a << 8) | x as u64)
}

impl StoreRoot {
    /// An estimate of the heap memory the opened store holds: a zip's directory, an
    /// EmbedStore's index and decompressed bytes.
    pub fn heap_bytes(&self) -> usize {
        match self {
            StoreRoot::Dir(_) => 0,
            StoreRoot::Zip {
                members, prefix, ..
            } => members.keys().map(|k| k.len() + 64).sum::<usize>() + prefix.len(),
            StoreRoot::Embed(e) => e.heap_bytes(),
        }
    }

    /// Opens a zip store: reads the end record and central directory, then each member's
    /// local header to find where its data starts.
    ///
    /// # Errors
    /// Not a zip, or a malformed end record, central directory or local header (ZIP64
    /// archives are read; deflated members are skipped).
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
        let mut cd_size = le(&tail, eocd + 12, 4);
        let mut cd_off = le(&tail, eocd + 16, 4);
        // ZIP64: a locator right before the end record points at the ZIP64 end record,
        // whose 8-byte fields replace saturated 4-byte ones.
        if eocd >= 20 && tail[eocd - 20..eocd - 16] == [0x50, 0x4b, 0x06, 0x07] {
            let rec = le(&tail, eocd - 12, 8);
            if rec.checked_add(56).is_none_or(|e| e > size) {
                return Err(Error::corrupt(
                    path,
                    "zip64 end locator",
                    format!("record at {rec} past the end ({size})"),
                ));
            }
            let r = file.get_range(rec..rec + 56).await?;
            if r[..4] != [0x50, 0x4b, 0x06, 0x06] {
                return Err(Error::corrupt(path, "zip64 end record", "bad signature"));
            }
            cd_size = le(&r, 40, 8);
            cd_off = le(&r, 48, 8);
        } else if cd_off == 0xFFFF_FFFF || cd_size == 0xFFFF_FFFF {
            return Err(Error::corrupt(
                path,
                "zip end record",
                "saturated central directory fields without a ZIP64 locator",
            ));
        }
        if cd_off.checked_add(cd_size).is_none_or(|e| e > size) || cd_size > 1 << 30 {
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
            let mut csize = le(&cd, p + 20, 4);
            let usize_ = le(&cd, p + 24, 4);
            let nlen = le(&cd, p + 28, 2) as usize;
            let xlen = le(&cd, p + 30, 2) as usize;
            let clen = le(&cd, p + 32, 2) as usize;
            let mut lho = le(&cd, p + 42, 4);
            let name_end = p + 46 + nlen;
            if name_end + xlen > cd.len() {
                return Err(Error::corrupt(
                    path,
                    "zip central directory",
                    "entry name past the directory",
                ));
            }
            let name = String::from_utf8_lossy(&cd[p + 46..name_end]).into_owned();
            // ZIP64 extended information (id 1): the saturated fields, in this order.
            let mut x = name_end;
            while x + 4 <= name_end + xlen {
                let (id, len) = (le(&cd, x, 2), le(&cd, x + 2, 2) as usize);
                let body = x + 4..(x + 4 + len).min(name_end + xlen);
                if id == 1 {
                    let mut q = body.start;
                    let mut next = |v: &mut u64| {
                        if *v == 0xFFFF_FFFF && q + 8 <= body.end {
                            *v = le(&cd, q, 8);
                            q += 8;
                        }
                    };
                    let mut u = usize_;
                    next(&mut u);
                    next(&mut csize);
                    next(&mut lho);
                }
                x = body.end;
            }
            if method == 0 && !name.ends_with('/') {
                entries.push((name, lho, csize));
            }
            p = name_end + xlen + clen;
        }
        if let Some((name, lho, _)) = entries.iter().find(|(_, lho, _)| *lho >= size) {
            return Err(Error::corrupt(
                path,
                "zip central directory",
                format!("member {name:?}: local header at {lho} past the end ({size})"),
            ));
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
            if data.checked_add(csize).is_none_or(|e| e > size) {
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
            prefix: String::new(),
        })
    }

    /// How errors name the store.
    pub fn display(&self) -> &str {
        match self {
            StoreRoot::Dir(d) => d.display(),
            StoreRoot::Zip { file, .. } => file.display(),
            StoreRoot::Embed(e) => e.display(),
        }
    }

    /// The root of subtree `key` (`/grp/table`): where a CTable stored in a TreeStore
    /// lives.
    pub fn subtree(&self, key: &str) -> StoreRoot {
        let rel = key.trim_matches('/');
        match self {
            StoreRoot::Dir(d) => StoreRoot::Dir(d.child(rel)),
            StoreRoot::Zip {
                file,
                members,
                prefix,
            } => StoreRoot::Zip {
                file: file.clone(),
                members: members.clone(),
                prefix: format!("{prefix}{rel}/"),
            },
            StoreRoot::Embed(e) => StoreRoot::Embed(Arc::clone(e)),
        }
    }

    /// The store's `embed.b2e` (DictStore / TreeStore), if it has one; an EmbedStore root
    /// is its own.
    ///
    /// # Errors
    /// A malformed embed file.
    pub async fn embed(&self) -> Result<Option<Arc<EmbedStore>>> {
        if let StoreRoot::Embed(e) = self {
            return Ok(Some(Arc::clone(e)));
        }
        match self.open_frame("embed.b2e").await? {
            Some(f) if EmbedRole::of(&f).is_some() => {
                Ok(Some(Arc::new(EmbedStore::open(f).await?)))
            }
            _ => Ok(None),
        }
    }

    /// Every key of the store that holds a frame or a CTable, sorted; keys inside a CTable
    /// subtree and TreeStore `__vlmeta__` leaves are folded away.
    ///
    /// # Errors
    /// IO errors while listing.
    pub async fn keys(&self) -> Result<Vec<(String, LeafKind)>> {
        let mut rels: Vec<String> = match self {
            StoreRoot::Dir(d) => list_recursive(d).await?,
            StoreRoot::Zip {
                members, prefix, ..
            } => members
                .keys()
                .filter_map(|m| m.strip_prefix(prefix.as_str()).map(str::to_string))
                .collect(),
            StoreRoot::Embed(_) => Vec::new(),
        };
        rels.retain(|r| r != "embed.b2e");
        let embed = self.embed().await?;
        let mut ctables: Vec<String> = embed
            .as_ref()
            .map(|e| e.registered_ctables())
            .unwrap_or_default()
            .iter()
            .map(|k| k.trim_matches('/').to_string())
            .collect();
        for r in &rels {
            if let Some(root) =
                r.strip_suffix("/_meta.b2f")
                    .or(if r == "_meta.b2f" { Some("") } else { None })
                && !ctables.iter().any(|c| c == root)
            {
                ctables.push(root.to_string());
            }
        }
        let mut out: Vec<(String, LeafKind)> = ctables
            .iter()
            .filter(|c| !c.is_empty())
            .map(|c| (format!("/{c}"), LeafKind::CTable))
            .collect();
        for r in rels {
            let inside = ctables
                .iter()
                .any(|c| c.is_empty() || r.starts_with(&format!("{c}/")));
            let Some(stem) = LEAF_EXTENSIONS.iter().find_map(|x| r.strip_suffix(x)) else {
                continue;
            };
            if inside || stem.rsplit('/').next() == Some("__vlmeta__") {
                continue;
            }
            out.push((format!("/{stem}"), LeafKind::Frame));
        }
        if let Some(e) = embed {
            for k in e.entries.keys() {
                if !out.iter().any(|(o, _)| o == k) && !k.ends_with("/__vlmeta__") {
                    out.push((k.clone(), LeafKind::Frame));
                }
            }
        }
        out.sort();
        out.dedup();
        Ok(out)
    }

    /// What `key` (`/a/b`) holds: a CTable subtree, a frame (an external file first, then
    /// the embed file), or nothing.
    ///
    /// # Errors
    /// IO and container errors.
    pub async fn resolve(&self, key: &str) -> Result<Option<Leaf>> {
        let rel = key.trim_matches('/');
        let key = format!("/{rel}");
        let embed = self.embed().await?;
        let registered = embed
            .as_ref()
            .is_some_and(|e| e.registered_ctables().contains(&key));
        if registered || self.contains(&format!("{rel}/_meta.b2f")).await? {
            return Ok(Some(Leaf::CTable));
        }
        if !matches!(self, StoreRoot::Embed(_)) {
            for x in LEAF_EXTENSIONS {
                if let Some(f) = self.open_frame(&format!("{rel}{x}")).await? {
                    return Ok(Some(Leaf::Frame(Box::new(f))));
                }
            }
        }
        if let Some(e) = embed
            && let Some(f) = e.open_entry(&key).await?
        {
            return Ok(Some(Leaf::Frame(Box::new(f))));
        }
        Ok(None)
    }

    /// True when relative path `rel` exists, without reading it (a directory entry, a zip
    /// member, or an EmbedStore key).
    ///
    /// # Errors
    /// IO errors of a directory probe.
    pub async fn contains(&self, rel: &str) -> Result<bool> {
        match self {
            StoreRoot::Dir(d) => Ok(d.child(rel).size().await?.is_some()),
            StoreRoot::Zip {
                members, prefix, ..
            } => Ok(members.contains_key(&format!("{prefix}{rel}"))),
            StoreRoot::Embed(e) => Ok(e.entries.contains_key(&embed_key(rel))),
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
            StoreRoot::Zip {
                file,
                members,
                prefix,
            } => {
                let name = format!("{prefix}{rel}");
                match members.get(&name) {
                    Some(&(off, len)) => {
                        let display = format!("{}:{name}", file.display());
                        let mut f = Frame::open_at(file, off, len)
                            .await
                            .map_err(|e| e.at_path(&display))?;
                        f.set_display(display);
                        Ok(Some(f))
                    }
                    None => Ok(None),
                }
            }
            StoreRoot::Embed(e) => e.open_entry(&embed_key(rel)).await,
        }
    }
}

/// The EmbedStore key of a relative path: `_cols/x.b2nd` → `/_cols/x` (keys carry no
/// extension).
fn embed_key(rel: &str) -> String {
    let stem = LEAF_EXTENSIONS
        .iter()
        .find_map(|x| rel.strip_suffix(x))
        .unwrap_or(rel);
    format!("/{}", stem.trim_matches('/'))
}

/// Relative paths of every file below `dir` (depth-first, bounded depth).
async fn list_recursive(dir: &Location) -> Result<Vec<String>> {
    let mut out = Vec::new();
    let mut todo = vec![(String::new(), 0usize)];
    while let Some((rel, depth)) = todo.pop() {
        let here = if rel.is_empty() {
            dir.clone()
        } else {
            dir.child(&rel)
        };
        let (files, dirs) = here.list_dir().await?;
        let join = |n: &str| {
            if rel.is_empty() {
                n.to_string()
            } else {
                format!("{rel}/{n}")
            }
        };
        out.extend(files.iter().map(|f| join(f)));
        if depth < 32 {
            todo.extend(dirs.iter().map(|d| (join(d), depth + 1)));
        }
    }
    out.sort();
    Ok(out)
}
