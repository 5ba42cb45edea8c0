//! The category lists the categorical searches walk (the scalar one in `categorical`, the
//! vector-leaf one in `tree::split_vector`): the categories present in a node, a branch-free
//! filter of them, and their order by weight, sorted only at the ends a search reads. Each is
//! a hot step of a node's search over a column of thousands of categories, hence the care
//! over branches and sorts.

use super::HistSlot;

/// The positions of `bins`' non-empty slots, in order: a categorical feature's categories
/// that hold rows in the node. A column of thousands of categories is scanned in every node,
/// most of it empty at depth; with AVX-512 (checked at run time) sixteen slots are tested and
/// their positions written by one compressing store (with AVX2, eight and a permutation),
/// where the portable filter spends a few instructions a slot.
pub(crate) fn present_slots<S: HistSlot>(bins: &[S]) -> Vec<u32> {
    present_slots_at(crate::simd::level(), bins)
}

/// [`present_slots`] with the vector instructions of `level`, which the CPU must have.
fn present_slots_at<S: HistSlot>(level: crate::simd::Level, bins: &[S]) -> Vec<u32> {
    let mut out: Vec<u32> = (0..bins.len() as u32).collect();
    #[cfg(target_arch = "x86_64")]
    {
        use crate::simd::Level;
        let n = match level {
            // SAFETY: the CPU has the level's features (the caller's promise); `out` is as
            // long as `bins`.
            Level::Avx512 => Some(unsafe { present_slots_avx512::<S>(S::words(bins), &mut out) }),
            // SAFETY: as above.
            Level::Avx2 => Some(unsafe { present_slots_avx2::<S>(S::words(bins), &mut out) }),
            Level::Baseline => None,
        };
        if let Some(n) = n {
            out.truncate(n);
            return out;
        }
    }
    let _ = level;
    retain_branch_free(&mut out, |c| !bins[c as usize].sum().is_zero());
    out
}

/// Writes the positions of the non-empty slots among `words` (`S::WORDS` a slot, one or two)
/// to the front of `out` and returns their count: sixteen slots from one or two loads a
/// word of a slot, a bit a nonzero word (a two-word slot's pair of bits folded by `pext`), the
/// positions written by one compressing store.
///
/// # Safety
/// Needs AVX-512F and BMI2, and `out` as long as the slots.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,bmi2")]
unsafe fn present_slots_avx512<S: HistSlot>(words: &[u64], out: &mut [u32]) -> usize {
    use std::arch::x86_64::*;
    let per_slot = S::WORDS;
    debug_assert!(matches!(per_slot, 1 | 2) && out.len() * per_slot >= words.len());
    let n_slots = words.len() / per_slot;
    let lanes = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    let (mut n, mut c) = (0usize, 0usize);
    while c + 16 <= n_slots {
        let mut nonzero = 0u32;
        for q in 0..2 * per_slot {
            // SAFETY: the 16 * per_slot words from c * per_slot are inside `words`.
            let v = unsafe { _mm512_loadu_si512(words.as_ptr().add(c * per_slot + 8 * q) as *const __m512i) };
            nonzero |= (_mm512_test_epi64_mask(v, v) as u32) << (8 * q);
        }
        let present = match per_slot {
            1 => nonzero as u16,
            _ => _pext_u32(nonzero | (nonzero >> 1), 0x5555_5555) as u16,
        };
        let k = present.count_ones() as usize;
        // SAFETY: n <= c, so the k positions land at out[n..n + k] with n + k <= c + 16.
        unsafe {
            _mm512_mask_storeu_epi32(
                out.as_mut_ptr().add(n) as *mut i32,
                ((1u32 << k) - 1) as u16,
                _mm512_maskz_compress_epi32(present, _mm512_add_epi32(lanes, _mm512_set1_epi32(c as i32))),
            )
        };
        n += k;
        c += 16;
    }
    for slot in c..n_slots {
        out[n] = slot as u32;
        n += words[slot * per_slot..(slot + 1) * per_slot].iter().any(|&w| w != 0) as usize;
    }
    n
}

/// [`present_slots_avx512`] eight slots a step with AVX2: a slot's words compared with zero,
/// the lanes' bits gathered (`movemask`, a two-word slot's pair folded by `pext`), and the
/// positions moved to the front by the permutation of their mask (`simd::COMPACT8`), stored
/// whole into places at or past the count.
///
/// # Safety
/// Needs AVX2 and BMI2, and `out` as long as the slots.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,bmi2")]
unsafe fn present_slots_avx2<S: HistSlot>(words: &[u64], out: &mut [u32]) -> usize {
    use std::arch::x86_64::*;
    let per_slot = S::WORDS;
    debug_assert!(matches!(per_slot, 1 | 2) && out.len() * per_slot >= words.len());
    let n_slots = words.len() / per_slot;
    let lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    let (mut n, mut c) = (0usize, 0usize);
    while c + 8 <= n_slots {
        let mut nonzero = 0u32;
        for q in 0..2 * per_slot {
            // SAFETY: the 8 * per_slot words from c * per_slot are inside `words`.
            let v = unsafe { _mm256_loadu_si256(words.as_ptr().add(c * per_slot + 4 * q) as *const __m256i) };
            let zero = _mm256_movemask_pd(_mm256_castsi256_pd(_mm256_cmpeq_epi64(v, _mm256_setzero_si256())));
            nonzero |= (!zero as u32 & 0xf) << (4 * q);
        }
        let present = match per_slot {
            1 => nonzero,
            _ => _pext_u32(nonzero | (nonzero >> 1), 0x5555),
        };
        let order = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(crate::simd::COMPACT8[present as usize] as i64));
        let positions = _mm256_permutevar8x32_epi32(_mm256_add_epi32(lanes, _mm256_set1_epi32(c as i32)), order);
        // SAFETY: n <= c and c + 8 <= n_slots <= out.len(): the eight places from n are inside
        // `out`; those past the k present ones are overwritten later or cut off.
        unsafe { _mm256_storeu_si256(out.as_mut_ptr().add(n) as *mut __m256i, positions) };
        n += present.count_ones() as usize;
        c += 8;
    }
    for slot in c..n_slots {
        out[n] = slot as u32;
        n += words[slot * per_slot..(slot + 1) * per_slot].iter().any(|&w| w != 0) as usize;
    }
    n
}

/// `items.retain(keep)` without a branch on `keep`: every item is written to the next kept
/// place and only the count advances where it is kept. A deep node's few rows leave a long
/// category list patchy, and the branch of a plain filter mispredicted about every other slot
/// (the 3,960 categories of a column, in every node).
pub(crate) fn retain_branch_free(items: &mut Vec<u32>, keep: impl Fn(u32) -> bool) {
    let mut n = 0;
    for i in 0..items.len() {
        let c = items[i];
        items[n] = c;
        n += keep(c) as usize;
    }
    items.truncate(n);
}

/// `categories` ordered by `weight`, ties by category, each weight computed once rather than
/// twice a comparison (a weight is a division; a column of thousands of categories sorts in
/// every node). The keys are distinct, so the order is the one order. Only the first and
/// last `ends` positions are put in that order, the rest lie between them in no order: the
/// searches consider only prefixes of at most `ends` categories, or all but at most `ends`,
/// and read a prefix as a set; selecting the ends is linear where a sort of thousands of
/// categories was the longest step of a node's search.
pub(crate) fn sorted_by_weight(categories: &[u32], weight: impl Fn(u32) -> f64, ends: usize) -> Vec<u32> {
    let mut keyed: Vec<(f64, u32)> = categories.iter().map(|&c| (weight(c), c)).collect();
    let order = |a: &(f64, u32), b: &(f64, u32)| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1));
    let n = keyed.len();
    if n <= 2 * ends.saturating_add(1) {
        keyed.sort_unstable_by(order);
    } else if ends > 0 {
        // The `ends` lightest first, then the `ends` heaviest last, each then sorted.
        keyed.select_nth_unstable_by(ends, order);
        keyed[..ends].sort_unstable_by(order);
        let rest = &mut keyed[ends..];
        let at = rest.len() - ends;
        rest.select_nth_unstable_by(at, order);
        rest[at..].sort_unstable_by(order);
    }
    keyed.into_iter().map(|(_, c)| c).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::simd::{available, Level};
    use crate::tree::gradient::GradSum;

    /// The first and last `ends` positions are the full sort's, the rest the same set.
    #[test]
    fn sorting_only_the_ends_keeps_the_full_orders_ends() {
        use crate::random::Rng;
        let mut rng = Rng::new(5, 0);
        for (n, ends) in [(3960usize, 64usize), (200, 64), (130, 64), (129, 64), (10, 0), (1000, 1), (50, 3)] {
            let categories: Vec<u32> = (0..n as u32).map(|c| c * 3 + 1).collect();
            // Few distinct weights: many ties, broken by category.
            let weights: Vec<f64> = (0..n).map(|_| (rng.next_u64() % 17) as f64 - 8.0).collect();
            let weight = |c: u32| weights[((c - 1) / 3) as usize];
            let full = sorted_by_weight(&categories, weight, n);
            let got = sorted_by_weight(&categories, weight, ends);
            let e = ends.min(n);
            assert_eq!(got[..e], full[..e], "n {n}, ends {ends}");
            assert_eq!(got[n - e..], full[n - e..], "n {n}, ends {ends}");
            let (mut a, mut b) = (got.clone(), full.clone());
            a.sort_unstable();
            b.sort_unstable();
            assert_eq!(a, b);
        }
    }

    /// The branch-free filter keeps what `retain` keeps, in order.
    #[test]
    fn branch_free_retain_equals_retain() {
        let mut rng = crate::random::Rng::new(5, 1);
        for len in [0usize, 1, 7, 300] {
            let items: Vec<u32> = (0..len).map(|_| rng.below(50) as u32).collect();
            for cut in [0u32, 10, 25, 50] {
                let (mut got, mut want) = (items.clone(), items.clone());
                retain_branch_free(&mut got, |c| c >= cut);
                want.retain(|&c| c >= cut);
                assert_eq!(got, want, "{len} items, cut {cut}");
            }
        }
    }

    /// The vector scans of present slots (each level the CPU has) list what the plain filter
    /// lists: slots empty, with only a gradient, only a hessian, or both; lengths around the
    /// eight- and sixteen-slot blocks.
    #[test]
    fn present_slots_equal_the_plain_filter() {
        let mut rng = crate::random::Rng::new(9, 2);
        for len in [0usize, 1, 7, 8, 9, 15, 16, 17, 100, 3961] {
            let bins: Vec<GradSum> = (0..len)
                .map(|_| match rng.below(5) {
                    0 => GradSum { g: rng.below(9) as i64 - 4, h: 0 },
                    1 => GradSum { g: 0, h: rng.below(3) as i64 },
                    2 => GradSum { g: -(1 << 40), h: 1 << 33 },
                    _ => GradSum::default(),
                })
                .collect();
            let want: Vec<u32> = (0..len as u32).filter(|&c| bins[c as usize] != GradSum::default()).collect();
            for level in [Level::Baseline, Level::Avx2, Level::Avx512].into_iter().filter(|&l| l <= available()) {
                assert_eq!(present_slots_at(level, &bins), want, "{level:?}, {len} slots");
            }
        }
    }
}
