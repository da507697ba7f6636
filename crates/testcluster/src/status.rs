//! Kubernetes `Status` error bodies: kube-rs turns any 4xx/5xx into `Error::Api(Status)` only when
//! the body is this JSON, so every error path (the router fallback included) answers with one.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

/// An API error answered as a JSON `Status`.
#[derive(Debug, Clone)]
pub struct ApiError {
    pub code: u16,
    pub reason: String,
    pub message: String,
    pub details: Option<Value>,
    pub retry_after: Option<u32>,
}

impl ApiError {
    pub fn new(code: u16, reason: &str, message: impl Into<String>) -> Self {
        ApiError {
            code,
            reason: reason.to_string(),
            message: message.into(),
            details: None,
            retry_after: None,
        }
    }

    pub fn not_found(kind: &str, name: &str) -> Self {
        let mut e = Self::new(404, "NotFound", format!("{kind} \"{name}\" not found"));
        e.details = Some(json!({"name": name, "kind": kind}));
        e
    }

    pub fn already_exists(kind: &str, name: &str) -> Self {
        let mut e = Self::new(409, "AlreadyExists", format!("{kind} \"{name}\" already exists"));
        e.details = Some(json!({"name": name, "kind": kind}));
        e
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    pub fn invalid(kind: &str, name: &str, message: impl std::fmt::Display) -> Self {
        let mut e = Self::new(422, "Invalid", format!("{kind} \"{name}\" is invalid: {message}"));
        e.details = Some(json!({"name": name, "kind": kind}));
        e
    }

    /// The reason Kubernetes uses for an HTTP status, for injected faults.
    pub fn for_code(code: u16) -> Self {
        let (reason, message) = match code {
            400 => ("BadRequest", "the server rejected our request"),
            401 => ("Unauthorized", "Unauthorized"),
            403 => ("Forbidden", "forbidden by the emulated cluster"),
            404 => ("NotFound", "the server could not find the requested resource"),
            409 => (
                "Conflict",
                "Operation cannot be fulfilled: the object has been modified; please apply your changes to the latest version and try again",
            ),
            410 => ("Expired", "too old resource version"),
            422 => ("Invalid", "the request is invalid"),
            429 => (
                "TooManyRequests",
                "the server has received too many requests and has asked us to try again later",
            ),
            503 => (
                "ServiceUnavailable",
                "the server is currently unable to handle the request",
            ),
            504 => (
                "Timeout",
                "the server was unable to return a response in the time allotted",
            ),
            _ => (
                "InternalError",
                "an error on the server (injected fault) has prevented the request from succeeding",
            ),
        };
        Self::new(code, reason, message)
    }

    pub fn body(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if let Some(details) = &self.details {
            status["details"] = details.clone();
        }
        status
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let code = StatusCode::from_u16(self.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut response = (code, axum::Json(self.body())).into_response();
        if let Some(seconds) = self.retry_after {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        response
    }
}

/// The object a watch stream sends before closing when the requested version is gone.
pub fn expired_event(requested: u64, oldest: u64) -> Value {
    json!({"type": "ERROR", "object": {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": format!("too old resource version: {requested} ({oldest})"),
        "reason": "Expired", "code": 410,
    }})
}
