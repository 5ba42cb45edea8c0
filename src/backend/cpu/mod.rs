//! The rayon CPU backend: histograms, row partitioning, tree growth and prediction.

pub mod engine;
pub mod grow;
mod heap_simd;
pub mod histogram;
pub mod learner;
pub mod memory;
mod node_layout;
pub mod partition;
mod partition_simd;
pub mod predict;
pub mod shap;

pub use grow::{CpuNode, CpuSteps};
pub use learner::CpuLearner;

/// A hint to load the cache line at `p` soon; it never faults, so any address is fine.
#[inline(always)]
pub(crate) fn prefetch_read<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: prefetching is a hint with no architectural effect; it cannot fault.
    unsafe {
        core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(p as *const i8);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}
