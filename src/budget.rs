//! An `onBudgetExhausted` handler's answer as the core reads it, straight off the JS value (as
//! a policy decision is): `"stop"`, `{release, reason}` with a number and a string, or anything
//! else. The core judges it (`cave_budget_exhaustion_result_invalid`) and the meter its values.

use knap_core::kernel::budget::ExhaustionAnswer;
use napi::bindgen_prelude::*;
use napi::sys;

use crate::js::{type_of, unknown_js_type};

pub struct BudgetAnswerJs(pub ExhaustionAnswer);

unsafe fn member(
  env: sys::napi_env,
  object: sys::napi_value,
  key: &std::ffi::CStr,
) -> Result<sys::napi_value> {
  let mut v = std::ptr::null_mut();
  check_status!(unsafe { sys::napi_get_named_property(env, object, key.as_ptr(), &mut v) })?;
  Ok(v)
}

impl FromNapiValue for BudgetAnswerJs {
  unsafe fn from_napi_value(env: sys::napi_env, value: sys::napi_value) -> Result<Self> {
    Ok(BudgetAnswerJs(match unsafe { type_of(env, value) }? {
      ValueType::String if unsafe { String::from_napi_value(env, value) }? == "stop" => {
        ExhaustionAnswer::Stop
      }
      ValueType::Object => {
        let release = unsafe { member(env, value, c"release") }?;
        let reason = unsafe { member(env, value, c"reason") }?;
        match (unsafe { type_of(env, release) }?, unsafe {
          type_of(env, reason)
        }?) {
          (ValueType::Number, ValueType::String) => ExhaustionAnswer::Release {
            amount: unsafe { f64::from_napi_value(env, release) }?,
            reason: unsafe { String::from_napi_value(env, reason) }?,
          },
          _ => ExhaustionAnswer::Invalid,
        }
      }
      _ => ExhaustionAnswer::Invalid,
    }))
  }
}

unknown_js_type!(BudgetAnswerJs);
