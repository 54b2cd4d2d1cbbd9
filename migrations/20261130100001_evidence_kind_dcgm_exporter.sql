-- Evidence of the new kind `dcgm-exporter` (Prometheus text scraped from NVIDIA dcgm-exporter).
-- The check is replaced by name; NOT VALID then VALIDATE keeps the table writable while the
-- existing rows (all of the old kinds) are checked.
ALTER TABLE evidence DROP CONSTRAINT evidence_kind_check;
ALTER TABLE evidence ADD CONSTRAINT evidence_kind_check CHECK (kind IN ('nvidia-smi-list', 'nvidia-smi-topo',
    'nvidia-smi-query', 'dcgm-discovery', 'dcgm-diag', 'dcgm-exporter', 'vllm-metrics', 'vllm-log', 'bench-serving',
    'nccl-tests', 'checkpoint-restore', 'probe', 'metrics', 'log')) NOT VALID;
ALTER TABLE evidence VALIDATE CONSTRAINT evidence_kind_check;
