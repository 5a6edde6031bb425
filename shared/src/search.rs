//! Searching recordings by what they showed: how text is cut into words (the index and the
//! query alike, so both engines and the page agree), what a query may be, and the answer of
//! `GET /api/breakglass/recordings/search`.

use serde::{Deserialize, Serialize};

use crate::session::Session;
use crate::validate::FieldError;

/// Longest query, in characters.
pub const MAX_QUERY_CHARS: usize = 200;
/// Most words a query may hold.
pub const MAX_QUERY_WORDS: usize = 8;
/// A word longer than this is cut to it (a base64 blob is not something people search
/// for whole, and it would only grow the index).
pub const MAX_WORD_CHARS: usize = 64;
/// Most sessions one answer lists.
pub const MAX_SESSIONS: u32 = 50;
/// Sessions listed when none is asked.
pub const DEFAULT_SESSIONS: u32 = 20;
/// Most moments listed per session (the rest are counted).
pub const HITS_PER_SESSION: usize = 5;

/// The words of `text`: runs of letters and digits, lowercased, each cut to
/// [`MAX_WORD_CHARS`] characters. `kubectl get pods -n kube-system` is `kubectl`, `get`,
/// `pods`, `n`, `kube`, `system`.
pub fn words(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(|w| {
            w.chars()
                .take(MAX_WORD_CHARS)
                .flat_map(char::to_lowercase)
                .collect()
        })
}

/// The words of query `q`, checked: at least one, at most [`MAX_QUERY_WORDS`], and `q` at most
/// [`MAX_QUERY_CHARS`] long. A line matches when it holds every word, in any order, as a
/// word or a word's beginning (the index finds words by their beginnings).
pub fn query_words(q: &str) -> Result<Vec<String>, FieldError> {
    let err = |message: String| FieldError {
        field: "q",
        message,
    };
    if q.chars().count() > MAX_QUERY_CHARS {
        return Err(err(format!(
            "q: at most {MAX_QUERY_CHARS} characters; search for a shorter part of the line"
        )));
    }
    let mut found: Vec<String> = Vec::new();
    for w in words(q) {
        if !found.contains(&w) {
            found.push(w);
        }
    }
    if found.is_empty() {
        return Err(err(
            "q: give a word or a command to search for (letters or digits)".into(),
        ));
    }
    if found.len() > MAX_QUERY_WORDS {
        return Err(err(format!(
            "q: at most {MAX_QUERY_WORDS} words; leave out the common ones"
        )));
    }
    Ok(found)
}

/// Whether `line` holds every one of `words` (as [`query_words`] gives them).
pub fn line_matches(line: &str, words: &[String]) -> bool {
    let lower = line.to_lowercase();
    words.iter().all(|w| lower.contains(w.as_str()))
}

/// Where a hit was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum HitKind {
    /// A command line the shell ran.
    Command,
    /// A line that was on the screen.
    Screen,
}

/// One moment of a recording where the query was found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct SearchHit {
    /// Seconds into the recording when the line showed (or the command ran).
    pub at: f64,
    /// A command or a screen line.
    pub kind: HitKind,
    /// The line as shown.
    pub text: String,
    /// The player at that moment (`/sessions/{id}/recording?t=SECONDS`).
    pub link: String,
}

/// A session whose recording holds the query.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct SessionHits {
    /// The session.
    pub session: Session,
    /// Its first moments (commands first, then screen lines, each in time order), at most
    /// [`HITS_PER_SESSION`].
    pub hits: Vec<SearchHit>,
    /// Further moments found and not listed.
    pub more: u32,
}

/// The answer of a recording search.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct SearchResults {
    /// The words searched for.
    pub words: Vec<String>,
    /// The sessions found, newest first.
    pub sessions: Vec<SessionHits>,
    /// Ended recordings not indexed yet (anyone's): they are not searched until they are.
    pub pending: i64,
}

/// The player's link to `at` seconds into session `id`'s recording.
pub fn moment_link(id: uuid::Uuid, at: f64) -> String {
    // Tenths of a second, what the player's links hold, rounded up: the player at `t` shows
    // what was output up to `t`, so the line is on the screen it opens with.
    let tenths = (at.max(0.0) * 10.0 - 1e-6).ceil().max(0.0) / 10.0;
    format!("/sessions/{id}/recording?t={tenths}")
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn words_split_like_the_index() {
        let w: Vec<String> =
            words("kubectl get pods -n kube-system /var/log/app.log Ünïcode_X").collect();
        assert_eq!(
            w,
            [
                "kubectl",
                "get",
                "pods",
                "n",
                "kube",
                "system",
                "var",
                "log",
                "app",
                "log",
                "ünïcode",
                "x"
            ]
        );
        let long = "a".repeat(100);
        assert_eq!(words(&long).next().map(|w| w.len()), Some(MAX_WORD_CHARS));
    }

    #[test]
    fn queries_are_checked_and_name_the_field() {
        assert_eq!(query_words("Get  get PODS").unwrap(), ["get", "pods"]);
        let nine: String = (0..9).map(|i| format!("w{i} ")).collect();
        for bad in ["", "  --- ", &nine, &"y".repeat(201)] {
            let e = query_words(bad).unwrap_err();
            assert_eq!(e.field, "q", "{bad:?}");
            assert!(e.message.starts_with("q: "), "{}", e.message);
        }
    }

    #[test]
    fn a_line_matches_when_it_holds_every_word() {
        let q = query_words("kube-system pods").unwrap();
        assert!(line_matches("$ kubectl get PODS -n kube-system", &q));
        assert!(!line_matches("$ kubectl get pods", &q));
    }

    #[test]
    fn links_name_the_moment_in_tenths_rounded_up() {
        let id = uuid::Uuid::nil();
        assert_eq!(
            moment_link(id, 12.345),
            format!("/sessions/{id}/recording?t=12.4")
        );
        assert_eq!(
            moment_link(id, 3.0),
            format!("/sessions/{id}/recording?t=3")
        );
    }
}
