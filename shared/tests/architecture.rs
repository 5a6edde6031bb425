//! Keeps the crate's structure: its modules (and the submodules of each directory module)
//! import each other without a circle, and no source file grows past 600 lines.

mod module_graph;

#[test]
fn modules_import_each_other_without_a_circle() {
    let src = module_graph::src_dir();
    let edges = module_graph::sibling_edges(&src);
    // The graph is read at all: the rules name the model.
    assert!(
        edges
            .get(&Vec::new())
            .is_some_and(|e| e.contains_key(&("access".into(), "session".into()))),
        "{edges:?}"
    );
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
