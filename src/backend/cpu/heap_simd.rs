//! The walk of a complete-layout tree (see `predict.rs`; its nodes are in `node_layout.rs`)
//! eight rows at a time with AVX2 gathers: per step, one gather of the nodes' features, one of
//! their thresholds and one of the rows' values, then `i = 2i + 2 - goes_left` in vector
//! lanes. The rows of a block are walked as independent groups of eight, so the gathers of
//! different groups overlap.
//! Used when the CPU has AVX2 (checked at run time); the scalar walk is the fallback and the
//! oracle in the tests below.

use super::node_layout::{HeapNode, DEFAULT_LEFT, FEATURE_MASK};

/// Leaf slots (relative to the tree) that the rows of `block` (`nf` values per row) reach
/// after `depth` steps from the root of `nodes`; fills `at`. Returns false, doing nothing,
/// when AVX2 is unavailable.
///
/// # Safety
/// Every node's feature index must be below `nf` (the forest checks this once, when it is
/// laid out); the gathers read `block` at those indices unchecked.
pub unsafe fn walk(nodes: &[HeapNode], depth: u32, block: &[f32], nf: usize, at: &mut [u32]) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        if crate::simd::level() >= crate::simd::Level::Avx2 {
            assert!(block.len() >= at.len() * nf);
            assert!(nodes.len() >= (1usize << (depth + 1)) - 1);
            assert!(at.len() * nf < i32::MAX as usize);
            // SAFETY: AVX2 is present (checked above); the asserts and the caller's promise
            // on feature indices give what `walk_avx2` relies on for its gathers.
            unsafe { walk_avx2(nodes, depth, block, nf, at) };
            return true;
        }
    }
    let _ = (nodes, depth, block, nf, at);
    false
}

/// Scalar walk of the same layout (the fallback and the tests' oracle).
pub fn walk_scalar(nodes: &[HeapNode], depth: u32, block: &[f32], nf: usize, at: &mut [u32]) {
    at.fill(0);
    for _ in 0..depth {
        for (r, idx) in at.iter_mut().enumerate() {
            let n = nodes[*idx as usize];
            let x = block[r * nf + (n.feature & FEATURE_MASK) as usize];
            let left = (x < n.threshold) | (x.is_nan() & (n.feature & DEFAULT_LEFT != 0));
            *idx = 2 * *idx + 2 - left as u32;
        }
    }
}

/// # Safety
/// Needs AVX2, `nodes` holding a complete tree of `depth` (2^(depth+1) - 1 slots), every
/// feature index below `nf`, and `block` holding `at.len()` rows of `nf` values.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn walk_avx2(nodes: &[HeapNode], depth: u32, block: &[f32], nf: usize, at: &mut [u32]) {
    use std::arch::x86_64::*;
    const GROUPS: usize = 8;
    let full = at.len() / 8;
    let node_words = nodes.as_ptr() as *const i32;
    let lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    let mask = _mm256_set1_epi32(FEATURE_MASK as i32);
    let two = _mm256_set1_epi32(2);
    let mut g0 = 0;
    while g0 < full {
        let groups = GROUPS.min(full - g0);
        let mut idx = [_mm256_setzero_si256(); GROUPS];
        // Offset of each lane's row in `block`.
        let mut row_base = [_mm256_setzero_si256(); GROUPS];
        for (g, base) in row_base.iter_mut().enumerate().take(groups) {
            let first = ((g0 + g) * 8 * nf) as i32;
            *base = _mm256_add_epi32(_mm256_set1_epi32(first), _mm256_mullo_epi32(lanes, _mm256_set1_epi32(nf as i32)));
        }
        for _ in 0..depth {
            for g in 0..groups {
                // Node i's feature word is at 2i, its threshold at 2i + 1 (8-byte nodes).
                let word = _mm256_slli_epi32(idx[g], 1);
                let feature = _mm256_i32gather_epi32::<4>(node_words, word);
                let threshold = _mm256_i32gather_ps::<4>(node_words.add(1) as *const f32, word);
                let offset = _mm256_add_epi32(row_base[g], _mm256_and_si256(feature, mask));
                let x = _mm256_i32gather_ps::<4>(block.as_ptr(), offset);
                let below = _mm256_castps_si256(_mm256_cmp_ps::<_CMP_LT_OQ>(x, threshold));
                let missing = _mm256_castps_si256(_mm256_cmp_ps::<_CMP_UNORD_Q>(x, x));
                // DEFAULT_LEFT is the top bit: an arithmetic shift makes it a lane mask.
                let default_left = _mm256_srai_epi32::<31>(feature);
                let left = _mm256_or_si256(below, _mm256_and_si256(missing, default_left));
                // 2i + 2 - goes_left, with goes_left as -1 / 0 lanes.
                idx[g] = _mm256_add_epi32(_mm256_add_epi32(word, two), left);
            }
        }
        for (g, v) in idx.iter().enumerate().take(groups) {
            _mm256_storeu_si256(at.as_mut_ptr().add((g0 + g) * 8) as *mut __m256i, *v);
        }
        g0 += groups;
    }
    // The last rows of a block that do not fill a vector.
    let done = full * 8;
    walk_scalar(nodes, depth, &block[done * nf..], nf, &mut at[done..]);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::random::Rng;

    #[test]
    fn vector_walk_equals_scalar_walk() {
        let mut rng = Rng::new(5, 1);
        for depth in [1u32, 3, 8] {
            let nf = 5;
            let size = (1usize << (depth + 1)) - 1;
            let nodes: Vec<HeapNode> = (0..size)
                .map(|_| HeapNode {
                    feature: rng.below(nf) as u32 | if rng.below(2) == 0 { DEFAULT_LEFT } else { 0 },
                    threshold: rng.below(200) as f32 / 100.0 - 1.0,
                })
                .collect();
            for rows in [1usize, 8, 13, 64, 71] {
                let block: Vec<f32> = (0..rows * nf)
                    .map(|_| if rng.below(10) == 0 { f32::NAN } else { rng.below(200) as f32 / 100.0 - 1.0 })
                    .collect();
                let mut want = vec![0u32; rows];
                walk_scalar(&nodes, depth, &block, nf, &mut want);
                let mut got = vec![u32::MAX; rows];
                // SAFETY: every feature index is below nf by construction.
                if unsafe { walk(&nodes, depth, &block, nf, &mut got) } {
                    assert_eq!(got, want, "depth {depth}, {rows} rows");
                }
            }
        }
    }
}
