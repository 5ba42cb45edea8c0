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

/// One node to split: rows for which `goes_left` holds go to `left`.
pub struct SplitJob<F> {
    pub node: u32,
    pub left: u32,
    pub right: u32,
    pub goes_left: F,
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
    pub fn split<F: Fn(u32) -> bool + Sync>(&mut self, mut jobs: Vec<SplitJob<F>>) {
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
                let mut right = Vec::new();
                let mut n_left = 0;
                for i in 0..rows.len() {
                    let r = rows[i];
                    if (j.goes_left)(r) {
                        rows[n_left] = r;
                        n_left += 1;
                    } else {
                        right.push(r);
                    }
                }
                rows[n_left..].copy_from_slice(&right);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_is_stable_and_complete() {
        let mut p = RowPartition::new((0..10).collect());
        p.split(vec![SplitJob { node: 0, left: 1, right: 2, goes_left: (|r| r % 3 == 0) as fn(u32) -> bool }]);
        assert_eq!(p.rows_of(1), &[0, 3, 6, 9]);
        assert_eq!(p.rows_of(2), &[1, 2, 4, 5, 7, 8]);
        p.split(vec![
            SplitJob { node: 1, left: 3, right: 4, goes_left: (|r| r > 4) as fn(u32) -> bool },
            SplitJob { node: 2, left: 5, right: 6, goes_left: (|r| r > 4) as fn(u32) -> bool },
        ]);
        assert_eq!(p.rows_of(3), &[6, 9]);
        assert_eq!(p.rows_of(4), &[0, 3]);
        assert_eq!(p.rows_of(5), &[5, 7, 8]);
        assert_eq!(p.rows_of(6), &[1, 2, 4]);
    }
}
