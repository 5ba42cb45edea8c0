//! What a fit's expression receives besides its inputs ([`FitKwargs`]): its parameters, the
//! order of its optional inputs and how errors name them, and, for a worker of a distributed
//! fit, how it joins the others ([`DistributedKwargs`]).

use std::collections::HashMap;

use polars::prelude::*;
use serde::Deserialize;

use super::to_polars;
use crate::{Dataset, RoundCallback, TrainConfig};

/// What `fit` receives besides the inputs: the parameters as JSON (parsed by
/// `TrainConfig::from_json`, which names any bad parameter) and which optional inputs follow
/// the features and the target, in this order: weight, group, base_margin,
/// label_upper_bound, then the eval_set masks (one per name in `eval_names`, or one named "valid").
#[derive(Deserialize)]
pub(super) struct FitKwargs {
    pub(super) params: String,
    pub(super) has_weight: bool,
    pub(super) has_group: bool,
    pub(super) has_base_margin: bool,
    #[serde(default)]
    pub(super) has_label_upper_bound: bool,
    pub(super) has_eval_set: bool,
    /// The evaluation sets' names, one mask input each (empty: one mask, "valid").
    #[serde(default)]
    pub(super) eval_names: Vec<String>,
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
    pub(super) objective_id: Option<u64>,
    /// A user's metrics: their registry numbers and names, logged after the built-in metrics.
    #[serde(default)]
    pub(super) metric_ids: Vec<u64>,
    #[serde(default)]
    pub(super) metric_names: Vec<String>,
    /// Whether early stopping looks for larger values of the user's metrics (XGBoost's
    /// `maximize`).
    #[serde(default)]
    pub(super) maximize: bool,
    /// This worker's place in a distributed fit (`polars_gbt.dask` passes it).
    #[serde(default)]
    pub(super) distributed: Option<DistributedKwargs>,
    /// What the user called the target and the optional inputs, for errors.
    #[serde(default)]
    pub(super) input_names: InputNames,
    /// Under `POLARS_GBT_PROFILE=1`, when the expression was built (Unix seconds): the fit says
    /// how long Polars worked before calling it.
    #[serde(default)]
    pub(super) profile_built_at: Option<f64>,
    /// Features that come as a `Categorical` column's physical ids, with the names of its
    /// categories in id order (`polars_gbt.train` on a frame: Polars' export of a
    /// `Categorical` to a plugin renumbers every row, its ids do not).
    #[serde(default)]
    pub(super) categorical_names: HashMap<String, Vec<String>>,
}

/// The names errors give `fit`'s inputs: the user's own columns (`default`, not "target" or
/// the core's "label"), or the parameter where an input has no name of its own (a literal).
/// `polars_gbt.train` and the estimators pass the names their callers used.
#[derive(Clone, Deserialize)]
#[serde(default)]
pub(super) struct InputNames {
    pub(super) target: String,
    /// Several targets' own columns, in order (`polars_gbt.train(target=[...])`), for
    /// errors about one of them; empty: "`target` (target t)".
    pub(super) targets: Vec<String>,
    pub(super) weight: String,
    pub(super) group: String,
    pub(super) base_margin: String,
    pub(super) label_upper_bound: String,
    /// What marks the evaluation rows: `eval_set` (a mask of the fit's rows), or
    /// `polars_gbt.train`'s `eval_df` / `eval_sets` (frames of their own).
    pub(super) eval_set: String,
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
    pub(super) fn eval_set(&self, name: &str, n_sets: usize) -> String {
        match self.eval_set.as_str() {
            "eval_set" | "eval_df" if n_sets == 1 => self.eval_set.clone(),
            many => format!("{many} `{name}`"),
        }
    }

    /// The error of a fit whose evaluation sets take every row.
    pub(super) fn no_training_rows(&self, n_sets: usize) -> crate::Error {
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

    pub(super) fn train(
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
