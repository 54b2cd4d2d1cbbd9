//! Bills from where they already live: a real excerpt of the FinOps FOCUS 1.0 sample export imported
//! onto a trial with `format=focus` — the trial's rows (listed resources or the `rentcheck-trial`
//! tag) become lines with the contract's amounts, intervals and categories; a credit, a tax and an
//! adjustment are listed with their sums, never added; a second import adds nothing; a file in
//! another currency is refused at its line; and the review's money follows the imported lines.

use crate::common;
use crate::common::builders::{LedgerBuilder, LedgerCsv, PriceSheet};

use common::{fixture, spawn_app, TestApp};
use serde_json::{json, Value};

/// The five `g5.4xlarge` instance-hours of the excerpt (one A10G each), by line.
const G5: [(&str, u64); 5] = [
    ("i-006flle71l19b488a", 5),
    ("i-09ba12e1l5743720b", 6),
    ("i-0834le5b437l856a8", 8),
    ("i-02619lael51119a85", 9),
    ("i-0l6bb5al993lfa983", 10),
];
const VOLUME: &str = "vom-088a1a2l190805f6e";
const ORACLE: &str = "ocid6.instance.oc6.us-sanjose-6.anzwuljr9lro61icgqjlyydpuzgh9encxeyng169fjkcviotrl6fkqyhstnq";

/// The excerpt as the test sends it for `trial`. The sample has no tax row and no rentcheck tag, so
/// two changes are made here, in the open: the `g3.4xlarge` row (line 4) gets the tag
/// `rentcheck-trial: <trial id>`, and a tax row is appended, made from the account's credit row
/// (line 7) with `Tax` for `Credit` and 0.35 for its costs.
fn export(trial: &str) -> String {
    let text = String::from_utf8(fixture("focus/focus-1.0-sample-excerpt.csv")).unwrap();
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    assert!(lines[3].contains("g3.4xlarge"), "{}", lines[3]);
    lines[3] = lines[3].replacen(
        r#""{""application"": ""BrightPathMatrix"","#,
        &format!(r#""{{""rentcheck-trial"": ""{trial}"", ""application"": ""BrightPathMatrix"","#),
        1,
    );
    assert!(lines[3].contains("rentcheck-trial"));
    assert!(lines[6].contains(r#""Credit""#), "{}", lines[6]);
    let tax = lines[6]
        .replacen(r#""Credit""#, r#""Tax""#, 1)
        .replace("-2.61370000000", "0.35000000000")
        .replace("-3.00000000000", "0.35000000000")
        .replace(
            "AWS Open Source Promotional Credits, credit from account: 391835788720",
            "Tax for the account",
        );
    lines.push(tax);
    lines.join("\n") + "\n"
}

fn query(trial: &str) -> String {
    let mut resources: Vec<&str> = G5.iter().map(|(r, _)| *r).collect();
    resources.extend([VOLUME, ORACLE]);
    let gpus: Vec<String> = G5.iter().map(|(r, _)| format!("{r}=1")).collect();
    format!(
        "format=focus&trial={trial}&resources={}&gpus_per_resource={}",
        resources.join(","),
        gpus.join(",")
    )
}

async fn first_trial(app: &TestApp, brief: &str) -> String {
    let v: Value = app
        .get(&format!("/api/v1/briefs/{brief}/trials"))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(v["items"][0]["name"], "Trial 1");
    v["items"][0]["id"].as_str().unwrap().to_owned()
}

/// A bill names the instance it ran on. SkyPilot's AWS catalogue prices g5.xlarge to g5.16xlarge,
/// each with one A10G; only the cheapest becomes the offer's price row, yet the sample's g5.4xlarge
/// hours must find their GPU in the catalogue (they were host lines, with 0 GPU-hours).
#[tokio::test]
async fn a_bills_instance_type_finds_its_gpus_in_a_catalogue_though_it_is_not_the_cheapest() {
    let app = spawn_app().await;
    let brief = app.brief_id().await;
    let trial = first_trial(&app, &brief).await;
    // Two rows in the columns of SkyPilot's AWS vms.csv (the header of
    // tests/fixtures/skypilot-catalog/aws-vms-v5-excerpt.csv), with AWS's on-demand prices.
    let catalogue = "InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,GpuInfo,Price,SpotPrice,Region,AvailabilityZone\n\
g5.xlarge,A10G,1.0,4.0,16.0,,1.006,,us-east-1,use1-az1\n\
g5.4xlarge,A10G,1.0,16.0,64.0,,1.624,,us-east-1,use1-az1\n";
    let res = PriceSheet::csv(catalogue)
        .query("format=skypilot&provider=AWS&valid_from=2026-11-01")
        .post(&app)
        .await;
    assert_eq!(res.status(), 201, "{}", res.text().await.unwrap());
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["rows"], 1, "one offer, at the g5.xlarge's price: {body}");

    let mut resources: Vec<&str> = G5.iter().map(|(r, _)| *r).collect();
    resources.push(VOLUME);
    let res = LedgerCsv::new(export(&trial))
        .query(&format!("format=focus&trial={trial}&resources={}", resources.join(",")))
        .post(&app, &brief)
        .await;
    assert_eq!(res.status(), 201, "{}", res.text().await.unwrap());
    let body: Value = res.json().await.unwrap();
    assert_eq!(
        body["counted_as_host"],
        json!(["i-0b3b3095474a3772a"]),
        "only the g3, which no catalogue prices: {body}"
    );
    let view = app
        .get_json(&format!("/api/v1/briefs/{brief}/ledger?trial={trial}"))
        .await;
    for (resource, _) in G5 {
        let line = view["lines"]
            .as_array()
            .unwrap()
            .iter()
            .find(|l| l["resource"] == resource)
            .unwrap_or_else(|| panic!("{resource}: {view}"));
        assert_eq!(
            (&line["category"], &line["gpus"]),
            (&json!("accelerator"), &json!(1)),
            "{line}"
        );
    }
}

#[tokio::test]
async fn a_real_focus_export_becomes_the_trials_ledger_once_and_the_review_follows_it() {
    let app = spawn_app().await;
    let brief = app.brief_id().await;
    let trial = first_trial(&app, &brief).await;

    let res = LedgerCsv::new(export(&trial))
        .query(&query(&trial))
        .post(&app, &brief)
        .await;
    assert_eq!(res.status(), 201, "{}", res.text().await.unwrap());
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["trial"], trial.as_str());
    assert_eq!(body["rows_read"], 13);
    // Five g5 hours, the volume, the Oracle adjustment (listed resources) and the tagged g3 hour.
    assert_eq!(body["rows_selected"], 8);
    assert_eq!(body["lines_added"], 7);
    assert_eq!(body["rows_already_imported"], 0);
    // Never added: the Oracle instance's adjustment (EffectiveCost 0), and the account's credit
    // (EffectiveCost −3, BilledCost −2.6137: EffectiveCost wins) and tax, which name no resource.
    assert_eq!(
        body["not_added"],
        json!([
            { "charge_category": "Credit", "reason": "not usage", "of": "account", "rows": 1, "sum": "-3", "currency": "USD", "lines": [7] },
            { "charge_category": "Adjustment", "reason": "not usage", "of": "trial", "rows": 1, "sum": "0", "currency": "USD", "lines": [12] },
            { "charge_category": "Tax", "reason": "not usage", "of": "account", "rows": 1, "sum": "0.35", "currency": "USD", "lines": [14] },
        ])
    );
    // The g3's GPUs are not given and no catalogue prices g3.4xlarge: its hour is a host line.
    assert_eq!(body["counted_as_host"], json!(["i-0b3b3095474a3772a"]));
    // Every g5 row gives its ConsumedQuantity in Hours; no commitment is bought in the excerpt.
    assert_eq!(body["hours_from_charge_period"], json!([]));
    assert_eq!(body["commitment_purchases"], json!([]));

    // The lines, by hand from the excerpt: EffectiveCost (2.00, 0, 2.00, 1.00, 2.00 for the five
    // g5 hours; 0 for the volume; 1.00 for the g3), charge periods read as UTC, categories from
    // ServiceCategory.
    let view: Value = app
        .get(&format!("/api/v1/briefs/{brief}/ledger?trial={trial}"))
        .await
        .json()
        .await
        .unwrap();
    let mut lines: Vec<(String, String, String, String, Value, String)> = view["lines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            (
                l["resource"].as_str().unwrap().to_owned(),
                l["category"].as_str().unwrap().to_owned(),
                l["starts_at"].as_str().unwrap().to_owned(),
                l["ends_at"].as_str().unwrap().to_owned(),
                l["gpus"].clone(),
                l["amount"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    lines.sort_by(|a, b| (&a.0, &a.2).cmp(&(&b.0, &b.2)));
    let line = |r: &str, c: &str, s: &str, e: &str, g: Value, a: &str| {
        (r.to_owned(), c.to_owned(), s.to_owned(), e.to_owned(), g, a.to_owned())
    };
    assert_eq!(
        lines,
        [
            line(
                "i-006flle71l19b488a",
                "accelerator",
                "2024-09-27T15:00:00Z",
                "2024-09-27T16:00:00Z",
                json!(1),
                "2"
            ),
            line(
                "i-02619lael51119a85",
                "accelerator",
                "2024-09-13T20:00:00Z",
                // ConsumedQuantity 0.683889 Hours = 2,462.0004 s from the charge period's start.
                "2024-09-13T20:41:02.000400Z",
                json!(1),
                "1"
            ),
            line(
                "i-0834le5b437l856a8",
                "accelerator",
                "2024-09-22T17:00:00Z",
                "2024-09-22T18:00:00Z",
                json!(1),
                "2"
            ),
            line(
                "i-09ba12e1l5743720b",
                "accelerator",
                "2024-09-21T01:00:00Z",
                // ConsumedQuantity 0.296111 Hours = 1,065.9996 s.
                "2024-09-21T01:17:45.999600Z",
                json!(1),
                "0"
            ),
            line(
                "i-0b3b3095474a3772a",
                "host",
                "2024-09-24T02:00:00Z",
                "2024-09-24T03:00:00Z",
                Value::Null,
                "1"
            ),
            line(
                "i-0l6bb5al993lfa983",
                "accelerator",
                "2024-09-24T21:00:00Z",
                "2024-09-24T22:00:00Z",
                json!(1),
                "2"
            ),
            line(
                VOLUME,
                "storage",
                "2024-09-24T21:00:00Z",
                "2024-09-24T22:00:00Z",
                Value::Null,
                "0"
            ),
        ]
    );
    // Accelerator 2 + 0 + 2 + 1 + 2 = 7 for 1 + 0.296111 + 1 + 0.683889 + 1 = 3.98 GPU-hours (the
    // hours used, ConsumedQuantity, not the five charge periods); host 1; storage 0; total 8.
    let s = &view["summary"];
    assert_eq!(s["accelerator_hours"], "3.98");
    assert_eq!(s["totals"]["accelerator"], "7");
    assert_eq!(s["totals"]["host"], "1");
    assert_eq!(s["total"], "8");

    // The same export again adds nothing: every row's identity is already the trial's.
    let res = LedgerCsv::new(export(&trial))
        .query(&query(&trial))
        .post(&app, &brief)
        .await;
    assert_eq!(res.status(), 200);
    let again: Value = res.json().await.unwrap();
    assert_eq!(again["lines_added"], 0);
    assert_eq!(again["rows_already_imported"], 7);
    assert_eq!(again["total"], "8");
    assert_eq!(app.count("ledger_lines").await, 7);

    // The same bill in euros is refused at its first line of the trial (the volume, line 3), the
    // brief being in dollars; nothing is stored.
    let euros = export(&trial).replace(r#""USD""#, r#""EUR""#);
    let res = LedgerCsv::new(euros).query(&query(&trial)).post(&app, &brief).await;
    assert_eq!(res.status(), 422);
    let problem: Value = res.json().await.unwrap();
    assert_eq!(problem["errors"][0]["field"], "line 3, column 5 (BillingCurrency)");
    assert!(problem["errors"][0]["message"].as_str().unwrap().contains("EUR"));
    assert_eq!(app.count("ledger_lines").await, 7);

    // The review's money uses the imported lines: 4 accepted jobs → 8 ÷ 4 = 2 per job; the
    // trial names no rate, so its rate is the ledger's: 7 ÷ 3.98 GPU-hours = 1.75879… → 1.7588 per GPU-hour.
    let res = LedgerBuilder::new().trial(&trial).accepted(4).post(&app, &brief).await;
    assert_eq!(res.status(), 201);
    let review: Value = app
        .get(&format!("/api/v1/briefs/{brief}/review"))
        .await
        .json()
        .await
        .unwrap();
    let t = &review["trials"][0];
    assert_eq!(t["trial"], trial.as_str());
    assert_eq!(t["cost_per_job"], "2");
    assert_eq!(t["money"]["rate"]["source"]["from"], "ledger");
    assert_eq!(t["money"]["rate"]["per_gpu_hour"], "1.7588");
}

#[tokio::test]
async fn a_focus_export_is_refused_without_its_trial_and_imports_from_the_page() {
    let app = spawn_app().await;
    let brief = app.brief_id().await;
    let trial = first_trial(&app, &brief).await;

    // No listed resource and no tag of this trial (the g3's tag names the first trial).
    let second: Value = app
        .post_json(
            &format!("/api/v1/briefs/{brief}/trials"),
            &json!({ "name": "Second try", "gpu": "A10G", "gpu_count": 1 }),
        )
        .await
        .json()
        .await
        .unwrap();
    let res = LedgerCsv::new(export(&trial))
        .query(&format!("format=focus&trial={}", second["id"].as_str().unwrap()))
        .post(&app, &brief)
        .await;
    assert_eq!(res.status(), 422);
    let problem: Value = res.json().await.unwrap();
    assert_eq!(problem["errors"][0]["field"], "resources");
    let res = LedgerCsv::new(export(&trial))
        .query("format=focus&trial=not-a-uuid")
        .post(&app, &brief)
        .await;
    assert_eq!(res.status(), 400);
    let res = LedgerCsv::new(export(&trial))
        .query(&format!("format=focus&trial={trial}&gpus_per_resource=many"))
        .post(&app, &brief)
        .await;
    assert_eq!(res.status(), 422);
    assert_eq!(app.count("ledger_lines").await, 0);

    // The ledger form takes the same export, pasted, and says what it left out.
    let person = app.login_owner().await;
    let res = person
        .client
        .post(app.url(&format!("/briefs/{brief}/ledger/import")))
        .form(&[
            ("csrf_token", person.csrf.as_str()),
            ("trial", trial.as_str()),
            ("format", "focus"),
            ("csv", export(&trial).as_str()),
            ("resources", &G5.iter().map(|(r, _)| *r).collect::<Vec<_>>().join("\n")),
            ("gpus_per_resource", "1"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let page = res.text().await.unwrap();
    assert!(
        page.contains("Added 6 ledger lines to the trial."),
        "five g5 hours and the tagged g3"
    );
    let not_added = &page[page
        .find("id=\"not-added\"")
        .expect("the credit and the tax are listed")..];
    assert!(
        not_added.contains("Credit") && not_added.contains("-3.00 USD"),
        "{not_added}"
    );
    assert!(
        not_added.contains("Tax") && not_added.contains("0.35 USD"),
        "{not_added}"
    );
    // "1" GPU for every selected resource: the tagged g3 is accelerator time too.
    assert!(!page.contains("id=\"counted-as-host\""));
    assert_eq!(app.count("ledger_lines").await, 6);
}

/// The Azure daily and AWS per-second shapes (tests/fixtures/focus/PROVENANCE.md), tagged for `trial`.
fn shaped(file: &str, trial: &str) -> String {
    String::from_utf8(fixture(&format!("focus/{file}")))
        .unwrap()
        .replace("TRIAL_ID", trial)
}

#[tokio::test]
async fn an_azure_daily_bill_prices_the_trial_by_the_hours_it_ran() {
    let app = spawn_app().await;
    let brief = app.brief_id().await;
    let trial = first_trial(&app, &brief).await;

    let body = shaped("azure-focus-1.0-daily.csv", &trial);
    let res = LedgerCsv::new(body)
        .query(&format!("format=focus&trial={trial}&gpus_per_resource=8"))
        .post(&app, &brief)
        .await;
    assert_eq!(res.status(), 201, "{}", res.text().await.unwrap());
    let answer: Value = res.json().await.unwrap();
    // An ND96amsr_A100_v4 (8 GPUs) that ran 15.5 h on each of two days: 2 × 15.5 × 8 = 248
    // GPU-hours, not the two days' 2 × 24 × 8 = 384; the cost is 2 × 15.5 × 32.77 = 1,015.87.
    assert_eq!(answer["accelerator_hours"], "248");
    assert_eq!(answer["totals"]["accelerator"], "1015.87");
    assert_eq!(answer["hours_from_charge_period"], json!([]));
    // The reservation bought that day is listed by its id and not added.
    assert_eq!(answer["commitment_purchases"][0]["sum"], "176845.12");
    assert!(answer["commitment_purchases"][0]["commitment_discount_id"]
        .as_str()
        .unwrap()
        .contains("/reservations/"));

    // The trial names no rate, so the review prices it from its bill: 1,015.87 ÷ 248 = 4.09625
    // (shown to 4 places, 4.0962) per GPU-hour, × 8 = 32.77 an hour for the VM (its price). From the
    // charge periods it would have been 1,015.87 ÷ 384 = 2.6455 per GPU-hour, 21.16 an hour.
    let review: Value = app
        .get(&format!("/api/v1/briefs/{brief}/review"))
        .await
        .json()
        .await
        .unwrap();
    let t = &review["trials"][0];
    assert_eq!(t["money"]["rate"]["source"]["from"], "ledger");
    assert_eq!(t["money"]["rate"]["per_gpu_hour"], "4.0962");
}

/// Without `gpus_per_resource`, the Azure bill's meter name ("ND96amsr A100 v4") finds its GPUs in
/// the Azure catalogue, even beside a catalogue whose instance type is only a GPU's name
/// (Paperspace's `A100`, one GPU), which the word "A100" of the description used to find first.
#[tokio::test]
async fn a_bills_meter_name_is_not_taken_for_an_instance_type_that_is_only_a_gpus_name() {
    let app = spawn_app().await;
    let brief = app.brief_id().await;
    let trial = first_trial(&app, &brief).await;
    let header = "InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,GpuInfo,Price,SpotPrice,Region,AvailabilityZone\n";
    for (provider, row) in [
        (
            "Azure",
            "Standard_ND96amsr_A100_v4,A100-80GB,8.0,96.0,1900.0,,32.77,,eastus,\n",
        ),
        ("Paperspace", "A100,A100,1.0,12.0,90.0,,3.09,,East Coast (NY2),\n"),
    ] {
        let res = PriceSheet::csv(format!("{header}{row}"))
            .query(&format!("format=skypilot&provider={provider}&valid_from=2026-11-01"))
            .post(&app)
            .await;
        assert_eq!(res.status(), 201, "{}", res.text().await.unwrap());
    }
    let res = LedgerCsv::new(shaped("azure-focus-1.0-daily.csv", &trial))
        .query(&format!("format=focus&trial={trial}"))
        .post(&app, &brief)
        .await;
    assert_eq!(res.status(), 201, "{}", res.text().await.unwrap());
    let answer: Value = res.json().await.unwrap();
    // 2 × 15.5 h × 8 GPUs, not × 1.
    assert_eq!(answer["accelerator_hours"], "248", "{answer}");
}

#[tokio::test]
async fn an_aws_per_second_bill_counts_the_seconds_used() {
    let app = spawn_app().await;
    let brief = app.brief_id().await;
    let trial = first_trial(&app, &brief).await;
    let body = shaped("aws-focus-1.2-per-second.csv", &trial);
    let res = LedgerCsv::new(body)
        .query(&format!("format=focus&trial={trial}&gpus_per_resource=8"))
        .post(&app, &brief)
        .await;
    assert_eq!(res.status(), 201, "{}", res.text().await.unwrap());
    let answer: Value = res.json().await.unwrap();
    // 1,600 + 3,600 + 3,600 + 3,200 s = 3.3333 h × 8 GPUs = 26.67 GPU-hours, not 4 h × 8 = 32.
    let hours: f64 = answer["accelerator_hours"].as_str().unwrap().parse().unwrap();
    assert!((hours - 26.6667).abs() < 0.001, "{hours}");
    assert_eq!(answer["totals"]["accelerator"], "327.73333333");
    assert_eq!(
        answer["commitment_purchases"][0]["commitment_discount_id"],
        "arn:aws:savingsplans::123456789012:savingsplan/3f2b6a1c-8d4e-4f7a-9b0c-1d2e3f4a5b6c"
    );
}

#[tokio::test]
async fn the_import_page_says_which_hours_came_from_the_charge_period_and_which_commitments_were_bought() {
    let app = spawn_app().await;
    let brief = app.brief_id().await;
    let trial = first_trial(&app, &brief).await;
    // The AWS per-second export with the first hour's ConsumedQuantity left empty (as a row billed
    // without a usage quantity would be): that hour counts its whole charge period, and says so.
    let text = shaped("aws-focus-1.2-per-second.csv", &trial);
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    assert!(lines[1].contains(",0.4444444444,Hrs,"), "{}", lines[1]);
    lines[1] = lines[1].replacen(",0.4444444444,Hrs,", ",,,", 1);
    let person = app.login_owner().await;
    let res = person
        .client
        .post(app.url(&format!("/briefs/{brief}/ledger/import")))
        .form(&[
            ("csrf_token", person.csrf.as_str()),
            ("trial", trial.as_str()),
            ("format", "focus"),
            ("csv", (lines.join("\n") + "\n").as_str()),
            ("gpus_per_resource", "8"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let page = res.text().await.unwrap();
    let hours = &page[page
        .find("id=\"hours-from-charge-period\"")
        .expect("the charge-period hours are named")..];
    assert!(
        hours.contains("1 row: no ConsumedQuantity in a time unit (lines of the file: 2)"),
        "{hours}"
    );
    let bought = &page[page
        .find("id=\"commitment-purchases\"")
        .expect("the savings plan is listed")..];
    assert!(
        bought.contains("arn:aws:savingsplans::123456789012:savingsplan/3f2b6a1c-8d4e-4f7a-9b0c-1d2e3f4a5b6c"),
        "{bought}"
    );
    // 1 h (the charge period) + 1 + 1 + 0.8888888889 h = 3.8889 h × 8 = 31.11 GPU-hours.
    let summary: Value = app
        .get(&format!("/api/v1/briefs/{brief}/ledger?trial={trial}"))
        .await
        .json()
        .await
        .unwrap();
    let hours: f64 = summary["summary"]["accelerator_hours"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((hours - 31.1111).abs() < 0.001, "{hours}");
}
