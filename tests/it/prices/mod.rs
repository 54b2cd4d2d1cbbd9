//! Price sheets: imported all or nothing by managers, kept as imported, the newest row of each offer
//! current; the sizing shows each option's cheapest current price in the brief's currency; a trial
//! can start from a price. A browser test imports a sheet on `/prices` and sees it in the sizing.

mod imports;

use crate::common;
use crate::common::builders::{PriceRow, PriceSheet};

use common::{browser, spawn_app, TestApp};
use rentcheck::auth::Role;
use serde_json::{json, Value};

const HEADER: &str = "provider,gpu,gpu_count,billing,rate_per_gpu_hour,currency,region,valid_from,source\n";

async fn current(app: &TestApp) -> Vec<Value> {
    let v: Value = app.get("/api/v1/prices").await.json().await.unwrap();
    v["items"].as_array().unwrap().clone()
}

#[tokio::test]
async fn a_sheet_is_all_or_nothing_and_the_newest_row_of_each_offer_is_current() {
    let app = spawn_app().await;
    let bad = PriceSheet::new()
        .row(PriceRow::new("Cloud A", "H100 SXM", 8, "2.99").source("https://a.example/pricing"))
        .row(PriceRow::new("Cloud B", "H100 SXM", 1, "$2.49").source("quote 7"));
    let res = bad.import_as(&app, Role::Manager).await;
    assert_eq!(res.status(), 422);
    let problem: Value = res.json().await.unwrap();
    assert_eq!(problem["errors"][0]["field"], "line 3, column 5 (rate_per_gpu_hour)");
    assert!(current(&app).await.is_empty(), "nothing of a refused sheet is stored");

    let res = PriceSheet::new()
        .row(PriceRow::new("A", "H100 SXM", 8, "2.99").source("q"))
        .import_as(&app, Role::Engineer)
        .await;
    assert_eq!(res.status(), 403, "managers and admins import prices");

    let sheet = PriceSheet::new()
        .row(
            PriceRow::new("Cloud A", "H100 SXM", 8, "2.99")
                .region("us-east")
                .source("https://a.example/pricing"),
        )
        .row(PriceRow::new("Cloud B", "H100 SXM", 1, "2.49").source("quote 7"))
        .row(
            PriceRow::new("Cloud C", "H100 SXM", 1, "1.10")
                .currency("EUR")
                .source("quote 9"),
        )
        .row(
            PriceRow::new("Cloud B", "H100 SXM", 1, "0.50")
                .valid_from("2099-01-01")
                .source("a promise"),
        );
    let res = sheet.import_as(&app, Role::Manager).await;
    assert_eq!(res.status(), 201, "{}", res.text().await.unwrap());
    assert_eq!(res.json::<Value>().await.unwrap()["rows"], 4);
    let now = current(&app).await;
    assert_eq!(now.len(), 3, "a price valid from a future date is not current yet");

    // A newer sheet changes one offer; the old row is kept in the history.
    let res = PriceSheet::new()
        .row(
            PriceRow::new("Cloud B", "H100 SXM", 1, "2.19")
                .valid_from("2026-11-15")
                .source("quote 8"),
        )
        .import_as(&app, Role::Admin)
        .await;
    assert_eq!(res.status(), 201);
    let now = current(&app).await;
    let b: Vec<&Value> = now.iter().filter(|p| p["provider"] == "Cloud B").collect();
    assert_eq!(b.len(), 1);
    assert_eq!(b[0]["rate_per_gpu_hour"], "2.19");
    let all: Value = app.get("/api/v1/prices?all=true").await.json().await.unwrap();
    assert_eq!(all["items"].as_array().unwrap().len(), 5, "sheets are kept as imported");
    // The same offer spelled in another case is the same offer: the newer row replaces it (the
    // older, cheaper "Cloud A" row stayed current beside it and priced trials).
    let res = PriceSheet::new()
        .row(
            PriceRow::new("cloud a", "H100 SXM", 8, "3.49")
                .region("US-EAST")
                .valid_from("2026-11-20")
                .source("q"),
        )
        .import_as(&app, Role::Admin)
        .await;
    assert_eq!(res.status(), 201);
    let now = current(&app).await;
    let a: Vec<&Value> = now
        .iter()
        .filter(|p| p["provider"].as_str().unwrap().eq_ignore_ascii_case("cloud a"))
        .collect();
    assert_eq!(a.len(), 1, "{a:?}");
    assert_eq!(a[0]["rate_per_gpu_hour"], "3.49");

    // Sheets cannot be edited behind rentcheck's back either.
    let edited = sqlx::query("UPDATE prices SET rate_per_gpu_hour = 0")
        .execute(&app.pool)
        .await;
    assert!(edited.is_err(), "the table refuses edits");
}

#[tokio::test]
async fn the_sizing_shows_the_cheapest_current_price_in_the_briefs_currency() {
    let app = spawn_app().await;
    let brief = app.brief_id().await;
    let sizing: Value = app
        .get(&format!("/api/v1/briefs/{brief}/sizing"))
        .await
        .json()
        .await
        .unwrap();
    assert!(
        sizing["options"][0].get("price_per_hour").is_none(),
        "no sheet, no price"
    );

    let res = PriceSheet::new()
        .row(PriceRow::new("Nodes Inc", "H100 SXM", 8, "2.00").source("q1"))
        .row(PriceRow::new("Single GPU Co", "H100 SXM", 1, "2.50").source("q2"))
        .row(PriceRow::new("Quad Cloud", "H100 SXM", 4, "2.60").source("q5"))
        .row(
            PriceRow::new("Euro Cloud", "H100 SXM", 4, "0.10")
                .currency("EUR")
                .source("q3"),
        )
        .row(PriceRow::new("Nodes Inc", "H200 SXM", 8, "3.00").source("q4"))
        .import_as(&app, Role::Manager)
        .await;
    assert_eq!(res.status(), 201);
    let sizing: Value = app
        .get(&format!("/api/v1/briefs/{brief}/sizing"))
        .await
        .json()
        .await
        .unwrap();
    let option = |gpu: &str| {
        sizing["options"]
            .as_array()
            .unwrap()
            .iter()
            .find(|o| o["gpu"] == gpu)
            .unwrap()
            .clone()
    };
    let h100 = option("H100 SXM");
    let count = h100["count"].as_u64().unwrap();
    assert_eq!(
        count, 4,
        "a 70B model in bf16 with its KV cache, tensor-parallel, takes 4 × H100"
    );
    // One offer, one price (the contract changed: a row prices only its own node shape). The
    // 4 GPUs run tensor-parallel in one 4-GPU node: 4 × 2.60 = 10.40 an hour. Four 1-GPU
    // instances (10.00) are not that layout, an 8-GPU node is another offer, and the euro offer
    // is never compared with dollars. A month is 730 hours: 7,592.00.
    assert_eq!(h100["price_per_hour"], "10.40");
    assert_eq!(h100["price_per_month"], "7592.00");
    assert_eq!(h100["provider"], "Quad Cloud");
    assert_eq!(
        (h100["gpus_per_node"].as_u64(), h100["nodes"].as_u64()),
        (Some(4), Some(1))
    );
    assert!(option("L40S").get("price_per_hour").is_none());

    let by_price: Value = app
        .get(&format!("/api/v1/briefs/{brief}/sizing?order=price"))
        .await
        .json()
        .await
        .unwrap();
    let priced: Vec<&str> = by_price["options"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|o| o["fits"] == true && o.get("price_per_hour").is_some())
        .map(|o| o["gpu"].as_str().unwrap())
        .collect();
    assert_eq!(
        priced.first(),
        Some(&"H100 SXM"),
        "the cheapest fitting option first: {priced:?}"
    );
    assert_eq!(
        by_price["options"][0]["gpu"], "H100 SXM",
        "priced fitting options come before unpriced ones"
    );
    let res = app.get(&format!("/api/v1/briefs/{brief}/sizing?order=cost")).await;
    assert_eq!(res.status(), 422);
}

#[tokio::test]
async fn a_manager_imports_a_sheet_on_the_page_and_an_engineer_starts_a_trial_from_a_price() {
    let app = spawn_app().await;
    let brief = app.brief_id().await;
    let (b, _) = browser::signed_in(&app, Role::Manager).await;
    b.client.goto(&app.url("/prices")).await.unwrap();
    assert!(b.text("#current").await.contains("No prices yet"));

    // A typo is shown at its cell and nothing is stored.
    b.fill(
        "csv",
        &format!("{HEADER}Cloud B,H100 SXM,4,on-demand,2.49 USD,USD,,2026-11-01,quote 7\n"),
    )
    .await;
    b.click("#import form.brief-form button[type='submit']").await;
    assert!(b
        .text("#sheet-errors")
        .await
        .contains("line 2, column 5 (rate_per_gpu_hour)"));
    b.fill(
        "csv",
        &format!("{HEADER}Cloud B,H100 SXM,4,on-demand,2.49,USD,,2026-11-01,quote 7\n"),
    )
    .await;
    b.click("#import form.brief-form button[type='submit']").await;
    assert!(b.text("#preview").await.contains("2.49 USD"));
    b.shot("prices-preview").await;
    b.click("#confirm-import").await;
    assert!(b.text("#notice").await.contains("Imported 1 prices"));
    assert!(b.text("#current").await.contains("Cloud B"));

    b.close().await;

    // The brief's owner sees it in the brief page's sizing, and starts a trial from it.
    let b = browser::launch().await;
    b.sign_in_as(&app, common::OWNER_EMAIL).await;
    b.client.goto(&app.url(&format!("/briefs/{brief}"))).await.unwrap();
    let sizing = b.text("#sizing").await;
    assert!(sizing.contains("9.96 USD/h"), "4 × 2.49: {sizing}");
    assert!(sizing.contains("7,270.80 a month"), "9.96 × 730 h: {sizing}");
    b.shot("brief-sizing-prices").await;
    b.click("#sizing a[href*='price=']").await;
    assert_eq!(b.value("provider").await, "Cloud B");
    assert_eq!(b.value("gpu_count").await, "4");
    assert_eq!(b.value("rate_per_gpu_hour").await, "2.49");
    b.click("form.brief-form button[type='submit']").await;
    let trials: Value = app
        .get(&format!("/api/v1/briefs/{brief}/trials"))
        .await
        .json()
        .await
        .unwrap();
    let second = &trials["items"][1];
    assert_eq!(
        (
            second["provider"].clone(),
            second["gpu"].clone(),
            second["gpu_count"].clone()
        ),
        (json!("Cloud B"), json!("H100 SXM"), json!(4))
    );
    // One offer, one price: the review and the decision record show the sizing's 9.96 an hour
    // (4 × 2.49) for that trial, and the API says the same.
    let review = app.get_json(&format!("/api/v1/briefs/{brief}/review")).await;
    let priced = review["trials"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["trial"] == second["id"])
        .unwrap()
        .clone();
    assert_eq!(
        priced["money"]["cost_per_hour"]
            .as_str()
            .and_then(|c| c.parse::<f64>().ok()),
        Some(9.96),
        "{priced}"
    );
    for page in ["review", "decision"] {
        b.client
            .goto(&app.url(&format!("/briefs/{brief}/{page}")))
            .await
            .unwrap();
        let text = b.text("main").await;
        assert!(text.contains("9.96 USD"), "{page}: {text}");
        assert!(
            !text.contains("19.92 USD"),
            "{page} never prices the 4 GPUs as an 8-GPU node"
        );
    }
    b.close().await;
}
