-- Each analysis's flows (analyze/flows.py): one row per flow of PRE, its packets and its
-- latency figures, as exact as the pooled ones (the per-flow counts add up to the analysis's).
-- `flow` is the index the matched series' `flow` column holds.
CREATE TABLE IF NOT EXISTS analysis_flows (
    analysis_id      BIGINT NOT NULL,
    flow             INTEGER NOT NULL,
    flow_label       VARCHAR NOT NULL,  -- "10.0.0.1:49152 > 10.0.0.2:53", "src port 49152", "other flows"
    sent             BIGINT NOT NULL,
    received         BIGINT NOT NULL,
    lost             BIGINT NOT NULL,
    negative         BIGINT NOT NULL,
    samples          BIGINT NOT NULL,
    lat_min_ns       BIGINT,
    lat_mean_ns      DOUBLE,
    lat_stddev_ns    DOUBLE,
    lat_p50_ns       BIGINT,
    lat_p90_ns       BIGINT,
    lat_p99_ns       BIGINT,
    lat_p99_9_ns     BIGINT,
    lat_p99_99_ns    BIGINT,
    lat_p99_999_ns   BIGINT,
    lat_p99_9999_ns  BIGINT,
    lat_max_ns       BIGINT,
    PRIMARY KEY (analysis_id, flow)
);
-- What told the flows apart, per analysis: "5tuple", "src-port", "none".
CREATE TABLE IF NOT EXISTS analysis_flow_keys (
    analysis_id  BIGINT PRIMARY KEY,
    flow_key     VARCHAR NOT NULL,
    overflowed   BOOLEAN NOT NULL       -- more flows than an analysis tells apart: the last holds the rest
);
