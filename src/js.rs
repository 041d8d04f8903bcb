//! The kernel's typed values written straight into JS values, and the model's reply read straight
//! off one: no JSON text and no `serde_json::Value` in between on a run's hot path.
//!
//! [`Js`] is one conversion's access to the env. Writing goes through a serde `Serializer` that
//! makes the JS values the same `serde_json::to_value` + napi would (same keys, same order, an
//! integer past 2^53 as a BigInt, a non-finite float as `null`), with property names taken from a
//! per-thread key table: each struct field's name is a JS string made once per thread, not a new
//! string (internalised again) per property set.

use std::cell::RefCell;
use std::collections::HashMap;
use std::ptr;

use knap_core::kernel::message::{AssistantPart, TextPart, ThinkingPart, ToolCall};
use napi::bindgen_prelude::*;
use napi::sys;
use serde::ser::{self, Serialize};
use serde_json::{Number, Value};

/// The key table of the current thread's env: every property name made so far, in a JS array
/// held by a reference, and where each `&'static str` (by address) sits in it.
struct Table {
  env: usize,
  array: sys::napi_ref,
  index: HashMap<(usize, usize), u32>,
}

thread_local! {
  static TABLE: RefCell<Option<Table>> = const { RefCell::new(None) };
}

unsafe extern "C" fn forget_table(_: *mut std::ffi::c_void) {
  // The env is going away with its references; a later env on this thread makes a new table.
  TABLE.with(|t| t.borrow_mut().take());
}

/// One conversion's access to JS: the env, the key table's array, and the keys fetched so far.
pub(crate) struct Js {
  env: sys::napi_env,
  table: sys::napi_value,
  keys: Vec<((usize, usize), sys::napi_value)>,
}

impl Js {
  pub(crate) fn new(env: sys::napi_env) -> Result<Self> {
    let found = TABLE.with(|t| {
      t.borrow()
        .as_ref()
        .filter(|t| t.env == env as usize)
        .map(|t| t.array)
    });
    let array = match found {
      Some(array) => array,
      None => unsafe { Self::make_table(env) }?,
    };
    let mut table = ptr::null_mut();
    check_status!(unsafe { sys::napi_get_reference_value(env, array, &mut table) })?;
    Ok(Self {
      env,
      table,
      keys: Vec::new(),
    })
  }

  unsafe fn make_table(env: sys::napi_env) -> Result<sys::napi_ref> {
    let mut array = ptr::null_mut();
    check_status!(unsafe { sys::napi_create_array(env, &mut array) })?;
    let mut reference = ptr::null_mut();
    check_status!(unsafe { sys::napi_create_reference(env, array, 1, &mut reference) })?;
    let fresh = TABLE.with(|t| {
      t.borrow_mut()
        .replace(Table {
          env: env as usize,
          array: reference,
          index: HashMap::new(),
        })
        .is_none()
    });
    if fresh {
      check_status!(unsafe { sys::napi_add_env_cleanup_hook(env, Some(forget_table), ptr::null_mut()) })?;
    }
    Ok(reference)
  }

  /// The JS string of a property name that lives as long as the program (a field name).
  pub(crate) fn key(&mut self, name: &'static str) -> Result<sys::napi_value> {
    let at = (name.as_ptr() as usize, name.len());
    if let Some((_, v)) = self.keys.iter().find(|(p, _)| *p == at) {
      return Ok(*v);
    }
    let slot = TABLE.with(|t| {
      let mut t = t.borrow_mut();
      let t = t.as_mut().expect("the key table exists while a Js does");
      let next = t.index.len() as u32;
      match t.index.get(&at) {
        Some(i) => (*i, false),
        None => {
          t.index.insert(at, next);
          (next, true)
        }
      }
    });
    let v = match slot {
      (i, false) => {
        let mut v = ptr::null_mut();
        check_status!(unsafe { sys::napi_get_element(self.env, self.table, i, &mut v) })?;
        v
      }
      (i, true) => {
        let v = self.str(name)?;
        check_status!(unsafe { sys::napi_set_element(self.env, self.table, i, v) })?;
        v
      }
    };
    self.keys.push((at, v));
    Ok(v)
  }

  // ---- writing -------------------------------------------------------------------------------

  /// `value` as the JS value serde makes of it.
  pub(crate) fn write<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<sys::napi_value> {
    value.serialize(Ser(self)).map_err(|e| e.0)
  }

  pub(crate) fn object(&self) -> Result<sys::napi_value> {
    let mut o = ptr::null_mut();
    check_status!(unsafe { sys::napi_create_object(self.env, &mut o) })?;
    Ok(o)
  }

  fn set(&mut self, object: sys::napi_value, key: sys::napi_value, value: sys::napi_value) -> Result<()> {
    check_status!(unsafe { sys::napi_set_property(self.env, object, key, value) })
  }

  pub(crate) fn str(&self, s: &str) -> Result<sys::napi_value> {
    let mut v = ptr::null_mut();
    check_status!(unsafe {
      sys::napi_create_string_utf8(self.env, s.as_ptr().cast(), s.len() as isize, &mut v)
    })?;
    Ok(v)
  }

  fn f64(&self, n: f64) -> Result<sys::napi_value> {
    if !n.is_finite() {
      return self.null();
    }
    let mut v = ptr::null_mut();
    check_status!(unsafe { sys::napi_create_double(self.env, n, &mut v) })?;
    Ok(v)
  }

  fn null(&self) -> Result<sys::napi_value> {
    let mut v = ptr::null_mut();
    check_status!(unsafe { sys::napi_get_null(self.env, &mut v) })?;
    Ok(v)
  }

  fn bool(&self, b: bool) -> Result<sys::napi_value> {
    let mut v = ptr::null_mut();
    check_status!(unsafe { sys::napi_get_boolean(self.env, b, &mut v) })?;
    Ok(v)
  }

  /// An integer as napi's `serde_json` conversion writes it: a number up to 2^53 − 1 in
  /// magnitude, a BigInt past that.
  fn i64(&self, n: i64) -> Result<sys::napi_value> {
    const MAX_SAFE: i64 = (1 << 53) - 1;
    if (-MAX_SAFE..=MAX_SAFE).contains(&n) {
      return self.f64(n as f64);
    }
    let mut v = ptr::null_mut();
    check_status!(unsafe { sys::napi_create_bigint_int64(self.env, n, &mut v) })?;
    Ok(v)
  }

  fn u64(&self, n: u64) -> Result<sys::napi_value> {
    if n < (1 << 53) {
      return self.f64(n as f64);
    }
    let mut v = ptr::null_mut();
    check_status!(unsafe { sys::napi_create_bigint_uint64(self.env, n, &mut v) })?;
    Ok(v)
  }

  fn array(&self, len: usize) -> Result<sys::napi_value> {
    let mut a = ptr::null_mut();
    check_status!(unsafe { sys::napi_create_array_with_length(self.env, len, &mut a) })?;
    Ok(a)
  }

  fn push(&self, array: sys::napi_value, index: u32, value: sys::napi_value) -> Result<()> {
    check_status!(unsafe { sys::napi_set_element(self.env, array, index, value) })
  }

  // ---- reading -------------------------------------------------------------------------------

  /// `object[name]`, `None` when undefined.
  fn get(&mut self, object: sys::napi_value, name: &'static str) -> Result<Option<sys::napi_value>> {
    let key = self.key(name)?;
    let mut v = ptr::null_mut();
    check_status!(unsafe { sys::napi_get_property(self.env, object, key, &mut v) })?;
    Ok((self.type_of(v)? != ValueType::Undefined).then_some(v))
  }

  fn type_of(&self, v: sys::napi_value) -> Result<ValueType> {
    unsafe { type_of(self.env, v) }
  }

  /// An optional member read as `T` (present but of another type: an error naming it, as napi's
  /// `#[napi(object)]` conversion gives).
  fn opt<T: FromNapiValue>(
    &mut self,
    object: sys::napi_value,
    name: &'static str,
    owner: &str,
  ) -> Result<Option<T>> {
    match self.get(object, name)? {
      None => Ok(None),
      Some(v) => unsafe { T::from_napi_value(self.env, v) }
        .map(Some)
        .map_err(|e| Error::new(e.status, format!("{} on {owner}.{name}", e.reason))),
    }
  }

  fn required<T: FromNapiValue>(
    &mut self,
    object: sys::napi_value,
    name: &'static str,
    owner: &str,
  ) -> Result<T> {
    self
      .opt(object, name, owner)?
      .ok_or_else(|| Error::new(Status::InvalidArg, format!("Missing field `{name}` on {owner}")))
  }

  /// Members are read as napi's `#[napi(object)]` conversion reads them: off anything but
  /// `null` / `undefined` (a primitive has none of them).
  fn expect_object(&self, v: sys::napi_value, what: &str) -> Result<()> {
    match self.type_of(v)? {
      t @ (ValueType::Null | ValueType::Undefined) => Err(Error::new(
        Status::ObjectExpected,
        format!("{what} must be an object, got {t}"),
      )),
      _ => Ok(()),
    }
  }

  /// The `content` of Pi's `AssistantMessage`: an array of text, thinking and tool-call parts.
  pub(crate) fn read_content(&mut self, content: sys::napi_value) -> Result<Vec<AssistantPart>> {
    match self.type_of(content)? {
      ValueType::Undefined => {
        return Err(Error::new(
          Status::InvalidArg,
          "Missing field `content` on AssistantMessage".to_string(),
        ))
      }
      ValueType::Object => {}
      t => {
        return Err(Error::new(
          Status::ArrayExpected,
          format!("AssistantMessage.content must be an array, got {t}"),
        ))
      }
    }
    let mut is_array = false;
    check_status!(unsafe { sys::napi_is_array(self.env, content, &mut is_array) })?;
    if !is_array {
      return Err(Error::new(
        Status::ArrayExpected,
        "AssistantMessage.content must be an array".to_string(),
      ));
    }
    let mut len = 0u32;
    check_status!(unsafe { sys::napi_get_array_length(self.env, content, &mut len) })?;
    let mut parts = Vec::with_capacity(len as usize);
    for i in 0..len {
      let mut p = ptr::null_mut();
      check_status!(unsafe { sys::napi_get_element(self.env, content, i, &mut p) })?;
      parts.push(self.read_part(p)?);
    }
    Ok(parts)
  }

  fn read_part(&mut self, p: sys::napi_value) -> Result<AssistantPart> {
    const OWNER: &str = "AssistantPart";
    self.expect_object(p, "a content part")?;
    let kind: String = self.required(p, "type", OWNER)?;
    Ok(match kind.as_str() {
      "text" => AssistantPart::Text(TextPart {
        text: self.opt(p, "text", OWNER)?.unwrap_or_default(),
        text_signature: self.opt(p, "textSignature", OWNER)?,
      }),
      "thinking" => AssistantPart::Thinking(ThinkingPart {
        thinking: self.opt(p, "thinking", OWNER)?.unwrap_or_default(),
        thinking_signature: self.opt(p, "thinkingSignature", OWNER)?,
        redacted: self.opt(p, "redacted", OWNER)?,
      }),
      "toolCall" => AssistantPart::ToolCall(ToolCall {
        id: self.opt(p, "id", OWNER)?.unwrap_or_default(),
        name: self.opt(p, "name", OWNER)?.unwrap_or_default(),
        arguments: self
          .opt::<Value>(p, "arguments", OWNER)?
          .unwrap_or_else(|| Value::Object(Default::default())),
        thought_signature: self.opt(p, "thoughtSignature", OWNER)?,
      }),
      other => AssistantPart::Other(serde_json::json!({ "type": other })),
    })
  }
}

// ---- the serializer ----------------------------------------------------------------------------

/// A napi failure while writing, as serde needs its errors.
#[derive(Debug)]
pub(crate) struct SerError(napi::Error);

impl std::fmt::Display for SerError {
  fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
    f.write_str(&self.0.reason)
  }
}

impl std::error::Error for SerError {}

impl ser::Error for SerError {
  fn custom<T: std::fmt::Display>(msg: T) -> Self {
    SerError(napi::Error::from_reason(msg.to_string()))
  }
}

impl From<napi::Error> for SerError {
  fn from(e: napi::Error) -> Self {
    SerError(e)
  }
}

type SerResult = std::result::Result<sys::napi_value, SerError>;

/// serde_json's marker for a `RawValue` (JSON text that is written as the value it holds).
const RAW_VALUE: &str = "$serde_json::private::RawValue";

struct Ser<'a>(&'a mut Js);

impl<'a> ser::Serializer for Ser<'a> {
  type Ok = sys::napi_value;
  type Error = SerError;
  type SerializeSeq = SeqSer<'a>;
  type SerializeTuple = SeqSer<'a>;
  type SerializeTupleStruct = SeqSer<'a>;
  type SerializeTupleVariant = Wrapped<SeqSer<'a>>;
  type SerializeMap = MapSer<'a>;
  type SerializeStruct = StructSer<'a>;
  type SerializeStructVariant = Wrapped<StructSer<'a>>;

  fn serialize_bool(self, v: bool) -> SerResult {
    Ok(self.0.bool(v)?)
  }
  fn serialize_i8(self, v: i8) -> SerResult {
    Ok(self.0.i64(v.into())?)
  }
  fn serialize_i16(self, v: i16) -> SerResult {
    Ok(self.0.i64(v.into())?)
  }
  fn serialize_i32(self, v: i32) -> SerResult {
    Ok(self.0.i64(v.into())?)
  }
  fn serialize_i64(self, v: i64) -> SerResult {
    Ok(self.0.i64(v)?)
  }
  fn serialize_u8(self, v: u8) -> SerResult {
    Ok(self.0.u64(v.into())?)
  }
  fn serialize_u16(self, v: u16) -> SerResult {
    Ok(self.0.u64(v.into())?)
  }
  fn serialize_u32(self, v: u32) -> SerResult {
    Ok(self.0.u64(v.into())?)
  }
  fn serialize_u64(self, v: u64) -> SerResult {
    Ok(self.0.u64(v)?)
  }
  fn serialize_f32(self, v: f32) -> SerResult {
    Ok(self.0.f64(v.into())?)
  }
  fn serialize_f64(self, v: f64) -> SerResult {
    Ok(self.0.f64(v)?)
  }
  fn serialize_char(self, v: char) -> SerResult {
    Ok(self.0.str(v.encode_utf8(&mut [0; 4]))?)
  }
  fn serialize_str(self, v: &str) -> SerResult {
    Ok(self.0.str(v)?)
  }
  fn serialize_bytes(self, v: &[u8]) -> SerResult {
    let a = self.0.array(v.len())?;
    for (i, b) in v.iter().enumerate() {
      let n = self.0.u64((*b).into())?;
      self.0.push(a, i as u32, n)?;
    }
    Ok(a)
  }
  fn serialize_none(self) -> SerResult {
    Ok(self.0.null()?)
  }
  fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> SerResult {
    value.serialize(self)
  }
  fn serialize_unit(self) -> SerResult {
    Ok(self.0.null()?)
  }
  fn serialize_unit_struct(self, _name: &'static str) -> SerResult {
    Ok(self.0.null()?)
  }
  fn serialize_unit_variant(self, _name: &'static str, _index: u32, variant: &'static str) -> SerResult {
    Ok(self.0.key(variant)?)
  }
  fn serialize_newtype_struct<T: Serialize + ?Sized>(self, _name: &'static str, value: &T) -> SerResult {
    value.serialize(self)
  }
  fn serialize_newtype_variant<T: Serialize + ?Sized>(
    self,
    _name: &'static str,
    _index: u32,
    variant: &'static str,
    value: &T,
  ) -> SerResult {
    let o = self.0.object()?;
    let k = self.0.key(variant)?;
    let v = value.serialize(Ser(&mut *self.0))?;
    self.0.set(o, k, v)?;
    Ok(o)
  }
  fn serialize_seq(self, len: Option<usize>) -> std::result::Result<SeqSer<'a>, SerError> {
    let array = self.0.array(len.unwrap_or(0))?;
    Ok(SeqSer {
      js: self.0,
      array,
      next: 0,
    })
  }
  fn serialize_tuple(self, len: usize) -> std::result::Result<SeqSer<'a>, SerError> {
    self.serialize_seq(Some(len))
  }
  fn serialize_tuple_struct(
    self,
    _name: &'static str,
    len: usize,
  ) -> std::result::Result<SeqSer<'a>, SerError> {
    self.serialize_seq(Some(len))
  }
  fn serialize_tuple_variant(
    self,
    _name: &'static str,
    _index: u32,
    variant: &'static str,
    len: usize,
  ) -> std::result::Result<Wrapped<SeqSer<'a>>, SerError> {
    let outer = self.0.object()?;
    let key = self.0.key(variant)?;
    let array = self.0.array(len)?;
    Ok(Wrapped {
      outer,
      key,
      inner: SeqSer {
        js: self.0,
        array,
        next: 0,
      },
    })
  }
  fn serialize_map(self, _len: Option<usize>) -> std::result::Result<MapSer<'a>, SerError> {
    let object = self.0.object()?;
    Ok(MapSer {
      js: self.0,
      object,
      key: None,
    })
  }
  fn serialize_struct(self, name: &'static str, _len: usize) -> std::result::Result<StructSer<'a>, SerError> {
    let object = if name == RAW_VALUE {
      ptr::null_mut()
    } else {
      self.0.object()?
    };
    Ok(StructSer { js: self.0, object })
  }
  fn serialize_struct_variant(
    self,
    _name: &'static str,
    _index: u32,
    variant: &'static str,
    _len: usize,
  ) -> std::result::Result<Wrapped<StructSer<'a>>, SerError> {
    let outer = self.0.object()?;
    let key = self.0.key(variant)?;
    let object = self.0.object()?;
    Ok(Wrapped {
      outer,
      key,
      inner: StructSer { js: self.0, object },
    })
  }
}

struct SeqSer<'a> {
  js: &'a mut Js,
  array: sys::napi_value,
  next: u32,
}

impl SeqSer<'_> {
  fn add<T: Serialize + ?Sized>(&mut self, value: &T) -> std::result::Result<(), SerError> {
    let v = value.serialize(Ser(&mut *self.js))?;
    self.js.push(self.array, self.next, v)?;
    self.next += 1;
    Ok(())
  }
}

/// Sequences, tuples and tuple structs are all JS arrays.
macro_rules! seq_ser {
  ($($trait:ident :: $method:ident),*) => {$(
    impl ser::$trait for SeqSer<'_> {
      type Ok = sys::napi_value;
      type Error = SerError;
      fn $method<T: Serialize + ?Sized>(&mut self, value: &T) -> std::result::Result<(), SerError> {
        self.add(value)
      }
      fn end(self) -> SerResult {
        Ok(self.array)
      }
    }
  )*};
}
seq_ser!(SerializeSeq::serialize_element, SerializeTuple::serialize_element, SerializeTupleStruct::serialize_field);

struct MapSer<'a> {
  js: &'a mut Js,
  object: sys::napi_value,
  key: Option<sys::napi_value>,
}

impl ser::SerializeMap for MapSer<'_> {
  type Ok = sys::napi_value;
  type Error = SerError;
  fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> std::result::Result<(), SerError> {
    self.key = Some(key.serialize(KeySer(&mut *self.js))?);
    Ok(())
  }
  fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> std::result::Result<(), SerError> {
    let key = self
      .key
      .take()
      .ok_or_else(|| <SerError as ser::Error>::custom("a map value without its key"))?;
    let v = value.serialize(Ser(&mut *self.js))?;
    Ok(self.js.set(self.object, key, v)?)
  }
  fn end(self) -> SerResult {
    Ok(self.object)
  }
}

struct StructSer<'a> {
  js: &'a mut Js,
  /// Null while writing a `RawValue` (its one field is the JSON text).
  object: sys::napi_value,
}

impl ser::SerializeStruct for StructSer<'_> {
  type Ok = sys::napi_value;
  type Error = SerError;
  fn serialize_field<T: Serialize + ?Sized>(
    &mut self,
    key: &'static str,
    value: &T,
  ) -> std::result::Result<(), SerError> {
    if self.object.is_null() {
      // A RawValue: its text, parsed, becomes the struct's value.
      let text = value.serialize(Ser(&mut *self.js))?;
      let text = unsafe { String::from_napi_value(self.js.env, text) }?;
      let parsed: Value = serde_json::from_str(&text).map_err(<SerError as ser::Error>::custom)?;
      self.object = self.js.write(&parsed)?;
      return Ok(());
    }
    let k = self.js.key(key)?;
    let v = value.serialize(Ser(&mut *self.js))?;
    Ok(self.js.set(self.object, k, v)?)
  }
  fn end(self) -> SerResult {
    Ok(self.object)
  }
}

/// A tuple or struct variant: `{ variant: inner }`.
struct Wrapped<S> {
  outer: sys::napi_value,
  key: sys::napi_value,
  inner: S,
}

impl<'a> ser::SerializeTupleVariant for Wrapped<SeqSer<'a>> {
  type Ok = sys::napi_value;
  type Error = SerError;
  fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> std::result::Result<(), SerError> {
    self.inner.add(value)
  }
  fn end(self) -> SerResult {
    let Wrapped { outer, key, inner } = self;
    inner.js.set(outer, key, inner.array)?;
    Ok(outer)
  }
}

impl<'a> ser::SerializeStructVariant for Wrapped<StructSer<'a>> {
  type Ok = sys::napi_value;
  type Error = SerError;
  fn serialize_field<T: Serialize + ?Sized>(
    &mut self,
    key: &'static str,
    value: &T,
  ) -> std::result::Result<(), SerError> {
    ser::SerializeStruct::serialize_field(&mut self.inner, key, value)
  }
  fn end(self) -> SerResult {
    let Wrapped { outer, key, inner } = self;
    inner.js.set(outer, key, inner.object)?;
    Ok(outer)
  }
}

/// A map key, as serde_json writes one: a string, or a number / bool / char as its text.
struct KeySer<'a>(&'a mut Js);

impl KeySer<'_> {
  fn text(self, s: &str) -> SerResult {
    Ok(self.0.str(s)?)
  }
}

fn key_must_be_a_string() -> SerError {
  <SerError as ser::Error>::custom("key must be a string")
}

impl ser::Serializer for KeySer<'_> {
  type Ok = sys::napi_value;
  type Error = SerError;
  type SerializeSeq = ser::Impossible<sys::napi_value, SerError>;
  type SerializeTuple = ser::Impossible<sys::napi_value, SerError>;
  type SerializeTupleStruct = ser::Impossible<sys::napi_value, SerError>;
  type SerializeTupleVariant = ser::Impossible<sys::napi_value, SerError>;
  type SerializeMap = ser::Impossible<sys::napi_value, SerError>;
  type SerializeStruct = ser::Impossible<sys::napi_value, SerError>;
  type SerializeStructVariant = ser::Impossible<sys::napi_value, SerError>;

  fn serialize_bool(self, v: bool) -> SerResult {
    self.text(if v { "true" } else { "false" })
  }
  fn serialize_i8(self, v: i8) -> SerResult {
    self.text(&v.to_string())
  }
  fn serialize_i16(self, v: i16) -> SerResult {
    self.text(&v.to_string())
  }
  fn serialize_i32(self, v: i32) -> SerResult {
    self.text(&v.to_string())
  }
  fn serialize_i64(self, v: i64) -> SerResult {
    self.text(&v.to_string())
  }
  fn serialize_u8(self, v: u8) -> SerResult {
    self.text(&v.to_string())
  }
  fn serialize_u16(self, v: u16) -> SerResult {
    self.text(&v.to_string())
  }
  fn serialize_u32(self, v: u32) -> SerResult {
    self.text(&v.to_string())
  }
  fn serialize_u64(self, v: u64) -> SerResult {
    self.text(&v.to_string())
  }
  fn serialize_f32(self, v: f32) -> SerResult {
    self.serialize_f64(v.into())
  }
  fn serialize_f64(self, v: f64) -> SerResult {
    if !v.is_finite() {
      return Err(<SerError as ser::Error>::custom("float key must be finite"));
    }
    let text = serde_json::to_string(&v).map_err(<SerError as ser::Error>::custom)?;
    self.text(&text)
  }
  fn serialize_char(self, v: char) -> SerResult {
    self.text(v.encode_utf8(&mut [0; 4]))
  }
  fn serialize_str(self, v: &str) -> SerResult {
    self.text(v)
  }
  fn serialize_bytes(self, _v: &[u8]) -> SerResult {
    Err(key_must_be_a_string())
  }
  fn serialize_none(self) -> SerResult {
    Err(key_must_be_a_string())
  }
  fn serialize_some<T: Serialize + ?Sized>(self, _value: &T) -> SerResult {
    Err(key_must_be_a_string())
  }
  fn serialize_unit(self) -> SerResult {
    Err(key_must_be_a_string())
  }
  fn serialize_unit_struct(self, _name: &'static str) -> SerResult {
    Err(key_must_be_a_string())
  }
  fn serialize_unit_variant(self, _name: &'static str, _index: u32, variant: &'static str) -> SerResult {
    Ok(self.0.key(variant)?)
  }
  fn serialize_newtype_struct<T: Serialize + ?Sized>(self, _name: &'static str, value: &T) -> SerResult {
    value.serialize(self)
  }
  fn serialize_newtype_variant<T: Serialize + ?Sized>(
    self,
    _name: &'static str,
    _index: u32,
    _variant: &'static str,
    _value: &T,
  ) -> SerResult {
    Err(key_must_be_a_string())
  }
  fn serialize_seq(self, _len: Option<usize>) -> std::result::Result<Self::SerializeSeq, SerError> {
    Err(key_must_be_a_string())
  }
  fn serialize_tuple(self, _len: usize) -> std::result::Result<Self::SerializeTuple, SerError> {
    Err(key_must_be_a_string())
  }
  fn serialize_tuple_struct(
    self,
    _name: &'static str,
    _len: usize,
  ) -> std::result::Result<Self::SerializeTupleStruct, SerError> {
    Err(key_must_be_a_string())
  }
  fn serialize_tuple_variant(
    self,
    _name: &'static str,
    _index: u32,
    _variant: &'static str,
    _len: usize,
  ) -> std::result::Result<Self::SerializeTupleVariant, SerError> {
    Err(key_must_be_a_string())
  }
  fn serialize_map(self, _len: Option<usize>) -> std::result::Result<Self::SerializeMap, SerError> {
    Err(key_must_be_a_string())
  }
  fn serialize_struct(
    self,
    _name: &'static str,
    _len: usize,
  ) -> std::result::Result<Self::SerializeStruct, SerError> {
    Err(key_must_be_a_string())
  }
  fn serialize_struct_variant(
    self,
    _name: &'static str,
    _index: u32,
    _variant: &'static str,
    _len: usize,
  ) -> std::result::Result<Self::SerializeStructVariant, SerError> {
    Err(key_must_be_a_string())
  }
}

/// An optional string argument: `undefined` is none; anything but a string (`null` too) is an
/// error, as an optional string member of a `#[napi(object)]` is.
pub struct OptStr(pub Option<String>);

/// An optional number argument, kept as JSON writes it (`1`, not `1.0`; NaN and infinities are
/// none); `undefined` is none, anything but a number is an error.
pub struct OptNum(pub Option<Number>);

/// `typeof v`.
pub(crate) unsafe fn type_of(env: sys::napi_env, v: sys::napi_value) -> Result<ValueType> {
  let mut t = 0;
  check_status!(unsafe { sys::napi_typeof(env, v, &mut t) })?;
  Ok(ValueType::from(t))
}

unsafe fn undefined(env: sys::napi_env, v: sys::napi_value) -> Result<bool> {
  Ok(unsafe { type_of(env, v) }? == ValueType::Undefined)
}

/// A value read off any JS value (a callback's answer, judged later by the core): typed as
/// `unknown`.
macro_rules! unknown_js_type {
  ($($t:ty),+) => {$(
    impl napi::bindgen_prelude::TypeName for $t {
      fn type_name() -> &'static str {
        "unknown"
      }
      fn value_type() -> napi::bindgen_prelude::ValueType {
        napi::bindgen_prelude::ValueType::Unknown
      }
    }
    impl napi::bindgen_prelude::ValidateNapiValue for $t {}
  )+};
}
pub(crate) use unknown_js_type;

/// What a JS hook returned: its answer, or a Promise of it (a sync answer settles at once, with
/// no microtask in between).
pub enum MaybePromise<A: FromNapiValue + 'static> {
  Now(A),
  Later(Promise<A>),
}

impl<A: FromNapiValue + 'static> FromNapiValue for MaybePromise<A> {
  unsafe fn from_napi_value(env: sys::napi_env, value: sys::napi_value) -> Result<Self> {
    let mut is_promise = false;
    check_status!(unsafe { sys::napi_is_promise(env, value, &mut is_promise) })?;
    Ok(if is_promise {
      MaybePromise::Later(unsafe { Promise::from_napi_value(env, value) }?)
    } else {
      MaybePromise::Now(unsafe { A::from_napi_value(env, value) }?)
    })
  }
}

impl<A: FromNapiValue + 'static> TypeName for MaybePromise<A> {
  fn type_name() -> &'static str {
    "unknown"
  }
  fn value_type() -> ValueType {
    ValueType::Unknown
  }
}

impl<A: FromNapiValue + 'static> ValidateNapiValue for MaybePromise<A> {}

impl<A: FromNapiValue + Send + 'static> MaybePromise<A> {
  /// The answer, once its Promise (if any) settles; a rejection is its reason.
  pub async fn settle(self) -> std::result::Result<A, String> {
    match self {
      MaybePromise::Now(a) => Ok(a),
      MaybePromise::Later(p) => p.await.map_err(|e| e.reason.clone()),
    }
  }
}

impl FromNapiValue for OptStr {
  unsafe fn from_napi_value(env: sys::napi_env, v: sys::napi_value) -> Result<Self> {
    if unsafe { undefined(env, v) }? {
      return Ok(OptStr(None));
    }
    Ok(OptStr(Some(unsafe { String::from_napi_value(env, v) }?)))
  }
}

impl FromNapiValue for OptNum {
  unsafe fn from_napi_value(env: sys::napi_env, v: sys::napi_value) -> Result<Self> {
    if unsafe { undefined(env, v) }? {
      return Ok(OptNum(None));
    }
    Ok(OptNum(js_number(unsafe { f64::from_napi_value(env, v) }?)))
  }
}

impl TypeName for OptStr {
  fn type_name() -> &'static str {
    "string | undefined"
  }
  fn value_type() -> ValueType {
    ValueType::String
  }
}

impl TypeName for OptNum {
  fn type_name() -> &'static str {
    "number | undefined"
  }
  fn value_type() -> ValueType {
    ValueType::Number
  }
}

impl ValidateNapiValue for OptStr {}
impl ValidateNapiValue for OptNum {}

/// A JS number as JSON writes it (`1`, not `1.0`).
pub(crate) fn js_number(f: f64) -> Option<Number> {
  if f.fract() == 0.0 && f.abs() < 9_007_199_254_740_992.0 {
    Some(Number::from(f as i64))
  } else {
    Number::from_f64(f)
  }
}
