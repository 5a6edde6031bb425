//! [`LocalStore`]: recordings in a local directory, the embedded default for a first run.
//!
//! Version `n` of key `K` is the file `<dir>/K.v/<n>` (`n` = 1, 2, ...). Each version is
//! written to a temporary file in the same directory, fsynced, made read-only, then published
//! under its number with a hard link (atomic, and never replaces an existing version; a
//! concurrent writer that lost the race takes the next number), and the directory is fsynced.
//! A version stored with metadata (a segment's chain links) has them in `<n>.meta` (JSON),
//! published before `<n>` itself, so a version is never seen without them.
//! Nothing here stops a local administrator from changing files: integrity comes from the hash
//! on the session row and the segments' chain (see [`super::verify`]), not from the directory.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use async_trait::async_trait;
use uuid::Uuid;

use sha2::{Digest, Sha256};

use super::{CastBody, Chunks, Meta, RecordingStore, RecordingStoreError, StoredVersion};

mod uncached;

/// How many version numbers a put tries before giving up (only reached under heavy
/// contention on one key, which one writer per session never causes).
const MAX_PUBLISH_TRIES: usize = 64;

/// Recordings as numbered, read-only version files under a directory.
#[derive(Debug, Clone)]
pub struct LocalStore {
    dir: PathBuf,
}

impl LocalStore {
    /// A store rooted at `dir` (created on first write).
    pub fn new(dir: impl Into<PathBuf>) -> LocalStore {
        LocalStore { dir: dir.into() }
    }

    /// The root directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The directory holding the versions of `key` (`<dir>/<key>.v`).
    pub fn versions_dir(&self, key: &str) -> Result<PathBuf, RecordingStoreError> {
        validate_key(key)?;
        Ok(self.dir.join(format!("{key}.v")))
    }

    /// The file of `version` of `key`.
    pub fn version_path(&self, key: &str, version: &str) -> Result<PathBuf, RecordingStoreError> {
        let n = parse_version(key, version)?;
        Ok(self.versions_dir(key)?.join(n.to_string()))
    }
}

/// Accepts `a/b/c.cast`-style keys: relative, segments of `[A-Za-z0-9._-]`, no `.`/`..`.
fn validate_key(key: &str) -> Result<(), RecordingStoreError> {
    let ok = !key.is_empty()
        && key.len() <= 512
        && key.split('/').all(|seg| {
            !seg.is_empty()
                && seg != "."
                && seg != ".."
                && seg
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
        });
    if ok {
        Ok(())
    } else {
        Err(RecordingStoreError::InvalidKey(key.to_string()))
    }
}

fn parse_version(key: &str, version: &str) -> Result<u64, RecordingStoreError> {
    let not_found = || RecordingStoreError::NotFound {
        key: key.to_string(),
        version: Some(version.to_string()),
    };
    if version.is_empty() || version.len() > 20 || !version.bytes().all(|b| b.is_ascii_digit()) {
        return Err(not_found());
    }
    version.parse::<u64>().map_err(|_| not_found())
}

/// The highest version number present in `vdir` (0 when none or no directory).
fn latest_number(vdir: &Path) -> io::Result<u64> {
    let entries = match fs::read_dir(vdir) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(e),
    };
    let mut max = 0;
    for entry in entries {
        let entry = entry?;
        if let Some(n) = entry
            .file_name()
            .to_str()
            .filter(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|s| s.parse::<u64>().ok())
        {
            max = max.max(n);
        }
    }
    Ok(max)
}

fn sync_dir(dir: &Path) -> io::Result<()> {
    // Directories can be opened read-only and fsynced on Unix; elsewhere this is best effort.
    match fs::File::open(dir) {
        Ok(f) => match f.sync_all() {
            Ok(()) => Ok(()),
            Err(e) if cfg!(unix) => Err(e),
            Err(_) => Ok(()),
        },
        Err(e) if cfg!(unix) => Err(e),
        Err(_) => Ok(()),
    }
}

fn make_read_only(path: &Path) -> io::Result<()> {
    let mut perms = fs::metadata(path)?.permissions();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        perms.set_mode(0o444);
    }
    #[cfg(not(unix))]
    perms.set_readonly(true);
    fs::set_permissions(path, perms)
}

fn put_blocking(vdir: &Path, body: &CastBody) -> io::Result<u64> {
    let tmp = vdir.join(format!(".tmp-{}", Uuid::new_v4().simple()));
    create_vdir(vdir)?;
    let result = (|| {
        uncached::create_synced(&tmp, body.bytes())?;
        publish(vdir, &tmp, body.meta())
    })();
    if tmp.exists() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

fn create_vdir(vdir: &Path) -> io::Result<()> {
    let created = !vdir.exists();
    fs::create_dir_all(vdir)?;
    if created {
        if let Some(parent) = vdir.parent() {
            sync_dir(parent)?;
        }
    }
    Ok(())
}

/// Writes `meta` as the sidecar of version `n` when there is any; false when `n` is taken.
fn claim_meta(vdir: &Path, n: u64, meta: &Meta) -> io::Result<bool> {
    if meta.is_empty() {
        return Ok(true);
    }
    let path = vdir.join(format!("{n}.meta"));
    let mut f = match fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => return Ok(false),
        Err(e) => return Err(e),
    };
    f.write_all(&serde_json::to_vec(meta).map_err(io::Error::other)?)?;
    f.sync_all()?;
    drop(f);
    make_read_only(&path)?;
    Ok(true)
}

/// Publishes the fsynced file `tmp` (and `meta`) as the next version in `vdir`.
fn publish(vdir: &Path, tmp: &Path, meta: &Meta) -> io::Result<u64> {
    {
        make_read_only(tmp)?;
        let mut n = latest_number(vdir)? + 1;
        for _ in 0..MAX_PUBLISH_TRIES {
            if !claim_meta(vdir, n, meta)? {
                n += 1;
                continue;
            }
            let dest = vdir.join(n.to_string());
            match fs::hard_link(tmp, &dest) {
                Ok(()) => {
                    sync_dir(vdir)?;
                    return Ok(n);
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => n += 1,
                Err(e) if e.kind() == io::ErrorKind::Unsupported => {
                    // No hard links here: rename (atomic, but a concurrent writer could
                    // replace a version; one writer per session never does).
                    if dest.exists() {
                        n += 1;
                        continue;
                    }
                    fs::rename(tmp, &dest)?;
                    sync_dir(vdir)?;
                    return Ok(n);
                }
                Err(e) => return Err(e),
            }
        }
        Err(io::Error::other(format!(
            "no free version number after {MAX_PUBLISH_TRIES} tries in {}",
            vdir.display()
        )))
    }
}

/// The version to read: `requested`, or the latest.
fn pick(vdir: &Path, key: &str, requested: Option<u64>) -> Result<u64, RecordingStoreError> {
    match requested {
        Some(n) => Ok(n),
        None => match latest_number(vdir) {
            Ok(0) => Err(RecordingStoreError::NotFound {
                key: key.to_string(),
                version: None,
            }),
            Ok(n) => Ok(n),
            Err(e) => Err(RecordingStoreError::Unavailable(format!(
                "cannot list {}: {e}",
                vdir.display()
            ))),
        },
    }
}

fn read_version(vdir: &Path, key: &str, n: u64) -> Result<Vec<u8>, RecordingStoreError> {
    let path = vdir.join(n.to_string());
    fs::read(&path).map_err(|e| match e.kind() {
        io::ErrorKind::NotFound => RecordingStoreError::NotFound {
            key: key.to_string(),
            version: Some(n.to_string()),
        },
        _ => RecordingStoreError::Unavailable(format!("cannot read {}: {e}", path.display())),
    })
}

fn read_meta(vdir: &Path, n: u64) -> Result<Meta, RecordingStoreError> {
    let path = vdir.join(format!("{n}.meta"));
    match fs::read(&path) {
        Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| {
            RecordingStoreError::Corrupt(format!(
                "{} is not readable metadata: {e}",
                path.display()
            ))
        }),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Meta::new()),
        Err(e) => Err(RecordingStoreError::Unavailable(format!(
            "cannot read {}: {e}",
            path.display()
        ))),
    }
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, RecordingStoreError> + Send + 'static,
) -> Result<T, RecordingStoreError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| RecordingStoreError::Unavailable(format!("local store task failed: {e}")))?
}

#[async_trait]
impl RecordingStore for LocalStore {
    async fn put_version(
        &self,
        key: &str,
        body: CastBody,
    ) -> Result<StoredVersion, RecordingStoreError> {
        let vdir = self.versions_dir(key)?;
        let (sha256, bytes) = (body.sha256_hex(), body.len());
        let n = blocking(move || {
            put_blocking(&vdir, &body).map_err(|e| {
                RecordingStoreError::Unavailable(format!(
                    "cannot write into {}: {e}",
                    vdir.display()
                ))
            })
        })
        .await?;
        Ok(StoredVersion {
            version_id: n.to_string(),
            sha256,
            bytes,
        })
    }

    async fn put_segment(
        &self,
        key: &str,
        body: CastBody,
    ) -> Result<StoredVersion, RecordingStoreError> {
        // No locks here: a segment is kept like any version.
        self.put_version(key, body).await
    }

    async fn put_chunks(
        &self,
        key: &str,
        chunks: &mut dyn Chunks,
        sha256: [u8; 32],
        bytes: u64,
    ) -> Result<StoredVersion, RecordingStoreError> {
        let vdir = self.versions_dir(key)?;
        let unavailable = |what: &str, e: io::Error| {
            RecordingStoreError::Unavailable(format!("cannot {what} in {}: {e}", vdir.display()))
        };
        let tmp = vdir.join(format!(".tmp-{}", Uuid::new_v4().simple()));
        create_vdir(&vdir).map_err(|e| unavailable("create the directory", e))?;
        let written = async {
            let path = tmp.clone();
            let mut f = blocking(move || {
                fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .open(&path)
                    .map_err(|e| {
                        RecordingStoreError::Unavailable(format!(
                            "cannot write {}: {e}",
                            path.display()
                        ))
                    })
            })
            .await?;
            let (mut hasher, mut len) = (Sha256::new(), 0u64);
            // Off the runtime's threads: a final cast can be gigabytes.
            let write = |mut f: fs::File, chunk: Option<Vec<u8>>| {
                blocking(move || {
                    match &chunk {
                        Some(c) => f.write_all(c),
                        None => f.sync_all(),
                    }
                    .map_err(|e| {
                        RecordingStoreError::Unavailable(format!(
                            "cannot write the final recording: {e}"
                        ))
                    })?;
                    Ok(f)
                })
            };
            while let Some(chunk) = chunks.next_chunk().await? {
                hasher.update(&chunk);
                len += chunk.len() as u64;
                f = write(f, Some(chunk)).await?;
            }
            if len != bytes || <[u8; 32]>::from(hasher.finalize()) != sha256 {
                return Err(super::pieces_mismatch(key, len, bytes, &sha256));
            }
            write(f, None).await?;
            Ok(())
        }
        .await;
        let result = match written {
            Ok(()) => {
                let (vdir, tmp) = (vdir.clone(), tmp.clone());
                blocking(move || {
                    publish(&vdir, &tmp, &Meta::new()).map_err(|e| {
                        RecordingStoreError::Unavailable(format!(
                            "cannot publish in {}: {e}",
                            vdir.display()
                        ))
                    })
                })
                .await
            }
            Err(e) => Err(e),
        };
        if tmp.exists() {
            let _ = fs::remove_file(&tmp);
        }
        Ok(StoredVersion {
            version_id: result?.to_string(),
            sha256: hex::encode(sha256),
            bytes,
        })
    }

    async fn get(&self, key: &str, version: Option<&str>) -> Result<Vec<u8>, RecordingStoreError> {
        let vdir = self.versions_dir(key)?;
        let requested = version.map(|v| parse_version(key, v)).transpose()?;
        let key = key.to_string();
        blocking(move || read_version(&vdir, &key, pick(&vdir, &key, requested)?)).await
    }

    async fn get_with_meta(
        &self,
        key: &str,
        version: Option<&str>,
    ) -> Result<(Vec<u8>, Meta, String), RecordingStoreError> {
        let vdir = self.versions_dir(key)?;
        let requested = version.map(|v| parse_version(key, v)).transpose()?;
        let key = key.to_string();
        blocking(move || {
            let n = pick(&vdir, &key, requested)?;
            Ok((
                read_version(&vdir, &key, n)?,
                read_meta(&vdir, n)?,
                n.to_string(),
            ))
        })
        .await
    }

    async fn latest_version(&self, key: &str) -> Result<String, RecordingStoreError> {
        let vdir = self.versions_dir(key)?;
        let key = key.to_string();
        blocking(move || match latest_number(&vdir) {
            Ok(0) => Err(RecordingStoreError::NotFound { key, version: None }),
            Ok(n) => Ok(n.to_string()),
            Err(e) => Err(RecordingStoreError::Unavailable(format!(
                "cannot list {}: {e}",
                vdir.display()
            ))),
        })
        .await
    }

    async fn latest_size(&self, key: &str) -> Result<(String, u64), RecordingStoreError> {
        let version = self.latest_version(key).await?;
        let path = self.version_path(key, &version)?;
        let len = blocking(move || {
            fs::metadata(&path).map(|m| m.len()).map_err(|e| {
                RecordingStoreError::Unavailable(format!("cannot read {}: {e}", path.display()))
            })
        })
        .await?;
        Ok((version, len))
    }

    async fn check(&self) -> Result<(), RecordingStoreError> {
        let dir = self.dir.clone();
        blocking(move || {
            let probe = dir.join(format!(".check-{}", Uuid::new_v4().simple()));
            let r = (|| {
                fs::create_dir_all(&dir)?;
                let mut f = fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .open(&probe)?;
                f.write_all(b"ok")?;
                f.sync_all()
            })();
            let _ = fs::remove_file(&probe);
            r.map_err(|e| {
                RecordingStoreError::Misconfigured(format!(
                    "recordings directory {} is not writable: {e}",
                    dir.display()
                ))
            })
        })
        .await
    }

    fn describe(&self) -> String {
        format!("local directory {}", self.dir.display())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_validated() {
        for good in ["sessions/0190.cast", "a", "a/b-c_d.e"] {
            assert!(validate_key(good).is_ok(), "{good}");
        }
        for bad in [
            "", "/abs", "a//b", "../x", "a/../b", "a/./b", "a b", "a\\b", "x/",
        ] {
            assert!(validate_key(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn versions_must_be_numbers() {
        assert_eq!(parse_version("k", "12").ok(), Some(12));
        for bad in [
            "",
            "-1",
            "1a",
            "01M8MJQQ5V8V2HARQDGR97ZRAQ",
            "99999999999999999999999",
        ] {
            assert!(matches!(
                parse_version("k", bad),
                Err(RecordingStoreError::NotFound { .. })
            ));
        }
    }
}
