//! Keeps the structure `ARCHITECTURE.md` describes: the server's top-level modules import each
//! other without a circle, and no source file grows past 600 lines.

#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn src() -> (PathBuf, Vec<PathBuf>) {
    // Read at run time: a test binary another clone built into the shared target directory
    // must check this checkout's sources, not that clone's.
    let package = std::env::var("CARGO_MANIFEST_DIR").unwrap_or(env!("CARGO_MANIFEST_DIR").into());
    let root = Path::new(&package).join("src");
    let mut files = Vec::new();
    sources(&root, &mut files);
    (root, files)
}

/// Top-level module → the top-level modules it names as `crate::x`.
fn imports() -> BTreeMap<String, BTreeSet<String>> {
    let (root, files) = src();
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in files {
        let rel = f.strip_prefix(&root).unwrap();
        let top = rel
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy()
            .trim_end_matches(".rs")
            .to_string();
        if top == "lib" || top == "main" {
            continue;
        }
        let text = std::fs::read_to_string(&f).unwrap();
        let deps = graph.entry(top.clone()).or_default();
        for (i, _) in text.match_indices("crate::") {
            let name: String = text[i + 7..]
                .chars()
                .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                .collect();
            if !name.is_empty() && name != top {
                deps.insert(name);
            }
        }
    }
    graph
}

fn find_cycle(
    graph: &BTreeMap<String, BTreeSet<String>>,
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
    for next in graph.get(node).into_iter().flatten() {
        if let Some(c) = find_cycle(graph, next, path, done) {
            return Some(c);
        }
    }
    path.pop();
    done.insert(node.to_string());
    None
}

#[test]
fn modules_import_each_other_without_a_circle() {
    let graph = imports();
    assert!(graph.contains_key("lifecycle") && graph.contains_key("ports"));
    let mut done = BTreeSet::new();
    for node in graph.keys() {
        let cycle = find_cycle(&graph, node, &mut Vec::new(), &mut done);
        assert!(
            cycle.is_none(),
            "import circle: {}",
            cycle.unwrap().join(" -> ")
        );
    }
    // The lifecycle and the adapters never reach for the composed context.
    for m in [
        "ports",
        "lifecycle",
        "cluster",
        "recorder",
        "relay",
        "connections",
    ] {
        assert!(!graph[m].contains("state"), "{m} imports state");
    }
    assert!(
        graph["ports"].is_empty(),
        "ports imports {:?}",
        graph["ports"]
    );
}

#[test]
fn no_source_file_is_over_600_lines() {
    let (_, files) = src();
    let long: Vec<_> = files
        .iter()
        .map(|f| (f, std::fs::read_to_string(f).unwrap().lines().count()))
        .filter(|(_, n)| *n > 600)
        .collect();
    assert!(long.is_empty(), "{long:?}");
}
