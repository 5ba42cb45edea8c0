//! The row partition: the training rows grouped by tree node, each node owning a contiguous
//! range of one array. Splitting a node partitions its range stably (rows keep ascending
//! order, which keeps later histogram reads sequential), nodes of one step in parallel.

use rayon::prelude::*;

/// Rows by node: node `n` owns `rows[range[n].0..range[n].1]`.
#[derive(Clone, Debug)]
pub struct RowPartition {
    pub rows: Vec<u32>,
    pub range: Vec<(usize, usize)>,
}

/// Decides which child each row of a node goes to.
pub trait RowRouter: Sync {
    fn goes_left(&self, row: u32) -> bool;
    /// A hint that `row` will be asked about soon (to fetch its data ahead).
    fn prefetch(&self, _row: u32) {}
}

impl<F: Fn(u32) -> bool + Sync> RowRouter for F {
    fn goes_left(&self, row: u32) -> bool {
        self(row)
    }
}

/// One node to split: rows the router sends left go to `left`.
pub struct SplitJob<R> {
    pub node: u32,
    pub left: u32,
    pub right: u32,
    pub router: R,
}

/// Rows ahead whose data the router is asked to prefetch.
const PREFETCH_DISTANCE: usize = 16;

/// Nodes with more rows than this are partitioned by several threads.
const PARALLEL_ROWS: usize = 1 << 16;

/// Stable in-place partition of `rows`; returns how many went left.
fn partition_in_place<R: RowRouter>(router: &R, rows: &mut [u32]) -> usize {
    let mut right = Vec::new();
    let mut n_left = 0;
    for i in 0..rows.len() {
        if let Some(&ahead) = rows.get(i + PREFETCH_DISTANCE) {
            router.prefetch(ahead);
        }
        let r = rows[i];
        if router.goes_left(r) {
            rows[n_left] = r;
            n_left += 1;
        } else {
            right.push(r);
        }
    }
    rows[n_left..].copy_from_slice(&right);
    n_left
}

impl RowPartition {
    pub fn new(rows: Vec<u32>) -> Self {
        let n = rows.len();
        RowPartition { rows, range: vec![(0, n)] }
    }

    pub fn rows_of(&self, node: u32) -> &[u32] {
        let (a, b) = self.range[node as usize];
        &self.rows[a..b]
    }

    pub fn len_of(&self, node: u32) -> usize {
        let (a, b) = self.range[node as usize];
        b - a
    }

    /// Splits several nodes at once.
    pub fn split<R: RowRouter>(&mut self, mut jobs: Vec<SplitJob<R>>) {
        jobs.sort_by_key(|j| self.range[j.node as usize].0);
        // Carve disjoint slices of the row array, one per job.
        let mut slices = Vec::with_capacity(jobs.len());
        let mut rest: &mut [u32] = &mut self.rows;
        let mut consumed = 0;
        for j in &jobs {
            let (a, b) = self.range[j.node as usize];
            let (_, tail) = rest.split_at_mut(a - consumed);
            let (mine, tail) = tail.split_at_mut(b - a);
            slices.push(mine);
            rest = tail;
            consumed = b;
        }
        let counts: Vec<usize> = jobs
            .par_iter()
            .zip(slices.into_par_iter())
            .map(|(j, rows)| {
                if rows.len() <= PARALLEL_ROWS {
                    return partition_in_place(&j.router, rows);
                }
                // A large node: partition chunks in parallel, then lay out every chunk's left
                // rows followed by every chunk's right rows (still stable).
                let parts: Vec<(usize, Vec<u32>)> = rows
                    .par_chunks_mut(PARALLEL_ROWS)
                    .map(|chunk| {
                        let n_left = partition_in_place(&j.router, chunk);
                        (n_left, chunk.to_vec())
                    })
                    .collect();
                let mut at = 0;
                for (n_left, chunk) in &parts {
                    rows[at..at + n_left].copy_from_slice(&chunk[..*n_left]);
                    at += n_left;
                }
                let n_left = at;
                for (n_left, chunk) in &parts {
                    rows[at..at + chunk.len() - n_left].copy_from_slice(&chunk[*n_left..]);
                    at += chunk.len() - n_left;
                }
                n_left
            })
            .collect();
        for (j, n_left) in jobs.iter().zip(counts) {
            let (a, b) = self.range[j.node as usize];
            let need = j.left.max(j.right) as usize + 1;
            if self.range.len() < need {
                self.range.resize(need, (0, 0));
            }
            self.range[j.left as usize] = (a, a + n_left);
            self.range[j.right as usize] = (a + n_left, b);
        }
    }
}

impl RowPartition {
    /// Adds `value(node)` to `out[row]` for every row of every node in `nodes`, nodes in
    /// parallel. The nodes must be disjoint (e.g. a tree's leaves).
    pub fn scatter_add(&self, nodes: &[u32], value: impl Fn(u32) -> f32 + Sync, out: &mut [f32]) {
        struct Out(*mut f32);
        // SAFETY: shared between threads only to write distinct elements (see below).
        unsafe impl Sync for Out {}
        let len = out.len();
        let base = Out(out.as_mut_ptr());
        let base = &base;
        nodes.par_iter().for_each(|&node| {
            let v = value(node);
            for &r in self.rows_of(node) {
                assert!((r as usize) < len, "row {r} outside the output");
                // SAFETY: in bounds (asserted); the rows of one node are distinct and disjoint
                // nodes own disjoint rows (the partition is a permutation), so no element is
                // written by two threads, and `out` is borrowed mutably for the whole call.
                unsafe { *base.0.add(r as usize) += v };
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_is_stable_and_complete() {
        let mut p = RowPartition::new((0..10).collect());
        p.split(vec![SplitJob { node: 0, left: 1, right: 2, router: (|r| r % 3 == 0) as fn(u32) -> bool }]);
        assert_eq!(p.rows_of(1), &[0, 3, 6, 9]);
        assert_eq!(p.rows_of(2), &[1, 2, 4, 5, 7, 8]);
        p.split(vec![
            SplitJob { node: 1, left: 3, right: 4, router: (|r| r > 4) as fn(u32) -> bool },
            SplitJob { node: 2, left: 5, right: 6, router: (|r| r > 4) as fn(u32) -> bool },
        ]);
        assert_eq!(p.rows_of(3), &[6, 9]);
        assert_eq!(p.rows_of(4), &[0, 3]);
        assert_eq!(p.rows_of(5), &[5, 7, 8]);
        assert_eq!(p.rows_of(6), &[1, 2, 4]);
    }

    #[test]
    fn large_nodes_split_in_parallel_stay_stable() {
        let n = 3 * PARALLEL_ROWS as u32 + 17;
        let mut p = RowPartition::new((0..n).collect());
        p.split(vec![SplitJob { node: 0, left: 1, right: 2, router: (|r| r % 7 < 3) as fn(u32) -> bool }]);
        let want_left: Vec<u32> = (0..n).filter(|r| r % 7 < 3).collect();
        let want_right: Vec<u32> = (0..n).filter(|r| r % 7 >= 3).collect();
        assert_eq!(p.rows_of(1), want_left.as_slice());
        assert_eq!(p.rows_of(2), want_right.as_slice());
    }
}
