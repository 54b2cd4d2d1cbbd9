"""Helpers of scripts/bench-loadgen.sh for its clients (rentcheck loadgen, AIPerf, GuideLLM).

    python3 scripts/lib/loadgen-clients.py tokenizer DIR
        (with a Python that has `tokenizers` and `transformers`, e.g. a peer's virtual environment)
        writes a small byte-level BPE tokenizer to DIR, built offline: both peers need one to make
        synthetic prompts of a given token count, and no model hub is reachable.
    python3 scripts/lib/loadgen-clients.py usage PID OUT
        samples PID and all its descendants every 0.2 s until PID ends, then writes OUT:
        {"cpu_s": user + system seconds summed over every process seen (the last 0.2 s of each
        may be missed), "peak_pss_mib": the largest sum of the processes' PSS at one sample,
        "processes": how many were seen}. GNU time counts only children that were waited for and
        reports the largest single process's RSS; this sees worker processes however they end and
        sums their memory without counting shared pages twice.
    python3 scripts/lib/loadgen-clients.py row CLIENT ROUND RATE N OUTPUT SERVER_LOG TIME USAGE
        prints one table row: OUTPUT is the client's result (rentcheck's result JSON, AIPerf's
        artifact directory or the directory of GuideLLM's benchmarks.json), SERVER_LOG the server's /log answer,
        TIME GNU time's "%U %S %M", USAGE what `usage` wrote.
    python3 scripts/lib/loadgen-clients.py medians ROWS
        prints, per client and rate, the median over the rounds of each column of the rows in ROWS
        (lines as `row` prints them).
"""
import glob
import json
import os
import sys
import time


def tokenizer(out):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    words = (
        "the of and to in is it you that he was for on are as with his they at be this have from or "
        "one had by word but not what all were we when your can said there use an each which she do "
        "how their if will up other about out many then them these so some her would make like him"
    ).split()
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    # The byte alphabet makes every text encodable; the common words become one token each.
    trainer = trainers.BpeTrainer(
        vocab_size=512,
        special_tokens=["<|endoftext|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator([" ".join(words)] * 50, trainer=trainer)
    end = "<|endoftext|>"
    PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token=end, bos_token=end, unk_token=end, model_max_length=1 << 20
    ).save_pretrained(out)


def usage(root, out):
    tick = os.sysconf("SC_CLK_TCK")
    cpu_ticks = {}
    peak_kib = 0
    while os.path.exists(f"/proc/{root}"):
        children, ticks = {}, {}
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            try:
                stat = open(f"/proc/{name}/stat").read()
            except OSError:
                continue
            fields = stat[stat.rfind(")") + 2 :].split()  # from field 3 (state) on
            children.setdefault(int(fields[1]), []).append(int(name))
            ticks[int(name)] = int(fields[11]) + int(fields[12])  # utime + stime
        tree, todo = [], [root]
        while todo:
            pid = todo.pop()
            tree.append(pid)
            todo.extend(children.get(pid, []))
        pss_kib = 0
        for pid in tree:
            if pid in ticks:
                cpu_ticks[pid] = ticks[pid]
            try:
                for line in open(f"/proc/{pid}/smaps_rollup"):
                    if line.startswith("Pss:"):
                        pss_kib += int(line.split()[1])
                        break
            except OSError:
                pass
        peak_kib = max(peak_kib, pss_kib)
        time.sleep(0.2)
    json.dump(
        {"cpu_s": sum(cpu_ticks.values()) / tick, "peak_pss_mib": peak_kib / 1024, "processes": len(cpu_ticks)},
        open(out, "w"),
    )


def pct(xs, p):
    # numpy's linear percentile, as the generator and AIPerf compute theirs
    xs = sorted(xs)
    if not xs:
        return float("nan")
    k = p / 100 * (len(xs) - 1)
    lo, hi = int(k), min(int(k) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def most_open(spans):
    """The most requests in flight at once, from (start, end) pairs."""
    events = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans])
    now = peak = 0
    for _, d in events:
        now += d
        peak = max(peak, now)
    return peak


def read_rentcheck(path):
    r = json.load(open(path))
    sends = r["start_times"]
    return {
        "sends": sends,
        "completed": r["completed"],
        "failed": r["failed"],
        "open": r["max_concurrent_requests"],
        "p50": r["median_ttft_ms"],
        "p99": r["p99_ttft_ms"],
    }


def read_aiperf(artifacts):
    # Per request (profile_export.jsonl): metadata.request_start_ns / request_end_ns, and
    # metrics.time_to_first_token in ms; the summary (profile_export_aiperf.json) has its percentiles.
    records = [json.loads(line) for f in glob.glob(f"{artifacts}/**/profile_export.jsonl", recursive=True)
               for line in open(f) if line.strip()]
    summary_files = glob.glob(f"{artifacts}/**/profile_export_aiperf.json", recursive=True)
    summary = json.load(open(summary_files[0])) if summary_files else {}
    sends, spans, ttfts, failed = [], [], [], 0
    for rec in records:
        meta = rec.get("metadata", {})
        start = meta.get("request_start_ns")
        if start is not None:
            sends.append(start / 1e9)
            end = meta.get("request_end_ns")
            if end is not None:
                spans.append((start / 1e9, end / 1e9))
        ttft = rec.get("metrics", {}).get("time_to_first_token")
        if rec.get("error") or ttft is None:
            failed += 1
        else:
            ttfts.append(ttft["value"] if isinstance(ttft, dict) else ttft)
    stat = summary.get("time_to_first_token") or {}
    return {
        "sends": sends,
        "completed": len(ttfts),
        "failed": failed,
        "open": most_open(spans),
        "p50": stat.get("p50", pct(ttfts, 50)),
        "p99": stat.get("p99", pct(ttfts, 99)),
    }


def read_guidellm(directory):
    # benchmarks[0].requests.{successful,errored,incomplete}[].info.timings.{request_start,
    # request_end} (epoch seconds) and time_to_first_token_ms; metrics.time_to_first_token_ms.
    # successful.{median, percentiles.p99} are the figures it reports.
    report = json.load(open(f"{directory}/benchmarks.json"))
    bench = report["benchmarks"][0]
    reqs = bench["requests"]
    sends, spans = [], []
    for kind in ("successful", "errored", "incomplete"):
        for rq in reqs.get(kind) or []:
            t = rq.get("info", {}).get("timings", {}) or rq.get("timings", {})
            start = t.get("request_start") or t.get("resolve_start")
            if start:
                sends.append(start)
                if t.get("request_end"):
                    spans.append((start, t["request_end"]))
    ttft = bench["metrics"]["time_to_first_token_ms"]["successful"]
    return {
        "sends": sends,
        "completed": len(reqs.get("successful") or []),
        "failed": len(reqs.get("errored") or []) + len(reqs.get("incomplete") or []),
        "open": most_open(spans),
        "p50": ttft["median"],
        "p99": ttft["percentiles"]["p99"],
    }


def row(client, round_, rate, n, output, server_log, timing, usage_file):
    try:
        r = {"rentcheck": read_rentcheck, "aiperf": read_aiperf, "guidellm": read_guidellm}[client](output)
    except (OSError, ValueError, KeyError, IndexError, TypeError) as e:
        r = {"sends": [], "completed": 0, "failed": 0, "open": 0, "p50": float("nan"), "p99": float("nan"),
             "why": f"no result ({type(e).__name__}: {e})"}
    log = json.load(open(server_log))
    user, system, rss_kib = open(timing).read().split()[-3:]
    use = json.load(open(usage_file))
    sends = sorted(r["sends"])
    # Requests sent per second over the span of the sends: the rate that was achieved.
    achieved = (len(sends) - 1) / (sends[-1] - sends[0]) if len(sends) > 1 and sends[-1] > sends[0] else float("nan")
    cpu = float(user) + float(system)

    def per_1k(seconds):
        return seconds / max(len(sends), 1) * 1000

    print(
        f'{client:<9} {round_:<5} {float(rate):7.1f} {achieved:8.1f} {len(sends):6d} {r["completed"]:6d} '
        f'{r["failed"]:6d} {r["open"]:5d} {r["p50"]:8.2f} {r["p50"] - pct(log, 50):8.2f} '
        f'{r["p99"]:8.2f} {r["p99"] - pct(log, 99):8.2f} {per_1k(cpu):8.3f} {per_1k(use["cpu_s"]):8.3f} '
        f'{int(rss_kib) / 1024:7.1f} {use["peak_pss_mib"]:7.1f} {use["processes"]:5d}'
        + (f'  {r["why"]}' if "why" in r else ""),
        flush=True,
    )


def medians(rows_file):
    import statistics

    runs = {}
    for line in open(rows_file):
        f = line.split()
        if len(f) < 17 or f[0].startswith("#") or f[0] == "client":
            continue
        runs.setdefault((f[0], float(f[2])), []).append([float(x) for x in f[2:17]])
    print("medians over the rounds (the round column: how many):")
    for (client, rate), rows in sorted(runs.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        m = [statistics.median(col) for col in zip(*rows)]
        print(
            f"{client:<9} {len(rows):<5} {m[0]:7.1f} {m[1]:8.1f} {m[2]:6.0f} {m[3]:6.0f} {m[4]:6.0f} {m[5]:5.0f} "
            f"{m[6]:8.2f} {m[7]:8.2f} {m[8]:8.2f} {m[9]:8.2f} {m[10]:8.3f} {m[11]:8.3f} {m[12]:7.1f} "
            f"{m[13]:7.1f} {m[14]:5.0f}"
        )


if __name__ == "__main__":
    command, args = sys.argv[1], sys.argv[2:]
    if command == "tokenizer":
        tokenizer(*args)
    elif command == "usage":
        usage(int(args[0]), args[1])
    elif command == "row":
        row(*args)
    elif command == "medians":
        medians(*args)
    else:
        sys.exit(f"unknown command {command!r}")
