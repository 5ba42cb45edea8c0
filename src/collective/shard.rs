//! A worker's share of a distributed fit: its collective and where its rows sit among all
//! the fit's rows. Everything keyed by a row (row sampling, the cut-point sample) uses the
//! row's global index, so a row is treated alike whichever worker holds it.

use arrow_buffer::ToByteSlice;

use super::{Collective, Solo};
use crate::data::StreamShare;
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

/// `n` rows cut into `k` contiguous ranges `(start, len)` of about equal length, each ending
/// on a query group's end when `group_offsets` are given (groups are never cut). With
/// `allow_empty` false every range holds a row (training shards); evaluation sets may give
/// some workers none.
pub fn even_ranges(
    n: usize,
    k: usize,
    group_offsets: Option<&[usize]>,
    allow_empty: bool,
) -> Result<Vec<(usize, usize)>> {
    let mut ends = Vec::with_capacity(k);
    for i in 1..=k {
        let target = n * i / k;
        let end = match group_offsets {
            // The group boundary nearest the even cut, never before the last range's end.
            Some(offsets) => {
                let at = offsets.partition_point(|&o| o < target);
                let above = offsets.get(at).copied().unwrap_or(n);
                let below = if at > 0 { offsets[at - 1] } else { 0 };
                if target - below <= above - target {
                    below
                } else {
                    above
                }
            }
            None => target,
        };
        let end = if i == k { n } else { end.max(ends.last().copied().unwrap_or(0)) };
        ends.push(end);
    }
    let mut out = Vec::with_capacity(k);
    let mut start = 0;
    for end in ends {
        if end == start && !allow_empty {
            return Err(Error::data(format!(
                "{n} rows{} cannot be shared by {k} workers with rows each",
                if group_offsets.is_some() { " in their query groups" } else { "" }
            )));
        }
        out.push((start, end - start));
        start = end;
    }
    Ok(out)
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

    /// This worker's share of a fit whose workers each stream their own training rows
    /// (`data::stream_dataset_sharded`): its rows' places, and the collective's gather.
    pub fn stream_share(&self) -> StreamShare<'_> {
        StreamShare {
            spans: self.rows.spans(),
            n_global: self.rows.n_global(),
            all_gather: Box::new(|mine| self.comm.all_gather(mine)),
        }
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
        let data = le_bytes(values);
        let mine = super::pack(&[&spans, &data]);
        let mut out = vec![0f32; rows.n_global() * per_row];
        for block in self.comm.all_gather(&mine)? {
            let parts = super::unpack(&block)?;
            let [spans, data] = parts[..] else { return Err(malformed()) };
            let mut at = 0;
            for span in spans.chunks_exact(16) {
                let start = u64::from_le_bytes(span[..8].try_into().unwrap()) as usize;
                let len = u64::from_le_bytes(span[8..].try_into().unwrap()) as usize;
                let (from, to) = (4 * at * per_row, 4 * (at + len) * per_row);
                let dest = out.get_mut(start * per_row..(start + len) * per_row).ok_or_else(malformed)?;
                read_le(data.get(from..to).ok_or_else(malformed)?, dest);
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

/// `values` as little-endian bytes: on a little-endian machine their memory as it is (the
/// labels of a large shard are tens of MB: no per-value loop).
fn le_bytes(values: &[f32]) -> std::borrow::Cow<'_, [u8]> {
    if cfg!(target_endian = "little") {
        std::borrow::Cow::Borrowed(values.to_byte_slice())
    } else {
        std::borrow::Cow::Owned(values.iter().flat_map(|v| v.to_le_bytes()).collect())
    }
}

/// Fills `out` from little-endian `bytes` (4 a value).
fn read_le(bytes: &[u8], out: &mut [f32]) {
    if cfg!(target_endian = "little") {
        // SAFETY: as in `le_bytes`; every bit pattern is a valid f32, and `out` is borrowed
        // mutably for the copy alone.
        let dest = unsafe { std::slice::from_raw_parts_mut(out.as_mut_ptr().cast::<u8>(), std::mem::size_of_val(out)) };
        dest.copy_from_slice(bytes);
    } else {
        for (o, c) in out.iter_mut().zip(bytes.chunks_exact(4)) {
            *o = f32::from_le_bytes(c.try_into().expect("4 bytes"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn even_ranges_cover_the_rows_in_order() {
        assert_eq!(even_ranges(10, 3, None, false).unwrap(), vec![(0, 3), (3, 3), (6, 4)]);
        assert_eq!(even_ranges(5, 1, None, false).unwrap(), vec![(0, 5)]);
        assert!(even_ranges(2, 3, None, false).unwrap_err().to_string().contains("2 rows"));
        assert_eq!(even_ranges(2, 3, None, true).unwrap(), vec![(0, 0), (0, 1), (1, 1)]);
    }

    #[test]
    fn even_ranges_end_on_query_groups() {
        // Groups 0..7, 7..8, 8..10: the even cut at 5 moves to the nearest group end, 7.
        let offsets = [0, 7, 8, 10];
        assert_eq!(even_ranges(10, 2, Some(&offsets), false).unwrap(), vec![(0, 7), (7, 3)]);
        // One group cannot be shared.
        let err = even_ranges(10, 2, Some(&[0, 10]), false).unwrap_err().to_string();
        assert!(err.contains("query groups"), "{err}");
        assert_eq!(even_ranges(10, 2, Some(&[0, 10]), true).unwrap(), vec![(0, 0), (0, 10)]);
    }
}
