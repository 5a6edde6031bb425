//! The commands a recording's shell ran: its markers labelled `$ <command line>`, which the
//! relay writes for each command a marked prompt ran. Read without indexing the recording:
//! only the header and the lines that may be such markers are decoded.

use breakglass_shared::recording::{self, CastError, Code};

/// One command line the shell ran.
#[derive(Debug, Clone, PartialEq)]
pub struct Command {
    /// When it ran: its marker's recording time, in seconds.
    pub time: f64,
    /// The command line as the terminal showed it, without the marker's `$ `.
    pub line: String,
}

/// The commands of `cast` (asciicast v2 text), in the recording's order.
pub fn commands(cast: &str) -> Result<Vec<Command>, CastError> {
    let mut lines = cast.lines().filter(|l| !l.trim().is_empty());
    let mut kept = String::new();
    if let Some(header) = lines.next() {
        kept.push_str(header);
        kept.push('\n');
    }
    // Output, nearly all of a recording, is skipped by a substring test instead of decoded: a
    // command's marker holds the string "m" and a string starting with `$ `. A quote inside
    // another line's string is escaped (`\"`), so it seldom matches; when it does, the parse
    // below reads the line and its code drops it.
    for line in lines.filter(|l| l.contains("\"m\"") && l.contains("\"$ ")) {
        kept.push_str(line);
        kept.push('\n');
    }
    let (_, events) = recording::parse(&kept)?;
    Ok(events
        .into_iter()
        .filter(|e| e.code == Code::Marker)
        .filter_map(|e| {
            let line = e.data.strip_prefix("$ ")?;
            Some(Command {
                time: e.time,
                line: line.to_string(),
            })
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_command_markers_in_order() {
        // As the server writes them: a blank after each comma.
        let cast = concat!(
            "{\"version\": 2, \"width\": 80, \"height\": 24}\n",
            "[0.5, \"m\", \"active\"]\n",
            "[1.25, \"o\", \"debug $ \"]\n",
            "[2.000001, \"m\", \"$ kubectl get pods\"]\n",
            "[2.000002, \"o\", \"\\r\\nNAME READY\\r\\n\"]\n",
            // Output that looks like a marker is output.
            "[2.5, \"o\", \"\\\"m\\\", \\\"$ no\"]\n",
            "[3, \"o\", \"\\\"$ no \\\"m\"]\n",
            "[3.5, \"m\", \"resized: 120x30\"]\n",
            "\n",
            "[4.75,\"m\",\"$ echo listed-$((6*7))\"]\n",
            "[5, \"m\", \"ended: UserEnded\"]\n",
        );
        assert_eq!(
            commands(cast),
            Ok(vec![
                Command {
                    time: 2.000001,
                    line: "kubectl get pods".into()
                },
                Command {
                    time: 4.75,
                    line: "echo listed-$((6*7))".into()
                },
            ])
        );
    }

    #[test]
    fn a_recording_without_commands_or_header() {
        let header = "{\"version\": 2, \"width\": 80, \"height\": 24}\n";
        assert_eq!(
            commands(&format!("{header}[1.0, \"o\", \"$ ls\\r\\n\"]\n")),
            Ok(vec![])
        );
        assert_eq!(commands(""), Err(CastError::Empty));
        assert!(matches!(
            commands("not a cast\n[1.0, \"m\", \"$ ls\"]\n"),
            Err(CastError::BadLine { line: 1, .. })
        ));
    }
}
