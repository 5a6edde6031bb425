use breakglass_shared::{Mode, Session, Tier};
use k8s_openapi::api::core::v1::Pod;
use serde_json::Value;

use super::*;
use crate::cluster::objects::DEBUG_SUPERVISOR;

const ME: &str = "system:serviceaccount:breakglass:breakglass-server";
const IMAGE: &str = "registry.example/debug@sha256:1111111111111111111111111111111111111111111111111111111111111111";

fn session(mode: Mode) -> Session {
    crate::cluster::objects::tests::session(Tier::Flight, mode)
}

fn pod(uid: &str, image: &str) -> Pod {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": "web-1", "namespace": "shop", "uid": uid},
        "spec": {"containers": [{"name": "app", "image": image}]}
    }))
    .unwrap()
}

/// The session as activation sees it: approved, activating, its spec on the row.
fn at_activation(s: &Session, spec: SessionSpec) -> Session {
    let mut a = s.clone();
    a.approver = Some("bob".into());
    a.activating_at = Some(time::macros::datetime!(2026-12-05 10:20 UTC));
    a.spec = Some(spec);
    a
}

fn admitted() -> DryRun {
    DryRun {
        admitted: Some(true),
        lines: vec![],
    }
}

#[test]
fn the_same_session_renders_the_same_document_at_request_and_at_activation() {
    for mode in [Mode::Live, Mode::Copy] {
        let s = session(mode);
        let p = pod("uid-1", "shop/web:1");
        let doc = document(&s, ME, IMAGE, &p);
        let approved = spec(&s, ME, IMAGE, &doc, admitted());
        let later = at_activation(&s, approved.clone());
        let again = document(&later, ME, IMAGE, &p);
        assert_eq!(doc, again, "{mode:?}");
        assert_eq!(
            crate::recording::sha256_hex(again.to_string().as_bytes()),
            approved.sha256
        );
        // What is left for activation is said, not hidden.
        assert!(approved.document.contains("<activation + "), "{mode:?}");
        assert!(!approved.document.contains("bob"));
    }
}

#[test]
fn a_changed_image_pin_pod_or_identity_is_another_spec_and_says_where() {
    let s = session(Mode::Live);
    let p = pod("uid-1", "shop/web:1");
    let doc = document(&s, ME, IMAGE, &p);
    let other_image = IMAGE.replace("1111", "2222");
    for (now, path) in [
        (
            document(&s, ME, &other_image, &p),
            "/objects/1/container/image",
        ),
        (
            document(&s, ME, IMAGE, &pod("uid-2", "shop/web:1")),
            "/target/uid",
        ),
        (
            document(&s, "hangar:someone-else", IMAGE, &p),
            "/objects/0/subjects/0",
        ),
    ] {
        assert_ne!(doc, now);
        let diff = differences(&doc, &now, 5);
        assert!(diff.iter().any(|d| d.starts_with(path)), "{path}: {diff:?}");
    }
    // Copy mode renders the copy from the pod: a changed container image is another spec.
    let c = session(Mode::Copy);
    let a = document(&c, ME, IMAGE, &pod("uid-1", "shop/web:1"));
    let b = document(&c, ME, IMAGE, &pod("uid-1", "shop/web:2"));
    let diff = differences(&a, &b, 5);
    assert_eq!(
        diff,
        vec![r#"/objects/1/spec/containers/0/image: "shop/web:1" → "shop/web:2""#]
    );
}

#[test]
fn the_summary_is_read_from_the_objects() {
    let s = session(Mode::Live);
    let doc = document(&s, ME, IMAGE, &pod("uid-1", "x"));
    let sp = spec(&s, ME, IMAGE, &doc, admitted());
    assert_eq!(sp.summary.image, IMAGE);
    assert_eq!(sp.summary.role, LIVE_ROLE);
    assert_eq!(sp.summary.pod_uid, "uid-1");
    assert_eq!(sp.summary.ttl_minutes, 30);
    assert!(sp.summary.process_access);
    assert!(!sp.summary.privileged);
    assert_eq!(sp.sha256.len(), 64);
    let mut tampered = doc.clone();
    tampered["objects"][1]["container"]["securityContext"]["privileged"] = Value::Bool(true);
    assert!(
        spec(&s, ME, IMAGE, &tampered, admitted())
            .summary
            .privileged
    );
}

#[test]
fn the_yaml_shown_reads_back_as_the_hashed_document() {
    for mode in [Mode::Live, Mode::Copy] {
        let s = session(mode);
        let doc = document(&s, ME, IMAGE, &pod("uid-1", "shop/web:1"));
        let sp = spec(&s, ME, IMAGE, &doc, admitted());
        let yaml = sp.yaml().unwrap();
        let back: Value = serde_saphyr::from_str(&yaml).unwrap();
        assert_eq!(back, doc, "{mode:?}:\n{yaml}");
        // The debug container's command, as the approver reads it: the image's supervisor.
        assert!(yaml.contains(&format!("- {DEBUG_SUPERVISOR}\n")), "{yaml}");
    }
}

#[test]
fn strings_yaml_could_misread_are_quoted_and_read_back_as_written() {
    let s = session(Mode::Live);
    let tricky = serde_json::json!({
        "strings": ["true", "No", "ON", "1", "1.5", "0x1f", "2026-12-05", "a: b", "a:b", "x:",
                    "/path", "@x", "-x", ".inf", "", " lead", "trail ", "two\nlines",
                    "  indented\nx", "null", "~", "with space", "#comment", "tab\there",
                    "end\n", "crlf\r\nx", "plain-name_1.2/x@sha256:ab"],
        "weird key: x": {"": 1, "y": null, "b": false, "e": [], "o": {}},
        "nested": [[1, 2], [], [{"k": "v"}]],
    });
    let yaml = spec(&s, ME, IMAGE, &tricky, admitted()).yaml().unwrap();
    let back: Value = serde_saphyr::from_str(&yaml).unwrap();
    assert_eq!(back, tricky, "{yaml}");
    assert!(yaml.contains("- plain-name_1.2/x@sha256:ab\n"), "{yaml}");
    assert!(yaml.contains("- \"true\"\n"), "{yaml}");
}
