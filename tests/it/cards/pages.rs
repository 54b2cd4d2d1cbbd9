//! The brief page's timeline, lint and readiness checklist, and the card editor, as a signed-in person.

use crate::common;
use crate::common::builders::{BriefBuilder, EvidenceBuilder};

use common::{spawn_app, Person, TestApp};
use serde_json::json;

async fn post_form(app: &TestApp, person: &Person, path: &str, fields: &[(&str, &str)]) -> reqwest::Response {
    let mut form: Vec<(&str, &str)> = vec![("csrf_token", person.csrf.as_str())];
    form.extend_from_slice(fields);
    person.client.post(app.url(path)).form(&form).send().await.unwrap()
}

#[tokio::test]
async fn the_brief_page_shows_the_staged_timeline_lint_and_checklist() {
    let app = spawn_app().await;
    let manifest = "apiVersion: v1\nkind: Pod\nmetadata: { name: p }\nspec:\n  containers:\n    - name: c\n      image: vllm/vllm-openai:latest\n";
    let brief = BriefBuilder::new().k8s_manifest(manifest).create_id(&app).await;
    let res = EvidenceBuilder::metrics(json!({ "serving.ttft_p95_ms": 300 }))
        .stage(3)
        .post(&app, &brief)
        .await;
    let eid = res.json::<serde_json::Value>().await.unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let person = app.login_owner().await;
    let html = person
        .get(app.url(&format!("/briefs/{brief}")))
        .await
        .text()
        .await
        .unwrap();
    assert!(
        html.contains("id=\"stage-1\"") && html.contains("id=\"stage-5\""),
        "five stages"
    );
    assert!(html.contains("Environment smoke test") && html.contains("Failure test"));
    assert!(
        html.contains(&format!("href=\"/evidence/{eid}\"")),
        "a value links to its evidence"
    );
    assert!(
        html.contains(&format!("href=\"/briefs/{brief}/card\"")),
        "a link to the editor"
    );
    assert!(html.contains("uses the mutable tag latest"), "lint findings are shown");
    assert!(html.contains("Readiness checklist") && html.contains("A load test is recorded"));
    assert!(
        !html.contains("checked by rentcheck"),
        "no stage-3 load-test evidence yet"
    );

    // A stage-3 bench-serving upload pre-checks "load test recorded".
    let bench = common::fixture("bench-serving/vllm-bench-serve-p95-failed-requests.json");
    let res = app
        .post_raw_evidence(&brief, "kind=bench-serving&stage=3", "application/json", bench)
        .await;
    assert_eq!(res.status(), 201);
    let html = person
        .get(app.url(&format!("/briefs/{brief}")))
        .await
        .text()
        .await
        .unwrap();
    assert!(html.contains("checked by rentcheck: stage-3 load-test evidence exists"));

    // A person confirms an item with a link.
    let res = post_form(
        &app,
        &person,
        &format!("/briefs/{brief}/readiness"),
        &[("item", "fallback_path"), ("link", "https://wiki.example.com/fallback")],
    )
    .await;
    assert_eq!(res.status(), 303);
    let html = person
        .get(app.url(&format!("/briefs/{brief}")))
        .await
        .text()
        .await
        .unwrap();
    assert!(html.contains(&format!("by {}", person.email)));
    assert!(html.contains("https://wiki.example.com/fallback"));
    let bad = post_form(
        &app,
        &person,
        &format!("/briefs/{brief}/readiness"),
        &[("item", "fallback_path"), ("link", "www.example.com/runbook")],
    )
    .await;
    assert_eq!(bad.status(), 422);
    // The brief page again, the link as typed and the reason at its row (it was an error page
    // that lost the link).
    let page = bad.text().await.unwrap();
    assert!(
        page.contains("value=\"www.example.com/runbook\" aria-invalid=\"true\" aria-describedby=\"readiness-fallback_path-error\""),
        "{page}"
    );
    assert!(page.contains("The link is not a link we can keep: give an address starting with https://"));
    let bad = post_form(
        &app,
        &person,
        &format!("/briefs/{brief}/readiness"),
        &[("item", "fallback_path"), ("link", "javascript:alert(1)")],
    )
    .await;
    assert_eq!(bad.status(), 422);
    assert!(
        !bad.text().await.unwrap().contains("href=\"javascript:"),
        "never a link"
    );
    let bad = post_form(
        &app,
        &person,
        &format!("/briefs/{brief}/readiness"),
        &[("item", "nope")],
    )
    .await;
    assert_eq!(bad.status(), 422);
    let no_csrf = person
        .client
        .post(app.url(&format!("/briefs/{brief}/readiness")))
        .form(&[("item", "fallback_path")])
        .send()
        .await
        .unwrap();
    assert_eq!(no_csrf.status(), 403);
    assert_eq!(app.count("readiness_confirmations").await, 1);
}

#[tokio::test]
async fn the_editor_saves_revisions_and_re_renders_errors() {
    let app = spawn_app().await;
    let brief = app.brief_id().await;
    let person = app.login_owner().await;
    let path = format!("/briefs/{brief}/card");
    let html = person.get(app.url(&path)).await.text().await.unwrap();
    assert!(html.contains("Default card"));
    let row = |key: &str| -> String {
        let at = html.find(&format!("value=\"{key}\"")).unwrap();
        let start = html[..at].rfind("name=\"c").unwrap() + 6;
        html[start..].split('.').next().unwrap().to_owned()
    };
    let ttft = row("serving.ttft_p95_ms");

    // An ordering operator on a boolean, and an unknown key added: the form comes back with messages.
    let dcgm = row("dcgm.diag.passed");
    let res = post_form(
        &app,
        &person,
        &path,
        &[
            (&format!("{dcgm}.key"), "dcgm.diag.passed"),
            (&format!("{dcgm}.op"), "ge"),
            (&format!("{dcgm}.threshold"), "true"),
            (&format!("{dcgm}.stage"), "1"),
            (&format!("{dcgm}.required"), "on"),
            ("new.key", "team.custom"),
            ("new.op", "ge"),
            ("new.threshold", "1"),
            ("new.stage", "2"),
        ],
    )
    .await;
    assert_eq!(res.status(), 422);
    let page = res.text().await.unwrap();
    assert!(page.contains("ge compares numbers"), "{page}");
    assert!(page.contains("team.custom is not a metric key"), "the warning is shown");
    assert!(page.contains("value=\"team.custom\""), "the typed row is kept");
    assert_eq!(app.count("card_revisions").await, 0);

    // A valid save: one row kept with a new threshold, one added.
    let res = post_form(
        &app,
        &person,
        &path,
        &[
            (&format!("{ttft}.key"), "serving.ttft_p95_ms"),
            (&format!("{ttft}.op"), "le"),
            (&format!("{ttft}.threshold"), "450"),
            (&format!("{ttft}.unit"), "ms"),
            (&format!("{ttft}.stage"), "3"),
            (&format!("{ttft}.required"), "on"),
            ("new.key", "team.custom"),
            ("new.op", "ge"),
            ("new.threshold", "1"),
            ("new.stage", "2"),
        ],
    )
    .await;
    assert_eq!(res.status(), 303);
    let c: serde_json::Value = app
        .get(&format!("/api/v1/briefs/{brief}/card"))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(c["revision"], 1);
    assert_eq!(c["criteria"].as_array().unwrap().len(), 2);
    assert_eq!(c["criteria"][0]["threshold"], 450.0);
    assert_eq!(c["criteria"][1]["required"], false, "an unchecked box is not required");
    let html = person.get(app.url(&path)).await.text().await.unwrap();
    assert!(html.contains("Revision 1."));
    assert!(html.contains("team.custom is not a metric key"));
    let rev = person
        .get(app.url(&format!("/briefs/{brief}/card/revisions/1")))
        .await
        .text()
        .await
        .unwrap();
    assert!(rev.contains("the generated default card") && rev.contains("Removed") && rev.contains("Added"));
    assert!(rev.contains(&person.email));
}

#[tokio::test]
async fn the_brief_page_shows_each_measured_value_with_its_unit_as_the_review_does() {
    use rentcheck::{auth::Role, config::AppConfig, demo, state::AppState};
    let app = spawn_app().await;
    let state = AppState::new(app.pool.clone(), AppConfig::default(), app.keys.clone());
    let loaded = demo::load(&state).await.unwrap();
    let person = app.login(Role::Engineer).await;
    let get = |path: String| {
        let person = &person;
        let app = &app;
        async move { person.get(app.url(&path)).await.text().await.unwrap() }
    };
    let brief = get(format!("/briefs/{}", loaded.brief_id)).await;
    let review = get(format!("/briefs/{}/review", loaded.brief_id)).await;
    // The NCCL bus bandwidth and the first-token latency: the same text, unit included, on both
    // pages ("481 GB/s", not "480.6").
    let json: serde_json::Value = app
        .get(&format!("/api/v1/briefs/{}/review", loaded.brief_id))
        .await
        .json()
        .await
        .unwrap();
    for (key, unit) in [("nccl.busbw_peak_gbps", "GB/s"), ("serving.ttft_p95_ms", "ms")] {
        let value = json["criteria"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["key"] == key)
            .unwrap_or_else(|| panic!("{key} on the card"))["value"]
            .clone();
        let shown = rentcheck::figures::measured(&value, unit);
        assert!(shown.ends_with(unit), "{shown}");
        assert!(
            brief.contains(&format!(">{shown}<")),
            "{key}: {shown} on the brief page"
        );
        assert!(review.contains(&shown), "{key}: {shown} on the review");
        let bare = rentcheck::figures::value(&value);
        assert!(!brief.contains(&format!(">{bare}<")), "{key}: never the bare {bare}");
    }
}
