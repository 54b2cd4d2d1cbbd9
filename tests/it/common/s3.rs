//! A real S3-protocol server for the object-store tests: moto's server (Python, `moto[server]`).
//!
//! With `RENTCHECK_TEST_S3_ENDPOINT` set the tests use that server; otherwise the first test that
//! needs S3 starts moto itself (once per test process, on a free port, stopped when the test
//! process exits) with the Python of [`python`]: `RENTCHECK_TEST_PYTHON`, else the virtual
//! environment `scripts/test.sh` installs moto into, else `python3`. When none works the test
//! fails and says how to install it: the S3 path is never skipped.
//!
//! moto checks SigV4 signatures and IAM policies once its "no authentication" window is spent, so
//! the set-up opens a window of exactly [`SETUP_ACTIONS`] unsigned actions, creates a bucket, a
//! `rentcheck` user whose only rights are `docs/evidence-bucket-policy.json` (the least-privilege
//! policy the operations guide tells people to use) and an admin user that tests use to look into
//! the bucket. Every later request must be signed with one of those keys.

use std::{
    io::Read,
    net::{TcpListener, TcpStream},
    process::{Child, Command, Stdio},
    sync::{Arc, Mutex, OnceLock},
    time::{Duration, Instant},
};

use object_store::{prefix::PrefixStore, ObjectStore};
use rentcheck::evidence_store::EvidenceStore;

const INSTALL: &str = "scripts/test.sh installs it in a virtual environment; or point RENTCHECK_TEST_PYTHON \
                       at a Python that has `moto[server]==5.2.1`";

/// The Python that runs moto: `RENTCHECK_TEST_PYTHON`, else the virtual environment of
/// `scripts/test.sh` (`RENTCHECK_TEST_VENV`, default `$XDG_CACHE_HOME/rentcheck/test-venv`, or
/// `~/.cache/…`) when it exists, else `python3` from `PATH`.
fn python() -> std::path::PathBuf {
    if let Some(given) = std::env::var_os("RENTCHECK_TEST_PYTHON").filter(|v| !v.is_empty()) {
        return given.into();
    }
    let venv = std::env::var_os("RENTCHECK_TEST_VENV")
        .filter(|v| !v.is_empty())
        .map(std::path::PathBuf::from)
        .or_else(|| {
            let cache = std::env::var_os("XDG_CACHE_HOME")
                .filter(|v| !v.is_empty())
                .map(std::path::PathBuf::from)
                .or_else(|| std::env::var_os("HOME").map(|h| std::path::PathBuf::from(h).join(".cache")))?;
            Some(cache.join("rentcheck/test-venv"))
        });
    match venv.map(|v| v.join("bin/python3")) {
        Some(python) if python.exists() => python,
        _ => "python3".into(),
    }
}

/// The unsigned requests the set-up makes: two users, each with a policy and a key, and the bucket.
const SETUP_ACTIONS: u32 = 7;

pub struct S3Server {
    pub endpoint: String,
    pub bucket: String,
    /// rentcheck's key: only the actions of the documented bucket policy.
    rentcheck: (String, String),
    /// A key allowed everything, for looking into and tampering with the bucket.
    admin: (String, String),
}

/// The S3 server of this test process, set up on first use.
pub fn server() -> &'static S3Server {
    static SERVER: OnceLock<S3Server> = OnceLock::new();
    // The set-up runs on a thread and runtime of its own: the first caller's test runtime may end
    // before other tests use the server.
    SERVER.get_or_init(|| {
        std::thread::spawn(|| {
            let endpoint = std::env::var("RENTCHECK_TEST_S3_ENDPOINT")
                .ok()
                .filter(|e| !e.is_empty())
                .unwrap_or_else(start_moto);
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap()
                .block_on(set_up(endpoint))
        })
        .join()
        .expect("setting up the test S3 server")
    })
}

/// The moto process this test process started, if any; its stdin is a pipe whose closing (this
/// process exiting, whatever way) tells it to exit.
static MOTO: Mutex<Option<Child>> = Mutex::new(None);

fn start_moto() -> String {
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let log = std::env::temp_dir().join(format!("rentcheck-test-moto-{}.log", std::process::id()));
    let script = "import os, sys, threading\n\
                  def watch():\n    sys.stdin.read()\n    os._exit(0)\n\
                  threading.Thread(target=watch, daemon=True).start()\n\
                  from moto.server import main\n\
                  main(['-H', '127.0.0.1', '-p', sys.argv[1]])\n";
    let python = python();
    let mut child = Command::new(&python)
        .args(["-c", script, &port.to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap_or_else(|e| {
            panic!(
                "the S3 tests need moto's server ({INSTALL}), or RENTCHECK_TEST_S3_ENDPOINT; {}: {e}",
                python.display()
            )
        });
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if TcpStream::connect(("127.0.0.1", port)).is_ok() {
            break;
        }
        if let Some(status) = child.try_wait().unwrap() {
            let mut output = String::new();
            let _ = std::fs::File::open(&log).and_then(|mut f| f.read_to_string(&mut output));
            panic!(
                "the S3 tests need moto's server: {INSTALL} (or point RENTCHECK_TEST_S3_ENDPOINT at a \
                 running one). {} running moto.server exited {status}:\n{output}",
                python.display()
            );
        }
        assert!(
            Instant::now() < deadline,
            "moto's server did not answer on port {port} within 30 s (log: {})",
            log.display()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // It answers: its start-up log has nothing more to say, and a test run leaves no file behind
    // (moto keeps writing to the unlinked file until it exits).
    let _ = std::fs::remove_file(&log);
    *MOTO.lock().unwrap() = Some(child);
    format!("http://127.0.0.1:{port}")
}

/// An unsigned request that moto routes to IAM (it reads the service from the credential scope).
const IAM_SCOPE: &str =
    "AWS4-HMAC-SHA256 Credential=setup/20260101/us-east-1/iam/aws4_request, SignedHeaders=host, Signature=0";

async fn iam(client: &reqwest::Client, endpoint: &str, form: &[(&str, &str)]) -> String {
    let response = client
        .post(format!("{endpoint}/"))
        .header("authorization", IAM_SCOPE)
        .form(&[form, &[("Version", "2010-05-08")]].concat())
        .send()
        .await
        .unwrap();
    let status = response.status();
    let body = response.text().await.unwrap();
    assert!(status.is_success(), "moto IAM {form:?} answered {status}: {body}");
    body
}

fn xml_field(body: &str, field: &str) -> String {
    let start = body.find(&format!("<{field}>")).expect(field) + field.len() + 2;
    let end = body[start..].find(&format!("</{field}>")).expect(field);
    body[start..start + end].to_owned()
}

async fn user_with_policy(client: &reqwest::Client, endpoint: &str, name: &str, policy: &str) -> (String, String) {
    iam(client, endpoint, &[("Action", "CreateUser"), ("UserName", name)]).await;
    iam(
        client,
        endpoint,
        &[
            ("Action", "PutUserPolicy"),
            ("UserName", name),
            ("PolicyName", "evidence"),
            ("PolicyDocument", policy),
        ],
    )
    .await;
    let key = iam(client, endpoint, &[("Action", "CreateAccessKey"), ("UserName", name)]).await;
    (xml_field(&key, "AccessKeyId"), xml_field(&key, "SecretAccessKey"))
}

async fn set_up(endpoint: String) -> S3Server {
    let client = reqwest::Client::new();
    let reset = client
        .post(format!("{endpoint}/moto-api/reset-auth"))
        .header("content-type", "text/plain")
        .body(SETUP_ACTIONS.to_string())
        .send()
        .await
        .unwrap_or_else(|e| {
            panic!("no S3 server answers at {endpoint} ({e}); RENTCHECK_TEST_S3_ENDPOINT must name a moto server")
        });
    assert!(
        reset.status().is_success(),
        "{endpoint} is not a moto server (POST /moto-api/reset-auth answered {})",
        reset.status()
    );
    // Names of this process's own, so a long-lived server can be shared by several test runs.
    let run = &uuid::Uuid::new_v4().simple().to_string()[..12];
    let bucket = format!("rentcheck-test-{run}");
    let policy = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/evidence-bucket-policy.json"))
        .unwrap()
        .replace("EVIDENCE-BUCKET", &bucket);
    let rentcheck = user_with_policy(&client, &endpoint, &format!("rentcheck-{run}"), &policy).await;
    let everything = r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"*","Resource":"*"}]}"#;
    let admin = user_with_policy(&client, &endpoint, &format!("admin-{run}"), everything).await;
    let created = client.put(format!("{endpoint}/{bucket}")).send().await.unwrap();
    assert!(
        created.status().is_success(),
        "creating bucket {bucket}: {}",
        created.status()
    );
    S3Server {
        endpoint,
        bucket,
        rentcheck,
        admin,
    }
}

impl S3Server {
    /// The `AWS_*` settings a deployment would give rentcheck for this server.
    pub fn vars(&self, access_key: &str, secret: &str) -> Vec<(String, String)> {
        [
            ("AWS_ENDPOINT", self.endpoint.as_str()),
            ("AWS_ALLOW_HTTP", "true"),
            ("AWS_REGION", "us-east-1"),
            ("AWS_ACCESS_KEY_ID", access_key),
            ("AWS_SECRET_ACCESS_KEY", secret),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
    }

    /// rentcheck's store under `prefix` in the bucket, with rentcheck's least-privilege key.
    pub fn store(&self, prefix: &str) -> EvidenceStore {
        let (key, secret) = &self.rentcheck;
        EvidenceStore::from_setting_and_vars(Some(&self.setting(prefix)), self.vars(key, secret)).unwrap()
    }

    /// The same store with a key the server does not know.
    pub fn store_with_wrong_secret(&self, prefix: &str) -> EvidenceStore {
        let (key, _) = &self.rentcheck;
        EvidenceStore::from_setting_and_vars(Some(&self.setting(prefix)), self.vars(key, "not-the-secret")).unwrap()
    }

    /// The `AWS_*` settings with the admin key, allowed every action on every bucket.
    pub fn admin_vars(&self) -> Vec<(String, String)> {
        let (key, secret) = &self.admin;
        self.vars(key, secret)
    }

    pub fn setting(&self, prefix: &str) -> String {
        format!("s3://{}/{prefix}", self.bucket)
    }

    /// The bucket under `prefix`, seen with the admin key.
    pub fn admin_view(&self, prefix: &str) -> Arc<dyn ObjectStore> {
        Arc::new(PrefixStore::new(self.admin_bucket(), prefix))
    }

    fn admin_bucket(&self) -> object_store::aws::AmazonS3 {
        let (key, secret) = &self.admin;
        rentcheck::evidence_store::install_tls_crypto();
        let mut builder = object_store::aws::AmazonS3Builder::new().with_bucket_name(&self.bucket);
        for (k, v) in self.vars(key, secret) {
            builder = builder.with_config(k.to_ascii_lowercase().parse().unwrap(), v);
        }
        builder.build().unwrap()
    }

    /// The names of the objects under `prefix`, without it, sorted. The whole bucket is listed and
    /// filtered here: moto 5.2 rejects the signature of a list request whose query has a `/` in a
    /// value (`prefix=a/b/`, `delimiter=/`), boto3's as much as object_store's.
    pub async fn object_names(&self, prefix: &str) -> Vec<String> {
        let bucket = self.admin_bucket();
        let mut listing = bucket.list(None);
        let mut names = Vec::new();
        while let Some(meta) = std::future::poll_fn(|cx| listing.as_mut().poll_next(cx)).await {
            let location = meta.unwrap().location.to_string();
            if let Some(name) = location.strip_prefix(&format!("{prefix}/")) {
                names.push(name.to_owned());
            }
        }
        names.sort();
        names
    }
}
