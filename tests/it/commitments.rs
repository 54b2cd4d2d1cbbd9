//! Commitments over the public API: an approved reservation opens one, its use per calendar month
//! is read from the ledger (every figure worked out here by hand), who sees which, and a manager's
//! changes. The clock is moved by writing the term's dates in the database.

use crate::common;
use crate::common::builders::{
    BriefBuilder, CardBuilder, EvidenceBuilder, LedgerBuilder, LedgerLine, PriceRow, PriceSheet, TrialBuilder,
};

use common::{
    bearer_client, spawn_app,
    vllm_points::{load_card, load_point, targets, Load},
    TestApp,
};
use rentcheck::auth::{
    token::{self, NewToken},
    users, Role,
};
use rust_decimal::Decimal;
use serde_json::{json, Value};
use uuid::Uuid;

fn dec(s: &str) -> Decimal {
    s.parse().unwrap()
}

fn decimal(v: &Value) -> Decimal {
    v.as_str()
        .unwrap_or_else(|| panic!("{v} is not a decimal string"))
        .parse()
        .unwrap()
}

/// A brief whose trial (8 × H100 SXM at Cloud A) met its card and was busy 65 % of one billed day,
/// with Cloud A's on-demand (3.50) and reserved (2.10) rows: the review decides reserve. Answers
/// (brief, trial, the review's digest).
async fn reserving_brief(app: &TestApp) -> (String, String, String) {
    let brief = BriefBuilder::new()
        .targets(targets())
        .trial_gpu("H100 SXM", 8)
        .max_cost_per_job("1")
        .create_id(app)
        .await;
    CardBuilder::of(load_card()).save(app, &brief).await;
    let trial = TrialBuilder::first_of(app, &brief)
        .await
        .provider("Cloud A")
        .without_rate()
        .save(app)
        .await;
    PriceSheet::new()
        .row(PriceRow::new("Cloud A", "H100 SXM", 8, "3.50").source("quote 12"))
        .row(
            PriceRow::new("Cloud A", "H100 SXM", 8, "2.10")
                .reserved()
                .source("quote 12 (1 year)"),
        )
        .import(app)
        .await;
    EvidenceBuilder::bench_serving(&load_point(Load::at(8.0, 25.3).queued(20.0)))
        .trial(&trial)
        .upload(app, &brief)
        .await;
    // 192 GPU-hours billed, 67.2 idle: 0.65 busy, the break-even 0.60 + 0.05.
    LedgerBuilder::new()
        .line(
            LedgerLine::accelerator("node-a", "2026-11-01T00:00:00Z", "2026-11-02T00:00:00Z", 8, "3.50").trial(&trial),
        )
        .accepted(1000)
        .idle_hours("67.2")
        .save(app, &brief)
        .await;
    let review: Value = app
        .get(&format!("/api/v1/briefs/{brief}/review"))
        .await
        .json()
        .await
        .unwrap();
    let t = review["trials"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["trial"] == json!(trial))
        .unwrap();
    assert_eq!(t["decision"], "reserve", "{t}");
    (brief, trial, review["inputs_digest"].as_str().unwrap().to_owned())
}

async fn approve(app: &TestApp, brief: &str, digest: &str) -> Value {
    let res = bearer_client(&app.token(Role::Manager, None).await)
        .post(app.url(&format!("/api/v1/briefs/{brief}/approvals")))
        .json(&json!({ "verdict": "approve", "inputs_digest": digest }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 201, "{}", res.text().await.unwrap());
    res.json().await.unwrap()
}

async fn audit_count(app: &TestApp, action: &str) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM audit_log WHERE action = $1")
        .bind(action)
        .fetch_one(&app.pool)
        .await
        .unwrap()
}

/// A token of a new engineer who owns no brief.
async fn stranger(app: &TestApp) -> reqwest::Client {
    engineer_in(app, None).await
}

/// An engineer of no brief, in `team` when given, signed in with a token.
async fn engineer_in(app: &TestApp, team: Option<rentcheck::ids::TeamId>) -> reqwest::Client {
    let email = app.user(Role::Engineer).await;
    let user = users::by_email(&app.pool, &email).await.unwrap().unwrap();
    if let Some(team) = team {
        rentcheck::auth::teams::add_member(&app.pool, team, user.id)
            .await
            .unwrap();
    }
    let (signed, _) = token::mint(
        &app.pool,
        &app.keys,
        NewToken {
            name: "stranger".into(),
            subject: email,
            role: Role::Engineer,
            brief: None,
            trial: None,
            ttl: chrono::Duration::hours(1),
            created_by: Some(user.id),
        },
    )
    .await
    .unwrap();
    bearer_client(&signed)
}

#[tokio::test]
async fn an_approved_reservation_opens_a_commitment_measured_per_month_from_the_ledger() {
    let app = spawn_app().await;
    let (brief, trial, digest) = reserving_brief(&app).await;
    let approval = approve(&app, &brief, &digest).await;
    let manager = bearer_client(&app.token(Role::Manager, None).await);

    // One commitment, exactly the approval's reservation: 8 GPUs (one node, no expected peak) at
    // the reserved 2.10, 8 × 2.10 × 730 = 12,264 a month, for 12 months from the approval's start.
    let list: Value = manager
        .get(app.url("/api/v1/commitments"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let items = list["items"].as_array().unwrap();
    assert_eq!(items.len(), 1, "{list}");
    let c = &items[0];
    assert_eq!(c["brief"], json!(brief));
    assert_eq!(c["trial"], json!(trial));
    assert_eq!(c["approval_id"], approval["id"]);
    assert_eq!((c["gpus"].clone(), c["gpus_per_node"].clone()), (json!(8), json!(8)));
    assert_eq!(c["billing"], "reserved");
    assert_eq!(decimal(&c["rate_per_gpu_hour"]), dec("2.10"));
    assert_eq!(decimal(&c["on_demand_rate_per_gpu_hour"]), dec("3.50"));
    assert_eq!(decimal(&c["monthly_cost"]), dec("12264"));
    assert_eq!(c["term_months"], 12);
    assert_eq!(c["start_date"], approval["reservation"]["start_date"]);
    assert_eq!(c["state"], "active");
    assert_eq!(c["revalidate_every_days"], 30);
    assert!(c["months"].as_array().unwrap().is_empty(), "it starts tomorrow: {c}");
    assert_eq!(audit_count(&app, "commitment.opened").await, 1);
    let cid = c["id"].as_str().unwrap().to_owned();

    // Move the clock: the term began on 2026-09-01 (and so ends on 2027-08-31).
    set_term(&app, Uuid::parse_str(&cid).unwrap(), "2026-09-01", "2027-08-31").await;
    // The reserved node ran 15 days of September and all of October; a second trial of the brief
    // ran 4 GPUs for 10 days of September. The trial now reports 902.4 idle GPU-hours of its
    // 2880 + 5952 + 192 = 9024 billed: an idle share of 0.1.
    let spare = TrialBuilder::new()
        .name("spare")
        .provider("Cloud B")
        .gpus("H100 SXM", 4)
        .add_id(&app, &brief)
        .await;
    LedgerBuilder::new()
        .trial(&trial)
        .line(
            LedgerLine::accelerator("node-a", "2026-09-01T00:00:00Z", "2026-09-16T00:00:00Z", 8, "2.10").trial(&trial),
        )
        .line(
            LedgerLine::accelerator("node-a", "2026-10-01T00:00:00Z", "2026-11-01T00:00:00Z", 8, "2.10").trial(&trial),
        )
        .idle_hours("902.4")
        .save(&app, &brief)
        .await;
    LedgerBuilder::new()
        .trial(&spare)
        .line(
            LedgerLine::accelerator("node-b", "2026-09-10T00:00:00Z", "2026-09-20T00:00:00Z", 4, "3.00").trial(&spare),
        )
        .save(&app, &brief)
        .await;

    let res = app.get(&format!("/api/v1/commitments/{cid}")).await;
    assert_eq!(res.status(), 200, "the brief's owner reads it");
    let c: Value = res.json().await.unwrap();
    let month = |m: &str| {
        c["months"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["month"] == m)
            .unwrap_or_else(|| panic!("no {m} in {c}"))
            .clone()
    };
    // September: 30 days × 24 h × 8 GPUs = 5760 committed; 15 days × 24 × 8 = 2880 billed, 90 %
    // busy = 2592; utilization 2592 ÷ 5760 = 0.45. The brief billed 2880 + 4 × 240 = 3840:
    // coverage 5760 ÷ 3840 = 1.5. Idle: (5760 − 2592) × 2.10 = 6652.80; avoided: 2592 × 3.50 = 9072.
    let sep = month("2026-09");
    assert_eq!(decimal(&sep["committed_gpu_hours"]), dec("5760"));
    assert_eq!(decimal(&sep["busy_gpu_hours"]), dec("2592"));
    assert_eq!(decimal(&sep["utilization"]), dec("0.45"));
    assert_eq!(decimal(&sep["coverage"]), dec("1.5"));
    assert_eq!(decimal(&sep["idle_cost"]), dec("6652.80"));
    assert_eq!(decimal(&sep["on_demand_avoided"]), dec("9072"));
    // October: 31 × 24 × 8 = 5952 committed and billed, 5356.8 busy: 0.9; only this trial ran:
    // coverage 1. Idle 595.2 × 2.10 = 1249.92; avoided 5356.8 × 3.50 = 18748.80.
    let oct = month("2026-10");
    assert_eq!(decimal(&oct["committed_gpu_hours"]), dec("5952"));
    assert_eq!(decimal(&oct["busy_gpu_hours"]), dec("5356.8"));
    assert_eq!(decimal(&oct["utilization"]), dec("0.9"));
    assert_eq!(decimal(&oct["coverage"]), dec("1"));
    assert_eq!(decimal(&oct["idle_cost"]), dec("1249.92"));
    assert_eq!(decimal(&oct["on_demand_avoided"]), dec("18748.8"));
    assert_eq!(c["months"][0]["month"], "2026-09", "the first month is the term's");

    // Who sees it: the owner and managers; an engineer of no team of the brief does not.
    let other = stranger(&app).await;
    let theirs: Value = other
        .get(app.url("/api/v1/commitments"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(theirs["items"], json!([]), "{theirs}");
    let res = other
        .get(app.url(&format!("/api/v1/commitments/{cid}")))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 404);
    let ours: Value = app.get("/api/v1/commitments?state=active").await.json().await.unwrap();
    assert_eq!(ours["items"].as_array().unwrap().len(), 1);
    let res = app.get("/api/v1/commitments?state=paused").await;
    assert_eq!(res.status(), 422);

    // The list measures every commitment's months in one statement: the same figures as the
    // commitment's own answer, also where lines of one resource overlap (counted once, at the
    // larger GPU count). September's brief hours: node-a 2880; node-b 4 GPUs 10th–15th, then 6
    // GPUs 15th–25th: 4 × 120 + 6 × 240 = 1920; 4800 in all.
    LedgerBuilder::new()
        .trial(&spare)
        .line(
            LedgerLine::accelerator("node-b", "2026-09-15T00:00:00Z", "2026-09-25T00:00:00Z", 6, "3.00").trial(&spare),
        )
        .save(&app, &brief)
        .await;
    let one = listed_as_alone(&app, &cid).await;
    assert_eq!(decimal(&one["months"][0]["brief_gpu_hours"]), dec("4800"), "{one}");

    // Lines over the month's last midnight at odd minutes, overlapping: node-c 3 GPUs from 21:30 on
    // 30 September to 02:15 on 1 October, and 5 GPUs 23:00–01:00 inside it. September gains
    // 1.5 h × 3 + 1 h × 5 = 9.5 (4809.5); October 1 h × 5 + 1.25 h × 3 = 8.75 (5960.75). The list,
    // which reads the ledger's merge per day, says what the commitment's own answer says.
    LedgerBuilder::new()
        .trial(&spare)
        .line(
            LedgerLine::accelerator("node-c", "2026-09-30T21:30:00Z", "2026-10-01T02:15:00Z", 3, "3.00").trial(&spare),
        )
        .line(
            LedgerLine::accelerator("node-c", "2026-09-30T23:00:00Z", "2026-10-01T01:00:00Z", 5, "3.00").trial(&spare),
        )
        .save(&app, &brief)
        .await;
    let one = listed_as_alone(&app, &cid).await;
    assert_eq!(decimal(&one["months"][0]["brief_gpu_hours"]), dec("4809.5"), "{one}");
    assert_eq!(decimal(&one["months"][1]["brief_gpu_hours"]), dec("5960.75"), "{one}");
}

/// The commitment's own answer, after checking that the list (which sums the ledger's stored days)
/// gives it the same months and term (which its own answer merges from the lines).
async fn listed_as_alone(app: &TestApp, cid: &str) -> Value {
    let one: Value = app
        .get(&format!("/api/v1/commitments/{cid}"))
        .await
        .json()
        .await
        .unwrap();
    let listed: Value = app.get("/api/v1/commitments").await.json().await.unwrap();
    assert_eq!(listed["items"][0]["months"], one["months"], "{listed}");
    assert_eq!(listed["items"][0]["term"], one["term"]);
    one
}

/// Copies the test's one approval and its commitment `n` times (new ids, starts spread over 30
/// days, every fifth one ended), as `n` more approvals would have opened them.
async fn copies_of_the_commitment(app: &TestApp, n: i32) {
    sqlx::query(
        "INSERT INTO approvals SELECT (jsonb_populate_record(NULL::approvals, \
           to_jsonb(a) || jsonb_build_object('id', md5('approval-' || g)::uuid))).* \
         FROM approvals a, generate_series(1, $1) AS g",
    )
    .bind(n)
    .execute(&app.pool)
    .await
    .unwrap();
    sqlx::query(
        "INSERT INTO commitments SELECT (jsonb_populate_record(NULL::commitments, \
           to_jsonb(c) || jsonb_build_object('id', md5('commitment-' || g)::uuid, \
             'approval_id', md5('approval-' || g)::uuid, \
             'start_date', DATE '2026-03-01' + g % 30, 'end_date', DATE '2027-02-28' + g % 30, \
             'state', CASE WHEN g % 5 = 0 THEN 'ended' ELSE 'active' END))).* \
         FROM commitments c, generate_series(1, $1) AS g",
    )
    .bind(n)
    .execute(&app.pool)
    .await
    .unwrap();
}

#[tokio::test]
async fn the_list_comes_fifty_at_a_time_and_its_totals_count_every_page() {
    let app = spawn_app().await;
    let (brief, _trial, digest) = reserving_brief(&app).await;
    approve(&app, &brief, &digest).await;
    copies_of_the_commitment(&app, 120).await;
    // 121 commitments, 24 of the copies ended: 97 running at 12,264 a month each.
    let manager = bearer_client(&app.token(Role::Manager, None).await);
    let get = |path: String| {
        let manager = manager.clone();
        let url = app.url(&path);
        async move { manager.get(url).send().await.unwrap() }
    };
    let mut pages: Vec<Value> = Vec::new();
    let mut path = "/api/v1/commitments".to_owned();
    loop {
        let page: Value = get(path).await.json().await.unwrap();
        assert_eq!(page["total"], 121, "{page}");
        assert_eq!(
            page["totals_per_currency"],
            json!([{ "currency": "USD", "commitments": 97, "monthly_cost": "1189608" }]),
            "97 × 12,264, over every page"
        );
        assert_eq!(page["totals_per_team"][0]["commitments"], 97);
        let next = page["next_cursor"].as_str().map(str::to_owned);
        pages.push(page);
        match next {
            Some(cursor) => path = format!("/api/v1/commitments?cursor={cursor}"),
            None => break,
        }
    }
    let sizes: Vec<usize> = pages.iter().map(|p| p["items"].as_array().unwrap().len()).collect();
    assert_eq!(sizes, [50, 50, 21]);
    let starts: Vec<(String, String)> = pages
        .iter()
        .flat_map(|p| p["items"].as_array().unwrap().iter())
        .map(|c| {
            (
                c["start_date"].as_str().unwrap().to_owned(),
                c["id"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let mut newest_first = starts.clone();
    newest_first.sort_by(|a, b| b.cmp(a));
    newest_first.dedup();
    assert_eq!(starts, newest_first, "newest start first, none twice, none left out");

    // Another page size, one state paged the same way; a cursor this list did not write, or a page
    // of none, is refused at its field.
    let big: Value = get("/api/v1/commitments?limit=200".into()).await.json().await.unwrap();
    assert_eq!(
        (big["items"].as_array().unwrap().len(), big["next_cursor"].clone()),
        (121, Value::Null)
    );
    let ended: Value = get("/api/v1/commitments?state=ended".into())
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        (ended["total"].clone(), ended["next_cursor"].clone()),
        (json!(24), Value::Null)
    );
    for (query, field) in [
        ("cursor=yesterday", "cursor"),
        ("limit=0", "limit"),
        ("limit=201", "limit"),
    ] {
        let res = get(format!("/api/v1/commitments?{query}")).await;
        assert_eq!(res.status(), 422, "{query}");
        assert!(res.text().await.unwrap().contains(field), "{query}");
    }

    // The page says how many there are, how many it shows, and leads on and back.
    let people = app.login(Role::Manager).await;
    let html = people.get(app.url("/commitments")).await.text().await.unwrap();
    assert!(
        html.contains("121 commitments, newest start first, 50 on this page"),
        "{html}"
    );
    assert!(
        html.contains("97 running in USD: <strong>1,189,608 USD</strong> a month"),
        "{html}"
    );
    let first_cursor = pages[0]["next_cursor"].as_str().unwrap();
    let next = format!("href=\"/commitments?cursor={first_cursor}\" rel=\"next\"");
    assert!(html.contains(&next), "{next} in {html}");
    let last_cursor = pages[1]["next_cursor"].as_str().unwrap();
    let html = people
        .get(app.url(&format!("/commitments?cursor={last_cursor}")))
        .await
        .text()
        .await
        .unwrap();
    assert!(html.contains("21 on this page"), "{html}");
    assert!(html.contains("<a href=\"/commitments\">First page</a>"), "{html}");
    assert!(!html.contains("rel=\"next\""), "{html}");
    // The CSV export holds them all.
    let csv = people.get(app.url("/commitments.csv")).await.text().await.unwrap();
    assert_eq!(csv.lines().count(), 1 + 121);
}

#[tokio::test]
async fn a_manager_sets_the_providers_id_and_the_period_and_releases_it() {
    let app = spawn_app().await;
    let (brief, _, digest) = reserving_brief(&app).await;
    // Before the approval the plan's re-validation has no commitment to follow.
    let trials: Value = app
        .get(&format!("/api/v1/briefs/{brief}/trials"))
        .await
        .json()
        .await
        .unwrap();
    let first = trials["items"][0]["id"].as_str().unwrap().to_owned();
    let plan: Value = app
        .get(&format!("/api/v1/briefs/{brief}/trials/{first}/plan"))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(plan["revalidation"], Value::Null);
    approve(&app, &brief, &digest).await;
    let manager = bearer_client(&app.token(Role::Manager, None).await);
    let list: Value = manager
        .get(app.url("/api/v1/commitments"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let cid = list["items"][0]["id"].as_str().unwrap().to_owned();
    let start = list["items"][0]["start_date"].as_str().unwrap().to_owned();
    let url = app.url(&format!("/api/v1/commitments/{cid}"));

    // An engineer may not change it.
    let res = app
        .client
        .patch(&url)
        .json(&json!({ "revalidate_every_days": 7 }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 403);
    // Out of range, unknown fields, a release outside the term and an id of two lines are refused,
    // naming the field.
    let res = manager
        .patch(&url)
        .json(&json!({
            "revalidate_every_days": 0, "gpus": 4, "released_on": "2020-01-01",
            "provider_commitment_id": "ri-0abc123\nX-Injected: yes",
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 422);
    let problem: Value = res.json().await.unwrap();
    let fields: Vec<&str> = problem["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["field"].as_str().unwrap())
        .collect();
    assert_eq!(fields.len(), 4, "{problem}");
    for f in ["revalidate_every_days", "gpus", "released_on", "provider_commitment_id"] {
        assert!(fields.contains(&f), "{problem}");
    }

    let res = manager
        .patch(&url)
        .json(&json!({ "provider_commitment_id": "ri-0abc123", "revalidate_every_days": 14 }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200, "{}", res.text().await.unwrap());
    let c: Value = res.json().await.unwrap();
    assert_eq!(c["provider_commitment_id"], "ri-0abc123");
    assert_eq!(c["revalidate_every_days"], 14);
    assert_eq!(c["state"], "active");

    // The trial's plan schedules the re-validation from it: at 03:00 UTC on days 1, 15 and 29.
    let trial = c["trial"].as_str().unwrap();
    let plan: Value = app
        .get(&format!("/api/v1/briefs/{brief}/trials/{trial}/plan"))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        plan["revalidation"],
        json!({ "commitment": cid, "every_days": 14, "schedule": "0 3 */14 * *" })
    );
    let cron = app
        .get(&format!("/api/v1/briefs/{brief}/trials/{trial}/plan/cronjob.yaml"))
        .await
        .text()
        .await
        .unwrap();
    assert!(cron.contains("  schedule: \"0 3 */14 * *\"\n"), "{cron}");
    let page = app.owner_page(&format!("/briefs/{brief}/trials/{trial}/plan")).await;
    assert!(
        page.contains(&format!(
            "This trial is <a href=\"/commitments/{cid}\">committed</a>: a re-run is due every 14 days."
        )),
        "{page}"
    );
    // Cron's PATH has neither rentcheck nor the tools, and the GPU tools' stages stay out (the
    // node serves): the load stage alone, as the CronJobs run it.
    assert!(
        page.contains(&format!(
            "0 3 */14 * * PATH=$HOME/.cargo/bin:$HOME/.local/bin:/usr/local/bin:/usr/bin:/bin RENTCHECK_TOKEN_FILE=$HOME/.rentcheck-agent-token rentcheck collect --plan --rerun --stage 3 --server {} --brief {brief} --trial {trial}",
            rentcheck::config::AppConfig::default().public_url
        )),
        "{page}"
    );
    assert!(!page.contains("--rerun --stage 1"), "{page}");

    // Released on its first day: nothing is committed any more, and a release is final.
    let res = manager
        .patch(&url)
        .json(&json!({ "released_on": start }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200, "{}", res.text().await.unwrap());
    let c: Value = res.json().await.unwrap();
    assert_eq!(c["state"], "released");
    assert_eq!(c["days_left"], 0);
    assert!(c["state_reason"].as_str().unwrap().contains("released on"));
    let res = manager
        .patch(&url)
        .json(&json!({ "released_on": null }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 422, "null is not a date");
    assert_eq!(audit_count(&app, "commitment.changed").await, 2);
    let details: Value = sqlx::query_scalar(
        "SELECT details FROM audit_log WHERE action = 'commitment.changed' ORDER BY at DESC, id DESC LIMIT 1",
    )
    .fetch_one(&app.pool)
    .await
    .unwrap();
    assert_eq!(details["before"]["state"], "active");
    assert_eq!(details["after"]["state"], "released");
}

#[tokio::test]
async fn a_rejection_opens_no_commitment() {
    let app = spawn_app().await;
    let (brief, _, digest) = reserving_brief(&app).await;
    let res = bearer_client(&app.token(Role::Manager, None).await)
        .post(app.url(&format!("/api/v1/briefs/{brief}/approvals")))
        .json(&json!({ "verdict": "reject", "comment": "not this quarter", "inputs_digest": digest }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 201);
    assert_eq!(app.count("commitments").await, 0);
}

#[tokio::test]
async fn a_token_limited_to_one_brief_reads_that_briefs_commitments_and_no_others() {
    let app = spawn_app().await;
    let (brief, _, digest) = reserving_brief(&app).await;
    approve(&app, &brief, &digest).await;
    let cid = the_commitment(&app).await;
    let read = |token: String, path: String| {
        let app = &app;
        async move {
            let res = bearer_client(&token).get(app.url(&path)).send().await.unwrap();
            (res.status().as_u16(), res.json::<Value>().await.unwrap())
        }
    };
    let own = app.token(Role::Manager, Some(brief.parse().unwrap())).await;
    let (status, list) = read(own.clone(), "/api/v1/commitments".into()).await;
    assert_eq!(status, 200, "{list}");
    assert_eq!(list["items"].as_array().unwrap().len(), 1, "{list}");
    let (status, one) = read(own.clone(), format!("/api/v1/commitments/{cid}")).await;
    assert_eq!(
        (status, one["id"].as_str()),
        (200, Some(cid.to_string().as_str())),
        "{one}"
    );

    let other = app
        .token(Role::Manager, Some(app.brief_id().await.parse().unwrap()))
        .await;
    let (status, list) = read(other.clone(), "/api/v1/commitments".into()).await;
    assert_eq!(
        (status, list["items"].as_array().map(Vec::len)),
        (200, Some(0)),
        "{list}"
    );
    let (status, _) = read(other, format!("/api/v1/commitments/{cid}")).await;
    assert_eq!(status, 404, "another brief's commitment is not there for this token");

    // Reading only: a change still needs a token that is not limited to one brief.
    let res = bearer_client(&own)
        .patch(app.url(&format!("/api/v1/commitments/{cid}")))
        .json(&json!({ "revalidate_every_days": 7 }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 403);
}

#[tokio::test]
async fn the_portfolio_and_the_commitment_page_say_it_in_words_and_the_csv_has_every_commitment() {
    let app = spawn_app().await;
    let (brief, trial, digest) = reserving_brief(&app).await;
    approve(&app, &brief, &digest).await;
    let cid = the_commitment(&app).await;
    // The term began on 2026-10-01; October ran 31 days of the 8 GPUs, and the trial's idle share
    // is 595.2 of 5952 + 192 = 6144 billed: 0.096875, so October was 5952 × 0.903125 = 5375.4 busy
    // (90.3 %).
    set_term(&app, cid, "2026-10-01", "2027-09-30").await;
    LedgerBuilder::new()
        .trial(&trial)
        .line(
            LedgerLine::accelerator("node-a", "2026-10-01T00:00:00Z", "2026-11-01T00:00:00Z", 8, "2.10").trial(&trial),
        )
        .idle_hours("595.2")
        .save(&app, &brief)
        .await;
    // The brief is shared with two teams: its commitment counts in each team's total, and an
    // engineer of one of them sees it (one of no team does not: the first test).
    let mut search = None;
    for name in ["inference", "search"] {
        let team = rentcheck::auth::teams::create_team(&app.pool, name).await.unwrap();
        rentcheck::auth::teams::share(&app.pool, brief.parse().unwrap(), team.id)
            .await
            .unwrap();
        search = Some(team.id);
    }
    let member: Value = engineer_in(&app, search)
        .await
        .get(app.url("/api/v1/commitments"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        (member["total"].clone(), member["items"][0]["id"].clone()),
        (json!(1), json!(cid))
    );
    let manager = app.login(Role::Manager).await;
    let page = manager.get(app.url("/commitments")).await;
    assert_eq!(page.status(), 200);
    let html = page.text().await.unwrap();
    assert!(
        html.contains("1 running in USD: <strong>12,264 USD</strong> a month"),
        "{html}"
    );
    for team in ["inference", "search"] {
        assert!(
            html.contains(&format!("<tr><td>{team}</td><td>1</td><td>12,264.00 USD</td></tr>")),
            "{html}"
        );
    }
    let list: Value = bearer_client(&app.token(Role::Manager, None).await)
        .get(app.url("/api/v1/commitments"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(list["items"][0]["teams"], json!(["inference", "search"]));
    assert_eq!(
        list["totals_per_team"],
        json!([
            { "team": "inference", "currency": "USD", "commitments": 1, "monthly_cost": "12264" },
            { "team": "search", "currency": "USD", "commitments": 1, "monthly_cost": "12264" },
        ])
    );
    assert!(html.contains(&format!("href=\"/commitments/{cid}\"")), "{html}");
    assert!(
        html.contains("<td>none since the approval</td>"),
        "no run was judged yet: {html}"
    );
    let page = manager.get(app.url(&format!("/commitments/{cid}"))).await;
    assert_eq!(page.status(), 200);
    let html = page.text().await.unwrap();
    assert!(
        html.contains("at the reserved rate of 2.10 USD per GPU-hour: 12,264 USD a month."),
        "{html}"
    );
    assert!(
        !html.contains("avoided-no-saving"),
        "a reserved rate saves: no such note"
    );
    assert!(html.contains("id=\"commitment-chart\""), "{html}");
    assert!(
        html.contains("2026-10: 5,952 GPU-hours committed, 5,375.40 busy (90.3 %)"),
        "{html}"
    );
    // Filtered to a state it is not in: none.
    let html = manager
        .get(app.url("/commitments?state=regressed"))
        .await
        .text()
        .await
        .unwrap();
    assert!(html.contains("No commitment in this state yet"), "{html}");
    let csv = manager.get(app.url("/commitments.csv")).await;
    assert_eq!(csv.status(), 200);
    assert!(csv.headers()["content-type"].to_str().unwrap().starts_with("text/csv"));
    let text = csv.text().await.unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert!(lines[0].starts_with("id,brief,trial,provider,gpu,gpus,billing,rate_per_gpu_hour"));
    assert!(
        lines[1].contains(",Cloud A,H100 SXM,8,reserved,2.1,USD,12264,2026-10-01,2027-09-30,"),
        "{text}"
    );
    assert!(lines[0].ends_with(",provider_commitment_id,teams,last_run"), "{text}");
    assert!(
        lines[1].ends_with(",inference; search,"),
        "no run since the approval: {text}"
    );
    // With a run judged, its time in UTC.
    sqlx::query("UPDATE commitments SET last_run_at = '2026-11-20 09:30:05+01'")
        .execute(&app.pool)
        .await
        .unwrap();
    let text = manager.get(app.url("/commitments.csv")).await.text().await.unwrap();
    assert!(
        text.lines()
            .nth(1)
            .unwrap()
            .ends_with(",inference; search,2026-11-20T08:30:05Z"),
        "{text}"
    );
}

async fn state_of(app: &TestApp, cid: Uuid) -> (String, String) {
    sqlx::query_as("SELECT state, state_reason FROM commitments WHERE id = $1")
        .bind(cid)
        .fetch_one(&app.pool)
        .await
        .unwrap()
}

async fn events(app: &TestApp, kind: &str) -> Vec<Value> {
    sqlx::query_scalar("SELECT payload FROM webhook_events WHERE event = $1 ORDER BY created_at")
        .bind(kind)
        .fetch_all(&app.pool)
        .await
        .unwrap()
}

async fn card_with_ttft(app: &TestApp, brief: &str, threshold: f64) {
    CardBuilder::of(load_card())
        .threshold("serving.ttft_p95_ms", threshold)
        .save(app, brief)
        .await;
}

/// The acceptance test run again on the trial after the approval (`collect --plan`'s load test).
async fn a_run(app: &TestApp, brief: &str, trial: &str) {
    run_at(app, brief, trial, Load::at(8.0, 25.3).queued(20.0)).await;
}

/// A re-run of the trial's load test at `load`.
async fn run_at(app: &TestApp, brief: &str, trial: &str, load: Load) {
    EvidenceBuilder::bench_serving(&load_point(load))
        .trial(trial)
        .upload(app, brief)
        .await;
}

#[tokio::test]
async fn the_clock_moves_a_commitment_through_revalidation_regression_renewal_and_its_end() {
    let app = spawn_app().await;
    let (brief, trial, digest) = reserving_brief(&app).await;
    approve(&app, &brief, &digest).await;
    let cid = the_commitment(&app).await;
    sqlx::query(
        "INSERT INTO webhooks (id, url, events, secret, created_by) VALUES ($1, 'https://hooks.example.com/rc', \
         ARRAY['commitment.regressed', 'commitment.revalidation_due', 'commitment.renewal_due'], \
         'a secret of sixteen+ chars', 'admin@example.com')",
    )
    .bind(Uuid::now_v7())
    .execute(&app.pool)
    .await
    .unwrap();
    // The term: 2026.
    set_term(&app, cid, "2026-01-01", "2026-12-31").await;
    let state = rentcheck::state::AppState::new(app.pool.clone(), Default::default(), app.keys.clone());
    let judge = |today: &'static str| {
        let state = state.clone();
        async move {
            rentcheck::commitments::worker::round_on(&state, today.parse().unwrap())
                .await
                .unwrap()
        }
    };
    // A round after the minute the task waits between two looks at one commitment.
    let round = |today: &'static str| {
        let pool = app.pool.clone();
        async move {
            sqlx::query("UPDATE commitments SET checked_at = NULL")
                .execute(&pool)
                .await
                .unwrap();
            judge(today).await
        }
    };

    // 19 days in, no run yet: still active, nothing sent.
    assert_eq!(round("2026-01-20").await, 1);
    assert_eq!(state_of(&app, cid).await.0, "active");
    assert_eq!(judge("2026-01-20").await, 0, "judged a moment ago");
    // 45 days without a run (more than 30): re-validation is due, once.
    round("2026-02-15").await;
    let (s, why) = state_of(&app, cid).await;
    assert_eq!(s, "revalidation-due");
    assert!(why.contains("no run of the trial since the approval"), "{why}");
    let sent = events(&app, "commitment.revalidation_due").await;
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0]["new"]["commitment"], json!(cid));
    round("2026-02-16").await;
    assert_eq!(
        events(&app, "commitment.revalidation_due").await.len(),
        1,
        "a state is told once"
    );
    // The dashboard marks the brief, linking to the commitment.
    let dashboard = app.login_owner().await.get(app.url("/")).await.text().await.unwrap();
    assert!(
        dashboard.contains(&format!(
            "<a href=\"/commitments/{cid}\" class=\"badge warn commitment-attention\">commitment: re-validation due</a>"
        )),
        "{dashboard}"
    );

    // A run after the card asked for a TTFT p95 of 1 ms: the required criterion that passed when
    // approved fails now. Regressed, with the criterion and its figure before and after; the
    // approval is stale.
    card_with_ttft(&app, &brief, 1.0).await;
    a_run(&app, &brief, &trial).await;
    round("2026-02-16").await;
    let (s, why) = state_of(&app, cid).await;
    assert_eq!(s, "regressed");
    assert!(
        why.starts_with("The time to the first token (95th percentile) failed the re-run at stage 3: "),
        "{why}"
    );
    assert!(why.contains(" when approved, "), "{why}");
    assert_eq!(events(&app, "commitment.regressed").await.len(), 1);
    let review: Value = app
        .get(&format!("/api/v1/briefs/{brief}/review"))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(review["approval"]["stale"], true);
    // A regression stays when only the clock moves …
    round("2026-03-01").await;
    assert_eq!(state_of(&app, cid).await.0, "regressed");
    // … and a good run clears it.
    card_with_ttft(&app, &brief, 500.0).await;
    a_run(&app, &brief, &trial).await;
    round("2026-03-02").await;
    assert_eq!(state_of(&app, cid).await.0, "active");
    let c: Value = app
        .get(&format!("/api/v1/commitments/{cid}"))
        .await
        .json()
        .await
        .unwrap();
    assert!(c["last_run_at"].is_string(), "the run it judged: {c}");

    // 2026-11-01 is 60 days before the last day: renewal due.
    round("2026-10-31").await;
    assert_eq!(state_of(&app, cid).await.0, "active");
    round("2026-11-01").await;
    let (s, why) = state_of(&app, cid).await;
    assert_eq!(s, "renewal-due");
    assert!(why.contains("ends on 2026-12-31"), "{why}");
    assert_eq!(events(&app, "commitment.renewal_due").await.len(), 1);
    // What to do with it: its one billed day of 8 GPUs, 65 % busy, is a tiny share of a year of 8
    // GPUs, far under the break-even of 2.10 ÷ 3.50 = 60 % + 5 points: release it.
    let c: Value = app
        .get(&format!("/api/v1/commitments/{cid}"))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(c["renewal"]["choice"], "release", "{c}");
    assert_eq!(c["renewal"]["gpus"], 0);
    let renewal_why = c["renewal"]["why"].as_str().unwrap();
    assert!(
        renewal_why.contains("the break-even is 60 % (2.1 ÷ 3.5), and a commitment pays from 65 %"),
        "{renewal_why}"
    );
    assert!(
        renewal_why.ends_with("(at today's reserved and on-demand prices)"),
        "{renewal_why}"
    );
    // A renewal pays today's price: a newer reserved quote of the offer moves the break-even.
    PriceSheet::new()
        .row(
            PriceRow::new("Cloud A", "H100 SXM", 8, "1.40")
                .reserved()
                .valid_from("2026-12-01")
                .source("quote 13 (renewal)"),
        )
        .import(&app)
        .await;
    let c = app.get_json(&format!("/api/v1/commitments/{cid}")).await;
    let renewal_why = c["renewal"]["why"].as_str().unwrap();
    assert!(
        renewal_why.contains("the break-even is 40 % (1.4 ÷ 3.5), and a commitment pays from 45 %"),
        "{renewal_why}"
    );
    let page = app.owner_page(&format!("/commitments/{cid}")).await;
    assert!(page.contains("<h2>Renewal: release</h2>"), "{page}");
    // The review says it too, beside the approval form.
    let review_page = app.owner_page(&format!("/briefs/{brief}/review")).await;
    let notice = &review_page[review_page
        .find("id=\"renewal\"")
        .expect("a renewal notice on the review")..];
    assert!(notice.contains("ends on 2026-12-31"), "{notice}");
    assert!(notice.contains("<strong>release</strong>"), "{notice}");
    assert!(
        notice.contains("it becomes a new commitment linked to this one, starting the day after 2026-12-31"),
        "{notice}"
    );
    assert!(notice.contains(&format!("href=\"/commitments/{cid}\"")), "{notice}");

    // The renewal: approved like any decision, a new commitment linked to the old one.
    let review: Value = app
        .get(&format!("/api/v1/briefs/{brief}/review"))
        .await
        .json()
        .await
        .unwrap();
    approve(&app, &brief, review["inputs_digest"].as_str().unwrap()).await;
    let renews: Option<Uuid> = sqlx::query_scalar("SELECT renews FROM commitments WHERE id <> $1")
        .bind(cid)
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert_eq!(renews, Some(cid));
    // It starts the day after the old term's last day, though the approval asked for tomorrow:
    // the two terms never overlap (the portfolio would count those days twice).
    let (start, approved_start): (chrono::NaiveDate, Value) = sqlx::query_as(
        "SELECT c.start_date, a.reservation -> 'start_date' FROM commitments c JOIN approvals a ON a.id = c.approval_id \
         WHERE c.id <> $1",
    )
    .bind(cid)
    .fetch_one(&app.pool)
    .await
    .unwrap();
    assert_eq!(start.to_string(), "2027-01-01");
    assert_eq!(
        approved_start,
        json!("2027-01-01"),
        "the approval records the same start"
    );
    // Renewed, the old one has no renewal left to decide: active to its end (it stayed
    // renewal-due, and a later approval was linked to it as its renewal again).
    round("2026-11-02").await;
    assert_eq!(state_of(&app, cid).await.0, "active");
    assert_eq!(events(&app, "commitment.renewal_due").await.len(), 1);
    // A run now is the old commitment's: the renewal, whose term begins on 2027-01-01, takes none
    // before then, and judges it from its first day.
    a_run(&app, &brief, &trial).await;
    let renewal_run = || async {
        sqlx::query_scalar::<_, Option<chrono::DateTime<chrono::Utc>>>(
            "SELECT last_run_at FROM commitments WHERE id <> $1",
        )
        .bind(cid)
        .fetch_one(&app.pool)
        .await
        .unwrap()
    };
    round("2026-11-03").await;
    assert_eq!(renewal_run().await, None);

    // After the last day: ended, and nothing more is sent.
    round("2027-01-01").await;
    assert!(renewal_run().await.is_some(), "its first day: the run is judged");
    assert_eq!(
        state_of(&app, cid).await,
        ("ended".to_owned(), "the term ended on 2026-12-31".to_owned())
    );
    assert_eq!(
        audit_count(&app, "commitment.state").await,
        6,
        "due, regressed, active again, renewal due, active once renewed, ended"
    );
}

#[tokio::test]
async fn a_running_commitment_has_its_gauges_on_the_briefs_prometheus_endpoint() {
    let app = common::spawn_app_with(rentcheck::config::AppConfig {
        metrics_token: Some(rentcheck::secrets::Secret::new(common::METRICS_TOKEN)),
        ..Default::default()
    })
    .await;
    let (brief, trial, digest) = reserving_brief(&app).await;
    approve(&app, &brief, &digest).await;
    let cid = the_commitment(&app).await;
    // Running since 2026-10-01 with nothing on the ledger since October: busy 0 this month.
    set_term(&app, cid, "2026-10-01", "2027-09-30").await;
    let page = app.scrape_briefs().await;
    let labels = format!("{{brief_id=\"{brief}\",commitment_id=\"{cid}\",trial_id=\"{trial}\"}}");
    let end: chrono::NaiveDate = "2027-09-30".parse().unwrap();
    let days_left = ((end - chrono::Utc::now().date_naive()).num_days() + 1).max(0);
    for line in [
        format!("rentcheck_commitment_monthly_cost{labels} 12264"),
        format!("rentcheck_commitment_utilization{labels} 0"),
        format!("rentcheck_commitment_days_left{labels} {days_left}"),
    ] {
        assert!(page.lines().any(|l| l == line), "{line} in\n{page}");
    }
    // Released, it has no gauges any more.
    let res = bearer_client(&app.token(Role::Manager, None).await)
        .patch(app.url(&format!("/api/v1/commitments/{cid}")))
        .json(&json!({ "released_on": "2026-11-15" }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200, "{}", res.text().await.unwrap());
    let page = app.scrape_briefs().await;
    assert!(!page.contains("rentcheck_commitment_"), "{page}");
}

/// A FOCUS export of the reserved node's September, as a provider writes it: rows discounted by
/// the reservation `ri-0abc` (CommitmentDiscountStatus Used), one tagged to the trial and one
/// tagged to none, the reservation's unused hours (Unused, no resource), and another team's
/// savings plan.
fn focus_export(trial: &str) -> String {
    let tag = format!(r#""{{""rentcheck-trial"": ""{trial}""}}""#);
    format!(
        "BilledCost,EffectiveCost,BillingCurrency,ChargeCategory,ChargeDescription,ChargePeriodStart,ChargePeriodEnd,\
PricingUnit,ConsumedQuantity,ConsumedUnit,ResourceId,ServiceCategory,Tags,CommitmentDiscountId,CommitmentDiscountStatus\n\
672.00,403.20,USD,Usage,p5.48xlarge reserved,2026-09-01T00:00:00Z,2026-09-02T00:00:00Z,Hours,24,Hours,i-a,Compute,{tag},ri-0abc,Used\n\
672.00,403.20,USD,Usage,p5.48xlarge reserved,2026-09-02T00:00:00Z,2026-09-03T00:00:00Z,Hours,24,Hours,i-b,Compute,NULL,ri-0abc,Used\n\
0,403.20,USD,Usage,p5.48xlarge reservation unused,2026-09-03T00:00:00Z,2026-09-04T00:00:00Z,Hours,NULL,NULL,NULL,Compute,NULL,ri-0abc,Unused\n\
98.32,61.00,USD,Usage,someone else's plan,2026-09-01T00:00:00Z,2026-09-01T01:00:00Z,Hours,1,Hours,i-c,Compute,NULL,sp-9,Used\n"
    )
}

#[tokio::test]
async fn focus_rows_of_the_providers_id_count_as_busy_and_the_providers_used_and_unused_show_beside() {
    let app = spawn_app().await;
    let (brief, trial, digest) = reserving_brief(&app).await;
    approve(&app, &brief, &digest).await;
    let cid = the_commitment(&app).await;
    set_term(&app, cid, "2026-09-01", "2027-08-31").await;
    let import = || async {
        let res = app
            .client
            .post(app.url(&format!(
                "/api/v1/briefs/{brief}/ledger?format=focus&trial={trial}&gpus_per_resource=i-a=8"
            )))
            .header("content-type", "text/csv")
            .body(focus_export(&trial))
            .send()
            .await
            .unwrap();
        assert!(res.status().is_success(), "{}", res.text().await.unwrap());
    };
    import().await;
    // The trial billed 192 GPU-hours in November and 192 from the export's tagged row (i-a, 8
    // GPUs × 24 h); 38.4 of its 384 were idle: a share of 0.1.
    LedgerBuilder::new()
        .trial(&trial)
        .idle_hours("38.4")
        .save(&app, &brief)
        .await;
    let september = || async {
        let c: Value = app
            .get(&format!("/api/v1/commitments/{cid}"))
            .await
            .json()
            .await
            .unwrap();
        c["months"][0].clone()
    };
    // Without the provider's id, September is the trial's own line only: 192 × 0.9 = 172.8 busy of
    // 30 × 24 × 8 = 5760 committed (0.03), and no figure of the provider's.
    let sep = september().await;
    assert_eq!(sep["month"], "2026-09");
    assert_eq!(decimal(&sep["committed_gpu_hours"]), dec("5760"));
    assert_eq!(decimal(&sep["busy_gpu_hours"]), dec("172.8"));
    assert_eq!(decimal(&sep["utilization"]), dec("0.03"));
    assert_eq!(sep["provider_used_gpu_hours"], Value::Null);
    assert_eq!(sep["provider_unused_gpu_hours"], Value::Null);

    let res = bearer_client(&app.token(Role::Manager, None).await)
        .patch(app.url(&format!("/api/v1/commitments/{cid}")))
        .json(&json!({ "provider_commitment_id": "ri-0abc" }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200, "{}", res.text().await.unwrap());
    // With it: the untagged row of ri-0abc (i-b, 24 h at the commitment's 8 GPUs a node) counts
    // too, and the tagged one counts once (it is the trial's line as well): 384 billed, × 0.9 =
    // 345.6 busy, 345.6 ÷ 5760 = 0.06. Coverage: 5760 ÷ 384 = 15. The provider's own figures:
    // Used 192 + 192 = 384 GPU-hours, Unused 24 h × 8 = 192; the other team's plan is not ours.
    let sep = september().await;
    assert_eq!(decimal(&sep["billed_gpu_hours"]), dec("384"));
    assert_eq!(decimal(&sep["busy_gpu_hours"]), dec("345.6"));
    assert_eq!(decimal(&sep["utilization"]), dec("0.06"));
    assert_eq!(decimal(&sep["coverage"]), dec("15"));
    assert_eq!(decimal(&sep["provider_used_gpu_hours"]), dec("384"));
    assert_eq!(decimal(&sep["provider_unused_gpu_hours"]), dec("192"));
    // October has no row of the provider's: null, not 0.
    let c: Value = app
        .get(&format!("/api/v1/commitments/{cid}"))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(c["months"][1]["provider_used_gpu_hours"], Value::Null, "{c}");

    // The same export again adds nothing.
    import().await;
    assert_eq!(september().await, sep);
    let count: i64 = sqlx::query_scalar("SELECT count(*) FROM ledger_commitment_rows")
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert_eq!(count, 4, "three rows of ri-0abc and the other plan's, once each");

    // The page shows the provider's column beside ours.
    let html = app
        .login(Role::Manager)
        .await
        .get(app.url(&format!("/commitments/{cid}")))
        .await
        .text()
        .await
        .unwrap();
    assert!(
        html.contains("<th scope=\"col\">The provider's own GPU-hours</th>"),
        "{html}"
    );
    assert!(html.contains("<td>384 used, 192 unused</td>"), "{html}");
}

/// The one commitment the test's approval opened.
async fn the_commitment(app: &TestApp) -> Uuid {
    sqlx::query_scalar("SELECT id FROM commitments")
        .fetch_one(&app.pool)
        .await
        .unwrap()
}

/// Moves a commitment's term (both days included), as if it had been approved then.
async fn set_term(app: &TestApp, cid: Uuid, start: &str, end: &str) {
    sqlx::query("UPDATE commitments SET start_date = $2::date, end_date = $3::date WHERE id = $1")
        .bind(cid)
        .bind(start)
        .bind(end)
        .execute(&app.pool)
        .await
        .unwrap();
}

/// One round of the commitments' judging task on `on`, every commitment due (as if none had been
/// judged yet); the number it judged.
async fn judging_round(app: &TestApp, state: &rentcheck::state::AppState, on: chrono::NaiveDate) -> usize {
    sqlx::query("UPDATE commitments SET checked_at = NULL")
        .execute(&app.pool)
        .await
        .unwrap();
    rentcheck::commitments::worker::round_on(state, on).await.unwrap()
}

/// The two figures of a regression's words: "… : 312.5 ms when approved, 352.5 ms now".
fn before_and_after(why: &str) -> (f64, f64) {
    let (_, figures) = why.split_once(": ").unwrap();
    let (before, rest) = figures.split_once(" when approved, ").unwrap();
    let after = rest.split_once(" now").unwrap().0;
    let figure = |s: &str| s.trim_end_matches(" ms").parse().unwrap();
    (figure(before), figure(after))
}

#[tokio::test]
async fn a_worse_rerun_after_the_approval_regresses_though_the_earlier_good_point_is_still_there() {
    let app = spawn_app().await;
    let (brief, trial, digest) = reserving_brief(&app).await;
    approve(&app, &brief, &digest).await;
    let (cid, approved): (Uuid, Value) = sqlx::query_as("SELECT id, approved_criteria FROM commitments")
        .fetch_one(&app.pool)
        .await
        .unwrap();
    let approved_ttft = approved
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["key"] == "serving.ttft_p95_ms")
        .unwrap()["value"]
        .as_f64()
        .unwrap();
    set_term(&app, cid, "2026-01-01", "2026-12-31").await;
    let state = rentcheck::state::AppState::new(app.pool.clone(), Default::default(), app.keys.clone());
    let round = |today: &'static str| judging_round(&app, &state, today.parse().unwrap());
    let upload = |load: Load| run_at(&app, &brief, &trial, load);

    // The re-run on the reserved machine queues every request 10 ms longer than the run that was
    // approved (30 ms instead of 20): each time to the first token is 10 ms later, so its 95th
    // percentile is too — 468.2 → 478.2 ms, 2.1 %: beyond 2 % and 1 ms. The TTFT criterion still
    // passes its 500 ms, and the approved run is still the trial's best load point over all its
    // evidence: only the evidence after the approval tells.
    upload(Load::at(8.0, 25.3).queued(30.0)).await;
    round("2026-01-20").await;
    let (s, why) = state_of(&app, cid).await;
    assert_eq!(s, "regressed", "{why}");
    assert!(
        why.starts_with("The time to the first token (95th percentile) is worse on the re-run at stage 3: "),
        "{why}"
    );
    let (before, after) = before_and_after(why.split("; ").next().unwrap());
    assert_eq!(
        why,
        "The time to the first token (95th percentile) is worse on the re-run at stage 3: 468.25 ms when approved, 478.25 ms now (serving.ttft_p95_ms)"
    );
    assert!(
        (before - approved_ttft).abs() < 0.005,
        "the figure the approval pinned: {why}"
    );
    assert!((after - before - 10.0).abs() < 1e-9, "10 ms later: {why}");
    // The approval is stale for that reason, and the review says which criterion, before and after.
    let review: Value = app
        .get(&format!("/api/v1/briefs/{brief}/review"))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(review["approval"]["stale"], true);
    assert_eq!(review["approval"]["stale_reason"], "regression");
    assert_eq!(review["approval"]["regression"], json!(why));
    let page = app.owner_page(&format!("/briefs/{brief}/review")).await;
    assert!(
        page.contains(
            "stale: a re-run after it regressed. The time to the first token (95th percentile) is worse on the re-run at stage 3: 468.25 ms when approved, 478.25 ms now (serving.ttft_p95_ms). Decide again."
        ),
        "{page}"
    );

    // Another re-run, 0.5 ms slower than the approved one (within 1 ms: the same) and a little
    // faster through (200 requests in 25 s, not 25.3: the better load point of the two after the
    // approval): nothing is worse, so the regression clears; the approval stays stale only
    // because its inputs moved.
    upload(Load::at(8.0, 25.0).queued(20.5)).await;
    round("2026-01-21").await;
    let (s, why) = state_of(&app, cid).await;
    assert_eq!(s, "active", "{why}");
    let review: Value = app
        .get(&format!("/api/v1/briefs/{brief}/review"))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(review["approval"]["stale_reason"], "inputs");
    assert_eq!(review["approval"]["regression"], Value::Null);
}

/// Moves every item of evidence received within the last hour `days` back, as if received then.
async fn received_days_ago(app: &TestApp, days: i32) {
    for table in ["evidence", "evidence_metrics_latest"] {
        sqlx::query(&format!(
            "UPDATE {table} SET received_at = received_at - make_interval(days => $1) \
             WHERE received_at > now() - interval '1 hour'"
        ))
        .bind(days)
        .execute(&app.pool)
        .await
        .unwrap();
    }
}

/// A reserving brief whose approval was three days ago, on evidence of four days ago, its
/// commitment's term from 2026-03-01; and a state for the judging task.
struct Approved3DaysAgo {
    brief: String,
    trial: String,
    approval: Value,
    cid: Uuid,
    state: rentcheck::state::AppState,
}

async fn approved_three_days_ago(app: &TestApp) -> Approved3DaysAgo {
    let (brief, trial, digest) = reserving_brief(app).await;
    let approval = approve(app, &brief, &digest).await;
    let cid = the_commitment(app).await;
    set_term(app, cid, "2026-03-01", "2027-02-28").await;
    received_days_ago(app, 4).await;
    sqlx::query("UPDATE commitments SET approved_at = approved_at - interval '3 days'")
        .execute(&app.pool)
        .await
        .unwrap();
    let state = rentcheck::state::AppState::new(app.pool.clone(), Default::default(), app.keys.clone());
    Approved3DaysAgo {
        brief,
        trial,
        approval,
        cid,
        state,
    }
}

/// A re-validation run is the newest run's evidence: a good run two days ago cannot hide a worse
/// one today (the best load point since the approval was judged, so after one good re-run nothing
/// could regress), and a later upload without a load test does not clear it. Approving the trial again then keeps its one commitment, judged from the new approval.
#[tokio::test]
async fn a_good_rerun_does_not_hide_a_worse_one_on_a_later_day_and_approving_again_keeps_one_commitment() {
    let app = spawn_app().await;
    let Approved3DaysAgo {
        brief,
        trial,
        approval: first,
        cid,
        state,
    } = approved_three_days_ago(&app).await;
    let round = |today: &'static str| judging_round(&app, &state, today.parse().unwrap());
    let upload = |load: Load| run_at(&app, &brief, &trial, load);
    // Two days ago, a re-run as good as the approved one.
    upload(Load::at(8.0, 25.3).queued(20.0)).await;
    received_days_ago(&app, 2).await;
    round("2026-03-01").await;
    assert_eq!(state_of(&app, cid).await.0, "active");
    // Today, every first token 10 ms later: worse beyond 2 % and 1 ms.
    upload(Load::at(8.0, 25.3).queued(30.0)).await;
    round("2026-03-03").await;
    let (s, why) = state_of(&app, cid).await;
    assert_eq!(s, "regressed", "{why}");
    assert!(why.contains("468.25 ms when approved, 478.25 ms now"), "{why}");
    // The next day only a GPU listing comes (a run's first stage, or a health check): the load
    // test that regressed is still the newest, so it stays regressed, and no second webhook goes.
    received_days_ago(&app, 1).await;
    EvidenceBuilder::metrics(json!({ "gpu.count": 8 }))
        .stage(1)
        .trial(&trial)
        .upload(&app, &brief)
        .await;
    round("2026-03-04").await;
    assert_eq!(state_of(&app, cid).await, ("regressed".to_owned(), why));

    // The manager looks again and approves the trial as it is now: the reservation already runs,
    // so no second commitment opens (the totals would count it twice); the one there is pinned to
    // the new approval and active again.
    let review = app.get_json(&format!("/api/v1/briefs/{brief}/review")).await;
    let again = approve(&app, &brief, review["inputs_digest"].as_str().unwrap()).await;
    assert_ne!(again["id"], first["id"]);
    let rows: Vec<(Uuid, Uuid, String)> = sqlx::query_as("SELECT id, approval_id, state FROM commitments")
        .fetch_all(&app.pool)
        .await
        .unwrap();
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0].0, cid);
    assert_eq!(json!(rows[0].1), again["id"]);
    assert_eq!(rows[0].2, "active");
    assert_eq!(audit_count(&app, "commitment.approved_again").await, 1);
    // Today's run came before the new approval: it is not a re-run of it, and nothing regresses.
    round("2026-03-03").await;
    assert_eq!(state_of(&app, cid).await.0, "active");
}

/// A re-validation run that crosses midnight UTC is one run: `collect --plan --rerun` labels each
/// upload with the day it started, and the run's sweep is judged whole. Its 8 req/s point (as
/// approved) is sent before midnight, its overloaded 16 req/s point after: judged apart, the
/// 16 req/s point alone would fail the time to the first token.
#[tokio::test]
async fn a_rerun_across_midnight_is_judged_as_one_run() {
    let app = spawn_app().await;
    let Approved3DaysAgo {
        brief,
        trial,
        cid,
        state,
        ..
    } = approved_three_days_ago(&app).await;
    let point = |load: Load| {
        EvidenceBuilder::bench_serving(&load_point(load))
            .trial(&trial)
            .label("revalidation", "2026-03-02")
    };
    point(Load::at(8.0, 25.3).queued(20.0)).upload(&app, &brief).await;
    received_days_ago(&app, 1).await;
    point(Load::at(16.0, 25.3).queued(2000.0)).upload(&app, &brief).await;
    judging_round(&app, &state, "2026-03-03".parse().unwrap()).await;
    let (s, why) = state_of(&app, cid).await;
    assert_eq!(s, "active", "{why}");
    // Without the label, a day's uploads are the run: the 16 req/s point alone regresses.
    sqlx::query("UPDATE evidence SET labels = labels - 'revalidation'")
        .execute(&app.pool)
        .await
        .unwrap();
    run_at(&app, &brief, &trial, Load::at(16.0, 25.3).queued(2000.0)).await;
    judging_round(&app, &state, "2026-03-03".parse().unwrap()).await;
    let (s, why) = state_of(&app, cid).await;
    assert_eq!(s, "regressed", "{why}");
    assert!(why.contains("failed the re-run"), "{why}");
}

/// A release dated ahead, while the term runs, takes effect on its day: until then the commitment
/// stays as it is and its hours stay committed (it used to read "released" at once).
#[tokio::test]
async fn a_release_dated_ahead_takes_effect_on_its_day() {
    let app = spawn_app().await;
    let (brief, _, digest) = reserving_brief(&app).await;
    approve(&app, &brief, &digest).await;
    let cid = the_commitment(&app).await;
    let today = chrono::Utc::now().date_naive();
    let day = |offset: i64| (today + chrono::Duration::days(offset)).to_string();
    set_term(&app, cid, &day(-30), &day(300)).await;
    let manager = bearer_client(&app.token(Role::Manager, None).await);
    let res = manager
        .patch(app.url(&format!("/api/v1/commitments/{cid}")))
        .json(&json!({ "released_on": day(10) }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200, "{}", res.text().await.unwrap());
    let c: Value = res.json().await.unwrap();
    assert_ne!(c["state"], "released", "{c}");
    assert_eq!(c["released_on"], day(10).as_str());
    // Approving the trial again now is a reservation of its own: the one being released is not
    // carried on (the trial would have none from the release day).
    let review = app.get_json(&format!("/api/v1/briefs/{brief}/review")).await;
    approve(&app, &brief, review["inputs_digest"].as_str().unwrap()).await;
    let count: i64 = sqlx::query_scalar("SELECT count(*) FROM commitments")
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert_eq!(count, 2);
    assert_eq!(audit_count(&app, "commitment.approved_again").await, 0);
    let state = rentcheck::state::AppState::new(app.pool.clone(), Default::default(), app.keys.clone());
    judging_round(&app, &state, today + chrono::Duration::days(9)).await;
    assert_ne!(state_of(&app, cid).await.0, "released");
    judging_round(&app, &state, today + chrono::Duration::days(10)).await;
    let (s, why) = state_of(&app, cid).await;
    assert_eq!(s, "released");
    assert_eq!(why, format!("released from {}", day(10)));
}
