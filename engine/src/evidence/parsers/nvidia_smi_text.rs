//! The two `nvidia-smi` outputs people paste most: the default table and the plain `nvidia-smi -q`
//! text. Both fold into the same box-level keys as the XML (see `nvidia_smi_gpu`).
//!
//! * Table (old layout before driver 530, new layout after): the banner gives the driver and CUDA
//!   versions; each GPU is a group of rows between `+---+` borders whose three `|`-separated cells
//!   are read by position in the group: the first row gives index, name and the `Volatile Uncorr. ECC`
//!   count, the second `used / total` memory. The processes and MIG tables after it are not read.
//!   Names the table cut short (`NVIDIA A100-SXM...`) are kept as printed.
//! * `-q` text: `Key : Value` lines under section headers, nested by four-space indentation; a
//!   `GPU 00000000:06:00.0` line starts each GPU. ECC counters are summed as in the XML: every
//!   `Uncorrectable` counter under `ECC Errors > Volatile` / `Aggregate`, or `Double Bit > Total` in
//!   older drivers.

use super::nvidia_smi_gpu::{finish, fold_samples, is_gpu_error, is_na, samples_warning, Gpu};
use super::{text, ParseError, Parsed};

/// The `-q` banner, or its `Attached GPUs` line with a `GPU <bus id>` header (a banner cut off).
pub(crate) fn is_q_text(s: &str) -> bool {
    s.contains("NVSMI LOG") || (s.contains("Attached GPUs") && s.lines().any(|l| l.trim_end().starts_with("GPU 0000")))
}

/// The default table's banner.
/// Drivers from 610 print `KMD Version` and `CUDA UMD Version` where earlier ones printed
/// `Driver Version` and `CUDA Version`.
pub(crate) fn is_table(s: &str) -> bool {
    s.lines()
        .any(|l| l.contains("NVIDIA-SMI ") && (l.contains("Driver Version") || l.contains("KMD Version")))
}

/// The value after `label` on a banner line: `Driver Version: 550.90.07      CUDA …`.
fn banner_value<'a>(line: &'a str, label: &str) -> Option<&'a str> {
    let rest = line.split_once(label)?.1.trim_start_matches(':').trim_start();
    rest.split_whitespace().next().filter(|v| !v.is_empty() && *v != "|")
}

/// `1MiB /  11264MiB` → (1, 11264).
fn memory_cell(cell: &str) -> Option<(f64, f64)> {
    let (used, total) = cell.split_once('/')?;
    Some((text::lenient_number(used)?, text::lenient_number(total)?))
}

/// One pass over the table's lines, with the GPU row it is in.
pub(crate) fn parse_table(s: &str) -> Result<Parsed, ParseError> {
    let mut p = Parsed {
        tool: Some("nvidia-smi".into()),
        ..Default::default()
    };
    let mut driver = None;
    let mut cuda = None;
    // One list of GPUs per table: a log of `nvidia-smi` run in a loop holds several.
    let mut samples: Vec<Vec<Gpu>> = vec![Vec::new()];
    // Position of the current row in its GPU group (0 = the row with the index), None outside one.
    let mut row_in_group: Option<usize> = None;
    let mut header_line = None;
    // Between the GPU table's `====` rule and the processes (or MIG) table.
    let mut in_gpu_table = false;
    let mut past_gpu_table = false;
    // `None` outside the MIG devices table; `Some(false)` above its `====` rule, `Some(true)` below.
    let mut mig_table: Option<bool> = None;
    for (i, raw) in s.lines().enumerate() {
        let line = raw.trim();
        if line.contains("NVIDIA-SMI ") {
            header_line = Some(i + 1);
            (p.tool_version, driver, cuda) = banner(line);
            if samples.last().is_some_and(|s| !s.is_empty()) {
                samples.push(Vec::new());
                (in_gpu_table, past_gpu_table, mig_table) = (false, false, None);
            }
            continue;
        }
        if line.starts_with("|=") {
            // The `====` rule under the column headers; the processes table has its own.
            if header_line.is_some() && !past_gpu_table {
                in_gpu_table = true;
            }
            if mig_table.is_some() {
                mig_table = Some(true);
            }
            row_in_group = Some(0);
            continue;
        }
        if line.starts_with('+') {
            row_in_group = Some(0);
            continue;
        }
        if line.contains("Processes:") || line.contains("MIG devices:") {
            in_gpu_table = false;
            past_gpu_table = true;
            row_in_group = None;
            mig_table = line.contains("MIG devices:").then_some(false);
            continue;
        }
        let Some(gpus) = samples.last_mut() else { continue };
        if mig_table == Some(true) {
            mig_device_ecc(line, gpus);
            continue;
        }
        if !in_gpu_table || !line.starts_with('|') {
            if line.is_empty() {
                row_in_group = None;
            }
            continue;
        }
        let Some(pos) = row_in_group else { continue };
        if gpu_table_row(&mut p, i + 1, line, pos, gpus) {
            row_in_group = Some(pos + 1);
        }
    }
    let gpus = one_gpu_each(&mut p, samples);
    check_found(header_line, gpus.len())?;
    record_machine(&mut p, driver, cuda, &gpus);
    finish(&mut p, &gpus);
    Ok(p)
}

/// The GPUs of every table of the input, each once: a later table's GPU of the same place is a
/// later sample of it. A GPU in MIG mode takes its MIG devices' ECC count first.
fn one_gpu_each(p: &mut Parsed, samples: Vec<Vec<Gpu>>) -> Vec<Gpu> {
    let read = samples.into_iter().flat_map(|sample| {
        sample.into_iter().enumerate().map(|(i, mut g)| {
            if let Some(Some(n)) = g.ecc_in_mig_devices {
                g.ecc_vol = Some(n);
            }
            (i.to_string(), g)
        })
    });
    let (gpus, repeated) = fold_samples(read.collect());
    if repeated > 0 {
        p.warn(samples_warning(repeated));
    }
    gpus
}

/// Row `pos` of a GPU's group in the GPU table (line `ln`): the first names it, the second has its
/// memory. False for a line that is no row (the group's position stays).
fn gpu_table_row(p: &mut Parsed, ln: usize, line: &str, pos: usize, gpus: &mut Vec<Gpu>) -> bool {
    let cells: Vec<&str> = line.trim_matches('|').split('|').collect();
    if cells.len() < 3 {
        return false;
    }
    match pos {
        0 => {
            let Some((index, g)) = first_gpu_row(&cells) else {
                return false;
            };
            if index.parse::<usize>().ok() != Some(gpus.len()) {
                p.warn(format!("line {ln}: GPU {index} out of order"));
            }
            gpus.push(g);
        }
        1 => {
            if let (Some(g), Some((used, total))) = (gpus.last_mut(), memory_cell(cells[1])) {
                g.mem_used = Some(used);
                g.mem_total = Some(total);
            }
        }
        _ => {}
    }
    true
}

/// The versions in the banner line: nvidia-smi's, the driver's and CUDA's.
fn banner(line: &str) -> (Option<String>, Option<String>, Option<String>) {
    let version = line
        .split("NVIDIA-SMI ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .map(str::to_owned);
    let driver = banner_value(line, "Driver Version")
        .or_else(|| banner_value(line, "KMD Version"))
        .map(str::to_owned);
    let cuda = banner_value(line, "CUDA Version")
        .or_else(|| banner_value(line, "CUDA UMD Version"))
        .map(str::to_owned);
    (version, driver, cuda)
}

/// The table had its banner (at line `header_line`) and at least one GPU row.
fn check_found(header_line: Option<usize>, gpus: usize) -> Result<(), ParseError> {
    let Some(hl) = header_line else {
        return Err(ParseError::at(1, "no `NVIDIA-SMI … Driver Version` banner"));
    };
    if gpus == 0 {
        return Err(ParseError::at(
            hl,
            "nvidia-smi table without a GPU row (the driver failed, or the paste was cut short)",
        ));
    }
    Ok(())
}

/// The first row of a GPU's group: `   0  NVIDIA GeForce RTX 2080 Ti     On  ` (index, name,
/// persistence mode), then the bus and the volatile ECC count; `None` when it has no index.
fn first_gpu_row<'a>(cells: &[&'a str]) -> Option<(&'a str, Gpu)> {
    // `   0  NVIDIA GeForce RTX 2080 Ti     On  `
    let mut toks = cells[0].split_whitespace();
    let index = toks.next().filter(|t| t.bytes().all(|b| b.is_ascii_digit()))?;
    let words: Vec<&str> = toks.collect();
    // The last word is the persistence mode (On / Off), on Windows the driver model.
    let name = match words.split_last() {
        Some((last, rest)) if matches!(*last, "On" | "Off" | "WDDM" | "TCC" | "MCDM") => rest.join(" "),
        _ => words.join(" "),
    };
    let ecc = cells[2].trim();
    let mut g = Gpu {
        error: is_gpu_error(&name) || is_gpu_error(ecc),
        name: (!name.is_empty() && !is_gpu_error(&name)).then_some(name),
        ..Default::default()
    };
    if ecc == "On" {
        // A GPU in MIG mode shows its ECC mode here; the counts are its MIG devices' (below).
        g.ecc_in_mig_devices = Some(None);
    } else if !is_na(ecc) && ecc != "Off" {
        g.ecc_vol = text::lenient_number(ecc);
    }
    Some((index, g))
}

/// A row of the MIG devices table: `|  0    2   0   0  |  26MiB / 40448MiB | 60      0 | …`: the
/// GPU, GI, CI and MIG device ids, then the memory, then the SMs and the volatile uncorrectable ECC
/// count. Its count is added to its GPU's, when that GPU showed `On` in its ECC cell.
fn mig_device_ecc(line: &str, gpus: &mut [Gpu]) {
    let cells: Vec<&str> = line.trim_matches('|').split('|').collect();
    let ids: Vec<usize> = cells[0].split_whitespace().filter_map(|t| t.parse().ok()).collect();
    let (Some(&gpu), 4, Some(sm_unc)) = (ids.first(), ids.len(), cells.get(2)) else {
        return;
    };
    let Some(g) = gpus.get_mut(gpu) else { return };
    if let Some(sum) = g.ecc_in_mig_devices.as_mut() {
        if let Some(n) = sm_unc.split_whitespace().nth(1).and_then(text::lenient_number) {
            *sum = Some(sum.unwrap_or(0.0) + n);
        }
    }
}

/// The driver and CUDA versions of the banner, and a warning when a GPU name was cut short.
fn record_machine(p: &mut Parsed, driver: Option<String>, cuda: Option<String>, gpus: &[Gpu]) {
    if let Some(d) = driver {
        p.text("gpu.driver_version", d);
    }
    if let Some(c) = cuda.filter(|c| !is_na(c)) {
        p.text("gpu.cuda_version", c);
    }
    if gpus
        .iter()
        .any(|g| g.name.as_deref().is_some_and(|n| n.ends_with("...")))
    {
        p.warn("the table cut a GPU name short; `nvidia-smi -L` prints it whole");
    }
}

/// Indentation depth of a `-q` line: four spaces (or one tab) per level.
fn depth(line: &str) -> usize {
    let mut cols = 0;
    for c in line.chars() {
        match c {
            ' ' => cols += 1,
            '\t' => cols += 4,
            _ => break,
        }
    }
    cols / 4
}

pub(crate) fn parse_q(s: &str) -> Result<Parsed, ParseError> {
    let mut p = Parsed {
        tool: Some("nvidia-smi".into()),
        ..Default::default()
    };
    let mut driver = None;
    let mut cuda = None;
    let mut attached = None;
    // Each `GPU <bus id>` section as read: a log of `-q -l` reads a GPU once per sample.
    let mut gpus: Vec<(String, Gpu)> = Vec::new();
    // Section headers above the current line, by depth (index 0 is the `GPU …` line itself).
    let mut sections: Vec<String> = Vec::new();
    for raw in s.lines() {
        let line = raw.trim_end();
        let t = line.trim_start();
        if t.is_empty() || t.starts_with("====") {
            continue;
        }
        let d = depth(line);
        if d == 0 {
            if let Some(rest) = t.strip_prefix("GPU ") {
                if rest.contains(':') && !rest.contains(" : ") {
                    gpus.push((rest.trim().to_owned(), Gpu::default()));
                    sections.clear();
                    continue;
                }
            }
            if let Some((k, v)) = t.split_once(" : ") {
                match k.trim() {
                    // Driver 610 notes the old names' end (`610.57.04 [Deprecated; … Use KMD Version
                    // instead]`) beside the new ones, which CUDA 14 keeps alone.
                    "Driver Version" | "KMD Version" => driver = Some(text::without_note(v).to_owned()),
                    "CUDA Version" | "CUDA UMD Version" => cuda = Some(text::without_note(v).to_owned()),
                    "Attached GPUs" => attached = text::lenient_number(v),
                    _ => {}
                }
            }
            continue;
        }
        let Some((_, g)) = gpus.last_mut() else { continue };
        sections.truncate(d.saturating_sub(1));
        match t.split_once(':') {
            Some((k, v)) if !v.trim().is_empty() || t.ends_with(": ") => {
                let path: Vec<&str> = sections.iter().map(String::as_str).chain([k.trim()]).collect();
                field(g, &path, v.trim());
            }
            _ => {
                while sections.len() < d - 1 {
                    sections.push(String::new());
                }
                sections.push(t.trim_end_matches(':').trim().to_owned());
            }
        }
    }
    if gpus.is_empty() {
        return Err(ParseError::at(
            text::last_line(s),
            "nvidia-smi -q text without a `GPU <bus id>` section",
        ));
    }
    // A GPU is its UUID (two machines' `-q` put together share bus ids), else its bus id.
    let (gpus, repeated) = fold_samples(
        gpus.into_iter()
            .map(|(bus, g)| (g.uuid.clone().unwrap_or(bus), g))
            .collect(),
    );
    if repeated > 0 {
        p.warn(samples_warning(repeated));
    }
    record_q_machine(&mut p, attached, driver, cuda, &gpus);
    finish(&mut p, &gpus);
    Ok(p)
}

/// The machine's lines of `-q` (before its GPU sections) and the MIG count.
fn record_q_machine(p: &mut Parsed, attached: Option<f64>, driver: Option<String>, cuda: Option<String>, gpus: &[Gpu]) {
    if let Some(a) = attached {
        p.count("gpu.attached_gpus", a);
        if a as usize != gpus.len() {
            p.warn(format!(
                "Attached GPUs says {a} but the text has {} GPU section(s)",
                gpus.len()
            ));
        }
    }
    if let Some(d) = driver {
        p.text("gpu.driver_version", d.clone());
        p.tool_version = Some(d);
    }
    if let Some(c) = cuda.filter(|c| !is_na(c) && c != "Not Found") {
        p.text("gpu.cuda_version", c);
    }
    if gpus.iter().any(|g| g.mig_mode.is_some()) {
        let mig = gpus.iter().filter(|g| g.mig_mode.as_deref() == Some("Enabled")).count();
        p.count("gpu.mig_enabled_gpus", mig as f64);
    }
}

fn field(g: &mut Gpu, path: &[&str], v: &str) {
    match path {
        ["Product Name"] => g.name = Some(v.to_owned()),
        ["GPU UUID"] => g.uuid = Some(v.to_owned()),
        ["FB Memory Usage", "Total"] => g.mem_total = text::lenient_number(v),
        ["FB Memory Usage", "Used"] => g.mem_used = text::lenient_number(v),
        ["MIG Mode", "Current"] if !is_na(v) => g.mig_mode = Some(v.to_owned()),
        ["ECC Errors", scope @ ("Volatile" | "Aggregate"), rest @ ..] => {
            let leaf = rest.last().copied().unwrap_or_default();
            // Ampere and later: `SRAM Uncorrectable Parity`, `SRAM Uncorrectable SEC-DED`,
            // `DRAM Uncorrectable` (or `SRAM Uncorrectable`); before: `Double Bit > Total`.
            let counts = leaf.contains("Uncorrectable") || rest == ["Double Bit", "Total"];
            if counts && is_gpu_error(v) {
                g.error = true;
            }
            if !counts || is_na(v) {
                return;
            }
            if let Some(n) = text::lenient_number(v) {
                let slot = if *scope == "Aggregate" {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A real A10 table (tests/fixtures/nvidia-smi-query/PROVENANCE.md), driver 550.
    const A10: &str = include_str!("../../../../tests/fixtures/nvidia-smi-query/a10-table-driver550-gpud.txt");
    const A10_GPU_ROWS: &str = "\
|   0  NVIDIA A10                     On  |   00000000:06:00.0 Off |                    0 |
|  0%   32C    P8             21W /  150W |       1MiB /  23028MiB |      0%      Default |
|                                         |                        |                  N/A |
";

    fn two_gpus(second: &str) -> String {
        let rule = "+-----------------------------------------+------------------------+----------------------+\n";
        A10.replace(A10_GPU_ROWS, &format!("{A10_GPU_ROWS}{rule}{second}"))
    }

    /// A GPU that fell off the bus (NVIDIA/open-gpu-kernel-modules#446, driver 525, A40s): its row
    /// is `ERR!`; the others' zero ECC count must not read as "no errors".
    #[test]
    fn a_gpu_in_error_is_said_and_its_ecc_is_not_taken_for_zero() {
        let table = two_gpus(
            "|   1  ERR!                            On  |   00000000:83:00.0 Off |                 ERR! |\n\
             |ERR!  ERR! ERR!             ERR! / ERR! |      0MiB /  23028MiB |    ERR!      Default |\n\
             |                                         |                        |                 ERR! |\n",
        );
        let p = parse_table(&table).unwrap();
        assert_eq!(p.get_num("gpu.count"), Some(2.0));
        assert_eq!(p.get_num("gpu.ecc_errors_uncorrected"), None);
        assert!(
            p.warnings.iter().any(|w| w.contains("GPU 1 reported an error")),
            "{:?}",
            p.warnings
        );
        let healthy = parse_table(A10).unwrap();
        assert_eq!(healthy.get_num("gpu.ecc_errors_uncorrected"), Some(0.0));
    }

    /// Windows prints the driver model where Linux prints the persistence mode.
    #[test]
    fn the_windows_driver_model_is_not_part_of_the_name() {
        let table = A10.replace(
            "|   0  NVIDIA A10                     On  |",
            "|   0  NVIDIA A10                   WDDM  |",
        );
        let p = parse_table(&table).unwrap();
        assert_eq!(
            p.metrics.get("gpu.models"),
            Some(&super::super::MetricValue::List(vec!["NVIDIA A10".into()]))
        );
    }

    /// Drivers from 610 name the versions `KMD Version` and `CUDA UMD Version`.
    #[test]
    fn the_610_banner_is_a_table_with_its_versions() {
        let table = A10.replace(
            "| NVIDIA-SMI 550.127.05             Driver Version: 550.127.05     CUDA Version: 12.4     |",
            "| NVIDIA-SMI 610.43.02              KMD Version: 610.43.02     CUDA UMD Version: 13.3     |",
        );
        assert!(is_table(&table));
        let p = parse_table(&table).unwrap();
        assert_eq!(
            p.metrics.get("gpu.driver_version"),
            Some(&super::super::MetricValue::Text("610.43.02".into()))
        );
        assert_eq!(
            p.metrics.get("gpu.cuda_version"),
            Some(&super::super::MetricValue::Text("13.3".into()))
        );
    }

    /// Driver 610's `-q` (utkuozdemir/nvidia_gpu_exporter's 610.57.04 capture): the old names carry a
    /// deprecation note, and the new ones stand beside them; CUDA 14 keeps only the new ones.
    #[test]
    fn driver_610_notes_and_kmd_names_give_the_bare_versions() {
        const Q: &str = include_str!("../../../../tests/fixtures/nvidia-smi-query/a10-q-text-driver550-gpud.txt");
        let noted = Q
            .replace(
                "Driver Version                            : 550.127.05\n",
                "Driver Version                            : 610.57.04 [Deprecated; will be removed in CUDA 14.0. Use KMD Version instead]\n",
            )
            .replace(
                "CUDA Version                              : 12.4\n",
                "CUDA Version                              : 13.3 [Deprecated; will be removed in CUDA 14.0. Use CUDA UMD Version instead]\n\
                 KMD Version                               : 610.57.04\n\
                 CUDA UMD Version                          : 13.3\n",
            );
        assert_ne!(noted, Q);
        let new_only = noted
            .lines()
            .filter(|l| !l.starts_with("Driver Version") && !l.starts_with("CUDA Version"))
            .map(|l| format!("{l}\n"))
            .collect::<String>();
        for text in [noted.as_str(), new_only.as_str()] {
            let p = parse_q(text).unwrap();
            assert_eq!(
                p.metrics.get("gpu.driver_version"),
                Some(&super::super::MetricValue::Text("610.57.04".into()))
            );
            assert_eq!(
                p.metrics.get("gpu.cuda_version"),
                Some(&super::super::MetricValue::Text("13.3".into()))
            );
        }
    }

    /// A `--query-gpu` paste that keeps its command line above the header: two GPUs, not three.
    #[test]
    fn a_csv_pasted_under_its_command_line_counts_its_gpus() {
        let paste = "$ nvidia-smi --query-gpu=index,name,memory.total,memory.used --format=csv\n\
                     index, name, memory.total [MiB], memory.used [MiB]\n\
                     0, NVIDIA RTX A6000, 49140 MiB, 1023 MiB\n\
                     1, NVIDIA RTX A6000, 49140 MiB, 30120 MiB\n";
        let p = super::super::nvidia_smi_query::parse(paste).unwrap();
        assert_eq!(p.get_num("gpu.count"), Some(2.0), "{:?}", p.warnings);
        assert_eq!(p.get_num("gpu.memory_used_mib_max"), Some(30120.0));
        assert!(
            p.warnings
                .iter()
                .any(|w| w.contains("line 1: the command line above the table skipped")),
            "{:?}",
            p.warnings
        );
        let bare = paste.replacen("$ ", "", 1);
        assert_eq!(
            super::super::nvidia_smi_query::parse(&bare)
                .unwrap()
                .get_num("gpu.count"),
            Some(2.0)
        );
    }

    /// A GPU in MIG mode shows `On` in its ECC cell (utkuozdemir/nvidia_gpu_exporter's H100 MIG
    /// capture, driver 590): its count is its MIG devices'; without their table it is not known,
    /// and the other GPUs' sum is not given as the box's.
    #[test]
    fn a_mig_gpus_ecc_comes_from_its_mig_devices() {
        const MIG: &str = include_str!(
            "../../../../tests/fixtures/nvidia-smi-query/h100-mig-table-driver590-ecc-on-gpu-exporter.txt"
        );
        let p = parse_table(MIG).unwrap();
        assert_eq!(p.get_num("gpu.ecc_errors_uncorrected"), Some(0.0));
        let one_error = MIG.replace("| 32      0 |", "| 32      2 |");
        assert_ne!(one_error, MIG);
        assert_eq!(
            parse_table(&one_error).unwrap().get_num("gpu.ecc_errors_uncorrected"),
            Some(2.0)
        );
        let cut = &MIG[..MIG.find("| MIG devices:").unwrap()];
        let p = parse_table(cut).unwrap();
        assert_eq!(p.get_num("gpu.ecc_errors_uncorrected"), None);
        assert!(
            p.warnings.iter().any(|w| w.contains("GPU 0 is in MIG mode")),
            "{:?}",
            p.warnings
        );
    }

    /// `while true; do nvidia-smi >> gpu.log; sleep 2; done` (IRLL/LLM_self_improvement's
    /// test_speed.sh) logs one table per run: each GPU once, its largest memory used kept.
    #[test]
    fn a_log_of_repeated_tables_or_q_runs_counts_each_gpu_once() {
        let busy = A10.replace("1MiB /  23028MiB", "20000MiB /  23028MiB");
        assert_ne!(busy, A10);
        for log in [format!("{A10}\n{busy}"), format!("{busy}\n{A10}")] {
            let p = parse_table(&log).unwrap();
            assert_eq!(p.get_num("gpu.count"), Some(1.0), "{:?}", p.warnings);
            assert_eq!(p.get_num("gpu.memory_used_mib_max"), Some(20000.0));
            assert!(
                p.warnings.iter().any(|w| w.contains("further samples")),
                "{:?}",
                p.warnings
            );
        }
        const Q: &str = include_str!("../../../../tests/fixtures/nvidia-smi-query/a10-q-text-driver550-gpud.txt");
        let p = parse_q(&format!("{Q}\n{Q}")).unwrap();
        assert_eq!(p.get_num("gpu.count"), Some(1.0), "{:?}", p.warnings);
        // Two machines' `-q` put together: the same bus id, other GPUs.
        let other = Q.replace(
            "GPU-51ae0086-e1ac-4a20-f062-9caa44e4df6d",
            "GPU-00000000-1111-2222-3333-444444444444",
        );
        assert_ne!(other, Q);
        assert_eq!(
            parse_q(&format!("{Q}\n{other}")).unwrap().get_num("gpu.count"),
            Some(2.0)
        );
        assert!(
            !p.warnings.iter().any(|w| w.contains("Attached GPUs says")),
            "{:?}",
            p.warnings
        );
    }
}
