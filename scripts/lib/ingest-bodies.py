"""The request bodies of the ingest load scripts (bench-ingest.sh, profile-ingest.sh).

    python3 scripts/lib/ingest-bodies.py WORK [VLLM_FIXTURE]

Writes into WORK: metrics.json, a ~2 KB `metrics` envelope of 55 metrics; batch.json, 100 such
envelopes for `evidence/batch`; and with a vLLM /metrics fixture, scrape.txt, ~200 KB built from it
(the fixture's samples repeated under distinct model names).
"""
import json
import sys

work = sys.argv[1]
metrics = {}
i = 0
while len(json.dumps({"kind": "metrics", "stage": 3, "data": {"metrics": metrics}})) < 2048 - 40:
    metrics[f"bench.metric_{i:03d}_value"] = round(1000.0 / (i + 1), 6)
    i += 1
body = json.dumps({"kind": "metrics", "stage": 3, "data": {"metrics": metrics}})
open(f"{work}/metrics.json", "w").write(body)
open(f"{work}/batch.json", "w").write(json.dumps({"items": [json.loads(body)] * 100}))
line = f"bodies: metrics envelope {len(body)} B"
if len(sys.argv) > 2:
    src = open(sys.argv[2]).read().splitlines()
    out, copy = [l for l in src if l.startswith("#")], 0
    samples = [l for l in src if l and not l.startswith("#")]
    size = lambda: sum(len(l) + 1 for l in out)
    while size() < 200 * 1024:
        for l in samples:
            out.append(l.replace('model_name="', f'model_name="m{copy}-', 1))
        copy += 1
    open(f"{work}/scrape.txt", "w").write("\n".join(out) + "\n")
    line += f", vLLM scrape {size()} B"
print(line)
