//! Random tokens from the operating system's generator.

use rand::RngCore;

/// 32 random bytes as 64 lower-case hex characters.
pub fn random_token() -> String {
    let mut bytes = [0u8; 32];
    rand::rngs::OsRng.fill_bytes(&mut bytes);
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Writes a file only its owner can read (mode 0600).
pub fn write_private_file(path: &std::path::Path, contents: &str) -> anyhow::Result<()> {
    use std::{io::Write, os::unix::fs::OpenOptionsExt};
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| anyhow::anyhow!("writing {}: {e}", path.display()))?;
    f.write_all(contents.as_bytes())?;
    Ok(())
}

/// Creates a private file (mode 0600) holding `contents` unless the file exists, and returns what
/// the file holds: two processes that start together agree on one value. The text is written to a
/// temporary file first and hard-linked into place, which fails if the name is taken, so nobody
/// ever reads a half-written file.
pub fn create_private_file_once(path: &std::path::Path, contents: &str) -> anyhow::Result<String> {
    let temporary = path.with_extension(format!("tmp.{}", std::process::id()));
    write_private_file(&temporary, contents)?;
    let linked = std::fs::hard_link(&temporary, path);
    let _ = std::fs::remove_file(&temporary);
    match linked {
        Ok(()) => Ok(contents.to_owned()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            std::fs::read_to_string(path).map_err(|e| anyhow::anyhow!("reading {}: {e}", path.display()))
        }
        Err(e) => Err(anyhow::anyhow!("writing {}: {e}", path.display())),
    }
}

/// SHA-256 of a secret, for storing lookup keys instead of the secret itself.
pub fn sha256(data: &[u8]) -> Vec<u8> {
    use sha2::Digest;
    sha2::Sha256::digest(data).to_vec()
}

/// Compares two secrets in constant time.
pub fn equal(a: &str, b: &str) -> bool {
    use subtle::ConstantTimeEq;
    a.len() == b.len() && bool::from(a.as_bytes().ct_eq(b.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_private_file_created_once_keeps_the_first_value() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("jwt-secret");
        assert_eq!(create_private_file_once(&path, "first").unwrap(), "first");
        assert_eq!(create_private_file_once(&path, "second").unwrap(), "first");
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            1,
            "no temporary file is left"
        );
    }
}
