//! What every page needs: the layout's context (who is signed in, the CSRF token for its forms),
//! the one `render`, and `PageError`, the error type rendered as an HTML page for people.

use askama::Template;
use axum::{
    http::{header, HeaderValue, StatusCode},
    response::{Html, IntoResponse, Response},
};

use crate::error::AppError;

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

#[derive(Template)]
#[template(path = "error.html")]
struct ErrorPage {
    ctx: PageContext,
    status: u16,
    title: String,
    detail: String,
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
                AppError::Validation(errors) => errors
                    .iter()
                    .map(|e| format!("{}: {}", e.field, e.message))
                    .collect::<Vec<_>>()
                    .join("; "),
                other => other.public_detail(),
            },
        };
        let body = page
            .render()
            .unwrap_or_else(|_| format!("{} {}", page.status, page.title));
        let mut response = (status, Html(body)).into_response();
        if status == StatusCode::SERVICE_UNAVAILABLE {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("5"));
        }
        response
    }
}

pub type PageResult<T> = Result<T, PageError>;
