//! A fit's Polars inputs told apart ([`FitInputs`]) and turned into the crate's datasets: the
//! features, the targets and the optional inputs, the evaluation sets, a user's objective and
//! metrics; the one dataset a fit trains on, or each group's rows of it.

use std::collections::HashMap;
use std::sync::Arc;

use polars::prelude::*;

use super::convert::{categorical_ids_column, f32_column, feature_column, margin_values};
use super::dtypes::dtype_name;
use super::kwargs::{FitKwargs, InputNames};
use super::to_polars;
use crate::{Dataset, FeatureFrame, RoundCallback, TrainConfig};

/// `fit`'s inputs, told apart: the features, the target, then the optional ones in
/// `FitKwargs`'s order.
pub(super) struct FitInputs<'a> {
    pub(super) features: &'a [Series],
    pub(super) target: &'a Series,
    pub(super) weight: Option<&'a Series>,
    pub(super) group: Option<&'a Series>,
    pub(super) base_margin: Option<&'a Series>,
    /// Upper bounds of interval labels (`survival:aft`).
    pub(super) label_upper: Option<&'a Series>,
    /// Boolean masks of held-out rows, each evaluated every round under its name; early
    /// stopping watches the last.
    pub(super) eval_sets: Vec<(String, &'a Series)>,
    /// The model to continue from.
    pub(super) init: Option<Arc<crate::Model>>,
    /// A user's objective (see `FitKwargs::objective_id`).
    pub(super) objective_id: Option<u64>,
    /// A user's metrics: (registry number, name), and whether larger is better.
    pub(super) metrics: Vec<(u64, String)>,
    pub(super) maximize: bool,
    /// How errors name the inputs.
    pub(super) names: InputNames,
    /// Features given as categorical ids, and their categories' names (`FitKwargs`).
    pub(super) categorical_names: &'a HashMap<String, Vec<String>>,
}

impl<'a> FitInputs<'a> {
    /// Splits `inputs` (literals already broadcast) as `kwargs` says they come.
    pub(super) fn new(inputs: &'a [Series], kwargs: &'a FitKwargs) -> PolarsResult<Self> {
        let names: Vec<String> = match (kwargs.has_eval_set, kwargs.eval_names.is_empty()) {
            (false, _) => Vec::new(),
            (true, true) => vec!["valid".to_string()],
            (true, false) => kwargs.eval_names.clone(),
        };
        let optional = [kwargs.has_weight, kwargs.has_group, kwargs.has_base_margin, kwargs.has_label_upper_bound];
        let n_other = 1 + optional.iter().filter(|&&x| x).count() + names.len();
        if inputs.len() <= n_other {
            return Err(to_polars(crate::Error::data("gbt.fit needs at least one feature column")));
        }
        let (features, rest) = inputs.split_at(inputs.len() - n_other);
        let mut rest = rest.iter();
        let target = rest.next().unwrap();
        Ok(FitInputs {
            features,
            target,
            weight: kwargs.has_weight.then(|| rest.next().unwrap()),
            group: kwargs.has_group.then(|| rest.next().unwrap()),
            base_margin: kwargs.has_base_margin.then(|| rest.next().unwrap()),
            label_upper: kwargs.has_label_upper_bound.then(|| rest.next().unwrap()),
            eval_sets: names.into_iter().map(|name| (name, rest.next().unwrap())).collect(),
            init: match kwargs.init_model.is_empty() {
                true => None,
                false => {
                    Some(super::model_cache::by_content(&kwargs.init_model, None).map_err(to_polars)?.model.clone())
                }
            },
            objective_id: kwargs.objective_id,
            metrics: kwargs.metric_ids.iter().copied().zip(kwargs.metric_names.iter().cloned()).collect(),
            maximize: kwargs.maximize,
            names: kwargs.input_names.clone(),
            categorical_names: &kwargs.categorical_names,
        })
    }

    /// The dataset of `rows`.
    pub(super) fn dataset(&self, rows: Rows) -> PolarsResult<Dataset> {
        self.dataset_or_empty(rows, false)
    }

    /// [`FitInputs::dataset`]; `empty_ok`: no rows is allowed (a worker's share of a
    /// distributed fit's evaluation set).
    pub(super) fn dataset_or_empty(&self, rows: Rows, empty_ok: bool) -> PolarsResult<Dataset> {
        let labelled = |frame, label, k| match empty_ok {
            true => Dataset::with_labels_or_empty(frame, label, k),
            false => Dataset::with_labels(frame, label, k),
        };
        let pick = |s: &Series| match rows {
            Rows::All => Ok(s.clone()),
            Rows::Take(idx) => s.take(idx),
            Rows::Range(start, len) => Ok(s.slice(start as i64, len)),
        };
        let columns = self
            .features
            .iter()
            .enumerate()
            .map(|(i, s)| {
                pick(s).and_then(|s| match self.categorical_names.get(s.name().as_str()) {
                    Some(names) => categorical_ids_column(&s, names),
                    None => feature_column(&s, &display_name(&s, i)),
                })
            })
            .collect::<PolarsResult<_>>()?;
        let label = pick(self.target)?;
        let frame = FeatureFrame::new(columns).map_err(to_polars)?;
        let names = &self.names;
        let mut d = match label.dtype() {
            // Several targets per row (an Array or List column): one output each.
            DataType::Array(..) | DataType::List(_) => {
                let (values, k) = margin_values(&label, &names.target)?;
                let n = label.len();
                let target_major: Vec<f32> = (0..n * k).map(|j| values[(j % n) * k + j / n]).collect();
                labelled(frame, target_major.into(), k)
            }
            _ => labelled(frame, f32_column(&label, &names.target)?, 1),
        }
        .map_err(|e| names.polars(e))?;
        if let Some(w) = self.weight {
            d = d.with_weight_buffer(f32_column(&pick(w)?, &names.weight)?).map_err(|e| names.polars(e))?;
        }
        if let Some(m) = self.base_margin {
            // One margin per row, or `num_class` per row as an Array/List column (multiclass).
            d = d.with_base_margin(margin_values(&pick(m)?, &names.base_margin)?.0).map_err(|e| names.polars(e))?;
        }
        if let Some(u) = self.label_upper {
            d = d
                .with_label_upper_bound(f32_column(&pick(u)?, &names.label_upper_bound)?)
                .map_err(|e| names.polars(e))?;
        }
        if let Some(g) = self.group {
            d = d.with_group_ids(&group_ids(&pick(g)?, &names.group)?).map_err(|e| names.polars(e))?;
        }
        Ok(d)
    }

    /// Trains on `rows` (all when None) less those any eval_set mask marks; each mask's rows
    /// are evaluated every round under its name.
    pub(super) fn train(
        &self,
        cfg: &TrainConfig,
        rows: Option<&[IdxSize]>,
        log: &mut RoundCallback,
    ) -> PolarsResult<crate::Model> {
        let clock = std::time::Instant::now();
        let (fit, valid) = self.split(rows, false)?;
        if crate::profile::on() {
            eprintln!("polars-gbt profile: the plugin's inputs to datasets {:.3} s", clock.elapsed().as_secs_f64());
        }
        let evals: Vec<(&str, &Dataset)> =
            self.eval_sets.iter().zip(&valid).map(|((name, _), d)| (name.as_str(), d)).collect();
        self.run(cfg, &fit, &evals, log)
    }

    /// The training rows (`rows`, all when None, less those an eval_set mask marks) and each
    /// evaluation set's rows, in `eval_sets`' order. `empty_evals`: a set may have no rows.
    pub(super) fn split(&self, rows: Option<&[IdxSize]>, empty_evals: bool) -> PolarsResult<(Dataset, Vec<Dataset>)> {
        if self.eval_sets.is_empty() {
            let rows = rows.map(|r| IdxCa::from_vec(PlSmallStr::EMPTY, r.to_vec()));
            return Ok((self.dataset(rows.as_ref().map_or(Rows::All, Rows::Take))?, Vec::new()));
        }
        let mut masks = Vec::with_capacity(self.eval_sets.len());
        let mut whats = Vec::with_capacity(self.eval_sets.len());
        for (name, mask) in &self.eval_sets {
            let what = self.names.eval_set(name, self.eval_sets.len());
            if mask.dtype() != &DataType::Boolean {
                return Err(to_polars(crate::Error::column(
                    &what,
                    format!("must be a Boolean expression marking validation rows, not {}", dtype_name(mask.dtype())),
                )));
            }
            let mask = mask.bool()?;
            if mask.null_count() > 0 {
                return Err(to_polars(crate::Error::column(&what, "has null values")));
            }
            masks.push(mask);
            whats.push(what);
        }
        if let (None, Some((n_fit, blocks))) = (rows, blocks(&masks)) {
            // The training rows, then each set's in a block (as `train(eval_df=...)` and the
            // estimators' eval_set give them): slices of the inputs, no rows copied.
            let fit = self.dataset(Rows::Range(0, n_fit))?;
            let valid = blocks
                .into_iter()
                .map(|(start, len)| self.dataset_or_empty(Rows::Range(start, len), empty_evals))
                .collect::<PolarsResult<Vec<_>>>()?;
            return Ok((fit, valid));
        }
        let all: Vec<IdxSize> = match rows {
            Some(r) => r.to_vec(),
            None => (0..self.target.len() as IdxSize).collect(),
        };
        let marked = |m: &BooleanChunked, i: IdxSize| m.get(i as usize).unwrap_or(false);
        let fit: Vec<IdxSize> = all.iter().copied().filter(|&i| !masks.iter().any(|m| marked(m, i))).collect();
        if fit.is_empty() && !all.is_empty() {
            return Err(to_polars(self.names.no_training_rows(self.eval_sets.len())));
        }
        if let Some((_, what)) =
            masks.iter().zip(&whats).find(|(m, _)| !empty_evals && !all.iter().any(|&i| marked(m, i)))
        {
            return Err(to_polars(crate::Error::column(what, "marks no rows: an evaluation set needs some")));
        }
        let fit = self.dataset(Rows::Take(&IdxCa::from_vec(PlSmallStr::EMPTY, fit)))?;
        let valid = masks
            .iter()
            .map(|m| {
                let rows: Vec<IdxSize> = all.iter().copied().filter(|&i| marked(m, i)).collect();
                self.dataset_or_empty(Rows::Take(&IdxCa::from_vec(PlSmallStr::EMPTY, rows)), empty_evals)
            })
            .collect::<PolarsResult<Vec<_>>>()?;
        Ok((fit, valid))
    }

    /// A fit from scratch, or continued from `init`.
    pub(super) fn run(
        &self,
        cfg: &TrainConfig,
        data: &Dataset,
        evals: &[(&str, &Dataset)],
        log: &mut RoundCallback,
    ) -> PolarsResult<crate::Model> {
        use super::custom::{PyMetric, PyObjective};
        let objective: Option<Box<dyn crate::objective::Loss>> =
            match (cfg.custom_objective.is_some(), self.objective_id) {
                (false, _) => None,
                (true, Some(id)) => Some(Box::new(PyObjective::new(id, cfg))),
                (true, None) => {
                    return Err(to_polars(crate::Error::param(
                        "custom_objective",
                        "names a Python objective, which comes as objective=<callable> (polars_gbt passes it)",
                    )))
                }
            };
        let metrics = self
            .metrics
            .iter()
            .map(|(id, name)| {
                Box::new(PyMetric { id: *id, name: name.clone(), higher_is_better: self.maximize })
                    as Box<dyn crate::metric::CustomMetric>
            })
            .collect();
        let user = crate::UserFunctions { objective, metrics };
        let fit = crate::Training::new(cfg, data).evals(evals).callback(log).user_functions(user);
        match &self.init {
            None => fit.run(),
            Some(init) => fit.init_model(init).run(),
        }
        .map_err(|e| self.names.polars(e))
    }
}

/// Which of the inputs' rows a dataset takes.
#[derive(Clone, Copy)]
pub(super) enum Rows<'a> {
    All,
    /// These rows, gathered.
    Take(&'a IdxCa),
    /// `len` rows from `start`: a slice of the inputs' arrays, nothing copied.
    Range(usize, usize),
}

/// Where each mask's rows are, when they lie in blocks: every mask marks one run of rows, the
/// runs follow one another to the last row, and rows before the first are left for training
/// (at least one). Returns the training rows' count and each mask's (start, length); None
/// otherwise (the rows are then gathered, and the checks name what is wrong).
fn blocks(masks: &[&BooleanChunked]) -> Option<(usize, Vec<(usize, usize)>)> {
    let n = masks.first()?.len();
    let mut runs = Vec::with_capacity(masks.len());
    for m in masks {
        let count = m.sum().unwrap_or(0) as usize;
        let start = first_true(m)?;
        // One run: its `count` rows from the first marked one are all marked.
        if count == 0 || m.slice(start as i64, count).sum().unwrap_or(0) as usize != count {
            return None;
        }
        runs.push((start, count));
    }
    let mut sorted = runs.clone();
    sorted.sort_unstable();
    let n_fit = sorted[0].0;
    let mut end = n_fit;
    for &(start, len) in &sorted {
        if start != end {
            return None;
        }
        end += len;
    }
    (n_fit > 0 && end == n).then_some((n_fit, runs))
}

/// The first marked row of `m`, if any (reading the masks' bits, not row by row).
fn first_true(m: &BooleanChunked) -> Option<usize> {
    let mut offset = 0;
    for a in m.downcast_iter() {
        if let Some(i) = a.values().iter().position(|b| b) {
            return Some(offset + i);
        }
        offset += a.len();
    }
    None
}

/// How a feature column is named in errors: its name, or its position inside
/// `group_by().agg()`, where Polars passes columns unnamed.
pub(super) fn display_name(s: &Series, i: usize) -> String {
    if s.name().is_empty() {
        format!("feature {i}")
    } else {
        s.name().to_string()
    }
}

/// Query ids as integers (of any width); nulls are an error. `name` names the column.
pub(super) fn group_ids(s: &Series, name: &str) -> PolarsResult<Vec<i64>> {
    let not_ids =
        || to_polars(crate::Error::column(name, format!("must be integer query ids, not {}", dtype_name(s.dtype()))));
    if !s.dtype().is_integer() {
        return Err(not_ids());
    }
    let ids = s.strict_cast(&DataType::Int64).map_err(|_| {
        to_polars(crate::Error::column(
            name,
            format!("has query ids of {} beyond Int64's range", dtype_name(s.dtype())),
        ))
    })?;
    let ids = ids.i64()?;
    if ids.null_count() > 0 {
        return Err(to_polars(crate::Error::column(name, "has null values")));
    }
    Ok(ids.downcast_iter().flat_map(|a| a.values().iter().copied()).collect())
}
