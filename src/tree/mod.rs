//! Trees: the fixed-point gradient sums every backend accumulates ([`gradient`]), the split
//! math ([`split`], the only copy of the gain formula), and the stored tree ([`Tree`]).

pub mod gradient;
pub mod model;
pub mod split;

pub use gradient::{GradPair, GradSum, Quantiser};
pub use model::{category_code, Tree, NO_CHILD};
pub use split::SplitParams;
