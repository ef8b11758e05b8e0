-- Host audits, noise probes, interrupt profiles and interrupt samples taken during runs
-- (written by `lowtail host audit`, `lowtail noise` and `lowtail run`).
CREATE SEQUENCE IF NOT EXISTS audit_id_seq START 1;
CREATE TABLE IF NOT EXISTS host_audits (
    audit_id     BIGINT PRIMARY KEY DEFAULT nextval('audit_id_seq'),
    created_at   TIMESTAMP NOT NULL DEFAULT current_timestamp,
    host         VARCHAR NOT NULL,     -- hostname, or the sysroot directory audited
    kernel       VARCHAR NOT NULL,
    cmdline      VARCHAR NOT NULL,
    plan         JSON NOT NULL,        -- {"housekeeping": [...], "isolated": [...], "source": ...}
    score        INTEGER NOT NULL,     -- 0..100: passes plus half the warnings over applicable checks
    passed       INTEGER NOT NULL,
    warned       INTEGER NOT NULL,
    failed       INTEGER NOT NULL,
    skipped      INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS host_audit_checks (
    audit_id     BIGINT NOT NULL,
    position     INTEGER NOT NULL,
    check_id     VARCHAR NOT NULL,
    category     VARCHAR NOT NULL,     -- boot | runtime | kernel | hardware
    status       VARCHAR NOT NULL,     -- pass | warn | fail | skip
    observed     VARCHAR NOT NULL,
    expected     VARCHAR NOT NULL,
    why          VARCHAR NOT NULL,
    remedy       VARCHAR NOT NULL
);

CREATE SEQUENCE IF NOT EXISTS noise_run_id_seq START 1;
CREATE TABLE IF NOT EXISTS noise_runs (
    noise_run_id        BIGINT PRIMARY KEY DEFAULT nextval('noise_run_id_seq'),
    created_at          TIMESTAMP NOT NULL DEFAULT current_timestamp,
    label               VARCHAR,
    host                JSON NOT NULL,     -- kernel, command line, CPU model
    cpus                JSON NOT NULL,     -- probed CPUs
    housekeeping_cpu    INTEGER,
    duration_ns         BIGINT NOT NULL,
    threshold_ns        BIGINT NOT NULL,
    sample_interval_ns  BIGINT,            -- NULL: interrupts read before and after only
    sampler             JSON,              -- reads and read cost of the periodic sampler
    energy              JSON NOT NULL      -- RAPL figures or {"available": false, "reason": ...}
);
-- One row per probed core: the gap figures (percentiles exact, nearest rank, over the gaps).
CREATE TABLE IF NOT EXISTS noise_cores (
    noise_run_id     BIGINT NOT NULL,
    cpu              INTEGER NOT NULL,
    start_ns         BIGINT NOT NULL,      -- CLOCK_REALTIME
    duration_ns      BIGINT NOT NULL,
    loops            BIGINT NOT NULL,
    min_loop_ns      BIGINT NOT NULL,
    gaps             BIGINT NOT NULL,
    rate_hz          DOUBLE NOT NULL,
    noise_ns_per_s   DOUBLE NOT NULL,      -- time the core was taken away, per second
    max_ns           BIGINT NOT NULL,
    p50_ns           BIGINT,
    p90_ns           BIGINT,
    p99_ns           BIGINT,
    p99_9_ns         BIGINT,
    d_sum_ns_per_s   DOUBLE,               -- Σ rate × typical duration over the interrupt kinds
    attribution      JSON                  -- method, intervals used, share of gap time explained
);
CREATE TABLE IF NOT EXISTS noise_histograms (
    noise_run_id BIGINT NOT NULL, cpu INTEGER NOT NULL, lo_ns BIGINT NOT NULL, hi_ns BIGINT NOT NULL, count BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS noise_largest_gaps (
    noise_run_id BIGINT NOT NULL, cpu INTEGER NOT NULL, t_ns BIGINT NOT NULL, gap_ns BIGINT NOT NULL
);
-- The interrupt profile of a core: what the overload model's d_Σ = Σ rate × duration needs.
CREATE TABLE IF NOT EXISTS interrupt_profiles (
    noise_run_id BIGINT NOT NULL,
    cpu          INTEGER NOT NULL,
    kind         VARCHAR NOT NULL,         -- LOC, IWI, TLB, ... or "<irq>:<device>"
    description  VARCHAR NOT NULL,
    count        BIGINT NOT NULL,
    rate_hz      DOUBLE NOT NULL,
    typical_ns   DOUBLE                    -- NULL when the gaps could not be attributed
);

-- Per-CPU interrupt increments sampled during a run (`lowtail run`), non-zero ones only:
-- `delta` interrupts of `kind` on `cpu` in the `interval_ns` before `t_ns` (CLOCK_REALTIME).
CREATE TABLE IF NOT EXISTS run_interrupts (
    run_id       BIGINT NOT NULL,
    t_ns         BIGINT NOT NULL,
    cpu          INTEGER NOT NULL,
    kind         VARCHAR NOT NULL,
    delta        BIGINT NOT NULL,
    interval_ns  BIGINT NOT NULL
);
