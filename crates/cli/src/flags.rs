//! What every command's flag parsing shares: the one-line usage error (exit status 2) and the
//! parsers that modules below the plan (hooks) need too.

/// A usage error: one line, exit status 2.
#[derive(Debug)]
pub(crate) struct UsageError(pub(crate) String);

impl std::error::Error for UsageError {}

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// `Err(UsageError(msg))`.
pub(crate) fn usage<T>(msg: String) -> Result<T, UsageError> {
    Err(UsageError(msg))
}

/// A number of seconds given to `flag`.
pub(crate) fn seconds(flag: &str, value: &str) -> Result<f64, UsageError> {
    match value.trim().parse::<f64>() {
        Ok(v) if v.is_finite() => Ok(v),
        _ => usage(format!("{flag} {value}: not a number of seconds")),
    }
}
