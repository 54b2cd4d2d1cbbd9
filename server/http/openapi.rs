//! `/api/openapi.json`: the OpenAPI 3.1 document of every `/api/v1` route.
//!
//! Built with utoipa's builders rather than derives: the brief bodies are validated field by field
//! from a JSON map (so there is no request struct to derive from) and evidence uploads come in three
//! content types. `tests/openapi.rs` checks that every `.route("/api/v1…")` in `server/` is described.

use axum::{
    http::header,
    response::{IntoResponse, Response},
};
use utoipa::openapi::{
    header::HeaderBuilder,
    path::{HttpMethod, OperationBuilder, ParameterBuilder, ParameterIn, PathItem},
    request_body::RequestBodyBuilder,
    schema::{ArrayBuilder, ComponentsBuilder, KnownFormat, ObjectBuilder, SchemaFormat, SchemaType, Type},
    security::{HttpAuthScheme, HttpBuilder, SecurityRequirement, SecurityScheme},
    ContentBuilder, InfoBuilder, OpenApi, OpenApiBuilder, PathsBuilder, Ref, RefOr, Required, ResponseBuilder, Schema,
};

use crate::evidence::parsers::EvidenceKind;

fn obj(description: &str) -> ObjectBuilder {
    ObjectBuilder::new()
        .schema_type(Type::Object)
        .description(Some(description))
}

fn typed(t: Type, description: &str) -> Schema {
    ObjectBuilder::new()
        .schema_type(t)
        .description(Some(description))
        .into()
}

fn json_content(schema: impl Into<RefOr<Schema>>) -> utoipa::openapi::Content {
    ContentBuilder::new().schema(Some(schema)).build()
}

fn component(name: &str) -> RefOr<Schema> {
    RefOr::Ref(Ref::from_schema_name(name))
}

fn problem_response(description: &str) -> utoipa::openapi::Response {
    ResponseBuilder::new()
        .description(description)
        .content("application/problem+json", json_content(component("Problem")))
        .build()
}

fn ok_json(description: &str, schema: impl Into<RefOr<Schema>>) -> utoipa::openapi::Response {
    ResponseBuilder::new()
        .description(description)
        .content("application/json", json_content(schema))
        .build()
}

fn id_param(description: &str) -> utoipa::openapi::path::Parameter {
    path_param("id", description)
}

fn path_param(name: &str, description: &str) -> utoipa::openapi::path::Parameter {
    ParameterBuilder::new()
        .name(name)
        .parameter_in(ParameterIn::Path)
        .required(Required::True)
        .description(Some(description))
        .schema(Some(
            ObjectBuilder::new()
                .schema_type(Type::String)
                .format(Some(SchemaFormat::KnownFormat(KnownFormat::Uuid))),
        ))
        .build()
}

fn query_param(name: &str, t: Type, description: &str) -> utoipa::openapi::path::Parameter {
    ParameterBuilder::new()
        .name(name)
        .parameter_in(ParameterIn::Query)
        .required(Required::False)
        .description(Some(description))
        .schema(Some(typed(t, description)))
        .build()
}

fn op(id: &str, tag: &str, summary: &str) -> OperationBuilder {
    OperationBuilder::new()
        .operation_id(Some(id))
        .tag(tag)
        .summary(Some(summary))
}

// Long, and reads better whole: one schema per type the API answers with, a table to read down.
fn components() -> utoipa::openapi::Components {
    let kinds: Vec<&str> = std::iter::once("auto")
        .chain(EvidenceKind::ALL.iter().map(EvidenceKind::as_str))
        .collect();
    let problem = obj("RFC 9457 problem details")
        .property("type", typed(Type::String, "problem type URI"))
        .property("title", typed(Type::String, "the status's reason phrase"))
        .property("status", typed(Type::Integer, "HTTP status"))
        .property("detail", typed(Type::String, "what went wrong"))
        .property(
            "errors",
            ArrayBuilder::new().items(
                obj("one invalid field")
                    .property("field", typed(Type::String, "field name"))
                    .property("message", typed(Type::String, "what is wrong with it")),
            ),
        )
        .property("request_id", typed(Type::String, "the x-request-id of the request"))
        .required("type")
        .required("title")
        .required("status")
        .required("detail");
    let brief = obj(
        "A workload brief: the fields of the contract (name, owner, workload_kind, model_name, params_b, \
         precision, context_length, concurrency, targets, data_boundary, allocation_boundary, …); \
         `model_config` (the model's config.json object) and the architecture fields num_attention_heads, \
         kv_lora_rank, qk_rope_head_dim, sliding_window, sliding_window_layers, layer_types, \
         attention_chunk_size, chunked_layers, num_experts, experts_per_token, active_params_b; the serving \
         settings kv_cache_dtype (auto | fp8, default auto = 16-bit KV whatever the weight precision) and \
         speculative_decoding (bool, default false: multi-token-prediction layers' KV counts only when true); \
         expected_peak_rps, headroom_pct (percent above the peak, default 0), api_price_input_per_million and \
         api_price_output_per_million (decimal strings; the older api_price_per_million_tokens is the output \
         price with input free); answers add `id`, `sizing` and `status`.",
    );
    let envelope = obj("JSON envelope for an evidence upload: exactly one of content, content_base64 or data")
        .property(
            "trial",
            typed(
                Type::String,
                "the trial it belongs to; needed when the brief has several and the token names none",
            ),
        )
        .property(
            "kind",
            ObjectBuilder::new()
                .schema_type(Type::String)
                .enum_values(Some(kinds.clone())),
        )
        .property(
            "stage",
            ObjectBuilder::new()
                .schema_type(Type::Integer)
                .minimum(Some(1))
                .maximum(Some(5)),
        )
        .property(
            "collected_at",
            ObjectBuilder::new()
                .schema_type(Type::String)
                .format(Some(SchemaFormat::KnownFormat(KnownFormat::DateTime))),
        )
        .property(
            "labels",
            obj("string labels; {window, phase: before|after} pair vLLM scrapes into a window"),
        )
        .property("content", typed(Type::String, "the tool output as text"))
        .property("content_base64", typed(Type::String, "the tool output as base64 bytes"))
        .property(
            "content_type",
            typed(Type::String, "content type of content_base64's bytes"),
        )
        .property("data", obj("the tool output as a JSON object"))
        .property(
            "idempotency_key",
            typed(Type::String, "batch items only: this item's Idempotency-Key"),
        )
        .required("kind")
        .required("stage");
    let multipart = obj(
        "multipart/form-data: a `file` part, and kind, stage, collected_at, labels (JSON) or \
         label.<name> as text parts or query parameters",
    )
    .property(
        "file",
        ObjectBuilder::new()
            .schema_type(Type::String)
            .format(Some(SchemaFormat::KnownFormat(KnownFormat::Binary))),
    )
    .property("kind", typed(Type::String, "a kind or auto"))
    .property("stage", typed(Type::Integer, "1 to 5"))
    .required("file");
    let ingested = obj(
        "the committed evidence: id, kind, parse_status (ok | partial | failed), parse_error, metrics, \
         warnings, sha256, size_bytes, links",
    );
    let summary = obj("an evidence item without metrics or bytes");
    let detail = obj("an evidence item with its parsed metrics, warnings, tool, tool_version and parser_version");
    let page = obj("a page of evidence, newest first")
        .property("items", ArrayBuilder::new().items(component("EvidenceSummary")))
        .property(
            "next_cursor",
            ObjectBuilder::new()
                .schema_type(SchemaType::from_iter([Type::String, Type::Null]))
                .description(Some("pass as ?cursor= for the next page; null at the end")),
        );
    ComponentsBuilder::new()
        .security_scheme(
            "bearer",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .bearer_format("JWT")
                    .description(Some("a token from `rentcheck token mint` or a brief's tokens page"))
                    .build(),
            ),
        )
        .schema("Problem", problem)
        .schema("Brief", brief)
        .schema("EvidenceEnvelope", envelope)
        .schema("EvidenceMultipart", multipart)
        .schema("EvidenceIngested", ingested)
        .schema("EvidenceSummary", summary)
        .schema("EvidenceDetail", detail)
        .schema("EvidencePage", page)
        .build()
}

/// The document. Cheap enough to build per request; it is not on a hot path.
// Long, and reads better whole: one entry per route in the URL map's order, a table to read down,
// not steps.
pub fn document() -> OpenApi {
    let brief_id = || id_param("brief id");
    let evidence_id = || id_param("evidence id");
    let replayed = HeaderBuilder::new()
        .schema(typed(Type::String, "true"))
        .description(Some("present on a replayed answer"))
        .build();
    let upload = op(
        "uploadEvidence",
        "evidence",
        "Upload evidence: a JSON envelope, a raw body with ?kind=&stage=, or multipart with a file part",
    )
    .parameter(brief_id())
    .parameter(query_param(
        "kind",
        Type::String,
        "raw and multipart forms: a kind, or auto",
    ))
    .parameter(query_param("stage", Type::Integer, "raw and multipart forms: 1 to 5"))
    .parameter(query_param("collected_at", Type::String, "RFC 3339; default: now"))
    .parameter(
        ParameterBuilder::new()
            .name("Idempotency-Key")
            .parameter_in(ParameterIn::Header)
            .required(Required::False)
            .description(Some(
                "a retry with the same key and body returns the first answer; keys belong to the caller \
                 (one token, or one person) and expire after 24 hours",
            ))
            .schema(Some(
                ObjectBuilder::new()
                    .schema_type(Type::String)
                    .min_length(Some(1))
                    .max_length(Some(255))
                    .pattern(Some("^[!-~]+$"))
                    .description(Some("1 to 255 visible ASCII characters")),
            )),
    )
    .request_body(Some(
        RequestBodyBuilder::new()
            .required(Some(Required::True))
            .content("application/json", json_content(component("EvidenceEnvelope")))
            .content("multipart/form-data", json_content(component("EvidenceMultipart")))
            .content(
                "*/*",
                json_content(
                    ObjectBuilder::new()
                        .schema_type(Type::String)
                        .format(Some(SchemaFormat::KnownFormat(KnownFormat::Binary))),
                ),
            )
            .build(),
    ))
    .response("201", ok_json("committed", component("EvidenceIngested")))
    .response(
        "200",
        ResponseBuilder::new()
            .description("an idempotent replay of the first answer")
            .header("Idempotent-Replayed", replayed)
            .content("application/json", json_content(component("EvidenceIngested")))
            .build(),
    )
    .response("400", problem_response("malformed JSON, multipart or query"))
    .response("404", problem_response("no such brief"))
    .response("409", problem_response("Idempotency-Key reused with another body"))
    .response("413", problem_response("larger than RENTCHECK_MAX_UPLOAD"))
    .response(
        "415",
        problem_response("not JSON, multipart, or a raw body with ?kind=&stage="),
    )
    .response(
        "422",
        problem_response("invalid fields, or no content (\"empty evidence: the command produced no output\")"),
    );
    let upload_batch = op(
        "uploadEvidenceBatch",
        "evidence",
        "Upload up to 500 evidence items in one request (16 MiB): each stored or refused on its own, new items committed together",
    )
    .parameter(brief_id())
    .request_body(Some(
        RequestBodyBuilder::new()
            .required(Some(Required::True))
            .content(
                "application/json",
                json_content(
                    obj("{ items: [envelope + idempotency_key?] }")
                        .property("items", ArrayBuilder::new().items(component("EvidenceEnvelope")).max_items(Some(500))),
                ),
            )
            .build(),
    ))
    .response(
        "207",
        ok_json(
            "one answer per item, in order: { items: [{ index, status (201 stored, 200 replayed, 4xx refused), id?, parse_status?, parse_error?, links?, problem? }] }",
            obj("batch answer"),
        ),
    )
    .response("400", problem_response("malformed JSON"))
    .response("404", problem_response("no such brief"))
    .response("413", problem_response("larger than 16 MiB"))
    .response("415", problem_response("not JSON"))
    .response("422", problem_response("items missing, empty or more than 500"));
    let list_evidence = op(
        "listEvidence",
        "evidence",
        "Evidence of a brief, newest first, cursor-paginated",
    )
    .parameter(brief_id())
    .parameter(query_param("cursor", Type::String, "next_cursor of the previous page"))
    .parameter(
        ParameterBuilder::new()
            .name("limit")
            .parameter_in(ParameterIn::Query)
            .required(Required::False)
            .schema(Some(
                ObjectBuilder::new()
                    .schema_type(Type::Integer)
                    .minimum(Some(1))
                    .maximum(Some(200))
                    .description(Some("1 to 200; default 50")),
            ))
            .build(),
    )
    .response("200", ok_json("a page", component("EvidencePage")))
    .response("404", problem_response("no such brief"))
    .response("422", problem_response("bad cursor or limit"));
    let show_evidence = op("getEvidence", "evidence", "One evidence item, parsed (no raw bytes)")
        .parameter(evidence_id())
        .response("200", ok_json("the item", component("EvidenceDetail")))
        .response("404", problem_response("no such evidence"));
    let raw_evidence = op(
        "getEvidenceRaw",
        "evidence",
        "The exact uploaded bytes with their stored content type",
    )
    .parameter(evidence_id())
    .response(
        "200",
        ResponseBuilder::new()
            .description("the bytes; X-Content-Type-Options: nosniff; attachment unless plain text or JSON")
            .content(
                "*/*",
                json_content(
                    ObjectBuilder::new()
                        .schema_type(Type::String)
                        .format(Some(SchemaFormat::KnownFormat(KnownFormat::Binary))),
                ),
            )
            .build(),
    )
    .response("404", problem_response("no such evidence"));
    let create_brief = op("createBrief", "briefs", "Create a brief; sizing is computed")
        .request_body(Some(
            RequestBodyBuilder::new()
                .required(Some(Required::True))
                .content("application/json", json_content(component("Brief")))
                .build(),
        ))
        .response(
            "201",
            ok_json("the brief with id, sizing and status", component("Brief")),
        )
        .response("400", problem_response("malformed JSON"))
        .response("415", problem_response("not JSON"))
        .response("422", problem_response("invalid fields"));
    let list_briefs = op(
        "listBriefs",
        "briefs",
        "Briefs, newest first, cursor-paginated and filtered; each with its review summary",
    )
    .parameter(query_param(
        "q",
        Type::String,
        "words in the name, model name or catalogue model",
    ))
    .parameter(query_param(
        "state",
        Type::String,
        "summary states, comma-separated: awaiting-evidence, needs-approval, stale, approved, rejected",
    ))
    .parameter(query_param("owner", Type::String, "me, an account id or an email"))
    .parameter(query_param("team", Type::String, "a team's id or name"))
    .parameter(query_param(
        "needs_approval",
        Type::Boolean,
        "true: awaiting a manager (needs-approval or stale)",
    ))
    .parameter(query_param("stale", Type::Boolean, "true: the newest verdict is stale"))
    .parameter(query_param(
        "failing",
        Type::Boolean,
        "true: a required criterion fails",
    ))
    .parameter(query_param("cursor", Type::String, "next_cursor of the previous page"))
    .parameter(query_param(
        "limit",
        Type::Integer,
        "briefs per page, 1 to 200 (default 50)",
    ))
    .response(
        "200",
        ok_json(
            "{ items: [brief with summary], next_cursor }",
            obj("briefs")
                .property("items", ArrayBuilder::new().items(component("Brief")))
                .property(
                    "next_cursor",
                    typed(Type::String, "where the next page starts; null on the last"),
                ),
        ),
    )
    .response(
        "422",
        problem_response("an unknown state, owner or team, or a damaged cursor"),
    );
    let show_brief = op("getBrief", "briefs", "One brief with sizing and status")
        .parameter(brief_id())
        .response("200", ok_json("the brief", component("Brief")))
        .response("404", problem_response("no such brief"));
    let replace_brief = op(
        "replaceBrief",
        "briefs",
        "Replace every field of a brief; sizing is recomputed",
    )
    .parameter(brief_id())
    .request_body(Some(
        RequestBodyBuilder::new()
            .required(Some(Required::True))
            .content("application/json", json_content(component("Brief")))
            .build(),
    ))
    .response("200", ok_json("the brief", component("Brief")))
    .response("404", problem_response("no such brief"))
    .response("422", problem_response("invalid fields"));
    let sizing = op(
        "getBriefSizing",
        "briefs",
        "The per-GPU sizing table of a brief, each option with its cheapest current price in the brief's currency \
         when a sheet has one (price_per_hour, price_per_month, provider, currency, price_id, gpus_billed and \
         billing: a spot price always says spot)",
    )
    .parameter(brief_id())
    .parameter(query_param(
        "order",
        Type::String,
        "memory (default: memory rented) or price (fitting options by cheapest price per hour)",
    ))
    .response(
        "200",
        ok_json(
            "weights_gib, kv_cache_gib (the attention layers' KV, growing with tokens), state_gib (a hybrid \
                 model's constant per-sequence state of its Gated DeltaNet / Mamba-2 layers, for all sequences; \
                 0 otherwise), overhead_gib, total_gib, kv_bytes_per_token, architecture_notes, \
                 options (gpu, memory_gib (the driver's memory.total), count, fits, headroom_pct, \
                 decode_tokens_per_s_max, interconnect_note, tensor_parallel, pipeline_parallel, load_note), \
                 billing_advice",
            obj("sizing"),
        ),
    )
    .response("404", problem_response("no such brief"));

    let card_schema: Schema = obj(
        "{ brief_id, revision (0 = the generated default card), default, created_by, created_at, accepted, \
         criteria: [{ key, op, threshold, unit, stage, required, why?, status, value?, evidence_id?, reason?, source }], \
         stages: [{ stage, name, status, passed, failed, missing, advisory_failures }], warnings }",
    )
    .into();
    let get_card = op(
        "getCard",
        "cards",
        "The current acceptance card (the default card when none was saved), evaluated over the newest evidence",
    )
    .parameter(brief_id())
    .response("200", ok_json("the evaluated card", card_schema.clone()))
    .response("404", problem_response("no such brief"));
    let put_card = op("putCard", "cards", "Save the card as a new revision")
        .parameter(brief_id())
        .request_body(Some(
            RequestBodyBuilder::new()
                .required(Some(Required::True))
                .content(
                    "application/json",
                    json_content(obj("{ criteria: [{ key, op (lt, le, gt, ge, eq, ne), threshold (number, bool or string), unit, stage (1-5), required, why? }] }")),
                )
                .build(),
        ))
        .response("200", ok_json("the new revision, evaluated", card_schema))
        .response("404", problem_response("no such brief"))
        .response("422", problem_response("invalid criteria (per field: criteria[i].field)"));
    let card_revisions = op(
        "listCardRevisions",
        "cards",
        "Every saved revision of the card, newest first",
    )
    .parameter(brief_id())
    .response(
        "200",
        ok_json(
            "{ items: [{ revision, created_by, created_at, criteria }] }",
            obj("revisions"),
        ),
    )
    .response("404", problem_response("no such brief"));
    let card_revision = op(
        "getCardRevision",
        "cards",
        "One saved revision and its diff against the previous one (revision 1: against the default card)",
    )
    .parameter(brief_id())
    .parameter(
        ParameterBuilder::new()
            .name("n")
            .parameter_in(ParameterIn::Path)
            .required(Required::True)
            .description(Some("revision number, from 1"))
            .schema(Some(typed(Type::Integer, "revision number"))),
    )
    .response(
        "200",
        ok_json(
            "{ brief_id, revision, created_by, created_at, criteria, previous, diff: { added, removed, changed } }",
            obj("revision"),
        ),
    )
    .response("404", problem_response("no such brief or revision"));

    let review = op(
        "getReview",
        "review",
        "The computed decision (expand, reserve, dedicate, scale, stop) with reasons (`rule` a number, or \
         \"6b\" / \"6c\"), missing criteria, inputs_digest, criteria statuses and the latest approval; \
         `trials[]` has each trial's decision and money at the SLO, all read at its operating point \
         (operating_point: { evidence_id, run, offered_rps, achieved_rps, slo_attainment, goodput_rps, \
         qualified, described } | null; slo_attainment = good ÷ sent, goodput_rps = good ÷ duration, \
         cost_per_hour, price (its one price, billing named), cost_per_million_output_tokens[_at_slo] (at the \
         SLO: good requests' tokens only), capacity_at_slo_rps, replicas, monthly_cost, break_even, \
         api_is_cheaper, money), reservation (what approving it would record: { trial, provider, gpu, \
         gpus_per_node, replicas, gpus, billing, rate_per_gpu_hour, currency, term_months, monthly_cost, \
         start_date, note } | null), gpu_mismatch and other_currency_prices; plus recommended_trial (never a \
         stopped trial; the cheapest per unit of work) and closest_trial",
    )
    .parameter(brief_id())
    .response("200", ok_json("the review", obj("review")))
    .response("404", problem_response("no such brief"));
    let approve = op(
        "recordApproval",
        "review",
        "A manager approves or rejects the current decision",
    )
    .parameter(brief_id())
    .request_body(Some(
        RequestBodyBuilder::new()
            .required(Some(Required::True))
            .content(
                "application/json",
                json_content(
                    obj("{ verdict: approve | reject, comment, inputs_digest, trial?, reservation? }")
                        .property("verdict", typed(Type::String, "approve or reject"))
                        .property(
                            "trial",
                            typed(
                                Type::String,
                                "the trial decided on (default: the recommended one); another needs a comment",
                            ),
                        )
                        .property("comment", typed(Type::String, "required to reject"))
                        .property(
                            "inputs_digest",
                            typed(Type::String, "the digest of the review decided on"),
                        )
                        .property(
                            "reservation",
                            obj(
                                "the manager's choices on the computed reservation: term_months (1–60) and \
                                     start_date (YYYY-MM-DD); any other field sent must equal the review's \
                                     trials[].reservation, which the approval records exactly (its answer's \
                                     `reservation`)",
                            ),
                        )
                        .required("verdict")
                        .required("inputs_digest"),
                ),
            )
            .build(),
    ))
    .response("201", ok_json("recorded", obj("approval")))
    .response("403", problem_response("not a manager"))
    .response("404", problem_response("no such brief"))
    .response("409", problem_response("inputs_digest is no longer current"))
    .response(
        "422",
        problem_response("invalid fields, e.g. a rejection without a comment"),
    );

    let ledger_summary = "{ currency, accelerator_hours, totals: { accelerator, host, storage, network, support, \
        license }, total, accepted_outputs, cost_per_job, diagnostics: { idle_hours, failed_jobs, rejected_outputs, \
        retries } } (money as decimal strings)";
    let post_ledger = op(
        "postLedger",
        "ledger",
        "Add ledger lines and/or output counts: JSON { lines, outputs } or text/csv with the header \
         category,resource,description,starts_at,ends_at,gpus,rate_per_gpu_hour,amount,currency (all or nothing); \
         with ?format=focus a FinOps FOCUS 1.x cost-and-usage CSV (AWS, Azure, GCP, OCI exports): the trial's rows \
         (ResourceId in resources=, or Tags carrying rentcheck-trial: <trial id>) become lines, Usage rows \
         only; Purchase, Tax, Credit and Adjustment rows and refunds are listed in not_added with their sums, never \
         added; re-importing an export adds nothing (rows keyed by resource, charge period and charge description). \
         Answers { format, trial, lines_added, rows_already_imported, rows_read, rows_selected, rows_combined, \
         not_added: [{ charge_category, reason, of, rows, sum, currency, lines }], counted_as_host, ...summary }: \
         201 when lines were added, 200 when none were new",
    )
    .parameter(brief_id())
    .parameter(query_param(
        "format",
        Type::String,
        "csv (default: the ledger's own CSV, or JSON) or focus (a FinOps FOCUS export, text/csv, streamed)",
    ))
    .parameter(query_param(
        "resources",
        Type::String,
        "focus: the trial's resource ids (FOCUS ResourceId), separated by commas; rows tagged \
         rentcheck-trial: <trial> are the trial's too",
    ))
    .parameter(query_param(
        "gpus_per_resource",
        Type::String,
        "focus: GPUs of every selected resource (8) or per resource (RESOURCE=8,RESOURCE=4); without it, an \
         instance type an imported SkyPilot catalogue prices gives the count",
    ))
    .request_body(Some(
        RequestBodyBuilder::new()
            .required(Some(Required::True))
            .content(
                "application/json",
                json_content(obj(
                    "{ lines: [...], outputs: { accepted, rejected, retries, failed_jobs, idle_hours } }",
                )),
            )
            .content(
                "text/csv",
                json_content(typed(Type::String, "CSV with the ledger header")),
            )
            .build(),
    ))
    .response(
        "201",
        ok_json("stored; lines_added and the summary", obj(ledger_summary)),
    )
    .parameter(
        ParameterBuilder::new()
            .name("Idempotency-Key")
            .parameter_in(ParameterIn::Header)
            .required(Required::False)
            .description(Some(
                "a retry with the same key and request stores nothing again and answers 200 with \
                 Idempotent-Replayed: true; keys belong to the caller and expire after 24 hours",
            ))
            .schema(Some(
                ObjectBuilder::new()
                    .schema_type(Type::String)
                    .min_length(Some(1))
                    .max_length(Some(255))
                    .pattern(Some("^[!-~]+$")),
            ))
            .build(),
    )
    .response(
        "200",
        ok_json(
            "a replay of an earlier request with this Idempotency-Key",
            obj(ledger_summary),
        ),
    )
    .response("404", problem_response("no such brief"))
    .response("409", problem_response("Idempotency-Key reused with another request"))
    .response("413", problem_response("too large"))
    .response(
        "422",
        problem_response("invalid lines, by line and column for CSV; another currency"),
    );
    let get_ledger = op(
        "getLedger",
        "ledger",
        "Lines (newest 500 per page), outputs and the summary",
    )
    .parameter(brief_id())
    .parameter(query_param("cursor", Type::Integer, "next_cursor of the previous page"))
    .response(
        "200",
        ok_json("{ summary, outputs, lines, lines_total, next_cursor }", obj("ledger")),
    )
    .response("404", problem_response("no such brief"));
    let ledger_summary_op = op("getLedgerSummary", "ledger", "The ledger summary alone")
        .parameter(brief_id())
        .response("200", ok_json("the summary", obj(ledger_summary)))
        .response("404", problem_response("no such brief"));
    let ledger_csv = op(
        "exportLedgerCsv",
        "ledger",
        "Every ledger line as CSV with the import header",
    )
    .parameter(brief_id())
    .response("200", ResponseBuilder::new().description("text/csv").build())
    .response("404", problem_response("no such brief"));

    let trial_id = || path_param("tid", "trial id");
    let trial_param = || query_param("trial", Type::String, "a trial of the brief (default: its only trial)");
    let trial_fields = || {
        obj(
            "trial fields (trials.md); every field optional on create: the brief's currency and allocation \
             boundary, the sizing's suggested GPU, status planned",
        )
        .property("name", typed(Type::String, "unique within the brief"))
        .property("provider", typed(Type::String, "who rents it"))
        .property("region", typed(Type::String, "optional"))
        .property(
            "gpu",
            typed(Type::String, "a GPU of the catalogue; absent: the sizing's suggestion"),
        )
        .property("gpu_count", typed(Type::Integer, "1 to 4096"))
        .property(
            "billing",
            typed(Type::String, "on-demand, spot, reserved or serverless"),
        )
        .property(
            "rate_per_gpu_hour",
            typed(Type::String, "decimal string, e.g. \"2.99\""),
        )
        .property("currency", typed(Type::String, "ISO 4217"))
        .property(
            "allocation_boundary",
            typed(Type::String, "serverless, vm, dedicated-node or cluster"),
        )
        .property("status", typed(Type::String, "planned, running or ended"))
        .property("started_at", typed(Type::String, "RFC 3339 or a date"))
        .property(
            "ended_at",
            typed(Type::String, "RFC 3339 or a date; set when status becomes ended"),
        )
        .property("notes", typed(Type::String, "free text"))
        .property(
            "rerun_of",
            typed(Type::String, "the id of the trial of this brief this one re-runs"),
        )
    };
    let trial_body = || {
        RequestBodyBuilder::new()
            .required(Some(Required::True))
            .content("application/json", json_content(trial_fields()))
            .build()
    };
    let list_trials = op(
        "listTrials",
        "trials",
        "The brief's trials in order, each with its allocation",
    )
    .parameter(brief_id())
    .response("200", ok_json("{ items: [trial] }", obj("trials")))
    .response("404", problem_response("no such brief"));
    let create_trial = op(
        "createTrial",
        "trials",
        "Add a trial (an allocation under test) to a brief",
    )
    .parameter(brief_id())
    .request_body(Some(trial_body()))
    .response("201", ok_json("the trial with its allocation", obj("trial")))
    .response("404", problem_response("no such brief"))
    .response(
        "422",
        problem_response("invalid fields, a taken name, or rerun_of not a trial of this brief"),
    );
    let show_trial = op("getTrial", "trials", "One trial with its allocation")
        .parameter(trial_id())
        .response("200", ok_json("the trial", obj("trial")))
        .response("404", problem_response("no such trial"));
    let replace_trial = op(
        "replaceTrial",
        "trials",
        "Replace a trial's fields (end it with status: ended)",
    )
    .parameter(trial_id())
    .request_body(Some(trial_body()))
    .response("200", ok_json("the trial", obj("trial")))
    .response("404", problem_response("no such trial"))
    .response("422", problem_response("invalid fields"));
    let test_plan = op(
        "getTestPlan",
        "trials",
        "The trial's test plan: per stage of the card, the steps that produce its criteria",
    )
    .description(Some(
        "Each step has a stable `key`, its `runner` (command | load | file | manual), the evidence `kind` \
         it posts, the criteria it `feeds`, `why` it is there, a `timeout_s`, its `commands` in order of \
         preference (tool, argv with ${NAME} variables, shell line, install_hint), and `held` (the \
         evidence the trial already has of it, from uploads labelled plan_step=<key>). Load steps add \
         `load` (rate, prompts, lengths), `scrapes` and `window`. `rentcheck collect --plan` runs it; \
         engineers, managers and an agent token of the brief (and trial) may read it.",
    ))
    .parameter(brief_id())
    .parameter(path_param("tid", "the trial's id"))
    .response("200", ok_json("the plan", obj("test plan")))
    .response("403", problem_response("a token scoped to another brief or trial"))
    .response(
        "404",
        problem_response("no such brief, or the trial is not the brief's"),
    );
    let test_plan_job = op(
        "getTestPlanJob",
        "trials",
        "Kubernetes Jobs (YAML) that run the trial's test plan with `rentcheck collect --plan`, one per stage",
    )
    .parameter(brief_id())
    .parameter(path_param("tid", "the trial's id"))
    .response(
        "200",
        ResponseBuilder::new()
            .description("multi-document YAML")
            .content("application/yaml", json_content(typed(Type::String, "YAML")))
            .build(),
    )
    .response(
        "404",
        problem_response("no such brief, or the trial is not the brief's"),
    );
    let get_ledger = get_ledger.parameter(trial_param());
    let ledger_summary_op = ledger_summary_op.parameter(trial_param());
    let post_ledger = post_ledger.parameter(trial_param());
    let get_card = get_card.parameter(query_param(
        "trial",
        Type::String,
        "evaluate for this trial (default: the brief's first trial)",
    ));
    let list_evidence = list_evidence.parameter(query_param("trial", Type::String, "only this trial's evidence"));
    let upload = upload.parameter(trial_param());

    let list_prices = op(
        "listPrices",
        "prices",
        "The current price of each offer (the newest row per provider, GPU, count, billing, region and \
         currency: a row in one currency never hides the same offer's row in another); ?all=true: every row \
         ever imported",
    )
    .parameter(query_param(
        "all",
        Type::Boolean,
        "every row, not only the current ones",
    ))
    .response("200", ok_json("{ items: [price] }", obj("prices")));
    let import_prices = op(
        "importPrices",
        "prices",
        "Import a price sheet: text/csv with the header \
         provider,gpu,gpu_count,billing,rate_per_gpu_hour,currency,region,valid_from,source (all or nothing); \
         with ?format=skypilot&provider=NAME a SkyPilot catalogue vms.csv (columns found by name: InstanceType, \
         AcceleratorName, AcceleratorCount, Price, SpotPrice, Region, AvailabilityZone): an on-demand row from Price and \
         a spot row from SpotPrice per instance with GPUs the catalogue knows, per GPU-hour, in USD, the lowest price \
         per offer (provider, GPU, count, region, billing) kept, source skypilot:<InstanceType>; CPU-only rows, unknown \
         accelerators, fractions of a GPU and rows without a price are listed in skipped",
    )
    .parameter(query_param(
        "format",
        Type::String,
        "sheet (default) or skypilot",
    ))
    .parameter(query_param(
        "provider",
        Type::String,
        "skypilot: the provider whose catalogue this is (required)",
    ))
    .parameter(query_param(
        "valid_from",
        Type::String,
        "skypilot: the date the catalogue's prices are valid from, YYYY-MM-DD (default: today, UTC)",
    ))
    .request_body(Some(
        RequestBodyBuilder::new()
            .required(Some(Required::True))
            .content("text/csv", json_content(typed(Type::String, "the sheet")))
            .build(),
    ))
    .response(
        "201",
        ok_json(
            "{ sheet_id, rows, prices }; a catalogue adds catalogue_rows and skipped: [{ reason, says, accelerator, \
             rows, instance_types, lines }]",
            obj("imported sheet"),
        ),
    )
    .response("413", problem_response("larger than 4 MiB (a sheet) or 32 MiB (a catalogue)"))
    .response(
        "403",
        problem_response("not a manager or admin, or a token limited to one brief"),
    )
    .response("415", problem_response("not text/csv"))
    .response(
        "422",
        problem_response("bad cells, each named by line and column; nothing stored"),
    );

    // People: admins change roles, disable accounts and set passwords; a person sets their own.
    let uid = || path_param("uid", "the person's id");
    let user = || {
        obj("a person (never their password)")
            .property("id", typed(Type::String, "uuid"))
            .property("email", typed(Type::String, "lower-case"))
            .property("role", typed(Type::String, "engineer, manager or admin"))
            .property(
                "disabled",
                typed(
                    Type::Boolean,
                    "a disabled person cannot sign in; their tokens are refused",
                ),
            )
            .property("disabled_at", typed(Type::String, "RFC 3339, or null"))
            .property(
                "locked",
                typed(
                    Type::Boolean,
                    "locked after too many failed sign-ins: browsers it never signed in with are refused until an admin unlocks it",
                ),
            )
            .property("locked_at", typed(Type::String, "RFC 3339, or null"))
            .property("created_at", typed(Type::String, "RFC 3339"))
    };
    let list_users = op("listUsers", "users", "Every person, by email (admins)")
        .response("200", ok_json("{ items: [user] }", obj("users")));
    let show_user = op("getUser", "users", "One person (admins, or the person themselves)")
        .parameter(uid())
        .response("200", ok_json("the person", user()))
        .response("404", problem_response("no such person"));
    let change_user = op(
        "replaceUser",
        "users",
        "Change a person's role and/or disabled mark, or unlock them (admins). Disabling ends their sessions and revokes their tokens at once (enabling again revives none); a lower role refuses their tokens of a higher one; locked: false lifts a sign-in lock",
    )
    .parameter(uid())
    .request_body(Some(
        RequestBodyBuilder::new()
            .required(Some(Required::True))
            .content(
                "application/json",
                json_content(
                    obj("what changes; at least one")
                        .property("role", typed(Type::String, "engineer, manager or admin"))
                        .property("disabled", typed(Type::Boolean, "true disables, false enables"))
                        .property("locked", typed(Type::Boolean, "false unlocks (only false)")),
                ),
            )
            .build(),
    ))
    .response("200", ok_json("the person as now", user()))
    .response("404", problem_response("no such person"))
    .response("409", problem_response("it would leave no enabled admin"))
    .response("422", problem_response("an unknown role, or nothing to change"));
    let set_password = op(
        "setUserPassword",
        "users",
        "Set a person's password: admins for anyone, a person for themselves with the current one (throttled as sign-ins are). Their sessions end and every token minted by or for them is revoked",
    )
    .parameter(uid())
    .request_body(Some(
        RequestBodyBuilder::new()
            .required(Some(Required::True))
            .content(
                "application/json",
                json_content(
                    obj("the new password")
                        .property("password", typed(Type::String, "12 to 256 characters"))
                        .property(
                            "current_password",
                            typed(Type::String, "required when changing your own"),
                        )
                        .required("password"),
                ),
            )
            .build(),
    ))
    .response("204", ResponseBuilder::new().description("changed").build())
    .response("404", problem_response("no such person"))
    .response(
        "422",
        problem_response("too short or long, or a wrong current_password"),
    )
    .response(
        "429",
        problem_response("too many wrong current passwords lately: wait, or the account is locked"),
    );
    let list_user_tokens = op(
        "listUserTokens",
        "users",
        "Every token minted by or for a person, newest first: their own tokens and the agent tokens they minted (admins, or the person themselves)",
    )
    .parameter(uid())
    .response(
        "200",
        ok_json(
            "{ items: [token] }",
            obj("tokens: jti, name, subject, role, brief_id, trial_id, created_by, created_at, expires_at, last_used_at, revoked_at, state (active, expired or revoked)"),
        ),
    )
    .response("404", problem_response("no such person"));
    let revoke_user_token = op(
        "revokeUserToken",
        "users",
        "Revoke one of a person's tokens: refused at once from then on (admins, or the person themselves)",
    )
    .parameter(uid())
    .parameter(path_param("jti", "the token's id"))
    .response("204", ResponseBuilder::new().description("revoked").build())
    .response("404", problem_response("no such token of this person"));

    let create_webhook = op(
        "createWebhook",
        "webhooks",
        "Subscribe a URL to events (admins). Each event is POSTed as JSON signed with HMAC-SHA256 \
         (X-Rentcheck-Signature: sha256=hex of HMAC(secret, \"{X-Rentcheck-Timestamp}.{body}\")), retried with \
         backoff for a day; only https:// URLs unless RENTCHECK_WEBHOOK_ALLOW_HTTP=true, and only to public \
         addresses (a host that is or resolves to a loopback, link-local, private or unique-local one is refused) \
         unless RENTCHECK_WEBHOOK_ALLOW_PRIVATE=true",
    )
    .request_body(Some(
        RequestBodyBuilder::new()
            .required(Some(Required::True))
            .content(
                "application/json",
                json_content(
                    obj("the subscription")
                        .property("url", typed(Type::String, "https:// URL the events are POSTed to"))
                        .property(
                            "events",
                            ArrayBuilder::new().items(RefOr::T(typed(
                                Type::String,
                                "decision.changed, approval.recorded, approval.stale or evidence.failed",
                            ))),
                        )
                        .property(
                            "secret",
                            typed(
                                Type::String,
                                "16 to 512 characters; left out, one is generated and answered once",
                            ),
                        )
                        .required("url")
                        .required("events"),
                ),
            )
            .build(),
    ))
    .response(
        "201",
        ok_json("the webhook (with `secret` only when generated)", obj("webhook")),
    )
    .response(
        "422",
        problem_response("a bad URL (not https://), unknown events or a short secret"),
    );
    let list_webhooks = op(
        "listWebhooks",
        "webhooks",
        "Every webhook with its newest deliveries and each delivery's attempts (admins); never a secret",
    )
    .response("200", ok_json("{ items: [webhook] }", obj("webhooks")));
    let delete_webhook = op(
        "deleteWebhook",
        "webhooks",
        "Remove a webhook and its deliveries (admins)",
    )
    .parameter(path_param("wid", "the webhook's id"))
    .response("204", ResponseBuilder::new().description("removed").build())
    .response("404", problem_response("no such webhook"));

    let paths = PathsBuilder::new()
        .path("/api/v1/prices", PathItem::new(HttpMethod::Get, list_prices))
        .path("/api/v1/prices", PathItem::new(HttpMethod::Post, import_prices))
        .path("/api/v1/webhooks", PathItem::new(HttpMethod::Get, list_webhooks))
        .path("/api/v1/webhooks", PathItem::new(HttpMethod::Post, create_webhook))
        .path(
            "/api/v1/webhooks/{wid}",
            PathItem::new(HttpMethod::Delete, delete_webhook),
        )
        .path("/api/v1/users", PathItem::new(HttpMethod::Get, list_users))
        .path("/api/v1/users/{uid}", PathItem::new(HttpMethod::Get, show_user))
        .path("/api/v1/users/{uid}", PathItem::new(HttpMethod::Put, change_user))
        .path(
            "/api/v1/users/{uid}/password",
            PathItem::new(HttpMethod::Post, set_password),
        )
        .path(
            "/api/v1/users/{uid}/tokens",
            PathItem::new(HttpMethod::Get, list_user_tokens),
        )
        .path(
            "/api/v1/users/{uid}/tokens/{jti}",
            PathItem::new(HttpMethod::Delete, revoke_user_token),
        )
        .path(
            "/api/v1/briefs/{id}/trials",
            PathItem::new(HttpMethod::Get, list_trials),
        )
        .path(
            "/api/v1/briefs/{id}/trials",
            PathItem::new(HttpMethod::Post, create_trial),
        )
        .path(
            "/api/v1/briefs/{id}/trials/{tid}/plan",
            PathItem::new(HttpMethod::Get, test_plan),
        )
        .path(
            "/api/v1/briefs/{id}/trials/{tid}/plan/job.yaml",
            PathItem::new(HttpMethod::Get, test_plan_job),
        )
        .path("/api/v1/trials/{tid}", PathItem::new(HttpMethod::Get, show_trial))
        .path("/api/v1/trials/{tid}", PathItem::new(HttpMethod::Put, replace_trial))
        .path("/api/v1/briefs", PathItem::new(HttpMethod::Get, list_briefs))
        .path("/api/v1/briefs", PathItem::new(HttpMethod::Post, create_brief))
        .path("/api/v1/briefs/{id}", PathItem::new(HttpMethod::Get, show_brief))
        .path("/api/v1/briefs/{id}", PathItem::new(HttpMethod::Put, replace_brief))
        .path("/api/v1/briefs/{id}/sizing", PathItem::new(HttpMethod::Get, sizing))
        .path("/api/v1/briefs/{id}/card", PathItem::new(HttpMethod::Get, get_card))
        .path("/api/v1/briefs/{id}/card", PathItem::new(HttpMethod::Put, put_card))
        .path(
            "/api/v1/briefs/{id}/card/revisions",
            PathItem::new(HttpMethod::Get, card_revisions),
        )
        .path(
            "/api/v1/briefs/{id}/card/revisions/{n}",
            PathItem::new(HttpMethod::Get, card_revision),
        )
        .path(
            "/api/v1/briefs/{id}/evidence",
            PathItem::new(HttpMethod::Get, list_evidence),
        )
        .path("/api/v1/briefs/{id}/evidence", PathItem::new(HttpMethod::Post, upload))
        .path(
            "/api/v1/briefs/{id}/evidence/batch",
            PathItem::new(HttpMethod::Post, upload_batch),
        )
        .path("/api/v1/evidence/{id}", PathItem::new(HttpMethod::Get, show_evidence))
        .path(
            "/api/v1/evidence/{id}/raw",
            PathItem::new(HttpMethod::Get, raw_evidence),
        )
        .path(
            "/api/v1/briefs/{id}/ledger",
            PathItem::new(HttpMethod::Post, post_ledger),
        )
        .path("/api/v1/briefs/{id}/ledger", PathItem::new(HttpMethod::Get, get_ledger))
        .path(
            "/api/v1/briefs/{id}/ledger/summary",
            PathItem::new(HttpMethod::Get, ledger_summary_op),
        )
        .path(
            "/api/v1/briefs/{id}/ledger.csv",
            PathItem::new(HttpMethod::Get, ledger_csv),
        )
        .path("/api/v1/briefs/{id}/review", PathItem::new(HttpMethod::Get, review))
        .path(
            "/api/v1/briefs/{id}/approvals",
            PathItem::new(HttpMethod::Post, approve),
        );
    let mut doc = OpenApiBuilder::new()
        .info(
            InfoBuilder::new()
                .title("rentcheck")
                .version(env!("CARGO_PKG_VERSION"))
                .description(Some(
                    "Turns renting a GPU server into an acceptance test. Errors are application/problem+json.",
                )),
        )
        .paths(paths)
        .components(Some(components()))
        // Every /api/v1 route takes a bearer token (reads also accept a signed-in browser session).
        .security(Some([SecurityRequirement::new("bearer", Vec::<String>::new())]))
        .build();
    for item in doc.paths.paths.values_mut() {
        let operations = [
            &mut item.get,
            &mut item.put,
            &mut item.post,
            &mut item.delete,
            &mut item.patch,
        ];
        for operation in operations.into_iter().flatten() {
            add_common_responses(operation);
        }
    }
    doc
}

/// Answers any /api/v1 operation can give, added where the operation does not describe its own.
fn add_common_responses(operation: &mut utoipa::openapi::path::Operation) {
    let retry_after = HeaderBuilder::new()
        .schema(typed(Type::Integer, "seconds"))
        .description(Some("when to try again"))
        .build();
    let common = [
        ("400", problem_response("a malformed id, query string or body")),
        (
            "401",
            problem_response("no bearer token, or an invalid, expired or revoked one"),
        ),
        (
            "403",
            problem_response(
                "the token's role or brief scope does not allow this, the brief is neither yours nor your \
                 team's, or a cross-site request",
            ),
        ),
        (
            "503",
            ResponseBuilder::new()
                .description("the database is unavailable, or the request took longer than the server's timeout")
                .header("Retry-After", retry_after)
                .content("application/problem+json", json_content(component("Problem")))
                .build(),
        ),
    ];
    let with_body = operation.request_body.is_some();
    let body_only = [
        ("413", problem_response("the body is larger than the route's limit")),
        (
            "415",
            problem_response("a Content-Type or Content-Encoding this route does not take"),
        ),
    ];
    let common = common.into_iter().chain(body_only.into_iter().filter(|_| with_body));
    for (status, response) in common {
        operation
            .responses
            .responses
            .entry(status.to_owned())
            .or_insert(RefOr::T(response));
    }
}

pub async fn endpoint() -> Response {
    match serde_json::to_vec(&document()) {
        Ok(body) => ([(header::CONTENT_TYPE, "application/json")], body).into_response(),
        Err(e) => crate::error::AppError::Internal(e.into()).into_response(),
    }
}
