//! A fake OpenAI-compatible LLM server to stand behind the proxy: `POST /v1/chat/completions`
//! and `POST /v1/completions`, answered as JSON or, with `"stream": true`, as server-sent
//! events (`chat.completion.chunk` / `text_completion` chunks, a final usage chunk when the
//! request sets `stream_options.include_usage`, as OpenAI does, then `data: [DONE]`).
//!
//! It generates tokens as a continuous-batching server does: every `step` it admits waiting
//! sequences, oldest first, while fewer than `batch` run, then gives every running sequence
//! one token. A request asks for `max_tokens` output tokens (default 16) and always gets
//! exactly that many (the benchmark clients' `ignore_eos`); its prompt counts
//! ⌈characters / 4⌉ tokens (the `messages`' contents, or `prompt`). A sequence whose client
//! went away (its response body dropped) leaves the batch at the next step. No model, no
//! text: each token is the word `tok`.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::channel::Channel;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use serde_json::{json, Value};
use tokio::net::TcpListener;
use tokio::sync::mpsc;

/// How fast the fake model is.
#[derive(Clone, Copy, Debug)]
pub struct Model {
    /// One decoding step: every running sequence gets one token.
    pub step: Duration,
    /// At most this many sequences run at once (continuous batching).
    pub batch: usize,
}

/// Counters of an [`OpenAiServer`].
#[derive(Debug, Default)]
pub struct OpenAiCounters {
    /// Requests received.
    pub requests: AtomicU64,
    /// Sequences running now.
    pub running: AtomicU64,
    /// Most sequences running at once.
    pub max_running: AtomicU64,
    /// Output tokens generated.
    pub tokens: AtomicU64,
    /// Sequences dropped from the batch because their client went away.
    pub abandoned: AtomicU64,
}

/// A running fake server.
pub struct OpenAiServer {
    addr: SocketAddr,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    /// Its counters.
    pub counters: Arc<OpenAiCounters>,
}

impl OpenAiServer {
    /// Serve on `addr` (port 0 picks one).
    pub async fn start(addr: SocketAddr, model: Model) -> std::io::Result<OpenAiServer> {
        let listener = TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let counters = Arc::new(OpenAiCounters::default());
        let engine = Arc::new(Mutex::new(Engine::default()));
        let stepper = tokio::spawn(run_steps(engine.clone(), model, counters.clone()));
        let c = counters.clone();
        let answer = move |req| respond(req, engine.clone(), c.clone());
        let server = tokio::spawn(crate::upstream::serve(listener, answer));
        Ok(OpenAiServer {
            addr,
            tasks: vec![stepper, server],
            counters,
        })
    }

    /// Its address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for OpenAiServer {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// One sequence: tokens left to generate, and where they go.
struct Seq {
    left: u64,
    out: mpsc::UnboundedSender<Token>,
}

/// What the engine sends a request's handler.
enum Token {
    /// One output token.
    One,
    /// The sequence is complete.
    Done,
}

#[derive(Default)]
struct Engine {
    waiting: VecDeque<Seq>,
    running: Vec<Seq>,
}

/// The decoding loop: admit, then one token for every running sequence, every step.
async fn run_steps(engine: Arc<Mutex<Engine>>, model: Model, c: Arc<OpenAiCounters>) {
    let mut tick = tokio::time::interval(model.step);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let mut e = engine.lock().unwrap_or_else(|e| e.into_inner());
        let e = &mut *e;
        while e.running.len() < model.batch.max(1) {
            match e.waiting.pop_front() {
                Some(s) if !s.out.is_closed() => e.running.push(s),
                Some(_) => {
                    c.abandoned.fetch_add(1, Relaxed);
                }
                None => break,
            }
        }
        e.running.retain_mut(|s| {
            if s.out.send(Token::One).is_err() {
                c.abandoned.fetch_add(1, Relaxed);
                return false;
            }
            c.tokens.fetch_add(1, Relaxed);
            s.left -= 1;
            if s.left == 0 {
                let _ = s.out.send(Token::Done);
            }
            s.left > 0
        });
        let n = e.running.len() as u64;
        c.running.store(n, Relaxed);
        c.max_running.fetch_max(n, Relaxed);
    }
}

/// What a request asked for.
struct Ask {
    chat: bool,
    model: String,
    prompt_tokens: u64,
    max_tokens: u64,
    stream: bool,
    include_usage: bool,
}

impl Ask {
    fn parse(chat: bool, body: &[u8]) -> Result<Ask, String> {
        let v: Value = serde_json::from_slice(body).map_err(|e| format!("bad JSON: {e}"))?;
        let chars = if chat {
            let msgs = v["messages"]
                .as_array()
                .ok_or("messages: expected an array")?;
            msgs.iter()
                .map(|m| m["content"].as_str().map_or(0, str::len))
                .sum::<usize>()
        } else {
            match &v["prompt"] {
                Value::String(s) => s.len(),
                _ => return Err("prompt: expected a string".into()),
            }
        };
        let max_tokens = match &v["max_tokens"] {
            Value::Null => 16,
            m => m
                .as_u64()
                .filter(|&m| m >= 1)
                .ok_or("max_tokens: expected an integer ≥ 1")?,
        };
        Ok(Ask {
            chat,
            model: v["model"].as_str().unwrap_or("fake").to_string(),
            prompt_tokens: (chars as u64).div_ceil(4),
            max_tokens,
            stream: v["stream"].as_bool().unwrap_or(false),
            include_usage: v["stream_options"]["include_usage"]
                .as_bool()
                .unwrap_or(false),
        })
    }

    fn usage(&self) -> Value {
        json!({
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.max_tokens,
            "total_tokens": self.prompt_tokens + self.max_tokens,
        })
    }

    /// One streamed chunk: a token (`Some`), or the last choice with its finish reason.
    fn chunk(&self, token: Option<&str>, first: bool) -> Value {
        let finish = if token.is_some() {
            None
        } else {
            Some("length")
        };
        let choice = if self.chat {
            let mut delta = json!({});
            if first {
                delta["role"] = json!("assistant");
            }
            if let Some(t) = token {
                delta["content"] = json!(t);
            }
            json!({"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish})
        } else {
            json!({"index": 0, "text": token.unwrap_or(""), "logprobs": null, "finish_reason": finish})
        };
        let mut c = self.envelope(true);
        c["choices"] = json!([choice]);
        if self.include_usage {
            c["usage"] = Value::Null;
        }
        c
    }

    fn envelope(&self, chunk: bool) -> Value {
        let object = match (self.chat, chunk) {
            (true, true) => "chat.completion.chunk",
            (true, false) => "chat.completion",
            (false, _) => "text_completion",
        };
        json!({"id": "fake-1", "object": object, "created": 0, "model": self.model})
    }

    /// The whole answer of a request that is not streamed.
    fn complete(&self) -> Value {
        let text = vec!["tok"; self.max_tokens as usize].join(" ");
        let choice = if self.chat {
            json!({"index": 0, "message": {"role": "assistant", "content": text},
                   "logprobs": null, "finish_reason": "length"})
        } else {
            json!({"index": 0, "text": text, "logprobs": null, "finish_reason": "length"})
        };
        let mut v = self.envelope(false);
        v["choices"] = json!([choice]);
        v["usage"] = self.usage();
        v
    }
}

type ReplyBody = http_body_util::Either<http_body_util::Full<Bytes>, Channel<Bytes>>;
type Reply = Response<ReplyBody>;

fn reply(status: StatusCode, content_type: &'static str, body: ReplyBody) -> Reply {
    let mut r = Response::new(body);
    *r.status_mut() = status;
    let h = r.headers_mut();
    h.insert("content-type", http::HeaderValue::from_static(content_type));
    h.insert("cache-control", http::HeaderValue::from_static("no-cache"));
    r
}

fn answer(status: StatusCode, content_type: &'static str, body: Vec<u8>) -> Reply {
    reply(
        status,
        content_type,
        http_body_util::Either::Left(body.into()),
    )
}

async fn respond(
    req: Request<Incoming>,
    engine: Arc<Mutex<Engine>>,
    c: Arc<OpenAiCounters>,
) -> Result<Reply, Infallible> {
    c.requests.fetch_add(1, Relaxed);
    let chat = match req.uri().path() {
        "/v1/chat/completions" => true,
        "/v1/completions" => false,
        p => {
            let msg = format!("{{\"error\":{{\"message\":\"no route {p}\"}}}}");
            return Ok(answer(
                StatusCode::NOT_FOUND,
                "application/json",
                msg.into(),
            ));
        }
    };
    let body = req.into_body().collect().await.map(|b| b.to_bytes());
    let ask = match body
        .map_err(|e| e.to_string())
        .and_then(|b| Ask::parse(chat, &b))
    {
        Ok(a) => a,
        Err(e) => {
            let msg = json!({"error": {"message": e, "type": "invalid_request_error"}});
            let body = msg.to_string().into_bytes();
            return Ok(answer(StatusCode::BAD_REQUEST, "application/json", body));
        }
    };
    let (tx, mut tokens) = mpsc::unbounded_channel();
    {
        let mut e = engine.lock().unwrap_or_else(|e| e.into_inner());
        e.waiting.push_back(Seq {
            left: ask.max_tokens,
            out: tx,
        });
    }
    if !ask.stream {
        while let Some(Token::One) = tokens.recv().await {}
        let body = ask.complete().to_string().into_bytes();
        return Ok(answer(StatusCode::OK, "application/json", body));
    }
    let (mut out, rx) = Channel::<Bytes>::new(64);
    tokio::spawn(async move {
        let event = |v: Value| Bytes::from(format!("data: {v}\n\n"));
        let mut first = true;
        while let Some(Token::One) = tokens.recv().await {
            if out
                .send_data(event(ask.chunk(Some("tok "), first)))
                .await
                .is_err()
            {
                return; // the client went away: the engine sees `tokens` closed
            }
            first = false;
        }
        let _ = out.send_data(event(ask.chunk(None, false))).await;
        if ask.include_usage {
            let mut u = ask.envelope(true);
            u["choices"] = json!([]);
            u["usage"] = ask.usage();
            let _ = out.send_data(event(u)).await;
        }
        let _ = out.send_data(Bytes::from_static(b"data: [DONE]\n\n")).await;
    });
    let body = http_body_util::Either::Right(rx);
    Ok(reply(StatusCode::OK, "text/event-stream", body))
}
