//! The `rentcheck` binary: a thin command line over the library.

use std::{io::Read, process::ExitCode};

use clap::{Parser, Subcommand};
use rentcheck::{
    audit,
    auth::{
        lockout, password, teams,
        token::{self, NewToken},
        token_cache, users, Role,
    },
    collect,
    config::{self, AppConfig, DbConfig, ServeConfig, TokenConfig},
    db::{self, Database, ForeignTables},
    evidence,
    evidence_store::EvidenceStore,
    http,
    ids::{BriefId, TokenId, TrialId},
    people::service as people,
    secrets::TokenKeys,
    state::AppState,
    telemetry,
};
use serde_json::json;

/// The CLI keeps no token rows (only servers do): its changes reach them by notification.
static NO_KEPT_TOKENS: std::sync::LazyLock<token::Tokens> = std::sync::LazyLock::new(token::Tokens::default);

/// mimalloc instead of glibc's allocator: see Cargo.toml.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

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
        /// Install into a database that already holds tables rentcheck did not make (otherwise
        /// refused, naming them).
        #[arg(long)]
        yes: bool,
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
        /// The address the server listens on, for the printed URL when RENTCHECK_PUBLIC_URL is unset.
        #[arg(long, env = "RENTCHECK_ADDR", default_value = "127.0.0.1:8080")]
        addr: std::net::SocketAddr,
        /// The address people reach the server at, for the printed URL.
        #[arg(long, env = "RENTCHECK_PUBLIC_URL")]
        public_url: Option<String>,
    },
    /// Teams: a brief shared with a team may be edited by its members.
    Team {
        #[command(subcommand)]
        action: TeamAction,
    },
    /// Assign a brief's owner (briefs from before ownership have none; every engineer may edit them).
    BriefOwner {
        /// The brief's id.
        brief: BriefId,
        #[arg(long)]
        email: String,
        #[command(flatten)]
        db: DbConfig,
    },
    /// Mint and revoke bearer tokens.
    Token {
        #[command(subcommand)]
        action: TokenAction,
    },
    /// Agent side: run nvidia-smi / dcgmi where present, scrape vLLM, and POST each output as
    /// evidence to a brief (idempotent, with retries). Prints a summary; fails when any step failed.
    Collect(Box<collect::CollectArgs>),
    /// A load test of an OpenAI-compatible server, measured as `vllm bench serve` measures and
    /// written as its `--save-result --save-detailed` JSON (for machines without vLLM).
    Loadgen(Box<collect::loadgen::LoadgenArgs>),
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
    /// Disable a person: their sessions end and their tokens (the agent tokens they minted too) are
    /// revoked at once.
    Disable {
        #[arg(long)]
        email: String,
        #[command(flatten)]
        db: DbConfig,
    },
    /// Enable a disabled person again (their old tokens stay revoked; mint new ones).
    Enable {
        #[arg(long)]
        email: String,
        #[command(flatten)]
        db: DbConfig,
    },
    /// Change a person's role; their tokens of a higher role than the new one are revoked.
    SetRole {
        #[arg(long)]
        email: String,
        /// engineer, manager or admin
        #[arg(long)]
        role: String,
        #[command(flatten)]
        db: DbConfig,
    },
    /// Lift the lock that failed sign-ins put on an account and forget its failures (admins can do
    /// the same on the People page).
    Unlock {
        #[arg(long)]
        email: String,
        #[command(flatten)]
        db: DbConfig,
    },
    /// Set a person's password (from stdin with --password-stdin, else generated and printed once);
    /// their sessions end and their tokens are revoked.
    SetPassword {
        #[arg(long)]
        email: String,
        #[arg(long)]
        password_stdin: bool,
        #[command(flatten)]
        db: DbConfig,
    },
}

#[derive(Subcommand)]
enum TeamAction {
    /// Make a team.
    Add {
        name: String,
        #[command(flatten)]
        db: DbConfig,
    },
    /// Every team and its members.
    List {
        #[command(flatten)]
        db: DbConfig,
    },
    /// Add a person to a team.
    AddMember {
        team: String,
        #[arg(long)]
        email: String,
        #[command(flatten)]
        db: DbConfig,
    },
    /// Remove a person from a team.
    RemoveMember {
        team: String,
        #[arg(long)]
        email: String,
        #[command(flatten)]
        db: DbConfig,
    },
    /// Share a brief with a team: its members may edit it.
    Share {
        team: String,
        #[arg(long)]
        brief: BriefId,
        #[command(flatten)]
        db: DbConfig,
    },
    /// Stop sharing a brief with a team.
    Unshare {
        team: String,
        #[arg(long)]
        brief: BriefId,
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
        brief: Option<BriefId>,
        /// Limit it further to one trial of the brief: evidence and ledger lines go there, and
        /// nowhere else. Implies --brief.
        #[arg(long)]
        trial: Option<TrialId>,
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
        jti: TokenId,
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
        Command::Migrate { db, yes } => migrate(db, yes).await,
        Command::User {
            action:
                UserAction::Add {
                    email,
                    role,
                    password_stdin,
                    db,
                },
        } => add_user(db, email, role, password_stdin).await,
        Command::User { action } => user_lifecycle(action).await,
        Command::Team { action } => team(action).await,
        Command::BriefOwner { brief, email, db } => brief_owner(db, brief, email).await,
        Command::Token {
            action:
                TokenAction::Mint {
                    email,
                    brief,
                    trial,
                    role,
                    ttl,
                    name,
                    db,
                    tokens,
                },
        } => mint_token(db, tokens, email, (brief, trial), role, ttl, name).await,
        Command::Token {
            action: TokenAction::Revoke { jti, db },
        } => revoke_token(db, jti).await,
        // collect has exit statuses of its own (docs/agents.md).
        Command::Collect(args) => return collect::main(*args).await,
        Command::Loadgen(args) => return collect::loadgen::main(*args).await,
        Command::Demo {
            db,
            tokens,
            addr,
            public_url,
        } => run_demo(db, tokens, addr, public_url).await,
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("rentcheck: {}", one_line(&e));
            ExitCode::FAILURE
        }
    }
}

/// An error and its causes joined by ": ", skipping a cause whose text is already there: sqlx and
/// thiserror errors often repeat their source in their own message, which `{:#}` would print twice.
fn one_line(e: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if line.contains(&text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    line
}

/// Opens and migrates the database, runs `work`, prints its answer, and closes the database. With
/// the private cluster, `command` names this process in the data-dir lock: while a server runs, its
/// cluster is used (and left running); while one is starting, this waits for it.
async fn with_database<F, Fut>(db_config: &DbConfig, command: &str, work: F) -> anyhow::Result<()>
where
    F: FnOnce(sqlx::PgPool) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<String>>,
{
    let database = Database::open(db_config, command).await?;
    let outcome = async {
        db::migrate_checked(&database.pool, ForeignTables::Refuse).await?;
        work(database.pool.clone()).await
    }
    .await;
    database.close().await;
    println!("{}", outcome?);
    Ok(())
}

/// `rentcheck migrate [--yes]`.
async fn migrate(db_config: DbConfig, yes: bool) -> anyhow::Result<()> {
    let foreign = if yes {
        ForeignTables::Accept
    } else {
        ForeignTables::Refuse
    };
    let database = Database::open(&db_config, "migrate").await?;
    let outcome = db::migrate_checked(&database.pool, foreign).await;
    database.close().await;
    outcome?;
    println!("migrations applied");
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
    with_database(&db, "user add", |pool| async move {
        let entry =
            |u: &users::UserRow| audit::Entry::new("cli", "user.add", &u.email, json!({ "role": role.as_str() }));
        let (user, generated) = users::add(&pool, &email, role, password, entry)
            .await
            .map_err(describe)?;
        Ok(match generated {
            Some(p) => format!("created {} ({})\npassword (shown once): {p}", user.email, user.role),
            None => format!("created {} ({})", user.email, user.role),
        })
    })
    .await
}

/// A password from stdin (checked), or `None` to generate one.
fn password_from_stdin(password_stdin: bool) -> anyhow::Result<Option<String>> {
    if !password_stdin {
        return Ok(None);
    }
    let mut text = String::new();
    std::io::stdin().read_to_string(&mut text)?;
    let text = text.trim_end_matches(['\n', '\r']).to_owned();
    users::check_new_password(&text).map_err(describe)?;
    Ok(Some(text))
}

async fn person(pool: &sqlx::PgPool, email: &str) -> anyhow::Result<users::UserRow> {
    let email = users::normalize_email(email).map_err(|m| anyhow::anyhow!("--email {m}"))?;
    users::by_email(pool, &email)
        .await?
        .ok_or_else(|| anyhow::anyhow!("no user {email}"))
}

/// One arm per user command.
async fn user_lifecycle(action: UserAction) -> anyhow::Result<()> {
    let (db, email, change, verb) = match action {
        UserAction::Add { .. } => unreachable!("handled before"),
        UserAction::SetPassword {
            email,
            password_stdin,
            db,
        } => {
            return set_password(email, password_stdin, db).await;
        }
        UserAction::Unlock { email, db } => {
            return unlock(email, db).await;
        }
        UserAction::Disable { email, db } => (
            db,
            email,
            users::Change {
                role: None,
                disabled: Some(true),
            },
            "disabled",
        ),
        UserAction::Enable { email, db } => (
            db,
            email,
            users::Change {
                role: None,
                disabled: Some(false),
            },
            "enabled",
        ),
        UserAction::SetRole { email, role, db } => {
            let role = users::person_role(&role).map_err(|m| anyhow::anyhow!("--role {m}"))?;
            (
                db,
                email,
                users::Change {
                    role: Some(role),
                    disabled: None,
                },
                "changed",
            )
        }
    };
    with_database(&db, "user change", |pool| async move {
        let user = person(&pool, &email).await?;
        let entry = |u: &users::UserRow| {
            audit::Entry::new(
                "cli",
                "user.change",
                &u.email,
                json!({ "role": change.role.map(|r| r.as_str()), "disabled": change.disabled }),
            )
        };
        let changed = users::change(&pool, &NO_KEPT_TOKENS, user.id, change, entry)
            .await
            .map_err(describe)?
            .ok_or_else(|| anyhow::anyhow!("no user {email}"))?;
        Ok(format!(
            "{verb} {} ({}{})",
            changed.email,
            changed.role,
            if changed.disabled_at.is_some() {
                ", disabled"
            } else {
                ""
            }
        ))
    })
    .await
}

/// `user set-password`: the given password, else a generated one shown once; the person's
/// sessions and tokens end.
async fn set_password(email: String, password_stdin: bool, db: DbConfig) -> anyhow::Result<()> {
    let given = password_from_stdin(password_stdin)?;
    with_database(&db, "user set-password", |pool| async move {
        let user = person(&pool, &email).await?;
        let password = given
            .clone()
            .unwrap_or_else(|| rentcheck::secrets::random_token()[..24].to_owned());
        users::replace_password(&pool, &NO_KEPT_TOKENS, user.id, password.clone(), None, |replaced| {
            replaced.audit_entry("cli", &user.email, "cli")
        })
        .await
        .map_err(describe)?;
        Ok(match given {
            Some(_) => format!(
                "new password set for {}; their sessions ended and their tokens were revoked",
                user.email
            ),
            None => format!(
                "new password set for {}; their sessions ended and their tokens were revoked\n\
                 password (shown once): {password}",
                user.email
            ),
        })
    })
    .await
}

/// `user unlock`: clears the person's lockout and failed sign-ins.
async fn unlock(email: String, db: DbConfig) -> anyhow::Result<()> {
    with_database(&db, "user unlock", |pool| async move {
        let user = person(&pool, &email).await?;
        if !lockout::unlock(&pool, &user.email).await? {
            return Ok(format!("{} was not locked and had no failed sign-ins", user.email));
        }
        audit::record(&pool, "cli", "login.unlock", &user.email, json!({ "by": "cli" })).await?;
        Ok(format!("unlocked {}: they can sign in again", user.email))
    })
    .await
}

async fn team(action: TeamAction) -> anyhow::Result<()> {
    match action {
        TeamAction::Add { name, db } => {
            with_database(&db, "team add", |pool| async move {
                let team = people::create_team(&pool, "cli", &name).await.map_err(describe)?;
                Ok(format!("team {} ({})", team.name, team.id))
            })
            .await
        }
        TeamAction::List { db } => {
            with_database(&db, "team list", |pool| async move {
                let all = teams::list_teams(&pool).await?;
                if all.is_empty() {
                    return Ok("no teams; make one with `rentcheck team add NAME`".to_owned());
                }
                Ok(all
                    .iter()
                    .map(|t| format!("{}: {}", t.name, t.members.join(", ")))
                    .collect::<Vec<_>>()
                    .join("\n"))
            })
            .await
        }
        TeamAction::AddMember { team, email, db } => member(db, team, email, true).await,
        TeamAction::RemoveMember { team, email, db } => member(db, team, email, false).await,
        TeamAction::Share { team, brief, db } => {
            with_database(&db, "team share", |pool| async move {
                let team = teams::team_by_name(&pool, &team).await.map_err(describe)?;
                people::share(&pool, "cli", brief, &team).await.map_err(describe)?;
                Ok(format!("brief {brief} is shared with {}", team.name))
            })
            .await
        }
        TeamAction::Unshare { team, brief, db } => {
            with_database(&db, "team unshare", |pool| async move {
                let team = teams::team_by_name(&pool, &team).await.map_err(describe)?;
                anyhow::ensure!(
                    people::unshare(&pool, "cli", brief, team.id).await.map_err(describe)?,
                    "brief {brief} is not shared with {}",
                    team.name
                );
                Ok(format!("brief {brief} is no longer shared with {}", team.name))
            })
            .await
        }
    }
}

async fn member(db: DbConfig, team: String, email: String, add: bool) -> anyhow::Result<()> {
    with_database(&db, "team member", |pool| async move {
        let team = teams::team_by_name(&pool, &team).await.map_err(describe)?;
        let user = person(&pool, &email).await?;
        let changed = people::set_membership(&pool, "cli", team.id, &user, add)
            .await
            .map_err(describe)?;
        Ok(match (add, changed) {
            (true, true) => format!("{} is now in {}", user.email, team.name),
            (true, false) => format!("{} was already in {}", user.email, team.name),
            (false, true) => format!("{} is no longer in {}", user.email, team.name),
            (false, false) => format!("{} was not in {}", user.email, team.name),
        })
    })
    .await
}

async fn brief_owner(db: DbConfig, brief: BriefId, email: String) -> anyhow::Result<()> {
    with_database(&db, "brief-owner", |pool| async move {
        let user = person(&pool, &email).await?;
        anyhow::ensure!(
            rentcheck::briefs::service::exists(&pool, brief).await?,
            "no brief {brief}"
        );
        people::set_owner(&pool, "cli", brief, &user).await.map_err(describe)?;
        Ok(format!("brief {brief} now belongs to {}", user.email))
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

/// The command's checks, then the token, in the order it prints them.
async fn mint_token(
    db: DbConfig,
    tokens: TokenConfig,
    email: String,
    (brief, trial): (Option<BriefId>, Option<TrialId>),
    role: Option<String>,
    ttl: String,
    name: Option<String>,
) -> anyhow::Result<()> {
    let keys = TokenKeys::load(
        tokens.jwt_secret.as_ref(),
        tokens.jwt_secret_file.as_deref(),
        &db.data_dir,
    )?;
    let ttl = token::parse_ttl(&ttl).map_err(|m| anyhow::anyhow!("--ttl: {m}"))?;
    with_database(&db, "token mint", |pool| async move {
        let email = users::normalize_email(&email).map_err(|m| anyhow::anyhow!("--email {m}"))?;
        let user = users::by_email(&pool, &email)
            .await?
            .ok_or_else(|| anyhow::anyhow!("no user {email}; create one with `rentcheck user add`"))?;
        let role = token_role(role, &user, &email)?;
        let brief = token_brief(&pool, brief, trial).await?;
        anyhow::ensure!(
            role != Role::Agent || brief.is_some(),
            "an agent token needs --brief ID (or --trial ID)"
        );
        if let Some(brief) = brief {
            anyhow::ensure!(
                rentcheck::briefs::service::exists(&pool, brief).await?,
                "no brief {brief}"
            );
        }
        let new = NewToken {
            name: name.unwrap_or_else(|| format!("cli {}", role.as_str())),
            subject: user.email.clone(),
            role,
            brief,
            trial,
            ttl,
            created_by: Some(user.id),
        };
        let target = brief
            .map(|b| format!("brief:{b}"))
            .unwrap_or_else(|| format!("user:{email}"));
        let (signed, row) = audit::audited(
            &pool,
            async |conn| token::mint(conn, &keys, new).await,
            |(_, row)| {
                let details =
                    json!({ "jti": row.jti, "role": role.as_str(), "trial": trial, "expires_at": row.expires_at });
                Some(audit::Entry::new("cli", "token.mint", &target, details))
            },
        )
        .await?;
        eprintln!("jti {} ({}), expires {}", row.jti, role.as_str(), row.expires_at);
        Ok(signed)
    })
    .await
}

/// The token's role: the one asked for, at most the person's own, else the person's.
fn token_role(role: Option<String>, user: &users::UserRow, email: &str) -> anyhow::Result<Role> {
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
    Ok(role)
}

/// The token's brief: a trial names its brief, which must be the one given if one is.
async fn token_brief(
    pool: &sqlx::PgPool,
    brief: Option<BriefId>,
    trial: Option<TrialId>,
) -> anyhow::Result<Option<BriefId>> {
    // A trial names its brief.
    Ok(match trial {
        Some(trial) => {
            let found = rentcheck::trials::service::get(pool, trial)
                .await?
                .ok_or_else(|| anyhow::anyhow!("no trial {trial}"))?;
            anyhow::ensure!(
                brief.is_none_or(|b| b == found.brief_id),
                "trial {trial} belongs to brief {}, not {}",
                found.brief_id,
                brief.map(|b| b.to_string()).unwrap_or_default()
            );
            Some(found.brief_id)
        }
        None => brief,
    })
}

async fn revoke_token(db: DbConfig, jti: TokenId) -> anyhow::Result<()> {
    with_database(&db, "token revoke", |pool| async move {
        anyhow::ensure!(
            token::revoke_audited(
                &pool,
                &NO_KEPT_TOKENS,
                jti,
                audit::Entry::new("cli", "token.revoke", &format!("token:{jti}"), json!({}))
            )
            .await?,
            "no live token with jti {jti}"
        );
        Ok(format!("revoked {jti}"))
    })
    .await
}

async fn run_demo(
    db: DbConfig,
    tokens: TokenConfig,
    addr: std::net::SocketAddr,
    public_url: Option<String>,
) -> anyhow::Result<()> {
    // Checked before any work, even when the URL printed is the found server's.
    let derived_url = config::public_url(public_url.as_deref(), addr)?;
    let keys = TokenKeys::load(
        tokens.jwt_secret.as_ref(),
        tokens.jwt_secret_file.as_deref(),
        &db.data_dir,
    )?;
    let database = Database::open(&db, "demo").await?;
    // The URL to open: RENTCHECK_PUBLIC_URL when given here; else that of the server whose cluster
    // this used (its real address, whatever RENTCHECK_ADDR says here); else the derived default.
    // With DATABASE_URL, the server is found by the name its connections carry; asked here only,
    // not by every command that opens the database.
    let found = match (&database.server_url, &db.database_url) {
        (None, Some(_)) => db::serving_urls(&database.pool)
            .await
            .ok()
            .and_then(|urls| urls.into_iter().next()),
        (found, _) => found.clone(),
    };
    let public_url = match (&public_url, &found) {
        (None, Some(found)) => found.clone(),
        _ => derived_url,
    };
    if found.is_none() {
        match &db.database_url {
            None => eprintln!(
                "rentcheck: no server runs on this data dir ({}); start one with `rentcheck serve` to open the URL below",
                db.data_dir.display()
            ),
            Some(_) => eprintln!(
                "rentcheck: no server is connected to this DATABASE_URL; start one with `rentcheck serve` and the \
                 same DATABASE_URL to open the URL below"
            ),
        }
    }
    let outcome = async {
        db::migrate_checked(&database.pool, ForeignTables::Refuse).await?;
        let state = AppState::new(database.pool.clone(), AppConfig::default(), keys);
        let mut outcome = rentcheck::demo::load(&state).await.map_err(describe)?;
        rentcheck::demo::load_commitment(&state, &mut outcome)
            .await
            .map_err(describe)?;
        anyhow::Ok(format!(
            "demo brief {} ({}; evidence: {} sent, {} already there; ledger: {})\n\
             open   {public_url}/briefs/{}/review\n\
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
    }
    .await;
    database.close().await;
    println!("{}", outcome?);
    Ok(())
}

async fn run_serve(db_config: DbConfig, serve: ServeConfig, tokens: TokenConfig) -> anyhow::Result<()> {
    // From here on Ctrl-C and SIGTERM are heard, not fatal: a start stopped at any moment still
    // stops the private cluster it started and releases the data dir.
    let mut stop = http::StopSignal::listen()?;
    // Bind first so a taken port fails fast, before any database work.
    let listener = tokio::net::TcpListener::bind(serve.addr)
        .await
        .map_err(|e| http::listen_error(serve.addr, &e))?;
    // With port 0 the system picks one: URLs name the port actually bound.
    let mut serve = serve;
    serve.addr = listener.local_addr()?;
    // A wrong evidence-store setting stops the start, before the database is touched and before
    // anything is written into the data dir (the signing secret below).
    let evidence_store = EvidenceStore::from_setting(serve.evidence_store.as_deref())?;
    // Wrong credentials or a missing bucket stop the start too, instead of failing every upload.
    evidence_store.check().await?;
    let keys = TokenKeys::load(
        tokens.jwt_secret.as_ref(),
        tokens.jwt_secret_file.as_deref(),
        &db_config.data_dir,
    )?;
    tracing::info!(store = evidence_store.describe(), "raw evidence is kept in");
    let app_config = AppConfig::try_from(&serve)?;
    let database = Database::open_serving(&db_config, &app_config.public_url).await?;
    let outcome = async {
        tokio::select! {
            biased;
            () = stop.recv() => {
                tracing::info!("stop requested while starting; stopping before serving");
                return anyhow::Ok(());
            }
            migrated = db::migrate_checked(&database.pool, ForeignTables::Refuse) => migrated?,
        }
        password::warm_up();
        let addr = listener.local_addr()?;
        if serve.public_url.is_none() && !addr.ip().is_loopback() {
            tracing::warn!(
                "listening on {addr} but RENTCHECK_PUBLIC_URL is unset: printed and displayed URLs say {}; \
                 set it to the address agents and people use",
                app_config.public_url
            );
        }
        tracing::info!(%addr, "rentcheck is serving at {}", app_config.public_url);
        if users::count(&database.pool).await? == 0 {
            // The first-run page needs this code: whoever reads this line started the server.
            tracing::info!(
                "no account yet: create the first admin from this machine at {}/setup?code={} \
                 (this code changes at every start), or with `rentcheck user add --email you@example.com --role admin`",
                app_config.public_url,
                app_config.setup_code.expose()
            );
        }
        let state = AppState::new(database.pool.clone(), app_config, keys).with_evidence_store(evidence_store);
        let compactor = evidence::compactor::spawn(database.pool.clone(), state.metrics.clone());
        // Forgets the token rows this server reuses whenever a token or person changes anywhere.
        let token_changes = token_cache::spawn_listener(&database.pool, state.slots.get::<token::Tokens>());
        // Webhook deliveries and the per-brief signal snapshot.
        let signals = rentcheck::signals::worker::spawn(state.clone());
        // Commitments' states (ended, renewal-due, revalidation-due, regressed) and their webhooks.
        let commitments = rentcheck::commitments::worker::spawn(state.clone());
        let shutdown = async move {
            stop.recv().await;
            tracing::info!("shutdown signal received; finishing in-flight requests");
        };
        let served = http::serve(listener, http::app(state), shutdown).await;
        compactor.abort();
        token_changes.abort();
        signals.abort();
        commitments.abort();
        served?;
        anyhow::Ok(())
    }
    .await;
    database.close().await;
    outcome
}

#[cfg(test)]
mod tests {
    use super::one_line;

    /// An error that, like sqlx's, repeats its source in its own message.
    #[derive(Debug)]
    struct Repeats(std::io::Error);

    impl std::fmt::Display for Repeats {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "error returned from database: {}", self.0)
        }
    }

    impl std::error::Error for Repeats {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn an_error_prints_each_cause_once_on_one_line() {
        let e = anyhow::Error::new(Repeats(std::io::Error::other("relation \"x\" already exists")))
            .context("applying database migrations");
        assert_eq!(
            one_line(&e),
            "applying database migrations: error returned from database: relation \"x\" already exists"
        );
        assert_eq!(
            format!("{e:#}").matches("already exists").count(),
            2,
            "what `{{:#}}` printed"
        );
    }
}
