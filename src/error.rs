//! The one error type of the crate. Every bad input becomes one of these variants, with a
//! message that names the parameter, column or file at fault; nothing in the crate panics on
//! user input, so the Python plugin can turn any of them into an exception.

use thiserror::Error;

/// Everything that can go wrong in training, prediction or (de)serialisation.
#[derive(Debug, Error)]
pub enum Error {
    /// A training parameter is unknown, mistyped, or outside its range.
    #[error("invalid parameter `{name}`: {reason}")]
    Param { name: String, reason: String },

    /// A feature, label, weight or group column cannot be used as given.
    #[error("column `{column}`: {reason}")]
    Column { column: String, reason: String },

    /// The data as a whole cannot be used (empty, mismatched lengths, ...).
    #[error("invalid data: {0}")]
    Data(String),

    /// A serialised model is corrupt, truncated, or inconsistent.
    #[error("invalid model: {0}")]
    Model(String),

    /// A serialised model was written by a newer version of the format.
    #[error("model format version {found} is newer than this build supports ({supported}); upgrade polars-gbt")]
    ModelVersion { found: u32, supported: u32 },

    /// The requested device cannot be used.
    #[error("device: {0}")]
    Device(String),

    /// The workers of a distributed fit could not work together: one stopped, did not answer
    /// in time, or could not be reached. The message names the worker.
    #[error("distributed fit: {0}")]
    Collective(String),

    /// Training was stopped by the user (e.g. a keyboard interrupt).
    #[error("training was interrupted")]
    Interrupted,

    /// Reading or writing a file failed.
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
}

/// The crate's result type.
pub type Result<T> = std::result::Result<T, Error>;

/// What a caught panic says: its message, whether it was raised with a literal or a
/// formatted one.
pub fn panic_message(payload: Box<dyn std::any::Any + Send>) -> String {
    match payload.downcast::<String>() {
        Ok(s) => *s,
        Err(payload) => payload.downcast_ref::<&str>().map_or("(no message)", |s| s).to_string(),
    }
}

impl Error {
    pub(crate) fn param(name: &str, reason: impl Into<String>) -> Self {
        Error::Param { name: name.to_string(), reason: reason.into() }
    }

    pub(crate) fn column(column: &str, reason: impl Into<String>) -> Self {
        Error::Column { column: column.to_string(), reason: reason.into() }
    }

    pub(crate) fn data(reason: impl Into<String>) -> Self {
        Error::Data(reason.into())
    }

    pub(crate) fn model(reason: impl Into<String>) -> Self {
        Error::Model(reason.into())
    }
}
