//! Keeps the web app's structure: its top-level modules import each other without a circle
//! (the shell over the pages over the components, the state they share below them all), as do
//! the submodules of each directory module, and no source file grows past 600 lines.

// The same reading of the import graph as `shared`'s architecture test.
#[path = "../../shared/tests/module_graph/mod.rs"]
mod module_graph;

#[test]
fn modules_import_each_other_without_a_circle() {
    let src = module_graph::src_dir();
    let edges = module_graph::sibling_edges(&src);
    let top = edges.get(&Vec::new()).cloned().unwrap_or_default();
    // The graph is read at all: the shell composes the pages.
    assert!(top.contains_key(&("app".into(), "pages".into())), "{top:?}");
    // What the pages and components share with the shell lives below them, not in it.
    for below in ["auth", "title", "router", "live", "api"] {
        let up: Vec<_> = top
            .keys()
            .filter(|(from, to)| {
                from == below && ["app", "pages", "components"].contains(&to.as_str())
            })
            .collect();
        assert!(up.is_empty(), "{below} imports {up:?}");
    }
    let circles = module_graph::circles(&src);
    assert!(
        circles.is_empty(),
        "import circles:\n{}",
        circles.join("\n")
    );
}

#[test]
fn no_source_file_is_over_600_lines() {
    let long = module_graph::long_files(&module_graph::src_dir(), 600);
    assert!(long.is_empty(), "{long:?}");
}
