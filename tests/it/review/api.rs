//! The review over HTTP: computed decisions, approvals and their permissions, staleness, records.

use crate::common;
use crate::common::builders::{BriefBuilder, EvidenceBuilder, TrialBuilder};

use common::{bearer_client, fixture, spawn_app};
use rentcheck::auth::Role;
use serde_json::{json, Value};

async fn review(app: &common::TestApp, id: &str) -> Value {
    let res = app.get(&format!("/api/v1/briefs/{id}/review")).await;
    assert_eq!(res.status(), 200);
    res.json().await.unwrap()
}

#[tokio::test]
async fn a_brief_that_only_needs_model_output_is_told_to_use_a_managed_api() {
    let app = spawn_app().await;
    let id = BriefBuilder::new()
        .shared_hardware_ok()
        .needs_host_control(false)
        .create_id(&app)
        .await;
    let r = review(&app, &id).await;
    assert_eq!(r["decision"], "stop");
    assert_eq!(r["reasons"][0]["rule"], 1);
    assert!(r["reasons"][0]["says"].as_str().unwrap().contains("managed model API"));
    assert_eq!(r["inputs_digest"].as_str().unwrap().len(), 64);
}

#[tokio::test]
async fn a_failed_dcgm_diag_stops_with_a_link_to_its_evidence() {
    let app = spawn_app().await;
    let id = app.brief_id().await;
    let res = EvidenceBuilder::failed_diag().post(&app, &id).await;
    assert_eq!(res.status(), 201);
    let evidence: Value = res.json().await.unwrap();
    assert_eq!(evidence["metrics"]["dcgm.diag.passed"], false);
    let r = review(&app, &id).await;
    assert_eq!(r["decision"], "stop");
    let rule2 = r["reasons"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["rule"] == 2)
        .expect("rule 2 fired");
    let link = format!("evidence:{}", evidence["id"].as_str().unwrap());
    assert!(
        rule2["facts"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["link"] == link.as_str()),
        "{rule2}"
    );
}

#[tokio::test]
async fn only_managers_decide_rejections_need_a_comment_and_stale_digests_conflict() {
    let app = spawn_app().await;
    let id = BriefBuilder::new().shared_hardware_ok().create_id(&app).await;
    let digest = review(&app, &id).await["inputs_digest"].as_str().unwrap().to_owned();
    let path = format!("/api/v1/briefs/{id}/approvals");

    let engineer = app
        .post_json(&path, &json!({ "verdict": "approve", "inputs_digest": digest }))
        .await;
    assert_eq!(engineer.status(), 403, "engineers do not approve");
    let agent = bearer_client(&app.token(Role::Agent, Some(id.parse().unwrap())).await);
    let res = agent
        .post(app.url(&path))
        .json(&json!({ "verdict": "approve", "inputs_digest": digest }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 403);

    let manager = bearer_client(&app.token(Role::Manager, None).await);
    let post = |body: Value| {
        let manager = manager.clone();
        let url = app.url(&path);
        async move { manager.post(url).json(&body).send().await.unwrap() }
    };
    let res = post(json!({ "verdict": "reject", "inputs_digest": digest })).await;
    assert_eq!(res.status(), 422, "a rejection needs a comment");
    let res = post(json!({ "verdict": "approve", "inputs_digest": "0".repeat(64) })).await;
    assert_eq!(res.status(), 409, "a stale digest is refused");
    let res = post(json!({ "verdict": "reject", "comment": "Use the managed API.", "inputs_digest": digest })).await;
    assert_eq!(res.status(), 201);
    let row: Value = res.json().await.unwrap();
    assert_eq!(row["decision"], "stop");
    assert_eq!(row["verdict"], "reject");

    let r = review(&app, &id).await;
    assert_eq!(r["approval"]["verdict"], "reject");
    assert_eq!(r["approval"]["stale"], false);
    let audit: Vec<String> =
        sqlx::query_scalar("SELECT action FROM audit_log WHERE target = $1 AND action <> 'brief.create'")
            .bind(format!("brief:{id}"))
            .fetch_all(&app.pool)
            .await
            .unwrap();
    assert_eq!(audit, ["approval.reject"]);

    // New evidence changes an input: the verdict is flagged stale and says what changed.
    let res = EvidenceBuilder::failed_diag().post(&app, &id).await;
    assert_eq!(res.status(), 201);
    let r = review(&app, &id).await;
    assert_eq!(r["approval"]["stale"], true);
    assert!(r["approval"]["changed"]
        .as_array()
        .unwrap()
        .iter()
        .any(|c| c.as_str().unwrap().starts_with("metrics")));
    let res = post(json!({ "verdict": "reject", "comment": "again", "inputs_digest": digest })).await;
    assert_eq!(res.status(), 409, "the old digest no longer matches");
}

#[tokio::test]
async fn the_decision_record_reproduces_the_review() {
    let app = spawn_app().await;
    let id = BriefBuilder::new().shared_hardware_ok().create_id(&app).await;
    let r = review(&app, &id).await;
    let md = app.get(&format!("/briefs/{id}/decision.md")).await;
    assert_eq!(md.status(), 200);
    assert!(md.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/markdown"));
    let md = md.text().await.unwrap();
    assert!(md.contains("## Decision: **stop**"), "{md}");
    assert!(md.contains(r["inputs_digest"].as_str().unwrap()));
    assert!(md.contains("Rule 1"));
    let json: Value = app
        .get(&format!("/briefs/{id}/decision.json"))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(json["decision"], "stop");
    assert_eq!(json["inputs_digest"], r["inputs_digest"]);
    assert_eq!(json["brief"]["name"], "Chat assistant 70B");
    assert!(json["inputs"]["brief"].is_object(), "the inputs are in the record");
    assert_eq!(
        app.anon
            .get(app.url(&format!("/briefs/{id}/decision.md")))
            .send()
            .await
            .unwrap()
            .status(),
        401
    );
}

#[tokio::test]
async fn review_and_audit_pages_render_for_people() {
    let app = spawn_app().await;
    let id = BriefBuilder::new().name("<b>Page</b> brief").create_id(&app).await;
    let engineer = app.login(Role::Engineer).await;
    let page = engineer.get(app.url(&format!("/briefs/{id}/review"))).await;
    assert_eq!(page.status(), 200);
    let html = page.text().await.unwrap();
    assert!(html.contains("Computed decision"));
    assert!(html.contains("Only managers approve or reject."));
    assert!(!html.contains("approval-form"), "engineers get no form");
    assert!(!html.contains("<b>Page</b>"));
    let manager = app.login(Role::Manager).await;
    let html = manager
        .get(app.url(&format!("/briefs/{id}/review")))
        .await
        .text()
        .await
        .unwrap();
    assert!(html.contains("approval-form"));
    let audit = engineer.get(app.url(&format!("/briefs/{id}/audit"))).await;
    assert_eq!(audit.status(), 200);
    // Each entry in words, its details as name: value (the raw JSON kept behind "as recorded").
    let audit = audit.text().await.unwrap();
    assert!(
        audit.contains("created the brief <small class=\"muted\">(brief.create)</small>"),
        "{audit}"
    );
    assert!(audit.contains("<summary>as recorded</summary>"), "{audit}");
    let home = manager.get(app.url("/")).await.text().await.unwrap();
    assert!(home.contains("data-decision="), "the dashboard shows decision badges");
    assert!(
        home.contains("keep renting by the hour, commit to nothing yet"),
        "an expand badge says what it means for a manager"
    );
    // Nothing was sent to this brief: it waits for evidence, not for a review.
    assert!(
        home.contains("awaiting evidence") && !home.contains("needs approval"),
        "{home}"
    );
}

#[tokio::test]
async fn the_review_page_says_why_in_words_confirms_a_rejection_and_explains_staleness() {
    let app = spawn_app().await;
    let id = app.brief_id().await;
    let review_path = format!("/briefs/{id}/review");
    let manager = app.login(Role::Manager).await;
    let html = manager.get(app.url(&review_path)).await.text().await.unwrap();
    let digest = html
        .split("name=\"inputs_digest\" value=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap()
        .to_owned();
    assert!(html.contains("<h1"), "the review has a heading");

    // A rejection through the form: 303 to the review, which confirms it at the top.
    let res = manager
        .client
        .post(app.url(&review_path))
        .form(&[
            ("csrf_token", manager.csrf.as_str()),
            ("inputs_digest", digest.as_str()),
            ("verdict", "reject"),
            ("comment", "Wait for the health check"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 303);
    let location = res.headers()["location"].to_str().unwrap().to_owned();
    let html = manager.get(app.url(&location)).await.text().await.unwrap();
    let feedback = html.split("id=\"verdict-feedback\"").nth(1).expect("a confirmation");
    assert!(
        feedback.contains("Rejected by") && feedback.contains("“Wait for the health check”"),
        "{feedback}"
    );
    assert!(html.contains(">rejected</span>"), "the badge reads rejected");
    assert!(!html.contains("rejectd"));

    // A failed health check: the reason in words, and the verdict stale with what changed.
    let res = EvidenceBuilder::failed_diag().post(&app, &id).await;
    assert_eq!(res.status(), 201);
    let html = manager.get(app.url(&review_path)).await.text().await.unwrap();
    assert!(html.contains("data-decision=\"stop\""));
    let why = html.split("id=\"why\">").nth(1).unwrap().split("</p>").next().unwrap();
    assert!(
        why.starts_with("The GPU health check (DCGM diagnostic) failed on the ")
            && why.contains("server: fix or replace it before committing to anything."),
        "{why}"
    );
    let reasons = html
        .split("id=\"reasons\"")
        .nth(1)
        .unwrap()
        .split("</section>")
        .next()
        .unwrap();
    assert!(
        !reasons.contains("dcgm.diag.passed"),
        "no metric keys in the reasons: {reasons}"
    );
    assert!(!reasons.contains(" eq true"), "{reasons}");
    let stale = html
        .split("id=\"stale\">")
        .nth(1)
        .expect("the verdict is stale")
        .split("</p>")
        .next()
        .unwrap();
    assert!(
        stale.contains("new evidence for the GPU health check (DCGM diagnostic)"),
        "{stale}"
    );
    assert!(
        !html.contains("id=\"verdict-feedback\""),
        "the confirmation shows only after the redirect"
    );
}

/// Holds every reader of the ledger, so a verdict's review waits there, after its lock.
async fn hold_the_ledger(app: &common::TestApp) -> sqlx::Transaction<'static, sqlx::Postgres> {
    let mut hold = app.pool.begin().await.unwrap();
    sqlx::query("LOCK TABLE ledger_lines IN ACCESS EXCLUSIVE MODE")
        .execute(&mut *hold)
        .await
        .unwrap();
    hold
}

/// Polls (bounded) until `done` answers true.
async fn wait_until(what: &str, mut done: impl AsyncFnMut() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !done().await {
        assert!(std::time::Instant::now() < deadline, "{what}");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// How many of this test's statements wait for a lock that `lock` (a condition on `pg_locks l`)
/// picks. `pg_locks` lists the whole server's locks, and every test's database is a copy of one
/// template, so a table has the same OID in the databases of the tests running beside this one:
/// only sessions on this test's own database count.
async fn waiting_for(app: &common::TestApp, lock: &str) -> i64 {
    let sql = format!(
        "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid \
         WHERE NOT l.granted AND a.datname = current_database() AND ({lock})"
    );
    sqlx::query_scalar(&sql).fetch_one(&app.pool).await.unwrap()
}

/// How many statements wait for the ledger's lock ([`hold_the_ledger`]).
async fn ledger_waiters(app: &common::TestApp) -> i64 {
    waiting_for(app, "l.relation = 'ledger_lines'::regclass").await
}

/// Until the verdict holds the brief's row and a reader of its review waits on the ledger.
async fn wait_for_the_verdict_under_its_lock(app: &common::TestApp, id: &str) {
    let brief: uuid::Uuid = id.parse().unwrap();
    wait_until("the verdict never reached its review", async || {
        let mut probe = app.pool.begin().await.unwrap();
        let brief_held = sqlx::query("SELECT 1 FROM briefs WHERE id = $1 FOR UPDATE NOWAIT")
            .bind(brief)
            .execute(&mut *probe)
            .await
            .is_err();
        probe.rollback().await.ok();
        brief_held && ledger_waiters(app).await > 0
    })
    .await;
}

/// The digests recorded for a brief, oldest first.
async fn recorded(app: &common::TestApp, id: &str) -> Vec<(String, String)> {
    sqlx::query_as("SELECT inputs_digest, decision FROM approvals WHERE brief_id = $1 ORDER BY decided_at, id")
        .bind(id.parse::<uuid::Uuid>().unwrap())
        .fetch_all(&app.pool)
        .await
        .unwrap()
}

/// A write that does not wait for the brief's lock (a trial edit: updating a trial's row does not
/// check its key to the brief) commits while a verdict is being recorded, after the verdict locked
/// the brief, before its review is read in full. The verdict reads one snapshot taken when it got
/// the lock, so it records the review from before that write, whole: nothing of the edit is half
/// read, and the approval is stale at once (its inputs moved after it was decided).
#[tokio::test]
async fn a_trial_edit_racing_a_verdict_changes_nothing_recorded() {
    let app = spawn_app().await;
    let id = app.brief_id().await;
    let digest = review(&app, &id).await["inputs_digest"].as_str().unwrap().to_owned();
    let path = format!("/api/v1/briefs/{id}/approvals");
    let manager = bearer_client(&app.token(Role::Manager, None).await);

    let hold = hold_the_ledger(&app).await;
    let verdict = tokio::spawn({
        let (manager, url) = (manager.clone(), app.url(&path));
        let body = json!({ "verdict": "reject", "comment": "Not this month.", "inputs_digest": digest });
        async move {
            let res = manager.post(url).json(&body).send().await.unwrap();
            (res.status(), res.json::<Value>().await.unwrap())
        }
    });
    wait_for_the_verdict_under_its_lock(&app, &id).await;
    let res = TrialBuilder::first_of(&app, &id)
        .await
        .gpus("H100 SXM", 8)
        .put(&app)
        .await;
    assert_eq!(res.status(), 200, "the trial edit does not wait for the verdict");
    hold.rollback().await.unwrap();
    let (status, answer) = verdict.await.unwrap();

    assert_eq!(status, 201, "{answer}");
    assert_eq!(
        answer["inputs_digest"],
        digest.as_str(),
        "the review read under the lock is recorded"
    );
    let after = review(&app, &id).await;
    assert_ne!(after["inputs_digest"], digest.as_str(), "the edit changed the review");
    assert_eq!(after["approval"]["stale"], true, "and so the verdict is stale at once");
    // Decided again on the review as it is now, the verdict records exactly that review.
    let now = after["inputs_digest"].as_str().unwrap();
    let res = manager
        .post(app.url(&path))
        .json(&json!({ "verdict": "reject", "comment": "Not this month.", "inputs_digest": now }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 201);
    let row: Value = res.json().await.unwrap();
    assert_eq!(row["inputs_digest"], now);
    let again = review(&app, &id).await;
    assert_eq!(again["inputs_digest"], now);
    assert_eq!(again["approval"]["stale"], false);
}

/// review_verdict_under_lock: the review a verdict records is exactly the one it read under the
/// brief's lock. Evidence uploaded while the verdict holds the lock, between the lock and the
/// review, waits for it (its key to the brief) and lands after; a trial edit in the same window
/// commits at once but is not in the verdict's snapshot. The verdict records the decision and
/// digest of the state before both, and they then make that verdict stale.
#[tokio::test]
async fn review_verdict_under_lock_records_the_review_read_under_it() {
    let app = spawn_app().await;
    let id = app.brief_id().await;
    let before = review(&app, &id).await;
    let digest = before["inputs_digest"].as_str().unwrap().to_owned();
    let path = format!("/api/v1/briefs/{id}/approvals");
    let manager = bearer_client(&app.token(Role::Manager, None).await);

    let hold = hold_the_ledger(&app).await;
    let verdict = tokio::spawn({
        let (manager, url) = (manager.clone(), app.url(&path));
        let body = json!({ "verdict": "reject", "comment": "Not this month.", "inputs_digest": digest });
        async move {
            let res = manager.post(url).json(&body).send().await.unwrap();
            (res.status(), res.json::<Value>().await.unwrap())
        }
    });
    wait_for_the_verdict_under_its_lock(&app, &id).await;
    // A failing GPU health check: it changes the decision, if it were read.
    let upload = tokio::spawn({
        let (client, url) = (
            app.client.clone(),
            app.url(&format!("/api/v1/briefs/{id}/evidence?kind=dcgm-diag&stage=1")),
        );
        async move {
            let res = client
                .post(url)
                .header("content-type", "application/json")
                .body(fixture("dcgm-diag/dcgm3-json-r2-pcie-fail.json"))
                .send()
                .await
                .unwrap();
            res.status()
        }
    });
    // The upload waits on the verdict's row lock (its foreign key to the brief).
    wait_until("the upload never waited for the brief's lock", async || {
        waiting_for(&app, "l.locktype IN ('transactionid', 'tuple')").await > 0
    })
    .await;
    assert!(!upload.is_finished(), "the upload waits for the verdict");
    assert_eq!(app.count("evidence").await, 0);
    // A write that does not wait for the lock commits in the same window: not read either.
    let res = TrialBuilder::first_of(&app, &id)
        .await
        .gpus("H100 SXM", 8)
        .put(&app)
        .await;
    assert_eq!(res.status(), 200);

    hold.rollback().await.unwrap();
    let (status, answer) = verdict.await.unwrap();
    assert_eq!(status, 201, "{answer}");
    assert_eq!(upload.await.unwrap(), 201, "the upload lands after the verdict");
    assert_eq!(app.count("evidence").await, 1);

    // What was recorded is the review of the state before the upload.
    assert_eq!(
        recorded(&app, &id).await,
        [(digest.clone(), before["decision"].as_str().unwrap().to_owned())]
    );
    assert_eq!(answer["inputs_digest"], digest.as_str());
    assert_eq!(answer["decision"], before["decision"]);
    let after = review(&app, &id).await;
    assert_eq!(after["decision"], "stop", "the upload was read afterwards");
    assert_ne!(after["inputs_digest"], digest.as_str());
    assert_eq!(after["approval"]["stale"], true);
}

/// A verdict that finds the brief's lock held waits for it outside any snapshot: what committed
/// before it got the lock (here a trial edit made under that lock) is in the review it reads, so the
/// digest loaded before the edit no longer matches (409, nothing recorded).
#[tokio::test]
async fn a_verdict_waiting_for_the_lock_reads_what_committed_before_it_got_it() {
    let app = spawn_app().await;
    let id = app.brief_id().await;
    let brief: uuid::Uuid = id.parse().unwrap();
    let digest = review(&app, &id).await["inputs_digest"].as_str().unwrap().to_owned();
    let manager = bearer_client(&app.token(Role::Manager, None).await);

    let mut holder = app.pool.begin().await.unwrap();
    sqlx::query("SELECT 1 FROM briefs WHERE id = $1 FOR UPDATE")
        .bind(brief)
        .execute(&mut *holder)
        .await
        .unwrap();
    let verdict = tokio::spawn({
        let (manager, url) = (manager.clone(), app.url(&format!("/api/v1/briefs/{id}/approvals")));
        let body = json!({ "verdict": "reject", "comment": "Not this month.", "inputs_digest": digest });
        async move { manager.post(url).json(&body).send().await.unwrap().status() }
    });
    wait_until("the verdict never waited for the lock", async || {
        waiting_for(&app, "l.locktype IN ('transactionid', 'tuple')").await > 0
    })
    .await;
    sqlx::query("UPDATE trials SET gpu = 'H100 SXM', gpu_count = 8 WHERE brief_id = $1 AND position = 1")
        .bind(brief)
        .execute(&mut *holder)
        .await
        .unwrap();
    holder.commit().await.unwrap();

    assert_eq!(
        verdict.await.unwrap(),
        409,
        "the edit is read: the old digest is refused"
    );
    assert!(recorded(&app, &id).await.is_empty());
    assert_ne!(review(&app, &id).await["inputs_digest"], digest.as_str());
}

/// A brief being read by many while it is written to is computed once at a time: a reader that
/// arrives while another computes the newer review gets the one before, marked `refreshing` with
/// its `as_of`, and cannot approve it.
#[tokio::test]
async fn a_review_being_remade_is_answered_from_the_one_before_marked_refreshing() {
    let app = spawn_app().await;
    let id = app.brief_id().await;
    let path = format!("/api/v1/briefs/{id}/review");
    let first = app.get(&path).await.text().await.unwrap();
    assert!(
        first.ends_with(r#","refreshing":false}"#),
        "a current answer says so, in its last field: {}",
        &first[first.len().saturating_sub(80)..]
    );
    let first: Value = serde_json::from_str(&first).unwrap();
    assert!(
        first["as_of"].as_str().is_some_and(|t| t.ends_with('Z')),
        "{}",
        first["as_of"]
    );

    let res = EvidenceBuilder::failed_diag().post(&app, &id).await;
    assert_eq!(res.status(), 201);
    // One reader starts computing the newer review and waits on the ledger.
    let hold = hold_the_ledger(&app).await;
    let computing = tokio::spawn({
        let (client, url) = (app.client.clone(), app.url(&path));
        async move { client.get(url).send().await.unwrap().json::<Value>().await.unwrap() }
    });
    wait_until("no reader waited on the ledger", async || {
        ledger_waiters(&app).await > 0
    })
    .await;
    let meanwhile = review(&app, &id).await;
    assert_eq!(meanwhile["refreshing"], true, "another reader is making the newer one");
    assert_eq!(
        meanwhile["as_of"], first["as_of"],
        "the answer before, with when it was made"
    );
    assert_eq!(meanwhile["inputs_digest"], first["inputs_digest"]);

    hold.rollback().await.unwrap();
    let newer = computing.await.unwrap();
    assert_eq!(newer["refreshing"], false);
    assert_eq!(newer["decision"], "stop", "the failed diagnostic is in it");
    assert_ne!(newer["inputs_digest"], first["inputs_digest"]);
    let after = review(&app, &id).await;
    assert_eq!(after, newer, "then every reader gets the newer one, as it was computed");
    // The older answer cannot be decided on.
    let manager = bearer_client(&app.token(Role::Manager, None).await);
    let res = manager
        .post(app.url(&format!("/api/v1/briefs/{id}/approvals")))
        .json(
            &json!({ "verdict": "reject", "comment": "Not this month.", "inputs_digest": meanwhile["inputs_digest"] }),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 409);
}
