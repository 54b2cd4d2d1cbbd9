//! `nvidia-smi -q -x` XML (DTD v10–v13) and `nvidia-smi --query-gpu=… --format=csv[,nounits]`; the
//! plain `nvidia-smi -q` text and the default `nvidia-smi` table are read by `nvidia_smi_text`.
//!
//! Fields are looked up by path with fallbacks; unknown elements are ignored. Per-GPU values are
//! folded into box-level keys: `gpu.memory_total_mib` is the SMALLEST card's total (conservative for a
//! "≥" criterion; a warning when cards differ), `gpu.memory_used_mib_max` the largest used,
//! `gpu.ecc_errors_uncorrected` the sum over GPUs of the aggregate (lifetime) uncorrectable ECC
//! counters (`gpu.ecc_errors_uncorrected_volatile`: since boot); when the input has only the volatile
//! counters (the table's `Volatile Uncorr. ECC` column, a CSV that queried only those) the key is
//! their sum, with a warning naming them. ECC counters that are all `N/A` (consumer cards, ECC off)
//! leave the key absent with a warning.

use super::nvidia_smi_gpu::{finish, is_gpu_error, is_na, merge_sample, Gpu};
use super::{nvidia_smi_text, text, ParseError, Parsed};
use quick_xml::events::Event;
use quick_xml::Reader;

pub(crate) fn parse(s: &str) -> Result<Parsed, ParseError> {
    if s.contains("<nvidia_smi_log") {
        parse_xml(s)
    } else if nvidia_smi_text::is_q_text(s) {
        nvidia_smi_text::parse_q(s)
    } else if nvidia_smi_text::is_table(s) {
        nvidia_smi_text::parse_table(s)
    } else {
        parse_csv(s)
    }
}

fn line_of(s: &str, byte: usize) -> usize {
    s.get(..byte.min(s.len()))
        .map(|p| p.matches('\n').count() + 1)
        .unwrap_or(1)
}

/// `nvidia-smi -q -x`: one read per GPU element of the XML, in document order.
fn parse_xml(s: &str) -> Result<Parsed, ParseError> {
    let mut p = Parsed {
        tool: Some("nvidia-smi".into()),
        ..Default::default()
    };
    let mut reader = Reader::from_str(s);
    reader.config_mut().trim_text(true);
    let mut stack: Vec<String> = Vec::new();
    let mut gpus: Vec<Gpu> = Vec::new();
    let mut cur: Option<Gpu> = None;
    let mut head = LogHead::default();
    let mut complete = false;
    loop {
        let ev = match reader.read_event() {
            Ok(ev) => ev,
            Err(e) => {
                let pos = reader.error_position() as usize;
                let msg = format!("invalid XML: {e}");
                if gpus.is_empty() {
                    return Err(ParseError::at(line_of(s, pos), msg));
                }
                p.warn(format!(
                    "line {}: {msg}; kept {} GPU(s) read before it",
                    line_of(s, pos),
                    gpus.len()
                ));
                break;
            }
        };
        match ev {
            Event::Start(e) => {
                let name = String::from_utf8_lossy(e.name().as_ref()).into_owned();
                if stack.len() > 64 {
                    return Err(ParseError::at(
                        line_of(s, reader.buffer_position() as usize),
                        "XML nested too deeply",
                    ));
                }
                if stack.len() == 1 && name == "gpu" {
                    cur = Some(Gpu::default());
                }
                if name == "mig_device" && stack.last().map(String::as_str) == Some("mig_devices") {
                    if let Some(g) = cur.as_mut() {
                        g.mig_devices += 1;
                    }
                }
                stack.push(name);
            }
            Event::End(_) => {
                if stack.len() == 2 && stack.last().map(String::as_str) == Some("gpu") {
                    if let Some(g) = cur.take() {
                        gpus.push(g);
                    }
                }
                stack.pop();
                if stack.is_empty() {
                    complete = true;
                }
            }
            Event::Text(t) => {
                let Ok(v) = t.decode() else { continue };
                let v = v.trim();
                let path: Vec<&str> = stack.iter().map(String::as_str).collect();
                head.read(&path, v, cur.as_mut());
            }
            Event::Eof => break,
            _ => {}
        }
    }
    check_gpus_read(&mut p, s, complete, gpus.len())?;
    head.record(&mut p, &gpus);
    finish(&mut p, &gpus);
    Ok(p)
}

/// At least one complete `<gpu>` element was read; a log cut short after one is read with a
/// warning.
fn check_gpus_read(p: &mut Parsed, s: &str, complete: bool, gpus: usize) -> Result<(), ParseError> {
    if !complete {
        let ln = text::last_line(s);
        if gpus == 0 {
            return Err(ParseError::at(
                ln,
                "XML ends early (truncated?) before any complete <gpu> element",
            ));
        }
        p.warn(format!(
            "line {ln}: XML ends early (truncated?); {} complete GPU(s) read",
            gpus
        ));
    }
    if gpus == 0 {
        return Err(ParseError::at(1, "no <gpu> element in nvidia_smi_log"));
    }
    Ok(())
}

/// What the log says of the machine, before its `<gpu>` elements.
#[derive(Default)]
struct LogHead {
    driver: Option<String>,
    cuda: Option<String>,
    attached: Option<f64>,
}

impl LogHead {
    /// The text `v` of the element at `path`: the machine's own, or that of the GPU being read.
    fn read(&mut self, path: &[&str], v: &str, gpu: Option<&mut Gpu>) {
        match path {
            ["nvidia_smi_log", "driver_version"] => self.driver = Some(text::without_note(v).to_owned()),
            ["nvidia_smi_log", "cuda_version"] => self.cuda = Some(text::without_note(v).to_owned()),
            ["nvidia_smi_log", "attached_gpus"] => self.attached = text::lenient_number(v),
            ["nvidia_smi_log", "gpu", rest @ ..] => {
                if let Some(g) = gpu {
                    gpu_field(g, rest, v);
                }
            }
            _ => {}
        }
    }

    /// Records the machine's facts and the GPUs' MIG counts, checking the GPU count against
    /// `attached_gpus`.
    fn record(self, p: &mut Parsed, gpus: &[Gpu]) {
        if let Some(a) = self.attached {
            p.count("gpu.attached_gpus", a);
            if a as usize != gpus.len() {
                p.warn(format!(
                    "attached_gpus says {a} but the file has {} <gpu> element(s)",
                    gpus.len()
                ));
            }
        }
        if let Some(d) = self.driver {
            p.text("gpu.driver_version", d.clone());
            p.tool_version = Some(d);
        }
        if let Some(c) = self.cuda.filter(|c| !is_na(c)) {
            p.text("gpu.cuda_version", c);
        }
        let mig = gpus.iter().filter(|g| g.mig_mode.as_deref() == Some("Enabled")).count();
        p.count("gpu.mig_enabled_gpus", mig as f64);
        p.count(
            "gpu.mig_count",
            gpus.iter().map(|g| g.mig_devices).sum::<usize>() as f64,
        );
    }
}

fn gpu_field(g: &mut Gpu, path: &[&str], v: &str) {
    match path {
        ["product_name"] => g.name = Some(v.to_string()),
        ["uuid"] => g.uuid = Some(v.to_string()),
        ["fb_memory_usage", "total"] => g.mem_total = text::lenient_number(v),
        ["fb_memory_usage", "used"] => g.mem_used = text::lenient_number(v),
        ["mig_mode", "current_mig"] => g.mig_mode = Some(v.to_string()),
        ["ecc_errors", scope @ ("volatile" | "aggregate"), rest @ ..] => {
            let leaf = rest.last().copied().unwrap_or_default();
            // v11+: sram_uncorrectable, dram_uncorrectable, sram_uncorrectable_parity/secded;
            // pre-v11: double_bit/total.
            let counts = leaf.contains("uncorrectable") || rest == ["double_bit", "total"];
            if counts && is_gpu_error(v) {
                g.error = true;
            }
            if !counts {
                return;
            }
            if let Some(n) = text::lenient_number(v).filter(|_| !is_na(v)) {
                let slot = if *scope == "aggregate" {
                    &mut g.ecc_agg
                } else {
                    &mut g.ecc_vol
                };
                *slot = Some(slot.unwrap_or(0.0) + n);
            }
        }
        _ => {}
    }
}

/// `--query-gpu=… --format=csv[,nounits]`: `, `-separated, nothing quoted, units in the header
/// (`memory.total [MiB]`) and, without `nounits`, in the values (`143771 MiB`). Columns are known
/// by their header, so `noheader` output cannot be read (its error says so).
/// A shell command, not CSV: a prompt, or the `nvidia-smi` call itself.
fn is_command_line(l: &str) -> bool {
    let t = l.trim_start();
    t.starts_with("$ ")
        || t.starts_with("# ")
        || t.starts_with("> ")
        || t.contains("nvidia-smi")
        || t.contains("--query-gpu")
}

fn parse_csv(s: &str) -> Result<Parsed, ParseError> {
    let mut p = Parsed {
        tool: Some("nvidia-smi".into()),
        ..Default::default()
    };
    let mut lines = s.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()).peekable();
    // A paste often keeps the command above the table (`$ nvidia-smi --query-gpu=index,name,… --format=csv`):
    // split at its commas it looks like a header, and the real header would be read as a GPU.
    while let Some((ln, l)) = lines.next_if(|(_, l)| is_command_line(l)) {
        p.warn(format!(
            "line {}: the command line above the table skipped: {}",
            ln + 1,
            l.trim()
        ));
    }
    let Some((hln, header)) = lines.next() else {
        return Err(ParseError::at(1, "empty input"));
    };
    let cols: Vec<String> = header
        .split(',')
        .map(|c| c.split('[').next().unwrap_or_default().trim().to_ascii_lowercase())
        .collect();
    query_header(&cols, hln)?;
    let mut gpus = Samples::of(&cols);
    let mut driver: Option<String> = None;
    let mut derived = false;
    for (i, l) in lines {
        // A log of repeated queries (`while …; do nvidia-smi --query-gpu=… ; done`) repeats the
        // header.
        if l.trim() == header.trim() {
            gpus.header_again();
            continue;
        }
        let cells: Vec<&str> = l.split(',').map(str::trim).collect();
        if cells.len() != cols.len() {
            p.warn(format!(
                "line {}: {} values for {} columns; row skipped (cut short?)",
                i + 1,
                cells.len(),
                cols.len()
            ));
            continue;
        }
        let g = csv_gpu(&cols, &cells, &mut driver, &mut derived);
        gpus.add(&cells, g);
    }
    if gpus.repeated > 0 {
        p.warn(format!(
            "{} rows were further samples of the same GPUs (a log of `-l`/`-lms`): each GPU counted once, \
             its largest memory used and its newest counters kept",
            gpus.repeated
        ));
    }
    let uncountable = gpus.uncountable();
    let gpus = gpus.gpus;
    if derived {
        p.warn("memory.total not queried: derived as memory.reserved + memory.used + memory.free");
    }
    if gpus.is_empty() {
        return Err(ParseError::at(hln + 2, "CSV header without any GPU row"));
    }
    if let Some(d) = driver {
        p.text("gpu.driver_version", d.clone());
        p.tool_version = Some(d);
    }
    if cols.iter().any(|c| c == "mig.mode.current") {
        let mig = gpus.iter().filter(|g| g.mig_mode.as_deref() == Some("Enabled")).count();
        p.count("gpu.mig_enabled_gpus", mig as f64);
    }
    finish(&mut p, &gpus);
    if uncountable {
        unsure_of_gpus(&mut p);
    }
    if !cols.iter().any(|c| c.starts_with("ecc.errors.uncorrected")) {
        // `finish` warned about ECC; say why.
        p.warnings.retain(|w| !w.starts_with("uncorrectable ECC"));
    }
    Ok(p)
}

/// A log with timestamps that names no GPU: a GPU sampled several times would count once per
/// sample, and its errors with it.
fn unsure_of_gpus(p: &mut Parsed) {
    for key in ["gpu.count", "gpu.models", "gpu.ecc_errors_uncorrected"] {
        p.metrics.remove(key);
    }
    p.warn(
        "a log with timestamps names no GPU (no uuid, index or pci.bus_id column), so its samples cannot be \
         told from GPUs: gpu.count, gpu.models and gpu.ecc_errors_uncorrected are not given (add index to \
         the query)",
    );
}

/// A `--query-gpu` header names at least one column this reader knows; without one the rows
/// cannot be read (a `noheader` query, or another CSV).
fn query_header(cols: &[String], hln: usize) -> Result<(), ParseError> {
    let known = [
        "name",
        "gpu_name",
        "uuid",
        "gpu_uuid",
        "memory.total",
        "memory.used",
        "driver_version",
        "index",
        "pci.bus_id",
        "ecc.errors.uncorrected.aggregate.total",
        "ecc.errors.uncorrected.volatile.total",
    ];
    if !cols.iter().any(|c| known.contains(&c.as_str())) {
        return Err(ParseError::at(
            hln + 1,
            "no --query-gpu CSV header (expected names such as name, uuid, memory.total): run the query \
             without `noheader`, so the columns can be known",
        ));
    }
    Ok(())
}

/// The GPUs of a `--query-gpu` CSV, one per GPU however many samples of it the rows hold: a log of
/// `--format=csv -l 5` (or `-lms 100`) repeats every GPU each interval, and the query run in a
/// shell loop repeats its header too. A GPU is its `uuid`, else its `index`, else its `pci.bus_id`;
/// with none of those queried, its place in its block of rows (the rows between two headers).
struct Samples {
    /// The column that names a GPU, when one was queried.
    id_column: Option<usize>,
    /// A `timestamp` column and no column that names a GPU: samples of one header's block cannot be
    /// told from GPUs.
    timed_without_id: bool,
    gpus: Vec<Gpu>,
    index_of: std::collections::HashMap<String, usize>,
    row_in_block: usize,
    /// Rows that were another sample of a GPU already read.
    repeated: usize,
}

impl Samples {
    fn of(cols: &[String]) -> Self {
        let at = |names: &[&str]| cols.iter().position(|c| names.contains(&c.as_str()));
        let id_column = at(&["uuid", "gpu_uuid"])
            .or_else(|| at(&["index"]))
            .or_else(|| at(&["pci.bus_id"]));
        Samples {
            id_column,
            timed_without_id: id_column.is_none() && at(&["timestamp"]).is_some(),
            gpus: Vec::new(),
            index_of: std::collections::HashMap::new(),
            row_in_block: 0,
            repeated: 0,
        }
    }

    /// The header came again: the rows after it are the next sample.
    fn header_again(&mut self) {
        self.row_in_block = 0;
    }

    /// Whether the rows may count one GPU several times with nothing to tell (see
    /// `timed_without_id`), so the GPUs cannot be counted.
    fn uncountable(&self) -> bool {
        self.timed_without_id && self.gpus.len() > 1
    }

    /// A row: a GPU not seen yet, or a later sample of one (the largest memory used, the largest of
    /// each ECC counter — they only grow, and a later `[N/A]` is no reset — and the newest of every
    /// other figure kept).
    fn add(&mut self, cells: &[&str], g: Gpu) {
        let key = match self.id_column {
            Some(i) => cells.get(i).map(|c| c.to_string()).unwrap_or_default(),
            None => format!("row {}", self.row_in_block),
        };
        self.row_in_block += 1;
        let Some(&i) = self.index_of.get(&key) else {
            self.index_of.insert(key, self.gpus.len());
            self.gpus.push(g);
            return;
        };
        self.repeated += 1;
        merge_sample(&mut self.gpus[i], g);
    }
}

/// One GPU's row; `memory.total` derived from the other memory columns when it was not queried.
fn csv_gpu(cols: &[String], cells: &[&str], driver: &mut Option<String>, derived: &mut bool) -> Gpu {
    let mut g = Gpu::default();
    for (c, &v) in cols.iter().zip(cells) {
        if is_gpu_error(v) {
            g.error = true;
            continue;
        }
        if is_na(v) {
            continue;
        }
        let num = text::lenient_number(v);
        match c.as_str() {
            "name" | "gpu_name" => g.name = Some(v.to_string()),
            "uuid" | "gpu_uuid" => g.uuid = Some(v.to_string()),
            "memory.total" => g.mem_total = num,
            "memory.used" => g.mem_used = num,
            "memory.reserved" | "memory.free" => g.mem_other = Some(g.mem_other.unwrap_or(0.0) + num.unwrap_or(0.0)),
            // Driver 610 deprecates `driver_version` for `kmd_version`, the same figure.
            "driver_version" | "kmd_version" => *driver = Some(super::text::without_note(v).to_owned()),
            "ecc.errors.uncorrected.aggregate.total" => g.ecc_agg = num,
            "ecc.errors.uncorrected.volatile.total" => g.ecc_vol = num,
            "mig.mode.current" => g.mig_mode = Some(v.to_string()),
            _ => {}
        }
    }
    if g.mem_total.is_none() && cols.iter().any(|c| c == "memory.free") && cols.iter().any(|c| c == "memory.reserved") {
        if let (Some(u), Some(o)) = (g.mem_used, g.mem_other) {
            g.mem_total = Some(u + o);
            *derived = true;
        }
    }
    g
}
