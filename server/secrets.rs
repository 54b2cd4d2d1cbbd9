//! Secrets: random tokens from the operating system's generator, the `Secret` wrapper that keeps
//! settings out of logs, the token signing keys and the helpers that keep them private.

use std::{fmt, path::Path};

use jsonwebtoken::{DecodingKey, EncodingKey};
use rand::RngCore;

/// 32 random bytes as 64 lower-case hex characters.
pub fn random_token() -> String {
    let mut bytes = [0u8; 32];
    rand::rngs::OsRng.fill_bytes(&mut bytes);
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Writes a file only its owner can read (mode 0600, whatever the umask, and also when the file
/// was there before with a looser mode).
pub fn write_private_file(path: &Path, contents: &str) -> anyhow::Result<()> {
    use std::{
        io::Write,
        os::unix::fs::{OpenOptionsExt, PermissionsExt},
    };
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| anyhow::anyhow!("writing {}: {e}", path.display()))?;
    f.set_permissions(std::fs::Permissions::from_mode(0o600))
        .map_err(|e| anyhow::anyhow!("chmod 600 {}: {e}", path.display()))?;
    f.write_all(contents.as_bytes())?;
    Ok(())
}

/// The user this process runs as (the owner of `/proc/self`), when it can be told.
pub fn current_uid() -> Option<u32> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self").ok().map(|m| m.uid())
}

/// Refuses a secret file or the data dir that another user owns: they could read or replace
/// what is in it whatever its mode.
fn check_owner(path: &Path, meta: &std::fs::Metadata) -> std::io::Result<()> {
    use std::os::unix::fs::MetadataExt;
    match current_uid() {
        Some(me) if meta.uid() != me => Err(std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            format!(
                "{} belongs to user id {}, not to the user rentcheck runs as (id {me}): another user could read \
                 or replace it; `chown` it to this user",
                path.display(),
                meta.uid()
            ),
        )),
        _ => Ok(()),
    }
}

/// Makes the data dir if it is missing, private to this user (0700, whatever the umask; parents
/// are made as usual), and refuses one another user owns. An existing one with looser permissions
/// is tightened: it holds the signing secret, the cluster's password and the cluster itself.
/// Run as root it is 0711 instead: the private cluster then runs as `postgres`, which must pass
/// through it to its own directory (it can list and read nothing in it).
pub fn private_dir(path: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    let wanted = if current_uid() == Some(0) { 0o711 } else { 0o700 };
    if !path.exists() {
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(|e| anyhow::anyhow!("creating {}: {e}", parent.display()))?;
        }
        match std::fs::DirBuilder::new().mode(0o700).create(path) {
            Ok(()) => {}
            // Two commands starting at once: the other made it.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(anyhow::anyhow!("creating data dir {}: {e}", path.display())),
        }
    }
    let meta = std::fs::metadata(path).map_err(|e| anyhow::anyhow!("data dir {}: {e}", path.display()))?;
    anyhow::ensure!(meta.is_dir(), "the data dir {} is not a directory", path.display());
    check_owner(path, &meta).map_err(|e| anyhow::anyhow!("data dir: {e}"))?;
    let mode = meta.permissions().mode() & 0o777;
    if mode != wanted {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(wanted))
            .map_err(|e| anyhow::anyhow!("chmod {wanted:o} {}: {e}", path.display()))?;
        if mode & !wanted != 0 {
            tracing::warn!(dir = %path.display(), "the data dir was mode {mode:04o}; made it {wanted:04o}");
        }
    }
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
            read_private_file(path).map_err(|e| anyhow::anyhow!("reading {}: {e}", path.display()))
        }
        Err(e) => Err(anyhow::anyhow!("writing {}: {e}", path.display())),
    }
}

/// Reads a file holding a secret, refusing one that others on the machine can read or write, or
/// that another user owns: a secret others could have read or replaced is no longer one (and
/// using it silently hides that).
pub fn read_private_file(path: &Path) -> std::io::Result<String> {
    use std::os::unix::fs::PermissionsExt;
    let meta = std::fs::metadata(path)?;
    check_owner(path, &meta)?;
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            format!(
                "{} has mode {mode:04o}, so other users of this machine may read it; \
                 run `chmod 600 {}` and, if anyone else could have read it, replace the secret",
                path.display(),
                path.display()
            ),
        ));
    }
    std::fs::read_to_string(path)
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

/// A secret string whose `Debug` and `Display` never reveal it, so it cannot leak into logs.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(***)")
    }
}

impl std::str::FromStr for Secret {
    type Err = std::convert::Infallible;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(Self(s.to_owned()))
    }
}

/// The HS256 signing key.
#[derive(Clone)]
pub struct TokenKeys {
    pub(crate) encoding: EncodingKey,
    pub(crate) decoding: DecodingKey,
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

    /// `RENTCHECK_JWT_SECRET` when given; else the file `RENTCHECK_JWT_SECRET_FILE` names;
    /// otherwise the secret kept in `<data dir>/jwt-secret` (mode 0600), generated on first start.
    /// A secret file others may read is refused.
    pub fn load(configured: Option<&Secret>, file: Option<&Path>, data_dir: &Path) -> anyhow::Result<Self> {
        if let Some(secret) = configured {
            anyhow::ensure!(
                secret.expose().len() >= MIN_SECRET_LEN,
                "RENTCHECK_JWT_SECRET must be at least {MIN_SECRET_LEN} characters"
            );
            return Ok(Self::from_secret(secret.expose().as_bytes()));
        }
        if let Some(file) = file {
            let secret = read_private_file(file)
                .map_err(|e| anyhow::anyhow!("RENTCHECK_JWT_SECRET_FILE: {}: {e}", file.display()))?;
            let secret = secret.trim();
            anyhow::ensure!(
                secret.len() >= MIN_SECRET_LEN,
                "{} must hold at least {MIN_SECRET_LEN} characters",
                file.display()
            );
            return Ok(Self::from_secret(secret.as_bytes()));
        }
        private_dir(data_dir)?;
        let path = data_dir.join("jwt-secret");
        let secret = match read_private_file(&path) {
            Ok(s) => s.trim().to_owned(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                // Created once: two first starts must not each keep a different secret.
                let s = create_private_file_once(&path, &random_token())?;
                tracing::info!(path = %path.display(), "generated a token signing secret");
                s.trim().to_owned()
            }
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => return Err(anyhow::anyhow!("{e}")),
            Err(e) => return Err(anyhow::Error::new(e).context(format!("reading {}", path.display()))),
        };
        anyhow::ensure!(secret.len() >= MIN_SECRET_LEN, "{} is too short", path.display());
        Ok(Self::from_secret(secret.as_bytes()))
    }
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

    #[test]
    fn a_secret_file_or_data_dir_of_another_user_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("jwt-secret");
        write_private_file(&path, &"x".repeat(64)).unwrap();
        assert!(read_private_file(&path).is_ok());
        // Only root can give a file away; as anyone else, `chown` to another user fails.
        let given_away = std::os::unix::fs::chown(&path, Some(65534), None).is_ok();
        let data = dir.path().join("data");
        std::fs::create_dir(&data).unwrap();
        std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o700)).unwrap();
        if given_away {
            let err = read_private_file(&path).unwrap_err().to_string();
            assert!(err.contains("belongs to user id 65534"), "{err}");
            std::os::unix::fs::chown(&data, Some(65534), None).unwrap();
            let err = private_dir(&data).unwrap_err().to_string();
            assert!(err.contains("belongs to user id 65534"), "{err}");
        } else {
            assert_ne!(current_uid(), Some(0), "root gives files away");
        }
    }

    #[test]
    fn a_data_dir_is_made_and_kept_private() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("a/b/rentcheck");
        private_dir(&data).unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        // Root's private cluster runs as `postgres`, which must pass through (but not read) it.
        let private = if current_uid() == Some(0) { 0o711 } else { 0o700 };
        assert_eq!(mode(&data), private);
        std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o777)).unwrap();
        private_dir(&data).unwrap();
        assert_eq!(mode(&data), private, "an open one is made private");
        let secret = data.join("pg-password");
        std::fs::write(&secret, "old").unwrap();
        std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o666)).unwrap();
        write_private_file(&secret, "new").unwrap();
        assert_eq!(mode(&secret), 0o600, "rewriting a file makes it private too");
    }

    #[test]
    fn a_secret_file_others_may_read_is_refused_not_used_silently() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("jwt-secret");
        std::fs::write(&path, "x".repeat(64)).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let err = TokenKeys::load(None, None, dir.path()).unwrap_err().to_string();
        assert!(err.contains("mode 0644") && err.contains("chmod 600"), "{err}");
        let err = TokenKeys::load(None, Some(&path), dir.path()).unwrap_err().to_string();
        assert!(err.contains("chmod 600"), "{err}");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert!(TokenKeys::load(None, None, dir.path()).is_ok());
        assert!(TokenKeys::load(None, Some(&path), dir.path()).is_ok());
    }
}
