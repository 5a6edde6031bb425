//! What replicas of one database tell each other, and its wire form. The transport is the
//! engine's own: PostgreSQL `NOTIFY` on [`CHANNEL`], sent in the transaction of the write it
//! announces (so it is delivered exactly when the row is visible, and never for a write rolled
//! back). SQLite serves one replica only, so there it is nobody's business and nothing is sent.
//!
//! A notice names a session, never carries its row: each replica re-reads the row, so the
//! payload stays far below PostgreSQL's 8000-byte limit and a reader always sees a committed
//! row.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// The PostgreSQL notification channel of all break-glass replicas on one database.
pub const CHANNEL: &str = "breakglass";

/// Something another replica of the same database did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "t", rename_all = "snake_case")]
pub enum Notice {
    /// Session `id` was committed at `version` by a change of kind `kind`.
    Changed {
        /// The session.
        id: Uuid,
        /// The row's version after the change.
        version: i64,
        /// The change's kind (the events table's `kind`, the live stream's `kind`).
        kind: String,
    },
    /// Another replica holds the terminal of `id` and needs its recording: the replica writing
    /// it stores what it has and hands the writer over.
    Handover {
        /// The session.
        id: Uuid,
    },
    /// Notices may have been lost (the listening connection dropped and came back): whatever
    /// depends on them must re-read. Said by a replica to itself, never sent.
    #[serde(skip)]
    Missed,
}

/// The payload of one `NOTIFY`: the sender (so a replica skips its own) and the notice.
#[derive(Debug, Serialize, Deserialize)]
struct Wire {
    origin: Uuid,
    #[serde(flatten)]
    notice: Notice,
}

/// The payload announcing `notice` from replica `origin` (`None` for [`Notice::Missed`],
/// which is never sent).
pub(crate) fn encode(origin: Uuid, notice: &Notice) -> Option<String> {
    if *notice == Notice::Missed {
        return None;
    }
    let wire = Wire {
        origin,
        notice: notice.clone(),
    };
    serde_json::to_string(&wire).ok()
}

/// The notice in `payload`, unless replica `me` sent it (it acted on it already) or it does
/// not parse (a newer replica's notice this one does not know: the row tells the rest).
pub(crate) fn decode(me: Uuid, payload: &str) -> Option<Notice> {
    let wire: Wire = serde_json::from_str(payload).ok()?;
    (wire.origin != me).then_some(wire.notice)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn notices_round_trip_small_and_skip_their_sender() {
        let me = Uuid::now_v7();
        let other = Uuid::now_v7();
        let id = Uuid::now_v7();
        for n in [
            Notice::Changed {
                id,
                version: 7,
                kind: "begin_activation".into(),
            },
            Notice::Handover { id },
        ] {
            let p = encode(other, &n).unwrap();
            assert!(p.len() < 8000, "{p}");
            assert_eq!(decode(me, &p), Some(n.clone()));
            assert_eq!(decode(other, &p), None, "a replica skips its own notice");
        }
        assert_eq!(encode(me, &Notice::Missed), None);
        assert_eq!(decode(me, "{\"origin\":1}"), None);
        let missed = format!("{{\"origin\":\"{other}\",\"t\":\"missed\"}}");
        assert_eq!(
            decode(me, &missed),
            None,
            "a loss is never taken from the wire"
        );
    }
}
