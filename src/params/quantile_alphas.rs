//! `quantile_alpha`: one quantile, or several in one model (XGBoost 2.0's
//! `quantile_alpha=[0.1, 0.5, 0.9]`: one output, and one tree per round, per quantile). Given
//! and stored as a number when there is one, else as a list. Kept in a fixed array so the
//! parameter structs built from it stay `Copy`.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The most quantiles one model fits.
pub const MAX_QUANTILES: usize = 32;

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct QuantileAlphas {
    values: [f64; MAX_QUANTILES],
    len: usize,
}

impl QuantileAlphas {
    /// One quantile.
    pub const fn one(alpha: f64) -> Self {
        let mut values = [0.0; MAX_QUANTILES];
        values[0] = alpha;
        QuantileAlphas { values, len: 1 }
    }

    /// Several quantiles, in the outputs' order; None when there are none or too many.
    pub fn many(alphas: &[f64]) -> Option<Self> {
        if alphas.is_empty() || alphas.len() > MAX_QUANTILES {
            return None;
        }
        let mut values = [0.0; MAX_QUANTILES];
        values[..alphas.len()].copy_from_slice(alphas);
        Some(QuantileAlphas { values, len: alphas.len() })
    }

    pub fn as_slice(&self) -> &[f64] {
        &self.values[..self.len]
    }

    /// The quantile of output `k`.
    pub fn get(&self, k: usize) -> f64 {
        self.values[k]
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Default for QuantileAlphas {
    fn default() -> Self {
        QuantileAlphas::one(0.5)
    }
}

impl Serialize for QuantileAlphas {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.as_slice() {
            [one] => s.serialize_f64(*one),
            many => many.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for QuantileAlphas {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Given {
            One(f64),
            Many(Vec<f64>),
        }
        match Given::deserialize(d)? {
            Given::One(a) => Ok(QuantileAlphas::one(a)),
            Given::Many(v) => QuantileAlphas::many(&v).ok_or_else(|| {
                serde::de::Error::custom(format!(
                    "quantile_alpha takes a number or a list of 1 to {MAX_QUANTILES} numbers, not {} of them",
                    v.len()
                ))
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_quantile_reads_and_writes_as_a_number_several_as_a_list() {
        let one: QuantileAlphas = serde_json::from_str("0.9").unwrap();
        assert_eq!(one.as_slice(), &[0.9]);
        assert_eq!(serde_json::to_string(&one).unwrap(), "0.9");
        let many: QuantileAlphas = serde_json::from_str("[0.1, 0.5, 0.9]").unwrap();
        assert_eq!(many.as_slice(), &[0.1, 0.5, 0.9]);
        assert_eq!(serde_json::to_string(&many).unwrap(), "[0.1,0.5,0.9]");
        let e = serde_json::from_str::<QuantileAlphas>("[]").unwrap_err().to_string();
        assert!(e.contains("a list of 1 to 32 numbers, not 0"), "{e}");
        assert!(serde_json::from_str::<QuantileAlphas>(r#""0.5""#).is_err());
    }
}
