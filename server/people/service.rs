//! The changes to teams and to a brief's sharing that the admin's pages and the CLI make, each in
//! one transaction with its audit row: a change is never stored without its row, nor a row without
//! its change. `actor` is who made it (an email, or `cli`).

use serde_json::json;
use sqlx::PgPool;

use crate::{
    audit,
    auth::{
        teams::{self, TeamRef},
        users::UserRow,
    },
    error::AppError,
    ids::{BriefId, TeamId},
};

pub async fn create_team(pool: &PgPool, actor: &str, name: &str) -> Result<TeamRef, AppError> {
    audit::audited(
        pool,
        async |conn| teams::create_team(conn, name).await,
        |team| {
            let target = format!("team:{}", team.id);
            Some(audit::Entry::new(
                actor,
                "team.add",
                &target,
                json!({ "name": team.name }),
            ))
        },
    )
    .await
}

/// Adds `member` to the team (`add`) or takes them out; whether anything changed (no row if not).
pub async fn set_membership(
    pool: &PgPool,
    actor: &str,
    team: TeamId,
    member: &UserRow,
    add: bool,
) -> Result<bool, AppError> {
    let action = if add { "team.member.add" } else { "team.member.remove" };
    let target = format!("team:{team}");
    let changed = audit::audited(
        pool,
        async |conn| match add {
            true => teams::add_member(conn, team, member.id).await,
            false => teams::remove_member(conn, team, member.id).await,
        },
        |changed| changed.then(|| audit::Entry::new(actor, action, &target, json!({ "email": member.email }))),
    )
    .await?;
    Ok(changed)
}

pub async fn share(pool: &PgPool, actor: &str, brief: BriefId, team: &TeamRef) -> Result<(), AppError> {
    let target = format!("brief:{brief}");
    audit::audited(
        pool,
        async |conn| teams::share(conn, brief, team.id).await,
        |()| {
            Some(audit::Entry::new(
                actor,
                "brief.share",
                &target,
                json!({ "team": team.name }),
            ))
        },
    )
    .await
}

/// Whether the brief was shared with the team (and is no longer).
pub async fn unshare(pool: &PgPool, actor: &str, brief: BriefId, team: TeamId) -> Result<bool, AppError> {
    let target = format!("brief:{brief}");
    let removed = audit::audited(
        pool,
        async |conn| teams::unshare(conn, brief, team).await,
        |removed| removed.then(|| audit::Entry::new(actor, "brief.unshare", &target, json!({ "team": team }))),
    )
    .await?;
    Ok(removed)
}

pub async fn set_owner(pool: &PgPool, actor: &str, brief: BriefId, owner: &UserRow) -> Result<(), AppError> {
    let target = format!("brief:{brief}");
    audit::audited(
        pool,
        async |conn| teams::set_owner(conn, brief, owner.id).await,
        |()| {
            Some(audit::Entry::new(
                actor,
                "brief.owner",
                &target,
                json!({ "owner": owner.email }),
            ))
        },
    )
    .await?;
    Ok(())
}
