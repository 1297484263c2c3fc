//! Reading the files a user names (plans, key files, server settings, saved results): regular
//! files only, and never more than a cap, so `netchar run /dev/zero` or a FIFO fails at once
//! with one line instead of reading until the OOM killer ends it.

use std::io::Read;
use std::path::Path;

/// Plans, key files and server settings: a few lines each.
pub(crate) const SMALL_FILE_CAP: u64 = 1024 * 1024;
/// Saved results: a long many-stream run with intervals is megabytes, arrays of runs more.
pub(crate) const RESULT_FILE_CAP: u64 = 512 * 1024 * 1024;

/// Reads `path` as UTF-8 text if it is a regular file of at most `cap` bytes; the error is
/// one line saying what the path is instead (a device, a FIFO, a directory, too large).
pub(crate) fn read_text(path: &Path, cap: u64) -> Result<String, String> {
    use std::os::unix::fs::FileTypeExt;
    let meta = std::fs::metadata(path).map_err(|e| e.to_string())?;
    let kind = meta.file_type();
    if !kind.is_file() {
        let what = if kind.is_dir() {
            "a directory"
        } else if kind.is_char_device() || kind.is_block_device() {
            "a device"
        } else if kind.is_fifo() {
            "a FIFO"
        } else if kind.is_socket() {
            "a socket"
        } else {
            "not a regular file"
        };
        return Err(format!("{what}, not a regular file"));
    }
    if meta.len() > cap {
        return Err(format!("{} bytes, larger than the {cap}-byte limit", meta.len()));
    }
    let mut text = String::new();
    // Bounded even if the file grows while it is read.
    std::fs::File::open(path)
        .map_err(|e| e.to_string())?
        .take(cap + 1)
        .read_to_string(&mut text)
        .map_err(|e| e.to_string())?;
    if text.len() as u64 > cap {
        return Err(format!("larger than the {cap}-byte limit"));
    }
    Ok(text)
}

/// A temporary file beside `path`, then a rename: a reader never sees half a report.
pub(crate) fn write_atomically(path: &Path, text: impl AsRef<[u8]>) -> anyhow::Result<()> {
    use anyhow::Context;
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = std::path::PathBuf::from(tmp);
    std::fs::write(&tmp, text).with_context(|| format!("-o: cannot write {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("-o: cannot rename to {}", path.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_directories_and_large_files_are_refused_with_what_they_are() {
        assert_eq!(read_text(Path::new("/dev/zero"), 10).unwrap_err(), "a device, not a regular file");
        assert_eq!(read_text(Path::new("/"), 10).unwrap_err(), "a directory, not a regular file");
        let f = std::env::temp_dir().join(format!("netchar-files-{}", std::process::id()));
        std::fs::write(&f, "0123456789ab").unwrap();
        assert!(read_text(&f, 10).unwrap_err().contains("larger than the 10-byte limit"));
        assert_eq!(read_text(&f, 12).unwrap(), "0123456789ab");
        let _ = std::fs::remove_file(f);
    }
}
