//! Who holds an idempotency claim, and whether that process still runs.
//!
//! Each store takes a random owner id and holds an exclusive lock on a file named after it, in a
//! directory beside the database (`<file>-owners/`). The kernel drops the lock when the process
//! ends, however it ends, so another process (or this one's next start) tells a dead owner from a
//! live one by trying the lock. A file lock, not the id alone: the CLI, or a second server by
//! mistake, may open the same file while this process runs, and must not take its claims.

use std::{
    fs::{File, OpenOptions, TryLockError},
    path::{Path, PathBuf},
};

/// This process's claim owner (one per store; dropped with it).
#[derive(Debug)]
pub(crate) struct Owner {
    pub(crate) id: i64,
    /// The lock directory; none for an in-memory database, which no other process can open.
    dir: Option<PathBuf>,
    /// Held for the owner's life: the lock is what says it is alive.
    _lock: Option<File>,
}

impl Owner {
    /// Takes a fresh owner id for the database file `db` (none: in memory), clearing the files of
    /// owners that are gone.
    pub(crate) fn take(db: Option<&Path>) -> std::io::Result<Owner> {
        let id = random_id();
        let Some(db) = db else {
            return Ok(Owner {
                id,
                dir: None,
                _lock: None,
            });
        };
        let mut dir = db.as_os_str().to_owned();
        dir.push("-owners");
        let dir = PathBuf::from(dir);
        std::fs::create_dir_all(&dir)?;
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(dir.join(id.to_string()))?;
        file.lock()?;
        let owner = Owner {
            id,
            dir: Some(dir),
            _lock: Some(file),
        };
        owner.clear_dead();
        Ok(owner)
    }

    /// Whether the owner `id` still runs: this one, or another whose lock is held. An owner
    /// whose lock cannot be tried (an I/O error) counts as alive, leaving it to the lease.
    pub(crate) fn is_alive(&self, id: i64) -> bool {
        if id == self.id {
            return true;
        }
        match &self.dir {
            None => false,
            Some(dir) => !matches!(try_dead(&dir.join(id.to_string())), Ok(true)),
        }
    }

    fn clear_dead(&self) {
        let Some(dir) = &self.dir else { return };
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            if entry.file_name() != self.id.to_string().as_str() {
                let _ = try_dead(&entry.path());
            }
        }
    }
}

impl Drop for Owner {
    fn drop(&mut self) {
        if let Some(dir) = &self.dir {
            let _ = std::fs::remove_file(dir.join(self.id.to_string()));
        }
    }
}

/// Whether the owner whose lock file is `path` is gone (its file missing, or free to lock); a
/// gone owner's file is removed.
fn try_dead(path: &Path) -> std::io::Result<bool> {
    let file = match File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(true),
        Err(e) => return Err(e),
    };
    match file.try_lock() {
        Ok(()) => {
            let _ = std::fs::remove_file(path);
            Ok(true)
        }
        Err(TryLockError::WouldBlock) => Ok(false),
        Err(TryLockError::Error(e)) => Err(e),
    }
}

/// A positive id from the random bits of a UUIDv7.
fn random_id() -> i64 {
    let bits = u64::from_be_bytes(
        uuid::Uuid::now_v7().as_bytes()[8..]
            .try_into()
            .expect("8 bytes"),
    );
    (bits & 0x3fff_ffff_ffff_ffff) as i64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_owner_is_alive_while_held_and_gone_once_dropped() {
        let db = std::env::temp_dir().join(format!("crm-owner-{}.db", uuid::Uuid::now_v7()));
        let first = Owner::take(Some(&db)).unwrap();
        let second = Owner::take(Some(&db)).unwrap();
        assert!(second.is_alive(first.id), "a live owner of another store");
        assert!(first.is_alive(first.id), "itself");
        let gone = first.id;
        drop(first);
        assert!(!second.is_alive(gone), "a dropped owner");
        assert!(!second.is_alive(12345), "an owner that never was");
        // A killed process leaves its file behind, no longer locked.
        let killed = second.dir.as_ref().unwrap().join("777");
        File::create(&killed).unwrap();
        assert!(!second.is_alive(777), "an owner whose lock nobody holds");
        assert!(!killed.exists(), "its file is cleared");
        let memory = Owner::take(None).unwrap();
        assert!(memory.is_alive(memory.id) && !memory.is_alive(second.id));
    }
}
