//! Pages v3, looked at in headless Chromium at a laptop's 1366 px and a phone's 390 px:
//! the sizing's price column on screen, an oversized config.json answered at its field, the
//! comparison's second trial on a phone, the jump to the approval, and no raw value on any page.

use crate::common;
use crate::common::builders::{BriefBuilder, PriceRow, PriceSheet};

use common::{browser, browser::Browser, spawn_app, TestApp, OWNER_EMAIL};
use fantoccini::key::Key;
use rentcheck::{auth::Role, config::AppConfig, demo, state::AppState};
use serde_json::{json, Value};

async fn js(b: &Browser, script: &str) -> Value {
    b.client.execute(script, vec![]).await.unwrap()
}

/// The page scrolls sideways (its document is wider than the window).
async fn page_scrolls_sideways(b: &Browser) -> bool {
    js(
        b,
        "return document.documentElement.scrollWidth > document.documentElement.clientWidth;",
    )
    .await
        == Value::Bool(true)
}

/// Where an element lies against the window: [left, right, window width, its scrolling box (if
/// any) scrolls sideways, displayed].
async fn placement(b: &Browser, css: &str) -> Value {
    b.client
        .execute(
            "const e = document.querySelector(arguments[0]);
             if (!e) return null;
             const r = e.getBoundingClientRect();
             const wrap = e.closest('.table-wrap');
             return [r.left, r.right, document.documentElement.clientWidth,
                     !!wrap && wrap.scrollWidth > wrap.clientWidth + 1, r.width > 0 && r.height > 0];",
            vec![json!(css)],
        )
        .await
        .unwrap()
}

/// The element is displayed wholly inside the window, inside no box that scrolls sideways.
async fn on_screen(b: &Browser, css: &str) -> Result<(), String> {
    let p = placement(b, css).await;
    if p.is_null() {
        return Err(format!("{css}: not on the page"));
    }
    let (left, right, width) = (p[0].as_f64().unwrap(), p[1].as_f64().unwrap(), p[2].as_f64().unwrap());
    if p[4] != true {
        return Err(format!("{css}: not displayed"));
    }
    if left < 0.0 || right > width + 0.5 {
        return Err(format!("{css}: {left:.0}–{right:.0} px in a {width:.0} px window"));
    }
    if p[3] == true {
        return Err(format!("{css}: inside a table that scrolls sideways"));
    }
    Ok(())
}

#[tokio::test]
async fn the_sizing_is_full_width_cheapest_first_and_its_price_column_is_on_screen_at_1366_and_390() {
    let app = spawn_app().await;
    let brief = app.brief_id().await;
    // Synthetic prices: long provider names and every billing, as a real sheet has them, each in
    // nodes of 1, 2, 4 and 8 GPUs (a row prices only its own node shape).
    let offers = [
        (
            "Example Compute Europe West",
            "H100 SXM",
            "on-demand",
            "2.49",
            "quote 1",
        ),
        ("Example Compute Europe West", "H200 SXM", "spot", "2.10", "quote 2"),
        ("Another Example Cloud", "A100 80GB SXM", "reserved", "1.60", "quote 3"),
        ("Another Example Cloud", "B200", "on-demand", "5.90", "quote 4"),
    ];
    let mut sheet = PriceSheet::new();
    for (provider, gpu, billing, rate, source) in offers {
        for n in [1, 2, 4, 8] {
            sheet = sheet.row(PriceRow::new(provider, gpu, n, rate).billing(billing).source(source));
        }
    }
    sheet.import(&app).await;
    let b = browser::launch().await;
    b.sign_in_as(&app, OWNER_EMAIL).await;
    let mut problems = Vec::new();
    for (width, height) in [(1366, 900), (390, 844)] {
        b.client.set_window_size(width, height).await.unwrap();
        b.client
            .goto(&app.url(&format!("/briefs/{brief}#sizing")))
            .await
            .unwrap();
        b.shot(&format!("sizing-{width}")).await;
        if page_scrolls_sideways(&b).await {
            problems.push(format!("{width} px: the brief page scrolls sideways"));
        }
        for css in [
            ".sizing-table tbody tr:first-child td.price",
            ".sizing-table tbody tr:first-child td.price a[href*='/trials/new?price=']",
        ] {
            if let Err(e) = on_screen(&b, css).await {
                problems.push(format!("{width} px: {e}"));
            }
        }
        // The price sheet's billing and rate, one card per offer on a phone.
        b.client.goto(&app.url("/prices")).await.unwrap();
        for css in [
            "#current tbody tr:first-child td[data-label='Billing']",
            "#current tbody tr:first-child td[data-label='Per GPU-hour']",
        ] {
            if let Err(e) = on_screen(&b, css).await {
                problems.push(format!("{width} px: {e}"));
            }
        }
        b.client
            .goto(&app.url(&format!("/briefs/{brief}#sizing")))
            .await
            .unwrap();
        // The sizing spans the page, not half of it.
        let section = js(
            &b,
            "return document.querySelector('#sizing').getBoundingClientRect().width
                    / document.querySelector('main').clientWidth;",
        )
        .await;
        if section.as_f64().unwrap() < 0.9 {
            problems.push(format!("{width} px: the sizing is {section} of the page's width"));
        }
    }
    b.client.set_window_size(1366, 900).await.unwrap();
    // Cheapest fitting option first; each row's notes folded behind its own disclosure.
    let rows: Vec<Value> = serde_json::from_value(
        js(
            &b,
            "return Array.from(document.querySelectorAll('.sizing-table tbody tr')).map(r => [
               r.classList.contains('fits'), (r.querySelector('td.price .figure') || {}).textContent || '',
               r.querySelectorAll('details').length, !!r.querySelector('details[open]'),
               !!r.querySelector('td.price .interruptible')]);",
        )
        .await,
    )
    .unwrap();
    assert!(rows.len() > 4, "{rows:?}");
    let first_price = rows[0][1].as_str().unwrap().to_owned();
    assert!(
        rows[0][0] == true && first_price.ends_with("USD/h"),
        "a priced fitting option leads: {rows:?}"
    );
    // The brief is served in real time: a spot-only price ("interruptible") comes after the rest.
    let priced: Vec<(bool, f64)> = rows
        .iter()
        .filter(|r| r[0] == true && !r[1].as_str().unwrap().is_empty())
        .map(|r| {
            let amount = r[1].as_str().unwrap().split(' ').next().unwrap().replace(',', "");
            (r[4] == true, amount.parse().unwrap())
        })
        .collect();
    assert!(
        priced.windows(2).all(|w| w[0] <= w[1]),
        "fitting options by price, interruptible last: {priced:?}"
    );
    assert!(priced.iter().any(|p| p.0), "the spot-only option is marked: {priced:?}");
    assert!(
        rows.iter().all(|r| r[2] == 1 && r[3] == false),
        "one closed disclosure per row: {rows:?}"
    );
    let header = b.text(".sizing-table thead").await;
    for column in ["GPU", "COUNT", "LAYOUT", "FITS", "HEADROOM", "PRICE (BILLING)"] {
        assert!(header.to_uppercase().contains(column), "{column} in {header}");
    }
    b.close().await;
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[tokio::test]
async fn a_2_mb_config_json_comes_back_at_its_field_with_everything_else_kept() {
    let app = spawn_app().await;
    let (b, _) = browser::signed_in(&app, Role::Engineer).await;
    // Synthetic: a config.json's real keys padded to 2 MB, as a wrong file (a tokenizer, weights
    // index) chosen by mistake would be.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("config.json");
    let padding = "x".repeat(2 * 1024 * 1024);
    std::fs::write(
        &file,
        json!({ "num_hidden_layers": 62, "num_key_value_heads": 16, "padding": padding }).to_string(),
    )
    .unwrap();
    assert!(std::fs::metadata(&file).unwrap().len() > 2 * 1024 * 1024);

    for (width, height) in [(1366, 900), (390, 844)] {
        b.client.set_window_size(width, height).await.unwrap();
        b.client.goto(&app.url("/briefs/new")).await.unwrap();
        b.fill("name", "Big config").await;
        b.fill("owner", "infra@example.com").await;
        b.fill("model_name", "example/too-big").await;
        b.fill("params_b", "27").await;
        b.fill("context_length", "32768").await;
        b.fill("concurrency", "4").await;
        b.fill("restore_plan", "Pull the weights again.").await;
        b.client
            .find(fantoccini::Locator::Css("input[type='file'][name='model_config']"))
            .await
            .unwrap()
            .send_keys(file.to_str().unwrap())
            .await
            .unwrap();
        b.click("button[value='save']").await;

        assert_eq!(
            b.path().await,
            "/briefs/new",
            "{width} px: the form again, not an error page"
        );
        let error = b.text(".error[data-field='model_config']").await;
        assert!(
            error.contains("KiB") && error.contains("256"),
            "{width} px: the size and the limit: {error}"
        );
        assert_eq!(b.value("name").await, "Big config");
        assert_eq!(b.value("owner").await, "infra@example.com");
        assert_eq!(b.value("model_name").await, "example/too-big");
        assert_eq!(b.value("params_b").await, "27");
        assert_eq!(b.value("context_length").await, "32768");
        assert_eq!(b.value("concurrency").await, "4");
        assert_eq!(b.value("restore_plan").await, "Pull the weights again.");
        assert!(!page_scrolls_sideways(&b).await, "{width} px: the form fits");
    }
    assert_eq!(app.count("briefs").await, 0, "nothing was stored");
    b.close().await;
}

async fn demo_app() -> (TestApp, demo::DemoOutcome) {
    let app = spawn_app().await;
    let state = AppState::new(app.pool.clone(), AppConfig::default(), app.keys.clone());
    let loaded = demo::load(&state).await.unwrap();
    (app, loaded)
}

#[tokio::test]
async fn the_comparison_at_390_px_shows_the_second_trials_verdict_without_sideways_scrolling() {
    let (app, loaded) = demo_app().await;
    let b = browser::launch().await;
    b.sign_in_as(&app, &loaded.email).await;
    let review = app.url(&format!("/briefs/{}/review", loaded.brief_id));

    b.client.set_window_size(1366, 900).await.unwrap();
    b.client.goto(&review).await.unwrap();
    on_screen(&b, ".comparison tbody tr:nth-child(3) td:nth-child(3)")
        .await
        .expect("at 1366 px the table shows the second trial's verdict");

    b.client.set_window_size(390, 844).await.unwrap();
    b.client.goto(&format!("{review}#trials-comparison")).await.unwrap();
    b.shot("comparison-390").await;
    assert!(!page_scrolls_sideways(&b).await, "the review fits the phone");
    let second = ".trial-cards .trial-card:nth-child(2) .card-verdict";
    on_screen(&b, second).await.unwrap();
    let verdict = b.text(second).await;
    assert!(
        verdict.contains("meet the card"),
        "the second trial's verdict, in words: {verdict}"
    );
    // Criteria are one card each: no criteria table scrolls sideways on the phone.
    let scrolling = js(
        &b,
        "return Array.from(document.querySelectorAll('table.stack-cards'))
                  .filter(t => t.offsetParent !== null)
                  .filter(t => t.closest('.table-wrap').scrollWidth > t.closest('.table-wrap').clientWidth + 1).length;",
    )
    .await;
    assert_eq!(scrolling, 0, "card tables do not scroll sideways");
    // A table that still scrolls says so above it.
    let hint = js(
        &b,
        "const w = Array.from(document.querySelectorAll('.table-wrap'))
                        .find(w => w.offsetParent !== null && w.scrollWidth > w.clientWidth + 1);
         return w ? getComputedStyle(w, '::before').content : 'none scrolls';",
    )
    .await;
    assert!(
        hint.as_str().unwrap().contains("Scroll sideways") || hint == "none scrolls",
        "{hint}"
    );
    // The long page opens with its table of contents.
    assert!(b.text("nav.toc").await.contains("Approval"));
    b.close().await;
}

#[tokio::test]
async fn one_tab_reaches_the_jump_to_approve_or_reject_and_it_lands_on_the_approval() {
    let (app, loaded) = demo_app().await;
    let b = browser::launch().await;
    b.sign_in_as(&app, &loaded.email).await;
    for (width, height) in [(1366, 900), (390, 844)] {
        b.client.set_window_size(width, height).await.unwrap();
        b.client
            .goto(&app.url(&format!("/briefs/{}/review", loaded.brief_id)))
            .await
            .unwrap();
        // The skip link first (every page), into the content: one Tab more is the jump link.
        let body = b.client.find(fantoccini::Locator::Css("body")).await.unwrap();
        body.send_keys(&Key::Tab.to_string()).await.unwrap();
        let active = b.client.active_element().await.unwrap();
        active.send_keys(&Key::Enter.to_string()).await.unwrap();
        assert_eq!(js(&b, "return document.activeElement.id;").await, "main");
        let active = b.client.active_element().await.unwrap();
        active.send_keys(&Key::Tab.to_string()).await.unwrap();
        let focused = js(
            &b,
            "const a = document.activeElement; const r = a.getBoundingClientRect();
             return [a.id, a.textContent.trim(), r.top >= 0 && r.bottom <= innerHeight];",
        )
        .await;
        assert_eq!(focused[0], "jump-approve", "{width} px: {focused}");
        assert!(
            focused[1].as_str().unwrap().starts_with("Approve or reject"),
            "{focused}"
        );
        assert_eq!(focused[2], true, "{width} px: the jump link is on the first screen");
        let active = b.client.active_element().await.unwrap();
        active.send_keys(&Key::Enter.to_string()).await.unwrap();
        let landed = js(
            &b,
            "const a = document.activeElement; const r = a.getBoundingClientRect();
             return [a.id, r.top >= -1 && r.top < innerHeight];",
        )
        .await;
        assert_eq!(landed[0], "approval", "{width} px: {landed}");
        assert_eq!(landed[1], true, "{width} px: the approval is on screen: {landed}");
        // The next Tab is inside the approval form.
        let active = b.client.active_element().await.unwrap();
        active.send_keys(&Key::Tab.to_string()).await.unwrap();
        assert_eq!(
            js(&b, "return !!document.activeElement.closest('#approval');").await,
            true
        );
    }
    // The section says what approving records and who is told.
    let what = b.text("#approval-what").await;
    assert!(
        what.contains("Nothing is ordered") && what.contains("approval.recorded"),
        "{what}"
    );
    b.close().await;
}

#[tokio::test]
async fn after_an_approval_the_section_shows_the_recorded_figures_not_the_form() {
    let (app, loaded) = demo_app().await;
    // A reserved quote that pays at the demo's 77.7 % busy (2.45 ÷ 3.50 = 70 % + 5 points): rule 8
    // reserves, so approving records a reservation (without a reserved price nothing is reserved).
    PriceSheet::new()
        .row(PriceRow::new("Cloud A", "H200 SXM", 8, "3.50").source("quote 7"))
        .row(
            PriceRow::new("Cloud A", "H200 SXM", 8, "2.45")
                .reserved()
                .source("quote 7 (1 year)"),
        )
        .import(&app)
        .await;
    let b = browser::launch().await;
    b.sign_in_as(&app, &loaded.email).await;
    b.client.set_window_size(1366, 900).await.unwrap();
    b.client
        .goto(&app.url(&format!("/briefs/{}/review", loaded.brief_id)))
        .await
        .unwrap();
    b.fill("reservation.term_months", "12").await;
    b.click("button[value='approve']").await;
    assert!(b.text("#verdict-feedback").await.starts_with("Approved by"));
    let approval = b.text("#approval").await;
    assert!(
        approval.contains("8 × H200 SXM") && approval.contains("12 months"),
        "the recorded reservation: {approval}"
    );
    let form_shown = js(
        &b,
        "const f = document.querySelector('#approval-form'); return !!f && f.checkVisibility();",
    )
    .await;
    assert_eq!(form_shown, false, "the defaults form is folded away");
    assert!(b.text("#decide-again summary").await.contains("Decide again"));
    b.close().await;
}

/// Raw values a person should never read: JavaScript's and the float formatter's leftovers.
const RAW_VALUES: &str = r#"
  const walker = document.createTreeWalker(document.querySelector('main'), NodeFilter.SHOW_TEXT);
  const found = [];
  const patterns = [
    [/\bundefined\b/, 'undefined'], [/\bNaN\b/, 'NaN'], [/\bnull\b/, 'null'],
    // A decimal of four or more whole digits without a thousands separator (6210.4), or with
    // five or more places (74.50580596923828).
    [/(^|[^\d.,:])\d{4,}\.\d+(?![\d.])/, 'unformatted decimal'], [/\d\.\d{6,}/, 'raw float'],
    [/measured —/, 'measured —'],
  ];
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    const p = n.parentElement;
    if (!p || p.closest('code, pre, textarea, script, style, [hidden]') || p.offsetParent === null) continue;
    const t = n.textContent;
    for (const [re, what] of patterns) if (re.test(t)) found.push(what + ': ' + t.trim().slice(0, 120));
  }
  for (const cell of document.querySelectorAll('main td, main dd')) {
    if (/^(true|false)$/.test(cell.textContent.trim())) found.push('a bare boolean: ' + cell.textContent.trim());
  }
  return found;"#;

#[tokio::test]
async fn no_page_of_the_demo_shows_undefined_nan_or_an_unformatted_value() {
    let (app, loaded) = demo_app().await;
    let brief = loaded.brief_id;
    let id = |sql: &'static str| {
        let pool = app.pool.clone();
        async move {
            sqlx::query_scalar::<_, String>(sql)
                .bind(brief)
                .fetch_all(&pool)
                .await
                .unwrap()
        }
    };
    let trials = id("SELECT id::text FROM trials WHERE brief_id = $1 ORDER BY id").await;
    let evidence = id("SELECT id::text FROM evidence WHERE brief_id = $1 ORDER BY id").await;
    let mut pages = vec![
        "/".to_owned(),
        "/briefs/new".to_owned(),
        format!("/briefs/{brief}"),
        format!("/briefs/{brief}/edit"),
        format!("/briefs/{brief}/review"),
        format!("/briefs/{brief}/audit"),
        format!("/briefs/{brief}/decision"),
        format!("/briefs/{brief}/card"),
        format!("/briefs/{brief}/evidence"),
        format!("/briefs/{brief}/tokens"),
        format!("/briefs/{brief}/sharing"),
        format!("/briefs/{brief}/trials/new"),
        "/prices".to_owned(),
        "/glossary".to_owned(),
        "/account".to_owned(),
    ];
    for t in &trials {
        pages.push(format!("/briefs/{brief}?trial={t}"));
        pages.push(format!("/trials/{t}"));
        pages.push(format!("/briefs/{brief}/trials/{t}/plan"));
    }
    pages.extend(evidence.iter().map(|e| format!("/evidence/{e}")));
    // A fresh brief too: the empty states (no ledger, no evidence) have words of their own.
    let fresh = app.brief_id().await;
    pages.push(format!("/briefs/{fresh}"));
    pages.push(format!("/briefs/{fresh}/review"));
    pages.push(format!("/briefs/{fresh}/decision"));

    let (b, _) = browser::signed_in(&app, Role::Admin).await;
    b.client.set_window_size(1366, 900).await.unwrap();
    let mut problems = Vec::new();
    for path in pages
        .iter()
        .map(String::as_str)
        .chain(["/admin/users", "/admin/webhooks"])
    {
        b.client.goto(&app.url(path)).await.unwrap();
        let error_page = js(&b, "return document.querySelector('.error-page') !== null;").await;
        if error_page == true {
            problems.push(format!("{path}: an error page"));
            continue;
        }
        let found: Vec<String> = serde_json::from_value(js(&b, RAW_VALUES).await).unwrap();
        problems.extend(found.into_iter().map(|f| format!("{path}: {f}")));
    }
    b.close().await;
    assert!(
        problems.is_empty(),
        "{} raw values on {} pages:\n{}",
        problems.len(),
        pages.len() + 2,
        problems.join("\n")
    );
}

#[tokio::test]
async fn the_decision_record_is_a_page_beside_its_downloads_with_absolute_links() {
    let (app, loaded) = demo_app().await;
    let brief = loaded.brief_id;
    let public = rentcheck::config::AppConfig::default().public_url;
    let manager = app.login_as(&loaded.email, &loaded.password).await.unwrap();
    let res = manager.get(app.url(&format!("/briefs/{brief}/decision"))).await;
    assert_eq!(res.status(), 200);
    assert!(res.headers()["content-type"].to_str().unwrap().starts_with("text/html"));
    let html = res.text().await.unwrap();
    assert!(html.contains("<h1>Decision record: Support chat"), "a page of its own");
    assert!(html.contains(&format!("href=\"/briefs/{brief}/decision.md\" download")));
    assert!(html.contains(&format!("href=\"/briefs/{brief}/decision.json\" download")));
    assert!(!html.contains("\\("), "no Markdown escapes on the page");
    // For people: the deciding reason said once, no field names, the ids tucked away.
    let why_start = html.find("<p id=\"record-why\"><strong>").expect("the reason") + 30;
    let why = &html[why_start..why_start + html[why_start..].find("</strong>").unwrap()];
    assert_eq!(html.matches(why).count(), 1, "the reason is said once: {why}");
    for raw in [
        "<dt>rate_per_gpu_hour",
        "<dt>gpus_per_node",
        "<dt>monthly_cost",
        "<code>ttft",
    ] {
        assert!(!html.contains(raw), "no raw field name on the page: {raw}");
    }
    let ids = html
        .find("<details class=\"identifiers\">")
        .expect("ids behind a disclosure");
    assert!(
        html.find(&format!("<code>{brief}</code>")).is_some_and(|at| at > ids),
        "the brief's id is shown only there"
    );
    assert!(
        html.contains(&format!("href=\"{public}/evidence/")),
        "evidence links are absolute from RENTCHECK_PUBLIC_URL"
    );
    let md = manager
        .get(app.url(&format!("/briefs/{brief}/decision.md")))
        .await
        .text()
        .await
        .unwrap();
    assert!(md.contains(&format!("({public}/evidence/")), "and in the Markdown file");
    assert!(!md.contains("](/") && !md.contains(" (/evidence"), "no host-less link");
    // The review links the page first.
    let review = manager
        .get(app.url(&format!("/briefs/{brief}/review")))
        .await
        .text()
        .await
        .unwrap();
    assert!(review.contains(&format!("href=\"/briefs/{brief}/decision\" id=\"decision-record\"")));
}

#[tokio::test]
async fn the_dashboard_names_each_owner_and_sorts_by_a_column_heading() {
    let app = spawn_app().await;
    for (name, owner) in [
        ("Mid chat", "mallory@example.com"),
        ("Alpha batch", "zoe@example.com"),
        ("Zeta embed", "adam@example.com"),
    ] {
        BriefBuilder::new().name(name).owner(owner).create(&app).await;
    }
    let b = browser::launch().await;
    b.sign_in_as(&app, OWNER_EMAIL).await;
    b.client.set_window_size(1366, 900).await.unwrap();
    b.client.goto(&app.url("/")).await.unwrap();
    let column = |css: &'static str| {
        let b = &b;
        async move {
            serde_json::from_value::<Vec<String>>(
                b.client
                    .execute(
                        "return Array.from(document.querySelectorAll(arguments[0])).map(e => e.textContent.trim());",
                        vec![json!(css)],
                    )
                    .await
                    .unwrap(),
            )
            .unwrap()
        }
    };
    assert_eq!(
        column("table.dashboard td.owner").await,
        ["adam@example.com", "zoe@example.com", "mallory@example.com"],
        "newest first, each with its owner"
    );
    b.click("th[data-sort='owner'] a").await;
    assert!(b
        .client
        .current_url()
        .await
        .unwrap()
        .query()
        .unwrap_or("")
        .contains("sort=owner"));
    assert_eq!(
        column("table.dashboard td.owner").await,
        ["adam@example.com", "mallory@example.com", "zoe@example.com"]
    );
    assert_eq!(
        js(
            &b,
            "return document.querySelector(\"th[data-sort='owner']\").getAttribute('aria-sort');"
        )
        .await,
        "ascending"
    );
    // The sorted column's heading again reverses it, and its arrow turns.
    assert!(b.text("th[data-sort='owner'] a").await.trim().ends_with('▲'));
    b.click("th[data-sort='owner'] a").await;
    assert_eq!(
        column("table.dashboard td.owner").await,
        ["zoe@example.com", "mallory@example.com", "adam@example.com"]
    );
    assert!(b.text("th[data-sort='owner'] a").await.trim().ends_with('▼'));
    assert!(b.text("#brief-total").await.starts_with("3 briefs"));
    b.click("th[data-sort='name'] a").await;
    assert_eq!(
        column("table.dashboard tbody td:first-child").await,
        ["Alpha batch", "Mid chat", "Zeta embed"]
    );
    // A filter link keeps the sort.
    let quick = js(
        &b,
        "return document.querySelector('.quick-filters a:nth-child(2)').getAttribute('href');",
    )
    .await;
    assert!(quick.as_str().unwrap().contains("sort=name"), "{quick}");
    b.close().await;
}

#[tokio::test]
async fn the_token_page_has_a_recipe_for_every_stage_naming_its_docs_section() {
    let app = spawn_app().await;
    let brief = app.brief_id().await;
    let b = browser::launch().await;
    b.sign_in_as(&app, OWNER_EMAIL).await;
    for (width, height) in [(1366, 900), (390, 844)] {
        b.client.set_window_size(width, height).await.unwrap();
        b.client
            .goto(&app.url(&format!("/briefs/{brief}/tokens")))
            .await
            .unwrap();
        for stage in 1..=5 {
            let recipe = b.text(&format!("#recipe-stage-{stage}")).await;
            assert!(recipe.contains("docs/agents.md §"), "stage {stage}: {recipe}");
            assert!(recipe.contains(&brief), "stage {stage} names this brief: {recipe}");
        }
        assert!(b.text("#recipe-stage-3").await.contains("--stage 3"));
        // Stage 2 is the functional probes and the engine's start-up log, as on the card.
        let stage_2 = b.text("#recipe-stage-2").await;
        assert!(
            stage_2.contains("--file probe=") && stage_2.contains("--file vllm-log="),
            "{stage_2}"
        );
        assert!(b.text("#recipe-stage-5").await.contains("/ledger"));
        assert!(!page_scrolls_sideways(&b).await, "{width} px");
    }
    b.close().await;
}

#[tokio::test]
async fn a_form_over_the_body_limit_says_a_file_is_too_big_not_bad_request() {
    let app = spawn_app().await;
    let person = app.login(Role::Engineer).await;
    // Synthetic: 9 MiB of padding, over the brief form's 8 MiB body limit.
    let file = vec![b' '; 9 * 1024 * 1024];
    let form = reqwest::multipart::Form::new()
        .text("csrf_token", person.csrf.clone())
        .text("name", "Too big")
        .part(
            "model_config",
            reqwest::multipart::Part::bytes(file)
                .file_name("config.json")
                .mime_str("application/json")
                .unwrap(),
        );
    let res = person
        .client
        .post(app.url("/briefs/new"))
        .header("referer", app.url("/briefs/new"))
        .multipart(form)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 413);
    let page = res.text().await.unwrap();
    assert!(page.contains("a file chosen in it is too big"), "{page}");
    assert!(page.contains("your browser keeps what you typed"));
    // Not a dead end: the page leads back to the form the person came from.
    assert!(page.contains("<a href=\"/briefs/new\" id=\"back-to-form\">"), "{page}");
    assert!(!page.contains("Bad Request"));
    assert_eq!(app.count("briefs").await, 0);
}

#[tokio::test]
async fn a_refused_ledger_import_keeps_the_file_at_its_field_and_leads_back() {
    let (app, loaded) = demo_app().await;
    let (b, _) = browser::signed_in(&app, Role::Admin).await;
    for (width, height) in [(1366, 900), (390, 844)] {
        b.client.set_window_size(width, height).await.unwrap();
        b.client
            .goto(&app.url(&format!("/briefs/{}#ledger-import", loaded.brief_id)))
            .await
            .unwrap();
        b.fill(
            "csv",
            "category,resource,description,starts_at,ends_at,gpus,rate_per_gpu_hour,amount,currency\nhost,vm,,,,,,four,USD\n",
        )
        .await;
        b.click("#ledger-import button[type='submit']").await;
        assert_eq!(b.text("h1").await, "The ledger import was not stored");
        let errors = b.text("#import-errors").await;
        assert!(
            errors.contains("8 × H200 · Cloud A") && errors.contains("amount"),
            "{errors}"
        );
        assert!(
            b.value("csv").await.contains("host,vm,,,,,,four,USD"),
            "the file is kept"
        );
        assert!(!page_scrolls_sideways(&b).await, "no sideways scrolling at {width} px");
        b.shot(&format!("ledger-import-error-{width}")).await;
        b.click("#back-to-ledger").await;
        assert!(b.path().await.starts_with("/briefs/"));
    }
    b.close().await;
}
