//! Cut points for one worker of a distributed fit: each worker sketches its rows, placed by
//! their global index ([`CutSketch`]), and the sketches are gathered and merged, so every
//! worker computes the cuts one worker holding all rows would. Kept here, the part that talks
//! to the other workers, so that `data` does not import `collective`.

use super::Shard;
use crate::data::cuts::{compute_cuts, CutSketch, GlobalRows};
use crate::data::{FeatureCuts, FeatureFrame};
use crate::error::Result;

/// [`compute_cuts`](crate::data::cuts::compute_cuts) for one worker of a distributed fit.
pub fn compute_cuts_sharded(
    frame: &FeatureFrame,
    weights: Option<&[f32]>,
    max_bin: usize,
    seed: u64,
    shard: &Shard,
) -> Result<Vec<FeatureCuts>> {
    if !shard.is_distributed() {
        return compute_cuts(frame, weights, max_bin, seed);
    }
    let mut sketch = CutSketch::new(frame, seed, shard.rows.n_global())?;
    let global_rows: Vec<u64> = shard.rows.global_rows().collect();
    let mut mine = sketch.clone();
    mine.add(frame, weights, GlobalRows::Listed(&global_rows));
    // Every worker merges every worker's sketch (its own among them), in rank order.
    for block in shard.comm.all_gather(&mine.to_bytes())? {
        sketch.merge_bytes(&block)?;
    }
    sketch.cuts(max_bin)
}
