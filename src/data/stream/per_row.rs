//! The per-row vectors of a stream (labels, label bounds, weights, base margins, query ids),
//! kept batch by batch beside the bins of the same rows.

use super::source::Batch;
use crate::data::binned_rows::BinnedRows;
use crate::data::dataset::Dataset;
use crate::data::frame::FeatureFrame;
use crate::error::{Error, Result};

/// The per-row vectors of every batch, in the order of the batches whose bins they sit beside.
#[derive(Default)]
pub(super) struct PerRow {
    pub(super) n: usize,
    /// One vector per target, each of room for every row when their number is known (pages
    /// reserved take memory only as batches fill them); one target's is the dataset's label
    /// as it is, with no copy.
    label: Vec<Vec<f32>>,
    label_upper: Option<Vec<f32>>,
    weight: Option<Vec<f32>>,
    base_margin: Option<Vec<f32>>,
    group_ids: Option<Vec<i64>>,
}

impl PerRow {
    /// Room for `n` rows of the vectors `b` (the first batch) has.
    pub(super) fn reserve(&mut self, n: usize, b: &Batch) {
        let d = &b.data;
        self.label = (0..d.n_targets()).map(|_| Vec::with_capacity(n)).collect();
        let room = |given: bool, per_row: usize| given.then(|| Vec::with_capacity(n * per_row));
        self.label_upper = room(d.label_upper().is_some(), 1);
        self.weight = room(d.weight().is_some(), 1);
        let k = d.base_margin().map_or(0, |m| m.len() / d.n_rows().max(1));
        self.base_margin = room(d.base_margin().is_some(), k);
        self.group_ids = b.group_ids.as_ref().map(|_| Vec::with_capacity(n));
    }

    pub(super) fn add(&mut self, b: &Batch) -> Result<()> {
        let d = &b.data;
        let (n, k) = (d.n_rows(), d.n_targets());
        if k != self.label.len() {
            return Err(Error::column(
                "label",
                format!("has {k} targets in the batch at row {} but {} before", self.n, self.label.len()),
            ));
        }
        for (t, out) in self.label.iter_mut().enumerate() {
            out.extend_from_slice(&d.label()[t * n..(t + 1) * n]);
        }
        let at = self.n;
        let append = |name: &str, mine: &mut Option<Vec<f32>>, theirs: Option<&[f32]>| -> Result<()> {
            match (&mut *mine, theirs) {
                (Some(m), Some(v)) => m.extend_from_slice(v),
                (None, None) => {}
                _ => {
                    return Err(Error::column(name, format!("is given for some batches but not the batch at row {at}")))
                }
            }
            Ok(())
        };
        append("label_upper_bound", &mut self.label_upper, d.label_upper())?;
        append("weight", &mut self.weight, d.weight())?;
        append("base_margin", &mut self.base_margin, d.base_margin())?;
        if d.group_offsets().is_some() {
            return Err(Error::column(
                "group",
                "a batch's query groups come as ids (Batch::group_ids), not in its data",
            ));
        }
        if let Some(ids) = &b.group_ids {
            if ids.len() != n {
                return Err(Error::column("group", format!("has {} ids for a batch of {n} rows", ids.len())));
            }
        }
        match (&mut self.group_ids, &b.group_ids) {
            (Some(mine), Some(ids)) => mine.extend_from_slice(ids),
            (None, None) => {}
            _ => {
                return Err(Error::column("group", format!("is given for some batches but not the batch at row {at}")))
            }
        }
        self.n += n;
        Ok(())
    }

    pub(super) fn into_dataset(self, schema: FeatureFrame, rows: BinnedRows) -> Result<Dataset> {
        let k = self.label.len();
        let label: Vec<f32> = match self.label.len() {
            1 => self.label.into_iter().next().expect("one target"),
            _ => self.label.concat(),
        };
        let mut d = Dataset::from_binned(schema, rows, self.n, label.into(), k)?;
        if let Some(u) = self.label_upper {
            d = d.with_label_upper_bound(u.into())?;
        }
        if let Some(w) = self.weight {
            d = d.with_weight(w)?;
        }
        if let Some(m) = self.base_margin {
            d = d.with_base_margin(m)?;
        }
        if let Some(ids) = self.group_ids {
            d = d.with_group_ids(&ids)?;
        }
        Ok(d)
    }
}
