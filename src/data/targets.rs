//! Labels and what goes with them, as losses and metrics read them. It sits in `data`, below
//! both, so that neither `metric` nor `objective` needs the other for it.

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
