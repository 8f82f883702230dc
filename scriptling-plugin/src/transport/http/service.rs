//! One HTTP request: checks in order of cost (path, method, token, headers)
//! before the body is read at all, then the body, then the dispatcher.

use std::sync::Arc;
use std::time::Duration;

use http_body_util::{BodyExt, Full, LengthLimitError, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::header::{self, HeaderMap, HeaderValue};
use hyper::{Method as HttpMethod, Request, Response, StatusCode};
use serde_json::value::RawValue;
use tokio::sync::oneshot;

use crate::rpc::{self, ErrorCode, Frame as Parsed, Message, Method, RpcError};
use crate::runtime::batch::Batch;
use crate::runtime::dispatch::{self, Dispatcher, Incoming as Call};
use crate::runtime::done::{Done, Outcome};
use crate::runtime::teardown;
use crate::support::lock;
use crate::transport::http::config::{HttpConfig, MAX_CLIENT_ID_BYTES};

/// The header by which an HTTP client claims the objects it creates.
pub const CLIENT_HEADER: &str = "x-scriptling-client";

pub(crate) type Reply = Response<Full<Bytes>>;

/// Answers the requests of every connection.
pub(crate) struct Service {
    pub(crate) dispatcher: Arc<Dispatcher>,
    pub(crate) config: HttpConfig,
}

impl Service {
    pub(crate) async fn handle(&self, req: Request<Incoming>) -> Reply {
        let config = &self.config;
        if req.uri().path() != config.path {
            let body = format!("not found; the endpoint is {}\n", config.path);
            return reply(StatusCode::NOT_FOUND, Some("text/plain"), body.into_bytes());
        }
        if req.method() != HttpMethod::POST {
            let mut r = reply(StatusCode::METHOD_NOT_ALLOWED, Some("text/plain"), b"use POST\n".to_vec());
            r.headers_mut().insert(header::ALLOW, HeaderValue::from_static("POST"));
            return r;
        }
        // Nothing about a request that fails authentication is looked at
        // further: its body is never read.
        if let Some(token) = &config.token {
            if !authorized(req.headers(), token) {
                return rpc_error(StatusCode::UNAUTHORIZED, ErrorCode::AuthenticationFailed, "authentication failed");
            }
        }
        let owner = match client_id(req.headers()) {
            Ok(owner) => owner,
            Err(reply) => return reply,
        };
        let max = config.max_body_bytes;
        let declared = req.headers().get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
        if declared.is_some_and(|len| len > max as u64) {
            return too_large(max);
        }
        if let Some(ct) = req.headers().get(header::CONTENT_TYPE) {
            let ct = String::from_utf8_lossy(ct.as_bytes()).to_ascii_lowercase();
            if !ct.starts_with("application/json") {
                let message = format!("parse error: the body must be JSON (Content-Type: application/json), got {ct}");
                return rpc_error(StatusCode::OK, ErrorCode::ParseError, message);
            }
        }
        let body = match tokio::time::timeout(config.body_timeout, Limited::new(req.into_body(), max).collect()).await {
            Ok(Ok(collected)) => collected.to_bytes(),
            Ok(Err(e)) if e.downcast_ref::<LengthLimitError>().is_some() => return too_large(max),
            Ok(Err(e)) => {
                let message = format!("cannot read the request body: {e}");
                return rpc_error(StatusCode::BAD_REQUEST, ErrorCode::ParseError, message);
            }
            Err(_) => {
                let message = format!("the request body did not arrive within {:?}", config.body_timeout);
                return rpc_error(StatusCode::REQUEST_TIMEOUT, ErrorCode::InvalidRequest, message);
            }
        };
        match self.answer(body, owner).await {
            Some(body) => reply(StatusCode::OK, Some("application/json"), body),
            None => reply(StatusCode::NO_CONTENT, None, Vec::new()),
        }
    }

    /// The answer to a body holding one request or a batch: the response
    /// body, or `None` when only notifications were sent.
    async fn answer(&self, body: Bytes, owner: Option<Arc<str>>) -> Option<Vec<u8>> {
        let frame = dispatch::Bytes::Whole(Arc::new(body));
        let max_batch = self.dispatcher.core().options.max_batch_len;
        let (tx, rx) = oneshot::channel();
        match rpc::parse_frame(frame.as_ref(), max_batch) {
            Parsed::Single(Message::Request(request)) => {
                let id = request.id.map(ToOwned::to_owned);
                let call = Call::new(request, frame.as_ref(), || frame.clone());
                let done: Done = match id {
                    Some(id) => Done::new(move |outcome: Outcome| {
                        let mut out = Vec::new();
                        match outcome {
                            Ok(result) => rpc::write_encoded(&mut out, &id, &result),
                            Err(error) => rpc::write_error(&mut out, Some(&id), &error),
                        }
                        let _ = tx.send(Some(out));
                    }),
                    None => Done::new(move |_| drop(tx.send(None))),
                };
                self.run(call, owner, done);
            }
            // HTTP carries none of the plugin's own requests, so there is no
            // answer to route.
            Parsed::Single(Message::Response(_)) => return None,
            Parsed::Single(Message::Invalid(id, error)) => {
                let mut out = Vec::new();
                rpc::write_error(&mut out, id, &error);
                return Some(out);
            }
            Parsed::Batch(messages) => {
                let batch = Batch::new(Box::new(move |array| drop(tx.send(array))));
                for message in messages {
                    match message {
                        Message::Request(request) => {
                            let done = batch.element(request.id.map(ToOwned::to_owned));
                            self.run(Call::new(request, frame.as_ref(), || frame.clone()), owner.clone(), done);
                        }
                        Message::Response(_) => {}
                        Message::Invalid(id, error) => {
                            let id = id.map_or_else(null_id, ToOwned::to_owned);
                            batch.element(Some(id)).send(Err(error));
                        }
                    }
                }
                batch.seal();
            }
        }
        rx.await.unwrap_or(None)
    }

    /// Runs one request (a batch element, or a whole body) under the
    /// request timeout, which answers it with its own id.
    fn run(&self, call: Call, owner: Option<Arc<str>>, done: Done) {
        let done = match self.config.timeout {
            Some(limit) => with_deadline(done, limit, call.method.name().to_owned()),
            None => done,
        };
        if call.method == Method::Shutdown {
            return self.shutdown(owner, done);
        }
        self.dispatcher.dispatch(call, owner, done);
    }

    /// `plugin.shutdown` stops nothing over HTTP: the server serves other
    /// clients. It releases the objects of the client that sent it, if it
    /// named itself with `X-Scriptling-Client`.
    fn shutdown(&self, owner: Option<Arc<str>>, done: Done) {
        let Some(owner) = owner else { return done.send(Ok(b"null".to_vec().into())) };
        let mine = self.dispatcher.link().objects.drain_owned_by(&owner);
        let link = Arc::clone(self.dispatcher.link());
        let deadline = std::time::Instant::now().checked_add(self.dispatcher.core().options.shutdown_grace);
        tokio::task::spawn_blocking(move || {
            // Answered within the grace, whatever the hooks do.
            if let Err(overran) = teardown::release_within(&link, mine, "plugin.shutdown", deadline) {
                eprintln!("scriptling-plugin: {overran}; answering plugin.shutdown without waiting for it");
            }
            done.send(Ok(b"null".to_vec().into()));
        });
    }
}

/// Races `done` against `limit`: whichever comes first answers.
fn with_deadline(done: Done, limit: Duration, method: String) -> Done {
    let slot = Arc::new(std::sync::Mutex::new(Some(done)));
    let timer = {
        let slot = Arc::clone(&slot);
        tokio::spawn(async move {
            tokio::time::sleep(limit).await;
            if let Some(done) = lock(&slot).take() {
                let message = format!("{method}: the request did not finish within {limit:?}");
                done.send(Err(RpcError::application(message)));
            }
        })
    };
    Done::new(move |outcome| {
        timer.abort();
        if let Some(done) = lock(&slot).take() {
            done.send(outcome);
        }
    })
}

/// `Authorization: Bearer <token>`, the scheme in any case (RFC 7235),
/// compared in constant time.
fn authorized(headers: &HeaderMap, token: &str) -> bool {
    let given = headers.get(header::AUTHORIZATION).map_or(&[][..], HeaderValue::as_bytes);
    let (scheme, credentials) = given.split_at(given.len().min(7));
    scheme.eq_ignore_ascii_case(b"bearer ") & crate::support::constant_time_eq(credentials, token.as_bytes())
}

/// The client's id from its `X-Scriptling-Client` header, bounded in length.
#[allow(clippy::result_large_err)]
fn client_id(headers: &HeaderMap) -> Result<Option<Arc<str>>, Reply> {
    let Some(value) = headers.get(CLIENT_HEADER) else { return Ok(None) };
    if value.len() > MAX_CLIENT_ID_BYTES {
        let message = format!("invalid request: {CLIENT_HEADER} is longer than {MAX_CLIENT_ID_BYTES} bytes");
        return Err(rpc_error(StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE, ErrorCode::InvalidRequest, message));
    }
    Ok(Some(String::from_utf8_lossy(value.as_bytes()).into()))
}

fn null_id() -> Box<RawValue> {
    RawValue::from_string("null".to_owned()).expect("null is JSON")
}

pub(crate) fn reply(status: StatusCode, content_type: Option<&'static str>, body: Vec<u8>) -> Reply {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    if let Some(ct) = content_type {
        response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(ct));
    }
    response
}

fn rpc_error(status: StatusCode, code: ErrorCode, message: impl Into<String>) -> Reply {
    let mut body = Vec::new();
    rpc::write_error(&mut body, None, &RpcError::new(code, message));
    reply(status, Some("application/json"), body)
}

fn too_large(max: usize) -> Reply {
    rpc_error(
        StatusCode::PAYLOAD_TOO_LARGE,
        ErrorCode::InvalidRequest,
        format!("invalid request: the body exceeds the limit of {max} bytes"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(auth: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::AUTHORIZATION, HeaderValue::from_str(auth).unwrap());
        h
    }

    #[test]
    fn the_bearer_scheme_is_case_insensitive_the_token_is_not() {
        for ok in ["Bearer abc", "bearer abc", "BEARER abc", "bEaReR abc"] {
            assert!(authorized(&headers(ok), "abc"), "{ok}");
        }
        for bad in ["Bearer abd", "Bearer ABC", "Bearer ab", "Basic abc", "Bearerabc", "abc", ""] {
            assert!(!authorized(&headers(bad), "abc"), "{bad}");
        }
        assert!(!authorized(&HeaderMap::new(), "abc"));
    }

    #[test]
    fn client_ids_are_bounded() {
        let mut h = HeaderMap::new();
        assert_eq!(client_id(&h).unwrap(), None);
        h.insert(CLIENT_HEADER, HeaderValue::from_static("script-1"));
        assert_eq!(client_id(&h).unwrap().as_deref(), Some("script-1"));
        h.insert(CLIENT_HEADER, HeaderValue::from_str(&"x".repeat(MAX_CLIENT_ID_BYTES + 1)).unwrap());
        assert_eq!(client_id(&h).unwrap_err().status(), StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE);
    }
}
