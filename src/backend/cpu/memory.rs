//! Whether a CPU fit fits in memory, decided before it allocates anything large: a fit that
//! cannot fit fails at once with the numbers, instead of being killed by the kernel later.

use crate::error::{Error, Result};

const GIB: f64 = (1u64 << 30) as f64;

/// Bytes a CPU fit allocates besides its input columns: the bins (row-major, `bin_width`
/// bytes each), and per row its gradient pair and margin per output (the pair is quantised in
/// place) and its row-index slot.
pub fn fit_bytes(n_rows: usize, n_features: usize, bin_width: usize, n_outputs: usize) -> u64 {
    let bins = n_rows as u64 * n_features as u64 * bin_width as u64;
    let per_row = n_outputs as u64 * (8 + 4) + 4;
    bins + n_rows as u64 * per_row
}

/// Memory available to this process: `POLARS_GBT_MEMORY_LIMIT` (bytes) when set, else the
/// smaller of the kernel's MemAvailable and the cgroup's limit; None where neither is known.
pub fn available_bytes() -> Option<u64> {
    if let Some(v) = std::env::var("POLARS_GBT_MEMORY_LIMIT").ok().and_then(|v| v.trim().parse::<u64>().ok()) {
        return Some(v);
    }
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok().and_then(|text| {
        let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
        let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
        Some(kib * 1024)
    });
    let cgroup = std::fs::read_to_string("/sys/fs/cgroup/memory.max").ok().and_then(|limit| {
        let limit: u64 = limit.trim().parse().ok()?; // "max" means none
        let used: u64 = std::fs::read_to_string("/sys/fs/cgroup/memory.current").ok()?.trim().parse().ok()?;
        Some(limit.saturating_sub(used))
    });
    match (meminfo, cgroup) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// Fails when a fit needing `needed` bytes more cannot fit in what is available.
pub fn check_fits(needed: u64, n_rows: usize, n_features: usize) -> Result<()> {
    match available_bytes() {
        Some(free) if needed > free => Err(Error::data(format!(
            "a CPU fit of {n_rows} rows x {n_features} features needs about {:.2} GiB more memory \
             (binned features and per-row state) but {:.2} GiB are available; train on fewer rows \
             (or a sample), fewer features, or max_bin <= 256",
            needed as f64 / GIB,
            free as f64 / GIB
        ))),
        _ => Ok(()),
    }
}
