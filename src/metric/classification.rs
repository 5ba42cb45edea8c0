//! Binary and multiclass metrics on probabilities.

use super::weighted_average;
use crate::data::Targets;
use crate::math::ln;

const EPS: f64 = 1e-15;

pub fn logloss(pred: &[f32], t: &Targets) -> f64 {
    weighted_average(t, |i| {
        let p = (pred[i] as f64).clamp(EPS, 1.0 - EPS);
        let y = t.label[i] as f64;
        // A 0/1 label needs one logarithm: the other term is a signed zero, which adds nothing
        // to the sum's bits.
        if y == 1.0 {
            -ln(p)
        } else if y == 0.0 {
            -ln(1.0 - p)
        } else {
            -(y * ln(p) + (1.0 - y) * ln(1.0 - p))
        }
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
    weighted_average(t, |i| -ln((pred[i * k + t.label[i] as usize] as f64).clamp(EPS, 1.0)))
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

/// Weighted area under the precision-recall curve. Its points are the runs of tied scores,
/// from the highest; between two points the curve is Davis and Goadrich's (2006)
/// interpolation, false positives growing linearly with true positives, whose precision
/// `tp / (tp + fp)` integrates in closed form over recall `tp / P`. Labels are read as
/// positive when > 0.5.
pub fn aucpr(pred: &[f32], t: &Targets) -> f64 {
    let mut idx: Vec<usize> = (0..pred.len()).collect();
    idx.sort_by(|&a, &b| pred[b].total_cmp(&pred[a]));
    let positive = |r: usize| t.label[r] > 0.5;
    let total_pos: f64 = idx.iter().filter(|&&r| positive(r)).map(|&r| t.w(r) as f64).sum();
    let total_neg: f64 = idx.iter().filter(|&&r| !positive(r)).map(|&r| t.w(r) as f64).sum();
    if total_pos == 0.0 || total_neg == 0.0 {
        return f64::NAN;
    }
    let (mut tp, mut fp, mut area) = (0f64, 0f64, 0f64);
    let mut i = 0;
    while i < idx.len() {
        let (tp0, fp0) = (tp, fp);
        let mut j = i;
        while j < idx.len() && pred[idx[j]] == pred[idx[i]] {
            let r = idx[j];
            if positive(r) {
                tp += t.w(r) as f64;
            } else {
                fp += t.w(r) as f64;
            }
            j += 1;
        }
        if tp > tp0 {
            // Along the segment fp = fp0 + h (x - tp0): precision x / (a x + c).
            let h = (fp - fp0) / (tp - tp0);
            let (a, c) = (1.0 + h, fp0 - h * tp0);
            let mut segment = (tp - tp0) / a;
            if c != 0.0 {
                segment -= c / (a * a) * ((a * tp + c).ln() - (a * tp0 + c).ln());
            }
            area += segment / total_pos;
        }
        i = j;
    }
    area
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auc_counts_ties_as_half() {
        let label = [0.0, 1.0, 0.0, 1.0];
        let t = Targets { label: &label, label_upper: None, weight: None, groups: None };
        assert_eq!(auc(&[0.1, 0.9, 0.2, 0.8], &t), 1.0);
        assert_eq!(auc(&[0.5, 0.5, 0.5, 0.5], &t), 0.5);
        // Positives at 0.4 and 0.9, negatives at 0.1 and 0.4: pairs 1 + 0.5 + 1 + 1 of 4.
        assert_eq!(
            auc(
                &[0.1, 0.4, 0.4, 0.9],
                &Targets { label: &[0.0, 1.0, 0.0, 1.0], label_upper: None, weight: None, groups: None }
            ),
            0.875
        );
    }
}
