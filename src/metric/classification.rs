//! Binary and multiclass metrics on probabilities.

use rayon::prelude::*;

use super::weighted_average;
use crate::data::cuts::order_key;
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
/// tied scores counting one half. Labels are read as positive when > 0.5. Without weights it
/// is counted in integers ([`auc_counts`]), exactly, as the GPU counts it.
pub fn auc(pred: &[f32], t: &Targets) -> f64 {
    match t.weight {
        None => {
            let (twice_u, positives) = auc_counts(pred, t.label);
            auc_of_counts(twice_u, positives, pred.len() as u64)
        }
        Some(_) => weighted_auc(pred, t),
    }
}

/// An unweighted AUC's counts: twice the Mann-Whitney U of the positives (pairs where the
/// positive scores higher count 2, ties 1) and the number of positives. Each score is keyed by
/// its `total_cmp` order, -0 read as +0, and the keys are sorted; a run of equal keys from
/// place `s` to `e` (exclusive) ranks each of its positives at the midrank `(s + e + 1) / 2`,
/// so `2 U = sum of (s + e + 1) over positives - P (P + 1)`. kernels/metric.cu (`auc_ranks`)
/// counts the same on the device.
pub fn auc_counts(pred: &[f32], label: &[f32]) -> (u128, u64) {
    let mut items: Vec<u64> =
        pred.par_iter().zip(label).map(|(&p, &y)| ((order_key(p + 0.0) as u64) << 1) | (y > 0.5) as u64).collect();
    items.par_sort_unstable();
    let (mut ranks, mut positives, mut i) = (0u128, 0u64, 0usize);
    while i < items.len() {
        let key = items[i] >> 1;
        let end = i + items[i..].iter().take_while(|&&x| x >> 1 == key).count();
        let pos = items[i..end].iter().map(|&x| x & 1).sum::<u64>();
        ranks += pos as u128 * (i + end + 1) as u128;
        positives += pos;
        i = end;
    }
    (ranks - positives as u128 * (positives as u128 + 1), positives)
}

/// The AUC of [`auc_counts`]' counts over `n` rows: NaN without both classes.
pub fn auc_of_counts(twice_u: u128, positives: u64, n: u64) -> f64 {
    let negatives = n - positives;
    if positives == 0 || negatives == 0 {
        return f64::NAN;
    }
    (twice_u as f64 * 0.5) / (positives as f64 * negatives as f64)
}

fn weighted_auc(pred: &[f32], t: &Targets) -> f64 {
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
    fn the_counted_auc_is_the_weighted_one_with_unit_weights() {
        // Scores with many ties, -0 beside +0, and both classes in tied runs.
        let n = 20_000;
        let pred: Vec<f32> =
            (0..n).map(|i| if i % 97 == 0 { -0.0 } else { ((i * 7919) % 301) as f32 / 300.0 }).collect();
        let label: Vec<f32> = (0..n).map(|i| ((i * 104_729) % 7 < 3) as u8 as f32).collect();
        let ones = vec![1.0f32; n];
        let counted = auc(&pred, &Targets { label: &label, label_upper: None, weight: None, groups: None });
        let weighted = auc(&pred, &Targets { label: &label, label_upper: None, weight: Some(&ones), groups: None });
        assert_eq!(counted.to_bits(), weighted.to_bits());
        assert!(
            auc(&[0.3, 0.3], &Targets { label: &[1.0, 1.0], label_upper: None, weight: None, groups: None }).is_nan()
        );
    }

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
