//! The module graph of a crate has no cycle: each top-level module (a file `src/x.rs`, or a
//! directory `src/x/` counted as one module) stands on modules below it, never on one that
//! stands on it. A layer is then a thing to read on its own: in the engine, the protocol
//! registry's types are the floor the adapters (`peers`) stand on, and the drivers (`client`,
//! `server`) stand on both.
//!
//! The same holds inside every directory module: its children (`dataplane::udp`,
//! `dataplane::xdp`; a subdirectory again counted as one) are the nodes of a graph of their
//! own, which has no cycle either. Two sibling files that need each other's items stand on a
//! third below both. The directory's own file (`mod.rs`) is the frame its children hang in,
//! not one of them: its items (`super::StreamShared`) are no sibling, and what it imports from
//! a child (`pub use udp::DatagramPacer;`) is that child's when a sibling names it through it.
//! A glob of the directory (`use super::*;`) is not followed: what it brings is not read.
//!
//! The check reads the sources, not the compiler's view: a module A depends on B when code in
//! A names `crate::B` (also `use crate::{B, ...}` and `$crate::B`), or climbs to the crate root
//! with `super::` and names B there, or (in the crate root's file) names `B::` directly; a
//! sibling B of A when code in A names it by a path through their directory
//! (`super::B`, `crate::dir::B`). The root file itself is the node `crate`: a path to one of its
//! own items (`crate::StopFlag`) is an edge to it, its `mod b;` declarations are not edges.
//! Comments, doc comments (their intra-doc links included) and string and character literals
//! are blanked first, so a sentence that mentions `crate::peers` is not a dependency.
//!
//! The same reading of the sources checks that no function runs longer than [`MAX_FN_LINES`].

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// The crates whose module graph must have no cycle, by directory under `crates/`: every one.
const CHECKED: &[&str] = &["cli", "engine", "model", "report", "stats", "store", "sys", "testkit", "wire"];

/// Modules that must not reach others, directly or through any path: (crate, from, to).
/// The engine's adapters and its registry stand below the drivers.
const NEVER_REACHES: &[(&str, &str, &str)] = &[
    ("engine", "registry", "client"),
    ("engine", "registry", "server"),
    ("engine", "registry", "peers"),
    ("engine", "peers", "client"),
    ("engine", "peers", "server"),
    ("engine", "peers", "protocols"),
    ("engine", "error", "registry"),
    ("engine", "error", "peers"),
    ("engine", "error", "client"),
    ("engine", "error", "server"),
];

#[test]
fn checked_crates_have_no_module_cycle() {
    // Every crate of the workspace is checked: a new one joins CHECKED.
    let mut crates: Vec<String> = fs::read_dir(crates_dir())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.path().join("src").is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    crates.sort();
    assert_eq!(crates, CHECKED, "the workspace's crates and CHECKED differ");
    let mut failures = Vec::new();
    for name in CHECKED {
        let dir = crates_dir().join(name);
        // The top level, then the children of each directory module.
        for module in directory_modules(&dir.join("src")) {
            let graph = Graph::of_dir(&dir, &module);
            for knot in graph.cycles() {
                failures.push(format!("crates/{name}: {}", graph.describe(&knot)));
            }
        }
    }
    assert!(failures.is_empty(), "module cycles:\n{}", failures.join("\n"));
}

#[test]
fn layers_keep_their_order() {
    let mut failures = Vec::new();
    for &(name, from, to) in NEVER_REACHES {
        let graph = Graph::of_crate(&crates_dir().join(name));
        assert!(graph.nodes.contains(from) && graph.nodes.contains(to), "crates/{name}: no module {from} or {to}");
        if let Some(path) = graph.path(from, to) {
            failures.push(format!("crates/{name}: {from} reaches {to}: {}", graph.describe_path(&path)));
        }
    }
    assert!(failures.is_empty(), "layering broken:\n{}", failures.join("\n"));
}

#[test]
fn comments_strings_and_doc_links_are_not_dependencies() {
    let src = r####"
//! Uses crate::alpha in a sentence, and [`crate::beta`].
/// Sees [crate::gamma] and crate::delta.
/* crate::epsilon /* nested crate::zeta */ crate::eta */
fn f<'a>(x: &'a str) -> char {
    let _ = "crate::theta \" crate::iota";
    let _ = r#"crate::kappa " crate::lambda"#;
    let _ = b"crate::mu";
    let _ = '"'; // a quote in a char literal must not open a string
    let _ = crate::real::thing();
    '\''
}
"####;
    let modules = ["alpha", "beta", "gamma", "delta", "epsilon", "theta", "kappa", "mu", "real"];
    let deps = deps_of(
        &tokens(&blank(src)),
        &[],
        true,
        &[],
        &modules.map(String::from).into_iter().collect(),
        &BTreeMap::new(),
    );
    assert_eq!(deps.into_iter().map(|(m, _)| m).collect::<Vec<_>>(), ["real"]);
}

#[test]
fn paths_that_name_a_module() {
    // As if in `src/own/sub.rs`: two supers reach the root; inside `mod tests`, three do, and
    // two (`k`) stay inside `own`.
    let src = "use crate::{a::X, b, c::{d, e}};\n\
               use super::super::f::Y;\n\
               mod tests { use super::super::super::g; use super::super::k; }\n\
               use super::super::m;\n\
               fn h() { crate::Root; $crate::i::j!(); let c = '{'; }";
    let modules: BTreeSet<String> =
        ["a", "b", "c", "d", "e", "f", "g", "i", "k", "m"].map(String::from).into_iter().collect();
    let deps = deps_of(&tokens(&blank(src)), &["own".into(), "sub".into()], false, &[], &modules, &BTreeMap::new());
    let names: Vec<_> = deps.into_iter().map(|(m, _)| m).collect();
    assert_eq!(names, ["a", "b", "c", "f", "g", "m", "crate", "i"]);
}

#[test]
fn paths_that_name_a_sibling() {
    // As if in `src/dp/xdp.rs`, among the children of `dp`: `StreamShared` is an item of
    // `dp`'s own file, `Pacer` one it imports from `udp`; `other` is outside `dp`; `Q`, inside
    // `mod tests`, is xdp's own.
    let src = "use super::udp::send;\n\
               use super::{pacing::{self, pause}, StreamShared, Pacer};\n\
               use crate::dp::figures::Gaps;\n\
               use crate::other::Y;\n\
               mod tests { use super::super::integrity::Z; use super::Q; }\n\
               fn f() { self::g(); super::wake::<u8>::new(); }\n\
               use crate::{dp::{rr, udp}, other::W};";
    let dir = ["dp".to_string()];
    let modules: BTreeSet<String> =
        ["udp", "xdp", "pacing", "figures", "integrity", "wake", "rr"].map(String::from).into_iter().collect();
    let facade = BTreeMap::from([("Pacer".to_string(), "udp".to_string())]);
    let deps = deps_of(&tokens(&blank(src)), &["dp".into(), "xdp".into()], false, &dir, &modules, &facade);
    let names: Vec<_> = deps.into_iter().map(|(m, _)| m).collect();
    assert_eq!(names, ["udp", "pacing", "figures", "integrity", "wake", "rr"]);
}

#[test]
fn a_directory_file_imports_for_its_children() {
    // `dp/mod.rs`: what it imports from a child, publicly or not, is that child's.
    let src = "mod udp; mod rr;\n\
               pub use udp::DatagramPacer;\n\
               pub(crate) use self::rr::{latency, Framing as RrFraming};\n\
               use std::io;\n\
               use netchar_model::TestSpec;\n\
               mod tests { use udp::Hidden; }";
    let modules: BTreeSet<String> = ["udp", "rr"].map(String::from).into_iter().collect();
    let facade = reexports(&tokens(&blank(src)), Path::new("/nonexistent"), &["dp".into()], &modules);
    let got: Vec<(&str, &str)> = facade.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    assert_eq!(got, [("DatagramPacer", "udp"), ("Framing", "rr"), ("RrFraming", "rr"), ("latency", "rr")]);
}

/// The longest a function in any crate's `src/` may run, from its `fn` line to its closing
/// brace: a longer one is split by phase into named helpers, so each reads as one piece.
const MAX_FN_LINES: usize = 150;

#[test]
fn no_function_runs_longer_than_max_fn_lines() {
    let mut failures = Vec::new();
    for name in CHECKED {
        let dir = crates_dir().join(name);
        let mut files = Vec::new();
        rust_files(&dir.join("src"), &mut files);
        files.sort();
        for file in files {
            let text = fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
            for (function, first, last) in function_spans(&tokens(&blank(&text))) {
                let lines = last - first + 1;
                if lines > MAX_FN_LINES {
                    let at = file.strip_prefix(&dir).unwrap_or(&file).display();
                    failures.push(format!("crates/{name}/{at}:{first}: fn {function}, {lines} lines"));
                }
            }
        }
    }
    assert!(failures.is_empty(), "functions longer than {MAX_FN_LINES} lines:\n{}", failures.join("\n"));
}

#[test]
fn function_spans_run_from_fn_to_its_closing_brace() {
    let src = "trait T { fn declared(&self) -> [u8; 2]; }\n\
               struct S { run: fn(u8) -> u8 }\n\
               fn outer(cb: fn(u8) -> u8) -> [u8; 2] {\n\
                   fn inner() { let _ = '}'; }\n\
                   let _ = \"}\";\n\
               }\n\
               macro_rules! m { ($f:ident) => { fn $f() {} }; }";
    let spans = function_spans(&tokens(&blank(src)));
    assert_eq!(spans, [("outer".to_string(), 3, 6), ("inner".to_string(), 4, 4)]);
}

/// Each function with a body: its name, and the lines of its `fn` and of its closing brace.
/// The body is the first `{` outside the signature's brackets; a `;` there first (a trait's
/// declaration) means none.
fn function_spans(toks: &[(Tok, usize)]) -> Vec<(String, usize, usize)> {
    let mut out = Vec::new();
    for (i, (t, line)) in toks.iter().enumerate() {
        let (Tok::Ident(k), Some((Tok::Ident(name), _))) = (t, toks.get(i + 1)) else { continue };
        if k != "fn" {
            continue;
        }
        let mut brackets = 0i32;
        let mut j = i + 2;
        let body = loop {
            match toks.get(j).map(|t| &t.0) {
                None => break None,
                Some(Tok::Punct('(' | '[')) => brackets += 1,
                Some(Tok::Punct(')' | ']')) => brackets -= 1,
                Some(Tok::Punct('{')) if brackets == 0 => break Some(j),
                Some(Tok::Punct(';')) if brackets == 0 => break None,
                _ => {}
            }
            j += 1;
        };
        let Some(open) = body else { continue };
        let mut depth = 0;
        for (t, end) in &toks[open..] {
            match t {
                Tok::Punct('{') => depth += 1,
                Tok::Punct('}') => {
                    depth -= 1;
                    if depth == 0 {
                        out.push((name.clone(), *line, *end));
                        break;
                    }
                }
                _ => {}
            }
        }
    }
    out
}

fn crates_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("crates/").to_path_buf()
}

/// The children of one module (the crate's top-level modules, or a directory module's) and
/// who depends on whom, with where each edge was seen.
struct Graph {
    /// The module whose children the nodes are: [] for the crate's top level.
    dir: Vec<String>,
    nodes: BTreeSet<String>,
    /// from -> to -> the first place seen (`file:line`).
    edges: BTreeMap<String, BTreeMap<String, String>>,
}

impl Graph {
    fn of_crate(dir: &Path) -> Self {
        Self::of_dir(dir, &[])
    }

    /// The graph of the children of module `module` ([]: the crate's top-level modules and the
    /// root file's node [`ROOT`]) of the crate in `dir`. Only code inside `module` is read.
    fn of_dir(dir: &Path, module: &[String]) -> Self {
        let src = dir.join("src");
        let mut files = Vec::new();
        rust_files(&src, &mut files);
        files.sort();
        let root = ["lib.rs", "main.rs"].map(|f| src.join(f)).into_iter().find(|p| p.exists()).expect("a crate root");
        let top = module.is_empty();
        // The module's own file: its children's frame, which holds their shared imports.
        let frame =
            if top { Some(root.clone()) } else { files.iter().find(|f| module_path(&src, f) == module).cloned() };
        let children: Vec<(PathBuf, Vec<String>)> = files
            .iter()
            .filter(|f| **f != root)
            .map(|f| (f.clone(), module_path(&src, f)))
            .filter(|(_, path)| path.len() > module.len() && path.starts_with(module))
            .collect();
        let mut nodes: BTreeSet<String> = children.iter().map(|(_, path)| path[module.len()].clone()).collect();
        if top {
            nodes.insert(ROOT.into());
        }
        let mut edges: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
        let frame_toks = tokens(&blank(&frame.and_then(|f| fs::read_to_string(f).ok()).unwrap_or_default()));
        let facade = reexports(&frame_toks, &src, module, &nodes);
        // The root file's code is a node of the top level; a directory's own file is no node.
        let readers = children.into_iter().chain(top.then(|| (root.clone(), Vec::new())));
        for (file, path) in readers {
            let text = fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
            let is_root = file == root;
            let from = if is_root { ROOT.to_string() } else { path[module.len()].clone() };
            for (to, line) in deps_of(&tokens(&blank(&text)), &path, is_root, module, &nodes, &facade) {
                if to != from {
                    let at = format!("{}:{line}", file.strip_prefix(dir).unwrap_or(&file).display());
                    edges.entry(from.clone()).or_default().entry(to).or_insert(at);
                }
            }
        }
        Self { dir: module.to_vec(), nodes, edges }
    }

    /// A node as a reader finds it: `dataplane::udp` for the child `udp` of `dataplane`.
    fn name(&self, node: &str) -> String {
        if self.dir.is_empty() {
            node.to_string()
        } else {
            format!("{}::{node}", self.dir.join("::"))
        }
    }

    fn next(&self, n: &str) -> impl Iterator<Item = &String> {
        self.edges.get(n).into_iter().flat_map(|m| m.keys())
    }

    /// Each knot of modules that depend on each other (a strongly connected component of more
    /// than one): one cycle through it, and the rest of its members.
    fn cycles(&self) -> Vec<Knot> {
        let mut done = BTreeSet::new();
        let mut out = Vec::new();
        for n in &self.nodes {
            if done.contains(n) {
                continue;
            }
            // The component of n: what n reaches that reaches n back.
            let component: BTreeSet<String> =
                self.nodes.iter().filter(|m| self.reaches(n, m) && self.reaches(m, n)).cloned().collect();
            done.extend(component.iter().cloned());
            if component.len() > 1 {
                let back = self.next(n).find(|m| component.contains(*m)).expect("a member of its component");
                let mut cycle = vec![n.clone()];
                cycle.extend(self.path(back, n).expect("back to the start"));
                cycle.pop();
                let others = component.iter().filter(|m| !cycle.contains(m)).cloned().collect();
                out.push(Knot { cycle, others });
            }
        }
        out
    }

    fn reaches(&self, from: &str, to: &str) -> bool {
        from == to || self.path(from, to).is_some()
    }

    /// The shortest path from `from` to `to`, both included.
    fn path(&self, from: &str, to: &str) -> Option<Vec<String>> {
        let mut came: BTreeMap<String, String> = BTreeMap::new();
        let mut queue = std::collections::VecDeque::from([from.to_string()]);
        let mut seen = BTreeSet::from([from.to_string()]);
        while let Some(n) = queue.pop_front() {
            for m in self.next(&n) {
                if seen.insert(m.clone()) {
                    came.insert(m.clone(), n.clone());
                    queue.push_back(m.clone());
                }
                if m == to {
                    let mut path = vec![to.to_string()];
                    while let Some(p) = came.get(path.last().unwrap()) {
                        path.push(p.clone());
                        if p == from {
                            break;
                        }
                    }
                    path.reverse();
                    return Some(path);
                }
            }
        }
        None
    }

    /// `a -> b (src/a.rs:3) -> a (src/b.rs:9)`, then every edge between the knot's members.
    fn describe(&self, knot: &Knot) -> String {
        let mut path = knot.cycle.clone();
        path.push(path[0].clone());
        let mut s = self.describe_path(&path);
        if !knot.others.is_empty() {
            let others: Vec<String> = knot.others.iter().map(|n| self.name(n)).collect();
            s = format!("{s}\n  in the same knot: {}", others.join(", "));
        }
        let members: BTreeSet<&String> = knot.cycle.iter().chain(&knot.others).collect();
        for from in &members {
            for (to, at) in self.edges.get(*from).into_iter().flatten().filter(|(to, _)| members.contains(to)) {
                s = format!("{s}\n  {} -> {} ({at})", self.name(from), self.name(to));
            }
        }
        s
    }

    fn describe_path(&self, path: &[String]) -> String {
        let mut s = self.name(&path[0]);
        for w in path.windows(2) {
            s = format!("{s} -> {} ({})", self.name(&w[1]), self.edges[&w[0]][&w[1]]);
        }
        s
    }
}

/// Modules that depend on each other: a cycle through them, and the others in the knot.
struct Knot {
    cycle: Vec<String>,
    others: Vec<String>,
}

/// The crate root's node.
const ROOT: &str = "crate";

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let p = entry.expect("a directory entry").path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

/// `src/peers/iperf2/server.rs` -> [peers, iperf2, server]; `src/peers/mod.rs` -> [peers].
fn module_path(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).expect("under src/").with_extension("");
    let mut parts: Vec<String> = rel.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
    if parts.len() > 1 && parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    parts
}

/// The modules whose children make a graph: the crate's top level ([]), then every directory
/// under `src` that holds Rust files (`src/peers/iperf2` -> [peers, iperf2]).
fn directory_modules(src: &Path) -> Vec<Vec<String>> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let mut out: BTreeSet<Vec<String>> = BTreeSet::new();
    for file in files {
        let dir = file.parent().expect("a directory").strip_prefix(src).expect("under src/");
        let dir: Vec<String> = dir.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
        // A directory of directories only is a module too.
        out.extend((0..=dir.len()).map(|n| dir[..n].to_vec()));
    }
    out.into_iter().collect()
}

/// The text with every comment and string or character literal replaced by spaces (line
/// breaks kept, so lines still count).
fn blank(src: &str) -> String {
    let c: Vec<char> = src.chars().collect();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    let keep = |out: &mut String, ch: char| out.push(if ch == '\n' { '\n' } else { ' ' });
    while i < c.len() {
        let ident_before = i > 0 && (c[i - 1].is_alphanumeric() || c[i - 1] == '_');
        if ch(&c, i) == '/' && ch(&c, i + 1) == '/' {
            while i < c.len() && c[i] != '\n' {
                i += 1;
                out.push(' ');
            }
        } else if ch(&c, i) == '/' && ch(&c, i + 1) == '*' {
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && ch(&c, i + 1) == '*' {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if c[i] == '*' && ch(&c, i + 1) == '/' {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    keep(&mut out, c[i]);
                    i += 1;
                }
            }
        } else if !ident_before && (ch(&c, i) == 'r' || (ch(&c, i) == 'b' && ch(&c, i + 1) == 'r')) && {
            let start = if ch(&c, i) == 'b' { 2 } else { 1 };
            let hashes = (start..).take_while(|&k| ch(&c, i + k) == '#').count();
            ch(&c, i + start + hashes) == '"'
        } {
            // A raw string: r"..", r#".."#, br#".."#.
            let start = if ch(&c, i) == 'b' { 2 } else { 1 };
            let hashes = (start..).take_while(|&k| ch(&c, i + k) == '#').count();
            let close: Vec<char> = std::iter::once('"').chain(std::iter::repeat_n('#', hashes)).collect();
            i += start + hashes + 1;
            out.push_str(&" ".repeat(start + hashes + 1));
            while i < c.len() && !c[i..].starts_with(&close) {
                keep(&mut out, c[i]);
                i += 1;
            }
            i += close.len();
            out.push_str(&" ".repeat(close.len()));
        } else if ch(&c, i) == '"' || (!ident_before && ch(&c, i) == 'b' && ch(&c, i + 1) == '"') {
            if ch(&c, i) == 'b' {
                out.push(' ');
                i += 1;
            }
            out.push(' ');
            i += 1;
            while i < c.len() && c[i] != '"' {
                if c[i] == '\\' {
                    keep(&mut out, c[i]);
                    i += 1;
                }
                if i < c.len() {
                    keep(&mut out, c[i]);
                    i += 1;
                }
            }
            out.push(' ');
            i += 1;
        } else if ch(&c, i) == '\'' && (ch(&c, i + 1) == '\\' || (ch(&c, i + 1) != '\'' && ch(&c, i + 2) == '\'')) {
            // A character literal ('x', '\n', '\u{..}', '\''); a lifetime ('a) has no closing quote.
            out.push(' ');
            i += 1;
            if c[i] == '\\' {
                out.push_str("  ");
                i += 2;
            }
            while i < c.len() && c[i] != '\'' {
                out.push(' ');
                i += 1;
            }
            out.push(' ');
            i += 1;
        } else {
            out.push(c[i]);
            i += 1;
        }
    }
    out
}

#[derive(Debug, PartialEq)]
enum Tok {
    Ident(String),
    PathSep,
    Punct(char),
}

/// Identifiers, `::` and single punctuation characters, each with its line.
fn tokens(text: &str) -> Vec<(Tok, usize)> {
    let c: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let (mut i, mut line) = (0, 1);
    while i < c.len() {
        let ch = c[i];
        if ch == '\n' {
            line += 1;
            i += 1;
        } else if ch.is_whitespace() {
            i += 1;
        } else if ch.is_alphabetic() || ch == '_' {
            let start = i;
            while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                i += 1;
            }
            out.push((Tok::Ident(c[start..i].iter().collect()), line));
        } else if ch.is_ascii_digit() {
            while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                i += 1;
            }
        } else if ch == ':' && c.get(i + 1) == Some(&':') {
            out.push((Tok::PathSep, line));
            i += 2;
        } else {
            out.push((Tok::Punct(ch), line));
            i += 1;
        }
    }
    out
}

fn is_ident(t: Option<&(Tok, usize)>, name: &str) -> bool {
    matches!(t, Some((Tok::Ident(s), _)) if s == name)
}

/// Where a re-export that starts at `toks[i]` (`pub use ...;`, `pub(crate) use ...;`) ends:
/// the index after its `;`; None when `toks[i]` starts no re-export.
fn reexport_end(toks: &[(Tok, usize)], i: usize) -> Option<usize> {
    let mut j = i + 1;
    if toks.get(j).map(|t| &t.0) == Some(&Tok::Punct('(')) {
        j += 1;
        while toks.get(j).is_some_and(|t| t.0 != Tok::Punct(')')) {
            j += 1;
        }
        j += 1;
    }
    if !is_ident(toks.get(j), "use") {
        return None;
    }
    while toks.get(j).is_some_and(|t| t.0 != Tok::Punct(';')) {
        j += 1;
    }
    Some(j + 1)
}

/// The names a module's own file imports from its children (`pub use result::*;`, `pub use
/// method::{Method, METHOD_FIELDS};`, `use figures::Figures;`), each with the child it comes
/// from: a path through the module to such a name (`crate::TestResult`, `super::Figures`) is a
/// use of that child. A glob stands for the public items the child's file declares.
fn reexports(
    frame: &[(Tok, usize)],
    src: &Path,
    module: &[String],
    children: &BTreeSet<String>,
) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut depth = 0;
    let mut i = 0;
    while i < frame.len() {
        match &frame[i].0 {
            Tok::Punct('{') => depth += 1,
            Tok::Punct('}') => depth -= 1,
            Tok::Ident(k) if k == "use" && depth == 0 => {
                let end = (i..frame.len()).find(|&j| frame[j].0 == Tok::Punct(';')).map_or(frame.len(), |j| j + 1);
                let mut at = i + 1;
                // `use self::udp::X;` is `use udp::X;`.
                if is_ident(frame.get(at), "self") && frame.get(at + 1).map(|t| &t.0) == Some(&Tok::PathSep) {
                    at += 2;
                }
                if let Some((Tok::Ident(child), _)) = frame.get(at) {
                    if children.contains(child) {
                        let mut names: Vec<String> = frame[at + 1..end]
                            .iter()
                            .filter_map(|t| match &t.0 {
                                Tok::Ident(n) if n != "self" && n != "as" => Some(n.clone()),
                                _ => None,
                            })
                            .collect();
                        if frame[at..end].iter().any(|t| t.0 == Tok::Punct('*')) {
                            names.extend(public_items(src, module, child));
                        }
                        for n in names {
                            out.entry(n).or_insert_with(|| child.clone());
                        }
                    }
                }
                i = end;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    out
}

/// The names of the public items (`pub struct X`, `pub fn f`, ...) the file of `module`'s
/// child `child` declares at its top level.
fn public_items(src: &Path, module: &[String], child: &str) -> Vec<String> {
    let dir = module.iter().fold(src.to_path_buf(), |dir, m| dir.join(m));
    let file = [dir.join(format!("{child}.rs")), dir.join(child).join("mod.rs")].into_iter().find(|p| p.exists());
    let Some(text) = file.and_then(|f| fs::read_to_string(f).ok()) else { return Vec::new() };
    let toks = tokens(&blank(&text));
    let kinds = ["struct", "enum", "fn", "const", "static", "type", "trait", "mod", "union"];
    let mut out = Vec::new();
    let mut depth = 0;
    for (i, (t, _)) in toks.iter().enumerate() {
        match t {
            Tok::Punct('{') => depth += 1,
            Tok::Punct('}') => depth -= 1,
            Tok::Ident(k) if depth == 0 && k == "pub" => {
                let kind =
                    toks[i + 1..].iter().position(|(t, _)| matches!(t, Tok::Ident(k) if kinds.contains(&k.as_str())));
                if let Some(at) = kind.filter(|&at| at <= 4) {
                    if let Some((Tok::Ident(name), _)) = toks.get(i + 1 + at + 1) {
                        out.push(name.clone());
                    }
                }
            }
            _ => {}
        }
    }
    out
}

/// The nodes of one graph a file's code names, in order, with the line of each first mention.
/// `path` is the file's module path ([] for the crate root); the nodes are the children
/// (`modules`) of `module` ([] for the crate's top level), and `facade` the names `module`'s
/// own file imports from them. A path into the file's own node is none of its dependencies; a
/// name in `module` that is no child is an item of its own file: the crate root's node
/// ([`ROOT`]) at the top level, no node inside a directory.
fn deps_of(
    toks: &[(Tok, usize)],
    path: &[String],
    is_root: bool,
    module: &[String],
    modules: &BTreeSet<String>,
    facade: &BTreeMap<String, String>,
) -> Vec<(String, usize)> {
    let own = path.get(module.len());
    let mut out: Vec<(String, usize)> = Vec::new();
    for (named, line) in named_paths(toks, path, is_root, modules) {
        let Some(name) = named.strip_prefix(module).and_then(|rest| rest.first()) else { continue };
        if Some(name) == own {
            continue;
        }
        let node = match (modules.contains(name), facade.get(name)) {
            (true, _) => name.clone(),
            // `crate::TestResult`, re-exported by the root from `result`: a use of `result`.
            (false, Some(child)) => child.clone(),
            (false, None) if module.is_empty() => ROOT.to_string(),
            (false, None) => continue,
        };
        if !out.iter().any(|(n, _)| *n == node) {
            out.push((node, line));
        }
    }
    out
}

/// Every path a file's code names from a known place (`crate::`, `$crate::`, `super::`,
/// `self::`, and in the crate root's own code a top-level module's name), as the module path it
/// reaches from the crate root, use trees expanded (`use super::{a::X, b};` in `src/m/f.rs`:
/// [m, a, X] and [m, b]), each with its line. `path` is the file's module path ([] for the
/// crate root), `modules` the crate's top-level modules.
fn named_paths(
    toks: &[(Tok, usize)],
    path: &[String],
    is_root: bool,
    modules: &BTreeSet<String>,
) -> Vec<(Vec<String>, usize)> {
    let mut out = Vec::new();
    // Inline modules (`mod tests { .. }`), each with the brace depth it opens at: one more level
    // for `super::` to climb.
    let mut inline: Vec<(usize, String)> = Vec::new();
    let mut depth = 0;
    let mut i = 0;
    while i < toks.len() {
        let after_sep = i > 0 && toks[i - 1].0 == Tok::PathSep;
        // The root's re-exports (`pub use result::*;`) are its facade, not code of its own that
        // uses the module: its users' paths through it count as uses of the module itself.
        if is_root && inline.is_empty() && depth == 0 && is_ident(toks.get(i), "pub") {
            if let Some(end) = reexport_end(toks, i) {
                i = end;
                continue;
            }
        }
        match &toks[i].0 {
            Tok::Punct('{') => depth += 1,
            Tok::Punct('}') => {
                depth -= 1;
                if inline.last().is_some_and(|(d, _)| *d == depth) {
                    inline.pop();
                }
            }
            Tok::Ident(k) if k == "mod" && matches!(toks.get(i + 2), Some((Tok::Punct('{'), _))) => {
                if let Some((Tok::Ident(name), _)) = toks.get(i + 1) {
                    inline.push((depth, name.clone()));
                }
            }
            Tok::Ident(k) if (k == "crate" || k == "super" || k == "self") && !after_sep => {
                // Where the path starts; each further `super` climbs one.
                let here: Vec<String> = path.iter().cloned().chain(inline.iter().map(|(_, n)| n.clone())).collect();
                let up = |mut p: Vec<String>| p.pop().map(|_| p);
                let mut start = match k.as_str() {
                    "crate" => Some(Vec::new()),
                    "self" => Some(here),
                    _ => up(here),
                };
                let mut j = i + 1;
                while toks.get(j).map(|t| &t.0) == Some(&Tok::PathSep) && is_ident(toks.get(j + 1), "super") {
                    start = start.and_then(up);
                    j += 2;
                }
                if let Some(start) = start.filter(|_| toks.get(j).map(|t| &t.0) == Some(&Tok::PathSep)) {
                    let mut found = Vec::new();
                    j = use_tree(toks, j + 1, start, &mut found);
                    out.extend(found.into_iter().map(|p| (p, toks[i].1)));
                }
                i = j;
                continue;
            }
            // In the root's own code, `client::session` names the module.
            Tok::Ident(name)
                if is_root
                    && inline.is_empty()
                    && !after_sep
                    && modules.contains(name)
                    && toks.get(i + 1).map(|t| &t.0) == Some(&Tok::PathSep) =>
            {
                let mut found = Vec::new();
                let end = use_tree(toks, i, Vec::new(), &mut found);
                out.extend(found.into_iter().map(|p| (p, toks[i].1)));
                i = end;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    out
}

/// Reads the path or use tree that starts at `toks[j]` (past a `::`): every path it names,
/// `prefix` and then its segments, goes to `out`. Returns the index past it.
fn use_tree(toks: &[(Tok, usize)], mut j: usize, mut prefix: Vec<String>, out: &mut Vec<Vec<String>>) -> usize {
    loop {
        match toks.get(j).map(|t| &t.0) {
            Some(Tok::Ident(name)) => {
                // `{self, X}`: `self` is the path so far.
                if name != "self" {
                    prefix.push(name.clone());
                }
                j += 1;
                if toks.get(j).map(|t| &t.0) != Some(&Tok::PathSep) {
                    break;
                }
                j += 1;
            }
            Some(Tok::Punct('{')) => {
                j += 1;
                while let Some((t, _)) = toks.get(j) {
                    match t {
                        Tok::Punct('}') => return j + 1,
                        Tok::Punct(',') => j += 1,
                        _ => {
                            j = use_tree(toks, j, prefix.clone(), out);
                            // `as name`: no path.
                            while toks.get(j).is_some_and(|(t, _)| !matches!(t, Tok::Punct(',' | '}'))) {
                                j += 1;
                            }
                        }
                    }
                }
                return j;
            }
            // `*`, `::<T>`: the path so far.
            _ => break,
        }
    }
    out.push(prefix);
    j
}

/// The character at `i`, or NUL past the end.
fn ch(c: &[char], i: usize) -> char {
    c.get(i).copied().unwrap_or('\0')
}
