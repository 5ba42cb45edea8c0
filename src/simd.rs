//! Which vector instructions the CPU's hot loops run with, chosen once a process at run time:
//! AVX-512 where the CPU has it (F, DQ and BMI2), else AVX2 with FMA, else the baseline target
//! (which steps 2 or 4 lanes). Most loops are one portable body compiled once for each level
//! (`#[target_feature]` twins of the same function); the partition's and the category listing's
//! compressing stores are written for AVX-512 alone. The bodies use no fused or reassociated
//! arithmetic, so every level gives the same bits: tests/simd_levels.rs compares the model
//! bytes of each level the machine can run.
//!
//! `POLARS_GBT_SIMD=avx2` or `=baseline` caps the level, to measure a path on a CPU that has a
//! higher one, or to step around a CPU's fault.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::OnceLock;

/// A set of vector instructions, lowest first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    Baseline = 0,
    /// AVX2, FMA and BMI2 (Haswell, Zen and later).
    Avx2 = 1,
    /// AVX-512 F and DQ, and BMI2 (Skylake-SP, Ice Lake, Zen 4 and later).
    Avx512 = 2,
}

/// No level forced.
const UNFORCED: u8 = u8::MAX;
static FORCED: AtomicU8 = AtomicU8::new(UNFORCED);

/// The level the hot loops run with now.
#[inline]
pub fn level() -> Level {
    match FORCED.load(Ordering::Relaxed) {
        0 => Level::Baseline,
        1 => Level::Avx2,
        2 => Level::Avx512,
        _ => available(),
    }
}

/// The highest level this CPU has, capped by `POLARS_GBT_SIMD`.
pub fn available() -> Level {
    static DETECTED: OnceLock<Level> = OnceLock::new();
    *DETECTED.get_or_init(|| {
        let cap = match std::env::var("POLARS_GBT_SIMD").as_deref() {
            Ok("baseline") => Level::Baseline,
            Ok("avx2") => Level::Avx2,
            _ => Level::Avx512,
        };
        detect().min(cap)
    })
}

#[cfg(target_arch = "x86_64")]
fn detect() -> Level {
    use std::is_x86_feature_detected as has;
    if has!("avx512f") && has!("avx512dq") && has!("bmi2") {
        Level::Avx512
    } else if has!("avx2") && has!("fma") && has!("bmi2") {
        Level::Avx2
    } else {
        Level::Baseline
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn detect() -> Level {
    Level::Baseline
}

/// Runs the hot loops at `level` from now on (at most the [available] one: a higher level is
/// taken as the available), or at the available level again with None. For tests comparing
/// the levels; it is process-wide, so such a test runs alone in its binary.
#[doc(hidden)]
pub fn force(level: Option<Level>) {
    let value = level.map_or(UNFORCED, |l| l.min(available()) as u8);
    FORCED.store(value, Ordering::Relaxed);
}

/// For each mask of eight lanes, the lanes it holds in order, then the others, as bytes: the
/// permutation (for `_mm256_permutevar8x32_epi32`, widened by `_mm256_cvtepu8_epi32`) that
/// moves the masked lanes to the front of an AVX2 vector, where AVX-512 has a compressing
/// store. The partition and the category listing use it.
#[cfg(target_arch = "x86_64")]
pub const COMPACT8: [u64; 256] = {
    let mut table = [0u64; 256];
    let mut mask = 0;
    while mask < 256 {
        let (mut packed, mut at, mut lane) = (0u64, 0, 0);
        while lane < 8 {
            if mask & (1 << lane) != 0 {
                packed |= (lane as u64) << (8 * at);
                at += 1;
            }
            lane += 1;
        }
        lane = 0;
        while lane < 8 {
            if mask & (1 << lane) == 0 {
                packed |= (lane as u64) << (8 * at);
                at += 1;
            }
            lane += 1;
        }
        table[mask] = packed;
        mask += 1;
    }
    table
};
