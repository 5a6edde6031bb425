//! The import graph of a crate's modules, read from its source text, and the circles in it.
//!
//! Shared by the architecture tests of `shared` and `frontend` (the frontend includes this file
//! by path: a test-only crate for one file would be more machinery than the file). Every
//! `crate::`, `super::` and `self::` path counts, in code and in doc links alike, `use` trees
//! with braces included, so a circle cannot hide in a doc comment. A path is an edge between
//! the two sibling modules under the deepest module both paths share: `a::b` naming `a::c::X`
//! is `b -> c` inside `a`. A child naming its parent's items, and a parent naming its
//! children, are no edge.
//!
//! Inline modules (`mod tests { ... }`) are found by their rustfmt indentation, so a
//! `super::` inside one resolves from the module it is in.

#![allow(dead_code, clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Every `.rs` file under `dir`.
pub fn sources(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                todo.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// The crate's `src` directory, read at run time: a test binary another clone built into the
/// shared target directory must check this checkout's sources, not that clone's.
pub fn src_dir() -> PathBuf {
    let package = std::env::var("CARGO_MANIFEST_DIR").unwrap_or(env!("CARGO_MANIFEST_DIR").into());
    Path::new(&package).join("src")
}

/// The files of `root` longer than `max` lines, with their lengths.
pub fn long_files(root: &Path, max: usize) -> Vec<(PathBuf, usize)> {
    sources(root)
        .into_iter()
        .map(|f| {
            let n = std::fs::read_to_string(&f).unwrap().lines().count();
            (f, n)
        })
        .filter(|(_, n)| *n > max)
        .collect()
}

type Module = Vec<String>;

/// The module a file is: `a/b.rs` and `a/b/mod.rs` are `a::b`; `lib.rs` and `main.rs` the root.
fn module_of(root: &Path, file: &Path) -> Module {
    let rel = file.strip_prefix(root).unwrap().with_extension("");
    let mut m: Module = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if m.last().is_some_and(|l| l == "mod") {
        m.pop();
    }
    if m.len() == 1 && (m[0] == "lib" || m[0] == "main") {
        m.clear();
    }
    m
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The paths of the use tree (or plain path) that starts at `s[i..]`, as segment lists.
fn tree(s: &[char], mut i: usize) -> Vec<Vec<String>> {
    while i < s.len() && s[i].is_whitespace() {
        i += 1;
    }
    if i < s.len() && s[i] == '{' {
        let mut out = Vec::new();
        let mut depth = 0;
        let mut start = i + 1;
        // Split the group at its top-level commas.
        for j in i..s.len() {
            match s[j] {
                '{' => depth += 1,
                '}' | ',' if depth == 1 => {
                    out.extend(tree(&s[..j], start));
                    start = j + 1;
                    if s[j] == '}' {
                        break;
                    }
                }
                '}' => depth -= 1,
                _ => {}
            }
        }
        return out;
    }
    let seg: String = s[i..]
        .iter()
        .take_while(|c| is_ident(**c) || **c == '*')
        .collect();
    if seg.is_empty() {
        return vec![Vec::new()];
    }
    let j = i + seg.chars().count();
    if j + 1 < s.len() && s[j] == ':' && s[j + 1] == ':' {
        tree(s, j + 2)
            .into_iter()
            .map(|mut p| {
                p.insert(0, seg.clone());
                p
            })
            .collect()
    } else {
        vec![vec![seg]]
    }
}

/// Where each path names something: `(from, to)` as absolute module paths of items.
fn references(root: &Path) -> Vec<(Module, Module)> {
    let mut out = Vec::new();
    for file in sources(root) {
        let file_module = module_of(root, &file);
        let text = std::fs::read_to_string(&file).unwrap();
        // Inline modules: (indentation, name) of those open at each line.
        let mut open: Vec<(usize, String)> = Vec::new();
        for line in text.lines() {
            let indent = line.len() - line.trim_start().len();
            let trimmed = line.trim_start();
            if open
                .last()
                .is_some_and(|(i, _)| *i == indent && trimmed.starts_with('}'))
            {
                open.pop();
                continue;
            }
            let mut here = file_module.clone();
            here.extend(open.iter().map(|(_, n)| n.clone()));
            let chars: Vec<char> = line.chars().collect();
            for start in 0..chars.len() {
                let word: String = ["crate::", "super::", "self::"]
                    .into_iter()
                    .find(|w| chars[start..].iter().take(w.len()).copied().eq(w.chars()))
                    .map(str::to_string)
                    .unwrap_or_default();
                if word.is_empty()
                    || (start > 0 && (is_ident(chars[start - 1]) || chars[start - 1] == ':'))
                {
                    continue;
                }
                for path in tree(&chars, start) {
                    let mut base = here.clone();
                    let mut rest = path.as_slice();
                    if rest.first().is_some_and(|s| s == "crate") {
                        base.clear();
                        rest = &rest[1..];
                    }
                    while let Some(s) = rest.first() {
                        match s.as_str() {
                            "super" => {
                                base.pop();
                            }
                            "self" => {}
                            _ => break,
                        }
                        rest = &rest[1..];
                    }
                    base.extend(rest.iter().filter(|s| *s != "self").cloned());
                    out.push((here.clone(), base));
                }
            }
            let decl = trimmed
                .strip_prefix("pub(crate) ")
                .or_else(|| trimmed.strip_prefix("pub "))
                .unwrap_or(trimmed);
            if let Some(name) = decl.strip_prefix("mod ").and_then(|r| r.strip_suffix(" {")) {
                open.push((indent, name.to_string()));
            }
        }
    }
    out
}

/// For each module with children: which child names which sibling, and where.
pub fn sibling_edges(
    root: &Path,
) -> BTreeMap<Module, BTreeMap<(String, String), BTreeSet<String>>> {
    let modules: BTreeSet<Module> = sources(root).iter().map(|f| module_of(root, f)).collect();
    let mut graph: BTreeMap<Module, BTreeMap<(String, String), BTreeSet<String>>> = BTreeMap::new();
    for (from, to) in references(root) {
        let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
        if common >= from.len() || common >= to.len() {
            continue; // a module naming its own descendants or ancestors
        }
        let parent = from[..common].to_vec();
        let mut sibling = parent.clone();
        sibling.push(to[common].clone());
        // Only files are checked; an item of the parent is no sibling.
        let is_module =
            modules.contains(&sibling) || modules.iter().any(|m| m.starts_with(&sibling));
        if !is_module || !modules.iter().any(|m| m.starts_with(&from[..=common])) {
            continue;
        }
        graph
            .entry(parent)
            .or_default()
            .entry((from[common].clone(), to[common].clone()))
            .or_default()
            .insert(format!("{} names {}", from.join("::"), to.join("::")));
    }
    graph
}

/// Every circle among sibling modules, each as `in parent: a -> b -> a (where)`.
pub fn circles(root: &Path) -> Vec<String> {
    let mut found = Vec::new();
    for (parent, edges) in sibling_edges(root) {
        let mut next: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
        for (a, b) in edges.keys() {
            next.entry(a).or_default().insert(b);
        }
        let mut done = BTreeSet::new();
        for start in next.keys() {
            if let Some(cycle) = cycle_from(&next, start, &mut Vec::new(), &mut done) {
                let why: Vec<String> = cycle
                    .windows(2)
                    .filter_map(|w| edges.get(&(w[0].to_string(), w[1].to_string())))
                    .filter_map(|w| w.iter().next().cloned())
                    .collect();
                let name = if parent.is_empty() {
                    "the crate".to_string()
                } else {
                    parent.join("::")
                };
                found.push(format!(
                    "in {name}: {} ({})",
                    cycle.join(" -> "),
                    why.join("; ")
                ));
            }
        }
    }
    found
}

fn cycle_from<'a>(
    next: &BTreeMap<&'a str, BTreeSet<&'a str>>,
    node: &'a str,
    path: &mut Vec<&'a str>,
    done: &mut BTreeSet<&'a str>,
) -> Option<Vec<&'a str>> {
    if let Some(at) = path.iter().position(|n| *n == node) {
        let mut cycle = path[at..].to_vec();
        cycle.push(node);
        return Some(cycle);
    }
    if !done.insert(node) {
        return None;
    }
    path.push(node);
    for n in next.get(node).into_iter().flatten() {
        if let Some(c) = cycle_from(next, n, path, done) {
            return Some(c);
        }
    }
    path.pop();
    None
}
