//! `multi:softprob` / `multi:softmax`: cross-entropy on the softmax of `num_class` margins.

use rayon::prelude::*;

use super::{check_each, Loss, Targets};
use crate::error::Result;
use crate::math::exp;
use crate::tree::GradPair;

pub struct Softmax {
    pub n_classes: usize,
}

pub fn softmax_in_place(row: &mut [f32]) {
    let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut sum = 0.0;
    for v in row.iter_mut() {
        *v = exp(*v - max);
        sum += *v;
    }
    for v in row.iter_mut() {
        *v /= sum;
    }
}

impl Loss for Softmax {
    fn gradients(&self, margin: &[f32], t: &Targets, out: &mut [GradPair]) -> Result<()> {
        let n = t.n_rows();
        let k = self.n_classes;
        // Rows are independent; each fills its k class-major slots.
        let per_row: Vec<Vec<GradPair>> = (0..n)
            .into_par_iter()
            .map(|i| {
                let mut p: Vec<f32> = (0..k).map(|c| margin[c * n + i]).collect();
                softmax_in_place(&mut p);
                let w = t.w(i);
                let y = t.label[i] as usize;
                p.iter()
                    .enumerate()
                    .map(|(c, &pc)| {
                        let target = if c == y { 1.0 } else { 0.0 };
                        GradPair { g: (pc - target) * w, h: (2.0 * pc * (1.0 - pc)).max(1e-16) * w }
                    })
                    .collect()
            })
            .collect();
        for (i, row) in per_row.into_iter().enumerate() {
            for (c, gp) in row.into_iter().enumerate() {
                out[c * n + i] = gp;
            }
        }
        Ok(())
    }

    fn check_labels(&self, t: &Targets) -> Result<()> {
        let k = self.n_classes as f32;
        check_each(t.label, &format!("multiclass labels must be integers in [0, num_class={k})"), |y| {
            y >= 0.0 && y < k && y.fract() == 0.0
        })
    }

    /// Log class frequencies, centred: the margins of the best constant model.
    fn estimate_base_margin(&self, t: &Targets) -> Vec<f32> {
        let mut freq = vec![0f64; self.n_classes];
        for (i, &y) in t.label.iter().enumerate() {
            freq[y as usize] += t.w(i) as f64;
        }
        let total: f64 = freq.iter().sum();
        let logs: Vec<f64> = freq.iter().map(|f| (f / total).max(1e-6).ln()).collect();
        let mean = logs.iter().sum::<f64>() / logs.len() as f64;
        logs.iter().map(|l| (l - mean) as f32).collect()
    }
}
