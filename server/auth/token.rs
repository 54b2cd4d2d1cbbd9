//! Bearer tokens: HS256 JWTs whose `jti` has a row, checked on every request so a revoke is
//! immediate. The algorithm is pinned on verification (no `none`, no switching).

use std::path::Path;

use chrono::{DateTime, Duration, Utc};
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};
use sqlx::{FromRow, PgExecutor, PgPool};
use uuid::Uuid;

use super::{Principal, Role};
use crate::{config::Secret, error::AppError};

/// The HS256 signing key.
#[derive(Clone)]
pub struct TokenKeys {
    encoding: EncodingKey,
    decoding: DecodingKey,
}

impl std::fmt::Debug for TokenKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TokenKeys(***)")
    }
}

pub const MIN_SECRET_LEN: usize = 32;

impl TokenKeys {
    pub fn from_secret(secret: &[u8]) -> Self {
        Self {
            encoding: EncodingKey::from_secret(secret),
            decoding: DecodingKey::from_secret(secret),
        }
    }

    /// `RENTCHECK_JWT_SECRET` when given; otherwise the secret kept in `<data dir>/jwt-secret`
    /// (mode 0600), generated on first start.
    pub fn load(configured: Option<&Secret>, data_dir: &Path) -> anyhow::Result<Self> {
        if let Some(secret) = configured {
            anyhow::ensure!(
                secret.expose().len() >= MIN_SECRET_LEN,
                "RENTCHECK_JWT_SECRET must be at least {MIN_SECRET_LEN} characters"
            );
            return Ok(Self::from_secret(secret.expose().as_bytes()));
        }
        std::fs::create_dir_all(data_dir)?;
        let path = data_dir.join("jwt-secret");
        let secret = match std::fs::read_to_string(&path) {
            Ok(s) => s.trim().to_owned(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                // Created once: two first starts must not each keep a different secret.
                let s = crate::secrets::create_private_file_once(&path, &crate::secrets::random_token())?;
                tracing::info!(path = %path.display(), "generated a token signing secret");
                s.trim().to_owned()
            }
            Err(e) => return Err(anyhow::Error::new(e).context(format!("reading {}", path.display()))),
        };
        anyhow::ensure!(secret.len() >= MIN_SECRET_LEN, "{} is too short", path.display());
        Ok(Self::from_secret(secret.as_bytes()))
    }
}

#[derive(Debug, Serialize, Deserialize)]
pub struct Claims {
    pub sub: String,
    pub role: Role,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub brief: Option<Uuid>,
    pub jti: Uuid,
    pub iat: i64,
    pub nbf: i64,
    pub exp: i64,
}

/// What a new token is for.
pub struct NewToken {
    pub name: String,
    pub subject: String,
    pub role: Role,
    pub brief: Option<Uuid>,
    pub ttl: Duration,
    pub created_by: Option<Uuid>,
}

#[derive(Debug, Clone, FromRow, Serialize)]
pub struct TokenRow {
    pub jti: Uuid,
    pub name: String,
    pub subject: String,
    pub role: String,
    pub brief_id: Option<Uuid>,
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
    let jti = Uuid::now_v7();
    let now = Utc::now();
    let expires = now + new.ttl;
    let row: TokenRow = sqlx::query_as(
        "INSERT INTO api_tokens (jti, name, subject, role, brief_id, created_by, expires_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7) \
         RETURNING jti, name, subject, role, brief_id, created_at, expires_at, last_used_at, revoked_at",
    )
    .bind(jti)
    .bind(&new.name)
    .bind(&new.subject)
    .bind(new.role.as_str())
    .bind(new.brief)
    .bind(new.created_by)
    .bind(expires)
    .fetch_one(db)
    .await?;
    let claims = Claims {
        sub: new.subject,
        role: new.role,
        brief: new.brief,
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

#[derive(FromRow)]
struct TokenState {
    role: String,
    brief_id: Option<Uuid>,
    expires_at: DateTime<Utc>,
    revoked_at: Option<DateTime<Utc>>,
}

fn invalid(why: &str) -> AppError {
    AppError::Unauthorized(format!("invalid bearer token: {why}"))
}

/// Verifies signature, algorithm, `exp` and `nbf`, then the `jti` row (exists, not revoked, not
/// expired, same role and scope as signed).
pub async fn authenticate(pool: &PgPool, keys: &TokenKeys, token: &str) -> Result<Principal, AppError> {
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
    // One round trip: read the token row and, at most once a minute per live token, note its last
    // use (so reads do not turn into writes). The SELECT sees the row as it was before the UPDATE.
    let row: Option<TokenState> = sqlx::query_as(
        "WITH touched AS ( \
             UPDATE api_tokens SET last_used_at = now() \
             WHERE jti = $1 AND revoked_at IS NULL AND expires_at > now() \
               AND (last_used_at IS NULL OR last_used_at < now() - interval '1 minute') \
         ) \
         SELECT role, brief_id, expires_at, revoked_at FROM api_tokens WHERE jti = $1",
    )
    .bind(claims.jti)
    .fetch_optional(pool)
    .await?;
    let Some(TokenState {
        role,
        brief_id: brief,
        expires_at,
        revoked_at,
    }) = row
    else {
        return Err(invalid("unknown token"));
    };
    if revoked_at.is_some() {
        return Err(invalid("revoked"));
    }
    if expires_at <= Utc::now() {
        return Err(invalid("expired"));
    }
    if role != claims.role.as_str() || brief != claims.brief {
        return Err(invalid("claims do not match the token record"));
    }
    Ok(Principal::Token {
        jti: claims.jti,
        subject: claims.sub,
        role: claims.role,
        brief: claims.brief,
    })
}

/// Marks a token revoked; false when there is no such live token.
pub async fn revoke(db: impl PgExecutor<'_>, jti: Uuid) -> Result<bool, sqlx::Error> {
    let done = sqlx::query("UPDATE api_tokens SET revoked_at = now() WHERE jti = $1 AND revoked_at IS NULL")
        .bind(jti)
        .execute(db)
        .await?;
    Ok(done.rows_affected() == 1)
}

pub async fn get(db: impl PgExecutor<'_>, jti: Uuid) -> Result<Option<TokenRow>, sqlx::Error> {
    sqlx::query_as(
        "SELECT jti, name, subject, role, brief_id, created_at, expires_at, last_used_at, revoked_at \
         FROM api_tokens WHERE jti = $1",
    )
    .bind(jti)
    .fetch_optional(db)
    .await
}

pub async fn list_for_brief(db: impl PgExecutor<'_>, brief: Uuid) -> Result<Vec<TokenRow>, sqlx::Error> {
    sqlx::query_as(
        "SELECT jti, name, subject, role, brief_id, created_at, expires_at, last_used_at, revoked_at \
         FROM api_tokens WHERE brief_id = $1 ORDER BY created_at DESC",
    )
    .bind(brief)
    .fetch_all(db)
    .await
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
