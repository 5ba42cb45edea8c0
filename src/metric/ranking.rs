//! Ranking metrics averaged over query groups. A query with no relevant document scores 1,
//! as in XGBoost.

use rayon::prelude::*;

use crate::data::Targets;

/// Documents of one query by descending score (ties by position).
fn ranked(scores: &[f32]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..scores.len()).collect();
    order.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]).then(a.cmp(&b)));
    order
}

fn groups(t: &Targets) -> Vec<(usize, usize)> {
    match t.groups {
        Some(o) => o.windows(2).map(|w| (w[0], w[1])).collect(),
        None => vec![(0, t.n_rows())],
    }
}

fn dcg(labels: impl Iterator<Item = f32>) -> f64 {
    labels.enumerate().map(|(p, y)| (2f64.powf(y as f64) - 1.0) / ((p + 2) as f64).log2()).sum()
}

/// The mean over queries of `score(labels, top, k)`: a query's labels, its documents by
/// descending score cut to the first `k`, and that `k` (the cut-off, or the query's size when
/// smaller or not given). The queries are scored on the pool, and their scores summed in query
/// order, so the threads do not change the bits.
fn mean_over_queries(
    pred: &[f32],
    t: &Targets,
    k: Option<u32>,
    score: impl Fn(&[f32], &[usize], usize) -> f64 + Sync,
) -> f64 {
    let gs = groups(t);
    let scores: Vec<f64> = gs
        .par_iter()
        .with_min_len(64)
        .map(|&(a, b)| {
            let y = &t.label[a..b];
            let k = k.map_or(y.len(), |k| (k as usize).min(y.len()));
            let mut top = ranked(&pred[a..b]);
            top.truncate(k);
            score(y, &top, k)
        })
        .collect();
    let mut total = 0.0;
    for s in scores {
        total += s;
    }
    total / gs.len() as f64
}

pub fn ndcg(pred: &[f32], t: &Targets, k: Option<u32>) -> f64 {
    mean_over_queries(pred, t, k, |y, top, k| {
        let mut ideal = y.to_vec();
        ideal.sort_by(|p, q| q.total_cmp(p));
        let idcg = dcg(ideal.into_iter().take(k));
        if idcg <= 0.0 {
            1.0
        } else {
            dcg(top.iter().map(|&d| y[d])) / idcg
        }
    })
}

pub fn map(pred: &[f32], t: &Targets, k: Option<u32>) -> f64 {
    mean_over_queries(pred, t, k, |y, top, k| {
        let relevant = y.iter().filter(|&&l| l > 0.0).count();
        if relevant == 0 {
            return 1.0;
        }
        let (mut hits, mut sum) = (0usize, 0f64);
        for (p, &d) in top.iter().enumerate() {
            if y[d] > 0.0 {
                hits += 1;
                sum += hits as f64 / (p + 1) as f64;
            }
        }
        sum / relevant.min(k) as f64
    })
}

/// Precision in the top `k` of each query (all when None): the share of relevant documents
/// (relevance > 0) among the first min(k, query size).
pub fn precision(pred: &[f32], t: &Targets, k: Option<u32>) -> f64 {
    mean_over_queries(pred, t, k, |y, top, k| top.iter().filter(|&&d| y[d] > 0.0).count() as f64 / k as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ndcg_by_hand() {
        // Ranking puts relevance 0 first, then 2: DCG = 3 / log2(3); ideal = 3.
        let label = [2.0, 0.0];
        let t = Targets { label: &label, label_upper: None, weight: None, groups: Some(&[0, 2]) };
        let got = ndcg(&[0.1, 0.9], &t, None);
        assert!((got - 1.0 / 3f64.log2()).abs() < 1e-12);
        assert_eq!(ndcg(&[0.9, 0.1], &t, None), 1.0);
        assert_eq!(map(&[0.1, 0.9], &t, None), 0.5);
    }
}
