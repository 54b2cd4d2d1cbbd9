//! Brief ownership and teams: a brief's owner, the teams it is shared with
//! and admins change it, its card, trials, ledger and tokens; everyone else signed in only reads.

use crate::common::builders::{first_trial_id, BriefBuilder};
use crate::common::{self, bearer_client, spawn_app, Person, TestApp, OWNER_EMAIL, PASSWORD};
use rentcheck::auth::{
    teams,
    token::{self, NewToken},
    users, Role,
};
use serde_json::{json, Value};

/// A new person of `role` with a bearer token of their own.
async fn person_with_token(app: &TestApp, role: Role) -> (String, rentcheck::ids::UserId, reqwest::Client) {
    let email = app.user(role).await;
    let user = users::by_email(&app.pool, &email).await.unwrap().unwrap();
    let (signed, _) = token::mint(
        &app.pool,
        &app.keys,
        NewToken {
            name: "test".into(),
            subject: email.clone(),
            role,
            brief: None,
            trial: None,
            ttl: chrono::Duration::hours(1),
            created_by: Some(user.id),
        },
    )
    .await
    .unwrap();
    (email, user.id, bearer_client(&signed))
}

/// Every API write on a brief, as `client`: the statuses in order.
async fn api_writes(app: &TestApp, client: &reqwest::Client, brief: &str, trial: &str) -> Vec<(String, u16)> {
    let mut out = Vec::new();
    let body = BriefBuilder::new().name("Renamed").json();
    let card: Value = app
        .get(&format!("/api/v1/briefs/{brief}/card"))
        .await
        .json()
        .await
        .unwrap();
    let mut trial_body: Value = app.get(&format!("/api/v1/trials/{trial}")).await.json().await.unwrap();
    trial_body["name"] = json!(format!("r-{}", uuid::Uuid::new_v4().simple()));
    let requests = [
        (
            "PUT brief",
            client.put(app.url(&format!("/api/v1/briefs/{brief}"))).json(&body),
        ),
        (
            "PUT card",
            client
                .put(app.url(&format!("/api/v1/briefs/{brief}/card")))
                .json(&json!({ "criteria": card["criteria"] })),
        ),
        (
            "POST trial",
            client
                .post(app.url(&format!("/api/v1/briefs/{brief}/trials")))
                .json(&json!({ "name": format!("t-{}", uuid::Uuid::new_v4().simple()) })),
        ),
        (
            "PUT trial",
            client
                .put(app.url(&format!("/api/v1/trials/{trial}")))
                .json(&trial_body),
        ),
        (
            "POST evidence",
            client
                .post(app.url(&format!(
                    "/api/v1/briefs/{brief}/evidence?kind=nvidia-smi-list&stage=1&trial={trial}"
                )))
                .header("content-type", "text/plain")
                .body("GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1)\n"),
        ),
        (
            "POST ledger",
            client
                .post(app.url(&format!("/api/v1/briefs/{brief}/ledger?trial={trial}")))
                .json(&json!({ "lines": [{ "category": "host", "description": "x", "amount": "1.00" }] })),
        ),
    ];
    for (name, request) in requests {
        let res = request.send().await.unwrap();
        out.push((name.to_owned(), res.status().as_u16()));
    }
    out
}

/// Form fields: (name, value).
type Fields = Vec<(&'static str, String)>;

/// The brief form's fields for a valid brief named `name`.
fn brief_form(name: &str) -> Fields {
    let brief = common::valid_brief();
    let mut fields: Fields = [
        "owner",
        "workload_kind",
        "model_name",
        "params_b",
        "precision",
        "context_length",
        "concurrency",
        "num_layers",
        "num_kv_heads",
        "head_dim",
        "data_boundary",
        "allocation_boundary",
        "currency",
        "cost_unit",
    ]
    .into_iter()
    .map(|k| {
        (
            k,
            brief[k]
                .as_str()
                .map(str::to_owned)
                .unwrap_or_else(|| brief[k].to_string()),
        )
    })
    .collect();
    fields.push(("name", name.to_owned()));
    fields
}

/// Every page write on a brief, as a signed-in person: the statuses in order.
async fn page_writes(app: &TestApp, person: &Person, brief: &str, trial: &str, jti: &str) -> Vec<(String, u16)> {
    let csv = "category,resource,description,starts_at,ends_at,gpus,rate_per_gpu_hour,amount,currency\n\
               host,,x,,,,,1.00,USD\n";
    let attempts: Vec<(&str, String, Fields)> = vec![
        ("edit brief", format!("/briefs/{brief}/edit"), brief_form("Taken over")),
        ("save card", format!("/briefs/{brief}/card"), vec![]),
        (
            "confirm readiness",
            format!("/briefs/{brief}/readiness"),
            vec![
                ("item", "fallback_path".into()),
                ("link", "https://wiki.example.com/x".into()),
            ],
        ),
        (
            "add trial",
            format!("/briefs/{brief}/trials/new"),
            vec![("name", "Mine now".into())],
        ),
        (
            "edit trial",
            format!("/trials/{trial}"),
            vec![("name", "Mine now".into())],
        ),
        ("end trial", format!("/trials/{trial}/end"), vec![]),
        (
            "mint token",
            format!("/briefs/{brief}/tokens"),
            vec![("name", "stolen".into()), ("ttl", "7d".into())],
        ),
        ("revoke token", format!("/briefs/{brief}/tokens/{jti}/revoke"), vec![]),
        (
            "add ledger line",
            format!("/briefs/{brief}/ledger/lines"),
            vec![("category", "host".into()), ("amount", "1.00".into())],
        ),
        (
            "set outputs",
            format!("/briefs/{brief}/ledger/outputs"),
            vec![("accepted", "1".into())],
        ),
        (
            "import ledger",
            format!("/briefs/{brief}/ledger/import"),
            vec![("csv", csv.into())],
        ),
        (
            "share",
            format!("/briefs/{brief}/sharing/teams"),
            vec![("team", uuid::Uuid::nil().to_string())],
        ),
    ];
    let mut out = Vec::new();
    for (name, path, fields) in attempts {
        let mut form = vec![("csrf_token", person.csrf.clone())];
        form.extend(fields);
        let res = person.client.post(app.url(&path)).form(&form).send().await.unwrap();
        out.push((name.to_owned(), res.status().as_u16()));
    }
    out
}

async fn agent_token(app: &TestApp, brief: &str) -> (String, String) {
    let (signed, row) = token::mint(
        &app.pool,
        &app.keys,
        NewToken {
            name: "owner's collector".into(),
            subject: OWNER_EMAIL.into(),
            role: Role::Agent,
            brief: Some(brief.parse().unwrap()),
            trial: None,
            ttl: chrono::Duration::days(1),
            created_by: None,
        },
    )
    .await
    .unwrap();
    (signed, row.jti.to_string())
}

#[tokio::test]
async fn another_engineer_can_change_nothing_of_a_brief_through_the_api_or_the_pages() {
    let app = spawn_app().await;
    let brief = app.brief_id().await;
    let trial = first_trial_id(&app, &brief).await;
    let (agent, jti) = agent_token(&app, &brief).await;
    let (b_email, _, b_api) = person_with_token(&app, Role::Engineer).await;

    for (route, status) in api_writes(&app, &b_api, &brief, &trial).await {
        assert_eq!(status, 403, "{route} by another engineer's token");
    }
    let b = app.login_as(&b_email, PASSWORD).await.unwrap();
    for (route, status) in page_writes(&app, &b, &brief, &trial, &jti).await {
        assert_eq!(status, 403, "{route} by another engineer's session");
    }
    // Nothing changed: the name, the trial, the card's revisions, no token minted, and the
    // owner's collector still sends.
    let now: Value = app.get(&format!("/api/v1/briefs/{brief}")).await.json().await.unwrap();
    assert_eq!(now["name"], "Chat assistant 70B");
    assert_eq!(app.count("card_revisions").await, 0);
    assert_eq!(app.count("api_tokens WHERE name = 'stolen'").await, 0);
    assert_eq!(app.count("ledger_lines").await, 0);
    let res = bearer_client(&agent)
        .post(app.url(&format!(
            "/api/v1/briefs/{brief}/evidence?kind=nvidia-smi-list&stage=1&trial={trial}"
        )))
        .header("content-type", "text/plain")
        .body("GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1)\n")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 201, "the owner's agent token was not revoked");
    // The form pages say who to ask instead of showing a form that cannot be saved.
    let res = b.get(app.url(&format!("/briefs/{brief}/edit"))).await;
    assert_eq!(res.status(), 403);
    assert!(res.text().await.unwrap().contains(OWNER_EMAIL));
    // Reading stays open to everyone signed in.
    assert_eq!(b.get(app.url(&format!("/briefs/{brief}"))).await.status(), 200);
    assert_eq!(
        b_api
            .get(app.url(&format!("/api/v1/briefs/{brief}")))
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
}

#[tokio::test]
async fn the_owner_a_team_it_is_shared_with_and_admins_may_change_it() {
    let app = spawn_app().await;
    let brief = app.brief_id().await;
    let trial = first_trial_id(&app, &brief).await;

    // The owner (the token that created it).
    for (route, status) in api_writes(&app, &app.client, &brief, &trial).await {
        assert!(status < 300, "{route} by the owner: {status}");
    }
    // An admin.
    let (_, _, admin) = person_with_token(&app, Role::Admin).await;
    for (route, status) in api_writes(&app, &admin, &brief, &trial).await {
        assert!(status < 300, "{route} by an admin: {status}");
    }
    // A member of a team the brief is shared with, from the moment it is shared.
    let (b_email, b_id, b_api) = person_with_token(&app, Role::Engineer).await;
    let team = teams::create_team(&app.pool, "inference").await.unwrap();
    teams::add_member(&app.pool, team.id, b_id).await.unwrap();
    assert_eq!(
        api_writes(&app, &b_api, &brief, &trial).await[0].1,
        403,
        "not shared yet"
    );
    let owner = app.login_owner().await;
    let res = owner
        .client
        .post(app.url(&format!("/briefs/{brief}/sharing/teams")))
        .form(&[("csrf_token", owner.csrf.as_str()), ("team", &team.id.to_string())])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 303, "the owner shares it");
    for (route, status) in api_writes(&app, &b_api, &brief, &trial).await {
        assert!(status < 300, "{route} by a team member: {status}");
    }
    let b = app.login_as(&b_email, PASSWORD).await.unwrap();
    let sharing = b
        .get(app.url(&format!("/briefs/{brief}/sharing")))
        .await
        .text()
        .await
        .unwrap();
    assert!(
        sharing.contains(OWNER_EMAIL) && sharing.contains("inference"),
        "{sharing}"
    );
    // The account that may edit is told apart from the brief's own Owner field (a contact).
    assert!(sharing.contains("<h2>Owner account</h2>"), "{sharing}");
    // Leaving the team ends it.
    teams::remove_member(&app.pool, team.id, b_id).await.unwrap();
    assert_eq!(api_writes(&app, &b_api, &brief, &trial).await[0].1, 403);
}

#[tokio::test]
async fn brief_edits_are_audited_with_the_fields_that_changed() {
    let app = spawn_app().await;
    let brief = app.brief_id().await;
    let res = BriefBuilder::new()
        .name("Chat assistant 70B, v2")
        .concurrency(32)
        .put(&app, &brief)
        .await;
    assert_eq!(res.status(), 200);
    let rows: Vec<(String, String, Value)> =
        sqlx::query_as("SELECT actor, action, details FROM audit_log WHERE target = $1 ORDER BY at")
            .bind(format!("brief:{brief}"))
            .fetch_all(&app.pool)
            .await
            .unwrap();
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert_eq!(rows[0].1, "brief.create");
    assert_eq!(rows[1].1, "brief.update");
    assert!(rows[1].0.contains(OWNER_EMAIL), "who: {}", rows[1].0);
    let mut fields: Vec<&str> = rows[1].2["fields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap())
        .collect();
    fields.sort_unstable();
    assert_eq!(fields, ["concurrency", "name"]);
}

#[tokio::test]
async fn a_brief_from_before_ownership_is_open_until_an_admin_assigns_an_owner() {
    let app = spawn_app().await;
    let brief = app.brief_id().await;
    let trial = first_trial_id(&app, &brief).await;
    // As the migration leaves a brief made before it: no owner, no team.
    sqlx::query("DELETE FROM brief_owners")
        .execute(&app.pool)
        .await
        .unwrap();
    let (_, _, b_api) = person_with_token(&app, Role::Engineer).await;
    assert_eq!(
        api_writes(&app, &b_api, &brief, &trial).await[0].1,
        200,
        "open to every engineer"
    );

    let admin = app.login(Role::Admin).await;
    let users_page = admin.get(app.url("/admin/users")).await.text().await.unwrap();
    assert!(
        users_page.contains(&format!("/briefs/{brief}/sharing")),
        "listed as unowned"
    );
    let res = admin
        .client
        .post(app.url(&format!("/briefs/{brief}/sharing/owner")))
        .form(&[("csrf_token", admin.csrf.as_str()), ("email", OWNER_EMAIL)])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 303);
    assert_eq!(
        api_writes(&app, &b_api, &brief, &trial).await[0].1,
        403,
        "now it has an owner"
    );
    // Only admins assign owners.
    let b = app.login(Role::Engineer).await;
    let res = b
        .client
        .post(app.url(&format!("/briefs/{brief}/sharing/owner")))
        .form(&[("csrf_token", b.csrf.as_str()), ("email", b.email.as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 403);
}

#[tokio::test]
async fn admins_manage_teams_from_the_users_page() {
    let app = spawn_app().await;
    let admin = app.login(Role::Admin).await;
    let member = app.user(Role::Engineer).await;
    let post = |path: &str, fields: Vec<(&str, &str)>| {
        let mut form = vec![("csrf_token", admin.csrf.as_str())];
        form.extend(fields);
        admin.client.post(app.url(path)).form(&form).send()
    };
    assert_eq!(
        post("/admin/teams", vec![("name", "training")]).await.unwrap().status(),
        303
    );
    assert_eq!(
        post("/admin/teams", vec![("name", "training")]).await.unwrap().status(),
        409,
        "names are unique"
    );
    let team = teams::team_by_name(&app.pool, "training").await.unwrap();
    let res = post(&format!("/admin/teams/{}/members", team.id), vec![("email", &member)])
        .await
        .unwrap();
    assert_eq!(res.status(), 303);
    let page = admin.get(app.url("/admin/users")).await.text().await.unwrap();
    assert!(page.contains("training") && page.contains(&member), "{page}");
    // Engineers cannot.
    let engineer = app.login(Role::Engineer).await;
    let res = engineer
        .client
        .post(app.url("/admin/teams"))
        .form(&[("csrf_token", engineer.csrf.as_str()), ("name", "mine")])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 403);
}
