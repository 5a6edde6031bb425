//! Crash injection is in the binary exactly when the `failpoints` feature is on: a default
//! (production) build names none of its variables, so nothing in its environment can kill or
//! pause it. The `failpoints` build is checked to name them all, so the first check cannot pass
//! by looking in the wrong place.
#![allow(clippy::unwrap_used)]

/// The variables `server/src/failpoint.rs` reads.
const VARS: [&str; 2] = ["BREAKGLASS_FAILPOINT", "BREAKGLASS_PAUSE_AT"];

/// Which of [`VARS`] the server binary cargo built for this test contains.
fn vars_in_binary() -> Vec<&'static str> {
    let bin = std::fs::read(env!("CARGO_BIN_EXE_breakglass-server")).unwrap();
    // The names are ASCII, so each lies inside one valid UTF-8 run of the binary; `str`'s
    // search keeps this to seconds in an unoptimised test build.
    VARS.into_iter()
        .filter(|v| bin.utf8_chunks().any(|c| c.valid().contains(v)))
        .collect()
}

#[cfg(not(feature = "failpoints"))]
#[test]
fn a_default_build_has_no_failpoint() {
    assert_eq!(vars_in_binary(), Vec::<&str>::new());
}

#[cfg(feature = "failpoints")]
#[test]
fn a_failpoints_build_has_them_all() {
    assert_eq!(vars_in_binary(), VARS.to_vec());
}
