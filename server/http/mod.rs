//! The HTTP surface: `app(state)` is the only URL map; `serve` runs it with graceful shutdown.

pub mod metrics;
pub mod openapi;
pub mod ops;

use std::{future::Future, time::Duration};

use axum::{
    extract::{ConnectInfo, DefaultBodyLimit, MatchedPath, Request},
    http::{header, HeaderName, Method, StatusCode, Uri},
    middleware,
    response::{IntoResponse, Response},
    routing::get,
    Router,
};
use hyper_util::{
    rt::{TokioIo, TokioTimer},
    server::graceful::GracefulShutdown,
};
use tokio::net::TcpListener;
use tower::ServiceExt;
use tower_http::{
    catch_panic::CatchPanicLayer,
    decompression::RequestDecompressionLayer,
    request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer},
    sensitive_headers::SetSensitiveRequestHeadersLayer,
    trace::{DefaultOnResponse, TraceLayer},
};

use crate::{
    acceptance, commitments,
    error::AppError,
    evidence, ledger, overview, people, plan, prices, review, signals,
    state::AppState,
    telemetry::REQUEST_ID_HEADER,
    trials,
    web::{self, page::PageError},
};

pub use crate::web::extract::DEFAULT_BODY_LIMIT;

pub fn app(state: AppState) -> Router {
    let request_id = HeaderName::from_static(REQUEST_ID_HEADER);
    // The API routes and their document come from one join: a route cannot go undocumented.
    let (api, document) = openapi::api_router().split_for_parts();
    let document = openapi::body(&openapi::finish(document));
    Router::new()
        .merge(ops::routes())
        .merge(api)
        .merge(trials::brief_pages::routes())
        .merge(overview::routes())
        .merge(ledger::pages::routes())
        .merge(people::pages::routes())
        .merge(evidence::pages::routes())
        .merge(review::pages::routes())
        .merge(acceptance::pages::routes())
        .merge(prices::pages::routes())
        .merge(trials::pages::routes())
        .merge(plan::pages::routes())
        .merge(signals::pages::routes())
        .merge(commitments::pages::routes())
        .route("/metrics", get(metrics::endpoint))
        .route(
            "/api/openapi.json",
            get(move || async move { ([(header::CONTENT_TYPE, "application/json")], document) }),
        )
        .route("/static/app.css", get(stylesheet))
        .route("/static/review.js", get(review_script))
        .route("/static/copy.js", get(copy_script))
        .fallback(not_found)
        // After every route: it is set on the routes registered before it.
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(DEFAULT_BODY_LIMIT))
        // `Content-Encoding: gzip` bodies are inflated as they stream, so every body cap counts
        // inflated bytes (a zip bomb meets 413); other encodings are answered 415.
        .layer(RequestDecompressionLayer::new())
        .layer(middleware::from_fn(web::auth::check_origin))
        .layer(middleware::from_fn_with_state(
            state.clone(),
            web::page::error_pages_know_who,
        ))
        // Outermost last: sensitive headers → request id → trace → propagate id.
        .layer(middleware::from_fn(web::request_id::scope_request_id))
        .layer(PropagateRequestIdLayer::new(request_id.clone()))
        .layer(CatchPanicLayer::custom(|_| {
            AppError::Internal(anyhow::anyhow!("handler panicked")).into_response()
        }))
        .layer(middleware::from_fn_with_state(state.clone(), deadline))
        // Counts and times each request by matched route, timeouts and panics included.
        .layer(middleware::from_fn_with_state(state.clone(), metrics::track))
        // On every answer, error pages, timeouts and panics included.
        .layer(middleware::from_fn_with_state(state.clone(), security_headers))
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
                        .get(REQUEST_ID_HEADER)
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

/// The request deadline (`RENTCHECK_REQUEST_TIMEOUT`): past it the request is dropped (an open
/// transaction rolls back) and answered 503 with `Retry-After`, as a problem document on the API
/// and as the error page elsewhere. tower-http's `TimeoutLayer` answers with a bare status, which
/// tells a client neither what happened nor when to retry.
async fn deadline(
    axum::extract::State(state): axum::extract::State<AppState>,
    request: Request,
    next: middleware::Next,
) -> Response {
    let seconds = state.config.request_timeout_secs;
    let api = request.uri().path().starts_with("/api/");
    match tokio::time::timeout(Duration::from_secs(seconds), next.run(request)).await {
        Ok(response) => response,
        Err(_) if api => AppError::TimedOut(seconds).into_response(),
        Err(_) => PageError(AppError::TimedOut(seconds)).into_response(),
    }
}

/// Limits on a client connection before a request reaches the router (where the request timeout
/// and the body caps take over).
#[derive(Debug, Clone, Copy)]
pub struct ConnectionLimits {
    /// A client must finish sending its request line and headers within this (slow-loris).
    pub header_read_timeout: Duration,
    /// Request line plus headers larger than this are refused with 431. (More than 100 header
    /// fields are refused with 431 too: hyper's default, kept because it costs nothing.)
    pub max_header_bytes: usize,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        Self {
            header_read_timeout: Duration::from_secs(10),
            max_header_bytes: 64 * 1024,
        }
    }
}

/// Why the listen address could not be bound, in one line that says what to do: most often the
/// port is taken (another rentcheck, another server), and `RENTCHECK_ADDR` moves it.
pub fn listen_error(addr: std::net::SocketAddr, e: &std::io::Error) -> anyhow::Error {
    use std::io::ErrorKind;
    let next_port = std::net::SocketAddr::new(addr.ip(), addr.port().checked_add(1).unwrap_or(8080));
    let (why, todo) = match e.kind() {
        ErrorKind::AddrInUse => (
            "another program already listens there (another rentcheck, perhaps)".to_owned(),
            format!("Stop it, or listen on another port: RENTCHECK_ADDR={next_port}"),
        ),
        ErrorKind::PermissionDenied => (
            "ports below 1024 need privileges this process does not have".to_owned(),
            format!("Listen on a higher port: RENTCHECK_ADDR={}:8080", addr.ip()),
        ),
        ErrorKind::AddrNotAvailable => (
            format!("this machine has no address {}", addr.ip()),
            "Listen on one of its addresses: RENTCHECK_ADDR=127.0.0.1:8080 (this machine only) \
             or RENTCHECK_ADDR=0.0.0.0:8080 (every address)"
                .to_owned(),
        ),
        _ => (e.to_string(), "Choose another address with RENTCHECK_ADDR".to_owned()),
    };
    anyhow::anyhow!("cannot listen on {addr}: {why}. {todo}")
}

/// Serves until `shutdown` resolves, then lets in-flight requests finish.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    serve_with(listener, router, shutdown, ConnectionLimits::default()).await
}

/// The accept loop. Written out (rather than `axum::serve`) because that sets no timer, so hyper's
/// header read timeout never fires and a client trickling headers holds a connection forever;
/// nor can it cap header size.
pub async fn serve_with(
    listener: TcpListener,
    router: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
    limits: ConnectionLimits,
) -> std::io::Result<()> {
    let graceful = GracefulShutdown::new();
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .max_header_size(limits.max_header_bytes);
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of file descriptors and the like: wait, do not spin.
                    tracing::warn!(error = %e, "accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let _ = stream.set_nodelay(true);
        let router = router.clone();
        // Peer addresses are needed by the loopback-only first-run page.
        let service = hyper::service::service_fn(move |mut request: Request<hyper::body::Incoming>| {
            request.extensions_mut().insert(ConnectInfo(peer));
            router.clone().oneshot(request)
        });
        let connection = graceful.watch(builder.serve_connection(TokioIo::new(stream), service));
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!(error = %e, %peer, "connection ended with an error");
            }
        });
    }
    drop(listener);
    graceful.shutdown().await;
    Ok(())
}

/// Ctrl-C (SIGINT) and SIGTERM, listened for from the moment this is made: from then on either
/// signal is kept for [`recv`](Self::recv) instead of ending the process where it stands, so a
/// start interrupted while it opens the database or migrates can still stop its cluster and
/// release its data dir.
pub struct StopSignal {
    interrupt: tokio::signal::unix::Signal,
    terminate: tokio::signal::unix::Signal,
}

impl StopSignal {
    pub fn listen() -> std::io::Result<Self> {
        use tokio::signal::unix::{signal, SignalKind};
        Ok(Self {
            interrupt: signal(SignalKind::interrupt())?,
            terminate: signal(SignalKind::terminate())?,
        })
    }

    /// Resolves on the first signal received since [`listen`](Self::listen), at once if one came
    /// already.
    pub async fn recv(&mut self) {
        tokio::select! {
            _ = self.interrupt.recv() => {},
            _ = self.terminate.recv() => {},
        }
    }
}

/// The page policy. Every template and page is free of inline script and style (checked by
/// `tests/it/security/mod.rs`), so nothing needs `'unsafe-inline'` or a hash; charts are inline SVG
/// elements, which the policy does not touch. `frame-ancestors 'none'` (and the older
/// `X-Frame-Options`) keeps the review's approval buttons out of anyone's frame.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; script-src 'self'; style-src 'self'; \
     img-src 'self' data:; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// Security headers on every response; HSTS only where rentcheck is served over HTTPS
/// (`RENTCHECK_SECURE_COOKIES` or an `https://` public URL), since over plain HTTP it is ignored at
/// best and locks a mis-set browser out at worst.
async fn security_headers(
    axum::extract::State(state): axum::extract::State<AppState>,
    request: Request,
    next: middleware::Next,
) -> Response {
    use axum::http::HeaderValue;
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    let mut set = |name: HeaderName, value: &'static str| {
        if !headers.contains_key(&name) {
            headers.insert(name, HeaderValue::from_static(value));
        }
    };
    set(header::CONTENT_SECURITY_POLICY, CONTENT_SECURITY_POLICY);
    set(header::X_FRAME_OPTIONS, "DENY");
    set(header::X_CONTENT_TYPE_OPTIONS, "nosniff");
    set(header::REFERRER_POLICY, "same-origin");
    set(HeaderName::from_static("cross-origin-opener-policy"), "same-origin");
    // Pages and API answers carry a person's data (and pages a CSRF token): no shared cache, no
    // back-button copy after sign-out. Answers that may be kept (the stylesheet, the script) say so.
    set(header::CACHE_CONTROL, "no-store");
    if state.config.secure_cookies || state.config.public_url.starts_with("https://") {
        set(header::STRICT_TRANSPORT_SECURITY, "max-age=31536000; includeSubDomains");
    }
    response
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

/// The review page's live monthly preview (progressive enhancement: the form works without it).
async fn review_script() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/javascript; charset=utf-8"),
            (header::CACHE_CONTROL, "public, max-age=3600"),
        ],
        include_str!("../../static/review.js"),
    )
        .into_response()
}

/// The Test plan page's copy buttons (progressive enhancement: the commands are text without it).
async fn copy_script() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/javascript; charset=utf-8"),
            (header::CACHE_CONTROL, "public, max-age=3600"),
        ],
        include_str!("../../static/copy.js"),
    )
        .into_response()
}

/// A known address asked with a method it does not answer: a problem document under `/api/`, a
/// page elsewhere (axum adds the `Allow` header to both).
async fn method_not_allowed(method: Method, uri: Uri) -> Response {
    let error = AppError::MethodNotAllowed(method.to_string());
    if uri.path().starts_with("/api/") {
        error.into_response()
    } else {
        let mut r = PageError(error).into_response();
        *r.status_mut() = StatusCode::METHOD_NOT_ALLOWED;
        r
    }
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
