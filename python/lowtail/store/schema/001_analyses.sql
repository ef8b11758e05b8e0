-- One row per analysed capture pair, with its headline figures.
CREATE SEQUENCE IF NOT EXISTS analysis_id_seq START 1;
CREATE TABLE IF NOT EXISTS analyses (
    analysis_id      BIGINT PRIMARY KEY DEFAULT nextval('analysis_id_seq'),
    created_at       TIMESTAMP NOT NULL DEFAULT current_timestamp,
    lowtail_version  VARCHAR NOT NULL,
    label            VARCHAR,
    pre_path         VARCHAR NOT NULL,
    post_path        VARCHAR NOT NULL,
    options          JSON NOT NULL,
    sent             BIGINT NOT NULL,
    received         BIGINT NOT NULL,
    lost             BIGINT NOT NULL,
    duplicates       BIGINT NOT NULL,
    reordered        BIGINT NOT NULL,
    foreign_frames   BIGINT NOT NULL,
    negative         BIGINT NOT NULL,
    unmatched        BIGINT NOT NULL,
    trim_ns          BIGINT NOT NULL,
    start_ts_ns      BIGINT,
    duration_ns      BIGINT NOT NULL,
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
    partial          BOOLEAN NOT NULL,
    warnings         JSON NOT NULL,
    series_path      VARCHAR,
    hgrm             VARCHAR NOT NULL,
    inputs           JSON NOT NULL,     -- per side: format, compression, bytes, frames, foreign kinds
    figures          JSON NOT NULL      -- the full analysis document (minus the bulky arrays below)
);

-- HDR percentile distribution (the rows of the .hgrm file, values in ns).
CREATE TABLE IF NOT EXISTS analysis_percentiles (
    analysis_id  BIGINT NOT NULL,
    percentile   DOUBLE NOT NULL,
    value_ns     BIGINT NOT NULL,
    total_count  BIGINT NOT NULL
);

-- Non-empty histogram bins: kind = latency | jitter_pre | jitter_post.
CREATE TABLE IF NOT EXISTS analysis_histograms (
    analysis_id  BIGINT NOT NULL,
    kind         VARCHAR NOT NULL,
    lo_ns        BIGINT NOT NULL,
    hi_ns        BIGINT NOT NULL,
    count        BIGINT NOT NULL
);

-- The N worst latencies with their send time.
CREATE TABLE IF NOT EXISTS analysis_worst (
    analysis_id  BIGINT NOT NULL,
    pre_ts_ns    BIGINT NOT NULL,
    latency_ns   BIGINT NOT NULL,
    packet_id    UBIGINT NOT NULL
);

-- Packets per second since the first PRE packet, side = pre | post.
CREATE TABLE IF NOT EXISTS analysis_rates (
    analysis_id  BIGINT NOT NULL,
    side         VARCHAR NOT NULL,
    second       INTEGER NOT NULL,
    packets      BIGINT NOT NULL
);
