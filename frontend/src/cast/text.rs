//! The text index that search runs on: the lines the terminal showed (after cursor moves, line
//! edits and redraws, as [`breakglass_shared::screen_text`] reads them off the emulator), each
//! with the event during which it showed. A search matches within a line, never across two:
//! a person reads a screen line by line, and each match can then be listed as one moment.

use std::ops::Range;

/// A line that holds the text searched for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hit {
    /// The line's place among the recording's lines, in order (pass `line + 1` to find the
    /// next one).
    pub line: usize,
    /// The event during which the line first showed: the screen after it shows the line.
    pub event: usize,
    /// The line as it was shown.
    pub text: String,
    /// Where the (first) match is in `text`, in bytes, on character boundaries.
    pub mark: Range<usize>,
}

impl Hit {
    /// The line around the match as (before, match, after), with at most `context` characters
    /// kept on each side; a side cut short starts or ends with "…". Long lines (a wrapped
    /// line is joined into one) would otherwise push the match out of sight in a list.
    pub fn excerpt(&self, context: usize) -> (String, &str, String) {
        let text = &self.text;
        let m = &self.mark;
        let (Some(head), Some(hit), Some(tail)) =
            (text.get(..m.start), text.get(m.clone()), text.get(m.end..))
        else {
            // Not a hit of the index (those mark whole characters of their line).
            return (text.clone(), "", String::new());
        };
        let skip = head.chars().count().saturating_sub(context);
        let before = match head.char_indices().nth(skip) {
            Some((at, _)) if skip > 0 => format!("…{}", &head[at..]),
            _ => head.to_owned(),
        };
        let after = match tail.char_indices().nth(context) {
            Some((at, _)) => format!("{}…", &tail[..at]),
            None => tail.to_owned(),
        };
        (before, hit, after)
    }
}

/// One line of the index.
#[derive(Debug, Clone)]
struct Line {
    /// Where its lowercased text starts in [`TextIndex::lower`].
    start: usize,
    event: usize,
    text: String,
}

/// The searchable lines of a recording, added in the order they showed.
#[derive(Debug, Clone, Default)]
pub struct TextIndex {
    /// Every line lowercased, each followed by a newline: one string, so a search is one
    /// substring scan however many lines there are, and the newline stops a match from
    /// spanning two lines (a needle holds none).
    lower: String,
    lines: Vec<Line>,
}

impl TextIndex {
    /// Adds a line that first showed during event `event`.
    pub fn push(&mut self, event: usize, text: String) {
        let start = self.lower.len();
        if text.is_ascii() {
            // Most lines are: lowered in place, about ten times faster than a character at a
            // time.
            self.lower.push_str(&text);
            if let Some(added) = self.lower.get_mut(start..) {
                added.make_ascii_lowercase();
            }
        } else {
            lower_into(&text, &mut self.lower);
        }
        // Screen lines hold no newline (no cell does): this one only ends the line.
        self.lower.push('\n');
        self.lines.push(Line { start, event, text });
    }

    /// The first line holding `needle` (case-insensitive) at or after line `from`, wrapping
    /// around to the first line.
    pub fn search(&self, needle: &str, from: usize) -> Option<Hit> {
        let needle = lower(needle)?;
        self.find(&needle, from)
            .or_else(|| self.find(&needle, 0))
            .and_then(|at| self.hit(at, needle.len()))
    }

    /// How many lines hold `needle` (case-insensitive).
    #[cfg(test)]
    pub fn count(&self, needle: &str) -> usize {
        lower(needle).map_or(0, |n| self.found(&n).count())
    }

    /// The first `limit` lines holding `needle` (case-insensitive), in order, and how many
    /// lines hold it in all.
    pub fn matches(&self, needle: &str, limit: usize) -> (Vec<Hit>, usize) {
        let Some(needle) = lower(needle) else {
            return (Vec::new(), 0);
        };
        let mut hits = Vec::new();
        let mut total = 0;
        for at in self.found(&needle) {
            if hits.len() < limit {
                hits.extend(self.hit(at, needle.len()));
            }
            total += 1;
        }
        (hits, total)
    }

    /// Where in `lower` the first match at or after line `from` is.
    fn find(&self, needle: &str, from: usize) -> Option<usize> {
        let start = self.lines.get(from)?.start;
        let found = self.lower.get(start..)?.find(needle)?;
        Some(start + found)
    }

    /// Where in `lower` the first match of each line holding `needle` is, in order.
    fn found<'a>(&'a self, needle: &'a str) -> impl Iterator<Item = usize> + 'a {
        let mut from = 0;
        std::iter::from_fn(move || {
            let at = self.find(needle, from)?;
            from = self.line_at(at) + 1;
            Some(at)
        })
    }

    /// The line holding byte `at` of `lower`.
    fn line_at(&self, at: usize) -> usize {
        self.lines
            .partition_point(|l| l.start <= at)
            .saturating_sub(1)
    }

    /// The hit of a match of `len` bytes at byte `at` of `lower`.
    fn hit(&self, at: usize, len: usize) -> Option<Hit> {
        let line = self.line_at(at);
        let l = self.lines.get(line)?;
        Some(Hit {
            line,
            event: l.event,
            text: l.text.clone(),
            mark: original_range(&l.text, at - l.start, len),
        })
    }
}

/// `s` lowercased (Unicode, one character at a time, so a match's place maps back to `s`);
/// `None` when it cannot match a line (empty, or holding a line break).
fn lower(s: &str) -> Option<String> {
    if s.is_empty() || s.contains(['\n', '\r']) {
        return None;
    }
    let mut out = String::with_capacity(s.len());
    lower_into(s, &mut out);
    Some(out)
}

fn lower_into(s: &str, out: &mut String) {
    out.extend(s.chars().flat_map(char::to_lowercase));
}

/// The bytes of `line` whose lowercase is bytes `start..start + len` of its lowercase
/// (lowercasing may change a character's length: `İ` becomes two characters).
fn original_range(line: &str, start: usize, len: usize) -> Range<usize> {
    let end = start + len;
    let mut lowered = 0;
    let mut from = None;
    for (i, c) in line.char_indices() {
        lowered += c.to_lowercase().map(char::len_utf8).sum::<usize>();
        if from.is_none() && lowered > start {
            from = Some(i);
        }
        if lowered >= end {
            return from.unwrap_or(i)..i + c.len_utf8();
        }
    }
    from.unwrap_or(line.len())..line.len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cast::tests::{header, out, sample, screen_after};
    use crate::cast::CastIndex;
    use breakglass_shared::recording::{Code, Event};

    fn index(lines: &[(usize, &str)]) -> TextIndex {
        let mut index = TextIndex::default();
        for &(event, text) in lines {
            index.push(event, text.to_owned());
        }
        index
    }

    #[test]
    fn finds_lines_in_order_wrapping_around() {
        let i = index(&[(0, "$ kubectl get pods"), (3, "no pods here"), (7, "done")]);
        let first = i.search("PODS", 0);
        assert_eq!(first.as_ref().map(|h| (h.line, h.event)), Some((0, 0)));
        let second = first.and_then(|h| i.search("pods", h.line + 1));
        assert_eq!(second.as_ref().map(|h| (h.line, h.event)), Some((1, 3)));
        let wrapped = second.and_then(|h| i.search("pods", h.line + 1));
        assert_eq!(wrapped.map(|h| h.line), Some(0));
        assert_eq!(
            i.search("pods", 99).map(|h| h.line),
            Some(0),
            "past the end"
        );
        assert_eq!(i.search("nowhere", 0), None);
        assert_eq!(i.search("", 0), None);
        assert_eq!(TextIndex::default().search("x", 0), None);
    }

    #[test]
    fn a_match_never_spans_two_lines() {
        let i = index(&[(0, "abc"), (1, "def")]);
        assert_eq!(i.count("cd"), 0);
        assert_eq!(i.count("c\nd"), 0);
        assert_eq!(i.count("c d"), 0);
    }

    #[test]
    fn counts_and_lists_lines_not_occurrences() {
        let i = index(&[(0, "ok ok ok"), (1, "nothing"), (2, "OK"), (5, "fine, ok")]);
        assert_eq!(i.count("ok"), 3);
        let (hits, total) = i.matches("ok", 2);
        assert_eq!(total, 3);
        let events: Vec<usize> = hits.iter().map(|h| h.event).collect();
        assert_eq!(events, [0, 2]);
        assert_eq!(i.matches("ok", 10).0.len(), 3);
        assert_eq!(i.matches("", 10), (Vec::new(), 0));
    }

    #[test]
    fn unicode_case_and_the_marked_bytes() {
        let i = index(&[(4, "Größe: ÉTÉ İstanbul")]);
        let h = i.search("été", 0);
        assert_eq!(h.as_ref().map(|h| &h.text[h.mark.clone()]), Some("ÉTÉ"));
        // `İ` lowercases to two characters (three bytes for its two): the marks still cover
        // the original's bytes, on it and after it.
        let h = i.search("İST", 0);
        assert_eq!(h.as_ref().map(|h| &h.text[h.mark.clone()]), Some("İst"));
        let h = i.search("BUL", 0);
        assert_eq!(h.as_ref().map(|h| &h.text[h.mark.clone()]), Some("bul"));
        let h = i.search("GRÖSSE", 0);
        assert_eq!(h, None, "lowercasing, not case folding");
        let h = i.search("größe", 0);
        assert_eq!(h.map(|h| h.mark), Some(0..7));
    }

    #[test]
    fn excerpts_keep_the_match_in_sight() {
        let i = index(&[(0, &format!("{}needle{}", "a".repeat(50), "b".repeat(50)))]);
        let Some(h) = i.search("NEEDLE", 0) else {
            panic!("not found")
        };
        let (before, hit, after) = h.excerpt(3);
        assert_eq!(
            (before.as_str(), hit, after.as_str()),
            ("…aaa", "needle", "bbb…")
        );
        let short = index(&[(0, "é needle ü")]);
        let Some(h) = short.search("needle", 0) else {
            panic!("not found")
        };
        let (before, hit, after) = h.excerpt(3);
        assert_eq!(
            (before.as_str(), hit, after.as_str()),
            ("é ", "needle", " ü")
        );
    }

    /// The event and text of each line shown holding `needle`.
    fn found(index: &CastIndex, needle: &str) -> Vec<(usize, String)> {
        let (hits, total) = index.matches(needle, usize::MAX);
        assert_eq!(total, hits.len());
        assert_eq!(total, index.count(needle));
        hits.into_iter().map(|h| (h.event, h.text)).collect()
    }

    #[test]
    fn search_finds_what_the_screen_showed() {
        let events = vec![
            // Cursor moved back two columns over "bc": the screen shows "axy".
            out(0.5, "abc\x1b[2Dxy\r\n"),
            // A command typed wrong, rubbed out and retyped.
            out(1.0, "$ kubectl get podz"),
            out(1.1, "\x08 \x08\x08 \x08"),
            out(1.2, "ds\r\n"),
            // A progress line redrawn in place.
            out(2.0, "pulling 10%"),
            out(2.5, "\rpulling 60%"),
            out(3.0, "\rpulling 100% done\r\n"),
            // A window title is not on the screen.
            out(4.0, "\x1b]0;secret title\x07\x1b[1mBold\x1b[0m end"),
        ];
        let index = CastIndex::build(header(80, 24), events);
        assert_eq!(found(&index, "axy"), [(0, "axy".to_string())]);
        assert!(found(&index, "abc").is_empty());
        assert_eq!(
            found(&index, "get pods"),
            [(1, "$ kubectl get pods".to_string())]
        );
        assert!(found(&index, "podz").is_empty());
        assert_eq!(
            found(&index, "pulling"),
            [(4, "pulling 100% done".to_string())]
        );
        assert!(found(&index, "60%").is_empty());
        assert_eq!(found(&index, "bold end"), [(7, "Bold end".to_string())]);
        assert!(found(&index, "title").is_empty());
    }

    #[test]
    fn hits_map_to_the_event_that_shows_their_line() {
        let events = vec![
            out(0.5, "$ echo hel"),
            out(0.6, "lo\r\nhello\r\n"),
            Event {
                time: 1.0,
                code: Code::Marker,
                data: "ended".into(),
            },
            Event {
                time: 1.5,
                code: Code::Resize,
                data: "40x10".into(),
            },
            out(2.0, "bye HeLLo"),
        ];
        let index = CastIndex::build(header(80, 24), events.clone());
        // A line's event is the one its first character came in: the screen after it shows
        // the line (here half of it).
        let first = index.search("ECHO HELLO", 0);
        assert_eq!(first.as_ref().map(|h| h.event), Some(0));
        let hits: Vec<(usize, usize)> = std::iter::successors(index.search("hello", 0), |h| {
            index
                .search("hello", h.line + 1)
                .filter(|n| n.line > h.line)
        })
        .map(|h| (h.line, h.event))
        .collect();
        assert_eq!(hits, [(0, 0), (1, 1), (2, 4)]);
        assert_eq!(
            index.search("hello", 3).map(|h| h.line),
            Some(0),
            "wraps around"
        );
        for (_, event) in hits {
            let screen = screen_after((80, 24), &index.step_ops(0, event + 1));
            assert!(
                screen.iter().any(|l| l.to_lowercase().contains("hel")),
                "event {event}: {screen:?}"
            );
        }
        let (listed, total) = index.matches("hello", 2);
        assert_eq!((listed.len(), total), (2, 3));
        assert_eq!(listed[1].text, "hello");
        assert_eq!(index.search("nowhere", 0), None);
    }

    #[test]
    fn lines_scrolled_off_and_full_screen_apps_are_searchable() {
        let events = sample(3000);
        let index = CastIndex::build(header(80, 24), events.clone());
        // Every line printed is there once, at its own event, even long after it scrolled
        // off; colours are gone.
        for i in [0, 1, 999, 1500, 2999] {
            let needle = format!("line {i:06}");
            let hits = found(&index, &needle);
            assert_eq!(hits.len(), 1, "{needle}: {hits:?}");
            let (event, text) = &hits[0];
            assert!(events[*event].data.contains(&needle), "{needle} at {event}");
            assert!(text.starts_with(&needle), "{text}");
        }
        assert_eq!(found(&index, "full screen app").len(), 1);
    }
}
