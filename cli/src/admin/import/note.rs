//! One basic-memory note read apart: its front matter, observations, relations and the
//! rest of its text.
//!
//! The front matter is read as the small part of YAML basic-memory writes (`key: value`,
//! quoted or not, and lists inline `[a, b]` or as `- item` lines); anything else in it is
//! ignored rather than refused, since only `title`, `type`, `permalink` and `tags` are
//! used. A front matter that opens and never closes is a note cut short.

/// What a note holds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Note {
    pub title: Option<String>,
    /// `type`: the node's type (person, project, note, ...).
    pub kind: Option<String>,
    pub permalink: Option<String>,
    pub tags: Vec<String>,
    pub observations: Vec<Observation>,
    pub relations: Vec<Relation>,
    /// The text that is neither front matter, observation nor relation; `None` when only
    /// headings and blank lines are left.
    pub prose: Option<String>,
}

/// `- [category] text #tag (context)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observation {
    pub category: Option<String>,
    /// The text as written after the category, tags and context included.
    pub text: String,
    /// The `#tags` in it, without `#`.
    pub tags: Vec<String>,
}

/// `- relation_type [[Target]] (context)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Relation {
    pub kind: String,
    pub target: String,
}

/// Why a note cannot be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoteError {
    /// The front matter opens with `---` and never closes: the file was cut short.
    Unclosed,
}

pub fn parse_note(text: &str) -> Result<Note, NoteError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let (front, body) = split_front_matter(text)?;
    let mut note = Note::default();
    if let Some(front) = front {
        read_front_matter(front, &mut note);
    }
    read_body(body, &mut note);
    Ok(note)
}

fn split_front_matter(text: &str) -> Result<(Option<&str>, &str), NoteError> {
    let mut lines = text.split_inclusive('\n');
    match lines.next() {
        Some(first) if first.trim_end() == "---" => {}
        _ => return Ok((None, text)),
    }
    let start = text.find('\n').map_or(text.len(), |i| i + 1);
    let mut at = start;
    for line in lines {
        if matches!(line.trim_end(), "---" | "...") {
            return Ok((Some(&text[start..at]), &text[at + line.len()..]));
        }
        at += line.len();
    }
    Err(NoteError::Unclosed)
}

fn read_front_matter(front: &str, note: &mut Note) {
    let mut list_key: Option<String> = None;
    for line in front.lines() {
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        if let Some(item) = trimmed
            .strip_prefix("- ")
            .or(trimmed.strip_prefix('-').filter(|r| r.is_empty()))
        {
            if list_key.as_deref() == Some("tags") {
                note.tags.extend(tag_item(item));
            }
            continue;
        }
        let Some((key, value)) = trimmed.split_once(':') else {
            continue;
        };
        let (key, value) = (key.trim().to_lowercase(), value.trim());
        list_key = value.is_empty().then(|| key.clone());
        let scalar = || Some(unquote(value)).filter(|v| !v.is_empty());
        match key.as_str() {
            "title" => note.title = scalar(),
            "type" => note.kind = scalar(),
            "permalink" => note.permalink = scalar(),
            "tags" if !value.is_empty() => {
                let inner = value
                    .strip_prefix('[')
                    .and_then(|v| v.strip_suffix(']'))
                    .unwrap_or(value);
                note.tags.extend(inner.split(',').filter_map(tag_item));
            }
            _ => {}
        }
    }
}

fn tag_item(item: &str) -> Option<String> {
    let tag = unquote(item.trim());
    let tag = tag.trim_start_matches('#').trim();
    (!tag.is_empty()).then(|| tag.to_owned())
}

fn unquote(value: &str) -> String {
    let v = value.trim();
    for q in ['"', '\''] {
        if v.len() >= 2 && v.starts_with(q) && v.ends_with(q) {
            return v[1..v.len() - 1].to_owned();
        }
    }
    v.to_owned()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Section {
    Observations,
    Relations,
    Other,
}

fn read_body(body: &str, note: &mut Note) {
    let mut section = Section::Other;
    let mut fenced = false;
    let mut prose: Vec<&str> = Vec::new();
    for line in body.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            fenced = !fenced;
        }
        if fenced || trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            prose.push(line);
            continue;
        }
        if let Some(heading) = heading(trimmed) {
            section = match heading.to_lowercase().as_str() {
                "observations" => Section::Observations,
                "relations" => Section::Relations,
                _ => Section::Other,
            };
            if section == Section::Other {
                prose.push(line);
            }
            continue;
        }
        let item = trimmed.strip_prefix("- ").or(trimmed.strip_prefix("* "));
        if let Some(item) = item.map(str::trim) {
            if let Some(r) = relation(item) {
                note.relations.push(r);
                continue;
            }
            if let Some(o) = observation(item, section == Section::Observations) {
                note.observations.push(o);
                continue;
            }
        }
        prose.push(line);
    }
    let said = prose
        .iter()
        .any(|l| !l.trim().is_empty() && heading(l.trim()).is_none());
    note.prose = said.then(|| prose.join("\n").trim().to_owned());
}

fn heading(line: &str) -> Option<&str> {
    let rest = line.trim_start_matches('#');
    (rest.len() < line.len() && rest.starts_with(' ')).then(|| rest.trim())
}

/// `[category] text`, or (under `## Observations`) any item that is no task box.
fn observation(item: &str, in_section: bool) -> Option<Observation> {
    let (category, text) = match item.strip_prefix('[') {
        Some(rest) if !rest.starts_with('[') => {
            let (category, text) = rest.split_once(']')?;
            // `- [ ] buy milk` and `- [x] done` are task boxes, not categories.
            if matches!(category.trim(), "" | "x" | "X") {
                return None;
            }
            (Some(category.trim().to_owned()), text.trim())
        }
        _ if in_section => (None, item),
        _ => return None,
    };
    if text.is_empty() {
        return None;
    }
    let tags = text
        .split_whitespace()
        .filter_map(|w| w.strip_prefix('#'))
        .map(|t| t.trim_end_matches(|c: char| !c.is_alphanumeric() && c != '-' && c != '_'))
        .filter(|t| !t.is_empty())
        .map(str::to_owned)
        .collect();
    Some(Observation {
        category,
        text: text.to_owned(),
        tags,
    })
}

/// `relation_type [[Target]]`, with nothing after the link but a `(context)`: a link in the
/// middle of a sentence is the sentence's, not a relation.
fn relation(item: &str) -> Option<Relation> {
    let open = item.find("[[")?;
    let close = open + item[open..].find("]]")?;
    let after = item[close + 2..].trim();
    if !(after.is_empty() || (after.starts_with('(') && after.ends_with(')'))) {
        return None;
    }
    let target = item[open + 2..close].split('|').next()?.trim();
    let kind = item[..open].trim();
    if target.is_empty() || kind.starts_with('[') || kind.chars().count() > 64 {
        return None;
    }
    Some(Relation {
        kind: if kind.is_empty() { "links_to" } else { kind }.to_owned(),
        target: target.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOTE: &str = "---\ntitle: Coffee Brewing\ntype: note\npermalink: coffee/brewing\ntags:\n- coffee\n- '#brewing'\n---\n\n# Coffee Brewing\n\nI brew every morning.\n\n## Observations\n- [method] Pour over is clearer #taste (tried it)\n- Water at 94C\n- [ ] buy filters\n\n## Relations\n- relates_to [[Tea Brewing]]\n- [[Grinders|grinder]] (see)\n- I met [[Ana]] at the shop\n";

    #[test]
    fn a_note_reads_into_its_parts() {
        let note = parse_note(NOTE).unwrap();
        assert_eq!(note.title.as_deref(), Some("Coffee Brewing"));
        assert_eq!(note.permalink.as_deref(), Some("coffee/brewing"));
        assert_eq!(note.tags, ["coffee", "brewing"]);
        assert_eq!(note.observations.len(), 2, "{:?}", note.observations);
        assert_eq!(note.observations[0].category.as_deref(), Some("method"));
        assert_eq!(
            note.observations[0].text,
            "Pour over is clearer #taste (tried it)"
        );
        assert_eq!(note.observations[0].tags, ["taste"]);
        assert_eq!(note.observations[1].category, None);
        assert_eq!(
            note.relations,
            [
                Relation {
                    kind: "relates_to".into(),
                    target: "Tea Brewing".into()
                },
                Relation {
                    kind: "links_to".into(),
                    target: "Grinders".into()
                },
            ]
        );
        let prose = note.prose.unwrap();
        assert!(prose.contains("I brew every morning."), "{prose}");
        assert!(
            prose.contains("[ ] buy filters") && prose.contains("I met [[Ana]]"),
            "{prose}"
        );
        assert!(!prose.contains("Pour over"), "{prose}");
    }

    #[test]
    fn an_unclosed_front_matter_is_a_cut_and_none_is_fine() {
        assert_eq!(parse_note("---\ntitle: A\n"), Err(NoteError::Unclosed));
        let plain = parse_note("# Just text\n\ninline tags: [a]\n").unwrap();
        assert_eq!(plain.title, None);
        assert!(plain.prose.is_some());
        assert_eq!(
            parse_note("---\ntags: [a, \"b\"]\n---\n# Only\n")
                .unwrap()
                .prose,
            None
        );
    }
}
