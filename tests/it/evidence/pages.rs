//! The evidence list on the brief page and the `/evidence/{eid}` page.

use crate::common;

use rentcheck::auth::Role;

use common::{fixture, spawn_app};
use serde_json::Value;

async fn upload(app: &common::TestApp, brief: &str, query: &str, bytes: Vec<u8>) -> String {
    let res = app.post_raw_evidence(brief, query, "text/plain", bytes).await;
    assert_eq!(res.status(), 201);
    let body: Value = res.json().await.unwrap();
    body["id"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn brief_page_lists_evidence_with_links() {
    let app = spawn_app().await;
    let viewer = app.login(Role::Engineer).await;
    let brief = app.brief_id().await;
    let page = viewer
        .get(app.url(&format!("/briefs/{brief}")))
        .await
        .text()
        .await
        .unwrap();
    assert!(page.contains("No evidence yet"));
    let ok = upload(
        &app,
        &brief,
        "kind=nvidia-smi-list&stage=1",
        fixture("nvidia-smi-list/h200-x8.txt"),
    )
    .await;
    let failed = upload(
        &app,
        &brief,
        "kind=nvidia-smi-list&stage=2",
        fixture("nvidia-smi-list/driver-failure.txt"),
    )
    .await;
    let res = viewer.get(app.url(&format!("/briefs/{brief}"))).await;
    assert_eq!(res.status(), 200);
    let page = res.text().await.unwrap();
    assert!(page.contains(&format!("href=\"/evidence/{ok}\"")), "{page}");
    assert!(page.contains(&format!("href=\"/evidence/{failed}\"")));
    assert!(page.contains("<span class=\"badge ok\">ok</span>"));
    assert!(page.contains("<span class=\"badge bad\">failed</span>"));
    // newest first (within the evidence list: the card's timeline above links evidence too)
    let list = &page[page.find("id=\"evidence\"").unwrap()..];
    assert!(list.find(&failed).unwrap() < list.find(&ok).unwrap());
}

#[tokio::test]
async fn evidence_page_shows_metrics_warnings_and_escaped_raw_text() {
    let app = spawn_app().await;
    let viewer = app.login(Role::Engineer).await;
    let brief = app.brief_id().await;
    let id = upload(
        &app,
        &brief,
        "kind=nvidia-smi-list&stage=1",
        fixture("nvidia-smi-list/l4-x2-truncated.txt"),
    )
    .await;
    let res = viewer.get(app.url(&format!("/evidence/{id}"))).await;
    assert_eq!(res.status(), 200);
    let page = res.text().await.unwrap();
    assert!(page.contains("<code>gpu.count</code></td><td>2</td>"), "{page}");
    assert!(page.contains("Warnings"));
    assert!(page.contains("badge warn"));
    assert!(page.contains(&format!("href=\"/api/v1/evidence/{id}/raw\"")));

    let hostile = b"<script>alert(1)</script>\n& \"quoted\"\n".to_vec();
    let id = upload(
        &app,
        &brief,
        "kind=log&stage=1&label.note=%3Cb%3Ebold%3C%2Fb%3E",
        hostile,
    )
    .await;
    let page = viewer
        .get(app.url(&format!("/evidence/{id}")))
        .await
        .text()
        .await
        .unwrap();
    assert!(!page.contains("<script>alert(1)</script>"), "{page}");
    assert!(
        page.contains("&#60;script&#62;alert(1)&#60;/script&#62;")
            || page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
        "{page}"
    );
    assert!(!page.contains("<b>bold</b>"));
    assert!(page.contains("<pre class=\"raw\">"));
}

#[tokio::test]
async fn binary_evidence_is_offered_as_a_download_and_errors_are_pages() {
    let app = spawn_app().await;
    let viewer = app.login(Role::Engineer).await;
    let brief = app.brief_id().await;
    let id = upload(&app, &brief, "kind=metrics&stage=1", fixture("metrics/non-utf8.bin")).await;
    let page = viewer
        .get(app.url(&format!("/evidence/{id}")))
        .await
        .text()
        .await
        .unwrap();
    assert!(page.contains("not UTF-8"), "{page}");
    assert!(!page.contains("<pre class=\"raw\">"));
    assert!(page.contains("line 1, column 20"));
    assert!(page.contains(&format!("/api/v1/evidence/{id}/raw")));

    let res = viewer
        .get(app.url(&format!("/evidence/{}", uuid::Uuid::now_v7())))
        .await;
    assert_eq!(res.status(), 404);
    assert!(res.headers()["content-type"].to_str().unwrap().starts_with("text/html"));
}
