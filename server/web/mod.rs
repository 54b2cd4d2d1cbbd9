//! The kit every handler uses: our own extractors (`extract`), who is asking (`auth`), pages and
//! their error type (`page`), and the request id middleware. It uses no domain.

pub mod auth;
pub mod extract;
pub mod once;
pub mod page;
pub mod request_id;
