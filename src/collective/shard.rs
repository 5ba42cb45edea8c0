//! A worker's share of a distributed fit: its collective and where its rows sit among all
//! the fit's rows. Everything keyed by a row (row sampling, the cut-point sample) uses the
//! row's global index, so a row is treated alike whichever worker holds it.

use super::{Collective, Solo};
use crate::error::{Error, Result};

/// Where a worker's rows sit in the whole training set: runs of consecutive global rows,
/// in the worker's own row order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RowSpans {
    /// `(first global row, length)` of each run.
    spans: Vec<(u64, u64)>,
    /// Rows of every worker together.
    n_global: u64,
}

impl RowSpans {
    /// All `n` rows, on one worker.
    pub fn whole(n: usize) -> Self {
        RowSpans { spans: vec![(0, n as u64)], n_global: n as u64 }
    }

    /// Runs of `(first global row, length)` out of `n_global` rows; they may not overlap.
    pub fn new(spans: Vec<(u64, u64)>, n_global: u64) -> Result<Self> {
        let mut sorted = spans.clone();
        sorted.sort_unstable();
        for w in sorted.windows(2) {
            if w[0].0 + w[0].1 > w[1].0 {
                return Err(Error::data(format!("row spans {:?} and {:?} overlap", w[0], w[1])));
            }
        }
        if let Some(&(start, len)) = sorted.last() {
            if start + len > n_global {
                return Err(Error::data(format!("row span ({start}, {len}) ends past the {n_global} rows")));
            }
        }
        Ok(RowSpans { spans, n_global })
    }

    /// Rows held here.
    pub fn n_local(&self) -> usize {
        self.spans.iter().map(|s| s.1 as usize).sum()
    }

    /// Rows of every worker.
    pub fn n_global(&self) -> usize {
        self.n_global as usize
    }

    /// The global index of each local row, in local order.
    pub fn global_rows(&self) -> impl Iterator<Item = u64> + '_ {
        self.spans.iter().flat_map(|&(start, len)| start..start + len)
    }

    /// The runs, as `(first global row, length)`.
    pub fn spans(&self) -> &[(u64, u64)] {
        &self.spans
    }
}

/// A worker's share of a fit: of its training rows, and of each evaluation set's rows.
pub struct Shard<'a> {
    pub comm: &'a dyn Collective,
    pub rows: RowSpans,
    /// Where this worker's rows of each evaluation set sit among that set's rows, in the
    /// order of the fit's evaluation sets (empty on one worker: each set is whole).
    pub evals: Vec<RowSpans>,
}

impl Shard<'static> {
    /// A fit on one worker holding all `n` rows.
    pub fn solo(n: usize) -> Self {
        Shard { comm: &Solo, rows: RowSpans::whole(n), evals: Vec::new() }
    }
}

impl Shard<'_> {
    pub fn is_distributed(&self) -> bool {
        self.comm.world() > 1
    }

    /// `values` (`per_row` numbers a row, row-major) of every worker's rows placed by `rows`
    /// (the training rows, or an evaluation set's), in global row order: what one worker
    /// holding all rows would see.
    pub fn gather_rows(&self, rows: &RowSpans, values: &[f32], per_row: usize) -> Result<Vec<f32>> {
        if !self.is_distributed() {
            return Ok(values.to_vec());
        }
        let spans: Vec<u8> =
            rows.spans.iter().flat_map(|&(s, l)| [s.to_le_bytes(), l.to_le_bytes()]).flatten().collect();
        let data: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        let mine = super::pack(&[&spans, &data]);
        let mut out = vec![0f32; rows.n_global() * per_row];
        for block in self.comm.all_gather(&mine)? {
            let parts = super::unpack(&block)?;
            let [spans, data] = parts[..] else { return Err(malformed()) };
            let data: Vec<f32> = data.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect();
            let mut at = 0;
            for span in spans.chunks_exact(16) {
                let start = u64::from_le_bytes(span[..8].try_into().unwrap()) as usize;
                let len = u64::from_le_bytes(span[8..].try_into().unwrap()) as usize;
                let (from, to) = (at * per_row, (at + len) * per_row);
                let dest = out.get_mut(start * per_row..(start + len) * per_row).ok_or_else(malformed)?;
                dest.copy_from_slice(data.get(from..to).ok_or_else(malformed)?);
                at += len;
            }
        }
        Ok(out)
    }

    /// Every worker's query groups (`offsets` over its rows placed by `rows`) as offsets over
    /// the global rows. A group must be consecutive global rows, and the groups must cover
    /// every row.
    pub fn gather_groups(&self, rows: &RowSpans, offsets: &[usize]) -> Result<Vec<usize>> {
        if !self.is_distributed() {
            return Ok(offsets.to_vec());
        }
        let global: Vec<u64> = rows.global_rows().collect();
        let mut mine = Vec::new();
        for w in offsets.windows(2) {
            let (a, b) = (w[0], w[1]);
            if b > a {
                if global[b - 1] - global[a] != (b - a - 1) as u64 {
                    return Err(Error::column("group", "a query group spans two partitions; keep each group in one"));
                }
                mine.extend_from_slice(&global[a].to_le_bytes());
                mine.extend_from_slice(&((b - a) as u64).to_le_bytes());
            }
        }
        let mut groups: Vec<(u64, u64)> = Vec::new();
        for block in self.comm.all_gather(&mine)? {
            groups.extend(block.chunks_exact(16).map(|c| {
                (u64::from_le_bytes(c[..8].try_into().unwrap()), u64::from_le_bytes(c[8..].try_into().unwrap()))
            }));
        }
        groups.sort_unstable();
        let mut out = vec![0usize];
        for (start, len) in groups {
            if start as usize != *out.last().unwrap() {
                return Err(Error::column("group", "the workers' query groups do not follow one another"));
            }
            out.push((start + len) as usize);
        }
        if *out.last().unwrap() != rows.n_global() {
            return Err(Error::column("group", "the workers' query groups do not cover every row"));
        }
        Ok(out)
    }
}

fn malformed() -> Error {
    Error::Collective("a worker sent rows that do not fit the fit's row spans".into())
}
