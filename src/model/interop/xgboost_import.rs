//! XGBoost models (JSON or UBJSON, as `Booster.save_model` writes them, XGBoost 1.6 and
//! later): `gbtree` and `dart` boosters with numeric and categorical splits, missing-value
//! default directions, per-output base scores, multiclass.
//!
//! XGBoost's conventions and ours: numeric splits are the same (`x < threshold` goes left,
//! NaN takes the default child). A categorical split lists the categories that go *right*;
//! ours lists those that go left, so the children (and the default direction) are swapped.
//! Category codes index the category names XGBoost 3.1+ stores under `cats`; without them,
//! categorical features take integer codes. `base_score` is in output space.

use serde_json::Value;

use super::foreign::{assemble, category_text, tally, within, Foreign, ForeignFeature, ForeignNode};
use crate::config::{GrowPolicy, MultiStrategy, Objective, TrainConfig};
use crate::error::{Error, Result};
use crate::model::Model;
use crate::objective::Link;

fn bad(what: impl std::fmt::Display) -> Error {
    Error::model(format!("XGBoost model: {what}"))
}

/// `v[path[0]][path[1]]...`, or an error naming the path.
fn at<'a>(v: &'a Value, path: &[&str]) -> Result<&'a Value> {
    let mut cur = v;
    for (i, key) in path.iter().enumerate() {
        cur = cur.get(key).ok_or_else(|| bad(format!("`{}` is missing", path[..=i].join("."))))?;
    }
    Ok(cur)
}

fn array<'a>(v: &'a Value, key: &str) -> Result<&'a Vec<Value>> {
    at(v, &[key])?.as_array().ok_or_else(|| bad(format!("`{key}` is not an array")))
}

fn ints(v: &Value, key: &str) -> Result<Vec<i64>> {
    array(v, key)?
        .iter()
        .map(|x| match x {
            Value::Bool(b) => Some(*b as i64),
            _ => x.as_i64(),
        })
        .collect::<Option<_>>()
        .ok_or_else(|| bad(format!("`{key}` holds a value that is not an integer")))
}

/// The bare `NaN`, `Infinity` and `-Infinity` tokens (outside strings) of XGBoost's JSON as
/// values JSON can hold: null, and ±1e39 (beyond float32, so they read as infinities).
fn nonfinite_tokens(text: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len() + 64);
    let (mut i, mut in_string) = (0, false);
    while i < text.len() {
        let c = text[i];
        if in_string {
            out.push(c);
            if c == b'\\' && i + 1 < text.len() {
                out.push(text[i + 1]);
                i += 1;
            } else if c == b'"' {
                in_string = false;
            }
            i += 1;
            continue;
        }
        let rest = &text[i..];
        let (token, replacement): (&[u8], &[u8]) = if rest.starts_with(b"-Infinity") {
            (b"-Infinity", b"-1e39")
        } else if rest.starts_with(b"Infinity") {
            (b"Infinity", b"1e39")
        } else if rest.starts_with(b"NaN") {
            (b"NaN", b"null")
        } else {
            in_string = c == b'"';
            out.push(c);
            i += 1;
            continue;
        };
        out.extend_from_slice(replacement);
        i += token.len();
    }
    out
}

fn floats(v: &Value, key: &str) -> Result<Vec<f32>> {
    array(v, key)?
        .iter()
        .map(|x| if x.is_null() { Some(f32::NAN) } else { x.as_f64().map(|f| f as f32) })
        .collect::<Option<_>>()
        .ok_or_else(|| bad(format!("`{key}` holds a value that is not a number")))
}

/// A parameter XGBoost stores as a string (`"3"`), or a number.
fn param_number(v: &Value, key: &str) -> Option<f64> {
    match v.get(key)? {
        Value::String(s) => s.trim().trim_start_matches('[').trim_end_matches(']').parse().ok(),
        x => x.as_f64(),
    }
}

/// `base_score`: `"5E-1"` or, from XGBoost 3.1, `"[5E-1]"` / `"[a,b,c]"` (one per output).
fn base_scores(text: &str) -> Result<Vec<f64>> {
    text.trim()
        .trim_start_matches('[')
        .trim_end_matches(']')
        .split(',')
        .map(|s| s.trim().parse::<f64>().map_err(|_| bad(format!("base_score `{text}` is not a number list"))))
        .collect()
}

/// Our objective for XGBoost's name, or an error naming the unsupported one.
fn objective(name: &str) -> Result<Objective> {
    Objective::from_xgboost_name(name)
        .ok_or_else(|| bad(format!("objective `{name}` is not supported (supported: {})", Objective::xgboost_names())))
}

/// The margin of a base score given in output space.
fn score_to_margin(obj: Objective, score: f64) -> Result<f32> {
    let m = match obj.link() {
        Link::Logistic => {
            if !(score > 0.0 && score < 1.0) {
                return Err(bad(format!("base_score {score} is not a probability in (0, 1)")));
            }
            (score / (1.0 - score)).ln()
        }
        Link::Exp => {
            if score <= 0.0 {
                return Err(bad(format!("base_score {score} must be positive for {}", obj.name())));
            }
            score.ln()
        }
        Link::Identity | Link::Softmax | Link::Hinge => score,
    };
    if !m.is_finite() {
        return Err(bad(format!("base_score {score} has no finite margin")));
    }
    Ok(m as f32)
}

/// Reads the objective parameter `param` (one a descriptor's `xgboost_params` names) from
/// the objective's block, when there, into `config` and `known`.
fn read_param(
    config: &mut TrainConfig,
    known: &mut serde_json::Map<String, Value>,
    block: &Value,
    param: &str,
) -> Result<()> {
    let Some(given) = block.get(param) else { return Ok(()) };
    let Some(number) = param_number(block, param) else { return read_text_param(config, known, given, param) };
    match param {
        "tweedie_variance_power" => config.tweedie_variance_power = number,
        "huber_slope" => config.huber_slope = number,
        "scale_pos_weight" => config.scale_pos_weight = number,
        "aft_loss_distribution_scale" if !(number.is_finite() && number > 0.0) => {
            return Err(bad(format!("aft_loss_distribution_scale {number} is not > 0")))
        }
        "aft_loss_distribution_scale" => config.aft_loss_distribution_scale = number,
        // One expectile (XGBoost writes `[8E-1]`); several are read as text, and refused.
        "expectile_alpha" if (0.0..=1.0).contains(&number) => {
            config.expectile_alpha = Some(crate::config::QuantileAlphas::one(number))
        }
        "expectile_alpha" => return Err(bad(format!("expectile_alpha {number} is not in [0, 1]"))),
        // learner_model_param's num_class is the one read; a quantile is a list.
        "num_class" | "quantile_alpha" | "aft_loss_distribution" => {
            return read_text_param(config, known, given, param)
        }
        other => unreachable!("`{other}` is no objective parameter XGBoost's model files keep"),
    }
    known.insert(param.into(), number.into());
    Ok(())
}

/// [`read_param`] for the parameters that are not one number.
fn read_text_param(
    config: &mut TrainConfig,
    known: &mut serde_json::Map<String, Value>,
    given: &Value,
    param: &str,
) -> Result<()> {
    match (param, given) {
        ("aft_loss_distribution", Value::String(name)) => {
            config.aft_loss_distribution = crate::config::AftDistribution::from_name(name)
                .ok_or_else(|| bad(format!("aft_loss_distribution `{name}` is not supported")))?;
            known.insert(param.into(), name.as_str().into());
        }
        ("quantile_alpha", Value::String(s)) => {
            let alphas = base_scores(s)?;
            config.quantile_alpha = crate::config::QuantileAlphas::many(&alphas).ok_or_else(|| {
                bad(format!(
                    "quantile_alpha has {} quantiles; 1 to {} are supported",
                    alphas.len(),
                    crate::config::MAX_QUANTILES
                ))
            })?;
            known.insert(param.into(), serde_json::to_value(config.quantile_alpha).unwrap_or_default());
        }
        ("expectile_alpha", Value::String(s)) => match base_scores(s)?[..] {
            [a] if (0.0..=1.0).contains(&a) => {
                config.expectile_alpha = Some(crate::config::QuantileAlphas::one(a));
                known.insert(param.into(), a.into());
            }
            [a] => return Err(bad(format!("expectile_alpha {a} is not in [0, 1]"))),
            ref several => {
                return Err(bad(format!(
                    "expectile_alpha has {} expectiles: models of several expectiles (XGBoost 3.3's \
                     reparameterised outputs) are not supported",
                    several.len()
                )))
            }
        },
        _ => {}
    }
    Ok(())
}

/// The objective and its parameters from the learner's `objective` and
/// `learner_model_param` (`param`): the configuration, and what the file states of it under
/// our names.
fn objective_config(learner: &Value, param: &Value) -> Result<(TrainConfig, serde_json::Map<String, Value>)> {
    let obj_name = at(learner, &["objective", "name"])?.as_str().ok_or_else(|| bad("objective name is not text"))?;
    let obj = objective(obj_name)?;
    let num_class = param_number(param, "num_class").unwrap_or(0.0) as usize;
    // Several targets: one output per target (one tree each per round), or the outputs of
    // several quantiles (checked against their count below).
    let num_target = param_number(param, "num_target").unwrap_or(1.0) as usize;
    if num_target > 1 && !obj.descriptor().per_target {
        return Err(bad(format!("{num_target} targets with objective {} are not supported", obj.name())));
    }
    let mut config = TrainConfig { objective: obj, ..TrainConfig::default() };
    // What the file states, under our names. XGBoost's model files keep no training
    // parameters beyond these (no learning rate, depth or regularisation), so those are unknown.
    let mut known = serde_json::Map::new();
    known.insert("objective".into(), obj.name().into());
    if obj.is_multiclass() {
        config.num_class = num_class;
        known.insert("num_class".into(), num_class.into());
    }
    let obj_params = at(learner, &["objective"])?;
    if let Some(x) = obj.descriptor().xgboost_params {
        if let Some(block) = obj_params.get(x.block) {
            for param in x.params {
                read_param(&mut config, &mut known, block, param)?;
            }
        }
    }
    if config.quantile_alpha.len() > 1 {
        let k = config.num_outputs();
        if num_target != k {
            return Err(bad(format!("{num_target} targets but {k} quantiles in quantile_alpha")));
        }
    } else if num_target > 1 {
        config.num_target = num_target;
        known.insert("num_target".into(), num_target.into());
    }
    Ok((config, known))
}

/// The features: names and types; categories from the model's `cats` when present.
/// `n_bytes` (the file's size) bounds their number.
fn features(learner: &Value, model: &Value, param: &Value, n_bytes: usize) -> Result<Vec<ForeignFeature>> {
    let n_features = param_number(param, "num_feature").ok_or_else(|| bad("num_feature is missing"))?;
    if !(n_features >= 1.0 && n_features <= n_bytes as f64) {
        return Err(bad(format!("num_feature {n_features} is not a count this file can describe")));
    }
    let n_features = n_features as usize;
    let names: Vec<String> = match learner.get("feature_names").and_then(Value::as_array) {
        Some(a) if !a.is_empty() => a.iter().map(|x| x.as_str().unwrap_or("").to_string()).collect(),
        _ => (0..n_features).map(|i| format!("f{i}")).collect(),
    };
    let types: Vec<String> = match learner.get("feature_types").and_then(Value::as_array) {
        Some(a) if !a.is_empty() => a.iter().map(|x| x.as_str().unwrap_or("").to_string()).collect(),
        _ => vec!["float".into(); n_features],
    };
    if names.len() != n_features || types.len() != n_features {
        return Err(bad(format!("{} feature names and {} types for {n_features} features", names.len(), types.len())));
    }
    let categories = category_names(model.get("cats"), n_features)?;
    let features = (0..n_features)
        .map(|i| ForeignFeature {
            name: names[i].clone(),
            categorical: types[i] == "c",
            categories: if types[i] == "c" { categories[i].clone() } else { None },
        })
        .collect();
    Ok(features)
}

/// The model file's document: UBJSON, or JSON (with XGBoost's non-finite floats).
fn parse(bytes: &[u8]) -> Result<Value> {
    Ok(match bytes.first() {
        // UBJSON starts an object with `{` followed by a length marker or `$`/`#`.
        Some(b'{') if matches!(bytes.get(1), Some(b'U' | b'i' | b'I' | b'l' | b'L' | b'$' | b'#' | b'}')) => {
            super::ubjson::decode(bytes)?
        }
        _ => match serde_json::from_slice(bytes) {
            Ok(v) => v,
            // XGBoost writes non-finite floats as NaN and (-)Infinity, which JSON lacks.
            Err(e) => {
                serde_json::from_slice(&nonfinite_tokens(bytes)).map_err(|_| bad(format!("not JSON or UBJSON: {e}")))?
            }
        },
    })
}

/// Reads an XGBoost JSON or UBJSON model.
pub fn import(bytes: &[u8]) -> Result<Model> {
    let doc = parse(bytes)?;
    let learner = at(&doc, &["learner"])?;
    let param = at(learner, &["learner_model_param"])?;
    let (mut config, mut known) = objective_config(learner, param)?;
    let (obj, k) = (config.objective, config.num_outputs());
    let (model, weight_drop) = booster_model(learner)?;
    let features = features(learner, model, param, bytes.len())?;
    let rounds = read_rounds(model, k, weight_drop.as_deref())?;
    if rounds.vector_leaves {
        config.multi_strategy = MultiStrategy::MultiOutputTree;
        known.insert("multi_strategy".into(), "multi_output_tree".into());
    }
    let base_margin = base_margin(param, obj, k, &mut known)?;
    config.n_estimators = rounds.n;
    known.insert("n_estimators".into(), rounds.n.into());
    config.grow_policy = GrowPolicy::Lossguide;
    config.max_depth = 0;
    config.max_leaves = rounds.trees.iter().map(|t: &Vec<ForeignNode>| t.len().div_ceil(2)).max().unwrap_or(2).max(2);
    assemble(Foreign {
        config,
        base_margin,
        features,
        trees: rounds.trees,
        source: "XGBoost",
        known,
        input_bytes: bytes.len(),
    })
}

/// The booster's trees (`model`), and for a `dart` booster each tree's weight.
fn booster_model(learner: &Value) -> Result<(&Value, Option<Vec<f32>>)> {
    let booster = at(learner, &["gradient_booster"])?;
    let booster_name = at(booster, &["name"])?.as_str().unwrap_or("");
    Ok(match booster_name {
        "gbtree" => (at(booster, &["model"])?, None),
        "dart" => (at(booster, &["gbtree", "model"])?, Some(floats(booster, "weight_drop")?)),
        other => return Err(bad(format!("booster `{other}` is not supported (gbtree and dart are)"))),
    })
}

/// The trees, regrouped round-major by output: `trees[r * k + o]` adds to output `o` in round `r`.
struct Rounds {
    n: usize,
    trees: Vec<Vec<ForeignNode>>,
    /// Whether XGBoost grew one tree a round whose leaves hold every output's value (each
    /// split into one tree per output here).
    vector_leaves: bool,
}

/// The booster's trees for `k` outputs, each scaled by its `dart` weight.
fn read_rounds(model: &Value, k: usize, weight_drop: Option<&[f32]>) -> Result<Rounds> {
    let trees = array(model, "trees")?;
    let tree_info: Vec<i64> =
        if model.get("tree_info").is_some() { ints(model, "tree_info")? } else { vec![0; trees.len()] };
    if tree_info.len() != trees.len() || tree_info.iter().any(|&g| g < 0 || g as usize >= k) {
        return Err(bad(format!("tree_info does not give one output below {k} for each of {} trees", trees.len())));
    }
    if let Some(w) = weight_drop {
        if w.len() != trees.len() {
            return Err(bad(format!("dart has {} tree weights for {} trees", w.len(), trees.len())));
        }
    }
    let scale = |t: usize, nodes: &mut Vec<ForeignNode>| {
        if let Some(w) = weight_drop {
            nodes.iter_mut().for_each(|n| n.value *= w[t]);
        }
    };
    let vector_leaves = trees.first().and_then(leaf_vector_size).is_some_and(|size| size > 1);
    if vector_leaves {
        // One tree a round whose leaves hold every output's value: one tree per output here.
        let mut round_major = Vec::with_capacity(trees.len() * k);
        for (t, tree) in trees.iter().enumerate() {
            let per_output = read_vector_tree(tree, k).map_err(|e| within(e, &format!("XGBoost model: tree {t}")))?;
            for mut nodes in per_output {
                scale(t, &mut nodes);
                round_major.push(nodes);
            }
        }
        return Ok(Rounds { n: trees.len(), trees: round_major, vector_leaves });
    }
    let counts = tally(tree_info.iter().map(|&g| g as usize));
    if trees.is_empty() || counts.len() != k || counts.values().any(|&c| c != trees.len() / k) {
        return Err(bad(format!("the {} trees are not the same number per output ({k} outputs)", trees.len())));
    }
    let mut per_output: Vec<Vec<Vec<ForeignNode>>> = vec![Vec::new(); k];
    for (t, tree) in trees.iter().enumerate() {
        if leaf_vector_size(tree).is_some_and(|size| size > 1) {
            return Err(bad(format!("tree {t} has vector leaves, the model's first tree has not")));
        }
        let mut nodes = read_tree(tree).map_err(|e| within(e, &format!("XGBoost model: tree {t}")))?;
        scale(t, &mut nodes);
        per_output[tree_info[t] as usize].push(nodes);
    }
    let rounds = trees.len() / k;
    let mut round_major = Vec::with_capacity(trees.len());
    let mut iters: Vec<_> = per_output.into_iter().map(|v| v.into_iter()).collect();
    for _ in 0..rounds {
        for it in iters.iter_mut() {
            round_major.push(it.next().unwrap());
        }
    }
    Ok(Rounds { n: rounds, trees: round_major, vector_leaves })
}

/// The base margin of each of the `k` outputs, from the base scores `param` states (one, or
/// one per output), which `known` records.
fn base_margin(
    param: &Value,
    obj: Objective,
    k: usize,
    known: &mut serde_json::Map<String, Value>,
) -> Result<Vec<f32>> {
    let scores = base_scores(at(param, &["base_score"])?.as_str().ok_or_else(|| bad("base_score is not text"))?)?;
    // One number, or one per output when they differ.
    let stated = if scores.iter().all(|&s| s == scores[0]) { scores[0].into() } else { scores.clone().into() };
    known.insert("base_score".into(), stated);
    let scores = match scores.len() {
        1 => vec![scores[0]; k],
        n if n == k => scores,
        n => return Err(bad(format!("{n} base scores for {k} outputs"))),
    };
    scores.iter().map(|&s| score_to_margin(obj, s)).collect()
}

/// Category names per feature from XGBoost 3.1+'s `cats` (strings as UTF-8 bytes with
/// offsets, or numbers).
fn category_names(cats: Option<&Value>, n_features: usize) -> Result<Vec<Option<Vec<String>>>> {
    let mut out = vec![None; n_features];
    let Some(enc) = cats.and_then(|c| c.get("enc")).and_then(Value::as_array) else {
        return Ok(out);
    };
    if enc.is_empty() {
        return Ok(out);
    }
    if enc.len() != n_features {
        return Err(bad(format!("`cats` describes {} features, not {n_features}", enc.len())));
    }
    for (i, e) in enc.iter().enumerate() {
        let values = array(e, "values")?;
        if values.is_empty() {
            continue;
        }
        let names: Vec<String> = match e.get("offsets").and_then(Value::as_array) {
            Some(offsets) if !offsets.is_empty() => {
                let bytes: Vec<u8> = values
                    .iter()
                    .map(|x| x.as_u64().filter(|&b| b < 256).map(|b| b as u8))
                    .collect::<Option<_>>()
                    .ok_or_else(|| bad(format!("feature {i}: category bytes are not bytes")))?;
                let offs: Vec<usize> = offsets
                    .iter()
                    .map(|x| x.as_u64().map(|o| o as usize))
                    .collect::<Option<_>>()
                    .ok_or_else(|| bad(format!("feature {i}: category offsets are not integers")))?;
                offs.windows(2)
                    .map(|w| {
                        bytes
                            .get(w[0]..w[1])
                            .and_then(|s| std::str::from_utf8(s).ok())
                            .map(str::to_string)
                            .ok_or_else(|| bad(format!("feature {i}: category offsets are out of range or not UTF-8")))
                    })
                    .collect::<Result<_>>()?
            }
            _ => values.iter().map(category_text).collect(),
        };
        out[i] = Some(names);
    }
    Ok(out)
}

/// The outputs a tree's leaves hold (`size_leaf_vector`; absent or 0 or 1 for scalar leaves).
fn leaf_vector_size(tree: &Value) -> Option<usize> {
    tree.get("tree_param").and_then(|p| param_number(p, "size_leaf_vector")).map(|s| s as usize)
}

/// A vector-leaf tree (`multi_strategy="multi_output_tree"`) of `k` outputs as `k` trees of
/// the same splits: a leaf `i` holds `leaf_weights[right_children[i] * k..][..k]` (XGBoost
/// numbers the leaves there); the splits read as a scalar tree's.
fn read_vector_tree(tree: &Value, k: usize) -> Result<Vec<Vec<ForeignNode>>> {
    let size = leaf_vector_size(tree).unwrap_or(1);
    if size != k {
        return Err(bad(format!("a tree's leaves hold {size} values, but the model has {k} outputs")));
    }
    let left = ints(tree, "left_children")?;
    let right = ints(tree, "right_children")?;
    let weights = floats(tree, "leaf_weights")?;
    // The splits alone, as a scalar tree (leaves' right children cleared): the structure.
    let mut scalar = tree.clone();
    let cleared: Vec<Value> = left.iter().zip(&right).map(|(&l, &r)| if l == -1 { -1 } else { r }.into()).collect();
    scalar["right_children"] = Value::Array(cleared);
    let nodes = read_tree(&scalar)?;
    (0..k)
        .map(|output| {
            let mut out = nodes.clone();
            for (i, node) in out.iter_mut().enumerate().filter(|(i, _)| left[*i] == -1) {
                let leaf =
                    usize::try_from(right[i]).map_err(|_| bad(format!("leaf {i} has leaf index {}", right[i])))?;
                node.value = *weights
                    .get(leaf * k + output)
                    .ok_or_else(|| bad(format!("leaf {i}'s values lie beyond the {} leaf weights", weights.len())))?;
            }
            Ok(out)
        })
        .collect()
}

/// A scalar tree's nodes (a vector-leaf tree's splits, once its leaves' indices are cleared).
fn read_tree(tree: &Value) -> Result<Vec<ForeignNode>> {
    let left = ints(tree, "left_children")?;
    let right = ints(tree, "right_children")?;
    let feature = ints(tree, "split_indices")?;
    let cond = floats(tree, "split_conditions")?;
    let default_left = ints(tree, "default_left")?;
    let n = left.len();
    let gain = floats(tree, "loss_changes").unwrap_or_else(|_| vec![0.0; n]);
    let cover = floats(tree, "sum_hessian").unwrap_or_else(|_| vec![0.0; n]);
    let split_type = if tree.get("split_type").is_some() { ints(tree, "split_type")? } else { vec![0; n] };
    if [right.len(), feature.len(), cond.len(), default_left.len(), gain.len(), cover.len(), split_type.len()]
        .iter()
        .any(|&l| l != n)
    {
        return Err(bad("node arrays differ in length"));
    }
    // Categorical sets: node -> categories (listed categories go right).
    let mut sets: std::collections::HashMap<usize, Vec<u32>> = Default::default();
    if split_type.contains(&1) {
        let cats = ints(tree, "categories")?;
        let nodes = ints(tree, "categories_nodes")?;
        let seg = ints(tree, "categories_segments")?;
        let size = ints(tree, "categories_sizes")?;
        if nodes.len() != seg.len() || nodes.len() != size.len() {
            return Err(bad("category arrays differ in length"));
        }
        for ((&node, &s), &len) in nodes.iter().zip(&seg).zip(&size) {
            let range = usize::try_from(s).ok().zip(usize::try_from(len).ok()).and_then(|(s, l)| {
                let end = s.checked_add(l)?;
                (end <= cats.len()).then_some(s..end)
            });
            let range = range.ok_or_else(|| bad(format!("node {node}: category segment is outside the list")))?;
            let codes = cats[range]
                .iter()
                .map(|&c| u32::try_from(c).map_err(|_| bad(format!("node {node}: category code {c} is negative"))))
                .collect::<Result<Vec<u32>>>()?;
            sets.insert(usize::try_from(node).map_err(|_| bad("negative categorical node id"))?, codes);
        }
    }
    (0..n)
        .map(|i| {
            let mut node = ForeignNode { gain: gain[i], cover: cover[i], ..Default::default() };
            if left[i] == -1 {
                if right[i] != -1 {
                    return Err(bad(format!("node {i} has one child")));
                }
                node.value = cond[i];
                return Ok(node);
            }
            let child = |c: i64| usize::try_from(c).map_err(|_| bad(format!("node {i} has child {c}")));
            let (l, r) = (child(left[i])?, child(right[i])?);
            node.feature =
                usize::try_from(feature[i]).map_err(|_| bad(format!("node {i} has feature {}", feature[i])))?;
            if split_type[i] == 1 {
                // The listed categories go right in XGBoost: swap so that they go left here.
                let set = sets.remove(&i).ok_or_else(|| bad(format!("categorical node {i} has no category set")))?;
                node.children = Some((r, l));
                node.default_left = default_left[i] == 0;
                node.left_categories = Some(set);
            } else {
                node.children = Some((l, r));
                node.default_left = default_left[i] != 0;
                node.threshold = cond[i];
            }
            Ok(node)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::interop::xgboost_export::param_text;

    /// Every parameter of a descriptor's XGBoost block is exported and read back.
    #[test]
    fn objective_blocks_round_trip() {
        let cfg = TrainConfig {
            tweedie_variance_power: 1.3,
            huber_slope: 2.5,
            quantile_alpha: crate::config::QuantileAlphas::many(&[0.2, 0.7]).unwrap(),
            expectile_alpha: Some(crate::config::QuantileAlphas::one(0.35)),
            scale_pos_weight: 3.0,
            aft_loss_distribution: crate::config::AftDistribution::from_name("logistic").unwrap(),
            aft_loss_distribution_scale: 2.0,
            num_class: 4,
            ..TrainConfig::default()
        };
        let mut blocks = 0;
        for o in Objective::ALL {
            let Some(x) = o.descriptor().xgboost_params else { continue };
            let block: serde_json::Map<String, Value> =
                x.params.iter().map(|&p| (p.to_string(), Value::String(param_text(&cfg, p)))).collect();
            let (mut read, mut known) = (TrainConfig::default(), serde_json::Map::new());
            for p in x.params {
                read_param(&mut read, &mut known, &Value::Object(block.clone()), p).unwrap();
            }
            let (want, got) = (serde_json::to_value(&cfg).unwrap(), serde_json::to_value(&read).unwrap());
            for &p in x.params.iter().filter(|&&p| p != "num_class") {
                assert_eq!(got[p], want[p], "{}: {p}", o.name());
                assert!(known.contains_key(p), "{}: {p}", o.name());
            }
            blocks += 1;
        }
        assert_eq!(blocks, 8);
    }
}
