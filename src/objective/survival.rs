//! `survival:cox`: Cox proportional hazards, the negative partial log-likelihood (Breslow's
//! handling of tied times), as XGBoost's. A label is a time: positive for an observed event,
//! negative for a right-censored one at `|label|`. The model's output is the hazard ratio
//! (`exp` of the margin).

use super::{check_each, Loss, Targets};
use crate::data::targets::survival_order;
use crate::error::Result;
use crate::tree::GradPair;

pub struct Cox;

impl Loss for Cox {
    /// Row i's risk set is every row whose time is at least its own. Walking the rows by
    /// time, the risk set's sum of hazards loses a row's hazard once time moves past it; `r`
    /// and `s` accumulate, over the events so far, 1 / sum and 1 / sum^2.
    fn gradients(&self, margin: &[f32], t: &Targets, out: &mut [GradPair]) -> Result<()> {
        let order = survival_order(t.label);
        let mut risk_sum: f64 = margin.iter().map(|&m| (m as f64).exp()).sum();
        let (mut r, mut s) = (0f64, 0f64);
        let (mut leaving, mut last_time, mut last_hazard) = (0f64, 0f64, 0f64);
        for &i in &order {
            let hazard = (margin[i] as f64).exp();
            let (y, time) = (t.label[i], t.label[i].abs() as f64);
            leaving += last_hazard;
            if last_time < time {
                risk_sum -= leaving;
                leaving = 0.0;
            }
            if y > 0.0 {
                r += 1.0 / risk_sum;
                s += 1.0 / (risk_sum * risk_sum);
            }
            let w = t.w(i) as f64;
            let g = hazard * r - if y > 0.0 { 1.0 } else { 0.0 };
            let h = hazard * r - hazard * hazard * s;
            out[i] = GradPair { g: (g * w) as f32, h: (h * w) as f32 };
            last_time = time;
            last_hazard = hazard;
        }
        Ok(())
    }

    fn check_labels(&self, t: &Targets) -> Result<()> {
        check_each(t.label, "survival:cox needs non-zero times (negative: censored)", |y| y != 0.0)
    }

    /// Hazard ratio 1: the partial likelihood does not see a common shift of the margins.
    fn estimate_base_margin(&self, _: &Targets) -> Vec<f32> {
        vec![0.0]
    }

    fn base_score_to_margin(&self, ratio: f64) -> f32 {
        ratio.max(1e-16).ln() as f32
    }
}
