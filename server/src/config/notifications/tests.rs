//! `[notifications]` read and checked.

use base64::Engine;

use super::*;

fn resolve(text: &str) -> Result<Notifications, ConfigError> {
    toml::from_str::<NotificationsFile>(text)
        .map_err(|e| ConfigError::new("toml", e.to_string()))?
        .resolve()
}

const KEY: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

#[test]
fn a_webhook_with_two_secrets_while_rotating() {
    let n = resolve(&format!(
        "[[webhooks]]\nname = \"siem\"\nurl = \"https://siem.example/hook\"\n\
         secret = \"{KEY} {KEY}\"\nevents = [\"requested\"]\n"
    ))
    .unwrap();
    let r = n.receiver("siem").unwrap();
    assert!(matches!(&r.target, Target::Webhook { secrets, .. } if secrets.len() == 2));
    assert!(r.takes(NoticeKind::Requested));
    assert!(!r.takes(NoticeKind::Ended));
    assert!(
        r.takes(NoticeKind::GlassBroken),
        "a broken glass reaches everyone"
    );
    let shown = format!("{n:?}");
    assert!(shown.contains("<secret>"), "{shown}");
    let first = base64::engine::general_purpose::STANDARD
        .decode(&KEY[6..])
        .unwrap()[0];
    assert!(
        !shown.contains(&format!("[{first}, ")),
        "key bytes stay out of Debug: {shown}"
    );
}

#[test]
fn each_bad_key_is_named() {
    let cases = [
        (
            "[[webhooks]]\nname = \"a\"\nurl = \"ftp://x\"\nsecret = \"whsec_AAAA\"\n",
            "notifications.webhooks[0].url",
        ),
        (
            "[[webhooks]]\nname = \"a\"\nurl = \"https://x\"\nsecret = \"nope\"\n",
            "notifications.webhooks[0].secret",
        ),
        (
            "[[webhooks]]\nname = \"a\"\nurl = \"https://x\"\n",
            "notifications.webhooks[0].secret",
        ),
        (
            "[[webhooks]]\nname = \"a\"\nurl = \"https://x\"\nsecret_env = \"BG_NO_SUCH_VAR\"\n",
            "notifications.webhooks[0].secret_env",
        ),
        (
            "[[slack]]\nname = \"s\"\nurl = \"https://x\"\nevents = [\"lunch\"]\n",
            "notifications.slack[0].events",
        ),
        (
            "[[email]]\nname = \"m\"\nto = [\"a@b.example\"]\n",
            "notifications.smtp",
        ),
        (
            "[[email]]\nname = \"m\"\nto = [\"not an address\"]\n",
            "notifications.email[0].to[0]",
        ),
        (
            "[[email]]\nname = \"m\"\n[smtp]\nhost = \"h\"\nfrom = \"a@b.example\"\n",
            "notifications.email[0].to",
        ),
        (
            "[smtp]\nhost = \"h\"\nfrom = \"a@b.example\"\ntls = \"maybe\"\n",
            "notifications.smtp.tls",
        ),
        (
            "[smtp]\nhost = \"h\"\nfrom = \"a@b.example\"\nusername = \"u\"\n",
            "notifications.smtp.username",
        ),
        ("timeout_seconds = 0\n", "notifications.timeout_seconds"),
    ];
    for (text, key) in cases {
        let e = resolve(text).unwrap_err();
        assert_eq!(e.key, key, "{text}: {e}");
    }
    let dup = format!(
        "[[webhooks]]\nname = \"a\"\nurl = \"https://x\"\nsecret = \"{KEY}\"\n\
         [[slack]]\nname = \"a\"\nurl = \"https://y\"\n"
    );
    assert!(resolve(&dup).unwrap_err().reason.contains("unique"));
}
