//! The `rentcheck` binary: a thin command line over the library.

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use rentcheck::{
    config::{AppConfig, DbConfig, ServeConfig},
    db::{self, Database},
    http,
    state::AppState,
    telemetry,
};

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
    },
    /// Apply migrations and exit.
    Migrate {
        #[command(flatten)]
        db: DbConfig,
    },
}

#[tokio::main]
async fn main() -> ExitCode {
    telemetry::init();
    let cli = Cli::parse();
    let command = cli.command.unwrap_or_else(|| {
        // `rentcheck` alone means `rentcheck serve`, with settings from the environment.
        match Cli::parse_from(["rentcheck", "serve"]).command {
            Some(c) => c,
            None => unreachable!("serve was given"),
        }
    });
    let result = match command {
        Command::Serve { db, serve } => run_serve(db, serve).await,
        Command::Migrate { db } => run_migrate(db).await,
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("rentcheck: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run_migrate(db_config: DbConfig) -> anyhow::Result<()> {
    let database = Database::open(&db_config).await?;
    let result = db::migrate(&database.pool).await;
    database.close().await;
    result?;
    println!("migrations applied");
    Ok(())
}

async fn run_serve(db_config: DbConfig, serve: ServeConfig) -> anyhow::Result<()> {
    // Bind first so a taken port fails fast, before any database work.
    let listener = tokio::net::TcpListener::bind(serve.addr)
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen on {}: {e}", serve.addr))?;
    let database = Database::open(&db_config).await?;
    let outcome = async {
        db::migrate(&database.pool).await?;
        let state = AppState::new(database.pool.clone(), AppConfig::from(&serve));
        tracing::info!(addr = %listener.local_addr()?, "rentcheck is serving at http://{}", listener.local_addr()?);
        http::serve(listener, http::app(state), http::shutdown_signal()).await?;
        anyhow::Ok(())
    }
    .await;
    database.close().await;
    outcome
}
