//! The review in headless Chromium, as a manager reads it: the decision, why, its approval state and
//! what it costs on the first screen — every amount there a figure of the review's JSON and of the
//! reservation the approval stores; approving the computed reservation (the manager picks the term
//! and start) with the confirmation at the top; a bad approval that keeps what was typed; an
//! engineer sees no form.

use crate::common;
use crate::common::builders::{PriceRow, PriceSheet};

use common::{browser, browser::Browser, spawn_app};
use rentcheck::{auth::Role, config::AppConfig, demo, state::AppState};

/// The bottom edge (px from the top of the page) of the element `css`.
async fn bottom(b: &Browser, css: &str) -> f64 {
    b.client
        .execute(
            "const r = document.querySelector(arguments[0]).getBoundingClientRect(); return r.bottom + window.scrollY;",
            vec![serde_json::json!(css)],
        )
        .await
        .unwrap()
        .as_f64()
        .unwrap()
}

async fn viewport_height(b: &Browser) -> f64 {
    b.client
        .execute("return window.innerHeight", vec![])
        .await
        .unwrap()
        .as_f64()
        .unwrap()
}

/// The page's text as a person reads it.
async fn page_text(b: &Browser) -> String {
    b.client
        .execute("return document.body.innerText", vec![])
        .await
        .unwrap()
        .as_str()
        .unwrap()
        .to_owned()
}

/// What a manager should never have to read: a decimal with five or more places
/// (`0.0490068292682926829268292683`, `15184.000000`), an amount of thousands without separators
/// (`15184 USD`), or a card operator's code (`ge 8.0`, `eq true`).
fn raw_figures(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    let words: Vec<&str> = text.split_whitespace().collect();
    for (i, word) in words.iter().enumerate() {
        let number = word.trim_end_matches([',', '.', ';', ')', ':']);
        let (whole, places) = number.split_once('.').unwrap_or((number, ""));
        let digits = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_digit());
        if digits(whole) && digits(places) && places.len() >= 5 {
            found.push(word.to_string());
        }
        let next = words.get(i + 1).copied().unwrap_or("");
        let currency_next = ["USD", "EUR", "GBP"].iter().any(|c| next.starts_with(c));
        if digits(whole) && whole.len() >= 4 && (places.is_empty() || digits(places)) && currency_next {
            found.push(format!("{word} {next}"));
        }
        let operator = ["ge", "le", "gt", "lt", "eq", "ne"].contains(word);
        if operator && (next.starts_with(|c: char| c.is_ascii_digit()) || next == "true" || next == "false") {
            found.push(format!("{word} {next}"));
        }
    }
    found
}

#[test]
fn raw_figures_are_found() {
    assert_eq!(
        raw_figures("costs 0.0490068292682926829268292683 USD, then 15184.000000 USD a month; gpu.count ge 8.0"),
        [
            "0.0490068292682926829268292683",
            "15184.000000",
            "15184.000000 USD",
            "ge 8.0"
        ]
    );
    assert!(raw_figures("0.0086 USD within 0.02 USD; 245,280 USD; ≥ 8; 2026-12-01").is_empty());
}

/// Every amount with a currency in `text`: "20,440 USD", "0.0086 USD".
fn amounts(text: &str) -> Vec<String> {
    let words: Vec<&str> = text.split_whitespace().collect();
    let mut out = Vec::new();
    for pair in words.windows(2) {
        let number = pair[0].trim_start_matches(['(', '“']);
        let currency = pair[1].trim_end_matches([',', '.', ';', ')', ':']);
        let is_number = !number.is_empty() && number.chars().all(|c| c.is_ascii_digit() || c == ',' || c == '.');
        let is_currency = currency.len() == 3 && currency.chars().all(|c| c.is_ascii_uppercase());
        if is_number && is_currency && number.starts_with(|c: char| c.is_ascii_digit()) {
            out.push(format!("{number} {currency}"));
        }
    }
    out
}

#[test]
fn amounts_are_found() {
    assert_eq!(
        amounts("costs 0.0086 USD, within 0.02 USD; (20,440 USD a month), 8 × H200"),
        ["0.0086 USD", "0.02 USD", "20,440 USD"]
    );
}

/// Imports a quote for the demo's offer (Cloud A, 8 × H200 SXM, USD): on demand 3.50 and reserved
/// at `reserved` per GPU-hour.
async fn reserved_quote(app: &common::TestApp, reserved: &str) {
    PriceSheet::new()
        .row(PriceRow::new("Cloud A", "H200 SXM", 8, "3.50").source("quote 7"))
        .row(
            PriceRow::new("Cloud A", "H200 SXM", 8, reserved)
                .reserved()
                .valid_from("2026-11-02")
                .source("quote 7 (1 year)"),
        )
        .import(app)
        .await;
}

fn dec(v: &serde_json::Value) -> rust_decimal::Decimal {
    v.as_str()
        .unwrap_or_else(|| panic!("{v} is not a decimal string"))
        .parse()
        .unwrap()
}

#[tokio::test]
async fn a_manager_approves_the_computed_reservation_and_the_first_screen_shows_its_figures() {
    let app = spawn_app().await;
    let state = AppState::new(app.pool.clone(), AppConfig::default(), app.keys.clone());
    let loaded = demo::load(&state).await.unwrap();
    let review = format!("/briefs/{}/review", loaded.brief_id);

    // An engineer sees the review but no form, and a forged POST is refused.
    let engineer = app.login(Role::Engineer).await;
    let html = engineer.get(app.url(&review)).await.text().await.unwrap();
    assert!(
        html.contains("data-decision=\"expand\""),
        "no reserved price known: rule 8b"
    );
    assert!(!html.contains("approval-form"));
    let digest = html.split("name=\"inputs_digest\" value=\"").nth(1);
    assert!(digest.is_none(), "no digest is offered to an engineer");
    let res = engineer
        .client
        .post(app.url(&review))
        .form(&[
            ("csrf_token", engineer.csrf.as_str()),
            ("verdict", "approve"),
            ("inputs_digest", "x"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 403);

    let (b, manager) = browser::signed_in(&app, Role::Manager).await;
    // A laptop: what is decided, why, whether it is approved and what it costs are on the first
    // screen.
    b.client.set_window_size(1366, 768).await.unwrap();
    let api = format!("/api/v1/briefs/{}/review", loaded.brief_id);
    let chosen_of = |json: &serde_json::Value| {
        json["trials"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["trial"] == json["trial"])
            .unwrap()
            .clone()
    };
    let usd = |d: rust_decimal::Decimal| rentcheck::figures::sum_with_currency(d, "USD");

    // Before any reserved quote: busy, but no reserved price of the offer is known, so nothing is
    // reserved (rule 8b) and the page says below which reserved price reserving would pay, with
    // the price import one click away.
    b.client.goto(&app.url(&review)).await.unwrap();
    b.shot("review-before-quote-1366").await;
    b.client.set_window_size(390, 844).await.unwrap();
    b.shot("review-before-quote-390").await;
    b.client.set_window_size(1366, 768).await.unwrap();
    assert_eq!(b.text("#decision .big").await.to_lowercase(), "expand");
    let before = chosen_of(&app.get(&api).await.json().await.unwrap());
    assert_eq!(before["reserved_price_needed"], true);
    let below = rentcheck::figures::with_currency(dec(&before["reserve_pays_below_rate"]), "USD");
    let why = b.text("#why").await;
    assert!(
        why.contains("no reserved price of this offer is known, so nothing is reserved")
            && why.contains(&format!("below {below} per GPU-hour")),
        "{why}"
    );
    let versus = b.text("#figure-reserved-vs-on-demand").await;
    assert!(
        versus.contains(&format!(
            "reserving would pay at a reserved price below {below} per GPU-hour"
        )),
        "{versus}"
    );
    assert!(
        !versus.contains("20,440"),
        "never the on-demand cost of every hour: {versus}"
    );
    let import = b
        .client
        .find(fantoccini::Locator::Css("#reserved-price-import"))
        .await
        .unwrap()
        .attr("href")
        .await
        .unwrap()
        .unwrap();
    assert!(
        import.starts_with("/prices?offer_provider=Cloud+A&offer_gpu=H200+SXM&offer_gpu_count=8"),
        "{import}"
    );

    // A real quote of 2.60 (break-even 74.3 %, reserve from 79.3 %): the comparison like for like,
    // reserved against on demand for the busy hours only, every figure the JSON's.
    reserved_quote(&app, "2.60").await;
    b.client.goto(&app.url(&review)).await.unwrap();
    b.shot("review-quote-2.60-1366").await;
    b.client.set_window_size(390, 844).await.unwrap();
    b.shot("review-quote-2.60-390").await;
    b.client.set_window_size(1366, 768).await.unwrap();
    let quoted = chosen_of(&app.get(&api).await.json().await.unwrap());
    assert_eq!(quoted["decision"], "expand");
    assert_eq!(
        dec(&quoted["reserved_monthly"]),
        "15184".parse().unwrap(),
        "8 × 2.60 × 730"
    );
    let busy_monthly = dec(&quoted["on_demand_busy_monthly"]);
    let utilization = dec(&quoted["utilization"]);
    assert_eq!(
        busy_monthly,
        (rust_decimal::Decimal::from(8 * 730) * "3.50".parse::<rust_decimal::Decimal>().unwrap() * utilization)
            .round_dp(2),
        "8 × 3.50 × 730 × busy share"
    );
    assert_eq!(
        dec(&quoted["reserve_saving_monthly"]),
        busy_monthly - dec(&quoted["reserved_monthly"])
    );
    let versus = b.text("#figure-reserved-vs-on-demand").await;
    assert!(
        versus.contains(&format!(
            "reserved 15,184 USD against {} on demand for the busy hours",
            usd(busy_monthly)
        )) && versus.contains("reserving pays from 79.3 % busy (break-even 74.3 %"),
        "{versus}"
    );
    assert!(
        !versus.contains("20,440"),
        "never the on-demand cost of every hour: {versus}"
    );

    // A quote of 2.45 (break-even 70 %, reserve from 75 %): reserve.
    reserved_quote(&app, "2.45").await;
    b.client.goto(&app.url(&review)).await.unwrap();
    assert_eq!(b.text("#decision .big").await.to_lowercase(), "reserve");
    assert_eq!(
        b.text("#decision-meaning").await,
        "commit to this allocation for a term at a lower rate"
    );
    assert_eq!(
        b.text("h1").await,
        "Review: Support chat — Llama 3.1 70B on 8 × H200 (demo)"
    );
    let why = b.text("#why").await;
    assert!(
        why.contains("The 8 × H200 SXM trial met every target and the GPUs were busy 77.7 % of paid hours, past the 70 % at which its reserved price pays"),
        "{why}"
    );
    assert_eq!(b.text("#approval-top").await, "Not approved yet.");
    let summary = b.text("#brief-summary").await;
    assert!(summary.contains("meta-llama/Llama-3.1-70B-Instruct"), "{summary}");
    assert!(
        summary.contains("8 × H200 SXM at Cloud A, on-demand at 3.50 USD per GPU-hour"),
        "{summary}"
    );
    let cost = b.text("#figure-cost-per-job").await;
    assert!(
        cost.contains("0.0086 USD") && cost.contains("within the ceiling of 0.02 USD"),
        "{cost}"
    );
    // The reservation the review computed: at the reserved row, 8 × 2.45 × 730.
    let commitment = b.text("#figure-commitment").await;
    assert!(commitment.contains("14,308 USD"), "{commitment}");
    let screen = viewport_height(&b).await;
    for css in [
        "h1",
        "#decision",
        "#why",
        "#approval-top",
        "#brief-summary",
        "#figure-cost-per-job",
        "#figure-commitment",
    ] {
        let at = bottom(&b, css).await;
        assert!(
            at <= screen,
            "{css} ends at {at} px, below the first screen ({screen} px)"
        );
    }
    let raw = raw_figures(&page_text(&b).await);
    assert!(raw.is_empty(), "raw figures on the review: {raw:?}");
    // The whole page, for looking at (RENTCHECK_SCREENSHOT_DIR).
    if std::env::var("RENTCHECK_SCREENSHOT_DIR").is_ok() {
        for id in [
            "trials-comparison",
            "money",
            "reasons",
            "criteria",
            "latency-chart",
            "approval",
        ] {
            b.client
                .execute(&format!("document.getElementById('{id}').scrollIntoView()"), vec![])
                .await
                .unwrap();
            b.shot_window(&format!("review-part-{id}")).await;
        }
        b.client.execute("window.scrollTo(0, 0)", vec![]).await.unwrap();
    }

    // The form holds the computed reservation: its figures read-only, the term and start the
    // manager's; the preview follows the term.
    assert_eq!(b.value("reservation.gpu").await, "H200 SXM");
    assert_eq!(b.value("reservation.count").await, "8");
    assert_eq!(b.value("reservation.billing").await, "reserved");
    assert_eq!(b.value("reservation.rate_per_gpu_hour").await, "2.45");
    assert_eq!(b.text("#monthly-cost").await, "14,308 USD a month", "8 × 2.45 × 730 h");
    b.fill("reservation.term_months", "12").await;
    assert_eq!(b.text("#term-cost").await, "171,696 USD over 12 months");
    let preview = b.text("#reservation-comparison").await;
    assert!(
        preview.starts_with("Reserving saves "),
        "the approval preview compares too: {preview}"
    );
    assert_eq!(
        b.text("#approve-button").await,
        "Approve: reserve 8 × H200 SXM for 12 months — trial “8 × H200 · Cloud A”"
    );
    b.fill(
        "comment",
        "Steady at 78 % utilization; a reserved price is being asked for.",
    )
    .await;
    b.click("button[value='approve']").await;

    // Post/redirect/get: the confirmation is at the top and says what was recorded.
    assert!(b
        .client
        .current_url()
        .await
        .unwrap()
        .query()
        .unwrap_or("")
        .starts_with("decided="));
    let feedback = b.text("#verdict-feedback").await;
    assert!(
        feedback.starts_with(&format!("Approved by {manager} at "))
            && feedback.contains("reserve 8 × H200 SXM for 12 months, 14,308 USD a month, 171,696 USD in all."),
        "{feedback}"
    );
    let at = bottom(&b, "#verdict-feedback").await;
    assert!(at <= 300.0, "the confirmation ends {at} px down the page");
    b.shot("review-approved-1366").await;
    assert_eq!(b.text(".approval-state .badge").await, "approved");
    assert!(b
        .text("#approval")
        .await
        .contains("8 × H200 SXM (1 replica of 8 GPUs), reserved, 12 months"));
    assert!(b
        .text("#approval-top")
        .await
        .starts_with(&format!("Approved (reserve) — 8 × H200 · Cloud A, by {manager} on ")));
    // A reload shows the same page and records nothing again.
    b.client.refresh().await.unwrap();
    assert!(b.text("#verdict-feedback").await.starts_with("Approved by"));

    // Every amount on the first screen is a figure of the review's JSON and the stored reservation.
    let json: serde_json::Value = app
        .get(&format!("/api/v1/briefs/{}/review", loaded.brief_id))
        .await
        .json()
        .await
        .unwrap();
    let stored: serde_json::Value = sqlx::query_scalar("SELECT reservation FROM approvals WHERE brief_id = $1")
        .bind(loaded.brief_id)
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert_eq!(json["approval"]["reservation"], stored);
    let chosen = json["trials"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["trial"] == json["trial"])
        .unwrap();
    let computed = &chosen["reservation"];
    for field in [
        "trial",
        "gpu",
        "gpus_per_node",
        "replicas",
        "gpus",
        "billing",
        "rate_per_gpu_hour",
        "currency",
        "monthly_cost",
        "note",
    ] {
        assert_eq!(
            stored[field], computed[field],
            "{field}: the stored reservation is the computed one"
        );
    }
    assert_eq!(stored["term_months"], 12, "the manager's term");
    let currency = json["trials"][0]["money"]["currency"].as_str().unwrap().to_owned();
    let monthly = dec(&stored["monthly_cost"]);
    let figures = [
        dec(&json["ledger"]["cost_per_job"]),
        dec(&json["approval"]["reservation"]["rate_per_gpu_hour"]),
        monthly,
        monthly * rust_decimal::Decimal::from(stored["term_months"].as_u64().unwrap()),
        dec(&chosen["money"]["reservation_rates"]["on_demand_rate"]),
        dec(&chosen["reserved_monthly"]),
        dec(&chosen["on_demand_busy_monthly"]),
        dec(&chosen["reserve_saving_monthly"]),
        "0.02".parse().unwrap(), // the brief's ceiling
    ];
    let expected: Vec<String> = figures
        .iter()
        .flat_map(|d| {
            [
                rentcheck::figures::with_currency(*d, &currency),
                rentcheck::figures::sum_with_currency(*d, &currency),
            ]
        })
        .collect();
    let mut first_screen = String::new();
    for css in ["#decision", "#brief-summary", "#money-figures"] {
        first_screen.push_str(&b.text(css).await);
        first_screen.push('\n');
    }
    let shown = amounts(&first_screen);
    assert!(shown.len() >= 5, "{first_screen}");
    for amount in &shown {
        assert!(
            expected.contains(amount),
            "{amount} on the first screen is no figure of the review or the reservation ({expected:?}):\n{first_screen}"
        );
    }
    assert!(
        shown.contains(&"171,696 USD".to_owned()),
        "the recorded commitment: {first_screen}"
    );

    // A phone: the same first facts, no sideways scrolling.
    b.client.set_window_size(390, 844).await.unwrap();
    b.client.goto(&app.url(&review)).await.unwrap();
    b.shot("review-390").await;
    let overflow = b
        .client
        .execute(
            "const d = document.documentElement; return d.scrollWidth - d.clientWidth",
            vec![],
        )
        .await
        .unwrap();
    assert!(
        overflow.as_i64().unwrap() <= 0,
        "the review is {overflow} px wider than a 390 px phone"
    );
    b.client.goto(&app.url("/")).await.unwrap();
    b.shot("dashboard").await;
    let row = b.text(".approval-cell").await;
    assert!(row.contains("approved reserve"), "{row}");
    b.close().await;

    let stored: (String, String, Option<i32>) =
        sqlx::query_as("SELECT verdict, decision, reservation_count FROM approvals WHERE brief_id = $1")
            .bind(loaded.brief_id)
            .fetch_one(&app.pool)
            .await
            .unwrap();
    assert_eq!(stored, ("approve".into(), "reserve".into(), Some(8)));
}

#[tokio::test]
async fn a_bad_approval_keeps_the_input_and_says_what_is_wrong_at_the_field() {
    let app = spawn_app().await;
    let state = AppState::new(app.pool.clone(), AppConfig::default(), app.keys.clone());
    let loaded = demo::load(&state).await.unwrap();
    let review = format!("/briefs/{}/review", loaded.brief_id);
    let manager = app.user(Role::Manager).await;
    let b = browser::launch().await;
    reserved_quote(&app, "2.45").await;
    b.sign_in_as(&app, &manager).await;
    b.client.set_window_size(1366, 768).await.unwrap();
    b.client.goto(&app.url(&review)).await.unwrap();
    b.fill("reservation.start", "next week").await;
    b.fill("reservation.term_months", "0").await;
    b.fill("comment", "Reserve for the quarter").await;
    b.click("button[value='approve']").await;

    // What is wrong is at the top, linked to each field, and at the field itself.
    let problem = b.text("#verdict-problem").await;
    assert!(
        problem.contains("Nothing was recorded: 2 fields to correct below."),
        "{problem}"
    );
    assert!(bottom(&b, "#verdict-problem").await <= viewport_height(&b).await);
    assert_eq!(
        b.text("#reservation-start-error").await,
        "Must be a date like 2026-12-01"
    );
    assert_eq!(
        b.text("#reservation-term_months-error").await,
        "Must be a whole number from 1 to 60"
    );
    let attr = |css: &'static str, name: &'static str| {
        let b = &b;
        async move {
            b.client
                .find(fantoccini::Locator::Css(css))
                .await
                .unwrap()
                .attr(name)
                .await
                .unwrap()
        }
    };
    assert_eq!(
        attr("#reservation-start", "aria-invalid").await.as_deref(),
        Some("true")
    );
    assert_eq!(
        attr("#reservation-start", "aria-describedby").await.as_deref(),
        Some("reservation-start-error")
    );
    assert_eq!(attr("#reservation-rate_per_gpu_hour", "aria-invalid").await, None);
    assert_eq!(
        attr("#reservation-rate_per_gpu_hour", "readonly").await.as_deref(),
        Some("true"),
        "the rate is the review's"
    );
    // Everything typed is still there; the preview is the computed reservation's.
    assert_eq!(b.value("reservation.start").await, "next week");
    assert_eq!(b.value("reservation.term_months").await, "0");
    assert_eq!(b.value("reservation.rate_per_gpu_hour").await, "2.45");
    assert_eq!(b.value("comment").await, "Reserve for the quarter");
    assert_eq!(b.text("#monthly-cost").await, "14,308 USD a month");
    b.shot("review-invalid-1366").await;
    b.client
        .execute("document.getElementById('approval').scrollIntoView()", vec![])
        .await
        .unwrap();
    b.shot("review-invalid-form-1366").await;

    // Corrected, it records what the preview says.
    b.fill("reservation.term_months", "3").await;
    b.fill("reservation.start", "2026-12-01").await;
    assert_eq!(b.text("#term-cost").await, "42,924 USD over 3 months");
    b.click("button[value='approve']").await;
    assert!(b
        .text("#verdict-feedback")
        .await
        .contains("14,308 USD a month, 42,924 USD in all"));
    b.close().await;
    let n: i64 = sqlx::query_scalar("SELECT count(*) FROM approvals WHERE brief_id = $1")
        .bind(loaded.brief_id)
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert_eq!(n, 1);
}

#[tokio::test]
async fn without_javascript_the_preview_after_a_submit_is_the_figure_recorded() {
    let app = spawn_app().await;
    let state = AppState::new(app.pool.clone(), AppConfig::default(), app.keys.clone());
    let loaded = demo::load(&state).await.unwrap();
    let review = format!("/briefs/{}/review", loaded.brief_id);
    reserved_quote(&app, "2.45").await;
    let manager = app.login(Role::Manager).await;
    let html = manager.get(app.url(&review)).await.text().await.unwrap();
    let digest = html
        .split("name=\"inputs_digest\" value=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap()
        .to_owned();
    // No trial named: the recommended one (the demo's 8 × H200).
    let form = |rate: &'static str, start: &'static str| {
        vec![
            ("csrf_token", manager.csrf.clone()),
            ("inputs_digest", digest.clone()),
            ("verdict", "approve".to_owned()),
            ("reservation.rate_per_gpu_hour", rate.to_owned()),
            ("reservation.term_months", "12".to_owned()),
            ("reservation.start", start.to_owned()),
            ("comment", "".to_owned()),
        ]
    };
    // A rate of the manager's own is refused at its field: the approval records the review's.
    let res = manager
        .client
        .post(app.url(&review))
        .form(&form("2.30", "2026-12-01"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 422);
    let page = res.text().await.unwrap();
    assert!(page.contains("is what the review computed (2.45 USD)"), "{page}");
    // A bad date: 422, and the page previews the computed figure for the term typed.
    let res = manager
        .client
        .post(app.url(&review))
        .form(&form("2.45", "soon"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 422);
    let page = res.text().await.unwrap();
    assert!(
        page.contains("id=\"monthly-cost\" aria-live=\"polite\">14,308 USD a month<"),
        "preview of 8 × 2.45 × 730"
    );
    assert!(
        page.contains("aria-invalid=\"true\" aria-describedby=\"reservation-start-error\""),
        "{}",
        &page[page.find("verdict-problem").unwrap_or(0)..]
    );
    // Corrected: 303 to the review with the confirmation, and the same figure recorded.
    let res = manager
        .client
        .post(app.url(&review))
        .form(&form("2.45", "2026-12-01"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 303);
    let location = res.headers()["location"].to_str().unwrap().to_owned();
    assert!(location.starts_with(&format!("{review}?decided=")), "{location}");
    let page = manager.get(app.url(&location)).await.text().await.unwrap();
    assert!(
        page.contains("14,308 USD a month, 171,696 USD in all."),
        "the confirmation names the figure"
    );
    let monthly: Option<rust_decimal::Decimal> =
        sqlx::query_scalar("SELECT reservation_monthly_cost FROM approvals WHERE brief_id = $1")
            .bind(loaded.brief_id)
            .fetch_one(&app.pool)
            .await
            .unwrap();
    assert_eq!(monthly, Some("14308.00".parse().unwrap()));
}

#[tokio::test]
async fn a_fresh_brief_review_says_what_is_missing_and_commits_nothing() {
    let app = spawn_app().await;
    let id = app.brief_id().await;
    let (b, _) = browser::signed_in(&app, Role::Manager).await;
    b.client.set_window_size(1366, 768).await.unwrap();
    b.client.goto(&app.url(&format!("/briefs/{id}/review"))).await.unwrap();
    b.shot("review-fresh-1366").await;
    assert_eq!(b.text("#decision .big").await.to_lowercase(), "expand");
    let why = b.text("#why").await;
    // As many as the review's JSON lists as missing (the default card for the suggested allocation).
    let review: serde_json::Value = app
        .get(&format!("/api/v1/briefs/{id}/review"))
        .await
        .json()
        .await
        .unwrap();
    let missing: usize = review["missing"]
        .as_object()
        .map(|m| m.values().map(|keys| keys.as_array().map_or(0, Vec::len)).sum())
        .unwrap_or_else(|| panic!("missing by stage: {review}"));
    assert!(
        why.starts_with(&format!(
            "{missing} required measurements are still missing (in stages 1, 2, 3, 4 and 5, listed below)"
        )) && why.contains("keep the short rental until they are measured"),
        "{why}"
    );
    assert!(!why.contains("serving."), "names, not metric keys: {why}");
    assert!(b.text("#figure-cost-per-job").await.contains("not known yet"));
    assert!(b.text("#figure-commitment").await.contains("nothing committed"));
    let screen = viewport_height(&b).await;
    for css in [
        "#decision",
        "#brief-summary",
        "#figure-cost-per-job",
        "#figure-commitment",
    ] {
        let at = bottom(&b, css).await;
        assert!(
            at <= screen,
            "{css} ends at {at} px, below the first screen ({screen} px)"
        );
    }
    let raw = raw_figures(&page_text(&b).await);
    assert!(raw.is_empty(), "raw figures on the review: {raw:?}");
    b.close().await;
}

/// The review's JSON trial id of the demo trial called `name`.
fn trial_id(json: &serde_json::Value, name: &str) -> String {
    json["trials"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == name)
        .unwrap_or_else(|| panic!("no trial {name} in {json}"))["trial"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[tokio::test]
async fn the_approve_button_names_the_trial_chosen_and_that_trial_is_what_is_recorded() {
    let app = spawn_app().await;
    let state = AppState::new(app.pool.clone(), AppConfig::default(), app.keys.clone());
    let loaded = demo::load(&state).await.unwrap();
    let review = format!("/briefs/{}/review", loaded.brief_id);
    let json: serde_json::Value = app
        .get(&format!("/api/v1/briefs/{}/review", loaded.brief_id))
        .await
        .json()
        .await
        .unwrap();
    let first = trial_id(&json, "8 × H200 · Cloud A");
    let second = trial_id(&json, "4 × H100 · Cloud B");
    let second_decision = json["trials"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["trial"] == second.as_str())
        .unwrap()["decision"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(second_decision, "stop", "the demo's second trial misses its targets");

    let (b, manager) = browser::signed_in(&app, Role::Manager).await;
    b.client.set_window_size(1366, 768).await.unwrap();
    b.client.goto(&app.url(&review)).await.unwrap();
    let before = b.text("#approve-button").await;
    assert!(before.ends_with("— trial “8 × H200 · Cloud A”"), "{before}");
    // Choosing the second trial: the button says that trial's action at once, and the reservation
    // fields of the first are set aside.
    b.select("trial", &second).await;
    let words = b.text("#approve-button").await;
    assert_eq!(words, "Approve: stop renting 4 × H100 SXM — trial “4 × H100 · Cloud B”");
    assert_eq!(
        b.text("#trial-named").await,
        "This form approves trial “4 × H100 · Cloud B”."
    );
    let fieldset_hidden = b
        .client
        .execute(
            "const f = document.querySelector('fieldset.reservation'); return !f || (f.hidden && f.disabled)",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(fieldset_hidden, serde_json::json!(true));
    // Back to the first and again to the second: the words always follow the select.
    b.select("trial", &first).await;
    assert!(b
        .text("#approve-button")
        .await
        .ends_with("— trial “8 × H200 · Cloud A”"));
    b.select("trial", &second).await;
    b.fill("comment", "Cloud B cannot carry the load; we stop renting it.")
        .await;
    b.click("#approve-button").await;

    let feedback = b.text("#verdict-feedback").await;
    assert!(feedback.contains("stop renting 4 × H100 SXM"), "{feedback}");
    let top = b.text("#approval-top").await;
    assert!(
        top.starts_with(&format!("Approved (stop) — 4 × H100 · Cloud B, by {manager} on ")),
        "the first screen names the approved trial beside the state: {top}"
    );
    assert!(b
        .text(".approval-state")
        .await
        .contains("stop — trial “4 × H100 · Cloud B”"));
    b.shot("review-second-trial-approved-1366").await;
    b.close().await;

    let (trial, decision): (uuid::Uuid, String) =
        sqlx::query_as("SELECT trial_id, decision FROM approvals WHERE brief_id = $1")
            .bind(loaded.brief_id)
            .fetch_one(&app.pool)
            .await
            .unwrap();
    assert_eq!((trial.to_string(), decision.as_str()), (second, "stop"));
}

#[tokio::test]
async fn without_javascript_choosing_a_trial_reloads_the_form_with_its_words() {
    let app = spawn_app().await;
    let state = AppState::new(app.pool.clone(), AppConfig::default(), app.keys.clone());
    let loaded = demo::load(&state).await.unwrap();
    let review = format!("/briefs/{}/review", loaded.brief_id);
    let manager = app.login(Role::Manager).await;
    let json: serde_json::Value = manager
        .get(app.url(&format!("/api/v1/briefs/{}/review", loaded.brief_id)))
        .await
        .json()
        .await
        .unwrap();
    let second = trial_id(&json, "4 × H100 · Cloud B");
    // The choice is a GET of its own (a form apart from the approval's), so it carries no token.
    let html = manager.get(app.url(&review)).await.text().await.unwrap();
    assert!(
        html.contains("<form method=\"get\" action=\""),
        "the trial choice is a form of its own"
    );
    assert!(html.contains("id=\"show-trial\""));
    let html = manager
        .get(app.url(&format!("{review}?trial={second}")))
        .await
        .text()
        .await
        .unwrap();
    assert!(
        html.contains(">Approve: stop renting 4 × H100 SXM — trial “4 × H100 · Cloud B”</button>"),
        "the reloaded form's button names the chosen trial"
    );
    assert!(html.contains(&format!("name=\"trial\" id=\"trial-chosen\" value=\"{second}\"")));
    assert!(
        !html.contains("name=\"reservation.count\""),
        "stop records no reservation"
    );
    // A trial that is not the brief's leaves the form on the recommended one.
    let html = manager
        .get(app.url(&format!("{review}?trial=not-a-trial")))
        .await
        .text()
        .await
        .unwrap();
    assert!(html.contains("— trial “8 × H200 · Cloud A”</button>"));
    let digest = html
        .split("name=\"inputs_digest\" value=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap()
        .to_owned();
    let res = manager
        .client
        .post(app.url(&review))
        .form(&[
            ("csrf_token", manager.csrf.as_str()),
            ("inputs_digest", digest.as_str()),
            ("trial", second.as_str()),
            ("verdict", "approve"),
            ("comment", "Cloud B misses the targets: stop it."),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 303);
    let page = manager.get(app.url(&review)).await.text().await.unwrap();
    assert!(
        page.contains("Approved (stop) — 4 × H100 · Cloud B, by "),
        "the first screen names the trial"
    );
}
