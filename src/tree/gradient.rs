//! Gradients as fixed-point integers. Each round the float gradient pairs are scaled by a
//! power of two and rounded to an integer of at most 2^15 in magnitude (a relative resolution
//! of 3e-5, far finer than the noise in any gradient), so that up to 2^15 rows sum exactly
//! in `i32` (histogram chunks) and any number of chunks in `i64` (node totals).
//! Histogram sums are then exact integer sums: the same whatever the summation order, the
//! thread count, or the device, which makes training bitwise deterministic and lets the
//! GPU histograms equal the CPU ones exactly.
//!
//! Whole-number sample weights are applied after rounding ([`Weighting::Repeats`]): a row of
//! weight 3 then sums exactly as three copies of it, so a weighted fit gives the trees of a
//! fit on the repeated rows (scikit-learn's sample-weight equivalence).

use std::ops::{Add, AddAssign, Sub};

use rayon::prelude::*;

use serde::{Deserialize, Serialize};

/// A float gradient and hessian for one row and one output.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[repr(C)]
pub struct GradPair {
    pub g: f32,
    pub h: f32,
}

/// A quantised gradient pair of one row.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct QuantGrad {
    pub g: i32,
    pub h: i32,
}

/// An exact sum of quantised gradient pairs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[repr(C)]
pub struct GradSum {
    pub g: i64,
    pub h: i64,
}

impl GradSum {
    /// No rows summed (or none that count): both sums zero, tested as one value so that the
    /// test compiles to no branch (`==` on the pair tests `g` and branches before `h`).
    #[inline]
    pub fn is_zero(self) -> bool {
        (self.g | self.h) == 0
    }
}

impl Add for GradSum {
    type Output = GradSum;
    #[inline]
    fn add(self, o: GradSum) -> GradSum {
        GradSum { g: self.g + o.g, h: self.h + o.h }
    }
}

impl Sub for GradSum {
    type Output = GradSum;
    #[inline]
    fn sub(self, o: GradSum) -> GradSum {
        GradSum { g: self.g - o.g, h: self.h - o.h }
    }
}

impl AddAssign<QuantGrad> for GradSum {
    #[inline]
    fn add_assign(&mut self, q: QuantGrad) {
        self.g += q.g as i64;
        self.h += q.h as i64;
    }
}

impl AddAssign for GradSum {
    #[inline]
    fn add_assign(&mut self, o: GradSum) {
        self.g += o.g;
        self.h += o.h;
    }
}

/// Largest magnitude of one row's quantised value: 2^15.
pub const ROW_BITS: i32 = 15;

/// Rows whose quantised values may be summed in `i32`: 2^15 x 2^15 = 2^30 < 2^31.
pub const I32_SUM_ROWS: usize = 1 << 15;

/// Whole weights up to 2^REPEAT_BITS keep the unweighted rows' resolution: a row's
/// quantised pair then reaches 2^20 in magnitude, and histogram chunks hold 2^10 rows.
pub const REPEAT_BITS: u32 = 5;

/// The largest whole weight applied after rounding; heavier weights are applied in the loss.
const MAX_REPEAT_WEIGHT: f32 = (1u32 << 20) as f32;

/// How sample weights enter the fixed-point gradients: one rule for a whole fit, on every
/// backend and worker.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Weighting {
    /// The loss multiplies each row's pair by its weight, and the product is rounded: no
    /// weights, or some weight is not a whole number.
    #[default]
    InLoss,
    /// Every weight is a whole number: the loss gives unweighted pairs, each is rounded with a
    /// scale set by the rows of non-zero weight, then multiplied by its weight, exactly.
    /// `extra_bits` (at most [`REPEAT_BITS`]): how far above 2^15 a weighted pair may reach;
    /// `shrink_bits`: how far the scale is lowered for weights above 2^REPEAT_BITS (those fits
    /// lose the exact equivalence with repeated rows, not their correctness).
    Repeats { extra_bits: u32, shrink_bits: u32 },
}

impl Weighting {
    /// `[the largest weight, 1 if some weight is not whole]`: what [`Weighting::from_summary`]
    /// decides by (a distributed fit takes their maxima over the workers first).
    pub fn summary(weights: &[f32]) -> [f32; 2] {
        let largest = weights.iter().copied().fold(0f32, f32::max);
        let fractional = weights.iter().any(|w| w.fract() != 0.0);
        [largest, if fractional { 1.0 } else { 0.0 }]
    }

    /// The rule for weights summarised by [`Weighting::summary`] (None: a fit without weights).
    pub fn from_summary(summary: Option<[f32; 2]>) -> Self {
        match summary {
            // Up to 2^20: a rounded pair times its weight stays far inside i32.
            Some([largest, fractional]) if fractional == 0.0 && largest <= MAX_REPEAT_WEIGHT => {
                // ceil(log2(largest)): the bits a whole weight adds to a pair's magnitude.
                let bits = if largest <= 1.0 { 0 } else { (largest as f64).log2().ceil() as u32 };
                let extra_bits = bits.min(REPEAT_BITS);
                Weighting::Repeats { extra_bits, shrink_bits: bits - extra_bits }
            }
            _ => Weighting::InLoss,
        }
    }

    /// Rows a histogram chunk may sum in `i32`: 2^15 unweighted, fewer when whole weights
    /// make a row's pair larger than 2^15.
    pub fn chunk_rows(self) -> usize {
        match self {
            Weighting::InLoss => I32_SUM_ROWS,
            Weighting::Repeats { extra_bits, .. } => I32_SUM_ROWS >> extra_bits,
        }
    }

    /// The weights a loss should see: all of them, or none when they are applied after rounding.
    pub fn loss_weights(self, weights: Option<&[f32]>) -> Option<&[f32]> {
        match self {
            Weighting::InLoss => weights,
            Weighting::Repeats { .. } => None,
        }
    }

    /// The weights that multiply the rounded pairs (None: the loss applied them).
    pub fn repeats(self, weights: Option<&[f32]>) -> Option<&[f32]> {
        match self {
            Weighting::InLoss => None,
            Weighting::Repeats { .. } => weights,
        }
    }

    /// How many halvings lower the scale below the one the magnitudes give.
    pub fn shrink_bits(self) -> u32 {
        match self {
            Weighting::InLoss => 0,
            Weighting::Repeats { shrink_bits, .. } => shrink_bits,
        }
    }
}

/// Power-of-two scales from floats to fixed point, one for gradients and one for hessians.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Quantiser {
    pub g_scale: f64,
    pub h_scale: f64,
    /// Reciprocals of the scales (exact: the scales are powers of two).
    g_unit: f64,
    h_unit: f64,
}

impl Quantiser {
    /// Scales that map the largest magnitude in `pairs` to at most 2^ROW_BITS.
    pub fn fit(pairs: &[GradPair]) -> Self {
        Self::from_magnitudes(Self::magnitudes(pairs, None), 0)
    }

    /// The largest gradient and hessian magnitudes in `pairs` (what [`Quantiser::fit`] scales
    /// by; a distributed fit takes their maxima over the workers). With `repeats` (whole
    /// weights applied after rounding), over the rows of non-zero weight only: a row of
    /// weight 0 is as absent as it is from a fit on repeated rows.
    pub fn magnitudes(pairs: &[GradPair], repeats: Option<&[f32]>) -> [f32; 2] {
        // Maxima are the same in any order, so chunks run in parallel: one thread over 20M
        // rows took ~15 ms a tree, the same at 16 threads as at 2.
        const CHUNK: usize = 1 << 14;
        pairs
            .par_chunks(CHUNK)
            .enumerate()
            .map(|(c, chunk)| match repeats {
                None => vectorised::magnitudes(chunk),
                Some(w) => {
                    let (mut gmax, mut hmax) = (0f32, 0f32);
                    for (p, &w) in chunk.iter().zip(&w[c * CHUNK..]) {
                        if w == 0.0 {
                            continue;
                        }
                        gmax = gmax.max(p.g.abs());
                        hmax = hmax.max(p.h.abs());
                    }
                    [gmax, hmax]
                }
            })
            .reduce(|| [0.0, 0.0], |a, b| [a[0].max(b[0]), a[1].max(b[1])])
    }

    /// Scales that map the magnitudes `[g, h]` to at most 2^ROW_BITS, lowered `shrink_bits`
    /// halvings more ([`Weighting::shrink_bits`]).
    pub fn from_magnitudes([gmax, hmax]: [f32; 2], shrink_bits: u32) -> Self {
        let lower = 2f64.powi(-(shrink_bits as i32));
        let (g_scale, h_scale) = (scale_for(gmax) * lower, scale_for(hmax) * lower);
        Quantiser { g_scale, h_scale, g_unit: 1.0 / g_scale, h_unit: 1.0 / h_scale }
    }

    /// A quantiser with the given power-of-two scales (as a device computed them).
    pub fn from_scales(g_scale: f64, h_scale: f64) -> Self {
        Quantiser { g_scale, h_scale, g_unit: 1.0 / g_scale, h_unit: 1.0 / h_scale }
    }

    /// The reciprocals of the scales: an integer sum times these is the float sum.
    pub fn units(&self) -> (f64, f64) {
        (self.g_unit, self.h_unit)
    }

    #[inline]
    pub fn quantise(&self, p: GradPair) -> QuantGrad {
        QuantGrad { g: (p.g as f64 * self.g_scale).round() as i32, h: (p.h as f64 * self.h_scale).round() as i32 }
    }

    /// Quantises `pairs` in place and returns them as quantised pairs. An output's float pairs
    /// are dead once its tree starts growing, and reusing their 8 bytes per row instead of a
    /// second buffer keeps a fit's peak memory down (issue 6 bounds it).
    /// With `repeats`, each rounded pair is then multiplied by its row's whole weight.
    pub fn quantise_in_place<'a>(&self, pairs: &'a mut [GradPair], repeats: Option<&[f32]>) -> &'a [QuantGrad] {
        const _: () = assert!(
            std::mem::size_of::<GradPair>() == std::mem::size_of::<QuantGrad>()
                && std::mem::align_of::<GradPair>() == std::mem::align_of::<QuantGrad>()
        );
        // SAFETY: both types are `#[repr(C)]` pairs of 4-byte plain numbers with the same size
        // and alignment (asserted above), every bit pattern is valid for both, and the view
        // borrows `pairs` mutably for as long as it lives.
        let view: &'a mut [QuantGrad] =
            unsafe { std::slice::from_raw_parts_mut(pairs.as_mut_ptr().cast::<QuantGrad>(), pairs.len()) };
        let Some(w) = repeats else {
            view.par_chunks_mut(1 << 14).for_each(|block| vectorised::quantise(self, block));
            return view;
        };
        view.par_iter_mut().enumerate().for_each(|(i, slot)| {
            // The slot still holds the float pair's bits.
            let p = GradPair { g: f32::from_bits(slot.g as u32), h: f32::from_bits(slot.h as u32) };
            *slot = if w[i] == 0.0 {
                // A row of weight 0 took no part in the scale: its pair may not fit; it adds nothing.
                QuantGrad::default()
            } else {
                // Whole weights of at most 2^(REPEAT_BITS + shrink) times a rounded value of at
                // most 2^(15 - shrink): within 2^20, no overflow.
                let q = self.quantise(p);
                QuantGrad { g: q.g * w[i] as i32, h: q.h * w[i] as i32 }
            };
        });
        view
    }

    /// The float gradient and hessian sums an integer sum stands for.
    #[inline]
    pub fn to_float(&self, s: GradSum) -> (f64, f64) {
        (s.g as f64 * self.g_unit, s.h as f64 * self.h_unit)
    }
}

fn scale_for(max_abs: f32) -> f64 {
    if max_abs <= 0.0 || !max_abs.is_finite() {
        return 1.0;
    }
    // The largest power of two with max_abs * scale <= 2^ROW_BITS.
    let e = ROW_BITS - (max_abs as f64).log2().ceil() as i32;
    2f64.powi(e)
}

/// The quantiser's row loops without weights, compiled for AVX-512 or AVX2 where the CPU has it
/// (the baseline x86-64 target steps 2 or 4 lanes; `f64::round` is a libm call there). Each
/// lane rounds as the scalar code does: the same bits either way.
mod vectorised {
    use super::{GradPair, QuantGrad, Quantiser};
    #[cfg(target_arch = "x86_64")]
    use crate::simd::Level;

    /// The largest `|g|` and `|h|` of a block.
    pub fn magnitudes(pairs: &[GradPair]) -> [f32; 2] {
        #[cfg(target_arch = "x86_64")]
        match crate::simd::level() {
            // SAFETY: the CPU has the level's features (`simd::level` detected them).
            Level::Avx512 => return unsafe { magnitudes_avx512(pairs) },
            // SAFETY: as above.
            Level::Avx2 => return unsafe { magnitudes_avx2(pairs) },
            Level::Baseline => {}
        }
        magnitudes_portable(pairs)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f")]
    unsafe fn magnitudes_avx512(pairs: &[GradPair]) -> [f32; 2] {
        magnitudes_portable(pairs)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn magnitudes_avx2(pairs: &[GradPair]) -> [f32; 2] {
        magnitudes_portable(pairs)
    }

    /// In 16 lanes, each the maximum of every 16th pair: a maximum does not depend on the
    /// order it is taken in (NaN is skipped either way), and a fold over one accumulator
    /// would not vectorise.
    #[inline(always)]
    fn magnitudes_portable(pairs: &[GradPair]) -> [f32; 2] {
        const LANES: usize = 16;
        let (mut g, mut h) = ([0f32; LANES], [0f32; LANES]);
        let mut blocks = pairs.chunks_exact(LANES);
        for block in &mut blocks {
            for j in 0..LANES {
                g[j] = g[j].max(block[j].g.abs());
                h[j] = h[j].max(block[j].h.abs());
            }
        }
        for p in blocks.remainder() {
            g[0] = g[0].max(p.g.abs());
            h[0] = h[0].max(p.h.abs());
        }
        [g.into_iter().fold(0f32, f32::max), h.into_iter().fold(0f32, f32::max)]
    }

    /// A block of float pairs (their bits in `slots`) quantised in place.
    pub fn quantise(q: &Quantiser, slots: &mut [QuantGrad]) {
        #[cfg(target_arch = "x86_64")]
        match crate::simd::level() {
            // SAFETY: the CPU has the level's features (`simd::level` detected them).
            Level::Avx512 => return unsafe { quantise_avx512(q, slots) },
            // SAFETY: as above.
            Level::Avx2 => return unsafe { quantise_avx2(q, slots) },
            Level::Baseline => {}
        }
        quantise_portable(q, slots)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f")]
    unsafe fn quantise_avx512(q: &Quantiser, slots: &mut [QuantGrad]) {
        quantise_portable(q, slots)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn quantise_avx2(q: &Quantiser, slots: &mut [QuantGrad]) {
        quantise_portable(q, slots)
    }

    /// [`Quantiser::quantise`] with its float-to-integer casts as [`to_i32`].
    #[inline(always)]
    fn quantise_portable(q: &Quantiser, slots: &mut [QuantGrad]) {
        for slot in slots {
            let (g, h) = (f32::from_bits(slot.g as u32), f32::from_bits(slot.h as u32));
            *slot = QuantGrad { g: to_i32((g as f64 * q.g_scale).round()), h: to_i32((h as f64 * q.h_scale).round()) };
        }
    }

    /// `x as i32` (NaN to 0, the rest saturated), written as a select, a clamp and a plain
    /// truncation, which vectorise; the compiler does the `as` cast one lane at a time.
    #[inline(always)]
    fn to_i32(x: f64) -> i32 {
        let c = if x.is_nan() { 0.0 } else { x.clamp(i32::MIN as f64, i32::MAX as f64) };
        // SAFETY: `c` is finite and within i32's range, so its truncation is too.
        unsafe { c.to_int_unchecked() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The vector loops (AVX-512 on a CPU that has it) round ties away from zero and take
    /// the maxima as the scalar code does: pairs at and one ulp either side of every half
    /// step, of both signs, across the scale's range.
    #[test]
    fn vector_quantising_rounds_ties_and_takes_maxima_as_each_pair_does() {
        let mut pairs = Vec::new();
        for k in 0..4000 {
            let tie = (k as f32 - 2000.0) * 8.0 + 0.5;
            let x = tie / 16.0;
            for v in [x, f32::from_bits(x.to_bits() + 1), f32::from_bits(x.to_bits().max(1) - 1), -x] {
                pairs.push(GradPair { g: v, h: v.abs() * 0.75 });
            }
        }
        pairs.extend([
            GradPair { g: f32::NAN, h: 0.0 },
            GradPair { g: f32::INFINITY, h: f32::MAX },
            GradPair { g: f32::NEG_INFINITY, h: -0.0 },
        ]);
        let q = Quantiser::from_scales(16.0, 32.0);
        let want: Vec<QuantGrad> = pairs.iter().map(|&p| q.quantise(p)).collect();
        let mut slots = pairs.clone();
        let got = q.quantise_in_place(&mut slots, None);
        assert_eq!(got, want.as_slice());
        let scalar = pairs.iter().fold([0f32, 0f32], |[g, h], p| [g.max(p.g.abs()), h.max(p.h.abs())]);
        assert_eq!(Quantiser::magnitudes(&pairs, None), scalar);
    }

    #[test]
    fn quantising_in_place_equals_quantising_each_pair() {
        let pairs: Vec<GradPair> = (0..5000)
            .map(|i| GradPair { g: ((i * 37) % 1001) as f32 / 13.0 - 38.0, h: ((i * 11) % 97) as f32 / 50.0 })
            .chain([GradPair { g: -0.0, h: 0.0 }, GradPair { g: f32::MIN_POSITIVE / 4.0, h: 1e-30 }])
            .collect();
        let q = Quantiser::fit(&pairs);
        let want: Vec<QuantGrad> = pairs.iter().map(|&p| q.quantise(p)).collect();
        let mut buffer = pairs.clone();
        assert_eq!(q.quantise_in_place(&mut buffer, None), want.as_slice());
    }

    #[test]
    fn whole_weights_are_repeats_and_others_enter_the_loss() {
        let rule = |w: &[f32]| Weighting::from_summary(Some(Weighting::summary(w)));
        assert_eq!(Weighting::from_summary(None), Weighting::InLoss);
        assert_eq!(rule(&[0.0, 1.0, 1.0]), Weighting::Repeats { extra_bits: 0, shrink_bits: 0 });
        assert_eq!(rule(&[0.0, 3.0, 4.0]), Weighting::Repeats { extra_bits: 2, shrink_bits: 0 });
        assert_eq!(rule(&[5.0, 1.0]), Weighting::Repeats { extra_bits: 3, shrink_bits: 0 });
        assert_eq!(rule(&[32.0]), Weighting::Repeats { extra_bits: 5, shrink_bits: 0 });
        assert_eq!(rule(&[33.0, 2.0]), Weighting::Repeats { extra_bits: 5, shrink_bits: 1 });
        assert_eq!(rule(&[1.0, 0.5]), Weighting::InLoss);
        assert_eq!(rule(&[2.0e6]), Weighting::InLoss);
        assert_eq!(rule(&[3.0]).chunk_rows(), 1 << 13);
        assert_eq!(Weighting::InLoss.chunk_rows(), I32_SUM_ROWS);
    }

    #[test]
    fn a_whole_weight_sums_exactly_as_its_repeated_rows() {
        let pairs: Vec<GradPair> = (0..300)
            .map(|i| GradPair { g: ((i * 53) % 211) as f32 / 17.0 - 6.0, h: ((i * 7) % 31) as f32 / 9.0 })
            .collect();
        // Weights from 0 to 32; the row of weight 0 has the largest gradient, which must not
        // set the scale (repeated rows leave it out).
        let mut weights: Vec<f32> = (0..300).map(|i| ((i * 13) % 33) as f32).collect();
        let mut pairs_w = pairs.clone();
        pairs_w[0] = GradPair { g: 1000.0, h: 50.0 };
        weights[0] = 0.0;
        let weighting = Weighting::from_summary(Some(Weighting::summary(&weights)));
        let repeats = weighting.repeats(Some(&weights));
        let q = Quantiser::from_magnitudes(Quantiser::magnitudes(&pairs_w, repeats), weighting.shrink_bits());
        let mut buffer = pairs_w.clone();
        let weighted = q.quantise_in_place(&mut buffer, repeats).to_vec();

        let repeated: Vec<GradPair> =
            (0..300).flat_map(|i| std::iter::repeat_n(pairs[i], weights[i] as usize)).collect();
        let q_rep = Quantiser::fit(&repeated);
        assert_eq!(q, q_rep, "the scale depends on the weights");
        let mut buffer = repeated.clone();
        let want = q_rep.quantise_in_place(&mut buffer, None).iter().fold(GradSum::default(), |mut s, &v| {
            s += v;
            s
        });
        let got = weighted.iter().fold(GradSum::default(), |mut s, &v| {
            s += v;
            s
        });
        assert_eq!(got, want);
        assert!(weighted.iter().all(|v| v.g.unsigned_abs() <= 1 << 20 && v.h.unsigned_abs() <= 1 << 20));
    }

    #[test]
    fn heavy_whole_weights_stay_within_the_chunk_bound() {
        // 2^20 is the heaviest weight applied after rounding: the scale is lowered so that a
        // weighted pair stays within 2^20, and a chunk of chunk_rows() pairs within i32.
        let weights = [1.0f32, 1048576.0, 70000.0];
        let weighting = Weighting::from_summary(Some(Weighting::summary(&weights)));
        assert_eq!(weighting, Weighting::Repeats { extra_bits: 5, shrink_bits: 15 });
        let mut pairs = vec![GradPair { g: -3.0, h: 0.75 }; 3];
        let q = Quantiser::from_magnitudes(Quantiser::magnitudes(&pairs, Some(&weights)), weighting.shrink_bits());
        let out = q.quantise_in_place(&mut pairs, Some(&weights));
        assert!(out.iter().all(|v| v.g.unsigned_abs() <= 1 << 20 && v.h.unsigned_abs() <= 1 << 20), "{out:?}");
        assert!((weighting.chunk_rows() as u64) << 20 <= 1 << 30);
    }

    #[test]
    fn quantised_values_stay_in_range_and_round_trip_closely() {
        let pairs: Vec<GradPair> =
            (0..1000).map(|i| GradPair { g: (i as f32 - 500.0) / 7.0, h: i as f32 / 3000.0 }).collect();
        let q = Quantiser::fit(&pairs);
        let mut sum = GradSum::default();
        for p in &pairs {
            let v = q.quantise(*p);
            assert!(v.g.unsigned_abs() <= 1 << ROW_BITS && v.h.unsigned_abs() <= 1 << ROW_BITS);
            sum += v;
        }
        let (g, h) = q.to_float(sum);
        let exact_g: f64 = pairs.iter().map(|p| p.g as f64).sum();
        let exact_h: f64 = pairs.iter().map(|p| p.h as f64).sum();
        // Each row is off by at most half a step (max / 2^16); errors of 1000 rows partly cancel.
        assert!((g - exact_g).abs() < 1e-2 && (h - exact_h).abs() < 1e-3, "{g} {exact_g} {h} {exact_h}");
    }
}
