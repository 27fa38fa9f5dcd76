//! A row as the derivation produces it: cells by column name, checked against the
//! table's declaration when the rows become an Arrow batch ([`crate::batch`]). Named
//! cells keep each derivation readable next to the schema it fills; a misspelt column is
//! an error at batch time (and in the unit tests), not a shifted column.

use std::collections::BTreeMap;

#[derive(Clone, Debug, PartialEq)]
pub enum Cell {
    Null,
    Text(String),
    Int(i64),
    Float(f64),
    Bool(bool),
    /// Microseconds since the epoch, UTC.
    Timestamp(i64),
}

impl From<&str> for Cell {
    fn from(value: &str) -> Self {
        Self::Text(value.to_owned())
    }
}

impl From<String> for Cell {
    fn from(value: String) -> Self {
        Self::Text(value)
    }
}

impl From<i64> for Cell {
    fn from(value: i64) -> Self {
        Self::Int(value)
    }
}

impl From<f64> for Cell {
    /// A non-finite figure is no measurement: stored as null, which every engine
    /// aggregates correctly, where NaN would poison an average.
    fn from(value: f64) -> Self {
        if value.is_finite() {
            Self::Float(value)
        } else {
            Self::Null
        }
    }
}

impl From<bool> for Cell {
    fn from(value: bool) -> Self {
        Self::Bool(value)
    }
}

impl<T: Into<Cell>> From<Option<T>> for Cell {
    fn from(value: Option<T>) -> Self {
        value.map_or(Self::Null, Into::into)
    }
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Row(BTreeMap<&'static str, Cell>);

impl Row {
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets `column`; builder style.
    #[must_use]
    pub fn with(mut self, column: &'static str, value: impl Into<Cell>) -> Self {
        self.0.insert(column, value.into());
        self
    }

    pub fn set(&mut self, column: &'static str, value: impl Into<Cell>) {
        self.0.insert(column, value.into());
    }

    /// The cell of `column`; null when it was never set.
    pub fn get(&self, column: &str) -> &Cell {
        self.0.get(column).unwrap_or(&Cell::Null)
    }

    pub fn text(&self, column: &str) -> Option<&str> {
        match self.get(column) {
            Cell::Text(text) => Some(text),
            _ => None,
        }
    }

    pub fn float(&self, column: &str) -> Option<f64> {
        match self.get(column) {
            Cell::Float(value) => Some(*value),
            _ => None,
        }
    }

    pub fn columns(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.0.keys().copied()
    }
}
