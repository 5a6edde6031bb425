//! The screen a watcher joins to: a server-side terminal emulator (`avt`) fed the session's
//! output, kept only while someone watches. The first watcher after a quiet spell draws it
//! from the recording; output that arrives meanwhile is held as operations and applied after.
//! The emulator is fed lazily ([`Feeder`]): only what can still be on the screen when a
//! watcher asks for it is emulated.

use breakglass_shared::recording::{Code, Event, Header};
use breakglass_shared::terminal::{clamp_size, Frame, MAX_FRAME, TAG_DATA};
use bytes::Bytes;

use super::feed::Feeder;

/// What the hub keeps of the screen.
pub(super) enum Screen {
    /// Nobody watches.
    Off,
    /// A watcher is drawing the screen from the recording; what the relay handed over since
    /// the cut, in order.
    Building {
        /// Output and resizes after the cut.
        ops: Vec<Op>,
    },
    /// The screen now.
    Live {
        /// The emulator.
        vt: Box<avt::Terminal>,
        /// What feeds it.
        feeder: Box<Feeder>,
        /// Columns and rows.
        size: (u16, u16),
    },
}

/// Something that happened while the screen was being drawn.
pub(super) enum Op {
    Output(Vec<u8>),
    Resize(u16, u16),
}

/// "Reset the terminal": a watcher's terminal starts from nothing before a screen is drawn.
const RESET: &str = "\x1bc";

impl Screen {
    pub(super) fn building() -> Screen {
        Screen::Building { ops: Vec::new() }
    }

    /// A screen of `cols`x`rows` with nothing on it.
    fn blank(cols: u16, rows: u16) -> Screen {
        let (cols, rows) = clamp_size(cols, rows);
        let vt = avt::Terminal::new(usize::from(cols), usize::from(rows))
            .unwrap_or_else(|_| unreachable_size());
        Screen::Live {
            vt: Box::new(vt),
            feeder: Box::default(),
            size: (cols, rows),
        }
    }

    /// The screen after the cast `cast` (a prefix of a recording, whole lines): its output
    /// and resizes fed in order; input and markers change nothing on a screen.
    pub(super) fn from_cast(cast: &[u8]) -> Result<Screen, String> {
        let text = String::from_utf8_lossy(cast);
        let mut lines = text.lines().filter(|l| !l.trim().is_empty());
        let first = lines.next().ok_or("the recording is empty")?;
        let header: Header = serde_json::from_str(first)
            .map_err(|e| format!("the recording's header does not read: {e}"))?;
        let mut screen = Screen::blank(header.width, header.height);
        for (i, line) in lines.enumerate() {
            let event: Event = serde_json::from_str(line)
                .map_err(|e| format!("the recording's line {} does not read: {e}", i + 2))?;
            match event.code {
                Code::Output => screen.output(Bytes::from(event.data)),
                Code::Resize => {
                    if let Some((c, r)) = event.data.split_once('x') {
                        if let (Ok(c), Ok(r)) = (c.parse(), r.parse()) {
                            screen.resize(c, r);
                        }
                    }
                }
                Code::Input | Code::Marker => {}
            }
        }
        Ok(screen)
    }

    /// Output shown on the terminal.
    pub(super) fn output(&mut self, piece: Bytes) {
        match self {
            Screen::Off => {}
            Screen::Building { ops } => match ops.last_mut() {
                Some(Op::Output(o)) => o.extend_from_slice(&piece),
                _ => ops.push(Op::Output(piece.to_vec())),
            },
            Screen::Live { vt, feeder, .. } => feeder.output(vt, piece),
        }
    }

    /// Bytes of output held while the screen is drawn.
    pub(super) fn held(&self) -> usize {
        match self {
            Screen::Building { ops } => ops
                .iter()
                .map(|o| match o {
                    Op::Output(b) => b.len(),
                    Op::Resize(..) => 4,
                })
                .sum(),
            _ => 0,
        }
    }

    /// The terminal resized.
    pub(super) fn resize(&mut self, cols: u16, rows: u16) {
        match self {
            Screen::Off => {}
            Screen::Building { ops } => ops.push(Op::Resize(cols, rows)),
            Screen::Live { vt, feeder, size } => {
                let (cols, rows) = clamp_size(cols, rows);
                // What is held was printed at the old size.
                feeder.settle(vt);
                vt.resize(usize::from(cols), usize::from(rows));
                *size = (cols, rows);
            }
        }
    }

    /// `drawn` (from the recording) becomes the screen, with what happened meanwhile applied.
    pub(super) fn finish_building(&mut self, mut drawn: Screen) {
        if let Screen::Building { ops } = std::mem::replace(self, Screen::Off) {
            for op in ops {
                match op {
                    Op::Output(o) => drawn.output(Bytes::from(o)),
                    Op::Resize(c, r) => drawn.resize(c, r),
                }
            }
        }
        *self = drawn;
    }

    /// Bytes of output that never had to be emulated (they could not show on any screen
    /// asked for).
    pub(super) fn skipped(&self) -> u64 {
        match self {
            Screen::Live { feeder, .. } => feeder.skipped(),
            _ => 0,
        }
    }

    /// The frames that draw this screen on a fresh terminal: its size, then a reset, the
    /// emulator's dump (the cells, their colours, the cursor and the modes) and a sequence the
    /// output is in the middle of, in data frames within the frame limit. `None` unless the
    /// screen is live.
    pub(super) fn frames(&mut self) -> Option<Vec<Bytes>> {
        let Screen::Live { vt, feeder, size } = self else {
            return None;
        };
        feeder.settle(vt);
        let mut frames = vec![Bytes::from(
            Frame::Resize {
                cols: size.0,
                rows: size.1,
            }
            .encode(),
        )];
        let text = format!("{RESET}{}{}", vt.dump(), feeder.partial());
        for piece in chunks_at_chars(&text, MAX_FRAME - 1) {
            let mut frame = Vec::with_capacity(piece.len() + 1);
            frame.push(TAG_DATA);
            frame.extend_from_slice(piece.as_bytes());
            frames.push(Bytes::from(frame));
        }
        Some(frames)
    }
}

/// `clamp_size` keeps both dimensions at 1 or more, which is all `avt` asks.
fn unreachable_size() -> avt::Terminal {
    #[allow(clippy::expect_used)]
    avt::Terminal::new(1, 1).expect("a 1x1 terminal is valid")
}

/// `text` in pieces of at most `max` bytes, each ending at a character boundary.
fn chunks_at_chars(text: &str, max: usize) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let mut end = rest.len().min(max);
        while !rest.is_char_boundary(end) {
            end -= 1;
        }
        let (piece, tail) = rest.split_at(end);
        rest = tail;
        Some(piece)
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn screen_text(s: &mut Screen) -> String {
        let Screen::Live { vt, feeder, .. } = s else {
            panic!("not live")
        };
        feeder.settle(vt);
        vt.screen()
            .text()
            .iter()
            .map(|l| l.trim_end().to_string())
            .collect::<Vec<_>>()
            .join("\n")
            .trim_end()
            .to_string()
    }

    #[test]
    fn the_screen_is_what_the_output_left_after_redraws() {
        let cast = concat!(
            "{\"version\":2,\"width\":20,\"height\":3}\n",
            "[0.1,\"o\",\"first\\r\\nsecond\"]\n",
            "[0.2,\"i\",\"typed\"]\n",
            "[0.3,\"m\",\"watching: bob\"]\n",
            "[0.4,\"o\",\"\\rSECOND\\r\\nthird\"]\n",
        );
        let mut s = Screen::from_cast(cast.as_bytes()).unwrap();
        assert_eq!(screen_text(&mut s), "first\nSECOND\nthird");
    }

    #[test]
    fn output_while_drawing_is_applied_after_the_cut_in_order() {
        let mut s = Screen::building();
        let a = Bytes::from_static("A\u{e9}".as_bytes());
        s.output(a.slice(..2));
        s.output(a.slice(2..));
        s.resize(30, 4);
        s.output(Bytes::from_static(b"\r\nB"));
        let drawn =
            Screen::from_cast(b"{\"version\":2,\"width\":20,\"height\":3}\n[0.1,\"o\",\"x\"]\n")
                .unwrap();
        s.finish_building(drawn);
        assert_eq!(screen_text(&mut s), "xA\u{e9}\nB");
        let Screen::Live { size, .. } = &s else {
            panic!("not live")
        };
        assert_eq!(*size, (30, 4));
    }

    #[test]
    fn frames_redraw_the_screen_on_a_fresh_terminal() {
        let mut s = Screen::from_cast(b"{\"version\":2,\"width\":20,\"height\":3}\n").unwrap();
        s.output(Bytes::from_static("\x1b[31mred\x1b[0m \u{263a}".as_bytes()));
        let frames = s.frames().unwrap();
        assert_eq!(
            Frame::decode(&frames[0]),
            Ok(Frame::Resize { cols: 20, rows: 3 })
        );
        let mut text = String::new();
        for f in &frames[1..] {
            let Ok(Frame::Data(d)) = Frame::decode(f) else {
                panic!("not data")
            };
            text.push_str(std::str::from_utf8(d).unwrap());
        }
        let mut fresh = Screen::from_cast(b"{\"version\":2,\"width\":20,\"height\":3}\n").unwrap();
        fresh.output(Bytes::from(text));
        assert_eq!(screen_text(&mut fresh), "red \u{263a}");
        assert!(Screen::Off.frames().is_none());
    }

    #[test]
    fn pieces_end_at_characters() {
        let text = "\u{e9}".repeat(10);
        let pieces: Vec<&str> = chunks_at_chars(&text, 5).collect();
        assert!(pieces.iter().all(|p| p.len() <= 5));
        assert_eq!(pieces.concat(), text);
    }
}
