//! Bad arguments become `TypeError` / `RangeError` that name the argument.
//!
//! Messages are joined from pieces rather than `format!`ted, and numbers are spelled by
//! JavaScript, so the module carries none of Rust's float formatting (~20 KB of wasm). The
//! helpers are never inlined: they run only on bad input, and one copy is smaller than many.

use wasm_bindgen::prelude::*;

use crate::key::{validate_key, KeyError, MAX_KEY_BYTES};

#[inline(never)]
fn join(parts: &[&str]) -> String {
    let mut message = String::from("keyturn: ");
    parts.iter().for_each(|part| message.push_str(part));
    message
}

/// A `TypeError` whose message is `keyturn: ` and the parts.
#[inline(never)]
pub fn type_error(parts: &[&str]) -> JsValue {
    super::host::HostTypeError::new(&join(parts)).into()
}

/// A `RangeError` whose message is `keyturn: ` and the parts.
#[inline(never)]
pub fn range_error(parts: &[&str]) -> JsValue {
    super::host::HostRangeError::new(&join(parts)).into()
}

/// What `typeof` says, with `null` told apart, for messages.
#[inline(never)]
pub fn describe(value: &JsValue) -> String {
    if value.is_null() {
        "null".into()
    } else {
        value.js_typeof().as_string().unwrap_or_default()
    }
}

/// A number as JavaScript spells it (`String(n)`), for messages.
#[inline(never)]
pub fn spell(number: f64) -> String {
    super::host::spell_number(number)
}

/// A key or lock name from JavaScript, as a Rust string, or the error that names `what`.
pub fn key_from_js(value: &JsValue, what: &str) -> Result<String, JsValue> {
    let Some(key) = value.as_string() else {
        return Err(type_error(&[
            what,
            " must be a non-empty string, got ",
            &describe(value),
        ]));
    };
    // Lone surrogates come through as U+FFFD; two different keys must not become one.
    if key.chars().any(|c| c == '\u{FFFD}') && !super::host::is_well_formed(value) {
        return Err(type_error(&[
            what,
            " must be well-formed Unicode (it has a lone surrogate)",
        ]));
    }
    match validate_key(&key) {
        Ok(()) => Ok(key),
        Err(error) => Err(key_error(what, error)),
    }
}

/// The JS error for a refused key.
#[inline(never)]
pub fn key_error(what: &str, error: KeyError) -> JsValue {
    match error {
        KeyError::Empty => type_error(&[what, " must be a non-empty string, got \"\""]),
        KeyError::TooLong(len) => range_error(&[
            what,
            " is ",
            &spell(len as f64),
            " bytes long in UTF-8; at most ",
            &spell(MAX_KEY_BYTES as f64),
            " are allowed",
        ]),
    }
}

/// `options` as an object to read fields from: `None` when undefined, an error naming it when
/// it is anything but an object.
#[inline(never)]
pub fn options_object(value: &JsValue, what: &str) -> Result<Option<JsValue>, JsValue> {
    if value.is_undefined() {
        return Ok(None);
    }
    if value.is_object() && !value.is_function() {
        return Ok(Some(value.clone()));
    }
    Err(type_error(&[
        what,
        " must be an object or undefined, got ",
        &describe(value),
    ]))
}

/// A field of an options object; a getter that throws passes its error on.
pub fn field(object: &JsValue, name: &str) -> Result<JsValue, JsValue> {
    super::host::reflect_get(object, &JsValue::from_str(name))
}

/// An optional function field: `undefined` or a function, else a TypeError naming it.
#[inline(never)]
pub fn optional_function(value: JsValue, what: &str) -> Result<Option<JsValue>, JsValue> {
    if value.is_undefined() {
        Ok(None)
    } else if value.is_function() {
        Ok(Some(value))
    } else {
        Err(type_error(&[
            what,
            " must be a function or undefined, got ",
            &describe(&value),
        ]))
    }
}

/// An optional number field: `undefined` or a number, else a TypeError naming it.
#[inline(never)]
pub fn optional_number(value: JsValue, what: &str) -> Result<Option<f64>, JsValue> {
    if value.is_undefined() {
        Ok(None)
    } else if let Some(number) = value.as_f64() {
        Ok(Some(number))
    } else {
        Err(type_error(&[
            what,
            " must be a number or undefined, got ",
            &describe(&value),
        ]))
    }
}
