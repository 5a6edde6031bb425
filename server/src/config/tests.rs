//! The resolved configuration as a whole: defaults, flags over the file, sections together.

use super::*;

#[test]
fn no_config_at_all_gives_sqlite_in_the_data_dir_and_no_dev_login() {
    let c = Config::resolve(&ServeArgs::default(), FileConfig::default()).unwrap();
    assert_eq!(c.database_url, "sqlite://.breakglass/breakglass.db");
    assert!(!c.dev_login);
    assert!(c.environments.is_empty());
    let dev = Config::resolve(
        &ServeArgs {
            dev: true,
            ..Default::default()
        },
        FileConfig::default(),
    )
    .unwrap();
    assert!(dev.dev_login);
    assert_eq!(dev.dev_users.len(), 3);
    assert_eq!(dev.environments.len(), 2);
}

#[test]
fn the_orphan_age_defaults_to_a_minute_and_is_settable() {
    assert_eq!(parse("").unwrap().orphan_min_age.as_secs(), 60);
    let c = parse("orphan_min_age_seconds = 2").unwrap();
    assert_eq!(c.orphan_min_age.as_secs(), 2);
    let e = parse("orphan_min_age_seconds = 3601").err().unwrap();
    assert_eq!(e.key, "orphan_min_age_seconds");
}

#[test]
fn the_dev_login_is_refused_beside_a_real_sign_in_unless_overridden() {
    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("secret");
    std::fs::write(&secret, "s3cret\n").unwrap();
    let oidc = format!(
        "[auth.oidc]\nissuer_url = \"https://id.example/\"\nclient_id = \"bg\"\n\
         redirect_url = \"https://bg.example/api/breakglass/auth/oidc/callback\"\n\
         client_secret_file = \"{}\"\n",
        secret.display()
    );
    let https = "public_url = \"https://bg.example\"\n";
    for (text, says) in [
        (
            format!("[dev_login]\nenabled = true\n{oidc}"),
            "[auth.oidc]",
        ),
        (
            format!("{https}[dev_login]\nenabled = true\n"),
            "https public_url",
        ),
    ] {
        let e = parse(&text)
            .err()
            .unwrap_or_else(|| panic!("accepted: {text}"));
        assert_eq!(e.key, "dev_login", "{text}");
        assert!(e.reason.contains(says), "{}", e.reason);
        assert!(
            e.reason.contains("unsafe_beside_real_sign_in"),
            "{}",
            e.reason
        );
        let with = text.replace(
            "enabled = true\n",
            "enabled = true\nunsafe_beside_real_sign_in = true\n",
        );
        let c = parse(&with).unwrap();
        assert!(c.dev_login && c.dev_login_beside_real_sign_in, "{with}");
    }
    // `--dev` is the same switch as the key.
    let file: FileConfig = toml::from_str(&oidc).unwrap();
    let args = ServeArgs {
        dev: true,
        ..ServeArgs::default()
    };
    assert_eq!(Config::resolve(&args, file).unwrap_err().key, "dev_login");
    // Plain http, no provider: the demo's case.
    let c = parse("public_url = \"http://127.0.0.1:8080\"\n[dev_login]\nenabled = true").unwrap();
    assert!(c.dev_login && !c.dev_login_beside_real_sign_in);
    assert!(!parse(&oidc).unwrap().dev_login);
}

#[test]
fn bad_keys_are_named() {
    let cases = [
        ("[[environments]]\nname = \"Prod\"\ntier = \"flight\"", "environments[0].name"),
        ("[[environments]]\nname = \"a\"\ntier = \"flight\"\n[[environments]]\nname = \"a\"\ntier = \"ground\"", "environments[1].name"),
        ("[[environments]]\nname = \"a\"\ntier = \"flight\"\n[environments.permissions]\n\"tower.breakglass.exec\" = {}", "environments[0].permissions.tower.breakglass.exec"),
        ("session_secret = \"short\"", "session_secret"),
        ("[durations.flight]\nmin_minutes = 10\nmax_minutes = 5\ndefault_minutes = 7", "durations.flight"),
        ("database_url = \"mysql://x\"", "database_url"),
        ("approval_expiry_minutes = 0", "approval_expiry_minutes"),
        ("debug_image = \"alpine:latest\"", "debug_image"),
        ("[[environments]]\nname = \"a\"\ntier = \"flight\"\nprotected_namespaces = [\"Bad\"]", "environments[0].protected_namespaces[0]"),
        ("[recording]\nflush_interval_seconds = 0", "recording.flush_interval_seconds"),
        ("[recording]\nspool_limit_bytes = 10", "recording.spool_limit_bytes"),
        ("[recording]\nretry_initial_ms = 5000\nretry_max_seconds = 2", "recording.retry_max_seconds"),
        ("[recording]\nretention_days = 0", "recording.retention_days"),
        ("[recording.transparency_log]\nurl = \"rekor.example\"", "recording.transparency_log.url"),
        ("[recording.transparency_log]\nurl = \"https://r\"\ntimeout_seconds = 0", "recording.transparency_log.timeout_seconds"),
    ];
    for (text, key) in cases {
        let e = parse(text)
            .err()
            .unwrap_or_else(|| panic!("accepted: {text}"));
        assert_eq!(e.key, key, "{text}");
    }
    // Unknown keys and bad tiers are refused by the parser, with the line.
    let e = read_text_err("listen_adress = \"x\"");
    assert!(e.reason.contains("unknown field"), "{e}");
    let e = read_text_err("[[environments]]\nname = \"a\"\ntier = \"orbit\"");
    assert!(
        e.reason.contains("orbit") || e.reason.contains("variant"),
        "{e}"
    );
    assert!(e.key.contains("line 3"), "{e}");
}

#[test]
fn with_several_bad_keys_the_first_in_check_order_is_named() {
    // The order the keys have always been checked in: database, public URL, cookie
    // secret, durations, timings, dev users, debug image, namespace, environments,
    // recording.
    let keys = [
        ("database_url = \"mysql://x\"", "database_url"),
        ("public_url = \"ftp://x\"", "public_url"),
        ("session_secret = \"short\"", "session_secret"),
        (
            "[durations.ground]\nmin_minutes = 0\nmax_minutes = 5\ndefault_minutes = 3",
            "durations.ground",
        ),
        ("approval_expiry_minutes = 0", "approval_expiry_minutes"),
        ("sweep_interval_seconds = 0", "sweep_interval_seconds"),
        (
            "activation_timeout_seconds = 0",
            "activation_timeout_seconds",
        ),
        ("orphan_min_age_seconds = 0", "orphan_min_age_seconds"),
        (
            "[dev_login]\nusers = [{ name = \"\" }]",
            "dev_login.users[0].name",
        ),
        ("debug_image = \"alpine:latest\"", "debug_image"),
        ("server_namespace = \"Bad\"", "server_namespace"),
        (
            "[[environments]]\nname = \"Prod\"\ntier = \"flight\"",
            "environments[0].name",
        ),
        (
            "[recording]\nflush_interval_seconds = 0",
            "recording.flush_interval_seconds",
        ),
    ];
    for first in 0..keys.len() {
        // Top-level keys before tables, as TOML needs.
        let (tables, plain): (Vec<_>, Vec<_>) =
            keys[first..].iter().partition(|(t, _)| t.starts_with('['));
        let text = plain
            .iter()
            .chain(&tables)
            .map(|(t, _)| *t)
            .collect::<Vec<_>>()
            .join("\n");
        let e = parse(&text).err().unwrap();
        assert_eq!(e.key, keys[first].1, "{text}");
    }
    // Within an environment the name (and its uniqueness) comes before its permissions.
    let text = "[[environments]]\nname = \"a\"\ntier = \"flight\"\n[[environments]]\nname = \"a\"\ntier = \"ground\"\n[environments.permissions]\n\"x\" = {}";
    assert_eq!(parse(text).err().unwrap().key, "environments[1].name");
}

fn read_text_err(text: &str) -> ConfigError {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("c.toml");
    std::fs::write(&p, text).unwrap();
    read_file(&p).err().unwrap()
}
