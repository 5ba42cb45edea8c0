//! The boosting loop: starting margins, then per round gradients, one tree per output,
//! margin updates, evaluation and early stopping.
//!
//! `mod.rs` is the public entry: [`train`], and [`Training`] for everything else (a callback
//! per round, a user's objective and metrics, continued training, a worker of a distributed
//! fit). `trainer.rs` is the boosting loop, `devices.rs` a fit over several devices.

mod devices;
mod trainer;

use crate::backend::Backend;
use crate::collective::{agree, Shard};
use crate::config::TrainConfig;
use crate::data::Dataset;
use crate::error::{Error, Result};
use crate::metric::CustomMetric;
use crate::model::{Model, PredictOutput, Predictions};
use crate::objective::{loss_for, Loss};
use crate::tree::Weighting;

use devices::fit_on_devices;
use trainer::Trainer;

/// One round's evaluation results, as `(dataset, metric, value)`.
#[derive(Clone, Debug, PartialEq)]
pub struct RoundLog {
    pub round: usize,
    pub values: Vec<(String, String, f64)>,
}

impl std::fmt::Display for RoundLog {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(f, "[{}]", self.round)?;
        for (d, m, v) in &self.values {
            write!(f, "\t{d}-{m}:{v:.5}")?;
        }
        Ok(())
    }
}

/// Trains a model on `data`, evaluating on the named `evals` after every round. Early
/// stopping, when set, watches the last metric on the last evaluation set (as XGBoost does).
/// [`Training`] sets up anything more.
pub fn train(cfg: &TrainConfig, data: &Dataset, evals: &[(&str, &Dataset)]) -> Result<Model> {
    Training::new(cfg, data).evals(evals).run()
}

/// What a fit calls after every round ([`Training::callback`]).
pub type RoundCallback<'a> = dyn FnMut(&RoundLog) -> Result<bool> + Send + 'a;

/// A fit, set up step by step: [`train`] is `Training::new(cfg, data).evals(evals).run()`.
///
/// ```
/// # use std::sync::Arc;
/// # use arrow_array::{ArrayRef, Float32Array};
/// # use polars_gbt::{Dataset, FeatureColumn, FeatureFrame, TrainConfig, Training};
/// # let x: ArrayRef = Arc::new(Float32Array::from((0..100).map(|i| i as f32).collect::<Vec<_>>()));
/// # let frame = FeatureFrame::new(vec![FeatureColumn::new("x", vec![x])?])?;
/// # let data = Dataset::new(frame, (0..100).map(|i| (i % 7) as f32).collect())?;
/// let cfg = TrainConfig::from_json(r#"{"n_estimators": 20}"#)?;
/// let mut rounds = 0;
/// let model = Training::new(&cfg, &data)
///     .callback(&mut |_| {
///         rounds += 1;
///         Ok(rounds < 5) // stop after five rounds, keeping their trees
///     })
///     .run()?;
/// let more = Training::new(&cfg, &data).init_model(&model).run()?; // 20 more rounds on top
/// assert_eq!(more.trees().len(), 25);
/// # Ok::<(), polars_gbt::Error>(())
/// ```
pub struct Training<'a> {
    cfg: &'a TrainConfig,
    data: &'a Dataset,
    evals: &'a [(&'a str, &'a Dataset)],
    user: UserFunctions,
    callback: Option<&'a mut RoundCallback<'a>>,
    shard: Option<&'a Shard<'a>>,
    init: Option<&'a Model>,
}

impl<'a> Training<'a> {
    /// A fit of `cfg` on `data`, with no evaluation sets yet.
    pub fn new(cfg: &'a TrainConfig, data: &'a Dataset) -> Self {
        Training { cfg, data, evals: &[], user: UserFunctions::default(), callback: None, shard: None, init: None }
    }

    /// The named evaluation sets, scored after every round. Early stopping, when set, watches
    /// the last metric on the last set (as XGBoost does).
    pub fn evals(self, evals: &'a [(&'a str, &'a Dataset)]) -> Self {
        Training { evals, ..self }
    }

    /// Called after every round with its evaluation results: `Ok(false)` stops early (keeping
    /// the trees so far), an error aborts (e.g. on a keyboard interrupt).
    pub fn callback(self, callback: &'a mut RoundCallback<'a>) -> Self {
        Training { callback: Some(callback), ..self }
    }

    /// A user's objective (named by `cfg.custom_objective`) and metrics.
    pub fn user_functions(self, user: UserFunctions) -> Self {
        Training { user, ..self }
    }

    /// Continued training: `cfg.n_estimators` more rounds on top of `init` (XGBoost's
    /// `xgb_model`, LightGBM's `init_model`). Every row, of the training data and of the
    /// evaluation sets, starts from `init`'s margin; the result is `init`'s trees followed by
    /// the new ones, with `init`'s base score (see `model::continued`).
    pub fn init_model(self, init: &'a Model) -> Self {
        Training { init: Some(init), ..self }
    }

    /// Trains as one worker of a distributed fit: `data` holds this worker's rows, `shard`
    /// says where they sit among all the fit's rows and how to reach the other workers. Every
    /// worker runs the same fit, and every worker returns the same model: the one [`train`]
    /// gives on all rows in global order. The evaluation sets are this worker's rows of each
    /// (possibly none), placed by `shard.evals`; metrics are computed over every worker's
    /// rows, so the log and early stopping are one worker's too.
    ///
    /// Not yet distributed: a user's objective, continued training, and L1-type objectives
    /// (`reg:absoluteerror`, `reg:quantileerror`) with sample weights that are not all whole
    /// numbers, whose leaves' weighted quantiles follow one worker's row order; each a clear
    /// error. With unit or whole weights their leaves are refit over every worker's rows.
    pub fn shard(self, shard: &'a Shard<'a>) -> Self {
        Training { shard: Some(shard), ..self }
    }

    /// Runs the fit.
    pub fn run(self) -> Result<Model> {
        let Training { cfg, data, evals, user, callback, shard, init } = self;
        let mut go_on = |_: &RoundLog| Ok(true);
        let callback = match callback {
            Some(c) => c,
            None => &mut go_on,
        };
        if cfg.custom_objective.is_some() != user.objective.is_some() {
            return Err(Error::param(
                "custom_objective",
                "names the user's objective, and is given exactly when the fit is given one (Training::user_functions)",
            ));
        }
        if data.binned().is_some() && init.is_some() {
            return Err(Error::param(
                "init_model",
                "a streamed fit (rows binned batch by batch) cannot be continued yet: collect the data",
            ));
        }
        let solo = Shard::solo(data.n_rows());
        let job = Job { cfg, data, evals, user, callback, shard: shard.unwrap_or(&solo) };
        match (init, shard) {
            (None, None) => fit(job),
            (Some(init), None) => continued(init, job),
            (None, Some(_)) => sharded(job),
            (Some(_), Some(_)) => {
                Err(Error::param("init_model", "cannot be continued in a distributed fit yet: train it on one worker"))
            }
        }
    }
}

/// One fit's inputs as the entry points hand them on to one another. `Training::run` fills in
/// the defaults: without a callback every round goes on; without a shard the fit is one
/// worker's, of all the rows.
struct Job<'a> {
    cfg: &'a TrainConfig,
    data: &'a Dataset,
    evals: &'a [(&'a str, &'a Dataset)],
    user: UserFunctions,
    callback: &'a mut RoundCallback<'a>,
    shard: &'a Shard<'a>,
}

/// A worker's fit, once its rows and its row spans are seen to agree.
fn sharded(job: Job) -> Result<Model> {
    let Job { data, evals, shard, .. } = &job;
    if job.user.objective.is_some() {
        return Err(Error::param("custom_objective", "a user's objective cannot be trained distributed yet"));
    }
    if shard.rows.n_local() != data.n_rows() {
        return Err(Error::data(format!(
            "this worker holds {} rows but its row spans count {}",
            data.n_rows(),
            shard.rows.n_local()
        )));
    }
    if shard.evals.len() != evals.len() {
        return Err(Error::data(format!("{} evaluation sets but row spans for {}", evals.len(), shard.evals.len())));
    }
    for ((name, d), rows) in evals.iter().zip(&shard.evals) {
        if rows.n_local() != d.n_rows() {
            return Err(Error::data(format!(
                "this worker holds {} rows of eval set `{name}` but its row spans count {}",
                d.n_rows(),
                rows.n_local()
            )));
        }
    }
    fit(job)
}

/// A user's functions for a fit (Python callables, through the plugin).
#[derive(Default)]
pub struct UserFunctions {
    /// Computes the gradients in place of the objective's loss; `cfg.custom_objective` names
    /// it, and `cfg.objective` gives the model's link and outputs. The rows start from margin
    /// 0 unless `base_score` is set.
    pub objective: Option<Box<dyn Loss>>,
    /// Evaluated after the built-in metrics, each round on each evaluation set.
    pub metrics: Vec<Box<dyn CustomMetric>>,
}

fn fit(job: Job) -> Result<Model> {
    let Job { cfg, data, evals, user, callback, shard } = job;
    let cfg = &with_targets_of(cfg, data)?;
    cfg.validate()?;
    // `Dataset::with_labels_or_empty` allows no rows, for a worker's share of an evaluation
    // set only.
    if data.n_rows() == 0 {
        return Err(Error::data("the data has no rows"));
    }
    if let Some((name, _)) = evals.iter().find(|(_, d)| d.n_rows() == 0 && !shard.is_distributed()) {
        return Err(Error::data(format!("eval set `{name}` has no rows")));
    }
    let clock = std::time::Instant::now();
    if shard.is_distributed() {
        check_distributed(cfg, data, evals, shard)?;
    }
    if let Some(m) = cfg.missing {
        // The sentinel reads as missing in the training rows and every evaluation set.
        let data = data.with_missing_value(m as f32);
        let evals_data: Vec<Dataset> = evals.iter().map(|(_, d)| d.with_missing_value(m as f32)).collect();
        let evals: Vec<(&str, &Dataset)> = evals.iter().zip(&evals_data).map(|((name, _), d)| (*name, d)).collect();
        let cfg = TrainConfig { missing: None, ..cfg.clone() };
        let mut model = fit(Job { cfg: &cfg, data: &data, evals: &evals, user, callback, shard })?;
        model.config.missing = Some(m);
        return Ok(model);
    }
    if cfg.scale_pos_weight != 1.0 {
        // A weight like any other: the positives' weights are multiplied by it, so that a fit
        // with it is exactly the fit with those weights (whole ones applied after rounding).
        let spw = cfg.scale_pos_weight;
        let data = data.with_positive_weight(spw as f32);
        let cfg = TrainConfig { scale_pos_weight: 1.0, ..cfg.clone() };
        let mut model = fit(Job { cfg: &cfg, data: &data, evals, user, callback, shard })?;
        model.config.scale_pos_weight = spw;
        return Ok(model);
    }
    if cfg.early_stopping_rounds.is_some() && evals.is_empty() {
        // XGBoost raises here too: with nothing to watch, the setting would be ignored silently.
        return Err(Error::param(
            "early_stopping_rounds",
            "needs an evaluation set to watch (eval_set in gbt.fit, eval_df in polars_gbt.train); none was given",
        ));
    }
    let (engine, _) = crate::backend::select(cfg)?;
    if data.binned().is_some() && !engine.takes_binned_rows() {
        return Err(Error::param(
            "device",
            format!(
                "a streamed fit's rows are binned on the host, which the {:?} engine does not train on yet: \
                 train with device=\"cpu\", or collect the data first",
                engine.backend()
            ),
        ));
    }
    // `n_gpus` counts GPUs: on the CPU (`device="auto"` without a GPU) the fit is one worker's.
    if engine.backend() == Backend::Cuda && cfg.n_gpus > 1 && !shard.is_distributed() {
        return fit_on_devices(engine, Job { cfg, data, evals, user, callback, shard });
    }
    let data = &agree::unify_categories(shard, data)?;
    if crate::profile::on() {
        eprintln!("polars-gbt profile: checks and categories {:.3} s", clock.elapsed().as_secs_f64());
    }
    let mut user = Some(user);
    let mut run = || {
        let trainer = Trainer::new(cfg, data, evals, user.take().unwrap_or_default(), shard)?;
        if crate::profile::on() {
            eprintln!("polars-gbt profile: checks and set-up before the engine {:.3} s", clock.elapsed().as_secs_f64());
        }
        let model = trainer.run(engine, callback);
        if crate::profile::on() {
            eprintln!("polars-gbt profile: the fit, checks to model {:.3} s", clock.elapsed().as_secs_f64());
        }
        model
    };
    if cfg.n_jobs > 0 {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(cfg.n_jobs)
            .build()
            .map_err(|e| Error::param("n_jobs", format!("cannot start {} threads: {e}", cfg.n_jobs)))?;
        pool.install(run)
    } else {
        run()
    }
}

/// What a distributed fit needs of every worker: the same schema for the training data and
/// each evaluation set, and no leaf refit whose result depends on one worker's row order.
/// Every worker checks the same things, so all fail alike rather than some waiting.
fn check_distributed(cfg: &TrainConfig, data: &Dataset, evals: &[(&str, &Dataset)], shard: &Shard) -> Result<()> {
    agree::check_schema(shard, data)?;
    for (_, d) in evals {
        agree::check_schema(shard, d)?;
    }
    let refits = loss_for(cfg.objective, &cfg.objective_params()).leaf_quantile(0).is_some();
    if refits && Trainer::weighting(data, shard)? == Weighting::InLoss && data.weight.is_some() {
        // A weighted quantile's running sum of fractional weights follows one worker's
        // row order; whole weights sum exactly in any order.
        return Err(Error::param(
            "objective",
            format!(
                "{} with sample weights that are not all whole numbers refits leaves in row order and \
                 cannot be trained distributed yet",
                cfg.objective.name()
            ),
        ));
    }
    Ok(())
}

/// `cfg` with `num_target` the label's number of targets (XGBoost reads it off the label's
/// shape too); a `num_target` given that disagrees is an error.
fn with_targets_of(cfg: &TrainConfig, data: &Dataset) -> Result<TrainConfig> {
    let k = data.n_targets();
    if cfg.num_target != k && cfg.num_target != 1 {
        return Err(Error::param(
            "num_target",
            format!("is {} but the label has {k} target{}", cfg.num_target, if k == 1 { "" } else { "s" }),
        ));
    }
    Ok(TrainConfig { num_target: k, ..cfg.clone() })
}

/// Continued training ([`Training::init_model`]): every row starts from `init`'s margin.
fn continued(init: &Model, job: Job) -> Result<Model> {
    let Job { cfg, data, evals, user, callback, shard } = job;
    if user.objective.is_some() {
        return Err(Error::param(
            "init_model",
            "cannot be continued with a custom objective yet: train with the objective from the start",
        ));
    }
    if cfg.base_score.is_some() {
        return Err(Error::param("base_score", "cannot be set with init_model: the fit continues from its base score"));
    }
    let cfg = &with_targets_of(cfg, data)?;
    crate::model::check_start(init, cfg.objective, cfg.num_outputs(), cfg.multi_strategy, &data.features.names())?;
    let forest = init.predictor(Backend::Cpu)?;
    let from_init = |d: &Dataset| -> Result<Dataset> {
        if d.base_margin.is_some() {
            return Err(Error::param(
                "init_model",
                "and base_margin together are not supported: the rows start from init_model's margins",
            ));
        }
        let margins = match init.predict_with(&*forest, &d.features, PredictOutput::Margin, None)? {
            Predictions::Float { values, .. } => values,
            Predictions::Index { .. } => unreachable!("margins are numbers"),
        };
        d.clone().with_base_margin(margins)
    };
    let data = from_init(data)?;
    let evals_data = evals.iter().map(|(_, d)| from_init(d)).collect::<Result<Vec<_>>>()?;
    let evals: Vec<(&str, &Dataset)> = evals.iter().zip(&evals_data).map(|((name, _), d)| (*name, d)).collect();
    let new = fit(Job { cfg, data: &data, evals: &evals, user, callback, shard })?;
    Model::continued(init, new)
}
