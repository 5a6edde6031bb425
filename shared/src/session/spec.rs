//! The approved spec: the cluster objects activation will create, rendered when the request is
//! made, shown to the approver, and bound to the approval by their SHA-256.
//!
//! The hash is over [`SessionSpec::document`], the objects' canonical JSON exactly as stored, so
//! an auditor checks it with `sha256sum` on the file an evidence bundle carries. What can only be
//! known later is left out of the hashed objects and named in the document instead: the
//! approver's (or the broken glass's) annotation, the debug container's deadline (activation
//! time plus a fixed number of seconds) and the grant's own spec annotation.

use serde::{Deserialize, Serialize};

/// The annotation on the grant that carries the approved spec's SHA-256.
pub const SPEC_ANNOTATION: &str = "hangar.io/breakglass-spec-sha256";

/// The objects activation will create, as rendered when the request was made.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct SessionSpec {
    /// Lowercase hex SHA-256 of `document`'s UTF-8 bytes: what the approval event and the
    /// grant's [`SPEC_ANNOTATION`] carry.
    pub sha256: String,
    /// The objects as canonical JSON (compact, keys in a fixed order), the bytes hashed.
    pub document: String,
    /// What a person checks first, read from the same objects.
    pub summary: SpecSummary,
    /// The cluster's answer to a server-side dry run when the request was made.
    pub dry_run: DryRun,
}

/// The spec in a few lines, for the approver.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct SpecSummary {
    /// The debug image, pinned by digest.
    pub image: String,
    /// The ClusterRole the grant binds.
    pub role: String,
    /// Who the grant binds it to (the server's own identity in that cluster).
    pub subject: String,
    /// The container whose processes the debug container sees, if any.
    pub target_container: Option<String>,
    /// Whether the debug container gets `SYS_PTRACE` (only with a target container).
    pub process_access: bool,
    /// Whether anything in the spec runs privileged or may escalate (always false: the
    /// policies refuse it).
    pub privileged: bool,
    /// The grant's time to live, in minutes.
    pub ttl_minutes: u32,
    /// The pod's UID when the request was made: a pod recreated under the same name is
    /// another pod, and activation refuses it.
    pub pod_uid: String,
    /// `ephemeral container` (live) or `copy pod` (copy).
    pub creates: String,
}

/// What the cluster said about the objects on a server-side dry run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct DryRun {
    /// `true` when every object tried was admitted, `false` when one was refused, `None`
    /// when the cluster could not be asked.
    pub admitted: Option<bool>,
    /// One line per object: admitted, or the cluster's reason for refusing it.
    pub lines: Vec<String>,
}

impl SessionSpec {
    /// The first characters of the hash, as people compare them.
    pub fn short_sha256(&self) -> &str {
        self.sha256.get(..12).unwrap_or(&self.sha256)
    }
}

impl SessionSpec {
    /// The document as YAML, for people (the hash is over the JSON, not this). `None` when
    /// the stored document is not JSON.
    pub fn yaml(&self) -> Option<String> {
        let value: serde_json::Value = serde_json::from_str(&self.document).ok()?;
        let mut out = String::new();
        write_yaml(&value, 0, &mut out);
        Some(out)
    }
}

/// A key that needs no quotes in YAML: letters, digits and `-_./`, not starting with a sign a
/// YAML reader would take for something else.
fn plain_key(k: &str) -> bool {
    !k.is_empty()
        && k.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'/'))
        && !k.starts_with(['-', '.'])
}

fn key(k: &str) -> String {
    if plain_key(k) {
        k.to_string()
    } else {
        serde_json::Value::String(k.to_string()).to_string()
    }
}

/// A scalar on one line: JSON's own spelling is valid YAML for numbers, booleans, null and
/// double-quoted strings; a string that no YAML reader could take for anything else is
/// written plain, as people write it.
fn scalar(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) if plain_string(s) => s.clone(),
        v => v.to_string(),
    }
}

/// Whether `s` reads back as the same string unquoted: it starts with a letter or `/`, holds
/// only letters, digits and `._/@-` (and `:` not before a space or at the end), and is none of
/// the words YAML takes for booleans or null.
fn plain_string(s: &str) -> bool {
    const WORDS: [&str; 11] = [
        "true", "false", "yes", "no", "on", "off", "null", "y", "n", "~", "nan",
    ];
    let mut chars = s.chars().peekable();
    let starts_well = s.starts_with(|c: char| c.is_ascii_alphabetic() || c == '/');
    let mut ok = starts_well && !s.ends_with(':');
    while let Some(c) = chars.next() {
        let fine = c.is_ascii_alphanumeric()
            || matches!(c, '.' | '_' | '/' | '@' | '-')
            || (c == ':' && chars.peek().is_some_and(|n| *n != ' '));
        ok &= fine;
    }
    ok && !WORDS.iter().any(|w| w.eq_ignore_ascii_case(s))
}

fn is_block(v: &serde_json::Value) -> bool {
    match v {
        serde_json::Value::Object(m) => !m.is_empty(),
        serde_json::Value::Array(a) => !a.is_empty(),
        _ => false,
    }
}

/// A multi-line string as a literal block (`|-`), when its lines allow it: no line may start
/// with a space before the first (YAML takes the first line's indentation for the block's), and
/// no carriage returns or trailing blanks, which a block would not keep.
fn literal_block(s: &str, indent: usize) -> Option<String> {
    if !s.contains('\n')
        || s.starts_with([' ', '\n'])
        || s.ends_with('\n')
        || s.contains('\r')
        || s.lines().any(|l| l.ends_with([' ', '\t']))
        || s.chars().any(|c| c.is_control() && c != '\n')
    {
        return None;
    }
    let pad = " ".repeat(indent);
    let mut out = String::from("|-\n");
    for line in s.split('\n') {
        if !line.is_empty() {
            out.push_str(&pad);
            out.push_str(line);
        }
        out.push('\n');
    }
    Some(out)
}

/// Writes `v`, whose first line continues a line already started (after `key:` or `- `), at
/// `indent` spaces for its nested lines.
fn write_value(v: &serde_json::Value, indent: usize, out: &mut String) {
    match v {
        serde_json::Value::String(s) => match literal_block(s, indent + 2) {
            Some(block) => {
                out.push(' ');
                out.push_str(&block);
            }
            None => {
                out.push(' ');
                out.push_str(&scalar(v));
                out.push('\n');
            }
        },
        v if is_block(v) => {
            out.push('\n');
            write_yaml(v, indent + 2, out);
        }
        serde_json::Value::Object(_) => out.push_str(" {}\n"),
        serde_json::Value::Array(_) => out.push_str(" []\n"),
        v => {
            out.push(' ');
            out.push_str(&scalar(v));
            out.push('\n');
        }
    }
}

fn write_yaml(v: &serde_json::Value, indent: usize, out: &mut String) {
    let pad = " ".repeat(indent);
    match v {
        serde_json::Value::Object(m) => {
            for (k, item) in m {
                out.push_str(&pad);
                out.push_str(&key(k));
                out.push(':');
                write_value(item, indent, out);
            }
        }
        serde_json::Value::Array(a) => {
            for item in a {
                if is_block(item) {
                    // `- ` then the item's first line, its other lines under it.
                    let mut nested = String::new();
                    write_yaml(item, indent + 2, &mut nested);
                    out.push_str(&pad);
                    out.push_str("- ");
                    out.push_str(nested.get(indent + 2..).unwrap_or_default());
                } else {
                    out.push_str(&pad);
                    out.push('-');
                    write_value(item, indent, out);
                }
            }
        }
        v => {
            out.push_str(&pad);
            out.push_str(&scalar(v));
            out.push('\n');
        }
    }
}
