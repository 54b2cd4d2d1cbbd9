//! Every page, in one headless Chromium session: axe-core finds no serious or critical WCAG
//! violation at laptop width, and at phone width (390 px) no page is wider than the screen.
//!
//! axe-core is vendored (`tests/vendor/axe.min.js`, MPL-2.0, see `tests/vendor/README.md`) so the
//! test needs no network. With `RENTCHECK_SCREENSHOT_DIR` set, each page is also saved at both widths
//! (`<name>-1366.png`, `<name>-390.png`): `docs/screens/` is made that way.

use crate::common;

use common::{browser, browser::Browser, spawn_app, TestApp};
use rentcheck::ids::BriefId;
use rentcheck::{auth::Role, config::AppConfig, demo, secrets::TokenKeys, state::AppState};
use serde_json::{json, Value};
use uuid::Uuid;

const AXE: &str = include_str!("../../vendor/axe.min.js");

/// One page to look at: a short name (for messages and screenshots) and its path.
struct Page {
    name: &'static str,
    path: String,
    /// An error page on purpose (the 404 people see): everything else must render as itself.
    error: bool,
}

fn page(name: &'static str, path: impl Into<String>) -> Page {
    Page {
        name,
        path: path.into(),
        error: false,
    }
}

/// Has the browser's tab put axe-core in every page it opens from now on, before the page's own
/// scripts: 650 kB sent once, rather than through WebDriver for each of some 60 checks (chromedriver
/// and the test spent 3 CPU-seconds a run on that). DevTools scripts run outside the page's CSP
/// (`script-src 'self'`), so this works against the same headers people get.
async fn with_axe(b: &Browser) {
    b.devtools("Page.addScriptToEvaluateOnNewDocument", json!({ "source": AXE }))
        .await
        .expect("registering axe-core");
}

/// Runs axe on the current page; returns one line per serious or critical violation.
async fn axe_violations(b: &Browser) -> Vec<String> {
    let present = b
        .client
        .execute("return typeof axe === 'object';", vec![])
        .await
        .unwrap();
    assert_eq!(present, json!(true), "axe-core is put in every page (see `with_axe`)");
    let found = b
        .client
        .execute_async(
            r#"const done = arguments[arguments.length - 1];
               axe.run(document, { resultTypes: ['violations'] }).then(
                 r => done(r.violations
                   .filter(v => v.impact === 'serious' || v.impact === 'critical')
                   .map(v => v.impact + ' ' + v.id + ': ' + v.help + ' — '
                        + v.nodes.slice(0, 3).map(n => n.target.join(' ')).join(' | '))),
                 e => done(['axe failed: ' + e]));"#,
            vec![],
        )
        .await
        .expect("running axe-core");
    serde_json::from_value(found).unwrap()
}

/// The document's width and the viewport's, in CSS pixels, and the elements that stick out (those
/// not inside a scrolling box), named for the failure message.
async fn widths(b: &Browser) -> (i64, i64, String) {
    let v = b
        .client
        .execute(
            r#"const w = document.documentElement.clientWidth;
               const out = Array.from(document.querySelectorAll('main *, header *'))
                 .filter(e => e.getBoundingClientRect().right > w + 1)
                 .filter(e => !e.parentElement.closest('.table-wrap, .chart-scroll, pre'))
                 .slice(-4)
                 .map(e => e.tagName.toLowerCase() + (e.id ? '#' + e.id : '') +
                      (e.className && e.className.baseVal === undefined ? '.' + e.className.trim().replace(/ +/g, '.') : '') +
                      ' ' + Math.round(e.getBoundingClientRect().right) + ' px');
               return [document.documentElement.scrollWidth, w, out.join(', ')];"#,
            vec![],
        )
        .await
        .unwrap();
    (
        v[0].as_i64().unwrap(),
        v[1].as_i64().unwrap(),
        v[2].as_str().unwrap().to_owned(),
    )
}

/// Opens a page and checks it is the page asked for, not an error page in its place.
async fn open(b: &Browser, app_base: &str, p: &Page) -> Result<(), String> {
    b.client.goto(&format!("{app_base}{}", p.path)).await.unwrap();
    let is_error = b
        .client
        .execute("return document.querySelector('.error-page') !== null;", vec![])
        .await
        .unwrap();
    if is_error != Value::Bool(p.error) {
        let title = b.client.title().await.unwrap();
        return Err(format!("{} ({}) rendered as {title:?}", p.name, p.path));
    }
    Ok(())
}

/// What axe reports only as "moderate" but every page here promises: a language, an `<h1>`, the
/// header, navigation and main landmarks, and a skip link as the first thing a keyboard reaches.
async fn structure_problems(b: &Browser) -> Vec<String> {
    let found = b
        .client
        .execute(
            r#"const p = [];
               if (!document.documentElement.lang) p.push('no lang attribute');
               if (document.querySelectorAll('h1').length !== 1) p.push('not exactly one <h1>');
               for (const l of ['header', 'nav', 'main']) if (!document.querySelector(l)) p.push('no <' + l + '>');
               const first = document.querySelector(
                 'a[href], button, input:not([type=hidden]), select, textarea, [tabindex]:not([tabindex="-1"])');
               const skip = first && first.matches("a.skip-link[href='#main']");
               if (!skip) p.push('the first focusable element is not the skip link to #main');
               // Input borders against what is behind them, 3:1 (WCAG 1.4.11): axe leaves non-text
               // contrast out, and the issue found 1.8:1.
               const rgb = c => (c.match(/[\d.]+/g) || []).map(Number);
               const lum = ([r, g, b]) => [r, g, b].map(v => v / 255)
                 .map(v => v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4))
                 .reduce((s, v, i) => s + v * [0.2126, 0.7152, 0.0722][i], 0);
               const behind = e => {
                 for (let a = e.parentElement; a; a = a.parentElement) {
                   const c = rgb(getComputedStyle(a).backgroundColor);
                   if (c.length === 3 || c[3] > 0) return c.slice(0, 3);
                 }
                 return [255, 255, 255];
               };
               for (const e of document.querySelectorAll(
                   'input[type=text], input[type=email], input[type=password], input:not([type]), select, textarea')) {
                 const st = getComputedStyle(e);
                 if (e.offsetParent === null || st.borderTopStyle === 'none') continue;
                 const [l1, l2] = [lum(rgb(st.borderTopColor)), lum(behind(e))].sort((x, y) => y - x);
                 const ratio = (l1 + 0.05) / (l2 + 0.05);
                 if (ratio < 3) { p.push('input border contrast ' + ratio.toFixed(2) + ':1 on ' + (e.name || e.tagName)); break; }
               }
               return p;"#,
            vec![],
        )
        .await
        .unwrap();
    serde_json::from_value(found).unwrap()
}

/// On the current page, one Tab reaches the skip link and shows it; following it moves focus to main.
async fn skip_link_works(b: &Browser) -> Result<(), String> {
    use fantoccini::{key::Key, Locator};
    let body = b.client.find(Locator::Css("body")).await.unwrap();
    body.send_keys(&Key::Tab.to_string()).await.unwrap();
    let state = b
        .client
        .execute(
            "const a = document.activeElement; const r = a.getBoundingClientRect();
             return [a.className, r.top >= 0 && r.bottom <= innerHeight && r.width > 0,
                     getComputedStyle(a).outlineStyle];",
            vec![],
        )
        .await
        .unwrap();
    if state[0] != "skip-link" || state[1] != true || state[2] == "none" {
        return Err(format!(
            "first Tab: focused {}, on screen {}, outline {}",
            state[0], state[1], state[2]
        ));
    }
    b.client
        .active_element()
        .await
        .unwrap()
        .send_keys(&Key::Enter.to_string())
        .await
        .unwrap();
    let focused = b
        .client
        .execute("return document.activeElement.id;", vec![])
        .await
        .unwrap();
    if focused != "main" {
        return Err(format!("after the skip link, focus is on {focused}, not main"));
    }
    Ok(())
}

/// Visits `pages` at 1366 px (axe) and at 390 px (width), adding every problem to `problems`.
async fn check_pages(b: &Browser, base: &str, pages: &[Page], problems: &mut Vec<String>) {
    let shots = std::env::var("RENTCHECK_SCREENSHOT_DIR").is_ok();
    b.client.set_window_size(1366, 900).await.unwrap();
    for p in pages {
        if let Err(e) = open(b, base, p).await {
            problems.push(e);
            continue;
        }
        for v in axe_violations(b).await.into_iter().chain(structure_problems(b).await) {
            problems.push(format!("{} ({}) at 1366 px: {v}", p.name, p.path));
        }
        if shots {
            b.shot(&format!("{}-1366", p.name)).await;
        }
    }
    b.client.set_window_size(390, 844).await.unwrap();
    for p in pages {
        if open(b, base, p).await.is_err() {
            continue; // already reported
        }
        let (document, viewport, sticking_out) = widths(b).await;
        assert!(viewport <= 400, "the window did not narrow: {viewport} px");
        if document > viewport {
            problems.push(format!(
                "{} ({}) is {document} px wide on a {viewport} px phone: {sticking_out}",
                p.name, p.path
            ));
        }
        // Scrolling containers and contrast change with the layout: axe again at phone width.
        for v in axe_violations(b).await {
            problems.push(format!("{} ({}) at 390 px: {v}", p.name, p.path));
        }
        if shots {
            b.shot(&format!("{}-390", p.name)).await;
        }
    }
}

async fn sign_in(b: &Browser, app: &TestApp, email: &str) {
    b.client.delete_all_cookies().await.unwrap();
    b.sign_in_as(app, email).await;
    b.client.goto(&app.url("/")).await.unwrap();
    assert_eq!(b.path().await, "/", "{email} signed in");
}

/// A brief form sent empty comes back with its errors: the page with messages at the fields.
async fn brief_form_with_errors(b: &Browser, base: &str, problems: &mut Vec<String>) {
    b.client.set_window_size(1366, 900).await.unwrap();
    b.client.goto(&format!("{base}/briefs/new")).await.unwrap();
    b.fill("name", "").await;
    b.click(".brief-form button[type='submit']").await;
    let invalid = b
        .client
        .execute(
            "return Array.from(document.querySelectorAll('[aria-invalid=true]')).map(e => {
               const id = e.getAttribute('aria-describedby');
               const msg = id && document.getElementById(id);
               return msg ? msg.textContent.trim() : '';
             });",
            vec![],
        )
        .await
        .unwrap();
    let messages: Vec<String> = serde_json::from_value(invalid).unwrap();
    if messages.is_empty() || messages.iter().any(String::is_empty) {
        problems.push(format!(
            "brief form with errors: every invalid field names its message, got {messages:?}"
        ));
    }
    for v in axe_violations(b).await {
        problems.push(format!("brief form with errors: {v}"));
    }
    let shots = std::env::var("RENTCHECK_SCREENSHOT_DIR").is_ok();
    if shots {
        b.shot("brief-form-errors-1366").await;
    }
    // The messages under the fields wrap on a phone too (the page re-rendered, not re-requested).
    b.client.set_window_size(390, 844).await.unwrap();
    let (document, viewport, sticking_out) = widths(b).await;
    if document > viewport {
        problems.push(format!(
            "brief form with errors is {document} px wide on a {viewport} px phone: {sticking_out}"
        ));
    }
    if shots {
        b.shot("brief-form-errors-390").await;
    }
}

/// A brief-page form sent with a bad value, as a person would, and the page it ends on (errors at
/// the field, the input kept) checked like every other page: axe, a phone's width, screenshots.
struct RefusedForm<'a> {
    name: &'a str,
    /// Where on the brief page the form is (`#ledger-import`).
    fragment: &'a str,
    fills: &'a [(&'a str, &'a str)],
    submit: &'a str,
}

async fn form_with_errors(b: &Browser, base: &str, brief: &str, form: &RefusedForm<'_>, problems: &mut Vec<String>) {
    let shots = std::env::var("RENTCHECK_SCREENSHOT_DIR").is_ok();
    for (width, height) in [(1366, 900), (390, 844)] {
        b.client.set_window_size(width, height).await.unwrap();
        b.client
            .goto(&format!("{base}/briefs/{brief}{}", form.fragment))
            .await
            .unwrap();
        for (field, value) in form.fills {
            b.fill(field, value).await;
        }
        b.click(form.submit).await;
        for v in axe_violations(b).await {
            problems.push(format!("{} with errors at {width} px: {v}", form.name));
        }
        let (document, viewport, sticking_out) = widths(b).await;
        if document > viewport {
            problems.push(format!(
                "{} with errors is {document} px wide on a {viewport} px window: {sticking_out}",
                form.name
            ));
        }
        if shots {
            b.shot(&format!("{}-errors-{width}", form.name.replace(' ', "-"))).await;
        }
    }
}

/// The brief page's forms that come back with errors at the field: the ledger import, the
/// outputs and a readiness link.
async fn brief_forms_with_errors(b: &Browser, base: &str, brief: &str, problems: &mut Vec<String>) {
    let forms = [
        RefusedForm {
            name: "ledger import",
            fragment: "#ledger-import",
            fills: &[(
                "csv",
                "category,resource,description,starts_at,ends_at,gpus,rate_per_gpu_hour,amount,currency\nhost,vm,,,,,,four,USD\n",
            )],
            submit: "#ledger-import button[type='submit']",
        },
        RefusedForm {
            name: "outputs",
            fragment: "#outputs",
            fills: &[("accepted", "lots")],
            submit: "#outputs button[type='submit']",
        },
        RefusedForm {
            name: "readiness link",
            fragment: "#readiness",
            fills: &[("link", "www.example.com/runbook")],
            submit: ".readiness-table form button[type='submit']",
        },
    ];
    for form in &forms {
        form_with_errors(b, base, brief, form, problems).await;
    }
}

async fn first_id(app: &TestApp, sql: &str, brief: BriefId) -> Option<String> {
    sqlx::query_scalar::<_, String>(sql)
        .bind(brief)
        .fetch_optional(&app.pool)
        .await
        .unwrap()
}

#[tokio::test]
async fn every_page_passes_axe_and_fits_a_phone() {
    let app = spawn_app().await;
    let state = AppState::new(app.pool.clone(), AppConfig::default(), app.keys.clone());
    let loaded = demo::load(&state).await.unwrap();
    let brief = loaded.brief_id;
    let evidence = first_id(
        &app,
        "SELECT id::text FROM evidence WHERE brief_id = $1 ORDER BY id LIMIT 1",
        brief,
    )
    .await
    .expect("the demo has evidence");
    let trial = first_id(
        &app,
        "SELECT id::text FROM trials WHERE brief_id = $1 ORDER BY id LIMIT 1",
        brief,
    )
    .await
    .expect("the demo has trials");
    let revision = first_id(
        &app,
        "SELECT revision::text FROM card_revisions WHERE brief_id = $1 ORDER BY revision DESC LIMIT 1",
        brief,
    )
    .await;
    let admin = app.user(Role::Admin).await;

    // A second, empty installation: the first-run setup page is open only while nobody exists.
    let (_fresh_db, fresh_pool) = common::migrated_database(2).await;
    let fresh_config = AppConfig::default();
    let setup_path = format!("/setup?code={}", fresh_config.setup_code.expose());
    let fresh_base = common::serve_app(
        fresh_pool,
        fresh_config,
        TokenKeys::from_secret(Uuid::new_v4().simple().to_string().repeat(2).as_bytes()),
    )
    .await;

    let b = browser::launch().await;
    with_axe(&b).await;
    let mut problems = Vec::new();
    let started = std::time::Instant::now();

    check_pages(&b, &fresh_base, &[page("setup", setup_path)], &mut problems).await;
    b.client.delete_all_cookies().await.unwrap();
    check_pages(&b, &app.base, &[page("login", "/login")], &mut problems).await;

    // An admin may open every page, the brief's editing pages and the admin ones included.
    sign_in(&b, &app, &admin).await;
    let mut pages = vec![
        page("dashboard", "/"),
        page("brief-new", "/briefs/new"),
        page("brief-edit", format!("/briefs/{brief}/edit")),
        page("brief", format!("/briefs/{brief}")),
        page("review", format!("/briefs/{brief}/review")),
        page("audit", format!("/briefs/{brief}/audit")),
        page("decision", format!("/briefs/{brief}/decision")),
        page("card-editor", format!("/briefs/{brief}/card")),
        page("evidence", format!("/evidence/{evidence}")),
        page("trial-new", format!("/briefs/{brief}/trials/new")),
        page("trial-edit", format!("/trials/{trial}")),
        page("prices", "/prices"),
        page("tokens", format!("/briefs/{brief}/tokens")),
        page("plan", format!("/briefs/{brief}/trials/{trial}/plan")),
        page("sharing", format!("/briefs/{brief}/sharing")),
        page("account", "/account"),
        page("users", "/admin/users"),
        page("webhooks", "/admin/webhooks"),
        page("evidence-all", format!("/briefs/{brief}/evidence")),
        page("glossary", "/glossary"),
        page("commitments-empty", "/commitments"),
        page("problems", "/docs/problems"),
        Page {
            name: "not-found",
            path: format!("/briefs/{}", Uuid::nil()),
            error: true,
        },
    ];
    if let Some(n) = revision {
        pages.push(page("card-revision", format!("/briefs/{brief}/card/revisions/{n}")));
    }
    check_pages(&b, &app.base, &pages, &mut problems).await;
    b.client
        .goto(&app.url(&format!("/briefs/{brief}/review")))
        .await
        .unwrap();
    if let Err(e) = skip_link_works(&b).await {
        problems.push(format!("review: {e}"));
    }
    brief_form_with_errors(&b, &app.base, &mut problems).await;
    brief_forms_with_errors(&b, &app.base, &brief.to_string(), &mut problems).await;

    // The demo manager: the dashboard and the review with the approval form, as a manager sees them.
    sign_in(&b, &app, &loaded.email).await;
    let manager_pages = [
        page("manager-dashboard", "/"),
        page("manager-review", format!("/briefs/{brief}/review")),
    ];
    check_pages(&b, &app.base, &manager_pages, &mut problems).await;
    if std::env::var("RENTCHECK_SCREENSHOT_DIR").is_ok() {
        // The charts sit below the first screen: shown on their own for docs/screens.
        for (width, height) in [(1366, 900), (390, 844)] {
            b.client.set_window_size(width, height).await.unwrap();
            for anchor in ["attainment-chart", "latency-chart"] {
                b.client
                    .goto(&app.url(&format!("/briefs/{brief}/review#{anchor}")))
                    .await
                    .unwrap();
                b.shot(&format!("review-{anchor}-{width}")).await;
            }
        }
    }
    // After an approval: the demo's commitment (what `rentcheck demo` adds with load_commitment),
    // on the portfolio and on its own page with the chart and the provider's column.
    let mut loaded = loaded;
    demo::load_commitment(&state, &mut loaded).await.unwrap();
    let commitment = first_id(&app, "SELECT id::text FROM commitments WHERE brief_id = $1", brief)
        .await
        .expect("the demo's approval opened a commitment");
    let commitment_pages = [
        page("commitments", "/commitments"),
        page("commitment", format!("/commitments/{commitment}")),
    ];
    check_pages(&b, &app.base, &commitment_pages, &mut problems).await;
    b.close().await;

    assert!(
        problems.is_empty(),
        "{} accessibility problems:\n{}",
        problems.len(),
        problems.join("\n")
    );
    // One browser, pages in a loop: about half a minute; printed to keep an eye on it.
    println!("{} pages checked in {:?}", pages.len() + 7, started.elapsed());
}
