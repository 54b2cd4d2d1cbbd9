//! `/api/openapi.json`: generated from the handlers, and the same as its snapshot.
//!
//! Every `/api/v1` route is registered through a domain's `OpenApiRouter` with `routes!(...)` (the
//! handler's `#[utoipa::path]` gives both its path and its document), so the document lists the API
//! routes. The pages and the other routes are `.route("…", …)` calls, read from the source (axum
//! cannot list a Router's routes); `security_review3.rs` walks both. Each documented operation is
//! then called on a live server to show it is really routed. `docs/openapi.json` is the committed
//! snapshot of the document: a change to a handler's document shows in review as a change there.

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

/// (METHOD, path) of every operation of the generated document.
fn documented(doc: &Value) -> BTreeSet<(String, String)> {
    let mut out = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for method in item.as_object().unwrap().keys() {
            out.insert((method.to_uppercase(), path.clone()));
        }
    }
    out
}

/// (METHOD, path) for every route whose path starts with `prefix` (`"/"`: every route, pages
/// included; `security_review3.rs` walks them all): the API routes from the generated document,
/// the others from the `.route(…)` calls in the source.
pub fn registered_routes_under(prefix: &str) -> BTreeSet<(String, String)> {
    let doc = serde_json::to_value(rentcheck::http::openapi::document()).unwrap();
    let mut routes: BTreeSet<_> = documented(&doc)
        .into_iter()
        .filter(|(_, p)| p.starts_with(prefix))
        .collect();
    routes.extend(source_routes_under(prefix));
    routes
}

/// (METHOD, path) for every `.route(…)` in the source whose path starts with `prefix`.
fn source_routes_under(prefix: &str) -> BTreeSet<(String, String)> {
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

/// Where the snapshot of the document lives, and the variable that rewrites it.
const SNAPSHOT: &str = "docs/openapi.json";
const UPDATE: &str = "RENTCHECK_UPDATE_OPENAPI_SNAPSHOT";

/// Paths (JSON pointers) where two documents differ, the first few.
fn differences(a: &Value, b: &Value, at: &str, out: &mut Vec<String>) {
    if out.len() >= 20 {
        return;
    }
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for k in keys {
                let here = format!("{at}/{}", k.replace('~', "~0").replace('/', "~1"));
                match (x.get(k), y.get(k)) {
                    (Some(x), Some(y)) => differences(x, y, &here, out),
                    (Some(_), None) => out.push(format!("{here}: only in the served document")),
                    (None, Some(_)) => out.push(format!("{here}: only in {SNAPSHOT}")),
                    (None, None) => {}
                }
            }
        }
        _ if a != b => out.push(format!("{at}: served {a}, snapshot {b}")),
        _ => {}
    }
}

#[tokio::test]
async fn the_served_document_is_the_committed_snapshot() {
    let app = spawn_app().await;
    let res = app.get("/api/openapi.json").await;
    assert_eq!(res.status(), 200);
    assert!(res.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("application/json"));
    let served: Value = res.json().await.unwrap();
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(SNAPSHOT);
    if std::env::var(UPDATE).is_ok_and(|v| v == "1") {
        let mut text = serde_json::to_string_pretty(&served).unwrap();
        text.push('\n');
        std::fs::write(&path, text).unwrap();
        return;
    }
    let snapshot: Value = std::fs::read_to_string(&path)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or(Value::Null);
    let mut diff = Vec::new();
    differences(&served, &snapshot, "", &mut diff);
    assert!(
        diff.is_empty(),
        "/api/openapi.json differs from {SNAPSHOT} (the handlers' documents changed). If the change is \
         meant, rewrite the snapshot and commit it:\n\n    {UPDATE}=1 cargo test --test it openapi\n\n\
         Differences (first {}):\n  {}",
        diff.len(),
        diff.join("\n  ")
    );
}

#[tokio::test]
async fn openapi_describes_every_api_v1_route() {
    // An API route is registered with its document or not at all: no `.route("/api/v1…")` is left.
    let by_hand = source_routes_under("/api/v1");
    assert!(
        by_hand.is_empty(),
        "register these through the domain's OpenApiRouter with routes!(handler) and #[utoipa::path] \
         on the handler, so they are documented: {by_hand:?}"
    );
    let registered = registered_routes_under("/api/v1");
    assert!(registered.contains(&("POST".to_owned(), "/api/v1/briefs/{id}/evidence".to_owned())));
    assert!(registered.contains(&("PUT".to_owned(), "/api/v1/briefs/{id}".to_owned())));
    assert!(registered.contains(&("GET".to_owned(), "/api/v1/briefs".to_owned())));

    let app = spawn_app().await;
    let res = app.get("/api/openapi.json").await;
    assert_eq!(res.status(), 200);
    let doc: Value = res.json().await.unwrap();
    assert!(doc["openapi"].as_str().unwrap().starts_with("3."));
    // Tools (schemathesis, client generators) learn from the document how to authenticate.
    assert_eq!(doc["components"]["securitySchemes"]["bearer"]["scheme"], "bearer");
    assert_eq!(doc["security"][0]["bearer"], serde_json::json!([]));
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            let responses = op["responses"].as_object().unwrap();
            assert!(!responses.is_empty(), "{method} {path}");
            // Every error answer is a problem document, the common ones included.
            for status in ["400", "401", "403", "503"] {
                assert!(responses.contains_key(status), "{method} {path} lacks {status}");
            }
            for (status, r) in responses {
                if status.starts_with('4') || status.starts_with('5') {
                    assert!(
                        r["content"]["application/problem+json"]["schema"]["$ref"] == "#/components/schemas/Problem",
                        "{method} {path} {status} is not a problem document"
                    );
                }
            }
        }
    }
    let documented = documented(&doc);
    assert_eq!(documented, registered, "the served document is the generated one");
    // Every schema it refers to is in it.
    let text = doc.to_string();
    for reference in text.split("\"$ref\":\"").skip(1) {
        let target = &reference[..reference.find('"').unwrap()];
        let name = target.strip_prefix("#/components/schemas/").unwrap();
        assert!(
            doc["components"]["schemas"].get(name).is_some(),
            "{target} is not in the document"
        );
    }
    // The evidence upload keeps its three forms.
    let upload = &doc["paths"]["/api/v1/briefs/{id}/evidence"]["post"]["requestBody"]["content"];
    for form in ["application/json", "multipart/form-data", "*/*"] {
        assert!(upload.get(form).is_some(), "upload lacks {form}: {upload}");
    }

    // every documented operation is routed on the live server
    let id = uuid::Uuid::now_v7();
    for (method, path) in &documented {
        let url = app.url(
            &path
                .replace("{id}", &id.to_string())
                .replace("{tid}", &id.to_string())
                .replace("{uid}", &id.to_string())
                .replace("{wid}", &id.to_string())
                .replace("{jti}", &id.to_string())
                .replace("{n}", "1"),
        );
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

/// The answers `#[utoipa::path(... responses(...))]` names in `source`: each `body = …` type's last
/// path segment with whether the path went through a doc-only `schema` module, e.g.
/// `body = super::schema::Card` gives `("Card", true)`; `Vec<Row>` gives `("Row", false)`.
fn documented_answers(source: &str) -> Vec<(String, bool)> {
    let mut out = Vec::new();
    let mut rest = source;
    while let Some(at) = rest.find("#[utoipa::path(") {
        rest = &rest[at..];
        let Some(start) = rest.find("responses(") else { break };
        // the answers: up to the `)` that closes `responses(`
        let inner = &rest[start + "responses(".len()..];
        let mut depth = 1;
        let end = inner
            .char_indices()
            .find(|&(_, c)| {
                match c {
                    '(' => depth += 1,
                    ')' => depth -= 1,
                    _ => {}
                }
                depth == 0
            })
            .map_or(inner.len(), |(i, _)| i);
        for body in inner[..end].split("body = ").skip(1) {
            let ty: String = body
                .chars()
                .take_while(|c| c.is_alphanumeric() || matches!(c, '_' | ':' | '<' | '>'))
                .collect();
            let through_schema = ty.contains("schema::");
            for part in ty.split(['<', '>']).filter(|p| !p.is_empty()) {
                let name = part.rsplit("::").next().unwrap_or(part);
                if !matches!(name, "Vec" | "Option") {
                    out.push((name.to_owned(), through_schema));
                }
            }
        }
        rest = &inner[end..];
    }
    out
}

/// Names of the types in `source` that derive `ToSchema` but not `Serialize`: doc-only types,
/// which only a request body read field by field from a JSON map may be documented with.
fn doc_only_types(source: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut derives = String::new();
    for line in source.lines().map(str::trim) {
        if line.starts_with("#[") || line.starts_with("///") {
            derives.push_str(line);
            continue;
        }
        let def = ["pub struct ", "struct ", "pub enum ", "enum ", "pub(crate) struct "]
            .iter()
            .find_map(|k| line.strip_prefix(k));
        if let Some(def) = def {
            let name: String = def.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
            if derives.contains("ToSchema") && !derives.contains("Serialize") {
                out.insert(name);
            }
        }
        derives.clear();
    }
    out
}

/// Each documented answer that is not a type a handler sends: `Object`, a doc-only type, or a
/// type from a doc-only `schema` module.
fn answers_that_can_drift(sources: &[String]) -> Vec<String> {
    let doc_only: BTreeSet<String> = sources.iter().flat_map(|s| doc_only_types(s)).collect();
    let mut out = Vec::new();
    for (name, through_schema) in sources.iter().flat_map(|s| documented_answers(s)) {
        if name == "Object" || name == "Value" || through_schema || doc_only.contains(&name) {
            out.push(name);
        }
    }
    out.sort();
    out.dedup();
    out
}

#[test]
fn every_documented_answer_is_the_type_its_handler_sends() {
    let mut files = Vec::new();
    rust_files(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("server"),
        &mut files,
    );
    let sources: Vec<String> = files.iter().map(|f| std::fs::read_to_string(f).unwrap()).collect();
    assert!(
        sources.iter().any(|s| !documented_answers(s).is_empty()),
        "the check reads no answers: has #[utoipa::path] changed shape?"
    );
    let drift = answers_that_can_drift(&sources);
    assert!(
        drift.is_empty(),
        "these answers are documented by a type the handler does not send (Object, or a doc-only \
         ToSchema type without Serialize), so the document can drift from the answer; document the \
         Serialize + ToSchema type the handler returns instead: {drift:?}"
    );
}

#[test]
fn the_answer_check_refuses_doc_only_and_free_form_answers() {
    let handler = r#"
        #[utoipa::path(get, path = "/api/v1/x", request_body = super::schema::XBody,
            responses((status = 200, description = "x", body = super::schema::X),
                      (status = 201, description = "y", body = Vec<Sent>),
                      (status = 202, description = "z", body = Object)))]
        async fn x() {}
    "#;
    let types = r#"
        /// sent
        #[derive(Serialize, ToSchema)]
        pub struct Sent { a: u8 }
        #[derive(ToSchema)]
        #[allow(dead_code)]
        struct Described { a: u8 }
        #[derive(ToSchema, serde::Deserialize)]
        pub struct XBody { a: u8 }
    "#;
    let sources = [handler.to_owned(), types.to_owned()];
    assert_eq!(
        documented_answers(handler),
        [
            ("X".to_owned(), true),
            ("Sent".to_owned(), false),
            ("Object".to_owned(), false)
        ]
    );
    assert_eq!(
        doc_only_types(types),
        BTreeSet::from(["Described".to_owned(), "XBody".to_owned()])
    );
    assert_eq!(answers_that_can_drift(&sources), ["Object", "X"]);
    let sent_only = handler
        .replace("body = super::schema::X", "body = Sent")
        .replace("body = Object", "body = Sent");
    assert!(answers_that_can_drift(&[sent_only, types.to_owned()]).is_empty());
    let described = handler
        .replace("body = super::schema::X", "body = Described")
        .replace("body = Object", "body = Sent");
    assert_eq!(answers_that_can_drift(&[described, types.to_owned()]), ["Described"]);
}
