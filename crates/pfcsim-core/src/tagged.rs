//! The internally tagged tables of a spec (`[topology]` with `kind`, `[cc]` with `kind`,
//! `[lb]` with `scheme`, `[[traffic]]` with `kind`), read so that an error names the full key
//! path inside the table and the line of the key.
//!
//! serde's own internally tagged enums buffer the table before choosing the variant, which
//! loses the key path (a bad value was reported as `traffic[0]: ...`, not
//! `traffic[0].duration: ...`). Here an enum derives serde's externally tagged form as
//! inherent functions (`#[serde(remote = "Self")]`), and [`internally_tagged!`] implements
//! `Serialize` and `Deserialize` on top of them: the table is read with the span of each key,
//! the tag picks the variant (serde's own message lists the valid ones), and the variant is
//! read from the rest of the table with its key path tracked. Adding a variant to such an
//! enum needs nothing more.
//!
//! The plain tables (`[switch]`, `[nic]`, `[run]`, `host_link`, ...) are structs read with
//! [`table!`], which refuses an array where serde's derived structs would read one field by
//! field.
//!
//! An error from inside a table travels to [`crate::spec::Spec::from_toml`] in the message
//! of a serde error, as `MARK path MARK offset MARK message` ([`split_located`] takes it
//! apart), since a deserializer error cannot carry a path or a span of our own.

use serde::de::{self, DeserializeSeed, EnumAccess, IntoDeserializer, VariantAccess, Visitor};
use serde::ser::{self, Impossible, SerializeStruct, SerializeStructVariant};
use serde::{Deserialize, Serialize, Serializer};
use std::collections::BTreeMap;
use std::fmt::Display;
use toml::{Spanned, Value};

/// Starts and separates the parts of a located error message.
const MARK: char = '\u{1}';

/// Implements `Serialize` and `Deserialize` of an enum, written with the tag `$tag` as a key
/// of the variant's own table, from its externally tagged inherent functions (the enum has
/// `#[serde(remote = "Self", rename_all = "snake_case")]`).
///
/// With a third argument, `expand(variant, table)` may rewrite the variant's table before it
/// is read (`[lb]`'s `preset`, [`crate::lb::expand_preset`]); its error is `(key, message)`.
macro_rules! internally_tagged {
    ($ty:ty, $tag:literal) => {
        $crate::tagged::internally_tagged!($ty, $tag, |_, _| Ok(()));
    };
    ($ty:ty, $tag:literal, $expand:expr) => {
        impl serde::Serialize for $ty {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                $crate::tagged::serialize(serializer, $tag, |outer| <$ty>::serialize(self, outer))
            }
        }
        impl<'de> serde::Deserialize<'de> for $ty {
            fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                $crate::tagged::deserialize(deserializer, $tag, $expand, |table| {
                    <$ty>::deserialize(table)
                })
            }
        }
    };
}
pub(crate) use internally_tagged;

/// Implements `Serialize` and `Deserialize` of structs written as tables, from their derived
/// inherent functions (each struct has `#[serde(remote = "Self")]`), so that they are read
/// from a table only. serde's derived structs also read an array, field by field in order,
/// which let `switch = []` stand for `[switch]` with every default and
/// `host_link = ["100Gbps", "1us"]` for the table.
macro_rules! table {
    ($($ty:ty),* $(,)?) => {$(
        impl serde::Serialize for $ty {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                <$ty>::serialize(self, serializer)
            }
        }
        impl<'de> serde::Deserialize<'de> for $ty {
            fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                <$ty>::deserialize($crate::tagged::TableOnly(deserializer))
            }
        }
    )*};
}
pub(crate) use table;

/// A deserializer that hands a struct's visitor only tables (see [`table!`]).
pub(crate) struct TableOnly<D>(pub D);

impl<'de, D: de::Deserializer<'de>> de::Deserializer<'de> for TableOnly<D> {
    type Error = D::Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
        self.0.deserialize_any(NoArray(visitor))
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.0.deserialize_struct(name, fields, NoArray(visitor))
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf option unit unit_struct newtype_struct seq tuple
        tuple_struct map enum identifier ignored_any
    }
}

/// A struct's visitor that takes a table and refuses everything else, an array included:
/// "invalid type: sequence, expected a table".
struct NoArray<V>(V);

impl<'de, V: Visitor<'de>> Visitor<'de> for NoArray<V> {
    type Value = V::Value;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a table")
    }

    fn visit_map<A: de::MapAccess<'de>>(self, map: A) -> Result<V::Value, A::Error> {
        self.0.visit_map(map)
    }
}

/// A key path and a byte offset in the spec text, for an error found inside a tagged table.
fn located<E: de::Error>(path: &str, offset: Option<usize>, message: impl Display) -> E {
    let offset = offset.map(|o| o.to_string()).unwrap_or_default();
    E::custom(format!("{MARK}{path}{MARK}{offset}{MARK}{message}"))
}

/// Takes apart a message made by `located`: (key path inside the table, byte offset of the
/// offending key's value in the spec text, message). `None` for any other message.
pub(crate) fn split_located(message: &str) -> Option<(&str, Option<usize>, &str)> {
    let rest = message.strip_prefix(MARK)?;
    let (path, rest) = rest.split_once(MARK)?;
    let (offset, message) = rest.split_once(MARK)?;
    Some((path, offset.parse().ok(), message))
}

/// Reads a tagged table nested in a tagged table (`[lb.inner]` inside `[lb]`), for a field
/// with `#[serde(deserialize_with = "crate::tagged::nested")]`. The outer table is read from
/// a `toml::Value`, which has no spans, so the nested one is read again from its own text; an
/// error inside it keeps its key path (the outer table prefixes it) and is reported at the
/// line of the nested table's key.
pub(crate) fn nested<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: de::Deserializer<'de>,
    T: de::DeserializeOwned,
{
    let value = Value::deserialize(deserializer)?;
    let text = toml::to_string(&value).map_err(de::Error::custom)?;
    toml::from_str::<T>(&text).map_err(|e| {
        let message = e.message().trim_end().to_string();
        match split_located(&message) {
            Some((path, _, message)) => located(path, None, message),
            None => de::Error::custom(message),
        }
    })
}

/// Joins a key path and the path of a located error inside it.
pub(crate) fn join(outer: &str, inner: &str) -> String {
    match (outer, inner) {
        ("" | ".", _) => inner.to_string(),
        (_, "" | ".") => outer.to_string(),
        _ if inner.starts_with('[') => format!("{outer}{inner}"),
        _ => format!("{outer}.{inner}"),
    }
}

/// Rewrites the table of a variant before it is read (see [`internally_tagged!`]): given the
/// tag's value and the rest of the table; the error is `(key, message)`.
pub(crate) type Expand = fn(&str, &mut toml::Table) -> Result<(), (&'static str, String)>;

/// Reads an internally tagged table: `external` is the enum's externally tagged deserializer,
/// given the table split into its tag and the rest, after `expand` (given the tag's value, if
/// a string, and the rest) had its say.
pub(crate) fn deserialize<'de, D, T>(
    deserializer: D,
    tag: &'static str,
    expand: Expand,
    external: impl FnOnce(Table) -> Result<T, toml::de::Error>,
) -> Result<T, D::Error>
where
    D: de::Deserializer<'de>,
{
    let entries = BTreeMap::<String, Spanned<Value>>::deserialize(deserializer)?;
    let mut offsets = BTreeMap::new();
    let mut rest = toml::Table::new();
    let mut variant = None;
    for (key, value) in entries {
        let offset = value.span().start;
        if key == tag {
            variant = Some((value.into_inner(), offset));
        } else {
            offsets.insert(key.clone(), offset);
            rest.insert(key, value.into_inner());
        }
    }
    let Some((variant, tag_offset)) = variant else {
        return Err(de::Error::missing_field(tag));
    };
    if let Value::String(name) = &variant {
        if let Err((key, message)) = expand(name, &mut rest) {
            return Err(located(key, offsets.get(key).copied(), message));
        }
    }
    let table = Table {
        tag,
        variant,
        tag_offset,
        rest,
        offsets,
    };
    external(table).map_err(|e| {
        let message = e.message().trim_end().to_string();
        match split_located(&message) {
            Some((path, offset, message)) => located(path, offset, message),
            None => de::Error::custom(message),
        }
    })
}

/// A tagged table taken apart: presented to the enum's derived externally tagged
/// deserializer as an enum whose variant is the tag's value and whose content is the rest.
pub(crate) struct Table {
    tag: &'static str,
    variant: Value,
    tag_offset: usize,
    rest: toml::Table,
    /// Byte offset in the spec text of the value of every key of `rest`.
    offsets: BTreeMap<String, usize>,
}

impl<'de> de::Deserializer<'de> for Table {
    type Error = toml::de::Error;

    fn deserialize_any<V: Visitor<'de>>(self, _visitor: V) -> Result<V::Value, Self::Error> {
        Err(de::Error::custom("a tagged table is read as an enum"))
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        visitor.visit_enum(self)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf option unit unit_struct newtype_struct seq tuple
        tuple_struct map struct identifier ignored_any
    }
}

impl<'de> EnumAccess<'de> for Table {
    type Error = toml::de::Error;
    type Variant = Content;

    fn variant_seed<V: DeserializeSeed<'de>>(
        self,
        seed: V,
    ) -> Result<(V::Value, Content), Self::Error> {
        let at_tag = |e: toml::de::Error| located(self.tag, Some(self.tag_offset), e.message());
        let chosen = match &self.variant {
            Value::String(name) => seed
                .deserialize(name.as_str().into_deserializer())
                .map_err(at_tag)?,
            other => {
                return Err(located(
                    self.tag,
                    Some(self.tag_offset),
                    format!("{other} is not a name; write the {} as a string", self.tag),
                ))
            }
        };
        let content = Content {
            rest: self.rest,
            offsets: self.offsets,
        };
        Ok((chosen, content))
    }
}

/// The table of a variant, without its tag.
pub(crate) struct Content {
    rest: toml::Table,
    offsets: BTreeMap<String, usize>,
}

impl Content {
    /// Reads the variant with the key path tracked; an error is located at its key.
    fn read<T>(
        self,
        read: impl FnOnce(
            serde_path_to_error::Deserializer<'_, '_, Value>,
        ) -> Result<T, toml::de::Error>,
    ) -> Result<T, toml::de::Error> {
        let mut track = serde_path_to_error::Track::new();
        let result = read(serde_path_to_error::Deserializer::new(
            Value::Table(self.rest),
            &mut track,
        ));
        result.map_err(|e| {
            let path = track.path();
            let first = path.iter().next().map(|s| s.to_string());
            let mut offset = first.and_then(|k| self.offsets.get(&k).copied());
            let path = path.to_string();
            let message = e.message().trim_end().to_string();
            match split_located(&message) {
                // A tagged table inside this one: its path continues ours.
                Some((inner, inner_offset, message)) => {
                    offset = inner_offset.or(offset);
                    located(&join(&path, inner), offset, message)
                }
                None => located(&path, offset, message),
            }
        })
    }
}

impl<'de> VariantAccess<'de> for Content {
    type Error = toml::de::Error;

    fn unit_variant(self) -> Result<(), Self::Error> {
        match self.rest.keys().next() {
            Some(key) => Err(located(
                key,
                self.offsets.get(key).copied(),
                <toml::de::Error as de::Error>::unknown_field(key, &[]).message(),
            )),
            None => Ok(()),
        }
    }

    fn newtype_variant_seed<T: DeserializeSeed<'de>>(
        self,
        seed: T,
    ) -> Result<T::Value, Self::Error> {
        self.read(|de| seed.deserialize(de))
    }

    fn tuple_variant<V: Visitor<'de>>(self, _len: usize, _v: V) -> Result<V::Value, Self::Error> {
        Err(de::Error::custom(
            "tuple variants cannot be written as a table",
        ))
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        self.read(|de| de::Deserializer::deserialize_struct(de, "", fields, visitor))
    }
}

/// Writes an enum as an internally tagged table: `external` is the enum's externally tagged
/// serializer, given a serializer that turns the variant into a table led by the tag.
pub(crate) fn serialize<S: Serializer>(
    serializer: S,
    tag: &'static str,
    external: impl FnOnce(Outer<S>) -> Result<S::Ok, S::Error>,
) -> Result<S::Ok, S::Error> {
    external(Outer { serializer, tag })
}

fn not_a_table<E: ser::Error>() -> E {
    E::custom("only unit, newtype and struct variants of tables can be internally tagged")
}

/// Errors for every serializer method that cannot produce a tagged table.
macro_rules! not_a_table {
    ($($method:ident($($arg:ty),*)),* $(,)?) => {
        $(fn $method(self, $(_: $arg),*) -> Result<Self::Ok, Self::Error> {
            Err(not_a_table())
        })*
    };
}

/// Receives the externally tagged form of the enum.
pub(crate) struct Outer<S> {
    serializer: S,
    tag: &'static str,
}

impl<S: Serializer> Serializer for Outer<S> {
    type Ok = S::Ok;
    type Error = S::Error;
    type SerializeSeq = Impossible<S::Ok, S::Error>;
    type SerializeTuple = Impossible<S::Ok, S::Error>;
    type SerializeTupleStruct = Impossible<S::Ok, S::Error>;
    type SerializeTupleVariant = Impossible<S::Ok, S::Error>;
    type SerializeMap = Impossible<S::Ok, S::Error>;
    type SerializeStruct = Impossible<S::Ok, S::Error>;
    type SerializeStructVariant = Tagged<S::SerializeStruct>;

    not_a_table! {
        serialize_bool(bool), serialize_i8(i8), serialize_i16(i16), serialize_i32(i32),
        serialize_i64(i64), serialize_u8(u8), serialize_u16(u16), serialize_u32(u32),
        serialize_u64(u64), serialize_f32(f32), serialize_f64(f64), serialize_char(char),
        serialize_str(&str), serialize_bytes(&[u8]), serialize_none(), serialize_unit(),
        serialize_unit_struct(&'static str),
    }

    fn serialize_unit_variant(
        self,
        name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> Result<S::Ok, S::Error> {
        let mut table = self.serializer.serialize_struct(name, 1)?;
        table.serialize_field(self.tag, variant)?;
        table.end()
    }

    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<S::Ok, S::Error> {
        value.serialize(Inner {
            serializer: self.serializer,
            tag: self.tag,
            variant,
        })
    }

    fn serialize_struct_variant(
        self,
        name: &'static str,
        _index: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<Self::SerializeStructVariant, S::Error> {
        let mut table = self.serializer.serialize_struct(name, len + 1)?;
        table.serialize_field(self.tag, variant)?;
        Ok(Tagged(table))
    }

    fn serialize_some<T: Serialize + ?Sized>(self, _value: &T) -> Result<S::Ok, S::Error> {
        Err(not_a_table())
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _value: &T,
    ) -> Result<S::Ok, S::Error> {
        Err(not_a_table())
    }
    fn serialize_seq(self, _len: Option<usize>) -> Result<Self::SerializeSeq, S::Error> {
        Err(not_a_table())
    }
    fn serialize_tuple(self, _len: usize) -> Result<Self::SerializeTuple, S::Error> {
        Err(not_a_table())
    }
    fn serialize_tuple_struct(
        self,
        _name: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeTupleStruct, S::Error> {
        Err(not_a_table())
    }
    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeTupleVariant, S::Error> {
        Err(not_a_table())
    }
    fn serialize_map(self, _len: Option<usize>) -> Result<Self::SerializeMap, S::Error> {
        Err(not_a_table())
    }
    fn serialize_struct(
        self,
        _name: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeStruct, S::Error> {
        Err(not_a_table())
    }
}

/// Receives the content of a newtype variant: a struct, written with the tag first.
struct Inner<S> {
    serializer: S,
    tag: &'static str,
    variant: &'static str,
}

impl<S: Serializer> Serializer for Inner<S> {
    type Ok = S::Ok;
    type Error = S::Error;
    type SerializeSeq = Impossible<S::Ok, S::Error>;
    type SerializeTuple = Impossible<S::Ok, S::Error>;
    type SerializeTupleStruct = Impossible<S::Ok, S::Error>;
    type SerializeTupleVariant = Impossible<S::Ok, S::Error>;
    type SerializeMap = S::SerializeMap;
    type SerializeStruct = S::SerializeStruct;
    type SerializeStructVariant = Impossible<S::Ok, S::Error>;

    not_a_table! {
        serialize_bool(bool), serialize_i8(i8), serialize_i16(i16), serialize_i32(i32),
        serialize_i64(i64), serialize_u8(u8), serialize_u16(u16), serialize_u32(u32),
        serialize_u64(u64), serialize_f32(f32), serialize_f64(f64), serialize_char(char),
        serialize_str(&str), serialize_bytes(&[u8]), serialize_none(), serialize_unit(),
        serialize_unit_variant(&'static str, u32, &'static str),
    }

    fn serialize_unit_struct(self, name: &'static str) -> Result<S::Ok, S::Error> {
        let mut table = self.serializer.serialize_struct(name, 1)?;
        table.serialize_field(self.tag, self.variant)?;
        table.end()
    }

    fn serialize_struct(
        self,
        name: &'static str,
        len: usize,
    ) -> Result<S::SerializeStruct, S::Error> {
        let mut table = self.serializer.serialize_struct(name, len + 1)?;
        table.serialize_field(self.tag, self.variant)?;
        Ok(table)
    }

    fn serialize_map(self, len: Option<usize>) -> Result<S::SerializeMap, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = self.serializer.serialize_map(len.map(|n| n + 1))?;
        map.serialize_entry(self.tag, self.variant)?;
        Ok(map)
    }

    fn serialize_some<T: Serialize + ?Sized>(self, _value: &T) -> Result<S::Ok, S::Error> {
        Err(not_a_table())
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        value: &T,
    ) -> Result<S::Ok, S::Error> {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _value: &T,
    ) -> Result<S::Ok, S::Error> {
        Err(not_a_table())
    }
    fn serialize_seq(self, _len: Option<usize>) -> Result<Self::SerializeSeq, S::Error> {
        Err(not_a_table())
    }
    fn serialize_tuple(self, _len: usize) -> Result<Self::SerializeTuple, S::Error> {
        Err(not_a_table())
    }
    fn serialize_tuple_struct(
        self,
        _name: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeTupleStruct, S::Error> {
        Err(not_a_table())
    }
    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeTupleVariant, S::Error> {
        Err(not_a_table())
    }
    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeStructVariant, S::Error> {
        Err(not_a_table())
    }
}

/// The fields of a struct variant, written into a table that already holds the tag.
pub(crate) struct Tagged<T>(T);

impl<T: SerializeStruct> SerializeStructVariant for Tagged<T> {
    type Ok = T::Ok;
    type Error = T::Error;

    fn serialize_field<V: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &V,
    ) -> Result<(), T::Error> {
        self.0.serialize_field(key, value)
    }

    fn skip_field(&mut self, key: &'static str) -> Result<(), T::Error> {
        self.0.skip_field(key)
    }

    fn end(self) -> Result<T::Ok, T::Error> {
        self.0.end()
    }
}
