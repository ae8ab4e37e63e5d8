//! Parallel gzip as a sequence of members: the writer cuts its byte stream into chunks,
//! worker threads compress each chunk into one complete gzip member, and a writer thread
//! appends the members to the file in chunk order.
//!
//! A concatenation of gzip members is one valid gzip file (RFC 1952 §2.2): `gzip -t`,
//! `zcat`, Python's `gzip`, pandas and flate2's `MultiGzDecoder` (the trace reader's
//! decoder) read it as one stream. Members depend only on their chunk's bytes, and the
//! caller cuts chunks by size, never by timing, so the file is byte-identical whatever the
//! number of threads or the machine's load.
//!
//! Every member carries a mark in its header's extra field (RFC 1952 §2.3.1.1, subfield
//! `I3`, which other gzip readers skip): its index and whether it is the last. Without it
//! a file cut exactly between two members would read as a valid, shorter trace; with it
//! [`MemberReader`] refuses a cut, lost, repeated or appended member.
//!
//! Per chunk a worker runs raw deflate (flate2's `Compress` on zlib-rs, reset and reused:
//! no per-chunk allocation of the deflate state) and a CRC-32 (`crc32fast`, which uses the
//! CPU's carry-less multiply: several times faster than the portable CRC flate2 would
//! compute), and frames them with a fixed 10-byte header and the 8-byte trailer.
//! Chunk buffers return to the producer as they are (it overwrites them: clearing a
//! buffer would only add a pass over it), so steady state allocates one output buffer per
//! chunk and nothing per row.

use flate2::bufread::GzDecoder;
use flate2::{Compress, Compression, FlushCompress, Status};
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufRead, Read, Write};
use std::sync::mpsc::{self, Receiver, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// Subfield id of the member mark in the gzip extra field.
const MARK_ID: [u8; 2] = *b"I3";

/// Bytes of the mark: the member's index (u64, little-endian) and 1 on the last member.
const MARK_LEN: u16 = 9;

/// The member header: magic, deflate, FEXTRA, mtime 0 (so equal input gives equal bytes),
/// no extra flags, OS "unknown", then the extra field holding the mark.
fn header(index: u64, last: bool) -> [u8; 25] {
    let mut h = [0u8; 25];
    h[..10].copy_from_slice(&[0x1f, 0x8b, 8, 4, 0, 0, 0, 0, 0, 255]);
    h[10..12].copy_from_slice(&(4 + MARK_LEN).to_le_bytes());
    h[12..14].copy_from_slice(&MARK_ID);
    h[14..16].copy_from_slice(&MARK_LEN.to_le_bytes());
    h[16..24].copy_from_slice(&index.to_le_bytes());
    h[24] = u8::from(last);
    h
}

/// The mark in a member's extra field, if any: (index, last).
fn find_mark(mut extra: &[u8]) -> Option<(u64, bool)> {
    while extra.len() >= 4 {
        let len = u16::from_le_bytes([extra[2], extra[3]]) as usize;
        let data = extra.get(4..4 + len)?;
        if extra[..2] == MARK_ID && len == MARK_LEN as usize {
            let index = u64::from_le_bytes(data[..8].try_into().ok()?);
            return Some((index, data[8] == 1));
        }
        extra = &extra[4 + len..];
    }
    None
}

/// The compression level: zlib's level 1 (zlib-rs's `deflate_quick`). Traces compress
/// about 4.4× at it; level 2 gives about 6.6× at roughly half the speed, which would make
/// compression the bottleneck of trace generation.
pub fn level() -> Compression {
    Compression::fast()
}

/// Append to `out` one complete gzip member holding `data`, marked as member `index` of
/// its file and whether it is the `last`. `z` is a raw-deflate compressor
/// (`Compress::new(level(), false)`), reset here so it can be reused.
pub fn encode_member(
    z: &mut Compress,
    data: &[u8],
    index: u64,
    last: bool,
    out: &mut Vec<u8>,
) -> std::io::Result<()> {
    z.reset();
    out.extend_from_slice(&header(index, last));
    let mut consumed = 0usize;
    loop {
        // Level 1 uses static Huffman codes: at most ~9/8 of the input plus block overhead.
        out.reserve((data.len() - consumed) / 8 * 9 + 1024);
        let before = (z.total_in(), z.total_out());
        let status = z
            .compress_vec(&data[consumed..], out, FlushCompress::Finish)
            .map_err(std::io::Error::other)?;
        consumed = (z.total_in()) as usize;
        if status == Status::StreamEnd {
            break;
        }
        if (z.total_in(), z.total_out()) == before {
            return Err(std::io::Error::other("deflate made no progress"));
        }
    }
    let mut crc = crc32fast::Hasher::new();
    crc.update(data);
    out.extend_from_slice(&crc.finalize().to_le_bytes());
    // ISIZE: the input length modulo 2^32 (RFC 1952).
    out.extend_from_slice(&(data.len() as u32).to_le_bytes());
    Ok(())
}

/// A chunk, its place in the stream and whether it is the last.
type Job = (u64, Vec<u8>, bool);

/// The pool: workers compressing chunks, a writer thread appending members in order.
pub struct GzMembers {
    tx: Option<SyncSender<Job>>,
    spare: Receiver<Vec<u8>>,
    workers: Vec<JoinHandle<()>>,
    writer: Option<JoinHandle<std::io::Result<File>>>,
    seq: u64,
}

/// Compression threads by default: one per core, at most 4 (a trace's producer, the
/// generator, is a single thread: more compressors than it can feed only wait).
pub fn default_threads() -> usize {
    std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .clamp(1, 4)
}

impl GzMembers {
    /// Start `threads` compression threads (at least 1) and the writer thread on `file`.
    pub fn new(file: File, threads: usize) -> Self {
        let k = threads.max(1);
        let (tx, rx) = mpsc::sync_channel::<Job>(2 * k);
        let rx = Arc::new(Mutex::new(rx));
        let (out_tx, out_rx) = mpsc::sync_channel::<(u64, std::io::Result<Vec<u8>>)>(2 * k);
        let (spare_tx, spare) = mpsc::channel::<Vec<u8>>();
        let written: Arc<Mutex<Vec<Vec<u8>>>> = Arc::default();
        let workers = (0..k)
            .map(|_| {
                let (rx, out_tx, spare_tx) = (Arc::clone(&rx), out_tx.clone(), spare_tx.clone());
                let written = Arc::clone(&written);
                std::thread::spawn(move || compress_jobs(&rx, &out_tx, &spare_tx, &written))
            })
            .collect();
        drop(out_tx);
        let writer = std::thread::spawn(move || write_in_order(file, out_rx, &written, 4 * k));
        GzMembers {
            tx: Some(tx),
            spare,
            workers,
            writer: Some(writer),
            seq: 0,
        }
    }

    fn broken() -> std::io::Error {
        std::io::Error::other("gzip threads stopped")
    }

    /// Hand `chunk` (the next bytes of the stream) to a worker and return a buffer to fill
    /// next: a recycled one, contents stale, when available, else an empty one.
    pub fn send(&mut self, chunk: Vec<u8>) -> std::io::Result<Vec<u8>> {
        self.send_member(chunk, false)
    }

    fn send_member(&mut self, chunk: Vec<u8>, last: bool) -> std::io::Result<Vec<u8>> {
        let tx = self.tx.as_ref().ok_or_else(Self::broken)?;
        if tx.send((self.seq, chunk, last)).is_err() {
            // Every worker ended early: surface the writer's error.
            self.stop();
            return Err(match self.writer.take().map(|h| h.join()) {
                Some(Ok(Err(e))) => e,
                _ => Self::broken(),
            });
        }
        self.seq += 1;
        Ok(self.spare.try_recv().unwrap_or_default())
    }

    fn stop(&mut self) {
        drop(self.tx.take());
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
    }

    /// Send `rest` (the stream's last bytes, possibly none) as the member marked last, wait
    /// for every member to be written; the file, for the caller to sync and rename.
    pub fn finish(mut self, rest: Vec<u8>) -> std::io::Result<File> {
        self.send_member(rest, true)?;
        self.stop();
        match self.writer.take().map(|h| h.join()) {
            Some(Ok(r)) => r,
            _ => Err(Self::broken()),
        }
    }
}

impl Drop for GzMembers {
    fn drop(&mut self) {
        self.stop();
        if let Some(h) = self.writer.take() {
            let _ = h.join();
        }
    }
}

/// A worker: compress chunks until the producer hangs up; each chunk's buffer goes back
/// to the producer, each member into a buffer the writer has written out (when one is
/// free).
fn compress_jobs(
    rx: &Mutex<Receiver<Job>>,
    out_tx: &SyncSender<(u64, std::io::Result<Vec<u8>>)>,
    spare_tx: &mpsc::Sender<Vec<u8>>,
    written: &Mutex<Vec<Vec<u8>>>,
) {
    let mut z = Compress::new(level(), false);
    loop {
        let job = match rx.lock() {
            Ok(r) => r.recv(),
            Err(_) => return,
        };
        let Ok((seq, data, last)) = job else {
            return;
        };
        let reused = written.lock().ok().and_then(|mut w| w.pop());
        let mut member = reused.unwrap_or_else(|| Vec::with_capacity(data.len() / 3));
        let res = encode_member(&mut z, &data, seq, last, &mut member).map(|_| member);
        let _ = spare_tx.send(data);
        if out_tx.send((seq, res)).is_err() {
            return;
        }
    }
}

/// The writer thread: members arrive in any order and are written in sequence; up to
/// `keep` written buffers are kept, emptied, for the workers to reuse.
fn write_in_order(
    mut file: File,
    members: Receiver<(u64, std::io::Result<Vec<u8>>)>,
    written: &Mutex<Vec<Vec<u8>>>,
    keep: usize,
) -> std::io::Result<File> {
    let mut next = 0u64;
    let mut pending: BTreeMap<u64, Vec<u8>> = BTreeMap::new();
    for (seq, res) in members {
        pending.insert(seq, res?);
        while let Some(mut buf) = pending.remove(&next) {
            file.write_all(&buf)?;
            next += 1;
            buf.clear();
            if let Ok(mut w) = written.lock() {
                if w.len() < keep {
                    w.push(buf);
                }
            }
        }
    }
    if !pending.is_empty() {
        return Err(std::io::Error::other(
            "gzip worker stopped early: a chunk is missing",
        ));
    }
    Ok(file)
}

/// Reads a gzip file of one or more members as one stream: any gzip file. When its first
/// member carries the mark [`GzMembers`] writes, every member must carry it, numbered in
/// order, and the file must end with the member marked last: a file cut between two
/// members, or with a member lost, repeated or appended, is an error (kind `InvalidData`)
/// instead of a shorter stream.
pub struct MemberReader<R: BufRead> {
    /// The member being read (`None` at the end).
    cur: Option<GzDecoder<R>>,
    /// Members read to their end.
    done: u64,
    /// Whether the first member was marked (known after it).
    marked: bool,
    /// Whether the member marked last was read.
    last_seen: bool,
}

impl<R: BufRead> MemberReader<R> {
    /// Read the members of `input`.
    pub fn new(input: R) -> Self {
        MemberReader {
            cur: Some(GzDecoder::new(input)),
            done: 0,
            marked: false,
            last_seen: false,
        }
    }

    /// At the end of a member: check its mark against the members before it.
    fn member_end(&mut self, mark: Option<(u64, bool)>) -> std::io::Result<()> {
        let n = self.done;
        if n == 0 {
            self.marked = mark.is_some();
        }
        self.done += 1;
        if !self.marked {
            return Ok(());
        }
        match mark {
            Some((i, last)) if i == n => {
                self.last_seen = last;
                Ok(())
            }
            Some((i, _)) => Err(bad(format!(
                "gzip member {} is marked as member {i}: members were lost, repeated or reordered",
                n + 1
            ))),
            None => Err(bad(format!(
                "gzip member {} lacks the member mark the first one has: the file was altered",
                n + 1
            ))),
        }
    }
}

fn bad(msg: String) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, msg)
}

impl<R: BufRead> Read for MemberReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        loop {
            let Some(d) = self.cur.as_mut() else {
                return Ok(0);
            };
            let n = d.read(buf)?;
            if n > 0 || buf.is_empty() {
                return Ok(n);
            }
            let Some(d) = self.cur.take() else {
                return Ok(0);
            };
            let mark = d.header().and_then(|h| h.extra()).and_then(find_mark);
            let mut rest = d.into_inner();
            self.member_end(mark)?;
            let more = !rest.fill_buf()?.is_empty();
            match (more, self.marked, self.last_seen) {
                (true, true, true) => {
                    return Err(bad(format!(
                        "data follows gzip member {}, which is marked last",
                        self.done
                    )))
                }
                (false, true, false) => {
                    return Err(bad(format!(
                        "the file ends after gzip member {}, which is not marked last: it was cut short",
                        self.done
                    )))
                }
                (true, ..) => self.cur = Some(GzDecoder::new(rest)),
                (false, ..) => return Ok(0),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gunzip(bytes: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        flate2::read::MultiGzDecoder::new(bytes)
            .read_to_end(&mut out)
            .unwrap();
        out
    }

    #[test]
    fn a_member_is_a_gzip_file_that_flate2s_own_decoder_accepts() {
        let data: Vec<u8> = (0..200_000u32)
            .flat_map(|i| (i % 251).to_le_bytes())
            .collect();
        let mut z = Compress::new(level(), false);
        let mut m = Vec::new();
        encode_member(&mut z, &data, 0, false, &mut m).unwrap();
        // flate2's single-member decoder checks header, CRC-32 and ISIZE.
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(&m[..])
            .read_to_end(&mut out)
            .unwrap();
        assert_eq!(out, data);
        // the compressor is reused: a second member of other data is independent
        let mut m2 = Vec::new();
        encode_member(&mut z, b"abc", 1, true, &mut m2).unwrap();
        m.extend_from_slice(&m2);
        let mut both = data.clone();
        both.extend_from_slice(b"abc");
        assert_eq!(gunzip(&m), both);
    }

    #[test]
    fn empty_and_incompressible_chunks_round_trip() {
        let mut z = Compress::new(level(), false);
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let noise: Vec<u8> = (0..300_000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        for data in [&[][..], &noise[..]] {
            let mut m = Vec::new();
            encode_member(&mut z, data, 0, true, &mut m).unwrap();
            assert_eq!(gunzip(&m), data);
        }
    }
    /// Members of `parts`, marked as the writer marks them.
    fn marked(parts: &[&[u8]]) -> Vec<Vec<u8>> {
        let mut z = Compress::new(level(), false);
        (0..parts.len())
            .map(|i| {
                let mut m = Vec::new();
                encode_member(&mut z, parts[i], i as u64, i + 1 == parts.len(), &mut m).unwrap();
                m
            })
            .collect()
    }

    fn read_members(bytes: &[u8]) -> std::io::Result<Vec<u8>> {
        let mut out = Vec::new();
        MemberReader::new(bytes).read_to_end(&mut out).map(|_| out)
    }

    #[test]
    fn marked_members_read_as_one_stream_and_other_tools_see_plain_gzip() {
        let m = marked(&[b"one,", b"", b"two,", b"three"]).concat();
        assert_eq!(read_members(&m).unwrap(), b"one,two,three");
        assert_eq!(gunzip(&m), b"one,two,three");
    }

    #[test]
    fn a_marked_file_cut_between_members_or_with_members_moved_is_an_error() {
        let ms = marked(&[b"aaaa", b"bbbb", b"cccc"]);
        let cases = [
            (
                "cut after member 2",
                [&ms[0][..], &ms[1]].concat(),
                "not marked last",
            ),
            (
                "member 2 lost",
                [&ms[0][..], &ms[2]].concat(),
                "marked as member 2",
            ),
            (
                "member 2 twice",
                [&ms[0][..], &ms[1], &ms[1], &ms[2]].concat(),
                "marked as member 1",
            ),
            (
                "data appended",
                [&ms.concat()[..], &ms[0]].concat(),
                "marked last",
            ),
        ];
        for (what, bytes, says) in cases {
            let e = read_members(&bytes).expect_err(what);
            assert_eq!(e.kind(), std::io::ErrorKind::InvalidData, "{what}");
            assert!(e.to_string().contains(says), "{what}: {e}");
        }
    }

    #[test]
    fn unmarked_members_of_other_encoders_are_read_as_any_gzip_reader_would() {
        use flate2::write::GzEncoder;
        let members: Vec<Vec<u8>> = [&b"x,y"[..], b"", b",z"]
            .iter()
            .map(|part| {
                let mut e = GzEncoder::new(Vec::new(), Compression::default());
                e.write_all(part).unwrap();
                e.finish().unwrap()
            })
            .collect();
        let all = members.concat();
        assert_eq!(read_members(&all).unwrap(), b"x,y,z");
        // whole unmarked members are a valid gzip file: nothing says more should follow
        assert_eq!(read_members(&members[0]).unwrap(), b"x,y");
        // a member cut short is not
        let cut = &members[0][..members[0].len() - 3];
        assert_eq!(
            read_members(cut).map_err(|e| e.kind()),
            Err(std::io::ErrorKind::UnexpectedEof)
        );
        // no member at all is not a gzip file
        assert!(read_members(&[]).is_err());
    }
}
