//! Our models as XGBoost JSON (loadable by XGBoost 3.1 and later, which reads per-output base
//! scores and category names). Categorical splits are written with the children swapped,
//! because XGBoost's category list names the categories that go right and ours those that go
//! left; such trees are renumbered so that each left child precedes its sibling, which
//! XGBoost's leaf-index prediction relies on. Other trees keep our node ids, so XGBoost's leaf
//! indices equal ours.

use serde_json::{json, Value};

use crate::config::TrainConfig;
use crate::model::Model;
use crate::objective::Outputs;
use crate::tree::{Tree, NO_CHILD};

/// XGBoost writes floats in scientific notation inside its string parameters.
fn sci(x: f32) -> String {
    format!("{x:E}")
}

impl Model {
    /// The model as an XGBoost JSON model (`xgboost.Booster(model_file=...)` loads it).
    pub fn to_xgboost_json(&self) -> String {
        let obj = self.objective();
        let k = self.n_outputs;
        let n_features = self.features.len();
        // XGBoost keeps base_score in output space.
        let scores: Vec<String> = self.base_margin.iter().map(|&m| sci(obj.link().score_of_margin(m))).collect();
        let rounds = self.num_rounds();
        // A vector-leaf round is one XGBoost tree holding every output in its leaves.
        let (trees, per_round): (Vec<Value>, usize) = if self.is_vector_leaf() {
            (self.trees.chunks(k).enumerate().map(|(i, round)| vector_tree_json(round, i, n_features)).collect(), 1)
        } else {
            (self.trees.iter().enumerate().map(|(i, t)| tree_json(t, i, n_features)).collect(), k)
        };
        let indptr: Vec<usize> = (0..=rounds).map(|r| r * per_round).collect();
        let tree_info: Vec<usize> = (0..trees.len()).map(|t| t % per_round).collect();
        let mut objective = json!({"name": obj.name()});
        let cfg = &self.config;
        if let Some(x) = obj.descriptor().xgboost_params {
            let block: serde_json::Map<String, Value> =
                x.params.iter().map(|&p| (p.to_string(), Value::String(param_text(cfg, p)))).collect();
            objective[x.block] = Value::Object(block);
        }
        let quantile_targets = obj.descriptor().outputs == Outputs::PerQuantile;
        let mut model = json!({
            "gbtree_model_param": {"num_parallel_tree": "1", "num_trees": trees.len().to_string()},
            "iteration_indptr": indptr,
            "tree_info": tree_info,
            "trees": trees,
        });
        // Category names, so XGBoost recodes DataFrame categories by name as we do.
        let categorical: Vec<bool> = self.features.iter().map(|f| f.cuts.is_categorical()).collect();
        if categorical.iter().any(|&c| c)
            && self.features.iter().all(|f| !f.cuts.is_categorical() || f.categories.is_some())
        {
            let mut enc = Vec::new();
            let mut segments = vec![0usize];
            let mut sorted_idx = Vec::new();
            for f in &self.features {
                match &f.categories {
                    Some(names) => {
                        let mut offsets = vec![0usize];
                        let mut bytes = Vec::new();
                        for n in names {
                            bytes.extend(n.as_bytes().iter().map(|&b| b as u32));
                            offsets.push(bytes.len());
                        }
                        enc.push(json!({"offsets": offsets, "values": bytes}));
                        // Our names are sorted already.
                        sorted_idx.extend(0..names.len());
                        segments.push(segments.last().unwrap() + names.len());
                    }
                    None => {
                        enc.push(json!({"offsets": [], "values": []}));
                        segments.push(*segments.last().unwrap());
                    }
                }
            }
            model["cats"] = json!({"enc": enc, "feature_segments": segments, "sorted_idx": sorted_idx});
        }
        let doc = json!({
            "learner": {
                "attributes": {},
                "feature_names": self.features.iter().map(|f| f.name.clone()).collect::<Vec<_>>(),
                "feature_types": categorical.iter().map(|&c| if c { "c" } else { "float" }).collect::<Vec<_>>(),
                "gradient_booster": {"model": model, "name": "gbtree"},
                "learner_model_param": {
                    "base_score": format!("[{}]", scores.join(",")),
                    "boost_from_average": "1",
                    "num_class": if obj.is_multiclass() { cfg.num_class.to_string() } else { "0".into() },
                    "num_feature": n_features.to_string(),
                    // Targets, one scalar tree each a round; several quantiles are targets too.
                    "num_target": if quantile_targets { k.to_string() } else { cfg.num_target.to_string() },
                },
                "objective": objective,
            },
            "version": [3, 1, 0],
        });
        doc.to_string()
    }
}

/// An objective parameter of `cfg` (one a descriptor's `xgboost_params` names) as XGBoost
/// writes it in the objective's block: as text.
pub(super) fn param_text(cfg: &TrainConfig, param: &str) -> String {
    match param {
        "num_class" => cfg.num_class.to_string(),
        "tweedie_variance_power" => cfg.tweedie_variance_power.to_string(),
        "huber_slope" => cfg.huber_slope.to_string(),
        "quantile_alpha" => {
            let alphas: Vec<String> = cfg.quantile_alpha.as_slice().iter().map(f64::to_string).collect();
            format!("[{}]", alphas.join(","))
        }
        // A list of one, as XGBoost writes it.
        "expectile_alpha" => format!("[{}]", cfg.expectile()),
        "scale_pos_weight" => cfg.scale_pos_weight.to_string(),
        "aft_loss_distribution" => cfg.aft_loss_distribution.name().to_string(),
        "aft_loss_distribution_scale" => cfg.aft_loss_distribution_scale.to_string(),
        // A test exports every descriptor's parameters.
        other => unreachable!("`{other}` is no objective parameter XGBoost's model files keep"),
    }
}

/// A tree's children as XGBoost sees them: categorical splits swap them.
fn xgb_children(t: &Tree, i: usize) -> (usize, usize) {
    if t.category_len[i] > 0 {
        (t.right[i] as usize, t.left[i] as usize)
    } else {
        (t.left[i] as usize, t.right[i] as usize)
    }
}

/// Our node ids in XGBoost's order. XGBoost expects a left child numbered below its sibling:
/// a tree with categorical splits is renumbered breadth-first in XGBoost's child order
/// (others keep our ids).
fn xgb_order(t: &Tree) -> Vec<usize> {
    let n = t.n_nodes();
    let mut order: Vec<usize> = (0..n).collect();
    if t.category_len.iter().zip(&t.left).any(|(&len, &l)| len > 0 && l != NO_CHILD) {
        order = vec![0];
        let mut k = 0;
        while k < order.len() {
            let i = order[k];
            if t.left[i] != NO_CHILD {
                let (l, r) = xgb_children(t, i);
                order.extend([l, r]);
            }
            k += 1;
        }
    }
    order
}

/// A vector-leaf round (one tree per output, the same splits) as one XGBoost multi-target
/// tree: the first tree's splits, gains and covers; `base_weights` holds every node's
/// outputs (ours carry the learning rate on inner nodes too, which prediction never reads),
/// and each leaf's `right_children` entry indexes its outputs in `leaf_weights`.
fn vector_tree_json(round: &[Tree], id: usize, n_features: usize) -> Value {
    let t = &round[0];
    let mut doc = tree_json(t, id, n_features);
    let order = xgb_order(t);
    let base: Vec<f32> = order.iter().flat_map(|&i| round.iter().map(move |o| o.value[i])).collect();
    let mut right: Vec<i64> = serde_json::from_value(doc["right_children"].take()).expect("written as integers");
    let mut leaf_weights = Vec::new();
    for (j, &i) in order.iter().enumerate().filter(|&(_, &i)| t.left[i] == NO_CHILD) {
        right[j] = (leaf_weights.len() / round.len()) as i64;
        leaf_weights.extend(round.iter().map(|o| o.value[i]));
    }
    doc["right_children"] = json!(right);
    doc["base_weights"] = json!(base);
    doc["leaf_weights"] = json!(leaf_weights);
    doc["tree_param"]["size_leaf_vector"] = json!(round.len().to_string());
    doc
}

fn tree_json(t: &Tree, id: usize, n_features: usize) -> Value {
    let n = t.n_nodes();
    let xgb_children = |i: usize| xgb_children(t, i);
    let order = xgb_order(t);
    let mut new_id = vec![0usize; n];
    for (new, &old) in order.iter().enumerate() {
        new_id[old] = new;
    }
    let mut left = vec![-1i64; n];
    let mut right = vec![-1i64; n];
    let mut parents = vec![i32::MAX as i64; n];
    let mut cond = vec![0f32; n];
    let mut default_left = vec![0u8; n];
    let mut split_type = vec![0u8; n];
    let mut split_index = vec![0u32; n];
    let (mut value, mut gain, mut cover) = (vec![0f32; n], vec![0f32; n], vec![0f32; n]);
    let (mut categories, mut cat_nodes, mut cat_segments, mut cat_sizes) = (vec![], vec![], vec![], vec![]);
    for (j, &i) in order.iter().enumerate() {
        value[j] = t.value[i];
        gain[j] = t.gain[i];
        cover[j] = t.cover[i];
        if t.left[i] == NO_CHILD {
            cond[j] = t.value[i];
            continue;
        }
        let (l, r) = xgb_children(i);
        let (l, r) = (new_id[l], new_id[r]);
        (left[j], right[j]) = (l as i64, r as i64);
        parents[l] = j as i64;
        parents[r] = j as i64;
        split_index[j] = t.feature[i];
        if t.category_len[i] > 0 {
            // XGBoost's listed categories go right (to our left child): flip the default too.
            default_left[j] = (!t.default_left[i]) as u8;
            split_type[j] = 1;
            let start = t.category_start[i] as usize;
            let words = &t.category_words[start..start + t.category_len[i] as usize];
            let codes: Vec<u32> = words
                .iter()
                .enumerate()
                .flat_map(|(w, &bits)| (0..32u32).filter(move |b| bits & (1 << b) != 0).map(move |b| w as u32 * 32 + b))
                .collect();
            cat_nodes.push(j);
            cat_segments.push(categories.len());
            cat_sizes.push(codes.len());
            categories.extend(codes);
        } else {
            default_left[j] = t.default_left[i] as u8;
            cond[j] = t.threshold[i];
        }
    }
    json!({
        "base_weights": value,
        "categories": categories,
        "categories_nodes": cat_nodes,
        "categories_segments": cat_segments,
        "categories_sizes": cat_sizes,
        "default_left": default_left,
        "id": id,
        "left_children": left,
        "loss_changes": gain,
        "parents": parents,
        "right_children": right,
        "split_conditions": cond,
        "split_indices": split_index,
        "split_type": split_type,
        "sum_hessian": cover,
        "tree_param": {
            "num_deleted": "0",
            "num_feature": n_features.to_string(),
            "num_nodes": n.to_string(),
            "size_leaf_vector": "1",
        },
    })
}
