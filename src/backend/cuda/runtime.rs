//! The CUDA runtime of each GPU: one context, one stream and one compiled module per GPU and
//! process, created on first use (GPU 0's by every GPU fit, the others' by fits over several
//! GPUs). cudarc panics when libcuda or libnvrtc cannot be loaded, so both are probed first
//! and their absence becomes an error. Fits share the GPU through lanes ([`Runtime::take_turn`]):
//! small fits (a `group_by`'s) run side by side, each on its own stream, up to [`FIT_LANES`]
//! at once; a large fit takes the whole GPU, so that large fits queue instead of
//! oversubscribing its memory.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::Duration;

use cudarc::driver::sys::{CUdevice_attribute, CUfunction_attribute};
use cudarc::driver::{CudaContext, CudaFunction, CudaStream, PinnedHostSlice};
use cudarc::nvrtc::Ptx;

use super::kernels;
use super::launch::Kernel;
use super::layout::RowTask;
use crate::error::{Error, Result};

macro_rules! kernel_table {
    ($($name:ident: $args:ty),* $(,)?) => {
        /// Every kernel of the module, loaded once, typed by its argument struct.
        pub struct Kernels {
            $(pub $name: Kernel<$args>,)*
        }

        impl Kernels {
            fn load(module: &Arc<cudarc::driver::CudaModule>) -> std::result::Result<Self, String> {
                Ok(Kernels {
                    $($name: Kernel::new(module
                        .load_function(stringify!($name))
                        .map_err(|e| format!("kernel {} is missing: {e}", stringify!($name)))?),)*
                })
            }
        }
    };
}

kernel_table!(
    bin_columns_u8: super::binning::BinColumnsArgs<'static, u8>,
    bin_columns_u16: super::binning::BinColumnsArgs<'static, u16>,
    bin_columns_u32: super::binning::BinColumnsArgs<'static, u32>,
    count_present: super::binning::CountPresentArgs<'static>,
    place_columns_s16: super::binning::PlaceColumnsArgs<'static, u16>,
    place_columns_s32: super::binning::PlaceColumnsArgs<'static, u32>,
    sample_rows: super::cuts::SampleRowsArgs<'static>,
    sample_values: super::cuts::SampleValuesArgs<'static>,
    sort_segments: super::cuts::SortSegmentsArgs<'static>,
    segment_cuts: super::cuts::SegmentCutsArgs<'static>,
    objective_max: super::gradients::ObjectiveMaxArgs<'static>,
    objective_quantise: super::gradients::ObjectiveQuantiseArgs<'static>,
    gradient_max: super::gradients::GradientMaxArgs<'static>,
    finish_quantisation: super::gradients::FinishQuantisationArgs<'static>,
    quantise: super::gradients::QuantiseArgs<'static>,
    sum_rows: super::gradients::SumRowsArgs<'static>,
    lambdarank: super::ranking::LambdarankArgs<'static>,
    fill_identity: super::partition::FillIdentityArgs<'static>,
    histogram_u8: super::histogram::HistogramArgs<'static, u8>,
    histogram_u16: super::histogram::HistogramArgs<'static, u16>,
    histogram_u32: super::histogram::HistogramArgs<'static, u32>,
    zero_histograms: super::histogram::SlotsArgs<'static, RowTask>,
    derive_siblings: super::histogram::SlotsArgs<'static, u32>,
    copy_histograms: super::histogram::SlotsArgs<'static, u32>,
    plan_children: super::histogram::PlanChildrenArgs<'static>,
    evaluate_features: super::split::EvaluateFeaturesArgs<'static>,
    best_feature: super::split::BestFeatureArgs<'static>,
    evaluate_categorical: super::split::EvaluateCategoricalArgs<'static>,
    gather_runs: super::split::GatherRunsArgs<'static>,
    evaluate_vector: super::split::EvaluateVectorArgs<'static>,
    vector_left_sums: super::split::VectorLeftSumsArgs<'static>,
    count_left_u8: super::partition::CountLeftArgs<'static, u8>,
    count_left_u16: super::partition::CountLeftArgs<'static, u16>,
    count_left_u32: super::partition::CountLeftArgs<'static, u32>,
    partition_u8: super::partition::PartitionArgs<'static, u8>,
    partition_u16: super::partition::PartitionArgs<'static, u16>,
    partition_u32: super::partition::PartitionArgs<'static, u32>,
    partition_cols_u8: super::partition::PartitionColsArgs<'static>,
    partition_cols_u16: super::partition::PartitionColsArgs<'static>,
    scatter: super::partition::ScatterArgs<'static>,
    copy_runs: super::partition::CopyRunsArgs<'static>,
    add_tree_u8: super::partition::AddTreeArgs<'static, u8>,
    add_tree_u16: super::partition::AddTreeArgs<'static, u16>,
    add_tree_u32: super::partition::AddTreeArgs<'static, u32>,
    sort_rows_s16: super::binning::SortRowsArgs<'static, u16>,
    sort_rows_s32: super::binning::SortRowsArgs<'static, u32>,
    index_groups_s16: super::histogram::IndexGroupsArgs<'static, u16>,
    index_groups_s32: super::histogram::IndexGroupsArgs<'static, u32>,
    histogram_s16: super::histogram::SparseHistogramArgs<'static, u16>,
    histogram_s32: super::histogram::SparseHistogramArgs<'static, u32>,
    fill_missing: super::split::FillMissingArgs<'static>,
    node_rows: super::split::NodeRowsArgs<'static>,
    count_left_s16: super::partition::SparseCountLeftArgs<'static, u16>,
    count_left_s32: super::partition::SparseCountLeftArgs<'static, u32>,
    partition_s16: super::partition::SparsePartitionArgs<'static, u16>,
    partition_s32: super::partition::SparsePartitionArgs<'static, u32>,
    add_tree_s16: super::partition::SparseAddTreeArgs<'static, u16>,
    add_tree_s32: super::partition::SparseAddTreeArgs<'static, u32>,
    metric_terms: super::evaluation::MetricTermsArgs<'static>,
    halve_sums: super::evaluation::HalveSumsArgs<'static>,
    auc_keys: super::evaluation::AucKeysArgs<'static>,
    bitonic_tiles: super::evaluation::BitonicArgs<'static>,
    bitonic_merge_tiles: super::evaluation::BitonicArgs<'static>,
    bitonic_step: super::evaluation::BitonicArgs<'static>,
    auc_ranks: super::evaluation::AucRanksArgs<'static>,
    refit_count: super::refit::RefitCountArgs<'static>,
    refit_scatter: super::refit::RefitScatterArgs<'static>,
    refit_radix_count: super::refit::RadixCountArgs<'static>,
    refit_radix_pick: super::refit::RadixPickArgs<'static, u32>,
    refit_weigh: super::refit::RefitWeighArgs<'static>,
    refit_radix_weigh: super::refit::RadixWeighArgs<'static>,
    refit_radix_pick_weighed: super::refit::RadixPickArgs<'static, u64>,
    refit_values: super::refit::RefitValuesArgs<'static>,
    refit_add_leaves: super::refit::RefitAddArgs<'static>,
    predict_complete: super::predict::PredictArgs<'static>,
    predict_complete_cat: super::predict::PredictArgs<'static>,
    predict_complete_global_rows: super::predict::PredictArgs<'static>,
    predict_complete_cat_global_rows: super::predict::PredictArgs<'static>,
    predict_linked: super::predict::PredictArgs<'static>,
    predict_linked_cat: super::predict::PredictArgs<'static>,
    predict_linked_global_rows: super::predict::PredictArgs<'static>,
    predict_linked_cat_global_rows: super::predict::PredictArgs<'static>,
    finish_predictions: super::predict::FinishPredictionsArgs<'static>,
    gather_rows: super::predict::GatherRowsArgs<'static>,
    bin_rows_u8: super::predict::BinRowsArgs<'static, u8>,
    bin_rows_u16: super::predict::BinRowsArgs<'static, u16>,
    predict_binned: super::predict::PredictBinnedArgs<'static, u8>,
    predict_binned_cat: super::predict::PredictBinnedArgs<'static, u8>,
    predict_binned_u16: super::predict::PredictBinnedArgs<'static, u16>,
    predict_binned_cat_u16: super::predict::PredictBinnedArgs<'static, u16>,
    shap_contrib_shared: super::shap::ShapArgs<'static>,
    shap_contrib_global: super::shap::ShapArgs<'static>,
    shap_interactions: super::shap::ShapArgs<'static>,
);

/// Lets each of `kernels` take all the shared memory a block may opt into (`max`) less its own
/// static shared variables; returns the dynamic shared memory all of them may use.
fn opt_in_shared(kernels: &[&CudaFunction], max: u32, what: &str) -> std::result::Result<u32, String> {
    let mut budget = max;
    for f in kernels {
        let fixed = f
            .get_attribute(CUfunction_attribute::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)
            .map_err(|e| format!("could not query the {what} kernels: {e}"))? as u32;
        let dynamic = max.saturating_sub(fixed);
        f.set_attribute(CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, dynamic as i32)
            .map_err(|e| format!("could not give the {what} kernels {dynamic} bytes of shared memory: {e}"))?;
        budget = budget.min(dynamic);
    }
    Ok(budget)
}

/// The GPU and what was built for it.
pub struct Runtime {
    pub stream: Arc<CudaStream>,
    pub kernels: Kernels,
    pub name: String,
    pub arch: String,
    pub sm_count: u32,
    /// Shared memory a block may use once it opts in.
    pub max_shared_per_block: u32,
    /// Shared memory of one SM (all its resident blocks together).
    pub max_shared_per_sm: u32,
    /// Dynamic shared memory a histogram block may use.
    pub hist_shared_budget: u32,
    /// Dynamic shared memory a SHAP block may use.
    pub shap_shared_budget: u32,
    /// Dynamic shared memory a categorical split search block may use (its sort's chunk).
    pub categorical_shared_budget: u32,
    /// Dynamic shared memory the ranking kernel may sort a query's scores in.
    pub rank_shared_budget: u32,
    lanes: Arc<Lanes>,
    /// Pinned upload buffers of finished fits, lent to the next ones: pinning 4 MiB takes the
    /// driver about a millisecond and unpinning waits for the whole GPU, which a group's many
    /// small fits would pay each time.
    pinned: Mutex<Vec<PinnedHostSlice<u8>>>,
}

/// Fits that may share one GPU at once. A small fit's launches leave the GPU mostly idle (a
/// group of 2,000 rows: a few microseconds of work a kernel, and a synchronisation a level),
/// so several overlap on their own streams. `POLARS_GBT_FIT_LANES` overrides.
pub const FIT_LANES: usize = 8;

/// The lanes in use, and whole-GPU fits waiting (new small fits wait behind them).
#[derive(Default)]
struct Lanes {
    state: Mutex<(usize, usize)>,
    freed: Condvar,
}

/// A fit's share of a GPU, given back when dropped.
pub struct Turn {
    lanes: Arc<Lanes>,
    taken: usize,
}

impl Drop for Turn {
    fn drop(&mut self) {
        let mut state = self.lanes.state.lock().unwrap_or_else(|p| p.into_inner());
        state.0 -= self.taken;
        self.lanes.freed.notify_all();
    }
}

impl Lanes {
    fn count() -> usize {
        super::knob::<usize>("POLARS_GBT_FIT_LANES").unwrap_or(FIT_LANES).max(1)
    }

    /// Marks a whole-GPU fit as waiting (or no longer), so that new small fits wait behind it.
    fn announce(&self, waiting: bool) {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        match waiting {
            true => state.1 += 1,
            false => state.1 -= 1,
        }
    }

    /// The whole GPU, if no fit holds a lane of it now.
    fn try_whole(self: &Arc<Self>) -> Option<Turn> {
        let n = Self::count();
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        (state.0 == 0).then(|| {
            state.0 += n;
            Turn { lanes: self.clone(), taken: n }
        })
    }

    /// Waits (at most `limit`) until some turn of this GPU is given back.
    fn wait_for_release(&self, limit: Duration) {
        let state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if state.0 > 0 {
            let _ = self.freed.wait_timeout(state, limit);
        }
    }
}

/// Each of `runtimes`' GPUs whole, for a fit over all of them, taken together: the fit holds
/// none while it waits for another. (Held one by one, a fit holding GPU 0 and waiting for
/// GPU 1 would wait for ever on a distributed fit's worker holding GPU 1 and waiting, at an
/// exchange, for its peer's turn on GPU 0.)
pub fn take_whole_turns(runtimes: &[Arc<Runtime>]) -> Vec<Turn> {
    for rt in runtimes {
        rt.lanes.announce(true);
    }
    loop {
        let taken: Vec<Turn> = runtimes.iter().map_while(|rt| rt.lanes.try_whole()).collect();
        if taken.len() == runtimes.len() {
            for rt in runtimes {
                rt.lanes.announce(false);
            }
            return taken;
        }
        let busy = &runtimes[taken.len()].lanes;
        drop(taken);
        busy.wait_for_release(Duration::from_millis(10));
    }
}

static RUNTIME: OnceLock<std::result::Result<Arc<Runtime>, String>> = OnceLock::new();
/// The runtimes of the other GPUs (a fit over several), by ordinal, started on first use.
static OTHERS: Mutex<BTreeMap<usize, Arc<Runtime>>> = Mutex::new(BTreeMap::new());

/// The runtime of GPU 0, started on first use; the error says why no GPU can be used.
pub fn runtime() -> Result<Arc<Runtime>> {
    RUNTIME.get_or_init(|| Runtime::start(0).map(Arc::new)).clone().map_err(Error::Device)
}

/// The runtime of GPU `ordinal` (its own context, stream and module), started on first use.
pub fn runtime_on(ordinal: usize) -> Result<Arc<Runtime>> {
    let first = runtime()?;
    if ordinal == 0 {
        return Ok(first);
    }
    let n = device_count()?;
    if ordinal >= n {
        return Err(Error::Device(format!("there is no GPU {ordinal}: the CUDA driver sees {n}")));
    }
    let mut others = OTHERS.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(rt) = others.get(&ordinal) {
        return Ok(rt.clone());
    }
    let rt = Arc::new(Runtime::start(ordinal).map_err(Error::Device)?);
    others.insert(ordinal, rt.clone());
    Ok(rt)
}

/// How many GPUs the CUDA driver sees (after `CUDA_VISIBLE_DEVICES`).
pub fn device_count() -> Result<usize> {
    runtime()?;
    CudaContext::device_count()
        .map(|n| n as usize)
        .map_err(|e| Error::Device(format!("the CUDA driver could not count devices: {e}")))
}

/// Whether training can run on a GPU here, and if not, why.
pub fn availability() -> std::result::Result<(), String> {
    RUNTIME.get_or_init(|| Runtime::start(0).map(Arc::new)).as_ref().map(|_| ()).map_err(Clone::clone)
}

/// Opens GPU `ordinal`'s context, once the CUDA libraries are found to load.
fn open_context(ordinal: usize) -> std::result::Result<Arc<CudaContext>, String> {
    probe_libraries()?;
    let n = CudaContext::device_count().map_err(|e| format!("the CUDA driver could not count devices: {e}"))?;
    if n < 1 {
        return Err("the CUDA driver found no GPU".into());
    }
    let ctx = CudaContext::new(ordinal).map_err(|e| format!("could not open GPU {ordinal}: {e}"))?;
    // SAFETY: called before any allocation; each fit and each prediction streamer uses its
    // buffers on its own stream only (a forest uploaded for scoring is synchronised before
    // it is read elsewhere), so cudarc's per-allocation events (a record per launch) are
    // not needed.
    unsafe { ctx.disable_event_tracking() };
    // The driver reserves stack for every thread the GPU can hold (1 KiB each by default:
    // 270 MiB on an H100). The kernels use none; the driver grows it if one ever does.
    ctx.set_limit(cudarc::driver::sys::CUlimit::CU_LIMIT_STACK_SIZE, 64)
        .map_err(|e| format!("could not set the stack size: {e}"))?;
    Ok(ctx)
}

/// The dynamic shared memory each family of kernels may use, once each kernel has opted into
/// what a block may take.
struct SharedBudgets {
    histogram: u32,
    categorical: u32,
    rank: u32,
    shap: u32,
}

impl SharedBudgets {
    /// Lets the kernels that stage data in shared memory take all a block may opt into (`max`),
    /// less their own static shared variables, and says what is left to each family.
    fn opt_in(kernels: &Kernels, max: u32) -> std::result::Result<Self, String> {
        // The histogram kernels take all the shared memory a block may opt into, less their
        // own static shared variables.
        let histogram = opt_in_shared(
            &[
                &kernels.histogram_u8,
                &kernels.histogram_u16,
                &kernels.histogram_u32,
                &kernels.histogram_s16,
                &kernels.histogram_s32,
            ],
            max,
            "histogram",
        )?;
        let categorical = opt_in_shared(&[&kernels.evaluate_categorical], max, "categorical split search")?;
        let rank = opt_in_shared(&[&kernels.lambdarank], max, "ranking")?;
        // The prediction kernels may take all of a block's shared memory (rows and a tile of trees).
        for f in [
            &*kernels.predict_complete,
            &*kernels.predict_complete_cat,
            &*kernels.predict_complete_global_rows,
            &*kernels.predict_complete_cat_global_rows,
            &*kernels.predict_linked,
            &*kernels.predict_linked_cat,
            &*kernels.predict_linked_global_rows,
            &*kernels.predict_linked_cat_global_rows,
            &*kernels.predict_binned,
            &*kernels.predict_binned_cat,
            &*kernels.predict_binned_u16,
            &*kernels.predict_binned_cat_u16,
        ] {
            f.set_attribute(CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, max as i32)
                .map_err(|e| format!("could not give the prediction kernels shared memory: {e}"))?;
        }
        // The SHAP kernels likewise, less their table of reciprocals.
        let shap = opt_in_shared(
            &[&kernels.shap_contrib_shared, &kernels.shap_contrib_global, &kernels.shap_interactions],
            max,
            "SHAP",
        )?;
        Ok(SharedBudgets { histogram, categorical, rank, shap })
    }
}

impl Runtime {
    fn start(ordinal: usize) -> std::result::Result<Runtime, String> {
        let clock = std::time::Instant::now();
        let ctx = open_context(ordinal)?;
        let (major, minor) = ctx.compute_capability().map_err(|e| e.to_string())?;
        let arch = format!("sm_{major}{minor}");
        let attr = |a| ctx.attribute(a).map_err(|e| e.to_string());
        let sm_count = attr(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)? as u32;
        let max_shared_per_block =
            attr(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)? as u32;
        let max_shared_per_sm =
            attr(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR)? as u32;
        let context_s = clock.elapsed().as_secs_f64();
        let cubin = kernels::cubin_for(&arch)?;
        let compiled_s = clock.elapsed().as_secs_f64();
        let module =
            ctx.load_module(Ptx::from_binary(cubin)).map_err(|e| format!("could not load the kernels: {e}"))?;
        let kernels = Kernels::load(&module)?;
        let budgets = SharedBudgets::opt_in(&kernels, max_shared_per_block)?;
        let stream = ctx.new_stream().map_err(|e| e.to_string())?;
        let name = ctx.name().unwrap_or_else(|_| "GPU".into());
        if crate::profile::on() {
            eprintln!(
                "polars-gbt profile: CUDA context {context_s:.3} s, kernels compiled or read {:.3} s, loaded {:.3} s",
                compiled_s - context_s,
                clock.elapsed().as_secs_f64() - compiled_s
            );
        }
        Ok(Runtime {
            stream,
            kernels,
            name,
            arch,
            sm_count,
            max_shared_per_block,
            max_shared_per_sm,
            hist_shared_budget: budgets.histogram,
            shap_shared_budget: budgets.shap,
            categorical_shared_budget: budgets.categorical,
            rank_shared_budget: budgets.rank,
            lanes: Arc::default(),
            pinned: Mutex::new(Vec::new()),
        })
    }

    /// A pinned upload buffer a finished fit gave back, if any.
    pub(super) fn lend_pinned(&self) -> Option<PinnedHostSlice<u8>> {
        self.pinned.lock().unwrap_or_else(|p| p.into_inner()).pop()
    }

    /// Keeps a fit's pinned upload buffer (no copy out of it queued) for the next fit: as many
    /// as fits may run at once.
    pub(super) fn give_back_pinned(&self, buffer: PinnedHostSlice<u8>) {
        let mut kept = self.pinned.lock().unwrap_or_else(|p| p.into_inner());
        if kept.len() < FIT_LANES {
            kept.push(buffer);
        }
    }

    /// A fit's share of the GPU: one lane for a small fit, all of them (the GPU to itself) for
    /// a `whole` one; waits until they are free.
    pub fn take_turn(&self, whole: bool) -> Turn {
        let n = Lanes::count();
        let want = if whole { n } else { 1 };
        let lanes = &self.lanes;
        let mut state = lanes.state.lock().unwrap_or_else(|p| p.into_inner());
        if whole {
            state.1 += 1;
        }
        // A small fit also waits while a whole one does, so a stream of small fits cannot
        // keep a large one out.
        while state.0 + want > n || (!whole && state.1 > 0) {
            state = lanes.freed.wait(state).unwrap_or_else(|p| p.into_inner());
        }
        if whole {
            state.1 -= 1;
        }
        state.0 += want;
        Turn { lanes: lanes.clone(), taken: want }
    }
}

/// Loads libnvrtc from where pip or a CUDA toolkit put it, so that cudarc (which looks the
/// library up by name) finds it, then checks that both libraries load.
fn probe_libraries() -> std::result::Result<(), String> {
    // SAFETY: loading the CUDA driver library runs its initialisers, as any CUDA program does.
    if !unsafe { cudarc::driver::sys::is_culib_present() } {
        return Err("no CUDA driver library (libcuda.so.1) was found: is an NVIDIA driver installed?".into());
    }
    preload_nvrtc();
    // SAFETY: as above, for NVRTC.
    if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        return Err("NVRTC (libnvrtc.so) was not found: install it with `pip install polars-gbt[cuda]` \
                    (the nvidia-cuda-nvrtc wheel), or add a CUDA toolkit's lib64 to LD_LIBRARY_PATH"
            .into());
    }
    Ok(())
}

/// Whether NVRTC can be loaded (it compiles kernels without a GPU).
pub fn probe_nvrtc() -> std::result::Result<(), String> {
    preload_nvrtc();
    // SAFETY: loading NVRTC runs only its own initialisers.
    if unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        Ok(())
    } else {
        Err("libnvrtc could not be loaded".into())
    }
}

/// Directories that may hold libnvrtc: `POLARS_GBT_NVRTC_DIRS` (set by the Python package to
/// its nvidia-cuda-nvrtc wheel), `CUDA_HOME`/`CUDA_PATH`, and the usual toolkit location.
fn nvrtc_dirs() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = Vec::new();
    if let Some(v) = std::env::var_os("POLARS_GBT_NVRTC_DIRS") {
        dirs.extend(std::env::split_paths(&v));
    }
    for var in ["CUDA_HOME", "CUDA_PATH"] {
        if let Some(v) = std::env::var_os(var) {
            dirs.push(PathBuf::from(&v).join("lib64"));
            dirs.push(PathBuf::from(v).join("lib"));
        }
    }
    dirs.push(PathBuf::from("/usr/local/cuda/lib64"));
    dirs
}

fn preload_nvrtc() {
    for dir in nvrtc_dirs() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        let mut names: Vec<PathBuf> = entries
            .flatten()
            .map(|e| e.path())
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("libnvrtc.so") || n.starts_with("libnvrtc-builtins.so"))
            })
            .collect();
        // The builtins library first: libnvrtc loads it by name when it compiles.
        names.sort_by_key(|p| !p.to_string_lossy().contains("builtins"));
        let mut found = false;
        for path in names {
            // SAFETY: these are NVIDIA's NVRTC libraries; loading them runs no user code. The
            // handles are kept for the life of the process, so the loader can match the
            // library by its soname when cudarc asks for it by name.
            if let Ok(lib) = unsafe { libloading::Library::new(&path) } {
                std::mem::forget(lib);
                found |= !path.to_string_lossy().contains("builtins");
            }
        }
        if found {
            return;
        }
    }
}
