//! Keeps the structure `ARCHITECTURE.md` describes, in every crate of the workspace (`shared`,
//! `server`, `frontend`, `e2e`'s library): modules import each other without a circle, at the
//! top of each crate and between the submodules of every directory module; only the modules
//! ARCHITECTURE.md lists may import the server's composed `state`; and no Rust source file of any
//! crate (tests and benches included) grows past 600 lines.
//!
//! The import graph is read from the source text, not from the compiler: every `crate::`,
//! `super::` and `self::` path, with `use` trees (`use crate::{a, b::c}`) expanded, is resolved to
//! the deepest module it names. A reference from module `m` to module `t` is an edge between the
//! two children of their nearest common ancestor that lead to them; a module naming its own
//! ancestor or descendant adds none (a parent declares and uses its children, a child uses the
//! types its parent declares: the usual shape of a Rust module tree, not a circle).

#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A module's path inside its crate (`["guardrails", "render"]`; the root is empty).
type ModPath = Vec<String>;

/// The workspace, read at run time: a test binary another clone built into the shared target
/// directory must check this checkout's sources, not that clone's.
fn workspace() -> PathBuf {
    let package = std::env::var("CARGO_MANIFEST_DIR").unwrap_or(env!("CARGO_MANIFEST_DIR").into());
    Path::new(&package).parent().unwrap().to_path_buf()
}

/// Every `.rs` file below `dir`, skipping build outputs and fetched packages.
fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        if path.is_dir() {
            if !matches!(name.as_str(), "target" | "node_modules" | "dist" | ".git") {
                sources(&path, out);
            }
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The crates whose `src/` module trees must be free of circles, with their root file.
const CRATES: [(&str, &str); 4] = [
    ("shared", "lib.rs"),
    ("server", "lib.rs"),
    ("frontend", "main.rs"),
    ("e2e", "lib.rs"),
];

/// The module a file under `src/` defines: `a/b.rs` and `a/b/mod.rs` are `a::b`; the crate's
/// root files (`lib.rs`, `main.rs`) are the root.
fn module_of(src: &Path, file: &Path) -> ModPath {
    let rel = file.strip_prefix(src).unwrap();
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().to_string())
        .collect();
    let last = parts.pop().unwrap();
    let stem = last.trim_end_matches(".rs");
    let at_root = parts.is_empty() && (stem == "lib" || stem == "main");
    if stem != "mod" && !at_root {
        parts.push(stem.to_string());
    }
    parts
}

/// The text with comments, string and char literals blanked, so a path in a doc comment or a
/// message does not count as an import.
fn code_only(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < b.len() {
        if b[i..].starts_with(b"//") {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if b[i..].starts_with(b"/*") {
            let mut depth = 0;
            while i < b.len() {
                if b[i..].starts_with(b"/*") {
                    depth += 1;
                    i += 2;
                } else if b[i..].starts_with(b"*/") {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if b[i] == b'r' && (b.get(i + 1) == Some(&b'"') || b.get(i + 1) == Some(&b'#')) {
            // Raw string r"..." or r#"..."#.
            let mut j = i + 1;
            let mut hashes = 0;
            while b.get(j) == Some(&b'#') {
                hashes += 1;
                j += 1;
            }
            if b.get(j) != Some(&b'"') {
                out.push('r');
                i += 1;
                continue;
            }
            j += 1;
            let close: Vec<u8> = std::iter::once(b'"')
                .chain(std::iter::repeat_n(b'#', hashes))
                .collect();
            while j < b.len() && !b[j..].starts_with(&close) {
                j += 1;
            }
            i = j + close.len();
            out.push_str("\"\"");
        } else if b[i] == b'"' {
            i += 1;
            while i < b.len() && b[i] != b'"' {
                if b[i] == b'\\' {
                    i += 1;
                }
                i += 1;
            }
            i += 1;
            out.push_str("\"\"");
        } else if b[i] == b'\'' && is_char_literal(&b[i..]) {
            i += 1;
            while i < b.len() && b[i] != b'\'' {
                if b[i] == b'\\' {
                    i += 1;
                }
                i += 1;
            }
            i += 1;
            out.push_str("' '");
        } else {
            let ch = text[i..].chars().next().unwrap();
            out.push(ch);
            i += ch.len_utf8();
        }
    }
    out
}

/// Whether `b` (starting at a `'`) opens a char literal rather than a lifetime (`'a`).
fn is_char_literal(b: &[u8]) -> bool {
    match b.get(1) {
        Some(b'\\') => true,
        Some(_) => {
            // 'x' (one char, possibly multi-byte) closes within 5 bytes; a lifetime does not.
            b.iter().skip(2).take(4).any(|c| *c == b'\'')
                && !b[1..]
                    .iter()
                    .take_while(|c| **c != b'\'')
                    .any(|c| *c == b' ')
        }
        None => false,
    }
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Every path a file's code names (`use` trees expanded), as its segments.
fn paths_in(code: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let chars: Vec<char> = code.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let starts_word = i == 0 || !is_ident(chars[i - 1]) && chars[i - 1] != ':';
        if starts_word && is_ident(chars[i]) {
            let (path, end) = read_path(&chars, i, Vec::new(), &mut out);
            if !path.is_empty() {
                out.push(path);
            }
            i = end.max(i + 1);
        } else {
            i += 1;
        }
    }
    out
}

/// Reads a path (or `use` tree) starting at `i`, prefixed by `prefix`: pushes each complete
/// branch of a `{...}` group to `out`, returns the path when there is no group, and where it ended.
fn read_path(
    chars: &[char],
    mut i: usize,
    prefix: Vec<String>,
    out: &mut Vec<Vec<String>>,
) -> (Vec<String>, usize) {
    let mut path = prefix;
    loop {
        while i < chars.len() && chars[i].is_whitespace() {
            i += 1;
        }
        if i < chars.len() && chars[i] == '{' {
            i += 1;
            loop {
                while i < chars.len() && (chars[i].is_whitespace() || chars[i] == ',') {
                    i += 1;
                }
                if i >= chars.len() || chars[i] == '}' {
                    return (Vec::new(), i + 1);
                }
                let (branch, end) = read_path(chars, i, path.clone(), out);
                if !branch.is_empty() {
                    out.push(branch);
                }
                if end <= i {
                    i += 1;
                } else {
                    i = end;
                }
            }
        }
        let start = i;
        while i < chars.len() && is_ident(chars[i]) {
            i += 1;
        }
        if start == i {
            return (path, i);
        }
        path.push(chars[start..i].iter().collect());
        let mut j = i;
        while j < chars.len() && chars[j].is_whitespace() {
            j += 1;
        }
        if chars.get(j) == Some(&':') && chars.get(j + 1) == Some(&':') {
            i = j + 2;
        } else {
            return (path, i);
        }
    }
}

/// The module a path names, resolved from module `at`: the deepest known module it reaches, or
/// `None` for a path outside the crate (another crate, std, a local name).
fn resolve(path: &[String], at: &ModPath, known: &BTreeSet<ModPath>) -> Option<ModPath> {
    let (mut base, rest): (ModPath, &[String]) = match path.first().map(String::as_str) {
        Some("crate") => (Vec::new(), &path[1..]),
        Some("self") => (at.clone(), &path[1..]),
        Some("super") => {
            let mut base = at.clone();
            let mut rest = path;
            while rest.first().map(String::as_str) == Some("super") {
                base.pop()?;
                rest = &rest[1..];
            }
            (base, rest)
        }
        _ => return None,
    };
    for seg in rest {
        let mut next = base.clone();
        next.push(seg.clone());
        if known.contains(&next) {
            base = next;
        } else {
            break;
        }
    }
    Some(base)
}

/// A crate's module graph: for each parent module, the edges between its children.
struct Graph {
    /// parent -> child -> children it reaches.
    by_parent: BTreeMap<ModPath, BTreeMap<String, BTreeSet<String>>>,
    /// Module -> the modules it names (resolved), for the rule on `state`.
    names: BTreeMap<ModPath, BTreeSet<ModPath>>,
}

fn graph_of(krate: &str, root_file: &str) -> Graph {
    let src = workspace().join(krate).join("src");
    assert!(
        src.join(root_file).exists(),
        "{krate}/src/{root_file} is missing"
    );
    let mut files = Vec::new();
    sources(&src, &mut files);
    let known: BTreeSet<ModPath> = files.iter().map(|f| module_of(&src, f)).collect();
    let mut graph = Graph {
        by_parent: BTreeMap::new(),
        names: BTreeMap::new(),
    };
    for f in &files {
        let at = module_of(&src, f);
        let code = code_only(&std::fs::read_to_string(f).unwrap());
        for path in paths_in(&code) {
            let Some(target) = resolve(&path, &at, &known) else {
                continue;
            };
            graph
                .names
                .entry(at.clone())
                .or_default()
                .insert(target.clone());
            let common = at.iter().zip(&target).take_while(|(a, b)| a == b).count();
            if common == at.len() || common == target.len() {
                continue; // an ancestor or a descendant
            }
            graph
                .by_parent
                .entry(at[..common].to_vec())
                .or_default()
                .entry(at[common].clone())
                .or_default()
                .insert(target[common].clone());
        }
    }
    graph
}

fn find_cycle(
    edges: &BTreeMap<String, BTreeSet<String>>,
    node: &str,
    path: &mut Vec<String>,
    done: &mut BTreeSet<String>,
) -> Option<Vec<String>> {
    if let Some(at) = path.iter().position(|n| n == node) {
        let mut cycle = path[at..].to_vec();
        cycle.push(node.to_string());
        return Some(cycle);
    }
    if done.contains(node) {
        return None;
    }
    path.push(node.to_string());
    for next in edges.get(node).into_iter().flatten() {
        if let Some(c) = find_cycle(edges, next, path, done) {
            return Some(c);
        }
    }
    path.pop();
    done.insert(node.to_string());
    None
}

/// Every circle of a crate, as `parent: a -> b -> a` lines.
fn circles(graph: &Graph) -> Vec<String> {
    let mut found = Vec::new();
    for (parent, edges) in &graph.by_parent {
        let mut done = BTreeSet::new();
        for node in edges.keys() {
            if let Some(c) = find_cycle(edges, node, &mut Vec::new(), &mut done) {
                // One line per circle, not one per node on it.
                done.extend(c.iter().cloned());
                let at = if parent.is_empty() {
                    "crate".to_string()
                } else {
                    parent.join("::")
                };
                found.push(format!("{at}: {}", c.join(" -> ")));
            }
        }
    }
    found
}

#[test]
fn no_crate_has_an_import_circle() {
    let mut all = Vec::new();
    for (krate, root) in CRATES {
        let graph = graph_of(krate, root);
        assert!(
            !graph.by_parent.is_empty(),
            "{krate}: no imports found (is the parser broken?)"
        );
        all.extend(circles(&graph).into_iter().map(|c| format!("{krate} {c}")));
    }
    assert!(all.is_empty(), "import circles:\n{}", all.join("\n"));
}

#[test]
fn the_reader_sees_circles_inside_modules_and_use_trees() {
    let known: BTreeSet<ModPath> = [
        vec![],
        vec!["a".to_string()],
        vec!["a".to_string(), "x".to_string()],
        vec!["a".to_string(), "y".to_string()],
        vec!["b".to_string()],
    ]
    .into_iter()
    .collect();
    let code = code_only(
        "use crate::{b::Thing, a::{x::One, y}};\n// crate::nothing::here\nlet s = \"crate::b\";\n\
         fn f<'a>(c: char) { super::y::go(); }",
    );
    let at = vec!["a".to_string(), "x".to_string()];
    let got: BTreeSet<ModPath> = paths_in(&code)
        .iter()
        .filter_map(|p| resolve(p, &at, &known))
        .collect();
    let want: BTreeSet<ModPath> = [
        vec!["b".to_string()],
        vec!["a".to_string(), "x".to_string()],
        vec!["a".to_string(), "y".to_string()],
    ]
    .into_iter()
    .collect();
    assert_eq!(got, want);

    let mut by_parent = BTreeMap::new();
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    edges.entry("x".into()).or_default().insert("y".into());
    edges.entry("y".into()).or_default().insert("x".into());
    by_parent.insert(vec!["a".to_string()], edges);
    let g = Graph {
        by_parent,
        names: BTreeMap::new(),
    };
    assert_eq!(circles(&g), vec!["a: x -> y -> x".to_string()]);
}

/// The web app's shell composes the pages and components; what they share with it (who is
/// signed in, the title, the route, live updates, the API) lives below all three.
#[test]
fn the_web_apps_shared_state_sits_below_its_shell() {
    let graph = graph_of("frontend", "main.rs");
    let top = graph
        .by_parent
        .get(&Vec::new())
        .cloned()
        .unwrap_or_default();
    assert!(
        top.get("app").is_some_and(|t| t.contains("pages")),
        "the shell composes the pages: {top:?}"
    );
    for below in ["auth", "title", "router", "live", "api"] {
        let up: Vec<_> = top
            .get(below)
            .into_iter()
            .flatten()
            .filter(|t| ["app", "pages", "components"].contains(&t.as_str()))
            .collect();
        assert!(up.is_empty(), "{below} imports {up:?}");
    }
}

/// The modules ARCHITECTURE.md says may import the server's `state`, from its line
/// "Who may import `state`: `a`, `b` and `c`."
fn allowed_state_importers() -> BTreeSet<String> {
    let doc = std::fs::read_to_string(workspace().join("ARCHITECTURE.md")).unwrap();
    let line = doc
        .lines()
        .find(|l| l.contains("Who may import `state`:"))
        .expect("ARCHITECTURE.md names who may import `state` (\"Who may import `state`: ...\")");
    let list = line.split("Who may import `state`:").nth(1).unwrap();
    list.split('`')
        .skip(1)
        .step_by(2)
        .map(ToString::to_string)
        .collect()
}

#[test]
fn only_the_modules_architecture_md_lists_import_state() {
    let graph = graph_of("server", "lib.rs");
    let mut importers = BTreeSet::new();
    for (module, names) in &graph.names {
        if names.contains(&vec!["state".to_string()])
            && module.first().map(String::as_str) != Some("state")
        {
            importers.insert(module.first().cloned().unwrap_or_else(|| "lib".to_string()));
        }
    }
    let allowed = allowed_state_importers();
    assert_eq!(
        importers, allowed,
        "the server modules importing `state` differ from ARCHITECTURE.md's list"
    );
    // The ports and the domain never reach for the composed context, whatever the list says.
    for m in [
        "ports",
        "lifecycle",
        "cluster",
        "recorder",
        "relay",
        "connections",
    ] {
        assert!(!allowed.contains(m), "{m} may not import state");
    }
    let ports: Vec<_> = graph
        .names
        .get(&vec!["ports".to_string()])
        .into_iter()
        .flatten()
        .filter(|t| t.first().map(String::as_str) != Some("ports"))
        .collect();
    assert!(ports.is_empty(), "ports imports {ports:?}");
}

#[test]
fn no_source_file_is_over_600_lines() {
    let mut files = Vec::new();
    for (krate, _) in CRATES {
        sources(&workspace().join(krate), &mut files);
    }
    assert!(files.len() > 100, "found only {} sources", files.len());
    let long: Vec<_> = files
        .iter()
        .map(|f| (f, std::fs::read_to_string(f).unwrap().lines().count()))
        .filter(|(_, n)| *n > 600)
        .map(|(f, n)| {
            format!(
                "{} ({n} lines)",
                f.strip_prefix(workspace()).unwrap().display()
            )
        })
        .collect();
    assert!(long.is_empty(), "over 600 lines:\n{}", long.join("\n"));
}
