//! The module graph of a crate has no cycle: each top-level module (a file `src/x.rs`, or a
//! directory `src/x/` counted as one module) stands on modules below it, never on one that
//! stands on it. A layer is then a thing to read on its own: in the engine, the protocol
//! registry's types are the floor the adapters (`peers`) stand on, and the drivers (`client`,
//! `server`) stand on both.
//!
//! The check reads the sources, not the compiler's view: a module A depends on B when code in
//! A names `crate::B` (also `use crate::{B, ...}` and `$crate::B`), or climbs to the crate root
//! with `super::` and names B there, or (in the crate root's file) names `B::` directly. The
//! root file itself is the node `crate`: a path to one of its own items (`crate::StopFlag`) is an
//! edge to it, its `mod b;` declarations are not edges. Comments, doc comments (their intra-doc
//! links included) and string and character literals are blanked first, so a sentence that
//! mentions `crate::peers` is not a dependency.

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
        let graph = Graph::of_crate(&crates_dir().join(name));
        for knot in graph.cycles() {
            failures.push(format!("crates/{name}: {}", graph.describe(&knot)));
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
    let deps =
        deps_of(&tokens(&blank(src)), &[], true, &modules.map(String::from).into_iter().collect(), &BTreeMap::new());
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
    let deps = deps_of(&tokens(&blank(src)), &["own".into(), "sub".into()], false, &modules, &BTreeMap::new());
    let names: Vec<_> = deps.into_iter().map(|(m, _)| m).collect();
    assert_eq!(names, ["a", "b", "c", "f", "g", "m", "crate", "i"]);
}

fn crates_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("crates/").to_path_buf()
}

/// The top-level modules of a crate and who depends on whom, with where each edge was seen.
struct Graph {
    nodes: BTreeSet<String>,
    /// from -> to -> the first place seen (`file:line`).
    edges: BTreeMap<String, BTreeMap<String, String>>,
}

impl Graph {
    fn of_crate(dir: &Path) -> Self {
        let src = dir.join("src");
        let mut files = Vec::new();
        rust_files(&src, &mut files);
        files.sort();
        let root = ["lib.rs", "main.rs"].map(|f| src.join(f)).into_iter().find(|p| p.exists()).expect("a crate root");
        let mut nodes: BTreeSet<String> = files.iter().filter(|f| **f != root).map(|f| top_module(&src, f)).collect();
        nodes.insert(ROOT.into());
        let mut edges: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
        let root_toks = tokens(&blank(&fs::read_to_string(&root).unwrap_or_default()));
        let facade = reexports(&root_toks, &src, &nodes);
        for file in &files {
            let text = fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
            let is_root = *file == root;
            let path = if is_root { Vec::new() } else { module_path(&src, file) };
            let from = if is_root { ROOT.to_string() } else { path[0].clone() };
            for (to, line) in deps_of(&tokens(&blank(&text)), &path, is_root, &nodes, &facade) {
                if to != from {
                    let at = format!("{}:{line}", file.strip_prefix(dir).unwrap_or(file).display());
                    edges.entry(from.clone()).or_default().entry(to).or_insert(at);
                }
            }
        }
        Self { nodes, edges }
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
            s = format!("{s}\n  in the same knot: {}", knot.others.join(", "));
        }
        let members: BTreeSet<&String> = knot.cycle.iter().chain(&knot.others).collect();
        for from in &members {
            for (to, at) in self.edges.get(*from).into_iter().flatten().filter(|(to, _)| members.contains(to)) {
                s = format!("{s}\n  {from} -> {to} ({at})");
            }
        }
        s
    }

    fn describe_path(&self, path: &[String]) -> String {
        let mut s = path[0].clone();
        for w in path.windows(2) {
            s = format!("{s} -> {} ({})", w[1], self.edges[&w[0]][&w[1]]);
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

fn top_module(src: &Path, file: &Path) -> String {
    module_path(src, file).swap_remove(0)
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

/// The names the crate root re-exports from its modules (`pub use result::*;`, `pub use
/// method::{Method, METHOD_FIELDS};`), each with the module it comes from. A glob stands for
/// the public items the module's file declares.
fn reexports(root: &[(Tok, usize)], src: &Path, modules: &BTreeSet<String>) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut depth = 0;
    let mut i = 0;
    while i < root.len() {
        match &root[i].0 {
            Tok::Punct('{') => depth += 1,
            Tok::Punct('}') => depth -= 1,
            Tok::Ident(k) if k == "pub" && depth == 0 => {
                if let Some(end) = reexport_end(root, i) {
                    let body = &root[i..end];
                    let at = body.iter().position(|t| t.0 == Tok::Ident("use".into())).unwrap_or(0);
                    if let Some((Tok::Ident(module), _)) = body.get(at + 1) {
                        if modules.contains(module) {
                            let mut names: Vec<String> = body[at + 2..]
                                .iter()
                                .filter_map(|t| match &t.0 {
                                    Tok::Ident(n) if n != "self" && n != "as" => Some(n.clone()),
                                    _ => None,
                                })
                                .collect();
                            if body.iter().any(|t| t.0 == Tok::Punct('*')) {
                                names.extend(public_items(src, module));
                            }
                            for n in names {
                                out.entry(n).or_insert_with(|| module.clone());
                            }
                        }
                    }
                    i = end;
                    continue;
                }
            }
            _ => {}
        }
        i += 1;
    }
    out
}

/// The names of the public items (`pub struct X`, `pub fn f`, ...) a module's file declares at
/// its top level.
fn public_items(src: &Path, module: &str) -> Vec<String> {
    let file = [src.join(format!("{module}.rs")), src.join(module).join("mod.rs")].into_iter().find(|p| p.exists());
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

/// The top-level modules a file's code names, in order, with the line of each first mention.
/// `path` is the file's module path ([] for the crate root); `modules` the crate's top-level
/// modules. A name that is no module is an item of the crate root ([`ROOT`]).
fn deps_of(
    toks: &[(Tok, usize)],
    path: &[String],
    is_root: bool,
    modules: &BTreeSet<String>,
    facade: &BTreeMap<String, String>,
) -> Vec<(String, usize)> {
    let mut out: Vec<(String, usize)> = Vec::new();
    let mut add = |name: &str, line: usize| {
        let node = match (modules.contains(name), facade.get(name)) {
            (true, _) => name.to_string(),
            // `crate::TestResult`, re-exported by the root from `result`: a use of `result`.
            (false, Some(module)) => module.clone(),
            (false, None) => ROOT.to_string(),
        };
        if !out.iter().any(|(n, _)| *n == node) {
            out.push((node, line));
        }
    };
    // Inline modules (`mod tests { .. }`) open at these brace depths: each is one more level
    // for `super::` to climb.
    let mut inline: Vec<usize> = Vec::new();
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
                if inline.last() == Some(&depth) {
                    inline.pop();
                }
            }
            Tok::Ident(k)
                if k == "mod"
                    && matches!(toks.get(i + 1), Some((Tok::Ident(_), _)))
                    && matches!(toks.get(i + 2), Some((Tok::Punct('{'), _))) =>
            {
                inline.push(depth)
            }
            Tok::Ident(k) if (k == "crate" || k == "super" || (k == "self" && is_root)) && !after_sep => {
                // How deep the path starts (0: the crate root); each further `super` climbs one.
                let here = path.len() + inline.len();
                let mut level = match k.as_str() {
                    "crate" => Some(0),
                    "self" => Some(here),
                    _ => here.checked_sub(1),
                };
                let mut j = i + 1;
                while toks.get(j).map(|t| &t.0) == Some(&Tok::PathSep) && is_ident(toks.get(j + 1), "super") {
                    level = level.and_then(|l| l.checked_sub(1));
                    j += 2;
                }
                if level == Some(0) && toks.get(j).map(|t| &t.0) == Some(&Tok::PathSep) {
                    let line = toks[i].1;
                    match toks.get(j + 1) {
                        Some((Tok::Ident(name), _)) => add(name, line),
                        Some((Tok::Punct('{'), _)) => {
                            // `use crate::{a, b::c, d::{e, f}}`: the first name of each item.
                            let mut nest = 0;
                            let mut first = true;
                            for (t, _) in &toks[j + 2..] {
                                match t {
                                    Tok::Punct('{') => nest += 1,
                                    Tok::Punct('}') if nest == 0 => break,
                                    Tok::Punct('}') => nest -= 1,
                                    Tok::Punct(',') if nest == 0 => first = true,
                                    Tok::Ident(name) if first && nest == 0 => {
                                        add(name, line);
                                        first = false;
                                    }
                                    _ => {}
                                }
                            }
                        }
                        _ => {}
                    }
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
                add(name, toks[i].1)
            }
            _ => {}
        }
        i += 1;
    }
    out
}

/// The character at `i`, or NUL past the end.
fn ch(c: &[char], i: usize) -> char {
    c.get(i).copied().unwrap_or('\0')
}
