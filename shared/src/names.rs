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
    /// Unicode normalisation (NFKC) or case folding would turn it into another name (`ｚoe`
    /// into `zoe`, `ﬁona` into `fiona`, `straße` into `strasse`): two spellings of one name
    /// could then be two people.
    #[error(
        "the user name {0:?} changes under Unicode normalisation or case folding (into {1:?})"
    )]
    Ambiguous(String, String),
}

/// Characters that show nothing (zero-width spaces and joiners, soft hyphens, variation
/// selectors, tags, Hangul fillers): two names differing only by them look the same.
fn invisible(c: char) -> bool {
    matches!(
        c,
        '\u{00AD}'
            | '\u{034F}'
            | '\u{115F}'
            | '\u{1160}'
            | '\u{17B4}'
            | '\u{17B5}'
            | '\u{180B}'..='\u{180F}'
            | '\u{200B}'..='\u{200D}'
            | '\u{2060}'..='\u{2064}'
            | '\u{206A}'..='\u{206F}'
            | '\u{3164}'
            | '\u{FE00}'..='\u{FE0F}'
            | '\u{FEFF}'
            | '\u{FFA0}'
            | '\u{1D173}'..='\u{1D17A}'
            | '\u{E0000}'..='\u{E0FFF}'
    )
}

/// What `name` becomes under NFKC and full case folding (approximated by lower-casing what the
/// upper case of the lower case is: `ß` → `SS` → `ss`, final `ς` → `Σ` → `σ`), the form two
/// spellings of one name share.
fn folded(name: &str) -> String {
    use unicode_normalization::UnicodeNormalization as _;
    let nfkc: String = name.nfkc().collect();
    let lower = nfkc.to_lowercase();
    lower.to_uppercase().to_lowercase().nfkc().collect()
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
    if crate::validate::plain_text("user", name, false).is_err() || name.chars().any(invisible) {
        return Err(NameError::Control);
    }
    // Kept as typed (or lower-cased), a name must already be the form its other spellings
    // fold to: otherwise `Zoe` and `ｚｏｅ` would be two users who look like one.
    {
        use unicode_normalization::UnicodeNormalization as _;
        let nfkc: String = name.nfkc().collect();
        let lower = name.to_lowercase();
        if nfkc != name || folded(&lower) != lower {
            return Err(NameError::Ambiguous(name.to_string(), folded(name)));
        }
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
        for n in [
            "zo\u{0}e",
            "zoe\u{1b}[31m",
            "zo\u{202e}e",
            "a\nb",
            "zo\u{200b}e",
            "zoe\u{feff}",
            "zo\u{ad}e",
        ] {
            assert_eq!(normalise(n, true), Err(NameError::Control), "{n:?}");
        }
        assert_eq!(
            normalise(&"a".repeat(MAX_LEN), true).map(|n| n.len()),
            Ok(MAX_LEN)
        );
    }

    #[test]
    fn names_with_another_spelling_under_normalisation_or_case_folding_are_refused() {
        for n in ["ｚｏｅ", "ﬁona", "straße", "Straße", "zoe\u{301}"] {
            for fold in [true, false] {
                assert!(
                    matches!(normalise(n, fold), Err(NameError::Ambiguous(..))),
                    "{n:?} (fold {fold}): {:?}",
                    normalise(n, fold)
                );
            }
        }
        // Their plain spellings, accented letters in composed form, other scripts: fine.
        for n in [
            "zoe",
            "fiona",
            "strasse",
            "zoë",
            "chloé",
            "δημήτρης",
            "yūki",
            "小林",
        ] {
            assert!(
                normalise(n, true).is_ok(),
                "{n:?}: {:?}",
                normalise(n, true)
            );
        }
        assert_eq!(normalise("Zoë", false).as_deref(), Ok("Zoë"));
    }
}
