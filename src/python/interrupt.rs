//! Ctrl-C for fits: plugins run on Polars' threads, where Python's signals never arrive, so
//! Python calls [`interrupt_fits`] on KeyboardInterrupt and every running fit, which kept the
//! count it started with, stops at its next round or batch.

use std::sync::atomic::{AtomicU64, Ordering};

use pyo3::prelude::*;

/// Bumped by every interrupt; fits remember the value they started with.
static INTERRUPTS: AtomicU64 = AtomicU64::new(0);

/// The interrupt count now: a fit that started at another count was interrupted.
pub(super) fn interrupt_epoch() -> u64 {
    INTERRUPTS.load(Ordering::SeqCst)
}

/// Makes every fit running now stop after its current round (or batch, while it streams).
#[pyfunction]
pub(super) fn interrupt_fits() {
    INTERRUPTS.fetch_add(1, Ordering::SeqCst);
}
