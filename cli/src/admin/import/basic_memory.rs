//! `--from basic-memory`: a folder of basic-memory notes (markdown, one file a note). A
//! note has YAML front matter (`title`, `type`, `permalink`, `tags`), observations
//! (`- [category] text #tag (context)`) and relations (`- relation_type [[Target]]`),
//! found by their form anywhere in the note and, under `## Observations`, any list item.
//!
//! basic-memory is a graph already, so a note becomes what the MCP memory server's entity
//! does: a node (its title, typed by `type`, with its permalink as an alias), each
//! observation a memory about it, each relation a memory with its edge, and the rest of the
//! note's text one memory of its own (docs/FORMAT.md). Notes are read one at a time in
//! path order; hidden folders (`.git`, `.obsidian`) are skipped.

use std::fs;
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use cortex_core::memory::MemoryKind;
use cortex_core::structure::{MemoryStructure, StructureEntity, StructureRelation};

use crate::admin::error::{AdminError, RecordName};
use crate::admin::import::graph::{Graph, label_words};
use crate::admin::import::note::{Note, NoteError, parse_note};
use crate::admin::import::source::{Draft, Scope, Source, Tracker, Unit, tag, tag_with};

/// The folder (or one note).
#[derive(Debug)]
pub struct BasicMemory {
    pub root: PathBuf,
}

impl Source for BasicMemory {
    fn read(
        self: Box<Self>,
        scope: &Scope,
        each: &mut dyn FnMut(Unit) -> bool,
    ) -> Result<(), AdminError> {
        let (base, files) = notes(&self.root)?;
        let mut tracker = Tracker::new(scope.format);
        let mut graph = Graph::default();
        for relative in files {
            let path = base.join(&relative);
            let shown = relative.to_string_lossy().replace('\\', "/");
            let place = format!("note {shown}");
            let bytes = fs::read(&path).map_err(|e| AdminError::io(&path, e))?;
            let text = match String::from_utf8(bytes) {
                Ok(text) => text,
                Err(e) if e.utf8_error().error_len().is_none() => {
                    return Err(tracker.truncated(format!(
                        "{place} is cut short: it ends in the middle of a character"
                    )));
                }
                Err(e) => {
                    return Err(tracker.bad(place, format!("not UTF-8 text: {}", e.utf8_error())));
                }
            };
            let note = parse_note(&text).map_err(|e| match e {
                NoteError::Unclosed => tracker.truncated(format!(
                    "{place} is cut short: its front matter (the block that opens with `---`) \
                     never closes"
                )),
            })?;
            let at = fs::metadata(&path)
                .and_then(|m| m.modified())
                .map(DateTime::<Utc>::from)
                .unwrap_or(scope.undated);
            let unit = unit_of(scope, &mut graph, &shown, note, at)
                .map_err(|m| tracker.bad(format!("note {shown}"), m))?;
            let name = unit.name.clone();
            if !each(unit) {
                return Ok(());
            }
            tracker.good(&name);
        }
        Ok(())
    }
}

/// The folder the notes are under and every note's path in it, in path order: `root`
/// itself when it is a note file.
fn notes(root: &Path) -> Result<(PathBuf, Vec<PathBuf>), AdminError> {
    let meta = fs::metadata(root).map_err(|e| AdminError::io(root, e))?;
    if meta.is_file() {
        let base = root.parent().map(Path::to_path_buf).unwrap_or_default();
        let name = root.file_name().map(PathBuf::from).unwrap_or_default();
        return Ok((base, vec![name]));
    }
    let mut found = Vec::new();
    let mut folders = vec![PathBuf::new()];
    while let Some(folder) = folders.pop() {
        let dir = root.join(&folder);
        let entries = fs::read_dir(&dir).map_err(|e| AdminError::io(&dir, e))?;
        for entry in entries {
            let entry = entry.map_err(|e| AdminError::io(&dir, e))?;
            let name = entry.file_name();
            if name.to_string_lossy().starts_with('.') {
                continue;
            }
            // Not followed through links: a link to a parent folder would never end.
            let kind = entry
                .file_type()
                .map_err(|e| AdminError::io(entry.path(), e))?;
            let relative = folder.join(&name);
            if kind.is_dir() {
                folders.push(relative);
            } else if kind.is_file() && relative.extension().is_some_and(|x| x == "md") {
                found.push(relative);
            }
        }
    }
    found.sort();
    Ok((root.to_path_buf(), found))
}

fn unit_of(
    scope: &Scope,
    graph: &mut Graph,
    shown: &str,
    note: Note,
    at: DateTime<Utc>,
) -> Result<Unit, String> {
    let stem = Path::new(shown)
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let title = note.title.clone().unwrap_or(stem);
    let key = note
        .permalink
        .clone()
        .unwrap_or_else(|| shown.trim_end_matches(".md").to_owned());
    let mut unit = Unit::new(RecordName {
        place: format!("note {shown}"),
        title: Some(title.clone()),
        id: note.permalink.clone(),
    });
    unit.count("note read");
    let user = scope.user_for(None);
    let entity = StructureEntity {
        name: title.clone(),
        entity_type: Some(note.kind.clone().unwrap_or_else(|| "note".into())),
        aliases: note.permalink.iter().cloned().collect(),
    };
    graph.entity(&mut unit, scope, &user, &entity, at)?;
    let about = MemoryStructure {
        subject: Some(title.clone()),
        entities: vec![entity.clone()],
        ..MemoryStructure::default()
    };
    let mut base_tags: Vec<String> = tag("basic-memory").into_iter().collect();
    base_tags.extend(note.tags.iter().filter_map(|t| tag(t)));
    let draft = |text: String, kind: MemoryKind, tags: Vec<String>, parts: &[&str]| Draft {
        id: scope.id(&user, &[&[key.as_str()], parts].concat()),
        user: user.clone(),
        text,
        kind,
        tags,
        created_at: at,
        expires_at: None,
    };
    for o in &note.observations {
        // A category that is a kind (`[decision]`, `[preference]`) files it as one.
        let kind = o
            .category
            .as_deref()
            .and_then(|c| c.parse::<MemoryKind>().ok())
            .unwrap_or(MemoryKind::Note);
        let mut tags = base_tags.clone();
        tags.extend(o.category.as_deref().and_then(|c| tag_with("category", c)));
        tags.extend(o.tags.iter().filter_map(|t| tag(t)));
        let text = format!("{title}: {}", o.text);
        let memory = draft(text, kind, tags, &["observation", &o.text]);
        graph.memory(&mut unit, scope, memory, &about)?;
    }
    for r in &note.relations {
        let text = format!("{title} {} {}", label_words(&r.kind), r.target);
        let memory = draft(
            text,
            MemoryKind::Fact,
            base_tags.clone(),
            &["relation", &r.kind, &r.target],
        );
        let structure = MemoryStructure {
            relations: vec![StructureRelation {
                from: title.clone(),
                label: r.kind.clone(),
                to: r.target.clone(),
            }],
            ..about.clone()
        };
        graph.memory(&mut unit, scope, memory, &structure)?;
    }
    if let Some(prose) = &note.prose {
        let memory = draft(prose.clone(), MemoryKind::Note, base_tags, &["text", prose]);
        graph.memory(&mut unit, scope, memory, &about)?;
    }
    Ok(unit)
}
