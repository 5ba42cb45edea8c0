//! The constraint parameters as users write them, and their resolution against a fit's
//! features. `monotone_constraints` takes a dict by column name (`{"price": -1}`), a list with
//! one direction per feature (`[1, 0, -1]`), or XGBoost's string (`"(1,0,-1)"`);
//! `interaction_constraints` takes lists of column names or indices (`[["a", "b"], ["c"]]`),
//! or XGBoost's string (`"[[0, 1], [2]]"`). The forms are kept as given (strings parsed), so
//! a model's parameters read back as the user wrote them; names become indices only at fit
//! time, when the features are known.

use std::collections::BTreeMap;

use serde::{de::Error as _, Deserialize, Deserializer, Serialize};
use serde_json::Value;

use crate::error::{Error, Result};
use crate::tree::Constraints;

/// Monotone directions: 1 increasing, -1 decreasing, 0 free.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum MonotoneConstraints {
    /// By column name; columns not named are free.
    ByName(BTreeMap<String, i8>),
    /// One direction per feature, in the features' order.
    ByPosition(Vec<i8>),
}

/// A feature named by its column name or its position among the features.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum FeatureRef {
    Name(String),
    Index(u32),
}

/// Sets of features allowed to interact.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(transparent)]
pub struct InteractionConstraints(pub Vec<Vec<FeatureRef>>);

fn direction(v: &Value) -> std::result::Result<i8, String> {
    match v.as_f64() {
        Some(x) if x == -1.0 || x == 0.0 || x == 1.0 => Ok(x as i8),
        _ => Err(format!("a direction must be -1, 0 or 1, not {v}")),
    }
}

/// XGBoost's string form "(1,0,-1)" (or "[1,0,-1]").
fn parse_tuple_text(text: &str) -> std::result::Result<Vec<i8>, String> {
    let inner = text.trim().trim_start_matches(['(', '[']).trim_end_matches([')', ']']);
    if inner.trim().is_empty() {
        return Ok(Vec::new());
    }
    inner
        .split(',')
        .map(|p| {
            let p = p.trim();
            match p.parse::<i8>() {
                Ok(d @ -1..=1) => Ok(d),
                _ => Err(format!("cannot read {p:?} in {text:?} as a direction (-1, 0 or 1)")),
            }
        })
        .collect()
}

impl MonotoneConstraints {
    fn from_value(v: Value) -> std::result::Result<Self, String> {
        match v {
            Value::Object(map) => map
                .into_iter()
                .map(|(name, d)| Ok((name.clone(), direction(&d).map_err(|e| format!("{name:?}: {e}"))?)))
                .collect::<std::result::Result<_, String>>()
                .map(MonotoneConstraints::ByName),
            Value::Array(items) => items.iter().map(direction).collect::<std::result::Result<_, _>>().map(Self::ByPosition),
            Value::String(text) => parse_tuple_text(&text).map(Self::ByPosition),
            other => Err(format!(
                "expected a dict by column name, a list of -1/0/1 per feature, or a string such as \"(1,0,-1)\"; got {other}"
            )),
        }
    }

    /// One direction per feature of `names`; `categorical` marks features that cannot take one.
    pub fn resolve(&self, names: &[String], categorical: &[bool]) -> Result<Vec<i8>> {
        let err = |reason: String| Error::param("monotone_constraints", reason);
        let directions = match self {
            MonotoneConstraints::ByName(map) => {
                let mut out = vec![0i8; names.len()];
                for (name, &d) in map {
                    let Some(f) = names.iter().position(|n| n == name) else {
                        return Err(err(format!("names `{name}`, which is not a feature column")));
                    };
                    out[f] = d;
                }
                out
            }
            MonotoneConstraints::ByPosition(v) => {
                if v.len() != names.len() {
                    return Err(err(format!(
                        "has {} directions for {} features; give one per feature, or a dict by column name",
                        v.len(),
                        names.len()
                    )));
                }
                v.clone()
            }
        };
        for (f, &d) in directions.iter().enumerate() {
            if d != 0 && categorical[f] {
                return Err(err(format!(
                    "constrains `{}`, a categorical feature: categories have no order to be monotone in",
                    names[f]
                )));
            }
        }
        Ok(directions)
    }
}

impl<'de> Deserialize<'de> for MonotoneConstraints {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        Self::from_value(Value::deserialize(d)?).map_err(D::Error::custom)
    }
}

impl InteractionConstraints {
    fn from_value(v: Value) -> std::result::Result<Self, String> {
        let v = match v {
            Value::String(text) => serde_json::from_str::<Value>(&text)
                .map_err(|e| format!("cannot read {text:?} as a list of lists: {e}"))?,
            v => v,
        };
        let Value::Array(sets) = v else {
            return Err(format!("expected a list of lists of column names or indices, got {v}"));
        };
        sets.into_iter()
            .map(|set| match set {
                Value::Array(items) => items
                    .into_iter()
                    .map(|item| match item {
                        Value::String(name) => Ok(FeatureRef::Name(name)),
                        Value::Number(n) if n.as_u64().is_some_and(|i| i <= u32::MAX as u64) => {
                            Ok(FeatureRef::Index(n.as_u64().unwrap() as u32))
                        }
                        other => Err(format!("a feature is a column name or an index, not {other}")),
                    })
                    .collect(),
                other => Err(format!("each set is a list of features, not {other}")),
            })
            .collect::<std::result::Result<_, _>>()
            .map(InteractionConstraints)
    }

    /// The sets as sorted feature indices of `names`.
    pub fn resolve(&self, names: &[String]) -> Result<Vec<Vec<u32>>> {
        let err = |reason: String| Error::param("interaction_constraints", reason);
        let mut sets = Vec::with_capacity(self.0.len());
        for set in &self.0 {
            if set.is_empty() {
                return Err(err("holds an empty set".into()));
            }
            let mut ids = Vec::with_capacity(set.len());
            for r in set {
                ids.push(match r {
                    FeatureRef::Name(name) => names
                        .iter()
                        .position(|n| n == name)
                        .ok_or_else(|| err(format!("names `{name}`, which is not a feature column")))?
                        as u32,
                    FeatureRef::Index(i) if (*i as usize) < names.len() => *i,
                    FeatureRef::Index(i) => {
                        return Err(err(format!("names feature {i}, but there are {} features", names.len())))
                    }
                });
            }
            ids.sort_unstable();
            ids.dedup();
            sets.push(ids);
        }
        Ok(sets)
    }
}

impl<'de> Deserialize<'de> for InteractionConstraints {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        Self::from_value(Value::deserialize(d)?).map_err(D::Error::custom)
    }
}

/// Both constraint parameters resolved against the features `names` (`categorical` marking
/// the categorical ones).
pub fn resolve(
    monotone: Option<&MonotoneConstraints>,
    interaction: Option<&InteractionConstraints>,
    names: &[String],
    categorical: &[bool],
) -> Result<Constraints> {
    let mut c = Constraints::default();
    if let Some(m) = monotone {
        c.monotone = m.resolve(names, categorical)?;
        if !c.has_monotone() {
            c.monotone.clear();
        }
    }
    if let Some(i) = interaction {
        c.interaction = i.resolve(names)?;
    }
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names() -> Vec<String> {
        ["a", "b", "c"].iter().map(|s| s.to_string()).collect()
    }

    fn monotone(json: &str) -> std::result::Result<MonotoneConstraints, serde_json::Error> {
        serde_json::from_str(json)
    }

    #[test]
    fn monotone_forms_resolve_alike() {
        let want = vec![1, 0, -1];
        for json in [r#"{"a": 1, "c": -1}"#, "[1, 0, -1]", r#""(1,0,-1)""#, r#""(1, 0, -1)""#] {
            let m = monotone(json).unwrap();
            assert_eq!(m.resolve(&names(), &[false; 3]).unwrap(), want, "{json}");
        }
    }

    #[test]
    fn bad_monotone_constraints_say_what_is_wrong() {
        assert!(monotone("[2, 0, 0]").unwrap_err().to_string().contains("-1, 0 or 1"));
        assert!(monotone(r#""(1,x)""#).unwrap_err().to_string().contains("\"x\""));
        let e = monotone(r#"{"price": 1}"#).unwrap().resolve(&names(), &[false; 3]).unwrap_err().to_string();
        assert!(e.contains("`price`") && e.contains("not a feature column"), "{e}");
        let e = monotone("[1, 0]").unwrap().resolve(&names(), &[false; 3]).unwrap_err().to_string();
        assert!(e.contains("2 directions for 3 features"), "{e}");
        let e = monotone(r#"{"b": -1}"#).unwrap().resolve(&names(), &[false, true, false]).unwrap_err().to_string();
        assert!(e.contains("`b`") && e.contains("categorical"), "{e}");
    }

    #[test]
    fn interaction_sets_by_name_index_or_text() {
        for json in [r#"[["a", "b"], ["c"]]"#, "[[0, 1], [2]]", r#""[[1, 0], [2]]""#, r#"[["b", 0, "a"], [2]]"#] {
            let i: InteractionConstraints = serde_json::from_str(json).unwrap();
            assert_eq!(i.resolve(&names()).unwrap(), vec![vec![0, 1], vec![2]], "{json}");
        }
        let i: InteractionConstraints = serde_json::from_str(r#"[["a", "zz"]]"#).unwrap();
        assert!(i.resolve(&names()).unwrap_err().to_string().contains("`zz`"));
        let i: InteractionConstraints = serde_json::from_str("[[0, 7]]").unwrap();
        assert!(i.resolve(&names()).unwrap_err().to_string().contains("feature 7"));
        assert!(serde_json::from_str::<InteractionConstraints>("[0, 1]").is_err());
        assert!(serde_json::from_str::<InteractionConstraints>(r#"[[0.5]]"#).is_err());
    }

    #[test]
    fn the_form_given_is_the_form_stored() {
        let m = monotone(r#"{"a": 1}"#).unwrap();
        assert_eq!(serde_json::to_string(&m).unwrap(), r#"{"a":1}"#);
        let t = monotone(r#""(1,0,-1)""#).unwrap();
        assert_eq!(serde_json::to_string(&t).unwrap(), "[1,0,-1]");
    }
}
