//! The rayon CPU backend: histograms, row partitioning, tree growth and prediction.

pub mod grow;
pub mod histogram;
pub mod partition;
pub mod predict;

pub use grow::{grow_tree, GrowParams, GrownTree};
