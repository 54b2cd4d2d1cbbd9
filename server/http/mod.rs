//! The HTTP surface: `app(state)` is the only URL map; `serve` runs it with graceful shutdown.

pub mod extract;
pub mod metrics;
pub mod openapi;
pub mod ops;
pub mod page;
pub mod request_id;

use std::{future::Future, time::Duration};

use axum::{
    extract::{DefaultBodyLimit, MatchedPath, Request},
    http::{header, HeaderName, StatusCode, Uri},
    middleware,
    response::{IntoResponse, Response},
    routing::get,
    Router,
};
use tokio::net::TcpListener;
use tower_http::{
    catch_panic::CatchPanicLayer,
    request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer},
    sensitive_headers::SetSensitiveRequestHeadersLayer,
    timeout::TimeoutLayer,
    trace::{DefaultOnResponse, TraceLayer},
};

use crate::{
    acceptance, auth, briefs,
    error::{AppError, PageError},
    evidence, ledger, review,
    state::AppState,
};

/// Default cap for request bodies; ingest routes set their own, larger limit.
pub const DEFAULT_BODY_LIMIT: usize = 1024 * 1024;

pub fn app(state: AppState) -> Router {
    let request_id = HeaderName::from_static(request_id::HEADER);
    let timeout = Duration::from_secs(state.config.request_timeout_secs);
    Router::new()
        .merge(ops::routes())
        .merge(briefs::api::routes())
        .merge(briefs::pages::routes())
        .merge(ledger::api::routes())
        .merge(ledger::pages::routes())
        .merge(auth::pages::routes())
        .merge(evidence::api::routes())
        .merge(evidence::pages::routes())
        .merge(review::api::routes())
        .merge(review::pages::routes())
        .merge(acceptance::api::routes())
        .merge(acceptance::pages::routes())
        .route("/metrics", get(metrics::endpoint))
        .route("/api/openapi.json", get(openapi::endpoint))
        .route("/static/app.css", get(stylesheet))
        .fallback(not_found)
        .layer(DefaultBodyLimit::max(DEFAULT_BODY_LIMIT))
        .layer(middleware::from_fn(auth::extract::check_origin))
        // Outermost last: sensitive headers → request id → trace → propagate id.
        .layer(middleware::from_fn(request_id::scope_request_id))
        .layer(PropagateRequestIdLayer::new(request_id.clone()))
        .layer(CatchPanicLayer::custom(|_| {
            AppError::Internal(anyhow::anyhow!("handler panicked")).into_response()
        }))
        .layer(TimeoutLayer::with_status_code(StatusCode::SERVICE_UNAVAILABLE, timeout))
        // Counts and times each request by matched route, timeouts and panics included.
        .layer(middleware::from_fn_with_state(state.clone(), metrics::track))
        .layer(
            TraceLayer::new_for_http()
                .make_span_with(|req: &Request| {
                    let path = req
                        .extensions()
                        .get::<MatchedPath>()
                        .map(MatchedPath::as_str)
                        .unwrap_or("unmatched");
                    let id = req
                        .headers()
                        .get(request_id::HEADER)
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or("-");
                    tracing::info_span!("request", method = %req.method(), path, request_id = id)
                })
                .on_response(DefaultOnResponse::new().level(tracing::Level::INFO)),
        )
        .layer(SetRequestIdLayer::new(request_id, MakeRequestUuid))
        .layer(SetSensitiveRequestHeadersLayer::new([
            header::AUTHORIZATION,
            header::COOKIE,
        ]))
        .with_state(state)
}

/// Serves until `shutdown` resolves, then lets in-flight requests finish.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    // Peer addresses are needed by the loopback-only first-run page.
    axum::serve(
        listener,
        router.into_make_service_with_connect_info::<std::net::SocketAddr>(),
    )
    .with_graceful_shutdown(shutdown)
    .await
}

/// Resolves on SIGTERM or Ctrl-C.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = ctrl_c => {},
        _ = terminate => {},
    }
    tracing::info!("shutdown signal received; finishing in-flight requests");
}

async fn stylesheet() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/css; charset=utf-8"),
            (header::CACHE_CONTROL, "public, max-age=3600"),
        ],
        include_str!("../../static/app.css"),
    )
        .into_response()
}

async fn not_found(uri: Uri) -> Response {
    if uri.path().starts_with("/api/") {
        AppError::NotFound("route").into_response()
    } else {
        let mut r = PageError(AppError::NotFound("page")).into_response();
        *r.status_mut() = StatusCode::NOT_FOUND;
        r
    }
}
