//! `/api/openapi.json`: the OpenAPI 3.1 document of every `/api/v1` route, generated from the
//! handlers.
//!
//! Each `/api/v1` handler carries `#[utoipa::path(...)]` and each domain's `api::routes()` is a
//! `utoipa_axum` `OpenApiRouter` that registers it with `routes!(...)`, so a route and its document
//! are one registration: a route without a document cannot be added. [`api_router`] joins the
//! domains' routers; `http::app` serves the router and this document from the same join.
//! `docs/openapi.json` is its snapshot (`tests/it/openapi.rs` fails when the two differ) and CI runs
//! schemathesis against it (`scripts/schemathesis.sh`).
//!
//! What the handlers' annotations leave out is added here, the same for every operation: an error
//! answer without a body of its own is `application/problem+json` ([`Problem`]), and the answers any
//! operation can give (400, 401, 403, 503; 413 and 415 with a body) are described where the
//! operation does not describe its own.

use axum::body::Bytes;
use utoipa::{
    openapi::{
        content::ContentBuilder,
        header::HeaderBuilder,
        path::{Operation, ParameterIn},
        schema::{ObjectBuilder, Type},
        security::{HttpAuthScheme, HttpBuilder, SecurityScheme},
        Ref, RefOr, ResponseBuilder,
    },
    Modify, OpenApi,
};
use utoipa_axum::router::OpenApiRouter;

use crate::{
    acceptance, commitments, error::Problem, evidence, ledger, overview, people, plan, prices, review, signals,
    state::AppState, trials, validation::FieldError,
};

struct BearerScheme;

impl Modify for BearerScheme {
    fn modify(&self, doc: &mut utoipa::openapi::OpenApi) {
        let components = doc.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .bearer_format("JWT")
                    .description(Some("a token from `rentcheck token mint` or a brief's tokens page"))
                    .build(),
            ),
        );
    }
}

/// What the document says of itself; the operations come from the routers.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "rentcheck",
        description = "Turns renting a GPU server into an acceptance test. Errors are application/problem+json."
    ),
    components(schemas(Problem, FieldError)),
    modifiers(&BearerScheme),
    // Every /api/v1 route takes a bearer token (reads also accept a signed-in browser session).
    security(("bearer" = []))
)]
struct ApiDoc;

/// Every `/api/v1` route with its document: the domains' routers joined.
pub fn api_router() -> OpenApiRouter<AppState> {
    OpenApiRouter::with_openapi(ApiDoc::openapi())
        .merge(prices::api::routes())
        .merge(signals::api::routes())
        .merge(people::api::routes())
        .merge(trials::api::routes())
        .merge(plan::api::routes())
        .merge(overview::api_routes())
        .merge(trials::brief_api::routes())
        .merge(acceptance::api::routes())
        .merge(evidence::api::routes())
        .merge(ledger::api::routes())
        .merge(review::api::routes())
        .merge(commitments::api::routes())
}

/// The document as served: the routers' document with the common answers added.
pub fn document() -> utoipa::openapi::OpenApi {
    let (_, doc) = api_router().split_for_parts();
    finish(doc)
}

/// Adds what every operation shares (see the module comment).
pub fn finish(mut doc: utoipa::openapi::OpenApi) -> utoipa::openapi::OpenApi {
    for item in doc.paths.paths.values_mut() {
        let operations = [
            &mut item.get,
            &mut item.put,
            &mut item.post,
            &mut item.delete,
            &mut item.patch,
        ];
        for operation in operations.into_iter().flatten() {
            add_common_responses(operation);
            problem_bodies(operation);
        }
    }
    doc
}

/// The document as bytes, for the route that serves it (built once, when the app is).
pub fn body(doc: &utoipa::openapi::OpenApi) -> Bytes {
    Bytes::from(serde_json::to_vec_pretty(doc).expect("the OpenAPI document serializes"))
}

fn problem_content() -> utoipa::openapi::Content {
    ContentBuilder::new()
        .schema(Some(RefOr::Ref(Ref::from_schema_name("Problem"))))
        .build()
}

fn problem_response(description: &str) -> utoipa::openapi::Response {
    ResponseBuilder::new()
        .description(description)
        .content("application/problem+json", problem_content())
        .build()
}

/// An error answer the handler describes without a body is a problem document.
fn problem_bodies(operation: &mut Operation) {
    for (status, response) in operation.responses.responses.iter_mut() {
        let is_error = status.starts_with('4') || status.starts_with('5');
        if let RefOr::T(response) = response {
            if is_error && response.content.is_empty() {
                response
                    .content
                    .insert("application/problem+json".to_owned(), problem_content());
            }
        }
    }
}

/// Answers any /api/v1 operation can give, added where the operation does not describe its own.
fn add_common_responses(operation: &mut Operation) {
    let retry_after = HeaderBuilder::new()
        .schema(
            ObjectBuilder::new()
                .schema_type(Type::Integer)
                .description(Some("seconds")),
        )
        .description(Some("when to try again"))
        .build();
    let common = [
        ("400", problem_response("a malformed id, query string or body")),
        (
            "401",
            problem_response("no bearer token, or an invalid, expired or revoked one"),
        ),
        (
            "403",
            problem_response(
                "the token's role or brief scope does not allow this, the brief is neither yours nor your \
                 team's, or a cross-site request",
            ),
        ),
        (
            "503",
            ResponseBuilder::new()
                .description("the database is unavailable, or the request took longer than the server's timeout")
                .header("Retry-After", retry_after)
                .content("application/problem+json", problem_content())
                .build(),
        ),
    ];
    let with_body = operation.request_body.is_some();
    let with_query = operation
        .parameters
        .iter()
        .flatten()
        .any(|p| matches!(p.parameter_in, ParameterIn::Query));
    // The query string is read whole: a NUL anywhere in it (a name or a value) is refused.
    let query_only = [(
        "422",
        problem_response("a query parameter holds a NUL character, or its value is refused"),
    )];
    let body_only = [
        ("413", problem_response("the body is larger than the route's limit")),
        (
            "415",
            problem_response("a Content-Type or Content-Encoding this route does not take"),
        ),
    ];
    let common = common
        .into_iter()
        .chain(body_only.into_iter().filter(|_| with_body))
        .chain(query_only.into_iter().filter(|_| with_query));
    for (status, response) in common {
        operation
            .responses
            .responses
            .entry(status.to_owned())
            .or_insert(RefOr::T(response));
    }
}
