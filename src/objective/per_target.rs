//! Multi-target regression: one output per target, each fit by the objective's own loss on
//! its target alone (XGBoost's `multi_strategy="one_output_per_tree"`). Labels, margins and
//! gradients are target-major alike, so target `t` is the same slice `t * n..(t + 1) * n` of
//! each.

use super::{Loss, Targets};
use crate::error::{Error, Result};
use crate::tree::GradPair;

pub struct PerTarget {
    pub inner: Box<dyn Loss>,
    pub n_targets: usize,
}

impl PerTarget {
    /// Target `t`'s labels, with the rows' weights.
    fn target<'a>(&self, t: &Targets<'a>, target: usize) -> Targets<'a> {
        let n = t.label.len() / self.n_targets;
        Targets { label: &t.label[target * n..(target + 1) * n], ..*t }
    }
}

impl Loss for PerTarget {
    fn gradients(&self, margin: &[f32], t: &Targets, out: &mut [GradPair]) -> Result<()> {
        let n = t.label.len() / self.n_targets;
        for (target, (margin, out)) in margin.chunks(n).zip(out.chunks_mut(n)).enumerate() {
            self.inner.gradients(margin, &self.target(t, target), out)?;
        }
        Ok(())
    }

    fn check_labels(&self, t: &Targets) -> Result<()> {
        (0..self.n_targets).try_for_each(|target| {
            self.inner.check_labels(&self.target(t, target)).map_err(|e| match e {
                Error::Column { column, reason } => {
                    Error::Column { column: format!("{column} (target {target})"), reason }
                }
                e => e,
            })
        })
    }

    fn estimate_base_margin(&self, t: &Targets) -> Vec<f32> {
        (0..self.n_targets).flat_map(|target| self.inner.estimate_base_margin(&self.target(t, target))).collect()
    }

    fn base_score_to_margin(&self, score: f64) -> f32 {
        self.inner.base_score_to_margin(score)
    }

    fn leaf_quantile(&self, _output: usize) -> Option<f64> {
        self.inner.leaf_quantile(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::objective::{loss_for, Objective, ObjectiveParams};

    #[test]
    fn each_target_is_its_own_fit() {
        // Two targets of three rows, weighted; each output must get what the loss gives its
        // target alone.
        let label = [1.0f32, 0.0, 1.0, 0.0, 0.0, 1.0];
        let weight = [1.0f32, 2.0, 0.5];
        let margin = [0.3f32, -0.2, 1.1, 0.0, 0.4, -0.7];
        let t = Targets { label: &label, label_upper: None, weight: Some(&weight), groups: None };
        let params = crate::config::TrainConfig::default().objective_params();
        let multi = loss_for(Objective::BinaryLogistic, &ObjectiveParams { num_target: 2, ..params });
        let single = loss_for(Objective::BinaryLogistic, &params);
        let mut all = vec![GradPair::default(); 6];
        multi.gradients(&margin, &t, &mut all).unwrap();
        let mut base = Vec::new();
        for target in 0..2 {
            let one = Targets { label: &label[target * 3..target * 3 + 3], ..t };
            let mut out = vec![GradPair::default(); 3];
            single.gradients(&margin[target * 3..target * 3 + 3], &one, &mut out).unwrap();
            assert_eq!(&all[target * 3..target * 3 + 3], &out[..]);
            base.extend(single.estimate_base_margin(&one));
        }
        assert_eq!(multi.estimate_base_margin(&t), base);
        // A bad label names its target.
        let bad = [1.0f32, 0.0, 1.0, 0.0, 2.0, 1.0];
        let e = multi.check_labels(&Targets { label: &bad, ..t }).unwrap_err().to_string();
        assert!(e.contains("label (target 1)") && e.contains("row 1"), "{e}");
    }
}
