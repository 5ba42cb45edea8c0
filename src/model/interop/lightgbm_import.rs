//! LightGBM text models (`Booster.save_model` / `model_to_string`, format v3 and v4): numeric
//! and categorical splits, the three missing-value types, multiclass, and the category
//! names LightGBM keeps for pandas categoricals.
//!
//! Conventions: a numeric split sends `x <= threshold` (a double) left; we send
//! `x < threshold` (a float) left, so the threshold becomes the least float above it. With
//! missing type "None", NaN reads as 0, so it goes where 0 goes; with "Zero" (only from
//! `zero_as_missing=true`) zero itself is missing, which imports only when zero's default
//! direction is the one the threshold gives it anyway. A categorical split's bitset holds
//! the categories that go left, as ours does; NaN and negative codes go right.

use super::foreign::{assemble, category_text, within, Foreign, ForeignFeature, ForeignNode};
use crate::config::{GrowPolicy, Objective, TrainConfig};
use crate::error::{Error, Result};
use crate::model::Model;

fn bad(what: impl std::fmt::Display) -> Error {
    Error::model(format!("LightGBM model: {what}"))
}

/// LightGBM's zero test: `|x| <= 1e-35`.
const ZERO_THRESHOLD: f64 = 1e-35;

/// The least float above `t`: `x <= t` and `x < strict_threshold(t)` agree on every float
/// but `f32::MAX` (which a threshold at or above it sends right instead of left; stored
/// thresholds stay finite).
fn strict_threshold(t: f64) -> f32 {
    let f = t as f32;
    let up = if f as f64 > t { f } else { next_up(f) };
    up.min(f32::MAX)
}

/// The least float above `f` (`f32::next_up`, which needs Rust 1.86).
fn next_up(f: f32) -> f32 {
    if f.is_nan() || f == f32::INFINITY {
        f
    } else if f == 0.0 {
        f32::from_bits(1)
    } else if f > 0.0 {
        f32::from_bits(f.to_bits() + 1)
    } else {
        f32::from_bits(f.to_bits() - 1)
    }
}

/// `key=value` lines of one section.
struct Section<'a> {
    lines: Vec<(&'a str, &'a str)>,
}

impl<'a> Section<'a> {
    fn get(&self, key: &str) -> Option<&'a str> {
        self.lines.iter().find(|(k, _)| *k == key).map(|(_, v)| *v)
    }

    fn need(&self, key: &str) -> Result<&'a str> {
        self.get(key).ok_or_else(|| bad(format!("`{key}` is missing")))
    }

    fn list<T: std::str::FromStr>(&self, key: &str, len: usize) -> Result<Vec<T>> {
        let text = self.get(key).unwrap_or("");
        let v: Vec<T> = text
            .split_whitespace()
            .map(|s| s.parse::<T>().map_err(|_| bad(format!("`{key}` holds `{s}`, not a number"))))
            .collect::<Result<_>>()?;
        if v.len() != len {
            return Err(bad(format!("`{key}` has {} values, expected {len}", v.len())));
        }
        Ok(v)
    }
}

fn section(text: &str) -> Section<'_> {
    Section { lines: text.lines().filter_map(|l| l.split_once('=')).map(|(k, v)| (k.trim(), v.trim())).collect() }
}

/// Reads a LightGBM text model.
pub fn import(text: &str) -> Result<Model> {
    let body = text.split("end of trees").next().unwrap_or("");
    let mut blocks = body.split("\nTree=");
    let header = section(blocks.next().unwrap_or(""));
    if !text.starts_with("tree") {
        return Err(bad("the text does not start with `tree`; is it a LightGBM model file?"));
    }
    let (names, infos, k) = header_features(&header, text)?;
    let (mut config, scale) = objective_config(&header, k)?;
    let trees = read_trees(blocks, scale, k, header.get("average_output").is_some())?;
    let features = features(text, &names, &infos, &trees)?;
    config.n_estimators = trees.len() / k;
    config.grow_policy = GrowPolicy::Lossguide;
    config.max_depth = 0;
    config.max_leaves = trees.iter().map(|t| t.len().div_ceil(2)).max().unwrap_or(2).max(2);
    let known = stated_params(text, &config, trees.len() / k);
    assemble(Foreign {
        config,
        base_margin: vec![0.0; k],
        features,
        trees,
        source: "LightGBM",
        known,
        input_bytes: text.len(),
    })
}

/// The header's feature names and infos (one each per feature) and trees per iteration.
/// The feature count is checked against the text's size before anything of that length is
/// allocated.
fn header_features<'a>(header: &Section<'a>, text: &str) -> Result<(Vec<String>, Vec<&'a str>, usize)> {
    let n_features: usize =
        header.need("max_feature_idx")?.parse::<usize>().map_err(|_| bad("max_feature_idx is not a count"))? + 1;
    if n_features > text.len() {
        return Err(bad(format!("{n_features} features is more than the file can describe")));
    }
    let k: usize =
        header.get("num_tree_per_iteration").unwrap_or("1").parse().map_err(|_| bad("bad num_tree_per_iteration"))?;
    let names: Vec<String> = match header.get("feature_names") {
        Some(s) => s.split_whitespace().map(str::to_string).collect(),
        None => (0..n_features).map(|i| format!("Column_{i}")).collect(),
    };
    let infos: Vec<&str> =
        header.get("feature_infos").map_or(vec!["none"; n_features], |s| s.split_whitespace().collect());
    if names.len() != n_features || infos.len() != n_features {
        return Err(bad(format!(
            "{} feature names and {} feature infos for {n_features} features",
            names.len(),
            infos.len()
        )));
    }
    Ok((names, infos, k))
}

/// The objective and its options from the header's objective line ("binary sigmoid:1",
/// "multiclass num_class:5", "quantile alpha:0.9", ...), checked to have `k` outputs; and
/// the factor a binary model's leaves are scaled by.
fn objective_config(header: &Section, k: usize) -> Result<(TrainConfig, f64)> {
    let objective_line = header.need("objective")?;
    let mut words = objective_line.split_whitespace();
    let name = words.next().unwrap_or("");
    let options: Vec<(&str, &str)> = words.filter_map(|w| w.split_once(':')).collect();
    let option = |key: &str| options.iter().find(|(k, _)| *k == key).and_then(|(_, v)| v.parse::<f64>().ok());
    if objective_line.split_whitespace().any(|w| w == "sqrt") {
        return Err(bad("regression with reg_sqrt is not supported"));
    }
    let objective = Objective::from_lightgbm_name(name).ok_or_else(|| {
        bad(format!("objective `{name}` is not supported (supported: {})", Objective::lightgbm_names()))
    })?;
    let mut config = TrainConfig { objective, ..TrainConfig::default() };
    if let Some(a) = option("alpha").filter(|_| name == "quantile") {
        config.quantile_alpha = crate::config::QuantileAlphas::one(a);
    }
    if let Some(p) = option("tweedie_variance_power") {
        config.tweedie_variance_power = p;
    }
    if config.objective.is_multiclass() {
        config.num_class = option("num_class").unwrap_or(k as f64) as usize;
    }
    // A binary model's probability is sigmoid(sigmoid_param * margin): fold the factor into
    // the leaves.
    let scale = if name == "binary" { option("sigmoid").unwrap_or(1.0) } else { 1.0 };
    if !(scale.is_finite() && scale > 0.0) {
        return Err(bad(format!("sigmoid parameter {scale} is not positive")));
    }
    if config.num_outputs() != k {
        return Err(bad(format!(
            "num_tree_per_iteration is {k} but the objective has {} outputs",
            config.num_outputs()
        )));
    }
    Ok((config, scale))
}

/// The `Tree=` blocks as foreign trees, leaves scaled by `scale`; with `average_output`
/// (random-forest mode) the leaves are divided by the rounds, as LightGBM averages them.
fn read_trees<'a>(
    blocks: impl Iterator<Item = &'a str>,
    scale: f64,
    k: usize,
    average_output: bool,
) -> Result<Vec<Vec<ForeignNode>>> {
    let mut trees = Vec::new();
    for block in blocks {
        let s = section(block);
        trees.push(read_tree(&s, scale).map_err(|e| within(e, &format!("LightGBM model: tree {}", trees.len())))?);
    }
    if trees.is_empty() {
        return Err(bad("the model has no trees"));
    }
    if average_output {
        // Random-forest mode averages the trees of each output.
        let rounds = (trees.len() / k).max(1) as f32;
        trees.iter_mut().flatten().for_each(|n: &mut ForeignNode| n.value /= rounds);
    }
    Ok(trees)
}

/// The features, categorical or not and with their pandas category names: which ones are
/// categorical needs the parameters, the infos and the trees' splits together.
fn features(text: &str, names: &[String], infos: &[&str], trees: &[Vec<ForeignNode>]) -> Result<Vec<ForeignFeature>> {
    let n_features = names.len();
    // Categorical features: those the parameters name (pandas category names, when saved,
    // follow in their order), or whose info lists categories rather than "[min:max]" or "none".
    let declared = declared_categorical(text, n_features)?;
    let categorical: Vec<bool> = match &declared {
        Some(d) => (0..n_features).map(|i| d.contains(&i)).collect(),
        None => infos.iter().map(|i| !i.starts_with('[') && *i != "none").collect(),
    };
    let mut features: Vec<ForeignFeature> = names
        .iter()
        .zip(&categorical)
        .map(|(n, &c)| ForeignFeature { name: n.clone(), categorical: c, categories: None })
        .collect();
    // A categorical split on a feature whose info says otherwise still makes it categorical.
    for t in trees {
        for n in t {
            if n.children.is_some() && n.left_categories.is_some() {
                if let Some(f) = features.get_mut(n.feature) {
                    f.categorical = true;
                }
            }
        }
    }
    if let Some(pandas) = pandas_categories(text)? {
        let cat_features: Vec<usize> = (0..n_features).filter(|&i| features[i].categorical).collect();
        if !pandas.is_empty() {
            if pandas.len() != cat_features.len() {
                return Err(bad(format!(
                    "pandas_categorical lists {} features but the model has {} categorical features",
                    pandas.len(),
                    cat_features.len()
                )));
            }
            for (f, names) in cat_features.into_iter().zip(pandas) {
                features[f].categories = Some(names);
            }
        }
    }
    Ok(features)
}

/// The training parameters the model file states, under our names: the objective's from its
/// objective line, and from the `parameters:` section those LightGBM parameters that mean
/// exactly what ours do. The rest (and all of these when the section is absent) are unknown.
fn stated_params(text: &str, config: &TrainConfig, rounds: usize) -> serde_json::Map<String, serde_json::Value> {
    use serde_json::Value;
    let mut known = serde_json::Map::new();
    known.insert("objective".into(), config.objective.name().into());
    known.insert("n_estimators".into(), rounds.into());
    // LightGBM grows every tree leaf-wise: best leaf first.
    known.insert("grow_policy".into(), "lossguide".into());
    if config.objective.is_multiclass() {
        known.insert("num_class".into(), config.num_class.into());
    }
    if config.objective.reads("quantile_alpha") {
        known.insert("quantile_alpha".into(), config.quantile_alpha.get(0).into());
    }
    if config.objective.reads("tweedie_variance_power") {
        known.insert("tweedie_variance_power".into(), config.tweedie_variance_power.into());
    }
    let section = text.split("\nparameters:\n").nth(1).map(|s| s.split("end of parameters").next().unwrap_or(""));
    let params: Vec<(&str, f64)> = section
        .unwrap_or("")
        .lines()
        .filter_map(|l| l.trim().strip_prefix('[')?.strip_suffix(']')?.split_once(':'))
        .filter_map(|(k, v)| Some((k.trim(), v.trim().parse::<f64>().ok()?)))
        .filter(|(_, v)| v.is_finite())
        .collect();
    let get = |key: &str| params.iter().find(|(k, _)| *k == key).map(|&(_, v)| v);
    let number = |v: f64| serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number);
    let count = |v: f64| Value::from(v.max(0.0) as u64);
    for (ours, theirs) in [
        ("learning_rate", "learning_rate"),
        ("reg_alpha", "lambda_l1"),
        ("reg_lambda", "lambda_l2"),
        ("min_child_weight", "min_sum_hessian_in_leaf"),
        ("colsample_bytree", "feature_fraction"),
        ("colsample_bynode", "feature_fraction_bynode"),
    ] {
        if let Some(v) = get(theirs) {
            known.insert(ours.into(), number(v));
        }
    }
    if let Some(v) = get("num_leaves") {
        known.insert("max_leaves".into(), count(v));
    }
    // LightGBM's -1 (or any value <= 0) is no limit, our 0.
    if let Some(v) = get("max_depth") {
        known.insert("max_depth".into(), count(v));
    }
    if let Some(v) = get("max_delta_step") {
        known.insert("max_delta_step".into(), number(v.max(0.0)));
    }
    if let Some(v) = get("max_cat_to_onehot") {
        known.insert("max_cat_to_onehot".into(), count(v));
    }
    // Rows are sampled only when bagging_freq is positive; otherwise every tree sees them all.
    if let (Some(fraction), Some(freq)) = (get("bagging_fraction"), get("bagging_freq")) {
        known.insert("subsample".into(), number(if freq > 0.0 { fraction } else { 1.0 }));
    }
    known
}

/// The `[categorical_feature: 0,1,3]` line of the parameters section, when present.
fn declared_categorical(text: &str, n_features: usize) -> Result<Option<Vec<usize>>> {
    let Some(list) = text.lines().find_map(|l| l.strip_prefix("[categorical_feature:")) else {
        return Ok(None);
    };
    let list = list.trim().trim_end_matches(']').trim();
    if list.is_empty() {
        return Ok(Some(Vec::new()));
    }
    list.split(',')
        .map(|x| match x.trim().parse::<usize>() {
            Ok(i) if i < n_features => Ok(i),
            _ => Err(bad(format!("categorical_feature `{}` is not a feature index", x.trim()))),
        })
        .collect::<Result<Vec<_>>>()
        .map(Some)
}

/// The `pandas_categorical:` line: a JSON list of category lists (or null).
fn pandas_categories(text: &str) -> Result<Option<Vec<Vec<String>>>> {
    let Some(line) = text.lines().rev().find_map(|l| l.strip_prefix("pandas_categorical:")) else {
        return Ok(None);
    };
    let v: serde_json::Value =
        serde_json::from_str(line.trim()).map_err(|e| bad(format!("pandas_categorical is not JSON: {e}")))?;
    let Some(lists) = v.as_array() else {
        return Ok(None);
    };
    lists
        .iter()
        .map(|l| {
            l.as_array()
                .ok_or_else(|| bad("pandas_categorical entries must be lists"))
                .map(|items| items.iter().map(category_text).collect())
        })
        .collect::<Result<_>>()
        .map(Some)
}

/// One tree: inner nodes are 0..L-1 and leaf `j` (written `~j`, i.e. `-j-1`) becomes
/// node `L - 1 + j`.
fn read_tree(s: &Section, scale: f64) -> Result<Vec<ForeignNode>> {
    let n_leaves: usize = s.need("num_leaves")?.parse().map_err(|_| bad("num_leaves is not a count"))?;
    if n_leaves == 0 || n_leaves > s.lines.iter().map(|(_, v)| v.len()).sum::<usize>() + 1 {
        return Err(bad(format!("num_leaves {n_leaves} does not match the tree's data")));
    }
    if s.get("is_linear").is_some_and(|v| v != "0") {
        return Err(bad("linear trees are not supported"));
    }
    let leaf_value: Vec<f64> = s.list("leaf_value", n_leaves)?;
    // Cover is the training rows' count, as LightGBM's own TreeSHAP (`pred_contrib`) weighs
    // branches by it; the hessian sums (`*_weight`) only where a file has no counts.
    let cover_of = |count: &str, weight: &str, n: usize| -> Vec<f64> {
        s.list(count, n).or_else(|_| s.list(weight, n)).unwrap_or_else(|_| vec![0.0; n])
    };
    let leaf_cover = cover_of("leaf_count", "leaf_weight", n_leaves);
    let leaf = |j: usize| ForeignNode {
        value: (leaf_value[j] * scale) as f32,
        cover: leaf_cover[j] as f32,
        ..Default::default()
    };
    if n_leaves == 1 {
        return Ok(vec![leaf(0)]);
    }
    let inner = n_leaves - 1;
    let feature: Vec<usize> = s.list("split_feature", inner)?;
    let threshold: Vec<f64> = s.list("threshold", inner)?;
    let decision: Vec<u8> = s.list("decision_type", inner)?;
    let left: Vec<i64> = s.list("left_child", inner)?;
    let right: Vec<i64> = s.list("right_child", inner)?;
    let gain: Vec<f64> = s.list("split_gain", inner).unwrap_or_else(|_| vec![0.0; inner]);
    let cover = cover_of("internal_count", "internal_weight", inner);
    let value: Vec<f64> = s.list("internal_value", inner).unwrap_or_else(|_| vec![0.0; inner]);
    let n_cat: usize = s.get("num_cat").unwrap_or("0").parse().map_err(|_| bad("num_cat is not a count"))?;
    if n_cat > inner {
        return Err(bad(format!("num_cat {n_cat} exceeds the {inner} splits")));
    }
    let (bounds, words) = category_bitsets(s, n_cat)?;
    let node_id = |c: i64| -> Result<usize> {
        let id = if c >= 0 { c as usize } else { inner + (!c) as usize };
        if id >= inner + n_leaves {
            return Err(bad(format!("child {c} is outside the tree")));
        }
        Ok(id)
    };
    let mut nodes = Vec::with_capacity(inner + n_leaves);
    for i in 0..inner {
        let t = threshold[i];
        let mut node = ForeignNode {
            children: Some((node_id(left[i])?, node_id(right[i])?)),
            feature: feature[i],
            gain: gain[i] as f32,
            cover: cover[i] as f32,
            value: (value[i] * scale) as f32,
            ..Default::default()
        };
        if decision[i] & 1 != 0 {
            // Categorical: `threshold` indexes the bitsets; NaN goes right.
            node.left_categories = Some(category_codes(i, t, n_cat, &bounds, &words)?);
            node.default_left = false;
        } else {
            if t.is_nan() {
                return Err(bad(format!("node {i} has threshold NaN")));
            }
            node.threshold = strict_threshold(t);
            node.default_left = numeric_default_left(i, t, decision[i])?;
        }
        nodes.push(node);
    }
    nodes.extend((0..n_leaves).map(leaf));
    // The root is inner node 0.
    Ok(nodes)
}

/// The categorical splits' bitsets: `words[bounds[j]..bounds[j + 1]]` is set `j` of `n_cat`
/// (one bound and no words when the tree has no categorical split).
fn category_bitsets(s: &Section, n_cat: usize) -> Result<(Vec<usize>, Vec<u32>)> {
    Ok(if n_cat > 0 {
        let b: Vec<usize> = s.list("cat_boundaries", n_cat + 1)?;
        let total = b[n_cat];
        (b, s.list("cat_threshold", total)?)
    } else {
        (vec![0], Vec::new())
    })
}

/// The category codes a categorical split at node `i` sends left: the bits of the set its
/// threshold `t` indexes, checked to lie within the tree's bitsets.
fn category_codes(i: usize, t: f64, n_cat: usize, bounds: &[usize], words: &[u32]) -> Result<Vec<u32>> {
    let idx = t as usize;
    if t < 0.0 || t.fract() != 0.0 || idx >= n_cat || bounds[idx] > bounds[idx + 1] || bounds[idx + 1] > words.len() {
        return Err(bad(format!("node {i} names category set {t} of {n_cat}")));
    }
    let set = &words[bounds[idx]..bounds[idx + 1]];
    Ok(set
        .iter()
        .enumerate()
        .flat_map(|(w, &bits)| (0..32).filter(move |b| bits & (1 << b) != 0).map(move |b| (w * 32 + b) as u32))
        .collect())
}

/// Where a numeric split at node `i` (threshold `t`, not NaN) sends missing values, from its
/// decision type's default-left bit and missing type; an error for the missing types whose
/// meaning our splits cannot reproduce.
fn numeric_default_left(i: usize, t: f64, decision: u8) -> Result<bool> {
    let default_left = decision & 2 != 0;
    let missing_type = (decision >> 2) & 3;
    let zero_left = 0.0 <= t;
    Ok(match missing_type {
        // NaN reads as 0.
        0 => zero_left,
        2 => default_left,
        // Zero is missing: exact only when zero and tiny values go the default way anyway.
        1 if default_left == zero_left && !(t > -ZERO_THRESHOLD && t < ZERO_THRESHOLD) => default_left,
        1 => return Err(bad("models trained with zero_as_missing=true are not supported")),
        m => return Err(bad(format!("node {i} has unknown missing type {m}"))),
    })
}

#[cfg(test)]
mod tests {
    use super::{next_up, strict_threshold};

    #[test]
    fn strict_threshold_matches_less_or_equal() {
        for t in [0.0, -0.0, 1.0, 0.1, -0.1, 1e-40, 123.456789, 3.4e38, 1e300, -1e300] {
            let u = strict_threshold(t);
            let down = |f: f32| -next_up(-f);
            for x in [t as f32, down(t as f32), next_up(t as f32), u, down(u), 0.0] {
                if x.is_finite() {
                    assert_eq!((x as f64) <= t, x < u || (u == f32::MAX && x == f32::MAX), "t={t} x={x} u={u}");
                }
            }
        }
    }
}
