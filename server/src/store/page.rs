//! A page of sessions read as one JSON value, which is how SQLite's lists read their rows.
//! sqlx's SQLite driver hands each row from the connection's thread to the caller's and copies
//! each of its values on the way (a session has 46), which was most of what a listed
//! session cost (BENCHMARKS.md, "A million sessions"); SQLite builds the page's JSON in C in
//! one value instead, and serde reads it into `SessionRow`s (`store/row.rs`), each column as
//! sqlx would have decoded it.

use serde::de::{self, SeqAccess, Unexpected, Visitor};
use serde::{Deserialize, Deserializer};
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;
use uuid::Uuid;

/// The next column of a row being read from JSON, named in the error when it does not read.
pub fn cell<'de, T, A>(seq: &mut A, column: &'static str) -> Result<T, A::Error>
where
    Cell<T>: Deserialize<'de>,
    A: SeqAccess<'de>,
{
    match seq.next_element::<Cell<T>>() {
        Ok(Some(Cell(value))) => Ok(value),
        Ok(None) => Err(de::Error::custom(format!("the row ends before {column}"))),
        Err(e) => Err(de::Error::custom(format!("{column}: {e}"))),
    }
}

/// A column's value as SQLite's JSON functions give it: what sqlx's own decoding would have
/// made of the stored value, for the types a session row has. Booleans are stored as 0 or 1,
/// times as the RFC 3339 text sqlx writes (or a unix time, which sqlx also reads), ids as
/// `SqliteStore`'s hex.
pub struct Cell<T>(T);

/// Reads a JSON string with `parse`; `what` says what was expected.
struct Text<F>(&'static str, F);

impl<T, F: FnOnce(&str) -> Option<T>> Visitor<'_> for Text<F> {
    type Value = T;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<T, E> {
        let what = self.0;
        (self.1)(v).ok_or_else(|| E::invalid_value(Unexpected::Str(v), &what))
    }
}

impl<'de> Deserialize<'de> for Cell<Uuid> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_str(Text("an id in hex", |v: &str| Uuid::try_parse(v).ok()))
            .map(Cell)
    }
}

/// A stored time: RFC 3339 text or a unix time.
struct Time;

impl Visitor<'_> for Time {
    type Value = OffsetDateTime;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("an RFC 3339 time or a unix time")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<OffsetDateTime, E> {
        OffsetDateTime::parse(v, &Rfc3339).map_err(|_| E::invalid_value(Unexpected::Str(v), &self))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<OffsetDateTime, E> {
        OffsetDateTime::from_unix_timestamp(v)
            .map_err(|_| E::invalid_value(Unexpected::Signed(v), &self))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<OffsetDateTime, E> {
        i64::try_from(v)
            .map_err(|_| E::invalid_value(Unexpected::Unsigned(v), &self))
            .and_then(|v| self.visit_i64(v))
    }
}

impl<'de> Deserialize<'de> for Cell<OffsetDateTime> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(Time).map(Cell)
    }
}

/// A stored boolean: SQLite has none, sqlx writes 0 or 1 (and reads any integer but 0 as true).
struct Flag;

impl Visitor<'_> for Flag {
    type Value = bool;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("0 or 1")
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<bool, E> {
        Ok(v)
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<bool, E> {
        Ok(v != 0)
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<bool, E> {
        Ok(v != 0)
    }
}

impl<'de> Deserialize<'de> for Cell<bool> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(Flag).map(Cell)
    }
}

impl<'de> Deserialize<'de> for Cell<String> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d).map(Cell)
    }
}

impl<'de> Deserialize<'de> for Cell<i64> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        i64::deserialize(d).map(Cell)
    }
}

/// NULL is JSON's null.
impl<'de, T> Deserialize<'de> for Cell<Option<T>>
where
    Cell<T>: Deserialize<'de>,
{
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Option::<Cell<T>>::deserialize(d).map(|v| Cell(v.map(|Cell(v)| v)))
    }
}
