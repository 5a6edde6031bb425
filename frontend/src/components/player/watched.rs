//! How much of a recording this browser has played, kept per session in the browser's local
//! storage, so the review form can say whether (and how much) the reviewer watched before
//! giving a verdict. Spans are in recording seconds; seeking over a part does not count it as
//! watched, and an idle stretch shortened by the idle cap counts as watched (nothing happened
//! in it).

use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// The parts of one recording that were played, merged, and the recording's length.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Watched {
    /// Played spans `(from, to)` in recording seconds, sorted and disjoint.
    spans: Vec<(f64, f64)>,
    /// The recording's length in seconds.
    pub total: f64,
}

impl Watched {
    /// Counts `from..to` as played.
    pub fn add(&mut self, from: f64, to: f64) {
        if from.is_nan() || to.is_nan() || to <= from {
            return;
        }
        let mut merged = Vec::with_capacity(self.spans.len() + 1);
        let (mut a, mut b) = (from, to);
        for &(x, y) in &self.spans {
            if y < a || x > b {
                merged.push((x, y));
            } else {
                a = a.min(x);
                b = b.max(y);
            }
        }
        merged.push((a, b));
        merged.sort_by(|p, q| p.0.total_cmp(&q.0));
        self.spans = merged;
    }

    /// Seconds played, each counted once.
    pub fn seconds(&self) -> f64 {
        self.spans.iter().map(|(a, b)| b - a).sum()
    }

    /// The share of the recording played, 0 to 1.
    pub fn share(&self) -> f64 {
        if self.total > 0.0 {
            (self.seconds() / self.total).clamp(0.0, 1.0)
        } else {
            0.0
        }
    }
}

fn key(id: Uuid) -> String {
    format!("breakglass-watched-{id}")
}

fn storage() -> Option<web_sys::Storage> {
    web_sys::window()?.local_storage().ok().flatten()
}

/// What this browser played of session `id`'s recording (`None`: nothing yet).
pub fn load(id: Uuid) -> Option<Watched> {
    let text = storage()?.get_item(&key(id)).ok().flatten()?;
    serde_json::from_str(&text).ok()
}

/// Keeps `w` for session `id` (a full or refused storage loses it, which only makes the review
/// form say less).
pub fn save(id: Uuid, w: &Watched) {
    if let (Some(s), Ok(text)) = (storage(), serde_json::to_string(w)) {
        let _ = s.set_item(&key(id), &text);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_merge_and_count_once() {
        let mut w = Watched {
            total: 100.0,
            ..Watched::default()
        };
        w.add(0.0, 10.0);
        w.add(5.0, 20.0);
        w.add(50.0, 60.0);
        w.add(20.0, 20.0);
        w.add(30.0, 25.0);
        assert_eq!(w.seconds(), 30.0);
        assert!((w.share() - 0.3).abs() < 1e-9);
        // A span bridging two joins them.
        w.add(15.0, 55.0);
        assert_eq!(w.spans, vec![(0.0, 60.0)]);
        w.add(0.0, 500.0);
        assert_eq!(w.share(), 1.0, "never more than all of it");
    }
}
