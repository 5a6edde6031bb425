//! Feeding a watched terminal's output to the screen's emulator without emulating what can no
//! longer be on the screen. The emulator costs several times what relaying the same output
//! does (a scroll of the whole screen per line of `seq`), and a watcher only ever needs the
//! screen when it joins or falls behind. So output that only prints text is held back, and
//! when the screen is needed (or enough is held) everything before its last screenfuls is
//! skipped: of those bytes only the colour changes are applied.
//!
//! Why skipping is exact. The held output is *plain*: printable text, CR, LF, TAB, and the
//! two sequences that only touch the cursor's own row or the pen (SGR and EL); none of it
//! changes a mode, a margin, a tab stop or the character set, and the parser is in its ground
//! state where it starts. Replay starts at a CR, so from there the column is the same
//! whatever came before. If, replaying from the screen as it is, the tail scrolls the whole
//! screen at least `2 * rows + 1` times, then from the state the skipped bytes would have left
//! the cursor reaches the bottom row within `rows - 1` lines just as it does here, and the
//! `rows` scrolls after that replace every row with what the tail printed: the screen, the
//! cursor and the pen come out the same. The count is taken on a copy of the screen (drawn
//! from its dump), so when it falls short (a scroll region, or too few lines) everything held
//! is fed after all.

use std::ops::Range;

use breakglass_shared::recording::Utf8Carry;
use bytes::Bytes;

/// Output held before it is fed anyway: bounds the memory a watched terminal keeps aside.
const HOLD: usize = 1024 * 1024;

/// Below this many skippable bytes the copy the check needs costs more than feeding them.
const WORTH_SKIPPING: usize = 4096;

/// A sequence the parser is in the middle of is kept (to send ahead of the live output) only
/// up to this size; a longer one (an image, a clipboard copy) is not redrawn.
const PARTIAL_LIMIT: usize = 64 * 1024;

/// What the feeder keeps between pieces of output.
#[derive(Default)]
pub(super) struct Feeder {
    /// The parser: kept here rather than inside the emulator so that whether it is in the
    /// middle of a sequence can be seen.
    parser: avt::Parser,
    /// A UTF-8 sequence split across pieces.
    carry: Utf8Carry,
    /// What was fed since the parser was last in its ground state: a watcher's terminal must
    /// get it after the screen's dump, which does not carry it.
    partial: String,
    /// Plain output not fed yet; it begins where the parser was in its ground state.
    held: Held,
    /// Bytes of output never emulated, in all.
    skipped: u64,
}

impl Feeder {
    /// A piece of output: held if plain and nothing is pending, fed otherwise.
    pub(super) fn output(&mut self, vt: &mut avt::Terminal, piece: Bytes) {
        if self.at_ground() {
            if let Some(escapes) = plain(self.held.last_byte(), &piece) {
                self.held.push(piece, escapes);
                if self.held.len >= HOLD {
                    self.settle(vt);
                }
                return;
            }
        }
        self.settle(vt);
        self.feed(vt, &piece);
    }

    /// Brings the emulator up to date with everything held, skipping what cannot show.
    pub(super) fn settle(&mut self, vt: &mut avt::Terminal) {
        if self.held.len == 0 {
            return;
        }
        let held = std::mem::take(&mut self.held);
        let (cols, rows) = vt.size();
        let need = 2 * rows + 1;
        // Up to `rows - 1` of the tail's lines may only move the cursor down.
        let skip = held
            .cut(need + rows)
            .filter(|&c| c >= WORTH_SKIPPING && rows >= 2)
            .map(|c| (c, held.split(c)))
            .filter(|(_, (_, tail))| full_scrolls(vt, cols, rows, tail) >= need);
        match skip {
            Some((c, (skipped, tail))) => {
                if held.escapes {
                    for piece in &skipped {
                        for pen in pens(piece) {
                            self.feed(vt, pen);
                        }
                    }
                }
                for piece in &tail {
                    self.feed(vt, piece);
                }
                self.skipped += c as u64;
            }
            None => {
                for piece in &held.pieces {
                    self.feed(vt, piece);
                }
            }
        }
    }

    /// What a fresh terminal must get after the screen's dump for the live output to read as
    /// it does here: a sequence begun but not ended.
    pub(super) fn partial(&self) -> &str {
        &self.partial
    }

    /// Bytes of output never emulated (skipped as unable to show), in all.
    pub(super) fn skipped(&self) -> u64 {
        self.skipped
    }

    /// Bytes held back (not yet emulated).
    #[cfg(test)]
    pub(super) fn held(&self) -> usize {
        self.held.len
    }

    fn at_ground(&self) -> bool {
        self.parser.state == avt::parser::State::Ground && self.carry.is_empty()
    }

    fn feed(&mut self, vt: &mut avt::Terminal, bytes: &[u8]) {
        let text = self.carry.push(bytes);
        let mut ops = Vec::new();
        for ch in text.chars() {
            if let Some(f) = self.parser.feed(ch) {
                ops.push(f);
            }
            if self.parser.state == avt::parser::State::Ground {
                self.partial.clear();
            } else if self.partial.len() < PARTIAL_LIMIT {
                self.partial.push(ch);
            }
        }
        vt.execute(ops);
    }
}

/// Plain output held back: the pieces as they came (shared with the relay's frames, not
/// copied).
#[derive(Default)]
struct Held {
    pieces: Vec<Bytes>,
    /// Their bytes, in all.
    len: usize,
    /// Whether any has an escape sequence (a colour to keep when skipping).
    escapes: bool,
}

impl Held {
    fn push(&mut self, piece: Bytes, escapes: bool) {
        self.len += piece.len();
        self.escapes |= escapes;
        self.pieces.push(piece);
    }

    fn last_byte(&self) -> Option<u8> {
        self.pieces.last().and_then(|p| p.last().copied())
    }

    /// Where replay may start: the offset of the last CR with at least `lines` LFs after it,
    /// if it is not the start.
    fn cut(&self, lines: usize) -> Option<usize> {
        let mut back = self
            .pieces
            .iter()
            .rev()
            .flat_map(|p| p.iter().rev())
            .enumerate()
            .map(|(i, &b)| (self.len - 1 - i, b));
        back.by_ref()
            .filter(|&(_, b)| b == b'\n')
            .nth(lines.checked_sub(1)?)?;
        let (cr, _) = back.find(|&(_, b)| b == b'\r')?;
        (cr > 0).then_some(cr)
    }

    /// The pieces before offset `at` and from it.
    fn split(&self, at: usize) -> (Vec<Bytes>, Vec<Bytes>) {
        let (mut before, mut after) = (Vec::new(), Vec::new());
        let mut start = 0;
        for p in &self.pieces {
            let end = start + p.len();
            if end <= at {
                before.push(p.clone());
            } else if start >= at {
                after.push(p.clone());
            } else {
                before.push(p.slice(..at - start));
                after.push(p.slice(at - start..));
            }
            start = end;
        }
        (before, after)
    }
}

/// Whether `piece` is plain (see the module doc), and if so whether it has escape sequences;
/// `before` is the byte before it, so that a C1 control split across pieces is seen.
fn plain(before: Option<u8>, piece: &[u8]) -> Option<bool> {
    let closer_look = |b: u8| (b < 0x20 && !matches!(b, b'\t' | b'\n' | b'\r')) || b >= 0x7f;
    // Branch-free, so it runs over many bytes at once: most output needs no closer look.
    if piece.iter().fold(false, |any, &b| any | closer_look(b)) {
        return plain_slowly(before, piece).then(|| piece.contains(&0x1b));
    }
    Some(false)
}

fn plain_slowly(before: Option<u8>, piece: &[u8]) -> bool {
    let mut i = 0;
    let mut prev = before;
    while let Some(&b) = piece.get(i) {
        match b {
            b'\t' | b'\n' | b'\r' | 0x20..=0x7e => {}
            0x1b => match row_or_pen_sequence(&piece[i..]) {
                Some(len) => {
                    i += len;
                    prev = Some(b'm');
                    continue;
                }
                None => return false,
            },
            // U+0080..U+009F, the C1 controls, are 0xC2 then one of these.
            0x80..=0x9f if prev == Some(0xc2) => return false,
            0x80..=0xff => {}
            _ => return false,
        }
        prev = Some(b);
        i += 1;
    }
    true
}

/// The length of the SGR or EL sequence `bytes` starts with (`ESC [`, digits and separators,
/// then `m` or `K`), if it starts with one, whole.
fn row_or_pen_sequence(bytes: &[u8]) -> Option<usize> {
    let rest = bytes.strip_prefix(b"\x1b[")?;
    let params = rest
        .iter()
        .take_while(|b| b.is_ascii_digit() || matches!(b, b';' | b':'))
        .count();
    matches!(rest.get(params), Some(b'm' | b'K')).then_some(2 + params + 1)
}

/// The SGR sequences in plain output, in order: what of skipped output still counts.
fn pens(plain: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut rest = plain;
    std::iter::from_fn(move || loop {
        let at = rest.iter().position(|&b| b == 0x1b)?;
        let len = row_or_pen_sequence(&rest[at..]).unwrap_or(1);
        let seq = &rest[at..at + len];
        rest = &rest[at + len..];
        if seq.ends_with(b"m") {
            return Some(seq);
        }
    })
}

/// How many times `tail` scrolls the whole screen when fed to a copy of `vt`.
fn full_scrolls(vt: &avt::Terminal, cols: usize, rows: usize, tail: &[Bytes]) -> usize {
    let Ok(mut copy) = avt::Terminal::new(cols, rows) else {
        return 0;
    };
    copy.feed(vt.dump().as_str());
    let tail = tail.concat();
    copy.feed_with(
        String::from_utf8_lossy(&tail).as_ref(),
        FullScrolls { rows, n: 0 },
    )
}

/// Counts scrolls of the whole screen: the only change to every row at once plain output
/// makes (printing changes one row).
struct FullScrolls {
    rows: usize,
    n: usize,
}

impl avt::Observer for FullScrolls {
    type Output = usize;

    fn dirty(&mut self, rows: Range<usize>) {
        if rows == (0..self.rows) {
            self.n += 1;
        }
    }

    fn end(&mut self, _: &mut avt::Observation<'_>) -> usize {
        self.n
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// Feeds `pieces` lazily to one terminal and directly to another and says whether every
    /// cell, the cursor and what the next output would look like are the same, and how many
    /// bytes the lazy one skipped.
    fn same_as_fed_directly(
        cols: usize,
        rows: usize,
        setup: &str,
        pieces: &[&[u8]],
    ) -> (bool, u64) {
        let mut lazy = avt::Terminal::new(cols, rows).unwrap();
        let mut direct = avt::Terminal::new(cols, rows).unwrap();
        let mut feeder = Feeder::default();
        feeder.output(&mut lazy, Bytes::copy_from_slice(setup.as_bytes()));
        direct.feed(setup);
        let mut all = Vec::new();
        for p in pieces {
            feeder.output(&mut lazy, Bytes::copy_from_slice(p));
            all.extend_from_slice(p);
        }
        feeder.settle(&mut lazy);
        let skipped = feeder.skipped();
        direct.feed(String::from_utf8_lossy(&all).as_ref());
        // What comes next is drawn with the pen and at the cursor both left.
        let next = "\x1b[7mNEXT";
        feeder.output(&mut lazy, Bytes::from_static(next.as_bytes()));
        feeder.settle(&mut lazy);
        direct.feed(next);
        (lazy.dump() == direct.dump(), skipped)
    }

    fn numbers(from: usize, to: usize) -> Vec<u8> {
        (from..to)
            .map(|i| format!("{i}\r\n"))
            .collect::<String>()
            .into_bytes()
    }

    #[test]
    fn a_flood_of_lines_ends_on_the_same_screen() {
        let lines = numbers(1, 50_000);
        for (setup, why) in [
            ("", "a blank screen"),
            ("\x1b[10;5Hmid-screen", "the cursor mid-screen"),
            ("\x1b[31mred pen\x1b[K", "a red pen"),
            ("\x1b[?1049h\x1b[2;3Halternate", "the alternate screen"),
            ("\x1b[3g\x1b[8G\x1bH\r", "own tab stops"),
        ] {
            let (same, skipped) = same_as_fed_directly(20, 6, setup, &[&lines]);
            assert!(same, "after {why}");
            assert!(
                skipped > lines.len() as u64 / 2,
                "after {why}: {skipped} skipped"
            );
        }
    }

    #[test]
    fn colours_tabs_and_erased_rows_in_the_skipped_part_are_kept() {
        let mut out = Vec::new();
        for i in 0..5_000 {
            out.extend_from_slice(
                format!(
                    "\x1b[3{}m{i}\tcol\x1b[K\x1b[0;1m x\u{e9}\u{263a}\r\n",
                    i % 8
                )
                .as_bytes(),
            );
        }
        out.extend_from_slice(b"\x1b[44mlast pen, no newline");
        let (same, skipped) = same_as_fed_directly(30, 5, "", &[&out]);
        assert!(same);
        assert!(skipped > out.len() as u64 / 2, "{skipped} skipped");
    }

    #[test]
    fn a_scroll_region_or_a_cursor_below_it_is_not_skipped_wrongly() {
        let lines = numbers(1, 20_000);
        // Lines scroll only rows 2-4; the rows outside keep what was there.
        let region = "top\x1b[6;1Hbottom\x1b[2;4r\x1b[3;1H";
        assert_eq!(same_as_fed_directly(20, 6, region, &[&lines]), (true, 0));
        // Below the region nothing scrolls: each line overwrites the last row.
        let below = "\x1b[1;3r\x1b[6;1H";
        assert_eq!(same_as_fed_directly(20, 6, below, &[&lines]), (true, 0));
    }

    #[test]
    fn output_split_anywhere_reads_the_same() {
        let mut out = numbers(1, 3_000);
        out.extend_from_slice("\x1b[32mgr\u{fc}n\r\n".as_bytes());
        out.extend_from_slice(&numbers(3_000, 6_000));
        // A C1 control (NEL, U+0085) split across pieces, and an escape split across pieces.
        out.extend_from_slice(b"a\xc2\x85b\x1b[1;31mred\x1b]0;title\x07\r\n");
        out.extend_from_slice(&numbers(6_000, 9_000));
        for size in [1, 7, 1000, 4096] {
            let pieces: Vec<&[u8]> = out.chunks(size).collect();
            let (same, skipped) = same_as_fed_directly(25, 4, "", &pieces);
            assert!(same, "pieces of {size}");
            assert!(skipped > 0, "pieces of {size}: nothing skipped");
        }
        // In one piece it is not plain: all of it is fed.
        assert_eq!(same_as_fed_directly(25, 4, "", &[&out]), (true, 0));
    }

    #[test]
    fn plain_output_is_held_and_anything_else_is_fed() {
        let mut vt = avt::Terminal::new(20, 4).unwrap();
        let mut feeder = Feeder::default();
        let plain = Bytes::from_static(b"text\r\n\x1b[1mbold\x1b[0m\x1b[K\t");
        feeder.output(&mut vt, plain.clone());
        assert_eq!(feeder.held(), plain.len());
        feeder.output(&mut vt, Bytes::from_static(b"\x1b[2J"));
        assert_eq!(feeder.held(), 0);
        // A sequence begun but not ended is fed, and told to a fresh terminal.
        feeder.output(&mut vt, Bytes::from_static(b"\x1b[3"));
        assert_eq!(feeder.partial(), "\x1b[3");
        feeder.output(&mut vt, Bytes::from_static(b"1mred"));
        assert_eq!(feeder.partial(), "");
        assert_eq!(feeder.held(), 0, "after a sequence, fed until at ground");
        feeder.output(&mut vt, Bytes::from_static(b"more"));
        assert_eq!(feeder.held(), 4);
    }

    #[test]
    fn replay_starts_at_a_carriage_return_with_enough_lines_after_it() {
        let cut = |pieces: &[&'static [u8]], lines| {
            let mut held = Held::default();
            for p in pieces {
                held.push(Bytes::from_static(p), false);
            }
            held.cut(lines)
        };
        assert_eq!(cut(&[b"a\r\nb\r\nc\r\n"], 2), Some(4));
        assert_eq!(cut(&[b"a\r", b"\nb", b"\r", b"\nc\r\n"], 2), Some(4));
        assert_eq!(cut(&[b"a\r\nb\r\nc\r\n"], 3), Some(1));
        assert_eq!(cut(&[b"\ra\nb\r\n"], 2), None, "not at the start");
        assert_eq!(cut(&[b"a\r\nb\r\n"], 3), None, "too few lines");
        assert_eq!(cut(&[b"a\nb\nc\n"], 1), None, "no carriage return");
        assert_eq!(cut(&[b"a\r\nb"], 0), None);
    }

    #[test]
    fn held_pieces_split_where_replay_starts() {
        let mut held = Held::default();
        for p in [&b"ab"[..], b"cde", b"f"] {
            held.push(Bytes::from_static(p), false);
        }
        for at in 0..=6 {
            let (before, after) = held.split(at);
            assert_eq!(before.concat(), b"abcdef"[..at]);
            assert_eq!(after.concat(), b"abcdef"[at..]);
        }
    }
}
