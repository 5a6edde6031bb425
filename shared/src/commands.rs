//! Command lines out of a terminal's output, from the shell's OSC 133 marks (the "semantic
//! prompt" marks terminals such as iTerm2, VS Code and WezTerm read): the debug image's
//! profile puts `ESC ] 133 ; A BEL` before its prompt and `ESC ] 133 ; B BEL` after it, so what
//! the terminal shows between `B` and the Enter that runs it (or a `C` mark, from shells that
//! send one before running a command) is the command line. The echo is read the way a
//! terminal would show it: typed characters, backspaces, carriage returns, cursor moves left
//! and right and erasing to the end of the line; colours and other sequences change nothing.
//! Output without the marks yields nothing: no guessing at prompts.

/// The longest command line kept (longer ones are cut, marked with `…`).
pub const MAX_COMMAND: usize = 500;

/// Reads output pieces as they come and yields each command line once it runs.
#[derive(Debug, Default, Clone)]
pub struct Commands {
    /// Inside an escape sequence: the bytes so far (bounded: an overlong one keeps its first
    /// and latest bytes, enough to see where it ends) and whether it outgrew the bound.
    escape: Option<(Vec<u8>, bool)>,
    /// After a `B` mark: the line being typed, as shown, and the cursor in it.
    line: Option<(Vec<char>, usize)>,
    /// A UTF-8 sequence split across pieces.
    utf8: Vec<u8>,
    /// Someone typed since the last prompt ended: what follows a `B` mark is a command line
    /// only then. Typed-ahead text is echoed before the prompt that reads it, so without this
    /// the command's own output would pass for the command.
    typed: bool,
}

/// Longest escape sequence looked at; longer ones are skipped to their end unread.
const MAX_ESCAPE: usize = 64;

impl Commands {
    /// The terminal's user typed something (the relay passed input to the pod).
    pub fn typed(&mut self) {
        if self.line.is_some() {
            self.typed = true;
        }
    }

    /// Feeds one piece of output; returns the command lines that ran in it, in order.
    pub fn feed(&mut self, piece: &[u8]) -> Vec<String> {
        let mut ran = Vec::new();
        // The common case (no mark pending, no escape in the piece) costs one scan.
        if self.line.is_none() && self.escape.is_none() && !piece.contains(&0x1b) {
            return ran;
        }
        for &b in piece {
            if let Some((seq, overlong)) = self.escape.as_mut() {
                if seq.len() >= MAX_ESCAPE {
                    let (first, last) = (seq[0], seq[seq.len() - 1]);
                    *seq = vec![first, last];
                    *overlong = true;
                }
                seq.push(b);
                if finished(seq) {
                    if let Some((seq, false)) = self.escape.take() {
                        self.sequence(&seq, &mut ran);
                    }
                }
                continue;
            }
            match b {
                0x1b => self.escape = Some((Vec::new(), false)),
                _ if self.line.is_none() => {}
                b'\n' => self.run(&mut ran),
                b'\r' => self.with_line(|_, cursor| *cursor = 0),
                0x08 => self.with_line(|_, cursor| *cursor = cursor.saturating_sub(1)),
                0x00..=0x1f | 0x7f => {}
                _ => self.byte(b),
            }
        }
        ran
    }

    fn with_line(&mut self, f: impl FnOnce(&mut Vec<char>, &mut usize)) {
        if let Some((line, cursor)) = self.line.as_mut() {
            f(line, cursor);
        }
    }

    /// A printable byte on the line: put at the cursor once its character is whole.
    fn byte(&mut self, b: u8) {
        self.utf8.push(b);
        let c = match std::str::from_utf8(&self.utf8) {
            Ok(s) => s.chars().next(),
            Err(e) if e.error_len().is_none() && self.utf8.len() < 4 => return,
            Err(_) => Some(char::REPLACEMENT_CHARACTER),
        };
        self.utf8.clear();
        let Some(c) = c else { return };
        self.with_line(|line, cursor| {
            if *cursor < line.len() {
                line[*cursor] = c;
            } else if line.len() < MAX_COMMAND + 1 {
                line.push(c);
            }
            *cursor = (*cursor + 1).min(line.len());
        });
    }

    /// A whole escape sequence (after its ESC).
    fn sequence(&mut self, seq: &[u8], ran: &mut Vec<String>) {
        match seq.first() {
            Some(b']') => {
                let body = seq[1..].strip_suffix(b"\x07").unwrap_or(&seq[1..]);
                let body = body.strip_suffix(b"\x1b\\").unwrap_or(body);
                if let [b'1', b'3', b'3', b';', mark, ..] = body {
                    match mark {
                        b'A' => self.line = None,
                        b'B' => {
                            self.line = Some((Vec::new(), 0));
                            self.typed = false;
                        }
                        b'C' => self.run(ran),
                        _ => {}
                    }
                }
            }
            Some(b'[') if self.line.is_some() => {
                let (params, last) = seq[1..].split_at(seq.len().saturating_sub(2));
                let n: usize = std::str::from_utf8(params)
                    .ok()
                    .and_then(|p| p.parse().ok())
                    .unwrap_or(1)
                    .max(1);
                match last {
                    [b'D'] => self.with_line(|_, c| *c = c.saturating_sub(n)),
                    [b'C'] => self.with_line(|line, c| *c = (*c + n).min(line.len())),
                    [b'K'] if params.is_empty() || params == b"0" => {
                        self.with_line(|line, c| line.truncate(*c));
                    }
                    [b'P'] => self.with_line(|line, c| {
                        let end = (*c + n).min(line.len());
                        line.drain(*c..end);
                    }),
                    _ => {}
                }
            }
            _ => {}
        }
    }

    /// The line typed after the prompt runs: yielded when it is not blank.
    fn run(&mut self, ran: &mut Vec<String>) {
        if let Some((line, _)) = self.line.take() {
            let text: String = line.iter().collect();
            let text = text.trim();
            if !text.is_empty() && std::mem::take(&mut self.typed) {
                ran.push(cut(text));
            }
        }
    }
}

fn cut(text: &str) -> String {
    match text.char_indices().nth(MAX_COMMAND) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_string(),
    }
}

/// Whether escape sequence `seq` (the bytes after ESC) is over.
fn finished(seq: &[u8]) -> bool {
    match seq {
        [] => false,
        // OSC: up to BEL or ST (ESC \).
        [b']', rest @ ..] => rest.ends_with(b"\x07") || rest.ends_with(b"\x1b\\"),
        // CSI: parameters, then one final byte in 0x40..=0x7e.
        [b'[', rest @ ..] => matches!(rest.last(), Some(0x40..=0x7e)),
        // Sequences with intermediate bytes end at their first final byte.
        [0x20..=0x2f, rest @ ..] => matches!(rest.last(), Some(0x30..=0x7e)),
        // Two-byte sequences (ESC 7, ESC =, ...).
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "\x1b]133;A\x07";
    const B: &str = "\x1b]133;B\x07";

    /// The commands in `pieces`, someone typing before each piece.
    fn all(pieces: &[&str]) -> Vec<String> {
        let mut c = Commands::default();
        let mut ran = Vec::new();
        for p in pieces {
            // Split at each B mark, so the typing comes after the prompt, as a person's does.
            for (i, part) in p.split(B).enumerate() {
                if i > 0 {
                    ran.extend(c.feed(B.as_bytes()));
                    c.typed();
                }
                ran.extend(c.feed(part.as_bytes()));
            }
        }
        ran
    }

    #[test]
    fn each_command_after_a_marked_prompt_once_it_runs() {
        let out = format!(
            "{A}$ {B}kubectl get pods\r\nNAME READY\r\n{A}$ {B}echo hi\r\nhi\r\n{A}$ {B}\r\n{A}$ {B}"
        );
        assert_eq!(all(&[&out]), ["kubectl get pods", "echo hi"]);
    }

    #[test]
    fn split_anywhere_the_same_commands() {
        let out = format!("{A}debug:/ $ {B}ls -l /tmp/caf\u{e9}\r\n{A}$ {B}whoami\r\n");
        let bytes = out.as_bytes();
        let whole = all(&[&out]);
        assert_eq!(whole, ["ls -l /tmp/caf\u{e9}", "whoami"]);
        for at in 0..bytes.len() {
            let mut c = Commands::default();
            let mut got = Vec::new();
            for piece in [&bytes[..at], &bytes[at..]] {
                for b in piece {
                    got.extend(c.feed(&[*b]));
                    // Typing right after each prompt ends.
                    if c.line.as_ref().is_some_and(|(l, _)| l.is_empty()) {
                        c.typed();
                    }
                }
            }
            assert_eq!(got, whole, "split at {at}");
        }
    }

    #[test]
    fn typed_ahead_output_is_no_command() {
        // `echo ahead` was typed while the previous command ran: its echo came before the
        // prompt, and nobody typed after it, so `ahead` (its output) is not a command.
        let mut c = Commands::default();
        let mut got = c.feed(format!("{A}$ {B}").as_bytes());
        c.typed();
        got.extend(c.feed(b"sleep 1\r\necho ahead\r\n"));
        got.extend(c.feed(format!("{A}$ {B}ahead\r\n{A}$ {B}").as_bytes()));
        assert_eq!(got, ["sleep 1"]);
    }

    #[test]
    fn the_line_as_shown_after_edits() {
        // Backspaces, a move left and an overwrite, an erase to the end, colours.
        let out = format!(
            "{A}$ {B}ech\x08\x08\x1b[Kcho  hello\x1b[2D\x1b[K\x1b[31mlo\x1b[0m\r\n{A}$ {B}"
        );
        assert_eq!(all(&[&out]), ["echo  hello"]);
        // A C mark (shells that send one before running) ends the line too.
        let out = format!("{A}$ {B}make test\x1b]133;C\x07\r\nok\r\n");
        assert_eq!(all(&[&out]), ["make test"]);
    }

    #[test]
    fn nothing_without_marks_and_long_lines_cut() {
        assert!(all(&["$ rm -rf /tmp/x\r\n", "\x1b[31mred\x1b[0m\r\n"]).is_empty());
        let long = "x".repeat(2 * MAX_COMMAND);
        let got = all(&[&format!("{A}$ {B}{long}\r\n")]);
        assert_eq!(got[0].chars().count(), MAX_COMMAND + 1);
        assert!(got[0].ends_with('…'));
        // An unfinished or overlong sequence does not swallow what follows for ever.
        let junk = format!("\x1b]{}\x07", "9".repeat(500));
        assert_eq!(all(&[&format!("{junk}{A}$ {B}id\r\n")]), ["id"]);
    }
}
