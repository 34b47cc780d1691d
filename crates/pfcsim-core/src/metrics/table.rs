//! The Parquet columns of the records, made from their definitions: a record written as a
//! table (one row per record) is declared with `record!`, which defines its struct and
//! implements [`Table`] from the same field list, so that a column's name, Arrow type,
//! nullability, position and value cannot drift from its field.
//!
//! Every field becomes a column of the same name, in field order, with the Arrow type of its
//! Rust type ([`Column`]: `u64` -> UInt64, `u32` -> UInt32, `u16` -> UInt16, `u8` -> UInt8,
//! `bool` -> Boolean, `f64` -> Float64, `&str` and `String` -> Utf8; an `Option` field is a
//! nullable column, `None` being null). A table may add derived columns after the fields
//! (`fct_us` of the flows), each a method of the record computed from its fields.

use arrow_array::types::{
    ArrowPrimitiveType, Float64Type, UInt16Type, UInt32Type, UInt64Type, UInt8Type,
};
use arrow_array::{ArrayRef, BooleanArray, PrimitiveArray, StringArray};
use arrow_schema::{DataType, Field, Schema};
use std::sync::Arc;

/// A record written as a table: its columns and how to build them from rows.
pub trait Table: Sized {
    /// The columns, in order: the fields, then the derived columns.
    fn schema() -> Schema;
    /// One array per column of [`Table::schema`], in the same order, with one value per row.
    fn arrays(rows: &[Self]) -> Vec<ArrayRef>;
}

/// A field type that makes a column: its Arrow type and how its values are gathered.
pub trait Column {
    /// The column's Arrow type.
    const DATA_TYPE: DataType;
    /// Whether the column has nulls (`Option` fields).
    const NULLABLE: bool;
    /// What the array is built from for one row: the value, or the text it holds.
    type Item<'a>
    where
        Self: 'a;
    /// The item of one row's value.
    fn item(&self) -> Self::Item<'_>;
    /// The array of `items`, one per row.
    fn array<'a>(items: impl Iterator<Item = Self::Item<'a>>) -> ArrayRef
    where
        Self: 'a;
}

/// The schema field of column `name` of type `C`.
pub fn field<C: Column>(name: &str) -> Field {
    Field::new(name, C::DATA_TYPE, C::NULLABLE)
}

/// [`Column`] for a primitive type and its `Option`.
macro_rules! primitive_columns {
    ($($native:ty => $arrow:ty),* $(,)?) => {$(
        impl Column for $native {
            const DATA_TYPE: DataType = <$arrow as ArrowPrimitiveType>::DATA_TYPE;
            const NULLABLE: bool = false;
            type Item<'a> = $native;
            fn item(&self) -> $native {
                *self
            }
            fn array<'a>(items: impl Iterator<Item = $native>) -> ArrayRef
            where
                Self: 'a,
            {
                Arc::new(PrimitiveArray::<$arrow>::from_iter_values(items))
            }
        }

        impl Column for Option<$native> {
            const DATA_TYPE: DataType = <$arrow as ArrowPrimitiveType>::DATA_TYPE;
            const NULLABLE: bool = true;
            type Item<'a> = Option<$native>;
            fn item(&self) -> Option<$native> {
                *self
            }
            fn array<'a>(items: impl Iterator<Item = Option<$native>>) -> ArrayRef
            where
                Self: 'a,
            {
                Arc::new(items.collect::<PrimitiveArray<$arrow>>())
            }
        }
    )*};
}

primitive_columns!(
    u8 => UInt8Type,
    u16 => UInt16Type,
    u32 => UInt32Type,
    u64 => UInt64Type,
    f64 => Float64Type,
);

impl Column for bool {
    const DATA_TYPE: DataType = DataType::Boolean;
    const NULLABLE: bool = false;
    type Item<'a> = bool;
    fn item(&self) -> bool {
        *self
    }
    fn array<'a>(items: impl Iterator<Item = bool>) -> ArrayRef
    where
        Self: 'a,
    {
        Arc::new(BooleanArray::from(items.collect::<Vec<bool>>()))
    }
}

impl Column for &'static str {
    const DATA_TYPE: DataType = DataType::Utf8;
    const NULLABLE: bool = false;
    type Item<'a> = &'static str;
    fn item(&self) -> &'static str {
        self
    }
    fn array<'a>(items: impl Iterator<Item = &'static str>) -> ArrayRef
    where
        Self: 'a,
    {
        Arc::new(StringArray::from_iter_values(items))
    }
}

impl Column for String {
    const DATA_TYPE: DataType = DataType::Utf8;
    const NULLABLE: bool = false;
    type Item<'a> = &'a str;
    fn item(&self) -> &str {
        self
    }
    fn array<'a>(items: impl Iterator<Item = &'a str>) -> ArrayRef
    where
        Self: 'a,
    {
        Arc::new(StringArray::from_iter_values(items))
    }
}

/// Defines a record struct written as a table and its [`Table`] implementation: every field
/// (with its doc comment; fields take no other attribute) is a column, in order, followed by
/// the derived columns, each declared after the struct as
/// `/// doc` `derived NAME: TYPE = |record| value;` and made a method `NAME(&self) -> TYPE`
/// of the record.
macro_rules! record {
    (
        $(#[$attr:meta])*
        pub struct $name:ident {
            $(
                $(#[doc = $doc:expr])*
                pub $field:ident: $ty:ty,
            )*
        }
        $(
            $(#[doc = $derived_doc:expr])*
            derived $derived:ident: $derived_ty:ty = $value:expr;
        )*
    ) => {
        $(#[$attr])*
        pub struct $name {
            $(
                $(#[doc = $doc])*
                pub $field: $ty,
            )*
        }

        impl $name {
            $(
                $(#[doc = $derived_doc])*
                pub fn $derived(&self) -> $derived_ty {
                    let value: fn(&Self) -> $derived_ty = $value;
                    value(self)
                }
            )*
        }

        impl $crate::metrics::table::Table for $name {
            fn schema() -> ::arrow_schema::Schema {
                use $crate::metrics::table::field;
                ::arrow_schema::Schema::new(vec![
                    $( field::<$ty>(stringify!($field)), )*
                    $( field::<$derived_ty>(stringify!($derived)), )*
                ])
            }

            fn arrays(rows: &[Self]) -> Vec<::arrow_array::ArrayRef> {
                use $crate::metrics::table::Column;
                vec![
                    $(
                        <$ty as Column>::array(
                            rows.iter().map(|r| <$ty as Column>::item(&r.$field)),
                        ),
                    )*
                    $( <$derived_ty as Column>::array(rows.iter().map(Self::$derived)), )*
                ]
            }
        }
    };
}
pub(crate) use record;

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::cast::AsArray;
    use arrow_array::Array;

    record! {
        /// One value of every column type.
        #[derive(Default)]
        pub struct Sample {
            /// A count.
            pub count: u64,
            pub small: u8,
            pub flag: bool,
            pub label: &'static str,
            pub owned: String,
            pub ratio: f64,
            pub maybe: Option<u32>,
        }
        /// `count` doubled.
        derived twice: Option<f64> = |s| s.maybe.map(|_| 2.0 * s.count as f64);
    }

    #[test]
    fn fields_make_columns_of_their_type_in_order_then_the_derived_ones() {
        let schema = Sample::schema();
        let columns: Vec<_> = schema
            .fields()
            .iter()
            .map(|f| (f.name().as_str(), f.data_type().clone(), f.is_nullable()))
            .collect();
        assert_eq!(
            columns,
            [
                ("count", DataType::UInt64, false),
                ("small", DataType::UInt8, false),
                ("flag", DataType::Boolean, false),
                ("label", DataType::Utf8, false),
                ("owned", DataType::Utf8, false),
                ("ratio", DataType::Float64, false),
                ("maybe", DataType::UInt32, true),
                ("twice", DataType::Float64, true),
            ]
        );
        let rows = [
            Sample {
                count: 3,
                flag: true,
                label: "a",
                owned: "b".into(),
                maybe: Some(7),
                ..Sample::default()
            },
            Sample::default(),
        ];
        let arrays = Sample::arrays(&rows);
        assert_eq!(arrays.len(), columns.len());
        assert!(arrays.iter().all(|a| a.len() == 2));
        for (array, (name, data_type, _)) in arrays.iter().zip(&columns) {
            assert_eq!(array.data_type(), data_type, "{name}");
        }
        assert!(arrays[2].as_boolean().value(0));
        assert_eq!(arrays[4].as_string::<i32>().value(0), "b");
        let maybe = arrays[6].as_primitive::<UInt32Type>();
        assert_eq!((maybe.value(0), maybe.is_null(1)), (7, true));
        let twice = arrays[7].as_primitive::<Float64Type>();
        assert_eq!((twice.value(0), twice.is_null(1)), (6.0, true));
    }
}
