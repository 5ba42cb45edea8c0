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

/// Rows by `|label|`, ascending (ties in row order): the order of survival times (a label is
/// a time, negative when censored) that the Cox loss and metric walk.
pub(crate) fn survival_order(label: &[f32]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..label.len()).collect();
    order.sort_by(|&a, &b| label[a].abs().total_cmp(&label[b].abs()));
    order
}
