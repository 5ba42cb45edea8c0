//! Monotone and interaction constraints: what a node may do, given the splits above it.
//!
//! **Monotone constraints** (XGBoost's method). Every node carries bounds on its leaf weight,
//! `[lower, upper]`, infinite at the root. A split's children are weighed within the parent's
//! bounds, and a split on a feature constrained increasing (decreasing) is taken only if its
//! left weight is at most (at least) its right weight. Its children then split the bounds at
//! the midpoint of their two weights: the left child's upper bound (increasing) or lower bound
//! (decreasing) becomes the midpoint, the right child's the other. So every leaf left of such
//! a split weighs no more (no less) than every leaf right of it, and predictions are monotone
//! along the feature for every row.
//!
//! **Interaction constraints** (XGBoost's semantics). Each listed set is a group of features
//! allowed to interact. A node may split on the features its path has used, and on every
//! listed set that contains all of them; the root on any feature. A root-to-leaf path's
//! features are therefore one feature, or lie within one listed set.

/// The constraints of a fit, resolved to feature indices.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Constraints {
    /// Per feature: 1 increasing, -1 decreasing, 0 free. Empty when no feature is constrained.
    pub monotone: Vec<i8>,
    /// The interaction sets, each sorted and deduplicated. Empty when there are none.
    pub interaction: Vec<Vec<u32>>,
}

impl Constraints {
    /// The monotone direction of `feature` (0 when unconstrained).
    pub fn direction(&self, feature: u32) -> i8 {
        self.monotone.get(feature as usize).copied().unwrap_or(0)
    }

    pub fn has_monotone(&self) -> bool {
        self.monotone.iter().any(|&c| c != 0)
    }

    pub fn has_interaction(&self) -> bool {
        !self.interaction.is_empty()
    }

    /// Whether a node whose path has used the features `path` (sorted) may split on `feature`.
    pub fn allows(&self, path: &[u32], feature: u32) -> bool {
        if self.interaction.is_empty() || path.is_empty() || path.binary_search(&feature).is_ok() {
            return true;
        }
        self.interaction
            .iter()
            .any(|set| set.binary_search(&feature).is_ok() && path.iter().all(|f| set.binary_search(f).is_ok()))
    }
}

/// What a node inherits from the splits above it.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeLimits {
    /// Bounds on the node's leaf weight (before the learning rate).
    pub lower: f64,
    pub upper: f64,
    /// The features split on from the root to this node, sorted (kept only under interaction
    /// constraints).
    pub path: Vec<u32>,
}

impl NodeLimits {
    pub fn root() -> Self {
        NodeLimits { lower: f64::NEG_INFINITY, upper: f64::INFINITY, path: Vec::new() }
    }

    /// Whether the bounds leave every weight free (the root, or no monotone split above).
    pub fn unbounded(&self) -> bool {
        self.lower == f64::NEG_INFINITY && self.upper == f64::INFINITY
    }

    /// `w` within the bounds.
    pub fn clamp(&self, w: f64) -> f64 {
        w.max(self.lower).min(self.upper)
    }

    /// The children's limits after a split on `feature`, whose children weigh `left` and
    /// `right` (already within this node's bounds).
    pub fn children(&self, constraints: &Constraints, feature: u32, left: f64, right: f64) -> [NodeLimits; 2] {
        let mut path = Vec::new();
        if constraints.has_interaction() {
            path = self.path.clone();
            if let Err(at) = path.binary_search(&feature) {
                path.insert(at, feature);
            }
        }
        let mut l = NodeLimits { lower: self.lower, upper: self.upper, path: path.clone() };
        let mut r = NodeLimits { lower: self.lower, upper: self.upper, path };
        let mid = (left + right) / 2.0;
        match constraints.direction(feature) {
            1 => {
                l.upper = mid;
                r.lower = mid;
            }
            -1 => {
                l.lower = mid;
                r.upper = mid;
            }
            _ => {}
        }
        [l, r]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_may_use_its_path_and_every_set_holding_all_of_it() {
        let c = Constraints { monotone: Vec::new(), interaction: vec![vec![0, 1, 2], vec![2, 3], vec![4]] };
        // The root may split on anything, a feature in no set included.
        assert!((0..6).all(|f| c.allows(&[], f)));
        // After 2: the sets {0, 1, 2} and {2, 3} both hold it.
        assert!([0, 1, 2, 3].iter().all(|&f| c.allows(&[2], f)));
        assert!(!c.allows(&[2], 4) && !c.allows(&[2], 5));
        // After 2 and 0: only {0, 1, 2} holds both.
        assert!(c.allows(&[0, 2], 1) && !c.allows(&[0, 2], 3));
        // A feature in no set may only repeat itself.
        assert!(c.allows(&[5], 5) && !c.allows(&[5], 0));
    }

    #[test]
    fn monotone_children_split_the_bounds_at_the_midpoint() {
        let c = Constraints { monotone: vec![0, 1, -1], interaction: Vec::new() };
        let root = NodeLimits::root();
        let [l, r] = root.children(&c, 1, -2.0, 4.0);
        assert_eq!((l.lower, l.upper, r.lower, r.upper), (f64::NEG_INFINITY, 1.0, 1.0, f64::INFINITY));
        let [l2, r2] = l.children(&c, 2, 0.5, -3.0);
        assert_eq!((l2.lower, l2.upper, r2.lower, r2.upper), (-1.25, 1.0, f64::NEG_INFINITY, -1.25));
        let [l3, r3] = l2.children(&c, 0, 0.0, 0.0);
        assert_eq!((l3.lower, l3.upper), (l2.lower, l2.upper));
        assert_eq!(l3, r3);
        assert!(l3.path.is_empty(), "paths are kept only under interaction constraints");
    }
}
