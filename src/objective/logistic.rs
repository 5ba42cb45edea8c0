//! `binary:logistic`: log loss on the sigmoid of the margin; and `binary:hinge`.

use rayon::prelude::*;

use super::{check_each, sigmoid, Loss, Targets};
use crate::error::Result;
use crate::tree::GradPair;

pub struct Logistic {
    /// The weight multiplier of rows labelled exactly 1 (XGBoost's `scale_pos_weight`).
    pub scale_pos_weight: f32,
}

impl Logistic {
    /// Row i's weight, scaled when it is a positive.
    fn weight(&self, t: &Targets, i: usize) -> f32 {
        let w = t.w(i);
        if t.label[i] == 1.0 {
            w * self.scale_pos_weight
        } else {
            w
        }
    }
}

/// Hessians never fall below this, so saturated rows keep a usable weight.
const MIN_HESSIAN: f32 = 1e-16;

impl Loss for Logistic {
    /// In blocks of rows, each a plain loop over slices that vectorises (see [`logistic_rows`]).
    fn gradients(&self, margin: &[f32], t: &Targets, out: &mut [GradPair]) -> Result<()> {
        const BLOCK: usize = 1 << 12;
        out.par_chunks_mut(BLOCK).enumerate().for_each(|(c, out)| {
            let rows = c * BLOCK..c * BLOCK + out.len();
            let weight = t.weight.map(|w| &w[rows.clone()]);
            logistic_rows(&margin[rows.clone()], &t.label[rows], weight, self.scale_pos_weight, out);
        });
        Ok(())
    }

    fn check_labels(&self, t: &Targets) -> Result<()> {
        check_each(t.label, "binary:logistic needs labels in [0, 1]", |y| (0.0..=1.0).contains(&y))
    }

    fn estimate_base_margin(&self, t: &Targets) -> Vec<f32> {
        // The mean label under the (scaled) weights: the constant minimising the loss.
        let (mut sum, mut total) = (0f64, 0f64);
        for (i, &y) in t.label.iter().enumerate() {
            let w = self.weight(t, i) as f64;
            sum += y as f64 * w;
            total += w;
        }
        vec![self.base_score_to_margin(if total > 0.0 { sum / total } else { 0.0 })]
    }

    fn base_margin_is_weighted_mean(&self) -> bool {
        true
    }

    fn mean_weight(&self, t: &Targets, i: usize) -> f32 {
        self.weight(t, i)
    }

    fn base_score_to_margin(&self, p: f64) -> f32 {
        let p = p.clamp(1e-6, 1.0 - 1e-6);
        (p / (1.0 - p)).ln() as f32
    }
}

/// A row's pair under weight `w` (already scaled when the row is a positive).
#[inline(always)]
fn logistic_pair(margin: f32, label: f32, w: f32) -> GradPair {
    let p = sigmoid(margin);
    GradPair { g: (p - label) * w, h: (p * (1.0 - p)).max(MIN_HESSIAN) * w }
}

/// The pairs of a block of rows: compiled for AVX-512 (or AVX2) where the CPU has it, 16 (8) rows a step
/// through the branch-free `exp` (the baseline x86-64 target steps 4). Vector lanes round
/// each IEEE operation as the scalar code does, so the bits are the same either way, and the
/// same as the GPU's.
fn logistic_rows(margin: &[f32], label: &[f32], weight: Option<&[f32]>, spw: f32, out: &mut [GradPair]) {
    #[cfg(target_arch = "x86_64")]
    match crate::simd::level() {
        // SAFETY: the CPU has the level's features (`simd::level` detected them).
        crate::simd::Level::Avx512 => return unsafe { logistic_rows_avx512(margin, label, weight, spw, out) },
        // SAFETY: as above.
        crate::simd::Level::Avx2 => return unsafe { logistic_rows_avx2(margin, label, weight, spw, out) },
        crate::simd::Level::Baseline => {}
    }
    logistic_rows_portable(margin, label, weight, spw, out);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn logistic_rows_avx512(margin: &[f32], label: &[f32], weight: Option<&[f32]>, spw: f32, out: &mut [GradPair]) {
    logistic_rows_portable(margin, label, weight, spw, out);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn logistic_rows_avx2(margin: &[f32], label: &[f32], weight: Option<&[f32]>, spw: f32, out: &mut [GradPair]) {
    logistic_rows_portable(margin, label, weight, spw, out);
}

/// `Logistic::weight` per row: without weights, a positive's is `scale_pos_weight` (= 1.0 x it).
#[inline(always)]
fn logistic_rows_portable(margin: &[f32], label: &[f32], weight: Option<&[f32]>, spw: f32, out: &mut [GradPair]) {
    let rows = out.iter_mut().zip(margin).zip(label);
    match weight {
        None => rows.for_each(|((o, &m), &y)| *o = logistic_pair(m, y, if y == 1.0 { spw } else { 1.0 })),
        Some(w) => {
            rows.zip(w).for_each(|(((o, &m), &y), &w)| *o = logistic_pair(m, y, if y == 1.0 { w * spw } else { w }))
        }
    }
}

/// The hinge loss of XGBoost's `binary:hinge`: labels 0 and 1 as -1 and +1; a row inside the
/// margin (`y m < 1`) pulls with gradient `-y` and unit hessian, the others not at all (their
/// hessian the smallest positive float, as XGBoost's). The model predicts the class.
pub struct Hinge;

impl Loss for Hinge {
    fn gradients(&self, margin: &[f32], t: &Targets, out: &mut [GradPair]) -> Result<()> {
        out.par_iter_mut().enumerate().for_each(|(i, o)| {
            let y = 2.0 * t.label[i] - 1.0;
            let w = t.w(i);
            *o = if margin[i] * y < 1.0 {
                GradPair { g: -y * w, h: w }
            } else {
                GradPair { g: 0.0, h: f32::MIN_POSITIVE }
            };
        });
        Ok(())
    }

    fn check_labels(&self, t: &Targets) -> Result<()> {
        check_each(t.label, "binary:hinge needs labels 0 or 1", |y| y == 0.0 || y == 1.0)
    }

    /// Margin 0: the class boundary.
    fn estimate_base_margin(&self, _: &Targets) -> Vec<f32> {
        vec![0.0]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::random::Rng;

    /// The blocks (AVX-512 on a CPU that has it) give each row's pair bit for bit, with and
    /// without weights, over margins from the saturated tails to NaN.
    #[test]
    fn vector_gradients_equal_each_rows_pair() {
        let mut rng = Rng::new(3, 0);
        let n = 10_007;
        let mut margin: Vec<f32> = (0..n).map(|_| ((rng.next_u64() % 200_001) as f32 - 100_000.0) / 900.0).collect();
        margin[..6].copy_from_slice(&[f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 89.5, -104.5, -0.0]);
        let label: Vec<f32> = (0..n).map(|i| [0.0, 1.0, 0.25][i % 3]).collect();
        let weight: Vec<f32> = (0..n).map(|i| 0.5 + (i % 7) as f32 / 3.0).collect();
        for (spw, w) in [(1.0, None), (3.5, None), (3.5, Some(weight.as_slice()))] {
            let loss = Logistic { scale_pos_weight: spw };
            let t = Targets { label: &label, label_upper: None, weight: w, groups: None };
            let mut got = vec![GradPair::default(); n];
            loss.gradients(&margin, &t, &mut got).unwrap();
            for (i, g) in got.iter().enumerate() {
                let want = logistic_pair(margin[i], label[i], loss.weight(&t, i));
                assert_eq!((g.g.to_bits(), g.h.to_bits()), (want.g.to_bits(), want.h.to_bits()), "row {i}");
            }
        }
    }
}
