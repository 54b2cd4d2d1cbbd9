//! `/docs/problems`: what each problem `type` of the API's error documents means (RFC 9457 says a
//! type URI should lead to such a page). Public: an API client that got an error may have no
//! session, and nothing here is secret.

use askama::Template;
use axum::response::Response;

use crate::web::page::{render, PageContext, PageResult};

/// One problem type: its anchor (the `type`'s fragment), the status it comes with, and what it
/// means in plain words.
pub struct ProblemType {
    pub slug: &'static str,
    pub status: u16,
    pub title: &'static str,
    pub meaning: &'static str,
}

/// Every slug `AppError` writes, in the order of their status codes.
pub const PROBLEM_TYPES: [ProblemType; 15] = [
    ProblemType { slug: "bad-request", status: 400, title: "Bad Request", meaning: "The request could not be read: the body is not JSON, a query parameter is malformed, or a multipart body is broken. The detail says which; send it again corrected." },
    ProblemType { slug: "unauthorized", status: 401, title: "Unauthorized", meaning: "No valid credentials: the token is missing, expired or revoked, or the session ended. Mint a new token or sign in again." },
    ProblemType { slug: "forbidden", status: 403, title: "Forbidden", meaning: "The credentials are valid but may not do this: a token scoped to another brief or trial, or a role below the one the action needs." },
    ProblemType { slug: "not-found", status: 404, title: "Not Found", meaning: "No such brief, trial, evidence or other object, or it is not one the caller may see." },
    ProblemType { slug: "method-not-allowed", status: 405, title: "Method Not Allowed", meaning: "The address exists but does not answer this method (a DELETE where only GET is served). The Allow header lists the methods it answers." },
    ProblemType { slug: "conflict", status: 409, title: "Conflict", meaning: "The request contradicts what is stored: an idempotency key reused with different bytes, a stale revision, or a change that would leave no admin. The detail names it." },
    ProblemType { slug: "payload-too-large", status: 413, title: "Payload Too Large", meaning: "The body or an item in it is over its size limit (evidence uploads, imports). The detail gives the limit; send less, or split it." },
    ProblemType { slug: "unsupported-media-type", status: 415, title: "Unsupported Media Type", meaning: "The Content-Type is not one this route reads. The detail lists those it does." },
    ProblemType { slug: "validation", status: 422, title: "Unprocessable Entity", meaning: "Some fields are wrong. The errors list names each as { field, message }; fix those fields and send the request again." },
    ProblemType { slug: "unprocessable", status: 422, title: "Unprocessable Entity", meaning: "The request was read but cannot be done as asked (an import with nothing to import, a decision that cannot be approved yet). The detail says why." },
    ProblemType { slug: "too-many-requests", status: 429, title: "Too Many Requests", meaning: "Too many attempts in a short time (sign-ins, uploads). Wait for the Retry-After header's seconds, then try again." },
    ProblemType { slug: "internal", status: 500, title: "Internal Server Error", meaning: "Something failed inside the server. Nothing about it is shown to the caller; the operator finds the cause in the server's log under the request id given in the detail." },
    ProblemType { slug: "database-unavailable", status: 503, title: "Service Unavailable", meaning: "The database does not answer at the moment. The request did nothing; retry after the Retry-After header's seconds." },
    ProblemType { slug: "timed-out", status: 503, title: "Service Unavailable", meaning: "The request did not finish in the time the server allows (RENTCHECK_REQUEST_TIMEOUT, 30 seconds unless set): a body that stopped arriving, or a database that does not answer. Retry after the Retry-After header's seconds; an upload sent again with the same Idempotency-Key is stored once." },
    ProblemType { slug: "storage-unavailable", status: 503, title: "Service Unavailable", meaning: "The evidence store (S3 or the file system) does not answer at the moment. The upload was not stored; retry it with the same Idempotency-Key." },
];

#[derive(Template)]
#[template(path = "overview/problems.html")]
struct ProblemsPage {
    ctx: PageContext,
    types: &'static [ProblemType],
}

pub async fn problems() -> PageResult<Response> {
    render(&ProblemsPage {
        ctx: PageContext::anonymous(),
        types: &PROBLEM_TYPES,
    })
}
