//! A lint of the brief's optional Kubernetes manifest. Pure: no I/O.
//!
//! Reads multi-document YAML (yaml-rust2: pure Rust, maintained; serde_yaml is archived and
//! serde_yml is flagged unsound) and, for each Pod, Deployment, StatefulSet, DaemonSet, ReplicaSet,
//! Job or CronJob (and `kind: List` items), checks its pod template:
//! * a GPU resource (`nvidia.com/gpu`, `amd.com/gpu`, `gpu.intel.com/*`, `nvidia.com/mig-*`, any
//!   `*/gpu`) is set in a container's `limits`; if `requests` sets it, it equals the limit;
//! * every image has a tag that is not `latest` (a digest is best: a tag alone is a note);
//! * env vars named like *TOKEN*, *KEY*, *PASSWORD*, *SECRET* come from `secretKeyRef` (or the
//!   whole container from `envFrom.secretRef`), never a literal `value`;
//! * `restartPolicy` is noted (and a Job's must be OnFailure or Never).
//!
//! Errors count into `manifest.lint_errors`; warnings and notes do not. Invalid YAML is one error
//! with its line and column.

use std::collections::HashMap;

use serde::Serialize;
use yaml_rust2::{
    parser::{Event, Parser},
    Yaml, YamlLoader,
};

/// The most nodes a manifest may stand for once its aliases are expanded. A real manifest has a
/// few thousand; the loader copies an anchored node at every alias, so ten lines of nested aliases
/// (the "billion laughs") would take gigabytes without this bound.
pub const MAX_EXPANDED_NODES: u64 = 100_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Error,
    Warning,
    Note,
}

impl Severity {
    pub fn as_str(&self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Note => "note",
        }
    }
}

/// One finding: which document and object, where in it, and what.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    pub severity: Severity,
    /// 1-based document number in a multi-document file.
    pub document: usize,
    /// `Kind/name`.
    pub object: String,
    /// A path inside the object, e.g. `spec.template.spec.containers[0].image`.
    pub path: String,
    pub message: String,
}

/// The manifest could not be read as YAML.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct YamlError {
    pub line: usize,
    pub column: usize,
    pub message: String,
}

impl std::fmt::Display for YamlError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "invalid YAML at line {}, column {}: {}",
            self.line, self.column, self.message
        )
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LintReport {
    pub findings: Vec<Finding>,
    pub yaml_error: Option<YamlError>,
    /// Workload objects checked.
    pub objects: usize,
}

impl LintReport {
    /// The figure `manifest.lint_errors`: error findings, or 1 for unreadable YAML.
    pub fn error_count(&self) -> usize {
        if self.yaml_error.is_some() {
            1
        } else {
            self.findings.iter().filter(|f| f.severity == Severity::Error).count()
        }
    }
}

/// Lints a manifest (one or more YAML documents).
pub fn lint(text: &str) -> LintReport {
    if let Some(error) = expands_too_far(text) {
        return LintReport {
            findings: Vec::new(),
            yaml_error: Some(error),
            objects: 0,
        };
    }
    let docs = match YamlLoader::load_from_str(text) {
        Ok(docs) => docs,
        Err(e) => {
            return LintReport {
                findings: Vec::new(),
                yaml_error: Some(YamlError {
                    line: e.marker().line(),
                    column: e.marker().col(),
                    message: e.info().to_owned(),
                }),
                objects: 0,
            }
        }
    };
    let mut l = Linter::default();
    for (i, doc) in docs.iter().enumerate() {
        l.document = i + 1;
        l.object(doc, "");
    }
    if l.objects == 0 && l.findings.is_empty() {
        l.push(
            Severity::Warning,
            String::new(),
            "",
            "no Pod, Deployment, StatefulSet, DaemonSet, ReplicaSet, Job or CronJob found".into(),
        );
    }
    LintReport {
        findings: l.findings,
        yaml_error: None,
        objects: l.objects,
    }
}

/// What the text stands for with every alias expanded: its values and their bytes.
#[derive(Clone, Copy, Default)]
struct Expanded {
    values: u64,
    bytes: u64,
}

impl Expanded {
    fn add(&mut self, other: Expanded) {
        self.values = self.values.saturating_add(other.values);
        self.bytes = self.bytes.saturating_add(other.bytes);
    }

    /// Why this is more than a manifest may stand for, if it is.
    fn too_much(&self) -> Option<String> {
        if self.values > MAX_EXPANDED_NODES {
            Some(format!("more than {MAX_EXPANDED_NODES} values"))
        } else if self.bytes > MAX_EXPANDED_BYTES {
            Some(format!("more than {} MiB of text", MAX_EXPANDED_BYTES >> 20))
        } else {
            None
        }
    }
}

/// The most bytes of text a manifest may stand for once expanded: one long anchored string
/// aliased ten thousand times is a few values and gigabytes.
pub const MAX_EXPANDED_BYTES: u64 = 8 << 20;

/// The deepest a manifest may nest (a real one nests about twenty levels): the loader recurses
/// once per level, and ten thousand `- ` would overflow a worker's stack, which aborts the server.
pub const MAX_DEPTH: usize = 64;

/// Measures what the text stands for with every alias expanded, from the parser's events (which
/// do not expand them), and names the place that passes [`MAX_EXPANDED_NODES`],
/// [`MAX_EXPANDED_BYTES`] or [`MAX_DEPTH`]. Text the parser cannot read is left to the loader,
/// which reports it with its place.
fn expands_too_far(text: &str) -> Option<YamlError> {
    let mut parser = Parser::new_from_str(text);
    // Each open collection: its anchor and what is inside it so far.
    let mut open: Vec<(usize, Expanded)> = Vec::new();
    let mut anchored: HashMap<usize, Expanded> = HashMap::new();
    let mut total = Expanded::default();
    let refuse = |mark: yaml_rust2::scanner::Marker, why: String| YamlError {
        line: mark.line(),
        column: mark.col(),
        message: why,
    };
    loop {
        let (event, mark) = parser.next_token().ok()?;
        let finished = match event {
            Event::StreamEnd => return None,
            Event::SequenceStart(anchor, _) | Event::MappingStart(anchor, _) => {
                open.push((anchor, Expanded { values: 1, bytes: 1 }));
                if open.len() > MAX_DEPTH {
                    return Some(refuse(mark, format!("it nests more than {MAX_DEPTH} levels deep")));
                }
                continue;
            }
            Event::SequenceEnd | Event::MappingEnd => {
                let (anchor, size) = open.pop()?;
                if anchor != 0 {
                    anchored.insert(anchor, size);
                }
                size
            }
            Event::Scalar(value, _, anchor, _) => {
                let size = Expanded {
                    values: 1,
                    bytes: 1 + value.len() as u64,
                };
                if anchor != 0 {
                    anchored.insert(anchor, size);
                }
                size
            }
            Event::Alias(anchor) => anchored
                .get(&anchor)
                .copied()
                .unwrap_or(Expanded { values: 1, bytes: 1 }),
            _ => continue,
        };
        let into = match open.last_mut() {
            Some((_, size)) => size,
            None => &mut total,
        };
        into.add(finished);
        if let Some(why) = finished.too_much().or_else(|| into.too_much()) {
            return Some(refuse(
                mark,
                format!("its anchors and aliases stand for {why} once expanded; write the repeated parts out"),
            ));
        }
    }
}

#[derive(Default)]
struct Linter {
    document: usize,
    objects: usize,
    findings: Vec<Finding>,
}

fn text(y: &Yaml) -> Option<String> {
    match y {
        Yaml::String(s) | Yaml::Real(s) => Some(s.clone()),
        Yaml::Integer(i) => Some(i.to_string()),
        Yaml::Boolean(b) => Some(b.to_string()),
        _ => None,
    }
}

/// Quantities compare as written, with integers normalised ("1" and 1 are equal).
fn quantity(y: &Yaml) -> Option<String> {
    text(y).map(|s| s.trim().to_owned())
}

fn is_gpu_resource(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    name.ends_with("/gpu")
        || name.starts_with("gpu.intel.com/")
        || name.starts_with("nvidia.com/mig-")
        || name.starts_with("amd.com/gpu")
}

fn looks_secret(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    ["TOKEN", "KEY", "PASSWORD", "PASSWD", "SECRET", "CREDENTIAL"]
        .iter()
        .any(|w| upper.contains(w))
}

impl Linter {
    fn push(&mut self, severity: Severity, object: String, path: &str, message: String) {
        self.findings.push(Finding {
            severity,
            document: self.document,
            object,
            path: path.to_owned(),
            message,
        });
    }

    fn object(&mut self, doc: &Yaml, prefix: &str) {
        if matches!(doc, Yaml::Null | Yaml::BadValue) {
            return; // an empty document (`---` at the end)
        }
        let kind = doc["kind"].as_str().unwrap_or("");
        let name = doc["metadata"]["name"].as_str().unwrap_or("(unnamed)");
        let object = format!("{}/{name}", if kind.is_empty() { "?" } else { kind });
        let (template, path) = match kind {
            "Pod" => (&doc["spec"], "spec"),
            "Deployment" | "StatefulSet" | "DaemonSet" | "ReplicaSet" | "Job" => {
                (&doc["spec"]["template"]["spec"], "spec.template.spec")
            }
            "CronJob" => (
                &doc["spec"]["jobTemplate"]["spec"]["template"]["spec"],
                "spec.jobTemplate.spec.template.spec",
            ),
            "List" => {
                if let Some(items) = doc["items"].as_vec() {
                    for (i, item) in items.iter().enumerate() {
                        self.object(item, &format!("{prefix}items[{i}]."));
                    }
                }
                return;
            }
            "" => {
                self.push(Severity::Warning, object, prefix, "the document has no `kind`".into());
                return;
            }
            // Services, ConfigMaps, …: nothing to check.
            _ => return,
        };
        let path = format!("{prefix}{path}");
        if template.as_hash().is_none() {
            self.push(
                Severity::Error,
                object,
                &path,
                format!("{kind} has no pod spec at {path}"),
            );
            return;
        }
        self.objects += 1;
        self.pod_spec(template, &object, &path, kind);
    }

    fn pod_spec(&mut self, spec: &Yaml, object: &str, path: &str, kind: &str) {
        let containers = spec["containers"].as_vec().cloned().unwrap_or_default();
        if containers.is_empty() {
            self.push(
                Severity::Error,
                object.into(),
                &format!("{path}.containers"),
                "no containers".into(),
            );
        }
        let mut gpu_limit_seen = false;
        for (group, list) in [
            ("containers", containers),
            (
                "initContainers",
                spec["initContainers"].as_vec().cloned().unwrap_or_default(),
            ),
        ] {
            for (i, c) in list.iter().enumerate() {
                let cpath = format!("{path}.{group}[{i}]");
                gpu_limit_seen |= self.container(c, object, &cpath);
            }
        }
        if !gpu_limit_seen {
            self.push(
                Severity::Error,
                object.into(),
                &format!("{path}.containers[*].resources.limits"),
                "no container sets a GPU quantity (e.g. nvidia.com/gpu: 1) in resources.limits: the pod may be scheduled without a GPU".into(),
            );
        }
        let policy = spec["restartPolicy"].as_str();
        let rpath = format!("{path}.restartPolicy");
        match (kind, policy) {
            ("Job" | "CronJob", Some("Always")) => self.push(
                Severity::Error,
                object.into(),
                &rpath,
                "a Job's restartPolicy must be OnFailure or Never".into(),
            ),
            ("Job" | "CronJob", None) => self.push(
                Severity::Error,
                object.into(),
                &rpath,
                "a Job needs restartPolicy OnFailure or Never (the default Always is refused)".into(),
            ),
            (_, Some(p)) => self.push(Severity::Note, object.into(), &rpath, format!("restartPolicy is {p}")),
            (_, None) => self.push(
                Severity::Note,
                object.into(),
                &rpath,
                "restartPolicy is not set: Always (the default)".into(),
            ),
        }
    }

    /// Checks one container, one lint rule per container field; true when it sets a GPU limit.
    fn container(&mut self, c: &Yaml, object: &str, path: &str) -> bool {
        let cname = c["name"].as_str().unwrap_or("?");
        let object = format!("{object} container {cname}");
        self.image(c, &object, path);
        let gpu_limit = self.gpu_resources(c, &object, path);
        self.secret_env(c, &object, path);
        gpu_limit
    }

    /// Image: a tag that is not latest; a digest is best.
    fn image(&mut self, c: &Yaml, object: &str, path: &str) {
        let ipath = format!("{path}.image");
        match c["image"].as_str() {
            None => self.push(Severity::Error, object.to_owned(), &ipath, "no image".into()),
            Some(image) => {
                if image.contains("@sha256:") || image.contains('@') {
                    // Pinned by digest.
                } else {
                    let last = image.rsplit('/').next().unwrap_or(image);
                    match last.split_once(':') {
                        None => self.push(
                            Severity::Error,
                            object.to_owned(),
                            &ipath,
                            format!("image {image} has no tag, which means :latest; pin a version, or better a digest (@sha256:…)"),
                        ),
                        Some((_, "latest")) => self.push(
                            Severity::Error,
                            object.to_owned(),
                            &ipath,
                            format!("image {image} uses the mutable tag latest; pin a version, or better a digest (@sha256:…)"),
                        ),
                        Some((_, _)) => self.push(
                            Severity::Note,
                            object.to_owned(),
                            &ipath,
                            format!("image {image} is pinned by tag; a digest (@sha256:…) cannot move under you"),
                        ),
                    }
                }
            }
        }
    }

    /// GPU quantity in limits; requests equal to limits when both set. True when it sets a GPU
    /// limit.
    fn gpu_resources(&mut self, c: &Yaml, object: &str, path: &str) -> bool {
        let limits = &c["resources"]["limits"];
        let requests = &c["resources"]["requests"];
        let mut gpu_limit = false;
        if let Some(h) = limits.as_hash() {
            for (k, v) in h {
                if let Some(name) = k.as_str().filter(|n| is_gpu_resource(n)) {
                    gpu_limit = true;
                    if let Some(req) = quantity(&requests[name]) {
                        let lim = quantity(v).unwrap_or_default();
                        if req != lim {
                            self.push(
                                Severity::Error,
                                object.to_owned(),
                                &format!("{path}.resources.requests"),
                                format!("{name} requests {req} but limits {lim}: GPUs cannot be overcommitted, set them equal"),
                            );
                        }
                    }
                }
            }
        }
        if let Some(h) = requests.as_hash() {
            for k in h.keys() {
                if let Some(name) = k.as_str().filter(|n| is_gpu_resource(n)) {
                    if limits[name].is_badvalue() {
                        self.push(
                            Severity::Error,
                            object.to_owned(),
                            &format!("{path}.resources.limits"),
                            format!("{name} is only in requests; extended resources like GPUs must be set in limits"),
                        );
                    }
                }
            }
        }
        gpu_limit
    }

    /// Secrets come from secretKeyRef / secretRef, never literal values.
    fn secret_env(&mut self, c: &Yaml, object: &str, path: &str) {
        if let Some(env) = c["env"].as_vec() {
            for (i, e) in env.iter().enumerate() {
                let Some(name) = e["name"].as_str() else { continue };
                if !looks_secret(name) {
                    continue;
                }
                let epath = format!("{path}.env[{i}]");
                if !e["value"].is_badvalue() {
                    self.push(
                        Severity::Error,
                        object.to_owned(),
                        &epath,
                        format!("{name} is set as a literal value; reference a Secret with valueFrom.secretKeyRef"),
                    );
                } else if e["valueFrom"]["secretKeyRef"].is_badvalue() {
                    self.push(
                        Severity::Warning,
                        object.to_owned(),
                        &epath,
                        format!("{name} looks secret but does not come from a secretKeyRef"),
                    );
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata:
  name: llm
spec:
  replicas: 1
  template:
    spec:
      restartPolicy: Always
      containers:
        - name: vllm
          image: vllm/vllm-openai@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
          resources:
            limits:
              nvidia.com/gpu: 1
            requests:
              nvidia.com/gpu: "1"
          env:
            - name: HF_TOKEN
              valueFrom:
                secretKeyRef: { name: hf, key: token }
            - name: MODEL
              value: meta-llama/Llama-3.1-8B-Instruct
          envFrom:
            - secretRef: { name: extra }
---
apiVersion: v1
kind: Service
metadata:
  name: llm
spec:
  ports: [{ port: 80 }]
"#;

    fn errors(text: &str) -> Vec<String> {
        lint(text)
            .findings
            .into_iter()
            .filter(|f| f.severity == Severity::Error)
            .map(|f| f.message)
            .collect()
    }

    #[test]
    fn a_correct_manifest_has_no_errors() {
        let report = lint(GOOD);
        assert_eq!(report.error_count(), 0, "{:?}", report.findings);
        assert_eq!(report.objects, 1, "the Service is not a workload");
        assert!(report
            .findings
            .iter()
            .any(|f| f.severity == Severity::Note && f.message == "restartPolicy is Always"));
    }

    #[test]
    fn a_missing_gpu_limit() {
        let m = GOOD.replace(
            "            limits:\n              nvidia.com/gpu: 1\n",
            "            limits:\n              memory: 64Gi\n",
        );
        let e = errors(&m);
        assert!(e.iter().any(|m| m.contains("only in requests")), "{e:?}");
        assert!(
            e.iter().any(|m| m.contains("no container sets a GPU quantity")),
            "{e:?}"
        );
    }

    #[test]
    fn requests_that_differ_from_limits() {
        let e = errors(&GOOD.replace("nvidia.com/gpu: \"1\"", "nvidia.com/gpu: 2"));
        assert_eq!(e.len(), 1, "{e:?}");
        assert!(e[0].contains("requests 2 but limits 1"));
    }

    #[test]
    fn another_vendor_counts_as_a_gpu() {
        let m = GOOD.replace("nvidia.com/gpu", "amd.com/gpu");
        assert_eq!(lint(&m).error_count(), 0);
    }

    #[test]
    fn latest_and_missing_tags() {
        let digest = "vllm/vllm-openai@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
        let e = errors(&GOOD.replace(digest, "vllm/vllm-openai:latest"));
        assert!(e[0].contains("mutable tag latest"), "{e:?}");
        let e = errors(&GOOD.replace(digest, "registry.example.com:5000/vllm"));
        assert!(e[0].contains("has no tag"), "a registry port is not a tag: {e:?}");
        let r = lint(&GOOD.replace(digest, "vllm/vllm-openai:v0.8.5"));
        assert_eq!(r.error_count(), 0);
        assert!(
            r.findings.iter().any(|f| f.message.contains("a digest")),
            "a tag is a note"
        );
    }

    #[test]
    fn literal_secrets() {
        let m = GOOD.replace(
            "              valueFrom:\n                secretKeyRef: { name: hf, key: token }\n",
            "              value: hf_abcdef\n",
        );
        let e = errors(&m);
        assert_eq!(e.len(), 1, "{e:?}");
        assert!(e[0].contains("HF_TOKEN is set as a literal value"));
        let m = m.replace("HF_TOKEN", "DB_PASSWORD");
        assert!(errors(&m)[0].contains("DB_PASSWORD"));
    }

    #[test]
    fn restart_policy_of_a_job() {
        let job = r#"
apiVersion: batch/v1
kind: Job
metadata: { name: train }
spec:
  template:
    spec:
      containers:
        - name: t
          image: trainer:1.2
          resources: { limits: { nvidia.com/gpu: 8 } }
"#;
        let e = errors(job);
        assert!(e[0].contains("restartPolicy OnFailure or Never"), "{e:?}");
        let ok = job.replace("      containers:", "      restartPolicy: OnFailure\n      containers:");
        assert_eq!(lint(&ok).error_count(), 0);
    }

    #[test]
    fn statefulsets_pods_and_lists_are_read() {
        let m = r#"
apiVersion: v1
kind: List
items:
  - apiVersion: apps/v1
    kind: StatefulSet
    metadata: { name: a }
    spec: { template: { spec: { containers: [ { name: c, image: "x:latest" } ] } } }
  - apiVersion: v1
    kind: Pod
    metadata: { name: b }
    spec: { containers: [ { name: c, image: "x:1", resources: { limits: { nvidia.com/gpu: 1 } } } ] }
"#;
        let r = lint(m);
        assert_eq!(r.objects, 2);
        assert_eq!(r.error_count(), 2, "{:?}", r.findings);
        assert!(r
            .findings
            .iter()
            .any(|f| f.path.starts_with("items[0].spec.template.spec.containers[0]")));
    }

    #[test]
    fn nested_aliases_are_refused_before_they_are_expanded() {
        // Eight lines of ten aliases each stand for 10^8 strings: the loader would copy them all.
        let mut text = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
        for n in 1..8 {
            let aliases = vec![format!("*a{}", n - 1); 10].join(", ");
            text.push_str(&format!("a{n}: &a{n} [{aliases}]\n"));
        }
        assert!(text.len() < 500, "{}", text.len());
        let started = std::time::Instant::now();
        let r = lint(&text);
        assert!(started.elapsed() < std::time::Duration::from_secs(5));
        let e = r.yaml_error.clone().expect("refused");
        assert!(e.message.contains("more than 100000 values"), "{e}");
        // a4 (line 5) stands for 10^5 + 1 values.
        assert_eq!(e.line, 5, "the first alias past the bound: {e}");
        assert_eq!(r.error_count(), 1);
    }

    #[test]
    fn a_long_string_aliased_many_times_or_a_deep_nest_is_refused() {
        // 100 KB once, four lines of ten aliases: 10,000 values, 1 GB of text.
        let mut text = format!("a0: &a0 \"{}\"\n", "x".repeat(100_000));
        for n in 1..5 {
            let aliases = vec![format!("*a{}", n - 1); 10].join(", ");
            text.push_str(&format!("a{n}: &a{n} [{aliases}]\n"));
        }
        let e = lint(&text).yaml_error.expect("refused");
        assert!(e.message.contains("more than 8 MiB of text"), "{e}");
        // Ten thousand levels of `- `: refused before the loader recurses through them.
        let deep = format!("{}x\n", "- ".repeat(10_000));
        let e = lint(&deep).yaml_error.expect("refused");
        assert!(e.message.contains("nests more than 64 levels"), "{e}");
    }

    #[test]
    fn an_anchor_used_a_few_times_is_read() {
        let text = r#"apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  containers:
    - name: a
      image: vllm/vllm-openai:v0.9.2
      resources: &gpu {limits: {nvidia.com/gpu: 1}}
    - name: b
      image: vllm/vllm-openai:v0.9.2
      resources: *gpu
"#;
        let r = lint(text);
        assert!(r.yaml_error.is_none(), "{:?}", r.yaml_error);
        assert_eq!(r.objects, 1);
        assert!(errors(text).iter().all(|m| !m.contains("GPU")), "{:?}", errors(text));
    }

    #[test]
    fn invalid_yaml_names_its_line() {
        let r = lint("apiVersion: v1\nkind: Pod\nmetadata:\n  name: [unclosed\nspec: {}\n");
        let e = r.yaml_error.clone().unwrap();
        assert!(e.line >= 4, "{e}");
        assert!(e.to_string().starts_with("invalid YAML at line"), "{e}");
        assert_eq!(r.error_count(), 1);
    }
}
