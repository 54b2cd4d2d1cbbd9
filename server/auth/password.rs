//! Password hashing with argon2id, always off the async runtime.

use std::sync::LazyLock;

use argon2::{
    password_hash::{rand_core::OsRng, PasswordHash, PasswordHasher, PasswordVerifier, SaltString},
    Argon2,
};

/// A real hash of a random password, verified against when the email is unknown, so a login for
/// an unknown user takes as long as one for a known user.
static DUMMY_HASH: LazyLock<String> = LazyLock::new(|| hash_blocking(&crate::secrets::random_token()));

fn hash_blocking(password: &str) -> String {
    let salt = SaltString::generate(&mut OsRng);
    Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map(|h| h.to_string())
        .unwrap_or_default()
}

fn verify_blocking(password: &str, hash: &str) -> bool {
    match PasswordHash::new(hash) {
        Ok(parsed) => Argon2::default().verify_password(password.as_bytes(), &parsed).is_ok(),
        Err(_) => false,
    }
}

pub async fn hash(password: String) -> anyhow::Result<String> {
    let hashed = tokio::task::spawn_blocking(move || hash_blocking(&password)).await?;
    anyhow::ensure!(!hashed.is_empty(), "hashing the password failed");
    Ok(hashed)
}

/// Verifies `password` against `hash`, or against the dummy hash when there is no user.
pub async fn verify(password: String, hash: Option<String>) -> anyhow::Result<bool> {
    Ok(tokio::task::spawn_blocking(move || match hash {
        Some(h) => verify_blocking(&password, &h),
        None => {
            verify_blocking(&password, &DUMMY_HASH);
            false
        }
    })
    .await?)
}

/// Warms the dummy hash at start so the first unknown-user login is not faster than the rest.
pub fn warm_up() {
    tokio::task::spawn_blocking(|| LazyLock::force(&DUMMY_HASH));
}

pub const MIN_PASSWORD_LEN: usize = 12;
/// Argon2 hashes any length, but a megabyte-long "password" is only a way to burn CPU.
pub const MAX_PASSWORD_LEN: usize = 256;
