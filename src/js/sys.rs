//! The few platform globals the binding needs beyond js-sys and web-sys.

use wasm_bindgen::prelude::*;

use crate::serializer::MAX_TIMEOUT_MS;

#[wasm_bindgen]
extern "C" {
    /// `performance.now()`: monotonic, present in Workers, browsers, Node and Deno.
    #[wasm_bindgen(js_namespace = performance, js_name = now)]
    pub(crate) fn performance_now() -> f64;

    /// `crypto.getRandomValues(bytes)`: Workers, browsers, Node and Deno.
    #[wasm_bindgen(js_namespace = crypto, js_name = getRandomValues)]
    pub(crate) fn get_random_values(bytes: &mut [u8]);

}

/// A delay for `setTimeout` that is never 0 (a timer fires in a later task, never early) and
/// never past what timers honour.
pub(crate) fn timer_delay(ms: f64) -> u32 {
    let ms = ms.ceil();
    if ms.is_nan() || ms < 1.0 {
        1
    } else if ms > f64::from(MAX_TIMEOUT_MS) {
        MAX_TIMEOUT_MS
    } else {
        ms as u32
    }
}

#[cfg(feature = "js-serializer")]
/// Starts a one-shot timer (gloo-timers) that does not keep a Node process alive: a deadline
/// that is still pending must not hold a process open, as the seed's unref'd timer does not.
pub(crate) fn arm_timer(ms: f64, callback: impl FnOnce() + 'static) {
    let handle = gloo_timers::callback::Timeout::new(timer_delay(ms), callback).forget();
    // Node returns a Timeout object with `unref`; browsers and Workers return a number.
    if handle.is_object() {
        if let Ok(unref) = js_sys::Reflect::get(&handle, &JsValue::from_str("unref")) {
            if let Some(unref) = unref.dyn_ref::<js_sys::Function>() {
                let _ = unref.call0(&handle);
            }
        }
    }
}
