//! Headless Chromium driven over WebDriver (chromedriver), for tests that look at pages as a person does.

use std::{
    net::{TcpListener, TcpStream},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use fantoccini::{Client, ClientBuilder, Locator};
use hyper_util::client::legacy::connect::HttpConnector;
use serde_json::json;

pub struct Browser {
    pub client: Client,
    driver: Child,
    _profile: tempfile::TempDir,
}

/// A program named by the environment variable `var`, else the first of `names` on `PATH`.
/// `scripts/test.sh` installs Debian's `chromium` and `chromium-driver`; elsewhere set `CHROME`
/// and `CHROMEDRIVER` to the browser and its matching driver.
fn find_program(var: &str, names: &[&str]) -> std::path::PathBuf {
    if let Some(given) = std::env::var_os(var).filter(|v| !v.is_empty()) {
        let given = std::path::PathBuf::from(given);
        assert!(given.is_file(), "{var}={} is not a file", given.display());
        return given;
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    for name in names {
        for dir in std::env::split_paths(&path) {
            let candidate = dir.join(name);
            if candidate.is_file() {
                return candidate;
            }
        }
    }
    panic!(
        "the browser tests need {} on PATH (or {var}=/path/to/it); scripts/test.sh installs it",
        names.join(" or ")
    );
}

/// Starts chromedriver on a free port and opens a fresh headless Chromium session.
pub async fn launch() -> Browser {
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let driver = Command::new(find_program("CHROMEDRIVER", &["chromedriver"]))
        .arg(format!("--port={port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("starting chromedriver");
    // chromedriver is another process: wait until its port accepts connections.
    let deadline = Instant::now() + Duration::from_secs(30);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "chromedriver did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    let profile = tempfile::tempdir().unwrap();
    let caps = json!({
        "goog:chromeOptions": {
            "binary": find_program("CHROME", &["chromium", "chromium-browser", "google-chrome"]),
            "args": [
                "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--disable-quic", "--window-size=1280,2400",
                // Overlay scrollbars, as on phones: the page is as wide as the window.
                "--hide-scrollbars",
                format!("--user-data-dir={}", profile.path().display()),
            ]
        }
    });
    let serde_json::Value::Object(caps) = caps else {
        unreachable!()
    };
    let client = ClientBuilder::new(HttpConnector::new())
        .capabilities(caps)
        .connect(&format!("http://127.0.0.1:{port}"))
        .await
        .expect("opening a WebDriver session");
    Browser {
        client,
        driver,
        _profile: profile,
    }
}

impl Browser {
    /// Finds an element, waiting (up to 30 s) for it: after a click the next page may still be loading.
    async fn find(&self, locator: Locator<'_>) -> Result<fantoccini::elements::Element, fantoccini::error::CmdError> {
        self.client.wait().for_element(locator).await
    }

    /// Puts `value` in the field named `name` as a paste does: the field's value is replaced and
    /// its `input` and `change` events fire (the review's live figures follow them). Typing it a key
    /// at a time cost a quarter of the browser tests' CPU (some 300 key events for a sign-in and a
    /// form), and no test here checks keystrokes; where one does, it sends keys itself.
    pub async fn fill(&self, name: &str, value: &str) {
        let input = self.find(Locator::Css(&format!("[name='{name}']"))).await.unwrap();
        self.client
            .execute(
                "arguments[0].value = arguments[1]; \
                 arguments[0].dispatchEvent(new Event('input', { bubbles: true })); \
                 arguments[0].dispatchEvent(new Event('change', { bubbles: true }));",
                vec![serde_json::to_value(&input).unwrap(), json!(value)],
            )
            .await
            .unwrap();
    }

    pub async fn select(&self, name: &str, value: &str) {
        let select = self
            .find(Locator::Css(&format!("select[name='{name}']")))
            .await
            .unwrap();
        select.select_by_value(value).await.unwrap();
    }

    /// Clicks a link or submit button and waits (up to 10 s) until the page it was on is replaced,
    /// so the next lookup sees the new page rather than the old one.
    pub async fn click(&self, css: &str) {
        let element = self.find(Locator::Css(css)).await.unwrap();
        element.clone().click().await.unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while element.tag_name().await.is_ok() && std::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    pub async fn text(&self, css: &str) -> String {
        self.find(Locator::Css(css)).await.unwrap().text().await.unwrap()
    }

    pub async fn value(&self, name: &str) -> String {
        let input = self.find(Locator::Css(&format!("[name='{name}']"))).await.unwrap();
        input.prop("value").await.unwrap().unwrap_or_default()
    }

    pub async fn path(&self) -> String {
        self.client.current_url().await.unwrap().path().to_owned()
    }

    /// Saves a full-window PNG as `<RENTCHECK_SCREENSHOT_DIR>/<name>.png` when that variable is set
    /// (for looking at pages while developing); does nothing otherwise.
    pub async fn shot(&self, name: &str) {
        if let Ok(dir) = std::env::var("RENTCHECK_SCREENSHOT_DIR") {
            let png = self.client.screenshot().await.unwrap();
            std::fs::write(std::path::Path::new(&dir).join(format!("{name}.png")), png).unwrap();
        }
    }

    /// Signs in through the login form.
    pub async fn login(&self, base: &str, email: &str, password: &str) {
        self.client.goto(&format!("{base}/login")).await.unwrap();
        self.fill("email", email).await;
        self.fill("password", password).await;
        self.click("form.stack button[type='submit']").await;
    }

    pub async fn close(mut self) {
        let _ = self.client.clone().close().await;
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}
