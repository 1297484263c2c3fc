//! The store's one error type.

/// What went wrong with a store, as one line.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The URL, a label or the store's version is not usable as given.
    #[error("{0}")]
    Usage(String),
    /// SQLite said no.
    #[error("SQLite: {0}")]
    Sqlite(String),
    /// PostgreSQL said no.
    #[error("PostgreSQL: {0}")]
    Postgres(String),
    /// A stored row does not read back.
    #[error("the store holds a damaged row: {0}")]
    Corrupt(String),
}

impl StoreError {
    pub(crate) fn sqlite(e: rusqlite::Error) -> Self {
        Self::Sqlite(e.to_string())
    }

    pub(crate) fn postgres(e: postgres::Error) -> Self {
        // The server's own message (its `DbError`) says more than the client's summary.
        match e.as_db_error() {
            Some(db) => Self::Postgres(db.message().to_string()),
            None => Self::Postgres(e.to_string()),
        }
    }
}
