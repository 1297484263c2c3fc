//! What the golden tests share: where their files are, and the comparison with an expected file
//! (`UPDATE_GOLDEN=1` rewrites it).
#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// A folder under tests/.
pub(crate) fn dir(sub: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests").join(sub)
}

/// `got` must equal tests/expected/NAME; the first differing line is shown.
pub(crate) fn check(name: &str, got: &str) {
    let path = dir("expected").join(name);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, got).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (UPDATE_GOLDEN=1 writes it)", path.display()));
    if got != want {
        for (i, (g, w)) in got.lines().zip(want.lines()).enumerate() {
            if g != w {
                panic!("{name} differs at line {}:\n got: {g}\nwant: {w}", i + 1);
            }
        }
        panic!("{name} differs in length: {} lines, expected {}", got.lines().count(), want.lines().count());
    }
}
