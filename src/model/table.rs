//! Every node of every tree as one table (XGBoost's `trees_to_dataframe` layout), built here
//! so that nothing outside the crate decodes the tree storage (category bitsets, the
//! `NO_CHILD` marker). The Python `Model.trees_to_dataframe` turns it into a Polars frame.

use super::Model;

/// The node table, one entry per node in every column, trees in model order and nodes by id.
/// Floats are the stored `f32` values as the model's JSON writes them (shortest decimal form,
/// null when not finite), read as `f64`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TreeTable {
    pub tree: Vec<i64>,
    pub node: Vec<i64>,
    /// The split feature's name; None for leaves.
    pub feature: Vec<Option<String>>,
    /// Numeric splits' threshold (`x < split` goes to `yes`); None for leaves and categorical splits.
    pub split: Vec<Option<f64>>,
    /// Categorical splits: the categories going to `yes` (names, or codes when the model has
    /// none), in code order; None otherwise.
    pub categories: Vec<Option<Vec<String>>>,
    pub yes: Vec<Option<i64>>,
    pub no: Vec<Option<i64>>,
    /// The child that takes missing values.
    pub missing: Vec<Option<i64>>,
    pub gain: Vec<Option<f64>>,
    pub cover: Vec<Option<f64>>,
    /// Leaf output (learning rate applied); for inner nodes, the value the node would have as a leaf.
    pub value: Vec<Option<f64>>,
}

impl TreeTable {
    /// Column names, in order.
    pub const COLUMNS: [&'static str; 11] =
        ["tree", "node", "feature", "split", "categories", "yes", "no", "missing", "gain", "cover", "value"];
}

/// `x` as its shortest decimal form (as JSON holds it) read back as `f64`: 0.1f32 becomes 0.1.
fn decimal(x: f32) -> Option<f64> {
    x.is_finite().then(|| x.to_string().parse().expect("a finite float's decimal form parses"))
}

impl Model {
    /// Every node of every tree, one row each.
    pub fn trees_table(&self) -> TreeTable {
        let mut t = TreeTable::default();
        for (i, tree) in self.trees.iter().enumerate() {
            for n in 0..tree.n_nodes() {
                let k = n as u32;
                t.tree.push(i as i64);
                t.node.push(n as i64);
                t.gain.push(decimal(tree.gain[n]));
                t.cover.push(decimal(tree.cover[n]));
                t.value.push(decimal(tree.value[n]));
                if tree.is_leaf(k) {
                    t.feature.push(None);
                    t.split.push(None);
                    t.categories.push(None);
                    t.yes.push(None);
                    t.no.push(None);
                    t.missing.push(None);
                    continue;
                }
                let info = &self.features[tree.feature[n] as usize];
                t.feature.push(Some(info.name.clone()));
                if tree.is_categorical(k) {
                    let start = tree.category_start[n] as usize;
                    let words = &tree.category_words[start..start + tree.category_len[n] as usize];
                    let codes = (0..32 * words.len()).filter(|&c| words[c / 32] >> (c % 32) & 1 != 0);
                    let name = |c: usize| match &info.categories {
                        Some(names) if c < names.len() => names[c].clone(),
                        _ => c.to_string(),
                    };
                    t.categories.push(Some(codes.map(name).collect()));
                    t.split.push(None);
                } else {
                    t.categories.push(None);
                    t.split.push(decimal(tree.threshold[n]));
                }
                let (yes, no) = (tree.left[n] as i64, tree.right[n] as i64);
                t.yes.push(Some(yes));
                t.no.push(Some(no));
                t.missing.push(Some(if tree.default_left[n] { yes } else { no }));
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
        assert_eq!(t.node, [0, 1, 2, 3, 4, 0]);
        assert_eq!(t.feature, [s("x"), s("colour"), None, None, None, None]);
        // 0.1f32 as 0.1, not 0.10000000149011612.
        assert_eq!(t.split, [Some(0.1), None, None, None, None, None]);
        assert_eq!(t.categories, [None, Some(vec!["blue".to_string(), "red".to_string()]), None, None, None, None]);
        assert_eq!(t.yes, [Some(1), Some(3), None, None, None, None]);
        assert_eq!(t.no, [Some(2), Some(4), None, None, None, None]);
        assert_eq!(t.missing, [Some(2), Some(3), None, None, None, None]);
        assert_eq!(t.gain, [Some(2.5), Some(1.0), Some(0.0), Some(0.0), Some(0.0), Some(0.0)]);
        assert_eq!(t.cover, [10.0, 6.0, 4.0, 2.0, 4.0, 10.0].map(Some));
        assert_eq!(t.value, [0.0, 0.25, -0.5, 0.75, 0.125, 0.3].map(Some));
    }

    #[test]
    fn categories_without_names_are_codes() {
        let mut m = model();
        m.features[1].categories = None;
        assert_eq!(m.trees_table().categories[1], Some(vec!["0".to_string(), "2".to_string()]));
    }
}
