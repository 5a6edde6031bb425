//! Input validation shared by the server (authoritative) and the browser form (early feedback).
//! Each failure names the field it is about, so the UI can show it next to that field and the
//! API can return it in the error body.

use serde::{Deserialize, Serialize};

use crate::session::{Tier, Verdict};

/// A field that failed validation and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct FieldError {
    /// The request field, as named on the wire (e.g. `reason`).
    pub field: &'static str,
    /// What is wrong and how to fix it.
    pub message: String,
}

impl FieldError {
    /// A new field error.
    pub fn new(field: &'static str, message: impl Into<String>) -> FieldError {
        FieldError {
            field,
            message: message.into(),
        }
    }
}

/// Shortest accepted reason, in characters.
pub const REASON_MIN: usize = 10;
/// Longest accepted reason, in characters.
pub const REASON_MAX: usize = 1000;
/// Longest accepted denial reason or review note, in characters.
pub const NOTE_MAX: usize = 4000;
/// Longest accepted ticket URL.
pub const TICKET_MAX: usize = 2000;

/// Bounds on the requested duration for one tier, in minutes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct DurationBounds {
    /// Shortest allowed.
    pub min_minutes: u32,
    /// Longest allowed.
    pub max_minutes: u32,
    /// What the form proposes.
    pub default_minutes: u32,
    /// How many times a running session may be extended; with its extensions it runs at most
    /// `max_minutes` in all.
    #[serde(default = "default_max_extensions")]
    pub max_extensions: u8,
}

fn default_max_extensions() -> u8 {
    2
}

impl Default for DurationBounds {
    fn default() -> Self {
        DurationBounds {
            min_minutes: 5,
            max_minutes: 60,
            default_minutes: 30,
            max_extensions: default_max_extensions(),
        }
    }
}

impl DurationBounds {
    /// The extension bounds a session made under these durations carries.
    pub fn extension_limits(&self) -> crate::session::ExtensionLimits {
        crate::session::ExtensionLimits {
            max_count: self.max_extensions,
            max_total_minutes: self.max_minutes,
        }
    }
}

/// A Kubernetes DNS-1123 label (namespaces, container names): at most 63 characters, lowercase
/// letters, digits and '-', starting and ending with a letter or digit.
pub fn dns_label(field: &'static str, value: &str) -> Result<(), FieldError> {
    if value.is_empty() {
        return Err(FieldError::new(field, "is required"));
    }
    if value.len() > 63 {
        return Err(FieldError::new(field, "must be at most 63 characters"));
    }
    if !label_chars_ok(value) {
        return Err(FieldError::new(
            field,
            "must consist of lowercase letters, digits and '-', and start and end with a letter or digit",
        ));
    }
    Ok(())
}

/// A Kubernetes DNS-1123 subdomain (pod names): at most 253 characters, dot-separated labels.
pub fn dns_subdomain(field: &'static str, value: &str) -> Result<(), FieldError> {
    if value.is_empty() {
        return Err(FieldError::new(field, "is required"));
    }
    if value.len() > 253 {
        return Err(FieldError::new(field, "must be at most 253 characters"));
    }
    if !value.split('.').all(label_chars_ok) {
        return Err(FieldError::new(
            field,
            "must consist of lowercase letters, digits, '-' and '.', each part starting and ending with a letter or digit",
        ));
    }
    Ok(())
}

fn label_chars_ok(s: &str) -> bool {
    let bytes = s.as_bytes();
    let alnum = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    match (bytes.first(), bytes.last()) {
        (Some(&f), Some(&l)) => {
            alnum(f) && alnum(l) && bytes.iter().all(|&b| alnum(b) || b == b'-')
        }
        _ => false,
    }
}

/// The reason for access: 10 to 1000 characters once trimmed.
pub fn reason(value: &str) -> Result<(), FieldError> {
    let n = value.trim().chars().count();
    if n < REASON_MIN {
        return Err(FieldError::new(
            "reason",
            format!(
                "must be at least {REASON_MIN} characters: say what you need to look at and why"
            ),
        ));
    }
    if n > REASON_MAX {
        return Err(FieldError::new(
            "reason",
            format!("must be at most {REASON_MAX} characters (it has {n})"),
        ));
    }
    plain_text("reason", value, true)
}

/// Whether `c` changes the direction text is shown in (the embeddings, overrides and isolates
/// of Unicode's bidirectional algorithm, and the marks): such a character makes a reviewer
/// read a reason or a note other than it is stored.
fn bidi_control(c: char) -> bool {
    matches!(
        c,
        '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}'
    )
}

/// Text people read in the audit trail: no control characters (NUL, ESC, BEL; a line break
/// or tab only where `multiline`) and no bidirectional controls.
pub fn plain_text(field: &'static str, value: &str, multiline: bool) -> Result<(), FieldError> {
    let allowed = |c: char| multiline && (c == '\n' || c == '\t');
    match value
        .chars()
        .find(|&c| (c.is_control() && !allowed(c)) || bidi_control(c))
    {
        Some(c) => Err(FieldError::new(
            field,
            format!(
                "must not contain control or text-direction characters (found U+{:04X}); \
                 type plain text",
                u32::from(c)
            ),
        )),
        None => Ok(()),
    }
}

/// An optional ticket or incident link: an absolute http(s) URL with a host.
pub fn ticket(value: &str) -> Result<(), FieldError> {
    if value.len() > TICKET_MAX {
        return Err(FieldError::new(
            "ticket",
            format!("must be at most {TICKET_MAX} characters"),
        ));
    }
    plain_text("ticket", value, false)?;
    match url::Url::parse(value) {
        Ok(u)
            if matches!(u.scheme(), "http" | "https")
                && u.host_str().is_some_and(|h| !h.is_empty()) =>
        {
            Ok(())
        }
        _ => Err(FieldError::new(
            "ticket",
            "must be an http:// or https:// link, e.g. https://tracker.example.com/INC-42",
        )),
    }
}

/// The requested duration within the tier's bounds.
pub fn duration(minutes: u32, bounds: &DurationBounds) -> Result<(), FieldError> {
    if minutes < bounds.min_minutes || minutes > bounds.max_minutes {
        return Err(FieldError::new(
            "duration_minutes",
            format!(
                "must be between {} and {} minutes in this environment",
                bounds.min_minutes, bounds.max_minutes
            ),
        ));
    }
    Ok(())
}

/// Recycling the pod at the end, when asked, only where the tier allows it
/// ([`Tier::allows_recycle`]).
pub fn recycle(tier: Tier, asked: bool) -> Result<(), FieldError> {
    if asked && !tier.allows_recycle() {
        return Err(FieldError::new(
            "recycle",
            "pods are never recycled on a Flight environment; untick recycle",
        ));
    }
    Ok(())
}

/// A denial reason or review note: at most 4000 characters; `required` refuses blank text.
pub fn note(field: &'static str, value: &str, required: bool) -> Result<(), FieldError> {
    if required && value.trim().is_empty() {
        return Err(FieldError::new(field, "is required"));
    }
    if value.chars().count() > NOTE_MAX {
        return Err(FieldError::new(
            field,
            format!("must be at most {NOTE_MAX} characters"),
        ));
    }
    plain_text(field, value, true)
}

/// A review's notes: optional for `ok`, required for `concern`, since a concern nobody can act
/// on (what to follow up, and why) is no better than a rubber stamp.
pub fn review_notes(verdict: Verdict, notes: &str) -> Result<(), FieldError> {
    let required = verdict == Verdict::Concern;
    note("notes", notes, required).map_err(|e| {
        if required && notes.trim().is_empty() {
            FieldError::new(
                "notes",
                "are required for a concern: say what someone should follow up, and why",
            )
        } else {
            e
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_concern_needs_notes_and_an_ok_does_not() {
        assert!(review_notes(Verdict::Ok, "").is_ok());
        assert!(review_notes(Verdict::Ok, "fine").is_ok());
        for blank in ["", "   ", "\n\t"] {
            let e = review_notes(Verdict::Concern, blank).expect_err("blank notes on a concern");
            assert_eq!(e.field, "notes");
            assert!(e.message.contains("required for a concern"), "{e}");
        }
        assert!(review_notes(Verdict::Concern, "ran rm in /data").is_ok());
        assert!(review_notes(Verdict::Concern, &"x".repeat(NOTE_MAX + 1)).is_err());
        assert!(review_notes(Verdict::Ok, "bell\u{7}").is_err());
    }

    #[test]
    fn text_people_read_has_no_control_or_direction_characters() {
        for bad in [
            "a\u{0}b",
            "bell\u{7}",
            "\u{1b}[31mred",
            "\u{202E}gnp.exe",
            "x\u{2066}y",
            "\u{9b}",
        ] {
            let reason = format!("{bad} and more words to pass the length");
            assert_eq!(
                super::reason(&reason).map_err(|e| e.field),
                Err("reason"),
                "{bad:?}"
            );
            assert_eq!(
                note("notes", bad, false).map_err(|e| e.field),
                Err("notes"),
                "{bad:?}"
            );
            let link = format!("https://tracker.example.com/{bad}");
            assert_eq!(ticket(&link).map_err(|e| e.field), Err("ticket"), "{bad:?}");
        }
        assert_eq!(note("notes", "line one\n\tline two", false), Ok(()));
        assert_eq!(note("notes", "naïve café, 東京", false), Ok(()));
        assert!(ticket("https://tracker.example.com/a\tb").is_err());
    }

    #[test]
    fn labels() {
        for ok in ["a", "shop", "web-1", "a0", &"x".repeat(63)] {
            assert_eq!(dns_label("namespace", ok), Ok(()), "{ok}");
        }
        for bad in ["", "-a", "a-", "A", "a_b", "a.b", &"x".repeat(64), "é"] {
            let e = dns_label("namespace", bad).err();
            assert_eq!(e.map(|e| e.field), Some("namespace"), "{bad}");
        }
    }

    #[test]
    fn subdomains() {
        for ok in ["web-1", "web-1.abc", "a.b.c"] {
            assert_eq!(dns_subdomain("pod", ok), Ok(()), "{ok}");
        }
        for bad in ["", ".a", "a.", "a..b", "Web", &"x".repeat(254)] {
            assert!(dns_subdomain("pod", bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn reasons() {
        assert!(reason("too short").is_err());
        assert!(
            reason("          x         ").is_err(),
            "padding does not count"
        );
        assert_eq!(reason("debugging a stuck worker"), Ok(()));
        assert_eq!(
            reason(&"é".repeat(1000)),
            Ok(()),
            "counted in characters, not bytes"
        );
        assert!(reason(&"x".repeat(1001)).is_err());
        assert!(reason("bad \u{1b}[31m escape").is_err());
    }

    #[test]
    fn tickets() {
        assert_eq!(ticket("https://tracker.example.com/INC-1"), Ok(()));
        assert_eq!(ticket("http://t/1"), Ok(()));
        for bad in ["", "INC-1", "ftp://x/y", "javascript:alert(1)", "https://"] {
            assert_eq!(ticket(bad).err().map(|e| e.field), Some("ticket"), "{bad}");
        }
    }

    #[test]
    fn ticket_hosts_are_taken_in_their_ascii_spelling_only() {
        // idna_adapter is pinned to its ASCII-only release (shared/Cargo.toml) to keep the
        // Unicode tables out of the web app: the punycode spelling of a host passes, the
        // same host in Unicode letters is refused, naming the field.
        assert_eq!(ticket("https://xn--bcher-kva.example/INC-1"), Ok(()));
        assert_eq!(
            ticket("https://b\u{fc}cher.example/INC-1")
                .err()
                .map(|e| e.field),
            Some("ticket")
        );
    }

    #[test]
    fn durations() {
        let b = DurationBounds::default();
        assert_eq!(duration(5, &b), Ok(()));
        assert_eq!(duration(60, &b), Ok(()));
        assert!(duration(4, &b).is_err());
        assert!(duration(61, &b).is_err());
    }

    #[test]
    fn recycle_only_where_the_tier_allows() {
        assert_eq!(recycle(Tier::Ground, true), Ok(()));
        assert_eq!(recycle(Tier::Flight, false), Ok(()));
        assert_eq!(
            recycle(Tier::Flight, true).err().map(|e| e.field),
            Some("recycle")
        );
    }

    #[test]
    fn notes() {
        assert!(note("reason", " ", true).is_err());
        assert_eq!(note("notes", "", false), Ok(()));
        assert!(note("notes", &"x".repeat(4001), false).is_err());
    }
}
