//! Prices from where they already live: real excerpts of SkyPilot's offer catalogues imported with
//! `format=skypilot` (per-GPU rates from instance prices, spot rows, zones and instance types of one
//! offer folded to the lowest price, unknown accelerators and CPU-only rows listed), previewed and
//! confirmed on `/prices`, and used by the sizing like any other row, billing named.

use crate::common;
use crate::common::builders::{BriefBuilder, PriceSheet};

use common::{bearer_client, fixture, spawn_app};
use rentcheck::auth::Role;
use serde_json::Value;

fn aws() -> String {
    String::from_utf8(fixture("skypilot-catalog/aws-vms-v5-excerpt.csv")).unwrap()
}

/// (gpu, GPUs per instance, billing, region, rate per GPU-hour, source) of each row.
fn offers(prices: &Value) -> Vec<(String, i64, String, String, String, String)> {
    let mut rows: Vec<_> = prices
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["gpu"].as_str().unwrap().to_owned(),
                p["gpu_count"].as_i64().unwrap(),
                p["billing"].as_str().unwrap().to_owned(),
                p["region"].as_str().unwrap().to_owned(),
                p["rate_per_gpu_hour"].as_str().unwrap().to_owned(),
                p["source"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    rows.sort();
    rows
}

fn row(
    gpu: &str,
    billing: &str,
    region: &str,
    rate: &str,
    instance: &str,
) -> (String, i64, String, String, String, String) {
    (
        gpu.into(),
        8,
        billing.into(),
        region.into(),
        rate.into(),
        format!("skypilot:{instance}"),
    )
}

#[tokio::test]
async fn a_real_aws_catalogue_becomes_per_gpu_prices_zones_folded_and_unknown_names_listed() {
    let app = spawn_app().await;
    let res = PriceSheet::csv(aws())
        .query("format=skypilot&provider=AWS&valid_from=2026-11-01")
        .post(&app)
        .await;
    assert_eq!(res.status(), 201, "{}", res.text().await.unwrap());
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["catalogue_rows"], 36, "every row but the header was read");
    // Worked by hand from the excerpt: instance price ÷ 8 GPUs, the lowest of an offer's zones (and
    // instance types) kept, rounded to the table's 6 decimal places.
    let mut want = vec![
        // p3dn.24xlarge, two zones of us-east-1: 31.212 ÷ 8; spot min(3.9001, 3.2632) ÷ 8.
        row("V100 32GB SXM2", "on-demand", "us-east-1", "3.9015", "p3dn.24xlarge"),
        row("V100 32GB SXM2", "spot", "us-east-1", "0.4079", "p3dn.24xlarge"),
        // p4d.24xlarge: three zones of ap-south-1 without a spot price, 39.32 ÷ 8.
        row("A100 40GB SXM", "on-demand", "ap-south-1", "4.915", "p4d.24xlarge"),
        // us-east-1: 32.7726 ÷ 8; spot min(6.7915, 9.6107, 5.2117) ÷ 8 = 0.6514625 → 0.651463.
        row("A100 40GB SXM", "on-demand", "us-east-1", "4.096575", "p4d.24xlarge"),
        row("A100 40GB SXM", "spot", "us-east-1", "0.651463", "p4d.24xlarge"),
        // p4de.24xlarge, eight rows of six zones: 40.96575 ÷ 8 = 5.12071875; spot 5.8394 ÷ 8.
        row("A100 80GB SXM", "on-demand", "us-east-1", "5.120719", "p4de.24xlarge"),
        row("A100 80GB SXM", "spot", "us-east-1", "0.729925", "p4de.24xlarge"),
        // p5.48xlarge, six zones: 98.32 ÷ 8; spot 20.9934 (use1-az3) ÷ 8.
        row("H100 SXM", "on-demand", "us-east-1", "12.29", "p5.48xlarge"),
        row("H100 SXM", "spot", "us-east-1", "2.624175", "p5.48xlarge"),
        // p5e has no on-demand price: spot rows only.
        row("H200 SXM", "spot", "us-east-2", "1.808288", "p5e.48xlarge"),
        row("H200 SXM", "spot", "us-west-2", "1.9707", "p5e.48xlarge"),
        // p5en in ap-south-1: 101.76 ÷ 8; spot 12.1188 ÷ 8.
        row("H200 SXM", "on-demand", "ap-south-1", "12.72", "p5en.48xlarge"),
        row("H200 SXM", "spot", "ap-south-1", "1.51485", "p5en.48xlarge"),
        // ap-southeast-3 has both: p5en's spot 11.7024 ÷ 8 beats p5e's 14.925 ÷ 8 = 1.865625.
        row("H200 SXM", "on-demand", "ap-southeast-3", "14.628", "p5en.48xlarge"),
        row("H200 SXM", "spot", "ap-southeast-3", "1.4628", "p5en.48xlarge"),
    ];
    want.sort();
    assert_eq!(offers(&body["prices"]), want);
    assert_eq!(body["rows"], 15);
    assert!(body["prices"]
        .as_array()
        .unwrap()
        .iter()
        .all(|p| p["provider"] == "AWS" && p["currency"] == "USD" && p["valid_from"] == "2026-11-01"));

    // Left out, and said so: CPU-only instances, the 16 GB V100 the GPU catalogue does not have,
    // and the p5e rows with neither price.
    let skipped: Vec<(String, String, i64, Value)> = body["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["reason"].as_str().unwrap().to_owned(),
                s["accelerator"].as_str().unwrap().to_owned(),
                s["rows"].as_i64().unwrap(),
                s["instance_types"].clone(),
            )
        })
        .collect();
    assert_eq!(
        skipped,
        [
            ("cpu-only".into(), "".into(), 2, serde_json::json!(["a1.large"])),
            (
                "unknown-accelerator".into(),
                "V100".into(),
                2,
                serde_json::json!(["p3.2xlarge"])
            ),
            ("no-price".into(), "H200".into(), 3, serde_json::json!(["p5e.48xlarge"])),
        ]
    );
    assert_eq!(body["skipped"][1]["lines"], serde_json::json!([4, 5]));

    // They are current prices like a sheet's.
    let current: Value = app.get("/api/v1/prices").await.json().await.unwrap();
    assert_eq!(offers(&current["items"]), want);
}

#[tokio::test]
async fn a_malformed_catalogue_stores_nothing_and_another_column_order_reads_the_same() {
    let app = spawn_app().await;
    // One price cell spoilt: the whole file is refused, the cell named by line and column.
    let spoilt = aws().replacen(",98.32,20.993400,", ",98.32 USD,20.993400,", 1);
    let res = PriceSheet::csv(spoilt)
        .query("format=skypilot&provider=AWS")
        .post(&app)
        .await;
    assert_eq!(res.status(), 422);
    let problem: Value = res.json().await.unwrap();
    assert_eq!(problem["errors"][0]["field"], "line 24, column 7 (Price)");
    assert_eq!(app.count("prices").await, 0, "all or nothing");

    let res = PriceSheet::csv(aws()).query("format=skypilot").post(&app).await;
    assert_eq!(res.status(), 422, "a catalogue names its provider");
    let res = PriceSheet::csv(aws())
        .query("format=azure&provider=AWS")
        .post(&app)
        .await;
    assert_eq!(res.status(), 422);
    let engineer = bearer_client(&app.token(Role::Engineer, None).await)
        .post(app.url("/api/v1/prices?format=skypilot&provider=AWS"))
        .header("content-type", "text/csv")
        .body(aws())
        .send()
        .await
        .unwrap();
    assert_eq!(engineer.status(), 403, "managers and admins import prices");

    // Lambda's catalogue: Price before Region, GpuInfo after it, no AvailabilityZone column.
    let lambda = String::from_utf8(fixture("skypilot-catalog/lambda-vms-v5-excerpt.csv")).unwrap();
    let res = PriceSheet::csv(lambda)
        .query("format=skypilot&provider=Lambda&valid_from=2026-11-01")
        .post(&app)
        .await;
    assert_eq!(res.status(), 201);
    let body: Value = res.json().await.unwrap();
    let mut want = vec![
        // gpu_8x_a100: 10.32 ÷ 8.
        (
            "A100 40GB SXM".to_owned(),
            8,
            "on-demand".to_owned(),
            "us-east-1".to_owned(),
            "1.29".to_owned(),
            "skypilot:gpu_8x_a100".to_owned(),
        ),
        // Two regions are two offers: nothing folds.
        (
            "RTX A6000".into(),
            1,
            "on-demand".into(),
            "us-east-1".into(),
            "0.8".into(),
            "skypilot:gpu_1x_a6000".into(),
        ),
        (
            "RTX A6000".into(),
            1,
            "on-demand".into(),
            "us-west-1".into(),
            "0.8".into(),
            "skypilot:gpu_1x_a6000".into(),
        ),
    ];
    want.sort();
    assert_eq!(offers(&body["prices"]), want);
    assert_eq!(body["skipped"][1]["accelerator"], "V100");
}

#[tokio::test]
async fn the_sizing_prices_from_the_catalogue_in_whole_nodes_and_puts_spot_after_on_demand() {
    let app = spawn_app().await;
    let res = PriceSheet::csv(aws())
        .query("format=skypilot&provider=AWS&valid_from=2026-11-01")
        .post(&app)
        .await;
    assert_eq!(res.status(), 201);
    let h100_of = |sizing: &Value| {
        sizing["options"]
            .as_array()
            .unwrap()
            .iter()
            .find(|o| o["gpu"] == "H100 SXM")
            .unwrap()
            .clone()
    };
    let sizing_of = |brief: String| {
        let app = &app;
        async move { app.get_json(&format!("/api/v1/briefs/{brief}/sizing")).await }
    };
    // One offer, one price (the contract changed: a row prices only its own node shape). The
    // usual brief needs 4 × H100; AWS rents H100s only as the 8-GPU p5.48xlarge, another offer.
    let small = sizing_of(app.brief_id().await).await;
    assert_eq!(h100_of(&small)["count"], 4);
    assert!(h100_of(&small).get("price_per_hour").is_none(), "{small}");

    // 112 sequences of 8k tokens need 8 × H100: one p5.48xlarge. Served in real time, the
    // on-demand price comes first although spot is cheaper: 98.32 an hour (8 × 12.29),
    // 98.32 × 730 h = 71,773.60 a month.
    let realtime = BriefBuilder::new().concurrency(112).create_id(&app).await;
    let h100 = h100_of(&sizing_of(realtime.clone()).await);
    assert_eq!(h100["count"], 8);
    assert_eq!(
        (h100["provider"].as_str(), h100["price_billing"].as_str()),
        (Some("AWS"), Some("on-demand"))
    );
    assert_eq!(h100["price_per_hour"].as_str().unwrap().parse::<f64>().unwrap(), 98.32);
    assert_eq!(h100["price_per_month"], "71773.60");
    assert_eq!(
        (h100["gpus_per_node"].as_u64(), h100["nodes"].as_u64()),
        (Some(8), Some(1))
    );
    assert!(h100.get("price_note").is_none());

    // The same need as a batch job takes spot, the cheapest: 8 × 2.624175 = 20.9934 an hour,
    // 15,325.18 a month.
    let batch = BriefBuilder::new()
        .concurrency(112)
        .workload_kind("batch-inference")
        .create_id(&app)
        .await;
    let spot = h100_of(&sizing_of(batch.clone()).await);
    assert_eq!(spot["price_billing"], "spot");
    assert_eq!(
        spot["price_per_hour"].as_str().unwrap().parse::<f64>().unwrap(),
        20.9934
    );
    assert_eq!(spot["price_per_month"], "15325.18");

    // The brief page says the billing and the node beside the price.
    let owner = app.login_owner().await;
    let page = owner
        .client
        .get(app.url(&format!("/briefs/{batch}")))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        page.contains("20.99 USD/h</span> <span class=\"badge billing\">spot</span>"),
        "the sizing names the billing of its price"
    );
    assert!(page.contains("one 8-GPU node"), "and the node shape it is for");

    // A trial of the real-time brief started from the spot row asks to confirm, at the field,
    // and is saved once confirmed.
    let spot_id = spot["price_id"].as_str().unwrap();
    let new_trial = format!("/briefs/{realtime}/trials/new");
    let form = owner
        .client
        .get(app.url(&format!("{new_trial}?price={spot_id}&count=8")))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(form.contains("value=\"2.624175\""), "the rate per GPU-hour");
    assert!(form.contains("skypilot:p5.48xlarge"), "the source in the notes");
    assert!(form.contains("<option value=\"spot\" selected"), "billing spot");
    assert!(form.contains("name=\"confirm_spot\""), "a box to confirm spot");
    let mut fields = vec![
        ("csrf_token", owner.csrf.clone()),
        ("name", "AWS spot".to_owned()),
        ("provider", "AWS".to_owned()),
        ("gpu", "H100 SXM".to_owned()),
        ("gpu_count", "8".to_owned()),
        ("billing", "spot".to_owned()),
        ("rate_per_gpu_hour", "2.624175".to_owned()),
        ("currency", "USD".to_owned()),
        ("status", "planned".to_owned()),
    ];
    let post = |fields: Vec<(&'static str, String)>| {
        let (owner, url) = (&owner, app.url(&new_trial));
        async move { owner.client.post(url).form(&fields).send().await.unwrap() }
    };
    let refused = post(fields.clone()).await;
    assert_eq!(refused.status(), 422);
    let body = refused.text().await.unwrap();
    assert!(body.contains("id=\"error-confirm_spot\""), "the error at the box");
    assert!(body.contains("value=\"AWS spot\""), "the input kept");
    fields.push(("confirm_spot", "yes".to_owned()));
    let saved = post(fields).await;
    assert!(
        saved.status().is_success() || saved.status().is_redirection(),
        "{}",
        saved.status()
    );
    let trials: Value = app
        .get(&format!("/api/v1/briefs/{realtime}/trials"))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(trials["items"][1]["billing"], "spot");
}

#[tokio::test]
async fn a_manager_previews_a_catalogue_on_the_page_then_confirms_it() {
    let app = spawn_app().await;
    let manager = app.login(Role::Manager).await;
    let preview = manager
        .client
        .post(app.url("/prices/preview"))
        .form(&[
            ("csrf_token", manager.csrf.as_str()),
            ("format", "skypilot"),
            ("provider", "AWS"),
            ("csv", aws().as_str()),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(preview.status(), 200);
    let html = preview.text().await.unwrap();
    assert!(
        html.contains("Check these 15 rows"),
        "the rows are shown before anything is stored"
    );
    let skipped = &html[html.find("id=\"skipped\"").expect("what the catalogue leaves out")..];
    assert!(skipped.contains("an accelerator the GPU catalogue does not name"));
    assert!(skipped.contains("p3.2xlarge"));
    assert_eq!(app.count("prices").await, 0, "a preview stores nothing");

    // The file rides along in the confirm form, escaped as HTML.
    let csv = common::input_value(&html, "csv")
        .expect("the file is kept for the confirm")
        .replace("&quot;", "\"")
        .replace("&#34;", "\"")
        .replace("&#x27;", "'")
        .replace("&#39;", "'")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&");
    assert!(csv == aws(), "the confirm form carries the file as it was chosen");
    let valid_from = common::input_value(&html, "valid_from").unwrap();
    let res = manager
        .client
        .post(app.url("/prices"))
        .form(&[
            ("csrf_token", manager.csrf.as_str()),
            ("format", "skypilot"),
            ("provider", "AWS"),
            ("valid_from", valid_from.as_str()),
            ("csv", csv.as_str()),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 303);
    assert_eq!(app.count("prices").await, 15);
    let page = manager
        .client
        .get(app.url("/prices?imported=15"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(page.contains("Imported 15 prices"));
    assert!(page.contains("skypilot:p5en.48xlarge"));
}

#[tokio::test]
async fn google_clouds_gpu_rows_are_priced_with_their_host_and_a_wrong_gpu_count_is_corrected() {
    let app = spawn_app().await;
    // Real rows of SkyPilot's catalogs/v7/gcp/vms.csv: accelerator rows without an InstanceType.
    let gcp = String::from_utf8(fixture("skypilot-catalog/gcp-vms-v7-excerpt.csv")).unwrap();
    let res = PriceSheet::csv(gcp)
        .query("format=skypilot&provider=GCP&valid_from=2026-12-01")
        .post(&app)
        .await;
    assert_eq!(res.status(), 201, "{}", res.text().await.unwrap());
    let body: Value = res.json().await.unwrap();
    let mut want = vec![
        // (9.46006 + 36.56073) ÷ 8 = 5.75259875 per GPU-hour, not the GPU row's 36.56073 ÷ 8 = 4.570091;
        // spot (2.17547 + 18.024) ÷ 8 = 2.52493375.
        row("H100 SXM", "on-demand", "us-central1", "5.752599", "a3-highgpu-8g"),
        row("H100 SXM", "spot", "us-central1", "2.524934", "a3-highgpu-8g"),
        // us-east4-a: (9.46006 + 78.37241) ÷ 8; spot (1.70352 + 14.1056) ÷ 8.
        row("H100 SXM", "on-demand", "us-east4", "10.979059", "a3-highgpu-8g"),
        row("H100 SXM", "spot", "us-east4", "1.97614", "a3-highgpu-8g"),
        // (8.79698 + 14.76958) ÷ 8; spot (3.51864 + 12.5696) ÷ 8.
        row("A100 80GB SXM", "on-demand", "us-central1", "2.94582", "a2-ultragpu-8g"),
        row("A100 80GB SXM", "spot", "us-central1", "2.01103", "a2-ultragpu-8g"),
    ];
    want.sort();
    assert_eq!(offers(&body["prices"]), want);
    // The H100 row of asia-northeast3 has no a3-highgpu-8g row there: listed, never the GPUs alone.
    let host_missing: Vec<&Value> = body["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["reason"] == "host-missing")
        .collect();
    assert_eq!(host_missing.len(), 2, "{}", body["skipped"]);
    assert_eq!(host_missing[0]["accelerator"], "H100");
    assert_eq!(host_missing[0]["lines"], serde_json::json!([12]));
    assert!(host_missing[0]["says"]
        .as_str()
        .unwrap()
        .contains("host price not in this file"));

    // Real rows of SkyPilot's Azure catalogue: Standard_ND96isr_H100_v5 with AcceleratorCount 12.
    let azure = String::from_utf8(fixture("skypilot-catalog/azure-vms-v6-excerpt.csv")).unwrap();
    let res = PriceSheet::csv(azure)
        .query("format=skypilot&provider=Azure&valid_from=2026-12-01")
        .post(&app)
        .await;
    assert_eq!(res.status(), 201, "{}", res.text().await.unwrap());
    let body: Value = res.json().await.unwrap();
    assert_eq!(
        body["corrected"],
        serde_json::json!([{ "instance_type": "Standard_ND96isr_H100_v5", "catalogue_count": "12",
            "known_count": 8, "rows": 3, "lines": [8, 9, 10] }])
    );
    // 98.32 ÷ 8 = 12.29 per GPU-hour in eastus, not 98.32 ÷ 12 = 8.19.
    assert!(offers(&body["prices"]).contains(&row(
        "H100 SXM",
        "on-demand",
        "eastus",
        "12.29",
        "Standard_ND96isr_H100_v5"
    )));
}

#[tokio::test]
async fn a_file_given_to_the_wrong_import_is_named_and_both_imports_are_found_from_prices_and_the_ledger() {
    let app = spawn_app().await;
    let focus = String::from_utf8(fixture("focus/azure-focus-1.0-daily.csv")).unwrap();
    // A FOCUS bill as a price sheet, and as a catalogue.
    for query in ["", "format=skypilot&provider=Azure"] {
        let res = PriceSheet::csv(focus.clone()).query(query).post(&app).await;
        assert_eq!(res.status(), 422, "{query}");
        let problem: Value = res.json().await.unwrap();
        let message = problem["errors"][0]["message"].as_str().unwrap();
        assert!(
            message.contains("FOCUS billing export") && message.contains("format=focus"),
            "{query}: {message}"
        );
    }
    // A catalogue as a FOCUS bill, on a brief's ledger.
    let brief = app.brief_id().await;
    let trials: Value = app
        .get(&format!("/api/v1/briefs/{brief}/trials"))
        .await
        .json()
        .await
        .unwrap();
    let trial = trials["items"][0]["id"].as_str().unwrap();
    let res = app
        .client
        .post(app.url(&format!(
            "/api/v1/briefs/{brief}/ledger?format=focus&trial={trial}&resources=x"
        )))
        .header("content-type", "text/csv")
        .body(aws())
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 422);
    let problem: Value = res.json().await.unwrap();
    let message = problem["errors"][0]["message"].as_str().unwrap();
    assert!(
        message.contains("SkyPilot offer catalogue") && message.contains("format=skypilot"),
        "{message}"
    );
    // Each import's page points to the other.
    let owner = app.login_owner().await;
    let prices = owner.get(app.url("/prices")).await.text().await.unwrap();
    assert!(
        prices.contains("id=\"bills-elsewhere\""),
        "the prices page names billing exports"
    );
    let page = owner
        .get(app.url(&format!("/briefs/{brief}")))
        .await
        .text()
        .await
        .unwrap();
    assert!(
        page.contains("id=\"catalogues-elsewhere\"") && page.contains("href=\"/prices#import\""),
        "the ledger names the Prices page"
    );
}

/// Vast's catalogue writes `SizeInMiB` as the whole instance's memory (two 40 GB A100s: 81920,
/// equal to `TotalGpuMemoryInMiB`), where AWS's is one GPU's: each GPU's memory is the total over
/// the GPUs. Read as one GPU's, a pair of 40 GB A100s was priced as the 80 GB card, and two H100 NVL
/// as H100 SXM.
#[tokio::test]
async fn a_catalogue_giving_the_instances_gpu_memory_prices_each_gpus_model() {
    let app = spawn_app().await;
    let vast = String::from_utf8(fixture("skypilot-catalog/vast-vms-v8-excerpt.csv")).unwrap();
    let res = PriceSheet::csv(vast)
        .query("format=skypilot&provider=Vast&valid_from=2026-12-01")
        .post(&app)
        .await;
    assert_eq!(res.status(), 201, "{}", res.text().await.unwrap());
    let body: Value = res.json().await.unwrap();
    let got: Vec<(String, i64, String)> = offers(&body["prices"])
        .into_iter()
        .map(|(gpu, count, _, _, rate, _)| (gpu, count, rate))
        .collect();
    let mut want = vec![
        ("H100 SXM".to_owned(), 1, "1.87".to_owned()),
        // 191660 ÷ 2 = 95830 MiB a GPU: the 94 GB H100 NVL; 4.53 ÷ 2.
        ("H100 NVL".into(), 2, "2.265".into()),
        ("A100 40GB SXM".into(), 1, "0.76".into()),
        // 81920 ÷ 2 = 40960 MiB a GPU: the 40 GB card, 1.49 ÷ 2 (it was the 80 GB card's row).
        ("A100 40GB SXM".into(), 2, "0.745".into()),
        ("A100 40GB SXM".into(), 4, "0.7725".into()),
        // One GPU of 81920 MiB named A100 on PCIe: the 80 GB PCIe card.
        ("A100 80GB PCIe".into(), 1, "0.87".into()),
    ];
    want.sort();
    let mut got = got;
    got.sort();
    assert_eq!(got, want);
}
