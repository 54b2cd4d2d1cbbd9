//! Money per unit of work at the SLO, per trial: the share of requests inside every target and the
//! goodput from per-request data, what a million output tokens cost overall and at the SLO (the
//! good requests' tokens), the capacity of one replica from a sweep, replicas and a monthly cost for
//! the expected peak, the break-even against a managed API, and a review pinned to the price rows
//! it used (a new sheet makes an approval stale). Every expected figure is worked out here by hand.

use crate::common;
use crate::common::builders::{BriefBuilder, EvidenceBuilder, PriceRow, PriceSheet, TrialBuilder};

use common::{bearer_client, fixture, spawn_app, TestApp};
use rentcheck::auth::Role;
use rust_decimal::{prelude::FromPrimitive, Decimal, RoundingStrategy};
use serde_json::{json, Value};

async fn review(app: &TestApp, brief: &str) -> Value {
    let res = app.get(&format!("/api/v1/briefs/{brief}/review")).await;
    assert_eq!(res.status(), 200);
    res.json().await.unwrap()
}

/// A `vllm bench serve` result of the brief's trial, at stage 3.
async fn upload(app: &TestApp, brief: &str, bytes: Vec<u8>) -> Value {
    EvidenceBuilder::raw("bench-serving", "application/json", bytes)
        .stage(3)
        .upload(app, brief)
        .await
}

fn decimal(v: &Value) -> Decimal {
    v.as_str()
        .unwrap_or_else(|| panic!("{v} is not a decimal string"))
        .parse()
        .unwrap()
}

fn round4(d: Decimal) -> Decimal {
    d.round_dp_with_strategy(4, RoundingStrategy::MidpointAwayFromZero)
}

/// One run of `vllm bench serve --save-detailed` at `rate` requests/s: 20 requests of 3 output
/// tokens, 20 ms between tokens (TPOT 20 ms, inside the 50 ms target); `misses` of them wait
/// 900 ms for their first token (over the 500 ms TTFT target), the others 100 ms.
pub(crate) fn run(label: &str, rate: f64, output_tokens_per_s: f64, misses: usize) -> Value {
    let ttfts: Vec<f64> = (0..20).map(|i| if i < misses { 0.9 } else { 0.1 }).collect();
    json!({
        "label": label, "backend": "vllm", "duration": 20.0 / rate, "completed": 20, "failed": 0,
        "request_throughput": rate, "output_throughput": output_tokens_per_s,
        "ttfts": ttfts, "itls": vec![vec![0.02, 0.02]; 20], "output_lens": vec![3; 20], "errors": vec![""; 20],
    })
}

/// A real `vllm bench serve --save-detailed` file (200 requests, Llama 3.3 70B on 8 × A100): the
/// share inside every target and the goodput are recomputed here from the file's own arrays, and
/// the cost per million output tokens from its output throughput and the trial's rate.
#[tokio::test]
async fn per_request_data_gives_attainment_goodput_and_cost_per_million_tokens() {
    let app = spawn_app().await;
    let brief = BriefBuilder::new()
        .targets(json!({ "ttft_p95_ms": 400, "itl_p95_ms": 40, "e2e_p95_ms": 8000, "error_rate": 0.01 }))
        .trial_gpu("A100 80GB SXM", 8)
        .create_id(&app)
        .await;
    let before = review(&app, &brief).await;
    assert_eq!(
        before["trials"][0]["slo_attainment"],
        Value::Null,
        "nothing measured yet"
    );
    assert_eq!(before["trials"][0]["cost_per_million_output_tokens"], Value::Null);
    TrialBuilder::first_of(&app, &brief)
        .await
        .rate_per_gpu_hour("1.50")
        .save(&app)
        .await;

    let bytes = fixture("bench-serving/vllm-benchmark-serving-llama3.3-70b-tp8-8xa100-qps-inf.json");
    let file: Value = serde_json::from_slice(&bytes).unwrap();
    let evidence = upload(&app, &brief, bytes).await;

    // By hand, as vLLM's --goodput judges a request: TTFT ≤ 400 ms, (latency − TTFT) ÷ (output
    // tokens − 1) ≤ 40 ms, latency ≤ 8 s, where the file's latency is TTFT + the token gaps; an
    // errored request is a miss.
    let requests = common::vllm_requests(&file);
    let good: Vec<usize> = (0..requests.len())
        .filter(|&i| {
            let r = &requests[i];
            r.ok && r.ttft_ms <= 400.0 && r.tpot_ms <= 40.0 && r.e2e_ms <= 8000.0
        })
        .collect();
    let met = good.len();
    let attainment = met as f64 / requests.len() as f64;
    let duration = file["duration"].as_f64().unwrap();
    let tokens_per_s = file["output_throughput"].as_f64().unwrap();
    // The output tokens of the good requests only, over the run's duration.
    let good_tokens_per_s = good
        .iter()
        .map(|&i| file["output_lens"][i].as_f64().unwrap())
        .sum::<f64>()
        / duration;

    let r = review(&app, &brief).await;
    let t = &r["trials"][0];
    assert!(
        (t["slo_attainment"].as_f64().unwrap() - attainment).abs() < 1e-12,
        "{t}"
    );
    assert_eq!(t["slo_attainment_estimated"], false, "per-request data is no estimate");
    // vLLM's request_goodput: good requests ÷ the run's duration.
    assert!((t["goodput_rps"].as_f64().unwrap() - met as f64 / duration).abs() < 1e-9);
    // 8 GPUs × 1.50 = 12.00 an hour; a million tokens cost 12 ÷ (tokens/s × 3600) × 10^6, and at
    // the SLO only the tokens of requests inside every target count.
    assert_eq!(decimal(&t["cost_per_hour"]), Decimal::new(1200, 2));
    let hourly = Decimal::from(12) * Decimal::from(1_000_000);
    let per_second = |x: f64| Decimal::from_f64(x).unwrap() * Decimal::from(3600);
    assert_eq!(
        decimal(&t["cost_per_million_output_tokens"]),
        round4(hourly / per_second(tokens_per_s))
    );
    assert_eq!(
        decimal(&t["cost_per_million_output_tokens_at_slo"]),
        round4(hourly / per_second(good_tokens_per_s))
    );
    assert!(
        decimal(&t["cost_per_million_output_tokens_at_slo"]) > decimal(&t["cost_per_million_output_tokens"]),
        "requests outside the targets make the useful tokens dearer"
    );
    // Every figure says where it came from.
    assert_eq!(t["operating_point"]["evidence_id"], evidence["id"]);
    assert_eq!(t["money"]["rate"]["source"]["from"], "trial");
    // One run below the 95 % target: no capacity at the SLO, so no replicas either.
    assert!(attainment < 0.95, "{attainment}");
    assert_eq!(t["capacity_at_slo_rps"], Value::Null);
    assert_eq!(t["monthly_cost"], Value::Null);
}

/// A sweep (several load points) gives the capacity of one replica at the SLO; with the brief's
/// expected peak that is a replica count and a monthly cost, and the API's price is compared per
/// good request. The points are the real run of tests/fixtures transformed (`common::vllm_points`).
#[tokio::test]
async fn a_sweep_gives_capacity_replicas_a_monthly_cost_and_the_api_break_even() {
    use common::vllm_points::{good, load_point, Load, TPOT_MS, TTFT_MS};
    let app = spawn_app().await;
    let brief = BriefBuilder::new()
        .trial_gpu("H100 SXM", 2)
        .targets(common::vllm_points::targets())
        .expected_peak_rps(20.0)
        .api_price_per_million_tokens("1.00")
        .create_id(&app)
        .await;
    TrialBuilder::first_of(&app, &brief)
        .await
        .rate_per_gpu_hour("2.00")
        .save(&app)
        .await;
    // 4 requests/s over 50 s; 8 over 25.3 s with 20 ms more queueing; 16 over 18 s with 400 ms: 194,
    // 194 and 0 of the 200 requests inside every target.
    let points = [
        load_point(Load::at(4.0, 50.0)),
        load_point(Load::at(8.0, 25.3).queued(20.0)),
        load_point(Load::at(16.0, 18.0).queued(400.0)),
    ];
    let sweep = points.iter().map(Value::to_string).collect::<Vec<_>>().join("\n");
    let evidence = upload(&app, &brief, sweep.into_bytes()).await;
    assert_ne!(evidence["parse_status"], "failed", "{evidence}");

    let r = review(&app, &brief).await;
    let t = &r["trials"][0];
    let loaded = t["money"]["load_points"].as_array().unwrap();
    assert_eq!(loaded.len(), 3, "one load point per run: {loaded:?}");
    // The operating point: the highest throughput that kept 95 % inside every target, 8 requests/s
    // offered and 7.9 achieved (within 5 %): one replica carries 8 requests/s.
    assert_eq!(t["capacity_at_slo_rps"], 8.0);
    let good_8 = good(&points[1], TTFT_MS, TPOT_MS);
    assert_eq!(t["slo_attainment"], good_8.len() as f64 / 200.0);
    assert!((t["goodput_rps"].as_f64().unwrap() - 194.0 / 25.3).abs() < 1e-9);
    // 2 GPUs × 2.00 = 4.00 an hour. At the SLO, the good requests' output tokens over 25.3 s; all
    // tokens at the same operating point: the run's output throughput.
    let good_tokens_per_s = good_8.iter().map(|r| r.output_tokens).sum::<f64>() / 25.3;
    let all_tokens_per_s = points[1]["output_throughput"].as_f64().unwrap();
    let per_million = |tokens_per_s: f64| {
        round4(Decimal::from(4_000_000) / (Decimal::from_f64(tokens_per_s).unwrap() * Decimal::from(3600)))
    };
    assert_eq!(
        decimal(&t["cost_per_million_output_tokens_at_slo"]),
        per_million(good_tokens_per_s)
    );
    assert_eq!(
        decimal(&t["cost_per_million_output_tokens"]),
        per_million(all_tokens_per_s)
    );
    // 20 requests/s at 8 per replica: 3 replicas × 2 GPUs × 2.00 × 730 hours = 8,760.00 a month.
    assert_eq!(t["replicas_for_peak"], 3);
    assert_eq!(decimal(&t["monthly_cost"]), Decimal::from(8760));
    // The API's 1.00 per million output tokens (its output price only) against this trial's cost
    // per good request: 4.00 ÷ (194 ÷ 25.3 × 3600) = 0.000145 here, 0.00022 there (the good
    // requests' 218 output tokens on average).
    let mean_out = good_8.iter().map(|r| r.output_tokens).sum::<f64>() / good_8.len() as f64;
    let api = &t["money"]["api"];
    let ours = 4.0 / (194.0 / 25.3 * 3600.0);
    let theirs = mean_out / 1e6;
    assert!(
        (decimal(&api["our_cost_per_good_request"])
            .to_string()
            .parse::<f64>()
            .unwrap()
            - ours)
            .abs()
            < 1e-7
    );
    assert!(
        (decimal(&api["api_cost_per_request"])
            .to_string()
            .parse::<f64>()
            .unwrap()
            - theirs)
            .abs()
            < 1e-7
    );
    assert_eq!(api["output_price_only"], true);
    assert_eq!(t["api_is_cheaper"], ours > theirs);
    assert!(!r["accepted"].as_bool().unwrap());
    assert!(r["reasons"].as_array().unwrap().iter().all(|x| x["rule"] != "6b"));

    // The page says it in sentences and draws the sweep against the target line.
    let person = app.login(Role::Engineer).await;
    let html = person
        .get(app.url(&format!("/briefs/{brief}/review")))
        .await
        .text()
        .await
        .unwrap();
    let at_slo = rentcheck::figures::with_currency(per_million(good_tokens_per_s), "USD");
    assert!(
        html.contains(&format!(
            "At 8 requests/s the 2 × H100 SXM trial (Trial 1) keeps 97 % of requests inside every target; a million output tokens cost {at_slo} there."
        )),
        "{html}"
    );
    assert!(html.contains("the expected peak of 20 requests/s (no headroom) needs 3 replicas, 8,760.00 USD a month"));
    assert!(html.contains("(output price only)"));
    assert!(html.contains("id=\"attainment-chart\""));
    assert!(html.contains("Trial 1 — keeps the target up to 8 requests/s"));
    // The decision record carries the same figures, each with where it came from (an absolute
    // link, from RENTCHECK_PUBLIC_URL).
    let record = app
        .get(&format!("/briefs/{brief}/decision.md"))
        .await
        .text()
        .await
        .unwrap();
    assert!(
        record.contains(&format!(
            "| Capacity of one replica at the SLO | 8 requests/s ({}/evidence/{}) |",
            rentcheck::config::AppConfig::default().public_url,
            evidence["id"].as_str().unwrap()
        )),
        "{record}"
    );
}

/// A trial with no rate of its own is priced from its provider's current price row; the review
/// pins that row, so a newer sheet changes the figures and makes an approval stale.
#[tokio::test]
async fn a_review_priced_from_a_sheet_goes_stale_when_a_new_sheet_arrives() {
    let app = spawn_app().await;
    let brief = BriefBuilder::new().trial_gpu("H100 SXM", 2).create_id(&app).await;
    TrialBuilder::first_of(&app, &brief)
        .await
        .provider("Cloud B")
        .without_rate()
        .save(&app)
        .await;
    let manager = bearer_client(&app.token(Role::Manager, None).await);
    PriceSheet::new()
        .row(PriceRow::new("Cloud B", "H100 SXM", 2, "2.49").source("quote 7"))
        .row(
            PriceRow::new("Cloud B", "H100 SXM", 2, "2.10")
                .currency("EUR")
                .region("eu-west")
                .source("quote 7 in euros"),
        )
        .row(PriceRow::new("Cloud A", "H100 SXM", 8, "1.99").source("a.example"))
        .import(&app)
        .await;
    upload(&app, &brief, run("conc8", 8.0, 800.0, 1).to_string().into_bytes()).await;

    let r = review(&app, &brief).await;
    let money = &r["trials"][0]["money"];
    // Cloud B's USD row of 2-GPU nodes, not its EUR row and not Cloud A's cheaper 8-GPU nodes
    // (another offer): 2 × 2.49 = 4.98.
    assert_eq!(money["rate"]["source"]["from"], "price_row");
    assert_eq!(decimal(&money["cost_per_hour"]), Decimal::new(498, 2));
    let row_id = money["rate"]["source"]["price_id"].as_str().unwrap().to_owned();
    let prices: Value = app.get("/api/v1/prices").await.json().await.unwrap();
    let row = prices["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["id"] == row_id.as_str())
        .expect("the pinned row is a current price")
        .clone();
    assert_eq!(
        (row["provider"].as_str(), row["currency"].as_str()),
        (Some("Cloud B"), Some("USD"))
    );

    let digest = r["inputs_digest"].as_str().unwrap().to_owned();
    let res = manager
        .post(app.url(&format!("/api/v1/briefs/{brief}/approvals")))
        .json(&json!({ "verdict": "approve", "inputs_digest": digest }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 201, "{}", res.text().await.unwrap());
    assert_eq!(review(&app, &brief).await["approval"]["stale"], false);

    // Cloud B's price drops in a newer sheet: new figures, a stale approval naming what moved.
    PriceSheet::new()
        .row(
            PriceRow::new("Cloud B", "H100 SXM", 2, "2.19")
                .valid_from("2026-11-15")
                .source("quote 8"),
        )
        .import(&app)
        .await;
    let r = review(&app, &brief).await;
    assert_eq!(decimal(&r["trials"][0]["cost_per_hour"]), Decimal::new(438, 2));
    assert_ne!(r["inputs_digest"], json!(digest));
    assert_eq!(r["approval"]["stale"], true);
    assert!(
        r["approval"]["changed"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c == "money.rate"),
        "{}",
        r["approval"]["changed"]
    );
}

/// Trials compared before anything was accepted: the chart draws what ranks them, each trial's
/// cost per million output tokens at the SLO (it drew nothing: it only knew the cost per job).
#[tokio::test]
async fn trials_with_no_accepted_outputs_are_charted_by_their_cost_at_the_slo() {
    use common::vllm_points::{load_point, Load};
    let app = spawn_app().await;
    let brief = BriefBuilder::new()
        .trial_gpu("H100 SXM", 2)
        .targets(common::vllm_points::targets())
        .create_id(&app)
        .await;
    let first = TrialBuilder::first_of(&app, &brief)
        .await
        .rate_per_gpu_hour("2.00")
        .save(&app)
        .await;
    let second = TrialBuilder::new()
        .name("Second")
        .gpus("H100 SXM", 2)
        .rate_per_gpu_hour("3.00")
        .add_id(&app, &brief)
        .await;
    let sweep = load_point(Load::at(8.0, 25.3).queued(20.0)).to_string().into_bytes();
    for trial in [&first, &second] {
        let e = EvidenceBuilder::raw("bench-serving", "application/json", sweep.clone())
            .stage(3)
            .trial(trial)
            .upload(&app, &brief)
            .await;
        assert_ne!(e["parse_status"], "failed", "{e}");
    }
    let r = review(&app, &brief).await;
    let costs: Vec<Decimal> = r["trials"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| decimal(&t["cost_per_million_output_tokens_at_slo"]))
        .collect();
    let html = app.owner_page(&format!("/briefs/{brief}/review")).await;
    assert!(
        html.contains("<h3>Cost per million output tokens at the SLO, by trial</h3>"),
        "{html}"
    );
    for c in costs {
        let shown = rentcheck::figures::with_currency(c, "USD");
        assert!(
            html.contains(&format!("<span class=\"bar-value\">{shown}")),
            "{shown}: {html}"
        );
    }
}
