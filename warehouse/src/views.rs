//! Saved views: the common questions, registered under these names in every session
//! (`perfsweep warehouse query LOCATION "SELECT * FROM regressions"`). Plain SQL over the
//! tables, so any engine can define the same views (docs/warehouse.md).

/// How much worse (percent, in the metric's own direction) a case's latest run must be
/// than its previous one to be listed in `regressions`.
pub const REGRESSION_PERCENT: f64 = 5.0;

pub const VIEWS: &[(&str, &str)] = &[
    ("latest_per_case", LATEST_PER_CASE),
    ("trend_per_case", TREND_PER_CASE),
    ("serving_trend", SERVING_TREND),
    ("regressions", REGRESSIONS),
    ("worst_nodes", WORST_NODES),
    ("training_scaling", TRAINING_SCALING),
];

/// Each case's most recent successful run.
const LATEST_PER_CASE: &str = "
SELECT run_key, run_id, case_key, kind, name, set_name, repetition, started_at,
       headline_metric, headline_value, headline_better, doubtful, doubt_flags,
       workload_spec_digest, artifact_manifest_digest
FROM (
  SELECT r.*, row_number() OVER (PARTITION BY case_key ORDER BY started_at DESC, run_key) AS recency
  FROM benchmark_run_fact r WHERE status = 'succeeded'
) latest
WHERE recency = 1";

/// Per case and day: runs, mean, spread and CV of the headline metric.
const TREND_PER_CASE: &str = "
SELECT case_key, kind, headline_metric, date, count(*) AS runs,
       avg(headline_value) AS mean_value, min(headline_value) AS min_value,
       max(headline_value) AS max_value,
       stddev(headline_value) / nullif(avg(headline_value), 0) * 100 AS cv_percent,
       string_agg(run_key, ',') AS run_keys
FROM benchmark_run_fact
WHERE status = 'succeeded' AND headline_value IS NOT NULL
GROUP BY case_key, kind, headline_metric, date";

/// Per case, workload point, concurrency point and day: the serving latencies.
const SERVING_TREND: &str = "
SELECT case_key, scenario, concurrency, date, count(*) AS runs,
       avg(ttft_p99_ms) AS ttft_p99_ms, avg(tpot_p99_ms) AS tpot_p99_ms,
       avg(output_tokens_per_second) AS output_tokens_per_second,
       string_agg(run_key, ',') AS run_keys
FROM serving_outcome_fact
GROUP BY case_key, scenario, concurrency, date";

/// Cases whose latest run (run id) is worse than the one before by more than
/// REGRESSION_PERCENT, in the headline metric's own direction.
const REGRESSIONS: &str = "
WITH per_run AS (
  SELECT case_key, kind, headline_metric, headline_better, run_id,
         min(started_at) AS started, avg(headline_value) AS value, count(*) AS runs,
         string_agg(run_key, ',') AS run_keys
  FROM benchmark_run_fact
  WHERE status = 'succeeded' AND headline_value IS NOT NULL
  GROUP BY case_key, kind, headline_metric, headline_better, run_id
), ranked AS (
  SELECT *, row_number() OVER (PARTITION BY case_key, headline_metric ORDER BY started DESC, run_id) AS recency
  FROM per_run
), compared AS (
  SELECT c.case_key, c.kind, c.headline_metric, c.headline_better,
         b.run_id AS baseline_run_id, c.run_id AS candidate_run_id,
         b.value AS baseline_value, c.value AS candidate_value,
         CASE WHEN c.headline_better = 'higher' THEN (b.value - c.value) / b.value
              ELSE (c.value - b.value) / b.value END * 100 AS worse_percent,
         c.run_keys AS run_keys
  FROM ranked c JOIN ranked b
    ON c.case_key = b.case_key AND c.headline_metric = b.headline_metric
  WHERE c.recency = 1 AND b.recency = 2 AND b.value <> 0
)
SELECT * FROM compared WHERE worse_percent > 5.0";

/// Per node of a node-pair (or single-node) sweep, per run and metric: its results
/// relative to the run's median for that metric (1 = median, below 1 = worse, in the
/// metric's own direction), worst first.
const WORST_NODES: &str = "
WITH med AS (
  SELECT run_id, metric, median(value) AS median_value
  FROM system_outcome_fact WHERE scope IN ('pair', 'node')
  GROUP BY run_id, metric
), scored AS (
  SELECT s.run_id, s.run_key, s.metric, s.node_a, s.node_b,
         CASE WHEN s.better = 'higher' THEN s.value / m.median_value
              ELSE m.median_value / s.value END AS score
  FROM system_outcome_fact s JOIN med m ON s.run_id = m.run_id AND s.metric = m.metric
  WHERE s.scope IN ('pair', 'node') AND m.median_value > 0 AND s.value > 0
), per_node AS (
  SELECT run_id, run_key, metric, node_a AS node, score FROM scored
  UNION ALL
  SELECT run_id, run_key, metric, node_b AS node, score FROM scored WHERE node_b IS NOT NULL
)
SELECT run_id, metric, node, count(*) AS results, avg(score) AS mean_score,
       min(score) AS worst_score, string_agg(run_key, ',') AS run_keys
FROM per_node
GROUP BY run_id, metric, node";

/// Training throughput per scale point against the smallest scale point of the same
/// case family (framework, phase, run): scaling efficiency = (throughput / scale) /
/// (smallest's throughput / smallest scale). OpenFOAM throughput is 1 / step time.
const TRAINING_SCALING: &str = "
WITH points AS (
  SELECT run_id, framework, phase, scale_point,
         avg(coalesce(samples_per_second, 1.0 / nullif(step_time_mean_seconds, 0))) AS throughput,
         count(*) AS runs, string_agg(run_key, ',') AS run_keys
  FROM training_outcome_fact
  GROUP BY run_id, framework, phase, scale_point
), smallest AS (
  SELECT run_id, framework, phase, min(scale_point) AS base_scale FROM points
  GROUP BY run_id, framework, phase
)
SELECT p.run_id, p.framework, p.phase, p.scale_point, p.throughput, p.runs,
       (p.throughput / p.scale_point) / (b.throughput / b.scale_point) AS scaling_efficiency,
       p.run_keys
FROM points p
JOIN smallest s ON p.run_id = s.run_id AND p.framework = s.framework AND p.phase = s.phase
JOIN points b ON b.run_id = s.run_id AND b.framework = s.framework AND b.phase = s.phase
              AND b.scale_point = s.base_scale";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_regression_threshold_in_the_sql_is_the_constant() {
        assert!(REGRESSIONS.ends_with(&format!("worse_percent > {REGRESSION_PERCENT:.1}")));
    }
}
