//! A brief's `model_config` (the model's config.json) and architecture fields through the API:
//! kept with the brief, used by the sizing, and refused on the field when they are bad.

use crate::common;
use crate::common::builders::BriefBuilder;

use common::{fixture, spawn_app};
use serde_json::{json, Value};

const GIB: f64 = 1_073_741_824.0;

fn gemma3_config() -> Value {
    serde_json::from_slice(&fixture("model-configs/gemma-3-27b-it.json")).unwrap()
}

/// The valid brief without its explicit architecture, for Gemma 3 27B from its config.json.
fn gemma3_brief() -> BriefBuilder {
    BriefBuilder::new()
        .without_attention()
        .name("Gemma 3 27B chat")
        .model("google/gemma-3-27b-it")
        .params_b(27.43)
        .context_length(32768)
        .concurrency(4)
        .model_config(gemma3_config())
        .expected_peak_rps(3.5)
        .api_price_per_million_tokens("0.20")
}

async fn problem_fields(res: reqwest::Response) -> Vec<(String, String)> {
    assert_eq!(res.status(), 422);
    let body: Value = res.json().await.unwrap();
    body["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["field"].as_str().unwrap().to_owned(),
                e["message"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[tokio::test]
async fn model_config_round_trips_and_drives_the_sizing() {
    let app = spawn_app().await;
    let res = gemma3_brief().post(&app).await;
    assert_eq!(res.status(), 201);
    let created: Value = res.json().await.unwrap();
    let id = created["id"].as_str().unwrap();
    assert_eq!(created["model_config"], gemma3_config(), "kept as given");
    assert_eq!(created["expected_peak_rps"], 3.5);
    assert_eq!(created["api_price_per_million_tokens"], "0.2");
    assert!(created["num_layers"].is_null() && created["sliding_window"].is_null());

    let fetched: Value = app.get(&format!("/api/v1/briefs/{id}")).await.json().await.unwrap();
    assert_eq!(fetched["model_config"], gemma3_config());
    assert_eq!(fetched["sizing"], created["sizing"]);

    // Sized from the config: 10 global layers × 32768 tokens + 52 local × 1024, 2 × 16 KV heads
    // × 128 × 2 B each, 4 sequences.
    let sizing = &fetched["sizing"];
    let per_seq = 2.0 * 16.0 * 128.0 * 2.0 * (10.0 * 32768.0 + 52.0 * 1024.0);
    let kv = sizing["kv_cache_gib"].as_f64().unwrap();
    assert!((kv / (4.0 * per_seq / GIB) - 1.0).abs() < 0.02, "{kv}");
    assert_eq!(sizing["kv_bytes_per_token"], (per_seq / 32768.0) as u64);
    let notes = sizing["architecture_notes"].as_array().unwrap();
    assert!(notes[0]
        .as_str()
        .unwrap()
        .contains("62 layers, 32 attention heads, 16 KV heads"));
    for o in sizing["options"].as_array().unwrap() {
        assert!(o["tensor_parallel"].as_u64().unwrap() >= 1 && o["pipeline_parallel"].as_u64().unwrap() >= 1);
        assert!(o.get("load_note").is_some());
    }

    // An explicit field wins over the config, and the sizing says so.
    let mut body = fetched.clone();
    body["num_kv_heads"] = json!(32);
    let res = app.put_json(&format!("/api/v1/briefs/{id}"), &body).await;
    assert_eq!(res.status(), 200);
    let updated: Value = res.json().await.unwrap();
    assert_eq!(updated["num_kv_heads"], 32);
    let kv2 = updated["sizing"]["kv_cache_gib"].as_f64().unwrap();
    assert!((kv2 / kv - 2.0).abs() < 0.01, "{kv} → {kv2}");
    let notes = updated["sizing"]["architecture_notes"].to_string();
    assert!(
        notes.contains("num_kv_heads 32 as given; config.json says 16"),
        "{notes}"
    );
    assert_eq!(updated["model_config"], gemma3_config());
}

#[tokio::test]
async fn architecture_fields_once_refused_are_brief_fields() {
    let app = spawn_app().await;
    // A DeepSeek-style MLA MoE without a catalogue row or config: the fields are enough.
    let res = BriefBuilder::new()
        .model("acme/latent-moe")
        .params_b(236.0)
        .precision("bf16")
        .attention(60, 128, 192)
        .set("num_attention_heads", 128)
        .set("kv_lora_rank", 512)
        .set("qk_rope_head_dim", 64)
        .experts(160, 6)
        .set("active_params_b", 21)
        .context_length(32768)
        .concurrency(4)
        .post(&app)
        .await;
    assert_eq!(res.status(), 201);
    let created: Value = res.json().await.unwrap();
    assert_eq!(created["kv_lora_rank"], 512);
    assert_eq!(created["experts_per_token"], 6);
    // (512 + 64) × 60 layers × 2 B per token, not 2 × 128 × 192 × 60 × 2.
    assert_eq!(created["sizing"]["kv_bytes_per_token"], 576 * 60 * 2);

    // Sliding window with its layer list.
    let layer_types: Vec<&str> = (0..80)
        .map(|i| {
            if i % 2 == 0 {
                "sliding_attention"
            } else {
                "full_attention"
            }
        })
        .collect();
    let res = BriefBuilder::new()
        .set("sliding_window", 4096)
        .set("layer_types", layer_types)
        .context_length(32768)
        .post(&app)
        .await;
    assert_eq!(res.status(), 201);
    let created: Value = res.json().await.unwrap();
    // 40 full layers × 32768 + 40 windowed × 4096, 2 × 8 × 128 × 2 B, per token of context.
    let per_token = 2.0 * 8.0 * 128.0 * 2.0 * (40.0 * 32768.0 + 40.0 * 4096.0) / 32768.0;
    assert_eq!(created["sizing"]["kv_bytes_per_token"], per_token as u64);
    assert_eq!(created["layer_types"].as_array().unwrap().len(), 80);
}

#[tokio::test]
async fn bad_model_configs_are_422_on_the_field_and_nothing_is_stored() {
    let app = spawn_app().await;
    let mut megabyte = gemma3_config();
    megabyte["padding"] = Value::String("x".repeat(1_000_000));
    let cases: Vec<(Value, &str, &str)> = vec![
        (json!("not json {"), "model_config", "must be a JSON object"),
        (json!([1, 2, 3]), "model_config", "must be a JSON object"),
        (megabyte, "model_config", "KiB"),
        (
            json!({ "num_hidden_layers": "62", "num_attention_heads": 32, "hidden_size": 4096 }),
            "model_config.num_hidden_layers",
            "must be a whole number",
        ),
        (
            json!({ "text_config": { "num_hidden_layers": 62, "num_key_value_heads": [16] } }),
            "model_config.text_config.num_key_value_heads",
            "must be a whole number",
        ),
        (
            json!({ "text_config": { "num_attention_heads": 32, "num_key_value_heads": 16, "head_dim": 128 } }),
            "model_config.num_hidden_layers",
            "is missing from config.json",
        ),
        (
            json!({ "num_hidden_layers": 32, "quantization_config": "fp8" }),
            "model_config.quantization_config",
            "must be an object",
        ),
    ];
    for (config, field, message) in cases {
        let errors = problem_fields(gemma3_brief().model_config(config).post(&app).await).await;
        let found = errors.iter().find(|(f, _)| f == field);
        assert!(
            found.is_some_and(|(_, m)| m.contains(message)),
            "{field} / {message} not in {errors:?}"
        );
    }
    // Contradictory explicit fields are named too.
    let errors = problem_fields(BriefBuilder::new().experts(8, 9).post(&app).await).await;
    assert_eq!(errors[0].0, "experts_per_token", "{errors:?}");
    assert_eq!(app.count("briefs").await, 0, "nothing is stored");
}

/// `kv_cache_dtype` and `speculative_decoding` are brief fields (JSON in and out, defaults auto and
/// false); a hybrid model's constant state is its own figure in the sizing and its own line on the
/// brief page and the form.
#[tokio::test]
async fn serving_settings_and_a_hybrids_state_through_the_api_and_the_pages() {
    let app = spawn_app().await;
    let created = BriefBuilder::new().create(&app).await;
    assert_eq!(created["kv_cache_dtype"], "auto", "16-bit KV unless asked");
    assert_eq!(created["speculative_decoding"], false);
    assert_eq!(created["sizing"]["state_gib"], 0.0);

    // Qwen3.5-35B-A3B from the catalogue: 10 attention layers (2 KV heads × 256) and 30 Gated
    // DeltaNet layers, one multi-token-prediction layer.
    let res = BriefBuilder::new()
        .without_attention()
        .without("params_b")
        .name("Qwen3.5 agents")
        .model("Qwen/Qwen3.5-35B-A3B")
        .catalog_model("Qwen/Qwen3.5-35B-A3B")
        .context_length(65536)
        .concurrency(16)
        .kv_cache_dtype("fp8")
        .speculative_decoding(true)
        .post(&app)
        .await;
    assert_eq!(res.status(), 201, "{}", res.text().await.unwrap());
    let created: Value = res.json().await.unwrap();
    let id = created["id"].as_str().unwrap().to_owned();
    assert_eq!(
        (&created["kv_cache_dtype"], &created["speculative_decoding"]),
        (&json!("fp8"), &json!(true))
    );
    let sizing = &created["sizing"];
    // fp8 KV over 11 KV layers (10 attention + the MTP layer): 2 × 11 × 2 × 256 × 1 B per token.
    assert_eq!(sizing["kv_bytes_per_token"], 2 * 11 * 2 * 256);
    // State: 30 layers × (32 × 128 × 128 × 4 B + 3 × (2 × 16 × 128 + 32 × 128) × 2 B) × 16
    // sequences = 0.96 GiB, whatever the context.
    let state = 30.0 * (32.0 * 128.0 * 128.0 * 4.0 + 3.0 * 8192.0 * 2.0) * 16.0 / GIB;
    assert!(
        (sizing["state_gib"].as_f64().unwrap() - state).abs() < 0.005,
        "{sizing}"
    );
    // kv_cache_gib is the KV total: the attention layers' KV plus the state beside it.
    let kv = 16.0 * 2.0 * 11.0 * 2.0 * 256.0 * 65536.0 / GIB;
    assert!(
        (sizing["kv_cache_gib"].as_f64().unwrap() - (kv + state)).abs() < 0.01,
        "{sizing}"
    );

    // Round trip: the settings come back and a PUT without them resets them to the defaults.
    let fetched: Value = app.get(&format!("/api/v1/briefs/{id}")).await.json().await.unwrap();
    assert_eq!(fetched["kv_cache_dtype"], "fp8");
    let mut back = fetched.clone();
    let map = back.as_object_mut().unwrap();
    map.remove("kv_cache_dtype");
    map.remove("speculative_decoding");
    let updated: Value = app
        .put_json(&format!("/api/v1/briefs/{id}"), &back)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        (&updated["kv_cache_dtype"], &updated["speculative_decoding"]),
        (&json!("auto"), &json!(false))
    );
    assert_eq!(updated["sizing"]["kv_bytes_per_token"], 2 * 10 * 2 * 256 * 2);

    // The brief page says what each figure is: the state has its own line.
    let owner = app.login_owner().await;
    let page = owner.get(app.url(&format!("/briefs/{id}"))).await.text().await.unwrap();
    let line = &page[page.find("id=\"sizing-state\"").expect("a state line")..];
    assert!(
        line[..line.find("</div>").unwrap()].contains("0.96 GiB for 16 sequences, independent of context"),
        "{line}"
    );
    assert!(page.contains("30 of 40 layers are Gated DeltaNet (linear attention) layers"));
    // The KV line is the KV total, its attention part beside it: after the reset (16-bit KV, no
    // MTP layer) 16 × 20,480 B × 65,536 tokens = 20.00 GiB of attention KV + 0.96 GiB of state.
    assert!(
        page.contains("20.96 GiB in all: 20.00 GiB in the attention layers and the state below"),
        "the KV total and its parts"
    );

    // Bad values are refused on their field.
    let bad = BriefBuilder::new()
        .kv_cache_dtype("int4")
        .set("speculative_decoding", "sometimes");
    let fields = problem_fields(bad.post(&app).await).await;
    let named: Vec<&str> = fields.iter().map(|(f, _)| f.as_str()).collect();
    assert!(
        named.contains(&"kv_cache_dtype") && named.contains(&"speculative_decoding"),
        "{fields:?}"
    );
}

#[tokio::test]
async fn the_form_offers_the_serving_settings_and_previews_the_state_line() {
    let app = spawn_app().await;
    let person = app.login(rentcheck::auth::Role::Engineer).await;
    let form = person.get(app.url("/briefs/new")).await.text().await.unwrap();
    assert!(form.contains("name=\"kv_cache_dtype\"") && form.contains("name=\"speculative_decoding\""));
    let fields = [
        ("csrf_token", person.csrf.as_str()),
        ("name", "Nemotron preview"),
        ("owner", "infra@example.com"),
        ("workload_kind", "realtime-inference"),
        ("catalog_model", "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16"),
        ("precision", "bf16"),
        ("context_length", "131072"),
        ("concurrency", "8"),
        ("kv_cache_dtype", "fp8"),
        ("data_boundary", "shared-ok"),
        ("allocation_boundary", "vm"),
        ("cost_unit", "request"),
        ("currency", "USD"),
        ("intent", "preview"),
    ];
    let mut multipart = reqwest::multipart::Form::new();
    for (k, v) in fields {
        multipart = multipart.text(k, v.to_owned());
    }
    let res = person
        .client
        .post(app.url("/briefs/new"))
        .multipart(multipart)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let html = res.text().await.unwrap();
    // 23 Mamba-2 layers × (64 × 64 × 128 × 4 B + 3 × (4096 + 2048) × 2 B) × 8 sequences.
    let state = 23.0 * (64.0 * 64.0 * 128.0 * 4.0 + 3.0 * 6144.0 * 2.0) * 8.0 / GIB;
    assert!(
        html.contains(&format!("{state:.2} GiB for 8 sequences, independent of context")),
        "the preview has the state line"
    );
    assert!(html.contains("<option value=\"fp8\" selected"), "the choice is kept");
}

/// The brief's traffic headroom and a managed API's input and output prices: kept as given,
/// checked at the field, and the page's form offers them.
#[tokio::test]
async fn headroom_and_api_prices_per_token_kind_round_trip_and_are_checked() {
    let app = spawn_app().await;
    let res = gemma3_brief()
        .headroom_pct(20.0)
        .api_prices_per_million("0.15", "0.60")
        .post(&app)
        .await;
    assert_eq!(res.status(), 201);
    let created: Value = res.json().await.unwrap();
    assert_eq!(created["headroom_pct"], 20.0);
    assert_eq!(created["api_price_input_per_million"], "0.15");
    assert_eq!(created["api_price_output_per_million"], "0.6");
    let bad = gemma3_brief()
        .headroom_pct(-5.0)
        .set("api_price_output_per_million", "$1");
    let fields: Vec<String> = problem_fields(bad.post(&app).await)
        .await
        .into_iter()
        .map(|(f, _)| f)
        .collect();
    assert_eq!(fields, ["headroom_pct", "api_price_output_per_million"]);
    let id = created["id"].as_str().unwrap();
    let form = app.owner_page(&format!("/briefs/{id}/edit")).await;
    assert!(form.contains("name=\"headroom_pct\" value=\"20\""), "the form keeps it");
    assert!(form.contains("name=\"api_price_input_per_million\" value=\"0.15\""));
}
