//! `/graph`: the entity graph as a picture to pan and zoom (`/assets/graph.js`), each
//! entity a link to its dossier (`/entity`), and the same entities as a table below.

use std::collections::HashMap;

use axum::extract::State;
use axum::response::Html;
use cortex_core::records::{Entity, EntityEdge, EntityId};
use cortex_core::{transfer::Record, transfer::RecordKind, transfer::TransferStore};
use maud::{Markup, html};

use crate::error::WebError;
use crate::html::{entity_href, label, layout};
use crate::layout::force_layout;
use crate::security::CurrentSession;
use crate::state::WebState;

/// The drawing's size in SVG units.
const WIDTH: f64 = 1000.0;
const HEIGHT: f64 = 680.0;
const PAD: f64 = 60.0;
/// Records read per store call.
const PAGE: usize = 500;
/// Records of one kind read at most: past it the page says the graph is cut.
const MAX_RECORDS: u64 = 200_000;
const LAYOUT_ITERATIONS: usize = 300;
/// Entity types get one of this many colours (classes `t0`..`t7` in the stylesheet).
const COLOURS: usize = 8;

/// One user's whole graph, as the store holds it.
#[derive(Debug, Default)]
struct Graph {
    entities: Vec<Entity>,
    edges: Vec<EntityEdge>,
    /// Memories (live or not) linked to each entity.
    links: HashMap<EntityId, u64>,
    /// A kind had more than [`MAX_RECORDS`] records.
    cut: bool,
}

async fn read_graph(store: &dyn TransferStore, user: &str) -> Result<Graph, WebError> {
    let mut graph = Graph::default();
    for kind in [RecordKind::Entity, RecordKind::Edge, RecordKind::Link] {
        let mut offset = 0u64;
        loop {
            let page = store.records(user, kind, offset, PAGE).await?;
            if page.is_empty() {
                break;
            }
            offset += page.len() as u64;
            for record in page {
                match record {
                    Record::Entity(e) => graph.entities.push(e),
                    Record::Edge(e) => graph.edges.push(e),
                    Record::Link(l) => *graph.links.entry(l.entity_id).or_default() += 1,
                    _ => {}
                }
            }
            if offset >= MAX_RECORDS {
                graph.cut = true;
                break;
            }
        }
    }
    Ok(graph)
}

pub async fn page(
    State(state): State<WebState>,
    current: CurrentSession,
) -> Result<Html<String>, WebError> {
    let engine = state.engine().await?;
    let graph = read_graph(engine.store.as_ref(), current.session.user()).await?;
    let body = if graph.entities.is_empty() {
        html! {
            p.empty {
                "No entities yet. They come from memories stored with entities and relations \
                 (memorize's " code { "entities" } " and " code { "relations" } " arguments) \
                 or, with the graph layer on, from the model."
            }
        }
    } else {
        drawing(&graph, state.config.graph_entities)
    };
    Ok(Html(
        layout("Graph", Some(&current.session), body).into_string(),
    ))
}

/// The best-connected `max` entities (relationships and memories), then by name.
fn chosen(graph: &Graph, max: usize) -> Vec<&Entity> {
    let mut degree: HashMap<EntityId, u64> = graph.links.clone();
    for e in &graph.edges {
        *degree.entry(e.source).or_default() += 1;
        *degree.entry(e.target).or_default() += 1;
    }
    let mut entities: Vec<&Entity> = graph.entities.iter().collect();
    entities.sort_by(|a, b| {
        let (da, db) = (degree.get(&a.id), degree.get(&b.id));
        db.cmp(&da).then_with(|| a.name.cmp(&b.name))
    });
    entities.truncate(max);
    entities
}

fn drawing(graph: &Graph, max: usize) -> Markup {
    let shown = chosen(graph, max);
    let index: HashMap<EntityId, usize> =
        shown.iter().enumerate().map(|(i, e)| (e.id, i)).collect();
    let edges: Vec<(&EntityEdge, usize, usize)> = graph
        .edges
        .iter()
        .filter_map(|e| Some((e, *index.get(&e.source)?, *index.get(&e.target)?)))
        .collect();
    let pairs: Vec<(usize, usize)> = edges.iter().map(|&(_, a, b)| (a, b)).collect();
    let unit = force_layout(shown.len(), &pairs, LAYOUT_ITERATIONS);
    let place = fit(&unit);
    let names: HashMap<EntityId, &str> = graph
        .entities
        .iter()
        .map(|e| (e.id, e.name.as_str()))
        .collect();
    let name_of = |id: &EntityId| names.get(id).copied().unwrap_or("?");
    html! {
        p.summary {
            (graph.entities.len()) " entities, " (graph.edges.len()) " relationships."
            @if shown.len() < graph.entities.len() { " The picture shows the " (shown.len()) " best connected." }
            @if graph.cut { " The store holds more than the page reads; the picture is cut." }
            " Drag to pan, scroll or use the buttons to zoom; click an entity for its dossier."
        }
        div.graph-controls {
            button type="button" id="zoom-in" { "Zoom in" }
            button type="button" id="zoom-out" { "Zoom out" }
            button type="button" id="zoom-reset" { "Reset" }
        }
        svg #graph.graph viewBox={ "0 0 " (WIDTH) " " (HEIGHT) } data-viewbox={ "0 0 " (WIDTH) " " (HEIGHT) } role="img" aria-label="The entity graph" {
            g.edges {
                @for (e, a, b) in &edges {
                    @let ((x1, y1), (x2, y2)) = (place[*a], place[*b]);
                    line.edge x1=(x1) y1=(y1) x2=(x2) y2=(y2) {
                        title { (name_of(&e.source)) " " (label(&e.label)) " " (name_of(&e.target)) }
                    }
                    text.edge-label x=((x1 + x2) / 2.0) y=((y1 + y2) / 2.0) text-anchor="middle" { (label(&e.label)) }
                }
            }
            g.nodes {
                @for (i, entity) in shown.iter().enumerate() {
                    @let (x, y) = place[i];
                    a.node href=(entity_href(&entity.name)) {
                        circle class={ "node " (colour(entity)) } cx=(x) cy=(y) r="9" {
                            title { (entity.name) @if let Some(t) = &entity.entity_type { " (" (t) ")" } }
                        }
                        text.node-label x=(x) y=(y - 13.0) text-anchor="middle" { (entity.name) }
                    }
                }
            }
        }
        script src="/assets/graph.js" defer {}
        table.entities {
            thead { tr { th { "Entity" } th { "Type" } th { "Also called" } th.num { "Memories" } } }
            tbody {
                @for entity in &shown {
                    tr {
                        td { a href=(entity_href(&entity.name)) { (entity.name) } }
                        td { (entity.entity_type.as_deref().unwrap_or("")) }
                        td { (entity.aliases.join(", ")) }
                        td.num { (graph.links.get(&entity.id).copied().unwrap_or(0)) }
                    }
                }
            }
        }
    }
}

/// The unit-square layout stretched over the drawing, inside its padding.
fn fit(unit: &[(f64, f64)]) -> Vec<(f64, f64)> {
    let (mut x0, mut y0, mut x1, mut y1) = (f64::MAX, f64::MAX, f64::MIN, f64::MIN);
    for &(x, y) in unit {
        x0 = x0.min(x);
        y0 = y0.min(y);
        x1 = x1.max(x);
        y1 = y1.max(y);
    }
    let sx = if x1 > x0 {
        (WIDTH - 2.0 * PAD) / (x1 - x0)
    } else {
        0.0
    };
    let sy = if y1 > y0 {
        (HEIGHT - 2.0 * PAD) / (y1 - y0)
    } else {
        0.0
    };
    unit.iter()
        .map(|&(x, y)| {
            let px = if sx > 0.0 {
                PAD + (x - x0) * sx
            } else {
                WIDTH / 2.0
            };
            let py = if sy > 0.0 {
                PAD + (y - y0) * sy
            } else {
                HEIGHT / 2.0
            };
            ((px * 10.0).round() / 10.0, (py * 10.0).round() / 10.0)
        })
        .collect()
}

/// A colour class per entity type, the same type always the same colour.
fn colour(entity: &Entity) -> String {
    let t = entity.entity_type.as_deref().unwrap_or("");
    let h = t.bytes().fold(0usize, |h, b| {
        h.wrapping_mul(31).wrapping_add(usize::from(b))
    });
    format!("t{}", h % COLOURS)
}
