//! Random tokens from the operating system's generator.

use rand::RngCore;

/// 32 random bytes as 64 lower-case hex characters.
pub fn random_token() -> String {
    let mut bytes = [0u8; 32];
    rand::rngs::OsRng.fill_bytes(&mut bytes);
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
