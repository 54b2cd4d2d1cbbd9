//! What every page needs: the layout's context (who is signed in, the CSRF token for its forms),
//! the one `render`, and `PageError`, the error type rendered as an HTML page for people.

use askama::Template;
use axum::{
    extract::{Request, State},
    http::{header, HeaderValue, StatusCode},
    middleware::Next,
    response::{Html, IntoResponse, Response},
};

use crate::{
    auth::{session, Role},
    error::AppError,
    state::AppState,
};

#[derive(Debug, Clone, Default)]
pub struct PageContext {
    pub email: Option<String>,
    pub role: &'static str,
    pub csrf: String,
    pub is_admin: bool,
}

impl PageContext {
    pub fn anonymous() -> Self {
        Self::default()
    }
}

/// Renders a page template; a template error becomes the error page, never a panic.
pub fn render(t: &impl Template) -> PageResult<Response> {
    Ok(Html(t.render().map_err(AppError::from)?).into_response())
}

impl From<askama::Error> for AppError {
    fn from(e: askama::Error) -> Self {
        AppError::Internal(anyhow::Error::new(e).context("rendering a template"))
    }
}

/// The same error, rendered as an HTML page for people.
#[derive(Debug)]
pub struct PageError(pub AppError);

impl<E: Into<AppError>> From<E> for PageError {
    fn from(e: E) -> Self {
        PageError(e.into())
    }
}

#[derive(Template, Clone)]
#[template(path = "error.html")]
struct ErrorPage {
    ctx: PageContext,
    status: u16,
    title: String,
    detail: String,
    /// The page of this server the person came from (a form), to go back to.
    back: Option<String>,
}

impl IntoResponse for PageError {
    fn into_response(self) -> Response {
        let error = self.0;
        error.log();
        let status = error.status();
        let page = ErrorPage {
            ctx: PageContext::anonymous(),
            status: status.as_u16(),
            title: status.canonical_reason().unwrap_or("Error").to_owned(),
            detail: match &error {
                // "brief not found" is the API's wording; a person is told what to do about it.
                AppError::NotFound(what) => format!(
                    "There is no {what} at this address: the link may be mistyped, or what it pointed to was \
                     removed or is not yours to see."
                ),
                AppError::Validation(errors) => errors
                    .iter()
                    .map(|e| format!("{}: {}", e.field, e.message))
                    .collect::<Vec<_>>()
                    .join("; "),
                other => other.public_detail(),
            },
            back: None,
        };
        let body = page
            .render()
            .unwrap_or_else(|_| format!("{} {}", page.status, page.title));
        let mut response = (status, Html(body)).into_response();
        // `error_pages_know_who` renders it again for a signed-in person.
        response.extensions_mut().insert(page);
        if status == StatusCode::SERVICE_UNAVAILABLE {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("5"));
        }
        response
    }
}

pub type PageResult<T> = Result<T, PageError>;

/// Error pages are rendered where the error happens, often before (or without) the handler knowing
/// who is asking. This middleware renders an error page again with the signed-in person's header
/// (name, role, "Log out"), so nobody signed in is offered "Log in". It costs a session lookup on
/// error pages only.
pub async fn error_pages_know_who(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let cookie = session::read_cookie(request.headers(), session::COOKIE);
    // A failing page read does not link to itself; a failing form post links back to its form.
    let failing_read = (request.method() == axum::http::Method::GET).then(|| request.uri().path().to_owned());
    let back = came_from(request.headers(), failing_read.as_deref());
    let mut response = next.run(request).await;
    let Some(mut page) = response.extensions_mut().remove::<ErrorPage>() else {
        return response;
    };
    page.back = back;
    if let Some(cookie) = cookie {
        // Signed out, or the database is what failed: the anonymous header stands.
        if let Ok(Some(user)) = session::lookup(&state.pool, &cookie, state.config.sessions).await {
            page.ctx = PageContext {
                email: Some(user.email),
                role: user.role.as_str(),
                csrf: user.csrf_token,
                is_admin: user.role == Role::Admin,
            };
        }
    }
    if page.back.is_some() || page.ctx.email.is_some() {
        if let Ok(body) = page.render() {
            let (parts, _) = response.into_parts();
            response = Response::from_parts(parts, body.into());
        }
    }
    response
}

/// The path of this server's page that sent the person here (the `Referer` of a form's post), unless
/// it is the page that failed to load: an error page offers the way back to the form, where the
/// browser keeps what was typed. Another site's address is never offered.
fn came_from(headers: &axum::http::HeaderMap, failing_read: Option<&str>) -> Option<String> {
    let referer = headers.get(header::REFERER)?.to_str().ok()?;
    let host = headers.get(header::HOST)?.to_str().ok()?;
    let rest = referer
        .strip_prefix("http://")
        .or_else(|| referer.strip_prefix("https://"))?
        .strip_prefix(host)?;
    let path = rest.split('#').next().unwrap_or_default();
    // Browsers read `/\host` as `//host`: a path with a backslash is never offered.
    let here = path.starts_with('/') && !path.starts_with("//") && !path.contains('\\');
    (here && path.split('?').next() != failing_read).then(|| path.to_owned())
}

#[cfg(test)]
mod tests {
    use axum::http::{header, HeaderMap, HeaderValue};

    use super::came_from;

    fn headers(referer: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::HOST, HeaderValue::from_static("rentcheck.example:8080"));
        h.insert(header::REFERER, HeaderValue::from_str(referer).unwrap());
        h
    }

    #[test]
    fn an_error_page_leads_back_only_to_a_page_of_this_server() {
        let back = |r: &str, failing: Option<&str>| came_from(&headers(r), failing);
        assert_eq!(
            back("http://rentcheck.example:8080/briefs/new?x=1#top", None).as_deref(),
            Some("/briefs/new?x=1")
        );
        // A failing read never links to itself; a failing post leads back to its form.
        assert_eq!(back("http://rentcheck.example:8080/prices", Some("/prices")), None);
        assert!(back("http://rentcheck.example:8080/prices", None).is_some());
        for elsewhere in [
            "https://evil.example/briefs",
            "http://rentcheck.example:8080.evil.example/x",
            "http://rentcheck.example:8080//evil.example/x",
            "http://rentcheck.example:8080/\\evil.example",
            "javascript:alert(1)",
        ] {
            assert_eq!(back(elsewhere, None), None, "{elsewhere}");
        }
    }
}
