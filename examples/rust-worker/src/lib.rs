//! The example board as a Rust worker on workers-rs: a lane that allows 3 cards in progress.
//!
//!   POST /boards/:board/claims  {"card": "<id>"} → 201 {card, fence} | 409 | 503 + Retry-After
//!   GET  /boards/:board         → the board
//!
//! Claims on one board are serialized across every isolate by keyturn's [`StoreSerializer`]:
//! each claim's turn holds the board's lease in a Durable Object lock store — [`DoStore`],
//! keyturn's `LockStore` trait implemented here in Rust over [`LockObject`] — and writes the
//! board to R2 with the turn's fence and a conditional put on the etag it read.

use std::cell::RefCell;
use std::rc::Rc;

use keyturn::{
    LockManager, LockOptions, LockStore, PlatformRandom, SerializeError, SerializerOptions,
    StoreError, StoreSerializer, Versioned, WallClock,
};
use serde::{Deserialize, Serialize};
use worker::*;

const LANE_LIMIT: usize = 3;

/// One store call, as the lock object takes it.
#[derive(Serialize, Deserialize)]
struct Call {
    op: String,
    key: String,
    value: Option<String>,
    version: Option<String>,
}

/// Its answer: the new or current version (none: refused, or no record) and the record.
#[derive(Serialize, Deserialize, Default)]
struct Answer {
    version: Option<String>,
    value: Option<String>,
}

/// A lock record and its version, as a lock object stores it.
#[derive(Serialize, Deserialize)]
struct Stored {
    value: String,
    /// Counts the writes of this record: never reused, so it is a version.
    writes: u64,
}

/// keyturn's `LockStore` over Durable Objects: each lock name is routed to its own
/// [`LockObject`], whose storage makes create-if-absent and compare-and-set atomic.
struct DoStore {
    namespace: ObjectNamespace,
}

impl DoStore {
    async fn call(&self, call: Call) -> std::result::Result<Answer, StoreError> {
        let exchange = async {
            // A stub per call: a stub belongs to the request that made it.
            let stub = self.namespace.id_from_name(&call.key)?.get_stub()?;
            let mut init = RequestInit::new();
            init.with_method(Method::Post)
                .with_body(Some(serde_json::to_string(&call)?.into()));
            let request = Request::new_with_init("https://lock/", &init)?;
            let mut response = stub.fetch_with_request(request).await?;
            response.json::<Answer>().await
        };
        exchange
            .await
            .map_err(|error| StoreError::new(error.to_string()))
    }
}

impl LockStore for DoStore {
    type Version = String;

    async fn create(
        &self,
        key: &str,
        value: &str,
    ) -> std::result::Result<Option<String>, StoreError> {
        let call = Call {
            op: "create".into(),
            key: key.into(),
            value: Some(value.into()),
            version: None,
        };
        Ok(self.call(call).await?.version)
    }

    async fn read(&self, key: &str) -> std::result::Result<Option<Versioned>, StoreError> {
        let call = Call {
            op: "read".into(),
            key: key.into(),
            value: None,
            version: None,
        };
        let answer = self.call(call).await?;
        Ok(answer
            .version
            .zip(answer.value)
            .map(|(version, value)| Versioned { value, version }))
    }

    async fn replace(
        &self,
        key: &str,
        version: &String,
        value: &str,
    ) -> std::result::Result<Option<String>, StoreError> {
        let call = Call {
            op: "replace".into(),
            key: key.into(),
            value: Some(value.into()),
            version: Some(version.clone()),
        };
        Ok(self.call(call).await?.version)
    }
}

/// Holds one lock record. Its storage calls follow each other with no other await between
/// them, so the object's input gate makes each create or CAS atomic.
#[durable_object]
pub struct LockObject {
    state: State,
}

impl DurableObject for LockObject {
    fn new(state: State, _env: Env) -> Self {
        LockObject { state }
    }

    async fn fetch(&self, mut req: Request) -> Result<Response> {
        let call: Call = req.json().await?;
        let storage = self.state.storage();
        let current: Option<Stored> = storage.get("record").await?;
        let version = |stored: &Stored| stored.writes.to_string();
        let answer = match (call.op.as_str(), current, call.value) {
            ("read", Some(stored), _) => Answer {
                version: Some(version(&stored)),
                value: Some(stored.value),
            },
            ("create", None, Some(value)) => {
                let stored = Stored { value, writes: 1 };
                storage.put("record", &stored).await?;
                Answer {
                    version: Some(version(&stored)),
                    value: None,
                }
            }
            ("replace", Some(old), Some(value)) if call.version == Some(version(&old)) => {
                let stored = Stored {
                    value,
                    writes: old.writes + 1,
                };
                storage.put("record", &stored).await?;
                Answer {
                    version: Some(version(&stored)),
                    value: None,
                }
            }
            ("read" | "create" | "replace", _, _) => Answer::default(),
            _ => return Response::error("unknown store call", 400),
        };
        Response::from_json(&answer)
    }
}

type Claims = StoreSerializer<DoStore, WallClock, PlatformRandom>;

thread_local! {
    /// The isolate's serializer: every request of this isolate queues its claims here, so the
    /// board's lease passes from one claim to the next without a store call.
    static CLAIMS: RefCell<Option<Rc<Claims>>> = const { RefCell::new(None) };
}

fn claims(env: &Env) -> Result<Rc<Claims>> {
    if let Some(claims) = CLAIMS.with(|claims| claims.borrow().clone()) {
        return Ok(claims);
    }
    let store = DoStore {
        namespace: env.durable_object("LOCKS")?,
    };
    let locks = LockManager::new(store, WallClock, PlatformRandom::default());
    let options = SerializerOptions::new(20_000.0, f64::INFINITY)
        .map_err(|error| Error::RustError(error.to_string()))?;
    let claims = Rc::new(
        StoreSerializer::new(
            options,
            LockOptions {
                stale_ms: 2_000.0,
                ..LockOptions::default()
            },
            locks,
        )
        .map_err(|error| Error::RustError(error.to_string()))?,
    );
    CLAIMS.with(|slot| *slot.borrow_mut() = Some(claims.clone()));
    Ok(claims)
}

#[derive(Serialize, Deserialize, Clone)]
struct Board {
    id: String,
    #[serde(rename = "inProgress")]
    in_progress: Vec<String>,
    fence: u64,
}

#[derive(Deserialize)]
struct ClaimBody {
    card: String,
}

fn board_key(board: &str) -> String {
    format!("boards/{board}.json")
}

/// The board and its etag (none before its first write).
async fn read_board(bucket: &Bucket, board: &str) -> Result<(Board, Option<String>)> {
    match bucket.get(board_key(board)).execute().await? {
        Some(object) => {
            let etag = object.etag();
            let text = match object.body() {
                Some(body) => body.text().await?,
                None => return Err(Error::RustError("the board has no body".into())),
            };
            Ok((serde_json::from_str(&text)?, Some(etag)))
        }
        None => Ok((
            Board {
                id: board.into(),
                in_progress: Vec::new(),
                fence: 0,
            },
            None,
        )),
    }
}

/// One claim, in its turn: 201, 200 (already in progress) or 409.
async fn claim_in_turn(
    bucket: &Bucket,
    board: &str,
    card: &str,
    fence: u64,
) -> Result<(u16, serde_json::Value)> {
    let (mut state, etag) = read_board(bucket, board).await?;
    if state.in_progress.iter().any(|held| held == card) {
        return Ok((
            200,
            serde_json::json!({ "card": card, "fence": fence, "already": true }),
        ));
    }
    if state.in_progress.len() >= LANE_LIMIT || fence < state.fence {
        return Ok((
            409,
            serde_json::json!({ "error": "the lane is full", "limit": LANE_LIMIT }),
        ));
    }
    state.in_progress.push(card.into());
    state.fence = fence;
    let only_if = Conditional {
        etag_matches: etag.clone(),
        etag_does_not_match: etag.is_none().then(|| "*".to_string()),
        uploaded_before: None,
        uploaded_after: None,
    };
    let written = bucket
        .put(board_key(board), serde_json::to_string(&state)?)
        .only_if(only_if)
        .execute()
        .await?;
    if written.is_none() {
        return Ok((
            409,
            serde_json::json!({ "error": "the board was written by a newer turn" }),
        ));
    }
    Ok((201, serde_json::json!({ "card": card, "fence": fence })))
}

fn json(status: u16, body: &serde_json::Value) -> Result<Response> {
    Ok(Response::from_json(body)?.with_status(status))
}

async fn claim_route(mut req: Request, env: Env, board: String) -> Result<Response> {
    let Ok(body) = req.json::<ClaimBody>().await else {
        return json(
            400,
            &serde_json::json!({ "error": "expected {\"card\": string}" }),
        );
    };
    let bucket = env.bucket("BUCKET")?;
    let claims = claims(&env)?;
    let key = format!("board:{board}");
    let turn = claims
        .run(&key, |_signal, fence| async move {
            claim_in_turn(&bucket, &board, &body.card, fence).await
        })
        .await;
    match turn {
        Ok(Ok((status, body))) => json(status, &body),
        Ok(Err(error)) => json(500, &serde_json::json!({ "error": error.to_string() })),
        Err(error @ (SerializeError::TimedOut { .. } | SerializeError::Lock(_))) => {
            let mut response = json(503, &serde_json::json!({ "error": error.to_string() }))?;
            response.headers_mut().set("retry-after", "1")?;
            Ok(response)
        }
        Err(error) => json(400, &serde_json::json!({ "error": error.to_string() })),
    }
}

#[event(fetch)]
async fn fetch(req: Request, env: Env, _ctx: Context) -> Result<Response> {
    let path = req.path();
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    match (req.method(), parts.as_slice()) {
        (Method::Post, ["boards", board, "claims"]) => {
            let board = board.to_string();
            claim_route(req, env, board).await
        }
        (Method::Get, ["boards", board]) => {
            let (state, _) = read_board(&env.bucket("BUCKET")?, board).await?;
            Response::from_json(&state)
        }
        _ => json(404, &serde_json::json!({ "error": "no such route" })),
    }
}
