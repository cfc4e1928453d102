//! `--from mcp-memory`: the MCP reference memory server's `memory.jsonl`
//! (`@modelcontextprotocol/server-memory`), a knowledge graph one JSON object a line:
//! `{"type":"entity","name","entityType","observations":[..]}` and
//! `{"type":"relation","from","to","relationType"}`.
//!
//! Every entity becomes a node of the user's graph, every observation a memory about it
//! (its subject) and every relation a memory with that relation as an edge, all written as
//! memorize writes a caller's structure: `recall_about` then answers for every entity the
//! file had. The file holds no dates: its modification time dates every memory.

use std::io::BufRead;

use cortex_core::memory::MemoryKind;
use cortex_core::structure::{MemoryStructure, StructureEntity, StructureRelation};
use serde::Deserialize;

use crate::admin::error::{AdminError, RecordName};
use crate::admin::import::graph::{Graph, label_words};
use crate::admin::import::source::{Draft, Scope, Source, Unit, tag};
use crate::admin::import::stream::read_lines;

#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
enum Item {
    Entity {
        name: String,
        #[serde(rename = "entityType", default)]
        entity_type: Option<String>,
        #[serde(default)]
        observations: Vec<String>,
    },
    Relation {
        from: String,
        to: String,
        #[serde(rename = "relationType")]
        relation_type: String,
    },
}

/// The file, read from `reader`.
#[derive(Debug)]
pub struct McpMemory<R> {
    pub reader: R,
}

impl<R: BufRead + Send> Source for McpMemory<R> {
    fn read(
        self: Box<Self>,
        scope: &Scope,
        each: &mut dyn FnMut(Unit) -> bool,
    ) -> Result<(), AdminError> {
        let mut graph = Graph::default();
        let mut convert = |line: usize, item: Item| unit_of(scope, &mut graph, line, item);
        read_lines(self.reader, scope, &mut convert, each)
    }
}

fn unit_of(scope: &Scope, graph: &mut Graph, line: usize, item: Item) -> Result<Unit, String> {
    let user = scope.user_for(None);
    let at = scope.undated;
    let draft = |text: String, parts: &[&str]| Draft {
        id: scope.id(&user, parts),
        user: user.clone(),
        text,
        kind: MemoryKind::Fact,
        tags: tag("mcp-memory").into_iter().collect(),
        created_at: at,
        expires_at: None,
    };
    match item {
        Item::Entity {
            name,
            entity_type,
            observations,
        } => {
            let mut unit = Unit::new(RecordName {
                place: format!("line {line}"),
                title: Some(format!("entity {name}")),
                id: None,
            });
            unit.count("entity read");
            let entity = StructureEntity {
                name: name.clone(),
                entity_type,
                aliases: Vec::new(),
            };
            graph.entity(&mut unit, scope, &user, &entity, at)?;
            let about = MemoryStructure {
                subject: Some(name.clone()),
                entities: vec![entity],
                ..MemoryStructure::default()
            };
            for observation in &observations {
                // An observation is written about its entity and rarely names it: "Speaks
                // Spanish". Said with the name, it is recalled by it too.
                let text = format!("{name}: {observation}");
                let memory = draft(text, &["observation", &name, observation]);
                graph.memory(&mut unit, scope, memory, &about)?;
            }
            Ok(unit)
        }
        Item::Relation {
            from,
            to,
            relation_type,
        } => {
            let mut unit = Unit::new(RecordName {
                place: format!("line {line}"),
                title: Some(format!("relation {from} {relation_type} {to}")),
                id: None,
            });
            unit.count("relation read");
            let text = format!("{from} {} {to}", label_words(&relation_type));
            let memory = draft(text, &["relation", &from, &relation_type, &to]);
            let structure = MemoryStructure {
                subject: Some(from.clone()),
                relations: vec![StructureRelation {
                    from,
                    label: relation_type,
                    to,
                }],
                ..MemoryStructure::default()
            };
            graph.memory(&mut unit, scope, memory, &structure)?;
            Ok(unit)
        }
    }
}
