//! The `gbt.fit` expression: an aggregation returning the model's bytes (scoring is in
//! `predict.rs`).

use std::collections::HashMap;
use std::sync::Arc;

use polars::prelude::*;
use serde::Deserialize;

use super::convert::{categorical_ids_column, f32_column, feature_column, margin_values, to_polars};
use super::dtypes::{broadcast, dtype_name};
use crate::{Dataset, FeatureFrame, RoundCallback, RoundLog, TrainConfig};

/// What `fit` receives besides the inputs: the parameters as JSON (parsed by
/// `TrainConfig::from_json`, which names any bad parameter) and which optional inputs follow
/// the features and the target, in this order: weight, group, base_margin,
/// label_upper_bound, then the eval_set masks (one per name in `eval_names`, or one named "valid").
#[derive(Deserialize)]
pub(super) struct FitKwargs {
    pub(super) params: String,
    has_weight: bool,
    pub(super) has_group: bool,
    has_base_margin: bool,
    #[serde(default)]
    has_label_upper_bound: bool,
    pub(super) has_eval_set: bool,
    /// The evaluation sets' names, one mask input each (empty: one mask, "valid").
    #[serde(default)]
    eval_names: Vec<String>,
    /// Print the evaluation log to stderr every this many rounds (0: silent).
    #[serde(default)]
    pub(super) verbose: usize,
    /// Draw a progress bar on stderr (of a streamed fit's passes too).
    #[serde(default)]
    pub(super) progress: bool,
    /// A model to continue from (its bytes; empty for none): its trees come first and the
    /// fit adds `n_estimators` more.
    #[serde(with = "serde_bytes", default)]
    pub(super) init_model: Vec<u8>,
    /// A user's objective: its number in `polars_gbt._custom`'s registry (the parameters'
    /// `custom_objective` names it).
    #[serde(default)]
    objective_id: Option<u64>,
    /// A user's metrics: their registry numbers and names, logged after the built-in metrics.
    #[serde(default)]
    metric_ids: Vec<u64>,
    #[serde(default)]
    metric_names: Vec<String>,
    /// Whether early stopping looks for larger values of the user's metrics (XGBoost's
    /// `maximize`).
    #[serde(default)]
    maximize: bool,
    /// This worker's place in a distributed fit (`polars_gbt.dask` passes it).
    #[serde(default)]
    pub(super) distributed: Option<DistributedKwargs>,
    /// What the user called the target and the optional inputs, for errors.
    #[serde(default)]
    pub(super) input_names: InputNames,
    /// Under `POLARS_GBT_PROFILE=1`, when the expression was built (Unix seconds): the fit says
    /// how long Polars worked before calling it.
    #[serde(default)]
    profile_built_at: Option<f64>,
    /// Features that come as a `Categorical` column's physical ids, with the names of its
    /// categories in id order (`polars_gbt.train` on a frame: Polars' export of a
    /// `Categorical` to a plugin renumbers every row, its ids do not).
    #[serde(default)]
    categorical_names: HashMap<String, Vec<String>>,
}

/// The names errors give `fit`'s inputs: the user's own columns (`default`, not "target" or
/// the core's "label"), or the parameter where an input has no name of its own (a literal).
/// `polars_gbt.train` and the estimators pass the names their callers used.
#[derive(Clone, Deserialize)]
#[serde(default)]
pub(super) struct InputNames {
    target: String,
    /// Several targets' own columns, in order (`polars_gbt.train(target=[...])`), for
    /// errors about one of them; empty: "`target` (target t)".
    targets: Vec<String>,
    pub(super) weight: String,
    pub(super) group: String,
    base_margin: String,
    label_upper_bound: String,
    /// What marks the evaluation rows: `eval_set` (a mask of the fit's rows), or
    /// `polars_gbt.train`'s `eval_df` / `eval_sets` (frames of their own).
    eval_set: String,
}

impl Default for InputNames {
    fn default() -> Self {
        InputNames {
            target: "target".into(),
            targets: Vec::new(),
            weight: "weight".into(),
            group: "group".into(),
            base_margin: "base_margin".into(),
            label_upper_bound: "label_upper_bound".into(),
            eval_set: "eval_set".into(),
        }
    }
}

impl InputNames {
    /// `e` with the core's names of the inputs (`label`, `weight`, ...) replaced by the
    /// user's: a column error's column is a role, maybe followed by which target
    /// (`label (target 1)`), or a feature; either maybe followed by which evaluation set
    /// (`... of eval set `valid``), which the message says after the column's own backquotes:
    /// "column `default` of eval set `valid`: ...".
    pub(super) fn rename(&self, e: crate::Error) -> crate::Error {
        let crate::Error::Column { column, reason } = e else { return e };
        let (head, set) = match column.rfind(" of eval set `") {
            Some(i) if column.ends_with('`') => (&column[..i], Some(&column[i + 1..column.len() - 1])),
            _ => (column.as_str(), None),
        };
        let head = self.role_name(head);
        let column = match set {
            Some(set) => format!("{head}` {set}"),
            None => head,
        };
        crate::Error::Column { column, reason }
    }

    /// A column named by its role (`label`, `label (target 1)`, `weight`, ...) as the user's
    /// column; any other column as it is.
    fn role_name(&self, column: &str) -> String {
        let (role, rest) = column.split_once(' ').unwrap_or((column, ""));
        let mut name = match role {
            "label" | "target" => self.target.as_str(),
            "weight" => self.weight.as_str(),
            "group" => self.group.as_str(),
            "base_margin" => self.base_margin.as_str(),
            "label_upper_bound" => self.label_upper_bound.as_str(),
            _ => return column.to_string(),
        };
        let mut rest = rest;
        // One of several targets: its own column when the caller named them.
        if let Some(t) = rest.strip_prefix("(target ").and_then(|r| r.split_once(')')) {
            if let Some(own) = t.0.parse::<usize>().ok().and_then(|t| self.targets.get(t)) {
                name = own;
                rest = t.1.trim_start();
            }
        }
        match rest {
            "" => name.to_string(),
            rest => format!("{name} {rest}"),
        }
    }

    /// How errors name evaluation set `name` of `n_sets`: `eval_set`, `eval_set `test``
    /// (several), `eval_df`, `eval_sets `test``.
    fn eval_set(&self, name: &str, n_sets: usize) -> String {
        match self.eval_set.as_str() {
            "eval_set" | "eval_df" if n_sets == 1 => self.eval_set.clone(),
            many => format!("{many} `{name}`"),
        }
    }

    /// The error of a fit whose evaluation sets take every row.
    fn no_training_rows(&self, n_sets: usize) -> crate::Error {
        match self.eval_set.as_str() {
            // polars_gbt.train: its data frame held no rows of its own.
            frames @ ("eval_df" | "eval_sets") => {
                crate::Error::data(format!("`data` has no rows to train on (the rows of {frames} are only evaluated)"))
            }
            mask => {
                let sets = if n_sets == 1 { "the evaluation set" } else { "an evaluation set" };
                crate::Error::column(mask, format!("every row is in {sets}: no rows left to train on"))
            }
        }
    }

    /// [`InputNames::rename`] as Polars' error.
    pub(super) fn polars(&self, e: crate::Error) -> PolarsError {
        to_polars(self.rename(e))
    }
}

impl FitKwargs {
    /// What a distributed fit's worker cannot take yet: continued training, a Python
    /// objective or metric.
    pub(super) fn check_distributable(&self) -> crate::Result<()> {
        if !self.init_model.is_empty() || self.objective_id.is_some() || !self.metric_ids.is_empty() {
            return Err(crate::Error::param(
                "distributed",
                "fits take no init_model or Python objective or metric yet",
            ));
        }
        Ok(())
    }
}

/// How one worker of a distributed fit joins the others: its ring and where its rows sit
/// among the fit's rows (`(first global row, length)` runs, in its row order).
#[derive(Deserialize)]
pub(super) struct DistributedKwargs {
    rank: usize,
    world: usize,
    tracker: String,
    token: String,
    host: String,
    timeout: f64,
    spans: Vec<(u64, u64)>,
    n_rows: u64,
    /// Each evaluation set's spans and rows, in the order of the fit's eval sets.
    #[serde(default)]
    evals: Vec<(Vec<(u64, u64)>, u64)>,
}

impl DistributedKwargs {
    /// Joins the fit's other workers: the ring, then, between GPU workers (one visible GPU
    /// each, as dask-cuda starts them), NCCL started over it; CPU workers keep the ring.
    pub(super) fn join(&self, cfg: &TrainConfig) -> crate::Result<Joined> {
        use crate::collective::{timeout_from_secs, RingConfig, RowSpans, TcpRing};
        let timeout = timeout_from_secs(self.timeout)?;
        let rows = RowSpans::new(self.spans.clone(), self.n_rows)?;
        let ring = TcpRing::join(&RingConfig {
            rank: self.rank,
            world: self.world,
            tracker: self.tracker.clone(),
            token: self.token.clone(),
            host: self.host.clone(),
            timeout,
        })?;
        let evals =
            self.evals.iter().map(|(spans, n)| RowSpans::new(spans.clone(), *n)).collect::<crate::Result<Vec<_>>>()?;
        let devices = crate::backend::device_collective(cfg, &ring, 0, timeout)?;
        Ok(Joined { ring, devices, rows, evals })
    }

    fn train(
        &self,
        cfg: &TrainConfig,
        data: &Dataset,
        evals: &[(&str, &Dataset)],
        log: &mut RoundCallback,
    ) -> crate::Result<crate::Model> {
        let joined = self.join(cfg)?;
        let shard = joined.shard();
        crate::Training::new(cfg, data).evals(evals).callback(log).shard(&shard).run()
    }
}

/// A worker joined to the others of its distributed fit ([`DistributedKwargs::join`]).
pub(super) struct Joined {
    ring: crate::collective::TcpRing,
    devices: Option<Box<dyn crate::collective::Collective + Send + Sync>>,
    rows: crate::collective::RowSpans,
    evals: Vec<crate::collective::RowSpans>,
}

impl Joined {
    /// The worker's share: its collective (NCCL between GPU workers, else the ring) and the
    /// places of its rows.
    pub(super) fn shard(&self) -> crate::collective::Shard<'_> {
        let comm: &dyn crate::collective::Collective = match &self.devices {
            Some(d) => &**d,
            None => &self.ring,
        };
        crate::collective::Shard { comm, rows: self.rows.clone(), evals: self.evals.clone() }
    }
}

fn binary_output(_: &[Field]) -> PolarsResult<Field> {
    Ok(Field::new(PlSmallStr::from_static("model"), DataType::Binary))
}

super::abi::plugin_expression!(_polars_plugin_gbt_fit, _polars_plugin_field_gbt_fit, fit, binary_output, FitKwargs);

/// `fit`'s inputs, told apart: the features, the target, then the optional ones in
/// `FitKwargs`'s order.
pub(super) struct FitInputs<'a> {
    features: &'a [Series],
    target: &'a Series,
    pub(super) weight: Option<&'a Series>,
    pub(super) group: Option<&'a Series>,
    base_margin: Option<&'a Series>,
    /// Upper bounds of interval labels (`survival:aft`).
    label_upper: Option<&'a Series>,
    /// Boolean masks of held-out rows, each evaluated every round under its name; early
    /// stopping watches the last.
    eval_sets: Vec<(String, &'a Series)>,
    /// The model to continue from.
    init: Option<Arc<crate::Model>>,
    /// A user's objective (see `FitKwargs::objective_id`).
    objective_id: Option<u64>,
    /// A user's metrics: (registry number, name), and whether larger is better.
    metrics: Vec<(u64, String)>,
    maximize: bool,
    /// How errors name the inputs.
    pub(super) names: InputNames,
    /// Features given as categorical ids, and their categories' names (`FitKwargs`).
    categorical_names: &'a HashMap<String, Vec<String>>,
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

    /// The dataset of `rows` (all of them when None).
    pub(super) fn dataset(&self, rows: Option<&IdxCa>) -> PolarsResult<Dataset> {
        self.dataset_or_empty(rows, false)
    }

    /// [`FitInputs::dataset`]; `empty_ok`: no rows is allowed (a worker's share of a
    /// distributed fit's evaluation set).
    pub(super) fn dataset_or_empty(&self, rows: Option<&IdxCa>, empty_ok: bool) -> PolarsResult<Dataset> {
        let labelled = |frame, label, k| match empty_ok {
            true => Dataset::with_labels_or_empty(frame, label, k),
            false => Dataset::with_labels(frame, label, k),
        };
        let pick = |s: &Series| match rows {
            Some(idx) => s.take(idx),
            None => Ok(s.clone()),
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
    fn train(
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
    fn split(&self, rows: Option<&[IdxSize]>, empty_evals: bool) -> PolarsResult<(Dataset, Vec<Dataset>)> {
        if self.eval_sets.is_empty() {
            let rows = rows.map(|r| IdxCa::from_vec(PlSmallStr::EMPTY, r.to_vec()));
            return Ok((self.dataset(rows.as_ref())?, Vec::new()));
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
        let fit = self.dataset(Some(&IdxCa::from_vec(PlSmallStr::EMPTY, fit)))?;
        let valid = masks
            .iter()
            .map(|m| {
                let rows: Vec<IdxSize> = all.iter().copied().filter(|&i| marked(m, i)).collect();
                self.dataset_or_empty(Some(&IdxCa::from_vec(PlSmallStr::EMPTY, rows)), empty_evals)
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

/// What a fit does after each round: print the evaluation log every `verbose` rounds, draw
/// the progress bar, and stop when the fit was interrupted (`module::interrupt_fits`). With
/// verbose output it says first where the fit runs when "auto" chose the CPU (and why).
pub(super) fn round_logger(cfg: &TrainConfig, kwargs: &FitKwargs) -> impl FnMut(&RoundLog) -> crate::Result<bool> {
    // A fit started before an interrupt stops at its next round.
    let epoch = super::module::interrupt_epoch();
    let (every, rounds) = (kwargs.verbose, cfg.n_estimators);
    let progress = kwargs.progress.then(|| ProgressBar::new(rounds));
    if every > 0 {
        if let Ok((_, Some(note))) = crate::backend::select(cfg) {
            eprintln!("polars-gbt: {note}");
        }
    }
    move |round: &RoundLog| {
        if every > 0 && !round.values.is_empty() && (round.round.is_multiple_of(every) || round.round + 1 == rounds) {
            eprintln!("{round}");
        }
        if let Some(bar) = &progress {
            bar.show(round.round + 1);
        }
        if super::module::interrupt_epoch() != epoch {
            return Err(crate::Error::Interrupted);
        }
        Ok(true)
    }
}

fn fit(inputs: &[Series], kwargs: FitKwargs) -> PolarsResult<Series> {
    if crate::profile::on() {
        profile_before_fit(kwargs.profile_built_at);
    }
    let cfg = TrainConfig::from_json(&kwargs.params).map_err(to_polars)?;
    // Literals (`weight=pl.lit(2.0)`) come as one row: repeated to the data's length.
    let inputs = broadcast(inputs);
    let fit = FitInputs::new(&inputs, &kwargs)?;
    let mut log = round_logger(&cfg, &kwargs);
    let _notes = crate::profile::notes(kwargs.verbose > 0);
    let model = match &kwargs.distributed {
        Some(d) => {
            kwargs.check_distributable().map_err(to_polars)?;
            let (data, valid) = fit.split(None, true)?;
            let evals: Vec<(&str, &Dataset)> =
                fit.eval_sets.iter().zip(&valid).map(|((name, _), d)| (name.as_str(), d)).collect();
            d.train(&cfg, &data, &evals, &mut log).map_err(|e| fit.names.polars(e))?
        }
        None => fit.train(&cfg, None, &mut log)?,
    };
    let clock = std::time::Instant::now();
    let bytes = model.to_bytes();
    if crate::profile::on() {
        eprintln!("polars-gbt profile: the model to bytes {:.3} s", clock.elapsed().as_secs_f64());
    }
    Ok(Series::new(PlSmallStr::from_static("model"), [bytes.as_slice()]))
}

/// The profile's lines for what came before the fit's own work: Polars' (from the expression's
/// building to the plugin's call: running the query's inputs and exporting them, which for a
/// `Categorical` column renumbers every row) and the plugin's import of its inputs.
fn profile_before_fit(built_at: Option<f64>) {
    let (called_at, import) = super::abi::last_call();
    if let (Some(built), Ok(called)) = (built_at, called_at.duration_since(std::time::UNIX_EPOCH)) {
        eprintln!(
            "polars-gbt profile: Polars' work from the expression's building to the plugin's call {:.3} s",
            called.as_secs_f64() - built
        );
    }
    eprintln!("polars-gbt profile: the plugin's import of its inputs {:.3} s", import.as_secs_f64());
}

/// `gbt.fit(..., by=key)`'s output: a struct of the key (named and typed as the `by` column,
/// the last input) and the group's model.
fn by_output(fields: &[Field]) -> PolarsResult<Field> {
    let key = fields.last().ok_or_else(|| polars_err!(ComputeError: "gbt.fit(by=...) needs a key column"))?;
    Ok(Field::new(
        PlSmallStr::from_static("model"),
        DataType::Struct(vec![key.clone(), Field::new(PlSmallStr::from_static("model"), DataType::Binary)]),
    ))
}

super::abi::plugin_expression!(
    _polars_plugin_gbt_fit_by,
    _polars_plugin_field_gbt_fit_by,
    fit_by,
    by_output,
    FitKwargs
);

/// One model per distinct value of the last input (the `by` key), the groups trained in
/// parallel on the shared worker pool, in the order of their first rows. Each model equals
/// the one `gbt.fit` gives on the group's rows alone: training is deterministic, and a fit's
/// own loops run on whatever pool they are in.
fn fit_by(inputs: &[Series], kwargs: FitKwargs) -> PolarsResult<Series> {
    use rayon::prelude::*;

    if kwargs.verbose > 0 || kwargs.progress {
        return Err(to_polars(crate::Error::param(
            "by",
            "trains its groups in parallel: verbose and progress are for single fits",
        )));
    }
    let cfg = TrainConfig::from_json(&kwargs.params).map_err(to_polars)?;
    let inputs = broadcast(inputs);
    let (key, rest) =
        inputs.split_last().ok_or_else(|| polars_err!(ComputeError: "gbt.fit(by=...) needs a key column"))?;
    let fit = FitInputs::new(rest, &kwargs)?;
    let groups = key.group_tuples(true, true)?.into_idx();
    let firsts: Vec<IdxSize> = groups.first().to_vec();
    let members: Vec<&[IdxSize]> = groups.all().iter().map(|g| g.as_slice()).collect();
    let keys = key.take_slice(&firsts)?;
    let epoch = super::module::interrupt_epoch();
    let models: Vec<PolarsResult<Vec<u8>>> = members
        .par_iter()
        .enumerate()
        .map(|(g, rows)| {
            let mut log = |_: &RoundLog| {
                if super::module::interrupt_epoch() != epoch {
                    return Err(crate::Error::Interrupted);
                }
                Ok(true)
            };
            fit.train(&cfg, Some(rows), &mut log).map(|m| m.to_bytes()).map_err(|e| {
                let value = keys.get(g).map(|v| v.to_string()).unwrap_or_default();
                polars_err!(ComputeError: "group {}={}: {}", key.name(), value, e)
            })
        })
        .collect();
    let models = models.into_iter().collect::<PolarsResult<Vec<_>>>()?;
    let models = Series::new(PlSmallStr::from_static("model"), models.iter().map(|m| m.as_slice()).collect::<Vec<_>>());
    let keys = keys.with_name(key.name().clone());
    Ok(StructChunked::from_series(PlSmallStr::from_static("model"), firsts.len(), [keys, models].iter())?.into_series())
}

/// A one-line progress bar on stderr: `[=========>          ] 120/250 rounds  3.1 s`.
struct ProgressBar {
    total: usize,
    start: std::time::Instant,
}

impl ProgressBar {
    fn new(total: usize) -> Self {
        ProgressBar { total, start: std::time::Instant::now() }
    }

    fn show(&self, done: usize) {
        let end = if done >= self.total { "\n" } else { "" };
        let bar = progress_bar(done, self.total);
        eprint!("\r[{bar}] {done}/{} rounds {:6.1} s{end}", self.total, self.start.elapsed().as_secs_f64());
    }
}

/// The cells of a progress bar, `done` of `total` filled: `=========>          `.
pub(super) fn progress_bar(done: usize, total: usize) -> String {
    const WIDTH: usize = 30;
    let filled = WIDTH * done / total.max(1);
    (0..WIDTH)
        .map(|i| {
            if i < filled {
                '='
            } else if i == filled {
                '>'
            } else {
                ' '
            }
        })
        .collect()
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
