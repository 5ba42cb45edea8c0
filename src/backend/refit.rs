//! Leaf refits of the L1-type losses (`reg:absoluteerror`, `reg:quantileerror`): after a tree
//! grows, each leaf is set to its quantile of the leaf rows' residuals (times the learning
//! rate), as XGBoost and LightGBM do, since the gradients only say which side of the target a
//! prediction lies on. Both backends refit through [`LeafRefit::apply`], so that the CPU and
//! the GPU set the same leaves from the same rows.
//!
//! In a distributed fit a leaf's rows lie on every worker: with unit or whole weights its
//! quantile is selected over all of them by the bytes of the residuals' order keys
//! ([`select_over_workers`]), the value one worker holding every row would select. (Whole
//! weights sum exactly in any order; fractional ones would not, and the fit refuses them.)

use rayon::prelude::*;

use crate::collective::Collective;
use crate::data::cuts::order_key;
use crate::error::Result;
use crate::objective::{quantile, quantile_rank, weighted_quantile};
use crate::tree::Tree;

/// Leaves set to a quantile of their rows' residuals instead of the Newton step.
pub struct LeafRefit<'a> {
    /// The quantile of each output.
    pub alphas: Vec<f64>,
    /// The labels of each output.
    pub labels: Vec<&'a [f32]>,
    pub weight: Option<&'a [f32]>,
    /// The fit's workers (with weights, a distributed fit has whole ones: the fit refuses others).
    pub comm: &'a dyn Collective,
}

impl LeafRefit<'_> {
    /// Sets each leaf of output `output`'s `tree` to its quantile of the residuals of
    /// `rows_of(leaf)` (in ascending row order, as the CPU's stable partition keeps them)
    /// against `margin`, the output's margins before the tree, times `learning_rate`.
    pub fn apply<'r>(
        &self,
        output: usize,
        tree: &mut Tree,
        rows_of: impl Fn(u32) -> &'r [u32] + Sync,
        margin: &[f32],
        learning_rate: f64,
    ) -> Result<()> {
        let (label, alpha) = (self.labels[output], self.alphas[output]);
        let residuals_of =
            |leaf: u32| -> Vec<f32> { rows_of(leaf).iter().map(|&r| label[r as usize] - margin[r as usize]).collect() };
        if self.comm.world() > 1 {
            let residuals: Vec<Vec<f32>> = (0..tree.n_nodes() as u32)
                .into_par_iter()
                .map(|n| if tree.is_leaf(n) { residuals_of(n) } else { Vec::new() })
                .collect();
            let weights: Option<Vec<Vec<f32>>> =
                self.weight.map(|w| {
                    (0..tree.n_nodes() as u32)
                        .into_par_iter()
                        .map(|n| {
                            if tree.is_leaf(n) {
                                rows_of(n).iter().map(|&r| w[r as usize]).collect()
                            } else {
                                Vec::new()
                            }
                        })
                        .collect()
                });
            let q = select_over_workers(self.comm, &residuals, weights.as_deref(), alpha)?;
            set_leaves(tree, learning_rate, |leaf| q[leaf as usize]);
            return Ok(());
        }
        set_leaves(tree, learning_rate, |leaf| {
            let mut residuals = residuals_of(leaf);
            match self.weight {
                Some(w) => {
                    let rows = rows_of(leaf);
                    weighted_quantile(&residuals, |i| w[rows[i] as usize], alpha)
                }
                // Unit weights: the same value by selection, in linear time.
                None => quantile(&mut residuals, alpha),
            }
        });
        Ok(())
    }

    /// [`LeafRefit::apply`] for a backend that knows each row's leaf (`leaf_of`) rather than
    /// each leaf's rows: the rows of `sample` (None: all), split in chunks, bucket their
    /// residuals (and weights) by leaf in parallel, and each leaf joins its chunks' buckets in
    /// chunk order, so that its rows stay ascending and it refits to what `apply` gives.
    pub fn apply_by_leaf(
        &self,
        output: usize,
        tree: &mut Tree,
        leaf_of: &[u32],
        sample: Option<&[u32]>,
        margin: &[f32],
        learning_rate: f64,
    ) -> Result<()> {
        let (label, weight, alpha) = (self.labels[output], self.weight, self.alphas[output]);
        let m = sample.map_or(leaf_of.len(), <[u32]>::len);
        let row = |j: usize| sample.map_or(j, |s| s[j] as usize);
        let chunk = m.div_ceil(rayon::current_num_threads() * 4).max(1 << 14);
        let n_nodes = tree.n_nodes();
        let buckets: Vec<Vec<Vec<(f32, f32)>>> = (0..m.div_ceil(chunk))
            .into_par_iter()
            .map(|c| {
                let mut mine = vec![Vec::new(); n_nodes];
                for j in c * chunk..((c + 1) * chunk).min(m) {
                    let r = row(j);
                    let w = weight.map_or(1.0, |w| w[r]);
                    mine[leaf_of[r] as usize].push((label[r] - margin[r], w));
                }
                mine
            })
            .collect();
        if self.comm.world() > 1 {
            let part = |leaf: usize, pick: fn(&(f32, f32)) -> f32| -> Vec<f32> {
                buckets.iter().flat_map(|b| b[leaf].iter().map(pick)).collect()
            };
            let residuals: Vec<Vec<f32>> = (0..n_nodes).into_par_iter().map(|leaf| part(leaf, |p| p.0)).collect();
            let weights: Option<Vec<Vec<f32>>> =
                weight.map(|_| (0..n_nodes).into_par_iter().map(|leaf| part(leaf, |p| p.1)).collect());
            let q = select_over_workers(self.comm, &residuals, weights.as_deref(), alpha)?;
            set_leaves(tree, learning_rate, |leaf| q[leaf as usize]);
            return Ok(());
        }
        set_leaves(tree, learning_rate, |leaf| {
            let joined = buckets.iter().flat_map(|b| b[leaf as usize].iter());
            match weight {
                Some(_) => {
                    let (residuals, weights): (Vec<f32>, Vec<f32>) = joined.copied().unzip();
                    weighted_quantile(&residuals, |i| weights[i], alpha)
                }
                None => quantile(&mut joined.map(|p| p.0).collect::<Vec<_>>(), alpha),
            }
        });
        Ok(())
    }
}

fn from_order_key(k: u32) -> f32 {
    f32::from_bits(if k >> 31 == 1 { k & 0x7fff_ffff } else { !k })
}

/// Each group's `alpha`-quantile over every worker's values of it (`values[g]`: this worker's
/// values of group g; 0.0 for a group empty everywhere): the value [`quantile`] gives on all
/// of them together, or with whole `weights` (`weights[g][i]` for `values[g][i]`), the value
/// [`weighted_quantile`] gives, which is the quantile of each value repeated its weight times.
/// The rank comes from the summed counts (or weights); then the rank's order key is found a
/// byte at a time, most significant first, each worker summing its keys' counts (weights)
/// under the prefix found so far by their next byte, and the sums summed: five exchanges.
pub fn select_over_workers(
    comm: &dyn Collective,
    values: &[Vec<f32>],
    weights: Option<&[Vec<f32>]>,
    alpha: f64,
) -> Result<Vec<f32>> {
    let keys: Vec<Vec<u32>> = values.par_iter().map(|v| v.iter().map(|&x| order_key(x)).collect()).collect();
    let n_groups = keys.len();
    // Counts, then weight totals (whole: exact in i64 in any order).
    let mut totals: Vec<i64> = keys.iter().map(|k| k.len() as i64).collect();
    if let Some(w) = weights {
        totals.extend(w.iter().map(|w| w.iter().map(|&x| x as i64).sum::<i64>()));
    }
    comm.all_reduce_sum(&mut totals)?;
    let counts = &totals[..n_groups];
    // A group whose rows all weigh 0 has no running weight: weighted_quantile then takes its
    // largest value, which counting the rows (rank = count) selects too.
    let by_weight: Vec<bool> =
        (0..n_groups).map(|g| weights.is_some() && totals.get(n_groups + g).is_some_and(|&t| t > 0)).collect();
    // Per group: the rank still to find within the prefix (1-based), the prefix, its mask.
    let mut rank: Vec<u64> = (0..n_groups)
        .map(|g| match counts[g] {
            0 => 0,
            _ if by_weight[g] => quantile_rank(totals[n_groups + g] as usize, alpha) as u64,
            n if weights.is_some() => n as u64,
            n => quantile_rank(n as usize, alpha) as u64,
        })
        .collect();
    let (mut prefix, mut mask) = (vec![0u32; n_groups], 0u32);
    for shift in [24u32, 16, 8, 0] {
        let mut bytes: Vec<i64> = keys
            .par_iter()
            .enumerate()
            .zip(&prefix)
            .flat_map_iter(|((g, k), &p)| {
                let mut c = [0i64; 256];
                for (i, &key) in k.iter().enumerate().filter(|&(_, &key)| key & mask == p) {
                    let add = match weights {
                        Some(w) if by_weight[g] => w[g][i] as i64,
                        _ => 1,
                    };
                    c[((key >> shift) & 0xff) as usize] += add;
                }
                c
            })
            .collect();
        comm.all_reduce_sum(&mut bytes)?;
        for (g, c) in bytes.chunks(256).enumerate() {
            if rank[g] == 0 {
                continue;
            }
            let mut below = 0u64;
            for (byte, &n) in c.iter().enumerate() {
                if below + n as u64 >= rank[g] {
                    prefix[g] |= (byte as u32) << shift;
                    rank[g] -= below;
                    break;
                }
                below += n as u64;
            }
        }
        mask |= 0xff << shift;
    }
    Ok(prefix.iter().zip(counts).map(|(&k, &n)| if n > 0 { from_order_key(k) } else { 0.0 }).collect())
}

/// Sets each leaf of `tree` to its quantile `quantile_of(leaf)` times the learning rate (every
/// backend's arithmetic). The leaves are computed in parallel: each is independent of the
/// others, so the values are the same.
pub fn set_leaves(tree: &mut Tree, learning_rate: f64, quantile_of: impl Fn(u32) -> f32 + Sync) {
    let leaves: Vec<u32> = (0..tree.n_nodes() as u32).filter(|&n| tree.is_leaf(n)).collect();
    let values: Vec<f32> = leaves.par_iter().map(|&leaf| (quantile_of(leaf) as f64 * learning_rate) as f32).collect();
    for (leaf, value) in leaves.into_iter().zip(values) {
        tree.value[leaf as usize] = value;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::collective::Solo;
    use crate::random::Rng;
    use crate::tree::model::SplitSpec;
    use crate::tree::NO_CHILD;

    /// A tree whose root splits into two nodes, each splitting again: four leaves.
    fn two_level_tree() -> Tree {
        let spec = |feature| SplitSpec {
            feature,
            threshold: 0.0,
            split_bin: 1,
            default_left: false,
            left_categories: &[],
            gain: 1.0,
        };
        let mut t = Tree::leaf(0.0, 0.0);
        let (l, r) = t.split(0, &spec(0), (0.0, 1.0), (0.0, 1.0));
        t.split(l, &spec(1), (0.0, 1.0), (0.0, 1.0));
        t.split(r, &spec(2), (0.0, 1.0), (0.0, 1.0));
        t
    }

    #[test]
    fn refits_from_each_rows_leaf_equal_refits_from_each_leafs_rows() {
        let mut rng = Rng::new(9, 0);
        let n = 70_000;
        let label: Vec<f32> = (0..n).map(|_| (rng.below(50) as f32) * 0.5).collect();
        let margin: Vec<f32> = (0..n).map(|_| rng.unit() as f32).collect();
        let weight: Vec<f32> = (0..n).map(|_| 0.25 + rng.below(4) as f32).collect();
        let base = two_level_tree();
        let leaves: Vec<u32> = (0..base.n_nodes() as u32).filter(|&i| base.is_leaf(i)).collect();
        assert_eq!(leaves.len(), 4);
        let leaf_of: Vec<u32> = (0..n).map(|_| leaves[rng.below(4)]).collect();
        let sample: Vec<u32> = (0..n as u32).filter(|_| rng.below(3) > 0).collect();
        for (weighted, sampled) in [(false, false), (true, false), (false, true), (true, true)] {
            let refit = LeafRefit {
                alphas: vec![0.3],
                labels: vec![&label],
                weight: weighted.then_some(&weight[..]),
                comm: &Solo,
            };
            let rows: Vec<u32> = if sampled { sample.clone() } else { (0..n as u32).collect() };
            let of_leaf: Vec<Vec<u32>> = (0..base.n_nodes() as u32)
                .map(|l| rows.iter().copied().filter(|&r| leaf_of[r as usize] == l).collect())
                .collect();
            let (mut by_rows, mut by_leaf) = (base.clone(), base.clone());
            refit.apply(0, &mut by_rows, |l| &of_leaf[l as usize], &margin, 0.3).unwrap();
            refit.apply_by_leaf(0, &mut by_leaf, &leaf_of, sampled.then_some(&sample[..]), &margin, 0.3).unwrap();
            assert_eq!(by_rows.value, by_leaf.value, "weighted {weighted}, sampled {sampled}");
            assert!(leaves.iter().all(|&l| by_rows.value[l as usize] != 0.0));
            assert_ne!(by_rows.left[0], NO_CHILD);
        }
    }
}
