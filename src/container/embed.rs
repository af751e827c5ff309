//! EmbedStore (`spec/stores.md` §1): a byte super-chunk whose decompressed bytes are a
//! sequence of complete frames, indexed by the `estore_metadata` vlmetalayer
//! (`{"embed_map": {"/key": {"offset", "length"}}}`). Standalone `.b2e` files
//! (metalayer `b2embed`, e.g. `CTable.to_cframe()`) and the `embed.b2e` of DictStores and
//! TreeStores (`b2dict` / `b2tree`) have this layout.
//!
//! The bytes are decompressed once (bounded by the frame's validated `nbytes`) and kept in
//! an in-memory object store, so entries open through the same [`Frame`] code as files.

use super::frame::Frame;
use crate::error::{Error, Result};
use crate::io::Location;
use crate::msgpack::MsgValue;
use bytes::Bytes;
use object_store::ObjectStoreExt;
use object_store::memory::InMemory;
use object_store::path::Path;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Largest EmbedStore we decompress into memory (its values are meant to be small).
pub const MAX_EMBED_BYTES: u64 = 1 << 30;

/// Which store an embed frame belongs to (its fixed metalayer).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EmbedRole {
    /// `b2embed`: a standalone EmbedStore.
    Embed,
    /// `b2dict`: the embed file of a DictStore.
    Dict,
    /// `b2tree`: the embed file of a TreeStore.
    Tree,
}

impl EmbedRole {
    /// The role told by a frame's metalayers, if any.
    pub fn of(frame: &Frame) -> Option<EmbedRole> {
        if frame.metalayer("b2embed").is_some() {
            Some(EmbedRole::Embed)
        } else if frame.metalayer("b2tree").is_some() {
            Some(EmbedRole::Tree)
        } else if frame.metalayer("b2dict").is_some() {
            Some(EmbedRole::Dict)
        } else {
            None
        }
    }
}

/// An opened EmbedStore.
#[derive(Debug, Clone)]
pub struct EmbedStore {
    /// Store kind.
    pub role: EmbedRole,
    /// Stored entries: key (`/a/b`) → (offset, length) in the decompressed bytes.
    pub entries: BTreeMap<String, (u64, u64)>,
    /// Entries that are remote references (not readable here).
    pub remote: Vec<String>,
    /// The frame's vlmetalayers as JSON (TreeStores keep `_object_registry` here).
    pub vlmeta: serde_json::Value,
    data: Location,
    len: u64,
    display: String,
}

impl EmbedStore {
    /// Reads the index and decompresses the bytes of an embed frame.
    ///
    /// # Errors
    /// Not an embed frame, a malformed `estore_metadata`, entries outside the bytes,
    /// decoding errors.
    pub async fn open(frame: Frame) -> Result<EmbedStore> {
        let display = frame.display().to_string();
        let role = EmbedRole::of(&frame).ok_or_else(|| {
            Error::corrupt(&display, "EmbedStore", "no b2embed/b2dict/b2tree metalayer")
        })?;
        let bad = |what: String| Error::corrupt(&display, "EmbedStore estore_metadata", what);
        let meta = frame
            .vlmeta_value("estore_metadata")
            .ok_or_else(|| bad("missing".into()))?;
        let nbytes = frame.header().nbytes;
        if nbytes > MAX_EMBED_BYTES {
            return Err(Error::unsupported(
                &display,
                format!("an EmbedStore of {nbytes} bytes (more than {MAX_EMBED_BYTES} in memory)"),
            ));
        }
        let mut entries = BTreeMap::new();
        let mut remote = Vec::new();
        if let Some(MsgValue::Map(m)) = meta.get("embed_map") {
            for (k, v) in m {
                let key = k.as_str().ok_or_else(|| bad("non-text key".into()))?;
                let (off, len) = (
                    v.get("offset").and_then(MsgValue::as_i64),
                    v.get("length").and_then(MsgValue::as_i64),
                );
                match (off, len) {
                    (Some(o), Some(l)) if o >= 0 && l >= 0 && (o as u64) + (l as u64) <= nbytes => {
                        entries.insert(key.to_string(), (o as u64, l as u64));
                    }
                    (Some(o), Some(l)) => {
                        return Err(bad(format!(
                            "entry {key:?} at {o}+{l} outside the {nbytes} stored bytes"
                        )));
                    }
                    _ if v.get("urlbase").is_some() => remote.push(key.to_string()),
                    _ => return Err(bad(format!("entry {key:?} has no offset/length"))),
                }
            }
        }
        let vlmeta = frame.attributes_json();
        let array = crate::array::ndarray::NdArray::from_frame(frame, None)?;
        let bytes = if entries.is_empty() {
            Vec::new()
        } else {
            array.read_all().await?
        };
        let len = bytes.len() as u64;
        let mem: Arc<dyn object_store::ObjectStore> = Arc::new(InMemory::new());
        let path = Path::from("embed");
        mem.put(&path, Bytes::from(bytes).into())
            .await
            .map_err(|e| Error::InvalidArgument(format!("{display}: in-memory store: {e}")))?;
        Ok(EmbedStore {
            role,
            entries,
            remote,
            vlmeta,
            data: Location::new(mem, path, display.clone()),
            len,
            display,
        })
    }

    /// An estimate of the heap memory it holds: its index, attributes and the
    /// decompressed bytes it serves from memory.
    pub fn heap_bytes(&self) -> usize {
        let entries: usize = self.entries.keys().map(|k| k.len() + 64).sum();
        let remote: usize = self.remote.iter().map(String::len).sum();
        entries + remote + super::json_heap_bytes(&self.vlmeta) + self.len as usize
    }

    /// How errors name the store.
    pub fn display(&self) -> &str {
        &self.display
    }

    /// Keys (`/grp/table`) that TreeStore's `_object_registry` vlmetalayer lists as CTable
    /// roots.
    pub fn registered_ctables(&self) -> Vec<String> {
        self.vlmeta
            .get("_object_registry")
            .and_then(|r| r.as_object())
            .map(|reg| {
                reg.iter()
                    .filter(|(_, v)| v.get("kind").and_then(|k| k.as_str()) == Some("ctable"))
                    .map(|(k, _)| format!("/{}", k.trim_matches('/')))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Opens the frame stored under `key` (`/a/b`); `None` when absent.
    ///
    /// # Errors
    /// As [`Frame::open_at`].
    pub async fn open_entry(&self, key: &str) -> Result<Option<Frame>> {
        let Some(&(off, len)) = self.entries.get(key) else {
            return Ok(None);
        };
        if off + len > self.len {
            return Err(Error::corrupt(
                &self.display,
                "EmbedStore entry",
                format!("{key:?} past the decompressed bytes"),
            ));
        }
        let mut f = Frame::open_at(&self.data, off, len).await?;
        f.set_display(format!("{}#{key}", self.display));
        Ok(Some(f))
    }
}
