//! Asciicast v2 event lines, written straight into the pending buffer (no serde, no
//! per-event `String`): the relay's hot path goes through here for every chunk.

use std::io::Write as _;
use std::time::Duration;

/// `[<secs>.<micros>, "<code>", "` — the start of an event line.
pub(super) fn write_time_prefix(buf: &mut Vec<u8>, t: Duration, code: u8) {
    let _ = write!(buf, "[{}.{:06}, \"", t.as_secs(), t.subsec_micros());
    buf.push(code);
    buf.extend_from_slice(b"\", \"");
}

/// One complete event line with `data` escaped as a JSON string.
pub(super) fn write_event(buf: &mut Vec<u8>, t: Duration, code: u8, data: &str) {
    buf.reserve(data.len() + 32);
    write_time_prefix(buf, t, code);
    write_json_str_body(buf, data);
    buf.extend_from_slice(b"\"]\n");
}

/// For each byte: 0 = copy as is, `u` = `\u00XX`, else the letter after a backslash.
static ESCAPE: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut i = 0;
    while i < 0x20 {
        t[i] = b'u';
        i += 1;
    }
    t[0x08] = b'b';
    t[0x09] = b't';
    t[0x0a] = b'n';
    t[0x0c] = b'f';
    t[0x0d] = b'r';
    t[b'"' as usize] = b'"';
    t[b'\\' as usize] = b'\\';
    t
};

const HEX: &[u8; 16] = b"0123456789abcdef";

const LO: u64 = 0x0101_0101_0101_0101;
const HI: u64 = 0x8080_8080_8080_8080;

/// Whether any of the 8 bytes in `w` needs escaping: a control byte (< 0x20), `"` or `\\`.
/// (Word-at-a-time "has a byte less than n / equal to b" tests; exact for "any".)
#[inline]
fn word_needs_escape(w: u64) -> bool {
    let has_zero = |v: u64| v.wrapping_sub(LO) & !v & HI != 0;
    (w.wrapping_sub(LO * 0x20) & !w & HI) != 0
        || has_zero(w ^ (LO * u64::from(b'"')))
        || has_zero(w ^ (LO * u64::from(b'\\')))
}

/// Appends `s` escaped for the inside of a JSON string, skipping plain bytes 8 at a time and
/// copying runs of them in one go.
fn write_json_str_body(buf: &mut Vec<u8>, s: &str) {
    let bytes = s.as_bytes();
    let len = bytes.len();
    let (mut i, mut start) = (0, 0);
    while i < len {
        while i + 8 <= len {
            let mut word = [0u8; 8];
            word.copy_from_slice(&bytes[i..i + 8]);
            if word_needs_escape(u64::from_le_bytes(word)) {
                break;
            }
            i += 8;
        }
        if i >= len {
            break;
        }
        let b = bytes[i];
        let esc = ESCAPE[b as usize];
        if esc != 0 {
            buf.extend_from_slice(&bytes[start..i]);
            if esc == b'u' {
                buf.extend_from_slice(b"\\u00");
                buf.push(HEX[(b >> 4) as usize]);
                buf.push(HEX[(b & 0xf) as usize]);
            } else {
                buf.push(b'\\');
                buf.push(esc);
            }
            start = i + 1;
        }
        i += 1;
    }
    buf.extend_from_slice(&bytes[start..]);
}

#[cfg(test)]
mod tests {
    use super::*;
    use breakglass_shared::recording::{parse, Code, Header};
    use rand::{Rng, SeedableRng};

    fn line(t: Duration, code: u8, data: &str) -> String {
        let mut buf = Vec::new();
        write_event(&mut buf, t, code, data);
        String::from_utf8(buf).unwrap_or_default()
    }

    #[test]
    fn escaping_matches_serde_json() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let alphabet: Vec<char> = ('\u{0}'..='\u{7f}')
            .chain(['é', '€', '𝄞', '\u{2028}', '\u{fffd}'])
            .collect();
        for _ in 0..2000 {
            let n = rng.gen_range(0..40);
            let s: String = (0..n)
                .map(|_| alphabet[rng.gen_range(0..alphabet.len())])
                .collect();
            let l = line(Duration::from_micros(1_234_567), b'o', &s);
            let v: (f64, String, String) = serde_json::from_str(&l).expect("valid JSON");
            assert_eq!(v, (1.234567, "o".to_string(), s));
        }
        // Long plain runs with rare escapes: exercises the 8-bytes-at-a-time skip.
        for _ in 0..2000 {
            let n = rng.gen_range(0..200);
            let s: String = (0..n)
                .map(|_| match rng.gen_range(0..40) {
                    0 => alphabet[rng.gen_range(0..alphabet.len())],
                    1 => '\u{1f}',
                    2 => '\u{7f}',
                    3 => '\u{20}',
                    _ => char::from(rng.gen_range(b'!'..=b'~')),
                })
                .collect();
            let l = line(Duration::ZERO, b'o', &s);
            let v: (f64, String, String) = serde_json::from_str(&l).expect("valid JSON");
            assert_eq!(v.2, s);
        }
        for b in 0u8..=0x7f {
            let s = format!("{0}{0}{0}{0}{0}{0}{0}{0}{0}", char::from(b));
            let v: (f64, String, String) =
                serde_json::from_str(&line(Duration::ZERO, b'o', &s)).expect("valid JSON");
            assert_eq!(v.2, s, "byte {b:#x}");
        }
        assert_eq!(
            line(Duration::from_millis(5), b'o', "a\"\\\u{1b}[0m\r\n"),
            "[0.005000, \"o\", \"a\\\"\\\\\\u001b[0m\\r\\n\"]\n"
        );
    }

    #[test]
    fn events_parse_with_the_shared_reader() {
        let header = Header {
            version: 2,
            width: 80,
            height: 24,
            timestamp: Some(1),
            title: None,
        }
        .to_line();
        let text = format!(
            "{header}{}{}",
            line(Duration::ZERO, b'o', "hi"),
            line(Duration::from_secs(2), b'm', "ended: UserEnded")
        );
        let (_, events) = parse(&text).expect("parses");
        assert_eq!(events[0].code, Code::Output);
        assert_eq!(events[1].code, Code::Marker);
        assert_eq!(events[1].time, 2.0);
    }
}
