//! Durable storage under `--data-dir`: a write-ahead log of every write, fsynced before the
//! write is acknowledged, plus snapshots that let the log be compacted.
//!
//! Files in the directory:
//! - `wal-R.log`: the writes with resourceVersion above `R`, one framed record each;
//! - `snapshot-R.snap`: every object at resourceVersion `R` (a header record, then one record
//!   per object), written to a `.tmp` file, fsynced, renamed and the directory fsynced;
//!
//! One server at a time may use a directory; this is not enforced yet (the MSRV predates
//! `File::try_lock`).
//!
//! A record is `[payload length: u32 LE][CRC-32 of payload: u32 LE][payload]`; the payload is
//! `[op: u8][resourceVersion: u64 LE][storage name length: u8][storage name][object JSON]`.
//!
//! **Invariants:** records reach the log in resourceVersion order (they are appended under
//! the store lock); a write is acknowledged only after the fsync that covers it
//! ([`Wal::sync`]); a snapshot at `R` is complete before the logs before `wal-R.log` are
//! removed, so recovery = newest snapshot + the records above it in the logs. Only the last
//! log can end in a torn record (a crash mid-append): it is dropped and the file truncated.
//! A bad record anywhere else is corruption, reported with the file and offset.

use std::collections::{BTreeMap, HashMap};
use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;

use axum::body::Bytes;
use serde_json::Value;

/// Record op: the object exists with this state.
pub const OP_PUT: u8 = 0;
/// Record op: the object is gone.
pub const OP_DELETE: u8 = 1;
/// Record op: a snapshot's header (object = number of objects, in decimal).
const OP_SNAPSHOT: u8 = 2;

/// Errors opening or recovering a data directory.
#[derive(Debug, thiserror::Error)]
pub enum WalError {
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Another process (or another open [`Wal`]) holds the directory's lock file.
    #[error(
        "data directory {} is in use by another kubesched apiserver (it holds the lock on {})",
        dir.display(),
        dir.join(LOCK_FILE).display()
    )]
    Locked {
        /// The data directory.
        dir: PathBuf,
    },
    /// A record before the end of the log (or in a snapshot) is damaged.
    #[error("{path}: corrupt record at offset {offset}: {reason}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// Byte offset of the bad record.
        offset: u64,
        /// What is wrong.
        reason: String,
    },
}

/// The file in the data directory whose OS advisory lock (flock on Unix) an open [`Wal`]
/// holds, so two servers never append to one log. The lock goes with the process, also on
/// SIGKILL, so a crashed server leaves nothing to clean up.
pub const LOCK_FILE: &str = "lock";

/// Takes the data directory's lock; it is held as long as the returned file is open.
fn lock_dir(dir: &Path) -> Result<fs::File, WalError> {
    let path = dir.join(LOCK_FILE);
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(io_err(&path))?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(fs::TryLockError::WouldBlock) => Err(WalError::Locked {
            dir: dir.to_path_buf(),
        }),
        Err(fs::TryLockError::Error(e)) => Err(io_err(&path)(e)),
    }
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> WalError + '_ {
    move |source| WalError::Io {
        path: path.to_path_buf(),
        source,
    }
}

const CRC_TABLE: [u32; 256] = {
    let mut table = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 {
                0xEDB8_8320 ^ (c >> 1)
            } else {
                c >> 1
            };
            k += 1;
        }
        table[i] = c;
        i += 1;
    }
    table
};

/// CRC-32 (IEEE, as zlib and `crc32fast`).
pub fn crc32(data: &[u8]) -> u32 {
    let mut c = !0u32;
    for &b in data {
        c = CRC_TABLE[((c ^ u32::from(b)) & 0xFF) as usize] ^ (c >> 8);
    }
    !c
}

/// Appends one framed record to `buf`.
pub fn encode_record(buf: &mut Vec<u8>, op: u8, rv: u64, storage: &str, object: &[u8]) {
    let storage = &storage.as_bytes()[..storage.len().min(255)];
    let len = 1 + 8 + 1 + storage.len() + object.len();
    let start = buf.len();
    buf.extend_from_slice(&(len as u32).to_le_bytes());
    buf.extend_from_slice(&[0; 4]);
    buf.push(op);
    buf.extend_from_slice(&rv.to_le_bytes());
    buf.push(storage.len() as u8);
    buf.extend_from_slice(storage);
    buf.extend_from_slice(object);
    let crc = crc32(&buf[start + 8..]);
    buf[start + 4..start + 8].copy_from_slice(&crc.to_le_bytes());
}

/// One decoded record.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    /// [`OP_PUT`] or [`OP_DELETE`] (or a snapshot header).
    pub op: u8,
    /// The write's resourceVersion.
    pub rv: u64,
    /// Storage key of the resource.
    pub storage: String,
    /// The object's JSON.
    pub object: Vec<u8>,
}

/// The records of one file, where the valid part ends, and whether a torn tail was dropped.
#[derive(Debug)]
pub struct Decoded {
    /// The records, in order.
    pub records: Vec<Record>,
    /// Length of the valid prefix.
    pub valid_len: u64,
    /// A damaged last record was dropped.
    pub torn: bool,
}

/// Decodes a file's records. With `tail_ok`, a damaged last record (cut short, or whose
/// checksum fails and which ends at the end of the file, or followed only by zeros) is a torn
/// tail and dropped; any other damaged record is [`WalError::Corrupt`].
pub fn decode(path: &Path, data: &[u8], tail_ok: bool) -> Result<Decoded, WalError> {
    let mut records = Vec::new();
    let mut off = 0usize;
    let corrupt = |offset: usize, reason: &str| WalError::Corrupt {
        path: path.to_path_buf(),
        offset: offset as u64,
        reason: reason.to_string(),
    };
    while off < data.len() {
        let rest = &data[off..];
        let torn = |reason: &str, ends_at_eof: bool| {
            if tail_ok && (ends_at_eof || rest.iter().all(|&b| b == 0)) {
                Ok(())
            } else {
                Err(corrupt(off, reason))
            }
        };
        if rest.len() < 8 {
            torn("truncated record header", true)?;
            return Ok(Decoded {
                records,
                valid_len: off as u64,
                torn: true,
            });
        }
        let len = u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
        let crc = u32::from_le_bytes([rest[4], rest[5], rest[6], rest[7]]);
        let bad = if len < 10 {
            Some(("invalid record length", false))
        } else if rest.len() < 8 + len {
            Some(("truncated record", true))
        } else if crc32(&rest[8..8 + len]) != crc {
            Some(("checksum mismatch", rest.len() == 8 + len))
        } else {
            None
        };
        if let Some((reason, at_eof)) = bad {
            torn(reason, at_eof)?;
            return Ok(Decoded {
                records,
                valid_len: off as u64,
                torn: true,
            });
        }
        let p = &rest[8..8 + len];
        let slen = p[9] as usize;
        if 10 + slen > len {
            return Err(corrupt(off, "storage name past the record"));
        }
        let mut rv = [0u8; 8];
        rv.copy_from_slice(&p[1..9]);
        records.push(Record {
            op: p[0],
            rv: u64::from_le_bytes(rv),
            storage: String::from_utf8_lossy(&p[10..10 + slen]).into_owned(),
            object: p[10 + slen..].to_vec(),
        });
        off += 8 + len;
    }
    Ok(Decoded {
        records,
        valid_len: off as u64,
        torn: false,
    })
}

fn log_name(rv: u64) -> String {
    format!("wal-{rv:020}.log")
}

fn snapshot_name(rv: u64) -> String {
    format!("snapshot-{rv:020}.snap")
}

fn parse_name(name: &str, prefix: &str, suffix: &str) -> Option<u64> {
    name.strip_prefix(prefix)?
        .strip_suffix(suffix)?
        .parse()
        .ok()
}

fn sync_dir(dir: &Path) -> Result<(), WalError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io_err(dir))
}

/// Objects by storage key, then (namespace, name).
pub type Objects = HashMap<&'static str, BTreeMap<(String, String), Bytes>>;

/// What recovery found.
#[derive(Debug, Default)]
pub struct Recovered {
    /// The objects.
    pub objects: Objects,
    /// The highest resourceVersion written.
    pub rv: u64,
    /// A torn last record was dropped.
    pub dropped_torn_tail: bool,
}

fn apply(objects: &mut Objects, path: &Path, offset: u64, r: &Record) -> Result<(), WalError> {
    let corrupt = |reason: String| WalError::Corrupt {
        path: path.to_path_buf(),
        offset,
        reason,
    };
    let storage = crate::resources::by_storage(&r.storage)
        .ok_or_else(|| corrupt(format!("unknown resource {:?}", r.storage)))?
        .storage;
    let obj: Value = serde_json::from_slice(&r.object)
        .map_err(|e| corrupt(format!("object is not JSON: {e}")))?;
    let s = |p: &str| {
        obj.pointer(p)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let key = (s("/metadata/namespace"), s("/metadata/name"));
    match r.op {
        OP_PUT => {
            objects
                .entry(storage)
                .or_default()
                .insert(key, Bytes::copy_from_slice(&r.object));
        }
        OP_DELETE => {
            if let Some(m) = objects.get_mut(storage) {
                m.remove(&key);
            }
        }
        op => return Err(corrupt(format!("unknown op {op}"))),
    }
    Ok(())
}

fn read_file(path: &Path) -> Result<Vec<u8>, WalError> {
    let mut data = Vec::new();
    File::open(path)
        .and_then(|mut f| f.read_to_end(&mut data))
        .map_err(io_err(path))?;
    Ok(data)
}

fn load_snapshot(path: &Path, objects: &mut Objects) -> Result<u64, WalError> {
    let data = read_file(path)?;
    let d = decode(path, &data, false)?;
    let corrupt = |reason: &str| WalError::Corrupt {
        path: path.to_path_buf(),
        offset: 0,
        reason: reason.to_string(),
    };
    let (header, rest) = d
        .records
        .split_first()
        .ok_or_else(|| corrupt("empty snapshot"))?;
    let count: usize = std::str::from_utf8(&header.object)
        .ok()
        .and_then(|s| s.parse().ok())
        .filter(|_| header.op == OP_SNAPSHOT)
        .ok_or_else(|| corrupt("no snapshot header"))?;
    if count != rest.len() {
        return Err(corrupt("object count does not match the header"));
    }
    for r in rest {
        apply(objects, path, 0, r)?;
    }
    Ok(header.rv)
}

/// Writes a snapshot of `objects` at `rv` atomically (temp file, fsync, rename, fsync dir).
pub fn write_snapshot(dir: &Path, rv: u64, objects: &Objects) -> Result<(), WalError> {
    let count: usize = objects.values().map(BTreeMap::len).sum();
    let mut buf = Vec::new();
    encode_record(&mut buf, OP_SNAPSHOT, rv, "", count.to_string().as_bytes());
    for (storage, m) in objects {
        for json in m.values() {
            encode_record(&mut buf, OP_PUT, rv, storage, json);
        }
    }
    let path = dir.join(snapshot_name(rv));
    let tmp = dir.join(format!("{}.tmp", snapshot_name(rv)));
    let mut f = File::create(&tmp).map_err(io_err(&tmp))?;
    f.write_all(&buf).map_err(io_err(&tmp))?;
    f.sync_all().map_err(io_err(&tmp))?;
    drop(f);
    fs::rename(&tmp, &path).map_err(io_err(&path))?;
    sync_dir(dir)
}

/// Recovers the state in `dir` (newest snapshot, then the logs after it). Returns it with
/// the path and valid length of the log to append to.
fn recover(dir: &Path) -> Result<(Recovered, PathBuf, u64), WalError> {
    let mut snapshots = Vec::new();
    let mut logs = Vec::new();
    for entry in fs::read_dir(dir).map_err(io_err(dir))? {
        let entry = entry.map_err(io_err(dir))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.ends_with(".tmp") {
            fs::remove_file(entry.path()).map_err(io_err(&entry.path()))?;
        } else if let Some(rv) = parse_name(&name, "snapshot-", ".snap") {
            snapshots.push(rv);
        } else if let Some(rv) = parse_name(&name, "wal-", ".log") {
            logs.push(rv);
        }
    }
    snapshots.sort_unstable();
    logs.sort_unstable();
    let mut rec = Recovered::default();
    let base = match snapshots.last() {
        Some(&s) => load_snapshot(&dir.join(snapshot_name(s)), &mut rec.objects)?,
        None => 0,
    };
    rec.rv = base;
    // Logs before the snapshot hold only writes it contains.
    logs.retain(|&l| l >= base);
    let last = logs.last().copied();
    let mut append = (dir.join(log_name(base)), 0);
    for l in logs {
        let path = dir.join(log_name(l));
        let data = read_file(&path)?;
        let is_last = Some(l) == last;
        let d = decode(&path, &data, is_last)?;
        let mut offset = 0u64;
        for r in &d.records {
            if r.rv > base {
                apply(&mut rec.objects, &path, offset, r)?;
                rec.rv = rec.rv.max(r.rv);
            }
            offset += 8 + 10 + r.storage.len() as u64 + r.object.len() as u64;
        }
        if d.torn {
            tracing::warn!(file = %path.display(), offset = d.valid_len, "dropping a torn last record");
            rec.dropped_torn_tail = true;
        }
        if is_last {
            append = (path, d.valid_len);
        }
    }
    Ok((rec, append.0, append.1))
}

/// Durability progress, published by the flusher.
#[derive(Debug, Clone, Default)]
struct Durable {
    rv: u64,
    failed: Option<String>,
}

#[derive(Default)]
struct Segment {
    /// Start a new log `wal-R.log` before writing this segment.
    new_log: Option<u64>,
    buf: Vec<u8>,
}

#[derive(Default)]
struct Pending {
    segments: Vec<Segment>,
    /// resourceVersion of the last appended record.
    appended: u64,
    /// Bytes in the current log, written or pending.
    log_bytes: u64,
    snapshotting: bool,
    stop: bool,
}

struct Shared {
    pending: Mutex<Pending>,
    wake: Condvar,
    durable: tokio::sync::watch::Sender<Durable>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Pending> {
        self.pending
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// An open write-ahead log with its flusher thread (group commit: every fsync covers all the
/// records appended while the previous one ran).
pub struct Wal {
    dir: PathBuf,
    shared: Arc<Shared>,
    durable: tokio::sync::watch::Receiver<Durable>,
    compact_bytes: u64,
    flusher: Option<JoinHandle<()>>,
    /// Holds the directory's lock until the log is dropped (after the flusher stopped).
    _lock: fs::File,
}

impl std::fmt::Debug for Wal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Wal")
            .field("dir", &self.dir)
            .finish_non_exhaustive()
    }
}

impl Wal {
    /// Opens (creating if needed) `dir`, recovers its state and starts the flusher. The log is
    /// compacted when it grows past `compact_bytes`.
    pub fn open(dir: &Path, compact_bytes: u64) -> Result<(Wal, Recovered), WalError> {
        fs::create_dir_all(dir).map_err(io_err(dir))?;
        let lock = lock_dir(dir)?;
        let (rec, path, valid_len) = recover(dir)?;
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(io_err(&path))?;
        file.set_len(valid_len).map_err(io_err(&path))?;
        file.sync_all().map_err(io_err(&path))?;
        sync_dir(dir)?;
        let (tx, rx) = tokio::sync::watch::channel(Durable {
            rv: rec.rv,
            failed: None,
        });
        let shared = Arc::new(Shared {
            pending: Mutex::new(Pending {
                appended: rec.rv,
                log_bytes: valid_len,
                ..Pending::default()
            }),
            wake: Condvar::new(),
            durable: tx,
        });
        let flusher = {
            let shared = shared.clone();
            let flush_dir = dir.to_path_buf();
            std::thread::Builder::new()
                .name("apiserver-wal".into())
                .spawn(move || flush_loop(&shared, &flush_dir, file, path))
                .map_err(io_err(dir))?
        };
        Ok((
            Wal {
                dir: dir.to_path_buf(),
                shared,
                durable: rx,
                compact_bytes,
                flusher: Some(flusher),
                _lock: lock,
            },
            rec,
        ))
    }

    /// Appends a record (call in resourceVersion order). Returns whether the log has grown
    /// past the compaction size and no snapshot is running: the caller then passes a copy of
    /// the state to [`Wal::compact`].
    pub fn append(&self, op: u8, rv: u64, storage: &str, object: &[u8]) -> bool {
        let mut p = self.shared.lock();
        if p.segments.is_empty() {
            p.segments.push(Segment::default());
        }
        let seg = p.segments.last_mut().map(|s| &mut s.buf);
        let before = seg.as_ref().map_or(0, |b| b.len());
        let mut added = 0;
        if let Some(buf) = seg {
            encode_record(buf, op, rv, storage, object);
            added = buf.len() - before;
        }
        p.appended = rv;
        p.log_bytes += added as u64;
        self.shared.wake.notify_one();
        p.log_bytes > self.compact_bytes && !p.snapshotting
    }

    /// Starts a new log after `rv` and writes a snapshot of `objects` (the state at `rv`) on
    /// a background thread; when it is durable, the older logs and snapshots are removed.
    pub fn compact(&self, rv: u64, objects: Objects) {
        {
            let mut p = self.shared.lock();
            p.snapshotting = true;
            p.log_bytes = 0;
            p.segments.push(Segment {
                new_log: Some(rv),
                buf: Vec::new(),
            });
        }
        let shared = self.shared.clone();
        let dir = self.dir.clone();
        let spawned = std::thread::Builder::new()
            .name("apiserver-snapshot".into())
            .spawn(move || {
                match write_snapshot(&dir, rv, &objects).and_then(|()| remove_before(&dir, rv)) {
                    Ok(()) => tracing::info!(rv, "snapshot written, log compacted"),
                    Err(e) => tracing::error!(error = %e, "writing a snapshot failed"),
                }
                shared.lock().snapshotting = false;
            });
        if let Err(e) = spawned {
            tracing::error!(error = %e, "cannot start the snapshot thread");
            self.shared.lock().snapshotting = false;
        }
    }

    /// Waits until every record appended so far is fsynced. Err when writing failed.
    pub async fn sync(&self) -> Result<(), String> {
        let target = self.shared.lock().appended;
        let mut rx = self.durable.clone();
        let d = rx
            .wait_for(|d| d.rv >= target || d.failed.is_some())
            .await
            .map_err(|_| "the write-ahead log stopped".to_string())?;
        match &d.failed {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }
}

impl Drop for Wal {
    fn drop(&mut self) {
        self.shared.lock().stop = true;
        self.shared.wake.notify_one();
        if let Some(t) = self.flusher.take() {
            let _ = t.join();
        }
    }
}

fn remove_before(dir: &Path, rv: u64) -> Result<(), WalError> {
    for entry in fs::read_dir(dir).map_err(io_err(dir))? {
        let entry = entry.map_err(io_err(dir))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let old = parse_name(&name, "wal-", ".log").is_some_and(|l| l < rv)
            || parse_name(&name, "snapshot-", ".snap").is_some_and(|s| s < rv);
        if old {
            fs::remove_file(entry.path()).map_err(io_err(&entry.path()))?;
        }
    }
    sync_dir(dir)
}

fn flush_loop(shared: &Shared, dir: &Path, mut file: File, mut path: PathBuf) {
    loop {
        let (segments, rv) = {
            let mut p = shared.lock();
            while p
                .segments
                .iter()
                .all(|s| s.buf.is_empty() && s.new_log.is_none())
                && !p.stop
            {
                p = shared
                    .wake
                    .wait(p)
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
            }
            if p.stop
                && p.segments
                    .iter()
                    .all(|s| s.buf.is_empty() && s.new_log.is_none())
            {
                return;
            }
            (std::mem::take(&mut p.segments), p.appended)
        };
        let write = || -> Result<(), WalError> {
            for seg in segments {
                if let Some(r) = seg.new_log {
                    file.sync_data().map_err(io_err(&path))?;
                    path = dir.join(log_name(r));
                    file = File::create(&path).map_err(io_err(&path))?;
                    sync_dir(dir)?;
                }
                file.write_all(&seg.buf).map_err(io_err(&path))?;
            }
            file.sync_data().map_err(io_err(&path))
        };
        match write() {
            Ok(()) => {
                shared.durable.send_modify(|d| d.rv = d.rv.max(rv));
            }
            Err(e) => {
                tracing::error!(error = %e, "writing the write-ahead log failed");
                shared.durable.send_modify(|d| {
                    d.failed = Some(format!("writing the data directory failed: {e}"))
                });
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pod(name: &str, rv: u64) -> Vec<u8> {
        serde_json::to_vec(&json!({"metadata": {"namespace": "default", "name": name, "resourceVersion": rv.to_string()}}))
            .expect("json")
    }

    #[test]
    fn crc32_matches_the_standard_check_value() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
    }

    #[test]
    fn records_round_trip() {
        let mut buf = Vec::new();
        encode_record(&mut buf, OP_PUT, 7, "pods", &pod("a", 7));
        encode_record(&mut buf, OP_DELETE, 8, "pods", &pod("a", 8));
        let d = decode(Path::new("x"), &buf, false).expect("decodes");
        assert_eq!(d.records.len(), 2);
        assert_eq!((d.records[1].op, d.records[1].rv), (OP_DELETE, 8));
        assert_eq!(d.records[0].storage, "pods");
        assert_eq!(d.valid_len, buf.len() as u64);
        assert!(!d.torn);
    }

    #[test]
    fn torn_tail_is_dropped_and_corrupt_middle_is_reported() {
        let mut buf = Vec::new();
        encode_record(&mut buf, OP_PUT, 1, "pods", &pod("a", 1));
        let first = buf.len();
        encode_record(&mut buf, OP_PUT, 2, "pods", &pod("b", 2));
        // Cut short.
        for cut in [first + 3, buf.len() - 1] {
            let d = decode(Path::new("x"), &buf[..cut], true).expect("torn tail");
            assert_eq!(
                (d.records.len(), d.valid_len, d.torn),
                (1, first as u64, true)
            );
        }
        // Last record's bytes flipped.
        let mut flipped = buf.clone();
        let n = flipped.len();
        flipped[n - 2] ^= 0xFF;
        let d = decode(Path::new("x"), &flipped, true).expect("torn tail");
        assert_eq!(d.records.len(), 1);
        // Zeros after the last good record (a crash after the file grew).
        let mut zeros = buf[..first].to_vec();
        zeros.extend_from_slice(&[0; 100]);
        assert_eq!(
            decode(Path::new("x"), &zeros, true)
                .expect("zeros")
                .records
                .len(),
            1
        );
        // The first record damaged, the second intact: corruption, with the offset.
        let mut middle = buf.clone();
        middle[10] ^= 0xFF;
        let err = decode(Path::new("wal-1.log"), &middle, true).expect_err("corrupt");
        assert_eq!(
            err.to_string(),
            "wal-1.log: corrupt record at offset 0: checksum mismatch"
        );
        // Not the last log: a torn tail is corruption too.
        decode(Path::new("x"), &buf[..first + 3], false).expect_err("corrupt");
    }

    fn rt() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime")
    }

    #[test]
    fn open_append_sync_recover_with_compaction() {
        let dir = tempfile::tempdir().expect("tempdir");
        {
            let (wal, rec) = Wal::open(dir.path(), 300).expect("open");
            assert_eq!(rec.rv, 0);
            let mut objects = Objects::default();
            for rv in 1..=20u64 {
                let name = format!("p{rv}");
                let json = pod(&name, rv);
                let map = objects.entry("pods").or_default();
                map.insert(
                    ("default".into(), name.clone()),
                    Bytes::copy_from_slice(&json),
                );
                let op = if rv % 5 == 0 {
                    map.remove(&("default".into(), name.clone()));
                    OP_DELETE
                } else {
                    OP_PUT
                };
                if wal.append(op, rv, "pods", &json) {
                    wal.compact(rv, objects.clone());
                }
            }
            rt().block_on(wal.sync()).expect("durable");
            // Let a running snapshot finish.
            for _ in 0..100 {
                if !wal.shared.lock().snapshotting {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
        }
        let names: Vec<String> = fs::read_dir(dir.path())
            .expect("dir")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        assert!(
            names.iter().any(|n| n.starts_with("snapshot-")),
            "{names:?}"
        );
        let (_wal, rec) = Wal::open(dir.path(), 300).expect("reopen");
        assert_eq!(rec.rv, 20);
        let pods = rec.objects.get("pods").expect("pods");
        assert_eq!(pods.len(), 16);
        assert!(!pods.contains_key(&("default".to_string(), "p5".to_string())));
        assert!(pods.contains_key(&("default".to_string(), "p19".to_string())));
    }

    #[test]
    fn a_torn_log_tail_is_truncated_on_open_and_appending_continues() {
        let dir = tempfile::tempdir().expect("tempdir");
        {
            let (wal, _) = Wal::open(dir.path(), 1 << 20).expect("open");
            wal.append(OP_PUT, 1, "pods", &pod("a", 1));
            rt().block_on(wal.sync()).expect("durable");
        }
        let log = dir.path().join(log_name(0));
        let mut f = OpenOptions::new().append(true).open(&log).expect("log");
        f.write_all(&[40, 0, 0, 0, 1, 2]).expect("torn");
        drop(f);
        {
            let (wal, rec) = Wal::open(dir.path(), 1 << 20).expect("recovers");
            assert!(rec.dropped_torn_tail);
            assert_eq!(rec.rv, 1);
            wal.append(OP_PUT, 2, "pods", &pod("b", 2));
            rt().block_on(wal.sync()).expect("durable");
        }
        let (_wal, rec) = Wal::open(dir.path(), 1 << 20).expect("recovers");
        assert!(!rec.dropped_torn_tail);
        assert_eq!((rec.rv, rec.objects["pods"].len()), (2, 2));
    }

    #[test]
    fn a_second_open_of_a_locked_directory_fails_and_the_lock_goes_with_the_log() {
        let dir = tempfile::tempdir().expect("tempdir");
        let first = Wal::open(dir.path(), 1 << 20).expect("open");
        let second = Wal::open(dir.path(), 1 << 20)
            .map(|_| ())
            .map_err(|e| e.to_string());
        let d = dir.path().display();
        assert_eq!(
            second,
            Err(format!(
                "data directory {d} is in use by another kubesched apiserver (it holds the lock on {d}/lock)"
            ))
        );
        drop(first);
        let (_wal, rec) = Wal::open(dir.path(), 1 << 20).expect("open after the first closed");
        assert_eq!(rec.rv, 0);
    }

    #[test]
    fn corruption_before_the_end_is_an_error_naming_file_and_offset() {
        let dir = tempfile::tempdir().expect("tempdir");
        {
            let (wal, _) = Wal::open(dir.path(), 1 << 20).expect("open");
            wal.append(OP_PUT, 1, "pods", &pod("a", 1));
            wal.append(OP_PUT, 2, "pods", &pod("b", 2));
            rt().block_on(wal.sync()).expect("durable");
        }
        let log = dir.path().join(log_name(0));
        let mut data = fs::read(&log).expect("log");
        data[12] ^= 0xFF;
        fs::write(&log, data).expect("write");
        let err = Wal::open(dir.path(), 1 << 20).expect_err("corrupt");
        assert!(
            err.to_string().ends_with(
                "wal-00000000000000000000.log: corrupt record at offset 0: checksum mismatch"
            ),
            "{err}"
        );
    }
}
