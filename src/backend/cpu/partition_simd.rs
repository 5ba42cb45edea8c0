//! The partition of a node's rows by one split of the bins, sixteen rows at a time with
//! AVX-512: one gather of the rows' bins of the split feature, the split's test as lane masks,
//! and the left and right rows written by two compressing stores. The row-by-row loop
//! (`partition::partition_in_place`) spent about ten cycles a row on its loads, tests and
//! branch-free double writes; this does the same work in a few instructions per sixteen rows.
//! With AVX2 (no compressing store, no unsigned compares) eight rows a step: the same gather and
//! test, and each side's rows moved to the front of the vector by a permutation looked up from
//! the lane mask (`simd::COMPACT8`). Chosen by `simd::level()`; the row loop is the fallback and the
//! oracle in the tests below.

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::__m512i;

/// The integer types of bin ids (u8, u16, u32: plain bytes, no padding), read by the gather
/// as bytes.
pub(crate) trait BinId: Copy + Into<u32> + Sync {}
impl BinId for u8 {}
impl BinId for u16 {}
impl BinId for u32 {}

/// The bytes of `bins`, each value `size_of::<B>()` bytes little-endian.
pub(crate) fn as_bytes<B: BinId>(bins: &[B]) -> &[u8] {
    // SAFETY: B is u8, u16 or u32 (the only implementors): every byte of a value is
    // initialised, and the view borrows `bins` for as long as it lives.
    unsafe { std::slice::from_raw_parts(bins.as_ptr() as *const u8, std::mem::size_of_val(bins)) }
}

/// Which bins one split sends left: the rule the row loop applies a row at a time and the
/// vector partition sixteen lanes at a time.
#[derive(Clone, Copy, Debug)]
pub struct BinTest<'a> {
    /// The missing values' bin, which goes `default_left`.
    pub missing: u32,
    /// A numeric split sends bins up to this one left.
    pub split_bin: u32,
    pub default_left: bool,
    /// A categorical split's left-going bin set, one bit a bin (bins past it go right).
    pub categories: Option<&'a [u32]>,
}

impl BinTest<'_> {
    #[inline]
    pub fn goes_left(&self, bin: u32) -> bool {
        if bin == self.missing {
            self.default_left
        } else if let Some(words) = self.categories {
            words.get(bin as usize / 32).is_some_and(|w| w & (1 << (bin % 32)) != 0)
        } else {
            bin <= self.split_bin
        }
    }
}

/// One split as the vector partition reads it.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code, reason = "the vector partition is x86-64's"))]
pub struct BinSplit<'a> {
    /// The bin matrix's bytes from the split feature's first value on: row `r`'s bin is the
    /// `width`-byte little-endian value at `r * stride * width`.
    pub bytes: &'a [u8],
    /// Bytes per bin: 1, 2 or 4.
    pub width: usize,
    /// Values per row.
    pub stride: usize,
    pub test: BinTest<'a>,
}

/// Partitions `rows` stably in place by `split`: the left rows in order at the front, the
/// right rows in order in `right` (as long as `rows`); returns the left count. Rows whose
/// gather could reach past the bins go through `goes_left` (the row loop's test, which checks
/// its bounds). None, touching nothing, where the CPU lacks AVX-512 or the bins exceed 32-bit
/// offsets.
pub fn partition(
    split: &BinSplit,
    rows: &mut [u32],
    right: &mut [u32],
    goes_left: impl Fn(u32) -> bool,
) -> Option<usize> {
    assert!(right.len() >= rows.len() && matches!(split.width, 1 | 2 | 4));
    partition_at(crate::simd::level(), split, rows, right, goes_left)
}

/// [`partition`] with the vector instructions of `level`, which the CPU must have.
fn partition_at(
    level: crate::simd::Level,
    split: &BinSplit,
    rows: &mut [u32],
    right: &mut [u32],
    goes_left: impl Fn(u32) -> bool,
) -> Option<usize> {
    #[cfg(target_arch = "x86_64")]
    {
        use crate::simd::Level;
        let row_bytes = split.stride * split.width;
        if split.bytes.len() < i32::MAX as usize && row_bytes > 0 {
            match level {
                // SAFETY: the CPU has AVX-512F (the caller's level), every offset fits an i32
                // (the bins are shorter than i32::MAX bytes), and `right` is as long as `rows`.
                Level::Avx512 => return Some(unsafe { partition_avx512(split, rows, right, goes_left) }),
                // SAFETY: as above, with AVX2.
                Level::Avx2 => return Some(unsafe { partition_avx2(split, rows, right, goes_left) }),
                Level::Baseline => {}
            }
        }
    }
    let _ = (level, split, rows, right, goes_left);
    None
}

/// [`partition_avx512`] eight rows a step with AVX2.
///
/// # Safety
/// Needs AVX2, `split.bytes` shorter than `i32::MAX`, `split.stride * split.width > 0`, and
/// `right` at least as long as `rows`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn partition_avx2(
    split: &BinSplit,
    rows: &mut [u32],
    right: &mut [u32],
    goes_left: impl Fn(u32) -> bool,
) -> usize {
    use std::arch::x86_64::*;
    // SAFETY: the caller's promises are LaneTest8::new's.
    let test = unsafe { LaneTest8::new(split) };
    let (n, rows_at, right_at) = (rows.len(), rows.as_mut_ptr(), right.as_mut_ptr());
    let (mut n_left, mut n_right, mut i) = (0usize, 0usize, 0usize);
    while i + 8 <= n {
        if i + 16 + AHEAD <= n {
            // SAFETY: i + 16 + AHEAD <= n: the sixteen rows ahead are inside `rows`.
            unsafe { prefetch_bins(split, rows_at.add(i + AHEAD)) };
        }
        // SAFETY: i + 8 <= n: the eight rows are inside `rows`.
        let block = unsafe { _mm256_loadu_si256(rows_at.add(i) as *const __m256i) };
        let left = if test.needs_check(block) {
            // SAFETY: i + 8 <= n.
            (0..8).fold(0u32, |m, k| m | (goes_left(unsafe { *rows_at.add(i + k) }) as u32) << k)
        } else {
            // SAFETY: needs_check is false: every row of the block may be gathered.
            unsafe { test.left_lanes(block) }
        };
        let k = left.count_ones() as usize;
        let order = |mask: u32| _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(crate::simd::COMPACT8[mask as usize] as i64));
        // SAFETY: n_left <= i, so the eight slots from n_left are ones already read (this
        // block's included, held in `block`); the slots past the left rows are overwritten
        // later or lie past the node's left count. n_right + 8 <= i + 8 <= right.len().
        unsafe {
            _mm256_storeu_si256(rows_at.add(n_left) as *mut __m256i, _mm256_permutevar8x32_epi32(block, order(left)));
            _mm256_storeu_si256(
                right_at.add(n_right) as *mut __m256i,
                _mm256_permutevar8x32_epi32(block, order(!left & 0xff)),
            );
        }
        n_left += k;
        n_right += 8 - k;
        i += 8;
    }
    partition_rest(rows, right, i, (n_left, n_right), goes_left)
}

/// [`LaneTest`] in eight AVX2 lanes. AVX2 has no unsigned compare: `a <= b` is
/// `max(a, b) == b`.
#[cfg(target_arch = "x86_64")]
struct LaneTest8 {
    base: *const i32,
    step: std::arch::x86_64::__m256i,
    value_mask: std::arch::x86_64::__m256i,
    limit: std::arch::x86_64::__m256i,
    all_checked: bool,
    missing: std::arch::x86_64::__m256i,
    split_bin: std::arch::x86_64::__m256i,
    default_left: std::arch::x86_64::__m256i,
    words: *const i32,
    word_count: std::arch::x86_64::__m256i,
}

#[cfg(target_arch = "x86_64")]
impl LaneTest8 {
    /// # Safety
    /// Needs AVX2 and `split.stride * split.width > 0`.
    #[target_feature(enable = "avx2")]
    unsafe fn new(split: &BinSplit) -> Self {
        use std::arch::x86_64::*;
        let row_bytes = split.stride * split.width;
        let last_row = match split.bytes.len().checked_sub(4) {
            Some(room) => (room / row_bytes).min(u32::MAX as usize) as u32,
            None => 0,
        };
        let (words, n_words) = match split.test.categories {
            Some(w) => (w.as_ptr() as *const i32, w.len()),
            None => (std::ptr::null(), 0),
        };
        LaneTest8 {
            base: split.bytes.as_ptr() as *const i32,
            step: _mm256_set1_epi32(row_bytes as i32),
            value_mask: _mm256_set1_epi32(match split.width {
                1 => 0xff,
                2 => 0xffff,
                _ => -1,
            }),
            limit: _mm256_set1_epi32(last_row as i32),
            all_checked: split.bytes.len() < 4,
            missing: _mm256_set1_epi32(split.test.missing as i32),
            split_bin: _mm256_set1_epi32(split.test.split_bin as i32),
            default_left: _mm256_set1_epi32(if split.test.default_left { -1 } else { 0 }),
            words,
            word_count: _mm256_set1_epi32(n_words.min(i32::MAX as usize) as i32),
        }
    }

    /// Whether a row of `block` must take the checked path: its gather could pass the end.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn needs_check(&self, block: std::arch::x86_64::__m256i) -> bool {
        use std::arch::x86_64::*;
        // A row above the limit makes max(row, limit) differ from the limit.
        let within = _mm256_cmpeq_epi32(_mm256_max_epu32(block, self.limit), self.limit);
        self.all_checked || _mm256_movemask_epi8(within) != -1
    }

    /// The lanes of `block` whose rows go left, as the low eight bits.
    ///
    /// # Safety
    /// Needs AVX2, and every row of `block` at most the last row a gather may read.
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn left_lanes(&self, block: std::arch::x86_64::__m256i) -> u32 {
        use std::arch::x86_64::*;
        // SAFETY: every row r of the block is at most last_row, so its four bytes at
        // r * row_bytes lie inside the bins, and the offset is below i32::MAX.
        let raw = unsafe { _mm256_i32gather_epi32::<1>(self.base, _mm256_mullo_epi32(block, self.step)) };
        let bin = _mm256_and_si256(raw, self.value_mask);
        let is_missing = _mm256_cmpeq_epi32(bin, self.missing);
        let present_left = if self.words.is_null() {
            _mm256_cmpeq_epi32(_mm256_max_epu32(bin, self.split_bin), self.split_bin)
        } else {
            let word = _mm256_srli_epi32::<5>(bin);
            // word < word_count: max(word, count) is not the word.
            let outside = _mm256_cmpeq_epi32(_mm256_max_epu32(word, self.word_count), word);
            let inside = _mm256_andnot_si256(outside, _mm256_set1_epi32(-1));
            // SAFETY: only lanes whose word index is below the set's length are read.
            let w = unsafe { _mm256_mask_i32gather_epi32::<4>(_mm256_setzero_si256(), self.words, word, inside) };
            let bit = _mm256_and_si256(
                _mm256_srlv_epi32(w, _mm256_and_si256(bin, _mm256_set1_epi32(31))),
                _mm256_set1_epi32(1),
            );
            _mm256_cmpeq_epi32(bit, _mm256_set1_epi32(1))
        };
        let left = _mm256_or_si256(
            _mm256_and_si256(is_missing, self.default_left),
            _mm256_andnot_si256(is_missing, present_left),
        );
        _mm256_movemask_ps(_mm256_castsi256_ps(left)) as u32
    }
}

/// Rows ahead of the block whose bins are fetched into cache.
#[cfg(target_arch = "x86_64")]
const AHEAD: usize = 32;

/// # Safety
/// Needs AVX-512F, `split.bytes` shorter than `i32::MAX`, `split.stride * split.width > 0`,
/// and `right` at least as long as `rows`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn partition_avx512(
    split: &BinSplit,
    rows: &mut [u32],
    right: &mut [u32],
    goes_left: impl Fn(u32) -> bool,
) -> usize {
    use std::arch::x86_64::*;
    // SAFETY: the caller's promises are LaneTest::new's.
    let test = unsafe { LaneTest::new(split) };
    let (n, rows_at, right_at) = (rows.len(), rows.as_mut_ptr(), right.as_mut_ptr());
    let (mut n_left, mut n_right, mut i) = (0usize, 0usize, 0usize);
    while i + 16 <= n {
        if i + 16 + AHEAD <= n {
            // SAFETY: i + 16 + AHEAD <= n: the sixteen rows ahead are inside `rows`.
            unsafe { prefetch_bins(split, rows_at.add(i + AHEAD)) };
        }
        // SAFETY: i + 16 <= n: the sixteen rows are inside `rows`.
        let block = unsafe { _mm512_loadu_si512(rows_at.add(i) as *const __m512i) };
        let left = if test.needs_check(block) {
            // A row near the end of the bins (or past them, which the checked test reports).
            // SAFETY: i + 16 <= n.
            unsafe { checked_lanes(rows_at.add(i), &goes_left) }
        } else {
            // SAFETY: needs_check is false: every row of the block may be gathered.
            unsafe { test.left_lanes(block) }
        };
        let k = left.count_ones() as usize;
        let first = |count: usize| ((1u32 << count) - 1) as u16;
        // SAFETY: n_left <= i, so the left rows land in the slots already read (this block's
        // included, which is held in `block`); n_right + (16 - k) <= i + 16 <= right.len().
        unsafe {
            _mm512_mask_storeu_epi32(
                rows_at.add(n_left) as *mut i32,
                first(k),
                _mm512_maskz_compress_epi32(left, block),
            );
            _mm512_mask_storeu_epi32(
                right_at.add(n_right) as *mut i32,
                first(16 - k),
                _mm512_maskz_compress_epi32(!left, block),
            );
        }
        n_left += k;
        n_right += 16 - k;
        i += 16;
    }
    partition_rest(rows, right, i, (n_left, n_right), goes_left)
}

/// One split's test in vector lanes, set up once a partition: where a row's bin is (the bins'
/// base, a row's bytes, the value's mask), which rows a gather may read without passing the
/// end, and the split's rule (the missing values' bin, the split bin or the category set).
#[cfg(target_arch = "x86_64")]
struct LaneTest {
    base: *const i32,
    step: __m512i,
    value_mask: __m512i,
    /// The last row whose four-byte gather stays inside the bins, in every lane.
    limit: __m512i,
    /// Every row takes the checked path (the bins hold fewer than four bytes).
    all_checked: bool,
    missing: __m512i,
    split_bin: __m512i,
    default_left: u16,
    /// A categorical split's bit set (null for a numeric split) and its length in words.
    words: *const i32,
    word_count: __m512i,
}

#[cfg(target_arch = "x86_64")]
impl LaneTest {
    /// # Safety
    /// Needs AVX-512F and `split.stride * split.width > 0`.
    #[target_feature(enable = "avx512f")]
    unsafe fn new(split: &BinSplit) -> Self {
        use std::arch::x86_64::*;
        let row_bytes = split.stride * split.width;
        // A four-byte gather at row r's offset stays inside the bins when r <= last_row (a
        // matrix shorter than four bytes has none: every row takes the checked path).
        let last_row = match split.bytes.len().checked_sub(4) {
            Some(room) => (room / row_bytes).min(u32::MAX as usize) as u32,
            None => 0,
        };
        let (words, n_words) = match split.test.categories {
            Some(w) => (w.as_ptr() as *const i32, w.len()),
            None => (std::ptr::null(), 0),
        };
        LaneTest {
            base: split.bytes.as_ptr() as *const i32,
            step: _mm512_set1_epi32(row_bytes as i32),
            value_mask: _mm512_set1_epi32(match split.width {
                1 => 0xff,
                2 => 0xffff,
                _ => -1,
            }),
            limit: _mm512_set1_epi32(last_row as i32),
            all_checked: split.bytes.len() < 4,
            missing: _mm512_set1_epi32(split.test.missing as i32),
            split_bin: _mm512_set1_epi32(split.test.split_bin as i32),
            default_left: if split.test.default_left { 0xffff } else { 0 },
            words,
            word_count: _mm512_set1_epi32(n_words.min(i32::MAX as usize) as i32),
        }
    }

    /// Whether a row of `block` must take the checked path: its gather could pass the end.
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn needs_check(&self, block: __m512i) -> bool {
        use std::arch::x86_64::*;
        self.all_checked || _mm512_cmpgt_epu32_mask(block, self.limit) != 0
    }

    /// The lanes of `block` whose rows go left: their bins gathered, then the split's rule.
    ///
    /// # Safety
    /// Needs AVX-512F, and every row of `block` at most the last row a gather may read
    /// (`needs_check` false).
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn left_lanes(&self, block: __m512i) -> u16 {
        use std::arch::x86_64::*;
        // SAFETY: every row r of the block is at most last_row, so its four bytes at
        // r * row_bytes lie inside the bins, and the offset is below i32::MAX.
        let raw = unsafe { _mm512_i32gather_epi32::<1>(_mm512_mullo_epi32(block, self.step), self.base) };
        let bin = _mm512_and_si512(raw, self.value_mask);
        let is_missing = _mm512_cmpeq_epi32_mask(bin, self.missing);
        let present_left = if self.words.is_null() {
            _mm512_cmple_epu32_mask(bin, self.split_bin)
        } else {
            // The bin's bit in the set; bins past the set's words are not in it.
            let word = _mm512_srli_epi32::<5>(bin);
            let inside = _mm512_cmplt_epu32_mask(word, self.word_count);
            // SAFETY: only lanes whose word index is below the set's length are read.
            let w = unsafe { _mm512_mask_i32gather_epi32::<4>(_mm512_setzero_si512(), inside, word, self.words) };
            _mm512_test_epi32_mask(
                _mm512_srlv_epi32(w, _mm512_and_si512(bin, _mm512_set1_epi32(31))),
                _mm512_set1_epi32(1),
            )
        };
        (is_missing & self.default_left) | (!is_missing & present_left)
    }
}

/// Fetches into cache the bins of the split feature of the sixteen rows at `rows`.
///
/// # Safety
/// Sixteen rows must be readable at `rows`.
#[cfg(target_arch = "x86_64")]
#[inline]
unsafe fn prefetch_bins(split: &BinSplit, rows: *const u32) {
    let row_bytes = split.stride * split.width;
    for k in 0..16 {
        // SAFETY: k < 16. A prefetch never faults, wherever the row points.
        let r = unsafe { *rows.add(k) } as usize;
        super::prefetch_read(split.bytes.as_ptr().wrapping_add(r.wrapping_mul(row_bytes)));
    }
}

/// The lanes of the sixteen rows at `rows` that go left, by the row loop's checked test.
///
/// # Safety
/// Sixteen rows must be readable at `rows`.
#[cfg(target_arch = "x86_64")]
#[inline]
unsafe fn checked_lanes(rows: *const u32, goes_left: &impl Fn(u32) -> bool) -> u16 {
    let mut mask = 0u16;
    for k in 0..16 {
        // SAFETY: k < 16.
        mask |= (goes_left(unsafe { *rows.add(k) }) as u16) << k;
    }
    mask
}

/// Partitions the rows from `from` on (fewer than a block) by the row loop, after `n_left`
/// left rows and `n_right` right rows; returns the left count.
#[cfg(target_arch = "x86_64")]
#[inline]
fn partition_rest(
    rows: &mut [u32],
    right: &mut [u32],
    from: usize,
    (mut n_left, mut n_right): (usize, usize),
    goes_left: impl Fn(u32) -> bool,
) -> usize {
    for j in from..rows.len() {
        let r = rows[j];
        let l = goes_left(r);
        rows[n_left] = r;
        right[n_right] = r;
        n_left += l as usize;
        n_right += !l as usize;
    }
    n_left
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::random::Rng;
    use crate::simd::{available, Level};

    /// The row loop's stable partition: the oracle.
    fn partition_rows(rows: &mut [u32], goes_left: impl Fn(u32) -> bool) -> usize {
        let (l, r): (Vec<u32>, Vec<u32>) = rows.iter().partition(|&&x| goes_left(x));
        rows[..l.len()].copy_from_slice(&l);
        rows[l.len()..].copy_from_slice(&r);
        l.len()
    }

    /// Numeric and categorical splits, every bin width, missing values either way, rows of
    /// every node shape (all, a sparse subset, fewer than a block), the last rows of the
    /// matrix included (their gathers would pass the end): the same partition as the oracle.
    #[test]
    fn vector_partition_equals_the_row_loop() {
        let mut rng = Rng::new(21, 4);
        for width in [1usize, 2, 4] {
            for (n_rows, stride) in [(1008usize, 7usize), (37, 1), (300, 3), (64, 1)] {
                let n_bins = [200u32, 4000, 70_000][width.trailing_zeros() as usize];
                let values: Vec<u32> = (0..n_rows * stride).map(|_| rng.below(n_bins as usize + 1) as u32).collect();
                let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()[..width].to_vec()).collect();
                for feature in [0, stride - 1] {
                    let bin_of = |r: u32| values[r as usize * stride + feature];
                    let words: Vec<u32> = (0..(n_bins as usize / 32) / 2).map(|_| rng.next_u64() as u32).collect();
                    for (categorical, default_left) in [(false, false), (false, true), (true, false), (true, true)] {
                        let split = BinSplit {
                            bytes: &bytes[feature * width..],
                            width,
                            stride,
                            test: BinTest {
                                missing: n_bins,
                                split_bin: rng.below(n_bins as usize) as u32,
                                default_left,
                                categories: categorical.then_some(&words[..]),
                            },
                        };
                        let goes_left = |r: u32| split.test.goes_left(bin_of(r));
                        let all: Vec<u32> = (0..n_rows as u32).collect();
                        let sparse: Vec<u32> = all.iter().copied().filter(|_| rng.below(3) == 0).collect();
                        let few: Vec<u32> = all.iter().rev().take(9).rev().copied().collect();
                        for node in [all, sparse, few] {
                            let mut want = node.clone();
                            let want_left = partition_rows(&mut want, goes_left);
                            for level in [Level::Avx2, Level::Avx512].into_iter().filter(|&l| l <= available()) {
                                let mut got = node.clone();
                                let mut right = vec![0; got.len()];
                                let got_left = partition_at(level, &split, &mut got, &mut right, goes_left)
                                    .expect("a vector level partitions");
                                got[got_left..].copy_from_slice(&right[..node.len() - got_left]);
                                let what = format!("{level:?}, width {width}, stride {stride}");
                                assert_eq!((got_left, &got), (want_left, &want), "{what}");
                            }
                        }
                    }
                }
            }
        }
    }
}
