//! From Arrow columns to the binned matrix the trainers read.
//!
//! * [`column`]: zero-copy views over Arrow arrays (values + validity), one per feature.
//! * [`frame`]: a set of named feature columns of equal length.
//! * [`cuts`]: weighted quantile cut points per feature (stored in the model).
//! * [`binned`]: the compact bin matrix (u8, u16 past 255 bins, u32 past 65,535), row-major.
//! * [`binned_rows`]: rows already binned with their cut points (a streamed fit's), and a
//!   dataset's window on them.
//! * [`dataset`]: the training [`Dataset`]: features (or binned rows) and their targets.
//! * [`stream`]: a fit's rows read in batches, twice (cut points, then bins), never whole;
//!   an evaluation set's once, binned with the training cut points.
//! * [`targets`]: the labels, weights and query groups that losses and metrics read.

pub mod binned;
pub mod binned_rows;
pub mod column;
pub mod cuts;
pub mod dataset;
pub mod frame;
pub mod stream;
pub mod targets;

pub use binned::{BinData, BinnedMatrix};
pub use binned_rows::{BinnedRows, BinnedView, ElsewhereBins};
pub use column::{ColumnKind, FeatureColumn};
pub use cuts::FeatureCuts;
pub use dataset::Dataset;
pub use frame::FeatureFrame;
pub use stream::{
    stream_dataset, stream_dataset_into, stream_dataset_sharded, stream_dataset_with_progress, stream_eval_set,
    stream_eval_set_sharded, Batch, BatchSource, BinSink, Pass, PassProgress, Progress, RecordBatches, SinkFor,
    StreamParams, StreamShare,
};
pub use targets::Targets;
