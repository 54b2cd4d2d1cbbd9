//! The test plan's two trust boundaries, attacked: text a person typed must never run when a
//! line of the plan is pasted into a shell or a job.yaml is applied, and `rentcheck collect --plan`
//! must run nothing a hostile plan server names beyond what rentcheck's own builder writes.

use crate::common;
use crate::common::builders::{first_trial_id, BriefBuilder};

use std::{path::Path, process::Output};

use axum::{routing::get, Json, Router};
use common::{spawn_app, TestApp};
use rentcheck::auth::Role;
use serde_json::{json, Value};

/// What a person typed, built to run `touch x` when pasted.
const HOSTILE_MODEL: &str = "${OUT}$(touch x)`touch x`";
const HOSTILE_BRIEF: &str = "P\n---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: evil";
const HOSTILE_TRIAL: &str = "T1\n---\nkind: Secret\n#";

async fn collect(args: &[&str], token: &str, path: &Path, dir: &Path) -> Output {
    tokio::process::Command::new(env!("CARGO_BIN_EXE_rentcheck"))
        .arg("collect")
        .args(args)
        .current_dir(dir)
        .env("PATH", format!("{}:/usr/bin:/bin", path.display()))
        .env("RENTCHECK_TOKEN", token)
        .env("RENTCHECK_HOST", "gpu-node-7")
        .env_remove("RENTCHECK_SERVER")
        .env_remove("RUST_LOG")
        .output()
        .await
        .unwrap()
}

/// A brief on 16 × H100 (two nodes, so mpirun and srun lines are in the plan) with a load stage.
async fn brief_with_trial(app: &TestApp) -> (String, String) {
    let id = BriefBuilder::new().trial_gpu("H100 SXM", 16).create_id(app).await;
    let trial = first_trial_id(app, &id).await;
    (id, trial)
}

#[tokio::test]
async fn names_with_line_breaks_and_model_names_with_shell_text_are_refused_at_the_field() {
    let app = spawn_app().await;
    for (field, value) in [
        ("model_name", HOSTILE_MODEL),
        ("model_name", "meta-llama/Llama 3"),
        ("model_name", "--trust-remote-code"),
        ("name", HOSTILE_BRIEF),
        ("owner", "a\rb"),
    ] {
        let res = BriefBuilder::new().set(field, value).post(&app).await;
        assert_eq!(res.status(), 422, "{field} = {value:?}");
        let problem: Value = res.json().await.unwrap();
        let errors = problem["errors"].as_array().unwrap();
        assert!(
            errors.iter().any(|e| e["field"] == field),
            "{field} = {value:?} is refused at its field: {problem}"
        );
    }
    // Model ids as Hugging Face writes them still pass, and notes may have several lines.
    let ok = BriefBuilder::new()
        .model("org/Model-7B.v2_fp8+q:rev@1")
        .restore_plan("one\ntwo")
        .create(&app)
        .await;
    assert_eq!(ok["model_name"], "org/Model-7B.v2_fp8+q:rev@1");

    let (_, trial) = brief_with_trial(&app).await;
    let mut renamed: Value = app.get(&format!("/api/v1/trials/{trial}")).await.json().await.unwrap();
    renamed["name"] = json!(HOSTILE_TRIAL);
    let res = app.put_json(&format!("/api/v1/trials/{trial}"), &renamed).await;
    assert_eq!(res.status(), 422, "a trial renamed across lines");
    let problem: Value = res.json().await.unwrap();
    assert!(problem.to_string().contains("one line"), "{problem}");
}

/// Every copyable line of the plan, run by bash with each tool a function that records its
/// arguments: the person's text arrives as one literal argument and nothing else runs.
#[tokio::test]
async fn pasting_any_line_of_a_plan_runs_no_text_a_person_typed() {
    let app = spawn_app().await;
    let (brief, trial) = brief_with_trial(&app).await;
    // Rows written before names and model ids were checked at the field.
    sqlx::query("UPDATE briefs SET model_name = $1, name = $2 WHERE id = $3::uuid")
        .bind(HOSTILE_MODEL)
        .bind(HOSTILE_BRIEF)
        .bind(&brief)
        .execute(&app.pool)
        .await
        .unwrap();
    sqlx::query("UPDATE trials SET name = $1 WHERE id = $2::uuid")
        .bind(HOSTILE_TRIAL)
        .bind(&trial)
        .execute(&app.pool)
        .await
        .unwrap();
    let plan: Value = app
        .get(&format!("/api/v1/briefs/{brief}/trials/{trial}/plan"))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(plan["brief"]["model"], HOSTILE_MODEL);
    let mut lines: Vec<String> = vec![plan["serve"]["command"].as_str().unwrap().to_owned()];
    for stage in plan["stages"].as_array().unwrap() {
        for step in stage["steps"].as_array().unwrap() {
            for c in step["commands"].as_array().unwrap() {
                lines.push(c["shell"].as_str().unwrap().to_owned());
            }
        }
    }
    assert!(lines.iter().any(|l| l.starts_with("mpirun ")), "{lines:?}");
    assert!(lines.iter().filter(|l| l.contains("touch x")).count() >= 4, "{lines:?}");

    let dir = tempfile::tempdir().unwrap();
    let tools = [
        "vllm",
        "guidellm",
        "rentcheck",
        "nvidia-smi",
        "dcgmi",
        "curl",
        "mpirun",
        "srun",
        "all_reduce_perf",
        "tee",
        "touch",
    ];
    for (i, line) in lines.iter().enumerate() {
        let mut script = String::from("set -u\n");
        for t in tools {
            script.push_str(&format!("{t}() {{ printf '%s\\n' \"$@\" >> args-{i}.txt; }}\n"));
        }
        script.push_str(
            "OUT=/work/out PROBES=/work/probes VLLM_LOG=/work/vllm.log HOSTFILE=/work/hosts \
             VLLM_URL=http://127.0.0.1:9 DCGM_EXPORTER_URL=http://127.0.0.1:9 RENTCHECK_SERVER=http://127.0.0.1:9 \
             RENTCHECK_TOKEN=t\n",
        );
        script.push_str(line);
        script.push('\n');
        let out = std::process::Command::new("/bin/bash")
            .arg("-c")
            .arg(&script)
            .current_dir(dir.path())
            .env("PATH", "/nonexistent")
            .output()
            .unwrap();
        assert!(out.status.success(), "{line}: {}", String::from_utf8_lossy(&out.stderr));
        assert!(!dir.path().join("x").exists(), "pasting ran the person's text: {line}");
        let args = std::fs::read_to_string(dir.path().join(format!("args-{i}.txt"))).unwrap_or_default();
        assert!(!args.contains("\ntouch\n"), "{line} ran touch: {args}");
        if line.contains("touch x") {
            assert!(
                args.lines().any(|a| a == HOSTILE_MODEL),
                "the model name arrives whole and literal: {line} gave {args}"
            );
        }
    }

    // job.yaml and sky.yaml stay the documents they claim to be.
    let job = app
        .get(&format!("/api/v1/briefs/{brief}/trials/{trial}/plan/job.yaml"))
        .await
        .text()
        .await
        .unwrap();
    let docs = yaml_rust2::YamlLoader::load_from_str(&job).unwrap();
    assert!(docs.len() >= 2, "{job}");
    let mut gpu_jobs = 0;
    for d in &docs {
        assert_eq!(d["kind"].as_str(), Some("Job"), "every document is a Job:\n{job}");
        let limits = &d["spec"]["template"]["spec"]["containers"][0]["resources"];
        // The GPU tools' Job carries its 1 GiB shared memory in its limit.
        let gpu = !limits["limits"]["nvidia.com/gpu"].is_badvalue();
        assert_eq!(
            limits["limits"]["memory"].as_str(),
            Some(if gpu { "3Gi" } else { "2Gi" }),
            "{job}"
        );
        assert_eq!(limits["requests"]["memory"].as_str(), Some("512Mi"), "{job}");
        assert!(
            limits["limits"]["cpu"].is_badvalue(),
            "no CPU limit: throttling would add to latencies"
        );
        // The GPU tools' Job has a shared memory NCCL can use (a pod's own is 64 MiB).
        let pod = &d["spec"]["template"]["spec"];
        if !limits["limits"]["nvidia.com/gpu"].is_badvalue() {
            gpu_jobs += 1;
            let mounts = pod["containers"][0]["volumeMounts"].as_vec().unwrap();
            assert!(
                mounts.iter().any(|m| m["mountPath"].as_str() == Some("/dev/shm")),
                "{job}"
            );
            let shm = pod["volumes"]
                .as_vec()
                .unwrap()
                .iter()
                .find(|v| v["name"].as_str() == Some("shm"))
                .cloned()
                .unwrap();
            assert_eq!(shm["emptyDir"]["medium"].as_str(), Some("Memory"), "{job}");
        }
    }
    assert!(gpu_jobs > 0, "the GPU tools run in a Job of their own:\n{job}");
    // The re-validation CronJobs are the same Jobs under a schedule, with the same requests and
    // the same quoting, running `collect --plan --rerun`.
    let cron = app
        .get(&format!("/api/v1/briefs/{brief}/trials/{trial}/plan/cronjob.yaml"))
        .await
        .text()
        .await
        .unwrap();
    let crons = yaml_rust2::YamlLoader::load_from_str(&cron).unwrap();
    assert_eq!(crons.len(), docs.len(), "one CronJob per Job:\n{cron}");
    for (c, j) in crons.iter().zip(&docs) {
        assert_eq!(c["kind"].as_str(), Some("CronJob"), "{cron}");
        assert_eq!(
            c["spec"]["schedule"].as_str(),
            Some("0 3 */30 * *"),
            "no commitment yet: 30 days"
        );
        let job = &c["spec"]["jobTemplate"]["spec"];
        assert_eq!(
            job["template"]["spec"]["containers"][0]["resources"],
            j["spec"]["template"]["spec"]["containers"][0]["resources"],
            "{cron}"
        );
        let args: Vec<&str> = job["template"]["spec"]["containers"][0]["args"]
            .as_vec()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap())
            .collect();
        assert_eq!(&args[..3], ["collect", "--plan", "--rerun"], "{cron}");
        let gpu_tools = j["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"]
            .as_i64()
            .is_some();
        assert_eq!(c["spec"]["suspend"].as_bool(), gpu_tools.then_some(true), "{cron}");
    }
    let sky = app
        .get(&format!("/api/v1/briefs/{brief}/trials/{trial}/plan/sky.yaml"))
        .await
        .text()
        .await
        .unwrap();
    let task = yaml_rust2::YamlLoader::load_from_str(&sky).unwrap();
    assert_eq!(task.len(), 1, "{sky}");
    assert_eq!(task[0]["resources"]["accelerators"].as_str(), Some("H100:8"), "{sky}");
    assert_eq!(task[0]["num_nodes"].as_i64(), Some(2), "{sky}");
    assert!(task[0]["secrets"]["RENTCHECK_TOKEN"].is_null(), "{sky}");
    assert!(!sky.contains(&app.token), "no token in the task");
    let run = task[0]["run"].as_str().unwrap();
    assert!(run.contains("rentcheck collect --plan"), "{sky}");
    // Each node's slots in the hostfile: without them Open MPI counts cores and may refuse ranks.
    assert!(
        run.contains("sed \"s/$/ slots=$SKYPILOT_NUM_GPUS_PER_NODE/\" > hostfile"),
        "{sky}"
    );
}

/// A plan server that serves `plan` for any brief and trial, and counts nothing else.
async fn plan_server(plan: Value) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let app = Router::new().route(
        "/api/v1/briefs/{brief}/trials/{trial}/plan",
        get(move || {
            let plan = plan.clone();
            async move { Json(plan) }
        }),
    );
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    base
}

/// Sets the default of the plan's variable `name`.
fn set_default(plan: &mut Value, name: &str, default: &str) {
    for v in plan["variables"].as_array_mut().unwrap() {
        if v["name"] == name {
            v["default"] = json!(default);
        }
    }
}

/// The first step of `runner` in the plan.
fn step_of<'a>(plan: &'a mut Value, runner: &str) -> &'a mut Value {
    plan["stages"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .flat_map(|s| s["steps"].as_array_mut().unwrap().iter_mut())
        .find(|s| s["runner"] == runner)
        .unwrap_or_else(|| panic!("no {runner} step"))
}

#[tokio::test]
async fn collect_plan_refuses_a_hostile_plan_before_any_step_runs() {
    let app = spawn_app().await;
    let (brief, trial) = brief_with_trial(&app).await;
    let token = app.trial_token(brief.parse().unwrap(), trial.parse().unwrap()).await;
    let real: Value = app
        .get(&format!("/api/v1/briefs/{brief}/trials/{trial}/plan"))
        .await
        .json()
        .await
        .unwrap();
    let work = tempfile::tempdir().unwrap();
    let mark = work.path().join("pwned");
    let mark_s = mark.display().to_string();
    // A tool directory with nothing in it: the plan's own tools are all missing, and `touch` is
    // found in /usr/bin.
    let tools = tempfile::tempdir().unwrap();

    // The real plan, served by the real server, passes the check (dry run: nothing is sent).
    let out = collect(
        &[
            "--server",
            &app.base,
            "--brief",
            &brief,
            "--trial",
            &trial,
            "--plan",
            "--dry-run",
        ],
        &token,
        tools.path(),
        work.path(),
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));

    type Attack = Box<dyn Fn(&mut Value)>;
    let attacks: Vec<(&str, Attack)> = vec![
        ("a tool collect does not run", {
            let m = mark_s.clone();
            Box::new(move |p| {
                let s = step_of(p, "command");
                s["commands"][0] =
                    json!({"tool": "touch", "argv": ["touch", m], "shell": "nvidia-smi -L", "install_hint": ""});
            })
        }),
        ("a tool named by its path", {
            let m = mark_s.clone();
            Box::new(move |p| {
                let s = step_of(p, "command");
                s["commands"][0] = json!({"tool": "/bin/sh", "argv": ["/bin/sh", "-c", format!("touch {m}")], "shell": "", "install_hint": ""});
            })
        }),
        (
            "a known tool with other arguments",
            Box::new(|p: &mut Value| {
                let s = step_of(p, "command");
                s["commands"][0] = json!({"tool": "curl", "argv": ["curl", "-o", "/etc/cron.d/x", "${VLLM_URL}/metrics"], "shell": "", "install_hint": ""});
            }),
        ),
        (
            "mpirun handing the other nodes a library path of the plan's",
            Box::new(|p: &mut Value| {
                let s = step_of(p, "command");
                s["commands"][0] = json!({"tool": "mpirun", "argv": ["mpirun", "-np", "2", "--allow-run-as-root", "-x", "LD_LIBRARY_PATH=/tmp/evil", "all_reduce_perf", "-g", "1"], "shell": "", "install_hint": ""});
            }),
        ),
        (
            "mpirun passing on a variable that loads code",
            Box::new(|p: &mut Value| {
                let s = step_of(p, "command");
                s["commands"][0] = json!({"tool": "mpirun", "argv": ["mpirun", "-np", "2", "-x", "LD_PRELOAD", "all_reduce_perf", "-g", "1"], "shell": "", "install_hint": ""});
            }),
        ),
        (
            "an environment variable that loads code",
            Box::new(|p: &mut Value| {
                let s = step_of(p, "command");
                s["commands"][0]["env"] = json!([["LD_PRELOAD", "/tmp/evil.so"]]);
            }),
        ),
        (
            "a file outside the probes folder",
            Box::new(|p: &mut Value| {
                let s = step_of(p, "file");
                s["file"] = json!("/etc/shadow");
            }),
        ),
        (
            "a file above the probes folder",
            Box::new(|p: &mut Value| {
                let s = step_of(p, "file");
                s["file"] = json!("${PROBES}/../.ssh/id_ed25519");
            }),
        ),
        (
            "a result written outside ${OUT}",
            Box::new(|p: &mut Value| {
                let s = step_of(p, "load");
                s["commands"][0]["output_file"] = json!("/root/.bashrc");
            }),
        ),
        (
            "an output folder elsewhere",
            Box::new(|p: &mut Value| set_default(p, "OUT", "/root/.ssh")),
        ),
        (
            "an output folder that holds keys, here",
            Box::new(|p: &mut Value| set_default(p, "OUT", ".ssh")),
        ),
        (
            "a probes folder that holds keys, here",
            Box::new(|p: &mut Value| set_default(p, "PROBES", ".ssh")),
        ),
        (
            "a server log that is a credentials file",
            Box::new(|p: &mut Value| set_default(p, "VLLM_LOG", ".aws/credentials")),
        ),
        (
            "NCCL told to write its log over a file",
            Box::new(|p: &mut Value| {
                let s = step_of(p, "command");
                s["commands"][0]["env"] = json!([["NCCL_DEBUG", "INFO"], ["NCCL_DEBUG_FILE", ".bashrc"]]);
            }),
        ),
        (
            "a step this rentcheck cannot read",
            Box::new(|p: &mut Value| {
                let s = step_of(p, "command");
                s["runner"] = json!("shell");
            }),
        ),
        (
            "a server under test elsewhere",
            Box::new(|p: &mut Value| set_default(p, "VLLM_URL", "http://metadata.invalid/latest")),
        ),
        (
            "a model that reads as an option",
            Box::new(|p: &mut Value| p["brief"]["model"] = json!("--trust-remote-code")),
        ),
        (
            "a scrape of another page",
            Box::new(|p: &mut Value| {
                let s = step_of(p, "load");
                s["scrapes"][0]["url"] = json!("file:///etc/passwd");
            }),
        ),
    ];
    for (what, attack) in attacks {
        let mut plan = real.clone();
        attack(&mut plan);
        let hostile = plan_server(plan).await;
        for dry in [false, true] {
            let mut args = vec!["--server", &hostile, "--brief", &brief, "--trial", &trial, "--plan"];
            if dry {
                args.push("--dry-run");
            }
            let out = collect(&args, &token, tools.path(), work.path()).await;
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{what}: exit 2\n{stderr}");
            assert!(stderr.contains("refused before anything ran"), "{what}: {stderr}");
            assert!(stderr.contains("step "), "{what}: names the step: {stderr}");
            assert!(!mark.exists(), "{what}: the hostile command ran");
        }
    }
}

#[tokio::test]
async fn the_plan_page_says_when_its_lines_need_allow_http() {
    let notice = "id=\"plain-http\"";
    let app = common::spawn_app_with(rentcheck::config::AppConfig {
        public_url: "http://gpu-lab:8080".into(),
        ..Default::default()
    })
    .await;
    let (brief, trial) = brief_with_trial(&app).await;
    let html = app.owner_page(&format!("/briefs/{brief}/trials/{trial}/plan")).await;
    assert!(html.contains(notice), "{html}");
    assert!(html.contains("unless you add <code>--allow-http</code>"));
    for public in ["https://rentcheck.example.com", "http://127.0.0.1:8080"] {
        let app = common::spawn_app_with(rentcheck::config::AppConfig {
            public_url: public.into(),
            ..Default::default()
        })
        .await;
        let (brief, trial) = brief_with_trial(&app).await;
        let html = app.owner_page(&format!("/briefs/{brief}/trials/{trial}/plan")).await;
        assert!(html.contains("Test plan: "), "{public}");
        assert!(!html.contains(notice), "{public}: collect fetches from it as it is");
    }
}

#[tokio::test]
async fn collect_plan_refuses_plain_http_to_another_machine_unless_told() {
    let app = spawn_app().await;
    let (brief, trial) = brief_with_trial(&app).await;
    let token = app.token(Role::Agent, Some(brief.parse().unwrap())).await;
    let dir = tempfile::tempdir().unwrap();
    // `.invalid` never resolves: the refusal comes before any lookup or connection.
    let out = collect(
        &[
            "--server",
            "http://plans.invalid:8080",
            "--brief",
            &brief,
            "--trial",
            &trial,
            "--plan",
        ],
        &token,
        dir.path(),
        dir.path(),
    )
    .await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("in the clear") && stderr.contains("--allow-http"),
        "{stderr}"
    );
    // Loopback is this machine: allowed as before.
    let out = collect(
        &[
            "--server",
            &app.base,
            "--brief",
            &brief,
            "--trial",
            &trial,
            "--plan",
            "--dry-run",
        ],
        &token,
        dir.path(),
        dir.path(),
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
}

/// An upload of a plan step that failed to parse does not hold the step: the plan offers it
/// again, with the count that gives the re-run new keys; one that parsed afterwards holds it.
#[tokio::test]
async fn a_step_is_held_only_by_an_upload_that_parsed() {
    let app = spawn_app().await;
    let (brief, trial) = brief_with_trial(&app).await;
    let plan_url = format!("/api/v1/briefs/{brief}/trials/{trial}/plan");
    let step = |plan: &Value| -> Value {
        plan["stages"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|s| s["steps"].as_array().unwrap())
            .find(|s| s["key"] == "1-dcgm-diag")
            .cloned()
            .unwrap()
    };
    let query = format!("kind=dcgm-diag&stage=1&trial={trial}&label.plan_step=1-dcgm-diag");
    let post = |body: Vec<u8>| app.post_raw_evidence(&brief, &query, "application/json", body);
    let res = post(b"{\"not\": \"a diag\"}".to_vec()).await;
    assert!(res.status().is_success(), "{}", res.text().await.unwrap());
    let plan: Value = app.get(&plan_url).await.json().await.unwrap();
    let s = step(&plan);
    assert!(s["held"].is_null(), "a failed upload holds nothing: {s}");
    assert_eq!(s["failed_uploads"], 1);

    let res = post(common::fixture("dcgm-diag/dcgm4-json-r2-all-pass.json")).await;
    assert!(res.status().is_success());
    let plan: Value = app.get(&plan_url).await.json().await.unwrap();
    let s = step(&plan);
    assert_eq!(
        s["held"]["evidence"].as_array().unwrap().len(),
        1,
        "the parsed upload holds it: {s}"
    );

    // A load point whose scrapes were stored but whose result file never was (the server refused
    // it as too large) is not held: its own output is what the step is for.
    let load = plan["stages"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| s["steps"].as_array().unwrap())
        .find(|s| s["load"].is_object())
        .cloned()
        .expect("a load step");
    let key = load["key"].as_str().unwrap();
    assert_eq!(load["kind"], "bench-serving");
    let scrape = format!("kind=vllm-metrics&stage=3&trial={trial}&label.plan_step={key}");
    let res = app
        .post_raw_evidence(
            &brief,
            &scrape,
            "text/plain",
            common::fixture("vllm-metrics/window-after.txt"),
        )
        .await;
    assert!(res.status().is_success(), "{}", res.text().await.unwrap());
    let plan: Value = app.get(&plan_url).await.json().await.unwrap();
    let held = plan["stages"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| s["steps"].as_array().unwrap())
        .find(|s| s["key"] == key)
        .map(|s| s["held"].clone());
    assert_eq!(held, Some(Value::Null), "a scrape alone does not hold a load point");
}
