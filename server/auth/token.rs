//! Bearer tokens: HS256 JWTs whose `jti` has a row, checked on every request so a revoke is
//! immediate (the row read within the last second, or again after any change to tokens or people:
//! `token_cache`). The algorithm is pinned on verification (no `none`, no switching).

use std::time::Instant;

use chrono::{DateTime, Duration, Utc};
use jsonwebtoken::{Algorithm, Header, Validation};
use serde::{Deserialize, Serialize};
use sqlx::{PgExecutor, PgPool};
use uuid::Uuid;

use super::{token_cache::TokenCache, Principal, Role};
use crate::ids::{BriefId, TokenId, TrialId, UserId};
use crate::{error::AppError, secrets::TokenKeys};

#[derive(Debug, Serialize, Deserialize)]
pub struct Claims {
    pub sub: String,
    pub role: Role,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub brief: Option<BriefId>,
    /// One trial of the brief: the token sends evidence and ledger lines to it alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trial: Option<TrialId>,
    pub jti: TokenId,
    pub iat: i64,
    pub nbf: i64,
    pub exp: i64,
}

/// What a new token is for.
pub struct NewToken {
    pub name: String,
    pub subject: String,
    pub role: Role,
    pub brief: Option<BriefId>,
    /// A trial of `brief`: the token then writes to that trial only.
    pub trial: Option<TrialId>,
    pub ttl: Duration,
    pub created_by: Option<UserId>,
}

/// A token's record (never the signed token itself).
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct TokenRow {
    #[schema(value_type = Uuid)]
    pub jti: TokenId,
    pub name: String,
    pub subject: String,
    pub role: String,
    #[schema(value_type = Option<Uuid>)]
    pub brief_id: Option<BriefId>,
    #[schema(value_type = Option<Uuid>)]
    pub trial_id: Option<TrialId>,
    /// The person it was minted by or for (none for an agent token minted by the CLI).
    #[schema(value_type = Option<Uuid>)]
    pub created_by: Option<UserId>,
    pub created_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
    pub last_used_at: Option<DateTime<Utc>>,
    pub revoked_at: Option<DateTime<Utc>>,
}

pub const MAX_TTL_DAYS: i64 = 366;

/// Records the token's row, then signs it. The signed string is returned once and never stored.
pub async fn mint(db: impl PgExecutor<'_>, keys: &TokenKeys, new: NewToken) -> anyhow::Result<(String, TokenRow)> {
    anyhow::ensure!(
        new.role != Role::Agent || new.brief.is_some(),
        "an agent token needs a brief"
    );
    anyhow::ensure!(
        new.trial.is_none() || new.brief.is_some(),
        "a trial token needs its brief"
    );
    // A person token acts as its person, checked on every request: it must name them.
    anyhow::ensure!(
        new.role == Role::Agent || new.created_by.is_some(),
        "a person token needs its person"
    );
    let jti = TokenId::from(Uuid::now_v7());
    let now = Utc::now();
    let expires = now + new.ttl;
    let row = sqlx::query_as!(
        TokenRow,
        "INSERT INTO api_tokens (jti, name, subject, role, brief_id, created_by, expires_at, trial_id) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8) \
         RETURNING jti, name, subject, role, brief_id AS \"brief_id: BriefId\", trial_id AS \"trial_id: TrialId\", created_by AS \"created_by: UserId\", created_at, expires_at, last_used_at, revoked_at",
        jti.as_uuid(),
        &new.name,
        &new.subject,
        new.role.as_str(),
        new.brief.map(BriefId::as_uuid),
        new.created_by.map(UserId::as_uuid),
        expires,
        new.trial.map(TrialId::as_uuid),
    )
    .fetch_one(db)
    .await?;
    let claims = Claims {
        sub: new.subject,
        role: new.role,
        brief: new.brief,
        trial: new.trial,
        jti,
        iat: now.timestamp(),
        nbf: now.timestamp(),
        exp: expires.timestamp(),
    };
    let token = jsonwebtoken::encode(&Header::new(Algorithm::HS256), &claims, &keys.encoding)?;
    Ok((token, row))
}

/// Signs arbitrary claims; for tests of the verifier and for tools, never exposed over HTTP.
pub fn sign(keys: &TokenKeys, claims: &Claims) -> anyhow::Result<String> {
    Ok(jsonwebtoken::encode(
        &Header::new(Algorithm::HS256),
        claims,
        &keys.encoding,
    )?)
}

/// What a request's token is checked against: its row and its person's role and disabled mark now.
#[derive(Clone)]
pub struct TokenState {
    role: Role,
    brief_id: Option<BriefId>,
    trial_id: Option<TrialId>,
    expires_at: DateTime<Utc>,
    revoked_at: Option<DateTime<Utc>>,
    created_by: Option<UserId>,
    /// The person's role and disabled mark now, when the token has a person.
    user_role: Option<Role>,
    user_disabled: Option<bool>,
}

/// The token rows a server reuses for a second (`token_cache`), kept in the state's slots.
pub type Tokens = TokenCache<TokenState>;

fn invalid(why: &str) -> AppError {
    AppError::Unauthorized(format!("invalid bearer token: {why}"))
}

/// Verifies signature, algorithm, `exp` and `nbf`, then the `jti` row (exists, not revoked, not
/// expired, same role and scope as signed), then its person: a person token needs its person,
/// not disabled and with a role at least the token's (a lowered role refuses the token at once);
/// an agent token minted by a person who is now disabled is refused too.
pub async fn authenticate(pool: &PgPool, keys: &TokenKeys, cache: &Tokens, token: &str) -> Result<Principal, AppError> {
    let mut validation = Validation::new(Algorithm::HS256);
    validation.leeway = 5;
    validation.validate_nbf = true;
    validation.set_required_spec_claims(&["exp", "nbf", "sub", "jti"]);
    let data = jsonwebtoken::decode::<Claims>(token, &keys.decoding, &validation).map_err(|e| {
        use jsonwebtoken::errors::ErrorKind;
        match e.kind() {
            ErrorKind::ExpiredSignature => invalid("expired"),
            ErrorKind::ImmatureSignature => invalid("not valid yet"),
            ErrorKind::InvalidSignature => invalid("bad signature"),
            ErrorKind::InvalidAlgorithm => invalid("wrong algorithm"),
            _ => invalid("malformed"),
        }
    })?;
    let claims = data.claims;
    let row = match cache.get(claims.jti) {
        Some(row) => Some(row),
        None => {
            let (generation, read_at) = (cache.generation(), Instant::now());
            let row = read_state(pool, claims.jti).await?;
            if let Some(row) = &row {
                cache.keep(claims.jti, row.clone(), read_at, generation);
            }
            row
        }
    };
    let Some(TokenState {
        role,
        brief_id: brief,
        trial_id: trial,
        expires_at,
        revoked_at,
        created_by,
        user_role,
        user_disabled,
    }) = row
    else {
        return Err(invalid("unknown token"));
    };
    // Said first: it tells whoever holds the token why (disabling revoked it too).
    if user_disabled == Some(true) {
        return Err(invalid("its person's account is disabled"));
    }
    if revoked_at.is_some() {
        return Err(invalid("revoked"));
    }
    if expires_at <= Utc::now() {
        return Err(invalid("expired"));
    }
    if role != claims.role || brief != claims.brief || trial != claims.trial {
        return Err(invalid("claims do not match the token record"));
    }
    if claims.role != Role::Agent {
        // A person token acts as its person: it needs one, and never more than their role now.
        let Some(current) = user_role else {
            return Err(invalid("its person's account no longer exists"));
        };
        if claims.role > current {
            return Err(invalid(&format!(
                "its person's role is now {}, lower than the token's {}",
                current.as_str(),
                claims.role.as_str()
            )));
        }
    }
    Ok(Principal::Token {
        jti: claims.jti,
        subject: claims.sub,
        role: claims.role,
        brief: claims.brief,
        trial: claims.trial,
        user: created_by,
    })
}

/// The token's row and its person's role and disabled mark. One round trip that also notes the
/// token's last use, at most once a minute per live token (so reads do not turn into writes); the
/// SELECT sees the row as it was before the UPDATE.
async fn read_state(pool: &PgPool, jti: TokenId) -> Result<Option<TokenState>, sqlx::Error> {
    sqlx::query_as!(
        TokenState,
        "WITH touched AS ( \
             UPDATE api_tokens SET last_used_at = now() \
             WHERE jti = $1 AND revoked_at IS NULL AND expires_at > now() \
               AND (last_used_at IS NULL OR last_used_at < now() - interval '1 minute') \
         ) \
         SELECT t.role AS \"role: Role\", t.brief_id AS \"brief_id: BriefId\", t.trial_id AS \"trial_id: TrialId\", t.expires_at, t.revoked_at, t.created_by AS \"created_by: UserId\", \
                u.role AS \"user_role?: Role\", (u.disabled_at IS NOT NULL) AS \"user_disabled?\" \
         FROM api_tokens t LEFT JOIN users u ON u.id = t.created_by WHERE t.jti = $1",
        jti.as_uuid(),
    )
    .fetch_optional(pool)
    .await
}

/// Marks a token revoked; whether it was live.
async fn mark_revoked(db: impl PgExecutor<'_>, jti: TokenId) -> Result<bool, sqlx::Error> {
    let done = sqlx::query!(
        "UPDATE api_tokens SET revoked_at = now() WHERE jti = $1 AND revoked_at IS NULL",
        jti.as_uuid(),
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Revokes a token with its audit row in one transaction (written only when the token was live);
/// whether it was. The token rows `kept` by this process are forgotten once it commits (other
/// servers hear the notification), so its next request is refused whatever the notification's
/// delay.
pub async fn revoke_audited(
    pool: &sqlx::PgPool,
    kept: &Tokens,
    jti: TokenId,
    entry: crate::audit::Entry,
) -> Result<bool, sqlx::Error> {
    let mut tx = pool.begin().await?;
    let revoked = mark_revoked(&mut *tx, jti).await?;
    if revoked {
        entry.record(&mut *tx).await?;
    }
    tx.commit().await?;
    kept.forget_all();
    Ok(revoked)
}

pub async fn get(db: impl PgExecutor<'_>, jti: TokenId) -> Result<Option<TokenRow>, sqlx::Error> {
    sqlx::query_as!(
        TokenRow,
        "SELECT jti, name, subject, role, brief_id AS \"brief_id: BriefId\", trial_id AS \"trial_id: TrialId\", created_by AS \"created_by: UserId\", created_at, expires_at, last_used_at, revoked_at \
         FROM api_tokens WHERE jti = $1",
        jti.as_uuid(),
    )
    .fetch_optional(db)
    .await
}

pub async fn list_for_brief(db: impl PgExecutor<'_>, brief: BriefId) -> Result<Vec<TokenRow>, sqlx::Error> {
    sqlx::query_as!(
        TokenRow,
        "SELECT jti, name, subject, role, brief_id AS \"brief_id: BriefId\", trial_id AS \"trial_id: TrialId\", created_by AS \"created_by: UserId\", created_at, expires_at, last_used_at, revoked_at \
         FROM api_tokens WHERE brief_id = $1 ORDER BY created_at DESC",
        brief.as_uuid(),
    )
    .fetch_all(db)
    .await
}

/// A token's state as lists show it: `active`, `expired` or `revoked`.
pub fn state_of(t: &TokenRow) -> &'static str {
    if t.revoked_at.is_some() {
        "revoked"
    } else if t.expires_at <= Utc::now() {
        "expired"
    } else {
        "active"
    }
}

/// Every token minted by or for a person (their person tokens and the agent tokens they minted),
/// newest first: the list an admin reads when someone leaves.
pub async fn list_for_user(db: impl PgExecutor<'_>, user: UserId) -> Result<Vec<TokenRow>, sqlx::Error> {
    sqlx::query_as!(
        TokenRow,
        "SELECT jti, name, subject, role, brief_id AS \"brief_id: BriefId\", trial_id AS \"trial_id: TrialId\", created_by AS \"created_by: UserId\", created_at, expires_at, last_used_at, revoked_at \
         FROM api_tokens WHERE created_by = $1 ORDER BY created_at DESC",
        user.as_uuid(),
    )
    .fetch_all(db)
    .await
}

/// Revokes every live token minted by or for a person (a new password, a disabled account); how
/// many. A revoked token stays revoked: enabling the person again revives none.
pub async fn revoke_all_for_user(db: impl PgExecutor<'_>, user: UserId) -> Result<u64, sqlx::Error> {
    let done = sqlx::query!(
        "UPDATE api_tokens SET revoked_at = now() WHERE created_by = $1 AND revoked_at IS NULL",
        user.as_uuid(),
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected())
}

/// Revokes the live tokens `user` minted with a role above `role` (a demotion): a token never
/// carries more than its maker may do now, and a later promotion brings none of them back.
pub async fn revoke_above_role_for_user(db: impl PgExecutor<'_>, user: UserId, role: Role) -> Result<u64, sqlx::Error> {
    let above: Vec<&str> = [Role::Agent, Role::Engineer, Role::Manager, Role::Admin]
        .into_iter()
        .filter(|r| *r > role)
        .map(|r| r.as_str())
        .collect();
    let done = sqlx::query!(
        "UPDATE api_tokens SET revoked_at = now() WHERE created_by = $1 AND revoked_at IS NULL AND role = ANY($2)",
        user.as_uuid(),
        &above as &[&str],
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected())
}

/// `30d`, `12h`, `90m` or `3600s` → a duration of at most a year.
pub fn parse_ttl(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let unit = text.chars().last().map(|c| c.to_string()).unwrap_or_default();
    let number = &text[..text.len() - unit.len()];
    let n: i64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a duration like 30d, 12h or 90m"))?;
    let ttl = match unit.as_str() {
        "d" => Duration::days(n),
        "h" => Duration::hours(n),
        "m" => Duration::minutes(n),
        "s" => Duration::seconds(n),
        _ => return Err(format!("{text:?} is not a duration like 30d, 12h or 90m")),
    };
    if ttl <= Duration::zero() || ttl > Duration::days(MAX_TTL_DAYS) {
        return Err(format!("the lifetime must be between 1s and {MAX_TTL_DAYS} days"));
    }
    Ok(ttl)
}

/// The names people gave tokens, by `jti`: pages show "node-1 harness" where they would show an id.
pub async fn names(
    db: impl PgExecutor<'_>,
    jtis: &[TokenId],
) -> Result<std::collections::HashMap<TokenId, String>, sqlx::Error> {
    if jtis.is_empty() {
        return Ok(Default::default());
    }
    let rows = sqlx::query!("SELECT jti, name FROM api_tokens WHERE jti = ANY($1)", jtis as _)
        .fetch_all(db)
        .await?;
    Ok(rows.into_iter().map(|r| (TokenId::from(r.jti), r.name)).collect())
}

/// The ids (`jti`) of every token minted for `user`, revoked or not: what they saved through one is
/// labelled `token:<jti> (<subject>)`.
pub async fn jtis_of(db: impl PgExecutor<'_>, user: UserId) -> Result<Vec<TokenId>, sqlx::Error> {
    let jtis = sqlx::query_scalar!("SELECT jti FROM api_tokens WHERE created_by = $1", user.as_uuid())
        .fetch_all(db)
        .await?;
    Ok(jtis.into_iter().map(TokenId::from).collect())
}

/// The token id in an uploader label (`token:<jti> (<subject>)`, as `Principal::label` writes it).
pub fn jti_in_label(label: &str) -> Option<TokenId> {
    let rest = label.strip_prefix("token:")?;
    rest.split(' ').next()?.parse().ok()
}

/// An uploader label for people: a token by the name it was given (`token “node-1” (subject)`).
pub fn label_with_name(label: &str, names: &std::collections::HashMap<TokenId, String>) -> String {
    match jti_in_label(label).and_then(|jti| names.get(&jti)) {
        Some(name) => {
            let subject = label.split_once(' ').map(|(_, s)| s).unwrap_or("");
            format!("token “{name}” {subject}").trim_end().to_owned()
        }
        None => label.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ttl_forms() {
        assert_eq!(parse_ttl("30d"), Ok(Duration::days(30)));
        assert_eq!(parse_ttl("12h"), Ok(Duration::hours(12)));
        assert_eq!(parse_ttl("90m"), Ok(Duration::minutes(90)));
        assert!(parse_ttl("0d").is_err());
        assert!(parse_ttl("400d").is_err());
        assert!(parse_ttl("soon").is_err());
        assert!(parse_ttl("").is_err());
        assert!(parse_ttl("5ü").is_err());
    }
}
