//! Placing a graph's nodes for drawing: a force-directed layout (Fruchterman and Reingold,
//! 1991) from a fixed start, so the same graph is drawn the same way on every visit.

/// Positions in the unit square's neighbourhood, one per node, for `n` nodes joined by
/// `edges` (pairs of node indexes; self-loops and repeats are harmless).
pub fn force_layout(n: usize, edges: &[(usize, usize)], iterations: usize) -> Vec<(f64, f64)> {
    if n == 0 {
        return Vec::new();
    }
    // Start on a spiral (not a circle, where opposite nodes cancel out forces exactly).
    let mut pos: Vec<(f64, f64)> = (0..n)
        .map(|i| {
            let r = 0.5 * ((i as f64 + 0.5) / n as f64).sqrt();
            let a = i as f64 * 2.399_963; // the golden angle
            (0.5 + r * a.cos(), 0.5 + r * a.sin())
        })
        .collect();
    // The ideal distance between nodes for the unit area.
    let k = (1.0 / n as f64).sqrt();
    let mut temperature = 0.1;
    let cooling = temperature / (iterations.max(1) as f64 + 1.0);
    let mut shift = vec![(0.0f64, 0.0f64); n];
    for _ in 0..iterations {
        shift.iter_mut().for_each(|d| *d = (0.0, 0.0));
        for i in 0..n {
            for j in (i + 1)..n {
                let (dx, dy) = (pos[i].0 - pos[j].0, pos[i].1 - pos[j].1);
                let dist = (dx * dx + dy * dy).sqrt().max(1e-6);
                let push = k * k / dist;
                let (ux, uy) = (dx / dist * push, dy / dist * push);
                shift[i].0 += ux;
                shift[i].1 += uy;
                shift[j].0 -= ux;
                shift[j].1 -= uy;
            }
        }
        for &(a, b) in edges {
            if a == b || a >= n || b >= n {
                continue;
            }
            let (dx, dy) = (pos[a].0 - pos[b].0, pos[a].1 - pos[b].1);
            let dist = (dx * dx + dy * dy).sqrt().max(1e-6);
            let pull = dist * dist / k;
            let (ux, uy) = (dx / dist * pull, dy / dist * pull);
            shift[a].0 -= ux;
            shift[a].1 -= uy;
            shift[b].0 += ux;
            shift[b].1 += uy;
        }
        for (p, d) in pos.iter_mut().zip(&shift) {
            let len = (d.0 * d.0 + d.1 * d.1).sqrt();
            if len > 0.0 {
                let step = len.min(temperature);
                p.0 += d.0 / len * step;
                p.1 += d.1 / len * step;
            }
            // A weak pull to the centre keeps unconnected parts from drifting apart.
            p.0 += (0.5 - p.0) * 0.01;
            p.1 += (0.5 - p.1) * 0.01;
        }
        temperature -= cooling;
    }
    pos
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dist(a: (f64, f64), b: (f64, f64)) -> f64 {
        ((a.0 - b.0).powi(2) + (a.1 - b.1).powi(2)).sqrt()
    }

    #[test]
    fn joined_nodes_end_closer_than_unjoined_ones() {
        // Two triangles, one edge between them.
        let edges = [(0, 1), (1, 2), (2, 0), (3, 4), (4, 5), (5, 3), (2, 3)];
        let pos = force_layout(6, &edges, 300);
        let within = dist(pos[0], pos[1]).max(dist(pos[4], pos[5]));
        let across = dist(pos[0], pos[5]);
        assert!(within < across, "within {within} across {across}");
        assert!(pos.iter().all(|p| p.0.is_finite() && p.1.is_finite()));
    }

    #[test]
    fn the_same_graph_is_placed_the_same_way() {
        let edges = [(0, 1), (1, 2)];
        assert_eq!(force_layout(3, &edges, 50), force_layout(3, &edges, 50));
        assert!(force_layout(0, &[], 10).is_empty());
        assert_eq!(force_layout(1, &[(0, 0), (0, 9)], 10).len(), 1);
    }
}
