//! User names, normalised once at the server's auth edge: every way in (dev login, trusted
//! proxy, OIDC) hands its name through [`normalise`], so the rest of the server compares plain
//! strings and `Zoe` can never approve `zoe`'s request. The configuration's user lists go
//! through the same function, so a grant to `Zoe` names the same person.

/// Names the server uses for itself in the audit trail: no person may sign in as one of them,
/// or their actions would read as the server's own.
pub const RESERVED: [&str; 2] = ["system", "breakglass-server"];

/// The longest user name accepted.
pub const MAX_LEN: usize = 256;

/// Why a name cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    /// Nothing but spaces.
    #[error("the user name is empty")]
    Empty,
    /// Longer than [`MAX_LEN`].
    #[error("the user name is longer than {MAX_LEN} characters")]
    TooLong,
    /// Holds a control, bidirectional or other invisible formatting character.
    #[error("the user name holds a control or invisible character")]
    Control,
    /// One of [`RESERVED`], or under the `system:` prefix Kubernetes keeps for itself.
    #[error("the user name {0:?} is reserved for the server itself")]
    Reserved(String),
}

/// The name compared and stored for `raw`: trimmed, lower-cased when `fold_case` (the
/// default, `auth.case_insensitive_names`), refused when empty, too long, holding control
/// characters, or reserved. Reserved names are refused whatever their case.
pub fn normalise(raw: &str, fold_case: bool) -> Result<String, NameError> {
    let name = raw.trim();
    if name.is_empty() {
        return Err(NameError::Empty);
    }
    if name.chars().count() > MAX_LEN {
        return Err(NameError::TooLong);
    }
    if crate::validate::plain_text("user", name, false).is_err() {
        return Err(NameError::Control);
    }
    let lower = name.to_lowercase();
    if RESERVED.contains(&lower.as_str()) || lower.starts_with("system:") {
        return Err(NameError::Reserved(name.to_string()));
    }
    Ok(if fold_case { lower } else { name.to_string() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_fold_case_and_trim_by_default_and_keep_case_when_asked() {
        assert_eq!(normalise("  Zoe ", true).as_deref(), Ok("zoe"));
        assert_eq!(normalise("ZOE", true), normalise("zoe", true));
        assert_eq!(normalise("Zoe", false).as_deref(), Ok("Zoe"));
    }

    #[test]
    fn reserved_empty_long_and_invisible_names_are_refused() {
        for n in [
            "system",
            "System",
            "SYSTEM",
            "system:serviceaccount:x",
            "breakglass-server",
        ] {
            assert!(
                matches!(normalise(n, false), Err(NameError::Reserved(_))),
                "{n}"
            );
        }
        assert_eq!(normalise("   ", true), Err(NameError::Empty));
        assert_eq!(
            normalise(&"a".repeat(MAX_LEN + 1), true),
            Err(NameError::TooLong)
        );
        for n in ["zo\u{0}e", "zoe\u{1b}[31m", "zo\u{202e}e", "a\nb"] {
            assert_eq!(normalise(n, true), Err(NameError::Control), "{n:?}");
        }
        assert_eq!(
            normalise(&"a".repeat(MAX_LEN), true).map(|n| n.len()),
            Ok(MAX_LEN)
        );
    }
}
