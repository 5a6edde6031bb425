//! asciicast v2: a header line, then one `[seconds, code, data]` line per event.

use serde::{Deserialize, Serialize};

/// The first line of a cast.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Header {
    /// Always 2.
    pub version: u8,
    /// Terminal columns at start.
    pub width: u16,
    /// Terminal rows at start.
    pub height: u16,
    /// Unix seconds at start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<i64>,
    /// Title.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
}

/// What an event line carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Code {
    /// Output shown.
    #[serde(rename = "o")]
    Output,
    /// Input typed.
    #[serde(rename = "i")]
    Input,
    /// Resize, data `COLSxROWS`.
    #[serde(rename = "r")]
    Resize,
    /// Marker, data a label.
    #[serde(rename = "m")]
    Marker,
}

/// One event line.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// Seconds since the start.
    pub time: f64,
    /// Kind.
    pub code: Code,
    /// Text.
    pub data: String,
}

impl Serialize for Event {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        (self.time, self.code, &self.data).serialize(s)
    }
}

impl<'de> Deserialize<'de> for Event {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let (time, code, data) = <(f64, Code, String)>::deserialize(d)?;
        Ok(Event { time, code, data })
    }
}

/// Why a cast could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CastError {
    /// No header line.
    #[error("the recording is empty")]
    Empty,
    /// Line `line` (1-based) is not valid.
    #[error("line {line} of the recording is not valid asciicast v2: {message}")]
    BadLine {
        /// 1-based line number.
        line: usize,
        /// Parser message.
        message: String,
    },
}

impl Event {
    /// One JSON line, newline included.
    pub fn to_line(&self) -> String {
        let mut s = serde_json::to_string(self).unwrap_or_default();
        s.push('\n');
        s
    }
}

impl Header {
    /// One JSON line, newline included.
    pub fn to_line(&self) -> String {
        let mut s = serde_json::to_string(self).unwrap_or_default();
        s.push('\n');
        s
    }
}

/// Parses a whole cast.
pub fn parse(text: &str) -> Result<(Header, Vec<Event>), CastError> {
    let mut lines = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty());
    let (_, first) = lines.next().ok_or(CastError::Empty)?;
    let header: Header = serde_json::from_str(first).map_err(|e| CastError::BadLine {
        line: 1,
        message: e.to_string(),
    })?;
    if header.version != 2 {
        return Err(CastError::BadLine {
            line: 1,
            message: format!("version {} is not 2", header.version),
        });
    }
    let events = lines
        .map(|(i, l)| {
            serde_json::from_str::<Event>(l).map_err(|e| CastError::BadLine {
                line: i + 1,
                message: e.to_string(),
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok((header, events))
}

/// Turns a byte stream that may split UTF-8 sequences across chunks into text, keeping an
/// incomplete tail for the next chunk; invalid bytes become U+FFFD.
#[derive(Debug, Default, Clone)]
pub struct Utf8Carry {
    pending: Vec<u8>,
}

impl Utf8Carry {
    /// Decodes `chunk` after whatever was held back.
    pub fn push(&mut self, chunk: &[u8]) -> String {
        self.pending.extend_from_slice(chunk);
        let mut out = String::with_capacity(self.pending.len());
        let mut rest: &[u8] = &self.pending;
        loop {
            match std::str::from_utf8(rest) {
                Ok(s) => {
                    out.push_str(s);
                    rest = &[];
                    break;
                }
                Err(e) => {
                    let (good, bad) = rest.split_at(e.valid_up_to());
                    // valid_up_to guarantees `good` is UTF-8.
                    out.push_str(std::str::from_utf8(good).unwrap_or_default());
                    match e.error_len() {
                        Some(n) => {
                            out.push('\u{FFFD}');
                            rest = &bad[n..];
                        }
                        None => {
                            rest = bad;
                            break;
                        }
                    }
                }
            }
        }
        self.pending = rest.to_vec();
        out
    }

    /// Whether nothing is held back (the last chunk ended on a whole character).
    pub fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }

    /// Whatever is still held back, as replacement text.
    pub fn finish(&mut self) -> String {
        let s = String::from_utf8_lossy(&self.pending).into_owned();
        self.pending.clear();
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_and_parses() {
        let h = Header {
            version: 2,
            width: 80,
            height: 24,
            timestamp: Some(1_700_000_000),
            title: Some("s".into()),
        };
        let e = Event {
            time: 1.5,
            code: Code::Output,
            data: "hi \"x\"\r\n".into(),
        };
        let m = Event {
            time: 2.0,
            code: Code::Marker,
            data: "ended".into(),
        };
        let text = format!("{}{}{}", h.to_line(), e.to_line(), m.to_line());
        assert!(e.to_line().starts_with("[1.5,\"o\","));
        let (h2, events) = parse(&text).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(h2, h);
        assert_eq!(events, vec![e, m]);
        assert!(matches!(
            parse("{\"version\":2,\"width\":1,\"height\":1}\n[1,\"x\",\"\"]"),
            Err(CastError::BadLine { line: 2, .. })
        ));
        assert_eq!(parse(""), Err(CastError::Empty));
    }

    #[test]
    fn utf8_split_across_chunks() {
        let mut c = Utf8Carry::default();
        let bytes = "héllo €".as_bytes();
        let mut out = String::new();
        for b in bytes {
            out.push_str(&c.push(&[*b]));
        }
        assert_eq!(out, "héllo €");
        assert_eq!(c.push(&[0xff, b'a']), "\u{FFFD}a");
        assert_eq!(c.push(&[0xe2, 0x82]), "");
        assert_eq!(c.finish(), "\u{FFFD}");
    }
}

/// The API's answer to "is this recording intact?" (`GET /sessions/{id}/recording/verify`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct VerifyResult {
    /// No check failed.
    pub ok: bool,
    /// Every check, in order.
    pub checks: Vec<VerifyCheck>,
}

/// One verification check.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct VerifyCheck {
    /// Name, e.g. `hash on record`.
    pub name: String,
    /// `pass`, `fail` or `skipped`.
    pub outcome: String,
    /// What was seen.
    pub detail: String,
}

/// How the store keeps a session's recording, as the store itself reports it
/// (`GET /sessions/{id}/recording/retention`): what an auditor asks of retention.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct RecordingRetention {
    /// The store, as the server describes it (`s3://bucket at ...`, `local directory ...`).
    pub store: String,
    /// Whether the store can lock objects at all (a local directory cannot).
    pub lockable: bool,
    /// `GOVERNANCE` or `COMPLIANCE`, as the store reports the version's lock; `None`: the
    /// version carries none.
    pub mode: Option<String>,
    /// Until when the version can be neither deleted nor overwritten.
    #[serde(with = "time::serde::rfc3339::option", default)]
    #[cfg_attr(feature = "server", schema(value_type = Option<String>, format = DateTime))]
    pub retain_until: Option<time::OffsetDateTime>,
    /// Whether a legal hold keeps it beyond that date.
    pub legal_hold: bool,
}
