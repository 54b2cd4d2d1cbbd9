//! Where the raw bytes of evidence live. By default in the `evidence.raw` column; with
//! `RENTCHECK_EVIDENCE_STORE` set, in an object store (S3 or S3-compatible with `s3://bucket/prefix`,
//! or a directory with `file:///path`) under `sha256/<hex>`, and the row keeps the object's name.
//! The bytes are written before the row commits, so an acknowledged upload always has its bytes;
//! names are content addresses, so a retried upload rewrites the same object and nothing is ever
//! deleted. The `object_store` crate (Apache Arrow) speaks S3, and the same trait serves a directory.

use std::{ops::Range, sync::Arc};

use bytes::Bytes;
use object_store::{aws::AmazonS3Builder, local::LocalFileSystem, path::Path, ObjectStore, ObjectStoreExt, PutPayload};

use crate::error::AppError;

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
        let Some(url) = setting.map(str::trim).filter(|s| !s.is_empty()) else {
            return Ok(EvidenceStore::Database);
        };
        let store: Arc<dyn ObjectStore> = if let Some(rest) = url.strip_prefix("s3://") {
            let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
            anyhow::ensure!(!bucket.is_empty(), "RENTCHECK_EVIDENCE_STORE: no bucket in {url:?}");
            let s3 = AmazonS3Builder::from_env().with_bucket_name(bucket).build()?;
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
    /// row; `None`: the row keeps the bytes itself.
    pub async fn put(&self, sha256: &str, bytes: &Bytes) -> Result<Option<String>, AppError> {
        let EvidenceStore::Objects { store, .. } = self else {
            return Ok(None);
        };
        let name = format!("sha256/{sha256}");
        store
            .put(&Path::from(name.as_str()), PutPayload::from_bytes(bytes.clone()))
            .await
            .map_err(unavailable)?;
        Ok(Some(name))
    }

    /// All the bytes.
    pub async fn load(&self, stored: StoredRaw) -> Result<Vec<u8>, AppError> {
        match stored {
            StoredRaw::Inline(bytes) => Ok(bytes),
            StoredRaw::Object(name) => {
                let store = self.object_store(&name)?;
                let result = store.get(&Path::from(name.as_str())).await.map_err(unavailable)?;
                Ok(result.bytes().await.map_err(unavailable)?.to_vec())
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
                    .map_err(unavailable)?;
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

/// A store that does not answer is a 503 to retry; an object that is gone is not (the row says it
/// exists, so someone deleted it from the bucket): that is an internal error, logged.
fn unavailable(e: object_store::Error) -> AppError {
    if let object_store::Error::NotFound { path, .. } = &e {
        return AppError::Internal(anyhow::anyhow!("evidence object {path} is missing from the store"));
    }
    tracing::warn!(error = %e, "evidence object store unavailable");
    AppError::StorageUnavailable
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
