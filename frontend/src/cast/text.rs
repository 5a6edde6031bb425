//! The text index that search runs on: the output with escape sequences removed and
//! ASCII-lowercased, and where each event's share of it starts.

/// A search hit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hit {
    /// Byte offset in the text index (pass `offset + 1` to find the next one).
    pub offset: usize,
    /// The event whose output completes the match.
    pub event: usize,
}

/// The searchable text of a recording's output, built one event at a time.
#[derive(Debug, Clone)]
pub struct TextIndex {
    text: String,
    /// `starts[k]`: where event `k`'s text starts in `text` (one extra entry at the end).
    starts: Vec<usize>,
    /// Where the escape-sequence parser is: sequences may span events.
    strip: Strip,
}

impl TextIndex {
    /// An empty index, with room for `events` events.
    pub fn with_capacity(events: usize) -> TextIndex {
        TextIndex {
            text: String::new(),
            starts: Vec::with_capacity(events + 1),
            strip: Strip::Ground,
        }
    }

    /// Starts the next event's text (once per event, in order, whatever its kind).
    pub fn begin_event(&mut self) {
        self.starts.push(self.text.len());
    }

    /// Adds terminal output of the current event.
    pub fn push_output(&mut self, data: &str) {
        self.strip.push(data, &mut self.text);
    }

    /// Closes the last event (after every event began).
    pub fn finish(&mut self) {
        self.starts.push(self.text.len());
    }

    /// The first match of `needle` (case-insensitive for ASCII) at or after text offset `from`,
    /// wrapping around to the start.
    pub fn search(&self, needle: &str, from: usize) -> Option<Hit> {
        let needle = needle.to_ascii_lowercase();
        if needle.is_empty() {
            return None;
        }
        let from = from.min(self.text.len());
        let found = self
            .text
            .get(from..)
            .and_then(|t| t.find(&needle).map(|o| o + from))
            .or_else(|| self.text.find(&needle))?;
        let last_byte = found + needle.len() - 1;
        let event = self
            .starts
            .partition_point(|&s| s <= last_byte)
            .saturating_sub(1);
        Some(Hit {
            offset: found,
            event,
        })
    }

    /// How many times `needle` occurs.
    pub fn count(&self, needle: &str) -> usize {
        let needle = needle.to_ascii_lowercase();
        if needle.is_empty() {
            0
        } else {
            self.text.matches(&needle).count()
        }
    }
}

/// Removes escape sequences from terminal output for the text index, across event boundaries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Strip {
    Ground,
    Esc,
    EscIntermediate,
    Csi,
    Osc,
    StringEsc,
    Str,
}

impl Strip {
    fn push(&mut self, data: &str, out: &mut String) {
        for c in data.chars() {
            *self = match (*self, c) {
                (Strip::Ground, '\x1b') => Strip::Esc,
                (Strip::Ground, '\n') => {
                    out.push('\n');
                    Strip::Ground
                }
                (Strip::Ground, '\t') => {
                    out.push(' ');
                    Strip::Ground
                }
                (Strip::Ground, c) if c.is_control() => Strip::Ground,
                (Strip::Ground, c) => {
                    out.push(c.to_ascii_lowercase());
                    Strip::Ground
                }
                (Strip::Esc, '[') => Strip::Csi,
                (Strip::Esc, ']') => Strip::Osc,
                (Strip::Esc, 'P' | 'X' | '^' | '_') => Strip::Str,
                (Strip::Esc, '(' | ')' | '*' | '+' | '-' | '.' | '/' | '#' | '%' | ' ') => {
                    Strip::EscIntermediate
                }
                (Strip::Esc | Strip::EscIntermediate, _) => Strip::Ground,
                (Strip::Csi, '\x40'..='\x7e') => Strip::Ground,
                (Strip::Csi, _) => Strip::Csi,
                (Strip::Osc | Strip::Str, '\x07') => Strip::Ground,
                (Strip::Osc | Strip::Str, '\x1b') => Strip::StringEsc,
                (Strip::Osc, _) => Strip::Osc,
                (Strip::Str, _) => Strip::Str,
                (Strip::StringEsc, _) => Strip::Ground,
            }
        }
    }
}
