//! The evidence bundle of a real session (a real cluster, the real transparency log): the
//! commands of its own `VERIFY.md`, run with standard tools on the unpacked bundle, pass, as
//! does `breakglass-server verify-evidence`; and each kind of tampering (the cast, the row, an
//! event, the spec, the log entry) is caught by both, naming the same check.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use breakglass_e2e::server::cli_command;
use serde_json::{json, Value};

mod rig;
use rig::Rig;

const ACTIVE: Duration = Duration::from_secs(60);

fn rekor_url() -> String {
    std::env::var("BREAKGLASS_TEST_REKOR_URL").expect(
        "BREAKGLASS_TEST_REKOR_URL is not set: start the transparency log with \
         `scripts/rekor.sh start DIR PORT` (scripts/test.sh does)",
    )
}

/// The shell script of the bundle's VERIFY.md (its one `sh` block), as an auditor copies it.
fn script_of(guide: &str) -> String {
    guide
        .split("```sh\n")
        .nth(1)
        .and_then(|rest| rest.split("\n```").next())
        .unwrap_or_else(|| panic!("VERIFY.md has no sh block:\n{guide}"))
        .to_string()
}

/// Runs VERIFY.md's script in the unpacked bundle `dir`: (passed, stdout + stderr).
fn run_guide(dir: &Path) -> (bool, String) {
    let guide = std::fs::read_to_string(dir.join("VERIFY.md")).unwrap();
    std::fs::write(dir.join("verify.sh"), script_of(&guide)).unwrap();
    let out = Command::new("bash")
        .arg("verify.sh")
        .current_dir(dir)
        .output()
        .unwrap();
    std::fs::remove_file(dir.join("verify.sh")).unwrap();
    outcome(&out)
}

/// `breakglass-server verify-evidence` on a tar of `dir`: (passed, its output).
fn run_verifier(dir: &Path, data_dir: &Path) -> (bool, String) {
    let tar = dir.with_extension("tar");
    let packed = Command::new("tar")
        .arg("-cf")
        .arg(&tar)
        .arg("-C")
        .arg(dir)
        .arg(".")
        .status()
        .unwrap();
    assert!(packed.success());
    let out = cli_command(data_dir)
        .unwrap()
        .arg("verify-evidence")
        .arg(&tar)
        .output()
        .unwrap();
    outcome(&out)
}

/// Whether a checker passed, and all it printed.
fn outcome(out: &std::process::Output) -> (bool, String) {
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

fn unpack(tar: &Path, into: &Path) {
    std::fs::create_dir_all(into).unwrap();
    let ok = Command::new("tar")
        .arg("-xf")
        .arg(tar)
        .arg("-C")
        .arg(into)
        .status()
        .unwrap();
    assert!(ok.success());
}

fn copy_dir(from: &Path, to: &Path) {
    let ok = Command::new("cp")
        .arg("-r")
        .arg(from)
        .arg(to)
        .status()
        .unwrap();
    assert!(ok.success());
}

fn edit_json(path: &Path, edit: impl FnOnce(&mut Value)) {
    let mut v: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    edit(&mut v);
    std::fs::write(path, serde_json::to_vec_pretty(&v).unwrap()).unwrap();
}

#[tokio::test]
async fn an_auditor_checks_the_bundle_offline_and_each_tampering_is_caught() {
    let rig = Rig::new("bg-evidence", "flight", &[]).await;
    rig.bare_pod("solo").await;
    let text = std::fs::read_to_string(&rig.config).unwrap();
    let config = rig.dir.path().join("with-log.toml");
    std::fs::write(
        &config,
        format!(
            "{text}\n[recording.transparency_log]\nurl = \"{}\"\n",
            rekor_url()
        ),
    )
    .unwrap();
    let data = rig.dir.path().join("data");
    let server = rig.start_with(&config, &[]).await;
    let alice = server.login("alice").await.unwrap();
    let bob = server.login("bob").await.unwrap();
    let id = alice
        .create(rig.request("flight", "solo", "live"))
        .await
        .unwrap();
    let (st, v) = bob
        .post(&format!("/sessions/{id}/approve"), json!({}))
        .await
        .unwrap();
    assert_eq!(st, 200, "{v}");
    alice.wait_state(&id, &["Active"], ACTIVE).await.unwrap();
    let (st, _) = alice
        .post(&format!("/sessions/{id}/end"), json!({}))
        .await
        .unwrap();
    assert_eq!(st, 200);
    breakglass_e2e::wait_until("the recording anchored", ACTIVE, || async {
        let d = alice.session(&id).await?;
        Ok((d["session"]["state"] == "Ended" && !d["session"]["rekor"].is_null()).then_some(()))
    })
    .await
    .unwrap();

    // The lock on the recording, as the store reports it.
    let (st, r) = bob
        .get(&format!("/sessions/{id}/recording/retention"))
        .await
        .unwrap();
    assert_eq!(st, 200, "{r}");
    if std::env::var("BREAKGLASS_E2E_STORE").as_deref() == Ok("s3") {
        assert_eq!(
            (&r["lockable"], &r["mode"]),
            (&json!(true), &json!("GOVERNANCE")),
            "{r}"
        );
        let until = time::OffsetDateTime::parse(
            r["retain_until"].as_str().unwrap(),
            &time::format_description::well_known::Rfc3339,
        )
        .unwrap();
        let days = (until - time::OffsetDateTime::now_utc()).whole_days();
        assert!((364..=365).contains(&days), "retained {days} days: {r}");
    } else {
        assert_eq!(
            (&r["lockable"], &r["mode"]),
            (&json!(false), &Value::Null),
            "{r}"
        );
        assert!(
            r["store"].as_str().unwrap().starts_with("local directory"),
            "{r}"
        );
    }

    // The download button's bundle (bob approved it, so he may read the recording) ...
    let (st, kind, tar) = bob
        .get_bytes(&format!("/sessions/{id}/evidence"))
        .await
        .unwrap();
    assert_eq!((st, kind.as_str()), (200, "application/x-tar"));
    let work = tempfile::tempdir().unwrap();
    let downloaded = work.path().join("downloaded.tar");
    std::fs::write(&downloaded, &tar).unwrap();
    // ... and the command line's, from the same database and bucket.
    let made: PathBuf = work.path().join("cli.tar");
    let out = cli_command(&data)
        .unwrap()
        .args(["evidence", &id, "-o"])
        .arg(&made)
        .arg("--config")
        .arg(&config)
        .arg("--data-dir")
        .arg(&data)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let clean = work.path().join("clean");
    unpack(&made, &clean);
    let session = clean.join(&id);
    for f in [
        "session.json",
        "events.json",
        "spec.json",
        "recording.cast",
        "rekor-entry.json",
    ] {
        assert!(session.join(f).is_file(), "{f} is in the bundle");
    }
    let (ok, text) = run_guide(&clean);
    assert!(ok, "VERIFY.md's commands on a true bundle:\n{text}");
    for check in [
        "recording hash",
        "segments chain",
        "log entry",
        "log signature",
        "inclusion proof",
        "approved spec",
        "events",
        "all checks passed",
    ] {
        assert!(text.contains(check), "{check}:\n{text}");
    }
    let (ok, text) = run_verifier(&clean, &data);
    assert!(ok, "verify-evidence on a true bundle:\n{text}");
    let downloaded_dir = work.path().join("downloaded");
    unpack(&downloaded, &downloaded_dir);
    let (ok, text) = run_guide(&downloaded_dir);
    assert!(ok, "the downloaded bundle:\n{text}");

    type Tamper = fn(&Path);
    let cases: [(&str, Tamper, &str); 6] = [
        (
            "cast",
            |s| {
                let mut cast = std::fs::read(s.join("recording.cast")).unwrap();
                let last = cast.len() - 2;
                cast[last] ^= 0x01;
                std::fs::write(s.join("recording.cast"), cast).unwrap();
            },
            "recording hash",
        ),
        (
            "segments",
            |s| {
                edit_json(&s.join("segments.json"), |v| {
                    v[0]["cast_sha256"] = json!("0".repeat(64));
                });
            },
            "segments chain",
        ),
        (
            "row",
            |s| {
                edit_json(&s.join("session.json"), |v| {
                    v["approvals"][0]["by"] = json!("mallory");
                });
            },
            "events",
        ),
        (
            "event",
            |s| {
                edit_json(&s.join("events.json"), |v| {
                    for e in v.as_array_mut().unwrap() {
                        if e["kind"] == "approve" {
                            e["actor"] = json!("mallory");
                        }
                    }
                });
            },
            "events",
        ),
        (
            "spec",
            |s| {
                let doc = std::fs::read_to_string(s.join("spec.json")).unwrap();
                std::fs::write(
                    s.join("spec.json"),
                    doc.replace("\"privileged\":false", "\"privileged\":true"),
                )
                .unwrap();
            },
            "approved spec",
        ),
        (
            "entry",
            |s| {
                edit_json(&s.join("rekor-entry.json"), |v| {
                    let entry = v.as_object_mut().unwrap().values_mut().next().unwrap();
                    entry["integratedTime"] = json!(entry["integratedTime"].as_i64().unwrap() + 1);
                });
            },
            "log signature",
        ),
    ];
    for (what, tamper, check) in cases {
        let dir = work.path().join(format!("tampered-{what}"));
        copy_dir(&clean, &dir);
        let before = std::fs::read(dir.join(&id).join("spec.json")).unwrap();
        tamper(&dir.join(&id));
        if what == "spec" {
            assert_ne!(
                before,
                std::fs::read(dir.join(&id).join("spec.json")).unwrap()
            );
        }
        let (ok, text) = run_guide(&dir);
        assert!(!ok, "VERIFY.md missed the tampered {what}:\n{text}");
        assert!(
            text.contains(&format!("FAILED {id}: {check}")),
            "VERIFY.md on the tampered {what} names {check}:\n{text}"
        );
        let (ok, text) = run_verifier(&dir, &data);
        assert!(!ok, "verify-evidence missed the tampered {what}:\n{text}");
        assert!(
            text.contains(&format!("FAILED {id}: {check}")),
            "verify-evidence on the tampered {what} names {check}:\n{text}"
        );
    }
}
