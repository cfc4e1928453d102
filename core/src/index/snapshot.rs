//! An index written out as bytes and read back, so a store can open a large index with
//! one read instead of deriving every code and posting again from every row.
//!
//! A snapshot holds what [`MemoryIndex::over_source`] keeps (the memory records, the
//! 8-bit codes with their bounds, the BM25 postings), never the f32 rows: the index read
//! back reads those from its [`VectorSource`] as any index over a source does. It
//! carries a key the store chooses (what the snapshot describes, such as a user and a
//! change counter), and ends with a CRC-32 of every byte before it, so a torn or
//! damaged file is refused rather than read. All numbers are little-endian.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use rustc_hash::FxHashMap;
use uuid::Uuid;

use super::compact::{CompactCodes, RowBound};
use super::dense::DenseMatrix;
use super::lexical::{LexicalIndex, Posting};
use super::{MemoryIndex, VectorSource};
use crate::memory::{Memory, MemoryId, MemoryKind};

const MAGIC: &[u8; 8] = b"CXINDEX\0";
/// Bumped whenever the layout changes: a snapshot of another version is refused.
const VERSION: u32 = 1;
/// The fixed trailer: six u64 (dimension, memories, terms, where the terms, memories and
/// key start), the version, the magic; then the CRC-32.
const TRAILER: usize = 6 * 8 + 4 + MAGIC.len();

/// Why a snapshot could not be read. Every case means the same to a store: build the
/// index from its rows instead.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SnapshotError {
    #[error("not an index snapshot")]
    NotASnapshot,
    #[error("index snapshot version {0}; this build reads version {VERSION}")]
    Version(u32),
    #[error("the index snapshot's checksum does not match: it is damaged or cut short")]
    Checksum,
    #[error("the index snapshot is inconsistent: {0}")]
    Invalid(&'static str),
}

/// A snapshot read back: the key it was written with and the index.
#[derive(Debug)]
pub struct Snapshot {
    pub key: Vec<u8>,
    pub index: MemoryIndex,
}

// The layout puts the codes first, so that reading gives them their buffer as it is: the
// file's bytes, cut after the codes, become the codes (no copy of the largest part):
//
//   codes (N x d i8) | bounds (N x 3 f32) | lengths (N x u32) | ids (N x 16)
//   | terms (text, postings (row u32, tf u32)...) | memories | key | trailer | CRC-32
//
// The ids stand apart from the rest of each memory so the id map is built on the thread
// that reads the postings, beside the one that reads the memories.
impl MemoryIndex {
    /// The index as snapshot bytes, tagged with `key`.
    pub fn to_snapshot(&self, key: &[u8]) -> Vec<u8> {
        let (codes, bounds) = self.dense.codes().parts();
        let (terms, doc_len) = self.lexical.parts();
        let mut out = Writer(Vec::with_capacity(self.approx_bytes() + key.len() + 64));
        out.0.extend(codes.iter().map(|&c| c as u8));
        for b in bounds {
            for x in [b.scale, b.code_norm, b.error_norm] {
                out.0.extend_from_slice(&x.to_le_bytes());
            }
        }
        for &len in doc_len {
            out.u32(len);
        }
        for m in &self.memories {
            out.0.extend_from_slice(m.id.as_bytes());
        }
        let terms_at = out.0.len();
        for (term, list) in &terms {
            out.bytes(term.as_bytes());
            out.u64(list.len() as u64);
            for p in *list {
                out.u32(p.row);
                out.u32(p.tf);
            }
        }
        let memories_at = out.0.len();
        for m in &self.memories {
            out.i64(m.seq);
            out.0.push(kind_code(m.kind));
            out.time(m.created_at);
            match m.expires_at {
                Some(at) => {
                    out.0.push(1);
                    out.time(at);
                }
                None => out.0.push(0),
            }
            out.bytes(m.user_id.as_bytes());
            out.bytes(m.content.as_bytes());
            out.u64(m.tags.len() as u64);
            for tag in &m.tags {
                out.bytes(tag.as_bytes());
            }
        }
        let key_at = out.0.len();
        out.0.extend_from_slice(key);
        for n in [
            self.dimension(),
            self.memories.len(),
            terms.len(),
            terms_at,
            memories_at,
            key_at,
        ] {
            out.u64(n as u64);
        }
        out.u32(VERSION);
        out.0.extend_from_slice(MAGIC);
        let crc = crc32fast::hash(&out.0);
        out.u32(crc);
        out.0
    }

    /// Reads a snapshot [`to_snapshot`](Self::to_snapshot) wrote; the index reads its full
    /// vectors from `source`. The result is the index that was written: the same rows in
    /// the same order, so every search returns what the written index returned. Two
    /// threads share the work (the checksum and the postings on one, the memories on the
    /// other), and `bytes` becomes the codes.
    pub fn from_snapshot(
        mut bytes: Vec<u8>,
        source: Arc<dyn VectorSource>,
    ) -> Result<Snapshot, SnapshotError> {
        let body_len = bytes
            .len()
            .checked_sub(4)
            .filter(|&n| n >= TRAILER)
            .ok_or(SnapshotError::NotASnapshot)?;
        let mut tail = Reader {
            bytes: &bytes[..body_len],
            at: body_len - TRAILER,
        };
        let [dimension, count, term_count, terms_at, memories_at, key_at] =
            [(); 6].map(|()| tail.len());
        let version = tail.u32()?;
        if tail.take(MAGIC.len())? != MAGIC {
            return Err(SnapshotError::NotASnapshot);
        }
        if version != VERSION {
            return Err(SnapshotError::Version(version));
        }
        let (dimension, count, term_count) = (dimension?, count?, term_count?);
        let (terms_at, memories_at, key_at) = (terms_at?, memories_at?, key_at?);
        let codes_len = count
            .checked_mul(dimension)
            .ok_or(SnapshotError::Invalid("dimension"))?;
        let lengths_at = count
            .checked_mul(12)
            .and_then(|b| b.checked_add(codes_len))
            .ok_or(SnapshotError::Invalid("rows"))?;
        let ids_at = lengths_at + count * 4;
        let sections = [codes_len, lengths_at, terms_at, memories_at, key_at];
        if ids_at.checked_add(count * 16) != Some(terms_at)
            || sections.windows(2).any(|w| w[0] > w[1])
            || key_at > body_len - TRAILER
        {
            return Err(SnapshotError::Invalid("sections"));
        }
        let (body, crc) = bytes.split_at(body_len);
        let crc: [u8; 4] = [crc[0], crc[1], crc[2], crc[3]];
        let ids: Vec<MemoryId> = body[ids_at..terms_at]
            .chunks_exact(16)
            .map(|b| Uuid::from_bytes(b.try_into().unwrap_or_default()))
            .collect();
        let layout = Layout {
            count,
            term_count,
            lengths_at,
            ids_at,
            terms_at,
            memories_at,
            key_at,
        };
        let postings_side = || read_postings(body, crc, &layout, &ids);
        let memories_side = || read_memories(body, &layout, &ids);
        let (lexical, memories) = super::parallel::both(postings_side, memories_side);
        let ((lexical, rows), memories) = (lexical?, memories?);
        let key = body[key_at..body_len - TRAILER].to_vec();
        let bounds = body[codes_len..lengths_at]
            .chunks_exact(12)
            .map(|b| RowBound {
                scale: f32_at(b, 0),
                code_norm: f32_at(b, 4),
                error_norm: f32_at(b, 8),
            })
            .collect();
        bytes.truncate(codes_len);
        bytes.shrink_to_fit();
        let codes: Vec<i8> = bytemuck::allocation::try_cast_vec(bytes)
            .map_err(|_| SnapshotError::Invalid("codes"))?;
        let codes = CompactCodes::from_parts(dimension, codes, bounds)
            .ok_or(SnapshotError::Invalid("codes"))?;
        let mut seqs: Vec<i64> = memories.iter().map(|m| m.seq).collect();
        seqs.sort_unstable();
        let expiring = memories.iter().filter(|m| m.expires_at.is_some()).count();
        let index = MemoryIndex {
            memories,
            rows,
            dense: DenseMatrix::from_codes(codes),
            lexical,
            seqs,
            expiring,
            source: Some(source),
        };
        Ok(Snapshot { key, index })
    }
}

/// Where a snapshot's sections start (byte offsets into its body), and its counts.
struct Layout {
    count: usize,
    term_count: usize,
    lengths_at: usize,
    ids_at: usize,
    terms_at: usize,
    memories_at: usize,
    key_at: usize,
}

/// The checksum, then the BM25 postings and the rows by id: one of the two threads of
/// [`MemoryIndex::from_snapshot`].
fn read_postings(
    body: &[u8],
    crc: [u8; 4],
    layout: &Layout,
    ids: &[MemoryId],
) -> Result<(LexicalIndex, FxHashMap<MemoryId, usize>), SnapshotError> {
    let Layout {
        count,
        term_count,
        lengths_at,
        ids_at,
        terms_at,
        memories_at,
        ..
    } = *layout;
    if crc32fast::hash(body).to_le_bytes() != crc {
        return Err(SnapshotError::Checksum);
    }
    let doc_len = body[lengths_at..ids_at]
        .chunks_exact(4)
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    let mut r = Reader {
        bytes: &body[..memories_at],
        at: terms_at,
    };
    if term_count > (memories_at - terms_at) / 16 {
        return Err(SnapshotError::Invalid("term count"));
    }
    let mut terms = Vec::with_capacity(term_count);
    for _ in 0..term_count {
        let term = r.string()?;
        let n = r.len()?;
        let list = r
            .take(n.checked_mul(8).ok_or(SnapshotError::Invalid("postings"))?)?
            .chunks_exact(8)
            .map(|b| Posting {
                row: u32::from_le_bytes([b[0], b[1], b[2], b[3]]),
                tf: u32::from_le_bytes([b[4], b[5], b[6], b[7]]),
            })
            .collect();
        terms.push((term, list));
    }
    if r.at != memories_at {
        return Err(SnapshotError::Invalid("bytes after the postings"));
    }
    let lexical =
        LexicalIndex::from_parts(terms, doc_len).ok_or(SnapshotError::Invalid("postings"))?;
    let mut rows = FxHashMap::default();
    rows.reserve(count);
    for (row, id) in ids.iter().enumerate() {
        if rows.insert(*id, row).is_some() {
            return Err(SnapshotError::Invalid("a memory twice"));
        }
    }
    Ok((lexical, rows))
}

/// The memories, in row order: the other thread of [`MemoryIndex::from_snapshot`].
fn read_memories(
    body: &[u8],
    layout: &Layout,
    ids: &[MemoryId],
) -> Result<Vec<Memory>, SnapshotError> {
    let Layout {
        count,
        memories_at,
        key_at,
        ..
    } = *layout;
    // Each memory takes at least 46 bytes: no count asks for more room than that.
    if count > (key_at - memories_at) / 46 {
        return Err(SnapshotError::Invalid("memory count"));
    }
    let mut r = Reader {
        bytes: &body[..key_at],
        at: memories_at,
    };
    let memories = ids
        .iter()
        .map(|&id| r.memory(id))
        .collect::<Result<Vec<_>, _>>()?;
    if r.at != key_at {
        return Err(SnapshotError::Invalid("bytes after the memories"));
    }
    Ok(memories)
}

fn kind_code(kind: MemoryKind) -> u8 {
    MemoryKind::ALL
        .iter()
        .position(|k| *k == kind)
        .map_or(u8::MAX, |i| i as u8)
}

fn f32_at(b: &[u8], at: usize) -> f32 {
    f32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

struct Writer(Vec<u8>);

impl Writer {
    fn u32(&mut self, x: u32) {
        self.0.extend_from_slice(&x.to_le_bytes());
    }

    fn u64(&mut self, x: u64) {
        self.0.extend_from_slice(&x.to_le_bytes());
    }

    fn i64(&mut self, x: i64) {
        self.0.extend_from_slice(&x.to_le_bytes());
    }

    fn bytes(&mut self, b: &[u8]) {
        self.u64(b.len() as u64);
        self.0.extend_from_slice(b);
    }

    /// Seconds and nanoseconds: every instant round-trips exactly.
    fn time(&mut self, t: DateTime<Utc>) {
        self.i64(t.timestamp());
        self.u32(t.timestamp_subsec_nanos());
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], SnapshotError> {
        let end = self
            .at
            .checked_add(n)
            .filter(|&end| end <= self.bytes.len())
            .ok_or(SnapshotError::Invalid("cut short"))?;
        let taken = &self.bytes[self.at..end];
        self.at = end;
        Ok(taken)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], SnapshotError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }

    fn u8(&mut self) -> Result<u8, SnapshotError> {
        Ok(self.array::<1>()?[0])
    }

    fn u32(&mut self) -> Result<u32, SnapshotError> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    fn i64(&mut self) -> Result<i64, SnapshotError> {
        Ok(i64::from_le_bytes(self.array()?))
    }

    fn len(&mut self) -> Result<usize, SnapshotError> {
        usize::try_from(u64::from_le_bytes(self.array()?))
            .map_err(|_| SnapshotError::Invalid("a length"))
    }

    fn bytes(&mut self) -> Result<&'a [u8], SnapshotError> {
        let n = self.len()?;
        self.take(n)
    }

    fn string(&mut self) -> Result<String, SnapshotError> {
        let b = self.bytes()?;
        String::from_utf8(b.to_vec()).map_err(|_| SnapshotError::Invalid("text"))
    }

    fn time(&mut self) -> Result<DateTime<Utc>, SnapshotError> {
        let secs = self.i64()?;
        let nanos = self.u32()?;
        DateTime::from_timestamp(secs, nanos).ok_or(SnapshotError::Invalid("a time"))
    }

    fn memory(&mut self, id: MemoryId) -> Result<Memory, SnapshotError> {
        let seq = self.i64()?;
        let kind = *MemoryKind::ALL
            .get(usize::from(self.u8()?))
            .ok_or(SnapshotError::Invalid("a kind"))?;
        let created_at = self.time()?;
        let expires_at = match self.u8()? {
            0 => None,
            1 => Some(self.time()?),
            _ => return Err(SnapshotError::Invalid("an expiry")),
        };
        let user_id = self.string()?;
        let content = self.string()?;
        let tags = self.len()?;
        let tags = (0..tags).map(|_| self.string()).collect::<Result<_, _>>()?;
        Ok(Memory {
            id,
            user_id,
            content,
            kind,
            tags,
            created_at,
            seq,
            expires_at,
        })
    }
}
