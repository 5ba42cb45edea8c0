//! Training on the GPU: the margins, gradients and row index of a fit live on the device, and
//! each tree grows by the shared driver (`tree::grow`) over this learner's steps
//! (`grow.rs`), with every pass over rows or histograms in a kernel. The host keeps the tree
//! and decides what to expand; per level it reads back each node's left-going row count and
//! best split.
//!
//! The learner is its components, each owning its buffers and mirroring one kernel family:
//! `Gradients` (gradients.cu), `HistogramBuilder` (histogram.cu), `SplitEvaluator`
//! (split*.cu), `RowPartitioner` and `MarginUpdate` (partition.cu), over the binned matrix
//! (`DeviceMatrix`: binning.cu, sparse.cu) and the fit's `FitDevice`.

use std::sync::Arc;
use std::time::Instant;

use cudarc::driver::CudaStream;

use super::buffers::{FitDevice, Scratch};
use super::columns::DeviceColumns;
use super::cuts::device_cuts;
use super::data::{DeviceMatrix, Layout};
use super::device_error;
use super::evaluation::DeviceEvaluation;
use super::gradients::Gradients;
use super::histogram::HistogramBuilder;
use super::layout::TaskRows;
use super::partition::{MarginUpdate, RowPartitioner};
use super::placement::{fit_row_bytes, place_binned, Placement};
use super::refit::DeviceRefit;
use super::runtime::Runtime;
use super::split::SplitEvaluator;
use super::stream_bins::StreamedBins;
use super::DeviceMemory;
use crate::backend::refit::{set_leaves, LeafRefit};
use crate::backend::{EvalSetRows, Learner, StartMargin};
use crate::collective::{Collective, DeviceSums, RowSpans};
use crate::config::{MultiStrategy, TrainConfig};
use crate::data::cuts::all_missing;
use crate::data::{BinnedView, Dataset, FeatureCuts};
use crate::error::{Error, Result};
use crate::metric::{Metric, MetricParams};
use crate::objective::{Loss, Objective, Targets};
use crate::tree::grow::{grow_vector_tree, TreeContext};
use crate::tree::{grow_tree, GradSum, GrowParams, Quantiser, Tree, Weighting};

/// Where the time goes, when `POLARS_GBT_PROFILE=1` (each stage then ends with a device
/// synchronisation, which slows training a little).
pub(super) struct Profile {
    on: bool,
    last: Instant,
    /// gradients, histograms, split search, partition, other, leaf refits, evaluation
    seconds: [f64; 7],
}

#[derive(Clone, Copy)]
pub(super) enum Stage {
    Gradients = 0,
    Histograms = 1,
    SplitSearch = 2,
    Partition = 3,
    Other = 4,
    /// The leaf refits of the L1-type losses.
    Refit = 5,
    /// The boosting loop's work between trees: the evaluation sets and the round's callback.
    Evaluation = 6,
}

impl Profile {
    pub(super) fn lap(&mut self, stream: &CudaStream, stage: Stage) {
        if self.on {
            let _ = stream.synchronize();
            let now = Instant::now();
            self.seconds[stage as usize] += (now - self.last).as_secs_f64();
            self.last = now;
        }
    }
}

pub struct GpuLearner<'r> {
    pub(super) dev: FitDevice<'r>,
    pub(super) matrix: DeviceMatrix,
    pub(super) cuts: &'r [FeatureCuts],
    pub(super) params: GrowParams,
    n: usize,
    pub(super) gradients: Gradients,
    pub(super) hist: HistogramBuilder,
    pub(super) split: SplitEvaluator,
    pub(super) rows: RowPartitioner,
    margins: MarginUpdate,
    /// L1-type losses: the refits, and their device buffers.
    refit: Option<(LeafRefit<'r>, DeviceRefit)>,
    /// Rows of the tree being grown.
    pub(super) n_active: u32,
    pub(super) profile: Profile,
    /// The workers of a distributed fit ([`Solo`](crate::collective::Solo) for one): gradient scales, totals,
    /// histograms and row counts are summed over them (`grow.rs`).
    pub(super) comm: &'r dyn Collective,
    /// A level's row counts, summed over the workers on the device, and the nodes' rows they
    /// are counted from (`grow.rs`).
    pub(super) share_counts: Scratch<u32>,
    pub(super) share_rows: Scratch<TaskRows>,
    /// The evaluation sets kept on the device, once one is.
    evaluation: Option<DeviceEvaluation>,
}

/// The largest `max_bin` the GPU histograms take: two features of 8193 slots in one block's
/// shared memory (128 KiB) fit every GPU since Volta.
pub const MAX_BIN: usize = 8192;

/// Why a configuration cannot train on the GPU yet, if it cannot.
pub fn unsupported(cfg: &TrainConfig) -> Option<String> {
    if cfg.max_bin > MAX_BIN {
        return Some(format!("max_bin={} is above the CUDA backend's limit of {MAX_BIN}", cfg.max_bin));
    }
    if cfg.multi_strategy == MultiStrategy::MultiOutputTree && cfg.n_gpus > 1 {
        // A vector-leaf level's split search reads its histograms on the host, which a fit
        // over several GPUs sums on the devices.
        return Some(VECTOR_ON_ONE_GPU.into());
    }
    None
}

/// Why vector leaves train on one GPU only.
pub const VECTOR_ON_ONE_GPU: &str =
    "multi_strategy=\"multi_output_tree\" trains on one GPU, or distributed on CPUs: not over several GPUs yet";

/// The CUDA backend's limit on a fit's rows (row indices and counts are 32-bit).
fn check_row_count(n: usize) -> Result<()> {
    if n >= u32::MAX as usize / 2 {
        return Err(Error::Data(format!("the CUDA backend takes at most 2^31 rows, not {n}")));
    }
    Ok(())
}

/// Whether the fit's leaf refits weigh rows by their sample weights (whole weights as repeats).
fn weighs_rows(data: &Dataset, params: &GrowParams) -> bool {
    data.weight.is_some() && matches!(params.weighting, Weighting::Repeats { .. })
}

/// The stream a fit runs on: its own, so that fits sharing the GPU (`Runtime::take_turn`)
/// overlap; but a worker of a fit over several GPUs runs on the runtime's, where NCCL sums its
/// histograms (the exchanges are ordered after the kernels that write them).
fn fit_stream(rt: &Runtime, comm: &dyn Collective) -> Result<Arc<CudaStream>> {
    match comm.device_sums() {
        Some(_) => Ok(rt.stream.clone()),
        None => rt.stream.context().new_stream().map_err(device_error),
    }
}

/// What a fit's reads back wait through: the exchanges of a fit over several GPUs are queued
/// without waits, so its reads wait through the collective, which watches the peers.
fn watch(comm: &dyn Collective) -> Option<&dyn DeviceSums> {
    comm.device_sums().filter(|_| comm.world() > 1)
}

/// A fit's device and its training matrix, binned from columns a batch at a time
/// ([`GpuLearner::bin_in_batches`]).
pub struct Binned<'r> {
    dev: FitDevice<'r>,
    matrix: DeviceMatrix,
    clock: Instant,
}

/// A fit's start on the device: its stream and allocations, and its feature columns there in
/// Arrow's layout, from which the cut points and then the training matrix are computed.
pub struct Ingest<'r> {
    dev: FitDevice<'r>,
    columns: DeviceColumns,
    clock: Instant,
}

impl Ingest<'_> {
    /// The cut points of `data`'s features, computed on the device from its columns: the CPU's
    /// ([`compute_cuts`](crate::data::cuts::compute_cuts), or `compute_cuts_sharded` over the
    /// workers of `comm`, this one's rows placed by `rows`) bit for bit.
    pub fn cut_points(
        &mut self,
        data: &Dataset,
        max_bin: usize,
        seed: u64,
        rows: &RowSpans,
        comm: &dyn Collective,
    ) -> Result<Vec<FeatureCuts>> {
        let clock = Instant::now();
        let dev = &mut self.dev;
        let weights = data.weight.as_deref().map(|w| dev.upload(w)).transpose()?;
        let cuts = device_cuts(
            dev.rt,
            &dev.stream,
            &mut dev.memory,
            &data.features,
            &self.columns,
            weights.as_ref(),
            max_bin,
            seed,
            rows,
            comm,
        )?;
        if let Some(w) = weights {
            dev.memory.allocated -= 4 * w.len();
        }
        if crate::profile::on() {
            eprintln!("polars-gbt profile: cut points on the device {:.3} s", clock.elapsed().as_secs_f64());
        }
        Ok(cuts)
    }
}

impl<'r> GpuLearner<'r> {
    /// Starts a fit of `data` on the device: checks that it can fit, and copies its feature
    /// columns there. `comm`: the workers of a distributed fit.
    pub fn ingest(rt: &'r Runtime, data: &Dataset, cfg: &TrainConfig, comm: &dyn Collective) -> Result<Ingest<'r>> {
        let clock = Instant::now();
        let (n, nf) = (data.n_rows(), data.features.n_features());
        check_row_count(n)?;
        // The columns, at least one byte a value of bins (twice: the column copy) and the fit's
        // rows, checked before the fit takes anything of the GPU (a stream included);
        // the matrix's own check follows once its layout is known.
        let columns_bytes = DeviceColumns::bytes_for(&data.features);
        let row_bytes = fit_row_bytes(cfg, None);
        DeviceMemory::check_fits(&rt.stream, columns_bytes + 2 * n * nf + n * row_bytes)?;
        let mut dev = FitDevice::new(rt, fit_stream(rt, comm)?)?;
        let columns = DeviceColumns::upload(&dev.stream, &mut dev.memory, &data.features)?;
        if crate::profile::on() {
            eprintln!(
                "polars-gbt profile: columns to the device {:.3} s ({:.0} MiB)",
                clock.elapsed().as_secs_f64(),
                columns.bytes as f64 / (1 << 20) as f64
            );
        }
        Ok(Ingest { dev, columns, clock })
    }

    /// Moves `data` to the device and prepares a fit of `cfg`'s outputs with `cuts` (computed
    /// on the host); as [`GpuLearner::ingest`], then [`GpuLearner::start`].
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        rt: &'r Runtime,
        data: &Dataset,
        cuts: &'r [FeatureCuts],
        params: GrowParams,
        cfg: &TrainConfig,
        start_margin: &StartMargin,
        refit: Option<LeafRefit<'r>>,
        comm: &'r dyn Collective,
    ) -> Result<Self> {
        let ingest = Self::ingest(rt, data, cfg, comm)?;
        Self::start(ingest, data, cuts, params, cfg, start_margin, refit, comm)
    }

    /// Bins the ingested columns with `cuts` on the device and prepares a fit of `cfg`'s
    /// outputs starting from `start_margin` (class-major), its leaves refit by `refit` (L1-type
    /// losses). `comm`: the workers of a distributed fit ([`Solo`](crate::collective::Solo) for
    /// one), over which gradient scales, totals, histograms and row counts are summed (`grow.rs`).
    #[allow(clippy::too_many_arguments)]
    pub fn start(
        ingest: Ingest<'r>,
        data: &Dataset,
        cuts: &'r [FeatureCuts],
        params: GrowParams,
        cfg: &TrainConfig,
        start_margin: &StartMargin,
        refit: Option<LeafRefit<'r>>,
        comm: &'r dyn Collective,
    ) -> Result<Self> {
        let Ingest { mut dev, columns, clock } = ingest;
        dev.watch = watch(comm);
        let rt = dev.rt;
        let n = data.n_rows();
        // Each row's present values are counted (on the device) only where most values are null.
        let present = match DeviceMatrix::may_compress(&data.features) {
            true => Some(columns.present_per_row(rt, &dev.stream, &mut dev.memory)?),
            false => None,
        };
        let mut layout = DeviceMatrix::plan(&data.features, cuts, present.as_deref());
        if comm.world() > 1 {
            // Histogram slots follow the layout: every worker takes compressed rows, or none.
            let mut sparse = [matches!(layout, Layout::Sparse(_)) as i64];
            comm.all_reduce_sum(&mut sparse)?;
            if sparse[0] != comm.world() as i64 {
                layout = DeviceMatrix::dense(&data.features, cuts);
            }
        }
        let row_bytes = fit_row_bytes(cfg, refit.is_some().then(|| weighs_rows(data, &params)));
        DeviceMemory::check_fits(&dev.stream, layout.device_bytes(n, data.features.n_features()) + n * row_bytes)?;
        let (matrix, present) = DeviceMatrix::upload(rt, &dev.stream, &mut dev.memory, &columns, cuts, layout)?;
        // Some value must be present, on some worker (one worker's shard may be all null).
        let mut present = [present as i64];
        comm.all_reduce_sum(&mut present)?;
        if present[0] == 0 {
            return Err(all_missing());
        }
        if crate::profile::on() {
            eprintln!("polars-gbt profile: frame to training matrix {:.3} s", clock.elapsed().as_secs_f64());
        }
        // The columns are binned: their memory goes back before the fit's own buffers come.
        dev.memory.allocated -= columns.bytes;
        drop(columns);
        Self::assemble(dev, matrix, data, cuts, params, cfg, start_margin, refit, comm, clock)
    }

    /// Starts a fit of a wide dense frame ([`DeviceMatrix::ingests_in_batches`]) with its
    /// columns on the device a batch of features at a time, each batch's cut points computed
    /// there and its values binned, never all the float columns at once. Returns the cut
    /// points and the started device, from which [`GpuLearner::on_matrix`] makes the learner.
    pub fn bin_in_batches(
        rt: &'r Runtime,
        data: &Dataset,
        cfg: &TrainConfig,
        rows: &RowSpans,
    ) -> Result<(Vec<FeatureCuts>, Binned<'r>)> {
        let clock = Instant::now();
        let (n, nf) = (data.n_rows(), data.features.n_features());
        check_row_count(n)?;
        // The bins, one batch of columns and the fit's rows, before the fit takes the GPU.
        let row_bytes = fit_row_bytes(cfg, None);
        let bins = n * nf.next_multiple_of(4);
        DeviceMemory::check_fits(&rt.stream, bins + DeviceMatrix::batch_bytes(&data.features) + n * row_bytes)?;
        let stream = rt.stream.context().new_stream().map_err(device_error)?;
        let mut dev = FitDevice::new(rt, stream)?;
        let weights = data.weight.as_deref().map(|w| dev.upload(w)).transpose()?;
        let (matrix, cuts, present) = DeviceMatrix::upload_in_batches(
            rt,
            &dev.stream,
            &mut dev.memory,
            &data.features,
            weights.as_ref(),
            cfg.max_bin,
            cfg.seed,
            rows,
        )?;
        if let Some(w) = weights {
            dev.memory.allocated -= 4 * w.len();
        }
        if !present {
            return Err(all_missing());
        }
        if crate::profile::on() {
            eprintln!(
                "polars-gbt profile: frame to training matrix, {} features a batch {:.3} s",
                nf.min(super::binning::INGEST_BATCH_FEATURES),
                clock.elapsed().as_secs_f64()
            );
        }
        Ok((cuts, Binned { dev, matrix, clock }))
    }

    /// The learner over a matrix binned by [`GpuLearner::bin_in_batches`] with `cuts`.
    #[allow(clippy::too_many_arguments)]
    pub fn on_matrix(
        binned: Binned<'r>,
        data: &Dataset,
        cuts: &'r [FeatureCuts],
        params: GrowParams,
        cfg: &TrainConfig,
        start_margin: &StartMargin,
        refit: Option<LeafRefit<'r>>,
        comm: &'r dyn Collective,
    ) -> Result<Self> {
        let Binned { dev, matrix, clock } = binned;
        Self::assemble(dev, matrix, data, cuts, params, cfg, start_margin, refit, comm, clock)
    }

    /// Starts a fit of rows binned on the host (a streamed fit, `data::stream`: no float column
    /// is ever whole, here or on the device): the bins go to the device as they are, one, two or
    /// four bytes a value, rows padded to 32-bit words, and the fit goes on as from columns.
    /// `data` holds the fit's per-row vectors; `rows` its bins and their cut points (on one
    /// GPU of several, its share of the rows, read where they lie).
    #[allow(clippy::too_many_arguments)]
    pub fn from_binned(
        rt: &'r Runtime,
        data: &Dataset,
        rows: BinnedView<'r>,
        params: GrowParams,
        cfg: &TrainConfig,
        start_margin: &StartMargin,
        refit: Option<LeafRefit<'r>>,
        comm: &'r dyn Collective,
    ) -> Result<Self> {
        let clock = Instant::now();
        let n = data.n_rows();
        check_row_count(n)?;
        let row_bytes = fit_row_bytes(cfg, refit.is_some().then(|| weighs_rows(data, &params)));
        let (placement, why) = place_binned(rt, rows, cfg, row_bytes)?;
        let mut dev = FitDevice::new(rt, fit_stream(rt, comm)?)?;
        let (matrix, cuts) = (&rows.all.matrix, rows.cuts());
        let matrix = match placement {
            Placement::InCore => {
                DeviceMatrix::from_host(&dev.stream, &mut dev.memory, matrix, (rows.first, rows.n_rows), cuts)?
            }
            Placement::Paged(plan) if comm.world() == 1 && rows.is_whole() => {
                DeviceMatrix::paged(&dev.stream, &mut dev.memory, matrix, cuts, plan)?
            }
            // Each worker's levels would wait on the slowest's pages between its exchanges.
            Placement::Paged(_) => {
                return Err(Error::Device(format!(
                    "this GPU's share of the rows does not fit its memory ({why}), and a fit over several GPUs \
                     does not page its bins yet: use more GPUs, or one GPU (which pages)"
                )))
            }
        };
        crate::profile::note(&why);
        if crate::profile::on() {
            eprintln!("polars-gbt profile: binned rows to the device {:.3} s", clock.elapsed().as_secs_f64());
        }
        dev.watch = watch(comm);
        Self::assemble(dev, matrix, data, cuts, params, cfg, start_margin, refit, comm, clock)
    }

    /// Starts a fit of a stream whose rows were binned on this GPU as they streamed
    /// ([`StreamedBins`], `stream_bins.rs`): its matrix, stream and memory account become the
    /// fit's. `data` holds the fit's per-row vectors.
    #[allow(clippy::too_many_arguments)]
    pub fn on_streamed(
        rt: &'r Runtime,
        bins: StreamedBins,
        data: &Dataset,
        cuts: &'r [FeatureCuts],
        params: GrowParams,
        cfg: &TrainConfig,
        start_margin: &StartMargin,
        refit: Option<LeafRefit<'r>>,
        comm: &'r dyn Collective,
    ) -> Result<Self> {
        let StreamedBins { stream, memory, matrix, clock, .. } = bins;
        check_row_count(data.n_rows())?;
        let mut dev = FitDevice::new(rt, stream)?;
        dev.memory = memory;
        if crate::profile::on() {
            eprintln!(
                "polars-gbt profile: streamed batches binned on the device {:.3} s",
                clock.elapsed().as_secs_f64()
            );
        }
        crate::profile::note("the rows were binned on the GPU as they streamed: the bins are on the GPU");
        Self::assemble(dev, matrix, data, cuts, params, cfg, start_margin, refit, comm, clock)
    }

    /// The learner over `matrix` on `dev`: its components and their buffers.
    #[allow(clippy::too_many_arguments)]
    fn assemble(
        mut dev: FitDevice<'r>,
        matrix: DeviceMatrix,
        data: &Dataset,
        cuts: &'r [FeatureCuts],
        params: GrowParams,
        cfg: &TrainConfig,
        start_margin: &StartMargin,
        refit: Option<LeafRefit<'r>>,
        comm: &'r dyn Collective,
        clock: Instant,
    ) -> Result<Self> {
        let rt = dev.rt;
        let n = data.n_rows();
        let weighed = weighs_rows(data, &params);
        let profile = crate::profile::on();
        let mut learner = GpuLearner {
            gradients: Gradients::new(&mut dev, data, cfg, start_margin, params.weighting)?,
            hist: HistogramBuilder::new(&mut dev, &matrix, &params)?,
            split: SplitEvaluator::new(&mut dev, &matrix, cuts, &params.constraints.monotone)?,
            rows: RowPartitioner::new(&mut dev, n)?,
            margins: MarginUpdate::new(&mut dev)?,
            share_counts: dev.scratch(64)?,
            share_rows: dev.scratch(64)?,
            refit: match refit {
                Some(r) => Some((r, DeviceRefit::new(&mut dev, n, weighed, profile)?)),
                None => None,
            },
            dev,
            matrix,
            cuts,
            params,
            n,
            n_active: 0,
            profile: Profile { on: profile, last: Instant::now(), seconds: [0.0; 7] },
            comm,
            evaluation: None,
        };
        if learner.profile.on {
            learner.dev.stream.synchronize().map_err(device_error)?;
            eprintln!(
                "polars-gbt profile: ingest and binning on {} ({}): {:.3} s, {:.0} MiB on the device",
                rt.name,
                rt.arch,
                clock.elapsed().as_secs_f64(),
                learner.dev.memory.allocated as f64 / (1024.0 * 1024.0)
            );
            learner.profile.last = Instant::now();
        }
        if let Some(c) = &mut learner.dev.calls {
            c.since = Instant::now();
        }
        Ok(learner)
    }

    /// Readies the tree of output `output` over `rows` (None: every row): the row index, the
    /// fixed-point gradients, and the root's total. The tree then grows through
    /// [`GrowSteps`](crate::tree::GrowSteps), as [`Learner::grow`] does.
    pub fn begin_tree(&mut self, output: usize, rows: Option<&[u32]>) -> Result<(Quantiser, GradSum)> {
        self.n_active = self.rows.reset(&mut self.dev, rows, self.n)?;
        let started = self.gradients.quantise_tree(&mut self.dev, output, &self.rows.ridx, self.n_active, self.comm)?;
        self.profile.lap(&self.dev.stream, Stage::Gradients);
        Ok(started)
    }
}

impl GpuLearner<'_> {
    /// For a matrix paged from host memory: its pages and how many the device keeps.
    pub fn paging(&self) -> Option<(usize, usize)> {
        match &self.matrix.bins {
            super::data::DeviceBins::Paged(pages) => Some((pages.n_pages(), pages.n_slots())),
            _ => None,
        }
    }

    /// Sets the leaves of output `output`'s `tree` to their rows' residual quantiles, as the
    /// CPU sets them: with unit or whole weights the device selects them; with fractional
    /// weights, or in a distributed fit (the selection then runs over every worker's rows),
    /// each row's leaf is read back and the host computes them over the rows of `rows` (None: all).
    fn refit_leaves(&mut self, output: usize, rows: Option<&[u32]>, tree: &mut Tree) -> Result<()> {
        let n = self.n;
        self.profile.lap(&self.dev.stream, Stage::Other);
        let Some((refit, device)) = &mut self.refit else { return Ok(()) };
        let lr = self.params.learning_rate;
        let margin = self.gradients.margin.slice(output * n..(output + 1) * n);
        let repeats = self.gradients.repeats();
        if (refit.weight.is_none() || repeats.is_some()) && refit.comm.world() == 1 {
            let q = device.quantiles(
                &mut self.dev,
                &self.matrix,
                &mut self.margins,
                tree,
                rows,
                self.gradients.label_of(output),
                margin,
                repeats,
                refit.alphas[output],
            )?;
            set_leaves(tree, lr, |leaf| q[leaf as usize]);
        } else {
            self.margins.mark_leaves(&mut self.dev, &self.matrix, tree, &mut device.leaf_of)?;
            let leaf_of: Vec<u32> =
                self.dev.download(device.leaf_of.slice(..))?.into_iter().map(|id| id as u32).collect();
            let margin = self.dev.download(margin)?;
            refit.apply_by_leaf(output, tree, &leaf_of, rows, &margin, lr)?;
        }
        self.profile.lap(&self.dev.stream, Stage::Refit);
        Ok(())
    }
}

// Evaluation sets are held on the device (`evaluation.rs`); the trait's `add_tree_to_eval`
// serves those the host keeps (a streamed set, binned as it streamed, and the sets of a fit
// over several GPUs, whose metrics read every worker's rows).
impl Learner for GpuLearner<'_> {
    fn hold_eval_set(&mut self, set: EvalSetRows<'_>) -> Result<Option<usize>> {
        let evaluation = match &mut self.evaluation {
            Some(e) => e,
            None => self.evaluation.insert(DeviceEvaluation::new(&mut self.dev)?),
        };
        evaluation.hold(&mut self.dev, set, self.cuts).map(Some)
    }

    fn add_tree_to_held(&mut self, set: usize, output: usize, tree: &Tree) -> Result<()> {
        let evaluation = self.evaluation.as_mut().ok_or_else(no_held_sets)?;
        evaluation.add_tree(&mut self.dev, set, output, tree)
    }

    fn held_margins(&mut self, set: usize) -> Result<Vec<f32>> {
        let evaluation = self.evaluation.as_ref().ok_or_else(no_held_sets)?;
        evaluation.margins(&mut self.dev, set)
    }

    fn held_metrics(
        &mut self,
        sets: &[usize],
        metrics: &[Metric],
        params: &MetricParams,
        objective: Objective,
    ) -> Result<Vec<Vec<Option<f64>>>> {
        let evaluation = self.evaluation.as_mut().ok_or_else(no_held_sets)?;
        evaluation.metrics(&mut self.dev, sets, metrics, params, objective)
    }

    fn compute_gradients(&mut self, loss: &dyn Loss, targets: &Targets) -> Result<()> {
        self.gradients.start_round(&mut self.dev, loss, targets)?;
        self.profile.lap(&self.dev.stream, Stage::Gradients);
        Ok(())
    }

    /// The stage clock runs from the end of the last tree, so this lap is the host's work
    /// between trees (without it, that work counted as the next round's gradients).
    fn evaluated(&mut self, _started: Instant) {
        self.profile.lap(&self.dev.stream, Stage::Evaluation);
    }

    fn grow(&mut self, output: usize, rows: Option<&[u32]>, tree_features: Vec<u32>, seed: u64) -> Result<Tree> {
        let (quantiser, total) = self.begin_tree(output, rows)?;
        let (params, cuts) = (self.params.clone(), self.cuts);
        let ctx = TreeContext { params: &params, quantiser, tree_features: &tree_features, seed, outputs: &[] };
        let mut tree = grow_tree(self, &ctx, cuts, total)?;
        self.finish_tree(output, rows, &mut tree)?;
        Ok(tree)
    }

    /// One tree over every output's gradients (each output's histograms built on the device,
    /// the splits searched on the host as the CPU's), each output's tree added to its margins.
    fn grow_vector(&mut self, rows: Option<&[u32]>, tree_features: Vec<u32>, seed: u64) -> Result<Vec<Tree>> {
        if self.comm.world() > 1 {
            return Err(Error::param("multi_strategy", VECTOR_ON_ONE_GPU));
        }
        self.n_active = self.rows.reset(&mut self.dev, rows, self.n)?;
        let (quantisers, sums) =
            self.gradients.quantise_outputs(&mut self.dev, &self.rows.ridx, self.n_active, self.comm)?;
        self.profile.lap(&self.dev.stream, Stage::Gradients);
        let (params, cuts) = (self.params.clone(), self.cuts);
        let ctx = TreeContext {
            params: &params,
            quantiser: quantisers[0],
            tree_features: &tree_features,
            seed,
            outputs: &quantisers,
        };
        let mut trees = grow_vector_tree(self, &ctx, cuts, sums)?;
        for (output, tree) in trees.iter_mut().enumerate() {
            self.finish_tree(output, rows, tree)?;
        }
        Ok(trees)
    }
}

fn no_held_sets() -> Error {
    Error::Device("this GPU learner holds no evaluation set".into())
}

impl GpuLearner<'_> {
    /// Refits output `output`'s grown `tree` (L1-type losses) and adds it to the output's
    /// training margins.
    fn finish_tree(&mut self, output: usize, rows: Option<&[u32]>, tree: &mut Tree) -> Result<()> {
        if self.refit.is_some() {
            self.refit_leaves(output, rows, tree)?;
        }
        let n = self.n;
        let margin = self.gradients.margin.slice_mut(output * n..(output + 1) * n);
        match &mut self.refit {
            // The refit marked every row's leaf: the margins gather their leaves' values.
            Some((_, device)) => device.add_tree(&mut self.dev, tree, margin)?,
            None => self.margins.add_tree(&mut self.dev, &self.matrix, tree, margin)?,
        }
        self.profile.lap(&self.dev.stream, Stage::Other);
        if let Some(c) = &mut self.dev.calls {
            c.trees += 1;
        }
        Ok(())
    }
}

impl Drop for GpuLearner<'_> {
    fn drop(&mut self) {
        if let Some(c) = &self.dev.calls {
            eprintln!("polars-gbt profile: calls: {}", c.summary());
        }
        if self.profile.on {
            let [g, h, sp, p, o, r, e] = self.profile.seconds;
            eprintln!(
                "polars-gbt profile: gradients {g:.3} s, histograms {h:.3} s, split search {sp:.3} s, \
                 partition {p:.3} s, leaf refits {r:.3} s, other {o:.3} s, evaluation {e:.3} s; peak {:.0} MiB \
                 on the device",
                self.dev.memory.peak as f64 / (1024.0 * 1024.0)
            );
            if let super::data::DeviceBins::Paged(pages) = &self.matrix.bins {
                eprintln!(
                    "polars-gbt profile: pages: {:.3} GiB copied to the GPU ({} pages, {} kept there, host rows {})",
                    pages.copied() as f64 / (1u64 << 30) as f64,
                    pages.n_pages(),
                    pages.n_slots(),
                    if pages.is_pinned() { "page-locked" } else { "pageable: could not lock them" }
                );
            }
            if let Some((_, DeviceRefit { steps: Some(([mark, count, plan, scatter, select], _)), .. })) = &self.refit {
                eprintln!(
                    "polars-gbt profile: device leaf refits: marking leaves {mark:.3} s, counting {count:.3} s, \
                     planning runs {plan:.3} s, scattering {scatter:.3} s, selecting {select:.3} s"
                );
            }
        }
    }
}
