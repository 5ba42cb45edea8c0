//! Where a GPU fit keeps its bins, and the device memory a fit needs besides them: its
//! per-row state (gradients, the partition, leaf refits), histograms and scratch. Bins that
//! fit stay on the device whole; others stay in host memory and are paged to the device
//! (`pages.rs`). Used by in-memory fits (`learner.rs`, `engine.rs`) and by streamed fits
//! binned on the device (`stream_bins.rs`).

use super::columns::DeviceColumns;
use super::device_error;
use super::gradients::Gradients;
use super::pages::{self, PagePlan};
use super::partition::RowPartitioner;
use super::refit::DeviceRefit;
use super::runtime::Runtime;
use crate::config::TrainConfig;
use crate::data::{BinnedMatrix, BinnedView, Dataset, FeatureCuts};
use crate::error::Result;

/// Device bytes a fit's row state takes a row: gradients, the partition, and the leaf
/// refits' when it refits (`Some(weighed)`).
pub(super) fn fit_row_bytes(cfg: &TrainConfig, refit: Option<bool>) -> usize {
    Gradients::bytes_per_row(cfg) + RowPartitioner::bytes_per_row() + refit.map_or(0, DeviceRefit::bytes_per_row)
}

/// Where a fit of rows binned on the host keeps its bins on the GPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    /// On the device whole.
    InCore,
    /// In host memory, paged to the device (`pages.rs`).
    Paged(PagePlan),
}

/// Device memory a fit keeps besides its bins and per-row state: histograms (the pool that
/// depth-wise growth reserves, at most 256 MiB; more grows on demand) and scratch.
fn headroom(cfg: &TrainConfig, total_slots: usize) -> usize {
    let slots = 2usize << cfg.max_depth.saturating_sub(2).min(20);
    (32 << 20) + (slots * total_slots * 16 * cfg.num_outputs().max(1)).min(256 << 20)
}

/// A node's histogram slots for features of `cuts` (each bin and the missing one).
fn histogram_slots(cuts: &[FeatureCuts]) -> usize {
    cuts.iter().map(|c| c.n_bins() as usize + 1).sum()
}

/// `max_device_memory` in bytes of this machine's address space.
pub(super) fn device_limit(cfg: &TrainConfig) -> Option<usize> {
    cfg.max_device_memory.map(|l| l.min(usize::MAX as u64) as usize)
}

/// Places the bins of `n` rows of `row_bytes` bytes on the device (`state` more bytes of
/// per-row state, `extra` of histograms and scratch) within `free` bytes, or within `limit`
/// (`max_device_memory`) when lower: whole when all of it fits, else paged from host memory.
/// Says which and why. `POLARS_GBT_PAGE_ROWS` (and `_PAGE_SLOTS`, default 2) page any fit,
/// for tests.
pub fn place_bins(
    n: usize,
    row_bytes: usize,
    state: usize,
    extra: usize,
    free: usize,
    limit: Option<usize>,
) -> Result<(Placement, String)> {
    const MIB: f64 = (1 << 20) as f64;
    let mib = |b: usize| format!("{:.0} MiB", b as f64 / MIB);
    let bins = n * row_bytes;
    if let Some(page_rows) = super::knob::<usize>("POLARS_GBT_PAGE_ROWS").filter(|&r| r > 0) {
        let slots = super::knob::<usize>("POLARS_GBT_PAGE_SLOTS").unwrap_or(pages::MIN_SLOTS).max(1);
        let plan = PagePlan { page_rows, slots: slots.min(n.div_ceil(page_rows)).max(1) };
        return Ok((Placement::Paged(plan), format!("bins paged by POLARS_GBT_PAGE_ROWS: {plan:?}")));
    }
    let (budget, of) = match limit {
        Some(l) if l < free => (l, format!("max_device_memory={}", mib(l))),
        _ => (free, format!("the GPU's free {}", mib(free))),
    };
    if bins + state + extra <= budget {
        let why =
            format!("the bins ({}) and per-row state ({}) fit {of}: the bins are on the GPU", mib(bins), mib(state));
        return Ok((Placement::InCore, why));
    }
    let plan = budget.checked_sub(state + extra).and_then(|left| PagePlan::within(n, row_bytes, left));
    let Some(plan) = plan else {
        return Err(match limit {
            Some(l) if l < free => pages::too_small(budget, state),
            _ => pages::no_room(free, state),
        });
    };
    let pages = plan.n_pages(n);
    let why = format!(
        "the bins ({}) and per-row state ({}) exceed {of}: the bins stay in host memory and go to the GPU in {pages} \
         pages of {}, {} kept there (each pass over the rows copies the other {})",
        mib(bins),
        mib(state),
        mib(plan.page_rows * row_bytes),
        plan.slots,
        pages.saturating_sub(plan.slots)
    );
    Ok((Placement::Paged(plan), why))
}

/// The device bytes a fit of `n` rows with `cuts` and `cfg` takes besides its bins, at most
/// (counting leaf refits' buffers whether or not its loss refits): what [`place_bins`]
/// weighs against the budget with the bins.
pub fn besides_bins_at_most(n: usize, cuts: &[FeatureCuts], cfg: &TrainConfig) -> usize {
    n * fit_row_bytes(cfg, Some(true)) + headroom(cfg, histogram_slots(cuts))
}

/// [`place_bins`] for a fit of `rows` (binned on the host) taking `row_state` device bytes a
/// row besides.
pub fn place_binned(
    rt: &Runtime,
    rows: BinnedView,
    cfg: &TrainConfig,
    row_state: usize,
) -> Result<(Placement, String)> {
    let (n, nf) = (rows.n_rows, rows.cuts().len());
    let width = BinnedMatrix::bin_width(&rows.all.matrix.n_bins);
    let row_bytes = nf.next_multiple_of(4 / width) * width;
    let (free, _) = rt.stream.context().mem_get_info().map_err(device_error)?;
    place_bins(n, row_bytes, n * row_state, headroom(cfg, histogram_slots(rows.cuts())), free, device_limit(cfg))
}

/// Whether a one-GPU fit of `data` (in memory) fits the GPU's free memory, and
/// `max_device_memory` when set: its columns, bins (and their column copy), per-row state,
/// histograms and scratch. One that does not bins its rows on the host and is
/// placed by [`place_binned`] (`engine.rs`).
pub fn fits_in_core(rt: &Runtime, data: &Dataset, cfg: &TrainConfig) -> Result<bool> {
    let (n, nf) = (data.n_rows(), data.features.n_features());
    // Histograms of at most max_bin slots a feature (their cut points are not known yet).
    let extra = headroom(cfg, nf * (cfg.max_bin + 1));
    let need = DeviceColumns::bytes_for(&data.features) + 2 * n * nf + n * fit_row_bytes(cfg, None) + extra;
    let (free, _) = rt.stream.context().mem_get_info().map_err(device_error)?;
    Ok(need <= free.min(device_limit(cfg).unwrap_or(usize::MAX)))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: usize = 1 << 20;

    #[test]
    fn bins_that_fit_stay_whole_and_others_are_paged_within_the_budget() {
        // 10M rows of 28 one-byte bins (267 MiB), 41 bytes of state a row (391 MiB), 40 MiB more.
        let (n, row, state, extra) = (10_000_000, 28, 10_000_000 * 41, 40 * MIB);
        let (placed, why) = place_bins(n, row, state, extra, 80 << 30, None).unwrap();
        assert_eq!(placed, Placement::InCore, "{why}");
        assert!(why.contains("fit the GPU's free"), "{why}");
        let limit = state + extra + 100 * MIB;
        let (placed, why) = place_bins(n, row, state, extra, 80 << 30, Some(limit)).unwrap();
        let Placement::Paged(plan) = placed else { panic!("{why}") };
        assert!(plan.slots >= pages::MIN_SLOTS && plan.slots < plan.n_pages(n), "{plan:?}");
        assert!(plan.slots * plan.page_rows * row <= 100 * MIB, "{plan:?} exceeds the budget");
        assert!(why.contains("max_device_memory=") && why.contains("host memory"), "{why}");
        // The GPU's free memory bounds the fit when it is below the limit.
        let (placed, why) = place_bins(n, row, state, extra, limit, Some(80 << 30)).unwrap();
        assert!(matches!(placed, Placement::Paged(_)) && why.contains("the GPU's free"), "{why}");
        // Too little for the state and two pages: an error naming the parameter, or the GPU's
        // memory when no limit is set.
        let e = place_bins(n, row, state, extra, 80 << 30, Some(state)).unwrap_err().to_string();
        assert!(e.contains("`max_device_memory`") && e.contains("too small"), "{e}");
        let e = place_bins(n, row, state, extra, state, None).unwrap_err().to_string();
        assert!(e.contains("out of memory") && !e.contains("max_device_memory"), "{e}");
    }

    #[test]
    fn page_plans_hold_whole_rows_and_at_least_two_slots() {
        for (n, row, budget) in [(1_000_000, 32, 20 * MIB), (50_000_000, 28, 1 << 30), (200_000, 64, 6 * MIB)] {
            let plan = PagePlan::within(n, row, budget).unwrap();
            assert!(plan.slots >= 2 && plan.slots * plan.page_rows * row <= budget, "{plan:?}");
            assert!(plan.slots <= plan.n_pages(n), "{plan:?}");
        }
        assert_eq!(PagePlan::within(1_000_000, 32, MIB), None);
    }
}
