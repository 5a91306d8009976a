"""docs/tuning.md's figures that cite the synthetic benchmark
(benchmarks/results/synthetic, through its report's rows). The page's
other figures come from the carry-over study, archived in
experiments/carry-over/results, outside this tool."""

from guide import examples

from ..docs import results
from ..reports import compare
from . import Quote
from .real_data import spelled

DOC = "docs/tuning.md"
FOLDER = "synthetic"
BASELINE = examples.BASELINE.name


def main_rows():
    return {row["scheme"]: row for row in
            compare.rows_of(results(FOLDER).records)[0]["main"]
            if "error" not in row}


def each_run(row):
    """The final test accuracy of every run the row is the median of."""
    settings = {key: value for key, value in row["run"].items()
                if key not in ("repeat", "tables")}
    return sorted(accuracy for record in results(FOLDER).runs(**settings)
                  for accuracy in record["measures"].get(
                      "test_accuracy_each_run",
                      [record["measures"]["test_accuracy"]]))


def benchmark(scheme):
    """The settings the page names, the scheme's median accuracy and its
    runs', and the baseline's."""
    rows = main_rows()
    row, run = rows[scheme], rows[scheme]["run"]
    runs = each_run(row)
    return {"window": run["window"], "examples": f"{run['examples']:,}",
            "workers": run["workers"], "dataset": run["dataset"],
            "accuracy": f"{row['test_accuracy']:.4f}",
            "runs": spelled(len(runs)),
            "each": ", ".join(f"{value:.3f}" for value in runs),
            "baseline": f"{rows[BASELINE]['test_accuracy']:.4f}",
            "throughput": row["throughput_ratio"]}


def downpour():
    figures = benchmark("DOWNPOUR")
    return dict(figures, throughput=f"{figures['throughput']:.3f}")


def downpour_four_workers():
    rows = [row for row in compare.rows_of(results(FOLDER).records)[0]["sweep"]
            if row["scheme"] == "DOWNPOUR" and row["run"].get("ps") == 1
            and "error" not in row]
    row = max(rows, key=lambda row: row["run"]["workers"])
    baseline = main_rows()[BASELINE]["test_accuracy"]
    return {"workers": row["run"]["workers"], "window": row["run"]["window"],
            "accuracy": f"{row['test_accuracy']:.3f}",
            "behind": f"{(baseline - row['test_accuracy']) * 100:.1f}",
            "stale": f"{row['mean_staleness']:.0f}"}


def sagn():
    figures = benchmark("SAGN")
    return dict(figures, throughput=f"{figures['throughput']:.2f}")


QUOTES = [
    Quote(DOC, "In the [benchmark](../benchmarks/) (T = {window}, {examples} "
               "examples, {workers} workers), DOWNPOUR ended at {accuracy} "
               "(median of {runs} runs: {each}) against the baseline's "
               "{baseline}, at {throughput} of its throughput.", downpour),
    Quote(DOC, "With {workers} workers and one ps at T = {window}, the "
               "benchmark's run ended at {accuracy}, {behind} points behind the "
               "baseline, its commits about {stale} global steps stale",
          downpour_four_workers),
    Quote(DOC, "In the [benchmark](../benchmarks/) (T = {window}, {examples} "
               "examples, {workers} workers) it ended at {accuracy} (median of "
               "{runs} runs: {each}) against the baseline's {baseline}",
          lambda: benchmark("DOWNPOUR-Easy")),
    Quote(DOC, "In the [benchmark](../benchmarks/) (T = {window}, {examples} "
               "examples, {workers} workers, the {dataset} data), AGN ended at "
               "{accuracy} (median of {runs} runs) with the default η̃ = 0.8, "
               "against the baseline's {baseline}", lambda: benchmark("AGN")),
    Quote(DOC, "In the [benchmark](../benchmarks/) (T = {window}, the same "
               "{examples} examples and global batch as the baseline, the "
               "{dataset} data), SAGN ended at {accuracy} with the default "
               "η̃ = 1.6, against the baseline's {baseline}", sagn),
    Quote(DOC, "Its throughput was {throughput} of the baseline's, as every "
               "round waits for both workers twice", sagn),
]
