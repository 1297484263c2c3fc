//! Keeps every test that cannot run here going through the one switch (netchar_testkit's require):
//! a test that prints its own "skipping" line, or asks `CI` itself, would pass in CI without
//! having run, so the sources under crates/*/src and crates/*/tests are read and any such line
//! fails this test. The switch has one name everywhere, and .ci/run sets it.

#[path = "support/require.rs"]
mod require;

use std::path::{Path, PathBuf};

/// Where a test announces a skip of its own, decides by `CI` whether to skip, or reads the
/// switch itself (a second copy of what require.rs does).
const OWN_SKIPS: &[&str] = &["\"skipping", "\"SKIP", "var(\"CI\")", "var_os(\"CI\")", "var(\"NETCHAR_REQUIRE_ALL\")"];

/// Skips that stay skips under the switch, each with why: (file, text on the line). None now:
/// the idle meter's check, once kept here because it needed a quiet machine, counts the
/// kernel's CPU time instead.
const KEPT: &[(&str, &str)] = &[];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every .rs file under `dir`, recursively (none where `dir` does not exist: a crate without
/// tests/).
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).into_iter().flatten().map(|e| e.unwrap().path()) {
        if entry.is_dir() {
            rust_files(&entry, out);
        } else if entry.extension().is_some_and(|e| e == "rs") {
            out.push(entry);
        }
    }
}

/// The path of `file` from the repository root, with `/` between its parts.
fn shown(file: &Path) -> String {
    let rel = file.strip_prefix(root()).unwrap_or(file);
    rel.components().map(|c| c.as_os_str().to_string_lossy()).collect::<Vec<_>>().join("/")
}

#[test]
fn every_skip_goes_through_the_one_switch() {
    let mut files = Vec::new();
    for krate in std::fs::read_dir(root().join("crates")).unwrap().map(|e| e.unwrap().path()) {
        rust_files(&krate.join("src"), &mut files);
        rust_files(&krate.join("tests"), &mut files);
    }
    assert!(files.len() > 50, "found only {} source files under crates/", files.len());
    let mut own = Vec::new();
    for file in &files {
        let name = shown(file);
        if name.ends_with("crates/testkit/src/require.rs") || name.ends_with("tests/skips.rs") {
            continue;
        }
        let text = std::fs::read_to_string(file).unwrap();
        for (i, line) in text.lines().enumerate() {
            // Comments may quote the skip line ("prints \"skipping netns test: ...\"").
            let code = !line.trim_start().starts_with("//");
            let kept = KEPT.iter().any(|(f, needle)| name == *f && line.contains(needle));
            if code && OWN_SKIPS.iter().any(|m| line.contains(m)) && !kept {
                own.push(format!("{name}:{}: {}", i + 1, line.trim()));
            }
        }
    }
    assert!(
        own.is_empty(),
        "these lines skip a test without the switch; call require::unavailable (or netns::skip_or_fail), \
         which fails under {}=1:\n{}",
        require::REQUIRE_ENV,
        own.join("\n")
    );
}

#[test]
fn the_switch_has_one_name_and_ci_sets_it() {
    let mut texts = vec![root().join(".ci/run"), root().join("README.md")];
    for dir in ["docs", "bench"] {
        let entries = std::fs::read_dir(root().join(dir)).unwrap().map(|e| e.unwrap().path());
        texts.extend(entries.filter(|p| p.extension().is_some_and(|e| e == "md" || e == "sh")));
    }
    let mut sources = Vec::new();
    for krate in std::fs::read_dir(root().join("crates")).unwrap().map(|e| e.unwrap().path()) {
        rust_files(&krate.join("src"), &mut sources);
        rust_files(&krate.join("tests"), &mut sources);
    }
    // The name up to its last underscore, taken from the name so that this file does not match
    // itself.
    let prefix = &require::REQUIRE_ENV[..=require::REQUIRE_ENV.rfind('_').unwrap()];
    let mut other_names = Vec::new();
    for file in texts.iter().chain(&sources) {
        let text = std::fs::read_to_string(file).unwrap();
        for (i, line) in text.lines().enumerate() {
            let mut others =
                line.match_indices(prefix).filter(|(at, _)| !line[*at..].starts_with(require::REQUIRE_ENV));
            if others.next().is_some() {
                other_names.push(format!("{}:{}: {}", shown(file), i + 1, line.trim()));
            }
        }
    }
    assert!(other_names.is_empty(), "the switch is {} only:\n{}", require::REQUIRE_ENV, other_names.join("\n"));
    let ci = std::fs::read_to_string(root().join(".ci/run")).unwrap();
    let export = format!("export {}=1", require::REQUIRE_ENV);
    assert!(ci.lines().any(|l| l.trim() == export), ".ci/run must `{export}` before it runs the tests");
}
