//! Training data ([`Dataset`]): the features, and what training needs besides them (labels,
//! label bounds, weights, query groups, base margin), or rows already binned with their cut
//! points (a streamed fit's, [`BinnedRows`]).

use std::collections::HashSet;
use std::sync::Arc;

use arrow_array::RecordBatch;
use arrow_buffer::ScalarBuffer;

use super::binned_rows::{BinnedRows, BinnedView};
use super::frame::{column_to_f32, FeatureFrame};
use super::targets::first_failing;
use super::Targets;
use crate::error::{Error, Result};

/// Training data: features, label, and optional weights, query groups and base margin.
#[derive(Clone, Debug)]
pub struct Dataset {
    pub(crate) features: FeatureFrame,
    /// The labels, target-major: target `t` of row `i` at `t * n_rows + i`.
    pub(crate) label: ScalarBuffer<f32>,
    /// Labels per row: 1, or several for multi-target regression (one output each).
    pub(crate) n_targets: usize,
    /// Upper bounds of the labels, for interval targets (`survival:aft`).
    pub(crate) label_upper: Option<ScalarBuffer<f32>>,
    pub(crate) weight: Option<ScalarBuffer<f32>>,
    /// Query groups as offsets: group `q` is rows `offsets[q]..offsets[q + 1]`.
    pub(crate) group_offsets: Option<Vec<usize>>,
    /// Per-row starting margin, row-major `n_rows x n_outputs`.
    pub(crate) base_margin: Option<Vec<f32>>,
    /// The rows already binned, with their cut points (a streamed fit: `data::stream`); the
    /// features are then the columns' schema (names, dtypes, categories) with no rows.
    pub(crate) binned: Option<SharedBins>,
}

/// A binned dataset's rows: rows `first..first + n_rows` of a matrix that the shards of a fit
/// over several GPUs share (`Dataset::row_range`), all of it otherwise.
#[derive(Clone, Debug)]
pub(crate) struct SharedBins {
    rows: Arc<BinnedRows>,
    first: usize,
    n_rows: usize,
}

impl Dataset {
    /// What a loss reads: the label, weights and query groups.
    pub fn targets(&self) -> Targets<'_> {
        Targets {
            label: &self.label,
            label_upper: self.label_upper.as_deref(),
            weight: self.weight.as_deref(),
            groups: self.group_offsets.as_deref(),
        }
    }

    /// The same dataset, values equal to `value` in numeric feature columns read as missing.
    pub fn with_missing_value(&self, value: f32) -> Dataset {
        Dataset { features: self.features.with_missing_value(value), ..self.clone() }
    }

    /// The same dataset with the weight of each row labelled 1 multiplied by `factor` (rows
    /// without weights weigh 1): XGBoost's `scale_pos_weight`, as the weight it is.
    pub fn with_positive_weight(&self, factor: f32) -> Dataset {
        let weight = (0..self.n_rows())
            .map(|i| {
                let w = self.weight.as_ref().map_or(1.0, |w| w[i]);
                if self.label[i] == 1.0 {
                    w * factor
                } else {
                    w
                }
            })
            .collect();
        Dataset { weight: Some(weight), ..self.clone() }
    }

    /// Features and one label per row.
    pub fn new(features: FeatureFrame, label: Vec<f32>) -> Result<Self> {
        Self::with_label(features, label.into())
    }

    /// Features and one label per row, the label an Arrow buffer (shared, not copied).
    pub fn with_label(features: FeatureFrame, label: ScalarBuffer<f32>) -> Result<Self> {
        Self::with_labels(features, label, 1)
    }

    /// Features and `n_targets` labels per row (multi-target regression: one output, and one
    /// tree per round, per target), target-major: target `t` of row `i` at `t * n_rows + i`.
    pub fn with_labels(features: FeatureFrame, label: ScalarBuffer<f32>, n_targets: usize) -> Result<Self> {
        if features.n_rows() == 0 {
            return Err(Error::data("the data has no rows"));
        }
        Self::with_labels_or_empty(features, label, n_targets)
    }

    /// [`Dataset::with_labels`], with no rows allowed: a worker's share of a distributed
    /// fit's evaluation set may be empty (`booster::Training::shard`).
    pub fn with_labels_or_empty(features: FeatureFrame, label: ScalarBuffer<f32>, n_targets: usize) -> Result<Self> {
        let n = features.n_rows();
        Self::check_labels(&label, n, n_targets)?;
        Ok(Dataset {
            features,
            label,
            n_targets,
            label_upper: None,
            weight: None,
            group_offsets: None,
            base_margin: None,
            binned: None,
        })
    }

    /// `n` rows already binned (`rows`, with their cuts) and `n_targets` labels per row,
    /// target-major; `schema` is the features' columns with no rows (names, dtypes, and the
    /// categories the bins code). What a streamed fit trains on (`data::stream`).
    pub(crate) fn from_binned(
        schema: FeatureFrame,
        rows: BinnedRows,
        n: usize,
        label: ScalarBuffer<f32>,
        n_targets: usize,
    ) -> Result<Self> {
        if rows.elsewhere.is_none() && rows.matrix.n_rows != n {
            return Err(Error::data(format!("{} binned rows for {n} rows", rows.matrix.n_rows)));
        }
        if n == 0 {
            return Err(Error::data("the data has no rows"));
        }
        if schema.n_rows() != 0 || schema.n_features() != rows.cuts.len() {
            return Err(Error::data("a binned dataset's schema must have no rows and one column per feature"));
        }
        Self::check_labels(&label, n, n_targets)?;
        Ok(Dataset {
            features: schema,
            label,
            n_targets,
            label_upper: None,
            weight: None,
            group_offsets: None,
            base_margin: None,
            binned: Some(SharedBins { n_rows: n, first: 0, rows: Arc::new(rows) }),
        })
    }

    /// No rows, with this dataset's features (their schema) and inputs (targets, and weights,
    /// query groups, margins and upper bounds where this has them): a distributed fit's worker
    /// that holds none of an evaluation set's rows.
    pub(crate) fn with_no_rows(&self) -> Dataset {
        let empty = || ScalarBuffer::from(Vec::<f32>::new());
        Dataset {
            features: self.features.row_range(0, 0),
            label: empty(),
            n_targets: self.n_targets,
            label_upper: self.label_upper.as_ref().map(|_| empty()),
            weight: self.weight.as_ref().map(|_| empty()),
            group_offsets: self.group_offsets.as_ref().map(|_| vec![0]),
            base_margin: self.base_margin.as_ref().map(|_| Vec::new()),
            binned: None,
        }
    }

    /// The rows already binned with their cuts (a streamed fit), if they are.
    pub fn binned(&self) -> Option<BinnedView<'_>> {
        self.binned.as_ref().map(|b| BinnedView { all: &b.rows, first: b.first, n_rows: b.n_rows })
    }

    /// `n_targets` finite labels a row for `n` rows.
    fn check_labels(label: &[f32], n: usize, n_targets: usize) -> Result<()> {
        if n_targets == 0 || label.len() != n * n_targets {
            return Err(Error::data(match n_targets {
                1 => format!("the label has {} rows but the features have {n}", label.len()),
                k => format!("{} label values are not {k} targets for each of the features' {n} rows", label.len()),
            }));
        }
        if let Some(j) = first_failing(label, f32::is_finite) {
            let (target, i) = (j / n, j % n);
            let which = if n_targets > 1 { format!(" of target {target}") } else { String::new() };
            return Err(Error::column(
                "label",
                format!("value{which} at row {i} is {} (labels must be finite)", label[j]),
            ));
        }
        Ok(())
    }

    /// A record batch whose column `label` is the label and whose other columns are features.
    pub fn from_record_batch(batch: &RecordBatch, label: &str) -> Result<Self> {
        let idx = batch.schema().index_of(label).map_err(|_| Error::column(label, "label column not found"))?;
        let y = column_to_f32(label, &[batch.column(idx).clone()])?;
        Self::with_label(FeatureFrame::from_record_batch(batch)?.without(&[label])?, y)
    }

    /// Upper bounds of the labels, for `survival:aft` (XGBoost's `label_upper_bound`; the label
    /// is then the lower bound): each at least its row's label, `inf` for a right-censored row.
    pub fn with_label_upper_bound(mut self, upper: ScalarBuffer<f32>) -> Result<Self> {
        let column = "label_upper_bound";
        if self.n_targets != 1 {
            return Err(Error::column(column, "interval labels have one target; the label has several"));
        }
        if upper.len() != self.n_rows() {
            return Err(Error::column(column, format!("has {} rows but the data has {}", upper.len(), self.n_rows())));
        }
        if let Some(i) = (0..upper.len()).find(|&i| upper[i].is_nan() || upper[i] < self.label[i]) {
            return Err(Error::column(
                column,
                format!("value at row {i} is {}, below that row's label {} (the lower bound)", upper[i], self.label[i]),
            ));
        }
        self.label_upper = Some(upper);
        Ok(self)
    }

    /// Per-row sample weights: finite, non-negative, not all zero.
    pub fn with_weight(self, weight: Vec<f32>) -> Result<Self> {
        self.with_weight_buffer(weight.into())
    }

    /// [`Dataset::with_weight_buffer`] for a part of a fit's rows (a stream's batch,
    /// `data::stream`): its weights may all be zero, which only the whole must not be.
    pub fn with_part_weight(self, weight: ScalarBuffer<f32>) -> Result<Self> {
        self.checked_weight(weight, false)
    }

    /// [`Dataset::with_weight`] from an Arrow buffer (shared, not copied).
    pub fn with_weight_buffer(self, weight: ScalarBuffer<f32>) -> Result<Self> {
        self.checked_weight(weight, true)
    }

    /// Sets finite, non-negative weights; `whole`: not all zero either.
    fn checked_weight(mut self, weight: ScalarBuffer<f32>, whole: bool) -> Result<Self> {
        if weight.len() != self.n_rows() {
            return Err(Error::data(format!("weight has {} rows but the data has {}", weight.len(), self.n_rows())));
        }
        if let Some(i) = first_failing(&weight, |w| w.is_finite() && w >= 0.0) {
            return Err(Error::column(
                "weight",
                format!("value at row {i} is {} (weights must be finite and >= 0)", weight[i]),
            ));
        }
        if whole && !weight.is_empty() && weight.iter().all(|w| *w == 0.0) {
            return Err(Error::column("weight", "all weights are zero"));
        }
        self.weight = Some(weight);
        Ok(self)
    }

    /// Query groups as sizes of consecutive runs of rows (LightGBM's `.query` files).
    pub fn with_group_sizes(mut self, sizes: &[usize]) -> Result<Self> {
        if sizes.contains(&0) {
            return Err(Error::column("group", "a query group is empty"));
        }
        let total: usize = sizes.iter().sum();
        if total != self.n_rows() {
            return Err(Error::column(
                "group",
                format!("group sizes sum to {total} but the data has {} rows", self.n_rows()),
            ));
        }
        let mut offsets = Vec::with_capacity(sizes.len() + 1);
        offsets.push(0);
        for s in sizes {
            offsets.push(offsets.last().unwrap() + s);
        }
        self.group_offsets = Some(offsets);
        Ok(self)
    }

    /// Query groups as one id per row; rows of a group must be contiguous.
    pub fn with_group_ids(self, ids: &[i64]) -> Result<Self> {
        if ids.len() != self.n_rows() {
            return Err(Error::column("group", format!("has {} rows but the data has {}", ids.len(), self.n_rows())));
        }
        let mut sizes = Vec::new();
        let mut seen = HashSet::new();
        let mut i = 0;
        while i < ids.len() {
            let id = ids[i];
            if !seen.insert(id) {
                return Err(Error::column(
                    "group",
                    format!("rows of query group {id} are not contiguous; sort by group first"),
                ));
            }
            let start = i;
            while i < ids.len() && ids[i] == id {
                i += 1;
            }
            sizes.push(i - start);
        }
        self.with_group_sizes(&sizes)
    }

    /// A starting margin per row (row-major `n_rows x n_outputs`), used instead of the base score.
    pub fn with_base_margin(mut self, margin: Vec<f32>) -> Result<Self> {
        let n = self.n_rows();
        if (n == 0 && !margin.is_empty()) || (n > 0 && (margin.is_empty() || !margin.len().is_multiple_of(n))) {
            return Err(Error::column(
                "base_margin",
                format!("has {} values for {} rows", margin.len(), self.n_rows()),
            ));
        }
        if let Some(i) = first_failing(&margin, f32::is_finite) {
            return Err(Error::column("base_margin", format!("value {i} is {} (must be finite)", margin[i])));
        }
        self.base_margin = Some(margin);
        Ok(self)
    }

    /// Rows `start..start + len`, with their labels, weights, margins and query groups (the
    /// range must not cut a query group). Features, binned rows and one-target labels share
    /// their buffers.
    pub fn row_range(&self, start: usize, len: usize) -> Result<Dataset> {
        let n = self.n_rows();
        let end = start + len;
        assert!(end <= n, "rows {start}..{end} past the end of {n}");
        let group_offsets = match &self.group_offsets {
            None => None,
            Some(offsets) => {
                let (Ok(first), Ok(last)) = (offsets.binary_search(&start), offsets.binary_search(&end)) else {
                    return Err(Error::data(format!("rows {start}..{end} cut a query group")));
                };
                Some(offsets[first..=last].iter().map(|o| o - start).collect())
            }
        };
        let per_target = |v: &ScalarBuffer<f32>| -> ScalarBuffer<f32> {
            if self.n_targets == 1 {
                v.slice(start, len)
            } else {
                (0..self.n_targets)
                    .flat_map(|t| v[t * n + start..t * n + end].iter().copied())
                    .collect::<Vec<_>>()
                    .into()
            }
        };
        let k = self.base_margin.as_ref().map_or(0, |m| m.len() / n.max(1));
        // Binned rows stay where they are, shared: the range is a window on them.
        let (features, binned) = match &self.binned {
            Some(b) => {
                (self.features.clone(), Some(SharedBins { rows: b.rows.clone(), first: b.first + start, n_rows: len }))
            }
            None => (self.features.row_range(start, len), None),
        };
        Ok(Dataset {
            features,
            label: per_target(&self.label),
            n_targets: self.n_targets,
            label_upper: self.label_upper.as_ref().map(|u| u.slice(start, len)),
            weight: self.weight.as_ref().map(|w| w.slice(start, len)),
            group_offsets,
            base_margin: self.base_margin.as_ref().map(|m| m[start * k..end * k].to_vec()),
            binned,
        })
    }

    pub fn n_rows(&self) -> usize {
        match &self.binned {
            Some(b) => b.n_rows,
            None => self.features.n_rows(),
        }
    }

    pub fn features(&self) -> &FeatureFrame {
        &self.features
    }

    /// The labels, target-major (see [`Dataset::with_labels`]).
    pub fn label(&self) -> &[f32] {
        &self.label
    }

    /// Labels per row (1 unless multi-target).
    pub fn n_targets(&self) -> usize {
        self.n_targets
    }

    pub fn label_upper(&self) -> Option<&[f32]> {
        self.label_upper.as_deref()
    }

    pub fn weight(&self) -> Option<&[f32]> {
        self.weight.as_deref()
    }

    pub fn group_offsets(&self) -> Option<&[usize]> {
        self.group_offsets.as_deref()
    }

    pub fn base_margin(&self) -> Option<&[f32]> {
        self.base_margin.as_deref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::FeatureColumn;
    use arrow_array::{ArrayRef, Float32Array};

    #[test]
    fn row_ranges_carry_every_per_row_field() {
        let x = FeatureColumn::new("x", vec![Arc::new(Float32Array::from(vec![0., 1., 2., 3., 4., 5.])) as ArrayRef])
            .unwrap();
        let frame = FeatureFrame::new(vec![x]).unwrap();
        // Two targets, target-major; groups 0..2, 2..5, 5..6; two margins a row.
        let label: Vec<f32> = (0..12).map(|v| v as f32).collect();
        let data = Dataset::with_labels(frame, label.into(), 2)
            .unwrap()
            .with_weight(vec![1., 2., 3., 4., 5., 6.])
            .unwrap()
            .with_group_sizes(&[2, 3, 1])
            .unwrap()
            .with_base_margin((0..12).map(|v| v as f32 * 0.5).collect())
            .unwrap();
        let part = data.row_range(2, 3).unwrap();
        assert_eq!(part.n_rows(), 3);
        assert_eq!(part.label(), &[2., 3., 4., 8., 9., 10.]);
        assert_eq!(part.weight().unwrap(), &[3., 4., 5.]);
        assert_eq!(part.group_offsets().unwrap(), &[0, 3]);
        assert_eq!(part.base_margin().unwrap(), &[2., 2.5, 3., 3.5, 4., 4.5]);
        let mut xs = vec![0f32; 3];
        part.features().column(0).read(0, &mut xs);
        assert_eq!(xs, [2., 3., 4.]);
        let err = data.row_range(1, 3).unwrap_err().to_string();
        assert!(err.contains("cut a query group"), "{err}");
    }
}
