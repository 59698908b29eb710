//! Durable storage under `--data-dir`: a write-ahead log of every write, fsynced before the
//! write is acknowledged or shown to watchers, plus snapshots that let the log be compacted.
//!
//! Files in the directory:
//! - `wal-R.log`: the writes with resourceVersion above `R`, one framed record each;
//! - `snapshot-R.snap`: every object at resourceVersion `R` (a header record, then one record
//!   per object), written to a `.tmp` file, fsynced, renamed and the directory fsynced;
//! - `manifest`: the snapshot recovery starts from and the newest log (see `Manifest`);
//! - `lock`: held (flock) by the server using the directory ([`LOCK_FILE`]).
//!
//! A record is `[payload length: u32 LE][CRC-32 of payload: u32 LE][payload]`; the payload is
//! `[op: u8][resourceVersion: u64 LE][storage name length: u8][storage name][object JSON]`.
//!
//! **Invariants:** records reach the log in resourceVersion order (they are appended under
//! the store lock); a write is acknowledged, and shown to watchers, only after the fsync that
//! covers it ([`Wal::sync`], `Wal::durable`); a snapshot at `R` is complete, and the
//! manifest names it, before the logs before `wal-R.log` are removed, so recovery = the
//! manifest's snapshot + the records above it in the chain of logs up to the manifest's
//! newest. Recovery refuses a directory that lacks a file the manifest names or whose chain
//! has a gap ([`WalError::Missing`]). Only the last log can end in a torn record (a crash
//! mid-append): a damaged record there with no intact record after it is dropped and the
//! file truncated. Any other damage is corruption, reported with the file and offset; repair
//! (`--data-dir-repair`) is the user's explicit choice, and keeps a copy of what it cuts.

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
    #[error("{}: corrupt record at offset {offset}: {reason}", path.display())]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// Byte offset of the bad record.
        offset: u64,
        /// What is wrong.
        reason: String,
    },
    /// A file recovery needs is not there: one the manifest names, or a log between two
    /// others.
    #[error(
        "{}: missing: {reason} (--data-dir-repair starts from the files that are there)",
        path.display()
    )]
    Missing {
        /// The file.
        path: PathBuf,
        /// Why recovery needs it.
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

/// The first damaged record of a file.
#[derive(Debug, Clone, PartialEq)]
pub struct Damage {
    /// Byte offset of the damaged record.
    pub offset: u64,
    /// What is wrong with it.
    pub reason: &'static str,
    /// Intact records found after it. Zero: the damage runs to the end of the file, the
    /// shape a crash mid-append leaves; more: the file was damaged after it was written.
    pub intact_after: usize,
}

/// The records of one file, where the valid part ends, and the first damaged record.
#[derive(Debug)]
pub struct Decoded {
    /// The records before the damage (all of them without damage), in order.
    pub records: Vec<Record>,
    /// Length of the valid prefix.
    pub valid_len: u64,
    /// The first damaged record, if any.
    pub damage: Option<Damage>,
}

impl Decoded {
    /// Whether the only damage is a torn tail: a damaged record with no intact record after
    /// it. Only the last log may end so, and only its damaged end may be dropped.
    pub fn torn(&self) -> bool {
        self.damage.as_ref().is_some_and(|d| d.intact_after == 0)
    }

    /// The damage as [`WalError::Corrupt`], when there is any and it may not be dropped
    /// (`tail_ok`: the file is the last log and a torn tail may be dropped).
    pub fn corruption(&self, path: &Path, tail_ok: bool) -> Option<WalError> {
        let d = self.damage.as_ref()?;
        if tail_ok && d.intact_after == 0 {
            return None;
        }
        let reason = match d.intact_after {
            0 => d.reason.to_string(),
            n if tail_ok => format!(
                "{}, and {n} intact record(s) follow it, so it is not a torn tail (--data-dir-repair truncates the log there, keeping a copy)",
                d.reason
            ),
            n => format!("{}, and {n} intact record(s) follow it", d.reason),
        };
        Some(WalError::Corrupt {
            path: path.to_path_buf(),
            offset: d.offset,
            reason,
        })
    }
}

/// Smallest payload: op, resourceVersion and the storage name's length.
const MIN_PAYLOAD: usize = 10;

/// Why the frame at the start of `rest` is damaged, or its payload length when it is intact.
fn check_frame(rest: &[u8]) -> Result<usize, &'static str> {
    if rest.len() < 8 {
        return Err("truncated record header");
    }
    let len = u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
    let crc = u32::from_le_bytes([rest[4], rest[5], rest[6], rest[7]]);
    if len < MIN_PAYLOAD {
        return Err("invalid record length");
    }
    let Some(payload) = rest.get(8..8 + len) else {
        return Err("record runs past the end of the file");
    };
    if crc32(payload) != crc {
        return Err("checksum mismatch");
    }
    Ok(len)
}

/// Counts the intact records that start anywhere in `data` (a file's bytes after a damaged
/// record): a frame whose checksum matches and whose header is sane. A torn tail (a record
/// cut short, zeros, garbage from a crash mid-append) has none; a damaged byte in the middle
/// of a log leaves the records after it intact.
fn intact_records(data: &[u8]) -> usize {
    let mut count = 0;
    let mut at = 0;
    while at + 8 + MIN_PAYLOAD <= data.len() {
        let rest = &data[at..];
        match check_frame(rest) {
            Ok(len) if rest[8] <= OP_SNAPSHOT && MIN_PAYLOAD + rest[8 + 9] as usize <= len => {
                count += 1;
                at += 8 + len;
            }
            _ => at += 1,
        }
    }
    count
}

/// Decodes a file's records up to the first damaged one, which is described in
/// [`Decoded::damage`] with the number of intact records after it. A record whose checksum
/// matches but whose fields do not fit is [`WalError::Corrupt`] (the bytes are as written).
pub fn decode(path: &Path, data: &[u8]) -> Result<Decoded, WalError> {
    let mut records = Vec::new();
    let mut off = 0usize;
    while off < data.len() {
        let rest = &data[off..];
        let len = match check_frame(rest) {
            Ok(len) => len,
            Err(reason) => {
                return Ok(Decoded {
                    records,
                    valid_len: off as u64,
                    damage: Some(Damage {
                        offset: off as u64,
                        reason,
                        intact_after: intact_records(&rest[1..]),
                    }),
                });
            }
        };
        let p = &rest[8..8 + len];
        let slen = p[9] as usize;
        if MIN_PAYLOAD + slen > len {
            return Err(WalError::Corrupt {
                path: path.to_path_buf(),
                offset: off as u64,
                reason: "storage name past the record".to_string(),
            });
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
        damage: None,
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

/// The file naming what recovery must find; see [`Manifest`].
pub const MANIFEST: &str = "manifest";

/// What the directory holds, so that recovery can tell a missing file from one never
/// written. Rewritten atomically (temp file, fsync, rename, fsync directory) when a new log
/// starts and when a snapshot has become durable (before older files are removed).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
struct Manifest {
    /// The resourceVersion of the snapshot recovery starts from; none: from an empty store.
    snapshot: Option<u64>,
    /// The newest log, `wal-<log>.log`, the one appended to. The logs from the snapshot's
    /// resourceVersion up to it form a chain: each one after the first starts where the one
    /// before it ends.
    log: u64,
}

fn read_manifest(dir: &Path) -> Result<Option<Manifest>, WalError> {
    let path = dir.join(MANIFEST);
    let data = match fs::read(&path) {
        Ok(d) => d,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_err(&path)(e)),
    };
    serde_json::from_slice(&data)
        .map(Some)
        .map_err(|e| WalError::Corrupt {
            path,
            offset: 0,
            reason: format!("not a manifest: {e}"),
        })
}

fn write_manifest(dir: &Path, m: &Manifest) -> Result<(), WalError> {
    let path = dir.join(MANIFEST);
    let tmp = dir.join(format!("{MANIFEST}.tmp"));
    let mut f = File::create(&tmp).map_err(io_err(&tmp))?;
    let mut json = serde_json::to_vec(m).unwrap_or_default();
    json.push(b'\n');
    f.write_all(&json).map_err(io_err(&tmp))?;
    f.sync_all().map_err(io_err(&tmp))?;
    drop(f);
    fs::rename(&tmp, &path).map_err(io_err(&path))?;
    sync_dir(dir)
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
    /// The damaged end of the last log was dropped (a torn tail, or cut by repair).
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
    let d = decode(path, &data)?;
    if let Some(err) = d.corruption(path, false) {
        return Err(err);
    }
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

/// Recovery's plan: the snapshot to load and the chain of logs after it, oldest first (the
/// last is appended to).
#[derive(Debug)]
struct Plan {
    snapshot: Option<u64>,
    logs: Vec<u64>,
    /// Logs newer than the manifest's newest: a crash between creating a log and recording it
    /// leaves one, empty.
    stray: Vec<u64>,
}

/// The plan the manifest states; Err names the first file it names that is missing.
fn planned(dir: &Path, m: Manifest, snapshots: &[u64], logs: &[u64]) -> Result<Plan, WalError> {
    if let Some(s) = m.snapshot.filter(|s| !snapshots.contains(s)) {
        return Err(WalError::Missing {
            path: dir.join(snapshot_name(s)),
            reason: "the manifest names it as the snapshot to recover from".to_string(),
        });
    }
    let base = m.snapshot.unwrap_or(0);
    if m.log < base || !logs.contains(&m.log) {
        return Err(WalError::Missing {
            path: dir.join(log_name(m.log)),
            reason: "the manifest names it as the newest log".to_string(),
        });
    }
    let chain: Vec<u64> = logs
        .iter()
        .copied()
        .filter(|l| (base..=m.log).contains(l))
        .collect();
    if chain.first() != Some(&base) {
        return Err(WalError::Missing {
            path: dir.join(log_name(base)),
            reason: format!("it holds the writes after resourceVersion {base}"),
        });
    }
    Ok(Plan {
        snapshot: m.snapshot,
        logs: chain,
        stray: logs.iter().copied().filter(|l| *l > m.log).collect(),
    })
}

/// The plan the files themselves suggest: the newest snapshot and the logs from it on.
fn found(snapshots: &[u64], logs: &[u64]) -> Plan {
    let snapshot = snapshots.last().copied();
    let base = snapshot.unwrap_or(0);
    Plan {
        snapshot,
        logs: logs.iter().copied().filter(|l| *l >= base).collect(),
        stray: Vec::new(),
    }
}

/// Copies a damaged file aside (`<file>.corrupt-<unix seconds>`) before repair cuts it, so
/// what repair drops is not lost for good.
fn keep_a_copy(path: &Path) -> Result<PathBuf, WalError> {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let mut name = path.as_os_str().to_owned();
    name.push(format!(".corrupt-{secs}"));
    let copy = PathBuf::from(name);
    fs::copy(path, &copy).map_err(io_err(&copy))?;
    File::open(&copy)
        .and_then(|f| f.sync_all())
        .map_err(io_err(&copy))?;
    Ok(copy)
}

/// What [`recover`] found.
struct Recovery {
    state: Recovered,
    /// The log to append to and the length of its valid part.
    append: PathBuf,
    valid_len: u64,
    /// The manifest for the directory as it is once the log is truncated to `valid_len`.
    manifest: Manifest,
}

/// Recovers the state in `dir`: the snapshot and logs its manifest names (or, without a
/// manifest, the newest snapshot and the logs after it). With `repair`, missing files and a
/// damaged end of the last log are warned about and skipped instead of refused.
fn recover(dir: &Path, repair: bool) -> Result<Recovery, WalError> {
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
    let plan = match read_manifest(dir)? {
        Some(m) => match planned(dir, m, &snapshots, &logs) {
            Ok(plan) => plan,
            Err(e) if repair => {
                tracing::warn!(error = %e, "repair: the data directory lacks a file its manifest names; recovering from the files that are there");
                found(&snapshots, &logs)
            }
            Err(e) => return Err(e),
        },
        None => {
            if !snapshots.is_empty() || !logs.is_empty() {
                tracing::warn!(dir = %dir.display(), "the data directory has no manifest (an older kubesched wrote it): recovering from the newest snapshot and the logs after it, then writing one");
            }
            found(&snapshots, &logs)
        }
    };
    for l in &plan.stray {
        let path = dir.join(log_name(*l));
        let len = fs::metadata(&path).map_err(io_err(&path))?.len();
        if len > 0 && !repair {
            return Err(WalError::Corrupt {
                path,
                offset: 0,
                reason: "the log is newer than the manifest's newest log and holds records"
                    .to_string(),
            });
        }
        if len > 0 {
            let copy = keep_a_copy(&path)?;
            tracing::warn!(file = %path.display(), copy = %copy.display(), bytes = len, "repair: dropping a log newer than the manifest's newest log");
        }
        fs::remove_file(&path).map_err(io_err(&path))?;
    }

    let mut state = Recovered::default();
    let base = match plan.snapshot {
        Some(s) => load_snapshot(&dir.join(snapshot_name(s)), &mut state.objects)?,
        None => 0,
    };
    state.rv = base;
    let mut append = (dir.join(log_name(base)), 0, base);
    // Where the previous log of the chain ends: the next log must start there.
    let mut end = base;
    for (i, &l) in plan.logs.iter().enumerate() {
        let path = dir.join(log_name(l));
        if l != end {
            let gap = WalError::Missing {
                path: path.clone(),
                reason: format!(
                    "it holds the writes after resourceVersion {l}, but what is before it ends at {end}"
                ),
            };
            if !repair {
                return Err(gap);
            }
            tracing::warn!(error = %gap, "repair: writes are missing between two logs; recovering across the gap");
        }
        let data = read_file(&path)?;
        let is_last = i + 1 == plan.logs.len();
        let mut d = decode(&path, &data)?;
        if let Some(err) = d.corruption(&path, is_last) {
            if !(is_last && repair) {
                return Err(err);
            }
            let copy = keep_a_copy(&path)?;
            let dropped = d.damage.as_ref().map_or(0, |d| d.intact_after + 1);
            tracing::warn!(
                file = %path.display(),
                offset = d.valid_len,
                dropped_bytes = data.len() as u64 - d.valid_len,
                dropped_records = dropped,
                copy = %copy.display(),
                "repair: truncating the damaged last log; the records from the damaged one on are dropped"
            );
            d.damage = None;
            state.dropped_torn_tail = true;
        }
        let mut offset = 0u64;
        for r in &d.records {
            if r.rv > base {
                apply(&mut state.objects, &path, offset, r)?;
                state.rv = state.rv.max(r.rv);
            }
            offset += 8 + 10 + r.storage.len() as u64 + r.object.len() as u64;
        }
        end = d.records.last().map_or(l, |r| r.rv).max(l);
        if d.torn() {
            tracing::warn!(file = %path.display(), offset = d.valid_len, "dropping a torn last record");
            state.dropped_torn_tail = true;
        }
        if is_last {
            append = (path, d.valid_len, l);
        }
    }
    Ok(Recovery {
        state,
        append: append.0,
        valid_len: append.1,
        manifest: Manifest {
            snapshot: plan.snapshot,
            log: append.2,
        },
    })
}

/// Durability progress, published by the flusher.
#[derive(Debug, Clone, Default)]
pub(crate) struct Durable {
    /// Every write up to this resourceVersion is fsynced.
    pub(crate) rv: u64,
    /// Writing failed: nothing after `rv` becomes durable.
    pub(crate) failed: Option<String>,
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
    /// The manifest as written; the flusher and the snapshot thread both rewrite it.
    manifest: Mutex<Manifest>,
    manifest_changed: Condvar,
    /// While true, the flusher waits before its fsync (tests hold writes not yet durable).
    #[cfg(test)]
    hold_fsync: Mutex<bool>,
    #[cfg(test)]
    hold_fsync_changed: Condvar,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Pending> {
        lock(&self.pending)
    }

    /// Writes the manifest changed by `change`.
    fn update_manifest(
        &self,
        dir: &Path,
        change: impl FnOnce(&mut Manifest),
    ) -> Result<(), WalError> {
        let mut m = lock(&self.manifest);
        let mut next = *m;
        change(&mut next);
        write_manifest(dir, &next)?;
        *m = next;
        self.manifest_changed.notify_all();
        Ok(())
    }

    /// Waits until the flusher has started log `rv` (a snapshot at `rv` may be recorded only
    /// once the log after it exists). False when the log stopped or failed first.
    fn wait_for_log(&self, rv: u64) -> bool {
        let mut m = lock(&self.manifest);
        while m.log < rv {
            if self.durable.borrow().failed.is_some() || self.lock().stop {
                return false;
            }
            m = self
                .manifest_changed
                .wait_timeout(m, std::time::Duration::from_millis(100))
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .0;
        }
        true
    }

    #[cfg(test)]
    fn wait_while_fsync_held(&self) {
        let mut held = lock(&self.hold_fsync);
        while *held {
            held = self
                .hold_fsync_changed
                .wait(held)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
        }
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
    /// The running snapshot thread, joined on drop so that nothing writes to the directory
    /// once its lock is released.
    snapshot: Mutex<Option<JoinHandle<()>>>,
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
    /// compacted when it grows past `compact_bytes`. Recovery refuses a directory that lacks a
    /// file it needs or whose last log is damaged before its end; with `repair` it warns,
    /// keeps a copy of the damaged log and recovers what is there.
    pub fn open(
        dir: &Path,
        compact_bytes: u64,
        repair: bool,
    ) -> Result<(Wal, Recovered), WalError> {
        fs::create_dir_all(dir).map_err(io_err(dir))?;
        let lock = lock_dir(dir)?;
        let Recovery {
            state: rec,
            append: path,
            valid_len,
            manifest,
        } = recover(dir, repair)?;
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(io_err(&path))?;
        file.set_len(valid_len).map_err(io_err(&path))?;
        file.sync_all().map_err(io_err(&path))?;
        sync_dir(dir)?;
        write_manifest(dir, &manifest)?;
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
            manifest: Mutex::new(manifest),
            manifest_changed: Condvar::new(),
            #[cfg(test)]
            hold_fsync: Mutex::new(false),
            #[cfg(test)]
            hold_fsync_changed: Condvar::new(),
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
                snapshot: Mutex::new(None),
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
                let done = write_snapshot(&dir, rv, &objects).and_then(|()| {
                    // The manifest may name the snapshot only once the log after it exists;
                    // the older files go only once the manifest no longer names them.
                    if !shared.wait_for_log(rv) {
                        return Ok(false);
                    }
                    shared.update_manifest(&dir, |m| m.snapshot = Some(rv))?;
                    remove_before(&dir, rv).map(|()| true)
                });
                match done {
                    Ok(true) => tracing::info!(rv, "snapshot written, log compacted"),
                    Ok(false) => tracing::warn!(rv, "snapshot left unused: the log stopped"),
                    Err(e) => tracing::error!(error = %e, "writing a snapshot failed"),
                }
                shared.lock().snapshotting = false;
            });
        match spawned {
            // The previous one has finished: a snapshot starts only when none is running.
            Ok(t) => drop(lock(&self.snapshot).replace(t)),
            Err(e) => {
                tracing::error!(error = %e, "cannot start the snapshot thread");
                self.shared.lock().snapshotting = false;
            }
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

    /// The durable resourceVersion as the flusher publishes it (watchers hold events above it).
    pub(crate) fn durable(&self) -> tokio::sync::watch::Receiver<Durable> {
        self.durable.clone()
    }

    /// Makes the flusher wait before its next fsync until released.
    #[cfg(test)]
    pub(crate) fn hold_fsync(&self, hold: bool) {
        *lock(&self.shared.hold_fsync) = hold;
        self.shared.hold_fsync_changed.notify_all();
    }
}

impl Drop for Wal {
    fn drop(&mut self) {
        self.shared.lock().stop = true;
        self.shared.wake.notify_one();
        if let Some(t) = self.flusher.take() {
            let _ = t.join();
        }
        if let Some(t) = lock(&self.snapshot).take() {
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
    #[cfg(test)]
    let wait_while_fsync_held = || shared.wait_while_fsync_held();
    #[cfg(not(test))]
    let wait_while_fsync_held = || ();
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
                    // Before any record goes into it: a log the manifest does not name is
                    // then empty, and recovery may remove it.
                    shared.update_manifest(dir, |m| m.log = r)?;
                }
                file.write_all(&seg.buf).map_err(io_err(&path))?;
            }
            wait_while_fsync_held();
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
        let d = decode(Path::new("x"), &buf).expect("decodes");
        assert_eq!(d.records.len(), 2);
        assert_eq!((d.records[1].op, d.records[1].rv), (OP_DELETE, 8));
        assert_eq!(d.records[0].storage, "pods");
        assert_eq!(d.valid_len, buf.len() as u64);
        assert!(d.damage.is_none());
    }

    /// How a test damages a log of three records (rv 1, 2, 3).
    #[derive(Debug, Clone, Copy)]
    enum Mangle {
        Nothing,
        /// Cut the file this many bytes into the third record.
        CutThird(usize),
        /// Cut the last byte.
        CutLastByte,
        /// Flip a byte near the end of the third record.
        FlipInThird,
        /// Append zeros (the file grew, its data never made it).
        Zeros,
        /// Make the second record's length huge (a flipped high bit).
        HugeSecondLength,
        /// Make the second record's length too small for a record.
        TinySecondLength,
        /// Flip a byte of the second record's payload.
        FlipInSecond,
    }

    fn three_records() -> (Vec<u8>, usize, usize) {
        let mut buf = Vec::new();
        encode_record(&mut buf, OP_PUT, 1, "pods", &pod("a", 1));
        let second = buf.len();
        encode_record(&mut buf, OP_PUT, 2, "pods", &pod("b", 2));
        let third = buf.len();
        encode_record(&mut buf, OP_PUT, 3, "pods", &pod("c", 3));
        (buf, second, third)
    }

    /// Decoding the last log: a damaged end is dropped as torn only when no intact record
    /// follows the damage; anything else is corruption at the damaged record's offset.
    #[rstest::rstest]
    #[case::intact(Mangle::Nothing, Ok(vec![1, 2, 3]))]
    #[case::cut_in_the_header_is_torn(Mangle::CutThird(3), Ok(vec![1, 2]))]
    #[case::cut_in_the_payload_is_torn(Mangle::CutLastByte, Ok(vec![1, 2]))]
    #[case::bad_checksum_of_the_last_record_is_torn(Mangle::FlipInThird, Ok(vec![1, 2]))]
    #[case::zeros_after_the_last_record_are_torn(Mangle::Zeros, Ok(vec![1, 2, 3]))]
    #[case::corrupt_length_mid_log_is_refused_not_truncated(
        Mangle::HugeSecondLength,
        Err("record runs past the end of the file, and 1 intact record(s) follow it, so it is not a torn tail (--data-dir-repair truncates the log there, keeping a copy)")
    )]
    #[case::invalid_length_mid_log_is_refused(
        Mangle::TinySecondLength,
        Err("invalid record length, and 1 intact record(s) follow it, so it is not a torn tail (--data-dir-repair truncates the log there, keeping a copy)")
    )]
    #[case::checksum_mismatch_mid_log_is_refused(
        Mangle::FlipInSecond,
        Err("checksum mismatch, and 1 intact record(s) follow it, so it is not a torn tail (--data-dir-repair truncates the log there, keeping a copy)")
    )]
    fn only_a_damaged_end_with_nothing_intact_after_it_is_a_torn_tail(
        #[case] mangle: Mangle,
        #[case] want: Result<Vec<u64>, &str>,
    ) {
        let (mut buf, second, third) = three_records();
        match mangle {
            Mangle::Nothing => {}
            Mangle::CutThird(n) => buf.truncate(third + n),
            Mangle::CutLastByte => buf.truncate(buf.len() - 1),
            Mangle::FlipInThird => {
                let n = buf.len();
                buf[n - 2] ^= 0xFF;
            }
            Mangle::Zeros => buf.extend_from_slice(&[0; 100]),
            Mangle::HugeSecondLength => buf[second + 3] ^= 0x40,
            Mangle::TinySecondLength => {
                buf[second..second + 4].copy_from_slice(&3u32.to_le_bytes())
            }
            Mangle::FlipInSecond => buf[second + 12] ^= 0xFF,
        }
        let path = Path::new("wal-1.log");
        let d = decode(path, &buf).expect("checksums of intact records match");
        let got = match d.corruption(path, true) {
            Some(e) => Err(e.to_string()),
            None => Ok(d.records.iter().map(|r| r.rv).collect::<Vec<_>>()),
        };
        let want = want
            .map_err(|reason| format!("wal-1.log: corrupt record at offset {second}: {reason}"));
        assert_eq!(got, want);
    }

    #[test]
    fn a_torn_end_of_a_log_that_is_not_the_last_is_corruption() {
        let (buf, _, third) = three_records();
        let path = Path::new("wal-1.log");
        let d = decode(path, &buf[..third + 3]).expect("decodes");
        assert_eq!(
            d.corruption(path, false).map(|e| e.to_string()),
            Some(format!(
                "wal-1.log: corrupt record at offset {third}: truncated record header"
            ))
        );
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
            let (wal, rec) = Wal::open(dir.path(), 300, false).expect("open");
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
        let (_wal, rec) = Wal::open(dir.path(), 300, false).expect("reopen");
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
            let (wal, _) = Wal::open(dir.path(), 1 << 20, false).expect("open");
            wal.append(OP_PUT, 1, "pods", &pod("a", 1));
            rt().block_on(wal.sync()).expect("durable");
        }
        let log = dir.path().join(log_name(0));
        let mut f = OpenOptions::new().append(true).open(&log).expect("log");
        f.write_all(&[40, 0, 0, 0, 1, 2]).expect("torn");
        drop(f);
        {
            let (wal, rec) = Wal::open(dir.path(), 1 << 20, false).expect("recovers");
            assert!(rec.dropped_torn_tail);
            assert_eq!(rec.rv, 1);
            wal.append(OP_PUT, 2, "pods", &pod("b", 2));
            rt().block_on(wal.sync()).expect("durable");
        }
        let (_wal, rec) = Wal::open(dir.path(), 1 << 20, false).expect("recovers");
        assert!(!rec.dropped_torn_tail);
        assert_eq!((rec.rv, rec.objects["pods"].len()), (2, 2));
    }

    #[test]
    fn a_second_open_of_a_locked_directory_fails_and_the_lock_goes_with_the_log() {
        let dir = tempfile::tempdir().expect("tempdir");
        let first = Wal::open(dir.path(), 1 << 20, false).expect("open");
        let second = Wal::open(dir.path(), 1 << 20, false)
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
        let (_wal, rec) =
            Wal::open(dir.path(), 1 << 20, false).expect("open after the first closed");
        assert_eq!(rec.rv, 0);
    }

    /// Writes `rvs` as pods through an open log and closes it.
    fn write_pods(dir: &Path, rvs: std::ops::RangeInclusive<u64>) {
        let (wal, _) = Wal::open(dir, 1 << 20, false).expect("open");
        for rv in rvs {
            wal.append(OP_PUT, rv, "pods", &pod(&format!("p{rv}"), rv));
        }
        rt().block_on(wal.sync()).expect("durable");
    }

    fn file_names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(dir)
            .expect("dir")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn corrupt_length_mid_log_is_refused_not_truncated_and_repair_keeps_a_copy() {
        let dir = tempfile::tempdir().expect("tempdir");
        write_pods(dir.path(), 1..=3);
        let log = dir.path().join(log_name(0));
        let mut data = fs::read(&log).expect("log");
        let second = 8 + u32::from_le_bytes([data[0], data[1], data[2], data[3]]) as usize;
        data[second + 3] ^= 0x40;
        fs::write(&log, &data).expect("write");

        let refused = Wal::open(dir.path(), 1 << 20, false)
            .map(|_| ())
            .map_err(|e| e.to_string());
        let untouched = fs::read(&log).expect("log") == data;
        let repaired = {
            let (_wal, rec) = Wal::open(dir.path(), 1 << 20, true).expect("repair");
            (
                rec.rv,
                rec.dropped_torn_tail,
                fs::metadata(&log).expect("log").len(),
            )
        };
        let copies: Vec<Vec<u8>> = file_names(dir.path())
            .iter()
            .filter(|n| n.starts_with("wal-00000000000000000000.log.corrupt-"))
            .map(|n| fs::read(dir.path().join(n)).expect("copy"))
            .collect();
        let (_wal, after) = Wal::open(dir.path(), 1 << 20, false).expect("repaired opens");
        assert_eq!(
            (refused, untouched, repaired, copies, after.rv),
            (
                Err(format!("{}: corrupt record at offset {second}: record runs past the end of the file, and 1 intact record(s) follow it, so it is not a torn tail (--data-dir-repair truncates the log there, keeping a copy)", log.display())),
                true,
                (1, true, second as u64),
                vec![data],
                1
            )
        );
    }

    /// A directory after a compaction: its manifest, snapshot and newest log.
    fn compacted_dir() -> (tempfile::TempDir, Manifest) {
        let dir = tempfile::tempdir().expect("tempdir");
        {
            let (wal, _) = Wal::open(dir.path(), 300, false).expect("open");
            for rv in 1..=12u64 {
                let mut objects = Objects::default();
                for r in 1..=rv {
                    let name = format!("p{r}");
                    objects
                        .entry("pods")
                        .or_default()
                        .insert(("default".into(), name.clone()), Bytes::from(pod(&name, r)));
                }
                if wal.append(OP_PUT, rv, "pods", &pod(&format!("p{rv}"), rv)) {
                    wal.compact(rv, objects);
                }
            }
            rt().block_on(wal.sync()).expect("durable");
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
            while wal.shared.lock().snapshotting && std::time::Instant::now() < deadline {
                std::thread::yield_now();
            }
        }
        let m = read_manifest(dir.path())
            .expect("readable")
            .expect("written");
        (dir, m)
    }

    /// Which file of a compacted directory a test removes.
    #[derive(Debug, Clone, Copy)]
    enum Remove {
        Snapshot,
        NewestLog,
    }

    #[rstest::rstest]
    #[case::a_missing_snapshot_is_refused(
        Remove::Snapshot,
        "the manifest names it as the snapshot to recover from"
    )]
    #[case::a_missing_newest_log_is_refused(
        Remove::NewestLog,
        "the manifest names it as the newest log"
    )]
    fn a_file_the_manifest_names_must_be_there(#[case] remove: Remove, #[case] reason: &str) {
        let (dir, m) = compacted_dir();
        let snapshot = m.snapshot.expect("a snapshot was written");
        let gone = dir.path().join(match remove {
            Remove::Snapshot => snapshot_name(snapshot),
            Remove::NewestLog => log_name(m.log),
        });
        fs::remove_file(&gone).expect("remove");
        let refused = Wal::open(dir.path(), 300, false)
            .map(|_| ())
            .map_err(|e| e.to_string());
        assert_eq!(
            refused,
            Err(format!(
                "{}: missing: {reason} (--data-dir-repair starts from the files that are there)",
                gone.display()
            ))
        );
        // Repair starts from what is there.
        Wal::open(dir.path(), 300, true).expect("repair starts");
    }

    #[test]
    fn a_missing_only_log_is_refused_not_started_empty() {
        let dir = tempfile::tempdir().expect("tempdir");
        write_pods(dir.path(), 1..=6);
        let log = dir.path().join(log_name(0));
        fs::remove_file(&log).expect("remove");
        let refused = Wal::open(dir.path(), 1 << 20, false)
            .map(|(_, rec)| rec.rv)
            .map_err(|e| e.to_string());
        assert_eq!(
            refused,
            Err(format!(
                "{}: missing: the manifest names it as the newest log (--data-dir-repair starts from the files that are there)",
                log.display()
            ))
        );
    }

    #[test]
    fn a_gap_between_logs_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut first = Vec::new();
        for rv in 1..=3 {
            encode_record(&mut first, OP_PUT, rv, "pods", &pod(&format!("p{rv}"), rv));
        }
        let mut second = Vec::new();
        encode_record(&mut second, OP_PUT, 6, "pods", &pod("p6", 6));
        fs::write(dir.path().join(log_name(0)), first).expect("write");
        fs::write(dir.path().join(log_name(5)), second).expect("write");
        write_manifest(
            dir.path(),
            &Manifest {
                snapshot: None,
                log: 5,
            },
        )
        .expect("manifest");
        let refused = Wal::open(dir.path(), 1 << 20, false)
            .map(|_| ())
            .map_err(|e| e.to_string());
        assert_eq!(
            refused,
            Err(format!(
                "{}: missing: it holds the writes after resourceVersion 5, but what is before it ends at 3 (--data-dir-repair starts from the files that are there)",
                dir.path().join(log_name(5)).display()
            ))
        );
    }

    #[test]
    fn a_directory_without_a_manifest_is_recovered_and_gets_one() {
        let (dir, m) = compacted_dir();
        fs::remove_file(dir.path().join(MANIFEST)).expect("remove");
        let (wal, rec) = Wal::open(dir.path(), 300, false).expect("recovers");
        drop(wal);
        assert_eq!(
            (
                rec.rv,
                rec.objects["pods"].len(),
                read_manifest(dir.path()).ok().flatten()
            ),
            (12, 12, Some(m))
        );
    }

    #[test]
    fn an_empty_log_newer_than_the_manifest_is_removed() {
        let dir = tempfile::tempdir().expect("tempdir");
        write_pods(dir.path(), 1..=3);
        fs::write(dir.path().join(log_name(3)), b"").expect("stray log");
        let (_wal, rec) = Wal::open(dir.path(), 1 << 20, false).expect("recovers");
        assert_eq!(
            (rec.rv, file_names(dir.path())),
            (
                3,
                vec![LOCK_FILE.to_string(), MANIFEST.to_string(), log_name(0)]
            )
        );
    }
}
