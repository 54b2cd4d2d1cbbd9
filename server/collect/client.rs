//! Posting evidence to the server: every item of a run in one batch request
//! (`POST …/evidence/batch`, base64 content, an `idempotency_key` each), or one raw-body POST per
//! item with an `Idempotency-Key` header against a server without the batch route; retries with
//! capped exponential backoff and full jitter on connection errors, 429 and 503. Any other answer
//! is final: a 4xx is never retried.

use std::time::Duration;

use base64::Engine;
use chrono::{DateTime, Utc};
use reqwest::{header, StatusCode};
use serde_json::Value;
use uuid::Uuid;

use crate::ids::{BriefId, TrialId};
use crate::secrets::Secret;

/// When and how often to try again.
#[derive(Debug, Clone, Copy)]
pub struct RetryPolicy {
    /// Attempts in all, the first included (at least 1).
    pub max_attempts: u32,
    /// The ceiling of the first backoff; it doubles each attempt.
    pub base: Duration,
    /// No computed backoff is longer than this.
    pub cap: Duration,
    /// A server's `Retry-After` is honoured up to this long, so no server can stall us forever.
    pub max_retry_after: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_attempts: 5,
            base: Duration::from_millis(200),
            cap: Duration::from_secs(10),
            max_retry_after: Duration::from_secs(60),
        }
    }
}

impl RetryPolicy {
    /// The wait before attempt `failed + 1`, after `failed` (≥ 1) failed attempts. `jitter` is a
    /// uniform draw from [0, 1): full jitter, i.e. anywhere from 0 to the exponential ceiling
    /// `min(cap, base · 2^(failed-1))`. A `Retry-After` from the server replaces the computed
    /// wait (clamped to `max_retry_after`).
    pub fn delay(&self, failed: u32, retry_after: Option<Duration>, jitter: f64) -> Duration {
        if let Some(ra) = retry_after {
            return ra.min(self.max_retry_after);
        }
        let exp = failed.saturating_sub(1).min(30);
        let ceiling = self.base.saturating_mul(1u32 << exp).min(self.cap);
        ceiling.mul_f64(jitter.clamp(0.0, 1.0))
    }
}

/// `Retry-After` as delay-seconds or an HTTP date; `None` when absent or unreadable.
pub fn parse_retry_after(value: &str, now: DateTime<Utc>) -> Option<Duration> {
    let v = value.trim();
    if let Ok(secs) = v.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let when = DateTime::parse_from_rfc2822(v).ok()?.with_timezone(&Utc);
    Some((when - now).to_std().unwrap_or(Duration::ZERO))
}

/// What the server said to an accepted upload (201, or 200 when replayed).
#[derive(Debug, Clone)]
pub struct Accepted {
    pub id: Option<Uuid>,
    pub replayed: bool,
    pub parse_status: String,
    pub parse_error: Option<String>,
    pub warnings: usize,
    pub attempts: u32,
}

/// Why an upload did not go through.
#[derive(Debug, Clone)]
pub struct Refused {
    /// The final HTTP status, when there was one.
    pub status: Option<StatusCode>,
    pub reason: String,
    pub attempts: u32,
}

impl Refused {
    /// 401, 403 and 404 are about the token or the brief, not this one upload: every other upload
    /// would get the same answer, so the run stops sending.
    pub fn stops_the_run(&self) -> bool {
        matches!(
            self.status,
            Some(StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN | StatusCode::NOT_FOUND)
        )
    }

    /// Why the run stopped, in words: the status for the refusals that stop it, else the reason.
    pub fn stop_reason(&self) -> String {
        match self.status.map(|s| s.as_u16()) {
            Some(401) => "the server refused the token (401)".into(),
            Some(403) => "the token may not send to this brief (403)".into(),
            Some(404) => "the server has no such brief (404)".into(),
            _ => self.reason.clone(),
        }
    }
}

/// One item to send.
pub struct Item<'a> {
    pub kind: &'a str,
    pub stage: u8,
    pub labels: &'a [(String, String)],
    pub content_type: &'a str,
    pub body: Vec<u8>,
    pub idempotency_key: &'a str,
}

/// Items per batch request, and the raw bytes one request carries at most (base64 and JSON add
/// about a third on the way; the server takes 16 MiB).
pub const BATCH_ITEMS: usize = 500;
pub const BATCH_RAW_BYTES: usize = 10 * 1024 * 1024;

/// What a batch request came to.
enum BatchSent {
    /// One answer per item, in order.
    Answered(Vec<Result<Accepted, Refused>>),
    /// The server has no batch route (an older rentcheck): send the items one by one.
    NoBatchRoute,
}

pub struct Client {
    http: reqwest::Client,
    endpoint: String,
    batch_endpoint: String,
    trial: Option<TrialId>,
    token: Secret,
    policy: RetryPolicy,
}

impl Client {
    pub fn new(
        server: &str,
        brief: BriefId,
        trial: Option<TrialId>,
        token: Secret,
        timeout: Duration,
        policy: RetryPolicy,
    ) -> anyhow::Result<Self> {
        let http = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout.min(Duration::from_secs(10)))
            .user_agent(concat!("rentcheck-collect/", env!("CARGO_PKG_VERSION")))
            .build()?;
        Ok(Self {
            http,
            batch_endpoint: format!("{}/api/v1/briefs/{brief}/evidence/batch", server.trim_end_matches('/')),
            trial,
            endpoint: match trial {
                Some(t) => format!(
                    "{}/api/v1/briefs/{brief}/evidence?trial={t}",
                    server.trim_end_matches('/')
                ),
                None => format!("{}/api/v1/briefs/{brief}/evidence", server.trim_end_matches('/')),
            },
            token,
            policy,
        })
    }

    /// The underlying HTTP client, for scraping.
    pub fn http(&self) -> &reqwest::Client {
        &self.http
    }

    fn authorization(&self) -> Result<header::HeaderValue, Refused> {
        let mut auth =
            header::HeaderValue::from_str(&format!("Bearer {}", self.token.expose())).map_err(|_| Refused {
                status: None,
                reason: "the token holds characters that cannot go in a header".into(),
                attempts: 0,
            })?;
        auth.set_sensitive(true);
        Ok(auth)
    }

    /// Sends the request `build` makes until an answer is final (anything but 429 and 503), or
    /// the policy's attempts are spent; returns that answer and the attempts it took.
    async fn send(&self, build: impl Fn() -> reqwest::RequestBuilder) -> Result<(reqwest::Response, u32), Refused> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            let (retry_after, why) = match build().send().await {
                Err(e) => (None, describe(&e)),
                Ok(res) => {
                    let status = res.status();
                    if status == StatusCode::TOO_MANY_REQUESTS || status == StatusCode::SERVICE_UNAVAILABLE {
                        let ra = res
                            .headers()
                            .get(header::RETRY_AFTER)
                            .and_then(|v| v.to_str().ok())
                            .and_then(|v| parse_retry_after(v, Utc::now()));
                        (ra, format!("server answered {status}"))
                    } else {
                        return Ok((res, attempt));
                    }
                }
            };
            if attempt >= self.policy.max_attempts {
                return Err(Refused {
                    status: None,
                    reason: if attempt == 1 {
                        format!("{why}; no retries allowed (--attempts 1)")
                    } else {
                        format!("{why}; gave up after {attempt} attempts")
                    },
                    attempts: attempt,
                });
            }
            let wait = self.policy.delay(attempt, retry_after, rand::random::<f64>());
            eprintln!(
                "      {why}; retrying in {:.1} s (attempt {}/{})",
                wait.as_secs_f64(),
                attempt + 1,
                self.policy.max_attempts
            );
            tokio::time::sleep(wait).await;
        }
    }

    /// POSTs the item as a raw body with `?kind=&stage=&label.<name>=…`, retrying as the policy says.
    pub async fn post(&self, item: &Item<'_>) -> Result<Accepted, Refused> {
        let mut query: Vec<(String, String)> = vec![
            ("kind".into(), item.kind.into()),
            ("stage".into(), item.stage.to_string()),
        ];
        query.extend(item.labels.iter().map(|(k, v)| (format!("label.{k}"), v.clone())));
        let auth = self.authorization()?;
        let (res, attempts) = self
            .send(|| {
                self.http
                    .post(&self.endpoint)
                    .query(&query)
                    .header(header::AUTHORIZATION, auth.clone())
                    .header(header::CONTENT_TYPE, item.content_type)
                    .header("idempotency-key", item.idempotency_key)
                    .body(item.body.clone())
            })
            .await?;
        answer(res, attempts).await
    }

    /// Sends every item, answers in order: in batches of at most [`BATCH_ITEMS`] and
    /// [`BATCH_RAW_BYTES`]; an item larger than a batch may carry goes on its own as a raw upload
    /// (the server takes those up to `RENTCHECK_MAX_UPLOAD`); one by one to a server without the
    /// batch route. A refusal that would meet every other item too (401, 403, 404) stops: the
    /// rest are not sent.
    pub async fn post_all(&self, items: &[Item<'_>]) -> Vec<Result<Accepted, Refused>> {
        let mut answers: Vec<Result<Accepted, Refused>> = Vec::with_capacity(items.len());
        let mut one_by_one = false;
        let mut start = 0;
        while start < items.len() {
            if let Some(stop) = answers
                .iter()
                .find_map(|a| a.as_ref().err().filter(|r| r.stops_the_run()))
            {
                let not_sent = Refused {
                    status: None,
                    reason: format!("not sent: {}", stop.stop_reason()),
                    attempts: 0,
                };
                answers.extend((start..items.len()).map(|_| Err(not_sent.clone())));
                break;
            }
            if one_by_one || items[start].body.len() > BATCH_RAW_BYTES {
                answers.push(self.post(&items[start]).await);
                start += 1;
                continue;
            }
            let mut end = start;
            let mut bytes = 0;
            while end < items.len() && end - start < BATCH_ITEMS && bytes + items[end].body.len() <= BATCH_RAW_BYTES {
                bytes += items[end].body.len();
                end += 1;
            }
            match self.post_batch(&items[start..end]).await {
                Ok(BatchSent::Answered(a)) => answers.extend(a),
                Ok(BatchSent::NoBatchRoute) => {
                    eprintln!("      the server has no batch route: sending one by one");
                    one_by_one = true;
                    continue;
                }
                Err(refused) => answers.extend((start..end).map(|_| Err(refused.clone()))),
            }
            start = end;
        }
        answers
    }

    /// POSTs `items` (at most [`BATCH_ITEMS`]) as one batch, retrying the whole request as the
    /// policy says (each item's key makes that safe). `Err` when the request as a whole was
    /// refused: every item shares that answer.
    async fn post_batch(&self, items: &[Item<'_>]) -> Result<BatchSent, Refused> {
        let b64 = base64::engine::general_purpose::STANDARD;
        let body = serde_json::json!({
            "items": items.iter().map(|i| {
                let mut v = serde_json::json!({
                    "kind": i.kind,
                    "stage": i.stage,
                    "labels": i.labels.iter().map(|(k, v)| (k.clone(), Value::String(v.clone()))).collect::<serde_json::Map<String, Value>>(),
                    "content_base64": b64.encode(&i.body),
                    "content_type": i.content_type,
                    "idempotency_key": i.idempotency_key,
                });
                // No collected_at: the server stamps arrival, as for one post, so a re-run in the
                // key's window is the same request and replays.
                if let Some(t) = self.trial {
                    v["trial"] = Value::String(t.to_string());
                }
                v
            }).collect::<Vec<_>>(),
        });
        let body = serde_json::to_vec(&body).map_err(|e| Refused {
            status: None,
            reason: format!("could not encode the batch: {e}"),
            attempts: 0,
        })?;
        let auth = self.authorization()?;
        let (res, attempts) = self
            .send(|| {
                self.http
                    .post(&self.batch_endpoint)
                    .header(header::AUTHORIZATION, auth.clone())
                    .header(header::CONTENT_TYPE, "application/json")
                    .body(body.clone())
            })
            .await?;
        let status = res.status();
        if status != StatusCode::MULTI_STATUS {
            // An older server: no such route (its 404 does not name the brief) or no POST on it.
            let refused = answer(res, attempts).await.err();
            return match refused {
                Some(r) if r.status == Some(StatusCode::METHOD_NOT_ALLOWED) => Ok(BatchSent::NoBatchRoute),
                Some(r) if r.status == Some(StatusCode::NOT_FOUND) && !r.reason.contains("brief not found") => {
                    Ok(BatchSent::NoBatchRoute)
                }
                Some(r) => Err(r),
                None => Err(Refused {
                    status: Some(status),
                    reason: format!("{status}: the server did not answer the batch item by item"),
                    attempts,
                }),
            };
        }
        let answer: Value = answer_text(res)
            .await
            .and_then(|text| serde_json::from_str(&text).map_err(|e| e.to_string()))
            .map_err(|e| Refused {
                status: Some(status),
                reason: format!("unreadable batch answer: {e}"),
                attempts,
            })?;
        let answers = answer["items"].as_array().cloned().unwrap_or_default();
        Ok(BatchSent::Answered(
            (0..items.len()).map(|i| batch_item(answers.get(i), attempts)).collect(),
        ))
    }
}

impl Client {
    /// GETs a JSON document from the server with the token, retrying as the policy says (the test
    /// plan `collect --plan` runs). A non-2xx answer is refused with the problem's detail.
    pub async fn get_json(&self, url: &str) -> Result<Value, Refused> {
        let auth = self.authorization()?;
        let (res, attempts) = self
            .send(|| self.http.get(url).header(header::AUTHORIZATION, auth.clone()))
            .await?;
        let status = res.status();
        let text = answer_text(res).await.map_err(|why| Refused {
            status: Some(status),
            reason: format!("{status}: {why}"),
            attempts,
        })?;
        let body: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        if status.is_success() && body.is_object() {
            return Ok(body);
        }
        Err(Refused {
            status: Some(status),
            reason: if status.is_success() {
                format!("{status}: the answer is not a JSON object")
            } else {
                problem_reason(status, &body, &text)
            },
            attempts,
        })
    }
}

/// One item's entry of a batch answer.
fn batch_item(entry: Option<&Value>, attempts: u32) -> Result<Accepted, Refused> {
    let Some(e) = entry else {
        return Err(Refused {
            status: None,
            reason: "the server's answer left this item out".into(),
            attempts,
        });
    };
    let status = e["status"]
        .as_u64()
        .and_then(|s| u16::try_from(s).ok())
        .and_then(|s| StatusCode::from_u16(s).ok())
        .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    if status.is_success() {
        return Ok(Accepted {
            id: e["id"].as_str().and_then(|s| s.parse().ok()),
            replayed: status == StatusCode::OK,
            parse_status: e["parse_status"].as_str().unwrap_or("unknown").to_owned(),
            parse_error: e["parse_error"].as_str().map(str::to_owned),
            warnings: e["warnings"].as_u64().unwrap_or(0) as usize,
            attempts,
        });
    }
    Err(Refused {
        status: Some(status),
        reason: problem_reason(status, &e["problem"], ""),
        attempts,
    })
}

/// A reqwest error as a person wants it: what happened at the bottom (refused, reset, timed out).
fn describe(e: &reqwest::Error) -> String {
    if e.is_timeout() {
        return "timed out".to_owned();
    }
    let mut innermost: &dyn std::error::Error = e;
    while let Some(s) = innermost.source() {
        innermost = s;
    }
    let what = if e.is_connect() {
        "cannot connect"
    } else {
        "request failed"
    };
    format!("{what}: {innermost}")
}

/// "403 Forbidden: detail; field message" from a problem document (or the first of `text`).
fn problem_reason(status: StatusCode, problem: &Value, text: &str) -> String {
    let detail = problem["detail"]
        .as_str()
        .or_else(|| problem["title"].as_str())
        .map(str::to_owned)
        .unwrap_or_else(|| text.chars().take(200).collect());
    let mut reason = format!("{status}");
    if !detail.trim().is_empty() {
        reason.push_str(": ");
        reason.push_str(detail.trim());
    }
    if let Some(errors) = problem["errors"].as_array() {
        for e in errors {
            if let (Some(f), Some(m)) = (e["field"].as_str(), e["message"].as_str()) {
                reason.push_str(&format!("; {f} {m}"));
            }
        }
    }
    reason
}

/// The most of one answer from the server the agent reads: a test plan or a batch's answer is
/// tens of KB; a server that sends more is not one to follow, and reading on would cost memory
/// without bound.
pub const ANSWER_BODY_LIMIT: usize = 16 << 20;

/// An answer's body as text, or why it was not read (over [`ANSWER_BODY_LIMIT`], or broken).
async fn answer_text(res: reqwest::Response) -> Result<String, String> {
    match super::steps::read_within(res, ANSWER_BODY_LIMIT).await {
        Ok(bytes) => Ok(String::from_utf8_lossy(&bytes).into_owned()),
        Err(super::steps::BodyError::TooLarge) => Err(format!(
            "the answer is larger than {}, the most the agent reads",
            crate::figures::bytes(ANSWER_BODY_LIMIT)
        )),
        Err(super::steps::BodyError::Read(e)) => Err(format!("reading the answer failed: {e}")),
    }
}

/// Reads a final answer: 2xx is accepted, anything else refused with the problem's detail.
async fn answer(res: reqwest::Response, attempts: u32) -> Result<Accepted, Refused> {
    let status = res.status();
    let replayed = res
        .headers()
        .get("idempotent-replayed")
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"true"));
    let text = answer_text(res).await.unwrap_or_default();
    let body: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
    if status.is_success() {
        return Ok(Accepted {
            id: body["id"].as_str().and_then(|s| s.parse().ok()),
            replayed: replayed || status == StatusCode::OK,
            parse_status: body["parse_status"].as_str().unwrap_or("unknown").to_owned(),
            parse_error: body["parse_error"].as_str().map(str::to_owned),
            warnings: body["warnings"].as_array().map_or(0, Vec::len),
            attempts,
        });
    }
    let reason = problem_reason(status, &body, &text);
    Err(Refused {
        status: Some(status),
        reason,
        attempts,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_is_exponential_capped_and_jittered() {
        let p = RetryPolicy::default();
        // With the largest draw the ceiling doubles from the base ...
        assert_eq!(p.delay(1, None, 1.0), Duration::from_millis(200));
        assert_eq!(p.delay(2, None, 1.0), Duration::from_millis(400));
        assert_eq!(p.delay(3, None, 1.0), Duration::from_millis(800));
        assert_eq!(p.delay(6, None, 1.0), Duration::from_millis(6400));
        // ... until the cap, which holds however many attempts failed.
        assert_eq!(p.delay(7, None, 1.0), Duration::from_secs(10));
        assert_eq!(p.delay(1000, None, 1.0), Duration::from_secs(10));
        // Full jitter: anywhere from zero to the ceiling.
        assert_eq!(p.delay(3, None, 0.0), Duration::ZERO);
        assert_eq!(p.delay(3, None, 0.5), Duration::from_millis(400));
        for failed in 1..50 {
            for j in [0.0, 0.3, 0.999_999, 7.0, -1.0] {
                assert!(p.delay(failed, None, j) <= p.cap);
            }
        }
    }

    #[test]
    fn retry_after_replaces_the_backoff_but_is_bounded() {
        let p = RetryPolicy::default();
        assert_eq!(p.delay(1, Some(Duration::ZERO), 0.9), Duration::ZERO);
        assert_eq!(p.delay(1, Some(Duration::from_secs(3)), 0.0), Duration::from_secs(3));
        assert_eq!(p.delay(4, Some(Duration::from_secs(30)), 0.0), Duration::from_secs(30));
        assert_eq!(p.delay(1, Some(Duration::from_secs(86_400)), 0.0), p.max_retry_after);
    }

    #[test]
    fn retry_after_reads_seconds_and_dates() {
        let now = DateTime::parse_from_rfc3339("2015-10-21T07:28:00Z")
            .unwrap()
            .with_timezone(&Utc);
        assert_eq!(parse_retry_after("0", now), Some(Duration::ZERO));
        assert_eq!(parse_retry_after(" 7 ", now), Some(Duration::from_secs(7)));
        assert_eq!(
            parse_retry_after("Wed, 21 Oct 2015 07:28:05 GMT", now),
            Some(Duration::from_secs(5))
        );
        // A date in the past means now.
        assert_eq!(
            parse_retry_after("Wed, 21 Oct 2015 07:00:00 GMT", now),
            Some(Duration::ZERO)
        );
        assert_eq!(parse_retry_after("soon", now), None);
        assert_eq!(parse_retry_after("-3", now), None);
    }
}
