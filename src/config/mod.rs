//! Training parameters. The names follow XGBoost's (with its common aliases), so a user
//! moving from XGBoost keeps their parameter dictionaries. The same struct is what the Python
//! plugin deserialises its keyword arguments into: `deny_unknown_fields` makes a misspelled
//! parameter an error instead of a silently ignored setting.

mod constraints;
mod feature_weights;

use serde::{Deserialize, Deserializer, Serialize};

pub use self::constraints::{FeatureRef, InteractionConstraints, MonotoneConstraints};
pub use self::feature_weights::FeatureWeights;
use crate::error::{Error, Result};
use crate::metric::{Metric, MetricParams};
pub use crate::tree::GrowPolicy;
use crate::tree::{GrowParams, SplitParams, Weighting};
// The objective lives with its descriptor in `objective`, and is re-exported where it was.
pub use crate::objective::Objective;
use crate::objective::{ObjectiveParams, RankingParams};
use crate::params::aft::AftParams;
// The shared parameter types live in `params`, below `objective` and `metric`, and are
// re-exported where they were.
pub use crate::params::aft::AftDistribution;
pub use crate::params::{QuantileAlphas, MAX_QUANTILES};

/// Where training runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Device {
    Cpu,
    Cuda,
    /// CUDA when a usable GPU is present, else the CPU.
    Auto,
}

/// How a model with several outputs (classes, targets, quantiles) grows its trees
/// (XGBoost's `multi_strategy`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MultiStrategy {
    /// One scalar tree per output each round.
    #[default]
    OneOutputPerTree,
    /// One tree per round whose leaves hold one value per output; a split's gain is summed
    /// over the outputs. Stored as one tree per output that share the round's structure.
    MultiOutputTree,
}

/// How ranking pairs are formed (XGBoost's `lambdarank_pair_method`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PairMethod {
    Topk,
    /// Sampled pairs: named so that asking for it is a clear error, not an unknown value.
    Mean,
}

/// All training parameters, with XGBoost's defaults.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TrainConfig {
    pub objective: Objective,
    /// Boosting rounds (trees per output).
    #[serde(alias = "num_boost_round", alias = "num_round", alias = "num_iterations")]
    pub n_estimators: usize,
    #[serde(alias = "eta")]
    pub learning_rate: f64,
    /// Maximum depth; 0 means unlimited, which only lossguide growth accepts.
    pub max_depth: usize,
    /// Maximum leaves per tree; 0 means no limit (then `max_depth` bounds the tree).
    #[serde(alias = "num_leaves")]
    pub max_leaves: usize,
    pub grow_policy: GrowPolicy,
    /// One tree per output a round, or one tree with vector leaves for every output.
    pub multi_strategy: MultiStrategy,
    /// Bins per feature, counting the bin that holds missing values.
    pub max_bin: usize,
    #[serde(alias = "lambda", alias = "lambda_l2")]
    pub reg_lambda: f64,
    #[serde(alias = "alpha", alias = "lambda_l1")]
    pub reg_alpha: f64,
    /// Minimum loss reduction for a split.
    #[serde(alias = "min_split_loss")]
    pub gamma: f64,
    /// Minimum hessian sum in each child.
    #[serde(alias = "min_sum_hessian_in_leaf")]
    pub min_child_weight: f64,
    /// Clip leaf weights to this magnitude (0: no clipping).
    pub max_delta_step: f64,
    /// Share of rows each round samples. LightGBM's `bagging_fraction` means it only with
    /// `bagging_freq=1`, so that name is not taken as an alias.
    pub subsample: f64,
    #[serde(alias = "feature_fraction")]
    pub colsample_bytree: f64,
    pub colsample_bylevel: f64,
    #[serde(alias = "feature_fraction_bynode")]
    pub colsample_bynode: f64,
    /// Initial prediction in the objective's output space; estimated from the labels when unset.
    pub base_score: Option<f64>,
    #[serde(alias = "random_state")]
    pub seed: u64,
    /// Number of classes for `multi:*` objectives.
    pub num_class: usize,
    /// Labels per row (XGBoost's `num_target`): more than one fits one output per target.
    /// Training sets it from the label's columns; given, it must agree with them.
    pub num_target: usize,
    #[serde(deserialize_with = "one_or_many_metrics")]
    pub eval_metric: Vec<Metric>,
    pub early_stopping_rounds: Option<usize>,
    /// Delta of `reg:pseudohubererror`.
    pub huber_slope: f64,
    /// `binary:logistic`: the weight of rows labelled 1 is multiplied by this (XGBoost's
    /// `scale_pos_weight`, for unbalanced classes).
    pub scale_pos_weight: f64,
    /// Target quantile of `reg:quantileerror`, or several (one output each).
    pub quantile_alpha: QuantileAlphas,
    /// The expectile `reg:expectileerror` fits, in [0, 1] (XGBoost 3.3's `expectile_alpha`, which
    /// it requires: there is no default). A number or a list of one (XGBoost's form); several
    /// expectiles in one model are refused (see `validate_objective_params`).
    pub expectile_alpha: Option<QuantileAlphas>,
    /// Variance power of `reg:tweedie`, in [1, 2).
    pub tweedie_variance_power: f64,
    /// `survival:aft`: the distribution of the noise on the log time.
    pub aft_loss_distribution: AftDistribution,
    /// `survival:aft`: the scale of that noise (sigma).
    pub aft_loss_distribution_scale: f64,
    /// Categorical features with at most this many categories split one category against the rest.
    pub max_cat_to_onehot: usize,
    /// Largest set of categories a partition split sends one way (XGBoost's default, 64).
    pub max_cat_threshold: usize,
    /// Partition splits (features with more than `max_cat_to_onehot` categories) leave out the
    /// categories seen in fewer rows, and order the rest by weight with this added to each
    /// category's hessian (LightGBM's `cat_smooth`, and default).
    pub cat_smooth: f64,
    /// Added to `reg_lambda` when scoring the children of a partition split (LightGBM's `cat_l2`).
    pub cat_l2: f64,
    /// Rows each side of a partition split needs (LightGBM's `min_data_per_group`; our default
    /// is 50, not LightGBM's 100, which on small data rules partition splits out: see
    /// docs/reference-accuracy.md).
    pub min_data_per_group: usize,
    /// How the ranking objectives form pairs: `topk` (XGBoost's default) pairs every document
    /// ranked in a query's top `lambdarank_num_pair_per_sample` with the rest of the query.
    pub lambdarank_pair_method: PairMethod,
    /// The k of `topk` (default 32); a k at least the largest query uses every pair.
    pub lambdarank_num_pair_per_sample: Option<usize>,
    /// Scale each query's ranking gradients by log2(1 + L) / L (L: the sum of its lambdas).
    pub lambdarank_normalization: bool,
    /// Divide each pair's weight by the distance between its two scores (plus 0.01).
    pub lambdarank_score_normalization: bool,
    /// NDCG gain 2^relevance - 1 (integer relevance up to 31); false: the relevance itself.
    pub ndcg_exp_gain: bool,
    /// Monotone directions of features: by column name, or one per feature
    /// (`config::constraints` lists the forms).
    pub monotone_constraints: Option<MonotoneConstraints>,
    /// Sets of features allowed to interact (lists of column names or indices).
    pub interaction_constraints: Option<InteractionConstraints>,
    /// Set when a user's objective (a Python callable, `UserFunctions::objective`) computes the
    /// gradients: its name, for the record. `objective` is then only the link and outputs the
    /// model predicts with: `reg:squarederror` (the margin), `binary:logistic` or
    /// `multi:softprob`.
    pub custom_objective: Option<String>,
    /// A feature value that means missing, besides nulls and NaN (XGBoost's `missing`): kept
    /// in the model, so that scoring reads it as training did. Numeric columns only.
    pub missing: Option<f64>,
    /// Each feature's chance in column sampling (`colsample_*`): by column name (others weigh
    /// 1), or one per feature.
    pub feature_weights: Option<FeatureWeights>,
    /// Worker threads; 0 uses every core.
    #[serde(alias = "nthread", alias = "num_threads")]
    pub n_jobs: usize,
    pub device: Device,
    /// GPUs of this process to train on (`device="cuda"`): GPUs 0 to n_gpus - 1, the rows cut
    /// into one contiguous shard each, their histograms summed through NCCL. The trees are the
    /// ones one GPU gives. Recorded only when above 1.
    #[serde(skip_serializing_if = "is_one")]
    pub n_gpus: usize,
    /// The most GPU memory a fit may take, in bytes (a number, or text such as "6GB" or
    /// "512MiB"); None: what the GPU has free. A fit from rows binned on the host (a streamed
    /// fit) whose bins do not fit keeps them in host memory and pages them to the GPU. A
    /// limit of the machine, not of the model: never stored with it.
    #[serde(skip_serializing, deserialize_with = "bytes_amount")]
    pub max_device_memory: Option<u64>,
}

fn is_one(n: &usize) -> bool {
    *n == 1
}

impl Default for TrainConfig {
    fn default() -> Self {
        TrainConfig {
            objective: Objective::SquaredError,
            n_estimators: 100,
            learning_rate: 0.3,
            max_depth: 6,
            max_leaves: 0,
            grow_policy: GrowPolicy::Depthwise,
            multi_strategy: MultiStrategy::OneOutputPerTree,
            max_bin: 256,
            reg_lambda: 1.0,
            reg_alpha: 0.0,
            gamma: 0.0,
            min_child_weight: 1.0,
            max_delta_step: 0.0,
            subsample: 1.0,
            colsample_bytree: 1.0,
            colsample_bylevel: 1.0,
            colsample_bynode: 1.0,
            base_score: None,
            seed: 0,
            num_class: 0,
            num_target: 1,
            eval_metric: Vec::new(),
            early_stopping_rounds: None,
            huber_slope: 1.0,
            scale_pos_weight: 1.0,
            quantile_alpha: QuantileAlphas::default(),
            expectile_alpha: None,
            tweedie_variance_power: 1.5,
            aft_loss_distribution: AftDistribution::Normal,
            aft_loss_distribution_scale: 1.0,
            max_cat_to_onehot: 4,
            max_cat_threshold: 64,
            cat_smooth: 10.0,
            cat_l2: 10.0,
            min_data_per_group: 50,
            lambdarank_pair_method: PairMethod::Topk,
            lambdarank_num_pair_per_sample: None,
            lambdarank_normalization: true,
            lambdarank_score_normalization: true,
            ndcg_exp_gain: true,
            monotone_constraints: None,
            interaction_constraints: None,
            feature_weights: None,
            missing: None,
            custom_objective: None,
            n_jobs: 0,
            device: Device::Cpu,
            n_gpus: 1,
            max_device_memory: None,
        }
    }
}

/// A number of bytes: a whole number, or text of a number and a unit (B, KB, MB, GB, TB
/// in powers of 1000; KiB, MiB, GiB, TiB in powers of 1024), as `max_device_memory` takes it.
fn bytes_amount<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Option<u64>, D::Error> {
    use serde::de::Error as _;
    let bytes = match Option::<serde_json::Value>::deserialize(d)? {
        None => return Ok(None),
        Some(serde_json::Value::Number(n)) => n.as_u64(),
        Some(serde_json::Value::String(t)) => parse_bytes(&t),
        Some(_) => None,
    };
    bytes.map(Some).ok_or_else(|| {
        D::Error::custom("expected a whole number of bytes, or text of one with a unit such as \"6GB\" or \"512MiB\"")
    })
}

/// `text` ("6GB", "1.5 GiB", "1000000") as bytes.
pub fn parse_bytes(text: &str) -> Option<u64> {
    let t = text.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (number, unit) = (t[..split].trim(), t[split..].trim());
    let scale: u64 = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        "tb" => 1_000_000_000_000,
        "kib" => 1 << 10,
        "mib" => 1 << 20,
        "gib" => 1 << 30,
        "tib" => 1 << 40,
        _ => return None,
    };
    let value: f64 = number.parse().ok().filter(|v: &f64| v.is_finite() && *v >= 0.0)?;
    let bytes = value * scale as f64;
    (bytes < u64::MAX as f64).then_some(bytes.round() as u64)
}

/// `eval_metric` accepts one name or a list in text formats (JSON, Python kwargs); binary
/// formats, which cannot tell the two apart, always store a list.
fn one_or_many_metrics<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Vec<Metric>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OneOrMany {
        One(Metric),
        Many(Vec<Metric>),
    }
    if !d.is_human_readable() {
        return Vec::<Metric>::deserialize(d);
    }
    Ok(match OneOrMany::deserialize(d)? {
        OneOrMany::One(m) => vec![m],
        OneOrMany::Many(v) => v,
    })
}

impl TrainConfig {
    /// Parses a JSON object of parameters, rejecting unknown names.
    pub fn from_json(json: &str) -> Result<Self> {
        let map: serde_json::Map<String, serde_json::Value> = serde_json::from_str(json)
            .map_err(|e| Error::param("parameters", format!("expected a JSON object of parameters: {e}")))?;
        Self::from_map(map)
    }

    /// Builds a configuration from named parameters (XGBoost's names and aliases).
    pub fn from_map(mut map: serde_json::Map<String, serde_json::Value>) -> Result<Self> {
        take_fixed_settings(&mut map)?;
        // Each parameter alone first, so that an error names the parameter it concerns.
        for (name, value) in &map {
            let one = serde_json::Value::Object([(name.clone(), value.clone())].into_iter().collect());
            if let Err(e) = serde_json::from_value::<TrainConfig>(one) {
                return Err(Error::param(name, e.to_string()));
            }
        }
        let cfg: TrainConfig = serde_json::from_value(serde_json::Value::Object(map))
            .map_err(|e| Error::param(&param_name_of(&e.to_string()), e.to_string()))?;
        cfg.validate()?;
        Ok(cfg)
    }

    /// Number of model outputs (trees per round): the objective's for each target. (Several
    /// quantiles are their own targets: `validate` rejects them with several labels.)
    pub fn num_outputs(&self) -> usize {
        self.objective.num_outputs(self.num_class, self.quantile_alpha.len()) * self.num_target.max(1)
    }

    /// The parameters the objective's loss reads.
    pub fn objective_params(&self) -> ObjectiveParams {
        ObjectiveParams {
            huber_slope: self.huber_slope,
            scale_pos_weight: self.scale_pos_weight,
            quantile_alpha: self.quantile_alpha,
            expectile_alpha: self.expectile(),
            tweedie_variance_power: self.tweedie_variance_power,
            num_class: self.num_class,
            ranking: RankingParams {
                top_k: self.lambdarank_num_pair_per_sample.unwrap_or(RankingParams::default().top_k),
                normalise: self.lambdarank_normalization,
                score_normalise: self.lambdarank_score_normalization,
                exp_gain: self.ndcg_exp_gain,
            },
            aft: self.aft_params(),
            num_target: self.num_target,
        }
    }

    /// The expectile of `reg:expectileerror` (`validate` makes sure the objective has one).
    pub fn expectile(&self) -> f64 {
        self.expectile_alpha.map_or(0.5, |a| a.get(0))
    }

    fn aft_params(&self) -> AftParams {
        AftParams { distribution: self.aft_loss_distribution, scale: self.aft_loss_distribution_scale }
    }

    /// The metric evaluated when `eval_metric` is not given: the objective's, and for ranking
    /// NDCG (MAP for `rank:map`) at the top k of the pair method
    /// (`lambdarank_num_pair_per_sample`, 32 by default), as XGBoost's `ndcg@32` and `map@32`.
    pub fn default_metric(&self) -> Metric {
        let k = || self.lambdarank_num_pair_per_sample.unwrap_or(RankingParams::default().top_k) as u32;
        match Metric::default_for(self.objective) {
            Metric::Ndcg(None) if self.objective.is_ranking() => Metric::Ndcg(Some(k())),
            Metric::Map(None) if self.objective.is_ranking() => Metric::Map(Some(k())),
            m => m,
        }
    }

    /// The parameters the evaluation metrics read.
    pub fn metric_params(&self) -> MetricParams {
        MetricParams {
            quantile_alpha: self.quantile_alpha,
            expectile_alpha: self.expectile(),
            tweedie_variance_power: self.tweedie_variance_power,
            aft: self.aft_params(),
        }
    }

    /// What shapes each tree: the split regularisation, growth policy, sampling, and the
    /// constraints resolved against the fit's features (`names`, `categorical` marking the
    /// categorical ones).
    pub fn grow_params(&self, names: &[String], categorical: &[bool]) -> Result<GrowParams> {
        let constraints = constraints::resolve(
            self.monotone_constraints.as_ref(),
            self.interaction_constraints.as_ref(),
            names,
            categorical,
        )?;
        if constraints.has_monotone() && self.objective.refits_leaves() {
            return Err(Error::param(
                "monotone_constraints",
                format!(
                    "cannot be kept by {}, whose leaves are refitted to quantiles after each tree grows",
                    self.objective.name()
                ),
            ));
        }
        let feature_weights = match &self.feature_weights {
            None => Vec::new(),
            Some(w) => w.resolve(names)?,
        };
        Ok(GrowParams {
            split: SplitParams {
                reg_lambda: self.reg_lambda,
                reg_alpha: self.reg_alpha,
                gamma: self.gamma,
                min_child_weight: self.min_child_weight,
                max_delta_step: self.max_delta_step,
                max_cat_to_onehot: self.max_cat_to_onehot,
                max_cat_threshold: self.max_cat_threshold,
                cat_smooth: self.cat_smooth,
                cat_l2: self.cat_l2,
                min_data_per_group: self.min_data_per_group as f64,
            },
            policy: self.grow_policy,
            max_depth: self.max_depth,
            max_leaves: self.max_leaves,
            learning_rate: self.learning_rate,
            colsample_bylevel: self.colsample_bylevel,
            colsample_bynode: self.colsample_bynode,
            constraints,
            feature_weights,
            // The trainer sets it from the weights (Trainer::new).
            weighting: Weighting::InLoss,
        })
    }

    /// Checks every range; the error names the parameter.
    pub fn validate(&self) -> Result<()> {
        let unit = |x: f64| x > 0.0 && x <= 1.0;
        check(self.n_estimators >= 1, "n_estimators", "must be at least 1")?;
        check(self.n_gpus >= 1, "n_gpus", "must be at least 1")?;
        check(
            self.n_gpus == 1 || self.device != Device::Cpu,
            "n_gpus",
            "trains on several GPUs: it needs device=\"cuda\" (or \"auto\")",
        )?;
        check(self.max_device_memory != Some(0), "max_device_memory", "must be more than 0 bytes")?;
        check(
            self.max_device_memory.is_none() || self.device != Device::Cpu,
            "max_device_memory",
            "limits a GPU fit's memory: it needs device=\"cuda\" (or \"auto\")",
        )?;
        check(
            self.max_device_memory.is_none() || self.n_gpus == 1,
            "max_device_memory",
            "limits a fit on one GPU: fits over several GPUs (n_gpus) do not page their bins yet",
        )?;
        check(self.learning_rate.is_finite() && self.learning_rate > 0.0, "learning_rate", "must be > 0")?;
        match self.grow_policy {
            GrowPolicy::Depthwise => {
                check(self.max_depth >= 1, "max_depth", "must be at least 1 with grow_policy=\"depthwise\"")?
            }
            GrowPolicy::Lossguide => check(
                self.max_depth >= 1 || self.max_leaves >= 2,
                "max_depth",
                "0 (unlimited) needs max_leaves >= 2 to bound the tree",
            )?,
        }
        check(self.max_depth <= 30, "max_depth", "must be at most 30")?;
        check(self.max_leaves != 1, "max_leaves", "must be 0 (no limit) or at least 2")?;
        check((3..=65536).contains(&self.max_bin), "max_bin", "must be between 3 and 65536")?;
        check(self.reg_lambda.is_finite() && self.reg_lambda >= 0.0, "reg_lambda", "must be >= 0")?;
        check(self.reg_alpha.is_finite() && self.reg_alpha >= 0.0, "reg_alpha", "must be >= 0")?;
        check(self.gamma.is_finite() && self.gamma >= 0.0, "gamma", "must be >= 0")?;
        check(self.min_child_weight.is_finite() && self.min_child_weight >= 0.0, "min_child_weight", "must be >= 0")?;
        check(self.max_delta_step.is_finite() && self.max_delta_step >= 0.0, "max_delta_step", "must be >= 0")?;
        check(unit(self.subsample), "subsample", "must be in (0, 1]")?;
        check(unit(self.colsample_bytree), "colsample_bytree", "must be in (0, 1]")?;
        check(unit(self.colsample_bylevel), "colsample_bylevel", "must be in (0, 1]")?;
        check(unit(self.colsample_bynode), "colsample_bynode", "must be in (0, 1]")?;
        self.validate_objective_params()?;
        check(self.max_cat_threshold >= 1, "max_cat_threshold", "must be at least 1")?;
        check(self.cat_smooth.is_finite() && self.cat_smooth >= 0.0, "cat_smooth", "must be >= 0")?;
        check(self.cat_l2.is_finite() && self.cat_l2 >= 0.0, "cat_l2", "must be >= 0")?;
        check(self.early_stopping_rounds != Some(0), "early_stopping_rounds", "must be at least 1")?;
        check(
            self.missing.is_none_or(|m| m.is_finite() && (m as f32) as f64 == m),
            "missing",
            "must be a finite number that a float32 holds exactly (NaN is always missing; leave it unset)",
        )?;
        check(
            self.custom_objective.is_none()
                || matches!(self.objective, Objective::SquaredError | Objective::BinaryLogistic | Objective::MultiSoftprob),
            "objective",
            "with a custom objective, the model's link is reg:squarederror (margins), binary:logistic or multi:softprob",
        )?;
        check(
            self.feature_weights.is_none()
                || self.colsample_bytree < 1.0
                || self.colsample_bylevel < 1.0
                || self.colsample_bynode < 1.0,
            "feature_weights",
            "weigh column sampling, and no colsample_bytree, colsample_bylevel or colsample_bynode below 1 samples \
             columns",
        )?;
        check(
            self.lambdarank_pair_method == PairMethod::Topk,
            "lambdarank_pair_method",
            "\"mean\" (sampled pairs) is not available yet; \"topk\" is, with lambdarank_num_pair_per_sample \
             as its k (a k at least the largest query uses every pair)",
        )?;
        check(self.lambdarank_num_pair_per_sample != Some(0), "lambdarank_num_pair_per_sample", "must be at least 1")?;
        if let Some(b) = self.base_score {
            check(b.is_finite(), "base_score", "must be finite")?;
            self.objective.check_base_score(b)?;
        }
        self.objective.check_num_class(self.num_class)?;
        Ok(())
    }

    /// `validate`'s checks of the losses' parameters: their ranges, and those that only
    /// some objectives read (the parameters of their descriptors' XGBoost blocks).
    fn validate_objective_params(&self) -> Result<()> {
        check(self.huber_slope.is_finite() && self.huber_slope > 0.0, "huber_slope", "must be > 0")?;
        check(
            self.scale_pos_weight.is_finite() && self.scale_pos_weight > 0.0,
            "scale_pos_weight",
            "must be a finite number > 0",
        )?;
        if self.scale_pos_weight != 1.0 && !self.objective.reads("scale_pos_weight") {
            let names = Objective::names_reading("scale_pos_weight", " and ");
            return Err(Error::param("scale_pos_weight", format!("applies to {names} only")));
        }
        check(
            self.quantile_alpha.as_slice().iter().all(|a| *a > 0.0 && *a < 1.0),
            "quantile_alpha",
            "must be in (0, 1)",
        )?;
        if self.quantile_alpha.len() > 1 && !self.objective.reads("quantile_alpha") {
            let names = Objective::names_reading("quantile_alpha", "\" or objective=\"");
            return Err(Error::param("quantile_alpha", format!("with several quantiles needs objective=\"{names}\"")));
        }
        match (self.expectile_alpha, self.objective.reads("expectile_alpha")) {
            (None, true) => {
                return Err(Error::param(
                    "expectile_alpha",
                    format!("is required by {}: the expectile to fit, in [0, 1]", self.objective.name()),
                ))
            }
            (Some(_), false) => {
                let names = Objective::names_reading("expectile_alpha", " and ");
                return Err(Error::param("expectile_alpha", format!("applies to {names} only")));
            }
            (Some(a), true) if a.len() > 1 => {
                // XGBoost 3.3 fits several in one model by reparameterising the outputs (the
                // first expectile, then softplus gaps to the next), which predictions, SHAP and
                // the exporters would all have to follow.
                return Err(Error::param(
                    "expectile_alpha",
                    "several expectiles in one model are not supported: fit one model per expectile",
                ));
            }
            _ => {}
        }
        check(
            self.expectile_alpha.is_none_or(|a| (0.0..=1.0).contains(&a.get(0))),
            "expectile_alpha",
            "must be in [0, 1]",
        )?;
        check((1.0..2.0).contains(&self.tweedie_variance_power), "tweedie_variance_power", "must be in [1, 2)")?;
        check(self.num_target >= 1, "num_target", "must be at least 1")?;
        if self.num_target > 1 {
            let what = match (self.custom_objective.is_some(), self.quantile_alpha.len() > 1) {
                (true, _) => Some("a user's objective".to_string()),
                (false, true) => Some("several quantiles (one output each already)".to_string()),
                (false, false) if !self.objective.descriptor().per_target => Some(self.objective.name().to_string()),
                _ => None,
            };
            if let Some(what) = what {
                return Err(Error::param(
                    "num_target",
                    format!("several targets (one output each) cannot be fit with {what}"),
                ));
            }
        }
        check(
            self.aft_loss_distribution_scale.is_finite() && self.aft_loss_distribution_scale > 0.0,
            "aft_loss_distribution_scale",
            "must be > 0",
        )?;
        Ok(())
    }
}

/// Fails with `reason`, for the parameter `name`, unless `ok`.
fn check(ok: bool, name: &str, reason: &str) -> Result<()> {
    if ok {
        Ok(())
    } else {
        Err(Error::param(name, reason))
    }
}

/// XGBoost's parameters that choose what polars-gbt always does (`tree_method="hist"`,
/// `booster="gbtree"`, `enable_categorical`) or only touch logging (`verbosity`): checked and
/// taken out of `map`. `tree_method="gpu_hist"` is XGBoost's old spelling of
/// `device="cuda"` and becomes that (the Python package warns that it is deprecated, as
/// XGBoost does). Names that look like settings but have no exact meaning here are errors
/// that say so.
fn take_fixed_settings(map: &mut serde_json::Map<String, serde_json::Value>) -> Result<()> {
    use serde_json::Value;
    if let Some(v) = map.remove("tree_method") {
        match v.as_str() {
            Some("hist" | "auto") => {}
            Some("gpu_hist") => match map.get("device").and_then(Value::as_str) {
                None | Some("cuda") => {
                    map.insert("device".into(), "cuda".into());
                }
                Some(other) => {
                    return Err(Error::param(
                        "tree_method",
                        format!("\"gpu_hist\" means device=\"cuda\", which contradicts device=\"{other}\""),
                    ))
                }
            },
            _ => {
                return Err(Error::param(
                    "tree_method",
                    format!("{v} is not available: polars-gbt grows trees from histograms only (\"hist\")"),
                ))
            }
        }
    }
    if let Some(v) = map.remove("verbosity") {
        if !matches!(v.as_u64(), Some(0..=3)) {
            return Err(Error::param("verbosity", format!("must be 0, 1, 2 or 3, not {v}")));
        }
    }
    if let Some(v) = map.remove("booster") {
        if v.as_str() != Some("gbtree") {
            return Err(Error::param("booster", format!("{v} is not available: polars-gbt has \"gbtree\" only")));
        }
    }
    if let Some(v) = map.remove("enable_categorical") {
        if !v.is_boolean() {
            return Err(Error::param("enable_categorical", format!("must be true or false, not {v}")));
        }
    }
    let unsupported = [
        (
            "min_data_in_leaf",
            "polars-gbt has no row-count limit per leaf; min_child_weight bounds a leaf's hessian sum",
        ),
        ("bagging_fraction", "is subsample here (LightGBM samples only with bagging_freq > 0)"),
    ];
    for (name, why) in unsupported {
        if map.contains_key(name) {
            return Err(Error::param(name, why));
        }
    }
    Ok(())
}

/// serde's messages put the field name in backquotes; use it to name the parameter.
fn param_name_of(message: &str) -> String {
    message.split('`').nth(1).unwrap_or("parameters").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(json: &str) -> Result<TrainConfig> {
        TrainConfig::from_json(json)
    }

    #[test]
    fn lightgbm_names_are_aliases_of_ours() {
        let theirs = parse(
            r#"{"num_leaves": 13, "num_iterations": 7, "lambda_l1": 0.5, "lambda_l2": 2, "min_sum_hessian_in_leaf": 0.3,
                "feature_fraction": 0.8, "feature_fraction_bynode": 0.9, "grow_policy": "lossguide"}"#,
        )
        .unwrap();
        let ours = parse(
            r#"{"max_leaves": 13, "n_estimators": 7, "reg_alpha": 0.5, "reg_lambda": 2, "min_child_weight": 0.3,
                "colsample_bytree": 0.8, "colsample_bynode": 0.9, "grow_policy": "lossguide"}"#,
        )
        .unwrap();
        assert_eq!(theirs, ours);
        let e = parse(r#"{"num_leaves": 13, "max_leaves": 12}"#).unwrap_err().to_string();
        assert!(e.contains("duplicate field"), "{e}");
    }

    #[test]
    fn xgboost_settings_polars_gbt_always_has_are_accepted() {
        let plain = parse("{}").unwrap();
        for json in [
            r#"{"tree_method": "hist"}"#,
            r#"{"tree_method": "auto"}"#,
            r#"{"booster": "gbtree"}"#,
            r#"{"verbosity": 0}"#,
            r#"{"verbosity": 3}"#,
            r#"{"enable_categorical": true}"#,
            r#"{"enable_categorical": false}"#,
        ] {
            assert_eq!(parse(json).unwrap(), plain, "{json}");
        }
        assert_eq!(parse(r#"{"tree_method": "gpu_hist"}"#).unwrap().device, Device::Cuda);
        assert_eq!(parse(r#"{"tree_method": "gpu_hist", "device": "cuda"}"#).unwrap().device, Device::Cuda);
    }

    #[test]
    fn scale_pos_weight_is_positive_and_for_the_logistic_loss_only() {
        let check = |json: &str| parse(json).and_then(|c| c.validate());
        assert!(check(r#"{"objective": "binary:logistic", "scale_pos_weight": 3.5}"#).is_ok());
        for (json, why) in [
            (r#"{"scale_pos_weight": 3}"#, "binary:logistic only"),
            (r#"{"objective": "binary:logistic", "scale_pos_weight": 0}"#, "> 0"),
            (r#"{"objective": "binary:logistic", "scale_pos_weight": -2}"#, "> 0"),
        ] {
            let e = check(json).unwrap_err().to_string();
            assert!(e.contains("`scale_pos_weight`") && e.contains(why), "{json}: {e}");
        }
    }

    #[test]
    fn settings_with_no_meaning_here_are_errors_saying_why() {
        for (json, name, why) in [
            (r#"{"tree_method": "exact"}"#, "tree_method", "histograms only"),
            (r#"{"tree_method": "approx"}"#, "tree_method", "histograms only"),
            (r#"{"tree_method": "gpu_hist", "device": "cpu"}"#, "tree_method", "contradicts device=\"cpu\""),
            (r#"{"booster": "dart"}"#, "booster", "\"gbtree\" only"),
            (r#"{"booster": "gblinear"}"#, "booster", "\"gbtree\" only"),
            (r#"{"verbosity": 4}"#, "verbosity", "0, 1, 2 or 3"),
            (r#"{"enable_categorical": "yes"}"#, "enable_categorical", "true or false"),
            (r#"{"min_data_in_leaf": 20}"#, "min_data_in_leaf", "min_child_weight"),
            (r#"{"bagging_fraction": 0.5}"#, "bagging_fraction", "subsample"),
            (r#"{"missing": 0.1}"#, "missing", "float32 holds exactly"),
            (r#"{"tree_methd": "hist"}"#, "tree_methd", "unknown field"),
        ] {
            let e = parse(json).unwrap_err().to_string();
            assert!(e.contains(&format!("`{name}`")) && e.contains(why), "{json}: {e}");
        }
    }

    #[test]
    fn max_device_memory_takes_bytes_with_units_and_is_never_stored() {
        for (json, bytes) in [
            (r#"{"device": "cuda", "max_device_memory": 123456789}"#, 123_456_789u64),
            (r#"{"device": "cuda", "max_device_memory": "6GB"}"#, 6_000_000_000),
            (r#"{"device": "cuda", "max_device_memory": "1.5 GiB"}"#, 3 << 29),
            (r#"{"device": "auto", "max_device_memory": "512MiB"}"#, 512 << 20),
            (r#"{"device": "cuda", "max_device_memory": "2048"}"#, 2048),
        ] {
            let cfg = parse(json).unwrap_or_else(|e| panic!("{json}: {e}"));
            assert_eq!(cfg.max_device_memory, Some(bytes), "{json}");
            let stored = serde_json::to_string(&cfg).unwrap();
            assert!(!stored.contains("max_device_memory"), "{stored}");
        }
        for (json, why) in [
            (r#"{"device": "cuda", "max_device_memory": "6 bananas"}"#, "number of bytes"),
            (r#"{"device": "cuda", "max_device_memory": -1}"#, "number of bytes"),
            (r#"{"device": "cuda", "max_device_memory": [1]}"#, "number of bytes"),
            (r#"{"device": "cuda", "max_device_memory": 0}"#, "more than 0"),
            (r#"{"device": "cpu", "max_device_memory": "4GB"}"#, "needs device=\"cuda\""),
            (r#"{"device": "cuda", "n_gpus": 2, "max_device_memory": "4GB"}"#, "one GPU"),
        ] {
            let e = parse(json).unwrap_err().to_string();
            assert!(e.contains("`max_device_memory`") && e.contains(why), "{json}: {e}");
        }
    }
}
