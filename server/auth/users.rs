//! People: accounts with a role and an argon2id password hash.

use sqlx::{PgExecutor, PgPool};
use uuid::Uuid;

use super::{password, token::Tokens, Role};
use crate::{audit, error::AppError, ids::UserId, validation::FieldError};

#[derive(Debug, Clone)]
pub struct UserRow {
    pub id: UserId,
    pub email: String,
    pub role: Role,
    pub password_hash: String,
    pub created_at: chrono::DateTime<chrono::Utc>,
    pub disabled_at: Option<chrono::DateTime<chrono::Utc>>,
}

impl UserRow {
    pub fn role(&self) -> Role {
        self.role
    }
}

/// Lower-cased and trimmed; must look like an address.
pub fn normalize_email(raw: &str) -> Result<String, String> {
    let email = raw.trim().to_lowercase();
    let valid = email.len() <= 254
        && email
            .split_once('@')
            .is_some_and(|(local, domain)| !local.is_empty() && !domain.is_empty())
        && !email.chars().any(|c| c.is_whitespace() || c.is_control());
    if valid {
        Ok(email)
    } else {
        Err("must be an email address".into())
    }
}

pub fn person_role(raw: &str) -> Result<Role, String> {
    match raw.trim().parse::<Role>() {
        Ok(role) if role != Role::Agent => Ok(role),
        _ => Err("must be one of: engineer, manager, admin".into()),
    }
}

/// Creates a user. With no password, one is generated and returned so it can be shown once.
pub async fn add(
    pool: &PgPool,
    email: &str,
    role: Role,
    password: Option<String>,
    entry: impl FnOnce(&UserRow) -> audit::Entry,
) -> Result<(UserRow, Option<String>), AppError> {
    let email = normalize_email(email).map_err(|m| AppError::Validation(vec![FieldError::new("email", m)]))?;
    if role == Role::Agent {
        return Err(AppError::Validation(vec![FieldError::new(
            "role",
            "agents are tokens, not users",
        )]));
    }
    let (password, generated) = match password {
        Some(p) => (p, None),
        None => {
            let p = crate::secrets::random_token()[..24].to_owned();
            (p.clone(), Some(p))
        }
    };
    check_new_password(&password)?;
    let hash = password::hash(password).await?;
    let mut tx = pool.begin().await?;
    let row = insert(&mut *tx, &email, role, &hash).await?;
    entry(&row).record(&mut *tx).await?;
    tx.commit().await?;
    Ok((row, generated))
}

async fn insert(db: impl PgExecutor<'_>, email: &str, role: Role, hash: &str) -> Result<UserRow, AppError> {
    sqlx::query_as!(
        UserRow,
        r#"INSERT INTO users (id, email, role, password_hash) VALUES ($1, $2, $3, $4)
           RETURNING id, email, role AS "role: Role", password_hash, created_at, disabled_at"#,
        Uuid::now_v7(),
        email,
        role.as_str(),
        hash,
    )
    .fetch_one(db)
    .await
    .map_err(|e| match &e {
        sqlx::Error::Database(db) if db.constraint() == Some("users_email_key") => {
            AppError::Conflict(format!("a user with email {email} already exists"))
        }
        _ => AppError::from(e),
    })
}

/// The first admin, from the first-run page: made only while there is no user at all, checked and
/// made under one lock, so parallel first-run forms make one admin. `None` when a user exists by
/// the time the lock is held.
pub async fn add_first_admin(
    pool: &PgPool,
    email: &str,
    password: String,
    entry: impl FnOnce(&UserRow) -> audit::Entry,
) -> Result<Option<UserRow>, AppError> {
    let email = normalize_email(email).map_err(|m| AppError::Validation(vec![FieldError::new("email", m)]))?;
    check_new_password(&password)?;
    // Hashed before the lock: it takes a while, and the lock should be held briefly.
    let hash = password::hash(password).await?;
    let mut tx = pool.begin().await?;
    sqlx::query!("SELECT pg_advisory_xact_lock(hashtext('rentcheck.users.first'))")
        .execute(&mut *tx)
        .await?;
    if count(&mut *tx).await? > 0 {
        return Ok(None);
    }
    let row = insert(&mut *tx, &email, Role::Admin, &hash).await?;
    entry(&row).record(&mut *tx).await?;
    tx.commit().await?;
    Ok(Some(row))
}

pub async fn by_email(db: impl PgExecutor<'_>, email: &str) -> Result<Option<UserRow>, sqlx::Error> {
    sqlx::query_as!(
        UserRow,
        r#"SELECT id, email, role AS "role: Role", password_hash, created_at, disabled_at FROM users WHERE email = $1"#,
        email,
    )
    .fetch_optional(db)
    .await
}

pub async fn count(db: impl PgExecutor<'_>) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar!(r#"SELECT count(*) AS "count!" FROM users"#)
        .fetch_one(db)
        .await
}

pub async fn list(db: impl PgExecutor<'_>) -> Result<Vec<UserRow>, sqlx::Error> {
    sqlx::query_as!(
        UserRow,
        r#"SELECT id, email, role AS "role: Role", password_hash, created_at, disabled_at FROM users ORDER BY email"#
    )
    .fetch_all(db)
    .await
}

pub async fn by_id(db: impl PgExecutor<'_>, id: UserId) -> Result<Option<UserRow>, sqlx::Error> {
    sqlx::query_as!(
        UserRow,
        r#"SELECT id, email, role AS "role: Role", password_hash, created_at, disabled_at FROM users WHERE id = $1"#,
        id.as_uuid(),
    )
    .fetch_optional(db)
    .await
}

/// What an admin may change about a person (`PUT /api/v1/users/{uid}`, the users page, the CLI).
#[derive(Debug, Clone, Copy, Default)]
pub struct Change {
    pub role: Option<Role>,
    pub disabled: Option<bool>,
}

/// Changes a person's role and/or disabled mark in one transaction. Disabling ends their sessions
/// and revokes their tokens (the agent tokens they minted too), so enabling them again revives
/// nothing; `token::authenticate` refuses a disabled person's tokens besides. A role change takes
/// effect on their next request. The last enabled admin can be neither disabled nor demoted (409):
/// nobody could manage users after that. `None` when there is no such person. The token rows
/// `kept` by this process are forgotten once it commits (other servers hear the notification).
/// The audit row `entry` makes of the changed person is written in the same transaction.
pub async fn change(
    pool: &PgPool,
    kept: &Tokens,
    id: UserId,
    change: Change,
    entry: impl FnOnce(&UserRow) -> audit::Entry,
) -> Result<Option<UserRow>, AppError> {
    if change.role == Some(Role::Agent) {
        return Err(AppError::Validation(vec![FieldError::new(
            "role",
            "must be one of: engineer, manager, admin",
        )]));
    }
    let mut tx = pool.begin().await?;
    // Serializes admin changes, so two admins demoting each other cannot leave none.
    sqlx::query!("SELECT pg_advisory_xact_lock(hashtext('rentcheck.users.admins'))")
        .execute(&mut *tx)
        .await?;
    let Some(current) = by_id(&mut *tx, id).await? else {
        return Ok(None);
    };
    let was_active_admin = current.role() == Role::Admin && current.disabled_at.is_none();
    let stays_active_admin = change.role.unwrap_or(current.role()) == Role::Admin
        && !change.disabled.unwrap_or(current.disabled_at.is_some());
    if was_active_admin && !stays_active_admin {
        let admins = sqlx::query_scalar!(
            r#"SELECT count(*) AS "count!" FROM users WHERE role = 'admin' AND disabled_at IS NULL"#
        )
        .fetch_one(&mut *tx)
        .await?;
        if admins <= 1 {
            return Err(AppError::Conflict(format!(
                "{} is the last enabled admin; make another admin first",
                current.email
            )));
        }
    }
    let row = sqlx::query_as!(
        UserRow,
        "UPDATE users SET role = COALESCE($2, role), \
             disabled_at = CASE WHEN $3::boolean IS NULL THEN disabled_at \
                                WHEN $3 THEN COALESCE(disabled_at, now()) ELSE NULL END \
         WHERE id = $1 RETURNING id, email, role AS \"role: Role\", password_hash, created_at, disabled_at",
        id.as_uuid(),
        change.role.map(|r| r.as_str()),
        change.disabled,
    )
    .fetch_one(&mut *tx)
    .await?;
    if let Some(role) = change.role.filter(|r| *r < current.role()) {
        // A demotion revokes what the old role allowed, so a later promotion revives nothing.
        super::token::revoke_above_role_for_user(&mut *tx, id, role).await?;
    }
    if change.disabled == Some(true) {
        // Offboarding: nothing of theirs comes back when they are enabled again.
        super::session::delete_for_user(&mut *tx, id, None).await?;
        super::token::revoke_all_for_user(&mut *tx, id).await?;
    }
    entry(&row).record(&mut *tx).await?;
    tx.commit().await?;
    kept.forget_all();
    Ok(Some(row))
}

/// Checks a new password's length; the field-level message otherwise.
pub fn check_new_password(password: &str) -> Result<(), AppError> {
    let n = password.chars().count();
    if !(password::MIN_PASSWORD_LEN..=password::MAX_PASSWORD_LEN).contains(&n) {
        return Err(AppError::Validation(vec![FieldError::new(
            "password",
            format!(
                "must be {} to {} characters",
                password::MIN_PASSWORD_LEN,
                password::MAX_PASSWORD_LEN
            ),
        )]));
    }
    Ok(())
}

/// What a new password ended.
#[derive(Debug, Clone, Copy, Default)]
pub struct PasswordReplaced {
    pub sessions_ended: u64,
    pub tokens_revoked: u64,
}

impl PasswordReplaced {
    /// The `user.password` row: who set whose password (`by`: self, admin or cli) and what it ended.
    pub fn audit_entry(&self, actor: &str, target: &str, by: &str) -> audit::Entry {
        audit::Entry::new(
            actor,
            "user.password",
            target,
            serde_json::json!({
                "by": by,
                "sessions_ended": self.sessions_ended,
                "tokens_revoked": self.tokens_revoked,
            }),
        )
    }
}

/// Sets a new password, ends the person's sessions but `keep` (the one that changed it) and
/// revokes every token minted by or for them: whoever knew the old password may have minted some.
/// The token rows `kept` by this process are forgotten once it commits.
pub async fn replace_password(
    pool: &PgPool,
    kept: &Tokens,
    id: UserId,
    new_password: String,
    keep: Option<&str>,
    entry: impl FnOnce(&PasswordReplaced) -> audit::Entry,
) -> Result<PasswordReplaced, AppError> {
    check_new_password(&new_password)?;
    let hash = password::hash(new_password).await?;
    let mut tx = pool.begin().await?;
    set_password(&mut *tx, id, &hash).await?;
    let sessions_ended = super::session::delete_for_user(&mut *tx, id, keep).await?;
    let tokens_revoked = super::token::revoke_all_for_user(&mut *tx, id).await?;
    let replaced = PasswordReplaced {
        sessions_ended,
        tokens_revoked,
    };
    entry(&replaced).record(&mut *tx).await?;
    tx.commit().await?;
    kept.forget_all();
    Ok(replaced)
}

pub async fn set_password(db: impl PgExecutor<'_>, id: UserId, password_hash: &str) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "UPDATE users SET password_hash = $2 WHERE id = $1",
        id.as_uuid(),
        password_hash
    )
    .execute(db)
    .await?;
    Ok(())
}
