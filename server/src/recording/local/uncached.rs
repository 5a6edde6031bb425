//! Writing a large new file past the page cache (`O_DIRECT`), for the local store's segments.
//!
//! A recording's segments are written once and not read again until someone reviews or
//! verifies the session, so caching them helps nobody, and putting bytes into the page cache
//! is what storing them cost the relay: under bulk output, the kernel finding and filling
//! fresh page-cache pages for each new segment file was a quarter of the server's CPU (2.7 ms
//! of system CPU per MB for a buffered write of new pages on the benchmark machine, 0.04 ms
//! with `O_DIRECT`: `scripts/disk-write-cost.py`; BENCHMARKS.md, "Relay and recording",
//! fix 16). Small writes (an idle session's few
//! bytes) stay buffered: for them the page cache is cheaper than a device write per block.
//!
//! `O_DIRECT` wants the buffer, the offset and the length aligned to the device's logical
//! block, so the bytes are copied into an aligned buffer, padded with zeros to a whole
//! block, written, and the file is cut back to their length before it is synced. A file
//! system without `O_DIRECT` (tmpfs before Linux 6.6) refuses the open with `EINVAL`, and the
//! write is buffered instead.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::Path;

/// Alignment of the buffer, the offset and the length: a page, which is a multiple of every
/// logical block size Linux devices use (512 and 4,096 bytes).
const ALIGN: usize = 4096;

/// Below this, a write goes through the page cache.
pub(super) const DIRECT_FROM: usize = 256 * 1024;

/// Creates the new file `path` (refusing one that exists) holding `bytes`, synced to disk.
///
/// On a file system without `O_DIRECT` a large write may replace a file that exists (the
/// refused open can leave the file behind, so the retry cannot insist on creating it); the
/// store only ever passes a fresh temporary name.
pub(super) fn create_synced(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut f = if bytes.len() >= DIRECT_FROM {
        match open_direct(path) {
            Ok(f) => return write_direct(f, bytes),
            // The file system keeps no O_DIRECT. The open may have created the file first.
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .open(path)?,
            Err(e) => return Err(e),
        }
    } else {
        OpenOptions::new().write(true).create_new(true).open(path)?
    };
    f.write_all(bytes)?;
    f.sync_all()
}

#[cfg(target_os = "linux")]
fn open_direct(path: &Path) -> io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_DIRECT)
        .open(path)
}

#[cfg(not(target_os = "linux"))]
fn open_direct(_path: &Path) -> io::Result<File> {
    Err(io::Error::from_raw_os_error(libc::EINVAL))
}

fn write_direct(mut f: File, bytes: &[u8]) -> io::Result<()> {
    let padded = bytes.len().div_ceil(ALIGN) * ALIGN;
    ALIGNED.with_borrow_mut(|buf| {
        let block = aligned(buf, padded);
        block[..bytes.len()].copy_from_slice(bytes);
        block[bytes.len()..].fill(0);
        f.write_all(block)
    })?;
    f.set_len(bytes.len() as u64)?;
    f.sync_all()
}

thread_local! {
    /// A write's aligned buffer, kept by the blocking thread for its next write: a fresh
    /// allocation of megabytes is new pages again, the cost this module avoids.
    static ALIGNED: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// `len` bytes of `buf` starting at an [`ALIGN`]ed address, growing `buf` if needed.
fn aligned(buf: &mut Vec<u8>, len: usize) -> &mut [u8] {
    if buf.len() < len + ALIGN {
        *buf = vec![0; len + ALIGN];
    }
    let skip = buf.as_ptr().align_offset(ALIGN);
    &mut buf[skip..skip + len]
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn pattern(n: usize) -> Vec<u8> {
        (0..n).map(|i| (i % 251) as u8).collect()
    }

    #[test]
    fn large_and_small_files_hold_exactly_their_bytes_once() {
        // The repository's disk, which keeps O_DIRECT (the next test), so the large sizes
        // take the direct path and the small ones the buffered one.
        let dir = tempfile::tempdir_in(env!("CARGO_MANIFEST_DIR")).unwrap();
        for n in [
            0,
            10,
            DIRECT_FROM - 1,
            DIRECT_FROM,
            DIRECT_FROM + 1,
            3 * DIRECT_FROM + 123,
        ] {
            let path = dir.path().join(format!("f{n}"));
            create_synced(&path, &pattern(n)).unwrap();
            assert_eq!(std::fs::read(&path).unwrap(), pattern(n), "{n} bytes");
            let again = create_synced(&path, b"other").unwrap_err();
            assert_eq!(again.kind(), io::ErrorKind::AlreadyExists, "{n} bytes");
            assert_eq!(std::fs::read(&path).unwrap(), pattern(n), "{n} bytes");
        }
    }

    /// Without this, the test above could pass on the buffered fallback alone.
    #[cfg(target_os = "linux")]
    #[test]
    fn the_repository_disk_takes_the_direct_path() {
        let dir = tempfile::tempdir_in(env!("CARGO_MANIFEST_DIR")).unwrap();
        open_direct(&dir.path().join("direct")).unwrap();
    }

    #[test]
    fn the_aligned_window_starts_on_a_page() {
        let mut buf = Vec::new();
        for len in [ALIGN, 5 * ALIGN, 2 * ALIGN] {
            let w = aligned(&mut buf, len);
            assert_eq!(w.len(), len);
            assert_eq!(w.as_ptr() as usize % ALIGN, 0);
        }
    }
}
