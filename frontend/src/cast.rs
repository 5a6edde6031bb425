//! The player's index of a recording: keyframes for fast seeking, the idle-capped timeline,
//! markers, and a text index for search. Pure Rust (no browser), host-tested.
//!
//! **Keyframes.** While indexing, every output event is fed to [`avt`] (asciinema's own virtual
//! terminal, the engine asciinema-player uses). Every [`KEYFRAME_BYTES`] of output (or
//! [`KEYFRAME_SECS`] of recording time with output in between) its state is snapshotted with
//! `avt::Terminal::dump()`: an escape-sequence string that paints a fresh terminal of the same
//! size into the same state (screen buffers, cursor, modes, even a half-parsed sequence). A seek
//! to any moment is then: resize to the keyframe's size, write `RIS` + the snapshot, and replay
//! the output after the keyframe up to the moment, which is at most about [`KEYFRAME_BYTES`],
//! whatever the recording's length. Scrollback above the screen at the seek point is not
//! restored (the snapshot holds the visible state only).
//!
//! **Search.** The same terminal is watched by a [`ScreenText`] while it is fed, which
//! collects the lines it showed (what a person saw after cursor moves, line edits and
//! redraws, not the bytes that drew them), each stamped with the index of the event during
//! which it showed: player time depends on the idle cap, an event index does not. Watching
//! changes nothing in the terminal, so the keyframes are the same as without it.
//!
//! The timeline is in [`timeline`], the text index for search in [`text`]; the commands a
//! recording's shell ran, read without indexing it, in [`commands()`].

mod commands;
mod text;
mod timeline;

use breakglass_shared::recording::{Code, Event, Header};
use breakglass_shared::screen_text::{ScreenText, TextLine};

pub use commands::{commands, Command};
pub use text::Hit;
pub use timeline::Timeline;

use text::TextIndex;

/// Output bytes between two keyframes (bounds the replay of a seek).
pub const KEYFRAME_BYTES: usize = 64 * 1024;
/// Recording seconds between two keyframes when output keeps trickling.
pub const KEYFRAME_SECS: f64 = 10.0;
/// Reset to initial state (RIS).
const RIS: &str = "\x1bc";

/// Something to do to the screen, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// Write text to the terminal.
    Write(String),
    /// Resize the terminal (columns, rows).
    Resize(u16, u16),
}

/// A snapshot of the screen before event `event`.
#[derive(Debug, Clone)]
struct Keyframe {
    event: usize,
    cols: u16,
    rows: u16,
    dump: String,
}

/// A marker (`m` event) on the timeline.
#[derive(Debug, Clone, PartialEq)]
pub struct Marker {
    /// Index of the event.
    pub event: usize,
    /// Recording time (seconds).
    pub time: f64,
    /// Label (`approved`, `active`, `ended`, ...).
    pub label: String,
}

/// Everything the player needs to play, seek and search one recording.
#[derive(Debug, Clone)]
pub struct CastIndex {
    header: Header,
    events: Vec<Event>,
    keyframes: Vec<Keyframe>,
    markers: Vec<Marker>,
    text: TextIndex,
    output_bytes: usize,
}

/// Builds a [`CastIndex`] a slice at a time, so the page stays responsive on long recordings.
pub struct IndexBuilder {
    index: CastIndex,
    vt: avt::Terminal,
    /// The lines `vt` showed, stamped with event indexes.
    screen: ScreenText,
    size: (u16, u16),
    next: usize,
    bytes_since: usize,
    time_of_last: f64,
}

impl IndexBuilder {
    /// Starts indexing (a zero size in the header counts as 80x24).
    pub fn new(header: Header, events: Vec<Event>) -> IndexBuilder {
        let size = breakglass_shared::terminal::clamp_size(header.width, header.height);
        let vt = new_vt(size);
        let dump = vt.dump();
        IndexBuilder {
            index: CastIndex {
                header,
                keyframes: vec![Keyframe {
                    event: 0,
                    cols: size.0,
                    rows: size.1,
                    dump,
                }],
                events,
                markers: vec![],
                text: TextIndex::default(),
                output_bytes: 0,
            },
            vt,
            screen: ScreenText::new(usize::from(size.1.max(1))),
            size,
            next: 0,
            bytes_since: 0,
            time_of_last: 0.0,
        }
    }

    /// Indexes events until about `budget` output bytes were processed; true when done.
    pub fn step(&mut self, budget: usize) -> bool {
        let mut spent = 0usize;
        while self.next < self.index.events.len() && spent <= budget {
            let i = self.next;
            let e = &self.index.events[i];
            self.screen.at(i as f64);
            match e.code {
                Code::Output => {
                    self.vt.feed_with(e.data.as_str(), &mut self.screen);
                    self.bytes_since += e.data.len();
                    self.index.output_bytes += e.data.len();
                    spent += e.data.len();
                }
                Code::Resize => {
                    if let Some((c, r)) = parse_size(&e.data) {
                        self.vt
                            .resize_with(usize::from(c), usize::from(r), &mut self.screen);
                        self.size = (c, r);
                    }
                }
                Code::Marker => self.index.markers.push(Marker {
                    event: i,
                    time: e.time,
                    label: e.data.clone(),
                }),
                Code::Input => {}
            }
            let time = e.time;
            self.next += 1;
            if self.bytes_since >= KEYFRAME_BYTES
                || (self.bytes_since > 0 && time - self.time_of_last >= KEYFRAME_SECS)
            {
                self.index.keyframes.push(Keyframe {
                    event: self.next,
                    cols: self.size.0,
                    rows: self.size.1,
                    dump: self.vt.dump(),
                });
                self.bytes_since = 0;
                self.time_of_last = time;
            }
        }
        let lines = self.screen.take();
        self.add_lines(lines);
        self.next >= self.index.events.len()
    }

    /// Adds lines stamped with event indexes to the text index.
    fn add_lines(&mut self, lines: Vec<TextLine>) {
        for line in lines {
            // The stamps are event indexes, whole and far below 2^53: exact as f64.
            self.index.text.push(line.time as usize, line.text);
        }
    }

    /// Share of events indexed, 0 to 1.
    pub fn progress(&self) -> f64 {
        if self.index.events.is_empty() {
            1.0
        } else {
            self.next as f64 / self.index.events.len() as f64
        }
    }

    /// The finished index (indexes whatever is left first).
    pub fn finish(mut self) -> CastIndex {
        while !self.step(usize::MAX) {}
        // What is still on the screen at the end showed too.
        let screen = std::mem::take(&mut self.screen);
        let lines = screen.finish(&self.vt);
        self.add_lines(lines);
        self.index
    }
}

fn new_vt((cols, rows): (u16, u16)) -> avt::Terminal {
    match avt::Terminal::new(cols.max(1) as usize, rows.max(1) as usize) {
        Ok(t) => t,
        // Unreachable: both dimensions are at least 1.
        Err(_) => unreachable!("terminal size is at least 1x1"),
    }
}

/// `"120x40"` into (120, 40); zero or malformed sizes are ignored.
pub fn parse_size(s: &str) -> Option<(u16, u16)> {
    let (c, r) = s.trim().split_once('x')?;
    let (c, r) = (c.parse::<u16>().ok()?, r.parse::<u16>().ok()?);
    // Recordings from before the relay bounded sizes may hold anything up to 65535x65535.
    (c > 0 && r > 0).then(|| breakglass_shared::terminal::clamp_size(c, r))
}

impl CastIndex {
    /// Indexes a whole recording at once.
    #[cfg(test)]
    pub fn build(header: Header, events: Vec<Event>) -> CastIndex {
        IndexBuilder::new(header, events).finish()
    }

    /// The header.
    pub fn header(&self) -> &Header {
        &self.header
    }

    /// The events.
    pub fn events(&self) -> &[Event] {
        &self.events
    }

    /// The markers, in order.
    pub fn markers(&self) -> &[Marker] {
        &self.markers
    }

    /// Number of keyframes (the first one is the empty screen).
    pub fn keyframe_count(&self) -> usize {
        self.keyframes.len()
    }

    /// Total output bytes.
    pub fn output_bytes(&self) -> usize {
        self.output_bytes
    }

    /// The initial size (columns, rows).
    pub fn initial_size(&self) -> (u16, u16) {
        breakglass_shared::terminal::clamp_size(self.header.width, self.header.height)
    }

    /// Ops that bring a terminal in any state to the state after `events[..upto]`: the nearest
    /// keyframe at or before `upto`, then the events after it.
    pub fn seek_ops(&self, upto: usize) -> Vec<Op> {
        let upto = upto.min(self.events.len());
        let k = self.keyframes.partition_point(|k| k.event <= upto);
        let kf = &self.keyframes[k.saturating_sub(1)];
        let mut ops = vec![
            Op::Resize(kf.cols, kf.rows),
            Op::Write(format!("{RIS}{}", kf.dump)),
        ];
        ops.extend(self.step_ops(kf.event, upto));
        ops
    }

    /// Ops of `events[from..to]` (output batched into as few writes as possible).
    pub fn step_ops(&self, from: usize, to: usize) -> Vec<Op> {
        let mut ops = Vec::new();
        let mut buf = String::new();
        for e in self
            .events
            .get(from..to.min(self.events.len()))
            .unwrap_or_default()
        {
            match e.code {
                Code::Output => buf.push_str(&e.data),
                Code::Resize => {
                    if let Some((c, r)) = parse_size(&e.data) {
                        if !buf.is_empty() {
                            ops.push(Op::Write(std::mem::take(&mut buf)));
                        }
                        ops.push(Op::Resize(c, r));
                    }
                }
                Code::Input | Code::Marker => {}
            }
        }
        if !buf.is_empty() {
            ops.push(Op::Write(buf));
        }
        ops
    }

    /// Output bytes a seek to `upto` replays after its keyframe (the seek cost).
    #[cfg(test)]
    pub fn replay_bytes(&self, upto: usize) -> usize {
        let upto = upto.min(self.events.len());
        let k = self.keyframes.partition_point(|k| k.event <= upto);
        let kf = &self.keyframes[k.saturating_sub(1)];
        self.events[kf.event..upto]
            .iter()
            .filter(|e| e.code == Code::Output)
            .map(|e| e.data.len())
            .sum::<usize>()
            + kf.dump.len()
    }

    /// The moment whose seek replays the most output: the end of the longest keyframe
    /// interval (or of the output after the last keyframe).
    pub fn longest_seek(&self) -> usize {
        let ends = self
            .keyframes
            .iter()
            .skip(1)
            .map(|k| k.event.saturating_sub(1))
            .chain([self.events.len()]);
        self.keyframes
            .iter()
            .zip(ends)
            .max_by_key(|(k, end)| self.output_between(k.event, *end))
            .map_or(self.events.len(), |(_, end)| end)
    }

    /// Output bytes of `events[from..to]` (the cost of stepping forward instead of seeking).
    pub fn output_between(&self, from: usize, to: usize) -> usize {
        self.events
            .get(from..to.min(self.events.len()))
            .unwrap_or_default()
            .iter()
            .filter(|e| e.code == Code::Output)
            .map(|e| e.data.len())
            .sum()
    }

    /// The first line shown holding `needle` (case-insensitive) at or after line `from`,
    /// wrapping around to the first line.
    pub fn search(&self, needle: &str, from: usize) -> Option<Hit> {
        self.text.search(needle, from)
    }

    /// How many lines shown hold `needle`.
    #[cfg(test)]
    pub fn count(&self, needle: &str) -> usize {
        self.text.count(needle)
    }

    /// The first `limit` lines shown holding `needle`, in order, and how many hold it in all.
    pub fn matches(&self, needle: &str, limit: usize) -> (Vec<Hit>, usize) {
        self.text.matches(needle, limit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An output event at `t`.
    pub(super) fn out(t: f64, s: &str) -> Event {
        Event {
            time: t,
            code: Code::Output,
            data: s.into(),
        }
    }

    /// A v2 header of a `w` x `h` terminal.
    pub(super) fn header(w: u16, h: u16) -> Header {
        Header {
            version: 2,
            width: w,
            height: h,
            timestamp: None,
            title: None,
        }
    }

    /// What a terminal shows after `ops` (avt stands in for xterm.js).
    pub(super) fn screen_after(size: (u16, u16), ops: &[Op]) -> Vec<String> {
        let mut vt = new_vt(size);
        for op in ops {
            match op {
                Op::Write(s) => vt.feed(s.as_str()),
                Op::Resize(c, r) => vt.resize(*c as usize, *r as usize),
            }
        }
        vt.screen().text()
    }

    /// A long, colourful recording with a resize and a full-screen app in the middle.
    pub(super) fn sample(n: usize) -> Vec<Event> {
        let mut events = vec![];
        let mut t = 0.0;
        for i in 0..n {
            t += if i % 97 == 0 { 30.0 } else { 0.01 };
            let line = format!(
                "\x1b[3{}mline {i:06}\x1b[0m {}\r\n",
                i % 8,
                "x".repeat(i % 50)
            );
            events.push(out(t, &line));
            if i == n / 3 {
                events.push(Event {
                    time: t,
                    code: Code::Resize,
                    data: "100x30".into(),
                });
            }
            if i == n / 2 {
                events.push(out(t, "\x1b[?1049h\x1b[2J\x1b[Hfull screen app"));
            }
            if i == n / 2 + 10 {
                events.push(out(t, "\x1b[?1049l"));
            }
            if i == n / 4 {
                events.push(Event {
                    time: t,
                    code: Code::Marker,
                    data: "active".into(),
                });
            }
        }
        events
    }

    #[test]
    fn every_seek_equals_replay_from_start() {
        let events = sample(3000);
        let index = CastIndex::build(header(80, 24), events.clone());
        assert!(index.keyframe_count() > 2, "{}", index.keyframe_count());
        for upto in [
            0,
            1,
            500,
            1000,
            1001,
            1002,
            1500,
            1505,
            1512,
            2999,
            events.len(),
        ] {
            let direct = screen_after((80, 24), &index.step_ops(0, upto));
            // Start from a terminal in some unrelated state, as the player does.
            let mut ops = vec![Op::Write("garbage \x1b[31m".into())];
            ops.extend(index.seek_ops(upto));
            assert_eq!(screen_after((80, 24), &ops), direct, "seek to event {upto}");
        }
    }

    #[test]
    fn keyframes_are_those_of_an_unwatched_terminal() {
        // The screen-text observer must only watch: each keyframe is the dump of a terminal
        // fed the same events without it.
        let events = sample(3000);
        let index = CastIndex::build(header(80, 24), events.clone());
        let mut vt = new_vt((80, 24));
        let mut fed = 0;
        for k in &index.keyframes {
            for e in &events[fed..k.event] {
                match e.code {
                    Code::Output => vt.feed(e.data.as_str()),
                    Code::Resize => {
                        if let Some((c, r)) = parse_size(&e.data) {
                            vt.resize(usize::from(c), usize::from(r));
                        }
                    }
                    Code::Input | Code::Marker => {}
                }
            }
            fed = k.event;
            assert_eq!(vt.dump(), k.dump, "keyframe at event {}", k.event);
        }
        assert!(index.keyframes.len() > 2);
    }

    #[test]
    fn sizes_from_old_recordings_are_clamped_before_anything_is_allocated() {
        use breakglass_shared::terminal::{MAX_COLS, MAX_ROWS};
        let events = vec![
            out(0.1, "hi"),
            Event {
                time: 0.2,
                code: Code::Resize,
                data: "65535x65535".into(),
            },
            out(0.3, "there"),
        ];
        let index = CastIndex::build(header(65535, 65535), events);
        assert_eq!(index.initial_size(), (MAX_COLS, MAX_ROWS));
        let ops = index.seek_ops(3);
        assert!(
            ops.iter().all(|op| match op {
                Op::Resize(c, r) => *c <= MAX_COLS && *r <= MAX_ROWS,
                Op::Write(_) => true,
            }),
            "{ops:?}"
        );
        assert_eq!(parse_size("4000x30"), Some((MAX_COLS, 30)));
    }

    #[test]
    fn seek_cost_is_bounded_by_keyframes() {
        // ~1.8 MB of output: every seek replays at most about one keyframe interval.
        let events = sample(40_000);
        let index = CastIndex::build(header(80, 24), events.clone());
        assert!(index.output_bytes() > 1_500_000);
        for upto in (0..events.len()).step_by(997) {
            let cost = index.replay_bytes(upto);
            assert!(
                cost < KEYFRAME_BYTES + 4096 + 80 * 24 * 16,
                "seek to {upto} replays {cost} bytes"
            );
        }
        // What the player primes its terminal with: no seek replays more.
        let longest = index.replay_bytes(index.longest_seek());
        assert!((0..events.len()).all(|upto| index.replay_bytes(upto) <= longest));
    }

    #[test]
    fn markers() {
        let events = vec![
            out(0.5, "$ echo hi\r\n"),
            Event {
                time: 1.0,
                code: Code::Marker,
                data: "ended".into(),
            },
        ];
        let index = CastIndex::build(header(80, 24), events);
        assert_eq!(index.markers()[0].label, "ended");
        assert_eq!(index.markers()[0].event, 1);
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("120x40"), Some((120, 40)));
        assert_eq!(parse_size("0x40"), None);
        assert_eq!(parse_size("x"), None);
    }
}
