//! A small layered layout for Thread Architecture Diagrams: stages in columns by their
//! downstream depth, hosts as horizontal bands (node boundaries), so no system `dot` is
//! needed to draw a model.

use crate::model::Model;
use std::collections::{BTreeMap, BTreeSet};

/// Grid positions of the stages of a model.
#[derive(Debug, Clone, PartialEq)]
pub struct Layout {
    /// Column of each stage (index as in `Model::stages`): longest downstream path from a
    /// source, ignoring the edges that close cycles.
    pub col: Vec<usize>,
    /// Vertical slot of each stage inside its host band; cells with fewer entries than the
    /// band has rows are centred, hence fractional.
    pub slot: Vec<f64>,
    /// Which band (index into `bands`) each stage is in.
    pub band_of: Vec<usize>,
    /// Host bands, top to bottom (ascending host ID).
    pub bands: Vec<Band>,
    /// Downstream edges (from, to) that close a cycle; drawn as arcs.
    pub back_edges: BTreeSet<(usize, usize)>,
    /// For each forward edge spanning more than one column, the waypoints it passes through
    /// in the columns between (Sugiyama's dummy nodes), so that it never crosses a box.
    pub routes: BTreeMap<(usize, usize), Vec<Waypoint>>,
    /// Number of columns.
    pub columns: usize,
}

/// A slot reserved in an intermediate column for a long edge.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Waypoint {
    /// The column.
    pub col: usize,
    /// The band (the source stage's).
    pub band: usize,
    /// The slot inside the band, as for stages.
    pub slot: f64,
}

/// One host: a node-boundary rectangle.
#[derive(Debug, Clone, PartialEq)]
pub struct Band {
    /// The host ID.
    pub host: u32,
    /// Number of rows (stages or waypoints).
    pub rows: usize,
    /// Leftmost column used.
    pub min_col: usize,
    /// Rightmost column used.
    pub max_col: usize,
}

/// Computes the layout; deterministic (ties broken by file order). Linear in the stages and
/// edges (plus the waypoints of long edges), up to the sorting of each cell.
pub fn layout(model: &Model) -> Layout {
    let n = model.stages.len();
    let edges = model.downstream_indices();
    let back_edges = find_back_edges(&edges);
    let col = longest_path_columns(&edges, &back_edges);
    let columns = col.iter().max().map_or(0, |c| c + 1);
    let by_host = model.stages_by_host();
    let mut band_of = vec![0; n];
    for (b, (_, members)) in by_host.iter().enumerate() {
        for &i in members {
            band_of[i] = b;
        }
    }
    let mut nodes = Nodes {
        col: col.clone(),
        band: band_of,
        preds: vec![Vec::new(); n],
    };
    let chains = nodes.add_waypoints(&edges, &back_edges);
    let cells = nodes.ordered_cells();
    let (bands, slot) = place(&cells, &by_host, nodes.col.len());
    let routes = chains
        .into_iter()
        .map(|(edge, chain)| {
            let points = chain
                .into_iter()
                .map(|w| Waypoint {
                    col: nodes.col[w],
                    band: nodes.band[w],
                    slot: slot[w],
                })
                .collect();
            (edge, points)
        })
        .collect();
    Layout {
        slot: slot[..n].to_vec(),
        band_of: nodes.band[..n].to_vec(),
        col,
        bands,
        back_edges,
        routes,
        columns,
    }
}

/// The nodes of the layered graph: 0..n are the stages, the rest waypoints of long edges (in
/// the band of the edge's source).
struct Nodes {
    col: Vec<usize>,
    band: Vec<usize>,
    /// Each node's predecessors along forward edges (always in earlier columns).
    preds: Vec<Vec<usize>>,
}

/// The nodes of each non-empty (column, band) cell, keyed in the order cells are placed.
type Cells = BTreeMap<(usize, usize), Vec<usize>>;

impl Nodes {
    /// A waypoint in every column a forward edge spans; returns each long edge's chain.
    fn add_waypoints(
        &mut self,
        edges: &[Vec<usize>],
        back_edges: &BTreeSet<(usize, usize)>,
    ) -> BTreeMap<(usize, usize), Vec<usize>> {
        let mut chains = BTreeMap::new();
        for (u, out) in edges.iter().enumerate() {
            for &v in out {
                let (cu, cv) = (self.col[u], self.col[v]);
                if back_edges.contains(&(u, v)) || cv <= cu {
                    continue;
                }
                let mut prev = u;
                let mut chain = Vec::new();
                for c in cu + 1..cv {
                    let w = self.col.len();
                    self.col.push(c);
                    self.band.push(self.band[u]);
                    self.preds.push(vec![prev]);
                    chain.push(w);
                    prev = w;
                }
                self.preds[v].push(prev);
                if !chain.is_empty() {
                    chains.insert((u, v), chain);
                }
            }
        }
        chains
    }

    /// The cells, each ordered by the barycentre of its nodes' predecessors in the same band;
    /// ties by file order, waypoints after stages. Cells are visited column by column, so a
    /// node's predecessors are ranked before it.
    fn ordered_cells(&self) -> Cells {
        let total = self.col.len();
        let mut cells = Cells::new();
        for w in 0..total {
            cells
                .entry((self.col[w], self.band[w]))
                .or_default()
                .push(w);
        }
        let mut key: Vec<f64> = (0..total).map(|w| w as f64).collect();
        let mut rank = vec![0f64; total];
        for (&(_, b), cell) in cells.iter_mut() {
            for &w in cell.iter() {
                let same_band: Vec<f64> = self.preds[w]
                    .iter()
                    .filter(|&&p| self.band[p] == b)
                    .map(|&p| rank[p])
                    .collect();
                if !same_band.is_empty() {
                    key[w] =
                        same_band.iter().sum::<f64>() / same_band.len() as f64 + w as f64 * 1e-6;
                }
            }
            cell.sort_by(|x, y| key[*x].total_cmp(&key[*y]));
            for (r, &w) in cell.iter().enumerate() {
                rank[w] = r as f64;
            }
        }
        cells
    }
}

/// The host bands and every node's slot: a band has as many rows as its fullest cell, and a
/// cell with fewer nodes is centred.
fn place(cells: &Cells, by_host: &[(u32, Vec<usize>)], total: usize) -> (Vec<Band>, Vec<f64>) {
    let mut bands: Vec<Band> = by_host
        .iter()
        .map(|&(host, _)| Band {
            host,
            rows: 0,
            min_col: usize::MAX,
            max_col: 0,
        })
        .collect();
    for (&(c, b), cell) in cells {
        let band = &mut bands[b];
        band.rows = band.rows.max(cell.len());
        band.min_col = band.min_col.min(c);
        band.max_col = band.max_col.max(c);
    }
    let mut slot = vec![0f64; total];
    for (&(_, b), cell) in cells {
        let offset = (bands[b].rows - cell.len()) as f64 / 2.0;
        for (r, &w) in cell.iter().enumerate() {
            slot[w] = r as f64 + offset;
        }
    }
    for band in &mut bands {
        if band.min_col == usize::MAX {
            band.min_col = 0;
        }
    }
    (bands, slot)
}

/// Longest-path layering over the acyclic part (Kahn's algorithm, file order).
fn longest_path_columns(edges: &[Vec<usize>], back_edges: &BTreeSet<(usize, usize)>) -> Vec<usize> {
    let n = edges.len();
    let mut indegree = vec![0usize; n];
    for (u, out) in edges.iter().enumerate() {
        for &v in out {
            if !back_edges.contains(&(u, v)) {
                indegree[v] += 1;
            }
        }
    }
    let mut col = vec![0usize; n];
    let mut ready: Vec<usize> = (0..n).filter(|&v| indegree[v] == 0).collect();
    let mut next = 0;
    while next < ready.len() {
        let u = ready[next];
        next += 1;
        for &v in &edges[u] {
            if back_edges.contains(&(u, v)) {
                continue;
            }
            col[v] = col[v].max(col[u] + 1);
            indegree[v] -= 1;
            if indegree[v] == 0 {
                ready.push(v);
            }
        }
    }
    col
}

/// Depth-first search from the sources (then any unvisited stage), in file order; an edge
/// to a stage still on the stack closes a cycle.
fn find_back_edges(edges: &[Vec<usize>]) -> BTreeSet<(usize, usize)> {
    let n = edges.len();
    let mut has_pred = vec![false; n];
    for out in edges {
        for &v in out {
            has_pred[v] = true;
        }
    }
    let roots: Vec<usize> = (0..n).filter(|&v| !has_pred[v]).chain(0..n).collect();
    // 0 = unvisited, 1 = on stack, 2 = done
    let mut state = vec![0u8; n];
    let mut back = BTreeSet::new();
    for root in roots {
        if state[root] != 0 {
            continue;
        }
        let mut stack = vec![(root, 0usize)];
        state[root] = 1;
        while let Some(&mut (u, ref mut next)) = stack.last_mut() {
            if *next < edges[u].len() {
                let v = edges[u][*next];
                *next += 1;
                match state[v] {
                    0 => {
                        state[v] = 1;
                        stack.push((v, 0));
                    }
                    1 => {
                        back.insert((u, v));
                    }
                    _ => {}
                }
            } else {
                state[u] = 2;
                stack.pop();
            }
        }
    }
    back
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Scheduling, Stage};

    fn chain(names: &[(&str, &[&str], u32)]) -> Model {
        let mut m = Model {
            name: "t".into(),
            ..Model::default()
        };
        for (name, down, host) in names {
            let mut s = Stage::new(*name, Scheduling::General);
            s.downstream = down.iter().map(|d| d.to_string()).collect();
            s.host = *host;
            m.stages.push(s);
        }
        m
    }

    #[test]
    fn columns_follow_longest_downstream_path() {
        let m = chain(&[("a", &["b", "c"], 1), ("b", &["c"], 1), ("c", &[], 1)]);
        let l = layout(&m);
        assert_eq!(l.col, vec![0, 1, 2]);
        assert!(l.back_edges.is_empty());
    }

    #[test]
    fn cycles_are_broken_and_laid_out() {
        let m = chain(&[("a", &["b"], 1), ("b", &["c"], 1), ("c", &["b"], 1)]);
        let l = layout(&m);
        assert_eq!(l.col, vec![0, 1, 2]);
        assert_eq!(
            l.back_edges.iter().copied().collect::<Vec<_>>(),
            vec![(2, 1)]
        );
    }

    #[test]
    fn long_edges_get_waypoints_in_the_columns_they_cross() {
        let m = chain(&[
            ("a", &["b", "d"], 1),
            ("b", &["c"], 1),
            ("c", &["d"], 1),
            ("d", &[], 1),
        ]);
        let l = layout(&m);
        assert_eq!(l.col, vec![0, 1, 2, 3]);
        let route = &l.routes[&(0, 3)];
        assert_eq!(route.iter().map(|w| w.col).collect::<Vec<_>>(), vec![1, 2]);
        assert_eq!(
            l.bands[0].rows, 2,
            "the waypoints take a row beside b and c"
        );
        for w in route {
            assert_ne!(w.slot, l.slot[1]);
            assert_ne!(w.slot, l.slot[2]);
        }
    }

    #[test]
    fn hosts_become_bands_with_their_own_rows() {
        let m = chain(&[("a", &["b", "c"], 1), ("b", &[], 1), ("c", &[], 2)]);
        let l = layout(&m);
        assert_eq!(l.bands.len(), 2);
        assert_eq!(
            (
                l.bands[0].host,
                l.bands[0].rows,
                l.bands[0].min_col,
                l.bands[0].max_col
            ),
            (1, 1, 0, 1)
        );
        assert_eq!(
            (l.bands[1].host, l.bands[1].rows, l.bands[1].min_col),
            (2, 1, 1)
        );
        assert_eq!(l.band_of, vec![0, 0, 1]);
    }
}
