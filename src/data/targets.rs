//! Labels and what goes with them, as losses and metrics read them. It sits in `data`, below
//! both, so that neither `metric` nor `objective` needs the other for it (nor for the order
//! of survival times, which `survival:cox` and `cox-nloglik` both walk).

/// Labels and what goes with them.
#[derive(Clone, Copy)]
pub struct Targets<'a> {
    pub label: &'a [f32],
    /// Upper bounds of the labels (`survival:aft`, where the label is the lower bound): a row's
    /// value lies in `[label, label_upper]`, `inf` for right-censored.
    pub label_upper: Option<&'a [f32]>,
    pub weight: Option<&'a [f32]>,
    /// Query group offsets (ranking).
    pub groups: Option<&'a [usize]>,
}

impl Targets<'_> {
    #[inline]
    pub fn w(&self, i: usize) -> f32 {
        self.weight.map_or(1.0, |w| w[i])
    }

    pub fn n_rows(&self) -> usize {
        self.label.len()
    }
}

/// The first position whose value fails `ok`, if any: the checks of labels, weights and
/// margins. Blocks of values are read in parallel, each with no early exit (which lets the
/// test vectorise), and only a failing block is searched value by value.
pub(crate) fn first_failing(values: &[f32], ok: impl Fn(f32) -> bool + Sync) -> Option<usize> {
    use rayon::prelude::*;
    const BLOCK: usize = 1 << 14;
    let block = values.par_chunks(BLOCK).position_first(|b| !b.iter().fold(true, |all, &v| all & ok(v)))?;
    let start = block * BLOCK;
    values[start..].iter().position(|&v| !ok(v)).map(|i| start + i)
}

/// Rows by `|label|`, ascending (ties in row order): the order of survival times (a label is
/// a time, negative when censored) that the Cox loss and metric walk.
pub(crate) fn survival_order(label: &[f32]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..label.len()).collect();
    order.sort_by(|&a, &b| label[a].abs().total_cmp(&label[b].abs()));
    order
}

#[cfg(test)]
mod tests {
    use super::first_failing;

    #[test]
    fn the_first_failing_value_is_found_in_any_block() {
        let mut v = vec![0.5f32; 100_000];
        assert_eq!(first_failing(&v, |x| x < 1.0), None);
        assert_eq!(first_failing(&[], |x: f32| x < 1.0), None);
        for at in [0, 16_383, 16_384, 70_000, 99_999] {
            v[at] = f32::NAN;
            v[99_999] = 2.0;
            assert_eq!(first_failing(&v, |x| x < 1.0), Some(at), "{at}");
            v[at] = 0.5;
        }
    }
}
