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
//! Per chunk a worker runs raw deflate (flate2's `Compress` on zlib-rs, reset and reused:
//! no per-chunk allocation of the deflate state) and a CRC-32 (`crc32fast`, which uses the
//! CPU's carry-less multiply: several times faster than the portable CRC flate2 would
//! compute), and frames them with a fixed 10-byte header and the 8-byte trailer.
//! Emptied chunk buffers return to the producer, so steady state allocates one output
//! buffer per chunk and nothing per row.

use flate2::{Compress, Compression, FlushCompress, Status};
use std::collections::BTreeMap;
use std::fs::File;
use std::io::Write;
use std::sync::mpsc::{self, Receiver, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// The member header: magic, deflate, no flags, mtime 0 (so equal input gives equal
/// bytes), no extra flags, OS "unknown".
const HEADER: [u8; 10] = [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 255];

/// The compression level: zlib's level 1 (zlib-rs's `deflate_quick`). Traces compress
/// about 4.4× at it; level 2 gives about 6.6× at roughly half the speed, which would make
/// compression the bottleneck of trace generation.
pub fn level() -> Compression {
    Compression::fast()
}

/// Append to `out` one complete gzip member holding `data`. `z` is a raw-deflate
/// compressor (`Compress::new(level, false)`), reset here so it can be reused.
pub fn encode_member(z: &mut Compress, data: &[u8], out: &mut Vec<u8>) -> std::io::Result<()> {
    z.reset();
    out.extend_from_slice(&HEADER);
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

/// A chunk and its place in the stream.
type Job = (u64, Vec<u8>);

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
        let workers = (0..k)
            .map(|_| {
                let (rx, out_tx, spare_tx) = (Arc::clone(&rx), out_tx.clone(), spare_tx.clone());
                std::thread::spawn(move || compress_jobs(&rx, &out_tx, &spare_tx))
            })
            .collect();
        drop(out_tx);
        let writer = std::thread::spawn(move || write_in_order(file, out_rx));
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

    /// Hand `chunk` (the next bytes of the stream) to a worker and return an empty buffer
    /// to fill next (a recycled one when available).
    pub fn send(&mut self, chunk: Vec<u8>) -> std::io::Result<Vec<u8>> {
        let tx = self.tx.as_ref().ok_or_else(Self::broken)?;
        if tx.send((self.seq, chunk)).is_err() {
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

    /// Wait for every member to be written; the file, for the caller to sync and rename.
    pub fn finish(mut self) -> std::io::Result<File> {
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
/// emptied.
fn compress_jobs(
    rx: &Mutex<Receiver<Job>>,
    out_tx: &SyncSender<(u64, std::io::Result<Vec<u8>>)>,
    spare_tx: &mpsc::Sender<Vec<u8>>,
) {
    let mut z = Compress::new(level(), false);
    loop {
        let job = match rx.lock() {
            Ok(r) => r.recv(),
            Err(_) => return,
        };
        let Ok((seq, mut data)) = job else { return };
        let mut member = Vec::with_capacity(data.len() / 3);
        let res = encode_member(&mut z, &data, &mut member).map(|_| member);
        data.clear();
        let _ = spare_tx.send(data);
        if out_tx.send((seq, res)).is_err() {
            return;
        }
    }
}

/// The writer thread: members arrive in any order and are written in sequence.
fn write_in_order(
    mut file: File,
    members: Receiver<(u64, std::io::Result<Vec<u8>>)>,
) -> std::io::Result<File> {
    let mut next = 0u64;
    let mut pending: BTreeMap<u64, Vec<u8>> = BTreeMap::new();
    for (seq, res) in members {
        pending.insert(seq, res?);
        while let Some(buf) = pending.remove(&next) {
            file.write_all(&buf)?;
            next += 1;
        }
    }
    if !pending.is_empty() {
        return Err(std::io::Error::other(
            "gzip worker stopped early: a chunk is missing",
        ));
    }
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

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
        encode_member(&mut z, &data, &mut m).unwrap();
        // flate2's single-member decoder checks header, CRC-32 and ISIZE.
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(&m[..])
            .read_to_end(&mut out)
            .unwrap();
        assert_eq!(out, data);
        // the compressor is reused: a second member of other data is independent
        let mut m2 = Vec::new();
        encode_member(&mut z, b"abc", &mut m2).unwrap();
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
            encode_member(&mut z, data, &mut m).unwrap();
            assert_eq!(gunzip(&m), data);
        }
    }
}
