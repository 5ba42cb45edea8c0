//! Continued training (XGBoost's `xgb_model`, LightGBM's `init_model`): new trees fit to what
//! an existing model leaves unexplained, appended to it.
//!
//! The new trees train with the existing model's margins as each row's base margin (the
//! boosting loop needs nothing else); this file joins the two models. The rows' start is then
//! the old model's base score plus its trees, so the joined model predicts what the new fit
//! learnt.

use super::Model;
use crate::config::{MultiStrategy, Objective};
use crate::error::{Error, Result};

impl Model {
    /// `init` followed by `new`, which was trained from `init`'s margins. The two must agree
    /// on the objective, the outputs and every feature (name, and categories for categorical
    /// ones, since trees route categories by their codes).
    pub(crate) fn continued(init: &Model, new: Model) -> Result<Model> {
        check_compatible(init, &new)?;
        let done = init.num_rounds();
        let mut trees = init.trees.clone();
        trees.extend(new.trees);
        Ok(Model {
            config: new.config,
            n_outputs: new.n_outputs,
            base_margin: init.base_margin.clone(),
            features: new.features,
            trees,
            best_iteration: new.best_iteration.map(|b| b + done),
            evals_result: new.evals_result,
            imported: None,
        })
    }
}

/// Whether a fit of `objective` with `n_outputs` outputs on the columns `names` can continue
/// `init` (checked before training, and again on the trained model by `check_compatible`).
pub(crate) fn check_start(
    init: &Model,
    objective: Objective,
    n_outputs: usize,
    strategy: MultiStrategy,
    names: &[String],
) -> Result<()> {
    let bad = |why: String| Err(Error::param("init_model", why));
    if init.n_outputs > 1 && init.config.multi_strategy != strategy {
        // A model's rounds are all vector-leaf trees or all one tree per output.
        let name = |s: MultiStrategy| serde_json::to_value(s).expect("a strategy serialises");
        return bad(format!(
            "was trained with multi_strategy={}; this fit has multi_strategy={}",
            name(init.config.multi_strategy),
            name(strategy)
        ));
    }
    if init.objective() != objective || init.n_outputs != n_outputs {
        return bad(format!(
            "is a {} model of {} outputs; this fit is {} with {}",
            init.objective().name(),
            init.n_outputs,
            objective.name(),
            n_outputs
        ));
    }
    let init_names: Vec<String> = init.features.iter().map(|f| f.name.clone()).collect();
    if init_names != names {
        return bad(format!(
            "was trained on the columns [{}], this fit on [{}]: continued training needs the same columns in the same order",
            init_names.join(", "),
            names.join(", ")
        ));
    }
    Ok(())
}

/// Whether trees of `new` can follow those of `init`.
pub(crate) fn check_compatible(init: &Model, new: &Model) -> Result<()> {
    let names: Vec<String> = new.features.iter().map(|f| f.name.clone()).collect();
    check_start(init, new.objective(), new.n_outputs, new.config.multi_strategy, &names)?;
    for (a, b) in init.features.iter().zip(&new.features) {
        if a.cuts.is_categorical() != b.cuts.is_categorical() || a.categories != b.categories {
            return Err(Error::param(
                "init_model",
                format!(
                    "saw other categories in column `{}` (or saw it as another kind): continued training needs the same categories",
                    a.name
                ),
            ));
        }
    }
    Ok(())
}
