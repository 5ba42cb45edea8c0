//! Every node of every tree as one table, in the layout of XGBoost's `trees_to_dataframe`
//! (its columns, names and meanings, as of XGBoost 3.4, which added `Target`), built here so that nothing outside the crate decodes
//! the tree storage (category bitsets, the `NO_CHILD` marker). The Python
//! `Model.trees_to_dataframe` turns it into a Polars frame.

use super::Model;

/// The node table, one entry per node in every column, trees in model order and nodes by id.
/// Floats are the stored `f32` values as the model's JSON writes them (shortest decimal form,
/// null when not finite), read as `f64`. As in XGBoost, a node's `ID` is `"{tree}-{node}"`
/// and `Yes` / `No` / `Missing` name children by their `ID`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TreeTable {
    pub tree: Vec<i64>,
    /// The output the tree adds to (a class, quantile or target; 0 for one-output models),
    /// XGBoost's `tree_info`: XGBoost 3.4's `Target` column. A vector-leaf tree (XGBoost 3.4's
    /// layout): None for its splits, and each leaf once per output, with the output here.
    pub target: Vec<Option<i64>>,
    pub node: Vec<i64>,
    pub id: Vec<String>,
    /// The split feature's name; `"Leaf"` for leaves.
    pub feature: Vec<String>,
    /// Numeric splits' threshold (`x < Split` goes to `Yes`); None for leaves and categorical splits.
    pub split: Vec<Option<f64>>,
    /// The child taken when the split's condition holds (`x < Split`, or the category in `Category`).
    pub yes: Vec<Option<String>>,
    pub no: Vec<Option<String>>,
    /// The child that takes missing values.
    pub missing: Vec<Option<String>>,
    /// Inner nodes: the split's loss reduction; leaves: the leaf's output (learning rate
    /// applied), as XGBoost puts it.
    pub gain: Vec<Option<f64>>,
    pub cover: Vec<Option<f64>>,
    /// Categorical splits: the categories going to `Yes` (names, or codes when the model has
    /// none), in code order; None otherwise.
    pub category: Vec<Option<Vec<String>>>,
}

impl TreeTable {
    /// Column names, in order: XGBoost 3.4's (XGBoost 3.2's lack `Target`).
    pub const COLUMNS: [&'static str; 12] =
        ["Tree", "Target", "Node", "ID", "Feature", "Split", "Yes", "No", "Missing", "Gain", "Cover", "Category"];
}

/// `x` as its shortest decimal form (as JSON holds it) read back as `f64`: 0.1f32 becomes 0.1.
fn decimal(x: f32) -> Option<f64> {
    x.is_finite().then(|| x.to_string().parse().expect("a finite float's decimal form parses"))
}

impl Model {
    /// Every node of every tree, one row each. A vector-leaf round is one tree, as XGBoost 3.4
    /// lists it: its splits once, without a target, and each leaf once per output.
    pub fn trees_table(&self) -> TreeTable {
        let mut t = TreeTable::default();
        let per_round = if self.is_vector_leaf() { self.n_outputs } else { 1 };
        for (i, round) in self.trees.chunks(per_round).enumerate() {
            let tree = &round[0];
            let id = |n: u32| format!("{i}-{n}");
            let target = |output: usize| Some(if per_round > 1 { output } else { i % self.n_outputs } as i64);
            for n in 0..tree.n_nodes() {
                let k = n as u32;
                let row = |t: &mut TreeTable, target: Option<i64>| {
                    t.tree.push(i as i64);
                    t.target.push(target);
                    t.node.push(n as i64);
                    t.id.push(id(k));
                    t.cover.push(decimal(tree.cover[n]));
                };
                if tree.is_leaf(k) {
                    for (output, out) in round.iter().enumerate() {
                        row(&mut t, target(output));
                        t.feature.push("Leaf".into());
                        t.split.push(None);
                        t.category.push(None);
                        t.yes.push(None);
                        t.no.push(None);
                        t.missing.push(None);
                        t.gain.push(decimal(out.value[n]));
                    }
                    continue;
                }
                row(&mut t, if per_round > 1 { None } else { target(0) });
                t.gain.push(decimal(tree.gain[n]));
                let info = &self.features[tree.feature[n] as usize];
                t.feature.push(info.name.clone());
                if tree.is_categorical(k) {
                    let start = tree.category_start[n] as usize;
                    let words = &tree.category_words[start..start + tree.category_len[n] as usize];
                    let codes = (0..32 * words.len()).filter(|&c| words[c / 32] >> (c % 32) & 1 != 0);
                    let name = |c: usize| match &info.categories {
                        Some(names) if c < names.len() => names[c].clone(),
                        _ => c.to_string(),
                    };
                    t.category.push(Some(codes.map(name).collect()));
                    t.split.push(None);
                } else {
                    t.category.push(None);
                    t.split.push(decimal(tree.threshold[n]));
                }
                // Our left child is the one taken when the condition holds.
                let (yes, no) = (tree.left[n], tree.right[n]);
                t.yes.push(Some(id(yes)));
                t.no.push(Some(id(no)));
                t.missing.push(Some(id(if tree.default_left[n] { yes } else { no })));
            }
        }
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::FeatureCuts;
    use crate::model::FeatureInfo;
    use crate::tree::model::SplitSpec;
    use crate::tree::Tree;

    /// A model of two features (`x` numeric, `colour` categorical) and two trees.
    fn model() -> Model {
        // Tree 0: x < 0.1 (missing right), then colour in {blue, red} (missing left) on the left.
        let mut a = Tree::leaf(0.0, 10.0);
        let x = SplitSpec {
            feature: 0,
            threshold: 0.1,
            split_bin: 0,
            default_left: false,
            left_categories: &[],
            gain: 2.5,
        };
        let (l, _) = a.split(0, &x, (0.25, 6.0), (-0.5, 4.0));
        let colour = SplitSpec {
            feature: 1,
            threshold: 0.0,
            split_bin: 0,
            default_left: true,
            left_categories: &[0, 2],
            gain: 1.0,
        };
        a.split(l, &colour, (0.75, 2.0), (0.125, 4.0));
        let b = Tree::leaf(0.3, 10.0);
        let feature =
            |name: &str, cuts, categories| FeatureInfo { name: name.into(), dtype: "x".into(), cuts, categories };
        Model {
            config: Default::default(),
            n_outputs: 1,
            base_margin: vec![0.0],
            features: vec![
                feature("x", FeatureCuts::Numeric { cuts: vec![0.1] }, None),
                feature(
                    "colour",
                    FeatureCuts::Categorical { n_categories: 3 },
                    Some(vec!["blue".into(), "green".into(), "red".into()]),
                ),
            ],
            trees: vec![a, b],
            best_iteration: None,
            evals_result: Vec::new(),
            imported: None,
        }
    }

    #[test]
    fn the_table_decodes_splits_children_and_category_sets() {
        let t = model().trees_table();
        let s = |v: &str| Some(v.to_string());
        assert_eq!(t.tree, [0, 0, 0, 0, 0, 1]);
        assert_eq!(t.target, [Some(0); 6]);
        assert_eq!(t.node, [0, 1, 2, 3, 4, 0]);
        assert_eq!(t.id, ["0-0", "0-1", "0-2", "0-3", "0-4", "1-0"]);
        assert_eq!(t.feature, ["x", "colour", "Leaf", "Leaf", "Leaf", "Leaf"]);
        // 0.1f32 as 0.1, not 0.10000000149011612.
        assert_eq!(t.split, [Some(0.1), None, None, None, None, None]);
        assert_eq!(t.category, [None, Some(vec!["blue".to_string(), "red".to_string()]), None, None, None, None]);
        assert_eq!(t.yes, [s("0-1"), s("0-3"), None, None, None, None]);
        assert_eq!(t.no, [s("0-2"), s("0-4"), None, None, None, None]);
        assert_eq!(t.missing, [s("0-2"), s("0-3"), None, None, None, None]);
        // Split gains for inner nodes, leaf values for leaves.
        assert_eq!(t.gain, [Some(2.5), Some(1.0), Some(-0.5), Some(0.75), Some(0.125), Some(0.3)]);
        assert_eq!(t.cover, [10.0, 6.0, 4.0, 2.0, 4.0, 10.0].map(Some));
    }

    #[test]
    fn target_is_the_output_each_tree_adds_to() {
        // Two outputs (classes, quantiles or targets): trees round-major, 0 then 1.
        let m = Model { n_outputs: 2, base_margin: vec![0.0, 0.0], ..model() };
        assert_eq!(m.trees_table().target, [0, 0, 0, 0, 0, 1].map(Some));
    }

    #[test]
    fn a_vector_leaf_round_is_one_tree_with_a_leaf_row_per_output() {
        let mut m = Model { n_outputs: 2, base_margin: vec![0.0, 0.0], ..model() };
        m.config.multi_strategy = crate::config::MultiStrategy::MultiOutputTree;
        let mut second = m.trees[0].clone();
        second.value.iter_mut().for_each(|v| *v *= -2.0);
        m.trees[1] = second;
        let t = m.trees_table();
        assert_eq!(t.tree, [0; 8]);
        assert_eq!(t.node, [0, 1, 2, 2, 3, 3, 4, 4]);
        assert_eq!(t.target, [None, None, Some(0), Some(1), Some(0), Some(1), Some(0), Some(1)]);
        assert_eq!(t.feature[..3], ["x".to_string(), "colour".into(), "Leaf".into()]);
        let g = [Some(2.5), Some(1.0), Some(-0.5), Some(1.0), Some(0.75), Some(-1.5), Some(0.125), Some(-0.25)];
        assert_eq!(t.gain, g);
    }

    #[test]
    fn categories_without_names_are_codes() {
        let mut m = model();
        m.features[1].categories = None;
        assert_eq!(m.trees_table().category[1], Some(vec!["0".to_string(), "2".to_string()]));
    }
}
