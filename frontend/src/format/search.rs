//! The recording search's text: which parts of a line found hold the query's words, and the
//! sentences around the results.

use std::ops::Range;

/// `line` cut into pieces, each with whether it holds (part of) one of `words`: the marks a
/// reader's eye goes to. `words` are the query's words as the server matched them
/// (`breakglass_shared::search::query_words`: lowercased, found anywhere in the line, so
/// within longer words too); every occurrence of each is marked, case-insensitively, and
/// marks that overlap or touch become one. The pieces, joined, are `line`.
pub fn marked<'a>(line: &'a str, words: &[String]) -> Vec<(&'a str, bool)> {
    let mut marks = marks(line, words);
    marks.sort_by_key(|m| m.start);
    let mut merged: Vec<Range<usize>> = Vec::with_capacity(marks.len());
    for m in marks {
        match merged.last_mut() {
            Some(last) if m.start <= last.end => last.end = last.end.max(m.end),
            _ => merged.push(m),
        }
    }
    let mut pieces = Vec::with_capacity(merged.len() * 2 + 1);
    let mut at = 0;
    for m in merged {
        if let (Some(before), Some(mark)) = (line.get(at..m.start), line.get(m.clone())) {
            if !before.is_empty() {
                pieces.push((before, false));
            }
            pieces.push((mark, true));
            at = m.end;
        }
    }
    if let Some(rest) = line.get(at..).filter(|r| !r.is_empty()) {
        pieces.push((rest, false));
    }
    pieces
}

/// The byte ranges of `line` where each of `words` occurs, case-insensitively, each covering
/// whole characters of `line`.
fn marks(line: &str, words: &[String]) -> Vec<Range<usize>> {
    // Lowercased a character at a time (as `search::words` lowercases the query), keeping for
    // each byte of the lowercase text the character of `line` it came from: a lowercase
    // character can be longer or shorter than its capital (`İ` is two, `K` (Kelvin) one
    // byte less), so offsets in one are not offsets in the other.
    let mut lower = String::with_capacity(line.len());
    let mut from: Vec<Range<usize>> = Vec::with_capacity(line.len());
    for (i, c) in line.char_indices() {
        for l in c.to_lowercase() {
            lower.push(l);
            from.extend(std::iter::repeat_n(i..i + c.len_utf8(), l.len_utf8()));
        }
    }
    let mut found = Vec::new();
    for w in words.iter().filter(|w| !w.is_empty()) {
        let mut start = 0;
        // Overlapping occurrences too (`aa` in `aaa`): each is a place the word is.
        while let Some(at) = lower.get(start..).and_then(|rest| rest.find(w.as_str())) {
            let at = start + at;
            if let (Some(first), Some(last)) = (from.get(at), from.get(at + w.len() - 1)) {
                found.push(first.start..last.end);
            }
            start = at
                + lower
                    .get(at..)
                    .and_then(|r| r.chars().next())
                    .map_or(1, char::len_utf8);
        }
    }
    found
}

/// The server's message about the query, for beside the query's field: without the field's
/// wire name it starts with (`q: give a word ...`), which the field's label says in words.
pub fn field_message(message: &str) -> String {
    let text = message.strip_prefix("q: ").unwrap_or(message);
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// What a search found, in one sentence: `Found in 3 sessions for “kubectl”.`
pub fn found_summary(sessions: usize, q: &str) -> String {
    match sessions {
        0 => format!("Nothing found for “{q}”."),
        1 => format!("Found in 1 session for “{q}”."),
        n => format!("Found in {n} sessions for “{q}”."),
    }
}

/// The recordings not searched yet, as a sentence (`None` when there are none).
pub fn pending_note(pending: i64) -> Option<String> {
    match pending {
        i64::MIN..=0 => None,
        1 => Some("1 recording is still being indexed and is not searched yet.".into()),
        n => Some(format!(
            "{n} recordings are still being indexed and are not searched yet."
        )),
    }
}

/// The moments of a session found and not listed: `and 3 more moments`.
pub fn more_moments(more: u32) -> Option<String> {
    match more {
        0 => None,
        1 => Some("and 1 more moment".into()),
        n => Some(format!("and {n} more moments")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(q: &str) -> Vec<String> {
        breakglass_shared::search::query_words(q).unwrap_or_default()
    }

    /// The pieces as `plain[marked]plain`.
    fn shown(line: &str, q: &str) -> String {
        marked(line, &words(q))
            .into_iter()
            .map(|(t, m)| if m { format!("[{t}]") } else { t.to_string() })
            .collect()
    }

    #[test]
    fn every_word_is_marked_wherever_it_occurs() {
        assert_eq!(
            shown("$ kubectl get PODS -n kube-system", "pods kube"),
            "$ [kube]ctl get [PODS] -n [kube]-system"
        );
        // Beginnings and middles of words, as the server matches them.
        assert_eq!(
            shown("Deployment deployed", "deploy"),
            "[Deploy]ment [deploy]ed"
        );
        assert_eq!(shown("no match here", "kubectl"), "no match here");
    }

    #[test]
    fn overlapping_and_touching_marks_become_one() {
        assert_eq!(shown("kubectl", "kube bectl"), "[kubectl]");
        assert_eq!(shown("getpods now", "get pods"), "[getpods] now");
        assert_eq!(shown("aaa b", "aa"), "[aaa] b");
    }

    #[test]
    fn the_pieces_make_the_line_again() {
        for (line, q) in [
            ("  leading and trailing  ", "and"),
            ("ünïcode ÜNÏCODE", "ünï"),
            ("", "x"),
            ("x", "x"),
        ] {
            let joined: String = marked(line, &words(q))
                .into_iter()
                .map(|(t, _)| t)
                .collect();
            assert_eq!(joined, line, "{q:?}");
        }
        assert!(marked("", &words("x")).is_empty());
        assert_eq!(marked("abc", &[]), [("abc", false)]);
    }

    #[test]
    fn marks_cover_whole_characters_whatever_lowercasing_does() {
        assert_eq!(shown("ÉTÉ été", "été"), "[ÉTÉ] [été]");
        // `İ` lowercases to `i` and a combining dot: three bytes for its two.
        assert_eq!(shown("İstanbul", "İst"), "[İst]anbul");
        // The Kelvin sign lowercases to a one-byte `k`.
        assert_eq!(shown("3 \u{212A}B free", "kb"), "3 [\u{212A}B] free");
    }

    #[test]
    fn sentences() {
        assert_eq!(
            field_message("q: give a word or a command to search for (letters or digits)"),
            "Give a word or a command to search for (letters or digits)"
        );
        assert_eq!(field_message("limit: must be"), "Limit: must be");
        assert_eq!(found_summary(0, "ls"), "Nothing found for “ls”.");
        assert_eq!(found_summary(1, "ls"), "Found in 1 session for “ls”.");
        assert_eq!(found_summary(4, "ls"), "Found in 4 sessions for “ls”.");
        assert_eq!(pending_note(0), None);
        assert_eq!(
            pending_note(1).as_deref(),
            Some("1 recording is still being indexed and is not searched yet.")
        );
        assert_eq!(
            pending_note(3).as_deref(),
            Some("3 recordings are still being indexed and are not searched yet.")
        );
        assert_eq!(more_moments(0), None);
        assert_eq!(more_moments(2).as_deref(), Some("and 2 more moments"));
    }
}
