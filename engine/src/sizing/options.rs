//! Per-GPU evaluation: the smallest count that fits with a layout that can load, headroom,
//! decode ceiling, interconnect note, and the ordering of options.

use std::cmp::Ordering;

use super::catalog::{GpuSpec, GB, GIB};
use super::memory::{Footprint, Split};
use super::parallelism::{self, Layout};
use super::{round1, round2, SizingOption};

/// GPU counts tensor/pipeline parallelism can use: 1, 2, 4, 8 in a node, then whole 8-GPU nodes.
pub const COUNTS: [u32; 11] = [1, 2, 4, 8, 16, 24, 32, 40, 48, 56, 64];
/// Share of datasheet memory an engine may use (vLLM `gpu_memory_utilization` default 0.9).
pub const UTILISATION: f64 = 0.9;
/// The highest `--gpu-memory-utilization` the engine suggests to keep a model on one node.
pub const RAISED_UTILISATION: f64 = 0.95;
/// Activation / CUDA-graph / context reserve per device: max(1.5 GB, 5 % of its memory).
pub const RESERVE_MIN_BYTES: f64 = 1.5 * GB;
pub const RESERVE_SHARE: f64 = 0.05;

/// Reserve per card, in bytes (per device, times the devices on the card).
pub fn reserve_bytes(gpu: &GpuSpec) -> f64 {
    let dpc = f64::from(gpu.devices_per_card);
    dpc * RESERVE_MIN_BYTES.max(RESERVE_SHARE * gpu.memory_bytes() / dpc)
}

/// Overhead per card counted in `Sizing::overhead_gib`: the reserve plus the 10 % margin.
pub fn overhead_bytes(gpu: &GpuSpec) -> f64 {
    reserve_bytes(gpu) + (1.0 - UTILISATION) * gpu.memory_bytes()
}

/// How `count` cards of one GPU run the workload.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Placement {
    pub count: u32,
    pub layout: Layout,
    /// Data-parallel attention with experts spread (MLA mixtures of experts).
    pub dp_attention: bool,
    /// `gpu_memory_utilization` the engine runs at.
    pub utilisation: f64,
}

/// The default placement of `count` cards: the layout `parallelism::layout` allows (FSDP for
/// training and fine-tuning needs none), at the default utilisation. `None` when no layout loads.
pub fn default_placement(fp: &Footprint, gpu: &GpuSpec, count: u32) -> Option<Placement> {
    let dpc = gpu.devices_per_card;
    let layout = match fp.split {
        Split::KvHeads { .. } => parallelism::layout(
            count * dpc,
            count.min(gpu.gpus_per_node) * dpc,
            &parallelism::Heads::of(&fp.shape),
            fp.shape.layers,
        )?,
        Split::DataParallel { .. } => Layout { tp: 1, pp: 1 },
    };
    Some(Placement {
        count,
        layout,
        dp_attention: false,
        utilisation: UTILISATION,
    })
}

/// Bytes per card at the default placement of `count` cards: (weights, dynamic).
#[cfg(test)]
pub fn per_card(fp: &Footprint, gpu: &GpuSpec, count: u32) -> (f64, f64) {
    let placement = default_placement(fp, gpu, count).unwrap_or(Placement {
        count,
        layout: Layout { tp: 1, pp: count },
        dp_attention: false,
        utilisation: UTILISATION,
    });
    per_card_at(fp, gpu, &placement)
}

/// Bytes per card: (weights, dynamic). Weights shard evenly (TP × PP or ZeRO-3/FSDP); with
/// data-parallel attention the shared weights are on every device and only the experts
/// spread. KV shards by head up to the KV-head count, then is replicated; pipeline stages
/// divide it by layer; data-parallel attention gives each device its own sequences.
/// Activations follow each device's micro-batch.
pub fn per_card_at(fp: &Footprint, gpu: &GpuSpec, p: &Placement) -> (f64, f64) {
    let dpc = gpu.devices_per_card;
    let devices = p.count * dpc;
    let d = f64::from(devices);
    let (weights, kv) = match (fp.split, fp.dp_attention.filter(|_| p.dp_attention)) {
        (
            Split::KvHeads {
                per_seq,
                state_per_seq,
                seqs,
                ..
            },
            Some(dp),
        ) => (
            dp.shared_bytes + dp.expert_bytes / d,
            (per_seq + state_per_seq) * seqs.div_ceil(u64::from(devices)) as f64,
        ),
        (
            Split::KvHeads {
                shards,
                per_seq,
                state_per_seq,
                seqs,
            },
            None,
        ) => {
            let (tp, pp) = (f64::from(p.layout.tp), f64::from(p.layout.pp));
            let kv = per_seq / (f64::from(p.layout.tp.min(shards.max(1))) * pp);
            let busiest = busiest_stage_share(fp.shape.layers, p.layout.pp);
            (
                fp.weights / d * busiest,
                (kv + state_per_seq / (tp * pp)) * seqs as f64 * busiest,
            )
        }
        (Split::DataParallel { per_seq, seqs }, _) => {
            (fp.weights / d, per_seq * seqs.div_ceil(u64::from(devices)) as f64)
        }
    };
    (weights * f64::from(dpc), kv * f64::from(dpc))
}

/// The busiest pipeline stage's layers against an even split: vLLM gives a stage ⌈L/pp⌉ layers
/// at most (`get_pp_indices`), so 61 layers over 5 stages put 13 on one, 6.6 % above 61/5. 1
/// without pipeline stages or when they divide the layers.
pub(crate) fn busiest_stage_share(layers: u32, pp: u32) -> f64 {
    if pp <= 1 || layers == 0 {
        return 1.0;
    }
    f64::from(layers.div_ceil(pp) * pp) / f64::from(layers)
}

/// Whether the placement fits, its headroom (% of usable memory) and its decode ceiling.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Evaluation {
    pub fits: bool,
    pub headroom_pct: f64,
    pub decode_tokens_per_s: f64,
}

pub fn evaluate(fp: &Footprint, gpu: &GpuSpec, p: &Placement) -> Evaluation {
    let (weights, dynamic) = per_card_at(fp, gpu, p);
    let usable = p.utilisation * gpu.memory_bytes();
    let need = weights + dynamic + reserve_bytes(gpu);
    let headroom = (usable - need) / usable * 100.0;
    let decode = fp.decode.map_or(0.0, |d| {
        // Each card reads its weight share and its KV share every step, at full bandwidth (MBU 1);
        // every live sequence gains one token per step. Pipeline stages read in turn, not
        // together: a token passes all `pp` of them, so a step reads a stage's weights `pp` times
        // over (whatever the micro-batching), and its KV once in all.
        let weights_read = if p.dp_attention {
            let dpc = f64::from(gpu.devices_per_card);
            (d.shared_bytes + d.expert_bytes_read() / (f64::from(p.count) * dpc)) * dpc
        } else {
            d.weight_bytes_read() / f64::from(p.count) * f64::from(p.layout.pp.max(1))
        };
        d.batch as f64 * gpu.memory_bandwidth_gbs * GB / (weights_read + dynamic)
    });
    Evaluation {
        fits: need <= usable,
        headroom_pct: headroom,
        decode_tokens_per_s: decode,
    }
}

/// How the cards of a placement split the work, for notes.
fn scheme(fp: &Footprint, p: &Placement, devices_in_node: u32) -> String {
    match fp.split {
        Split::DataParallel { .. } => format!("sharded data parallel (FSDP/ZeRO-3) {devices_in_node}"),
        Split::KvHeads { .. } if p.dp_attention => {
            format!("data-parallel attention {devices_in_node} with expert parallel")
        }
        Split::KvHeads { .. } => {
            let tp = p.layout.tp;
            if tp >= devices_in_node {
                format!("tensor parallel {devices_in_node}")
            } else if tp == 1 {
                format!("pipeline parallel {devices_in_node}")
            } else {
                format!("tensor parallel {tp} × pipeline parallel {}", devices_in_node / tp)
            }
        }
    }
}

fn collectives(fp: &Footprint, p: &Placement) -> &'static str {
    match fp.split {
        Split::DataParallel { .. } => "sharded data parallel (FSDP/ZeRO-3)",
        Split::KvHeads { .. } if p.dp_attention => "expert parallel",
        Split::KvHeads { .. } => "tensor parallel",
    }
}

/// The note on how the cards talk to each other; `None` for one ordinary card.
pub fn interconnect_note(fp: &Footprint, gpu: &GpuSpec, p: &Placement) -> Option<String> {
    let count = p.count;
    let dpc = gpu.devices_per_card;
    let in_node = count.min(gpu.gpus_per_node);
    let scheme = scheme(fp, p, in_node * dpc);
    let coll = collectives(fp, p);
    let mut parts = Vec::new();
    if dpc > 1 {
        parts.push(format!(
            "each {} card is {dpc} devices of {:.0} GB that software sees as separate GPUs: {scheme} over {} devices, joined by {} inside the package",
            gpu.model,
            gpu.memory_gb / f64::from(dpc),
            in_node * dpc,
            gpu.fabric_name(),
        ));
    }
    if count > 1 {
        let pcie = format!("PCIe Gen{}", gpu.pcie_gen);
        if gpu.nvlink_gbs > 0.0 && gpu.fabric_gpus >= in_node {
            let mut s = format!("{scheme} over {} ({} GB/s per GPU)", gpu.fabric_name(), gpu.nvlink_gbs);
            if gpu.fabric_optional {
                s.push_str(&format!(
                    "; the bridge is optional on this card: confirm the provider fitted it, otherwise the collectives go over {pcie}"
                ));
            }
            parts.push(s);
        } else if gpu.nvlink_gbs > 0.0 && gpu.fabric_gpus >= 2 {
            parts.push(format!(
                "{} joins only {} GPUs: {coll} collectives across {in_node} GPUs go over {pcie}; prefer groups of {} with pipeline parallel between them, or replicas",
                gpu.fabric_name(),
                gpu.fabric_gpus,
                gpu.fabric_gpus,
            ));
        } else {
            parts.push(format!(
                "PCIe only (no NVLink): {scheme}; its {coll} collectives at every layer go over {pcie}; prefer replicas (data parallel) or pipeline parallel, or measure the cost in the load test"
            ));
        }
        if matches!(fp.split, Split::KvHeads { .. }) && !p.dp_attention && p.layout.tp < in_node * dpc {
            let degrees = parallelism::valid_degrees(&parallelism::Heads::of(&fp.shape), in_node * dpc);
            let mut heads: Vec<String> = Vec::new();
            if let Some(h) = fp.shape.heads {
                heads.push(format!("{h} attention heads"));
            }
            heads.push(format!("{} KV heads", fp.shape.kv_heads));
            if let Some(s) = fp.shape.state {
                heads.push(s.heads_text());
            }
            let heads = match heads.split_last() {
                Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
                _ => heads.join(""),
            };
            parts.push(format!(
                "{heads} allow tensor parallel {} only, so the other factor is pipeline stages",
                join_numbers(&degrees)
            ));
        }
        if count > gpu.gpus_per_node {
            let nodes = count.div_ceil(gpu.gpus_per_node);
            parts.push(format!(
                "multi-node: {nodes} nodes × {} GPUs with pipeline parallel {} across them; needs a fast inter-node network (InfiniBand or RoCE) — ask the provider for evidence of it",
                gpu.gpus_per_node, p.layout.pp
            ));
        }
    }
    if parts.is_empty() {
        None
    } else {
        Some(parts.join("; "))
    }
}

fn join_numbers(n: &[u32]) -> String {
    let s: Vec<String> = n.iter().map(u32::to_string).collect();
    match s.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        _ => s.join(""),
    }
}

/// One full node that misses with the defaults: what engine setting makes it enough, so
/// the option stays on one node instead of going multi-node. Data-parallel attention for MLA
/// mixtures of experts (vLLM's advice for DeepSeek-style models: with tensor parallelism every
/// GPU holds the whole latent cache), then a higher `--gpu-memory-utilization`.
fn one_node_setting(fp: &Footprint, gpu: &GpuSpec, base: &Placement) -> Option<(Placement, Evaluation, String)> {
    // The settings are a serving engine's (vLLM); training, fine-tuning and media without a KV
    // cache have none to offer.
    if !matches!(fp.split, Split::KvHeads { per_seq, .. } if per_seq > 0.0) {
        return None;
    }
    let devices = base.count * gpu.devices_per_card;
    let mut tries = Vec::new();
    if fp.dp_attention.is_some() && devices > 1 {
        let dp = Placement {
            layout: Layout { tp: 1, pp: 1 },
            dp_attention: true,
            ..*base
        };
        tries.push((
            dp,
            format!(
                "fits one node with data-parallel attention: vLLM --data-parallel-size {devices} --enable-expert-parallel (each GPU keeps the attention weights and only its own sequences' latent cache; tensor parallel would hold the whole cache on every GPU)"
            ),
        ));
        tries.push((
            Placement {
                utilisation: RAISED_UTILISATION,
                ..dp
            },
            format!(
                "fits one node with data-parallel attention (vLLM --data-parallel-size {devices} --enable-expert-parallel) and --gpu-memory-utilization {RAISED_UTILISATION}"
            ),
        ));
    }
    tries.push((
        Placement {
            utilisation: RAISED_UTILISATION,
            ..*base
        },
        format!(
            "fits one node with --gpu-memory-utilization {RAISED_UTILISATION} (the default {UTILISATION} misses by a small margin)"
        ),
    ));
    tries.into_iter().find_map(|(p, note)| {
        let e = evaluate(fp, gpu, &p);
        e.fits.then_some((p, e, note))
    })
}

/// The option for `gpu`: the smallest count in [`COUNTS`] that fits with a loadable layout
/// (one full node with a named setting before two nodes), else the largest count tried with
/// `fits = false`.
pub fn option_for(fp: &Footprint, gpu: &GpuSpec) -> SizingOption {
    let mut chosen: Option<(Placement, Evaluation, Option<String>)> = None;
    for count in COUNTS {
        let Some(p) = default_placement(fp, gpu, count) else {
            continue;
        };
        let e = evaluate(fp, gpu, &p);
        let fits = e.fits;
        chosen = Some((p, e, None));
        if fits {
            break;
        }
        if count == gpu.gpus_per_node {
            if let Some((p, e, note)) = one_node_setting(fp, gpu, &p) {
                chosen = Some((p, e, Some(note)));
                break;
            }
        }
    }
    let Some((p, e, setting)) = chosen else {
        return SizingOption {
            gpu: gpu.model.clone(),
            memory_gib: round2(gpu.memory_gib),
            count: 1,
            fits: false,
            headroom_pct: 0.0,
            decode_tokens_per_s_max: 0.0,
            interconnect_note: None,
            tensor_parallel: 1,
            pipeline_parallel: 1,
            load_note: Some("no tensor/pipeline layout can split this model over these GPUs".into()),
            price: None,
        };
    };
    let load_note = match (setting, fp8_blocks_note(fp, &p)) {
        (Some(s), Some(n)) => Some(format!("{s}; {n}")),
        (s, n) => s.or(n),
    };
    SizingOption {
        gpu: gpu.model.clone(),
        memory_gib: round2(gpu.memory_gib),
        count: p.count,
        fits: e.fits,
        headroom_pct: round2(e.headroom_pct),
        decode_tokens_per_s_max: round1(e.decode_tokens_per_s),
        interconnect_note: interconnect_note(fp, gpu, &p),
        tensor_parallel: p.layout.tp,
        pipeline_parallel: p.layout.pp,
        load_note,
        price: None,
    }
}

/// vLLM refuses to split an fp8 checkpoint's experts over tensor parallelism when a shard is not a
/// whole number of blocks ("… is not divisible by weight quantization block_n = 128": Qwen3's
/// 1536-wide experts over TP 8 are 192 wide); expert parallelism keeps each expert whole.
fn fp8_blocks_note(fp: &Footprint, p: &Placement) -> Option<String> {
    let (width, block) = fp.shape.fp8_expert_blocks?;
    let tp = p.layout.tp;
    if fp.decode.is_none()
        || p.dp_attention
        || tp <= 1
        || (width.is_multiple_of(tp) && (width / tp).is_multiple_of(block.max(1)))
    {
        return None;
    }
    Some(format!(
        "serve with --enable-expert-parallel: tensor parallel {tp} would cut each expert's {width}-wide MLP of this fp8 checkpoint into {}-wide shards, which its {block}-wide blocks do not divide, and vLLM refuses to load it",
        width / tp
    ))
}

/// Fitting options first, by memory rented (count × memory per card) ascending, then count,
/// then name; then the rest, closest to fitting (largest headroom) first, then name.
pub fn order(a: (&SizingOption, &GpuSpec), b: (&SizingOption, &GpuSpec)) -> Ordering {
    let rented = |(o, g): (&SizingOption, &GpuSpec)| f64::from(o.count) * g.memory_bytes();
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
