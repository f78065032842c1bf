//! Bad arguments become `TypeError` / `RangeError` that name the argument.

use wasm_bindgen::prelude::*;

use crate::key::{validate_key, KeyError};

/// What `typeof` says, with `null` told apart, for messages.
pub fn describe(value: &JsValue) -> String {
    if value.is_null() {
        "null".into()
    } else {
        value.js_typeof().as_string().unwrap_or_else(|| "value".into())
    }
}

/// A `TypeError` whose message starts with `keyturn: `.
pub fn type_error(message: &str) -> JsValue {
    js_sys::TypeError::new(&format!("keyturn: {message}")).into()
}

/// A `RangeError` whose message starts with `keyturn: `.
pub fn range_error(message: &str) -> JsValue {
    js_sys::RangeError::new(&format!("keyturn: {message}")).into()
}

/// A key or lock name from JavaScript, as a Rust string, or the error that names `what`.
pub fn key_from_js(value: &JsValue, what: &str) -> Result<String, JsValue> {
    let Some(key) = value.as_string() else {
        return Err(type_error(&format!("{what} must be a non-empty string, got {}", describe(value))));
    };
    // Lone surrogates come through as U+FFFD; two different keys must not become one.
    if key.contains('\u{FFFD}') && !js_sys::JsString::from(value.clone()).is_valid_utf16() {
        return Err(type_error(&format!("{what} must be well-formed Unicode (it has a lone surrogate)")));
    }
    match validate_key(&key) {
        Ok(()) => Ok(key),
        Err(KeyError::Empty) => Err(type_error(&format!("{what} must be a non-empty string, got \"\""))),
        Err(error @ KeyError::TooLong(_)) => Err(range_error(&format!("{what} {error}"))),
    }
}

/// `options` as an object to read fields from: `None` when undefined, an error naming it when
/// it is anything but an object.
pub fn options_object(value: &JsValue, what: &str) -> Result<Option<js_sys::Object>, JsValue> {
    if value.is_undefined() {
        return Ok(None);
    }
    if value.is_object() && !value.is_function() {
        return Ok(Some(value.clone().unchecked_into()));
    }
    Err(type_error(&format!("{what} must be an object or undefined, got {}", describe(value))))
}

/// A field of an options object; a getter that throws passes its error on.
pub fn field(object: &js_sys::Object, name: &str) -> Result<JsValue, JsValue> {
    js_sys::Reflect::get(object, &JsValue::from_str(name))
}

/// An optional function field: `undefined` or a function, else a TypeError naming it.
pub fn optional_function(value: JsValue, what: &str) -> Result<Option<js_sys::Function>, JsValue> {
    if value.is_undefined() {
        Ok(None)
    } else if let Some(function) = value.dyn_ref::<js_sys::Function>() {
        Ok(Some(function.clone()))
    } else {
        Err(type_error(&format!("{what} must be a function or undefined, got {}", describe(&value))))
    }
}

/// An optional number field: `undefined` or a number, else a TypeError naming it.
pub fn optional_number(value: JsValue, what: &str) -> Result<Option<f64>, JsValue> {
    if value.is_undefined() {
        Ok(None)
    } else if let Some(number) = value.as_f64() {
        Ok(Some(number))
    } else {
        Err(type_error(&format!("{what} must be a number or undefined, got {}", describe(&value))))
    }
}
