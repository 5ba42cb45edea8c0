//! One worker's share of a distributed fit that streams ([`StreamShare`]): where its rows sit
//! among all the fit's rows, and what pass 1 gathered merged over every worker, so that all
//! bin with the same cut points and category codes.

use std::collections::BTreeSet;

use crate::data::cuts::{CutSketch, GlobalRows};
use crate::data::frame::FeatureFrame;
use crate::error::{Error, Result};

/// One worker's share of a distributed fit whose workers each stream their own rows: where
/// those rows sit among all the fit's rows, and how the workers exchange what pass 1 gathers
/// (each one's cut points' sample and categories), so that every worker bins its rows with
/// the cut points and category codes of all rows, as one worker streaming them all would.
/// `collective::Shard::stream_share` makes one (this module does not reach other workers).
pub struct StreamShare<'a> {
    /// `(first global row, length)` runs of this worker's rows, in the order it streams them.
    pub spans: &'a [(u64, u64)],
    /// Rows of every worker together.
    pub n_global: usize,
    /// Every worker's bytes, in rank order (each worker calls it at the same point).
    pub all_gather: Box<AllGather<'a>>,
}

/// A collective's gather: every worker's bytes, in rank order.
pub type AllGather<'a> = dyn Fn(&[u8]) -> Result<Vec<Vec<u8>>> + Send + Sync + 'a;

impl StreamShare<'_> {
    pub(super) fn n_local(&self) -> usize {
        self.spans.iter().map(|s| s.1 as usize).sum()
    }

    /// The global rows of this worker's rows `at..at + n`.
    pub(super) fn global_rows(&self, at: usize, n: usize) -> BatchRows {
        let mut start = 0;
        for &(first, len) in self.spans {
            let len = len as usize;
            if at < start + len {
                if at + n <= start + len {
                    return BatchRows::From(first + (at - start) as u64);
                }
                break;
            }
            start += len;
        }
        let rows = self.spans.iter().flat_map(|&(first, len)| first..first + len);
        BatchRows::Listed(rows.skip(at).take(n).collect())
    }
}

/// A batch's rows among all the fit's rows: a run (most batches), or listed.
pub(super) enum BatchRows {
    From(u64),
    Listed(Vec<u64>),
}

impl BatchRows {
    pub(super) fn global(&self) -> GlobalRows<'_> {
        match self {
            BatchRows::From(first) => GlobalRows::From(*first),
            BatchRows::Listed(rows) => GlobalRows::Listed(rows),
        }
    }
}

/// Every worker's cut points' sample merged (in rank order, as `collective::cuts` merges a
/// collected fit's) and the union of every worker's categories: what one worker streaming all
/// rows would have gathered.
pub(super) fn every_workers(
    share: &StreamShare,
    schema: &FeatureFrame,
    seed: u64,
    mine: CutSketch,
    categories: Vec<Option<BTreeSet<String>>>,
) -> Result<(CutSketch, Vec<Option<BTreeSet<String>>>)> {
    // The features and categories first: their exchange tells whether the workers agree on
    // the features and which are categorical, which the sketches' layout depends on.
    type Gathered = (Vec<String>, Vec<Option<BTreeSet<String>>>);
    let features = schema.names();
    let mine_json =
        serde_json::to_vec(&(&features, &categories)).map_err(|e| Error::Collective(format!("categories: {e}")))?;
    let mut union = categories;
    for (rank, block) in (share.all_gather)(&mine_json)?.into_iter().enumerate() {
        let (names, theirs): Gathered = serde_json::from_slice(&block)
            .map_err(|_| Error::Collective("the categories from another worker are malformed".into()))?;
        if names != features {
            return Err(Error::data(format!(
                "worker {rank}'s data has the features {names:?}, this worker's {features:?}"
            )));
        }
        if theirs.iter().zip(&union).any(|(a, b)| a.is_some() != b.is_some()) {
            return Err(Error::data("the workers' data disagree on which features are categorical"));
        }
        for (set, names) in union.iter_mut().zip(theirs) {
            if let (Some(set), Some(names)) = (set, names) {
                set.extend(names);
            }
        }
    }
    let mine = mine.to_bytes();
    let mut sketch = CutSketch::new(schema, seed, share.n_global)?;
    for block in (share.all_gather)(&mine)? {
        sketch.merge_bytes(&block)?;
    }
    Ok((sketch, union))
}
