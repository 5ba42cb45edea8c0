//! `rank:ndcg` (LambdaMART), `rank:map` (LambdaMART on mean average precision) and
//! `rank:pairwise` (RankNet) over query groups, as XGBoost 2+ defines them.
//!
//! Documents are ranked by their current scores (ties by row order). A pair of documents of a
//! query with different relevance is used when the better-ranked of the two is within the top
//! `lambdarank_num_pair_per_sample` (XGBoost's `topk` pair method; a large value uses every
//! pair). The more relevant document `h` is pushed up and the other, `l`, down:
//! `lambda = (sigmoid(s_h - s_l) - 1) * delta`, `hess = 2 sigmoid (1 - sigmoid) delta`, where
//! `delta` is 1 for `rank:pairwise`, |change in NDCG| if the two swapped places for
//! `rank:ndcg`, and |change in average precision| for `rank:map` (binary relevance; XGBoost's
//! `DeltaMAP`, from each rank's count of relevant documents at or above it and the running
//! sum of relevance / rank), divided by `|s_h - s_l| + 0.01` under
//! `lambdarank_score_normalization`.
//! Each query's sums are scaled by `log2(1 + L) / L` (`L` the sum of the pairs' |lambda|,
//! twice) under `lambdarank_normalization`.
//!
//! The CPU and the GPU (kernels/ranking.cu) compute this identically, bit for bit: each
//! document sums its own pairs in f64, in a fixed order (every other document by row, or, for
//! one ranked below the top k, the top k by rank), and the query's `L` adds the documents' sums
//! in row order. The tables that depend only on the labels ([`RankingTables`]) are built once,
//! here, for both.

use rayon::prelude::*;

use super::{check_each, Loss, Targets};
use crate::error::{Error, Result};
use crate::math::{log2, sigmoid};
use crate::tree::GradPair;

/// The ranking parameters, XGBoost's names and defaults.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RankingParams {
    /// Pairs are formed with the documents ranked in the top `top_k` of their query.
    pub top_k: usize,
    /// Scale each query's gradients by `log2(1 + L) / L`.
    pub normalise: bool,
    /// Divide each pair's delta by the distance of its scores (plus 0.01).
    pub score_normalise: bool,
    /// NDCG gain `2^rel - 1` (relevance an integer up to 31); else the relevance itself.
    pub exp_gain: bool,
}

impl RankingParams {
    pub const DEFAULT: RankingParams =
        RankingParams { top_k: 32, normalise: true, score_normalise: true, exp_gain: true };
}

impl Default for RankingParams {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// What a pair's delta measures: nothing (RankNet), NDCG or average precision. The
/// discriminants are the codes of `lambdarank`'s `metric` argument (`RANK_*` in
/// kernels/ranking.cu).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum PairMetric {
    Pairwise = 0,
    Ndcg = 1,
    Map = 2,
}

pub struct LambdaRank {
    pub metric: PairMetric,
    pub params: RankingParams,
}

/// What the gradients need besides the scores, fixed by the labels: each document's gain,
/// each query's 1 / ideal DCG (0 when the query has no relevant document: no gradients), and
/// the discount `1 / log2(2 + position)` of every position up to the largest query.
pub struct RankingTables {
    pub gain: Vec<f64>,
    pub inv_idcg: Vec<f64>,
    pub discount: Vec<f64>,
}

impl RankingTables {
    pub fn new(t: &Targets, params: &RankingParams) -> Self {
        let offsets = t.groups.expect("ranking objectives are checked to have query groups");
        let gain: Vec<f64> =
            t.label.iter().map(|&y| if params.exp_gain { (1u64 << y as u32) as f64 - 1.0 } else { y as f64 }).collect();
        let longest = offsets.windows(2).map(|q| q[1] - q[0]).max().unwrap_or(0);
        let discount: Vec<f64> = (0..longest).map(|p| 1.0 / (p as f64 + 2.0).log2()).collect();
        let inv_idcg = offsets
            .par_windows(2)
            .map(|q| {
                let mut ideal = gain[q[0]..q[1]].to_vec();
                ideal.sort_by(|a, b| b.total_cmp(a));
                let idcg: f64 = ideal.iter().zip(&discount).map(|(g, d)| g * d).sum();
                if idcg > 0.0 {
                    1.0 / idcg
                } else {
                    0.0
                }
            })
            .collect();
        RankingTables { gain, inv_idcg, discount }
    }
}

/// One query's view for the pair arithmetic.
struct Query<'a> {
    s: &'a [f32],
    y: &'a [f32],
    gain: &'a [f64],
    position: &'a [usize],
    discount: &'a [f64],
    inv_idcg: f64,
    /// `rank:map`: by rank, the relevant documents at or above it and the running sum of
    /// relevance / (rank + 1) (empty otherwise).
    relevant: &'a [f64],
    precision_sum: &'a [f64],
    /// Highest and lowest score differ: score normalisation applies.
    spread: bool,
}

/// |change in average precision| if the documents at ranks `high < low` (labels `y_high`,
/// `y_low`) swapped places: XGBoost's `DeltaMAP`, operation for operation.
#[inline]
fn delta_map(q: &Query, y_high: f32, y_low: f32, high: usize, low: usize) -> f64 {
    let (r_h, r_l) = (high as f64 + 1.0, low as f64 + 1.0);
    let total = q.relevant[q.relevant.len() - 1];
    let (m, n) = (q.relevant[low], q.relevant[high]);
    let b = q.precision_sum[low - 1] - q.precision_sum[high];
    let delta = if y_high < y_low { (m / r_l - (n + 1.0) / r_h - b) / total } else { (n / r_h - m / r_l + b) / total };
    delta.abs()
}

impl LambdaRank {
    /// `(lambda, hess)` of the pair whose more relevant document is `h`.
    #[inline]
    fn pair(&self, q: &Query, h: usize, l: usize) -> (f64, f64) {
        let mut delta = match self.metric {
            PairMetric::Pairwise => 1.0,
            PairMetric::Ndcg => {
                ((q.gain[h] - q.gain[l]) * (q.discount[q.position[h]] - q.discount[q.position[l]])).abs() * q.inv_idcg
            }
            PairMetric::Map => {
                let (ph, pl) = (q.position[h], q.position[l]);
                if ph < pl {
                    delta_map(q, q.y[h], q.y[l], ph, pl)
                } else {
                    delta_map(q, q.y[l], q.y[h], pl, ph)
                }
            }
        };
        let diff = q.s[h] - q.s[l];
        if self.params.score_normalise && q.spread {
            delta /= diff.abs() as f64 + 0.01;
        }
        let sig = sigmoid(diff) as f64;
        let lambda = (sig - 1.0) * delta;
        let hess = (sig * (1.0 - sig)).max(1e-16) * delta * 2.0;
        (lambda, hess)
    }

    fn group(&self, s: &[f32], y: &[f32], gain: &[f64], inv_idcg: f64, discount: &[f64], w: f32) -> Vec<GradPair> {
        let n = s.len();
        let mut out = vec![GradPair::default(); n];
        if n < 2 {
            return out;
        }
        // The current ranking: by score, ties (-0 and +0 included) by row, as the GPU counts it.
        let mut ranked: Vec<usize> = (0..n).collect();
        ranked.sort_by(|&a, &b| s[b].partial_cmp(&s[a]).unwrap_or(std::cmp::Ordering::Equal).then(a.cmp(&b)));
        let mut position = vec![0; n];
        for (p, &d) in ranked.iter().enumerate() {
            position[d] = p;
        }
        // rank:map's running counts, in rank order (one pass, as the GPU adds them).
        let (mut relevant, mut precision_sum) = (Vec::new(), Vec::new());
        if self.metric == PairMetric::Map {
            let (mut count, mut sum) = (0f64, 0f64);
            for (p, &d) in ranked.iter().enumerate() {
                count += y[d] as f64;
                sum += y[d] as f64 / (p as f64 + 1.0);
                relevant.push(count);
                precision_sum.push(sum);
            }
        }
        let q = Query {
            s,
            y,
            gain,
            position: &position,
            discount,
            inv_idcg,
            relevant: &relevant,
            precision_sum: &precision_sum,
            spread: s[ranked[0]] != s[ranked[n - 1]],
        };
        let k = self.params.top_k.min(n);
        let mut sums = vec![(0f64, 0f64, 0f64); n];
        for (r, sum) in sums.iter_mut().enumerate() {
            let (mut g, mut h, mut a) = (0f64, 0f64, 0f64);
            let mut visit = |o: usize| {
                if o == r || y[o] == y[r] {
                    return;
                }
                let (high, low) = if y[r] > y[o] { (r, o) } else { (o, r) };
                let (lambda, hess) = self.pair(&q, high, low);
                g += if r == high { lambda } else { -lambda };
                h += hess;
                a -= lambda;
            };
            if position[r] < k {
                (0..n).for_each(&mut visit);
            } else {
                ranked[..k].iter().for_each(|&o| visit(o));
            }
            *sum = (g, h, a);
        }
        let total: f64 = sums.iter().fold(0.0, |t, s| t + s.2);
        let norm = if self.params.normalise && total > 0.0 { log2(1.0 + total) / total } else { 1.0 };
        for (o, &(g, h, _)) in out.iter_mut().zip(&sums) {
            *o = GradPair { g: (g * norm) as f32 * w, h: ((h * norm) as f32).max(1e-16) * w };
        }
        out
    }
}

impl Loss for LambdaRank {
    fn gradients(&self, margin: &[f32], t: &Targets, out: &mut [GradPair]) -> Result<()> {
        let offsets = t.groups.expect("ranking objectives are checked to have query groups");
        let tables = RankingTables::new(t, &self.params);
        let groups: Vec<Vec<GradPair>> = offsets
            .par_windows(2)
            .enumerate()
            .map(|(g, q)| {
                let rows = q[0]..q[1];
                self.group(
                    &margin[rows.clone()],
                    &t.label[rows.clone()],
                    &tables.gain[rows],
                    tables.inv_idcg[g],
                    &tables.discount,
                    t.w(q[0]),
                )
            })
            .collect();
        for (q, g) in offsets.windows(2).zip(groups) {
            out[q[0]..q[1]].copy_from_slice(&g);
        }
        Ok(())
    }

    fn check_labels(&self, t: &Targets) -> Result<()> {
        if self.metric == PairMetric::Map {
            check_each(t.label, "rank:map labels must be 0 or 1 (not relevant or relevant)", |y| y == 0.0 || y == 1.0)?;
        } else if self.params.exp_gain {
            check_each(
                t.label,
                "ranking relevance labels must be integers from 0 to 31 (set ndcg_exp_gain=false for other \
                 non-negative relevance)",
                |y| (0.0..=31.0).contains(&y) && y.fract() == 0.0,
            )?;
        } else {
            check_each(t.label, "ranking relevance labels must be >= 0", |y| y >= 0.0 && y.is_finite())?;
        }
        // A query's pairs take one weight, the query's (XGBoost's rule): weights that differ
        // within a group would be ignored but for the first row's.
        if let (Some(w), Some(offsets)) = (t.weight, t.groups) {
            for (g, q) in offsets.windows(2).enumerate() {
                let rows = &w[q[0]..q[1]];
                if let Some(i) = rows.iter().position(|&x| x != rows[0]) {
                    return Err(Error::column(
                        "weight",
                        format!(
                            "differs within query group {g} (rows {}..{}): row {} has {} but row {} has {}; \
                             ranking weights are per query, so every row of a group needs the same weight",
                            q[0],
                            q[1],
                            q[0],
                            rows[0],
                            q[0] + i,
                            rows[i]
                        ),
                    ));
                }
            }
        }
        Ok(())
    }

    fn estimate_base_margin(&self, _t: &Targets) -> Vec<f32> {
        vec![0.0]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loss(ndcg: bool, params: RankingParams) -> LambdaRank {
        LambdaRank { metric: if ndcg { PairMetric::Ndcg } else { PairMetric::Pairwise }, params }
    }

    fn grads(l: &LambdaRank, s: &[f32], y: &[f32], groups: &[usize]) -> Vec<GradPair> {
        let t = Targets { label: y, label_upper: None, weight: None, groups: Some(groups) };
        let mut out = vec![GradPair::default(); s.len()];
        l.gradients(s, &t, &mut out).unwrap();
        out
    }

    #[test]
    fn two_documents_by_hand() {
        // Pairwise, no normalisation: one pair, h = row 1 (y = 1), s_h - s_l = -0.5.
        let plain = RankingParams { normalise: false, score_normalise: false, ..Default::default() };
        let g = grads(&loss(false, plain), &[0.5, 0.0], &[0.0, 1.0], &[0, 2]);
        let sig = 1.0 / (1.0 + 0.5f64.exp());
        assert!((g[1].g as f64 - (sig - 1.0)).abs() < 1e-6, "{:?}", g);
        assert!((g[0].g as f64 + (sig - 1.0)).abs() < 1e-6);
        assert!((g[0].h as f64 - 2.0 * sig * (1.0 - sig)).abs() < 1e-6);
        // NDCG: swapping two documents of gains 1 and 0 at positions 0 and 1 changes DCG by
        // 1 - 1/log2(3); the ideal DCG is 1.
        let g = grads(&loss(true, plain), &[0.5, 0.0], &[0.0, 1.0], &[0, 2]);
        let delta = 1.0 - 1.0 / 3f64.log2();
        assert!((g[1].g as f64 - (sig - 1.0) * delta).abs() < 1e-6);
        // With normalisation, L = 2 |lambda| and the sums scale by log2(1 + L) / L.
        let normed = RankingParams { score_normalise: false, ..Default::default() };
        let n = grads(&loss(true, normed), &[0.5, 0.0], &[0.0, 1.0], &[0, 2]);
        let total = 2.0 * (1.0 - sig) * delta;
        assert!((n[1].g as f64 - (sig - 1.0) * delta * (1.0 + total).log2() / total).abs() < 1e-6);
    }

    #[test]
    fn map_deltas_are_the_change_in_average_precision_by_hand() {
        // Scores rank rows 0, 1, 2 in that order; labels 0, 1, 1: AP = (1/2 + 2/3) / 2.
        // Swapping rows 0 and 1 gives AP (1 + 2/3) / 2 (+0.25); rows 0 and 2, AP 1 (+5/12).
        let plain = RankingParams { normalise: false, score_normalise: false, ..Default::default() };
        let map = LambdaRank { metric: PairMetric::Map, params: plain };
        let g = grads(&map, &[3.0, 2.0, 1.0], &[0.0, 1.0, 1.0], &[0, 3]);
        let sig = |d: f64| 1.0 / (1.0 + (-d).exp());
        let (l1, l2) = ((sig(-1.0) - 1.0) * 0.25, (sig(-2.0) - 1.0) * 5.0 / 12.0);
        assert!((g[0].g as f64 + l1 + l2).abs() < 1e-6, "{g:?}");
        assert!((g[1].g as f64 - l1).abs() < 1e-6 && (g[2].g as f64 - l2).abs() < 1e-6, "{g:?}");
        let t = Targets { label: &[0.0, 2.0], label_upper: None, weight: None, groups: None };
        assert!(map.check_labels(&t).unwrap_err().to_string().contains("0 or 1"));
    }

    #[test]
    fn top_k_uses_only_pairs_with_a_document_in_the_top_k() {
        // Four documents ranked 0..3 by score; with k = 1 only the pairs of the top document
        // count, so documents 2 and 3 (equal to each other's relevance ordering otherwise)
        // only see document 0.
        let params = RankingParams { top_k: 1, normalise: false, score_normalise: false, exp_gain: true };
        let s = [3.0, 2.0, 1.0, 0.0];
        let y = [0.0, 1.0, 2.0, 3.0];
        let g = grads(&loss(false, params), &s, &y, &[0, 4]);
        let sig = |d: f64| 1.0 / (1.0 + (-d).exp());
        // Row 3 pairs only with row 0 (s_h - s_l = -3); row 1 likewise (-1).
        assert!((g[3].g as f64 - (sig(-3.0) - 1.0)).abs() < 1e-6);
        assert!((g[1].g as f64 - (sig(-1.0) - 1.0)).abs() < 1e-6);
        // Row 0 pairs with everyone: it is the least relevant, pushed down by all three.
        let want = -((sig(-1.0) - 1.0) + (sig(-2.0) - 1.0) + (sig(-3.0) - 1.0));
        assert!((g[0].g as f64 - want).abs() < 1e-6);
        // Every pair, as with a k beyond the query's size, adds the pairs among rows 1..3.
        let all = grads(&loss(false, RankingParams { top_k: 100, ..params }), &s, &y, &[0, 4]);
        assert!((all[3].g as f64 - ((sig(-3.0) - 1.0) + (sig(-2.0) - 1.0) + (sig(-1.0) - 1.0))).abs() < 1e-6);
    }

    #[test]
    fn gradients_of_a_query_sum_to_zero_and_hessians_are_positive() {
        let s: Vec<f32> = (0..40).map(|i| ((i * 37) % 11) as f32 * 0.3 - 1.0).collect();
        let y: Vec<f32> = (0..40).map(|i| ((i * 7) % 5) as f32).collect();
        let binary: Vec<f32> = y.iter().map(|&v| (v > 2.0) as u8 as f32).collect();
        for (metric, y) in [(PairMetric::Pairwise, &y), (PairMetric::Ndcg, &y), (PairMetric::Map, &binary)] {
            let g = grads(&LambdaRank { metric, params: RankingParams::default() }, &s, y, &[0, 17, 40]);
            for q in [0..17, 17..40] {
                let sum: f64 = g[q.clone()].iter().map(|p| p.g as f64).sum();
                let scale: f64 = g[q.clone()].iter().map(|p| (p.g as f64).abs()).sum();
                assert!(scale > 0.0 && sum.abs() <= 1e-5 * scale, "{metric:?}: gradients of {q:?} sum to {sum}");
                assert!(g[q].iter().all(|p| p.h > 0.0));
            }
        }
    }

    #[test]
    fn labels_must_suit_the_gain() {
        let t = |y: &'static [f32]| Targets { label: y, label_upper: None, weight: None, groups: None };
        let exp = loss(true, RankingParams::default());
        assert!(exp.check_labels(&t(&[0.0, 3.0, 31.0])).is_ok());
        assert!(exp.check_labels(&t(&[0.5])).unwrap_err().to_string().contains("integers from 0 to 31"));
        assert!(exp.check_labels(&t(&[32.0])).is_err());
        let linear = loss(true, RankingParams { exp_gain: false, ..Default::default() });
        assert!(linear.check_labels(&t(&[0.5, 40.0])).is_ok());
        assert!(linear.check_labels(&t(&[-1.0])).is_err());
    }
}
