//! The two databases behind one small interface: statements with `$1`-style parameters, rows
//! of plain values, and transactions as statements. The schema and every query are written
//! once, in the SQL both SQLite and PostgreSQL read; where their dialects differ the caller
//! asks [`Connection::dialect`].

use crate::error::StoreError;

/// A value bound to a parameter or read from a column.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Value {
    Int(i64),
    Real(f64),
    Text(String),
    Null,
}

impl Value {
    pub(crate) fn int(&self) -> Option<i64> {
        match self {
            Self::Int(v) => Some(*v),
            _ => None,
        }
    }

    pub(crate) fn text(&self) -> String {
        match self {
            Self::Text(s) => s.clone(),
            Self::Int(v) => v.to_string(),
            Self::Real(v) => v.to_string(),
            Self::Null => String::new(),
        }
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Self {
        Self::Text(s.to_string())
    }
}

impl From<String> for Value {
    fn from(s: String) -> Self {
        Self::Text(s)
    }
}

impl From<i64> for Value {
    fn from(v: i64) -> Self {
        Self::Int(v)
    }
}

impl From<f64> for Value {
    fn from(v: f64) -> Self {
        Self::Real(v)
    }
}

/// Which SQL the connection speaks, where the two differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// SQLite (bundled with netchar).
    Sqlite,
    /// PostgreSQL.
    Postgres,
}

/// An open database.
pub(crate) enum Connection {
    Sqlite(rusqlite::Connection),
    Postgres(Box<postgres::Client>),
}

impl Connection {
    pub(crate) fn dialect(&self) -> Dialect {
        match self {
            Self::Sqlite(_) => Dialect::Sqlite,
            Self::Postgres(_) => Dialect::Postgres,
        }
    }

    /// Runs statements without parameters (the schema, BEGIN, COMMIT).
    pub(crate) fn batch(&mut self, sql: &str) -> Result<(), StoreError> {
        match self {
            Self::Sqlite(c) => c.execute_batch(sql).map_err(StoreError::sqlite),
            Self::Postgres(c) => c.batch_execute(sql).map_err(StoreError::postgres),
        }
    }

    /// Runs one statement; returns the rows it gives (none for most writes).
    pub(crate) fn query(&mut self, sql: &str, params: &[Value]) -> Result<Vec<Vec<Value>>, StoreError> {
        match self {
            Self::Sqlite(c) => sqlite_query(c, &sqlite_placeholders(sql), params).map_err(StoreError::sqlite),
            Self::Postgres(c) => postgres_query(c, sql, params).map_err(StoreError::postgres),
        }
    }
}

/// `$1` → `?1`: SQLite reads `$1` as a named parameter, `?1` as the first.
fn sqlite_placeholders(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len());
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '$' && chars.peek().is_some_and(char::is_ascii_digit) {
            out.push('?');
        } else {
            out.push(c);
        }
    }
    out
}

fn sqlite_query(c: &rusqlite::Connection, sql: &str, params: &[Value]) -> rusqlite::Result<Vec<Vec<Value>>> {
    use rusqlite::types::{ToSqlOutput, Value as V, ValueRef};
    let bound: Vec<ToSqlOutput<'_>> = params
        .iter()
        .map(|p| {
            ToSqlOutput::Owned(match p {
                Value::Int(v) => V::Integer(*v),
                Value::Real(v) => V::Real(*v),
                Value::Text(s) => V::Text(s.clone()),
                Value::Null => V::Null,
            })
        })
        .collect();
    let mut stmt = c.prepare_cached(sql)?;
    let columns = stmt.column_count();
    let mut rows = stmt.query(rusqlite::params_from_iter(bound.iter()))?;
    let mut out = Vec::new();
    while let Some(row) = rows.next()? {
        let mut values = Vec::with_capacity(columns);
        for i in 0..columns {
            values.push(match row.get_ref(i)? {
                ValueRef::Integer(v) => Value::Int(v),
                ValueRef::Real(v) => Value::Real(v),
                ValueRef::Text(t) | ValueRef::Blob(t) => Value::Text(String::from_utf8_lossy(t).into_owned()),
                ValueRef::Null => Value::Null,
            });
        }
        out.push(values);
    }
    Ok(out)
}

fn postgres_query(c: &mut postgres::Client, sql: &str, params: &[Value]) -> Result<Vec<Vec<Value>>, postgres::Error> {
    use postgres::types::{ToSql, Type};
    let boxed: Vec<Box<dyn ToSql + Sync>> = params
        .iter()
        .map(|p| -> Box<dyn ToSql + Sync> {
            match p {
                Value::Int(v) => Box::new(*v),
                Value::Real(v) => Box::new(*v),
                Value::Text(s) => Box::new(s.clone()),
                Value::Null => Box::new(None::<String>),
            }
        })
        .collect();
    let refs: Vec<&(dyn ToSql + Sync)> = boxed.iter().map(|b| b.as_ref()).collect();
    let rows = c.query(sql, &refs)?;
    let mut out = Vec::with_capacity(rows.len());
    for row in rows {
        let mut values = Vec::with_capacity(row.len());
        for (i, column) in row.columns().iter().enumerate() {
            let ty = column.type_();
            values.push(if *ty == Type::INT8 {
                row.try_get::<_, Option<i64>>(i)?.map_or(Value::Null, Value::Int)
            } else if *ty == Type::INT4 {
                row.try_get::<_, Option<i32>>(i)?.map_or(Value::Null, |v| Value::Int(v.into()))
            } else if *ty == Type::FLOAT8 {
                row.try_get::<_, Option<f64>>(i)?.map_or(Value::Null, Value::Real)
            } else if *ty == Type::VOID {
                // pg_advisory_xact_lock() and its kind: nothing to read.
                Value::Null
            } else {
                row.try_get::<_, Option<String>>(i)?.map_or(Value::Null, Value::Text)
            });
        }
        out.push(values);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    #[test]
    fn numbered_parameters_become_sqlites() {
        assert_eq!(super::sqlite_placeholders("a = $1 AND b = $12 AND c = '$x'"), "a = ?1 AND b = ?12 AND c = '$x'");
    }
}
