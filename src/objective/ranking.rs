//! `rank:ndcg` (LambdaMART) and `rank:pairwise` (RankNet) over query groups.
//!
//! For every pair of documents of a query with different relevance, the more relevant one
//! is pushed up and the other down by `rho = sigmoid(s_low - s_high)`, scaled for NDCG by
//! how much swapping the two would change the query's NDCG. As in LightGBM, each query's
//! lambdas are normalised by `log2(1 + sum) / sum`, so large queries do not dominate.

use rayon::prelude::*;

use super::{check_each, Loss, Targets};
use crate::error::{Error, Result};
use crate::tree::GradPair;

pub struct LambdaRank {
    pub ndcg: bool,
}

fn gain(y: f32) -> f64 {
    (2f64).powf(y as f64) - 1.0
}

fn discount(position: usize) -> f64 {
    1.0 / ((position + 2) as f64).log2()
}

impl LambdaRank {
    fn group(&self, s: &[f32], y: &[f32], w: f32) -> Vec<GradPair> {
        let n = s.len();
        let mut out = vec![GradPair::default(); n];
        if n < 2 {
            return out;
        }
        // Position of each document in the current ranking (ties broken by index).
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_by(|&a, &b| s[b].total_cmp(&s[a]).then(a.cmp(&b)));
        let mut position = vec![0; n];
        for (p, &d) in order.iter().enumerate() {
            position[d] = p;
        }
        let inv_idcg = if self.ndcg {
            let mut ideal: Vec<f32> = y.to_vec();
            ideal.sort_by(|a, b| b.total_cmp(a));
            let idcg: f64 = ideal.iter().enumerate().map(|(p, &l)| gain(l) * discount(p)).sum();
            if idcg <= 0.0 {
                return out;
            }
            1.0 / idcg
        } else {
            1.0
        };
        let (mut g, mut h) = (vec![0f64; n], vec![0f64; n]);
        let mut sum_lambda = 0.0;
        for i in 0..n {
            for j in 0..n {
                if y[i] <= y[j] {
                    continue;
                }
                // i is more relevant than j.
                let delta = if self.ndcg {
                    (gain(y[i]) - gain(y[j])).abs() * (discount(position[i]) - discount(position[j])).abs() * inv_idcg
                } else {
                    1.0
                };
                let rho = 1.0 / (1.0 + ((s[i] - s[j]) as f64).exp());
                let lambda = delta * rho;
                g[i] -= lambda;
                g[j] += lambda;
                let hess = (delta * rho * (1.0 - rho)).max(1e-16);
                h[i] += hess;
                h[j] += hess;
                sum_lambda += 2.0 * lambda;
            }
        }
        let norm = if self.ndcg && sum_lambda > 0.0 { (1.0 + sum_lambda).log2() / sum_lambda } else { 1.0 };
        for d in 0..n {
            out[d] = GradPair { g: (g[d] * norm) as f32 * w, h: ((h[d] * norm) as f32).max(1e-16) * w };
        }
        out
    }
}

impl Loss for LambdaRank {
    fn gradients(&self, margin: &[f32], t: &Targets, out: &mut [GradPair]) {
        let offsets = t.groups.expect("ranking objectives are checked to have query groups");
        let groups: Vec<Vec<GradPair>> =
            offsets.par_windows(2).map(|q| self.group(&margin[q[0]..q[1]], &t.label[q[0]..q[1]], t.w(q[0]))).collect();
        for (q, g) in offsets.windows(2).zip(groups) {
            out[q[0]..q[1]].copy_from_slice(&g);
        }
    }

    fn check_labels(&self, t: &Targets) -> Result<()> {
        check_each(t.label, "ranking relevance labels must be >= 0 (and at most 31)", |y| (0.0..=31.0).contains(&y))?;
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
