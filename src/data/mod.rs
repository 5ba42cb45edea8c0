//! From Arrow columns to the binned matrix the trainers read.
//!
//! * [`column`]: zero-copy views over Arrow arrays (values + validity), one per feature.
//! * [`frame`]: a set of named feature columns of equal length, and the training [`Dataset`].
//! * [`cuts`]: weighted quantile cut points per feature (stored in the model).
//! * [`binned`]: the compact bin matrix (u8, or u16 past 255 bins), row- and column-major.
//! * [`stream`]: a fit's rows read in batches, twice (cut points, then bins), never whole;
//!   an evaluation set's once, binned with the training cut points.
//! * [`row_digest`]: an order-free digest of a pass's per-row inputs, which tells that a
//!   stream's two passes read the same rows.
//! * [`targets`]: the labels, weights and query groups that losses and metrics read.

pub mod binned;
pub mod column;
pub mod cuts;
pub mod frame;
mod row_digest;
pub mod stream;
pub mod targets;

pub use binned::{BinData, BinnedMatrix};
pub use column::{ColumnKind, FeatureColumn};
pub use cuts::FeatureCuts;
pub use frame::{Dataset, FeatureFrame};
pub use stream::{
    stream_dataset, stream_dataset_into, stream_dataset_sharded, stream_dataset_with_progress, stream_eval_set,
    stream_eval_set_sharded, Batch, BatchSource, BinSink, BinnedRows, BinnedView, ElsewhereBins, Pass, PassProgress,
    Progress, RecordBatches, SinkFor, StreamParams, StreamShare,
};
pub use targets::Targets;
