//! The boosting loop of one worker: the checks, the starting margins and the tree parameters
//! set up ([`Trainer::new`]); then the engine computes the cut points on its device and makes
//! the learner, the features and evaluation sets are bound to those cuts ([`Binned`]), and
//! per round come the gradients, one tree per output from the learner, the evaluation sets'
//! margins and metrics, and early stopping.

use std::borrow::Cow;

use rayon::prelude::*;

use crate::backend::refit::LeafRefit;
use crate::backend::{Engine, EvalSetRows, Fit, Learner, StartMargin};
use crate::collective::{exact_sums, max_magnitudes, sum_count, RowSpans, Shard};
use crate::config::{MultiStrategy, TrainConfig};
use crate::data::{BinnedMatrix, Dataset, FeatureCuts, FeatureFrame};
use crate::error::{Error, Result};
use crate::metric::{CustomMetric, Metric};
use crate::model::{bind_columns, EvalSeries, FeatureInfo, Model};
use crate::objective::{loss_for, transform_row, Loss, Objective, TaskKind};
use crate::random::{hash64, Rng};
use crate::tree::{GrowParams, Tree, Weighting};

use super::{RoundCallback, RoundLog, UserFunctions};

/// An evaluation set, with its running margins where they are kept.
struct EvalSet<'a> {
    name: String,
    data: &'a Dataset,
    place: EvalPlace<'a>,
    /// With several targets: the labels row-major and the weights repeated per target, for
    /// metrics scored element by element.
    flat: Option<(Vec<f32>, Option<Vec<f32>>)>,
    /// Where this worker's rows sit among the set's rows.
    rows: RowSpans,
    /// In a distributed fit: the labels, weights and groups of every worker's rows.
    global: Option<GlobalTargets>,
}

/// Where an evaluation set's margins are kept and its trees walked.
enum EvalPlace<'a> {
    /// Held by the learner where it trains ([`Learner::hold_eval_set`]: the GPU's memory),
    /// under its id there.
    Held(usize),
    /// On the host: binned with the training cuts (here, or as it streamed), with its margins
    /// to start from (class-major).
    Host { binned: Cow<'a, BinnedMatrix>, margin: Vec<f32> },
}

impl<'a> EvalSet<'a> {
    /// Evaluation set `i` of the fit, `name`: `d` offered to `learner` (a set in columns, on
    /// one worker) or else binned with the training cuts on the host, its margins started, and
    /// in a distributed fit every worker's targets gathered.
    #[allow(clippy::too_many_arguments)]
    fn new(
        name: &str,
        d: &'a Dataset,
        features: &[FeatureInfo],
        cuts: &[FeatureCuts],
        base_margin: &[f32],
        k: usize,
        shard: &Shard,
        i: usize,
        learner: &mut dyn Learner,
    ) -> Result<Self> {
        let start = || Trainer::start_margin(base_margin, d, k);
        let place = match d.binned() {
            // Binned as it streamed, with the training cut points: they must be these.
            Some(rows) if rows.cuts() == cuts => {
                EvalPlace::Host { binned: rows.matrix(), margin: start().into_rows(d.n_rows()) }
            }
            Some(_) => {
                return Err(Error::data(format!(
                    "eval set `{name}` was binned with other cut points than the fit's (stream it with the \
                     training set it is evaluated with)"
                )))
            }
            None => {
                let frame = FeatureFrame::new(bind_columns(features, &d.features)?)?;
                // A distributed fit's metrics read every worker's rows, on the host.
                let held = match shard.is_distributed() {
                    true => None,
                    false => learner.hold_eval_set(EvalSetRows {
                        features: &frame,
                        targets: d.targets(),
                        margin: start(),
                    })?,
                };
                match held {
                    Some(id) => EvalPlace::Held(id),
                    None => EvalPlace::Host {
                        binned: Cow::Owned(BinnedMatrix::new(&frame, cuts)),
                        margin: start().into_rows(d.n_rows()),
                    },
                }
            }
        };
        let rows = shard.evals.get(i).cloned().unwrap_or_else(|| RowSpans::whole(d.n_rows()));
        let global = if shard.is_distributed() { Some(GlobalTargets::gather(shard, &rows, d, true)?) } else { None };
        let targets = global.as_ref().map_or_else(|| d.targets(), GlobalTargets::targets);
        let flat = (d.n_targets() > 1).then(|| flatten_targets(&targets, d.n_targets()));
        Ok(EvalSet { name: name.to_string(), data: d, place, flat, rows, global })
    }
}

/// An evaluation set's targets over every worker's rows, in global row order.
struct GlobalTargets {
    /// Target-major, as a dataset's.
    label: Vec<f32>,
    label_upper: Option<Vec<f32>>,
    weight: Option<Vec<f32>>,
    groups: Option<Vec<usize>>,
}

impl GlobalTargets {
    /// `d`'s targets on every worker, its rows placed by `rows`; query groups only when
    /// `groups` (the metrics read them, the base score does not).
    fn gather(shard: &Shard, rows: &RowSpans, d: &Dataset, groups: bool) -> Result<Self> {
        let n = d.n_rows();
        let mut label = Vec::new();
        for t in 0..d.n_targets {
            label.extend(shard.gather_rows(rows, &d.label[t * n..(t + 1) * n], 1)?);
        }
        let gather = |v: Option<&[f32]>| v.map(|v| shard.gather_rows(rows, v, 1)).transpose();
        Ok(GlobalTargets {
            label,
            label_upper: gather(d.label_upper.as_deref())?,
            weight: gather(d.weight.as_deref())?,
            groups: match (groups, d.group_offsets.as_deref()) {
                (true, Some(g)) => Some(shard.gather_groups(rows, g)?),
                _ => None,
            },
        })
    }

    fn targets(&self) -> crate::data::Targets<'_> {
        crate::data::Targets {
            label: &self.label,
            label_upper: self.label_upper.as_deref(),
            weight: self.weight.as_deref(),
            groups: self.groups.as_deref(),
        }
    }
}

pub(super) struct Trainer<'a> {
    cfg: &'a TrainConfig,
    data: &'a Dataset,
    loss: Box<dyn Loss>,
    metrics: Vec<Metric>,
    /// A user's metrics, logged after `metrics` on each set.
    custom_metrics: Vec<Box<dyn CustomMetric>>,
    /// What shapes each tree, constraints resolved against the features.
    grow: GrowParams,
    base_margin: Vec<f32>,
    /// The evaluation sets, by name, bound to the cut points once the engine has them.
    eval_data: Vec<(String, &'a Dataset)>,
    k: usize,
    shard: &'a Shard<'a>,
}

/// What the fit reads through the cut points the engine computed: the model's features and
/// the evaluation sets, binned with those cuts.
struct Binned<'a> {
    features: Vec<FeatureInfo>,
    evals: Vec<EvalSet<'a>>,
}

/// Row-major `n x k` margins to class-major.
fn class_major(row_major: &[f32], n: usize, k: usize) -> Vec<f32> {
    let mut out = vec![0f32; n * k];
    for i in 0..n {
        for c in 0..k {
            out[c * n + i] = row_major[i * k + c];
        }
    }
    out
}

/// `d`'s labels row-major (row `i`'s targets together) and its weights repeated per target.
fn flatten_targets(t: &crate::data::Targets, k: usize) -> (Vec<f32>, Option<Vec<f32>>) {
    let n = t.label.len() / k;
    let label = (0..n * k).map(|j| t.label[(j % k) * n + j / k]).collect();
    let weight = t.weight.map(|w| w.iter().flat_map(|&w| std::iter::repeat_n(w, k)).collect());
    (label, weight)
}

impl<'a> Trainer<'a> {
    /// `user`: a user's loss in place of the objective's, and metrics beside the built-in ones.
    pub(super) fn new(
        cfg: &'a TrainConfig,
        data: &'a Dataset,
        evals: &[(&str, &'a Dataset)],
        user: UserFunctions,
        shard: &'a Shard<'a>,
    ) -> Result<Self> {
        let k = cfg.num_outputs();
        let loss = user.objective.unwrap_or_else(|| loss_for(cfg.objective, &cfg.objective_params()));
        for (name, d) in std::iter::once(("train", data)).chain(evals.iter().copied()) {
            Self::check_data(cfg, &*loss, name, d, data.n_targets())?;
        }
        let custom_metrics = user.metrics;
        let metrics = Self::metrics(cfg, &custom_metrics)?;
        let names: Vec<String> = data.features.columns().iter().map(|c| c.name().to_string()).collect();
        let categorical: Vec<bool> = data.features.columns().iter().map(|c| c.is_categorical()).collect();
        let mut grow = cfg.grow_params(&names, &categorical)?;
        grow.weighting = Self::weighting(data, shard)?;
        let clock = std::time::Instant::now();
        let base_margin = match (cfg.base_score, &data.base_margin) {
            (Some(b), _) => vec![loss.base_score_to_margin(b); k],
            // Rows start from their own margins; the model adds nothing of its own.
            (None, Some(_)) => vec![0.0; k],
            (None, None) => Self::estimate_base_margin(&*loss, data, shard)?,
        };
        if crate::profile::on() {
            eprintln!("polars-gbt profile: base margin {:.3} s", clock.elapsed().as_secs_f64());
        }
        let eval_data = evals.iter().map(|&(name, d)| (name.to_string(), d)).collect();
        Ok(Trainer { cfg, data, loss, metrics, custom_metrics, grow, base_margin, eval_data, k, shard })
    }

    /// The features (with the cut points the engine computed) and the evaluation sets, held by
    /// the learner or binned with those cuts.
    fn bind(&self, cuts: &[FeatureCuts], learner: &mut dyn Learner) -> Result<Binned<'a>> {
        let features: Vec<FeatureInfo> = self
            .data
            .features
            .columns()
            .iter()
            .zip(cuts.iter().cloned())
            .map(|(c, cuts)| FeatureInfo {
                name: c.name().to_string(),
                dtype: c.dtype_name(),
                cuts,
                categories: c.categories().map(|v| v.as_ref().clone()),
            })
            .collect();
        let evals = self
            .eval_data
            .iter()
            .enumerate()
            .map(|(i, (name, d))| {
                EvalSet::new(name, d, &features, cuts, &self.base_margin, self.k, self.shard, i, learner)
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Binned { features, evals })
    }

    /// Checks the data set `name` (the training data, or an evaluation set) against the
    /// objective: its labels, its query groups, its targets, interval labels, base margins.
    fn check_data(cfg: &TrainConfig, loss: &dyn Loss, name: &str, d: &Dataset, n_targets: usize) -> Result<()> {
        let k = cfg.num_outputs();
        loss.check_labels(&d.targets()).map_err(|e| match e {
            Error::Column { column, reason } if name != "train" => {
                Error::Column { column: format!("{column} of eval set `{name}`"), reason }
            }
            e => e,
        })?;
        match (cfg.objective.is_ranking(), d.group_offsets.is_some()) {
            (true, false) => {
                return Err(Error::column(
                    "group",
                    format!("{} needs query groups (data `{name}` has none)", cfg.objective.name()),
                ))
            }
            (false, true) => {
                return Err(Error::column(
                    "group",
                    format!("query groups are only used by rank:* objectives, not {}", cfg.objective.name()),
                ))
            }
            _ => {}
        }
        if d.n_targets() != n_targets {
            return Err(Error::column(
                "label",
                format!("of eval set `{name}` has {} targets but the training label has {n_targets}", d.n_targets()),
            ));
        }
        if d.label_upper.is_some() && cfg.objective.task() != TaskKind::Interval {
            let interval = Objective::names_where(|d| d.task == TaskKind::Interval, " and ");
            return Err(Error::column(
                "label_upper_bound",
                format!(
                    "interval labels are only used by {interval}, not {} (data `{name}`)",
                    cfg.custom_objective.as_deref().unwrap_or(cfg.objective.name())
                ),
            ));
        }
        if let Some(m) = &d.base_margin {
            if m.len() != d.n_rows() * k {
                return Err(Error::column(
                    "base_margin",
                    format!("has {} values for {} rows x {k} outputs", m.len(), d.n_rows()),
                ));
            }
        }
        Ok(())
    }

    /// The built-in metrics a fit logs (`eval_metric`, else the objective's default), each
    /// checked against the objective; the user's metrics may not share their names.
    fn metrics(cfg: &TrainConfig, custom_metrics: &[Box<dyn CustomMetric>]) -> Result<Vec<Metric>> {
        let k = cfg.num_outputs();
        let metrics = if cfg.eval_metric.is_empty() { vec![cfg.default_metric()] } else { cfg.eval_metric.clone() };
        let metrics: Vec<Metric> = metrics.into_iter().map(|m| m.with_params(&cfg.metric_params())).collect();
        for m in &metrics {
            if cfg.num_target > 1 {
                // Several targets are scored element by element, as XGBoost scores them.
                if !m.is_elementwise() {
                    return Err(Error::param(
                        "eval_metric",
                        format!("`{}` does not score several targets (one value per row and target)", m.name()),
                    ));
                }
                m.check_applies(cfg.objective, 1)?;
            } else {
                m.check_applies(cfg.objective, k)?;
            }
        }
        if cfg.num_target > 1 && !custom_metrics.is_empty() {
            return Err(Error::param("eval_metric", "a user's metric cannot score several targets yet"));
        }
        let mut names: Vec<String> = Vec::new();
        for name in custom_metrics.iter().map(|m| m.name()) {
            if names.contains(&name) || metrics.iter().any(|m| m.name() == name) {
                return Err(Error::param(
                    "eval_metric",
                    format!("logs two metrics named `{name}`: give the user's metric a name of its own"),
                ));
            }
            names.push(name);
        }
        Ok(metrics)
    }

    /// How the sample weights enter the gradients: decided over every worker's weights, so
    /// that all round alike (a worker without weights counts as unit weights).
    pub(super) fn weighting(data: &Dataset, shard: &Shard) -> Result<Weighting> {
        let [largest, fractional] = data.weight.as_deref().map_or([1.0, 0.0], Weighting::summary);
        let mut summary = [largest, fractional, if data.weight.is_some() { 1.0 } else { 0.0 }];
        max_magnitudes(shard.comm, &mut summary)?;
        Ok(Weighting::from_summary((summary[2] > 0.0).then_some([summary[0], summary[1]])))
    }

    /// The loss's best constant margin over every worker's rows: their labels gathered in
    /// global order, so the float sums run as on one worker.
    fn estimate_base_margin(loss: &dyn Loss, data: &Dataset, shard: &Shard) -> Result<Vec<f32>> {
        if loss.base_margin_is_weighted_mean() && data.n_targets() == 1 {
            // A weighted mean from exact partial sums, which are the row-order sums' bits: read
            // in parallel, and in a distributed fit added up over the workers with no label
            // crossing.
            let t = data.targets();
            let terms = |start, out: &mut [[f64; 2]]| loss.mean_terms(&t, start, out);
            if let Some([sum, total]) = exact_sums(shard.comm, data.n_rows(), terms)? {
                return Ok(vec![loss.base_score_to_margin(if total > 0.0 { sum / total } else { 0.0 })]);
            }
        }
        if !shard.is_distributed() {
            return Ok(loss.estimate_base_margin(&data.targets()));
        }
        let all = GlobalTargets::gather(shard, &shard.rows, data, false)?;
        Ok(loss.estimate_base_margin(&all.targets()))
    }

    fn start_margin(base: &[f32], d: &Dataset, k: usize) -> StartMargin {
        match &d.base_margin {
            Some(m) => StartMargin::Rows(class_major(m, d.n_rows(), k)),
            None => StartMargin::Constant(base.to_vec()),
        }
    }

    /// Rows used this round: all (None), or a Bernoulli(`subsample`) sample keyed by (seed, round).
    /// The hash reads a row's global index, so each row is drawn alike on whichever worker
    /// holds it; whether the sample is empty or whole is judged over all workers.
    fn sample_rows(&self, round: usize) -> Result<Option<Vec<u32>>> {
        if self.cfg.subsample >= 1.0 {
            return Ok(None);
        }
        let below = (self.cfg.subsample * u64::MAX as f64) as u64;
        let key = hash64(self.cfg.seed, 0x5ab5_a3b1e ^ round as u64);
        let rows: Vec<u32> = (0u32..)
            .zip(self.shard.rows.global_rows())
            .filter(|&(_, g)| hash64(key, g) <= below)
            .map(|(r, _)| r)
            .collect();
        let drawn = sum_count(self.shard.comm, rows.len() as u64)? as usize;
        Ok((drawn > 0 && drawn < self.shard.rows.n_global()).then_some(rows))
    }

    /// Boosts on `engine`: it computes the cut points and makes the learner, and the loop runs
    /// with them.
    pub(super) fn run(self, engine: &dyn Engine, callback: &mut RoundCallback) -> Result<Model> {
        let fit = Fit {
            data: self.data,
            grow: self.grow.clone(),
            cfg: self.cfg,
            margin: Self::start_margin(&self.base_margin, self.data, self.k),
            refit: self.leaf_refit(),
            shard: self.shard,
        };
        let mut model = None;
        engine.fit(fit, &mut |cuts, learner| {
            let binned = self.bind(cuts, learner)?;
            model = Some(self.boost(&binned, learner, &mut *callback)?);
            Ok(())
        })?;
        model.ok_or_else(|| Error::Device("the engine ended the fit without running it".into()))
    }

    /// The leaf refits of an L1-type loss (None for the others). Output c's residuals are
    /// against its own target: one label column each with several targets, the one label for
    /// every quantile with several quantiles.
    fn leaf_refit(&self) -> Option<LeafRefit<'a>> {
        let n = self.data.n_rows();
        let alphas = (0..self.k).map(|c| self.loss.leaf_quantile(c)).collect::<Option<Vec<_>>>()?;
        let labels: Vec<&[f32]> = self.data.label.chunks(n).cycle().take(self.k).collect();
        Some(LeafRefit { alphas, labels, weight: self.data.weight.as_deref(), comm: self.shard.comm })
    }

    fn boost(&self, binned: &Binned, learner: &mut dyn Learner, callback: &mut RoundCallback) -> Result<Model> {
        let k = self.k;
        let mut trees: Vec<Tree> = Vec::new();
        let mut log = self.empty_log(&binned.evals);
        let mut best: Option<(usize, f64)> = None;
        let all_features: Vec<u32> = (0..binned.features.len() as u32).collect();
        let train_targets = self.data.targets();
        // The host's sets' margins (none for a held set).
        let mut evals: Vec<Vec<f32>> = binned
            .evals
            .iter()
            .map(|e| match &e.place {
                EvalPlace::Host { margin, .. } => margin.clone(),
                EvalPlace::Held(_) => Vec::new(),
            })
            .collect();
        for round in 0..self.cfg.n_estimators {
            learner.compute_gradients(&*self.loss, &train_targets)?;
            let rows = self.sample_rows(round)?;
            let tree_features = |tree_seed: u64| {
                if self.cfg.colsample_bytree < 1.0 {
                    let m = ((all_features.len() as f64 * self.cfg.colsample_bytree).round() as usize).max(1);
                    self.grow.sample_features(&mut Rng::new(tree_seed, 3), &all_features, m)
                } else {
                    all_features.clone()
                }
            };
            // One vector-leaf tree for every output, or one tree per output. The vector tree
            // takes the seed of the round's first tree, so with one output both strategies
            // sample alike (and grow the same tree).
            let round_trees = if self.cfg.multi_strategy == MultiStrategy::MultiOutputTree {
                let tree_seed = hash64(self.cfg.seed, (round * k) as u64);
                learner.grow_vector(rows.as_deref(), tree_features(tree_seed), tree_seed)?
            } else {
                (0..k)
                    .map(|c| {
                        let tree_seed = hash64(self.cfg.seed, (round * k + c) as u64);
                        learner.grow(c, rows.as_deref(), tree_features(tree_seed), tree_seed)
                    })
                    .collect::<Result<Vec<Tree>>>()?
            };
            let evaluating = std::time::Instant::now();
            for (c, tree) in round_trees.into_iter().enumerate() {
                for (e, margin) in binned.evals.iter().zip(evals.iter_mut()) {
                    let en = e.data.n_rows();
                    match &e.place {
                        EvalPlace::Held(id) => learner.add_tree_to_held(*id, c, &tree)?,
                        EvalPlace::Host { binned, .. } => {
                            learner.add_tree_to_eval(&tree, binned, &mut margin[c * en..(c + 1) * en])?
                        }
                    }
                }
                trees.push(tree);
            }
            let round_log = self.evaluate(&binned.evals, round, &evals, learner)?;
            for (series, (_, _, v)) in log.iter_mut().zip(&round_log.values) {
                series.values.push(*v);
            }
            let keep_going = callback(&round_log)?;
            learner.evaluated(evaluating);
            if self.stops_early(round, &round_log, &mut best) {
                break;
            }
            if !keep_going {
                break;
            }
        }
        let best_iteration = best.map(|(r, _)| r);
        if let Some(b) = best_iteration {
            trees.truncate((b + 1) * k);
        }
        let model = Model {
            config: self.cfg.clone(),
            n_outputs: k,
            base_margin: self.base_margin.clone(),
            features: binned.features.clone(),
            trees,
            best_iteration,
            evals_result: log,
            imported: None,
        };
        Ok(model)
    }

    /// One empty series per evaluation set and metric (built-in ones, then the user's), in
    /// the order `evaluate` reports their values.
    fn empty_log(&self, evals: &[EvalSet]) -> Vec<EvalSeries> {
        let mut log: Vec<EvalSeries> = Vec::new();
        for e in evals {
            for m in &self.metrics {
                log.push(EvalSeries { dataset: e.name.clone(), metric: m.name(), values: Vec::new() });
            }
            for m in &self.custom_metrics {
                log.push(EvalSeries { dataset: e.name.clone(), metric: m.name(), values: Vec::new() });
            }
        }
        log
    }

    /// Early stopping's decision after `round`: the last value logged (the last metric on the
    /// last evaluation set) improving strictly updates `best` (round, value); otherwise the
    /// fit stops once `early_stopping_rounds` rounds have passed since the best.
    fn stops_early(&self, round: usize, round_log: &RoundLog, best: &mut Option<(usize, f64)>) -> bool {
        if let (Some(patience), Some(&(_, _, score))) = (self.cfg.early_stopping_rounds, round_log.values.last()) {
            let higher = match self.custom_metrics.last() {
                Some(m) => m.higher_is_better(),
                None => self.metrics.last().unwrap().higher_is_better(),
            };
            let improved = match *best {
                None => true,
                Some((_, b)) => {
                    if higher {
                        score > b
                    } else {
                        score < b
                    }
                }
            };
            if improved {
                *best = Some((round, score));
            } else if round - best.unwrap().0 >= patience {
                return true;
            }
        }
        false
    }

    /// The metrics of every evaluation set after `round`: a held set's from its learner where
    /// it computes them, the others on the host from the set's margins (`margins`, or a held
    /// set's read back).
    fn evaluate(
        &self,
        evals: &[EvalSet],
        round: usize,
        margins: &[Vec<f32>],
        learner: &mut dyn Learner,
    ) -> Result<RoundLog> {
        let params = self.cfg.metric_params();
        // The held sets' metrics, from one call (a GPU reads them all back after one wait).
        let held: Vec<usize> = evals
            .iter()
            .filter_map(|e| match e.place {
                EvalPlace::Held(id) if e.flat.is_none() => Some(id),
                _ => None,
            })
            .collect();
        let mut from_learner = match held.is_empty() {
            true => Vec::new(),
            false => learner.held_metrics(&held, &self.metrics, &params, self.cfg.objective)?,
        }
        .into_iter();
        let mut values = Vec::new();
        for (e, margin) in evals.iter().zip(margins) {
            let device = match e.place {
                EvalPlace::Held(_) if e.flat.is_none() => from_learner.next().expect("one result a held set"),
                _ => vec![None; self.metrics.len()],
            };
            let on_host = device.iter().any(Option::is_none) || !self.custom_metrics.is_empty();
            let read;
            let margin = match e.place {
                EvalPlace::Held(id) if on_host => {
                    read = learner.held_margins(id)?;
                    &read
                }
                _ => margin,
            };
            let host = on_host.then(|| self.host_predictions(e, margin)).transpose()?;
            let named = |m: String, v: f64| (e.name.clone(), m, v);
            // Element by element: the labels row-major as the predictions, the weights repeated
            // for each target.
            if let (Some((label, weight)), Some((pred, _))) = (&e.flat, &host) {
                let t = crate::data::Targets { label, label_upper: None, weight: weight.as_deref(), groups: None };
                for m in &self.metrics {
                    values.push(named(m.name(), m.evaluate(pred, 1, &t, &params)));
                }
                continue;
            }
            for (m, d) in self.metrics.iter().zip(device) {
                let v = match (d, &host) {
                    (Some(v), _) => v,
                    (None, Some((pred, targets))) => m.evaluate(pred, self.k, targets, &params),
                    (None, None) => unreachable!("a metric left to the host has the host's predictions"),
                };
                values.push(named(m.name(), v));
            }
            for m in &self.custom_metrics {
                let (pred, targets) = host.as_ref().expect("a user's metric reads the host's predictions");
                values.push(named(m.name(), m.evaluate(pred, self.k, targets)?));
            }
        }
        Ok(RoundLog { round, values })
    }

    /// Set `e`'s predictions from its class-major `margin`s (row-major, through the link
    /// function, on the pool: each row's value is its own, so the same bits), with the targets
    /// its metrics read; a distributed fit's over every worker's rows, in global order.
    fn host_predictions<'e>(&self, e: &'e EvalSet, margin: &[f32]) -> Result<(Vec<f32>, crate::data::Targets<'e>)> {
        let (k, n) = (self.k, e.data.n_rows());
        let mut pred = vec![0f32; n * k];
        pred.par_chunks_mut(k).enumerate().with_min_len(4096).for_each(|(i, row)| {
            for (c, p) in row.iter_mut().enumerate() {
                *p = margin[c * n + i];
            }
            transform_row(self.cfg.objective, row);
        });
        Ok(match &e.global {
            Some(global) => (self.shard.gather_rows(&e.rows, &pred, k)?, global.targets()),
            None => (pred, e.data.targets()),
        })
    }
}
