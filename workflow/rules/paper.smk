# Tables + topology -> report/generated/ (values, tables, the experiments' sections),
# then the PDF.


rule report_generated:
    input:
        tables=TABLES,
        sensitivity=SENSITIVITY,
        topologies=sorted({src for job in SWEEP.jobs for src in job.topology_sources}
                          | set(CONFIG["topologies"].values())),
        code=REPORT_SOURCES,
    output:
        GENERATED,
    params:
        report=CONFIG["report"],
        topologies=CONFIG["topologies"],
        settings=SETTINGS,
        whatif=CONFIG.get("whatif", {}),
        plugins=PLUGINS,
        out_dir=lambda w, output: str(Path(output[0]).parent),
    log:
        f"{LOG_DIR}/report_generated.log",
    benchmark:
        f"{BENCH_DIR}/report_generated.tsv"
    resources:
        mem_mb=1000,
        runtime=10,
    conda:
        CONDA_ENV
    script:
        "../scripts/report_generated.py"


rule paper:
    input:
        generated=GENERATED,
        figures=[f for f in FIGURES if f.endswith(".pdf")],
        sources=["report/paper.tex", "report/references.bib"]
        + sorted(str(p) for p in Path("report/sections").glob("*.tex")),
    output:
        pdf=report(PAPER, caption="../report/paper.rst", category="Paper"),
    params:
        engine=CONFIG["report"]["engine"],
    log:
        f"{LOG_DIR}/paper.log",
    benchmark:
        f"{BENCH_DIR}/paper.tsv"
    resources:
        mem_mb=2000,
        runtime=20,
    conda:
        CONDA_ENV
    script:
        "../scripts/paper.py"
