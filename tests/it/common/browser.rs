//! Headless Chromium driven over WebDriver (chromedriver), for tests that look at pages as a person does.
//!
//! Starting a Chromium costs about 2 CPU-seconds and a second of waiting, as much as a short journey
//! spends on its pages, so the browsers are kept for the whole run: one chromedriver, and a shelf of
//! Chromiums, each lent to one test at a time. A test gets a WebDriver session of its own, attached
//! to a kept browser (`debuggerAddress`); [`Browser::close`] hands the browser back emptied (no
//! cookies, one blank tab with no history, the window at its first size). A browser whose test did
//! not close it (the test failed) is stopped rather than lent again.

use std::{
    net::{TcpListener, TcpStream},
    path::{Path, PathBuf},
    process::{Child, ChildStdin, Command, Stdio},
    sync::{Mutex, OnceLock},
    time::{Duration, Instant},
};

use fantoccini::{Client, ClientBuilder, Locator};
use hyper_util::client::legacy::connect::HttpConnector;
use serde_json::json;

/// The window every browser is lent with, a laptop's. It was once 2,400 px tall so that pages fit
/// without scrolling, but every frame Chromium paints is the window's size: the browser journeys
/// spent 8 % more CPU at that height (docs/benchmarks.md). WebDriver scrolls to what it clicks, and
/// [`Browser::shot`] captures the whole page.
pub const WINDOW: (u32, u32) = (1280, 800);

pub struct Browser {
    pub client: Client,
    /// The Chromium behind `client`; `None` once handed back.
    kept: Option<KeptChromium>,
}

/// A Chromium started for this run, with the port chromedriver attaches to.
struct KeptChromium {
    debugger_port: u16,
    process: Tethered,
}

/// A program that lives no longer than this test process. It runs under a `sh` that waits on a pipe
/// from us and stops the program when the pipe closes, which the kernel does when this process
/// ends, however it ends: libtest never drops statics, and `unsafe_code` is forbidden here, so
/// `PR_SET_PDEATHSIG` is out of reach. Dropping it stops the program at once.
struct Tethered {
    _shell: Child,
    tether: Option<ChildStdin>,
}

impl Tethered {
    /// Starts `program` with `args`; `cleanup` (a directory) is removed once the program has stopped.
    fn start(program: &Path, args: &[String], cleanup: Option<&Path>) -> Tethered {
        let script = r#"program=$1; cleanup=$2; shift 2
"$program" "$@" </dev/null >/dev/null 2>&1 &
child=$!
read -r _ignored
kill "$child" 2>/dev/null
wait "$child"
[ -n "$cleanup" ] && rm -rf "$cleanup"
exit 0"#;
        let mut shell = Command::new("sh")
            .arg("-c")
            .arg(script)
            .arg("tethered")
            .arg(program)
            .arg(cleanup.map(|p| p.as_os_str()).unwrap_or_default())
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e}", program.display()));
        let tether = shell.stdin.take();
        Tethered { _shell: shell, tether }
    }
}

impl Drop for Tethered {
    fn drop(&mut self) {
        // Closing the pipe is the signal; the shell stops the program and tidies up on its own
        // (it is not waited for: a failed test need not wait for a browser to shut down).
        drop(self.tether.take());
    }
}

/// A program named by the environment variable `var`, else the first of `names` on `PATH`.
/// `scripts/test.sh` installs Debian's `chromium` and `chromium-driver`; elsewhere set `CHROME`
/// and `CHROMEDRIVER` to the browser and its matching driver.
fn find_program(var: &str, names: &[&str]) -> PathBuf {
    if let Some(given) = std::env::var_os(var).filter(|v| !v.is_empty()) {
        let given = PathBuf::from(given);
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

/// Waits (up to 30 s) until `ready` says yes: the programs started here are other processes.
fn wait_until(what: &str, mut ready: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !ready() {
        assert!(Instant::now() < deadline, "{what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The run's one chromedriver (it serves many sessions at once), started on first use.
fn chromedriver_port() -> u16 {
    static DRIVER: OnceLock<(u16, Tethered)> = OnceLock::new();
    DRIVER
        .get_or_init(|| {
            let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
            let driver = Tethered::start(
                &find_program("CHROMEDRIVER", &["chromedriver"]),
                &[format!("--port={port}")],
                None,
            );
            wait_until("chromedriver did not start", || {
                TcpStream::connect(("127.0.0.1", port)).is_ok()
            });
            (port, driver)
        })
        .0
}

/// Where a screenshot named `name` goes: `<RENTCHECK_SCREENSHOT_DIR>/<name>.png`, when that is set.
fn shot_path(name: &str) -> Option<PathBuf> {
    let dir = PathBuf::from(std::env::var_os("RENTCHECK_SCREENSHOT_DIR")?);
    std::fs::create_dir_all(&dir).unwrap();
    Some(dir.join(format!("{name}.png")))
}

/// Browsers handed back and waiting for the next test.
static SHELF: Mutex<Vec<KeptChromium>> = Mutex::new(Vec::new());

/// Starts a headless Chromium with a fresh profile, listening for DevTools on a port of its choosing.
fn start_chromium() -> KeptChromium {
    let profile = tempfile::Builder::new()
        .prefix("rentcheck-browser-")
        .tempdir()
        .unwrap()
        .keep();
    let mut args: Vec<String> = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-quic",
        "--hide-scrollbars", // overlay scrollbars, as on phones: the page is as wide as the window
        // What chromedriver passes to a browser it starts itself, so pages behave as they did then.
        "--allow-pre-commit-input",
        "--disable-background-timer-throttling",
        "--disable-backgrounding-occluded-windows",
        "--disable-client-side-phishing-detection",
        "--disable-default-apps",
        "--disable-features=IgnoreDuplicateNavs,Prewarm",
        "--disable-hang-monitor",
        "--disable-popup-blocking",
        "--disable-prompt-on-repost",
        "--enable-automation",
        "--no-service-autorun",
        "--password-store=basic",
        "--test-type=webdriver",
        "--use-mock-keychain",
        "--remote-debugging-port=0",
    ]
    .map(String::from)
    .to_vec();
    args.push(format!("--window-size={},{}", WINDOW.0, WINDOW.1));
    args.push(format!("--user-data-dir={}", profile.display()));
    args.push("about:blank".into());
    let process = Tethered::start(
        &find_program("CHROME", &["chromium", "chromium-browser", "google-chrome"]),
        &args,
        Some(&profile),
    );
    // Chromium writes the port it chose, then a newline and a path, once it listens.
    let port_file = profile.join("DevToolsActivePort");
    let mut debugger_port = None;
    wait_until("Chromium did not open its DevTools port", || {
        debugger_port = std::fs::read_to_string(&port_file)
            .ok()
            .filter(|text| text.contains('\n'))
            .and_then(|text| text.lines().next()?.parse().ok());
        debugger_port.is_some()
    });
    KeptChromium {
        debugger_port: debugger_port.unwrap(),
        process,
    }
}

/// Lends a headless Chromium (a kept one when one is free) and opens a WebDriver session on it.
pub async fn launch() -> Browser {
    let driver = tokio::task::spawn_blocking(chromedriver_port).await.unwrap();
    // A kept browser that has died since (it crashed) is dropped and the next one tried, down to a
    // new one. Its port refusing a connection says so at once; chromedriver would wait a minute.
    loop {
        let kept = SHELF.lock().unwrap().pop();
        let from_shelf = kept.is_some();
        let kept = match kept {
            Some(kept) if TcpStream::connect(("127.0.0.1", kept.debugger_port)).is_err() => continue,
            Some(kept) => kept,
            None => tokio::task::spawn_blocking(start_chromium).await.unwrap(),
        };
        match attach(driver, kept.debugger_port).await {
            Ok(client) => {
                return Browser {
                    client,
                    kept: Some(kept),
                }
            }
            Err(e) if from_shelf => eprintln!("a kept Chromium would not take a session ({e}); starting another"),
            Err(e) => panic!("opening a WebDriver session: {e}"),
        }
    }
}

/// A WebDriver session on the Chromium listening for DevTools at `debugger_port`.
async fn attach(driver: u16, debugger_port: u16) -> Result<Client, fantoccini::error::NewSessionError> {
    let caps = json!({
        "goog:chromeOptions": { "debuggerAddress": format!("127.0.0.1:{debugger_port}") }
    });
    let serde_json::Value::Object(caps) = caps else {
        unreachable!()
    };
    ClientBuilder::new(HttpConnector::new())
        .capabilities(caps)
        .connect(&format!("http://127.0.0.1:{driver}"))
        .await
}

/// A browser signed in as a new person of `role` on `app` (on a blank tab: the journey opens its
/// first page), and that person's email: how most journeys start.
pub async fn signed_in(app: &super::TestApp, role: rentcheck::auth::Role) -> (Browser, String) {
    let email = app.user(role).await;
    let browser = launch().await;
    browser.sign_in_as(app, &email).await;
    (browser, email)
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

    /// Saves a PNG of the whole page, below the window's edge too, at the window's width as
    /// `<RENTCHECK_SCREENSHOT_DIR>/<name>.png` when that variable is set (for looking at pages while
    /// developing); does nothing otherwise.
    pub async fn shot(&self, name: &str) {
        use base64::Engine as _;
        if let Some(path) = shot_path(name) {
            let shot = self
                .devtools("Page.captureScreenshot", json!({ "captureBeyondViewport": true }))
                .await
                .unwrap();
            let png = base64::engine::general_purpose::STANDARD
                .decode(shot["data"].as_str().unwrap())
                .unwrap();
            std::fs::write(path, png).unwrap();
        }
    }

    /// As [`Browser::shot`], but only what the window shows (a part of a page scrolled to).
    pub async fn shot_window(&self, name: &str) {
        if let Some(path) = shot_path(name) {
            std::fs::write(path, self.client.screenshot().await.unwrap()).unwrap();
        }
    }

    /// Gives the browser a session for `email` on `app`, as the sign-in would set it, without the
    /// form's two pages (see [`super::TestApp::session_for`]); the tab stays where it was.
    pub async fn sign_in_as(&self, app: &super::TestApp, email: &str) {
        let (cookie, _) = app.session_for(email).await;
        let cookie = json!({
            "name": rentcheck::auth::session::COOKIE,
            "value": cookie,
            "url": app.base,
            "path": "/",
            "httpOnly": true,
            "sameSite": "Lax",
        });
        self.devtools("Network.setCookie", cookie).await.unwrap();
    }

    /// Signs in through the login form.
    pub async fn login(&self, base: &str, email: &str, password: &str) {
        self.client.goto(&format!("{base}/login")).await.unwrap();
        self.fill("email", email).await;
        self.fill("password", password).await;
        self.click("form.stack button[type='submit']").await;
    }

    /// Ends the session and puts the browser back on the shelf, emptied for the next test: cookies
    /// cleared (every test's server is on 127.0.0.1, and cookies ignore the port), one fresh blank
    /// tab, the first window size. A browser that will not empty is stopped instead.
    pub async fn close(mut self) {
        let kept = self.kept.take();
        let emptied = self.empty().await.is_ok();
        let _ = self.client.clone().close().await;
        if let (Some(kept), true) = (kept, emptied) {
            SHELF.lock().unwrap().push(kept);
        }
    }

    /// Sends one DevTools command to the session's tab (through chromedriver) and returns its result.
    pub async fn devtools(
        &self,
        command: &str,
        params: serde_json::Value,
    ) -> Result<serde_json::Value, Box<dyn std::error::Error>> {
        let session = self.client.session_id().await?.ok_or("no session")?;
        let answer = reqwest::Client::new()
            .post(format!(
                "http://127.0.0.1:{}/session/{session}/goog/cdp/execute",
                chromedriver_port()
            ))
            .json(&json!({ "cmd": command, "params": params }))
            .send()
            .await?;
        if !answer.status().is_success() {
            return Err(format!("{command}: {}", answer.status()).into());
        }
        Ok(answer.json::<serde_json::Value>().await?["value"].take())
    }

    /// Empties the browser for the next test (what [`Browser::close`] does before handing it back).
    pub async fn empty(&self) -> Result<(), Box<dyn std::error::Error>> {
        self.devtools("Network.clearBrowserCookies", json!({})).await?;
        let old_tabs = self.client.windows().await?;
        let fresh = self.client.new_window(true).await?.handle;
        for tab in old_tabs {
            self.client.switch_to_window(tab).await?;
            self.client.close_window().await?;
        }
        self.client.switch_to_window(fresh).await?;
        self.client.set_window_size(WINDOW.0, WINDOW.1).await?;
        Ok(())
    }
}
