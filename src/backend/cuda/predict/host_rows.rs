//! Scoring rows from the host's Arrow columns: they go into pinned buffers, column-major as the
//! kernel reads them; slots (four, or two for wide rows) take turns, each on its own stream, so
//! the host fills one slot while another's rows cross the link and a third's are scored. The
//! slots' buffers (a [`Streamer`]) are pooled and shared by every model.

use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::Instant;

use cudarc::driver::{CudaEvent, CudaSlice, CudaStream, PinnedHostSlice};
use rayon::prelude::*;

use super::GpuForest;
use crate::backend::cuda::runtime::Runtime;
use crate::backend::cuda::{device_error, knob, DeviceMemory};
use crate::data::FeatureColumn;
use crate::error::Result;
use crate::prediction::{PredictOutput, Predictions};
use crate::profile::StageTimes;

/// Rows per streamed chunk, at most.
const CHUNK_ROWS: usize = 1 << 18;
/// A streamer has four slots when a slot's rows take at most this many bytes, else two.
const FOUR_SLOTS_MAX_BYTES: usize = 64 << 20;
/// The smallest chunk a request is split into (fewer rows leave the GPU mostly idle).
const MIN_CHUNK_ROWS: usize = 1 << 15;

/// One half of the double buffer: pinned host memory and device memory for a chunk.
struct Slot {
    stream: Arc<CudaStream>,
    x_host: PinnedHostSlice<f32>,
    x_dev: CudaSlice<f32>,
    base_host: PinnedHostSlice<f32>,
    base_dev: CudaSlice<f32>,
    out_dev: CudaSlice<f32>,
    out_host: PinnedHostSlice<f32>,
    scratch: CudaSlice<u8>,
    index_dev: CudaSlice<u32>,
    index_host: PinnedHostSlice<u32>,
    done: CudaEvent,
    /// The chunk in flight: (first row, rows).
    pending: Option<(usize, usize)>,
}

/// What a streamer's slots hold: per row, features, outputs, leaf or class values and bytes of
/// scratch; and rows.
type Shape = (usize, usize, usize, usize, usize);

fn holds(have: Shape, need: Shape) -> bool {
    have.0 >= need.0 && have.1 >= need.1 && have.2 >= need.2 && have.3 >= need.3 && have.4 >= need.4
}

/// One set of streaming buffers (four or two slots, each with its own stream), sized for the largest
/// request it served so far and shared by every model.
struct Streamer {
    slots: Vec<Slot>,
    /// What the slots were made for.
    shape: Shape,
}

/// Streamers at most: concurrent callers (the batches of a streaming query, on the engine's
/// threads) each take one, so one batch's host work overlaps another's copies and kernels.
/// Four left batches of Polars' default size (100,000 rows) waiting for a streamer, a third
/// slower than eager scoring on an H100; eight kept up (docs/benchmarks.md). Slots are sized
/// to the chunks of the requests they serve, so a streaming batch's streamer is small.
/// `POLARS_GBT_STREAMERS` overrides.
const MAX_STREAMERS: usize = 8;

/// The idle streamers, and how many exist.
struct StreamerPool {
    idle: Mutex<(Vec<Streamer>, usize)>,
    returned: Condvar,
}

fn pool() -> &'static StreamerPool {
    static POOL: OnceLock<StreamerPool> = OnceLock::new();
    POOL.get_or_init(|| StreamerPool { idle: Mutex::new((Vec::new(), 0)), returned: Condvar::new() })
}

/// A streamer lent to one call, handed back to the pool when dropped; `None` while the call
/// (re)builds it.
struct Lent(Option<Streamer>);

impl Drop for Lent {
    fn drop(&mut self) {
        let pool = pool();
        let mut idle = pool.idle.lock().unwrap_or_else(|p| p.into_inner());
        match self.0.take() {
            Some(s) => idle.0.push(s),
            None => idle.1 -= 1, // lost to an error: another may be made
        }
        pool.returned.notify_one();
    }
}

/// Takes an idle streamer (one already big enough when there is one), or makes room for a new
/// one, or waits for one to come back.
fn lend(need: Shape) -> Lent {
    let fits = |s: &Streamer| holds(s.shape, need);
    let pool = pool();
    let mut idle = pool.idle.lock().unwrap_or_else(|p| p.into_inner());
    loop {
        if let Some(i) = idle.0.iter().position(fits) {
            return Lent(Some(idle.0.swap_remove(i)));
        }
        if idle.1 < knob::<usize>("POLARS_GBT_STREAMERS").unwrap_or(MAX_STREAMERS).max(1) {
            idle.1 += 1;
            return Lent(None);
        }
        if let Some(s) = idle.0.pop() {
            return Lent(Some(s)); // too small: the caller rebuilds it
        }
        idle = pool.returned.wait(idle).unwrap_or_else(|p| p.into_inner());
    }
}

impl Streamer {
    fn new(rt: &Runtime, shape: Shape) -> Result<Self> {
        let ctx = rt.stream.context();
        let (nf, k, idx, scratch, rows) = shape;
        let mut memory = DeviceMemory::default();
        let mut slots = Vec::new();
        // Four slots keep the host filling one, the link copying another and the kernels
        // scoring a third (two left each stage waiting on the others: 4M x 28 rows took 22-29
        // ms with two, 15-18 with four, on an H100); wide rows' slots are large, and keep two.
        let n_slots = if rows * nf * 4 <= FOUR_SLOTS_MAX_BYTES { 4 } else { 2 };
        for _ in 0..knob::<usize>("POLARS_GBT_STREAM_SLOTS").unwrap_or(n_slots).max(1) {
            let stream = ctx.new_stream().map_err(device_error)?;
            // SAFETY: pinned buffers are only read or written after their last copy finished
            // (`done`, or PinnedHostSlice's own event).
            let pinned_f32 = |len: usize| unsafe { ctx.alloc_pinned::<f32>(len.max(1)) }.map_err(device_error);
            slots.push(Slot {
                x_host: pinned_f32(rows * nf)?,
                x_dev: memory.zeros(&stream, rows * nf)?,
                base_host: pinned_f32(rows * k)?,
                base_dev: memory.zeros(&stream, rows * k)?,
                out_dev: memory.zeros(&stream, rows * k)?,
                out_host: pinned_f32(rows * k)?,
                scratch: memory.zeros(&stream, rows * scratch)?,
                index_dev: memory.zeros(&stream, rows * idx)?,
                index_host: unsafe { ctx.alloc_pinned::<u32>((rows * idx).max(1)) }.map_err(device_error)?,
                done: ctx.new_event(None).map_err(device_error)?,
                pending: None,
                stream,
            });
        }
        Ok(Streamer { slots, shape })
    }
}

/// Scores `columns` (bound to the model's features) on the GPU.
pub(super) fn stream_rows(
    forest: &GpuForest,
    columns: &[FeatureColumn],
    n_rows: usize,
    row_base: Option<&[f32]>,
    output: PredictOutput,
) -> Result<Predictions> {
    let mut request = Request::new(forest, columns, row_base, output, n_rows);
    let (chunk_rows, most) = chunk_rows(n_rows);
    let need = (request.nf, request.k, request.per_row_index, forest.scratch_bytes(most).div_ceil(most), chunk_rows);
    let mut lent = lend_fitting(forest, need)?;
    let streamer = lent.0.as_mut().unwrap();
    let whole = request.times.start();
    for (i, start) in (0..n_rows).step_by(chunk_rows).enumerate() {
        let rows = chunk_rows.min(n_rows - start);
        let n_slots = streamer.slots.len();
        let slot = &mut streamer.slots[i % n_slots];
        request.collect(slot)?;
        request.fill(slot, start, rows)?;
        request.queue(slot, start, rows)?;
    }
    for slot in streamer.slots.iter_mut() {
        request.collect(slot)?;
    }
    request.report(whole, n_rows);
    Ok(request.into_predictions())
}

/// The rows of a request's chunks, and the most a chunk may hold. A short request (a batch of a
/// streaming query) still goes in two chunks or more, so that filling one overlaps the other's
/// copies and kernels. (`POLARS_GBT_REQUEST_CHUNKS`, `POLARS_GBT_MIN_CHUNK_ROWS` and
/// `POLARS_GBT_CHUNK_ROWS` override the two, the floor and the largest chunk, and
/// `POLARS_GBT_STREAM_SLOTS` the slots, for measuring.)
fn chunk_rows(n_rows: usize) -> (usize, usize) {
    let parts = knob::<usize>("POLARS_GBT_REQUEST_CHUNKS").unwrap_or(2).max(1);
    let most = knob::<usize>("POLARS_GBT_CHUNK_ROWS").unwrap_or(CHUNK_ROWS).max(1);
    let floor = knob::<usize>("POLARS_GBT_MIN_CHUNK_ROWS").unwrap_or(MIN_CHUNK_ROWS).clamp(1, most);
    (n_rows.div_ceil(parts).clamp(floor, most), most)
}

/// A streamer whose slots hold `need`: one lent from the pool, rebuilt (to the larger of what it
/// held and `need`) when it is too small or new.
fn lend_fitting(forest: &GpuForest, need: Shape) -> Result<Lent> {
    let mut lent = lend(need);
    let have = lent.0.as_ref().map_or((0, 0, 0, 0, 0), |s| s.shape);
    if lent.0.is_none() || !holds(have, need) {
        lent.0 = None; // free the old buffers first
        let shape =
            (need.0.max(have.0), need.1.max(have.1), need.2.max(have.2), need.3.max(have.3), need.4.max(have.4));
        lent.0 = Some(Streamer::new(&forest.rt, shape)?);
    }
    Ok(lent)
}

/// Under POLARS_GBT_PROFILE=1: filling the pinned buffers, queueing the copies and kernels,
/// and waiting for slots.
const FILL: usize = 0;
const QUEUE: usize = 1;
const WAIT: usize = 2;

/// One request's rows through the slots: what it reads back and where that goes.
struct Request<'a> {
    forest: &'a GpuForest,
    columns: &'a [FeatureColumn],
    row_base: Option<&'a [f32]>,
    output: PredictOutput,
    /// Features and outputs of the forest; its trees.
    nf: usize,
    k: usize,
    n_trees: usize,
    /// Leaf ids or classes read back per row (0: `k` margins or values instead).
    per_row_index: usize,
    leaf: bool,
    floats: Vec<f32>,
    indices: Vec<u32>,
    times: StageTimes<3>,
}

impl<'a> Request<'a> {
    fn new(
        forest: &'a GpuForest,
        columns: &'a [FeatureColumn],
        row_base: Option<&'a [f32]>,
        output: PredictOutput,
        n_rows: usize,
    ) -> Self {
        let (nf, k, n_trees) = (forest.n_features as usize, forest.n_outputs as usize, forest.n_trees as usize);
        let per_row_index = match output {
            PredictOutput::Leaf => n_trees,
            PredictOutput::Class => 1,
            PredictOutput::Value if forest.objective.predicts_classes() => 1,
            _ => 0,
        };
        Request {
            forest,
            columns,
            row_base,
            output,
            nf,
            k,
            n_trees,
            per_row_index,
            leaf: output == PredictOutput::Leaf,
            floats: if per_row_index == 0 { vec![0f32; n_rows * k] } else { Vec::new() },
            indices: vec![0u32; n_rows * per_row_index],
            times: StageTimes::default(),
        }
    }

    /// Collects a finished slot's results into the output.
    fn collect(&mut self, slot: &mut Slot) -> Result<()> {
        let Some((start, rows)) = slot.pending.take() else { return Ok(()) };
        let started = self.times.start();
        slot.done.synchronize().map_err(device_error)?;
        self.times.stop(WAIT, started);
        let (per_row_index, k) = (self.per_row_index, self.k);
        if per_row_index > 0 {
            let src = slot.index_host.as_slice().map_err(device_error)?;
            self.indices[start * per_row_index..(start + rows) * per_row_index]
                .copy_from_slice(&src[..rows * per_row_index]);
        } else {
            let src = slot.out_host.as_slice().map_err(device_error)?;
            self.floats[start * k..(start + rows) * k].copy_from_slice(&src[..rows * k]);
        }
        Ok(())
    }

    /// Fills `slot`'s pinned rows with rows `start..start + rows`, column-major: feature f's
    /// rows at f * rows.
    fn fill(&mut self, slot: &mut Slot, start: usize, rows: usize) -> Result<()> {
        let started = self.times.start();
        let x = slot.x_host.as_mut_slice().map_err(device_error)?;
        x[..rows * self.nf]
            .par_chunks_mut(rows)
            .zip(self.columns.par_iter())
            .for_each(|(dst, col)| col.read(start, dst));
        self.times.stop(FILL, started);
        Ok(())
    }

    /// Queues on `slot`'s stream the copy of its filled rows (and their base margins) to the
    /// device, their scoring, and the copy of the results back, then marks the slot pending.
    fn queue(&mut self, slot: &mut Slot, start: usize, rows: usize) -> Result<()> {
        let (forest, k, nf) = (self.forest, self.k, self.nf);
        let stream = slot.stream.clone();
        let started = self.times.start();
        // Only the chunk's rows travel: the slot may have been made for a longer request's
        // chunks. (A plain slice of pinned memory still copies asynchronously; the slot is
        // not written again before `collect` has waited for its `done` event.)
        let x = slot.x_host.as_slice().map_err(device_error)?;
        stream.memcpy_htod(&x[..rows * nf], &mut slot.x_dev).map_err(device_error)?;
        let base_dev = match self.row_base {
            Some(b) if !self.leaf => {
                slot.base_host.as_mut_slice().map_err(device_error)?[..rows * k]
                    .copy_from_slice(&b[start * k..(start + rows) * k]);
                let base = slot.base_host.as_slice().map_err(device_error)?;
                stream.memcpy_htod(&base[..rows * k], &mut slot.base_dev).map_err(device_error)?;
                Some(&slot.base_dev)
            }
            _ => None,
        };
        let leaf_out = self.leaf.then_some(&mut slot.index_dev);
        forest.launch(&stream, &slot.x_dev, rows, base_dev, &mut slot.out_dev, leaf_out, &mut slot.scratch)?;
        if self.leaf {
            let ids = slot.index_dev.slice(..rows * self.n_trees);
            stream.memcpy_dtoh(&ids, &mut slot.index_host).map_err(device_error)?;
        } else if self.per_row_index == 1 {
            forest.finish(&stream, &mut slot.out_dev, rows, Some(&mut slot.index_dev))?;
            stream.memcpy_dtoh(&slot.index_dev.slice(..rows), &mut slot.index_host).map_err(device_error)?;
        } else {
            if self.output == PredictOutput::Value {
                forest.finish(&stream, &mut slot.out_dev, rows, None)?;
            }
            stream.memcpy_dtoh(&slot.out_dev.slice(..rows * k), &mut slot.out_host).map_err(device_error)?;
        }
        slot.done.record(&stream).map_err(device_error)?;
        slot.pending = Some((start, rows));
        self.times.stop(QUEUE, started);
        Ok(())
    }

    /// The profile's line for the request, begun at `whole` (when profiling).
    fn report(&self, whole: Option<Instant>, n_rows: usize) {
        if let Some(whole) = whole {
            let [fill, queue, wait] = self.times.seconds.map(|s| s * 1e3);
            eprintln!(
                "polars-gbt profile: scoring {n_rows} rows from host columns {:.2} ms: filling pinned buffers {fill:.2}, \
                 queueing copies and kernels {queue:.2}, waiting for slots {wait:.2}",
                whole.elapsed().as_secs_f64() * 1e3,
            );
        }
    }

    fn into_predictions(self) -> Predictions {
        if self.per_row_index > 0 {
            Predictions::Index { values: self.indices, width: if self.leaf { self.n_trees } else { 1 } }
        } else {
            Predictions::Float { values: self.floats, width: self.k }
        }
    }
}
