# Tables + figures -> the self-contained results site (results/site/index.html).

import kernbench.capacity.planner
import kernbench.capacity.steps
import kernbench.report.site

# the installed sources the page is made from (the planner's formulas included)
SITE_SOURCES = sorted(
    [str(p) for p in Path(kernbench.capacity.__file__).parent.glob("*.py")]
    + [kernbench.report.site.__file__, "workflow/scripts/site.py"]
)


rule site:
    input:
        tables=TABLES,
        figures=[f for f in FIGURES if f.endswith(".png")],
        code=REPORT_SOURCES + SITE_SOURCES,
    output:
        index=f"{RESULTS}/site/index.html",
    params:
        plugins=PLUGINS,
        topologies=CONFIG["topologies"],
        report=CONFIG["report"],
        efficiency_table=kernbench.capacity.planner.TABLE.stem,
        steps_table=kernbench.capacity.steps.TABLE.stem,
        # figure_caption() paths are relative to workflow/rules (for --report)
        captions=[
            str(Path("workflow/rules", figure_caption(f)).resolve())
            for f in FIGURES
            if f.endswith(".png")
        ],
    log:
        f"{LOG_DIR}/site.log",
    benchmark:
        f"{BENCH_DIR}/site.tsv"
    resources:
        mem_mb=1000,
        runtime=10,
    conda:
        CONDA_ENV
    script:
        "../scripts/site.py"
