//! Where the raw bytes of evidence live. By default in the `evidence.raw` column; with
//! `RENTCHECK_EVIDENCE_STORE` set, in an object store (S3 or S3-compatible with `s3://bucket/prefix`,
//! or a directory with `file:///path`) under `sha256/<hex>`, and the row keeps the object's name.
//! The bytes are written before the row commits, so an acknowledged upload always has its bytes;
//! names are content addresses, so a retried upload rewrites the same object and nothing is ever
//! deleted. The `object_store` crate (Apache Arrow) speaks S3, and the same trait serves a directory.

use std::{ops::Range, sync::Arc, time::Duration};

use bytes::Bytes;
use object_store::{
    aws::{AmazonS3Builder, AmazonS3ConfigKey},
    local::LocalFileSystem,
    path::Path,
    BackoffConfig, ClientConfigKey, ObjectStore, ObjectStoreExt, PutPayload, RetryConfig, WriteMultipart,
};

use crate::error::AppError;

/// Uploads larger than this go to the store as a multipart upload: a failed part is retried alone
/// instead of the whole body, and S3 never needs one request of the full size.
pub const MULTIPART_THRESHOLD: usize = 8 * 1024 * 1024;
/// The size of each part but the last: S3's smallest allowed part (and object_store's default).
pub const PART_SIZE: usize = 5 * 1024 * 1024;

#[derive(Debug, Clone, Default)]
pub enum EvidenceStore {
    /// In the evidence row (bytea).
    #[default]
    Database,
    /// In an object store; `describe` is the setting with no secrets in it, for logs.
    Objects {
        store: Arc<dyn ObjectStore>,
        describe: String,
    },
}

/// The raw bytes as a row holds them: the bytes, or the name of their object.
pub enum StoredRaw {
    Inline(Vec<u8>),
    Object(String),
}

impl EvidenceStore {
    /// `None` or empty: the database. `s3://bucket[/prefix]` takes credentials, region and endpoint
    /// (for S3-compatible stores: `AWS_ENDPOINT`, `AWS_ALLOW_HTTP`) from the standard `AWS_*`
    /// variables; `file:///absolute/dir` is a directory, created when missing.
    pub fn from_setting(setting: Option<&str>) -> anyhow::Result<Self> {
        Self::from_setting_and_vars(setting, std::env::vars())
    }

    /// [`Self::from_setting`] with the `AWS_*` settings taken from `vars` instead of the
    /// environment (tests run several stores with different endpoints and keys in one process).
    pub fn from_setting_and_vars(
        setting: Option<&str>,
        vars: impl IntoIterator<Item = (String, String)>,
    ) -> anyhow::Result<Self> {
        let Some(url) = setting.map(str::trim).filter(|s| !s.is_empty()) else {
            return Ok(EvidenceStore::Database);
        };
        let store: Arc<dyn ObjectStore> = if let Some(rest) = url.strip_prefix("s3://") {
            let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
            anyhow::ensure!(!bucket.is_empty(), "RENTCHECK_EVIDENCE_STORE: no bucket in {url:?}");
            let s3 = s3_builder(vars).with_bucket_name(bucket).build()?;
            with_prefix(Arc::new(s3), prefix)
        } else if let Some(dir) = url.strip_prefix("file://") {
            anyhow::ensure!(
                dir.starts_with('/'),
                "RENTCHECK_EVIDENCE_STORE: a file:// store needs an absolute path, got {url:?}"
            );
            std::fs::create_dir_all(dir)?;
            // Objects are written with the process's umask; a private directory keeps them
            // private whatever it is (evidence may hold hostnames, serials, prompts).
            {
                use std::os::unix::fs::PermissionsExt;
                let mode = std::fs::metadata(dir)?.permissions().mode() & 0o777;
                if mode & 0o077 != 0 {
                    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode & 0o700))?;
                    tracing::warn!(
                        dir,
                        "the evidence store was readable by others ({mode:04o}); it is now {:04o}",
                        mode & 0o700
                    );
                }
            }
            Arc::new(LocalFileSystem::new_with_prefix(dir)?)
        } else {
            anyhow::bail!("RENTCHECK_EVIDENCE_STORE must be s3://bucket/prefix or file:///dir, got {url:?}");
        };
        Ok(EvidenceStore::Objects {
            store,
            describe: url.to_owned(),
        })
    }

    pub fn describe(&self) -> &str {
        match self {
            EvidenceStore::Database => "the database",
            EvidenceStore::Objects { describe, .. } => describe,
        }
    }

    /// Keeps `bytes` in the object store, when there is one, and returns the object's name for the
    /// row; `None`: the row keeps the bytes itself. Above [`MULTIPART_THRESHOLD`] the bytes go up
    /// in parts; every part is a slice of `bytes` (no copy), so the body is in memory once.
    pub async fn put(&self, sha256: &str, bytes: &Bytes) -> Result<Option<String>, AppError> {
        let EvidenceStore::Objects { store, .. } = self else {
            return Ok(None);
        };
        let name = format!("sha256/{sha256}");
        let path = Path::from(name.as_str());
        if bytes.len() > MULTIPART_THRESHOLD {
            let upload = store
                .put_multipart(&path)
                .await
                .map_err(|e| store_error(e, Op::Write))?;
            let mut parts = WriteMultipart::new_with_chunk_size(upload, PART_SIZE);
            parts.put(bytes.clone());
            // `finish` aborts the upload when a part fails, so no orphaned parts are left behind.
            parts.finish().await.map_err(|e| store_error(e, Op::Write))?;
        } else {
            store
                .put(&path, PutPayload::from_bytes(bytes.clone()))
                .await
                .map_err(|e| store_error(e, Op::Write))?;
        }
        Ok(Some(name))
    }

    /// Proves at start-up that the store takes rentcheck's credentials: writes the empty object
    /// under its own content address (the name an empty upload would get, so nothing foreign is
    /// left in the bucket) and reads it back, with exactly the rights uploads and downloads use.
    /// A refusal or a missing bucket is an error to stop on; a store that does not answer is only
    /// a warning (uploads answer 503 until it does).
    pub async fn check(&self) -> anyhow::Result<()> {
        let EvidenceStore::Objects { store, describe } = self else {
            return Ok(());
        };
        let empty = Path::from(format!("sha256/{}", EMPTY_SHA256));
        let probe = async {
            store.put(&empty, PutPayload::default()).await?;
            store.get(&empty).await?.bytes().await?;
            Ok::<_, object_store::Error>(())
        };
        match probe.await {
            Ok(()) => Ok(()),
            Err(e @ (object_store::Error::PermissionDenied { .. } | object_store::Error::Unauthenticated { .. })) => {
                anyhow::bail!(
                    "the evidence store {describe} refused rentcheck's credentials: check AWS_ACCESS_KEY_ID, \
                     AWS_SECRET_ACCESS_KEY and that the bucket policy allows s3:PutObject and s3:GetObject ({e})"
                )
            }
            Err(e @ object_store::Error::NotFound { .. }) => {
                anyhow::bail!("the evidence store {describe} has no such bucket: create it first ({e})")
            }
            Err(e) => {
                tracing::warn!(store = %describe, error = %e, "the evidence store does not answer yet; uploads answer 503 until it does");
                Ok(())
            }
        }
    }

    /// All the bytes.
    pub async fn load(&self, stored: StoredRaw) -> Result<Vec<u8>, AppError> {
        match stored {
            StoredRaw::Inline(bytes) => Ok(bytes),
            StoredRaw::Object(name) => {
                let store = self.object_store(&name)?;
                let result = store
                    .get(&Path::from(name.as_str()))
                    .await
                    .map_err(|e| store_error(e, Op::Read))?;
                Ok(result.bytes().await.map_err(|e| store_error(e, Op::Read))?.to_vec())
            }
        }
    }

    /// The bytes in `range` (the caller keeps it within the stored size), for a page's preview.
    pub async fn load_range(&self, stored: StoredRaw, range: Range<u64>) -> Result<Vec<u8>, AppError> {
        match stored {
            StoredRaw::Inline(bytes) => Ok(bytes),
            StoredRaw::Object(_) if range.is_empty() => Ok(Vec::new()),
            StoredRaw::Object(name) => {
                let store = self.object_store(&name)?;
                let bytes = store
                    .get_range(&Path::from(name.as_str()), range)
                    .await
                    .map_err(|e| store_error(e, Op::Read))?;
                Ok(bytes.to_vec())
            }
        }
    }

    fn object_store(&self, name: &str) -> Result<&Arc<dyn ObjectStore>, AppError> {
        match self {
            EvidenceStore::Objects { store, .. } => Ok(store),
            EvidenceStore::Database => Err(AppError::Internal(anyhow::anyhow!(
                "evidence bytes are in object {name} but RENTCHECK_EVIDENCE_STORE is not set"
            ))),
        }
    }
}

/// A prefix inside the bucket, so one bucket can serve several installations.
fn with_prefix(store: Arc<dyn ObjectStore>, prefix: &str) -> Arc<dyn ObjectStore> {
    let prefix = prefix.trim_matches('/');
    if prefix.is_empty() {
        store
    } else {
        Arc::new(object_store::prefix::PrefixStore::new(store, prefix))
    }
}

/// Makes ring the process's rustls crypto provider, once. object_store's reqwest is built with
/// rustls but no bundled provider (Cargo.toml says why) and refuses to build a client without one.
/// Public for tests that build S3 clients of their own.
pub fn install_tls_crypto() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // Err only when a provider is already installed, which is as good.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// sha256 of no bytes: the name of the empty object `check` writes.
const EMPTY_SHA256: &str = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

/// An S3 client configured from `AWS_*` pairs as `AmazonS3Builder::from_env` reads them, with
/// rentcheck's own bounds on retries first (the pairs may override them): the default retries for
/// three minutes, far past the request timeout, so a store that is down would answer nothing.
fn s3_builder(vars: impl IntoIterator<Item = (String, String)>) -> AmazonS3Builder {
    install_tls_crypto();
    let retry = RetryConfig {
        backoff: BackoffConfig::default(),
        max_retries: 3,
        retry_timeout: Duration::from_secs(10),
    };
    let mut builder = AmazonS3Builder::new()
        .with_retry(retry)
        .with_config(AmazonS3ConfigKey::Client(ClientConfigKey::ConnectTimeout), "2s");
    for (key, value) in vars {
        if key.starts_with("AWS_") {
            if let Ok(config_key) = key.to_ascii_lowercase().parse::<AmazonS3ConfigKey>() {
                builder = builder.with_config(config_key, value);
            }
        }
    }
    builder
}

#[derive(Clone, Copy)]
enum Op {
    Read,
    Write,
}

/// A store that does not answer is a 503 to retry. Two answers are not worth a retry, so they are
/// internal errors, logged with their cause: an object that is gone (the row says it exists, so
/// someone deleted it from the bucket) or a bucket that is gone, and the store refusing
/// rentcheck's credentials (a wrong key or a bucket policy without the action).
fn store_error(e: object_store::Error, op: Op) -> AppError {
    match (&e, op) {
        (object_store::Error::NotFound { path, .. }, Op::Read) => {
            AppError::Internal(anyhow::anyhow!("evidence object {path} is missing from the store"))
        }
        (object_store::Error::NotFound { .. }, Op::Write) => {
            AppError::Internal(anyhow::anyhow!("the evidence store's bucket does not exist: {e}"))
        }
        (object_store::Error::PermissionDenied { .. } | object_store::Error::Unauthenticated { .. }, _) => {
            AppError::Internal(anyhow::anyhow!(
                "the evidence store refused rentcheck's credentials (check the AWS_* keys and the bucket policy): {e}"
            ))
        }
        _ => {
            tracing::warn!(error = %e, "evidence object store unavailable");
            AppError::StorageUnavailable
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_are_checked_at_start() {
        assert!(matches!(
            EvidenceStore::from_setting(None).unwrap(),
            EvidenceStore::Database
        ));
        assert!(matches!(
            EvidenceStore::from_setting(Some("  ")).unwrap(),
            EvidenceStore::Database
        ));
        // Building an S3 client needs no network: the bucket is first contacted on the first upload.
        let s3 = EvidenceStore::from_setting(Some("s3://evidence-bucket/rentcheck/prod")).unwrap();
        assert_eq!(s3.describe(), "s3://evidence-bucket/rentcheck/prod");
        assert!(matches!(s3, EvidenceStore::Objects { .. }));
        for bad in ["ftp://x", "s3://", "file://relative/dir", "/just/a/path"] {
            assert!(EvidenceStore::from_setting(Some(bad)).is_err(), "{bad} must be refused");
        }
    }

    #[test]
    fn a_file_store_directory_is_private_whatever_the_umask() {
        use std::os::unix::fs::PermissionsExt;
        let parent = tempfile::tempdir().unwrap();
        let fresh = parent.path().join("objects");
        let open = parent.path().join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o755)).unwrap();
        for dir in [fresh, open] {
            EvidenceStore::from_setting(Some(&format!("file://{}", dir.display()))).unwrap();
            let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode & 0o077, 0, "{} is {mode:04o}", dir.display());
        }
    }
}
