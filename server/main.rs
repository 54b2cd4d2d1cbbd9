//! The `rentcheck` binary: a thin command line over the library.

use std::{io::Read, process::ExitCode};

use clap::{Parser, Subcommand};
use rentcheck::{
    audit,
    auth::{
        password,
        token::{self, NewToken, TokenKeys},
        users, Role,
    },
    collect,
    config::{AppConfig, DbConfig, ServeConfig, TokenConfig},
    db::{self, Database},
    evidence, http,
    state::AppState,
    telemetry,
};
use serde_json::json;

#[derive(Parser)]
#[command(
    name = "rentcheck",
    version,
    about = "Turns renting a GPU server into an acceptance test"
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Apply migrations, then serve HTTP (the default).
    Serve {
        #[command(flatten)]
        db: DbConfig,
        #[command(flatten)]
        serve: ServeConfig,
        #[command(flatten)]
        tokens: TokenConfig,
    },
    /// Apply migrations and exit.
    Migrate {
        #[command(flatten)]
        db: DbConfig,
    },
    /// Manage people's accounts.
    User {
        #[command(subcommand)]
        action: UserAction,
    },
    /// Load a demonstration brief with evidence in every stage and a ledger; print its URL and a login.
    Demo {
        #[command(flatten)]
        db: DbConfig,
        #[command(flatten)]
        tokens: TokenConfig,
        /// The address the server listens on, for the printed URL.
        #[arg(long, env = "RENTCHECK_ADDR", default_value = "127.0.0.1:8080")]
        addr: std::net::SocketAddr,
    },
    /// Mint and revoke bearer tokens.
    Token {
        #[command(subcommand)]
        action: TokenAction,
    },
    /// Agent side: run nvidia-smi / dcgmi where present, scrape vLLM, and POST each output as
    /// evidence to a brief (idempotent, with retries). Prints a summary; fails when any step failed.
    Collect(Box<collect::CollectArgs>),
}

#[derive(Subcommand)]
enum UserAction {
    /// Create a user. The password is read from stdin with --password-stdin, else generated and printed once.
    Add {
        #[arg(long)]
        email: String,
        /// engineer, manager or admin
        #[arg(long)]
        role: String,
        #[arg(long)]
        password_stdin: bool,
        #[command(flatten)]
        db: DbConfig,
    },
}

#[derive(Subcommand)]
enum TokenAction {
    /// Print a new bearer token for a user (or, with --role agent, an agent token for one brief).
    Mint {
        #[arg(long)]
        email: String,
        /// Limit the token to one brief (required for agent tokens).
        #[arg(long)]
        brief: Option<uuid::Uuid>,
        /// agent, or a role no higher than the user's own (default: the user's role).
        #[arg(long)]
        role: Option<String>,
        /// Lifetime: 30d, 12h, 90m.
        #[arg(long, default_value = "30d")]
        ttl: String,
        /// A name to recognise the token by.
        #[arg(long)]
        name: Option<String>,
        #[command(flatten)]
        db: DbConfig,
        #[command(flatten)]
        tokens: TokenConfig,
    },
    /// Revoke a token by its jti; it stops working at once.
    Revoke {
        jti: uuid::Uuid,
        #[command(flatten)]
        db: DbConfig,
    },
}

#[tokio::main]
async fn main() -> ExitCode {
    telemetry::init();
    let cli = Cli::parse();
    // `rentcheck` alone means `rentcheck serve`, with settings from the environment.
    let command = match cli.command {
        Some(c) => c,
        None => match Cli::parse_from(["rentcheck", "serve"]).command {
            Some(c) => c,
            None => unreachable!("serve was given"),
        },
    };
    let result = match command {
        Command::Serve { db, serve, tokens } => run_serve(db, serve, tokens).await,
        Command::Migrate { db } => with_database(&db, |_| async { Ok("migrations applied".to_owned()) }).await,
        Command::User {
            action:
                UserAction::Add {
                    email,
                    role,
                    password_stdin,
                    db,
                },
        } => add_user(db, email, role, password_stdin).await,
        Command::Token {
            action:
                TokenAction::Mint {
                    email,
                    brief,
                    role,
                    ttl,
                    name,
                    db,
                    tokens,
                },
        } => mint_token(db, tokens, email, brief, role, ttl, name).await,
        Command::Token {
            action: TokenAction::Revoke { jti, db },
        } => revoke_token(db, jti).await,
        // collect has exit statuses of its own (docs/agents.md).
        Command::Collect(args) => return collect::main(*args).await,
        Command::Demo { db, tokens, addr } => run_demo(db, tokens, addr).await,
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("rentcheck: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Opens and migrates the database, runs `work`, prints its answer, and closes the database
/// (stopping the private cluster if this command started it).
async fn with_database<F, Fut>(db_config: &DbConfig, work: F) -> anyhow::Result<()>
where
    F: FnOnce(sqlx::PgPool) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<String>>,
{
    let database = Database::open(db_config).await?;
    let outcome = async {
        db::migrate(&database.pool).await?;
        work(database.pool.clone()).await
    }
    .await;
    database.close().await;
    println!("{}", outcome?);
    Ok(())
}

async fn add_user(db: DbConfig, email: String, role: String, password_stdin: bool) -> anyhow::Result<()> {
    let role = users::person_role(&role).map_err(|m| anyhow::anyhow!("--role {m}"))?;
    let password = if password_stdin {
        let mut text = String::new();
        std::io::stdin().read_to_string(&mut text)?;
        let text = text.trim_end_matches(['\n', '\r']).to_owned();
        anyhow::ensure!(
            text.chars().count() >= password::MIN_PASSWORD_LEN,
            "the password must be at least {} characters",
            password::MIN_PASSWORD_LEN
        );
        Some(text)
    } else {
        None
    };
    with_database(&db, |pool| async move {
        let (user, generated) = users::add(&pool, &email, role, password).await.map_err(describe)?;
        audit::record(&pool, "cli", "user.add", &user.email, json!({ "role": role.as_str() })).await?;
        Ok(match generated {
            Some(p) => format!("created {} ({})\npassword (shown once): {p}", user.email, user.role),
            None => format!("created {} ({})", user.email, user.role),
        })
    })
    .await
}

fn describe(e: rentcheck::error::AppError) -> anyhow::Error {
    match e {
        rentcheck::error::AppError::Validation(errors) => anyhow::anyhow!(errors
            .iter()
            .map(|e| format!("{} {}", e.field, e.message))
            .collect::<Vec<_>>()
            .join("; ")),
        other => anyhow::anyhow!(other.to_string()),
    }
}

async fn mint_token(
    db: DbConfig,
    tokens: TokenConfig,
    email: String,
    brief: Option<uuid::Uuid>,
    role: Option<String>,
    ttl: String,
    name: Option<String>,
) -> anyhow::Result<()> {
    let keys = TokenKeys::load(tokens.jwt_secret.as_ref(), &db.data_dir)?;
    let ttl = token::parse_ttl(&ttl).map_err(|m| anyhow::anyhow!("--ttl: {m}"))?;
    with_database(&db, |pool| async move {
        let email = users::normalize_email(&email).map_err(|m| anyhow::anyhow!("--email {m}"))?;
        let user = users::by_email(&pool, &email)
            .await?
            .ok_or_else(|| anyhow::anyhow!("no user {email}; create one with `rentcheck user add`"))?;
        let role = match role {
            Some(r) => r
                .parse::<Role>()
                .map_err(|_| anyhow::anyhow!("--role must be agent, engineer, manager or admin"))?,
            None => user.role(),
        };
        anyhow::ensure!(
            role <= user.role(),
            "{email} is {} and cannot mint a {} token",
            user.role,
            role.as_str()
        );
        anyhow::ensure!(
            role != Role::Agent || brief.is_some(),
            "an agent token needs --brief ID"
        );
        if let Some(brief) = brief {
            anyhow::ensure!(
                rentcheck::briefs::repo::get(&pool, brief).await?.is_some(),
                "no brief {brief}"
            );
        }
        let (signed, row) = token::mint(
            &pool,
            &keys,
            NewToken {
                name: name.unwrap_or_else(|| format!("cli {}", role.as_str())),
                subject: user.email.clone(),
                role,
                brief,
                ttl,
                created_by: Some(user.id),
            },
        )
        .await?;
        audit::record(
            &pool,
            "cli",
            "token.mint",
            &brief
                .map(|b| format!("brief:{b}"))
                .unwrap_or_else(|| format!("user:{email}")),
            json!({ "jti": row.jti, "role": role.as_str(), "expires_at": row.expires_at }),
        )
        .await?;
        eprintln!("jti {} ({}), expires {}", row.jti, role.as_str(), row.expires_at);
        Ok(signed)
    })
    .await
}

async fn revoke_token(db: DbConfig, jti: uuid::Uuid) -> anyhow::Result<()> {
    with_database(&db, |pool| async move {
        anyhow::ensure!(token::revoke(&pool, jti).await?, "no live token with jti {jti}");
        audit::record(&pool, "cli", "token.revoke", &format!("token:{jti}"), json!({})).await?;
        Ok(format!("revoked {jti}"))
    })
    .await
}

async fn run_demo(db: DbConfig, tokens: TokenConfig, addr: std::net::SocketAddr) -> anyhow::Result<()> {
    let keys = TokenKeys::load(tokens.jwt_secret.as_ref(), &db.data_dir)?;
    with_database(&db, |pool| async move {
        let state = AppState::new(pool, AppConfig::default(), keys);
        let outcome = rentcheck::demo::load(&state).await.map_err(describe)?;
        Ok(format!(
            "demo brief {} ({}; evidence: {} sent, {} already there; ledger: {})\n\
             open   http://{addr}/briefs/{}/review\n\
             login  {} / {}   (a manager; the password is new on every `rentcheck demo`)",
            outcome.brief_id,
            if outcome.created_brief {
                "created"
            } else {
                "already there"
            },
            outcome.evidence_sent,
            outcome.evidence_replayed,
            if outcome.ledger_imported {
                "imported"
            } else {
                "already there"
            },
            outcome.brief_id,
            outcome.email,
            outcome.password,
        ))
    })
    .await
}

async fn run_serve(db_config: DbConfig, serve: ServeConfig, tokens: TokenConfig) -> anyhow::Result<()> {
    // Bind first so a taken port fails fast, before any database work.
    let listener = tokio::net::TcpListener::bind(serve.addr)
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen on {}: {e}", serve.addr))?;
    let keys = TokenKeys::load(tokens.jwt_secret.as_ref(), &db_config.data_dir)?;
    // A wrong evidence-store setting stops the start, before the database is touched.
    let app_config = AppConfig::try_from(&serve)?;
    tracing::info!(store = app_config.raw_store.describe(), "raw evidence is kept in");
    let database = Database::open(&db_config).await?;
    let outcome = async {
        db::migrate(&database.pool).await?;
        password::warm_up();
        let state = AppState::new(database.pool.clone(), app_config, keys);
        let compactor = evidence::compactor::spawn(database.pool.clone(), state.metrics.clone());
        let addr = listener.local_addr()?;
        tracing::info!(%addr, "rentcheck is serving at http://{addr}");
        let served = http::serve(listener, http::app(state), http::shutdown_signal()).await;
        compactor.abort();
        served?;
        anyhow::Ok(())
    }
    .await;
    database.close_and_stop_cluster().await;
    outcome
}
