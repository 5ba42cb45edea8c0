//! What both importers read of a foreign model ([`Foreign`]: its trees as [`ForeignNode`]s in
//! the foreign numbering, its features, its configuration), and [`assemble`], which turns it
//! into our [`Model`]: it renumbers nodes, converts categorical sets to our convention (the
//! set goes left; codes index the sorted category names), derives cut points from the
//! thresholds so the model has bins like one we trained, and validates the result exactly as
//! a loaded model file is validated. The foreign files are untrusted input: every index is
//! checked before use and no claimed count is allocated before it is checked against the
//! input's size.

use std::collections::{BTreeMap, VecDeque};

use crate::config::TrainConfig;
use crate::data::column::UNSEEN_CATEGORY;
use crate::data::FeatureCuts;
use crate::error::{Error, Result};
use crate::model::{FeatureInfo, Imported, Model};
use crate::tree::{Tree, NO_CHILD};

/// A split or leaf of a foreign tree, children in the foreign numbering.
#[derive(Clone, Debug, Default)]
pub(crate) struct ForeignNode {
    /// Children, `None` for a leaf.
    pub children: Option<(usize, usize)>,
    pub feature: usize,
    /// Numeric splits send `x < threshold` left.
    pub threshold: f32,
    pub default_left: bool,
    /// Categorical splits: the category codes that go left.
    pub left_categories: Option<Vec<u32>>,
    pub value: f32,
    pub gain: f32,
    pub cover: f32,
}

/// A foreign feature: its name and, for categorical ones, the category names when the file
/// has them (codes index this list). Categorical features without names take integer codes.
#[derive(Clone, Debug)]
pub(crate) struct ForeignFeature {
    pub name: String,
    pub categorical: bool,
    pub categories: Option<Vec<String>>,
}

/// Everything an importer read.
pub(crate) struct Foreign {
    pub config: TrainConfig,
    pub base_margin: Vec<f32>,
    pub features: Vec<ForeignFeature>,
    /// Round-major: tree `t` adds to output `t % n_outputs`.
    pub trees: Vec<Vec<ForeignNode>>,
    /// Where the model came from, for messages.
    pub source: &'static str,
    /// The training parameters the file states, under our names (the rest are unknown).
    pub known: serde_json::Map<String, serde_json::Value>,
    /// Input size, which bounds what the model may allocate.
    pub input_bytes: usize,
}

/// Category codes at or above this cannot be stored: they would reach the code that unseen
/// categories read as.
const MAX_CATEGORY_CODE: u32 = UNSEEN_CATEGORY as u32 - 1;

/// Per feature with named categories, old code -> new code (the index of its sorted name).
type Recode = Vec<Option<Vec<u32>>>;
/// Per feature with named categories, the names sorted.
type CategoryNames = Vec<Option<Vec<String>>>;

/// What the trees' splits use of each feature, from which its bins are derived.
struct SplitsSeen {
    /// Each feature's numeric thresholds.
    thresholds: Vec<Vec<f32>>,
    /// Each feature's largest category code.
    max_code: Vec<u32>,
}

/// Builds and validates our model from what an importer read.
pub(crate) fn assemble(f: Foreign) -> Result<Model> {
    let src = f.source;
    let n_outputs = f.config.num_outputs();
    if f.trees.is_empty() || !f.trees.len().is_multiple_of(n_outputs) {
        return Err(Error::model(format!(
            "{src} model has {} trees, not whole rounds of {n_outputs} outputs",
            f.trees.len()
        )));
    }
    let (recode, categories) = sorted_categories(src, &f.features)?;
    let (mut trees, seen) = build_trees(&f, &recode)?;
    let features = feature_infos(src, &f.features, categories, &seen);
    set_split_bins(&mut trees, &features);
    let model = Model {
        config: f.config,
        n_outputs,
        base_margin: f.base_margin,
        features,
        trees,
        best_iteration: None,
        evals_result: Vec::new(),
        imported: Some(Imported { source: src.to_string(), params: serde_json::Value::Object(f.known).to_string() }),
    };
    model.validate().map_err(|e| within(e, &format!("{src} model")))?;
    Ok(model)
}

/// Named categories are sorted (our codes index the sorted names): per feature, the map
/// old code -> new code and the sorted names; `None` for features without names.
fn sorted_categories(src: &str, features: &[ForeignFeature]) -> Result<(Recode, CategoryNames)> {
    let n_features = features.len();
    let mut recode: Recode = Vec::with_capacity(n_features);
    let mut categories: CategoryNames = Vec::with_capacity(n_features);
    for feat in features {
        match (&feat.categories, feat.categorical) {
            (Some(names), true) => {
                let mut order: Vec<usize> = (0..names.len()).collect();
                order.sort_by(|&a, &b| names[a].cmp(&names[b]));
                if order.windows(2).any(|w| names[w[0]] == names[w[1]]) {
                    return Err(Error::model(format!("{src} feature `{}` lists a category twice", feat.name)));
                }
                let mut map = vec![0u32; names.len()];
                for (new, &old) in order.iter().enumerate() {
                    map[old] = new as u32;
                }
                categories.push(Some(order.iter().map(|&i| names[i].clone()).collect()));
                recode.push(Some(map));
            }
            _ => {
                categories.push(None);
                recode.push(None);
            }
        }
    }
    Ok((recode, categories))
}

/// Every tree in our layout, and what the features' bins are derived from: each feature's
/// numeric thresholds and its largest category code used.
fn build_trees(f: &Foreign, recode: &[Option<Vec<u32>>]) -> Result<(Vec<Tree>, SplitsSeen)> {
    let src = f.source;
    let n_features = f.features.len();
    // Category words are bounded by the input's size, so small files cannot claim huge sets.
    let mut words_budget = f.input_bytes / 4 + (1 << 16);
    let mut thresholds: Vec<Vec<f32>> = vec![Vec::new(); n_features];
    let mut max_code: Vec<u32> = vec![0; n_features];
    let mut trees = Vec::with_capacity(f.trees.len());
    for (t, nodes) in f.trees.iter().enumerate() {
        let tree = build_tree(nodes, n_features, &f.features, recode, &mut words_budget)
            .map_err(|e| within(e, &format!("{src} model: tree {t}")))?;
        for n in 0..tree.n_nodes() {
            if tree.left[n] == NO_CHILD {
                continue;
            }
            let feat = tree.feature[n] as usize;
            if tree.category_len[n] > 0 {
                let s = tree.category_start[n] as usize;
                let words = &tree.category_words[s..s + tree.category_len[n] as usize];
                if let Some((w, word)) = words.iter().enumerate().rev().find(|(_, &x)| x != 0) {
                    max_code[feat] = max_code[feat].max(w as u32 * 32 + 31 - word.leading_zeros());
                }
            } else {
                thresholds[feat].push(tree.threshold[n]);
            }
        }
        trees.push(tree);
    }
    Ok((trees, SplitsSeen { thresholds, max_code }))
}

/// Our features: cut points for each numeric feature are its distinct finite thresholds, so
/// `x < threshold` is `bin <= split_bin` on these bins as for a model we trained; a
/// categorical feature has its names' count, or its largest code used plus one.
fn feature_infos(
    src: &str,
    foreign: &[ForeignFeature],
    mut categories: CategoryNames,
    seen: &SplitsSeen,
) -> Vec<FeatureInfo> {
    let mut features = Vec::with_capacity(foreign.len());
    for (i, feat) in foreign.iter().enumerate() {
        let cuts = if feat.categorical {
            let n = match &categories[i] {
                Some(names) => names.len() as u32,
                None => seen.max_code[i] + 1,
            };
            FeatureCuts::Categorical { n_categories: n }
        } else {
            let mut c: Vec<f32> = seen.thresholds[i].iter().copied().filter(|x| x.is_finite()).collect();
            c.sort_by(f32::total_cmp);
            c.dedup();
            FeatureCuts::Numeric { cuts: c }
        };
        features.push(FeatureInfo {
            name: feat.name.clone(),
            dtype: if feat.categorical { format!("{src} categorical") } else { format!("{src} numeric") },
            cuts,
            categories: categories[i].take(),
        });
    }
    features
}

/// Each numeric split's bin on its feature's cuts, which the cuts had to exist for.
fn set_split_bins(trees: &mut [Tree], features: &[FeatureInfo]) {
    for tree in trees {
        for n in 0..tree.n_nodes() {
            if tree.left[n] == NO_CHILD || tree.category_len[n] > 0 {
                continue;
            }
            if let FeatureCuts::Numeric { cuts } = &features[tree.feature[n] as usize].cuts {
                // Bins below the threshold's cut go left; a threshold above every cut sends
                // every bin left.
                tree.split_bin[n] = cuts.partition_point(|&c| c < tree.threshold[n]) as u32;
            }
        }
    }
}

/// One foreign tree in our layout: nodes numbered breadth-first from the root (each node
/// once, children after parents); categorical sets recoded and stored as bit words.
fn build_tree(
    nodes: &[ForeignNode],
    n_features: usize,
    features: &[ForeignFeature],
    recode: &[Option<Vec<u32>>],
    words_budget: &mut usize,
) -> Result<Tree> {
    let (id, order) = numbering(nodes)?;
    let mut t = Tree::default();
    for &n in &order {
        let node = &nodes[n];
        if !node.value.is_finite() {
            return Err(Error::model(format!("node {n} has a non-finite value")));
        }
        let (mut left, mut right) = (NO_CHILD, NO_CHILD);
        let (mut start, mut len) = (0u32, 0u32);
        if let Some((l, r)) = node.children {
            (left, right) = (id[l], id[r]);
            if node.feature >= n_features {
                return Err(Error::model(format!("node {n} splits on feature {} of {n_features}", node.feature)));
            }
            match (&node.left_categories, features[node.feature].categorical) {
                (Some(codes), true) => {
                    (start, len) = push_category_set(&mut t, n, codes, recode[node.feature].as_deref(), words_budget)?;
                }
                (None, false) => {}
                (Some(_), false) => {
                    return Err(Error::model(format!(
                        "node {n} is a categorical split on numeric feature {}",
                        node.feature
                    )))
                }
                (None, true) => {
                    return Err(Error::model(format!(
                        "node {n} is a numeric split on categorical feature {}",
                        node.feature
                    )))
                }
            }
        }
        t.left.push(left);
        t.right.push(right);
        t.feature.push(if node.children.is_some() { node.feature as u32 } else { 0 });
        t.threshold.push(if node.children.is_some() && len == 0 { finite_threshold(node.threshold) } else { 0.0 });
        t.split_bin.push(0);
        t.default_left.push(node.children.is_some() && node.default_left);
        t.category_start.push(start);
        t.category_len.push(len);
        t.value.push(node.value);
        t.gain.push(if node.gain.is_finite() { node.gain } else { 0.0 });
        t.cover.push(if node.cover.is_finite() { node.cover } else { 0.0 });
    }
    Ok(t)
}

/// The order our nodes take (foreign ids, breadth-first from the root) and each foreign
/// node's new id; an error unless the nodes form one tree from node 0. The foreign ids are
/// kept when they already number a tree with children after parents.
fn numbering(nodes: &[ForeignNode]) -> Result<(Vec<u32>, Vec<usize>)> {
    if nodes.is_empty() {
        return Err(Error::model("tree has no nodes"));
    }
    let mut id = vec![u32::MAX; nodes.len()];
    let mut order = Vec::with_capacity(nodes.len());
    let mut queue = VecDeque::from([0usize]);
    id[0] = 0;
    while let Some(n) = queue.pop_front() {
        order.push(n);
        if let Some((l, r)) = nodes[n].children {
            for c in [l, r] {
                if c >= nodes.len() {
                    return Err(Error::model(format!("node {n} has child {c} outside the tree")));
                }
                if id[c] != u32::MAX {
                    return Err(Error::model(format!("node {c} is reached twice: the nodes are not a tree")));
                }
                id[c] = (order.len() + queue.len()) as u32;
                queue.push_back(c);
            }
        }
    }
    // Keep the foreign ids when they already number a tree with children after parents (as
    // XGBoost's and LightGBM's do), so leaf indices match theirs.
    let forward = |n: usize| nodes[n].children.is_none_or(|(l, r)| l > n && r > n);
    if order.len() == nodes.len() && (0..nodes.len()).all(forward) {
        order = (0..nodes.len()).collect();
        id = (0..nodes.len() as u32).collect();
    }
    Ok((id, order))
}

/// Appends foreign node `n`'s left categories, recoded by `map` (named categories), to `t`'s
/// category words as a bitset, and returns where it starts and its length in words. The
/// words come out of `words_budget`, so a small file cannot claim huge sets.
fn push_category_set(
    t: &mut Tree,
    n: usize,
    codes: &[u32],
    map: Option<&[u32]>,
    words_budget: &mut usize,
) -> Result<(u32, u32)> {
    let mut mapped = Vec::with_capacity(codes.len());
    for &c in codes {
        match map {
            // Codes without a name cannot be reached by any input.
            Some(m) => mapped.extend(m.get(c as usize).copied()),
            None if c <= MAX_CATEGORY_CODE => mapped.push(c),
            None => return Err(Error::model(format!("node {n} has category code {c}, too large"))),
        }
    }
    let words = mapped.iter().max().map_or(0, |&m| m as usize / 32 + 1);
    if words > *words_budget {
        return Err(Error::model("category sets are larger than the file can hold"));
    }
    *words_budget -= words;
    let start = t.category_words.len() as u32;
    let mut len = words as u32;
    t.category_words.resize(t.category_words.len() + words, 0);
    for c in mapped {
        t.category_words[start as usize + c as usize / 32] |= 1 << (c % 32);
    }
    if len == 0 {
        // An empty set sends every category right: one zero word says so.
        t.category_words.push(0);
        len = 1;
    }
    Ok((start, len))
}

/// A model error placed: "`place`: reason", keeping one "XGBoost model: " style prefix.
pub(crate) fn within(e: Error, place: &str) -> Error {
    match e {
        Error::Model(m) => {
            let source = place.split(':').next().unwrap_or("");
            let m = m.strip_prefix(source).and_then(|r| r.strip_prefix(": ")).unwrap_or(&m);
            Error::Model(format!("{place}: {m}"))
        }
        other => other,
    }
}

/// A threshold that stored models can hold (finite), with the same effect on every input:
/// inputs are read clamped to ±`FINITE_LIMIT` (below `f32::MAX`), so `x < +inf` and
/// `x < f32::MAX` agree on them, as do `x < -inf`, `x < NaN` and `x < -f32::MAX` (all false).
fn finite_threshold(t: f32) -> f32 {
    if t.is_nan() {
        -f32::MAX
    } else {
        t.clamp(-f32::MAX, f32::MAX)
    }
}

/// A category name from a model file: strings as they are, integral numbers without a
/// decimal point (as pandas and Polars print integer categories).
pub(crate) fn category_text(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => s.clone(),
        x => match x.as_f64() {
            Some(f) if f.fract() == 0.0 && f.abs() < 1e15 => format!("{}", f as i64),
            _ => x.to_string(),
        },
    }
}

/// Counts of each value in `items`, for checking that every output has as many trees.
pub(crate) fn tally(items: impl Iterator<Item = usize>) -> BTreeMap<usize, usize> {
    let mut m = BTreeMap::new();
    for i in items {
        *m.entry(i).or_insert(0) += 1;
    }
    m
}
