//! Test helpers: a real server on a free port over a fresh PostgreSQL database per test.
#![allow(dead_code)]

pub mod browser;
pub mod builders;
pub mod s3;
pub mod vllm_points;

use std::{str::FromStr, sync::Arc};

use rentcheck::{
    auth::{
        session,
        token::{self, NewToken},
        users, Role,
    },
    config::AppConfig,
    db,
    evidence_store::EvidenceStore,
    http,
    ids::UserId,
    secrets::{sha256, TokenKeys},
    state::AppState,
};
use serde_json::{json, Value};
use sqlx::{
    postgres::{PgConnectOptions, PgPoolOptions},
    Connection, Executor, PgConnection, PgPool,
};

/// The server PostgreSQL tests create their databases on.
pub fn admin_url() -> String {
    std::env::var("TEST_DATABASE_URL").unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_owned())
}

pub struct TestApp {
    pub base: String,
    /// A client without credentials: the anonymous actor.
    pub anon: reqwest::Client,
    /// The same client carrying an engineer's bearer token: the default API caller.
    pub client: reqwest::Client,
    /// That engineer's bearer token.
    pub token: String,
    pub pool: PgPool,
    pub keys: TokenKeys,
    /// The secret behind `keys`, for running the CLI against this server.
    pub jwt_secret: String,
    /// The URL of this test's own database, for running the CLI against it.
    pub database_url: String,
    /// The first-run page's code (`/setup?code=…`), as `rentcheck serve` prints it.
    pub setup_code: String,
    /// The token rows this server keeps: what a change made through it passes to
    /// `token::revoke_audited` or `users::change`, so its next request is refused at once rather than
    /// when the change's notification arrives.
    pub kept_tokens: Arc<token::Tokens>,
    _database: DatabaseGuard,
}

/// The password every test user gets.
pub const PASSWORD: &str = "correct horse battery staple";

/// The scrape token tests give the server (`AppConfig::metrics_token`) for `/metrics/briefs`; the
/// server wants at least 32 characters.
pub const METRICS_TOKEN: &str = "let-prometheus-in-with-32-characters";

/// The engineer behind `TestApp::client`'s token, and so the owner of every brief a
/// `BriefBuilder` creates: the person who may edit those briefs from a browser (`TestApp::login_owner`).
pub const OWNER_EMAIL: &str = "engineer@example.com";

/// Creates a fresh database, migrates it, and serves the app on 127.0.0.1:0.
pub async fn spawn_app() -> TestApp {
    spawn_app_with(AppConfig::default()).await
}

/// A test's own database, dropped (connections and all) when this goes out of scope.
pub struct DatabaseGuard(pub String);

/// A new, empty database on the test server, and how to connect to it.
pub async fn create_database() -> (DatabaseGuard, PgConnectOptions) {
    let db_name = format!("rentcheck_test_{}", uuid::Uuid::new_v4().simple());
    let admin = PgConnectOptions::from_str(&admin_url()).expect("TEST_DATABASE_URL");
    admin_statements(vec![format!("CREATE DATABASE {db_name}")]).await;
    let options = admin.database(&db_name);
    (DatabaseGuard(db_name), options)
}

/// Statements run in order on one of the run's connections to the test server's own database, and
/// where to send what they gave.
type AdminJob = (Vec<String>, Box<dyn FnOnce(Result<(), String>) + Send>);

/// The run's few connections for making and dropping the tests' databases, on a thread with a
/// runtime of its own (a connection belongs to the runtime it was made on, and every test has its
/// own). A connection and a thread of their own for each test's making and again for its dropping
/// cost PostgreSQL two backends a test and the test binary as much again. One connection was too
/// few: a database's making waited behind another's dropping, and the cores stood idle.
fn admin_jobs() -> tokio::sync::mpsc::UnboundedSender<AdminJob> {
    static JOBS: std::sync::OnceLock<tokio::sync::mpsc::UnboundedSender<AdminJob>> = std::sync::OnceLock::new();
    JOBS.get_or_init(|| {
        let (send, mut receive) = tokio::sync::mpsc::unbounded_channel::<AdminJob>();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                let admin = PgConnectOptions::from_str(&admin_url()).expect("TEST_DATABASE_URL");
                let pool = PgPoolOptions::new().max_connections(4).connect_lazy_with(admin);
                while let Some((statements, answer)) = receive.recv().await {
                    let pool = pool.clone();
                    tokio::spawn(async move { answer(run_admin(&pool, &statements).await) });
                }
            });
        });
        send
    })
    .clone()
}

/// Runs `statements` in order on one connection of the admin pool.
async fn run_admin(pool: &PgPool, statements: &[String]) -> Result<(), String> {
    let mut conn = pool.acquire().await.map_err(|e| {
        format!(
            "PostgreSQL must answer at TEST_DATABASE_URL (default postgres://postgres@127.0.0.1:5432/postgres): {e}"
        )
    })?;
    for statement in statements {
        conn.execute(statement.as_str())
            .await
            .map_err(|e| format!("{statement}: {e}"))?;
    }
    Ok(())
}

/// Runs `statements` on one of the admin connections and panics with PostgreSQL's message if one fails.
async fn admin_statements(statements: Vec<String>) {
    let (send, receive) = tokio::sync::oneshot::channel();
    admin_jobs()
        .send((statements, Box::new(move |done| drop(send.send(done)))))
        .expect("the admin connection's thread is running");
    receive.await.expect("the admin connection's thread answered").unwrap();
}

/// Serves the app over `pool` on 127.0.0.1:0 and returns its base URL. The port is bound before
/// this returns, so requests can follow at once.
pub async fn serve_app(pool: PgPool, config: AppConfig, keys: TokenKeys) -> String {
    serve_app_with_store(pool, config, keys, EvidenceStore::Database).await
}

/// [`serve_app`] keeping raw evidence bytes in `store`.
pub async fn serve_app_with_store(pool: PgPool, config: AppConfig, keys: TokenKeys, store: EvidenceStore) -> String {
    serve_app_keeping_tokens(pool, config, keys, store).await.0
}

/// [`serve_app_with_store`], also giving the token rows the server keeps.
async fn serve_app_keeping_tokens(
    pool: PgPool,
    config: AppConfig,
    keys: TokenKeys,
    store: EvidenceStore,
) -> (String, Arc<token::Tokens>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let state = AppState::new(pool.clone(), config, keys).with_evidence_store(store);
    // As `rentcheck serve` does: the evidence-metrics compactor runs beside the server.
    rentcheck::evidence::compactor::spawn(pool.clone(), state.metrics.clone());
    // As `rentcheck serve` does: token rows are reused for a second, forgotten on any change.
    let kept_tokens = state.slots.get::<token::Tokens>();
    rentcheck::auth::token_cache::spawn_listener(&pool, kept_tokens.clone());
    let router = http::app(state);
    tokio::spawn(http::serve(listener, router, std::future::pending()));
    (base, kept_tokens)
}

/// A pool of at most `max` connections to a test database.
pub async fn connect(options: &PgConnectOptions, max: u32) -> PgPool {
    PgPoolOptions::new()
        .max_connections(max)
        .connect_with(options.clone())
        .await
        .unwrap()
}

/// A new database with every migration applied, and a pool to it: a copy of the run's migrated
/// template (`CREATE DATABASE … TEMPLATE`, a file copy, far quicker than running every migration
/// for every test), or migrated from scratch with `RENTCHECK_TEST_TEMPLATE=0`.
pub async fn migrated_database(max: u32) -> (DatabaseGuard, PgPool) {
    let Some(template) = migrated_template().await else {
        let (database, options) = create_database().await;
        let pool = connect(&options, max).await;
        db::migrate(&pool).await.unwrap();
        return (database, pool);
    };
    let db_name = format!("rentcheck_test_{}", uuid::Uuid::new_v4().simple());
    let admin = PgConnectOptions::from_str(&admin_url()).expect("TEST_DATABASE_URL");
    admin_statements(vec![
        format!("CREATE DATABASE {db_name} TEMPLATE {template}"),
        // Nothing a test checks survives a crash of the PostgreSQL server, so this database's
        // commits need not wait for the WAL to reach the disk. The server's own setting stays.
        format!("ALTER DATABASE {db_name} SET synchronous_commit = off"),
    ])
    .await;
    let pool = connect(&admin.database(&db_name), max).await;
    (DatabaseGuard(db_name), pool)
}

static TEMPLATE: tokio::sync::OnceCell<Option<String>> = tokio::sync::OnceCell::const_new();

/// The migrated template every test database copies, made once per set of migrations: its name
/// carries a digest of `migrations/`, so a changed migration makes a new one (and older ones are
/// dropped) and an unchanged one is reused by the next run. Built under a temporary name and
/// renamed when complete, so a run that dies half-way never leaves a half-migrated template.
async fn migrated_template() -> Option<&'static str> {
    if std::env::var("RENTCHECK_TEST_TEMPLATE").is_ok_and(|v| v == "0") {
        return None;
    }
    TEMPLATE
        .get_or_init(|| async { Some(make_template().await) })
        .await
        .as_deref()
}

async fn make_template() -> String {
    use sha2::{Digest, Sha256};
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations");
    let mut files: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    let mut digest = Sha256::new();
    for f in files {
        digest.update(f.file_name().unwrap().to_string_lossy().as_bytes());
        digest.update(std::fs::read(&f).unwrap());
    }
    let hex: String = digest.finalize().iter().take(8).map(|b| format!("{b:02x}")).collect();
    let name = format!("rentcheck_template_{hex}");
    let admin = PgConnectOptions::from_str(&admin_url()).expect("TEST_DATABASE_URL");
    let mut conn = PgConnection::connect_with(&admin)
        .await
        .expect("PostgreSQL must answer at TEST_DATABASE_URL (default postgres://postgres@127.0.0.1:5432/postgres)");
    let exists: bool = sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)")
        .bind(&name)
        .fetch_one(&mut conn)
        .await
        .unwrap();
    if !exists {
        let building = format!("{name}_{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
        conn.execute(format!("CREATE DATABASE {building}").as_str())
            .await
            .unwrap();
        let pool = connect(&admin.clone().database(&building), 1).await;
        db::migrate(&pool).await.unwrap();
        pool.close().await;
        // Another run may have finished its template first: then ours goes.
        if conn
            .execute(format!("ALTER DATABASE {building} RENAME TO {name}").as_str())
            .await
            .is_err()
        {
            let _ = conn
                .execute(format!("DROP DATABASE IF EXISTS {building}").as_str())
                .await;
        }
        drop_stale_templates(&mut conn, &name).await;
    }
    conn.close().await.unwrap();
    name
}

/// How long another set of migrations' template is kept: a run of another branch (another
/// checkout, another worktree) may be copying it right now, and dropping it under that run made
/// each of its tests fail with "template database … does not exist".
const STALE_TEMPLATE_AGE: &str = "1 day";

/// Drops the templates of other sets of migrations that no run has made for a day. A template's
/// age is its directory's (`pg_stat_file` of `base/<oid>`), so it needs no bookkeeping; a template
/// whose age cannot be read is kept.
async fn drop_stale_templates(conn: &mut PgConnection, current: &str) {
    let stale: Vec<String> = sqlx::query_scalar(&format!(
        "SELECT datname FROM pg_database d \
          WHERE datname LIKE 'rentcheck\\_template\\_%' AND datname <> $1 AND datname NOT LIKE $1 || '\\_%' \
            AND (pg_stat_file('base/' || d.oid, true)).modification < now() - interval '{STALE_TEMPLATE_AGE}'"
    ))
    .bind(current)
    .fetch_all(&mut *conn)
    .await
    .unwrap_or_default();
    for old in stale {
        let _ = conn.execute(format!("DROP DATABASE IF EXISTS {old}").as_str()).await;
    }
}

pub async fn spawn_app_with(config: AppConfig) -> TestApp {
    spawn_app_with_store(config, EvidenceStore::Database).await
}

/// A test app that keeps raw evidence bytes in `store`.
pub async fn spawn_app_with_store(config: AppConfig, store: EvidenceStore) -> TestApp {
    let (database, pool) = migrated_database(5).await;
    let db_name = database.0.clone();

    let jwt_secret = uuid::Uuid::new_v4().simple().to_string().repeat(2);
    let keys = TokenKeys::from_secret(jwt_secret.as_bytes());
    let setup_code = config.setup_code.expose().to_owned();
    let (base, kept_tokens) = serve_app_keeping_tokens(pool.clone(), config, keys.clone(), store).await;
    let anon = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let database_url = format!("{}/{db_name}", admin_url().rsplit_once('/').unwrap().0);
    let mut app = TestApp {
        base,
        anon: anon.clone(),
        client: anon,
        token: String::new(),
        pool,
        keys,
        jwt_secret,
        database_url,
        setup_code,
        kept_tokens,
        _database: database,
    };
    let token = app.token(Role::Engineer, None).await;
    app.client = bearer_client(&token);
    app.token = token;
    app
}

/// The person behind a test's person token (a person token acts as its person): made on first use.
pub async fn person(pool: &PgPool, email: &str, role: Role) -> UserId {
    match users::by_email(pool, email).await.unwrap() {
        Some(u) => u.id,
        None => add_user(pool, email, role).await,
    }
}

/// [`PASSWORD`] hashed once per test process by the server's own `password::hash` (argon2id with
/// the parameters production uses). Argon2 is slow on purpose, about 30 ms of CPU a hash, and the
/// tests add a user or two each: they all get this hash instead of a fresh one. Signing in still
/// verifies the password against it in full.
async fn password_hash() -> &'static str {
    static HASH: tokio::sync::OnceCell<String> = tokio::sync::OnceCell::const_new();
    HASH.get_or_init(|| async { rentcheck::auth::password::hash(PASSWORD.to_owned()).await.unwrap() })
        .await
}

/// Adds a user whose password is [`PASSWORD`], as `rentcheck user add` does (the same row), with
/// the hash of [`password_hash`].
pub async fn add_user(pool: &PgPool, email: &str, role: Role) -> UserId {
    let email = users::normalize_email(email).unwrap();
    assert_ne!(role, Role::Agent, "agents are tokens, not users");
    sqlx::query_scalar("INSERT INTO users (id, email, role, password_hash) VALUES ($1, $2, $3, $4) RETURNING id")
        .bind(uuid::Uuid::now_v7())
        .bind(&email)
        .bind(role.as_str())
        .bind(password_hash().await)
        .fetch_one(pool)
        .await
        .unwrap()
}

/// An engineer's bearer token, minted straight into `pool` with `keys`.
pub async fn engineer_token(pool: &PgPool, keys: &TokenKeys) -> String {
    let user = person(pool, OWNER_EMAIL, Role::Engineer).await;
    token::mint(
        pool,
        keys,
        NewToken {
            name: "test engineer".into(),
            subject: OWNER_EMAIL.into(),
            role: Role::Engineer,
            brief: None,
            trial: None,
            ttl: chrono::Duration::hours(1),
            created_by: Some(user),
        },
    )
    .await
    .unwrap()
    .0
}

/// A client that sends `Authorization: Bearer <token>` on every request.
pub fn bearer_client(token: &str) -> reqwest::Client {
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert(
        reqwest::header::AUTHORIZATION,
        format!("Bearer {token}").parse().unwrap(),
    );
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .default_headers(headers)
        .build()
        .unwrap()
}

/// A client that keeps cookies and does not follow redirects, as a browser session under test.
pub fn cookie_client() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .cookie_store(true)
        .build()
        .unwrap()
}

/// A signed-in person: a client with the session cookie, and the session's CSRF token.
pub struct Person {
    pub email: String,
    pub client: reqwest::Client,
    pub csrf: String,
}

impl Person {
    pub async fn get(&self, url: String) -> reqwest::Response {
        self.client.get(url).send().await.unwrap()
    }
}

/// The value of `<input ... name="NAME" value="...">` in a page.
pub fn input_value(html: &str, name: &str) -> Option<String> {
    let at = html.find(&format!("name=\"{name}\""))?;
    let rest = &html[at..];
    let start = rest.find("value=\"")? + 7;
    let end = rest[start..].find('"')?;
    Some(rest[start..start + end].to_owned())
}

impl TestApp {
    /// Creates a user of `role` the way `rentcheck user add` does.
    pub async fn user(&self, role: Role) -> String {
        let email = format!(
            "{}-{}@example.com",
            role.as_str(),
            &uuid::Uuid::new_v4().simple().to_string()[..8]
        );
        add_user(&self.pool, &email, role).await;
        email
    }

    /// An agent token for one trial of a brief (`rentcheck token mint --trial`).
    pub async fn trial_token(&self, brief: uuid::Uuid, trial: uuid::Uuid) -> String {
        token::mint(
            &self.pool,
            &self.keys,
            NewToken {
                name: "test trial agent".into(),
                subject: "agent@example.com".into(),
                role: Role::Agent,
                brief: Some(brief.into()),
                trial: Some(trial.into()),
                ttl: chrono::Duration::days(1),
                created_by: None,
            },
        )
        .await
        .unwrap()
        .0
    }

    /// A bearer token the way `rentcheck token mint` makes one: a person token for the person
    /// `{role}@example.com` (made on first use), an agent token minted by nobody in particular.
    pub async fn token(&self, role: Role, brief: Option<uuid::Uuid>) -> String {
        let subject = format!("{}@example.com", role.as_str());
        let created_by = match role {
            Role::Agent => None,
            _ => Some(person(&self.pool, &subject, role).await),
        };
        let (signed, _) = token::mint(
            &self.pool,
            &self.keys,
            NewToken {
                name: format!("test {}", role.as_str()),
                subject,
                role,
                brief: brief.map(Into::into),
                trial: None,
                ttl: chrono::Duration::days(1),
                created_by,
            },
        )
        .await
        .unwrap();
        signed
    }

    /// Signs in the owner of the briefs `BriefBuilder` creates (the engineer behind `client`).
    pub async fn login_owner(&self) -> Person {
        self.signed_in_as(OWNER_EMAIL).await
    }

    /// Signs a new user of `role` in (see [`TestApp::signed_in_as`]).
    pub async fn login(&self, role: Role) -> Person {
        let email = self.user(role).await;
        self.signed_in_as(&email).await
    }

    /// A session for `email`, made by what the sign-in calls once the password checks
    /// (`auth::session::create`): its cookie value and its CSRF token. Tests whose subject comes
    /// after the sign-in start here; the form itself (CSRF, throttling, lockout, `next`, the audit
    /// line) is what [`TestApp::login_as`] and the tests in `auth::pages` and `browser::auth` go
    /// through. Skipping it spares each such test two pages and a password hash.
    pub async fn session_for(&self, email: &str) -> (String, String) {
        let user = users::by_email(&self.pool, email)
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("no user {email}"));
        let cookie = session::create(&self.pool, user.id, session::SessionLimits::default())
            .await
            .unwrap();
        let csrf = sqlx::query_scalar::<_, String>("SELECT csrf_token FROM sessions WHERE id_hash = $1")
            .bind(sha256(cookie.as_bytes()))
            .fetch_one(&self.pool)
            .await
            .unwrap();
        (cookie, csrf)
    }

    /// `email` signed in with a session of its own (see [`TestApp::session_for`]).
    pub async fn signed_in_as(&self, email: &str) -> Person {
        let (cookie, csrf) = self.session_for(email).await;
        let jar = reqwest::cookie::Jar::default();
        jar.add_cookie_str(
            &format!("{}={cookie}; Path=/; HttpOnly; SameSite=Lax", session::COOKIE),
            &self.base.parse().unwrap(),
        );
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .cookie_provider(Arc::new(jar))
            .build()
            .unwrap();
        Person {
            email: email.to_owned(),
            client,
            csrf,
        }
    }

    /// `/metrics/briefs` as Prometheus reads it, with [`METRICS_TOKEN`] (which the app's config
    /// must carry): the page, once it is answered 200.
    pub async fn scrape_briefs(&self) -> String {
        let res = self
            .anon
            .get(self.url("/metrics/briefs"))
            .bearer_auth(METRICS_TOKEN)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200);
        res.text().await.unwrap()
    }

    /// Opens `/login` with `client` and submits the form with its CSRF token, like a browser.
    pub async fn submit_login(
        &self,
        client: &reqwest::Client,
        email: &str,
        password: &str,
        next: &str,
    ) -> reqwest::Response {
        let page = client
            .get(self.url("/login"))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        let csrf = input_value(&page, "csrf_token").expect("login form has a CSRF token");
        client
            .post(self.url("/login"))
            .form(&[
                ("csrf_token", csrf.as_str()),
                ("email", email),
                ("password", password),
                ("next", next),
            ])
            .send()
            .await
            .unwrap()
    }

    /// Logs in through `/login` like a browser; `None` when the login is refused.
    pub async fn login_as(&self, email: &str, password: &str) -> Option<Person> {
        let client = cookie_client();
        let res = self.submit_login(&client, email, password, "/").await;
        if res.status() != 303 {
            return None;
        }
        let home = client.get(self.url("/")).send().await.unwrap().text().await.unwrap();
        let csrf = input_value(&home, "csrf_token").expect("pages carry the session's CSRF token");
        Some(Person {
            email: email.to_owned(),
            client,
            csrf,
        })
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }

    pub async fn post_json(&self, path: &str, body: &Value) -> reqwest::Response {
        self.client.post(self.url(path)).json(body).send().await.unwrap()
    }

    pub async fn put_json(&self, path: &str, body: &Value) -> reqwest::Response {
        self.client.put(self.url(path)).json(body).send().await.unwrap()
    }

    pub async fn get(&self, path: &str) -> reqwest::Response {
        self.client.get(self.url(path)).send().await.unwrap()
    }

    /// A page as the brief's owner reads it (signed in afresh), its HTML.
    pub async fn owner_page(&self, path: &str) -> String {
        let owner = self.login_owner().await;
        owner.get(self.url(path)).await.text().await.unwrap()
    }

    /// The JSON an API read answers, as the default engineer.
    pub async fn get_json(&self, path: &str) -> Value {
        self.get(path).await.json().await.unwrap()
    }

    pub async fn count(&self, table: &str) -> i64 {
        sqlx::query_scalar(&format!("SELECT count(*) FROM {table}"))
            .fetch_one(&self.pool)
            .await
            .unwrap()
    }
}

impl Drop for DatabaseGuard {
    fn drop(&mut self) {
        let db_name = std::mem::take(&mut self.0);
        // Drop runs inside the test's runtime, which is blocked here while the admin connection's
        // thread drops the database. FORCE ends the server's connections, which belong to the
        // blocked runtime. A drop that fails is let go, as it always was.
        let (send, receive) = std::sync::mpsc::channel();
        let job: AdminJob = (
            vec![format!("DROP DATABASE IF EXISTS {db_name} WITH (FORCE)")],
            Box::new(move |done| drop(send.send(done))),
        );
        if admin_jobs().send(job).is_ok() {
            let _ = receive.recv();
        }
    }
}

/// A complete, valid brief: Llama 3.1 70B served in bf16, 8k context, 16 sequences. The base of
/// `builders::BriefBuilder`, which changes what a test cares about.
pub fn valid_brief() -> Value {
    json!({
        "name": "Chat assistant 70B",
        "owner": "ml-infra@example.com",
        "workload_kind": "realtime-inference",
        "model_name": "meta-llama/Llama-3.1-70B-Instruct",
        "model_revision": "main",
        "params_b": 70.55,
        "precision": "bf16",
        "context_length": 8192,
        "concurrency": 16,
        "num_layers": 80,
        "num_kv_heads": 8,
        "head_dim": 128,
        "targets": { "ttft_p95_ms": 500, "itl_p95_ms": 50, "error_rate": 0.01 },
        "data_boundary": "private-network",
        "needs_host_control": false,
        "only_needs_model_output": false,
        "persist": ["weights", "outputs"],
        "restore_plan": "Pull weights from the bucket; restart the pod.",
        "fallback_plan": "Route to the managed API at reduced quality.",
        "max_cost_per_job": "0.004",
        "currency": "USD",
        "cost_unit": "request",
        "allocation_boundary": "vm"
    })
}

/// A file from tests/fixtures/.
pub fn fixture(rel: &str) -> Vec<u8> {
    let p = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(rel);
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

impl TestApp {
    /// Makes `change` outside the server (SQL on another connection, the CLI) and waits until the
    /// server has heard of it: the token rows a server keeps for a second are forgotten when the
    /// change notification arrives. Their generation moves only when rows are forgotten that way, or
    /// by a change made through this server, or when the listener reconnects; never as a row ages.
    /// Fails after 10 s, when the notification never came. The request after it is refused at once;
    /// without the notification it would be answered from the kept row until the second is out. (A
    /// bound on the time to the first refusal said the same on a quiet machine, but a loaded one could
    /// stall a request past it.)
    pub async fn heard_of<T>(&self, change: impl std::future::Future<Output = T>) -> T {
        let before = self.kept_tokens.generation();
        let made = change.await;
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while self.kept_tokens.generation() == before {
            assert!(
                std::time::Instant::now() < deadline,
                "the server never heard of the change"
            );
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        made
    }

    /// Creates the valid brief (`BriefBuilder::new()`, nothing changed) and returns its id.
    pub async fn brief_id(&self) -> String {
        builders::BriefBuilder::new().create_id(self).await
    }

    /// Uploads `bytes` as a raw body with the query `query` (`kind=…&stage=…`), as the evidence
    /// API's raw form takes it; `builders::EvidenceBuilder` composes the query for most tests.
    pub async fn post_raw_evidence(
        &self,
        brief: &str,
        query: &str,
        content_type: &str,
        bytes: Vec<u8>,
    ) -> reqwest::Response {
        self.client
            .post(self.url(&format!("/api/v1/briefs/{brief}/evidence?{query}")))
            .header("content-type", content_type)
            .body(bytes)
            .send()
            .await
            .unwrap()
    }
}

/// One request of a `vllm bench serve --save-detailed` file, worked out by hand the way vLLM's
/// `--goodput` judges it: TTFT, TPOT = the inter-token gaps ÷ (output tokens − 1), and end-to-end
/// latency = TTFT + the gaps (the file keeps no per-request latency); an errored request is not ok.
pub struct HandRequest {
    pub ok: bool,
    pub ttft_ms: f64,
    pub tpot_ms: f64,
    pub e2e_ms: f64,
}

pub fn vllm_requests(file: &Value) -> Vec<HandRequest> {
    let arr = |k: &str| file[k].as_array().unwrap().clone();
    let (ttfts, itls, outs, errors) = (arr("ttfts"), arr("itls"), arr("output_lens"), arr("errors"));
    (0..ttfts.len())
        .map(|i| {
            let ttft_ms = ttfts[i].as_f64().unwrap() * 1000.0;
            let gaps: f64 = itls[i]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_f64().unwrap())
                .sum::<f64>()
                * 1000.0;
            let n = outs[i].as_f64().unwrap();
            HandRequest {
                ok: errors[i].as_str().unwrap_or_default().is_empty(),
                ttft_ms,
                tpot_ms: if n > 1.0 { gaps / (n - 1.0) } else { 0.0 },
                e2e_ms: ttft_ms + gaps,
            }
        })
        .collect()
}

/// A `metrics` evidence row a test writes straight through `evidence::repo`, owning what the row
/// borrows.
pub struct TestEvidence {
    pub id: uuid::Uuid,
    pub brief: rentcheck::ids::BriefId,
    pub trial: rentcheck::ids::TrialId,
    pub stage: i16,
    pub raw: Vec<u8>,
    pub sha256: String,
    pub metrics: Value,
    /// As the server writes it: the compactor groups items by it.
    pub metric_keys_digest: Option<[u8; 16]>,
    pub labels: Value,
    pub collected_at: Option<chrono::DateTime<chrono::Utc>>,
}

impl TestEvidence {
    /// An upload of `metrics` (its raw bytes the envelope `{"metrics": …}`), received now.
    pub fn metrics(brief: uuid::Uuid, trial: uuid::Uuid, stage: i16, metrics: Value) -> Self {
        let raw = serde_json::to_vec(&json!({ "metrics": metrics })).unwrap();
        Self {
            id: uuid::Uuid::now_v7(),
            brief: brief.into(),
            trial: trial.into(),
            stage,
            sha256: rentcheck::evidence::model::sha256_hex(&raw),
            raw,
            metric_keys_digest: rentcheck::evidence::model::metric_keys_digest(&metrics),
            metrics,
            labels: json!({}),
            collected_at: None,
        }
    }

    pub fn row(&self) -> rentcheck::evidence::repo::NewEvidence<'_> {
        rentcheck::evidence::repo::NewEvidence {
            id: self.id,
            brief_id: self.brief,
            trial_id: self.trial,
            kind: "metrics",
            stage: self.stage,
            content_type: "application/json",
            filename: None,
            raw: &self.raw,
            raw_object: None,
            sha256: &self.sha256,
            metrics: &self.metrics,
            metric_keys_digest: self.metric_keys_digest.as_ref().map(|d| d.as_slice()),
            warnings: &[],
            parse_status: "ok",
            parse_error: None,
            tool: None,
            tool_version: None,
            parser_version: "test",
            labels: &self.labels,
            collected_at: self.collected_at,
            uploaded_by: None,
        }
    }
}
