//! People: accounts with a role and an argon2id password hash.

use sqlx::{PgExecutor, PgPool};
use uuid::Uuid;

use super::{password, Role};
use crate::{error::AppError, validation::FieldError};

#[derive(Debug, Clone)]
pub struct UserRow {
    pub id: Uuid,
    pub email: String,
    pub role: String,
    pub password_hash: String,
    pub created_at: chrono::DateTime<chrono::Utc>,
}

impl UserRow {
    pub fn role(&self) -> Role {
        self.role.parse().unwrap_or(Role::Engineer)
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
    if password.chars().count() < password::MIN_PASSWORD_LEN {
        return Err(AppError::Validation(vec![FieldError::new(
            "password",
            format!("must be at least {} characters", password::MIN_PASSWORD_LEN),
        )]));
    }
    let hash = password::hash(password).await?;
    let row = sqlx::query_as!(
        UserRow,
        "INSERT INTO users (id, email, role, password_hash) VALUES ($1, $2, $3, $4) \
         RETURNING id, email, role, password_hash, created_at",
        Uuid::now_v7(),
        &email,
        role.as_str(),
        hash,
    )
    .fetch_one(pool)
    .await
    .map_err(|e| match &e {
        sqlx::Error::Database(db) if db.constraint() == Some("users_email_key") => {
            AppError::Conflict(format!("a user with email {email} already exists"))
        }
        _ => AppError::from(e),
    })?;
    Ok((row, generated))
}

pub async fn by_email(db: impl PgExecutor<'_>, email: &str) -> Result<Option<UserRow>, sqlx::Error> {
    sqlx::query_as!(
        UserRow,
        "SELECT id, email, role, password_hash, created_at FROM users WHERE email = $1",
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
        "SELECT id, email, role, password_hash, created_at FROM users ORDER BY email"
    )
    .fetch_all(db)
    .await
}

pub async fn set_password(db: impl PgExecutor<'_>, id: Uuid, password_hash: &str) -> Result<(), sqlx::Error> {
    sqlx::query!("UPDATE users SET password_hash = $2 WHERE id = $1", id, password_hash)
        .execute(db)
        .await?;
    Ok(())
}
