//! `/api/openapi.json` describes every `/api/v1` route the server registers.
//!
//! axum cannot list a Router's routes, so the registered set is read from the source: every
//! `.route("/api/v1…", get(..).post(..))` call under server/ (the only way routes are added; `app()`
//! in server/http/mod.rs is the one URL map). Then each documented operation is called on a live
//! server to show it is really routed (anything but the fallback's "route not found").

use crate::common;

use std::collections::BTreeSet;

use common::spawn_app;
use serde_json::Value;

fn rust_files(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let p = entry.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

/// (METHOD, path) for every `.route("/api/v1…", …)` in the source.
fn registered_routes() -> BTreeSet<(String, String)> {
    registered_routes_under("/api/v1")
}

/// (METHOD, path) for every `.route(…)` in the source whose path starts with `prefix` (`"/"`:
/// every route, pages included; `security_review3.rs` walks them all).
pub fn registered_routes_under(prefix: &str) -> BTreeSet<(String, String)> {
    let mut files = Vec::new();
    rust_files(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("server"),
        &mut files,
    );
    let mut routes = BTreeSet::new();
    for f in files {
        // code only: comments may mention `.route(` too
        let src: String = std::fs::read_to_string(&f)
            .unwrap()
            .lines()
            .filter(|l| !l.trim_start().starts_with("//"))
            .collect::<Vec<_>>()
            .join("\n");
        let mut rest = src.as_str();
        while let Some(at) = rest.find(".route(") {
            rest = &rest[at + ".route(".len()..];
            let args = rest.trim_start();
            let Some(args) = args.strip_prefix('"') else { continue };
            let end = args.find('"').unwrap();
            let path = &args[..end];
            if !path.starts_with(prefix) {
                continue;
            }
            // the method router: up to the `)` that closes `.route(`
            let mut depth = 1;
            let mut close = 0;
            for (i, c) in args[end..].char_indices() {
                match c {
                    '(' => depth += 1,
                    ')' => {
                        depth -= 1;
                        if depth == 0 {
                            close = end + i;
                            break;
                        }
                    }
                    _ => {}
                }
            }
            let methods = &args[end..close];
            let mut found = false;
            for m in ["get", "post", "put", "delete", "patch"] {
                let call = format!("{m}(");
                let hit = methods.match_indices(&call).any(|(i, _)| {
                    i == 0 || !methods.as_bytes()[i - 1].is_ascii_alphanumeric() && methods.as_bytes()[i - 1] != b'_'
                });
                if hit {
                    routes.insert((m.to_uppercase(), path.to_owned()));
                    found = true;
                }
            }
            assert!(found, "no method found for {path} in {}", f.display());
        }
    }
    routes
}

#[tokio::test]
async fn openapi_describes_every_api_v1_route() {
    let registered = registered_routes();
    assert!(registered.contains(&("POST".to_owned(), "/api/v1/briefs/{id}/evidence".to_owned())));
    assert!(registered.contains(&("PUT".to_owned(), "/api/v1/briefs/{id}".to_owned())));

    let app = spawn_app().await;
    let res = app.get("/api/openapi.json").await;
    assert_eq!(res.status(), 200);
    let doc: Value = res.json().await.unwrap();
    assert!(doc["openapi"].as_str().unwrap().starts_with("3."));
    // Tools (schemathesis, client generators) learn from the document how to authenticate.
    assert_eq!(doc["components"]["securitySchemes"]["bearer"]["scheme"], "bearer");
    assert_eq!(doc["security"][0]["bearer"], serde_json::json!([]));
    let mut documented = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            assert!(
                op["responses"].as_object().is_some_and(|r| !r.is_empty()),
                "{method} {path}"
            );
            documented.insert((method.to_uppercase(), path.clone()));
        }
    }
    let missing: Vec<_> = registered.difference(&documented).collect();
    assert!(missing.is_empty(), "routes missing from /api/openapi.json: {missing:?}");
    let extra: Vec<_> = documented.difference(&registered).collect();
    assert!(extra.is_empty(), "documented but not registered: {extra:?}");

    // every documented operation is routed on the live server
    let id = uuid::Uuid::now_v7();
    for (method, path) in &documented {
        let url = app.url(&path.replace("{id}", &id.to_string()));
        let res = app
            .client
            .request(method.parse().unwrap(), url)
            .header("content-type", "application/json")
            .body("{}")
            .send()
            .await
            .unwrap();
        assert_ne!(res.status(), 405, "{method} {path}");
        let body = res.text().await.unwrap();
        assert!(!body.contains("route not found"), "{method} {path} hit the fallback");
    }
}
