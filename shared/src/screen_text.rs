//! The text a person saw in a terminal, line by line, each with the moment it appeared: what
//! the player's search and the server's recording index both read, so a search finds what was
//! on the screen after cursor moves, line edits and redraws, not the bytes that drew it
//! (colours, a prompt's retyped line, a progress bar's hundred repaints).
//!
//! [`ScreenText`] is an observer of asciinema's `avt` terminal, fed with the recording's
//! output by its owner (the player already feeds one for its keyframes, so it costs no second
//! emulator). A line of the main screen is finished when it scrolls off the top or is cleared
//! away, or when the recording ends; lines wrapped at the edge are joined back into one. What
//! a full-screen program (`less`, `top`, an editor) drew on the alternate screen is taken as
//! its last screen when it leaves it. A line's moment is when its first character appeared on
//! its row, so a link to it shows the line on screen.

use std::collections::VecDeque;
use std::ops::Range;

use avt::parser::{DecMode, Function};
use avt::{Line, Observation, Observer, Operation, ScreenKind, Terminal};

/// One line as it was shown.
#[derive(Debug, Clone, PartialEq)]
pub struct TextLine {
    /// Recording time (seconds) when the line first showed.
    pub time: f64,
    /// The line's text, trailing blanks removed (never empty).
    pub text: String,
}

/// Collects the lines of a terminal it observes (pass `&mut ScreenText` to `feed_with` and
/// `resize_with`, and set the time of each piece first with [`ScreenText::at`]). The terminal
/// must keep no scrollback (`Terminal::new`), so each line leaving the screen is evicted and
/// seen here.
#[derive(Debug, Default)]
pub struct ScreenText {
    /// The time of the output being fed.
    now: f64,
    /// When each row of the main screen's view first showed a character (`None`: blank).
    times: VecDeque<Option<f64>>,
    /// Rows changed by the last operation (the span of them), read at the next one (after its
    /// evictions, so the rows and `times` agree again).
    dirty: Option<Range<usize>>,
    /// A wrapped line's beginning, waiting for its end.
    pending: String,
    pending_time: Option<f64>,
    /// When the alternate screen was entered, while it is shown.
    alternate_since: Option<f64>,
    ready: Vec<TextLine>,
}

impl ScreenText {
    /// A collector for a terminal of `rows` rows, empty so far.
    pub fn new(rows: usize) -> ScreenText {
        ScreenText {
            times: std::iter::repeat_n(None, rows).collect(),
            ..ScreenText::default()
        }
    }

    /// Sets the recording time of the output fed next.
    pub fn at(&mut self, time: f64) {
        self.now = time;
    }

    /// The lines finished so far, in order (each once).
    pub fn take(&mut self) -> Vec<TextLine> {
        std::mem::take(&mut self.ready)
    }

    /// The lines finished so far and those still on `terminal`'s screens, in order.
    pub fn finish(mut self, terminal: &Terminal) -> Vec<TextLine> {
        self.settle(terminal);
        if terminal.active_screen_kind() == ScreenKind::Alternate {
            self.alternate_screen(terminal);
        }
        self.finish_primary(terminal);
        self.ready
    }

    fn settle(&mut self, terminal: &Terminal) {
        let Some(rows) = self.dirty.take() else {
            return;
        };
        if terminal.active_screen_kind() != ScreenKind::Primary {
            return;
        }
        let screen = terminal.primary_screen();
        for row in rows {
            let Some(slot) = self.times.get_mut(row) else {
                continue;
            };
            if slot.is_none() && screen.line(row).is_some_and(|l| !blank(l)) {
                *slot = Some(self.now);
            }
        }
    }

    fn finish_primary(&mut self, terminal: &Terminal) {
        let lines: Vec<Line> = terminal.primary_screen().all_lines().cloned().collect();
        for (row, line) in lines.iter().enumerate() {
            let time = self.times.get(row).copied().flatten();
            self.push(line, time);
        }
        self.flush_pending();
        for t in self.times.iter_mut() {
            *t = None;
        }
    }

    /// The alternate screen's last state, as its lines (its rows' moments are not followed:
    /// each takes the moment the screen was entered).
    fn alternate_screen(&mut self, terminal: &Terminal) {
        let time = self.alternate_since.take().unwrap_or(self.now);
        for line in terminal.screen().visible_lines() {
            let text = line.text();
            let text = text.trim_end();
            if !text.is_empty() {
                self.ready.push(TextLine {
                    time,
                    text: text.to_owned(),
                });
            }
        }
    }

    fn push(&mut self, line: &Line, time: Option<f64>) {
        if self.pending_time.is_none() {
            self.pending_time = time;
        }
        self.pending.extend(line.chars());
        if !line.is_wrapped() {
            self.flush_pending();
        }
    }

    fn flush_pending(&mut self) {
        let text = self.pending.trim_end();
        if !text.is_empty() {
            self.ready.push(TextLine {
                time: self.pending_time.unwrap_or(self.now),
                text: text.to_owned(),
            });
        }
        self.pending.clear();
        self.pending_time = None;
    }
}

fn blank(line: &Line) -> bool {
    line.chars().all(|c| c == ' ')
}

/// Whether `op` may switch screens (the cheap test, before asking the terminal).
fn may_switch(op: &Operation) -> bool {
    matches!(
        op,
        Operation::Function(Function::Ris | Function::Decset(_) | Function::Decrst(_))
    )
}

/// Whether `op` may leave the alternate screen.
fn leaves_alternate(op: &Operation) -> bool {
    match op {
        Operation::Function(Function::Ris) => true,
        Operation::Function(Function::Decrst(modes)) => modes.as_slice().iter().any(|m| {
            matches!(
                m,
                DecMode::AltScreenBuffer | DecMode::SaveCursorAltScreenBuffer
            )
        }),
        _ => false,
    }
}

impl Observer for ScreenText {
    type Output = ();

    fn before(&mut self, context: &mut Observation<'_>, operation: &Operation) {
        let terminal = context.terminal();
        self.settle(terminal);
        if !may_switch(operation) {
            return;
        }
        if terminal.active_screen_kind() == ScreenKind::Alternate && leaves_alternate(operation) {
            self.alternate_screen(terminal);
        }
        if matches!(operation, Operation::Function(Function::Ris)) {
            self.finish_primary(terminal);
        }
    }

    fn resized(&mut self, _cols: usize, rows: usize) {
        // Rows are reflowed, not followed: the rows kept keep their moments.
        self.times.resize(rows, None);
    }

    fn dirty(&mut self, rows: Range<usize>) {
        self.dirty = Some(match self.dirty.take() {
            Some(d) => d.start.min(rows.start)..d.end.max(rows.end),
            None => rows,
        });
    }

    fn after(&mut self, context: &mut Observation<'_>, operation: &Operation) {
        if !may_switch(operation) {
            return;
        }
        let kind = context.terminal().active_screen_kind();
        match (kind, self.alternate_since) {
            (ScreenKind::Alternate, None) => self.alternate_since = Some(self.now),
            (ScreenKind::Primary, Some(_)) => self.alternate_since = None,
            _ => {}
        }
    }

    fn evicted(&mut self, _context: &mut Observation<'_>, line: &Line) {
        let time = self.times.pop_front().flatten();
        self.times.push_back(None);
        self.push(line, time);
    }

    fn end(&mut self, context: &mut Observation<'_>) {
        self.settle(context.terminal());
    }
}

/// The lines of a whole recording's output, given as `(time, output)` pieces and resizes,
/// on a `cols` x `rows` terminal (the server's index reads a cast this way).
pub fn lines_of<S: AsRef<str>>(
    (cols, rows): (u16, u16),
    pieces: impl IntoIterator<Item = Piece<S>>,
) -> Vec<TextLine> {
    let (cols, rows) = (usize::from(cols.max(1)), usize::from(rows.max(1)));
    let Ok(mut vt) = Terminal::new(cols, rows) else {
        return Vec::new();
    };
    let mut text = ScreenText::new(rows);
    let mut lines = Vec::new();
    for piece in pieces {
        match piece {
            Piece::Output(time, data) => {
                text.at(time);
                vt.feed_with(data.as_ref(), &mut text);
            }
            Piece::Resize(time, c, r) => {
                text.at(time);
                vt.resize_with(usize::from(c.max(1)), usize::from(r.max(1)), &mut text);
            }
        }
        lines.append(&mut text.take());
    }
    lines.extend(text.finish(&vt));
    lines
}

/// A piece of a recording, for [`lines_of`] (its text borrowed or owned).
#[derive(Debug, Clone, Copy)]
pub enum Piece<S> {
    /// Output at a time.
    Output(f64, S),
    /// A resize at a time (columns, rows).
    Resize(f64, u16, u16),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(size: (u16, u16), pieces: &[(f64, &str)]) -> Vec<(f64, String)> {
        lines_of(size, pieces.iter().map(|&(t, d)| Piece::Output(t, d)))
            .into_iter()
            .map(|l| (l.time, l.text))
            .collect()
    }

    #[test]
    fn lines_carry_the_moment_they_showed_even_when_they_scroll_off_later() {
        let got = lines(
            (20, 3),
            &[
                (1.0, "one\r\n"),
                (2.0, "two\r\n"),
                (3.0, "three\r\n"),
                (4.0, "four\r\nfive"),
            ],
        );
        assert_eq!(
            got,
            [
                (1.0, "one".into()),
                (2.0, "two".into()),
                (3.0, "three".into()),
                (4.0, "four".into()),
                (4.0, "five".into())
            ]
        );
    }

    #[test]
    fn edits_and_redraws_leave_what_was_shown() {
        // A line typed with a mistake, rubbed out and retyped; colours; a progress line
        // redrawn in place.
        let got = lines(
            (40, 5),
            &[
                (1.0, "$ kubectl get podz\x08 \x08s\r\n"),
                (2.0, "\x1b[32mRunning\x1b[0m ok\r\n"),
                (3.0, "10%\r50%\r100% done\r\n"),
            ],
        );
        let texts: Vec<&str> = got.iter().map(|(_, t)| t.as_str()).collect();
        assert_eq!(texts, ["$ kubectl get pods", "Running ok", "100% done"]);
        assert_eq!(got[2].0, 3.0);
    }

    #[test]
    fn wrapped_lines_are_joined_with_the_first_rows_moment() {
        let got = lines(
            (5, 2),
            &[(1.0, "abcde"), (2.0, "fgh\r\n"), (3.0, "x\r\ny\r\n")],
        );
        assert_eq!(
            got,
            [
                (1.0, "abcdefgh".into()),
                (3.0, "x".into()),
                (3.0, "y".into())
            ]
        );
    }

    #[test]
    fn a_clear_screen_keeps_what_it_cleared() {
        let got = lines((20, 4), &[(1.0, "secret\r\n"), (2.0, "\x1b[H\x1b[2Jafter")]);
        assert_eq!(got, [(1.0, "secret".into()), (2.0, "after".into())]);
    }

    #[test]
    fn a_full_screen_program_leaves_its_last_screen() {
        let got = lines(
            (20, 4),
            &[
                (1.0, "$ top\r\n"),
                (2.0, "\x1b[?1049h\x1b[Hload 1.0"),
                (3.0, "\x1b[Hload 2.0"),
                (4.0, "\x1b[?1049l$ \r\n"),
            ],
        );
        let texts: Vec<&str> = got.iter().map(|(_, t)| t.as_str()).collect();
        assert_eq!(texts, ["load 2.0", "$ top", "$"]);
        assert_eq!(got[0].0, 2.0);
    }

    #[test]
    fn pieces_split_anywhere_give_the_same_lines() {
        let whole = "$ echo hi\r\nhi\r\n\x1b[31mred\x1b[0m line\r\nabcdefghijklmnop\r\n";
        let want = lines((8, 3), &[(1.0, whole)]);
        for cut in 0..=whole.len() {
            if !whole.is_char_boundary(cut) {
                continue;
            }
            let got = lines((8, 3), &[(1.0, &whole[..cut]), (1.0, &whole[cut..])]);
            assert_eq!(got, want, "cut at {cut}");
        }
    }

    #[test]
    fn resizes_keep_lines_and_moments() {
        let got = lines_of(
            (10, 2),
            [
                Piece::Output(1.0, "first\r\n"),
                Piece::Resize(2.0, 20, 4),
                Piece::Output(3.0, "second\r\nthird\r\nfourth\r\nfifth\r\n"),
            ],
        );
        let texts: Vec<&str> = got.iter().map(|l| l.text.as_str()).collect();
        assert_eq!(texts, ["first", "second", "third", "fourth", "fifth"]);
        assert_eq!(got[0].time, 1.0);
        assert!(got[1..].iter().all(|l| l.time == 3.0));
    }
}
