//! Reading a `cortex export` file (JSON Lines, docs/FORMAT.md) line by line.
//!
//! A file cut short (its last line ends without a newline, inside a record) is refused with
//! the last line read whole and the last memory; a file is checked for that before anything
//! of it is written. A markdown export is refused at its first line.

use std::io::BufRead;

use cortex_app::transfer::format::{FORMAT_NAME, FORMAT_VERSION, Header, Line, MARKDOWN_TITLE};

use crate::admin::error::{AdminError, LastGood};
use crate::admin::import::writer::BATCH;

/// One read of the file: a line's text, or its end.
enum Raw {
    /// The file has no more lines.
    End,
    /// A whole line (or a last line without its newline), as text.
    Text(String),
}

/// Reads an export front to back and remembers the last line it read whole, so that a file
/// cut short says where it broke: its last line then ends without a newline, in the middle
/// of a JSON object or of a UTF-8 character.
#[derive(Debug)]
pub struct ExportReader<R> {
    reader: R,
    /// The number of the last line read.
    line_no: usize,
    last_good: LastGood,
}

impl<R: BufRead> ExportReader<R> {
    pub fn new(reader: R) -> Self {
        Self {
            reader,
            line_no: 0,
            last_good: LastGood::default(),
        }
    }

    fn truncated(&self) -> AdminError {
        AdminError::Truncated {
            line: self.line_no,
            last_good: self.last_good,
            written_through: None,
        }
    }

    /// The next line; a last line cut inside a UTF-8 character is [`AdminError::Truncated`].
    fn next_line(&mut self) -> Result<Raw, AdminError> {
        let mut bytes = Vec::new();
        let read = self
            .reader
            .read_until(b'\n', &mut bytes)
            .map_err(|e| AdminError::line(self.line_no + 1, e.to_string()))?;
        if read == 0 {
            return Ok(Raw::End);
        }
        self.line_no += 1;
        match String::from_utf8(bytes) {
            Ok(text) => Ok(Raw::Text(text)),
            // Cut inside a character: only possible where the file ends.
            Err(e) if e.utf8_error().error_len().is_none() && !e.as_bytes().ends_with(b"\n") => {
                Err(self.truncated())
            }
            Err(e) => Err(AdminError::line(
                self.line_no,
                format!("not UTF-8 text: {}", e.utf8_error()),
            )),
        }
    }

    /// Parses a line; a last line that ends before its JSON does is the file cut short.
    fn parse(&self, text: &str) -> Result<Line, AdminError> {
        serde_json::from_str(text).map_err(|e| match e.is_eof() && !text.ends_with('\n') {
            true => self.truncated(),
            false => AdminError::line(self.line_no, format!("not a valid export line: {e}")),
        })
    }

    /// Reads the header line. A markdown export, an empty file and anything else that is not
    /// an export of a version this build reads are refused, each saying so.
    pub fn read_header(&mut self) -> Result<Header, AdminError> {
        let Raw::Text(first) = self.next_line()? else {
            return Err(AdminError::Format(format!(
                "the file is empty; a file written by `cortex export` starts with a \
                 {FORMAT_NAME} header line"
            )));
        };
        if first
            .trim_start_matches('\u{feff}')
            .starts_with(MARKDOWN_TITLE)
        {
            return Err(AdminError::MarkdownExport);
        }
        let not_a_header = || {
            AdminError::Format(format!(
                "line 1 is not a {FORMAT_NAME} header; is this a file written by `cortex export`? \
                 (another tool's export is read with --from: chatgpt, claude, mcp-memory, mem0, \
                 basic-memory)"
            ))
        };
        let header = match self.parse(&first) {
            Ok(Line::Header(h)) => h,
            Err(e @ AdminError::Truncated { .. }) => return Err(e),
            _ => return Err(not_a_header()),
        };
        if header.format != FORMAT_NAME {
            return Err(not_a_header());
        }
        if header.version > FORMAT_VERSION {
            return Err(AdminError::Format(format!(
                "the file is format version {}; this build reads up to {FORMAT_VERSION}",
                header.version
            )));
        }
        self.last_good.line = self.line_no;
        Ok(header)
    }

    /// Reads up to [`BATCH`] lines, parsed, each with its number; blank lines are skipped.
    /// Empty at the end of the file.
    pub fn read_batch(&mut self) -> Result<Vec<(usize, Line)>, AdminError> {
        let mut batch = Vec::new();
        while batch.len() < BATCH {
            let Raw::Text(text) = self.next_line()? else {
                break;
            };
            if text.trim().is_empty() {
                continue;
            }
            let line = self.parse(&text)?;
            if matches!(line, Line::Header(_)) {
                return Err(AdminError::line(self.line_no, "a second header"));
            }
            self.last_good.line = self.line_no;
            if let Line::Memory(m) = &line {
                self.last_good.memory = Some((self.line_no, m.id));
            }
            batch.push((self.line_no, line));
        }
        Ok(batch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: &str = r#"{"type":"header","format":"cortex-export","version":1,"exported_at":"2024-01-01T00:00:00Z","vectors":false,"users":["u"]}"#;
    const MEMORY: &str = r#"{"type":"memory","id":"00000000-0000-0000-0000-000000000001","user_id":"u","content":"é","kind":"fact","created_at":"2024-01-01T00:00:00Z"}"#;

    fn read_all(text: &[u8]) -> Result<usize, AdminError> {
        let mut reader = ExportReader::new(text);
        reader.read_header()?;
        let mut lines = 0;
        loop {
            let batch = reader.read_batch()?;
            if batch.is_empty() {
                return Ok(lines);
            }
            lines += batch.len();
        }
    }

    #[test]
    fn only_a_last_line_that_stops_inside_its_json_or_a_character_is_a_cut() {
        let whole = format!("{HEADER}\r\n{MEMORY}\n\n{MEMORY}");
        assert_eq!(
            read_all(whole.as_bytes()).unwrap(),
            2,
            "CRLF, blank, no final newline"
        );

        let at_e = MEMORY.find('é').unwrap() + 1;
        for cut in [&MEMORY[..20], &MEMORY[..MEMORY.len() - 1]] {
            let text = format!("{HEADER}\n{MEMORY}\n{cut}");
            let err = read_all(text.as_bytes()).unwrap_err();
            let AdminError::Truncated {
                line, last_good, ..
            } = err
            else {
                panic!("{err}");
            };
            assert_eq!((line, last_good.line), (3, 2));
            assert_eq!(last_good.memory.map(|m| m.0), Some(2));
        }
        let mut bytes = format!("{HEADER}\n").into_bytes();
        bytes.extend_from_slice(&MEMORY.as_bytes()[..at_e]);
        assert!(matches!(
            read_all(&bytes),
            Err(AdminError::Truncated {
                line: 2,
                last_good: LastGood {
                    line: 1,
                    memory: None
                },
                ..
            })
        ));

        // A bad last line that is not cut short, and a cut in a line followed by others,
        // are errors of their line.
        let bad = format!("{HEADER}\n{{\"type\":\"bogus\"}}");
        assert!(matches!(
            read_all(bad.as_bytes()),
            Err(AdminError::Line { line: 2, .. })
        ));
        let inner = format!("{HEADER}\n{}\n{MEMORY}\n", &MEMORY[..20]);
        assert!(matches!(
            read_all(inner.as_bytes()),
            Err(AdminError::Line { line: 2, .. })
        ));
    }

    #[test]
    fn a_markdown_export_is_known_by_its_first_line() {
        let text = format!(
            "{}\n\nExported 2024-01-01 00:00 UTC\n",
            cortex_app::transfer::format::MARKDOWN_TITLE
        );
        assert!(matches!(
            ExportReader::new(text.as_bytes()).read_header(),
            Err(AdminError::MarkdownExport)
        ));
    }
}
