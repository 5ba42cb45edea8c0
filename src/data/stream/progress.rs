//! How far a stream's passes have come: each pass named ([`Pass`]) and reported after every
//! batch ([`PassProgress`]) to whoever asks ([`Progress`]), and, under `POLARS_GBT_PROFILE=1`,
//! when each pass ended.

/// A pass over a stream, as progress reports name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pass<'a> {
    /// Counting the rows of a source that does not know their number.
    Count,
    /// Pass 1: the cut points' sample, the categories and the rows' digest.
    CutPoints,
    /// Pass 2: the rows binned into the training matrix, their per-row vectors beside them.
    Binning,
    /// The one pass over the evaluation set of this name: its rows binned with the training
    /// cut points.
    Eval(&'a str),
}

/// How far a pass has come: `rows` read of `total` (None when not known), and whether the
/// pass is `done`. Reported after every batch and once at the end.
#[derive(Clone, Copy, Debug)]
pub struct PassProgress<'a> {
    pub pass: Pass<'a>,
    pub rows: usize,
    pub total: Option<usize>,
    pub done: bool,
}

/// What [`stream_dataset_with_progress`](super::stream_dataset_with_progress) and
/// [`stream_eval_set`](super::stream_eval_set) tell of their passes to.
pub type Progress<'p> = dyn FnMut(&PassProgress) + 'p;

/// Under `POLARS_GBT_PROFILE=1`, the seconds since `clock` when a pass ended.
pub(super) fn profile(what: &str, clock: std::time::Instant) {
    if crate::profile::on() {
        eprintln!("polars-gbt profile: streamed {what} done at {:.3} s", clock.elapsed().as_secs_f64());
    }
}
