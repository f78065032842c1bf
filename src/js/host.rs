//! The few JavaScript globals the bindings call, imported one by one instead of through js-sys:
//! js-sys's descriptors keep ~5 KB of closure shims in each module's function table although
//! no binding makes a closure (measured: 49.2 → see `make bench`). Each import that can throw
//! is a `catch` binding.

use wasm_bindgen::prelude::*;

#[wasm_bindgen]
extern "C" {
    /// `new TypeError(message)`.
    #[wasm_bindgen(js_name = TypeError)]
    pub type HostTypeError;
    #[wasm_bindgen(constructor, js_class = "TypeError")]
    pub fn new(message: &str) -> HostTypeError;

    /// `new RangeError(message)`.
    #[wasm_bindgen(js_name = RangeError)]
    pub type HostRangeError;
    #[wasm_bindgen(constructor, js_class = "RangeError")]
    pub fn new(message: &str) -> HostRangeError;

    /// `new Object()`.
    #[wasm_bindgen(js_name = Object)]
    pub type HostObject;
    #[wasm_bindgen(constructor, js_class = "Object")]
    pub fn new() -> HostObject;

    /// `Reflect.get(target, key)`: a getter may throw.
    #[wasm_bindgen(catch, js_namespace = Reflect, js_name = get)]
    pub fn reflect_get(target: &JsValue, key: &JsValue) -> Result<JsValue, JsValue>;

    /// `Reflect.set(target, key, value)`.
    #[wasm_bindgen(catch, js_namespace = Reflect, js_name = set)]
    pub fn reflect_set(target: &JsValue, key: &JsValue, value: &JsValue) -> Result<bool, JsValue>;

    /// `String(number)`: how JavaScript spells a number.
    #[wasm_bindgen(js_name = String)]
    pub fn spell_number(number: f64) -> String;

    /// `Date.now()`.
    #[wasm_bindgen(js_namespace = Date, js_name = now)]
    pub fn date_now() -> f64;

    /// A JS string, for its UTF-16 code units.
    #[wasm_bindgen(js_name = String)]
    pub type HostString;
    #[wasm_bindgen(method, getter, js_class = "String", js_name = length)]
    pub fn length(this: &HostString) -> u32;
    #[wasm_bindgen(method, js_class = "String", js_name = charCodeAt)]
    pub fn char_code_at(this: &HostString, index: u32) -> u32;
}

/// Whether a JS string is well-formed UTF-16 (no lone surrogate): what `as_string` would turn
/// into U+FFFD.
pub fn is_well_formed(value: &JsValue) -> bool {
    let string: &HostString = value.unchecked_ref();
    let length = string.length();
    let mut at = 0;
    while at < length {
        let unit = string.char_code_at(at);
        if (0xD800..0xDC00).contains(&unit) {
            if at + 1 >= length || !(0xDC00..0xE000).contains(&string.char_code_at(at + 1)) {
                return false;
            }
            at += 2;
            continue;
        }
        if (0xDC00..0xE000).contains(&unit) {
            return false;
        }
        at += 1;
    }
    true
}
