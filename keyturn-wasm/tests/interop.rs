//! The binding's conversions (`src/interop.rs`), natively: each effect's kind and the register
//! fields it fills, the answers from the JS, the refusal codes.

use keyturn::engine::{Answer, Effect, StoreCall, Ticket};
use keyturn::{KeyError, OptionError};
use keyturn_wasm::interop::{self, key_refusal, load, option_refusal, Details, Register};
use keyturn_wasm::wire::{answer, effect, field, refused};
#[test]
fn an_effect_fills_the_fields_its_kind_names_and_says_whether_more_wait() {
    let mut register: Register = [f64::NAN; field::LEN];
    let mut details: Details<u32> = Details::default();
    let start = Effect::Start {
        handle: 7,
        slot: 2,
        fence: 99,
        deadline: 1_000.5,
        report: true,
    };
    let kind = load(&mut register, &mut details, Some(start), true);
    assert_eq!(kind, effect::START);
    let at = |f: f64| register[f as usize];
    assert_eq!(
        (at(field::MORE), at(field::HANDLE), at(field::SLOT)),
        (1.0, 7.0, 2.0)
    );
    assert_eq!(
        (at(field::FENCE), at(field::AT), at(field::REPORT)),
        (99.0, 1_000.5, 1.0)
    );
    let store = Effect::Store {
        op: Ticket::new(3, 5),
        owner: None,
        key: "k".into(),
        call: StoreCall::Replace {
            version: 4,
            value: "{}".into(),
        },
    };
    let kind = load(&mut register, &mut details, Some(store), false);
    assert_eq!(kind, effect::STORE);
    assert_eq!(register[field::HANDLE as usize], -1.0, "made for nobody");
    assert_eq!(register[field::MORE as usize], 0.0);
    assert_eq!(
        (details.key.as_deref(), details.record.as_str()),
        (Some("k"), "{}")
    );
    assert_eq!(details.version, Some(4));
    assert_eq!(load(&mut register, &mut details, None, false), effect::NONE);
}

#[test]
fn answers_and_refusals_keep_their_meaning() {
    assert!(matches!(
        interop::answer(answer::CREATED, Some(1)),
        Answer::Created(Some(1))
    ));
    assert!(matches!(
        interop::answer::<u32>(answer::CHANGED, None),
        Answer::Changed
    ));
    assert!(matches!(interop::answer::<u32>(99.0, None), Answer::Failed));
    assert_eq!(key_refusal(KeyError::Empty), refused::KEY_EMPTY);
    assert_eq!(
        option_refusal(OptionError::StaleMs(3e9)),
        refused::BAD_STALE
    );
}
