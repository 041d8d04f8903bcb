//! A `modelRouter`'s decision as the core reads it: read straight off the JS value (no JSON in
//! between) into plain data that keeps every shape fact `knap_core::kernel::route` judges —
//! `model` and `reason` as strings, `signals` as an array of strings — and nothing else.

use napi::bindgen_prelude::*;
use napi::sys;
use serde_json::Value;

use crate::js::{type_of, unknown_js_type};
use crate::policy::member;

/// A decision value: `null` unless it is a (non-array) object.
pub struct RouteAnswerJs(pub Value);

/// `signals`: an array's string elements (any other element becomes `null`, never valid), or
/// what `member` makes of a non-array.
unsafe fn signals(env: sys::napi_env, object: sys::napi_value) -> Result<Option<Value>> {
  let mut v = std::ptr::null_mut();
  check_status!(unsafe { sys::napi_get_named_property(env, object, c"signals".as_ptr(), &mut v) })?;
  let mut is_array = false;
  check_status!(unsafe { sys::napi_is_array(env, v, &mut is_array) })?;
  if !is_array {
    return unsafe { member(env, object, c"signals") };
  }
  let mut len = 0u32;
  check_status!(unsafe { sys::napi_get_array_length(env, v, &mut len) })?;
  let mut out = Vec::with_capacity(len.min(1024) as usize);
  for i in 0..len {
    let mut e = std::ptr::null_mut();
    check_status!(unsafe { sys::napi_get_element(env, v, i, &mut e) })?;
    out.push(match unsafe { type_of(env, e) }? {
      ValueType::String => Value::String(unsafe { String::from_napi_value(env, e) }?),
      _ => Value::Null,
    });
  }
  Ok(Some(Value::Array(out)))
}

impl FromNapiValue for RouteAnswerJs {
  unsafe fn from_napi_value(env: sys::napi_env, value: sys::napi_value) -> Result<Self> {
    if unsafe { type_of(env, value) }? != ValueType::Object {
      return Ok(RouteAnswerJs(Value::Null));
    }
    let mut is_array = false;
    check_status!(unsafe { sys::napi_is_array(env, value, &mut is_array) })?;
    if is_array {
      return Ok(RouteAnswerJs(Value::Null));
    }
    let mut map = serde_json::Map::new();
    for key in [c"model", c"reason"] {
      if let Some(v) = unsafe { member(env, value, key) }? {
        map.insert(key.to_str().unwrap_or_default().to_string(), v);
      }
    }
    if let Some(v) = unsafe { signals(env, value) }? {
      map.insert("signals".into(), v);
    }
    Ok(RouteAnswerJs(Value::Object(map)))
  }
}

unknown_js_type!(RouteAnswerJs);
