//! Trees of any shape and depth, as model files of every format we read: XGBoost JSON and
//! UBJSON, LightGBM text, and our own binary and JSON forms. A model file is untrusted input,
//! and a valid tree may be a chain a million nodes deep: loading, predicting (margins, leaves),
//! SHAP values and interaction values, export and slicing must give the right answer at any
//! depth, on the CPU and (where one is usable) the GPU, or a clear error; never a crash.
//!
//! The oracle is this file's own: each generated tree is walked here by its definition, and
//! SHAP values are the Shapley values of the tree's conditional expectations, enumerated over
//! every subset of the (few) features. Nothing here recurses, so the oracle survives any depth.

use std::sync::Arc;

use arrow_array::{ArrayRef, Float32Array};
use polars_gbt::random::Rng;
use polars_gbt::{FeatureColumn, FeatureFrame, Model, PredictOutput, Predictions};
use proptest::prelude::*;

/// A node as the generator makes it, in our semantics: numeric splits send `x < threshold`
/// left, categorical splits send the codes in `left_set` left, missing values go to
/// `default_left`. Children come after their parents.
#[derive(Clone, Debug)]
struct Node {
    children: Option<(usize, usize)>,
    feature: usize,
    threshold: f32,
    default_left: bool,
    left_set: Option<Vec<u32>>,
    value: f32,
    cover: f32,
}

#[derive(Clone, Debug)]
struct Forest {
    categorical: Vec<bool>,
    trees: Vec<Vec<Node>>,
}

impl Forest {
    fn n_features(&self) -> usize {
        self.categorical.len()
    }
}

fn leaf(value: f32, cover: f32) -> Node {
    Node { children: None, feature: 0, threshold: 0.0, default_left: false, left_set: None, value, cover }
}

/// The child of `node` that `x` (the row's value of the node's feature) goes to.
fn next(node: &Node, x: f32) -> usize {
    let (l, r) = node.children.expect("a split");
    let left = if x.is_nan() {
        node.default_left
    } else if let Some(set) = &node.left_set {
        x >= 0.0 && set.contains(&(x as u32))
    } else {
        x < node.threshold
    };
    if left {
        l
    } else {
        r
    }
}

/// The leaf `row` reaches.
fn leaf_of(tree: &[Node], row: &[f32]) -> usize {
    let mut n = 0;
    while tree[n].children.is_some() {
        n = next(&tree[n], row[tree[n].feature]);
    }
    n
}

/// E[tree | the features in `known` take the row's values], the rest following the covers:
/// the value function whose Shapley values TreeSHAP computes. Mass flows down an explicit stack.
fn conditional(tree: &[Node], row: &[f32], known: u32) -> f64 {
    let mut total = 0.0;
    let mut stack = vec![(0usize, 1.0f64)];
    while let Some((n, mass)) = stack.pop() {
        let node = &tree[n];
        let Some((l, r)) = node.children else {
            total += mass * node.value as f64;
            continue;
        };
        if known & (1 << node.feature) != 0 {
            stack.push((next(node, row[node.feature]), mass));
        } else if node.cover > 0.0 {
            for c in [l, r] {
                let share = tree[c].cover as f64 / node.cover as f64;
                if share > 0.0 {
                    stack.push((c, mass * share));
                }
            }
        }
    }
    total
}

/// Shapley values of `conditional` over every subset of the features, and the bias.
fn shapley(tree: &[Node], row: &[f32]) -> (Vec<f64>, f64) {
    let m = row.len();
    let fact = |n: usize| (1..=n).product::<usize>() as f64;
    let values: Vec<f64> = (0..1u32 << m).map(|s| conditional(tree, row, s)).collect();
    let phi = (0..m)
        .map(|i| {
            (0..1u32 << m)
                .filter(|s| s & (1 << i) == 0)
                .map(|s| {
                    let size = s.count_ones() as usize;
                    fact(size) * fact(m - size - 1) / fact(m) * (values[(s | 1 << i) as usize] - values[s as usize])
                })
                .sum()
        })
        .collect();
    (phi, values[0])
}

/// A random tree of about `splits` splits over the forest's features. `chain` is the chance
/// that the next split is taken on the newest leaf (so chains grow deep), else on any leaf.
fn random_tree(rng: &mut Rng, categorical: &[bool], splits: usize, chain: f64) -> Vec<Node> {
    let mut tree = vec![leaf(0.0, 0.0)];
    let mut leaves = vec![0usize];
    for _ in 0..splits {
        let pick = if rng.unit() < chain { leaves.len() - 1 } else { rng.below(leaves.len()) };
        let n = leaves.swap_remove(pick);
        let feature = rng.below(categorical.len());
        let (l, r) = (tree.len(), tree.len() + 1);
        let node = &mut tree[n];
        node.children = Some((l, r));
        node.feature = feature;
        if categorical[feature] {
            node.left_set = Some((0..8u32).filter(|_| rng.below(2) == 0).collect());
            // LightGBM sends missing categories right: every format can say so.
            node.default_left = false;
        } else {
            // Row values sit on a grid of quarters; thresholds between them, so `<` and `<=`
            // (LightGBM's test) agree.
            node.threshold = (rng.below(20) as f32 - 10.0) * 0.25 + 0.125;
            node.default_left = rng.below(2) == 0;
        }
        tree.push(leaf(0.0, 0.0));
        tree.push(leaf(0.0, 0.0));
        // The newer leaf is the one a chain continues from: either side, at random.
        if rng.below(2) == 0 {
            leaves.extend([l, r]);
        } else {
            leaves.extend([r, l]);
        }
    }
    // Leaf values on a grid of 1/64 (exact in every format), integer covers (0 now and then:
    // an imported tree may hold a branch no training row took); a split's cover is its sum.
    for n in (0..tree.len()).rev() {
        match tree[n].children {
            None => {
                tree[n].value = (rng.below(257) as f32 - 128.0) / 64.0;
                tree[n].cover = if rng.below(10) == 0 { 0.0 } else { 1.0 + rng.below(20) as f32 };
            }
            Some((l, r)) => tree[n].cover = tree[l].cover + tree[r].cover,
        }
    }
    tree
}

/// Chain thresholds are multiples of 1 / GRID, and chain rows odd multiples of 1 / (2 GRID):
/// never equal, so `<` and `<=` (LightGBM's test) agree.
const GRID: f64 = (1 << 20) as f64;

/// A chain `depth` splits deep: split `i` alternates between two numeric features, sends
/// values below a threshold falling from 1 to 0 on (left, to split `i + 1`) and the rest to a
/// leaf; missing values go on. Rows of uniform values leave at every depth.
fn chain(depth: usize) -> Forest {
    let mut tree = Vec::with_capacity(2 * depth + 1);
    for i in 0..depth {
        // Split i is node 2i, its leaf 2i + 1, the next split (or the last leaf) 2i + 2.
        let (next_split, exit) = (tree.len() + 2, tree.len() + 1);
        tree.push(Node {
            children: Some((next_split, exit)),
            feature: i % 2,
            threshold: ((depth - i) as f64 * GRID / depth as f64).floor() as f32 / GRID as f32,
            default_left: true,
            left_set: None,
            value: 0.0,
            cover: 0.0,
        });
        tree.push(leaf((i % 7) as f32 * 0.25 - 0.75, 1.0 + (i % 3) as f32));
    }
    tree.push(leaf(2.0, 1.0));
    for n in (0..tree.len()).rev() {
        if let Some((l, r)) = tree[n].children {
            tree[n].cover = tree[l].cover + tree[r].cover;
        }
    }
    Forest { categorical: vec![false, false], trees: vec![tree] }
}

fn join<T: ToString>(items: impl IntoIterator<Item = T>, sep: &str) -> String {
    items.into_iter().map(|x| x.to_string()).collect::<Vec<_>>().join(sep)
}

/// The forest as an XGBoost JSON model (reg:squarederror, base score `base`). XGBoost sends
/// the listed categories right, so a categorical split's children and default swap.
fn xgboost_json(f: &Forest, base: f32) -> String {
    let trees: Vec<String> = f
        .trees
        .iter()
        .enumerate()
        .map(|(t, tree)| {
            let mut cats = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
            let (mut left, mut right, mut default_left, mut split_type) = (vec![], vec![], vec![], vec![]);
            for (i, n) in tree.iter().enumerate() {
                match (n.children, &n.left_set) {
                    (None, _) => {
                        left.push(-1i64);
                        right.push(-1i64);
                        default_left.push(0);
                        split_type.push(0);
                    }
                    (Some((l, r)), None) => {
                        left.push(l as i64);
                        right.push(r as i64);
                        default_left.push(n.default_left as i32);
                        split_type.push(0);
                    }
                    (Some((l, r)), Some(set)) => {
                        left.push(r as i64);
                        right.push(l as i64);
                        default_left.push((!n.default_left) as i32);
                        split_type.push(1);
                        cats.1.push(i);
                        cats.2.push(cats.0.len());
                        cats.3.push(set.len());
                        cats.0.extend(set.iter().copied());
                    }
                }
            }
            let cond = tree.iter().map(|n| if n.children.is_none() { n.value } else { n.threshold });
            format!(
                r#"{{"id": {t}, "left_children": [{}], "right_children": [{}], "split_indices": [{}],
                "split_conditions": [{}], "default_left": [{}], "split_type": [{}], "sum_hessian": [{}],
                "loss_changes": [{}], "categories": [{}], "categories_nodes": [{}],
                "categories_segments": [{}], "categories_sizes": [{}],
                "tree_param": {{"num_nodes": "{}", "size_leaf_vector": "1"}}}}"#,
                join(&left, ","),
                join(&right, ","),
                join(tree.iter().map(|n| n.feature), ","),
                join(cond, ","),
                join(&default_left, ","),
                join(&split_type, ","),
                join(tree.iter().map(|n| n.cover), ","),
                join(tree.iter().map(|_| 1.0), ","),
                join(&cats.0, ","),
                join(&cats.1, ","),
                join(&cats.2, ","),
                join(&cats.3, ","),
                tree.len()
            )
        })
        .collect();
    let nf = f.n_features();
    format!(
        r#"{{"learner": {{"learner_model_param": {{"base_score": "{base:E}", "num_class": "0", "num_feature": "{nf}",
        "num_target": "1"}}, "objective": {{"name": "reg:squarederror"}},
        "feature_names": [{}], "feature_types": [{}],
        "gradient_booster": {{"name": "gbtree", "model": {{"trees": [{}], "tree_info": [{}]}}}}}},
        "version": [3, 0, 0]}}"#,
        join((0..nf).map(|i| format!("\"f{i}\"")), ","),
        join(f.categorical.iter().map(|&c| if c { "\"c\"" } else { "\"float\"" }), ","),
        trees.join(","),
        join(f.trees.iter().map(|_| 0), ",")
    )
}

/// JSON as UBJSON (XGBoost's binary form): objects and arrays with end markers, integers as
/// `L`, floats as `D`, strings as `S` with a `L` length.
fn ubjson(v: &serde_json::Value, out: &mut Vec<u8>) {
    fn string(s: &str, out: &mut Vec<u8>) {
        out.push(b'L');
        out.extend((s.len() as i64).to_be_bytes());
        out.extend(s.as_bytes());
    }
    match v {
        serde_json::Value::Null => out.push(b'Z'),
        serde_json::Value::Bool(b) => out.push(if *b { b'T' } else { b'F' }),
        serde_json::Value::Number(n) => match n.as_i64() {
            Some(i) => {
                out.push(b'L');
                out.extend(i.to_be_bytes());
            }
            None => {
                out.push(b'D');
                out.extend(n.as_f64().unwrap().to_be_bytes());
            }
        },
        serde_json::Value::String(s) => {
            out.push(b'S');
            string(s, out);
        }
        serde_json::Value::Array(items) => {
            out.push(b'[');
            items.iter().for_each(|x| ubjson(x, out));
            out.push(b']');
        }
        serde_json::Value::Object(map) => {
            out.push(b'{');
            for (k, x) in map {
                string(k, out);
                ubjson(x, out);
            }
            out.push(b'}');
        }
    }
}

/// The forest as a LightGBM text model (regression, no base score): inner nodes numbered in
/// order, leaves as `~index`; `x <= threshold` goes left, which the thresholds between grid
/// points make the same test; categorical sets as bit words.
fn lightgbm_text(f: &Forest) -> String {
    let nf = f.n_features();
    let mut text = format!(
        "tree\nversion=v4\nnum_class=1\nnum_tree_per_iteration=1\nlabel_index=0\nmax_feature_idx={}\n\
         objective=regression\nfeature_names={}\nfeature_infos={}\n\n",
        nf - 1,
        join((0..nf).map(|i| format!("f{i}")), " "),
        join(f.categorical.iter().map(|&c| if c { "0:1:2:3:4:5:6:7" } else { "[-3:3]" }), " ")
    );
    for (t, tree) in f.trees.iter().enumerate() {
        let (mut inner, mut leaves) = (vec![usize::MAX; tree.len()], vec![usize::MAX; tree.len()]);
        let (mut n_inner, mut n_leaves) = (0, 0);
        for (i, n) in tree.iter().enumerate() {
            if n.children.is_some() {
                inner[i] = n_inner;
                n_inner += 1;
            } else {
                leaves[i] = n_leaves;
                n_leaves += 1;
            }
        }
        let id = |c: usize| if tree[c].children.is_some() { inner[c] as i64 } else { !(leaves[c] as i64) };
        let splits: Vec<&Node> = tree.iter().filter(|n| n.children.is_some()).collect();
        let (mut bounds, mut words, mut thresholds, mut decisions) = (vec![0usize], vec![], vec![], vec![]);
        for n in &splits {
            match &n.left_set {
                Some(set) => {
                    thresholds.push((bounds.len() - 1) as f64);
                    let mut w = vec![0u32; 1];
                    for &c in set.iter() {
                        w[c as usize / 32] |= 1 << (c % 32);
                    }
                    words.extend(w);
                    bounds.push(words.len());
                    decisions.push(1);
                }
                None => {
                    thresholds.push(n.threshold as f64);
                    decisions.push((n.default_left as u8) << 1 | 2 << 2);
                }
            }
        }
        let leaf_nodes = tree.iter().filter(|n| n.children.is_none());
        text += &format!("Tree={t}\nnum_leaves={n_leaves}\nnum_cat={}\n", bounds.len() - 1);
        if n_inner > 0 {
            text += &format!(
                "split_feature={}\nsplit_gain={}\nthreshold={}\ndecision_type={}\nleft_child={}\nright_child={}\n",
                join(splits.iter().map(|n| n.feature), " "),
                join(splits.iter().map(|_| 1), " "),
                join(&thresholds, " "),
                join(&decisions, " "),
                join(splits.iter().map(|n| id(n.children.unwrap().0)), " "),
                join(splits.iter().map(|n| id(n.children.unwrap().1)), " "),
            );
            text += &format!("internal_count={}\n", join(splits.iter().map(|n| n.cover), " "));
        }
        if bounds.len() > 1 {
            text += &format!("cat_boundaries={}\ncat_threshold={}\n", join(&bounds, " "), join(&words, " "));
        }
        text += &format!(
            "leaf_value={}\nleaf_count={}\nis_linear=0\nshrinkage=1\n\n\n",
            join(leaf_nodes.clone().map(|n| n.value), " "),
            join(leaf_nodes.map(|n| n.cover), " ")
        );
    }
    text + "end of trees\n"
}

/// Rows on a grid of quarters (categorical features: codes 0..9, sometimes -1), NaN now and then.
fn rows(rng: &mut Rng, categorical: &[bool], n: usize) -> Vec<Vec<f32>> {
    (0..n)
        .map(|_| {
            categorical
                .iter()
                .map(|&c| match (rng.below(7), c) {
                    (0, _) => f32::NAN,
                    (_, true) => rng.below(11) as f32 - 1.0,
                    (_, false) => (rng.below(25) as f32 - 12.0) * 0.25,
                })
                .collect()
        })
        .collect()
}

fn frame(rows: &[Vec<f32>], n_features: usize) -> FeatureFrame {
    let columns = (0..n_features)
        .map(|j| {
            let values: ArrayRef = Arc::new(Float32Array::from(rows.iter().map(|r| r[j]).collect::<Vec<_>>()));
            FeatureColumn::new(format!("f{j}"), vec![values]).unwrap()
        })
        .collect();
    FeatureFrame::new(columns).unwrap()
}

fn floats(p: Predictions) -> (Vec<f32>, usize) {
    match p {
        Predictions::Float { values, width } => (values, width),
        Predictions::Index { .. } => panic!("float predictions expected"),
    }
}

/// Leaf ids, however the predictor returns them.
fn leaf_ids(p: Predictions) -> Vec<u32> {
    match p {
        Predictions::Index { values, .. } => values,
        Predictions::Float { values, .. } => values.iter().map(|&v| v as u32).collect(),
    }
}

fn close(got: f32, want: f64, scale: f64) -> bool {
    (got as f64 - want).abs() <= 1e-5 * scale.max(1.0)
}

/// Checks `model` against the oracle on `rows`: margins, leaves (as nodes of the generated
/// trees when `ids_kept`), SHAP values and their sum, interaction values' sums; on the CPU
/// and, where a GPU is usable, on the GPU (the same margins and leaves; SHAP values within
/// float rounding, or an error that says why they cannot be laid out).
fn check(model: &Model, f: &Forest, base: f32, rows: &[Vec<f32>], ids_kept: bool, what: &str) {
    let data = frame(rows, f.n_features());
    let margin_of = |r: &[f32]| base as f64 + f.trees.iter().map(|t| t[leaf_of(t, r)].value as f64).sum::<f64>();
    let scale: f64 = f.trees.iter().map(|t| t.iter().map(|n| n.value.abs() as f64).fold(0.0, f64::max)).sum();
    let (margins, _) = floats(model.predict(&data, PredictOutput::Margin).unwrap());
    for (r, (&got, row)) in margins.iter().zip(rows).enumerate() {
        assert!(close(got, margin_of(row), scale), "{what}: row {r} margin {got}, oracle {}", margin_of(row));
    }
    let leaves = leaf_ids(model.predict(&data, PredictOutput::Leaf).unwrap());
    if ids_kept {
        for (r, row) in rows.iter().enumerate() {
            for (t, tree) in f.trees.iter().enumerate() {
                let want = leaf_of(tree, row) as u32;
                assert_eq!(leaves[r * f.trees.len() + t], want, "{what}: row {r} tree {t} leaf");
            }
        }
    }
    let (contrib, width) = floats(model.predict(&data, PredictOutput::Contrib).unwrap());
    let nf = f.n_features();
    assert_eq!(width, nf + 1);
    for (r, row) in rows.iter().enumerate() {
        let got = &contrib[r * width..(r + 1) * width];
        let mut want = vec![0.0; nf + 1];
        want[nf] = base as f64;
        for tree in &f.trees {
            let (phi, bias) = shapley(tree, row);
            want.iter_mut().zip(phi.iter().chain([&bias])).for_each(|(w, p)| *w += p);
        }
        for j in 0..=nf {
            assert!(close(got[j], want[j], scale), "{what}: row {r} SHAP value {j}: {}, oracle {}", got[j], want[j]);
        }
        let sum: f64 = got.iter().map(|&v| v as f64).sum();
        assert!(close(sum as f32, margin_of(row), scale * 2.0), "{what}: row {r} SHAP values sum to {sum}");
    }
    let (inter, iw) = floats(model.predict(&data, PredictOutput::Interaction).unwrap());
    assert_eq!(iw, (nf + 1) * (nf + 1));
    for r in 0..rows.len() {
        // Each row of the matrix sums to that feature's SHAP value.
        for i in 0..=nf {
            let s: f64 = inter[r * iw + i * (nf + 1)..][..nf + 1].iter().map(|&v| v as f64).sum();
            assert!(close(s as f32, contrib[r * width + i] as f64, scale * 2.0), "{what}: row {r} interactions {i}");
        }
    }
    let gpu = polars_gbt::backend::cuda::availability().is_ok().then(|| {
        model.predictor(polars_gbt::backend::Backend::Cuda).unwrap_or_else(|e| panic!("{what}: GPU forest: {e}"))
    });
    if let Some(gpu) = &gpu {
        check_gpu(model, &**gpu, &data, (&margins, &leaves, &contrib), scale, what);
    }
}

/// The GPU's margins and leaves equal the CPU's; its SHAP values agree within float rounding,
/// or it says why it cannot lay them out and that the CPU can.
fn check_gpu(
    model: &Model,
    gpu: &dyn polars_gbt::backend::Predictor,
    data: &FeatureFrame,
    (margins, leaves, contrib): (&[f32], &[u32], &[f32]),
    scale: f64,
    what: &str,
) {
    let (gpu_margins, _) = floats(model.predict_with(gpu, data, PredictOutput::Margin, None).unwrap());
    assert_eq!(gpu_margins, margins, "{what}: GPU margins");
    let gpu_leaves = leaf_ids(model.predict_with(gpu, data, PredictOutput::Leaf, None).unwrap());
    assert_eq!(gpu_leaves, leaves, "{what}: GPU leaves");
    match model.predict_with(gpu, data, PredictOutput::Contrib, None) {
        Ok(p) => {
            let (gpu_contrib, _) = floats(p);
            for (i, (&g, &c)) in gpu_contrib.iter().zip(contrib).enumerate() {
                assert!(close(g, c as f64, scale), "{what}: GPU SHAP value {i}: {g}, CPU {c}");
            }
        }
        // Trees too deep for the GPU's path layout are the model's error; paths of more
        // distinct features than a warp holds, the output's. Either says where to score.
        Err(e) => {
            let message = e.to_string();
            assert!(message.contains("device=\"cpu\""), "{what}: GPU SHAP error names no way out: {message}");
            match e {
                polars_gbt::Error::Model(m) => assert!(m.contains(" deep: "), "{what}: {m}"),
                polars_gbt::Error::Param { name, reason } => {
                    assert!(name == "output" && reason.contains("distinct features"), "{what}: {reason}")
                }
                e => panic!("{what}: GPU SHAP failed with {e}"),
            }
        }
    }
}

/// Every format's model of `f`, with whether its leaf ids are the generated node ids and its
/// base margin.
fn models(f: &Forest) -> Vec<(&'static str, Model, bool, f32)> {
    let base = 0.5;
    let json = xgboost_json(f, base);
    let xgb = Model::from_xgboost(json.as_bytes()).unwrap_or_else(|e| panic!("XGBoost JSON: {e}"));
    let mut ubj = Vec::new();
    ubjson(&serde_json::from_str(&json).unwrap(), &mut ubj);
    let ubj = Model::from_xgboost(&ubj).unwrap_or_else(|e| panic!("XGBoost UBJSON: {e}"));
    let lgb = Model::from_lightgbm(&lightgbm_text(f)).unwrap_or_else(|e| panic!("LightGBM: {e}"));
    let ours = Model::from_bytes(&xgb.to_bytes()).unwrap_or_else(|e| panic!("our binary form: {e}"));
    let ours_json = Model::from_json(&xgb.to_json()).unwrap_or_else(|e| panic!("our JSON form: {e}"));
    let exported = Model::from_xgboost(xgb.to_xgboost_json().as_bytes()).unwrap_or_else(|e| panic!("re-import: {e}"));
    vec![
        ("XGBoost JSON", xgb, true, base),
        ("XGBoost UBJSON", ubj, true, base),
        ("LightGBM text", lgb, false, 0.0),
        ("our binary form", ours, true, base),
        ("our JSON form", ours_json, true, base),
        // The export renumbers trees with categorical splits (XGBoost's child order).
        ("our XGBoost export, re-imported", exported, false, base),
    ]
}

/// The issue's table: chains of each depth load, predict and explain right, in every format.
fn chain_case(depth: usize, n_rows: usize) {
    let f = chain(depth);
    let mut rng = Rng::new(depth as u64, 7);
    let mut value = || (2 * rng.below(GRID as usize) + 1) as f32 / (2.0 * GRID) as f32;
    let mut rows: Vec<Vec<f32>> = (0..n_rows).map(|_| vec![value(), value()]).collect();
    // Missing values follow the chain to its deepest leaf.
    rows.push(vec![f32::NAN, f32::NAN]);
    rows.push(vec![0.0, f32::NAN]);
    for (what, model, ids_kept, base) in models(&f) {
        check(&model, &f, base, &rows, ids_kept, &format!("chain of depth {depth}, {what}"));
        let table = model.trees_table();
        assert_eq!(table.node.len(), 2 * depth + 1, "{what}: trees_table rows");
        let sliced = model.slice(0, 1, 1).unwrap();
        assert_eq!(sliced.to_bytes(), model.to_bytes(), "{what}: a slice of the whole model");
    }
}

#[test]
fn chains_of_1000_and_5000_splits() {
    chain_case(1_000, 24);
    chain_case(5_000, 24);
}

#[test]
fn chains_of_20000_and_50000_splits() {
    chain_case(20_000, 12);
    chain_case(50_000, 12);
}

#[test]
fn a_chain_of_100000_splits() {
    chain_case(100_000, 8);
}

#[test]
fn a_chain_of_a_million_splits() {
    chain_case(1_000_000, 4);
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(48),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// Random forests of any shape, from bushy to chains thousands deep, over numeric and
    /// categorical features, through every format.
    #[test]
    fn trees_of_any_shape_load_predict_and_explain_in_every_format(
        seed in any::<u64>(),
        n_features in 1usize..5,
        n_trees in 1usize..4,
        splits in prop_oneof![0usize..8, 8usize..200, 200usize..3000],
        chain in prop_oneof![Just(0.0f64), 0.0f64..1.0, Just(0.97), Just(1.0)],
    ) {
        let mut rng = Rng::new(seed, 1);
        let categorical: Vec<bool> = (0..n_features).map(|_| rng.below(3) == 0).collect();
        let trees = (0..n_trees).map(|_| random_tree(&mut rng, &categorical, splits, chain)).collect();
        let f = Forest { categorical, trees };
        let rows = rows(&mut rng, &f.categorical, 16);
        for (what, model, ids_kept, base) in models(&f) {
            check(&model, &f, base, &rows, ids_kept, what);
        }
    }
}
