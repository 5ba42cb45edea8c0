//! Binary and multiclass metrics on probabilities.

use super::weighted_average;
use crate::data::Targets;

const EPS: f64 = 1e-15;

pub fn logloss(pred: &[f32], t: &Targets) -> f64 {
    weighted_average(t, |i| {
        let p = (pred[i] as f64).clamp(EPS, 1.0 - EPS);
        let y = t.label[i] as f64;
        -(y * p.ln() + (1.0 - y) * (1.0 - p).ln())
    })
}

pub fn error(pred: &[f32], t: &Targets) -> f64 {
    weighted_average(t, |i| if (pred[i] > 0.5) != (t.label[i] > 0.5) { 1.0 } else { 0.0 })
}

/// Weighted ROC AUC: the probability that a random positive outranks a random negative,
/// tied scores counting one half. Labels are read as positive when > 0.5.
pub fn auc(pred: &[f32], t: &Targets) -> f64 {
    let mut idx: Vec<usize> = (0..pred.len()).collect();
    idx.sort_by(|&a, &b| pred[a].total_cmp(&pred[b]));
    let (mut neg_below, mut area, mut pos_total, mut neg_total) = (0f64, 0f64, 0f64, 0f64);
    let mut i = 0;
    while i < idx.len() {
        // One run of tied scores.
        let mut j = i;
        let (mut pos, mut neg) = (0f64, 0f64);
        while j < idx.len() && pred[idx[j]] == pred[idx[i]] {
            let r = idx[j];
            let w = t.w(r) as f64;
            if t.label[r] > 0.5 {
                pos += w;
            } else {
                neg += w;
            }
            j += 1;
        }
        area += pos * (neg_below + neg / 2.0);
        neg_below += neg;
        pos_total += pos;
        neg_total += neg;
        i = j;
    }
    if pos_total == 0.0 || neg_total == 0.0 {
        return f64::NAN;
    }
    area / (pos_total * neg_total)
}

pub fn mlogloss(pred: &[f32], k: usize, t: &Targets) -> f64 {
    weighted_average(t, |i| -(pred[i * k + t.label[i] as usize] as f64).clamp(EPS, 1.0).ln())
}

pub fn merror(pred: &[f32], k: usize, t: &Targets) -> f64 {
    weighted_average(t, |i| {
        let row = &pred[i * k..(i + 1) * k];
        let best = (0..k).fold(0, |b, c| if row[c] > row[b] { c } else { b });
        if best == t.label[i] as usize {
            0.0
        } else {
            1.0
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auc_counts_ties_as_half() {
        let label = [0.0, 1.0, 0.0, 1.0];
        let t = Targets { label: &label, weight: None, groups: None };
        assert_eq!(auc(&[0.1, 0.9, 0.2, 0.8], &t), 1.0);
        assert_eq!(auc(&[0.5, 0.5, 0.5, 0.5], &t), 0.5);
        // Positives at 0.4 and 0.9, negatives at 0.1 and 0.4: pairs 1 + 0.5 + 1 + 1 of 4.
        assert_eq!(
            auc(&[0.1, 0.4, 0.4, 0.9], &Targets { label: &[0.0, 1.0, 0.0, 1.0], weight: None, groups: None }),
            0.875
        );
    }
}
