//! Per-GPU evaluation: the smallest count that fits, headroom, decode ceiling, interconnect note,
//! and the ordering of options.

use std::cmp::Ordering;

use super::catalog::{GpuSpec, GB, GIB};
use super::memory::{Footprint, Split};
use super::{round1, round2, SizingOption};

/// GPU counts tensor/pipeline parallelism can use: 1, 2, 4, 8 in a node, then whole 8-GPU nodes.
pub const COUNTS: [u32; 11] = [1, 2, 4, 8, 16, 24, 32, 40, 48, 56, 64];
/// Share of datasheet memory an engine may use (vLLM `gpu_memory_utilization` default 0.9).
pub const UTILISATION: f64 = 0.9;
/// Activation / CUDA-graph / context reserve per device: max(1.5 GB, 5 % of its memory).
pub const RESERVE_MIN_BYTES: f64 = 1.5 * GB;
pub const RESERVE_SHARE: f64 = 0.05;

/// Reserve per card, in bytes (per device, times the devices on the card).
pub fn reserve_bytes(gpu: &GpuSpec) -> f64 {
    let dpc = f64::from(gpu.devices_per_card);
    dpc * RESERVE_MIN_BYTES.max(RESERVE_SHARE * gpu.memory_bytes() / dpc)
}

/// Usable bytes per card: datasheet bytes × 0.9.
pub fn usable_bytes(gpu: &GpuSpec) -> f64 {
    UTILISATION * gpu.memory_bytes()
}

/// Overhead per card counted in `Sizing::overhead_gib`: the reserve plus the 10 % margin.
pub fn overhead_bytes(gpu: &GpuSpec) -> f64 {
    reserve_bytes(gpu) + (1.0 - UTILISATION) * gpu.memory_bytes()
}

/// Tensor-parallel devices in one node and pipeline stages (nodes) for `count` cards.
fn layout(gpu: &GpuSpec, count: u32) -> (u32, u32) {
    let per_node = count.min(gpu.gpus_per_node);
    let nodes = count.div_ceil(gpu.gpus_per_node);
    (per_node * gpu.devices_per_card, nodes)
}

/// Bytes per card at `count` cards: (weights, dynamic). Weights shard evenly (TP × PP or
/// ZeRO-3/FSDP). KV shards by head up to the KV-head count, then is replicated; pipeline
/// stages still divide it by layer. Activations follow each device's micro-batch.
pub fn per_card(fp: &Footprint, gpu: &GpuSpec, count: u32) -> (f64, f64) {
    let dpc = gpu.devices_per_card;
    let weights = fp.weights / f64::from(count);
    let per_device = match fp.split {
        Split::KvHeads { shards } => {
            let (tp, pp) = layout(gpu, count);
            fp.dynamic / (f64::from(tp.min(shards.max(1))) * f64::from(pp))
        }
        Split::DataParallel { per_seq, seqs } => {
            let devices = u64::from(count) * u64::from(dpc);
            per_seq * seqs.div_ceil(devices) as f64
        }
    };
    (weights, per_device * f64::from(dpc))
}

/// Evaluate `gpu` at `count`: (fits, headroom_pct, decode tokens/s ceiling).
fn evaluate(fp: &Footprint, gpu: &GpuSpec, count: u32) -> (bool, f64, f64) {
    let (weights, dynamic) = per_card(fp, gpu, count);
    let usable = usable_bytes(gpu);
    let need = weights + dynamic + reserve_bytes(gpu);
    let headroom = (usable - need) / usable * 100.0;
    let decode = fp.decode.map_or(0.0, |d| {
        // Each card reads its weight shard and its KV shard every step, at full bandwidth (MBU 1);
        // every live sequence gains one token per step.
        let bytes = d.weight_bytes_read() / f64::from(count) + dynamic;
        d.batch as f64 * gpu.memory_bandwidth_gbs * GB / bytes
    });
    (need <= usable, headroom, decode)
}

/// The note on how `count` cards talk to each other; `None` for one ordinary card. `scheme`
/// names how the work is split ("tensor parallel" or "sharded data parallel (FSDP/ZeRO-3)").
pub fn interconnect_note(gpu: &GpuSpec, count: u32, scheme: &str) -> Option<String> {
    let dpc = gpu.devices_per_card;
    let mut parts = Vec::new();
    if dpc > 1 {
        parts.push(format!(
            "each {} card is {dpc} devices of {:.0} GB that software sees as separate GPUs: {scheme} over {} devices, joined by {} inside the package",
            gpu.model,
            gpu.memory_gb / f64::from(dpc),
            count.min(gpu.gpus_per_node) * dpc,
            gpu.fabric_name(),
        ));
    }
    if count > 1 {
        let in_node = count.min(gpu.gpus_per_node);
        let pcie = format!("PCIe Gen{}", gpu.pcie_gen);
        if gpu.nvlink_gbs > 0.0 && gpu.fabric_gpus >= in_node {
            let mut s = format!(
                "{scheme} {} over {} ({} GB/s per GPU)",
                in_node * dpc,
                gpu.fabric_name(),
                gpu.nvlink_gbs
            );
            if gpu.fabric_optional {
                s.push_str(&format!(
                    "; the bridge is optional on this card: confirm the provider fitted it, otherwise the collectives go over {pcie}"
                ));
            }
            parts.push(s);
        } else if gpu.nvlink_gbs > 0.0 && gpu.fabric_gpus >= 2 {
            parts.push(format!(
                "{} joins only {} GPUs: {scheme} collectives across {in_node} GPUs go over {pcie}; prefer groups of {} with pipeline parallel between them, or replicas",
                gpu.fabric_name(),
                gpu.fabric_gpus,
                gpu.fabric_gpus,
            ));
        } else {
            parts.push(format!(
                "PCIe only (no NVLink): {scheme} collectives (all-reduce) at every layer go over {pcie}; prefer replicas (data parallel) or pipeline parallel, or measure the cost in the load test"
            ));
        }
        if count > gpu.gpus_per_node {
            let nodes = count.div_ceil(gpu.gpus_per_node);
            parts.push(format!(
                "multi-node: {nodes} nodes × {} GPUs with pipeline parallel {nodes} across nodes; needs a fast inter-node network (InfiniBand or RoCE) — ask the provider for evidence of it",
                gpu.gpus_per_node
            ));
        }
    }
    if parts.is_empty() {
        None
    } else {
        Some(parts.join("; "))
    }
}

fn scheme(fp: &Footprint) -> &'static str {
    match fp.split {
        Split::KvHeads { .. } => "tensor parallel",
        Split::DataParallel { .. } => "sharded data parallel (FSDP/ZeRO-3)",
    }
}

/// The option for `gpu`: the smallest count in [`COUNTS`] that fits, else the largest count
/// tried with `fits = false`.
pub fn option_for(fp: &Footprint, gpu: &GpuSpec) -> SizingOption {
    let mut chosen = None;
    for count in COUNTS {
        let (fits, headroom, decode) = evaluate(fp, gpu, count);
        chosen = Some((count, fits, headroom, decode));
        if fits {
            break;
        }
    }
    let (count, fits, headroom, decode) = chosen.unwrap_or((1, false, 0.0, 0.0));
    SizingOption {
        gpu: gpu.model.clone(),
        memory_gib: round2(gpu.memory_gib),
        count,
        fits,
        headroom_pct: round2(headroom),
        decode_tokens_per_s_max: round1(decode),
        interconnect_note: interconnect_note(gpu, count, scheme(fp)),
    }
}

/// Fitting options first, by memory rented (count × datasheet memory) ascending, then count,
/// then name; then the rest, closest to fitting (largest headroom) first, then name.
pub fn order(a: (&SizingOption, &GpuSpec), b: (&SizingOption, &GpuSpec)) -> Ordering {
    let rented = |(o, g): (&SizingOption, &GpuSpec)| f64::from(o.count) * g.memory_gb;
    let (a_opt, b_opt) = (a.0, b.0);
    b_opt.fits.cmp(&a_opt.fits).then_with(|| {
        if a_opt.fits {
            rented(a)
                .total_cmp(&rented(b))
                .then(a_opt.count.cmp(&b_opt.count))
                .then_with(|| a_opt.gpu.cmp(&b_opt.gpu))
        } else {
            b_opt
                .headroom_pct
                .total_cmp(&a_opt.headroom_pct)
                .then_with(|| a_opt.gpu.cmp(&b_opt.gpu))
        }
    })
}

/// `Sizing::overhead_gib` for the best option: count × (reserve + 10 % margin), in GiB.
pub fn overhead_gib(gpu: &GpuSpec, count: u32) -> f64 {
    f64::from(count) * overhead_bytes(gpu) / GIB
}
