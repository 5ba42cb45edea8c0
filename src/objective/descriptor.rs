//! This file is a declarative table, exempt from the 800-line rule: one entry per objective
//! ([`Objective::descriptor`]), with the types of its fields and the accessors that read it.
//!
//! What the crate knows about each objective, in one table ([`Objective::descriptor`]): its
//! names (XGBoost's and LightGBM's), its parameter block in XGBoost's model files, link,
//! task (and so whether it is multiclass or ranking, and its scikit-learn estimator),
//! outputs, whether its values are classes, GPU gradient kernel, leaf refits, default metric
//! and loss. Code elsewhere asks the descriptor instead of matching on objectives (prediction
//! on the CPU and GPU, the importers and XGBoost export, parameter validation, and the Python
//! package through `_internal.OBJECTIVES`), so that a case left out is a compile error rather
//! than a wildcard arm's silent default.
//!
//! A new objective touches:
//! 1. its loss: a `Loss` in a file of `objective/` (a new one, with its `mod` line in
//!    `objective/mod.rs`, or its family's);
//! 2. here: its `Objective` variant (last: the binary model format stores the index), its
//!    place in `Objective::ALL`, and its entry in `descriptor`;
//! 3. if the GPU computes its gradients row by row: its kernel in kernels/gradients.cu (an
//!    `OBJECTIVE_*` code and a case of `objective_gradient`), named by a `GpuGradient`
//!    variant here (with its `kernel_name` and `param`); the layout probe
//!    (tests/cuda_kernels.rs) checks that the codes agree. Without one (`gpu_gradient: None`)
//!    the host computes its gradients for the GPU too. (Pairwise gradients over query groups
//!    have their own kernel, kernels/ranking.cu, with a `PairMetric` code.)
//!
//! Nothing else: a row-wise objective without parameters of its own needs no other file. One
//! with a new parameter also adds it to `TrainConfig` (and `objective_params`), and names it
//! in its `xgboost_params` block, whose readers (the XGBoost export's `param_text` and
//! import's `read_param`) then need its case.

use serde::{Deserialize, Serialize};

use super::{aft, count, logistic, quantile, ranking, softmax, squared, survival, Loss};
use crate::error::{Error, Result};
use crate::math::{exp, sigmoid};
use crate::metric::Metric;
use crate::params::aft::AftParams;
use crate::params::{QuantileAlphas, TaskKind};

/// The loss being minimised. Serialised with XGBoost's names (`"binary:logistic"`, ...).
/// The binary model format stores the variant's index: new variants go last.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Objective {
    #[serde(rename = "reg:squarederror")]
    SquaredError,
    #[serde(rename = "reg:pseudohubererror")]
    PseudoHuber,
    #[serde(rename = "reg:quantileerror")]
    Quantile,
    #[serde(rename = "reg:absoluteerror")]
    AbsoluteError,
    #[serde(rename = "binary:logistic")]
    BinaryLogistic,
    #[serde(rename = "multi:softprob")]
    MultiSoftprob,
    #[serde(rename = "multi:softmax")]
    MultiSoftmax,
    #[serde(rename = "count:poisson")]
    Poisson,
    #[serde(rename = "reg:tweedie")]
    Tweedie,
    #[serde(rename = "rank:ndcg")]
    RankNdcg,
    #[serde(rename = "rank:pairwise")]
    RankPairwise,
    #[serde(rename = "rank:map")]
    RankMap,
    #[serde(rename = "reg:gamma")]
    Gamma,
    #[serde(rename = "reg:squaredlogerror")]
    SquaredLogError,
    #[serde(rename = "survival:cox")]
    Cox,
    #[serde(rename = "binary:hinge")]
    Hinge,
    #[serde(rename = "survival:aft")]
    Aft,
    #[serde(rename = "reg:expectileerror")]
    Expectile,
}

/// The parameters the losses read; `TrainConfig::objective_params` gathers them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ObjectiveParams {
    /// Delta of `reg:pseudohubererror`.
    pub huber_slope: f64,
    /// `binary:logistic`: the weight multiplier of rows labelled 1.
    pub scale_pos_weight: f64,
    /// Target quantiles of `reg:quantileerror` (one per output).
    pub quantile_alpha: QuantileAlphas,
    /// The expectile of `reg:expectileerror`.
    pub expectile_alpha: f64,
    /// Variance power of `reg:tweedie`.
    pub tweedie_variance_power: f64,
    /// Number of classes of the `multi:*` objectives.
    pub num_class: usize,
    /// Pairs, gains and normalisation of the ranking objectives.
    pub ranking: ranking::RankingParams,
    /// Distribution and scale of `survival:aft`.
    pub aft: AftParams,
    /// Labels per row: several make one output per target (`Descriptor::per_target`).
    pub num_target: usize,
}

/// How margins become predictions. The discriminants are the link codes that
/// `finish_predictions` (kernels/predict.cu) takes: `LINK_*` in kernels/common.cuh, compared
/// with these by the layout probe.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum Link {
    Identity = 0,
    /// The sigmoid: a probability.
    Logistic = 1,
    /// The exponential: a positive mean (log link).
    Exp = 2,
    /// The softmax over a row's outputs: class probabilities.
    Softmax = 3,
    /// The class of a hinge loss: 1 for a positive margin, else 0.
    Hinge = 4,
}

/// The gradient kernels of kernels/gradients.cu. The discriminants are their codes there
/// (`OBJECTIVE_*`), compared with these by the layout probe.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum GpuGradient {
    SquaredError = 0,
    Logistic = 1,
    PseudoHuber = 2,
    Poisson = 3,
    Tweedie = 4,
    Softmax = 5,
    Gamma = 6,
    /// The pinball loss's sign gradient (`reg:quantileerror`).
    Quantile = 7,
    /// The same at the median (`reg:absoluteerror`, whose `quantile_alpha` is always 0.5).
    AbsoluteError = 8,
    /// The expectile loss's weighted residual (`reg:expectileerror`).
    Expectile = 9,
}

/// How many outputs (trees per round) a model of the objective has, for each target.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outputs {
    One,
    /// One per class: `num_class`.
    NumClass,
    /// One per quantile of `quantile_alpha` (several quantiles are fit as several targets).
    PerQuantile,
}

/// An objective's parameters as XGBoost's model files keep them: a block of the `objective`
/// object, holding parameters whose names are also ours (`TrainConfig`'s fields).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct XgbParams {
    /// The block's name (`"tweedie_regression_param"`, ...).
    pub block: &'static str,
    /// The parameters in it: those of `TrainConfig`'s that the objective alone reads.
    pub params: &'static [&'static str],
}

/// How the GPU computes an objective's gradients.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeviceGradient {
    /// Row by row, by `objective_gradient` in kernels/gradients.cu.
    Pointwise(GpuGradient),
    /// Over the pairs of each query group, by `lambdarank` in kernels/ranking.cu (`metric`:
    /// what weighs a pair, its change of NDCG or of average precision, or nothing).
    LambdaRank { metric: ranking::PairMetric },
}

/// Everything known about one objective besides its loss's arithmetic.
#[derive(Clone, Copy)]
pub struct Descriptor {
    /// XGBoost's name, which is also the serde name (a test checks that they agree).
    pub name: &'static str,
    /// Its parameter block in XGBoost's model files (exported and imported); None: none.
    pub xgboost_params: Option<XgbParams>,
    /// Other names XGBoost's model files give it.
    pub xgboost_aliases: &'static [&'static str],
    /// LightGBM's names for it, its usual one first (none: the LightGBM importer rejects it).
    pub lightgbm_names: &'static [&'static str],
    /// Its task, which also picks its scikit-learn estimator ([`Descriptor::estimator`]), and
    /// whether it is multiclass or ranking.
    pub task: TaskKind,
    /// How its margins become predictions (on the CPU by [`Link::apply`], on the GPU by the
    /// link's code in kernels/predict.cu).
    pub link: Link,
    pub outputs: Outputs,
    /// Whether its predicted values are classes (`multi:softmax`'s), not the link's output.
    pub predicts_classes: bool,
    /// How the GPU computes its gradients; None: the host computes them.
    pub gpu_gradient: Option<DeviceGradient>,
    /// Whether leaves are refit to a quantile of their residuals after each tree (L1 losses).
    pub refits_leaves: bool,
    /// Whether it fits several targets, one output each, each on its own (multi-target
    /// regression): row-wise losses whose labels need nothing from other rows or targets.
    pub per_target: bool,
    /// XGBoost's default evaluation metric for it.
    pub default_metric: Metric,
    pub loss: fn(&ObjectiveParams) -> Box<dyn Loss>,
}

impl Objective {
    /// Every objective, in the order of their indices.
    pub const ALL: [Objective; 18] = [
        Objective::SquaredError,
        Objective::PseudoHuber,
        Objective::Quantile,
        Objective::AbsoluteError,
        Objective::BinaryLogistic,
        Objective::MultiSoftprob,
        Objective::MultiSoftmax,
        Objective::Poisson,
        Objective::Tweedie,
        Objective::RankNdcg,
        Objective::RankPairwise,
        Objective::RankMap,
        Objective::Gamma,
        Objective::SquaredLogError,
        Objective::Cox,
        Objective::Hinge,
        Objective::Aft,
        Objective::Expectile,
    ];

    /// The objective's entry in the table.
    #[allow(clippy::too_many_lines, reason = "a declarative table: one entry per objective")]
    pub fn descriptor(self) -> Descriptor {
        match self {
            Objective::SquaredError => Descriptor {
                name: "reg:squarederror",
                xgboost_params: None,
                xgboost_aliases: &["reg:linear"],
                lightgbm_names: &["regression", "regression_l2", "l2", "mean_squared_error", "mse"],
                task: TaskKind::Regression,
                link: Link::Identity,
                outputs: Outputs::One,
                predicts_classes: false,
                gpu_gradient: Some(DeviceGradient::Pointwise(GpuGradient::SquaredError)),
                refits_leaves: false,
                per_target: true,
                default_metric: Metric::Rmse,
                loss: |_| Box::new(squared::Squared),
            },
            Objective::Hinge => Descriptor {
                name: "binary:hinge",
                xgboost_params: None,
                xgboost_aliases: &[],
                lightgbm_names: &[],
                task: TaskKind::Binary,
                link: Link::Hinge,
                outputs: Outputs::One,
                predicts_classes: false,
                gpu_gradient: None,
                refits_leaves: false,
                per_target: true,
                default_metric: Metric::Error,
                loss: |_| Box::new(logistic::Hinge),
            },
            Objective::Aft => Descriptor {
                name: "survival:aft",
                xgboost_params: Some(XgbParams {
                    block: "aft_loss_param",
                    params: &["aft_loss_distribution", "aft_loss_distribution_scale"],
                }),
                xgboost_aliases: &[],
                lightgbm_names: &[],
                task: TaskKind::Interval,
                link: Link::Exp,
                outputs: Outputs::One,
                predicts_classes: false,
                // The host computes its gradients, for the GPU too (as survival:cox's): the
                // normal's erfc has no twin in the kernels that would give the CPU's trees.
                gpu_gradient: None,
                refits_leaves: false,
                per_target: false,
                default_metric: Metric::AftNloglik,
                loss: |p| Box::new(aft::Aft { params: p.aft }),
            },
            Objective::Cox => Descriptor {
                name: "survival:cox",
                xgboost_params: None,
                xgboost_aliases: &[],
                lightgbm_names: &[],
                task: TaskKind::Regression,
                link: Link::Exp,
                outputs: Outputs::One,
                predicts_classes: false,
                // A walk over the rows by time: the host computes it, for the GPU too.
                gpu_gradient: None,
                refits_leaves: false,
                per_target: false,
                default_metric: Metric::CoxNloglik,
                loss: |_| Box::new(survival::Cox),
            },
            Objective::SquaredLogError => Descriptor {
                name: "reg:squaredlogerror",
                xgboost_params: None,
                xgboost_aliases: &[],
                lightgbm_names: &[],
                task: TaskKind::Regression,
                link: Link::Identity,
                outputs: Outputs::One,
                predicts_classes: false,
                // On the GPU the host computes its gradients (log1p has no shared twin of the
                // CPU's, as `exp` has in kernels/math.cuh), so that both grow the same trees.
                gpu_gradient: None,
                refits_leaves: false,
                per_target: true,
                default_metric: Metric::Rmsle,
                loss: |_| Box::new(squared::SquaredLog),
            },
            Objective::PseudoHuber => Descriptor {
                name: "reg:pseudohubererror",
                xgboost_params: Some(XgbParams { block: "pseudo_huber_param", params: &["huber_slope"] }),
                xgboost_aliases: &[],
                lightgbm_names: &[],
                task: TaskKind::Regression,
                link: Link::Identity,
                outputs: Outputs::One,
                predicts_classes: false,
                gpu_gradient: Some(DeviceGradient::Pointwise(GpuGradient::PseudoHuber)),
                refits_leaves: false,
                per_target: true,
                default_metric: Metric::Rmse,
                loss: |p| Box::new(squared::PseudoHuber { slope: p.huber_slope as f32 }),
            },
            Objective::Quantile => Descriptor {
                name: "reg:quantileerror",
                xgboost_params: Some(XgbParams { block: "quantile_loss_param", params: &["quantile_alpha"] }),
                xgboost_aliases: &[],
                lightgbm_names: &["quantile"],
                task: TaskKind::Regression,
                link: Link::Identity,
                outputs: Outputs::PerQuantile,
                predicts_classes: false,
                gpu_gradient: Some(DeviceGradient::Pointwise(GpuGradient::Quantile)),
                refits_leaves: true,
                per_target: true,
                // The pinball loss at the objective's alpha (MAE would track the median).
                default_metric: Metric::Quantile,
                loss: |p| Box::new(quantile::Quantile { alphas: p.quantile_alpha }),
            },
            Objective::Expectile => Descriptor {
                name: "reg:expectileerror",
                xgboost_params: Some(XgbParams { block: "expectile_loss_param", params: &["expectile_alpha"] }),
                xgboost_aliases: &[],
                lightgbm_names: &[],
                task: TaskKind::Regression,
                link: Link::Identity,
                outputs: Outputs::One,
                predicts_classes: false,
                gpu_gradient: Some(DeviceGradient::Pointwise(GpuGradient::Expectile)),
                refits_leaves: false,
                per_target: true,
                default_metric: Metric::Expectile,
                loss: |p| Box::new(squared::Expectile { alpha: p.expectile_alpha as f32 }),
            },
            Objective::AbsoluteError => Descriptor {
                name: "reg:absoluteerror",
                xgboost_params: None,
                xgboost_aliases: &[],
                lightgbm_names: &["regression_l1", "l1", "mean_absolute_error", "mae"],
                task: TaskKind::Regression,
                link: Link::Identity,
                outputs: Outputs::One,
                predicts_classes: false,
                gpu_gradient: Some(DeviceGradient::Pointwise(GpuGradient::AbsoluteError)),
                refits_leaves: true,
                per_target: true,
                default_metric: Metric::Mae,
                loss: |_| Box::new(quantile::Quantile { alphas: QuantileAlphas::one(0.5) }),
            },
            Objective::BinaryLogistic => Descriptor {
                name: "binary:logistic",
                xgboost_params: Some(XgbParams { block: "reg_loss_param", params: &["scale_pos_weight"] }),
                xgboost_aliases: &["reg:logistic"],
                lightgbm_names: &["binary"],
                task: TaskKind::Binary,
                link: Link::Logistic,
                outputs: Outputs::One,
                predicts_classes: false,
                gpu_gradient: Some(DeviceGradient::Pointwise(GpuGradient::Logistic)),
                refits_leaves: false,
                per_target: true,
                default_metric: Metric::Logloss,
                loss: |p| Box::new(logistic::Logistic { scale_pos_weight: p.scale_pos_weight as f32 }),
            },
            Objective::MultiSoftprob => Descriptor {
                name: "multi:softprob",
                xgboost_params: Some(XgbParams { block: "softmax_multiclass_param", params: &["num_class"] }),
                xgboost_aliases: &[],
                lightgbm_names: &["multiclass", "softmax"],
                task: TaskKind::Multiclass,
                link: Link::Softmax,
                outputs: Outputs::NumClass,
                predicts_classes: false,
                gpu_gradient: Some(DeviceGradient::Pointwise(GpuGradient::Softmax)),
                refits_leaves: false,
                per_target: false,
                default_metric: Metric::Mlogloss,
                loss: |p| Box::new(softmax::Softmax { n_classes: p.num_class }),
            },
            Objective::MultiSoftmax => Descriptor {
                name: "multi:softmax",
                xgboost_params: Some(XgbParams { block: "softmax_multiclass_param", params: &["num_class"] }),
                xgboost_aliases: &[],
                lightgbm_names: &[],
                task: TaskKind::Multiclass,
                link: Link::Softmax,
                outputs: Outputs::NumClass,
                predicts_classes: true,
                gpu_gradient: Some(DeviceGradient::Pointwise(GpuGradient::Softmax)),
                refits_leaves: false,
                per_target: false,
                default_metric: Metric::Mlogloss,
                loss: |p| Box::new(softmax::Softmax { n_classes: p.num_class }),
            },
            Objective::Poisson => Descriptor {
                name: "count:poisson",
                xgboost_params: None,
                xgboost_aliases: &[],
                lightgbm_names: &["poisson"],
                task: TaskKind::Regression,
                link: Link::Exp,
                outputs: Outputs::One,
                predicts_classes: false,
                gpu_gradient: Some(DeviceGradient::Pointwise(GpuGradient::Poisson)),
                refits_leaves: false,
                per_target: true,
                default_metric: Metric::PoissonNloglik,
                loss: |_| Box::new(count::Poisson),
            },
            Objective::Gamma => Descriptor {
                name: "reg:gamma",
                xgboost_params: None,
                xgboost_aliases: &[],
                lightgbm_names: &["gamma"],
                task: TaskKind::Regression,
                link: Link::Exp,
                outputs: Outputs::One,
                predicts_classes: false,
                gpu_gradient: Some(DeviceGradient::Pointwise(GpuGradient::Gamma)),
                refits_leaves: false,
                per_target: true,
                default_metric: Metric::GammaDeviance,
                loss: |_| Box::new(count::Gamma),
            },
            Objective::Tweedie => Descriptor {
                name: "reg:tweedie",
                xgboost_params: Some(XgbParams {
                    block: "tweedie_regression_param",
                    params: &["tweedie_variance_power"],
                }),
                xgboost_aliases: &[],
                lightgbm_names: &["tweedie"],
                task: TaskKind::Regression,
                link: Link::Exp,
                outputs: Outputs::One,
                predicts_classes: false,
                gpu_gradient: Some(DeviceGradient::Pointwise(GpuGradient::Tweedie)),
                refits_leaves: false,
                per_target: true,
                default_metric: Metric::TweedieNloglik(None),
                loss: |p| Box::new(count::Tweedie { rho: p.tweedie_variance_power as f32 }),
            },
            Objective::RankNdcg => Descriptor {
                name: "rank:ndcg",
                xgboost_params: None,
                xgboost_aliases: &[],
                lightgbm_names: &["lambdarank"],
                task: TaskKind::Ranking,
                link: Link::Identity,
                outputs: Outputs::One,
                predicts_classes: false,
                gpu_gradient: Some(DeviceGradient::LambdaRank { metric: ranking::PairMetric::Ndcg }),
                refits_leaves: false,
                per_target: false,
                default_metric: Metric::Ndcg(None),
                loss: |p| Box::new(ranking::LambdaRank { metric: ranking::PairMetric::Ndcg, params: p.ranking }),
            },
            Objective::RankPairwise => Descriptor {
                name: "rank:pairwise",
                xgboost_params: None,
                xgboost_aliases: &[],
                lightgbm_names: &[],
                task: TaskKind::Ranking,
                link: Link::Identity,
                outputs: Outputs::One,
                predicts_classes: false,
                gpu_gradient: Some(DeviceGradient::LambdaRank { metric: ranking::PairMetric::Pairwise }),
                refits_leaves: false,
                per_target: false,
                default_metric: Metric::Ndcg(None),
                loss: |p| Box::new(ranking::LambdaRank { metric: ranking::PairMetric::Pairwise, params: p.ranking }),
            },
            Objective::RankMap => Descriptor {
                name: "rank:map",
                xgboost_params: None,
                xgboost_aliases: &[],
                lightgbm_names: &[],
                task: TaskKind::Ranking,
                link: Link::Identity,
                outputs: Outputs::One,
                predicts_classes: false,
                gpu_gradient: Some(DeviceGradient::LambdaRank { metric: ranking::PairMetric::Map }),
                refits_leaves: false,
                per_target: false,
                default_metric: Metric::Map(None),
                loss: |p| Box::new(ranking::LambdaRank { metric: ranking::PairMetric::Map, params: p.ranking }),
            },
        }
    }

    /// XGBoost's name for the objective.
    pub fn name(self) -> &'static str {
        self.descriptor().name
    }

    pub fn link(self) -> Link {
        self.descriptor().link
    }

    pub fn task(self) -> TaskKind {
        self.descriptor().task
    }

    pub fn is_multiclass(self) -> bool {
        self.task() == TaskKind::Multiclass
    }

    pub fn is_ranking(self) -> bool {
        self.task() == TaskKind::Ranking
    }

    /// Outputs (trees per round) for each target of a model with `num_class` classes and
    /// `n_quantiles` quantiles.
    pub fn num_outputs(self, num_class: usize, n_quantiles: usize) -> usize {
        match self.descriptor().outputs {
            Outputs::One => 1,
            Outputs::NumClass => num_class,
            Outputs::PerQuantile => n_quantiles,
        }
    }

    /// Whether its predicted values are classes rather than the link's output.
    pub fn predicts_classes(self) -> bool {
        self.descriptor().predicts_classes
    }

    /// Whether its loss reads the parameter `param` (one of `TrainConfig`'s), which no
    /// other objective's reads: the parameters of its XGBoost block.
    pub fn reads(self, param: &str) -> bool {
        self.descriptor().xgboost_params.is_some_and(|x| x.params.contains(&param))
    }

    /// The names of the objectives that read `param`, joined by `sep` (for error messages).
    pub fn names_reading(param: &str, sep: &str) -> String {
        Self::names_where(|d| d.xgboost_params.is_some_and(|x| x.params.contains(&param)), sep)
    }

    pub fn gpu_gradient(self) -> Option<DeviceGradient> {
        self.descriptor().gpu_gradient
    }

    pub fn refits_leaves(self) -> bool {
        self.descriptor().refits_leaves
    }

    /// The objective XGBoost's model files call `name` (its own name or an alias).
    pub fn from_xgboost_name(name: &str) -> Option<Objective> {
        Self::ALL.into_iter().find(|o| o.name() == name || o.descriptor().xgboost_aliases.contains(&name))
    }

    /// Every name `from_xgboost_name` takes, comma-separated (for error messages).
    pub fn xgboost_names() -> String {
        let names =
            Self::ALL.iter().flat_map(|o| std::iter::once(o.name()).chain(o.descriptor().xgboost_aliases.to_vec()));
        names.collect::<Vec<_>>().join(", ")
    }

    /// The objective LightGBM's model files call `name`.
    pub fn from_lightgbm_name(name: &str) -> Option<Objective> {
        Self::ALL.into_iter().find(|o| o.descriptor().lightgbm_names.contains(&name))
    }

    /// LightGBM's usual name of each objective it has, comma-separated (for error messages).
    pub fn lightgbm_names() -> String {
        let names = Self::ALL.iter().filter_map(|o| o.descriptor().lightgbm_names.first().copied());
        names.collect::<Vec<_>>().join(", ")
    }

    /// The names of the objectives for which `pick` holds, joined by `sep`.
    pub fn names_where(pick: impl Fn(&Descriptor) -> bool, sep: &str) -> String {
        let names = Self::ALL.iter().map(|o| o.descriptor()).filter(|d| pick(d)).map(|d| d.name);
        names.collect::<Vec<_>>().join(sep)
    }

    /// Rejects a (finite) base score outside the link's range: it would have no margin.
    pub fn check_base_score(self, score: f64) -> Result<()> {
        let link = self.link();
        let (ok, range) = match link {
            Link::Identity | Link::Softmax | Link::Hinge => return Ok(()),
            Link::Logistic => (score > 0.0 && score < 1.0, "in (0, 1)"),
            Link::Exp => (score > 0.0, "> 0"),
        };
        if ok {
            return Ok(());
        }
        let names = Self::names_where(|d| d.link == link, " and ");
        Err(Error::param("base_score", format!("must be {range} for {names}")))
    }

    /// Rejects a `num_class` that does not fit the objective's outputs rule.
    pub fn check_num_class(self, num_class: usize) -> Result<()> {
        let per_class = Self::names_where(|d| d.outputs == Outputs::NumClass, " / ");
        let (ok, reason) = match self.descriptor().outputs {
            Outputs::NumClass => (num_class >= 2, format!("must be at least 2 for {per_class}")),
            Outputs::One | Outputs::PerQuantile => (num_class <= 1, format!("is only used by {per_class}")),
        };
        if ok {
            Ok(())
        } else {
            Err(Error::param("num_class", reason))
        }
    }
}

impl Descriptor {
    /// The scikit-learn estimator (python/polars_gbt/sklearn.py) that fits it, by its task.
    pub fn estimator(&self) -> &'static str {
        match self.task {
            TaskKind::Regression | TaskKind::Interval => "GBTRegressor",
            TaskKind::Binary | TaskKind::Multiclass => "GBTClassifier",
            TaskKind::Ranking => "GBTRanker",
        }
    }
}

impl std::str::FromStr for Objective {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Self::ALL
            .into_iter()
            .find(|o| o.name() == s)
            .ok_or_else(|| Error::param("objective", format!("unknown objective `{s}`")))
    }
}

impl Link {
    pub const ALL: [Link; 5] = [Link::Identity, Link::Logistic, Link::Exp, Link::Softmax, Link::Hinge];

    /// The name of the link's code in kernels/common.cuh.
    pub fn kernel_name(self) -> &'static str {
        match self {
            Link::Identity => "LINK_IDENTITY",
            Link::Logistic => "LINK_LOGISTIC",
            Link::Exp => "LINK_EXP",
            Link::Softmax => "LINK_SOFTMAX",
            Link::Hinge => "LINK_HINGE",
        }
    }

    /// Turns one row's margins into predictions, in place.
    pub fn apply(self, row: &mut [f32]) {
        match self {
            Link::Identity => {}
            Link::Logistic => row.iter_mut().for_each(|m| *m = sigmoid(*m)),
            Link::Exp => row.iter_mut().for_each(|m| *m = exp(*m)),
            Link::Softmax => softmax::softmax_in_place(row),
            Link::Hinge => row.iter_mut().for_each(|m| *m = if *m > 0.0 { 1.0 } else { 0.0 }),
        }
    }

    /// One output's margin in output space, as XGBoost stores base scores (a softmax keeps
    /// each class's margin).
    pub fn score_of_margin(self, margin: f32) -> f32 {
        match self {
            // A hinge model's base score is a margin, as in XGBoost.
            Link::Identity | Link::Softmax | Link::Hinge => margin,
            Link::Logistic => sigmoid(margin),
            Link::Exp => exp(margin),
        }
    }
}

impl GpuGradient {
    pub const ALL: [GpuGradient; 10] = [
        GpuGradient::SquaredError,
        GpuGradient::Logistic,
        GpuGradient::PseudoHuber,
        GpuGradient::Poisson,
        GpuGradient::Tweedie,
        GpuGradient::Softmax,
        GpuGradient::Gamma,
        GpuGradient::Quantile,
        GpuGradient::AbsoluteError,
        GpuGradient::Expectile,
    ];

    /// The name of the kernel's code in kernels/gradients.cu.
    pub fn kernel_name(self) -> &'static str {
        match self {
            GpuGradient::SquaredError => "OBJECTIVE_SQUARED_ERROR",
            GpuGradient::Logistic => "OBJECTIVE_LOGISTIC",
            GpuGradient::PseudoHuber => "OBJECTIVE_PSEUDO_HUBER",
            GpuGradient::Poisson => "OBJECTIVE_POISSON",
            GpuGradient::Tweedie => "OBJECTIVE_TWEEDIE",
            GpuGradient::Softmax => "OBJECTIVE_SOFTMAX",
            GpuGradient::Gamma => "OBJECTIVE_GAMMA",
            GpuGradient::Quantile => "OBJECTIVE_QUANTILE",
            GpuGradient::AbsoluteError => "OBJECTIVE_ABSOLUTE_ERROR",
            GpuGradient::Expectile => "OBJECTIVE_EXPECTILE",
        }
    }

    /// The kernel's `param` argument for output `output`'s tree.
    pub fn param(self, p: &ObjectiveParams, output: usize) -> f32 {
        match self {
            // Each quantile's output its own; several targets share one quantile.
            GpuGradient::Quantile if p.quantile_alpha.len() > 1 => p.quantile_alpha.get(output) as f32,
            GpuGradient::Quantile => p.quantile_alpha.get(0) as f32,
            GpuGradient::AbsoluteError => 0.5,
            GpuGradient::Expectile => p.expectile_alpha as f32,
            GpuGradient::PseudoHuber => p.huber_slope as f32,
            GpuGradient::Tweedie => p.tweedie_variance_power as f32,
            GpuGradient::Logistic => p.scale_pos_weight as f32,
            GpuGradient::SquaredError | GpuGradient::Poisson | GpuGradient::Softmax | GpuGradient::Gamma => 0.0,
        }
    }
}

/// `Metric`'s objective-dependent methods. They live here, above `metric`, which knows tasks
/// ([`TaskKind`]) but not objectives.
impl Metric {
    /// XGBoost's default metric for an objective.
    pub fn default_for(objective: Objective) -> Metric {
        objective.descriptor().default_metric
    }

    /// Whether the metric makes sense for predictions of this objective.
    pub fn check_applies(&self, objective: Objective, n_outputs: usize) -> Result<()> {
        if self.applies_to(objective.task(), n_outputs) {
            Ok(())
        } else {
            Err(Error::param(
                "eval_metric",
                format!("`{}` does not apply to objective {}", self.name(), objective.name()),
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::Targets;

    const PARAMS: ObjectiveParams = ObjectiveParams {
        huber_slope: 1.0,
        scale_pos_weight: 1.0,
        quantile_alpha: QuantileAlphas::one(0.3),
        expectile_alpha: 0.8,
        tweedie_variance_power: 1.5,
        num_class: 3,
        ranking: ranking::RankingParams::DEFAULT,
        aft: AftParams { distribution: crate::params::aft::AftDistribution::Normal, scale: 1.0 },
        num_target: 1,
    };

    #[test]
    fn all_lists_every_objective_at_its_index() {
        for (i, o) in Objective::ALL.into_iter().enumerate() {
            assert_eq!(o as usize, i);
        }
        // The model format stores the index: one past the last must be no objective.
        let past = (Objective::ALL.len() as u32).to_le_bytes();
        assert!(bincode::deserialize::<Objective>(&past).is_err(), "an objective is missing from Objective::ALL");
        for (i, g) in GpuGradient::ALL.into_iter().enumerate() {
            assert_eq!(g as usize, i);
        }
        for (i, l) in Link::ALL.into_iter().enumerate() {
            assert_eq!(l as usize, i);
        }
    }

    #[test]
    fn descriptor_names_are_the_serde_names_and_parse_back() {
        for o in Objective::ALL {
            assert_eq!(serde_json::to_value(o).unwrap(), serde_json::Value::String(o.name().into()));
            assert_eq!(o.name().parse::<Objective>().unwrap(), o);
            assert_eq!(Objective::from_xgboost_name(o.name()), Some(o));
        }
        assert_eq!(Objective::from_xgboost_name("reg:linear"), Some(Objective::SquaredError));
        assert_eq!(Objective::from_lightgbm_name("mae"), Some(Objective::AbsoluteError));
        assert_eq!(Objective::from_lightgbm_name("lambdarank"), Some(Objective::RankNdcg));
        assert!("reg:logistic".parse::<Objective>().is_err(), "aliases are for importers only");
    }

    #[test]
    fn foreign_names_name_one_objective_each() {
        let mut seen = std::collections::HashSet::new();
        for d in Objective::ALL.map(Objective::descriptor) {
            for name in std::iter::once(&d.name).chain(d.xgboost_aliases) {
                assert!(seen.insert(("xgboost", *name)), "XGBoost name {name} is given twice");
            }
            for name in d.lightgbm_names {
                assert!(seen.insert(("lightgbm", *name)), "LightGBM name {name} is given twice");
            }
        }
    }

    #[test]
    fn descriptors_agree_with_their_losses() {
        let label = [0.0, 1.0, 2.0, 1.0];
        let t = Targets { label: &label, label_upper: None, weight: None, groups: Some(&[0, 4]) };
        for o in Objective::ALL {
            let d = o.descriptor();
            let loss = (d.loss)(&PARAMS);
            assert_eq!(loss.leaf_quantile(0).is_some(), d.refits_leaves, "{}: leaf refits", d.name);
            let k = o.num_outputs(PARAMS.num_class, PARAMS.quantile_alpha.len());
            assert_eq!(loss.estimate_base_margin(&t).len(), k, "{}: outputs", d.name);
            assert_eq!(d.outputs == Outputs::NumClass, d.task == TaskKind::Multiclass, "{}: outputs", d.name);
            assert_eq!(d.link == Link::Softmax, d.outputs == Outputs::NumClass, "{}: link", d.name);
            assert!(d.default_metric.applies_to(d.task, k), "{}: metric", d.name);
            assert!(!d.predicts_classes || d.task == TaskKind::Multiclass, "{}: classes", d.name);
            if d.refits_leaves {
                // The refits need the kernel's sign gradients, not the host's.
                assert!(
                    matches!(
                        d.gpu_gradient,
                        Some(DeviceGradient::Pointwise(GpuGradient::Quantile | GpuGradient::AbsoluteError))
                    ),
                    "{}: leaf refits",
                    d.name
                );
            }
        }
    }

    #[test]
    fn links_match_the_losses_base_margins() {
        // A base score's margin, taken back through the link, is the score. (A hinge model's
        // base score is a margin, and its link gives classes.)
        let hinge = (Objective::Hinge.descriptor().loss)(&PARAMS);
        assert_eq!(Link::Hinge.score_of_margin(hinge.base_score_to_margin(0.7)), 0.7);
        for o in Objective::ALL.into_iter().filter(|o| o.link() != Link::Softmax && o.link() != Link::Hinge) {
            let loss = (o.descriptor().loss)(&PARAMS);
            for score in [0.2, 0.7] {
                let mut row = [loss.base_score_to_margin(score)];
                o.link().apply(&mut row);
                assert!((row[0] as f64 - score).abs() < 1e-6, "{}: {score} came back as {}", o.name(), row[0]);
                assert_eq!(o.link().score_of_margin(loss.base_score_to_margin(score)), row[0]);
            }
        }
    }

    #[test]
    fn validation_messages_name_the_objectives_concerned() {
        let e = Objective::Poisson.check_base_score(0.0).unwrap_err().to_string();
        assert!(e.contains("must be > 0 for count:poisson and reg:tweedie"), "{e}");
        let e = Objective::BinaryLogistic.check_base_score(1.0).unwrap_err().to_string();
        assert!(e.contains("must be in (0, 1) for binary:logistic"), "{e}");
        assert!(Objective::SquaredError.check_base_score(-3.0).is_ok());
        let e = Objective::MultiSoftmax.check_num_class(1).unwrap_err().to_string();
        assert!(e.contains("must be at least 2 for multi:softprob / multi:softmax"), "{e}");
        let e = Objective::SquaredError.check_num_class(3).unwrap_err().to_string();
        assert!(e.contains("is only used by multi:softprob / multi:softmax"), "{e}");
    }
}
