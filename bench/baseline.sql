-- The baseline's analysis: what `lowtail analyze` computes, in SQL, the way the seed
-- studies did it (rows of id and timestamp per capture, matched with a join; loss,
-- percentiles, histograms, worst events and rates as SQL statements).
--
-- Input: tables pre(id bigint, ts bigint) and post(id bigint, ts bigint), timestamps in
-- integer nanoseconds. psql variables: trim_ns, horizon_ns, worst_n, bins,
-- percentiles (a float8[] literal: the headline ones, then the levels of the percentile
-- curve). Prints one JSON document.
--
-- Semantics follow lowtail's matcher: PRE packets in the first trim_ns after the first
-- PRE packet are cut together with their POST copies; a PRE packet is received when a
-- POST copy with its id arrives within ±horizon_ns (the first copy gives the latency,
-- later ones are duplicates); a POST copy earlier than its PRE packet is received but
-- counted as negative and left out of the latency figures. PRE ids are assumed unique
-- (true for generated traffic), and reordering is counted in POST arrival order (lowtail
-- notes a copy that arrived before its PRE packet when that packet is sent).

\set ON_ERROR_STOP on

CREATE UNLOGGED TABLE bounds AS
SELECT min(ts) AS start_ts, max(ts) AS last_ts, min(ts) + :trim_ns AS steady_from FROM pre;

-- Every POST id once: its first arrival and how many copies arrived.
CREATE UNLOGGED TABLE post_by_id AS
SELECT id, min(ts) AS ts, count(*) AS copies FROM post GROUP BY id;

-- The join: every PRE packet with its POST arrival, if one came within the horizon.
CREATE UNLOGGED TABLE matched AS
SELECT p.id, p.ts AS pre_ts,
       CASE WHEN abs(q.ts - p.ts) <= :horizon_ns THEN q.ts END AS post_ts,
       CASE WHEN abs(q.ts - p.ts) <= :horizon_ns THEN q.copies ELSE 0 END AS copies,
       p.ts < b.steady_from AS trimmed
FROM pre p CROSS JOIN bounds b LEFT JOIN post_by_id q ON q.id = p.id;

CREATE UNLOGGED TABLE latencies AS
SELECT id, pre_ts, post_ts, post_ts - pre_ts AS latency_ns
FROM matched WHERE NOT trimmed AND post_ts >= pre_ts;

-- Value counts of the three distributions that get histograms.
CREATE UNLOGGED TABLE distributions AS
SELECT 'latency' AS kind, latency_ns AS v, count(*) AS c FROM latencies GROUP BY latency_ns
UNION ALL
SELECT kind, gap, count(*) FROM (
    SELECT 'jitter_pre' AS kind, ts - lag(ts) OVER (ORDER BY ts) AS gap
    FROM pre, bounds WHERE ts >= steady_from
    UNION ALL
    SELECT 'jitter_post', ts - lag(ts) OVER (ORDER BY ts)
    FROM post, bounds WHERE ts >= steady_from
) gaps WHERE gap IS NOT NULL GROUP BY kind, gap;

-- lowtail's histogram bins: linear bins of a 1-2-5 width over [min, p99.9] (about
-- :bins of them), ten logarithmic bins per decade above; only non-empty bins.
CREATE UNLOGGED TABLE histograms AS
WITH ranked AS (
    SELECT kind, v, sum(c) OVER (PARTITION BY kind ORDER BY v) AS running,
           sum(c) OVER (PARTITION BY kind) AS n
    FROM distributions
), body AS (
    SELECT kind, min(v) AS min_v,
           min(v) FILTER (WHERE running >= greatest(1, least(n, ceil(0.999::float8 * n)))) AS body_end
    FROM ranked GROUP BY kind
), raw AS (
    SELECT kind, min_v, body_end,
           greatest((body_end - min_v)::float8 / :bins, 1.0::float8) AS raw_width
    FROM body
), nice AS (
    SELECT kind, min_v, body_end, raw_width, power(10::float8, floor(log(raw_width))) AS base FROM raw
), widths AS (
    SELECT kind, min_v, body_end,
           greatest(1, round(CASE WHEN base >= raw_width THEN base
                                  WHEN 2 * base >= raw_width THEN 2 * base
                                  WHEN 5 * base >= raw_width THEN 5 * base
                                  ELSE 10 * base END))::bigint AS width
    FROM nice
), grid AS (
    SELECT kind, width, floor(min_v::numeric / width)::bigint * width AS start FROM widths
), layout AS (
    SELECT w.kind, g.width, g.start,
           g.start + g.width * ((w.body_end - g.start) / g.width + 1) AS linear_end
    FROM widths w JOIN grid g USING (kind)
), decades AS (
    SELECT d.kind, d.v, d.c, l.width, l.start, l.linear_end,
           floor(log(greatest(d.v, 1)::float8) * 10) AS k
    FROM distributions d JOIN layout l USING (kind)
), log_edges AS (
    SELECT kind, v, c, width, start, linear_end,
           greatest(ceil(power(10::float8, k / 10))::bigint, linear_end) AS lo,
           ceil(power(10::float8, (k + 1) / 10))::bigint AS hi_raw
    FROM decades
), edges AS (
    SELECT kind, c,
           CASE WHEN v < linear_end THEN start + floor((v - start)::numeric / width)::bigint * width
                WHEN v >= greatest(hi_raw, lo + 1) THEN v
                ELSE least(lo, v) END AS lo_ns,
           CASE WHEN v < linear_end THEN start + floor((v - start)::numeric / width)::bigint * width + width
                WHEN v >= greatest(hi_raw, lo + 1) THEN v + 1
                ELSE greatest(hi_raw, lo + 1) END AS hi_ns
    FROM log_edges
)
SELECT kind, lo_ns, hi_ns, sum(c)::bigint AS count FROM edges GROUP BY kind, lo_ns, hi_ns;

-- Packets per second since the first PRE packet, empty seconds included.
CREATE UNLOGGED TABLE rates AS
WITH counted AS (
    SELECT 'pre' AS side, (ts - start_ts) / 1000000000 AS second, count(*) AS packets
    FROM pre, bounds GROUP BY 2
    UNION ALL
    SELECT 'post', (ts - start_ts) / 1000000000, count(*)
    FROM post, bounds WHERE ts >= start_ts AND ts < start_ts + 86400 * 1000000000::bigint GROUP BY 2
)
SELECT s.side, s.second, coalesce(c.packets, 0) AS packets
FROM (SELECT side, generate_series(0, max(second)) AS second FROM counted GROUP BY side) s
LEFT JOIN counted c USING (side, second);

SELECT json_build_object(
    'sent', (SELECT count(*) FROM matched WHERE NOT trimmed),
    'received', (SELECT count(post_ts) FROM matched WHERE NOT trimmed),
    'lost', (SELECT count(*) - count(post_ts) FROM matched WHERE NOT trimmed),
    'duplicates', (SELECT coalesce(sum(copies - 1), 0) FROM matched WHERE NOT trimmed AND post_ts IS NOT NULL),
    'negative', (SELECT count(*) FROM matched WHERE NOT trimmed AND post_ts < pre_ts),
    -- RFC 4737: an arrival is reordered when a later-sent packet arrived before it.
    'reordered', (SELECT count(*) FROM (
        SELECT pre_ts < max(pre_ts) OVER (ORDER BY post_ts, pre_ts
                                          ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS late
        FROM matched WHERE NOT trimmed AND post_ts IS NOT NULL) arrivals WHERE late),
    'trimmed_pre', (SELECT count(*) FROM matched WHERE trimmed),
    'trimmed_post', (SELECT coalesce(sum(copies), 0) FROM matched WHERE trimmed),
    'unmatched', (SELECT count(*) FROM post) - (SELECT coalesce(sum(copies), 0) FROM matched),
    'start_ts_ns', (SELECT start_ts FROM bounds),
    'duration_ns', (SELECT greatest(last_ts - start_ts - :trim_ns, 0) FROM bounds),
    'latency_ns', (SELECT json_build_object(
        'samples', count(*), 'min', min(latency_ns), 'max', max(latency_ns),
        'mean', avg(latency_ns)::float8, 'stddev', stddev_pop(latency_ns)::float8,
        'percentiles', percentile_disc(:'percentiles'::float8[]) WITHIN GROUP (ORDER BY latency_ns))
        FROM latencies),
    'worst', (SELECT coalesce(json_agg(json_build_object('latency_ns', latency_ns, 'pre_ts_ns', pre_ts, 'id', id)
                                       ORDER BY pre_ts, id), '[]')
              FROM (SELECT latency_ns, pre_ts, id FROM latencies
                    ORDER BY latency_ns DESC, pre_ts, id LIMIT :worst_n) w),
    'histograms', (SELECT json_object_agg(kind, bins) FROM (
        SELECT kind, json_agg(json_build_object('lo_ns', lo_ns, 'hi_ns', hi_ns, 'count', count) ORDER BY lo_ns) AS bins
        FROM histograms GROUP BY kind) h),
    'per_second', (SELECT json_object_agg(side, counts) FROM (
        SELECT side, json_agg(packets ORDER BY second) AS counts FROM rates GROUP BY side) r)
);
