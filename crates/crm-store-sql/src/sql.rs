//! sqlx's generic API with its bounds gathered in one trait, so shared code is written once for
//! any backend and compiled for each.
//!
//! sqlx states what a backend can bind and decode as bounds on the value types (`i64: Encode<DB>`),
//! and Rust does not carry such bounds along with a trait the way it carries supertraits. So each
//! capability is a trait of the backend itself ([`Binds`], [`Decodes`]), implemented for every
//! backend that has it, and [`Sql`] lists them as supertraits: `DB: Sql` is then the only bound
//! shared code needs. The methods are sqlx's own calls, inlined; nothing is boxed.

use crm_app::StoreError;
use sqlx::{
    query::Query, query_builder::Separated, ColumnIndex, Database, Decode, Encode, QueryBuilder,
    Row, Type,
};

/// A statement with its arguments bound, as `sqlx::query` makes it.
pub type SqlQuery<'q, DB> = Query<'q, DB, <DB as Database>::Arguments<'q>>;

/// A backend that can bind a `T` as a statement's argument.
pub trait Binds<'q, T>: Database {
    fn bind(q: SqlQuery<'q, Self>, value: T) -> SqlQuery<'q, Self>;
    fn push_bind(qb: &mut QueryBuilder<'q, Self>, value: T);
    fn push_bind_separated(s: &mut Separated<'_, 'q, Self, &'static str>, value: T);
}

impl<'q, DB: Database, T: 'q + Encode<'q, DB> + Type<DB>> Binds<'q, T> for DB {
    #[inline]
    fn bind(q: SqlQuery<'q, DB>, value: T) -> SqlQuery<'q, DB> {
        q.bind(value)
    }

    #[inline]
    fn push_bind(qb: &mut QueryBuilder<'q, DB>, value: T) {
        qb.push_bind(value);
    }

    #[inline]
    fn push_bind_separated(s: &mut Separated<'_, 'q, DB, &'static str>, value: T) {
        s.push_bind(value);
    }
}

/// A backend that can decode a column into a `T`.
pub trait Decodes<T>: Database {
    fn decode(row: &Self::Row, column: &str) -> Result<T, StoreError>;
}

impl<DB: Database, T> Decodes<T> for DB
where
    T: for<'r> Decode<'r, DB> + Type<DB>,
    for<'c> &'c str: ColumnIndex<DB::Row>,
{
    /// A missing column or a type that does not match is a backend error: the row is not what
    /// the statement selected.
    #[inline]
    fn decode(row: &DB::Row, column: &str) -> Result<T, StoreError> {
        row.try_get(column)
            .map_err(|e| StoreError::Backend(Box::new(e)))
    }
}

/// `Sql` and its blanket impl from one list of bounds, so the two cannot disagree.
macro_rules! bundle {
    ($(#[$doc:meta])* $name:ident: $($bound:tt)*) => {
        $(#[$doc])*
        pub trait $name: Database + $($bound)* {}

        impl<DB> $name for DB where DB: Database + $($bound)* {}
    };
}

bundle! {
    /// Everything the shared statements bind and decode. Both stores' backends have it all.
    Sql: for<'q> Binds<'q, &'q str>
        + for<'q> Binds<'q, Option<&'q str>>
        + for<'q> Binds<'q, &'q [u8]>
        + for<'q> Binds<'q, Option<Vec<u8>>>
        + for<'q> Binds<'q, String>
        + for<'q> Binds<'q, Option<String>>
        + for<'q> Binds<'q, i64>
        + for<'q> Binds<'q, Option<i64>>
        + for<'q> Binds<'q, i32>
        + for<'q> Binds<'q, Option<i32>>
        + for<'q> Binds<'q, bool>
        + for<'q> Binds<'q, Option<f64>>
        + Decodes<String>
        + Decodes<Option<String>>
        + Decodes<i64>
        + Decodes<Option<i64>>
        + Decodes<i32>
        + Decodes<Option<i32>>
        + Decodes<bool>
        + Decodes<Option<f64>>
        + Decodes<Vec<u8>>
        + Decodes<Option<Vec<u8>>>
}

/// `.arg(v)`: `Query::bind` for code generic over the backend.
pub trait Arg<'q, DB: Database>: Sized {
    fn arg<T>(self, value: T) -> Self
    where
        DB: Binds<'q, T>;
}

impl<'q, DB: Database> Arg<'q, DB> for SqlQuery<'q, DB> {
    #[inline]
    fn arg<T>(self, value: T) -> Self
    where
        DB: Binds<'q, T>,
    {
        DB::bind(self, value)
    }
}

/// `.push_arg(v)`: `QueryBuilder::push_bind` (and its `Separated`'s) for code generic over the
/// backend.
pub trait PushArg<'q, DB: Database> {
    fn push_arg<T>(&mut self, value: T) -> &mut Self
    where
        DB: Binds<'q, T>;
}

impl<'q, DB: Database> PushArg<'q, DB> for QueryBuilder<'q, DB> {
    #[inline]
    fn push_arg<T>(&mut self, value: T) -> &mut Self
    where
        DB: Binds<'q, T>,
    {
        DB::push_bind(self, value);
        self
    }
}

impl<'q, DB: Database> PushArg<'q, DB> for Separated<'_, 'q, DB, &'static str> {
    #[inline]
    fn push_arg<T>(&mut self, value: T) -> &mut Self
    where
        DB: Binds<'q, T>,
    {
        DB::push_bind_separated(self, value);
        self
    }
}

/// `row.col::<T>("name")`: `Row::try_get` for code generic over the backend, its error the
/// port's.
pub trait Col: Row {
    fn col<T>(&self, column: &str) -> Result<T, StoreError>
    where
        Self::Database: Decodes<T>;
}

impl<R: Row> Col for R {
    #[inline]
    fn col<T>(&self, column: &str) -> Result<T, StoreError>
    where
        R::Database: Decodes<T>,
    {
        <R::Database as Decodes<T>>::decode(self, column)
    }
}
