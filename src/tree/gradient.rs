//! Gradients as fixed-point integers. Each round the float gradient pairs are scaled by a
//! power of two and rounded to an integer of at most 2^15 in magnitude (a relative resolution
//! of 3e-5, far finer than the noise in any gradient), so that up to 2^15 rows sum exactly
//! in `i32` (histogram chunks) and any number of chunks in `i64` (node totals).
//! Histogram sums are then exact integer sums: the same whatever the summation order, the
//! thread count, or the device, which makes training bitwise deterministic and lets the
//! GPU histograms equal the CPU ones exactly.

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
        Self::from_magnitudes(Self::magnitudes(pairs))
    }

    /// The largest gradient and hessian magnitudes in `pairs` (what [`Quantiser::fit`] scales
    /// by; a distributed fit takes their maxima over the workers).
    pub fn magnitudes(pairs: &[GradPair]) -> [f32; 2] {
        let (mut gmax, mut hmax) = (0f32, 0f32);
        for p in pairs {
            gmax = gmax.max(p.g.abs());
            hmax = hmax.max(p.h.abs());
        }
        [gmax, hmax]
    }

    /// Scales that map the magnitudes `[g, h]` to at most 2^ROW_BITS.
    pub fn from_magnitudes([gmax, hmax]: [f32; 2]) -> Self {
        let (g_scale, h_scale) = (scale_for(gmax), scale_for(hmax));
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
    pub fn quantise_in_place<'a>(&self, pairs: &'a mut [GradPair]) -> &'a [QuantGrad] {
        const _: () = assert!(
            std::mem::size_of::<GradPair>() == std::mem::size_of::<QuantGrad>()
                && std::mem::align_of::<GradPair>() == std::mem::align_of::<QuantGrad>()
        );
        // SAFETY: both types are `#[repr(C)]` pairs of 4-byte plain numbers with the same size
        // and alignment (asserted above), every bit pattern is valid for both, and the view
        // borrows `pairs` mutably for as long as it lives.
        let view: &'a mut [QuantGrad] =
            unsafe { std::slice::from_raw_parts_mut(pairs.as_mut_ptr().cast::<QuantGrad>(), pairs.len()) };
        view.par_iter_mut().for_each(|slot| {
            // The slot still holds the float pair's bits.
            let p = GradPair { g: f32::from_bits(slot.g as u32), h: f32::from_bits(slot.h as u32) };
            *slot = self.quantise(p);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantising_in_place_equals_quantising_each_pair() {
        let pairs: Vec<GradPair> = (0..5000)
            .map(|i| GradPair { g: ((i * 37) % 1001) as f32 / 13.0 - 38.0, h: ((i * 11) % 97) as f32 / 50.0 })
            .chain([GradPair { g: -0.0, h: 0.0 }, GradPair { g: f32::MIN_POSITIVE / 4.0, h: 1e-30 }])
            .collect();
        let q = Quantiser::fit(&pairs);
        let want: Vec<QuantGrad> = pairs.iter().map(|&p| q.quantise(p)).collect();
        let mut buffer = pairs.clone();
        assert_eq!(q.quantise_in_place(&mut buffer), want.as_slice());
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
