//! Who may change a brief: its owner, the members of the teams it is shared with, and admins.
//! Everyone signed in may read a brief (a brief-scoped token only its brief); changing it, its
//! card, its trials and its tokens goes through [`may_edit_brief`], the one place the rule lives.
//! Teams are managed by admins (the users page and `rentcheck team …`).
//!
//! A brief with no owner and no team (one created before ownership existed) stays editable by
//! every engineer until an admin assigns an owner or shares it: taking it away silently would
//! lock every team out of its own work on the day of the upgrade.

use serde::Serialize;
use sqlx::PgExecutor;
use uuid::Uuid;

use super::{Principal, Role};
use crate::ids::{BriefId, TeamId, UserId};
use crate::{error::AppError, validation::FieldError};

/// Who may edit a brief, as stored.
#[derive(Debug, Clone, Default, Serialize)]
pub struct BriefAccess {
    pub owner: Option<UserId>,
    pub owner_email: Option<String>,
    /// The teams it is shared with: (id, name).
    pub teams: Vec<TeamRef>,
}

#[derive(Debug, Clone, Serialize)]
pub struct TeamRef {
    pub id: TeamId,
    pub name: String,
}

impl BriefAccess {
    /// Nobody owns it and no team shares it: a brief from before ownership.
    pub fn unowned(&self) -> bool {
        self.owner.is_none() && self.teams.is_empty()
    }

    /// Who to ask, for a 403's message.
    pub fn describe(&self) -> String {
        let mut who = Vec::new();
        if let Some(email) = &self.owner_email {
            who.push(email.clone());
        }
        who.extend(self.teams.iter().map(|t| format!("team {}", t.name)));
        who.join(", ")
    }
}

pub async fn brief_access(db: impl PgExecutor<'_> + Copy, brief: BriefId) -> Result<BriefAccess, sqlx::Error> {
    let owner = sqlx::query!(
        "SELECT o.user_id, u.email FROM brief_owners o JOIN users u ON u.id = o.user_id WHERE o.brief_id = $1",
        brief.as_uuid(),
    )
    .fetch_optional(db)
    .await?;
    let teams = sqlx::query_as!(
        TeamRef,
        "SELECT t.id, t.name FROM brief_teams b JOIN teams t ON t.id = b.team_id \
         WHERE b.brief_id = $1 ORDER BY t.name",
        brief.as_uuid(),
    )
    .fetch_all(db)
    .await?;
    Ok(BriefAccess {
        owner: owner.as_ref().map(|o| UserId::from(o.user_id)),
        owner_email: owner.map(|o| o.email),
        teams,
    })
}

/// The names of the teams each of the given briefs is shared with, as [`brief_access`] orders
/// them: (brief, team name), in one statement.
pub async fn team_names_of_briefs(
    db: impl PgExecutor<'_>,
    briefs: &[BriefId],
) -> Result<Vec<(BriefId, String)>, sqlx::Error> {
    let ids: Vec<Uuid> = briefs.iter().map(|b| b.as_uuid()).collect();
    let rows = sqlx::query!(
        "SELECT b.brief_id, t.name FROM brief_teams b JOIN teams t ON t.id = b.team_id \
         WHERE b.brief_id = ANY($1) ORDER BY b.brief_id, t.name",
        &ids[..],
    )
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().map(|r| (BriefId::from(r.brief_id), r.name)).collect())
}

/// Whether `user` owns the brief, is in a team it is shared with, or it has neither (an old brief).
async fn user_may_edit(db: impl PgExecutor<'_>, user: Option<UserId>, brief: BriefId) -> Result<bool, sqlx::Error> {
    let allowed = sqlx::query_scalar!(
        r#"SELECT (
               NOT EXISTS (SELECT 1 FROM brief_owners WHERE brief_id = $1)
               AND NOT EXISTS (SELECT 1 FROM brief_teams WHERE brief_id = $1)
           ) OR EXISTS (SELECT 1 FROM brief_owners WHERE brief_id = $1 AND user_id = $2)
             OR EXISTS (
               SELECT 1 FROM brief_teams b JOIN team_members m ON m.team_id = b.team_id
               WHERE b.brief_id = $1 AND m.user_id = $2
           ) AS "allowed!""#,
        brief.as_uuid(),
        user.map(UserId::as_uuid),
    )
    .fetch_one(db)
    .await?;
    Ok(allowed)
}

/// The one ownership check every write route calls: editing a brief, its card, its trials, its
/// readiness, its ledger from a page, and minting or revoking its tokens. Engineers and managers
/// who own it or share a team with it, and admins; a brief-scoped token only for its brief; never
/// an agent. 403 with the people to ask otherwise.
pub async fn may_edit_brief(
    db: impl PgExecutor<'_> + Copy,
    caller: &Principal,
    brief: BriefId,
) -> Result<(), AppError> {
    caller.require_person(Role::Engineer)?;
    caller.check_scope(brief)?;
    if caller.role() == Role::Admin {
        return Ok(());
    }
    if user_may_edit(db, caller.user_id(), brief).await? {
        return Ok(());
    }
    let access = brief_access(db, brief).await?;
    Err(AppError::Forbidden(format!(
        "only the brief's owner and the teams it is shared with may change it ({}); ask one of them or an admin",
        access.describe()
    )))
}

/// Of `briefs`, those the caller may edit by [`may_edit_brief`]'s rule, in one statement (a list
/// that shows only such briefs' rows). Admins may edit all; an unscoped person is required.
pub async fn editable_of(
    db: impl PgExecutor<'_>,
    caller: &Principal,
    briefs: &[BriefId],
) -> Result<std::collections::BTreeSet<BriefId>, AppError> {
    caller.require_person(Role::Engineer)?;
    caller.require_unscoped()?;
    if caller.role() == Role::Admin {
        return Ok(briefs.iter().copied().collect());
    }
    let ids: Vec<Uuid> = briefs.iter().map(|b| b.as_uuid()).collect();
    let allowed = sqlx::query_scalar!(
        r#"SELECT b.id AS "id!" FROM unnest($1::uuid[]) AS b (id)
           WHERE (NOT EXISTS (SELECT 1 FROM brief_owners o WHERE o.brief_id = b.id)
                  AND NOT EXISTS (SELECT 1 FROM brief_teams t WHERE t.brief_id = b.id))
              OR EXISTS (SELECT 1 FROM brief_owners o WHERE o.brief_id = b.id AND o.user_id = $2)
              OR EXISTS (SELECT 1 FROM brief_teams t JOIN team_members m ON m.team_id = t.team_id
                         WHERE t.brief_id = b.id AND m.user_id = $2)"#,
        &ids[..],
        caller.user_id().map(UserId::as_uuid),
    )
    .fetch_all(db)
    .await?;
    Ok(allowed.into_iter().map(BriefId::from).collect())
}

/// Sharing a brief with a team (or taking a team off it): whoever may edit the brief; but a brief
/// with no owner (one from before ownership) only an admin, since sharing it takes it away from
/// everyone else, its creator included, and nobody can tell who that was.
pub async fn may_change_sharing(
    db: impl PgExecutor<'_> + Copy,
    caller: &Principal,
    brief: BriefId,
) -> Result<(), AppError> {
    may_edit_brief(db, caller, brief).await?;
    if caller.role() != Role::Admin && brief_access(db, brief).await?.owner.is_none() {
        return Err(AppError::Forbidden(
            "this brief has no owner yet (it is from before ownership): only an admin may share it, \
             after assigning its owner"
                .into(),
        ));
    }
    Ok(())
}

/// Sending evidence or ledger lines: an agent token for the brief (and trial), or a person who
/// may edit the brief.
pub async fn may_send_to_brief(
    db: impl PgExecutor<'_> + Copy,
    caller: &Principal,
    brief: BriefId,
) -> Result<(), AppError> {
    caller.may_send_to_brief(brief)?;
    if caller.role() == Role::Agent {
        return Ok(());
    }
    may_edit_brief(db, caller, brief).await
}

/// Whether `caller` may edit: the same rule as [`may_edit_brief`], as a yes or no for pages that
/// show or hide their edit links.
pub async fn can_edit_brief(
    db: impl PgExecutor<'_> + Copy,
    caller: &Principal,
    brief: BriefId,
) -> Result<bool, AppError> {
    match may_edit_brief(db, caller, brief).await {
        Ok(()) => Ok(true),
        Err(AppError::Forbidden(_)) => Ok(false),
        Err(e) => Err(e),
    }
}

/// Makes `user` the brief's owner (its creator, or an admin's choice).
pub async fn set_owner(db: impl PgExecutor<'_>, brief: BriefId, user: UserId) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "INSERT INTO brief_owners (brief_id, user_id) VALUES ($1, $2) \
         ON CONFLICT (brief_id) DO UPDATE SET user_id = EXCLUDED.user_id, assigned_at = now()",
        brief.as_uuid(),
        user.as_uuid(),
    )
    .execute(db)
    .await?;
    Ok(())
}

#[derive(Debug, Clone, Serialize)]
pub struct Team {
    pub id: TeamId,
    pub name: String,
    /// Member emails, sorted.
    pub members: Vec<String>,
}

fn team_name(raw: &str) -> Result<String, AppError> {
    let name = raw.trim();
    if name.is_empty() || name.chars().count() > 100 || name.chars().any(char::is_control) {
        return Err(AppError::Validation(vec![FieldError::new(
            "name",
            "must be 1–100 characters, without control characters",
        )]));
    }
    Ok(name.to_owned())
}

pub async fn create_team(db: impl PgExecutor<'_>, raw_name: &str) -> Result<TeamRef, AppError> {
    let name = team_name(raw_name)?;
    sqlx::query_as!(
        TeamRef,
        "INSERT INTO teams (id, name) VALUES ($1, $2) RETURNING id, name",
        Uuid::now_v7(),
        &name,
    )
    .fetch_one(db)
    .await
    .map_err(|e| match &e {
        sqlx::Error::Database(d) if d.constraint() == Some("teams_name_key") => {
            AppError::Conflict(format!("a team named {name} already exists"))
        }
        _ => e.into(),
    })
}

pub async fn team_by_name(db: impl PgExecutor<'_>, name: &str) -> Result<TeamRef, AppError> {
    sqlx::query_as!(TeamRef, "SELECT id, name FROM teams WHERE name = $1", name.trim())
        .fetch_optional(db)
        .await?
        .ok_or(AppError::NotFound("team"))
}

pub async fn team_by_id(db: impl PgExecutor<'_>, id: TeamId) -> Result<TeamRef, AppError> {
    sqlx::query_as!(TeamRef, "SELECT id, name FROM teams WHERE id = $1", id.as_uuid())
        .fetch_optional(db)
        .await?
        .ok_or(AppError::NotFound("team"))
}

/// Every team's id and name, by name (for pickers, where members are not shown).
pub async fn team_names(db: impl PgExecutor<'_>) -> Result<Vec<TeamRef>, sqlx::Error> {
    sqlx::query_as!(TeamRef, "SELECT id, name FROM teams ORDER BY name")
        .fetch_all(db)
        .await
}

/// Every team with its members, by name.
pub async fn list_teams(db: impl PgExecutor<'_>) -> Result<Vec<Team>, sqlx::Error> {
    sqlx::query_as!(
        Team,
        r#"SELECT t.id, t.name,
                  COALESCE(array_agg(u.email ORDER BY u.email) FILTER (WHERE u.email IS NOT NULL), '{}') AS "members!"
           FROM teams t
           LEFT JOIN team_members m ON m.team_id = t.id
           LEFT JOIN users u ON u.id = m.user_id
           GROUP BY t.id, t.name ORDER BY t.name"#
    )
    .fetch_all(db)
    .await
}

/// Adds a member; false when they already were one.
pub async fn add_member(db: impl PgExecutor<'_>, team: TeamId, user: UserId) -> Result<bool, sqlx::Error> {
    let done = sqlx::query!(
        "INSERT INTO team_members (team_id, user_id) VALUES ($1, $2) ON CONFLICT DO NOTHING",
        team.as_uuid(),
        user.as_uuid(),
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Removes a member; false when they were not one.
pub async fn remove_member(db: impl PgExecutor<'_>, team: TeamId, user: UserId) -> Result<bool, sqlx::Error> {
    let done = sqlx::query!(
        "DELETE FROM team_members WHERE team_id = $1 AND user_id = $2",
        team.as_uuid(),
        user.as_uuid(),
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Shares a brief with a team; 404 when the brief does not exist.
pub async fn share(db: impl PgExecutor<'_>, brief: BriefId, team: TeamId) -> Result<(), AppError> {
    sqlx::query!(
        "INSERT INTO brief_teams (brief_id, team_id) VALUES ($1, $2) ON CONFLICT DO NOTHING",
        brief.as_uuid(),
        team.as_uuid(),
    )
    .execute(db)
    .await
    .map_err(|e| match &e {
        sqlx::Error::Database(d) if d.constraint() == Some("brief_teams_brief_id_fkey") => AppError::NotFound("brief"),
        _ => e.into(),
    })?;
    Ok(())
}

pub async fn unshare(db: impl PgExecutor<'_>, brief: BriefId, team: TeamId) -> Result<bool, sqlx::Error> {
    let done = sqlx::query!(
        "DELETE FROM brief_teams WHERE brief_id = $1 AND team_id = $2",
        brief.as_uuid(),
        team.as_uuid(),
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Every brief that has an owner (the admin page lists the briefs that have none).
pub async fn owned_briefs(db: impl PgExecutor<'_>) -> Result<Vec<BriefId>, sqlx::Error> {
    let ids = sqlx::query_scalar!("SELECT DISTINCT brief_id FROM brief_owners")
        .fetch_all(db)
        .await?;
    Ok(ids.into_iter().map(BriefId::from).collect())
}
