//! Reading a source one record at a time, never the whole file: the elements of a top-level
//! JSON array (or of the array under a named key of a top-level object), or JSON Lines.
//!
//! A chat export is one JSON array of conversations, 175 MB for a long-time user. serde
//! hands the array's elements to a visitor one by one as it parses them, so only the
//! conversation being read is in memory. A source that ends inside a record is told from
//! one that is malformed, so the error can say the file was cut short.

use std::fmt;
use std::io::{BufRead, Read};
use std::marker::PhantomData;

use serde::de::{DeserializeOwned, DeserializeSeed, Error as _, IgnoredAny, MapAccess, SeqAccess};

use crate::admin::error::{AdminError, RecordName};
use crate::admin::import::source::{Scope, Source, Tracker, Unit, tag, tag_with};

/// Why a streamed read stopped before the end of the source.
#[derive(Debug)]
pub enum StreamError {
    /// The source ends inside a record, or before its array closes.
    Truncated,
    /// Not JSON, or not of the expected shape; serde's words, with the line and column.
    Bad(String),
    Io(std::io::Error),
}

impl From<serde_json::Error> for StreamError {
    fn from(e: serde_json::Error) -> Self {
        match e.classify() {
            serde_json::error::Category::Eof => StreamError::Truncated,
            serde_json::error::Category::Io => StreamError::Io(e.into()),
            _ => StreamError::Bad(e.to_string()),
        }
    }
}

/// Skips a UTF-8 byte order mark, which editors on Windows put in front of JSON.
pub fn skip_bom(reader: &mut impl BufRead) -> std::io::Result<()> {
    let buf = reader.fill_buf()?;
    if buf.starts_with(b"\xEF\xBB\xBF") {
        reader.consume(3);
    }
    Ok(())
}

/// Calls `each` with every element of the top-level JSON array, one at a time; when the
/// top-level value is an object, with every element of its array under the first of `keys`
/// it has. Stops early, with no error, when `each` returns false.
pub fn json_elements<T: DeserializeOwned>(
    reader: impl Read,
    expecting: &'static str,
    keys: &'static [&'static str],
    each: &mut dyn FnMut(T) -> bool,
) -> Result<(), StreamError> {
    let mut stopped = false;
    let mut de = serde_json::Deserializer::from_reader(reader);
    let elements = Elements {
        each,
        stopped: &mut stopped,
        expecting,
        keys,
        item: PhantomData,
    };
    let result = serde::Deserializer::deserialize_any(&mut de, elements).and_then(|()| de.end());
    match result {
        Ok(()) => Ok(()),
        Err(_) if stopped => Ok(()),
        Err(e) => Err(e.into()),
    }
}

struct Elements<'a, T> {
    each: &'a mut dyn FnMut(T) -> bool,
    stopped: &'a mut bool,
    expecting: &'static str,
    /// Keys of a top-level object whose array is read; empty inside it.
    keys: &'static [&'static str],
    item: PhantomData<T>,
}

impl<'de, T: DeserializeOwned> serde::de::Visitor<'de> for Elements<'_, T> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.expecting)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while let Some(item) = seq.next_element::<T>()? {
            if !(self.each)(item) {
                *self.stopped = true;
                return Err(A::Error::custom("stopped by the writer"));
            }
        }
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        if self.keys.is_empty() {
            return Err(A::Error::custom(format!(
                "found an object; expected {}",
                self.expecting
            )));
        }
        let mut found = false;
        while let Some(key) = map.next_key::<String>()? {
            if !found && self.keys.contains(&key.as_str()) {
                found = true;
                map.next_value_seed(Elements {
                    each: &mut *self.each,
                    stopped: &mut *self.stopped,
                    expecting: self.expecting,
                    keys: &[],
                    item: PhantomData,
                })?;
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        match found {
            true => Ok(()),
            false => Err(A::Error::custom(format!(
                "the object has no {} array; expected {}",
                self.keys.join(" or "),
                self.expecting
            ))),
        }
    }
}

impl<'de, T: DeserializeOwned> DeserializeSeed<'de> for Elements<'_, T> {
    type Value = ();

    fn deserialize<D: serde::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_seq(self)
    }
}

/// Reads a JSON array of records (see [`json_elements`]), turning each element into a unit
/// with `convert` and handing it to `each`. `noun` names a record in errors
/// ("conversation 4"); an element that `convert` refuses is an error naming it.
pub fn read_array<T: DeserializeOwned>(
    reader: impl BufRead,
    scope: &Scope,
    noun: &'static str,
    expecting: &'static str,
    keys: &'static [&'static str],
    convert: &mut dyn FnMut(usize, T) -> Result<Unit, String>,
    each: &mut dyn FnMut(Unit) -> bool,
) -> Result<(), AdminError> {
    let mut reader = reader;
    skip_bom(&mut reader).map_err(|e| AdminError::io(&scope.input, e))?;
    let mut tracker = Tracker::new(scope.format);
    let mut failure = None;
    let result = json_elements::<T>(reader, expecting, keys, &mut |item| {
        let number = tracker.read + 1;
        match convert(number, item) {
            Ok(unit) => {
                let name = unit.name.clone();
                let go_on = each(unit);
                tracker.good(&name);
                go_on
            }
            Err(message) => {
                failure = Some(tracker.bad(format!("{noun} {number}"), message));
                false
            }
        }
    });
    if let Some(failure) = failure {
        return Err(failure);
    }
    result.map_err(|e| match e {
        StreamError::Truncated if tracker.read == 0 => tracker.truncated(format!(
            "the file is empty or cut short: it ends before its first {noun} was read whole"
        )),
        StreamError::Truncated => tracker.truncated(format!(
            "the file is truncated: it ends in the middle of a {noun} (or before the list of \
             them closes)"
        )),
        StreamError::Bad(message) => tracker.bad(format!("{noun} {}", tracker.read + 1), message),
        StreamError::Io(e) => AdminError::io(&scope.input, e),
    })
}

/// A chat export: one JSON array of conversations, each turned into a unit by `convert`.
/// ChatGPT's and Claude's differ only in the shape of a conversation.
#[derive(Debug)]
pub struct Conversations<R, T> {
    pub reader: R,
    /// What the file should be, for the error when it is not.
    pub expecting: &'static str,
    pub convert: fn(&Scope, usize, T) -> Result<Unit, String>,
}

impl<R: BufRead + Send, T: DeserializeOwned> Source for Conversations<R, T> {
    fn read(
        self: Box<Self>,
        scope: &Scope,
        each: &mut dyn FnMut(Unit) -> bool,
    ) -> Result<(), AdminError> {
        let convert = self.convert;
        let mut convert = |number, conversation| convert(scope, number, conversation);
        let noun = "conversation";
        read_array(
            self.reader,
            scope,
            noun,
            self.expecting,
            &[],
            &mut convert,
            each,
        )
    }
}

/// Conversation `number` of a chat export from `source` (`chatgpt`, `claude`), counted, and
/// the tags of its memories (`source`, `conversation:<id>`, `title:<title>`). The tags are
/// `None` when `--conversation` leaves it out; the unit then counts it as not selected.
pub fn conversation_unit(
    scope: &Scope,
    number: usize,
    source: &str,
    id: &str,
    title: Option<&str>,
) -> (Unit, Option<Vec<String>>) {
    let mut unit = Unit::new(RecordName {
        place: format!("conversation {number}"),
        title: title.map(str::to_owned),
        id: Some(id.to_owned()),
    });
    unit.count("conversation");
    if !scope.wants_conversation(id) {
        unit.count("conversation not selected");
        return (unit, None);
    }
    unit.conversation = Some(id.to_owned());
    let tags = [
        tag(source),
        tag_with("conversation", id),
        title.and_then(|t| tag_with("title", t)),
    ];
    (unit, Some(tags.into_iter().flatten().collect()))
}

/// Reads JSON Lines: each non-blank line one record, turned into a unit by `convert` (with
/// its line number) and handed to `each`. A last line that stops inside its JSON, with no
/// newline after it, is the file cut short; any other bad line is an error naming it.
pub fn read_lines<T: DeserializeOwned>(
    mut reader: impl BufRead,
    scope: &Scope,
    convert: &mut dyn FnMut(usize, T) -> Result<Unit, String>,
    each: &mut dyn FnMut(Unit) -> bool,
) -> Result<(), AdminError> {
    skip_bom(&mut reader).map_err(|e| AdminError::io(&scope.input, e))?;
    let mut tracker = Tracker::new(scope.format);
    let mut line_no = 0;
    let mut bytes = Vec::new();
    loop {
        bytes.clear();
        let read = reader
            .read_until(b'\n', &mut bytes)
            .map_err(|e| AdminError::io(&scope.input, e))?;
        if read == 0 {
            return Ok(());
        }
        line_no += 1;
        let last = !bytes.ends_with(b"\n");
        let cut = || {
            tracker.truncated(format!(
                "the file is truncated: line {line_no} ends in the middle of a record"
            ))
        };
        let text = match std::str::from_utf8(&bytes) {
            Ok(text) => text,
            Err(e) if last && e.error_len().is_none() => return Err(cut()),
            Err(e) => {
                return Err(tracker.bad(format!("line {line_no}"), format!("not UTF-8 text: {e}")));
            }
        };
        if text.trim().is_empty() {
            continue;
        }
        let item: T = match serde_json::from_str(text) {
            Ok(item) => item,
            Err(e) if last && e.is_eof() => return Err(cut()),
            Err(e) => return Err(tracker.bad(format!("line {line_no}"), e)),
        };
        let unit = convert(line_no, item).map_err(|m| tracker.bad(format!("line {line_no}"), m))?;
        let name: RecordName = unit.name.clone();
        if !each(unit) {
            return Ok(());
        }
        tracker.good(&name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn numbers(text: &str, keys: &'static [&'static str]) -> Result<Vec<u32>, StreamError> {
        let mut got = Vec::new();
        json_elements::<u32>(text.as_bytes(), "numbers", keys, &mut |n| {
            got.push(n);
            true
        })
        .map(|()| got)
    }

    #[test]
    fn elements_come_one_by_one_and_a_cut_is_told_from_a_mistake() {
        assert_eq!(numbers(" [1, 2,3] ", &[]).unwrap(), [1, 2, 3]);
        assert_eq!(
            numbers(r#"{"n": 1, "results": [4, 5], "x": {}}"#, &["results"]).unwrap(),
            [4, 5]
        );
        assert!(matches!(numbers("[1, 2", &[]), Err(StreamError::Truncated)));
        assert!(matches!(
            numbers("[1, 2,", &[]),
            Err(StreamError::Truncated)
        ));
        assert!(matches!(numbers("[1, x]", &[]), Err(StreamError::Bad(_))));
        assert!(matches!(numbers("[1] [2]", &[]), Err(StreamError::Bad(_))));
        assert!(
            matches!(numbers(r#"{"a": []}"#, &["results"]), Err(StreamError::Bad(m)) if m.contains("no results array"))
        );
        assert!(matches!(numbers("{}", &[]), Err(StreamError::Bad(_))));
        let mut seen = 0;
        let stopped = json_elements::<u32>("[1, 2, 3".as_bytes(), "n", &[], &mut |_| {
            seen += 1;
            false
        });
        assert!(stopped.is_ok() && seen == 1, "stopping early is no error");
    }
}
