//! The scan of a numeric feature's histogram for its best split: bins in order, each split
//! after a bin a candidate (twice with missing values: they go either way). Free weights (the
//! common case) take a vectorised scan of blocks of candidates that picks the same split, bit
//! for bit, as the general scan does.

use super::{HistSlot, SplitCandidate, SplitScorer, MIN_GAIN};
use crate::tree::gradient::GradSum;

/// Split candidates whose gains are computed together (see `best_numeric_free`).
const BLOCK: usize = 64;

/// The position of the first of the largest of `gains`, or None when every gain is minus
/// infinity (a rejected candidate). Gains are never NaN (a candidate's gain is finite or
/// rejected), so the first position holding the maximum is the candidate a scan keeping
/// only strictly greater gains would pick. The maximum is taken in eight lanes, which the
/// compiler turns into vector maxima.
#[inline]
fn first_largest(gains: &[f64]) -> Option<usize> {
    let mut lanes = [f64::NEG_INFINITY; 8];
    let chunks = gains.chunks_exact(8);
    let tail = chunks.remainder();
    for c in chunks {
        for (l, &g) in lanes.iter_mut().zip(c) {
            *l = if g > *l { g } else { *l };
        }
    }
    let max = lanes.iter().chain(tail).fold(f64::NEG_INFINITY, |m, &g| if g > m { g } else { m });
    if max == f64::NEG_INFINITY {
        return None;
    }
    gains.iter().position(|&g| g == max)
}

impl SplitScorer<'_> {
    /// The best split of feature `feature` from its histogram: `hist[b]` sums bin `b`, and the
    /// last slot sums the missing values.
    /// Any slot type that reads as sums (a narrow `i32` histogram's slots, read in place).
    pub fn best_numeric<S: HistSlot>(&self, feature: u32, hist: &[S]) -> Option<SplitCandidate> {
        let (missing, bins) = hist.split_last()?;
        let missing = missing.sum();
        let direction = self.monotone.get(feature as usize).copied().unwrap_or(0);
        let has_missing = missing != GradSum::default();
        if direction == 0 && self.limits.unbounded() && self.params.max_delta_step == 0.0 {
            return self.best_numeric_free(feature, bins, missing, has_missing);
        }
        let mut best: Option<(f64, u32, bool, GradSum)> = None;
        let mut consider = |gain: Option<f64>, bin: u32, default_left: bool, left: GradSum| {
            if let Some(g) = gain {
                if best.is_none_or(|b| g > b.0) {
                    best = Some((g, bin, default_left, left));
                }
            }
        };
        let mut left = GradSum::default();
        // The split after the last bin keeps every present value left: with missing values
        // going right, that is the "present or missing" split.
        for (b, slot) in bins.iter().enumerate() {
            let slot = slot.sum();
            // An empty bin moves no rows: the split after the previous bin already covered it.
            if slot == GradSum::default() {
                continue;
            }
            left += slot;
            if has_missing {
                consider(self.gain(left, direction), b as u32, false, left);
                let with_missing = left + missing;
                consider(self.gain(with_missing, direction), b as u32, true, with_missing);
            } else {
                consider(self.gain(left, direction), b as u32, self.default_left_without_missing(left), left);
            }
        }
        best.map(|(gain, split_bin, default_left, left)| {
            self.candidate(feature, gain, split_bin, Vec::new(), default_left, left)
        })
    }

    /// [`Self::best_numeric`] for free weights (no monotone constraint, no bounds, no
    /// `max_delta_step`), the common case. The candidates of a block of bins are listed first
    /// (their left sums as separate gradient and hessian arrays), then their gains computed in
    /// one branch-free loop that the compiler vectorises (eight lanes with AVX-512, chosen at
    /// run time), then the block's first largest gain found by a vector maximum. The same
    /// candidates, the same float operations on each (IEEE operations are exact per lane, and
    /// Rust never fuses or reorders them) and the same pick as the general scan (the first
    /// of the largest gains): the same split, bit for bit, on any CPU.
    fn best_numeric_free<S: HistSlot>(
        &self,
        feature: u32,
        bins: &[S],
        missing: GradSum,
        has_missing: bool,
    ) -> Option<SplitCandidate> {
        let mut lg = [0i64; BLOCK];
        let mut lh = [0i64; BLOCK];
        let mut at = [0u32; BLOCK];
        let mut dl = [false; BLOCK];
        let mut gains = [0f64; BLOCK];
        let mut best: Option<(f64, u32, bool, GradSum)> = None;
        let mut left = GradSum::default();
        let mut b = 0;
        while b < bins.len() {
            let mut m = 0;
            // Every bin's candidates are written, and kept (the count advanced) only where the
            // bin holds rows: an empty bin moves no rows, the split after the previous bin
            // already covered it. Without a branch on it: deep nodes' histograms are patchy,
            // and the branch mispredicted there.
            while b < bins.len() && m + 2 <= BLOCK {
                let slot = bins[b].sum();
                let kept = !slot.is_zero() as usize;
                left += slot;
                (lg[m], lh[m], at[m]) = (left.g, left.h, b as u32);
                if has_missing {
                    dl[m] = false;
                    (lg[m + 1], lh[m + 1], at[m + 1], dl[m + 1]) =
                        (left.g + missing.g, left.h + missing.h, b as u32, true);
                    m += 2 * kept;
                } else {
                    dl[m] = self.default_left_without_missing(left);
                    m += kept;
                }
                b += 1;
            }
            self.free_gains(&lg[..m], &lh[..m], &mut gains[..m]);
            // Strictly greater than the best of earlier blocks: ties go to the first candidate,
            // as in the general scan.
            if let Some(j) = first_largest(&gains[..m]) {
                if best.is_none_or(|cur| gains[j] > cur.0) {
                    best = Some((gains[j], at[j], dl[j], GradSum { g: lg[j], h: lh[j] }));
                }
            }
        }
        best.map(|(gain, split_bin, default_left, left)| {
            self.candidate(feature, gain, split_bin, Vec::new(), default_left, left)
        })
    }

    /// The gains of sending left the candidates whose left gradient and hessian sums are
    /// `lg` and `lh` (at most [`BLOCK`]), minus infinity where [`Self::gain`] is None.
    fn free_gains(&self, lg: &[i64], lh: &[i64], gains: &mut [f64]) {
        #[cfg(target_arch = "x86_64")]
        match crate::simd::level() {
            // SAFETY: the CPU has the level's features (`simd::level` detected them).
            crate::simd::Level::Avx512 => return unsafe { self.free_gains_avx512(lg, lh, gains) },
            // SAFETY: as above.
            crate::simd::Level::Avx2 => return unsafe { self.free_gains_avx2(lg, lh, gains) },
            crate::simd::Level::Baseline => {}
        }
        self.free_gains_soa(lg, lh, gains);
    }

    /// [`Self::free_gains_soa`] compiled for AVX2, four lanes a step. AVX2 has no i64 -> f64
    /// conversion, which left the loop scalar: each sum converts as its two halves instead
    /// ([`halves_to_f64`]), which vectorise and round alike.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn free_gains_avx2(&self, lg: &[i64], lh: &[i64], gains: &mut [f64]) {
        self.free_gains_with(lg, lh, gains, halves_to_f64);
    }

    /// [`Self::free_gains_soa`] compiled for AVX-512 (its packed i64 -> f64 conversion lets the
    /// whole loop vectorise; AVX2 has none).
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx512dq")]
    unsafe fn free_gains_avx512(&self, lg: &[i64], lh: &[i64], gains: &mut [f64]) {
        self.free_gains_soa(lg, lh, gains);
    }

    /// [`Self::gain_under`] with free weights, written without branches: `score` and
    /// `threshold_l1` as selects (the division where the denominator is not positive is
    /// computed and dropped, as the scalar code never computes it), the same operations in
    /// the same order.
    #[inline(always)]
    fn free_gains_soa(&self, lg: &[i64], lh: &[i64], gains: &mut [f64]) {
        self.free_gains_with(lg, lh, gains, |x| x as f64);
    }

    /// [`Self::free_gains_soa`] with the sums converted by `to_f64` (which must round as
    /// `as f64` does).
    #[inline(always)]
    fn free_gains_with(&self, lg: &[i64], lh: &[i64], gains: &mut [f64], to_f64: impl Fn(i64) -> f64) {
        let p = self.params;
        let (gu, hu) = self.quantiser.units();
        let (tg, th) = (self.total.g, self.total.h);
        let (a, lambda, mcw, gamma, parent) =
            (p.reg_alpha, p.reg_lambda, p.min_child_weight, p.gamma, self.parent_score);
        let score = |g: f64, h: f64| {
            let denom = h + lambda;
            let t = if g > a {
                g - a
            } else if g < -a {
                g + a
            } else {
                0.0
            };
            let s = t * t / denom;
            if denom <= 0.0 {
                0.0
            } else {
                s
            }
        };
        for ((out, &g), &h) in gains.iter_mut().zip(lg).zip(lh) {
            let (gl, hl) = (to_f64(g) * gu, to_f64(h) * hu);
            let (gr, hr) = (to_f64(tg - g) * gu, to_f64(th - h) * hu);
            let heavy = !(hl < mcw || hr < mcw);
            let gain = score(gl, hl) + score(gr, hr) - parent;
            *out = if heavy && gain > MIN_GAIN && gain >= gamma { gain } else { f64::NEG_INFINITY };
        }
    }
}

/// `x as f64` from its two 32-bit halves: `hi * 2^32` and `lo` are exact, so their sum rounds
/// once, from the exact value, as the direct conversion does (the same bits for every i64).
#[cfg(any(target_arch = "x86_64", test))]
#[inline(always)]
fn halves_to_f64(x: i64) -> f64 {
    ((x >> 32) as i32 as f64) * 4_294_967_296.0 + (x as u32) as f64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tree::constraints::NodeLimits;
    use crate::tree::gradient::Quantiser;
    use crate::tree::split::tests::params;
    use crate::tree::split::SplitParams;

    #[test]
    fn halves_convert_as_the_direct_cast() {
        let mut rng = crate::random::Rng::new(5, 1);
        let edges =
            [0i64, 1, -1, i64::MAX, i64::MIN, 1 << 53, (1 << 53) + 1, -(1 << 53) - 1, (1 << 62) + 3, u32::MAX as i64];
        let random = (0..200_000).map(|i| (rng.next_u64() as i64) >> (i % 63));
        for x in edges.into_iter().chain(random) {
            assert_eq!(halves_to_f64(x).to_bits(), (x as f64).to_bits(), "{x}");
        }
    }

    /// The free-weight scan (blocks of gains, vectorised where the CPU allows) picks what the
    /// general per-candidate scan picks, bit for bit, and its vector and scalar gains agree.
    #[test]
    fn free_weight_scan_equals_the_general_scan() {
        let mut rng = crate::random::Rng::new(11, 3);
        let q = Quantiser::from_scales(8.0, 4.0);
        for case in 0..400 {
            let p = SplitParams {
                reg_lambda: [1.0, 0.0, 0.5][case % 3],
                reg_alpha: [0.0, 0.7, 30.0][case % 5 % 3],
                gamma: [0.0, 0.5][case % 2],
                min_child_weight: [0.0, 1.0, 20.0][case % 7 % 3],
                ..params()
            };
            let n_bins = 1 + rng.below(300);
            let mut hist: Vec<GradSum> = (0..=n_bins)
                .map(|_| match rng.below(4) {
                    0 => GradSum::default(),
                    _ => GradSum { g: rng.below(2001) as i64 - 1000, h: rng.below(400) as i64 },
                })
                .collect();
            if case % 2 == 0 {
                *hist.last_mut().unwrap() = GradSum::default();
            }
            let total = hist.iter().fold(GradSum::default(), |a, &b| a + b);
            let limits = NodeLimits::root();
            let scorer = SplitScorer::new(&p, &q, total, 1000, &limits, &[]);
            // The general scan, candidate by candidate.
            let (missing, bins) = hist.split_last().unwrap();
            let has_missing = *missing != GradSum::default();
            let mut want: Option<(f64, u32, bool)> = None;
            let mut left = GradSum::default();
            let mut lefts = Vec::new();
            for (b, &slot) in bins.iter().enumerate() {
                if slot == GradSum::default() {
                    continue;
                }
                left += slot;
                let mut cands =
                    vec![(left, if has_missing { false } else { scorer.default_left_without_missing(left) })];
                if has_missing {
                    cands.push((left + *missing, true));
                }
                for (l, dl) in cands {
                    lefts.push(l);
                    if let Some(g) = scorer.gain(l, 0) {
                        if want.is_none_or(|w| g > w.0) {
                            want = Some((g, b as u32, dl));
                        }
                    }
                }
            }
            let got = scorer.best_numeric(0, &hist).map(|c| (c.gain, c.split_bin, c.default_left));
            assert_eq!(got.map(|g| (g.0.to_bits(), g.1, g.2)), want.map(|w| (w.0.to_bits(), w.1, w.2)), "case {case}");
            for block in lefts.chunks(BLOCK) {
                let (mut fast, mut plain) = (vec![0.0; block.len()], vec![0.0; block.len()]);
                let lg: Vec<i64> = block.iter().map(|l| l.g).collect();
                let lh: Vec<i64> = block.iter().map(|l| l.h).collect();
                scorer.free_gains(&lg, &lh, &mut fast);
                scorer.free_gains_soa(&lg, &lh, &mut plain);
                for ((f, s), &l) in fast.iter().zip(&plain).zip(block) {
                    let want = scorer.gain(l, 0).unwrap_or(f64::NEG_INFINITY);
                    assert_eq!((f.to_bits(), s.to_bits()), (want.to_bits(), want.to_bits()), "case {case}");
                }
            }
        }
    }

    /// The block scan's pick: the first of the largest gains, past ties and rejected ones.
    #[test]
    fn first_largest_takes_the_first_of_ties() {
        let ninf = f64::NEG_INFINITY;
        assert_eq!(first_largest(&[]), None);
        assert_eq!(first_largest(&[ninf; 11]), None);
        assert_eq!(first_largest(&[ninf, 2.0, 1.0, 2.0]), Some(1));
        let mut g = vec![ninf; 37];
        (g[9], g[17], g[33], g[36]) = (5.0, 7.0, 7.0, 6.0);
        assert_eq!(first_largest(&g), Some(17));
        g[35] = 8.0;
        assert_eq!(first_largest(&g), Some(35));
    }
}
