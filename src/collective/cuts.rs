//! Cut points for one worker of a distributed fit: every worker samples its rows by their
//! global index and the samples are gathered, so every worker computes the cuts one worker
//! holding all rows would. The steps are `data::cuts`'; this is the part that talks to the
//! other workers, kept here so that `data` does not import `collective`.

use super::{pack, unpack, Shard};
use crate::data::cuts::{all_missing, any_present_value, cuts_from_samples, sample_features, Samples};
use crate::data::{FeatureCuts, FeatureFrame};
use crate::error::{Error, Result};

/// [`compute_cuts`](crate::data::cuts::compute_cuts) for one worker of a distributed fit:
/// every worker samples its rows by their global index and the samples are gathered, so
/// every worker computes the cuts one worker holding all rows would.
pub fn compute_cuts_sharded(
    frame: &FeatureFrame,
    weights: Option<&[f32]>,
    max_bin: usize,
    seed: u64,
    shard: &Shard,
) -> Result<Vec<FeatureCuts>> {
    let global_rows: Option<Vec<u64>> = shard.is_distributed().then(|| shard.rows.global_rows().collect());
    let mut samples = sample_features(frame, weights, seed, shard.rows.n_global(), global_rows.as_deref())?;
    if shard.is_distributed() {
        samples = gather_samples(shard, samples)?;
    }
    let cuts = cuts_from_samples(frame, samples, max_bin);
    let mut any_present = [any_present_value(frame) as i64];
    shard.comm.all_reduce_max(&mut any_present)?;
    if any_present[0] == 0 {
        return Err(all_missing());
    }
    Ok(cuts)
}

/// Every worker's samples of each numeric feature, concatenated (their order does not
/// matter: the cuts sort them).
fn gather_samples(shard: &Shard, mine: Vec<Samples>) -> Result<Vec<Samples>> {
    let bytes: Vec<Vec<u8>> = mine
        .iter()
        .map(|s| s.iter().flatten().flat_map(|&(x, w)| [x.to_le_bytes(), w.to_le_bytes()]).flatten().collect())
        .collect();
    let gathered = shard.comm.all_gather(&pack(&bytes.iter().map(Vec::as_slice).collect::<Vec<_>>()))?;
    let mut out = mine;
    for s in out.iter_mut().flatten() {
        s.clear();
    }
    for block in &gathered {
        let per_feature = unpack(block)?;
        if per_feature.len() != out.len() {
            return Err(Error::Collective("workers disagree on the number of features".into()));
        }
        for (s, b) in out.iter_mut().zip(per_feature) {
            if let Some(s) = s {
                s.extend(b.chunks_exact(8).map(|c| {
                    (f32::from_le_bytes(c[..4].try_into().unwrap()), f32::from_le_bytes(c[4..].try_into().unwrap()))
                }));
            }
        }
    }
    Ok(out)
}
