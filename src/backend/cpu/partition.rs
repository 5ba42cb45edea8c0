//! The row partition: the training rows grouped by tree node, each node owning a contiguous
//! range of one array. Splitting a node partitions its range stably (rows keep ascending
//! order, which keeps later histogram reads sequential), nodes of one step in parallel.

use rayon::prelude::*;

use crate::tree::NO_CHILD;

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
    /// Partitions `rows` stably in place as the row loop of `partition_in_place` would, the
    /// right rows in order in `right` (as long as `rows`), returning the left count; None
    /// where the router has no faster way for the whole node (the row loop then runs).
    fn partition(&self, _rows: &mut [u32], _right: &mut [u32]) -> Option<usize> {
        None
    }
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

thread_local! {
    /// Each thread's buffer for the right-going rows of the node it partitions.
    static RIGHT_ROWS: std::cell::RefCell<Vec<u32>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Stable in-place partition of `rows`; returns how many went left. The router's whole-node
/// way when it has one (the bins' vector partition, `partition_simd`), else this row loop.
/// Branch-free: every row is written both to the left run (in place, never ahead of the read
/// position) and to the right buffer, and only the matching count advances, since a split
/// sends rows either way about equally often and a branch on it would mispredict half the time.
fn partition_in_place<R: RowRouter>(router: &R, rows: &mut [u32]) -> usize {
    RIGHT_ROWS.with_borrow_mut(|buffer| {
        // Grown, never cleared: every slot read below was written first in this call.
        if buffer.len() < rows.len() {
            buffer.resize(rows.len(), 0);
        }
        let right = &mut buffer[..rows.len()];
        if let Some(n_left) = router.partition(rows, right) {
            let n_right = rows.len() - n_left;
            rows[n_left..].copy_from_slice(&right[..n_right]);
            return n_left;
        }
        let (mut n_left, mut n_right) = (0, 0);
        for i in 0..rows.len() {
            if let Some(&ahead) = rows.get(i + PREFETCH_DISTANCE) {
                router.prefetch(ahead);
            }
            let r = rows[i];
            let left = router.goes_left(r);
            rows[n_left] = r;
            right[n_right] = r;
            n_left += left as usize;
            n_right += !left as usize;
        }
        rows[n_left..].copy_from_slice(&right[..n_right]);
        n_left
    })
}

/// `rows` is consecutive blocks of `parts[i].0` rows, each with its `parts[i].1` left rows
/// first; moves all left rows to the front in block order and returns how many there are.
/// Halves are gathered recursively, then the first half's right rows and the second half's
/// left rows swap places by one rotation: O(n log blocks) moves, no scratch.
fn gather_left(rows: &mut [u32], parts: &[(usize, usize)]) -> usize {
    if let [(_, n_left)] = parts {
        return *n_left;
    }
    let mid = parts.len() / 2;
    let split = parts[..mid].iter().map(|p| p.0).sum();
    let (a, b) = rows.split_at_mut(split);
    let (left_a, left_b) = rayon::join(|| gather_left(a, &parts[..mid]), || gather_left(b, &parts[mid..]));
    rotate_left(&mut rows[left_a..split + left_b], split - left_a);
    left_a + left_b
}

/// Rotations at least this long are done by every thread.
const PARALLEL_ROTATION: usize = 1 << 20;

/// `rows.rotate_left(k)`; a long one as three reversals split across threads, since the
/// first rotation of a large node moves about half its rows, and one thread doing it was the
/// partition's longest serial step at millions of rows.
fn rotate_left(rows: &mut [u32], k: usize) {
    if rows.len() < PARALLEL_ROTATION {
        rows.rotate_left(k);
        return;
    }
    let (a, b) = rows.split_at_mut(k);
    rayon::join(|| reverse(a), || reverse(b));
    reverse(rows);
}

/// `rows.reverse()`, the mirrored pairs swapped in parallel chunks.
fn reverse(rows: &mut [u32]) {
    const CHUNK: usize = 1 << 14;
    let half = rows.len() / 2;
    let (front, rest) = rows.split_at_mut(half);
    let skip = rest.len() - half;
    let back = &mut rest[skip..];
    // Chunk i of the front mirrors chunk i of the back counted from its end.
    front.par_chunks_mut(CHUNK).zip(back.par_rchunks_mut(CHUNK)).for_each(|(x, y)| {
        let n = x.len();
        for i in 0..n {
            std::mem::swap(&mut x[i], &mut y[n - 1 - i]);
        }
    });
}

impl RowPartition {
    pub fn new(rows: Vec<u32>) -> Self {
        let n = rows.len();
        RowPartition { rows, range: vec![(0, n)] }
    }

    /// The tree's nodes were renumbered: node `n` is now `ids[n]` (`NO_CHILD`: gone). The
    /// rows of each of the `merged` nodes (new ids) were split among children that are gone:
    /// they go back to ascending order.
    pub fn renumber(&mut self, ids: &[u32], merged: &[u32]) {
        let len = ids.iter().filter(|&&id| id != NO_CHILD).map(|&id| id as usize + 1).max().unwrap_or(0);
        let mut range = vec![(0, 0); len];
        for (&id, &r) in ids.iter().zip(&self.range) {
            if id != NO_CHILD {
                range[id as usize] = r;
            }
        }
        self.range = range;
        for &m in merged {
            let (a, b) = self.range[m as usize];
            self.rows[a..b].sort_unstable();
        }
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
    pub fn split<R: RowRouter>(&mut self, jobs: Vec<SplitJob<R>>) {
        self.split_observed(jobs, |_, _, _| {});
    }

    /// Splits several nodes at once, handing each piece of a node just partitioned (the job's
    /// index, the piece's left rows, its right rows) to `observe` while the rows' data is still
    /// in cache. A node is one piece, or several (partitioned in parallel) when it is large.
    pub fn split_observed<R, F>(&mut self, jobs: Vec<SplitJob<R>>, observe: F)
    where
        R: RowRouter,
        F: Fn(usize, &[u32], &[u32]) + Sync,
    {
        let mut order: Vec<usize> = (0..jobs.len()).collect();
        // By start, then end: a node with no rows (a worker of a distributed fit may hold
        // none of a node's rows) comes before the node that starts where it does.
        order.sort_by_key(|&i| self.range[jobs[i].node as usize]);
        // Carve disjoint slices of the row array, one per job.
        let mut slices = Vec::with_capacity(jobs.len());
        let mut rest: &mut [u32] = &mut self.rows;
        let mut consumed = 0;
        for &i in &order {
            let (a, b) = self.range[jobs[i].node as usize];
            let (_, tail) = rest.split_at_mut(a - consumed);
            let (mine, tail) = tail.split_at_mut(b - a);
            slices.push(mine);
            rest = tail;
            consumed = b;
        }
        let piece = |i: usize, rows: &mut [u32]| {
            let n_left = partition_in_place(&jobs[i].router, rows);
            observe(i, &rows[..n_left], &rows[n_left..]);
            (rows.len(), n_left)
        };
        let counts: Vec<usize> = order
            .par_iter()
            .zip(slices.into_par_iter())
            .map(|(&i, rows)| {
                if rows.len() <= PARALLEL_ROWS {
                    return piece(i, rows).1;
                }
                // A large node: partition chunks in parallel, each stably in place, then
                // gather every chunk's left rows before every chunk's right rows (still stable)
                // by rotations, without a copy of the node's rows.
                let parts: Vec<(usize, usize)> = rows.par_chunks_mut(PARALLEL_ROWS).map(|c| piece(i, c)).collect();
                gather_left(rows, &parts)
            })
            .collect();
        for (&i, n_left) in order.iter().zip(counts) {
            let j = &jobs[i];
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
    /// Adds `value(node)` to `out[row]` for every row of every node in `nodes`. The nodes must
    /// be disjoint (e.g. a tree's leaves), each with its rows ascending (as [`RowPartition::split`]
    /// keeps them). In parallel over blocks of `out`, each block taking its rows of every node
    /// by binary search: a thread writes only its own cache lines. (Parallel over nodes, every
    /// thread wrote all over `out`, into lines the other threads were writing too.)
    pub fn scatter_add(&self, nodes: &[u32], value: impl Fn(u32) -> f32 + Sync, out: &mut [f32]) {
        const BLOCK: usize = 1 << 16;
        let values: Vec<f32> = nodes.iter().map(|&n| value(n)).collect();
        let len = out.len();
        // What the binary searches rely on (a pass over the rows, in parallel).
        let ordered = nodes.par_iter().all(|&node| {
            let rows = self.rows_of(node);
            rows.is_sorted() && rows.last().is_none_or(|&r| (r as usize) < len)
        });
        assert!(ordered, "a node's rows are not ascending, or lie outside the output");
        out.par_chunks_mut(BLOCK).enumerate().for_each(|(b, block)| {
            let (start, end) = ((b * BLOCK) as u32, (b * BLOCK + block.len()) as u32);
            for (&node, &v) in nodes.iter().zip(&values) {
                let rows = self.rows_of(node);
                let (lo, hi) = (rows.partition_point(|&r| r < start), rows.partition_point(|&r| r < end));
                for &r in &rows[lo..hi] {
                    block[(r - start) as usize] += v;
                }
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
    fn observers_see_every_row_of_each_piece_on_its_side() {
        use std::sync::Mutex;
        const N: u32 = 2 * PARALLEL_ROWS as u32 + 5;
        let mut p = RowPartition::new((0..N).collect());
        p.split(vec![SplitJob { node: 0, left: 1, right: 2, router: (|r| r < N / 2) as fn(u32) -> bool }]);
        let seen: Vec<Mutex<(Vec<u32>, Vec<u32>)>> = (0..2).map(|_| Mutex::default()).collect();
        let router = (|r| r % 3 == 0) as fn(u32) -> bool;
        p.split_observed(
            vec![SplitJob { node: 2, left: 5, right: 6, router }, SplitJob { node: 1, left: 3, right: 4, router }],
            |job, left, right| {
                assert!(left.iter().all(|&r| router(r)) && right.iter().all(|&r| !router(r)));
                let mut s = seen[job].lock().unwrap();
                s.0.extend_from_slice(left);
                s.1.extend_from_slice(right);
            },
        );
        // Jobs are reported by their index in the call, whatever order they run in.
        for (job, (left, right)) in [(0, (5, 6)), (1, (3, 4))] {
            let (mut l, mut r) = std::mem::take(&mut *seen[job].lock().unwrap());
            l.sort_unstable();
            r.sort_unstable();
            assert_eq!(l, p.rows_of(left));
            assert_eq!(r, p.rows_of(right));
        }
    }

    #[test]
    fn scatter_add_by_blocks_adds_each_nodes_value_to_its_rows() {
        // Three blocks and a part; one node with no rows.
        let n = 3 * (1u32 << 16) + 1234;
        let mut p = RowPartition::new((0..n).collect());
        p.split(vec![SplitJob { node: 0, left: 1, right: 2, router: (|r| r % 5 < 2) as fn(u32) -> bool }]);
        p.split(vec![
            SplitJob { node: 1, left: 3, right: 4, router: (|r| r < 70_000) as fn(u32) -> bool },
            SplitJob { node: 2, left: 5, right: 6, router: (|r| r > u32::MAX - 1) as fn(u32) -> bool },
        ]);
        let leaves = [3, 4, 5, 6];
        let value = |leaf: u32| leaf as f32 * 0.25 + 1.0;
        let mut got: Vec<f32> = (0..n).map(|r| r as f32 * 1e-3).collect();
        let mut want = got.clone();
        for leaf in leaves {
            for &r in p.rows_of(leaf) {
                want[r as usize] += value(leaf);
            }
        }
        p.scatter_add(&leaves, value, &mut got);
        assert!(got == want);
        assert!(p.rows_of(5).is_empty());
    }

    #[test]
    fn long_rotations_across_threads_equal_the_slices() {
        for (len, k) in [(PARALLEL_ROTATION, 1), (PARALLEL_ROTATION + 3, 7777), (3 * PARALLEL_ROTATION + 1, 2_000_001)]
        {
            let mut got: Vec<u32> = (0..len as u32).collect();
            let mut want = got.clone();
            rotate_left(&mut got, k);
            want.rotate_left(k);
            assert!(got == want, "rotation of {len} by {k}");
        }
    }

    #[test]
    fn large_nodes_split_in_parallel_stay_stable() {
        // Seven chunks: the gathering recursion splits them unevenly.
        let n = 6 * PARALLEL_ROWS as u32 + 17;
        let mut p = RowPartition::new((0..n).collect());
        p.split(vec![SplitJob { node: 0, left: 1, right: 2, router: (|r| r % 7 < 3) as fn(u32) -> bool }]);
        let want_left: Vec<u32> = (0..n).filter(|r| r % 7 < 3).collect();
        let want_right: Vec<u32> = (0..n).filter(|r| r % 7 >= 3).collect();
        assert_eq!(p.rows_of(1), want_left.as_slice());
        assert_eq!(p.rows_of(2), want_right.as_slice());
    }
}
