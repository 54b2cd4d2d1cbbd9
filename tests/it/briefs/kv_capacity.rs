//! The predicted KV-cache capacity beside the one vLLM logged at start-up, on the review (page and
//! JSON) and the brief page, with a finding when the measured capacity is below the brief's need;
//! and a brief's `model_config` sent as a file through the form (multipart), kept and used.

use crate::common;
use crate::common::builders::BriefBuilder;

use common::{fixture, spawn_app};
use rentcheck::evidence::compactor;
use serde_json::{json, Value};
use uuid::Uuid;

/// Llama 3.3 70B on 4 × H100 SXM, as in the real start-up log of the fixture (TP 4,
/// `gpu_memory_utilization=0.92`, `max_model_len=32768`: 1,031,408 tokens, 31.48 × concurrency).
fn llama70b_tp4(concurrency: u32) -> BriefBuilder {
    BriefBuilder::new()
        .model("meta-llama/Llama-3.3-70B-Instruct")
        .context_length(32768)
        .concurrency(concurrency)
        .trial_gpu("H100 SXM", 4)
}

#[tokio::test]
async fn a_vllm_log_below_the_briefs_need_is_a_finding_beside_the_prediction() {
    let app = spawn_app().await;
    let id = llama70b_tp4(48).create_id(&app).await;

    // Before any log: the prediction alone, and where to send the log.
    let owner = app.login_owner().await;
    let page = owner.get(app.url(&format!("/briefs/{id}"))).await.text().await.unwrap();
    assert!(page.contains("KV cache: predicted and measured"), "{page}");
    assert!(page.contains("No vLLM start-up log for this trial yet"));

    let res = app
        .post_raw_evidence(
            &id,
            "kind=vllm-log&stage=1",
            "text/plain",
            fixture("vllm-log/v1-llama70b-tp4-startup.log"),
        )
        .await;
    assert_eq!(res.status(), 201, "{}", res.text().await.unwrap());

    let review = app.get_json(&format!("/api/v1/briefs/{id}/review")).await;
    let kv = &review["trials"][0]["kv_capacity"];
    assert_eq!(kv["measured_tokens"], 1_031_408);
    assert_eq!(kv["measured_max_concurrency"], 31.48);
    assert_eq!(
        kv["gpu_memory_utilization"], 0.92,
        "the logged utilisation drives the prediction"
    );
    assert_eq!(kv["needed_concurrency"], 48);
    assert_eq!(kv["needed_tokens"], 48 * 32768);
    // Predicted by hand: each H100 SXM (81,559 MiB as its driver reports it) at the logged 0.92,
    // less its quarter of the bf16 weights (70.55 B × 2 bytes ÷ 4) and the 5 % reserve, four GPUs
    // holding distinct KV heads; a token of one sequence is 2 (K and V) × 80 layers × 8 KV heads ×
    // 128 × 2 bytes = 327,680.
    let memory = 81_559.0 * 1_048_576.0;
    let per_gpu: f64 = 0.92 * memory - 70.55e9 * 2.0 / 4.0 - 0.05 * memory;
    let predicted = kv["predicted_tokens"].as_u64().unwrap();
    assert_eq!(predicted, (per_gpu * 4.0 / 327_680.0).floor() as u64);
    // The fixture's log is synthetic (its figure is what an H200 would hold): the ratio says so.
    let ratio = kv["ratio"].as_f64().unwrap();
    assert_eq!(ratio, (1_031_408.0 / predicted as f64 * 100.0).round() / 100.0);
    assert_eq!(ratio, 2.16);
    let findings = kv["findings"].as_array().unwrap();
    assert_eq!(findings.len(), 1, "{findings:?}");
    assert!(findings[0].as_str().unwrap().contains("31.48 sequences"));

    for path in [format!("/briefs/{id}/review"), format!("/briefs/{id}")] {
        let html = owner.get(app.url(&path)).await.text().await.unwrap();
        let section = &html[html.find("id=\"kv-capacity\"").expect(&path)..];
        let section = &section[..section.find("</section>").unwrap()];
        assert!(section.contains("1,031,408"), "{path}: {section}");
        assert!(section.contains(&format!("{ratio:.2} ×")), "{path}: the ratio is shown");
        assert!(
            section.contains("the brief needs 48 at once"),
            "{path}: the finding: {section}"
        );
        assert!(
            section.contains("/evidence/"),
            "{path}: the measured figure links to its log"
        );
    }
}

/// A real start-up log (vLLM 0.10.1 serving gpt-oss-120b with tensor parallel 4 on four A100
/// 80GB at `gpu_memory_utilization` 0.8; tests/fixtures/vllm-log/PROVENANCE.md): the prediction
/// for the brief's allocation meets its `GPU KV cache size` within 3 %.
#[tokio::test]
async fn the_prediction_meets_a_real_vllm_log_within_3_percent() {
    let app = spawn_app().await;
    let id = BriefBuilder::new()
        .without_attention()
        .without("params_b")
        .name("gpt-oss-120b on four A100")
        .model("openai/gpt-oss-120b")
        .catalog_model("openai/gpt-oss-120b")
        .context_length(16384)
        .concurrency(64)
        .trial_gpu("A100 80GB SXM", 4)
        .create_id(&app)
        .await;
    let res = app
        .post_raw_evidence(
            &id,
            "kind=vllm-log&stage=1",
            "text/plain",
            fixture("vllm-log/v0.10.1-gpt-oss-120b-tp4-4x-a100-80gb-gmu0.8.log"),
        )
        .await;
    assert_eq!(res.status(), 201, "{}", res.text().await.unwrap());
    let review = app.get_json(&format!("/api/v1/briefs/{id}/review")).await;
    let kv = &review["trials"][0]["kv_capacity"];
    assert_eq!(kv["measured_tokens"], 2_640_144);
    assert_eq!(kv["gpu_memory_utilization"], 0.8);
    let predicted = kv["predicted_tokens"].as_f64().unwrap();
    let off = 2_640_144.0 / predicted - 1.0;
    assert!(off.abs() <= 0.03, "predicted {predicted}: {:.1} % off", off * 100.0);
    assert_eq!(kv["ratio"], 1.01);
}

#[tokio::test]
async fn a_capacity_that_holds_the_brief_has_no_finding() {
    let app = spawn_app().await;
    let id = llama70b_tp4(16).create_id(&app).await;
    let res = app
        .post_raw_evidence(
            &id,
            "kind=vllm-log&stage=1",
            "text/plain",
            fixture("vllm-log/v1-llama70b-tp4-startup.log"),
        )
        .await;
    assert_eq!(res.status(), 201);
    let review = app.get_json(&format!("/api/v1/briefs/{id}/review")).await;
    assert_eq!(review["trials"][0]["kv_capacity"]["findings"], json!([]));
    let html = app.owner_page(&format!("/briefs/{id}/review")).await;
    assert!(html.contains("The measured capacity holds what the brief needs."));
}

#[tokio::test]
async fn a_config_json_file_sent_through_the_form_is_kept_and_sizes_the_brief() {
    let app = spawn_app().await;
    let person = app.login(rentcheck::auth::Role::Engineer).await;
    let config = fixture("model-configs/gemma-3-27b-it.json");
    let text_fields = [
        ("csrf_token", person.csrf.as_str()),
        ("name", "Gemma from its config"),
        ("owner", "infra@example.com"),
        ("workload_kind", "realtime-inference"),
        ("model_name", "google/gemma-3-27b-it"),
        ("params_b", "27.43"),
        ("precision", "bf16"),
        ("context_length", "32768"),
        ("concurrency", "4"),
        ("data_boundary", "shared-ok"),
        ("allocation_boundary", "vm"),
        ("cost_unit", "request"),
        ("currency", "USD"),
        ("model_config", ""),
        ("intent", "save"),
    ];
    let mut form = reqwest::multipart::Form::new();
    for (k, v) in text_fields {
        form = form.text(k, v.to_owned());
    }
    form = form.part(
        "model_config",
        reqwest::multipart::Part::bytes(config.clone())
            .file_name("config.json")
            .mime_str("application/json")
            .unwrap(),
    );
    let res = person
        .client
        .post(app.url("/briefs/new"))
        .multipart(form)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 303, "{}", res.text().await.unwrap());
    let location = res.headers()["location"].to_str().unwrap().to_owned();
    let id = location.trim_start_matches("/briefs/");

    let brief: Value = app.get(&format!("/api/v1/briefs/{id}")).await.json().await.unwrap();
    let sent: Value = serde_json::from_slice(&config).unwrap();
    assert_eq!(
        brief["model_config"], sent,
        "the file is kept as the brief's model_config"
    );
    // 10 global layers × 32768 tokens + 52 sliding-window layers × 1024, 16 KV heads × 128 × 2 B,
    // K and V: per token of one 32768-token sequence.
    let per_token = 2 * 16 * 128 * 2 * (10 * 32768 + 52 * 1024) / 32768;
    assert_eq!(brief["sizing"]["kv_bytes_per_token"], per_token);

    // The brief page says what was read; the edit form gives the config back to edit.
    let page = person.get(app.url(&location)).await.text().await.unwrap();
    assert!(page.contains("What the sizing read from the architecture"));
    assert!(
        page.contains(&format!("{} bytes", rentcheck::figures::count(per_token))),
        "the KV bytes a token"
    );
    let edit = person
        .get(app.url(&format!("{location}/edit")))
        .await
        .text()
        .await
        .unwrap();
    let edit = edit.replace("&#34;", "\"").replace("&quot;", "\"");
    assert!(
        edit.contains("\"num_hidden_layers\": 62"),
        "the textarea holds the config"
    );
}

/// vLLM logs its concurrency at its own `max_model_len` (here 31.48 sequences of 32,768 tokens).
/// A brief at 8,192 tokens asks another question: the 1,031,408-token cache holds 1,031,408 ÷ 8,192
/// = 125.9 sequences of the brief's context, more than the 48 it needs, so there is no alarm.
#[tokio::test]
async fn the_kv_check_is_at_the_briefs_context_not_at_vllms_own_request_length() {
    let app = spawn_app().await;
    let id = llama70b_tp4(48).context_length(8192).create_id(&app).await;
    let res = app
        .post_raw_evidence(
            &id,
            "kind=vllm-log&stage=1",
            "text/plain",
            fixture("vllm-log/v1-llama70b-tp4-startup.log"),
        )
        .await;
    assert_eq!(res.status(), 201);
    let review = app.get_json(&format!("/api/v1/briefs/{id}/review")).await;
    let kv = &review["trials"][0]["kv_capacity"];
    assert_eq!(
        kv["findings"],
        json!([]),
        "31.48 at 32,768 tokens is no shortage at 8,192: {kv}"
    );
    assert_eq!(kv["measured_sequences_at_context"], 1_031_408.0 / 8192.0);
    assert_eq!(kv["context_length"], 8192);
    let html = app.owner_page(&format!("/briefs/{id}/review")).await;
    assert!(html.contains("The measured capacity holds what the brief needs."));
    assert!(
        html.contains("31.5 sequences of 32,768 tokens (its max_model_len)"),
        "vLLM's own figure is shown at its own length"
    );
}

/// When the measured KV cache of the allocation under test is short at the brief's context, the
/// sizing table on the same page does not call that allocation "fits".
#[tokio::test]
async fn an_option_marked_fits_never_contradicts_the_kv_box_on_the_brief_page() {
    let app = spawn_app().await;
    // 36 sequences of 32,768 tokens on 8 × H100 SXM: the sizing says it fits; the logged cache
    // holds 1,031,408 ÷ 32,768 = 31.5 of them.
    let id = llama70b_tp4(36).trial_gpu_count(8).create_id(&app).await;
    let brief: Value = app.get(&format!("/api/v1/briefs/{id}")).await.json().await.unwrap();
    let option = brief["sizing"]["options"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["gpu"] == "H100 SXM")
        .unwrap()
        .clone();
    assert_eq!(option["fits"], true, "the prediction alone fits: {option}");
    assert!(option["count"].as_u64().unwrap() <= 8);
    let res = app
        .post_raw_evidence(
            &id,
            "kind=vllm-log&stage=1",
            "text/plain",
            fixture("vllm-log/v1-llama70b-tp4-startup.log"),
        )
        .await;
    assert_eq!(res.status(), 201);
    let html = app.owner_page(&format!("/briefs/{id}")).await;
    let kv = &html[html.find("id=\"kv-capacity\"").unwrap()..];
    assert!(kv[..kv.find("</section>").unwrap()].contains("short"));
    let table = &html[html.find("class=\"sizing-table").unwrap()..];
    let row = &table[table.find("data-gpu=\"H100 SXM\"").unwrap()..];
    let row = &row[..row.find("</tr>").unwrap()];
    assert!(!row.contains(">fits<"), "the row under test does not say fits: {row}");
    assert!(row.contains("the measured KV cache of the trial is short"), "{row}");
}

/// The concurrency a load test ran at (`vllm bench serve --max-concurrency 64`) is the tool's, not
/// vLLM's room for sequences: a load test sent after the start-up log leaves the KV check on the
/// log's figure, and still names its own operating point by its 64 requests at once.
#[tokio::test]
async fn a_load_tests_concurrency_is_not_the_kv_caches() {
    let app = spawn_app().await;
    let id = llama70b_tp4(16).create_id(&app).await;
    let log = fixture("vllm-log/v1-llama70b-tp4-startup.log");
    let res = app
        .post_raw_evidence(&id, "kind=vllm-log&stage=1", "text/plain", log)
        .await;
    assert_eq!(res.status(), 201, "{}", res.text().await.unwrap());
    let bench = fixture("bench-serving/vllm-bench-serve-sglang-pd-gpt-oss-120b-8xh200-conc64.json");
    let res = app
        .post_raw_evidence(&id, "kind=bench-serving&stage=3", "application/json", bench)
        .await;
    assert_eq!(res.status(), 201, "{}", res.text().await.unwrap());

    // The first trial of the review as it is now.
    let trial = || async {
        let review = app.get_json(&format!("/api/v1/briefs/{id}/review")).await;
        review["trials"][0].clone()
    };
    let now = trial().await;
    let kv = &now["kv_capacity"];
    assert_eq!(kv["measured_max_concurrency"], 31.48, "{kv}");
    assert_eq!(kv["measured_tokens_per_request"], 32768);
    let described = now["operating_point"]["described"].clone();
    assert!(
        described.as_str().unwrap().contains("64 requests at once"),
        "{described}"
    );

    // A load test stored before the key was its own (parser version 7) held vLLM's key, and as the
    // newest value it took the log's place: the migration gives it its own key again.
    let load_test: Uuid = sqlx::query_scalar("SELECT id FROM evidence WHERE kind = 'bench-serving'")
        .fetch_one(&app.pool)
        .await
        .unwrap();
    while compactor::compact_once(&app.pool, 100).await.unwrap() > 0 {}
    sqlx::query(
        "UPDATE evidence SET metrics = (metrics - 'serving.load_concurrency')
             || jsonb_build_object('serving.max_concurrency', metrics -> 'serving.load_concurrency')
         WHERE id = $1",
    )
    .bind(load_test)
    .execute(&app.pool)
    .await
    .unwrap();
    sqlx::query(
        "INSERT INTO evidence_metrics_latest
             (brief_id, trial_id, key, stage, value, evidence_id, collected_at, received_at)
         SELECT brief_id, trial_id, 'serving.max_concurrency', stage, metrics -> 'serving.max_concurrency',
                id, collected_at, received_at
         FROM evidence WHERE id = $1",
    )
    .bind(load_test)
    .execute(&app.pool)
    .await
    .unwrap();
    sqlx::query("INSERT INTO review_changes (brief_id) SELECT brief_id FROM evidence WHERE id = $1")
        .bind(load_test)
        .execute(&app.pool)
        .await
        .unwrap();
    assert_eq!(
        trial().await["kv_capacity"]["measured_max_concurrency"],
        64.0,
        "the old state"
    );

    sqlx::raw_sql(include_str!(
        "../../../migrations/20261207230000_load_tests_own_concurrency_key.sql"
    ))
    .execute(&app.pool)
    .await
    .unwrap();
    // At once (the readers read the queue), and after the compactor folded it.
    for compacted in [false, true] {
        if compacted {
            while compactor::compact_once(&app.pool, 100).await.unwrap() > 0 {}
        }
        let now = trial().await;
        assert_eq!(
            now["kv_capacity"]["measured_max_concurrency"], 31.48,
            "compacted: {compacted}"
        );
        let described = now["operating_point"]["described"].clone();
        assert!(
            described.as_str().unwrap().contains("64 requests at once"),
            "{described}"
        );
    }
}

/// A concurrency sent on its own (a `metrics` upload) names no request length and no tokens: the
/// page says it cannot be compared, never that the capacity holds.
#[tokio::test]
async fn a_concurrency_without_its_length_is_not_said_to_hold() {
    let app = spawn_app().await;
    let id = llama70b_tp4(16).create_id(&app).await;
    let body = br#"{"metrics": {"serving.max_concurrency": 40}}"#.to_vec();
    let res = app
        .post_raw_evidence(&id, "kind=metrics&stage=1", "application/json", body)
        .await;
    assert_eq!(res.status(), 201, "{}", res.text().await.unwrap());
    let owner = app.login_owner().await;
    let html = owner.get(app.url(&format!("/briefs/{id}"))).await.text().await.unwrap();
    let section = &html[html.find("id=\"kv-capacity\"").unwrap()..];
    let section = &section[..section.find("</section>").unwrap()];
    assert!(section.contains("cannot be set against the brief"), "{section}");
    assert!(!section.contains("holds what the brief needs"), "{section}");
}
