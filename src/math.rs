//! `exp` for f32, `ln` and `log2` for f64, written with operations that round the same on the
//! host and the device, so that a fit on the GPU gives the same trees as one on the CPU, and the
//! same evaluation logs, bit for bit.
//!
//! The host's `expf` (libm) and CUDA's `expf` are both accurate to an ulp or so, but not the same
//! function: the logistic, softmax, Poisson and Tweedie gradients, and from them the quantised
//! gradients and the trees, drifted apart in the last bits. This one uses only IEEE operations
//! that round identically on both sides (+, -, *, floor and power-of-two scaling; the kernels
//! are compiled with `--fmad=false` and without flushing subnormals), in the same order.
//! Its twin is `portable_expf` in kernels/math.cuh; tests/cuda_trees.rs checks they agree, and the
//! tests below that it is accurate (within one ulp of the exact value, correctly rounded for
//! more than 99% of the floats).

/// ln 2 split so that `k * LN2_HI` is exact for every `k` the reduction produces (|k| <= 150):
/// 355/512 has 9 significant bits.
const LN2_HI: f32 = 355.0 / 512.0;
const LN2_LO: f32 = -2.121_944_4e-4;

/// (e^r - 1 - r) / r^2 on |r| <= ln(2)/2, a degree-5 polynomial fitted for the least largest
/// relative error of e^r (Lawson's weighted least squares; coefficient 0 first).
const P: [f32; 6] = [0.5, 0.166_666_66, 0.041_666_295, 0.008_333_497, 0.001_394_464_9, 0.000_197_903_53];

/// Beyond these, e^x is +infinity or rounds to 0; within them the scaling below handles the
/// last steps to overflow and through the subnormals.
const OVERFLOW_ABOVE: f32 = 89.0;
const UNDERFLOW_BELOW: f32 = -104.0;

/// e^x: x = k ln 2 + r, e^x = 2^k (1 + r + r^2 P(r)).
///
/// Without a branch, so that loops over rows (the logistic and softmax gradients) vectorise:
/// x is clamped into the range, the out-of-range and NaN results are selected at the end, and
/// k = floor(x log2(e) + 1/2) is the truncation less one where that rounded up (exact for
/// |k| <= 151; `floor` itself is a libm call on baseline x86-64). The same bits as the kernels'
/// `portable_expf`, which floors: checked against the branching form for every f32.
#[inline]
pub fn exp(x: f32) -> f32 {
    let c = x.clamp(UNDERFLOW_BELOW, OVERFLOW_ABOVE);
    let v = c * std::f32::consts::LOG2_E + 0.5;
    let t = v as i32;
    let k = t - ((t as f32) > v) as i32;
    let kf = k as f32;
    let r = (c - kf * LN2_HI) - kf * LN2_LO;
    let mut p = P[5];
    p = p * r + P[4];
    p = p * r + P[3];
    p = p * r + P[2];
    p = p * r + P[1];
    p = p * r + P[0];
    let y = (r * r * p + r) + 1.0;
    // Two power-of-two factors, each a normal float, so that k = 128 and the subnormal results
    // (k down to -150) need no branch; a result that is normal is exact after either product.
    let half = k / 2;
    let y = y * pow2(half) * pow2(k - half);
    let y = if x > OVERFLOW_ABOVE { f32::INFINITY } else { y };
    let y = if x < UNDERFLOW_BELOW { 0.0 } else { y };
    if x.is_nan() {
        x
    } else {
        y
    }
}

/// 1 / (1 + e^-x), with [`exp`].
#[inline]
pub fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + exp(-x))
}

/// log2(x) for positive, finite, normal x (the ranking losses' normalisation, of sums >= 1),
/// from [`log_parts`]. Twin: `portable_log2` in kernels/math.cuh.
pub fn log2(x: f64) -> f64 {
    let (e, ln_m) = log_parts(x);
    e as f64 + ln_m * std::f64::consts::LOG2_E
}

/// The two parts of a logarithm of a positive, finite, normal x that [`log2`] and [`ln`] share:
/// x = 2^e m with m in [sqrt(1/2), sqrt(2)), and ln m = 2 atanh(s) with s = (m - 1) / (m + 1),
/// |s| < 0.172, summed to s^23 (the next term is below 1e-18 of the result). Twin:
/// `portable_log_parts` in kernels/math.cuh.
#[inline]
fn log_parts(x: f64) -> (i64, f64) {
    let bits = x.to_bits();
    let mut e = ((bits >> 52) & 0x7ff) as i64 - 1023;
    let mut m = f64::from_bits((bits & 0x000f_ffff_ffff_ffff) | 0x3ff0_0000_0000_0000);
    if m > std::f64::consts::SQRT_2 {
        m *= 0.5;
        e += 1;
    }
    let s = (m - 1.0) / (m + 1.0);
    let s2 = s * s;
    // 1 + s2/3 + s2^2/5 + ... + s2^11/23, innermost first.
    let mut series = 1.0 / 23.0;
    let mut k = 21.0;
    while k > 0.0 {
        series = series * s2 + 1.0 / k;
        k -= 2.0;
    }
    (e, 2.0 * s * series)
}

/// ln 2 as fdlibm splits it: `e * LN2_HI` is exact for every exponent of an f64 (|e| < 2^11).
const LN2_HI_F64: u64 = 0x3fe6_2e42_fee0_0000;
const LN2_LO_F64: u64 = 0x3dea_39ef_3579_3c76;

/// ln(x) for f64 (the metrics' logarithm): [`log_parts`]' ln m, plus e ln 2 in two parts.
/// Within two ulps of the exact value; 0 gives -inf, negatives and NaN give NaN. Twin:
/// `portable_log` in kernels/math.cuh.
pub fn ln(x: f64) -> f64 {
    if x.is_nan() || x < 0.0 {
        return f64::NAN;
    }
    if x == 0.0 {
        return f64::NEG_INFINITY;
    }
    if x == f64::INFINITY {
        return x;
    }
    // Subnormals are scaled into the normal range first.
    let (x, shift) = if x < f64::MIN_POSITIVE { (x * TWO_54, -54) } else { (x, 0) };
    let (e, ln_m) = log_parts(x);
    let e = (e + shift) as f64;
    e * f64::from_bits(LN2_HI_F64) + (ln_m + e * f64::from_bits(LN2_LO_F64))
}

/// 2^54, which lifts any subnormal f64 into the normal range.
const TWO_54: f64 = 18_014_398_509_481_984.0;

/// 2^i for i in -126..=127.
#[inline]
fn pow2(i: i32) -> f32 {
    f32::from_bits(((i + 127) as u32) << 23)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ulps(a: f32, b: f32) -> u32 {
        (a.to_bits() as i64 - b.to_bits() as i64).unsigned_abs() as u32
    }

    #[test]
    fn within_one_ulp_of_the_exact_value_across_the_range() {
        // Every 61st float of either sign up to 89 (about 35 million values).
        let (mut worse, mut checked) = (0usize, 0usize);
        for bits in (0..0x42b2_0000u32).step_by(61) {
            for x in [f32::from_bits(bits), -f32::from_bits(bits)] {
                let exact = (x as f64).exp();
                let rounded = exact as f32;
                let ours = exp(x);
                assert!(ulps(ours, rounded) <= 1, "exp({x:e}) = {ours:e}, exact {exact:e}");
                worse += (ours != rounded) as usize;
                checked += 1;
            }
        }
        assert!(worse * 100 < checked, "{worse} of {checked} not correctly rounded");
    }

    /// The branching form `exp` had (and the kernels' `portable_expf` has): early exits, and
    /// `floor` for k.
    fn branching_exp(x: f32) -> f32 {
        if x.is_nan() {
            return x;
        }
        if x > OVERFLOW_ABOVE {
            return f32::INFINITY;
        }
        if x < UNDERFLOW_BELOW {
            return 0.0;
        }
        let k = (x * std::f32::consts::LOG2_E + 0.5).floor();
        let r = (x - k * LN2_HI) - k * LN2_LO;
        let p = P.iter().rev().fold(0.0, |p, &c| p * r + c);
        let y = (r * r * p + r) + 1.0;
        let k = k as i32;
        y * pow2(k / 2) * pow2(k - k / 2)
    }

    #[test]
    fn the_branch_free_form_gives_the_branching_forms_bits() {
        // Every 257th bit pattern (all four billion agreed when the form changed), and the
        // floats around the range's ends and where k changes.
        let mut xs: Vec<f32> = (0..=u32::MAX).step_by(257).map(f32::from_bits).collect();
        for edge in [OVERFLOW_ABOVE, UNDERFLOW_BELOW, 88.722_83, -87.336_55, 0.346_573_6, -0.346_573_6] {
            let b = edge.to_bits();
            xs.extend((b.saturating_sub(1000)..b + 1000).map(f32::from_bits));
        }
        for x in xs {
            let (ours, theirs) = (exp(x), branching_exp(x));
            assert!(ours.to_bits() == theirs.to_bits() || ours.is_nan() && theirs.is_nan(), "exp({x:e})");
        }
    }

    #[test]
    fn the_edges_of_the_range_and_special_values() {
        assert_eq!(exp(0.0), 1.0);
        assert_eq!(exp(-0.0), 1.0);
        assert_eq!(exp(1.0), std::f32::consts::E);
        assert!(exp(f32::NAN).is_nan());
        assert_eq!(exp(f32::INFINITY), f32::INFINITY);
        assert_eq!(exp(f32::NEG_INFINITY), 0.0);
        // The largest float whose exponential is finite, and the next one up.
        let last = 88.722_83_f32;
        assert!(
            (last as f64) < (f32::MAX as f64).ln()
                && (f32::from_bits(last.to_bits() + 1) as f64) > (f32::MAX as f64).ln()
        );
        assert_eq!(exp(last), ((last as f64).exp()) as f32);
        assert!(exp(last).is_finite());
        assert_eq!(exp(f32::from_bits(last.to_bits() + 1)), f32::INFINITY);
        // Subnormal results round as the exact value does; far below, zero.
        for x in [-87.5f32, -90.0, -100.0, -103.0, -103.9] {
            assert!(ulps(exp(x), (x as f64).exp() as f32) <= 1, "exp({x})");
        }
        assert_eq!(exp(-104.5), 0.0);
    }

    #[test]
    fn log2_is_within_an_ulp_or_two() {
        let mut x = 1.0f64;
        while x < 1e12 {
            let ours = log2(x);
            let exact = x.log2();
            assert!(
                (ours - exact).abs() <= 4.0 * f64::EPSILON * exact.abs().max(1.0),
                "log2({x}) = {ours}, not {exact}"
            );
            x = x * 1.013 + 0.37;
        }
        for p in 0..60 {
            assert_eq!(log2((1u64 << p) as f64), p as f64);
        }
        assert!((log2(0.3) - 0.3f64.log2()).abs() < 4.0 * f64::EPSILON);
    }

    #[test]
    fn ln_is_within_two_ulps_and_handles_the_edges() {
        let ulps = |a: f64, b: f64| (a.to_bits() as i64 - b.to_bits() as i64).unsigned_abs();
        let mut x = 1e-300f64;
        while x < 1e300 {
            for y in [x, 1.0 + x.min(1.0) * 1e-3, 1.0 - x.min(1.0) * 1e-3] {
                let (ours, libm) = (ln(y), y.ln());
                assert!(ulps(ours, libm) <= 2 || (ours - libm).abs() < 1e-300, "ln({y:e}) = {ours:e}, not {libm:e}");
            }
            x *= 1.37;
        }
        assert_eq!(ln(1.0), 0.0);
        assert_eq!(ln(0.0), f64::NEG_INFINITY);
        assert_eq!(ln(f64::INFINITY), f64::INFINITY);
        assert!(ln(-1.0).is_nan() && ln(f64::NAN).is_nan());
        let tiny = f64::from_bits(3);
        assert!(ulps(ln(tiny), tiny.ln()) <= 2);
    }

    #[test]
    fn sigmoid_is_symmetric_and_saturates() {
        assert_eq!(sigmoid(0.0), 0.5);
        for x in [0.1f32, 1.0, 3.5, 10.0, 40.0] {
            let (p, q) = (sigmoid(x), sigmoid(-x));
            assert!((p + q - 1.0).abs() <= 2.0 * f32::EPSILON, "sigmoid({x}) + sigmoid(-{x}) = {}", p + q);
        }
        assert_eq!(sigmoid(200.0), 1.0);
        assert_eq!(sigmoid(-200.0), 0.0);
    }
}
