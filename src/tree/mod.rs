//! Trees: the growth driver every backend shares ([`grow`], with what a tree grows from in
//! `context`, the backend's contract in `steps`, the node expansion in `expand` and
//! loss-guided growth in batches in `lossguide`), the host's search over open nodes
//! ([`node_search`]), the fixed-point gradient sums every backend accumulates ([`gradient`]),
//! the split math ([`split`], the only copy of the gain formula; [`split_vector`] for
//! vector leaves), and the stored tree ([`Tree`]).

pub mod constraints;
mod context;
mod expand;
pub mod gradient;
pub mod grow;
mod lossguide;
pub mod model;
pub mod node_search;
pub mod shap;
pub mod split;
pub mod split_vector;
mod steps;

pub use constraints::{Constraints, NodeLimits};
pub use gradient::{GradPair, GradSum, Quantiser, Weighting};
pub use grow::{grow_tree, GrowParams, GrowPolicy, GrowSteps};
pub use model::{category_code, Tree, NO_CHILD};
pub use split::SplitParams;
