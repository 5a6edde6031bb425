//! A recording's lines as the index stores them: cut into chunks of a hundred-odd lines, each
//! chunk's text deflated and its lines' moments as varint deltas, and the terms it is found by.
//! Reading a found chunk back gives its lines with their moments, which the query checks one
//! by one.
//!
//! A term is a word's first [`TERM_CHARS`] characters. The index only has to say which chunks
//! may hold a query's words, the lines say which do; cut short, the ids, hashes, timestamps and
//! numbers that fill a shell's output share a few tens of thousands of terms instead of each
//! being one, which is most of what a full-word index of logs weighs (BENCHMARKS.md, "Recording
//! search").

use std::collections::BTreeSet;
use std::io::{Read, Write};

use breakglass_shared::screen_text::TextLine;
use breakglass_shared::search::words;
use flate2::read::DeflateDecoder;
use flate2::write::DeflateEncoder;
use flate2::Compression;

use crate::store::{ChunkKind, NewChunk};

/// Most lines in a chunk.
const CHUNK_LINES: usize = 128;
/// Most text in a chunk (a few long lines fill one sooner).
const CHUNK_BYTES: usize = 8 * 1024;
/// Characters of a word the index keeps.
pub const TERM_CHARS: usize = 4;
/// Longest line kept, in bytes: a logical line of a megabyte (a base64 blob wrapped over
/// thousands of rows) is kept to its beginning.
const MAX_LINE: usize = 4 * 1024;
/// Largest chunk text read back (a stored chunk inflating past this is not ours).
const MAX_INFLATED: u64 = (CHUNK_BYTES + MAX_LINE + 1024) as u64;

/// The chunks of `lines` of one kind, numbered from `first_seq`.
pub fn chunk(lines: &[TextLine], kind: ChunkKind, first_seq: i64) -> Vec<NewChunk> {
    let cut: Vec<TextLine>;
    let lines = if lines.iter().any(|l| l.text.len() > MAX_LINE) {
        cut = lines
            .iter()
            .map(|l| TextLine {
                time: l.time,
                text: l.text[..l.text.floor_char_boundary(MAX_LINE)].to_owned(),
            })
            .collect();
        &cut[..]
    } else {
        lines
    };
    let mut chunks = Vec::new();
    let mut start = 0;
    while start < lines.len() {
        let mut end = start;
        let mut bytes = 0;
        while end < lines.len()
            && end - start < CHUNK_LINES
            && (end == start || bytes < CHUNK_BYTES)
        {
            bytes += lines[end].text.len() + 1;
            end += 1;
        }
        let part = &lines[start..end];
        chunks.push(NewChunk {
            seq: first_seq + chunks.len() as i64,
            kind,
            lines_ms: encode_times(part),
            body: deflate(part),
            words: chunk_words(part),
        });
        start = end;
    }
    chunks
}

/// The lines of a stored chunk, with their moments; `None` when it does not decode.
pub fn lines_of(lines_ms: &[u8], body: &[u8]) -> Option<Vec<TextLine>> {
    let mut text = String::new();
    DeflateDecoder::new(body)
        .take(MAX_INFLATED)
        .read_to_string(&mut text)
        .ok()?;
    let times = decode_times(lines_ms)?;
    let lines: Vec<&str> = text.split('\n').collect();
    (lines.len() == times.len()).then(|| {
        lines
            .into_iter()
            .zip(times)
            .map(|(text, ms)| TextLine {
                time: ms as f64 / 1000.0,
                text: text.to_owned(),
            })
            .collect()
    })
}

fn deflate(lines: &[TextLine]) -> Vec<u8> {
    let text = lines
        .iter()
        .map(|l| l.text.as_str())
        .collect::<Vec<_>>()
        .join("\n");
    let mut enc = DeflateEncoder::new(Vec::with_capacity(text.len() / 3), Compression::default());
    // Writing into a Vec cannot fail.
    let _ = enc.write_all(text.as_bytes());
    enc.finish().unwrap_or_default()
}

/// Each distinct term once: the index needs to know a chunk holds a word, not how often.
fn chunk_words(lines: &[TextLine]) -> String {
    let set: BTreeSet<String> = lines
        .iter()
        .flat_map(|l| words(&l.text))
        .map(|w| term(&w).0)
        .collect();
    set.into_iter().collect::<Vec<_>>().join(" ")
}

/// The index's term for `word`, and whether it is a beginning only (a word shorter than a
/// term, which finds the terms it begins).
pub fn term(word: &str) -> (String, bool) {
    let t: String = word.chars().take(TERM_CHARS).collect();
    let short = t.chars().count() < TERM_CHARS;
    (t, short)
}

/// Milliseconds, each as the zigzag varint of its difference from the one before (lines of a
/// full-screen program's last screen come before the main screen's, so a step can be back).
fn encode_times(lines: &[TextLine]) -> Vec<u8> {
    let mut out = Vec::with_capacity(lines.len() * 2);
    let mut prev = 0i64;
    for l in lines {
        let ms = (l.time * 1000.0).round() as i64;
        let d = ms - prev;
        prev = ms;
        let mut z = ((d << 1) ^ (d >> 63)) as u64;
        loop {
            let byte = (z & 0x7f) as u8;
            z >>= 7;
            if z == 0 {
                out.push(byte);
                break;
            }
            out.push(byte | 0x80);
        }
    }
    out
}

fn decode_times(mut bytes: &[u8]) -> Option<Vec<i64>> {
    let mut out = Vec::new();
    let mut prev = 0i64;
    while !bytes.is_empty() {
        let mut z = 0u64;
        let mut shift = 0;
        loop {
            let (&b, rest) = bytes.split_first()?;
            bytes = rest;
            if shift > 63 {
                return None;
            }
            z |= u64::from(b & 0x7f) << shift;
            shift += 7;
            if b & 0x80 == 0 {
                break;
            }
        }
        let d = (z >> 1) as i64 ^ -((z & 1) as i64);
        prev += d;
        out.push(prev);
    }
    Some(out)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn line(time: f64, text: &str) -> TextLine {
        TextLine {
            time,
            text: text.into(),
        }
    }

    #[test]
    fn chunks_give_back_their_lines_and_moments() {
        let lines: Vec<TextLine> = (0..200)
            .map(|i| {
                line(
                    f64::from(i) * 0.25 + if i == 70 { -10.0 } else { 0.0 },
                    &format!("line {i} Pod-{i}"),
                )
            })
            .collect();
        let chunks = chunk(&lines, ChunkKind::Screen, 5);
        assert_eq!(chunks.len(), 2);
        assert_eq!(chunks.iter().map(|c| c.seq).collect::<Vec<_>>(), [5, 6]);
        let back: Vec<TextLine> = chunks
            .iter()
            .flat_map(|c| lines_of(&c.lines_ms, &c.body).unwrap())
            .collect();
        assert_eq!(back, lines);
        assert!(chunks[0].words.split(' ').any(|w| w == "pod"));
        assert!(chunks[0].words.split(' ').filter(|w| *w == "line").count() == 1);
        assert!(chunks[0]
            .words
            .split(' ')
            .all(|w| w.chars().count() <= TERM_CHARS));
    }

    #[test]
    fn long_lines_fill_a_chunk_sooner_and_overlong_ones_are_cut() {
        let lines = vec![
            line(1.0, &"x".repeat(3_000)),
            line(2.0, &"é".repeat(20_000)),
            line(3.0, "short"),
        ];
        let chunks = chunk(&lines, ChunkKind::Screen, 0);
        assert_eq!(chunks.len(), 1);
        let back = lines_of(&chunks[0].lines_ms, &chunks[0].body).unwrap();
        assert_eq!(back[0].text.len(), 3_000);
        assert_eq!(
            back[1].text,
            "é".repeat(MAX_LINE / 2),
            "cut at a character's edge"
        );
        assert_eq!(back[2].text, "short");
        let many: Vec<TextLine> = (0..10)
            .map(|i| line(f64::from(i), &"y".repeat(3_000)))
            .collect();
        assert_eq!(
            chunk(&many, ChunkKind::Screen, 0).len(),
            4,
            "three lines of 3 KB a chunk"
        );
    }

    #[test]
    fn what_does_not_decode_is_refused() {
        let c = &chunk(&[line(1.0, "a"), line(2.0, "b")], ChunkKind::Command, 0)[0];
        assert!(lines_of(&c.lines_ms[..1], &c.body).is_none());
        assert!(lines_of(&c.lines_ms, b"not deflate").is_none());
        assert!(lines_of(&[0xff; 12], &c.body).is_none());
    }
}
