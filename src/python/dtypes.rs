//! Every Polars dtype the plugin can be handed, as a column the crate reads, and Polars'
//! names for dtypes in messages.
//!
//! What each dtype means to the model (docs/user-guide.md, "Data types"):
//! - Boolean, integers of every width, Float16/32/64 and Decimal: their values (read as `f32`).
//! - Date: days since 1970-01-01. Datetime: the time unit's count since 1970-01-01 UTC
//!   (whatever the time zone). Duration: the time unit's count. Time: nanoseconds since
//!   midnight. The model keeps the dtype with its unit; a scoring column in another unit is
//!   converted to the training unit.
//! - String, Categorical and Enum: categorical features (categories matched by name).
//! - Null (a column of nulls only): an all-missing numeric feature.
//! - Anything else (Binary, List, Array, Struct, Object) is an error naming the
//!   column and its dtype.

use polars::prelude::*;

use super::to_polars;
use crate::model::FeatureInfo;

/// A dtype as Polars' Python API writes it: "Int8", "Datetime(us, UTC)", "Decimal(10, 2)".
pub fn dtype_name(dtype: &DataType) -> String {
    let unit = |tu: &TimeUnit| match tu {
        TimeUnit::Nanoseconds => "ns",
        TimeUnit::Microseconds => "us",
        TimeUnit::Milliseconds => "ms",
    };
    match dtype {
        DataType::Boolean => "Boolean".into(),
        DataType::UInt8 => "UInt8".into(),
        DataType::UInt16 => "UInt16".into(),
        DataType::UInt32 => "UInt32".into(),
        DataType::UInt64 => "UInt64".into(),
        DataType::UInt128 => "UInt128".into(),
        DataType::Int8 => "Int8".into(),
        DataType::Int16 => "Int16".into(),
        DataType::Int32 => "Int32".into(),
        DataType::Int64 => "Int64".into(),
        DataType::Int128 => "Int128".into(),
        DataType::Float16 => "Float16".into(),
        DataType::Float32 => "Float32".into(),
        DataType::Float64 => "Float64".into(),
        DataType::Decimal(precision, scale) => format!("Decimal({precision}, {scale})"),
        DataType::String => "String".into(),
        DataType::Binary | DataType::BinaryOffset => "Binary".into(),
        DataType::Date => "Date".into(),
        DataType::Datetime(tu, None) => format!("Datetime({})", unit(tu)),
        DataType::Datetime(tu, Some(tz)) => format!("Datetime({}, {tz})", unit(tu)),
        DataType::Duration(tu) => format!("Duration({})", unit(tu)),
        DataType::Time => "Time".into(),
        DataType::Array(inner, width) => format!("Array({}, {width})", dtype_name(inner)),
        DataType::List(inner) => format!("List({})", dtype_name(inner)),
        DataType::Null => "Null".into(),
        DataType::Categorical(..) => "Categorical".into(),
        DataType::Enum(..) => "Enum".into(),
        DataType::Struct(_) => "Struct".into(),
        DataType::Object(_) => "Object".into(),
        DataType::Unknown(_) => "Unknown".into(),
    }
}

/// A feature column's values in a dtype the crate reads (numeric, Boolean, String or
/// categorical), by the rules in this module's documentation. `name` names the column in
/// errors.
pub fn as_feature(s: &Series, name: &str) -> PolarsResult<Series> {
    Ok(match s.dtype() {
        DataType::String | DataType::Categorical(..) | DataType::Enum(..) => s.clone(),
        DataType::Date | DataType::Datetime(..) | DataType::Duration(_) | DataType::Time => {
            s.to_physical_repr().into_owned()
        }
        DataType::Null => s.cast(&DataType::Float32)?,
        // Numbers and Booleans are read as `as_number` reads them.
        _ => as_number(s, name).map_err(|_| {
            bad_column(
                name,
                format!(
                    "has dtype {}, which cannot be a feature: features must be numeric, Boolean, Decimal, \
                     Date, Datetime, Duration, Time, String, Categorical or Enum",
                    dtype_name(s.dtype())
                ),
            )
        })?,
    })
}

/// A column of numbers (target, weight, base margin) in a dtype the crate reads: Boolean,
/// integers and floats as they are (Float16 as Float32), Int128, UInt128 and Decimal as
/// Float64.
pub fn as_number(s: &Series, name: &str) -> PolarsResult<Series> {
    match s.dtype() {
        DataType::Boolean
        | DataType::UInt8
        | DataType::UInt16
        | DataType::UInt32
        | DataType::UInt64
        | DataType::Int8
        | DataType::Int16
        | DataType::Int32
        | DataType::Int64
        | DataType::Float32
        | DataType::Float64 => Ok(s.clone()),
        DataType::Float16 => s.cast(&DataType::Float32),
        DataType::Int128 | DataType::UInt128 | DataType::Decimal(..) => s.cast(&DataType::Float64),
        other => Err(bad_column(name, format!("must be numeric or Boolean, not {}", dtype_name(other)))),
    }
}

fn bad_column(name: &str, message: String) -> PolarsError {
    to_polars(crate::Error::column(name, message))
}

/// A temporal dtype as stored in a model's feature info ("Datetime(us, UTC)"): its kind, unit
/// and whether it has a time zone. None for every other dtype name (Arrow's names too, which
/// models trained through the Rust API hold).
#[derive(Debug, PartialEq)]
enum Temporal {
    Date,
    Time,
    Datetime { unit: TimeUnit, zoned: bool },
    Duration(TimeUnit),
}

fn parse_unit(unit: &str) -> Option<TimeUnit> {
    match unit {
        "ns" => Some(TimeUnit::Nanoseconds),
        "us" => Some(TimeUnit::Microseconds),
        "ms" => Some(TimeUnit::Milliseconds),
        _ => None,
    }
}

fn temporal_of_name(name: &str) -> Option<Temporal> {
    match name {
        "Date" => return Some(Temporal::Date),
        "Time" => return Some(Temporal::Time),
        _ => {}
    }
    let inner = |prefix: &str| name.strip_prefix(prefix).and_then(|r| r.strip_suffix(')'));
    if let Some(args) = inner("Datetime(") {
        let (unit, zone) = match args.split_once(", ") {
            Some((unit, zone)) => (unit, Some(zone)),
            None => (args, None),
        };
        return Some(Temporal::Datetime { unit: parse_unit(unit)?, zoned: zone.is_some() });
    }
    inner("Duration(").and_then(parse_unit).map(Temporal::Duration)
}

fn temporal_of_dtype(dtype: &DataType) -> Option<Temporal> {
    match dtype {
        DataType::Date => Some(Temporal::Date),
        DataType::Time => Some(Temporal::Time),
        DataType::Datetime(unit, zone) => Some(Temporal::Datetime { unit: *unit, zoned: zone.is_some() }),
        DataType::Duration(unit) => Some(Temporal::Duration(*unit)),
        _ => None,
    }
}

/// A scoring column as the model saw it in training: a Datetime or Duration in another time
/// unit is cast to the training unit (the same instants and lengths, so the same bins).
/// A temporal column where the model had another kind (numeric, Date against Datetime, naive
/// against time-zone-aware) is an error naming both dtypes.
pub fn as_in_training(s: &Series, name: &str, info: &FeatureInfo) -> PolarsResult<Series> {
    let trained = temporal_of_name(&info.dtype);
    let given = temporal_of_dtype(s.dtype());
    let mismatch = |why: &str| {
        bad_column(name, format!("was {} in training but is {} here{why}", info.dtype, dtype_name(s.dtype())))
    };
    match (trained, given) {
        (None, None) => Ok(s.clone()),
        (Some(Temporal::Date), Some(Temporal::Date)) | (Some(Temporal::Time), Some(Temporal::Time)) => Ok(s.clone()),
        (Some(Temporal::Datetime { unit, zoned }), Some(Temporal::Datetime { unit: given, zoned: given_zoned })) => {
            if zoned != given_zoned {
                return Err(mismatch(
                    "; a naive Datetime and a time-zone-aware one are different instants \
                     (use dt.replace_time_zone or dt.convert_time_zone)",
                ));
            }
            if unit == given {
                return Ok(s.clone());
            }
            let DataType::Datetime(_, zone) = s.dtype() else { unreachable!("matched as a Datetime") };
            s.strict_cast(&DataType::Datetime(unit, zone.clone())).map_err(|e| {
                bad_column(name, format!("cannot be converted to the training unit ({}): {e}", info.dtype))
            })
        }
        (Some(Temporal::Duration(unit)), Some(Temporal::Duration(given))) => {
            if unit == given {
                return Ok(s.clone());
            }
            s.strict_cast(&DataType::Duration(unit)).map_err(|e| {
                bad_column(name, format!("cannot be converted to the training unit ({}): {e}", info.dtype))
            })
        }
        (Some(_), None) | (None, Some(_)) | (Some(_), Some(_)) => Err(mismatch("")),
    }
}

/// Inputs of length 1 (literals such as `pl.lit(2.0)`) repeated to the length of the
/// longest input, as Polars broadcasts literals elsewhere.
pub fn broadcast(inputs: &[Series]) -> Vec<Series> {
    let n = inputs.iter().map(|s| s.len()).max().unwrap_or(0);
    inputs.iter().map(|s| if s.len() == 1 && n > 1 { s.new_from_index(0, n) } else { s.clone() }).collect()
}
