//! Each user's cached index kept as a snapshot file beside the database, so a store opened
//! again reads one file instead of deriving every code and posting from every row
//! (docs/ARCHITECTURE.md, "Index snapshots").
//!
//! A snapshot is a cache, never the truth: what it describes is checked against the
//! file's own rows before anything is read from it ([`SnapshotKey`]), a damaged one is
//! refused by its checksum, and any failure to read or write one only means the index
//! is built from the rows as it was before snapshots.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use sha2::{Digest, Sha256};

/// What a snapshot describes. It is read only for the file's current vectors (`epoch`),
/// its user and its dimension; its generation and stamp then say whether it is current
/// or only a base the rows written since are applied to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SnapshotKey {
    pub(crate) epoch: String,
    pub(crate) user: String,
    pub(crate) dimension: usize,
    pub(crate) generation: u64,
    pub(crate) stamp: i64,
}

impl SnapshotKey {
    pub(crate) fn encode(&self) -> Vec<u8> {
        serde_json::json!([
            self.epoch,
            self.user,
            self.dimension,
            self.generation,
            self.stamp
        ])
        .to_string()
        .into_bytes()
    }

    pub(crate) fn decode(bytes: &[u8]) -> Option<Self> {
        let (epoch, user, dimension, generation, stamp) = serde_json::from_slice(bytes).ok()?;
        Some(Self {
            epoch,
            user,
            dimension,
            generation,
            stamp,
        })
    }

    /// Whether `self` was written from the same vectors of the same user's index.
    pub(crate) fn same_index(&self, other: &Self) -> bool {
        self.epoch == other.epoch && self.user == other.user && self.dimension == other.dimension
    }

    /// Whether `self` describes exactly the rows `other` does.
    pub(crate) fn current(&self, other: &Self) -> bool {
        self.same_index(other) && self.generation == other.generation && self.stamp == other.stamp
    }
}

/// The directory of snapshots beside one database file: `<file>.index/`, readable by the
/// owner only (a snapshot holds every memory's text, as the file does).
#[derive(Debug, Clone)]
pub(crate) struct Snapshots {
    dir: PathBuf,
    /// The key of each snapshot this process last read as current or wrote, by file, so
    /// that an index kept at shutdown that is already on disk is not written again.
    known: Arc<Mutex<HashMap<PathBuf, Vec<u8>>>>,
}

impl Snapshots {
    pub(crate) fn beside(database: &Path) -> Self {
        let mut dir = database.as_os_str().to_owned();
        dir.push(".index");
        Self {
            dir: dir.into(),
            known: Arc::default(),
        }
    }

    fn known(&self) -> MutexGuard<'_, HashMap<PathBuf, Vec<u8>>> {
        self.known.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether this process last read (as current) or wrote the snapshot under `key`.
    pub(crate) fn holds(&self, user: &str, dimension: usize, key: &[u8]) -> bool {
        self.known()
            .get(&self.file(user, dimension))
            .is_some_and(|k| k == key)
    }

    /// Records that the snapshot on disk is the one under `key`.
    pub(crate) fn read_as_current(&self, user: &str, dimension: usize, key: Vec<u8>) {
        self.known().insert(self.file(user, dimension), key);
    }

    /// One file per user and dimension, named by a hash: a user id may hold any text.
    fn file(&self, user: &str, dimension: usize) -> PathBuf {
        self.dir
            .join(format!("{}-{dimension}.snapshot", Self::user_prefix(user)))
    }

    fn user_prefix(user: &str) -> String {
        let digest = Sha256::digest(user.as_bytes());
        digest[..16].iter().map(|b| format!("{b:02x}")).collect()
    }

    /// Removes the user's snapshots, at every dimension (after a forget: a snapshot holds
    /// every memory's text). A failure is logged: the snapshot is then caught up, with
    /// the memory removed, at the next build.
    pub(crate) fn remove_user(&self, user: &str) {
        let prefix = format!("{}-", Self::user_prefix(user));
        self.known().retain(|file, _| {
            !file
                .file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with(&prefix))
        });
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if !(name.starts_with(&prefix) && name.ends_with(".snapshot")) {
                continue;
            }
            if let Err(e) = std::fs::remove_file(entry.path()) {
                let path = entry.path();
                tracing::warn!(path = %path.display(), error = %e, "cannot remove an index snapshot");
            }
        }
    }

    /// The snapshot's bytes; `None` when there is none or it cannot be read.
    pub(crate) fn read(&self, user: &str, dimension: usize) -> Option<Vec<u8>> {
        let path = self.file(user, dimension);
        match read_in_halves(&path) {
            Ok(bytes) => Some(bytes),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "cannot read an index snapshot");
                None
            }
        }
    }

    /// Replaces the snapshot at once (written aside, then renamed over it), so a reader
    /// sees the old one or the new one, never half of one.
    /// `bytes` is the snapshot written under `key`.
    pub(crate) fn write(&self, user: &str, dimension: usize, key: &[u8], bytes: &[u8]) {
        let path = self.file(user, dimension);
        match self.replace(&path, bytes) {
            Ok(()) => {
                self.known().insert(path, key.to_vec());
            }
            Err(e) => {
                // What is on disk now is unknown: the next keep writes it again.
                self.known().remove(&path);
                tracing::warn!(path = %path.display(), error = %e, "cannot write an index snapshot");
            }
        }
    }

    fn replace(&self, path: &Path, bytes: &[u8]) -> std::io::Result<()> {
        create_private_dir(&self.dir)?;
        let mut aside = path.as_os_str().to_owned();
        aside.push(format!(".{}-{:016x}", std::process::id(), writer_number()));
        let aside = PathBuf::from(aside);
        let written = (|| {
            let mut file = create_private_file(&aside)?;
            file.write_all(bytes)?;
            std::fs::rename(&aside, path)
        })();
        if written.is_err() {
            let _ = std::fs::remove_file(&aside);
        }
        written
    }
}

/// The whole file, its two halves read at once on two threads: most of a read into a new
/// buffer is the kernel filling fresh pages, which two cores do in about half the time.
#[cfg(unix)]
fn read_in_halves(path: &Path) -> std::io::Result<Vec<u8>> {
    use std::os::unix::fs::FileExt;
    let file = std::fs::File::open(path)?;
    let len = usize::try_from(file.metadata()?.len())
        .map_err(|_| std::io::Error::other("an index snapshot larger than memory"))?;
    let mut bytes = vec![0u8; len];
    let (front, back) = bytes.split_at_mut(len / 2);
    std::thread::scope(|scope| {
        let back_read = std::thread::Builder::new()
            .spawn_scoped(scope, || file.read_exact_at(back, (len / 2) as u64));
        let front_read = file.read_exact_at(front, 0);
        // A thread that could not start is a failed read: the index is built from rows.
        back_read?
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            .and(front_read)
    })?;
    Ok(bytes)
}

#[cfg(not(unix))]
fn read_in_halves(path: &Path) -> std::io::Result<Vec<u8>> {
    std::fs::read(path)
}

/// Distinguishes two writers of one process (the pid distinguishes processes).
fn writer_number() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

#[cfg(unix)]
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        other => other,
    }
}

#[cfg(not(unix))]
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)
}

#[cfg(unix)]
fn create_private_file(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
}

#[cfg(not(unix))]
fn create_private_file(path: &Path) -> std::io::Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
}
