//! Binary frames between the browser and the terminal relay.
//!
//! One WebSocket binary message is one frame: a tag byte, then the payload. Binary framing keeps
//! JSON and per-byte work off the hot path; only the rare status frame carries JSON.

use serde::{Deserialize, Serialize};

use crate::session::SessionState;

/// Largest frame either side may send, tag included.
pub const MAX_FRAME: usize = 64 * 1024;

/// Tag: terminal bytes (browser→server: keystrokes; server→browser: output).
pub const TAG_DATA: u8 = 0x00;
/// Tag: terminal size, `cols: u16 BE, rows: u16 BE`.
pub const TAG_RESIZE: u8 = 0x01;
/// Tag: keep-alive, no payload.
pub const TAG_HEARTBEAT: u8 = 0x02;
/// Tag: JSON [`Status`] (server→browser only).
pub const TAG_STATUS: u8 = 0x03;

/// WebSocket close codes the relay uses (4000-4999 are for applications).
pub mod close {
    /// The session ended (user, TTL, terminate); the reason text says which.
    pub const SESSION_ENDED: u16 = 4000;
    /// Only the requester may type. No longer sent: the server answers someone else's session
    /// with [`NOT_FOUND`], as it answers an unknown id; kept so older servers' closes still
    /// read well.
    pub const NOT_REQUESTER: u16 = 4001;
    /// Not signed in.
    pub const UNAUTHENTICATED: u16 = 4002;
    /// The session is not active.
    pub const NOT_ACTIVE: u16 = 4003;
    /// No such session.
    pub const NOT_FOUND: u16 = 4004;
    /// A malformed, oversized or unexpected frame.
    pub const BAD_FRAME: u16 = 4008;
    /// A newer connection of the requester took over this session's terminal.
    pub const TAKEN_OVER: u16 = 4009;
    /// The connection to the pod failed.
    pub const RELAY_ERROR: u16 = 4010;
    /// The person's right to this terminal ended while it was open (they signed out, their
    /// login was ended or expired, or they no longer hold the permission); the reason says
    /// which.
    pub const REVOKED: u16 = 4011;
    /// The terminal is served by another server replica now (it moved there, or it was never
    /// here): a watcher reconnects and is served by whichever replica holds it.
    pub const MOVED: u16 = 4012;
    /// The person may not watch this session (not an approver or admin of its environment).
    pub const NOT_WATCHER: u16 = 4013;
}

/// A status message from the server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Status {
    /// The session's state.
    pub state: SessionState,
    /// Human-readable detail.
    pub message: String,
    /// Who watches the terminal live now (names, in the order they came); sent to the
    /// requester and to the watchers whenever it changes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub watchers: Vec<String>,
    /// In a moderated session: the requester's input is held back because no approver other
    /// than the requester watches.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub paused: bool,
}

impl Status {
    /// A status with only a message.
    pub fn message(state: SessionState, message: impl Into<String>) -> Status {
        Status {
            state,
            message: message.into(),
            watchers: Vec::new(),
            paused: false,
        }
    }
}

/// Largest terminal the relay accepts, in columns and in rows: far beyond any screen, and
/// small enough that the pod's TTY, the recording and the reviewer's player never allocate a
/// 65535x65535 grid someone asked for.
pub const MAX_COLS: u16 = 1000;
/// See [`MAX_COLS`].
pub const MAX_ROWS: u16 = 1000;

/// The terminal size (columns, rows) that asks a debug container to end: its supervisor
/// (`debug-image/supervisor`) watches for it, and the server sets it through the attach when
/// a session ends. Never a size a person's terminal sends (see [`person_size`]).
pub const END_SIZE: (u16, u16) = (1, 1);

/// A size a person's terminal asked for, as the pod gets it: at least 2x2, so that it is
/// never [`END_SIZE`] (a terminal that small shows nothing anyway).
pub fn person_size(cols: u16, rows: u16) -> (u16, u16) {
    (cols.max(2), rows.max(2))
}

/// `cols`x`rows` brought within 1..=[`MAX_COLS`] and 1..=[`MAX_ROWS`], for sizes read from
/// recordings made before the bound existed.
pub fn clamp_size(cols: u16, rows: u16) -> (u16, u16) {
    (cols.clamp(1, MAX_COLS), rows.clamp(1, MAX_ROWS))
}

/// A decoded frame, borrowing its payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame<'a> {
    /// Terminal bytes.
    Data(&'a [u8]),
    /// New terminal size.
    Resize {
        /// Columns.
        cols: u16,
        /// Rows.
        rows: u16,
    },
    /// Keep-alive.
    Heartbeat,
    /// Server status.
    Status(Status),
}

/// Why a frame could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// Empty message.
    #[error("empty frame")]
    Empty,
    /// Larger than [`MAX_FRAME`].
    #[error("frame of {0} bytes exceeds the {MAX_FRAME}-byte limit")]
    TooLarge(usize),
    /// Unknown tag byte.
    #[error("unknown frame tag {0:#04x}")]
    UnknownTag(u8),
    /// A resize that is not exactly four bytes, or has a zero dimension or one above
    /// [`MAX_COLS`]/[`MAX_ROWS`].
    #[error("malformed resize frame")]
    BadResize,
    /// A status frame that is not valid JSON.
    #[error("malformed status frame")]
    BadStatus,
}

impl<'a> Frame<'a> {
    /// Decodes one message.
    pub fn decode(msg: &'a [u8]) -> Result<Frame<'a>, FrameError> {
        if msg.len() > MAX_FRAME {
            return Err(FrameError::TooLarge(msg.len()));
        }
        let (&tag, rest) = msg.split_first().ok_or(FrameError::Empty)?;
        match tag {
            TAG_DATA => Ok(Frame::Data(rest)),
            TAG_RESIZE => match rest {
                [c0, c1, r0, r1] => {
                    let cols = u16::from_be_bytes([*c0, *c1]);
                    let rows = u16::from_be_bytes([*r0, *r1]);
                    if cols == 0 || rows == 0 || cols > MAX_COLS || rows > MAX_ROWS {
                        Err(FrameError::BadResize)
                    } else {
                        Ok(Frame::Resize { cols, rows })
                    }
                }
                _ => Err(FrameError::BadResize),
            },
            TAG_HEARTBEAT if rest.is_empty() => Ok(Frame::Heartbeat),
            TAG_HEARTBEAT => Err(FrameError::UnknownTag(tag)),
            // As text, like every other JSON the web app reads: `from_slice` would build a
            // second copy of serde_json's parser (and of `Status`'s deserialiser) for byte
            // input in its wasm. Invalid UTF-8 is refused either way.
            TAG_STATUS => std::str::from_utf8(rest)
                .ok()
                .and_then(|text| serde_json::from_str(text).ok())
                .map(Frame::Status)
                .ok_or(FrameError::BadStatus),
            other => Err(FrameError::UnknownTag(other)),
        }
    }

    /// Encodes into a new buffer.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.encode_into(&mut out);
        out
    }

    /// Appends the encoding to `out`, so the relay can reuse one buffer.
    pub fn encode_into(&self, out: &mut Vec<u8>) {
        match self {
            Frame::Data(d) => {
                out.reserve(d.len() + 1);
                out.push(TAG_DATA);
                out.extend_from_slice(d);
            }
            Frame::Resize { cols, rows } => {
                out.push(TAG_RESIZE);
                out.extend_from_slice(&cols.to_be_bytes());
                out.extend_from_slice(&rows.to_be_bytes());
            }
            Frame::Heartbeat => out.push(TAG_HEARTBEAT),
            Frame::Status(s) => {
                out.push(TAG_STATUS);
                // A struct of a state and a string always serializes.
                out.extend_from_slice(&serde_json::to_vec(s).unwrap_or_default());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        let frames = [
            Frame::Data(b"echo hi\r"),
            Frame::Data(b""),
            Frame::Resize {
                cols: 120,
                rows: 40,
            },
            Frame::Heartbeat,
            Frame::Status(Status::message(SessionState::Ended, "TTL")),
            Frame::Status(Status {
                state: SessionState::Active,
                message: "watching: bob".into(),
                watchers: vec!["bob".into(), "carol".into()],
                paused: true,
            }),
        ];
        for f in frames {
            let bytes = f.encode();
            assert_eq!(Frame::decode(&bytes), Ok(f));
        }
    }

    #[test]
    fn refuses_bad_frames() {
        assert_eq!(Frame::decode(&[]), Err(FrameError::Empty));
        assert_eq!(Frame::decode(&[9]), Err(FrameError::UnknownTag(9)));
        assert_eq!(
            Frame::decode(&[TAG_RESIZE, 0, 1]),
            Err(FrameError::BadResize)
        );
        assert_eq!(
            Frame::decode(&[TAG_RESIZE, 0, 0, 0, 5]),
            Err(FrameError::BadResize)
        );
        assert_eq!(
            Frame::decode(&[TAG_STATUS, b'{']),
            Err(FrameError::BadStatus)
        );
        let mut bad_text = vec![TAG_STATUS];
        bad_text.extend_from_slice(b"{\"state\":\"Active\",\"message\":\"\xff\"}");
        assert_eq!(Frame::decode(&bad_text), Err(FrameError::BadStatus));
        for (c, r) in [(MAX_COLS + 1, 24), (80, MAX_ROWS + 1), (u16::MAX, u16::MAX)] {
            let f = Frame::Resize { cols: c, rows: r }.encode();
            assert_eq!(Frame::decode(&f), Err(FrameError::BadResize), "{c}x{r}");
        }
        let f = Frame::Resize {
            cols: MAX_COLS,
            rows: MAX_ROWS,
        };
        assert_eq!(Frame::decode(&f.encode()), Ok(f));
        assert_eq!(clamp_size(65535, 0), (MAX_COLS, 1));
        // No size a browser sends is the end signal.
        assert_eq!(person_size(END_SIZE.0, END_SIZE.1), (2, 2));
        assert_eq!(person_size(1, 40), (2, 40));
        assert_eq!(person_size(120, 40), (120, 40));
        let big = vec![TAG_DATA; MAX_FRAME + 1];
        assert_eq!(
            Frame::decode(&big),
            Err(FrameError::TooLarge(MAX_FRAME + 1))
        );
    }
}
