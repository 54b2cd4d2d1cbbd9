//! The briefs list (`GET /api/v1/briefs` and the dashboard): every brief a page at a time by
//! cursor, filtered by summary state, owner, team, needs-approval, stale and failing, found by name
//! or model, and never answering from a summary older than the last committed write.

use std::{collections::BTreeSet, time::Duration};

use crate::common;
use crate::common::builders::{BriefBuilder, EvidenceBuilder};

use common::{bearer_client, spawn_app, TestApp};
use rentcheck::{
    auth::{
        teams,
        token::{self, NewToken},
        Role,
    },
    config::AppConfig,
    review::summaries,
    state::AppState,
};
use serde_json::{json, Value};

/// The names listed at `query`, in order, with the next cursor.
async fn names(app: &TestApp, client: &reqwest::Client, query: &str) -> (Vec<String>, Option<String>) {
    let res = client
        .get(app.url(&format!("/api/v1/briefs{query}")))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200, "{query}");
    let body: Value = res.json().await.unwrap();
    let names = body["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["name"].as_str().unwrap().to_owned())
        .collect();
    (names, body["next_cursor"].as_str().map(str::to_owned))
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|s| s.to_string()).collect()
}

#[tokio::test]
async fn the_api_lists_every_brief_a_page_at_a_time_by_cursor() {
    let app = spawn_app().await;
    for i in 0..7 {
        BriefBuilder::new().name(format!("Brief {i}")).create(&app).await;
    }
    let mut seen = Vec::new();
    let mut query = "?limit=3".to_owned();
    let mut pages = 0;
    loop {
        let (page, next) = names(&app, &app.client, &query).await;
        pages += 1;
        seen.extend(page);
        match next {
            Some(c) => query = format!("?limit=3&cursor={c}"),
            None => break,
        }
    }
    assert_eq!(pages, 3, "7 briefs in pages of 3");
    let expected: Vec<String> = (0..7).rev().map(|i| format!("Brief {i}")).collect();
    assert_eq!(seen, expected, "newest first, each brief once");

    // Each item carries its summary.
    let body: Value = app.get("/api/v1/briefs?limit=1").await.json().await.unwrap();
    let summary = &body["items"][0]["summary"];
    assert_eq!(summary["state"], "awaiting-evidence", "{body}");
    assert_eq!(summary["evidence_count"], 0);
    assert!(body["items"][0]["sizing"].is_object());

    for bad in [
        "?limit=0",
        "?limit=201",
        "?cursor=garbage",
        "?state=pending",
        "?stale=perhaps",
    ] {
        let res = app.get(&format!("/api/v1/briefs{bad}")).await;
        assert!(
            res.status() == 400 || res.status() == 422,
            "{bad} answered {}",
            res.status()
        );
        assert_eq!(res.headers()["content-type"], "application/problem+json", "{bad}");
    }
}

#[tokio::test]
async fn filters_read_summaries_that_are_current_the_moment_a_write_commits() {
    let app = spawn_app().await;
    let failing = BriefBuilder::new().name("Failing node").create_id(&app).await;
    BriefBuilder::new().name("Waiting for evidence").create(&app).await;
    let decided = BriefBuilder::new()
        .name("Decided then stale")
        .model("Qwen/Qwen2.5-72B-Instruct")
        .create_id(&app)
        .await;

    // A failed GPU diagnostic: asked right after the upload, the list already knows (the summary
    // is remade as the list reads it, not when the watcher comes by).
    let res = EvidenceBuilder::failed_diag().post(&app, &failing).await;
    assert_eq!(res.status(), 201);
    assert_eq!(names(&app, &app.client, "?failing=true").await.0, vec!["Failing node"]);
    assert_eq!(
        names(&app, &app.client, "?state=awaiting-evidence").await.0,
        vec!["Decided then stale", "Waiting for evidence"]
    );

    // Evidence, a rejection, then newer evidence: stale.
    let metrics = json!({ "kind": "metrics", "stage": 3, "data": { "metrics": { "serving.ttft_p95_ms": 300 } } });
    let res = app
        .post_json(&format!("/api/v1/briefs/{decided}/evidence"), &metrics)
        .await;
    assert_eq!(res.status(), 201);
    let review: Value = app
        .get(&format!("/api/v1/briefs/{decided}/review"))
        .await
        .json()
        .await
        .unwrap();
    let manager = bearer_client(&app.token(Role::Manager, None).await);
    let res = manager
        .post(app.url(&format!("/api/v1/briefs/{decided}/approvals")))
        .json(&json!({ "verdict": "reject", "comment": "Too slow.", "inputs_digest": review["inputs_digest"] }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 201);
    assert_eq!(
        names(&app, &manager, "?state=rejected").await.0,
        vec!["Decided then stale"]
    );
    assert!(names(&app, &manager, "?stale=true").await.0.is_empty());
    let res = app
        .post_json(&format!("/api/v1/briefs/{decided}/evidence"), &metrics)
        .await;
    assert_eq!(res.status(), 201);
    assert_eq!(names(&app, &manager, "?stale=true").await.0, vec!["Decided then stale"]);
    assert_eq!(
        names(&app, &manager, "?needs_approval=true").await.0,
        vec!["Decided then stale", "Failing node"]
    );
    assert_eq!(
        names(&app, &manager, "?needs_approval=true&stale=false").await.0,
        vec!["Failing node"]
    );
    assert_eq!(names(&app, &manager, "?q=qwen").await.0, vec!["Decided then stale"]);
    assert_eq!(
        names(&app, &manager, "?q=qwen&failing=true").await.0,
        Vec::<String>::new()
    );

    // Owner and team: another engineer's brief, shared with a team.
    let other_email = app.user(Role::Engineer).await;
    let other_id = common::person(&app.pool, &other_email, Role::Engineer).await;
    let (other_token, _) = token::mint(
        &app.pool,
        &app.keys,
        NewToken {
            name: "list test".into(),
            subject: other_email.clone(),
            role: Role::Engineer,
            brief: None,
            trial: None,
            ttl: chrono::Duration::hours(1),
            created_by: Some(other_id),
        },
    )
    .await
    .unwrap();
    let other = bearer_client(&other_token);
    let res = other
        .post(app.url("/api/v1/briefs"))
        .json(&BriefBuilder::new().name("Someone else's").json())
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 201);
    let theirs: Value = res.json().await.unwrap();
    let team = teams::create_team(&app.pool, "Serving").await.unwrap();
    teams::share(&app.pool, theirs["id"].as_str().unwrap().parse().unwrap(), team.id)
        .await
        .unwrap();

    let mine: BTreeSet<String> = names(&app, &app.client, "?owner=me").await.0.into_iter().collect();
    assert_eq!(
        mine,
        set(&["Failing node", "Waiting for evidence", "Decided then stale"])
    );
    assert_eq!(names(&app, &other, "?owner=me").await.0, vec!["Someone else's"]);
    assert_eq!(
        names(&app, &manager, &format!("?owner={other_email}")).await.0,
        vec!["Someone else's"]
    );
    assert_eq!(names(&app, &manager, "?team=Serving").await.0, vec!["Someone else's"]);
    assert_eq!(
        names(&app, &manager, &format!("?team={}", team.id)).await.0,
        vec!["Someone else's"]
    );
    let res = manager.get(app.url("/api/v1/briefs?team=Nobody")).send().await.unwrap();
    assert_eq!(res.status(), 422);
    let res = manager
        .get(app.url("/api/v1/briefs?owner=nobody@example.com"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 422);
    // An id no account has is refused the same way as an unknown email.
    let res = manager
        .get(app.url(&format!("/api/v1/briefs?owner={}", uuid::Uuid::new_v4())))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 422);

    // A token limited to one brief lists that brief alone, and only when it meets the filter.
    let scoped = bearer_client(&app.token(Role::Engineer, Some(failing.parse().unwrap())).await);
    assert_eq!(names(&app, &scoped, "").await.0, vec!["Failing node"]);
    assert!(names(&app, &scoped, "?state=awaiting-evidence").await.0.is_empty());

    // The dashboard shows the same views.
    let owner = app.login_owner().await;
    let page = owner.get(app.url("/?owner=me")).await.text().await.unwrap();
    assert!(
        page.contains("Failing node") && !page.contains("Someone else"),
        "{page}"
    );
    let page = owner.get(app.url("/?team=Serving")).await.text().await.unwrap();
    assert!(page.contains("Someone else") && !page.contains("Failing node"));
    let page = owner.get(app.url("/?show=stale")).await.text().await.unwrap();
    assert!(page.contains("Decided then stale") && !page.contains("Failing node"));
    let res = owner.get(app.url("/?team=Nobody")).await;
    assert_eq!(res.status(), 400);
}

/// A list only reads: a brief whose summary is not current is listed by its review as it is now,
/// but the GET stores no summary, takes no queued change and tells no webhook; the watcher's round
/// does, afterwards.
#[tokio::test]
async fn a_list_read_writes_nothing_and_tells_no_webhook() {
    let app = spawn_app().await;
    let id = BriefBuilder::new().name("Failing node").create_id(&app).await;
    sqlx::query(
        "INSERT INTO webhooks (id, url, events, secret, created_by) \
         VALUES (gen_random_uuid(), 'https://hooks.example/x', ARRAY['decision.changed'], 's', 'test')",
    )
    .execute(&app.pool)
    .await
    .unwrap();
    // The watcher's round keeps the brief's first summary: its baseline.
    let state = AppState::new(app.pool.clone(), AppConfig::default(), app.keys.clone());
    summaries::refresh_changed(&state, 100, Duration::ZERO).await.unwrap();
    let stored = || async {
        sqlx::query_as::<_, (String, bool)>("SELECT decision, failing FROM review_summaries WHERE brief_id = $1")
            .bind(id.parse::<uuid::Uuid>().unwrap())
            .fetch_one(&app.pool)
            .await
            .unwrap()
    };
    let before = stored().await;
    assert!(!before.1);

    let res = EvidenceBuilder::failed_diag().post(&app, &id).await;
    assert_eq!(res.status(), 201);
    let queued = app.count("review_changes").await;
    assert!(queued > 0);
    assert_eq!(names(&app, &app.client, "?failing=true").await.0, vec!["Failing node"]);
    let owner = app.login_owner().await;
    let page = owner.get(app.url("/?show=failing")).await.text().await.unwrap();
    assert!(page.contains("Failing node"), "{page}");
    assert_eq!(stored().await, before, "the reads stored no summary");
    assert_eq!(app.count("review_changes").await, queued, "nor took a queued change");
    assert_eq!(app.count("webhook_events").await, 0, "nor told a webhook");

    summaries::refresh_changed(&state, 100, Duration::ZERO).await.unwrap();
    assert!(stored().await.1, "the watcher's round keeps the new summary");
    assert_eq!(app.count("webhook_events").await, 1, "and tells the decision's change");
}

/// The briefs' names on a dashboard page, in order, and its "Next page" link.
fn dashboard_names(page: &str) -> (Vec<String>, Option<String>) {
    let names = page
        .split("<tr data-brief=")
        .skip(1)
        .filter_map(|row| {
            let cell = &row[row.find("<td><a href=\"/briefs/")?..];
            let text = &cell[cell.find("\">")? + 2..];
            Some(text[..text.find("</a>")?].to_owned())
        })
        .collect();
    let next = page.find("\" rel=\"next\" id=\"next-page\"").map(|end| {
        let start = page[..end].rfind("href=\"").unwrap() + "href=\"".len();
        page[start..end].replace("&#38;", "&").replace("&amp;", "&")
    });
    (names, next)
}

#[tokio::test]
async fn the_dashboard_sorts_the_whole_list_not_one_page() {
    let app = spawn_app().await;
    // The first brief made is the first by name: newest first it is on the second page.
    BriefBuilder::new().name("Aardvark chat").create(&app).await;
    for i in 0..29 {
        BriefBuilder::new().name(format!("Brief {i:02}")).create(&app).await;
    }
    let owner = app.login_owner().await;

    let (newest, next) = dashboard_names(&owner.get(app.url("/")).await.text().await.unwrap());
    assert_eq!(newest.len(), 25);
    assert!(
        !newest.contains(&"Aardvark chat".to_owned()),
        "newest first it is on page 2"
    );
    assert!(next.unwrap().contains("after="));

    let (by_name, next) = dashboard_names(&owner.get(app.url("/?sort=name")).await.text().await.unwrap());
    assert_eq!(by_name.len(), 25);
    assert_eq!(
        by_name[0], "Aardvark chat",
        "sorted across every page, not within the first"
    );
    assert_eq!(by_name[1..4], ["Brief 00", "Brief 01", "Brief 02"]);
    let next = next.expect("a next page");
    assert!(next.contains("sort=name") && next.contains("page=2"), "{next}");
    let (rest, after_that) = dashboard_names(&owner.get(app.url(&next)).await.text().await.unwrap());
    assert_eq!(rest, ["Brief 24", "Brief 25", "Brief 26", "Brief 27", "Brief 28"]);
    assert_eq!(after_that, None);

    // Reversed, Z to A across every page, and the total counts every page.
    let page = owner
        .get(app.url("/?sort=name&dir=reversed"))
        .await
        .text()
        .await
        .unwrap();
    assert!(page.contains("30 briefs in this view"), "the total of every page");
    let (reversed, next) = dashboard_names(&page);
    assert_eq!(reversed[..3], ["Brief 28", "Brief 27", "Brief 26"]);
    let next = next.expect("a next page");
    assert!(next.contains("dir=reversed") && next.contains("page=2"), "{next}");
    let (rest, _) = dashboard_names(&owner.get(app.url(&next)).await.text().await.unwrap());
    assert_eq!(rest.last().map(String::as_str), Some("Aardvark chat"));
    // The oldest first: the reverse of the default order.
    let (oldest, _) = dashboard_names(&owner.get(app.url("/?dir=reversed")).await.text().await.unwrap());
    assert_eq!(oldest[..2], ["Aardvark chat", "Brief 00"]);

    let res = owner.get(app.url("/?sort=name&page=0")).await;
    assert_eq!(res.status(), 400, "a damaged page number is refused, not a 500");
    let res = owner.get(app.url("/?sort=name&dir=up")).await;
    assert_eq!(res.status(), 400, "an unknown direction is refused, not a 500");
}
