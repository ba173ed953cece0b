//! What an answer's body is: a document (owned, built once, or already serialized), or a file
//! that REST streams piece by piece.

use std::{
    borrow::Cow,
    sync::{Arc, Mutex},
};

use serde_json::Value;

use crate::operation::PieceStream;

/// A response body that never changes (a catalog document): built and serialized once.
#[derive(Debug, PartialEq)]
pub struct StaticBody {
    pub value: Value,
    pub json: Vec<u8>,
}

impl StaticBody {
    pub fn new(value: Value) -> StaticBody {
        let json = serde_json::to_vec(&value).expect("a Value always serializes");
        StaticBody { value, json }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum ReplyBody {
    Owned(Value),
    Static(&'static StaticBody),
    /// A typed answer already serialized to JSON (see [`crate::Reply::serialized`]).
    Serialized(Vec<u8>),
    /// A file that REST streams as it is read (an export's); other transports answer its
    /// [`FileReply::notice`].
    File(FileReply),
}

impl ReplyBody {
    /// The body as a document; a [`ReplyBody::Serialized`] one is parsed on each call.
    pub fn value(&self) -> Cow<'_, Value> {
        match self {
            ReplyBody::Owned(v) => Cow::Borrowed(v),
            ReplyBody::Static(s) => Cow::Borrowed(&s.value),
            ReplyBody::Serialized(json) => Cow::Owned(parse_serialized(json)),
            ReplyBody::File(file) => Cow::Borrowed(&file.notice),
        }
    }

    pub fn into_value(self) -> Value {
        match self {
            ReplyBody::Owned(v) => v,
            ReplyBody::Static(s) => s.value.clone(),
            ReplyBody::Serialized(json) => parse_serialized(&json),
            ReplyBody::File(file) => file.notice,
        }
    }
}

/// What [`crate::Reply::serialized`] wrote parses back: it came from `serde_json` itself.
fn parse_serialized(json: &[u8]) -> Value {
    serde_json::from_slice(json).expect("JSON serde_json wrote")
}

/// A file answered as a stream of pieces with its media type. The pieces are read only when
/// REST sends them (the stream is lazy); MCP and A2A, which carry JSON, answer `notice`, a
/// document saying where REST serves the file.
#[derive(Clone)]
pub struct FileReply {
    pub content_type: &'static str,
    /// The name offered for saving it (`Content-Disposition`).
    pub filename: String,
    pub notice: Value,
    pieces: Arc<Mutex<Option<PieceStream>>>,
}

impl FileReply {
    pub fn new(
        content_type: &'static str,
        filename: String,
        notice: Value,
        pieces: PieceStream,
    ) -> FileReply {
        FileReply {
            content_type,
            filename,
            notice,
            pieces: Arc::new(Mutex::new(Some(pieces))),
        }
    }

    /// The pieces, once: a second call answers `None`.
    pub fn take_pieces(&self) -> Option<PieceStream> {
        self.pieces.lock().ok()?.take()
    }
}

impl std::fmt::Debug for FileReply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileReply")
            .field("content_type", &self.content_type)
            .field("filename", &self.filename)
            .finish_non_exhaustive()
    }
}

impl PartialEq for FileReply {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.pieces, &other.pieces)
    }
}
