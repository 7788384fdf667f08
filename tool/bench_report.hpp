// What `tally bench` measured and how it is shown: the environment header (device, build, date,
// the read bandwidth measured in the same run), one row per case, and the table, CSV and JSON
// renderings of the same rows.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "result_files.hpp"
#include "run_environment.hpp"

namespace tally::cli {

/// The run's environment and the read bandwidth measured in the same run, the yardstick of every row.
struct bench_environment : run_environment {
  double read_bytes_per_s = 0.0;
  std::string read_method;  ///< how the read bandwidth was measured
  int warmup_runs = 0;      ///< untimed runs before each row's timed ones (a row's note says where fewer ran)
  /// How each run was timed: on a GPU gpu::run_timing's name (gpu: GPU time, held until launched;
  /// with_launch), on CPUs "wall_clock". A row whose runs fell back says so in its note.
  std::string timing;
};

struct bench_row {
  /// histogram, histogram_range, weighted_histogram, reduce, count_if or find_first_if
  std::string operation = "histogram";
  std::string variant;  ///< what was computed ("sum", "sum deterministic", "float weights, deterministic", ...)
  std::string note;     ///< anything the row's numbers need said (fewer runs...)
  std::string sample_type;
  std::int64_t num_samples = 0;
  std::string distribution;
  std::int64_t num_bins = 0;
  /// How the bins were laid out: even bins over `exact` [0, num_bins) or the data's `general`
  /// [min, max); range bins' `log` or `random` edges; advise's `given` or file's `data` range.
  /// Empty for rows without bins.
  std::string bins_kind;
  double lower = 0.0;  ///< the first edge (binned rows)
  double upper = 0.0;  ///< the last edge, excluded (binned rows)
  std::string strategy;  ///< as asked for
  std::string used;      ///< what ran (automatic's choice)
  std::string reason;    ///< why it ran: "asked for", or automatic's reasoning
  std::string verdict;   ///< "exact", "within bound", "MISMATCH ...", "lost N updates", or "skipped: why"
  bool timed = false;
  bool mismatch = false;  ///< an exact strategy gave a wrong result
  int runs = 0;
  double median_ms = 0.0;
  double min_ms = 0.0;
  double max_ms = 0.0;  ///< the slowest timed run: with min_ms, the spread a difference must beat
  double noise_percent = 0.0;  ///< (p90 - p10) / median
  double samples_per_s = 0.0;
  double bytes_per_s = 0.0;
  double read_fraction = 0.0;  ///< bytes_per_s / the measured read bandwidth
};

/** @brief Fills the timing fields of `row` from per-run milliseconds. */
void summarize_times(bench_row& row, std::vector<double> times_ms, std::int64_t bytes_read, double read_bytes_per_s);

void print_environment(std::FILE* out, const bench_environment& env);
/// bench_environment::timing in words, for the header of a report.
std::string timing_text(const std::string& timing);
/** @brief Whether a row has bins and a distribution: a histogram (even or range bins) or a weighted histogram. */
bool is_binned(const bench_row& row);
/**
 * @brief The histogram rows as a table, then the range-bin and weighted histogram rows as a table
 * each (reduction rows are left to print_reduce_table).
 */
void print_table(std::FILE* out, const std::vector<bench_row>& rows);
/** @brief The reduce, count_if and find_first_if rows as a table, if there are any. */
void print_reduce_table(std::FILE* out, const std::vector<bench_row>& rows);
/**
 * @brief Per histogram case (even and range bins, each bins kind a case of its own): the best
 * strategy, automatic and CUB side by side; the same per weighted histogram case and variant (no
 * CUB peer); per reduction case every strategy side by
 * side; last, the row and mismatch counts.
 */
void print_summary(std::FILE* out, const bench_environment& env, const std::vector<bench_row>& rows);
/** @brief The CSV's first line: the environment, the read bandwidth and the timing. */
std::string bench_csv_comment(const bench_environment& env);
/**
 * @brief The JSON document of a run, its rows still to add: the environment (with `command`, what
 * `tally plot` draws by) and the read bandwidth.
 */
nlohmann::json bench_document(std::string_view command, const bench_environment& env);
/** @brief A row's fields: the CSV's columns, the JSON row's keys. */
extern const std::vector<row_field<bench_row>> bench_fields;

}  // namespace tally::cli
