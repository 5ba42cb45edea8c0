//! Model slicing (XGBoost's `booster[a:b]` and `iteration_range`, LightGBM's
//! `start_iteration`/`num_iteration`): some boosting rounds' trees as a model of their own,
//! with the same base score and features, so that scoring with a slice is scoring the sum of
//! those rounds' trees.

use super::Model;
use crate::error::{Error, Result};

impl Model {
    /// Rounds `start`, `start + step`, ... below `end` as a model. `end` 0 means every round
    /// (XGBoost's `iteration_range=(0, 0)`). A round holds one tree per output.
    ///
    /// The evaluation log and best iteration describe the rounds they were recorded for: a
    /// slice from round 0 by steps of 1 keeps them up to `end`, any other slice drops them.
    pub fn slice(&self, start: usize, end: usize, step: usize) -> Result<Model> {
        let rounds = self.num_rounds();
        let end = if end == 0 { rounds } else { end };
        let bad = |why: String| Err(Error::param("iteration_range", why));
        if step == 0 {
            return bad("the step must be at least 1".into());
        }
        if end > rounds {
            return bad(format!("ends at round {end}, but the model has {rounds} rounds"));
        }
        if start >= end {
            return bad(format!("({start}, {end}) holds no round: the start must be below the end"));
        }
        let k = self.n_outputs;
        let trees = (start..end).step_by(step).flat_map(|r| self.trees[r * k..(r + 1) * k].iter().cloned()).collect();
        let prefix = start == 0 && step == 1;
        let mut config = self.config.clone();
        config.n_estimators = (end - start).div_ceil(step);
        Ok(Model {
            config,
            n_outputs: k,
            base_margin: self.base_margin.clone(),
            features: self.features.clone(),
            trees,
            best_iteration: self.best_iteration.filter(|&b| prefix && b < end),
            evals_result: if prefix {
                self.evals_result
                    .iter()
                    .map(|s| super::EvalSeries { values: s.values.iter().copied().take(end).collect(), ..s.clone() })
                    .collect()
            } else {
                Vec::new()
            },
            imported: self.imported.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::{train, Dataset, FeatureColumn, FeatureFrame, PredictOutput, Predictions, TrainConfig};
    use arrow_array::{ArrayRef, Float32Array};
    use std::sync::Arc;

    fn data() -> Dataset {
        let x: Vec<f32> = (0..400).map(|i| ((i * 37) % 101) as f32 / 10.0).collect();
        let z: Vec<f32> = (0..400).map(|i| ((i * 13) % 29) as f32).collect();
        let y: Vec<f32> =
            x.iter().zip(&z).map(|(a, b)| (a * 0.7).sin() + b * 0.05).map(|v| (v > 0.5) as u8 as f32).collect();
        let col =
            |n: &str, v: Vec<f32>| FeatureColumn::new(n, vec![Arc::new(Float32Array::from(v)) as ArrayRef]).unwrap();
        Dataset::new(FeatureFrame::new(vec![col("x", x), col("z", z)]).unwrap(), y).unwrap()
    }

    fn margins(m: &crate::Model, d: &Dataset) -> Vec<f32> {
        match m.predict(d.features(), PredictOutput::Margin).unwrap() {
            Predictions::Float { values, .. } => values,
            _ => unreachable!(),
        }
    }

    #[test]
    fn slices_add_up_to_the_whole() {
        let d = data();
        let cfg = TrainConfig::from_json(r#"{"objective": "multi:softprob", "num_class": 3, "n_estimators": 9}"#);
        let y3: Vec<f32> = (0..400).map(|i| (i % 3) as f32).collect();
        let d3 = Dataset::new(d.features().clone(), y3).unwrap();
        let m = train(&cfg.unwrap(), &d3, &[]).unwrap();
        let whole = margins(&m, &d3);
        let (a, b) = (m.slice(0, 4, 1).unwrap(), m.slice(4, 0, 1).unwrap());
        assert_eq!((a.num_rounds(), b.num_rounds(), a.num_trees()), (4, 5, 12));
        let base = m.base_margin();
        let (ma, mb) = (margins(&a, &d3), margins(&b, &d3));
        for i in 0..whole.len() {
            // Each slice carries the base score once.
            let sum = ma[i] + mb[i] - base[i % 3];
            assert!((sum - whole[i]).abs() < 1e-5, "row {i}: {sum} against {}", whole[i]);
        }
        assert_eq!(m.slice(0, 0, 1).unwrap().trees(), m.trees());
        let odd = m.slice(1, 9, 2).unwrap();
        assert_eq!(odd.trees(), [&m.trees()[3..6], &m.trees()[9..12], &m.trees()[15..18], &m.trees()[21..24]].concat());
    }

    #[test]
    fn a_slice_outside_the_model_is_an_error() {
        let m = train(&TrainConfig::from_json(r#"{"n_estimators": 5}"#).unwrap(), &data(), &[]).unwrap();
        for (a, b, s, words) in
            [(0, 6, 1, "has 5 rounds"), (3, 3, 1, "holds no round"), (4, 2, 1, "holds no round"), (0, 2, 0, "step")]
        {
            let e = m.slice(a, b, s).unwrap_err().to_string();
            assert!(e.contains(words) && e.contains("iteration_range"), "({a}, {b}, {s}): {e}");
        }
    }
}
