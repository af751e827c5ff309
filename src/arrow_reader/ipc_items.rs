//! Arrow arrays from the blocks of an Arrow-serialized BatchArray (python-blosc2's
//! `serializer="arrow"`: each block one IPC stream of one column, `values`).
//!
//! The bytes come from files, so each stream is checked before Arrow's IPC reader sees
//! it ([`check_stream`]): that reader trusts parts of the metadata (a buffer's offset and
//! length, the parameters of a type) and panics where they are out of range. The check
//! walks every message of the stream and admits the types list columns are made of
//! (numbers, bool, text, bytes, dates, times, timestamps, durations, lists and structs,
//! dictionary-encoded or not), with their parameters in range and every buffer inside
//! its message's body. What passes is decoded by `arrow::ipc`'s `StreamDecoder`, which
//! validates the arrays it builds.

use crate::array::batch_array::StreamBlock;
use arrow::array::{Array, ArrayRef};
use arrow::buffer::Buffer;
use arrow::datatypes::DataType;
use arrow::ipc::reader::StreamDecoder;
use arrow::ipc::{self as fb};
use std::fmt;

/// Why an IPC stream was refused, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IpcError {
    /// Byte offset in the stream of the message at fault.
    pub at: usize,
    /// What was wrong.
    pub why: String,
}

impl fmt::Display for IpcError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "byte {}: {}", self.at, self.why)
    }
}

fn refuse<T>(at: usize, why: impl Into<String>) -> Result<T, IpcError> {
    Err(IpcError {
        at,
        why: why.into(),
    })
}

/// The little-endian word at `p`, or `short` where the bytes end first.
fn le_u32(bytes: &[u8], p: usize, short: &str) -> Result<u32, IpcError> {
    match bytes.get(p..p + 4) {
        Some(b) => Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]])),
        None => refuse(p, short),
    }
}

/// Nesting deeper than this is refused (python-blosc2's list specs nest a few levels).
const MAX_DEPTH: usize = 32;

/// Checks that `bytes` is one IPC stream Arrow's reader can take without trusting it:
/// messages framed inside the bytes and ending with the end-of-stream marker, one
/// schema first (one field of an admitted type, little-endian), then dictionary and
/// record batches, uncompressed, whose buffers lie inside their bodies at 8-byte
/// aligned offsets, the offsets and fixed-width values among them in whole values.
///
/// # Errors
/// The first thing wrong, with its byte offset.
pub fn check_stream(bytes: &[u8]) -> Result<(), IpcError> {
    let mut pos = 0usize;
    let mut field: Option<fb::Field> = None;
    loop {
        let at = pos;
        let word = |p: usize| le_u32(bytes, p, "the stream ends inside a message header");
        let mut len = word(pos)?;
        pos += 4;
        if len == u32::MAX {
            len = word(pos)?;
            pos += 4;
        }
        if len == 0 {
            if pos != bytes.len() {
                let extra = bytes.len() - pos;
                return refuse(at, format!("{extra} bytes after the end of the stream"));
            }
            if field.is_none() {
                return refuse(at, "a stream without a schema");
            }
            return Ok(());
        }
        let len = len as usize;
        let Some(meta) = bytes.get(pos..pos + len) else {
            return refuse(
                at,
                format!("a {len}-byte message header runs past the stream"),
            );
        };
        let message = fb::root_as_message(meta).map_err(|e| IpcError {
            at,
            why: format!("message header: {e}"),
        })?;
        pos += len;
        if !pos.is_multiple_of(8) {
            return refuse(
                at,
                format!("a message body at byte {pos}, not 8-byte aligned"),
            );
        }
        let body = usize::try_from(message.bodyLength())
            .ok()
            .filter(|&b| b <= bytes.len() - pos)
            .map_or_else(
                || {
                    refuse(
                        at,
                        format!("a body of {} bytes past the stream", message.bodyLength()),
                    )
                },
                Ok,
            )?;
        pos += body;
        let why = |why| IpcError { at, why };
        match (message.header_type(), field) {
            (fb::MessageHeader::Schema, None) => {
                let Some(schema) = message.header_as_schema() else {
                    return refuse(at, "a schema message without its schema");
                };
                field = Some(check_schema(schema).map_err(why)?);
            }
            (fb::MessageHeader::Schema, Some(_)) => return refuse(at, "a second schema"),
            (_, None) => return refuse(at, "a batch before the schema"),
            (fb::MessageHeader::RecordBatch, Some(f)) => {
                let Some(batch) = message.header_as_record_batch() else {
                    return refuse(at, "a record batch message without its batch");
                };
                check_batch(batch, body, f, false).map_err(why)?;
            }
            (fb::MessageHeader::DictionaryBatch, Some(f)) => {
                let Some(d) = message.header_as_dictionary_batch() else {
                    return refuse(at, "a dictionary message without its batch");
                };
                let (Some(batch), Some(values)) = (d.data(), dictionary_field(f, d.id())) else {
                    return refuse(at, format!("a dictionary batch of unknown id {}", d.id()));
                };
                check_batch(batch, body, values, true).map_err(why)?;
            }
            (t, _) => return refuse(at, format!("a message of type {t:?}")),
        }
    }
}

/// The type of the one field an encapsulated IPC schema message declares (a
/// BatchArray's `arrow_schema`), once [`check_stream`]'s rules admit it.
///
/// # Errors
/// A message that is not one schema message inside the bytes, or what the checks refuse.
pub fn schema_message_type(bytes: &[u8]) -> Result<DataType, IpcError> {
    let word = |p: usize| le_u32(bytes, p, "the schema message ends inside its header");
    let mut pos = 4;
    let mut len = word(0)?;
    if len == u32::MAX {
        len = word(4)?;
        pos = 8;
    }
    let Some(meta) = bytes.get(pos..pos + len as usize) else {
        return refuse(
            0,
            format!("a {len}-byte schema message runs past its bytes"),
        );
    };
    let message = fb::root_as_message(meta).map_err(|e| IpcError {
        at: 0,
        why: format!("schema message: {e}"),
    })?;
    let Some(schema) = message.header_as_schema() else {
        return refuse(0, "not a schema message");
    };
    check_schema(schema).map_err(|why| IpcError { at: 0, why })?;
    let schema = arrow::ipc::convert::fb_to_schema(schema);
    Ok(schema.field(0).data_type().clone())
}

/// The one field of a schema, once its type tree is admitted.
fn check_schema(schema: fb::Schema) -> Result<fb::Field, String> {
    if schema.endianness() != fb::Endianness::Little {
        return Err("a big-endian schema".into());
    }
    let Some(fields) = schema.fields() else {
        return Err("a schema without fields".into());
    };
    if fields.len() != 1 {
        return Err(format!("a schema of {} fields, not one", fields.len()));
    }
    check_field(fields.get(0), 0)?;
    Ok(fields.get(0))
}

fn check_field(f: fb::Field, depth: usize) -> Result<(), String> {
    if depth > MAX_DEPTH {
        return Err(format!("types nested deeper than {MAX_DEPTH}"));
    }
    if let Some(d) = f.dictionary() {
        let ok = d
            .indexType()
            .is_some_and(|i| matches!(i.bitWidth(), 8 | 16 | 32 | 64));
        if !ok {
            return Err("a dictionary without an integer index type".into());
        }
    }
    let t = f.type_type();
    match layout(f) {
        Layout::Unknown => {
            return Err(format!(
                "Arrow type {} is not read",
                t.variant_name().unwrap_or("unknown")
            ));
        }
        Layout::Invalid => {
            return Err(format!(
                "Arrow type {} with parameters out of range",
                t.variant_name().unwrap_or("unknown")
            ));
        }
        _ => {}
    }
    for c in f.children().into_iter().flatten() {
        check_field(c, depth + 1)?;
    }
    Ok(())
}

/// The buffers a value of some type has in a batch (IPC format, version 5).
enum Layout {
    /// No buffers (`Null`).
    None,
    /// Validity bitmap, then values of this many bytes each (1 for bits and bytes).
    Values(usize),
    /// Validity, offsets of this many bytes, then the bytes (text, binary).
    Var(usize),
    /// Validity, offsets of this many bytes; then the child (lists).
    List(usize),
    /// Validity; then the children (structs, fixed-size lists).
    Parent,
    /// A type this module does not admit.
    Unknown,
    /// An admitted type whose parameters are out of range.
    Invalid,
}

/// The layout of field `f`'s values (not of its dictionary indices).
fn layout(f: fb::Field) -> Layout {
    use fb::Type as T;
    let nchildren = f.children().map_or(0, |c| c.len());
    let width = |ok: Option<usize>| ok.map_or(Layout::Invalid, Layout::Values);
    match f.type_type() {
        T::Null => Layout::None,
        T::Bool => Layout::Values(1),
        T::Int => width(f.type_as_int().and_then(|i| match i.bitWidth() {
            w @ (8 | 16 | 32 | 64) => Some(w as usize / 8),
            _ => None,
        })),
        T::FloatingPoint => width(
            f.type_as_floating_point()
                .and_then(|p| match p.precision() {
                    fb::Precision::HALF => Some(2),
                    fb::Precision::SINGLE => Some(4),
                    fb::Precision::DOUBLE => Some(8),
                    _ => None,
                }),
        ),
        T::Date => width(f.type_as_date().and_then(|d| match d.unit() {
            fb::DateUnit::DAY => Some(4),
            fb::DateUnit::MILLISECOND => Some(8),
            _ => None,
        })),
        T::Time => width(
            f.type_as_time()
                .and_then(|t| match (t.unit(), t.bitWidth()) {
                    (fb::TimeUnit::SECOND | fb::TimeUnit::MILLISECOND, 32) => Some(4),
                    (fb::TimeUnit::MICROSECOND | fb::TimeUnit::NANOSECOND, 64) => Some(8),
                    _ => None,
                }),
        ),
        T::Timestamp => width(
            f.type_as_timestamp()
                .filter(|t| time_unit(t.unit()))
                .map(|_| 8),
        ),
        T::Duration => width(
            f.type_as_duration()
                .filter(|d| time_unit(d.unit()))
                .map(|_| 8),
        ),
        T::FixedSizeBinary => width(
            f.type_as_fixed_size_binary()
                .filter(|b| b.byteWidth() >= 0)
                .map(|_| 1),
        ),
        T::Utf8 | T::Binary => Layout::Var(4),
        T::LargeUtf8 | T::LargeBinary => Layout::Var(8),
        T::List if nchildren == 1 => Layout::List(4),
        T::LargeList if nchildren == 1 => Layout::List(8),
        T::FixedSizeList
            if nchildren == 1
                && f.type_as_fixed_size_list()
                    .is_some_and(|l| l.listSize() >= 0) =>
        {
            Layout::Parent
        }
        T::Struct_ if f.children().is_some() => Layout::Parent,
        T::List | T::LargeList | T::FixedSizeList | T::Struct_ => Layout::Invalid,
        _ => Layout::Unknown,
    }
}

fn time_unit(u: fb::TimeUnit) -> bool {
    matches!(
        u,
        fb::TimeUnit::SECOND
            | fb::TimeUnit::MILLISECOND
            | fb::TimeUnit::MICROSECOND
            | fb::TimeUnit::NANOSECOND
    )
}

/// The field below `f` (or `f` itself) whose values dictionary `id` holds.
fn dictionary_field(f: fb::Field, id: i64) -> Option<fb::Field> {
    if f.dictionary().is_some_and(|d| d.id() == id) {
        return Some(f);
    }
    f.children()
        .into_iter()
        .flatten()
        .find_map(|c| dictionary_field(c, id))
}

fn check_batch(
    batch: fb::RecordBatch,
    body: usize,
    f: fb::Field,
    values: bool,
) -> Result<(), String> {
    if batch.compression().is_some() {
        return Err("a compressed record batch (python-blosc2 writes them uncompressed)".into());
    }
    if batch.variadicBufferCounts().is_some_and(|v| !v.is_empty()) {
        return Err("variadic buffers".into());
    }
    if !(0..=i32::MAX as i64).contains(&batch.length()) {
        return Err(format!("a batch of {} rows", batch.length()));
    }
    let (Some(nodes), Some(buffers)) = (batch.nodes(), batch.buffers()) else {
        return Err("a record batch without its nodes or buffers".into());
    };
    for n in nodes {
        let ok = (0..=i32::MAX as i64).contains(&n.length())
            && (0..=n.length()).contains(&n.null_count());
        if !ok {
            let (len, nulls) = (n.length(), n.null_count());
            return Err(format!("a node of {len} values and {nulls} nulls"));
        }
    }
    for b in buffers {
        let end = b.offset().checked_add(b.length());
        if b.offset() < 0 || b.length() < 0 || end.is_none_or(|e| e > body as i64) {
            let (at, len) = (b.offset(), b.length());
            return Err(format!(
                "a buffer at {at} of {len} bytes outside the {body}-byte body"
            ));
        }
        // The format aligns buffers to 8 bytes; Arrow's validation assumes it of the
        // offsets it reads (and panics on a misaligned one).
        if b.offset() % 8 != 0 {
            return Err(format!("a buffer at {}, not 8-byte aligned", b.offset()));
        }
    }
    let mut walk = BufferWalk {
        nodes: nodes
            .iter()
            .map(|n| (n.length() as usize, n.null_count() as usize))
            .collect(),
        lengths: buffers.iter().map(|b| b.length() as usize).collect(),
        node: 0,
        next: 0,
    };
    walk.field(f, values)
}

/// The nodes and buffers of a batch taken in the order of its field tree, each buffer
/// checked to be long enough for its node and to hold whole values where Arrow reads it
/// as a slice of them (offsets, fixed-width values, dictionary indices): Arrow's
/// validation panics on a ragged or short one. A batch with fewer nodes or buffers than
/// its fields need is left to Arrow, which refuses it.
struct BufferWalk {
    /// (length, null count) per node.
    nodes: Vec<(usize, usize)>,
    lengths: Vec<usize>,
    node: usize,
    next: usize,
}

impl BufferWalk {
    /// Takes the next buffer, which must hold whole `unit`-byte values and at least
    /// `need` bytes; a buffer the batch lacks is left to Arrow, which refuses the batch.
    fn take(&mut self, unit: usize, need: usize) -> Result<(), String> {
        if let Some(&len) = self.lengths.get(self.next)
            && (!len.is_multiple_of(unit) || len < need)
        {
            return Err(format!(
                "buffer {} of {len} bytes: {need} needed, in {unit}-byte values",
                self.next
            ));
        }
        self.next += 1;
        Ok(())
    }

    /// The buffers of `f`; `values`: `f` is the value field of a dictionary batch.
    fn field(&mut self, f: fb::Field, values: bool) -> Result<(), String> {
        let Some(&(n, nulls)) = self.nodes.get(self.node) else {
            return Ok(());
        };
        self.node += 1;
        let bits = n.div_ceil(8);
        // Arrow reads the validity bitmap only when the node has nulls.
        let validity = if nulls > 0 { bits } else { 0 };
        let offsets = |w: usize| if n == 0 { 0 } else { (n + 1) * w };
        if let (false, Some(d)) = (values, f.dictionary()) {
            let width = d.indexType().map_or(8, |i| i.bitWidth() as usize / 8);
            self.take(1, validity)?;
            return self.take(width, n * width);
        }
        let layout = layout(f);
        match layout {
            Layout::None => {}
            Layout::Values(w) => {
                self.take(1, validity)?;
                let need = match f.type_type() {
                    fb::Type::Bool => bits,
                    fb::Type::FixedSizeBinary => f
                        .type_as_fixed_size_binary()
                        .map_or(0, |b| b.byteWidth() as usize)
                        .saturating_mul(n),
                    _ => n * w,
                };
                self.take(w, need)?;
            }
            Layout::Var(w) => {
                self.take(1, validity)?;
                self.take(w, offsets(w))?;
                self.take(1, 0)?;
            }
            Layout::List(w) => {
                self.take(1, validity)?;
                self.take(w, offsets(w))?;
            }
            Layout::Parent => self.take(1, validity)?,
            Layout::Unknown | Layout::Invalid => return Err("a type not admitted".into()),
        }
        if matches!(layout, Layout::List(_) | Layout::Parent) {
            for c in f.children().into_iter().flatten() {
                self.field(c, false)?;
            }
        }
        Ok(())
    }
}

/// The one column of the one record batch of a checked stream, which must hold `items`
/// values.
///
/// # Errors
/// What [`check_stream`] refuses, Arrow's own errors, another count of batches, columns
/// or values.
pub fn stream_column(bytes: &[u8], items: u64) -> Result<ArrayRef, IpcError> {
    check_stream(bytes)?;
    // Copied into Arrow's 64-byte aligned memory, so that the bodies checked to start at
    // multiples of 8 in the stream are 8-byte aligned in memory too.
    let mut buffer = Buffer::from_slice_ref(bytes);
    let mut decoder = StreamDecoder::new();
    let mut column = None;
    while !buffer.is_empty() {
        let at = bytes.len() - buffer.len();
        let decoded = decoder.decode(&mut buffer).map_err(|e| IpcError {
            at,
            why: e.to_string(),
        })?;
        if let Some(batch) = decoded {
            if column.is_some() {
                return refuse(0, "more than one record batch");
            }
            column = Some(batch.column(0).clone());
        }
    }
    decoder.finish().map_err(|e| IpcError {
        at: 0,
        why: e.to_string(),
    })?;
    let Some(column) = column else {
        return refuse(0, "no record batch");
    };
    if column.len() as u64 != items {
        return refuse(
            0,
            format!("{} items, the block should hold {items}", column.len()),
        );
    }
    Ok(column)
}

/// The wanted items of `blocks`, in order, as one array of type `target` (cast from the
/// stream's type when that differs, e.g. `LargeList` or another child name; a value the
/// target cannot hold is an error).
///
/// # Errors
/// A block's stream errors (naming its batch and block), or a cast that fails.
pub fn blocks_array(blocks: Vec<StreamBlock>, target: &DataType) -> Result<ArrayRef, String> {
    let mut parts: Vec<ArrayRef> = Vec::with_capacity(blocks.len());
    for b in blocks {
        let (batch, block, want) = (b.batch, b.block, b.want.clone());
        let column = stream_column(&b.bytes, b.items)
            .map_err(|e| format!("batch {batch}, block {block}: Arrow IPC stream, {e}"))?;
        let part = column.slice(want.start as usize, (want.end - want.start) as usize);
        let part = if part.data_type() == target {
            part
        } else {
            // Not `safe`: a value the target cannot hold is an error, not a null.
            let options = arrow::compute::CastOptions {
                safe: false,
                ..Default::default()
            };
            arrow::compute::cast_with_options(&part, target, &options).map_err(|e| {
                format!(
                    "batch {batch}, block {block}: Arrow {} values are not {target}: {e}",
                    part.data_type()
                )
            })?
        };
        parts.push(part);
    }
    match parts.len() {
        0 => Ok(arrow::array::new_empty_array(target)),
        1 => Ok(parts.pop().expect("one part")),
        _ => {
            let refs: Vec<&dyn Array> = parts.iter().map(|a| a.as_ref()).collect();
            arrow::compute::concat(&refs).map_err(|e| e.to_string())
        }
    }
}
