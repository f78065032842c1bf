//! The same tests in Node, headless Chromium and headless Firefox: `scripts/test.sh` runs this
//! file once per host (WASM_BINDGEN_USE_BROWSER with CHROMEDRIVER, then with GECKODRIVER).
//! Real platform timers throughout: nothing here uses a manual clock.
#![cfg(target_arch = "wasm32")]

use std::cell::RefCell;
use std::rc::Rc;

use gloo_timers::future::TimeoutFuture;
use keyturn::js::errors::key_from_js;
use keyturn::js::serializer::KeyedSerializerCore;
use keyturn::{KeyedSerializer, SerializeError, WorkSignal};
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::spawn_local;
use wasm_bindgen_test::wasm_bindgen_test as test;

type Log = Rc<RefCell<Vec<String>>>;

fn spawn_run(
    serializer: &Rc<KeyedSerializer<keyturn::clock::PlatformClock>>,
    log: &Log,
    key: &'static str,
    name: &'static str,
    ms: u32,
) {
    let (serializer, log) = (serializer.clone(), log.clone());
    spawn_local(async move {
        let result = serializer
            .run(key, |_signal: WorkSignal| {
                let log = log.clone();
                async move {
                    log.borrow_mut().push(format!("start {name}"));
                    TimeoutFuture::new(ms).await;
                    log.borrow_mut().push(format!("end {name}"));
                }
            })
            .await;
        if let Err(SerializeError::TimedOut { .. }) = result {
            log.borrow_mut().push(format!("timeout {name}"));
        }
    });
}

#[test]
async fn rust_api_runs_one_key_in_order_and_keys_side_by_side() {
    let serializer = Rc::new(KeyedSerializer::new(1000.0).unwrap());
    let log: Log = Rc::default();
    spawn_run(&serializer, &log, "a", "a1", 20);
    spawn_run(&serializer, &log, "a", "a2", 1);
    spawn_run(&serializer, &log, "b", "b1", 5);
    TimeoutFuture::new(120).await;
    assert_eq!(
        *log.borrow(),
        ["start a1", "start b1", "end b1", "end a1", "start a2", "end a2"]
    );
    assert_eq!(serializer.pending(), 0);
}

#[test]
async fn rust_api_deadline_drops_the_work_on_a_real_timer() {
    let serializer = Rc::new(KeyedSerializer::new(30.0).unwrap());
    let log: Log = Rc::default();
    spawn_run(&serializer, &log, "k", "slow", 10_000);
    spawn_run(&serializer, &log, "k", "next", 1);
    TimeoutFuture::new(15).await;
    assert_eq!(*log.borrow(), ["start slow"], "not before the deadline");
    TimeoutFuture::new(150).await;
    assert_eq!(
        *log.borrow(),
        ["start slow", "timeout slow", "start next", "end next"]
    );
    assert_eq!(serializer.pending(), 0);
}

#[test]
fn keys_from_javascript_are_checked_without_panicking() {
    assert_eq!(
        key_from_js(&JsValue::from_str("order-1"), "key").unwrap(),
        "order-1"
    );
    let lone = js_sys::JsString::from_char_code1(0xD800);
    let cases: [(JsValue, &str); 6] = [
        (JsValue::from_str(""), "TypeError"),
        (JsValue::from_f64(5.0), "TypeError"),
        (JsValue::NULL, "TypeError"),
        (js_sys::Object::new().into(), "TypeError"),
        (lone.into(), "TypeError"),
        (JsValue::from_str(&"x".repeat(513)), "RangeError"),
    ];
    for (value, name) in cases {
        let error: js_sys::Error = key_from_js(&value, "key").unwrap_err().unchecked_into();
        assert_eq!(String::from(error.name()), name);
        assert!(String::from(error.message()).starts_with("keyturn: key "));
    }
    // U+FFFD itself is a fine key: only a lone surrogate is refused.
    assert!(key_from_js(&JsValue::from_str("\u{FFFD}"), "key").is_ok());
}

#[test]
fn the_binding_refuses_bad_options_with_the_right_error_class() {
    let host = js_sys::Object::new();
    let noop = js_sys::Function::new_no_args("");
    for name in ["start", "schedule", "timeout"] {
        js_sys::Reflect::set(&host, &name.into(), &noop).unwrap();
    }
    let options = |json: &str| js_sys::JSON::parse(json).unwrap();
    let cases = [
        (options(r#"{"timeoutMs": 0}"#), "RangeError"),
        (options(r#"{"timeoutMs": 2147483648}"#), "RangeError"),
        (options(r#"{"timeoutMs": "5"}"#), "TypeError"),
        (JsValue::NULL, "TypeError"),
        (JsValue::from_f64(3.0), "TypeError"),
    ];
    for (value, name) in cases {
        let error: js_sys::Error = KeyedSerializerCore::new(value, host.clone().into())
            .unwrap_err()
            .unchecked_into();
        assert_eq!(String::from(error.name()), name);
    }
    assert!(KeyedSerializerCore::new(JsValue::UNDEFINED, host.clone().into()).is_ok());
    assert!(KeyedSerializerCore::new(options(r#"{"timeoutMs": 1.5}"#), host.into()).is_ok());
    assert!(KeyedSerializerCore::new(JsValue::UNDEFINED, JsValue::UNDEFINED).is_err());
}

#[test]
async fn rust_lock_api_on_real_timers_and_crypto() {
    use keyturn::clock::WallClock;
    use keyturn::random::PlatformRandom;
    use keyturn::{acquire_lock, LockManager, LockOptions, MemoryStore};

    let store = Rc::new(MemoryStore::new());
    let first = acquire_lock(store.clone(), "board", LockOptions::default())
        .await
        .unwrap()
        .expect("free");
    assert_eq!(first.token().len(), 32);
    let busy = LockOptions {
        wait_ms: 30.0,
        ..LockOptions::default()
    };
    let started = js_sys::Date::now();
    assert!(acquire_lock(store.clone(), "board", busy)
        .await
        .unwrap()
        .is_none());
    assert!(
        js_sys::Date::now() - started >= 29.0,
        "waited on real timers"
    );
    first.release().await.unwrap();

    let manager = LockManager::new(store.clone(), WallClock, PlatformRandom);
    let second = manager
        .acquire("board", LockOptions::default())
        .await
        .unwrap()
        .expect("released");
    assert_eq!(second.fence(), 2);
    assert_ne!(second.token(), first.token());
    second.release().await.unwrap();
}
